#include <errno.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/base64.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

int base64_encode(struct buf *out, const void *data, size_t len)
{
        const uint8_t *p = data;
        size_t n = (len + 2) / 3 * 4;
        char *o;
        int r;

        if (len > (SIZE_MAX / 4) * 3 - 3)
                return -ENOMEM;
        r = buf_reserve(out, n);
        if (r < 0)
                return r;
        o = out->data + out->len;
        for (size_t i = 0; i < len; i += 3) {
                uint32_t v = (uint32_t)p[i] << 16;
                if (i + 1 < len)
                        v |= (uint32_t)p[i + 1] << 8;
                if (i + 2 < len)
                        v |= p[i + 2];
                *o++ = alphabet[(v >> 18) & 63];
                *o++ = alphabet[(v >> 12) & 63];
                *o++ = i + 1 < len ? alphabet[(v >> 6) & 63] : '=';
                *o++ = i + 2 < len ? alphabet[v & 63] : '=';
        }
        out->len += n;
        out->data[out->len] = '\0';
        return 0;
}

static int val(unsigned char c)
{
        if (c >= 'A' && c <= 'Z')
                return c - 'A';
        if (c >= 'a' && c <= 'z')
                return c - 'a' + 26;
        if (c >= '0' && c <= '9')
                return c - '0' + 52;
        if (c == '+')
                return 62;
        if (c == '/')
                return 63;
        return -1;
}

int base64_decode(struct buf *out, const char *s, size_t len)
{
        size_t pad = 0;
        char *o;
        int r;

        if (len % 4 != 0)
                return -EINVAL;
        if (len >= 1 && s[len - 1] == '=')
                pad++;
        if (len >= 2 && s[len - 2] == '=')
                pad++;
        r = buf_reserve(out, len / 4 * 3);
        if (r < 0)
                return r;
        o = out->data + out->len;
        for (size_t i = 0; i < len; i += 4) {
                int a = val(s[i]), b = val(s[i + 1]), c, d;
                bool last = i + 4 == len;
                c = (last && pad >= 2) ? 0 : val(s[i + 2]);
                d = (last && pad >= 1) ? 0 : val(s[i + 3]);
                if (a < 0 || b < 0 || c < 0 || d < 0)
                        return -EINVAL;
                uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)c << 6 | (uint32_t)d;
                *o++ = (char)(v >> 16);
                if (!(last && pad >= 2))
                        *o++ = (char)(v >> 8);
                if (!(last && pad >= 1))
                        *o++ = (char)v;
        }
        out->len = (size_t)(o - out->data);
        out->data[out->len] = '\0';
        return 0;
}
