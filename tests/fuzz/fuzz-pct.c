/* Fuzz percent-decoding (src/common/pct.h).
 *
 * Invariants: a decoding that succeeds is NUL-terminated at the length it reports, holds
 * no NUL, is never longer than its input, and is the same whatever larger buffer it is
 * given; re-encoding it (every byte as %XX) decodes back to it; with plus_space it
 * differs from the plain decoding only where the input has a '+'. A buffer one byte too
 * small is refused. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pct.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        size_t cap = size + 1, n = 0, n2 = 0;
        char *out = malloc(cap), *big = malloc(cap + 16), *enc = malloc(size * 3 + 1),
             *back = malloc(cap);
        int r;

        FUZZ_CHECK(out && big && enc && back);
        r = pct_decode(s, size, false, out, cap, &n);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        FUZZ_CHECK(pct_decode(s, size, false, big, cap + 16, &n2) == r);
        if (r == 0) {
                FUZZ_CHECK(n <= size && out[n] == '\0' && strlen(out) == n);
                FUZZ_CHECK(n2 == n && memcmp(out, big, n) == 0);
                for (size_t i = 0; i < n; i++)
                        snprintf(enc + i * 3, 4, "%%%02X", (unsigned char)out[i]);
                FUZZ_CHECK(pct_decode(enc, n * 3, false, back, cap, &n2) == 0);
                FUZZ_CHECK(n2 == n && memcmp(back, out, n) == 0);
                if (n > 0)
                        FUZZ_CHECK(pct_decode(s, size, false, big, n, NULL) == -EINVAL);
                /* form encoding: the same but for '+' */
                FUZZ_CHECK(pct_decode(s, size, true, back, cap, &n2) == 0 && n2 == n);
                if (!memchr(s, '+', size))
                        FUZZ_CHECK(memcmp(back, out, n) == 0);
                for (size_t i = 0; i < n; i++)
                        FUZZ_CHECK(back[i] == out[i] || (out[i] == '+' && back[i] == ' '));
        }
        free(out);
        free(big);
        free(enc);
        free(back);
        return 0;
}
