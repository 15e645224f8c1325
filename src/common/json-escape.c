/* JSON string escaping; see json-escape.h. */
#include "common/json-escape.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "common/buf.h"

/* 1 for a byte that is escaped: the control characters, '"' and '\\'. */
static const uint8_t needs_escape[256] = {
        [0x00 ... 0x1f] = 1,
        ['"'] = 1,
        ['\\'] = 1,
};

/* Does the 8-byte word w hold a byte that needs an escape? (a byte < 0x20, '"' or '\\':
 * the classic "has a zero byte" test on w itself, on w ^ '"'... and w ^ '\\'...) */
static inline int word_needs_escape(uint64_t w)
{
        const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
        uint64_t quote = w ^ (ones * '"'), bslash = w ^ (ones * '\\');
        uint64_t lt20 = (w - ones * 0x20) & ~w; /* a byte < 0x20 (or >= 0x80 borrowing) */
        uint64_t zq = (quote - ones) & ~quote, zb = (bslash - ones) & ~bslash;

        return ((lt20 | zq | zb) & highs) != 0;
}

int json_escape_append(struct buf *out, const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0, run = 0;

        /* the common case is one run: room for it at once */
        if (buf_reserve(out, len) < 0)
                return -ENOMEM;
        while (i < len) {
                /* skip safe bytes, eight at a time while there are eight */
                while (i + 8 <= len) {
                        uint64_t w;

                        memcpy(&w, p + i, 8);
                        if (word_needs_escape(w))
                                break;
                        i += 8;
                }
                while (i < len && !needs_escape[p[i]])
                        i++;
                if (i > run && buf_append(out, s + run, i - run) < 0)
                        return -ENOMEM;
                if (i >= len)
                        break;
                {
                        char e[8];
                        int n = 2;

                        e[0] = '\\';
                        switch (p[i]) {
                        case '"':
                                e[1] = '"';
                                break;
                        case '\\':
                                e[1] = '\\';
                                break;
                        case '\b':
                                e[1] = 'b';
                                break;
                        case '\f':
                                e[1] = 'f';
                                break;
                        case '\n':
                                e[1] = 'n';
                                break;
                        case '\r':
                                e[1] = 'r';
                                break;
                        case '\t':
                                e[1] = 't';
                                break;
                        default: /* \u00XX, as jansson writes it (no printf per byte) */
                                memcpy(e, "\\u00", 4);
                                e[4] = "0123456789ABCDEF"[p[i] >> 4];
                                e[5] = "0123456789ABCDEF"[p[i] & 15];
                                n = 6;
                                break;
                        }
                        if (buf_append(out, e, (size_t)n) < 0)
                                return -ENOMEM;
                }
                i++;
                run = i;
        }
        return 0;
}
