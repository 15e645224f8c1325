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
