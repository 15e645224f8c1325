/* JSON string escaping; see json-escape.h. */
#include "common/json-escape.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/buf.h"

/* 1 for a byte that is escaped: the control characters, '"' and '\\'. */
static const uint8_t needs_escape[256] = {
        [0x00 ... 0x1f] = 1,
        ['"'] = 1,
        ['\\'] = 1,
};

#ifdef __SSE2__
/* The bytes of v that need an escape, as a 16-bit mask: a byte <= 0x1f (unsigned: the
 * minimum of it and 0x1f is itself), '"' or '\\'. */
static inline unsigned block_escapes(__m128i v)
{
        __m128i ctl = _mm_cmpeq_epi8(_mm_min_epu8(v, _mm_set1_epi8(0x1f)), v);
        __m128i q = _mm_cmpeq_epi8(v, _mm_set1_epi8('"'));
        __m128i b = _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'));

        return (unsigned)_mm_movemask_epi8(_mm_or_si128(ctl, _mm_or_si128(q, b)));
}
#endif

size_t json_escape_safe_span(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

#ifdef __SSE2__
        for (; i + 16 <= len; i += 16) {
                unsigned m = block_escapes(_mm_loadu_si128((const __m128i *)(p + i)));

                if (m)
                        return i + (size_t)__builtin_ctz(m);
        }
#endif
        while (i < len && !needs_escape[p[i]])
                i++;
        return i;
}

/* Copy the run of s[i..len) that needs no escape to dst (room for len - i bytes), in the
 * same pass that finds its end (one read of the text, not a scan and then a memcpy);
 * returns where the run ends. */
static size_t copy_safe_run(char *dst, const unsigned char *p, size_t i, size_t len)
{
        const size_t from = i; /* p[i] goes to dst[i - from] */

#ifdef __SSE2__
        for (; i + 16 <= len; i += 16) {
                __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
                unsigned m = block_escapes(v);

                if (m) {
                        size_t k = (size_t)__builtin_ctz(m);

                        memcpy(dst + (i - from), p + i, k);
                        return i + k;
                }
                _mm_storeu_si128((__m128i *)(dst + (i - from)), v);
        }
#endif
        size_t n = json_escape_safe_span((const char *)p + i, len - i);

        memcpy(dst + (i - from), p + i, n);
        return i + n;
}

int json_escape_append(struct buf *out, const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        if (buf_reserve(out, len) < 0)
                return -ENOMEM;
        while (i < len) {
                size_t end;

                /* room for the rest as it is (the common case: one run, one reserve); an
                 * escape below reserves its own few bytes more */
                if (buf_reserve(out, len - i) < 0)
                        return -ENOMEM;
                end = copy_safe_run(out->data + out->len, p, i, len);
                out->len += end - i;
                i = end;
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
        }
        if (out->data)
                out->data[out->len] = '\0'; /* as buf_append leaves it */
        return 0;
}
