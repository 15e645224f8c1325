/* API keys (apikey.h). */
#include <errno.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "common/apikey.h"

static bool is_lower_alnum(char c)
{
        return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_base62(char c)
{
        return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

static bool is_hex(char c)
{
        return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

bool tenant_name_is_valid(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > CELLA_TENANT_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_lower_alnum(s[i]))
                        return false;
        return true;
}

bool apikey_id_is_valid(const char *s)
{
        size_t n = strlen(s);

        if (n != CELLA_KEY_ID_LEN)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_hex(s[i]))
                        return false;
        return true;
}

int apikey_parse(const char *key, size_t len, char id[CELLA_KEY_ID_LEN + 1],
                 char secret[CELLA_KEY_SECRET_LEN + 1])
{
        const size_t pl = sizeof(CELLA_KEY_PREFIX) - 1;
        const char *i = key + pl, *s = i + CELLA_KEY_ID_LEN + 1;

        if (len != CELLA_KEY_LEN || memcmp(key, CELLA_KEY_PREFIX, pl) != 0 ||
            i[CELLA_KEY_ID_LEN] != '_')
                return -EINVAL;
        for (size_t k = 0; k < CELLA_KEY_ID_LEN; k++)
                if (!is_hex(i[k]))
                        return -EINVAL;
        for (size_t k = 0; k < CELLA_KEY_SECRET_LEN; k++)
                if (!is_base62(s[k]))
                        return -EINVAL;
        memcpy(id, i, CELLA_KEY_ID_LEN);
        id[CELLA_KEY_ID_LEN] = '\0';
        memcpy(secret, s, CELLA_KEY_SECRET_LEN);
        secret[CELLA_KEY_SECRET_LEN] = '\0';
        return 0;
}

int apikey_generate(char id[CELLA_KEY_ID_LEN + 1], char secret[CELLA_KEY_SECRET_LEN + 1],
                    char key[CELLA_KEY_LEN + 1])
{
        static const char b62[] = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ";
        static const char hex[] = "0123456789abcdef";
        unsigned char rnd[CELLA_KEY_ID_LEN / 2 + CELLA_KEY_SECRET_LEN];
        size_t k = 0;

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                return -errno;
        for (size_t i = 0; i < CELLA_KEY_ID_LEN / 2; i++) {
                id[2 * i] = hex[rnd[k] >> 4];
                id[2 * i + 1] = hex[rnd[k++] & 15];
        }
        id[CELLA_KEY_ID_LEN] = '\0';
        /* 248 of 256 byte values map evenly onto 62 characters; the rest are drawn
         * again, so every character is equally likely. */
        for (size_t i = 0; i < CELLA_KEY_SECRET_LEN;) {
                unsigned char c;

                if (k < sizeof(rnd)) {
                        c = rnd[k++];
                } else if (getrandom(&c, 1, 0) != 1) {
                        return -errno;
                }
                if (c < 248)
                        secret[i++] = b62[c % 62];
        }
        secret[CELLA_KEY_SECRET_LEN] = '\0';
        snprintf(key, CELLA_KEY_LEN + 1, CELLA_KEY_PREFIX "%s_%s", id, secret);
        return 0;
}

int apikey_hash(const char *secret, char out[CELLA_KEY_HASH_HEX + 1])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char d[EVP_MAX_MD_SIZE];
        unsigned dl = 0;

        if (EVP_Digest(secret, strlen(secret), d, &dl, EVP_sha256(), NULL) != 1 || dl != 32)
                return -EIO;
        for (unsigned i = 0; i < 32; i++) {
                out[2 * i] = hex[d[i] >> 4];
                out[2 * i + 1] = hex[d[i] & 15];
        }
        out[CELLA_KEY_HASH_HEX] = '\0';
        return 0;
}

bool apikey_secret_matches(const char *secret, const char *hash_hex)
{
        char h[CELLA_KEY_HASH_HEX + 1];

        if (apikey_hash(secret, h) < 0 || strlen(hash_hex) != CELLA_KEY_HASH_HEX)
                return false;
        return CRYPTO_memcmp(h, hash_hex, CELLA_KEY_HASH_HEX) == 0;
}
