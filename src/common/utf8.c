/* UTF-8 validation; see utf8.h. */
#include "common/utf8.h"

#include <stdint.h>
#include <string.h>
#ifdef __SSE2__
#include <emmintrin.h>
#endif

#include "common/buf.h"

/* Bytes from i on that are ASCII, 32 or eight at a time (the common case: text). */
static size_t ascii_run(const unsigned char *p, size_t i, size_t len)
{
#ifdef __SSE2__
        for (; i + 32 <= len; i += 32) {
                __m128i a = _mm_loadu_si128((const __m128i *)(p + i));
                __m128i b = _mm_loadu_si128((const __m128i *)(p + i + 16));

                if (_mm_movemask_epi8(_mm_or_si128(a, b)))
                        break; /* a high bit in one of them: found below */
        }
#endif
        while (i + 8 <= len) {
                uint64_t w;

                memcpy(&w, p + i, 8);
                if (w & 0x8080808080808080ull)
                        break;
                i += 8;
        }
        return i;
}

int utf8_char_len(const unsigned char *s, size_t len)
{
        unsigned char c = s[0];
        size_t need;
        unsigned char lo = 0x80, hi = 0xbf; /* allowed range of the second byte */

        if (len == 0)
                return 0;
        if (c < 0x80)
                return 1;
        if (c < 0xc2)
                return -1; /* continuation byte or overlong 2-byte form */
        if (c < 0xe0) {
                need = 2;
        } else if (c < 0xf0) {
                need = 3;
                if (c == 0xe0)
                        lo = 0xa0; /* overlong */
                else if (c == 0xed)
                        hi = 0x9f; /* surrogates */
        } else if (c < 0xf5) {
                need = 4;
                if (c == 0xf0)
                        lo = 0x90; /* overlong */
                else if (c == 0xf4)
                        hi = 0x8f; /* above U+10FFFF */
        } else {
                return -1;
        }
        for (size_t i = 1; i < need; i++) {
                if (i >= len)
                        return 0;
                if (i == 1 ? (s[i] < lo || s[i] > hi) : (s[i] & 0xc0) != 0x80)
                        return -1;
        }
        return (int)need;
}

size_t utf8_valid_prefix(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        while (i < len) {
                int n;

                i = ascii_run(p, i, len);
                if (i >= len)
                        break;
                n = p[i] < 0x80 ? 1 : utf8_char_len(p + i, len - i);
                if (n <= 0)
                        break;
                i += (size_t)n;
        }
        return i;
}

bool utf8_is_valid(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;
        size_t i = 0;

        while (i < len) {
                int n;

                i = ascii_run(p, i, len);
                if (i >= len)
                        break;
                if (p[i] < 0x80) {
                        i++;
                        continue;
                }
                n = utf8_char_len(p + i, len - i);
                if (n <= 0)
                        return false;
                i += (size_t)n;
        }
        return true;
}

size_t utf8_complete_prefix(const char *s, size_t len)
{
        const unsigned char *p = (const unsigned char *)s;

        /* A character is at most 4 bytes: only the last 3 can start an incomplete one. */
        for (size_t back = 1; back <= 3 && back <= len; back++) {
                unsigned char c = p[len - back];

                if ((c & 0xc0) == 0x80)
                        continue; /* continuation: look further back for the lead byte */
                if (c >= 0xc2 && utf8_char_len(p + len - back, back) == 0)
                        return len - back;
                break;
        }
        return len;
}

int utf8_sanitize(struct buf *out, const char *s, size_t len)
{
        size_t i = 0;

        while (i < len) {
                int n = utf8_char_len((const unsigned char *)s + i, len - i);
                int r = n > 0 ? buf_append(out, s + i, (size_t)n)
                              : buf_append(out, "\xef\xbf\xbd", 3);

                if (r < 0)
                        return r;
                i += n > 0 ? (size_t)n : 1;
        }
        return buf_reserve(out, 0);
}

void utf8_scrub(char *s)
{
        size_t len = strlen(s), i = 0;

        while (i < len) {
                int n = utf8_char_len((const unsigned char *)s + i, len - i);

                if (n > 0) {
                        i += (size_t)n;
                } else {
                        s[i] = '?';
                        i++;
                }
        }
}
