#include <errno.h>
#include <openssl/evp.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/ws-key.h"

static const char ws_guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";

int ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1])
{
        _cleanup_buf_ struct buf raw = BUF_INIT;
        _cleanup_buf_ struct buf enc = BUF_INIT;
        unsigned char in[24 + sizeof(ws_guid) - 1], digest[EVP_MAX_MD_SIZE];
        unsigned int dlen = 0;
        size_t len = key ? strlen(key) : 0;
        int r;

        if (len != 24)
                return -EINVAL;
        r = base64_decode(&raw, key, len);
        if (r < 0 || raw.len != 16)
                return r == -ENOMEM ? r : -EINVAL;
        /* SHA-1 of the key and the RFC 6455 GUID (OpenSSL's libcrypto) */
        memcpy(in, key, 24);
        memcpy(in + 24, ws_guid, sizeof(ws_guid) - 1);
        if (EVP_Digest(in, sizeof(in), digest, &dlen, EVP_sha1(), NULL) != 1 || dlen != 20)
                return -EIO;
        r = base64_encode(&enc, digest, dlen);
        if (r < 0)
                return r;
        if (enc.len != WS_ACCEPT_LEN)
                return -EINVAL;
        memcpy(out, enc.data, WS_ACCEPT_LEN);
        out[WS_ACCEPT_LEN] = '\0';
        return 0;
}

int ws_new_key(char out[25])
{
        _cleanup_buf_ struct buf enc = BUF_INIT;
        uint8_t raw[16];
        int r;

        if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
                return -errno ? -errno : -EIO;
        r = base64_encode(&enc, raw, sizeof(raw));
        if (r < 0)
                return r;
        memcpy(out, enc.data, 24);
        out[24] = '\0';
        return 0;
}

bool ws_header_has_token(const char *value, const char *token)
{
        size_t tl = strlen(token);
        const char *p = value;

        while (p && *p) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t)(end - p) : strlen(p);

                while (n > 0 && (*p == ' ' || *p == '\t'))
                        p++, n--;
                while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                        n--;
                if (n == tl && strncasecmp(p, token, tl) == 0)
                        return true;
                p = end ? end + 1 : NULL;
        }
        return false;
}

int ws_protocol_bearer(const char *value, char *out, size_t outsz)
{
        static const char pre[] = WS_BEARER_PREFIX;
        _cleanup_buf_ struct buf std = BUF_INIT;
        _cleanup_buf_ struct buf raw = BUF_INIT;
        const char *p = value;
        int r;

        while (p && *p) {
                const char *end = strchr(p, ',');
                size_t n = end ? (size_t)(end - p) : strlen(p);

                while (n > 0 && (*p == ' ' || *p == '\t'))
                        p++, n--;
                while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
                        n--;
                if (n < sizeof(pre) - 1 || strncmp(p, pre, sizeof(pre) - 1) != 0) {
                        p = end ? end + 1 : NULL;
                        continue;
                }
                p += sizeof(pre) - 1;
                n -= sizeof(pre) - 1;
                if (n == 0 || n % 4 == 1)
                        return -EINVAL;
                /* base64url to the standard alphabet, padded */
                for (size_t i = 0; i < n; i++) {
                        char c = p[i] == '-' ? '+' : p[i] == '_' ? '/' : p[i];

                        if (c == '+' && p[i] == '+')
                                return -EINVAL; /* '+' and '/' are not base64url's */
                        if (c == '/' && p[i] == '/')
                                return -EINVAL;
                        if (p[i] == '=' && i + 2 < n)
                                return -EINVAL;
                        r = buf_append(&std, &c, 1);
                        if (r < 0)
                                return r;
                }
                while (std.len % 4)
                        if ((r = buf_append(&std, "=", 1)) < 0)
                                return r;
                r = base64_decode(&raw, std.data, std.len);
                if (r < 0)
                        return r;
                if (raw.len == 0)
                        return -EINVAL;
                for (size_t i = 0; i < raw.len; i++) {
                        unsigned char c = ((unsigned char *)raw.data)[i];

                        if (c <= 0x20 || c == 0x7f)
                                return -EINVAL;
                }
                if (raw.len >= outsz) {
                        explicit_bzero(raw.data, raw.len);
                        return -ENAMETOOLONG;
                }
                memcpy(out, raw.data, raw.len);
                out[raw.len] = '\0';
                explicit_bzero(raw.data, raw.len);
                return 1;
        }
        return 0;
}
