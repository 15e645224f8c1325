/* The session scripts' name filter (src/agent/name-filter.h): bash's messages lose the
 * agent's paths, everything else passes byte for byte, whatever the chunking. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <cmocka.h>

#include "agent/name-filter.h"

#define PREFIX "/run/cella/sessions/s1/c"

/* The filter fed in chunks of the given sizes (cycled), then flushed. */
static size_t run(const char *prefix, const char *in, size_t n, const size_t *chunks,
                  size_t n_chunks, char *out)
{
        struct name_filter f;
        size_t w = 0, off = 0, k = 0;

        assert_int_equal(name_filter_init(&f, prefix, "bash"), 0);
        while (off < n) {
                size_t len = chunks[k++ % n_chunks];
                size_t held = name_filter_held(&f);
                size_t got;

                if (len > n - off)
                        len = n - off;
                got = name_filter_feed(&f, in + off, len, out + w);
                assert_true(got <= held + len);
                w += got;
                off += len;
        }
        return w + name_filter_flush(&f, out + w);
}

/* The reference: every prefix followed by 1..10 digits becomes "bash". */
static size_t model(const char *prefix, const char *in, size_t n, char *out)
{
        size_t plen = strlen(prefix), w = 0, i = 0;

        while (i < n) {
                if (i + plen <= n && memcmp(in + i, prefix, plen) == 0) {
                        size_t d = 0;

                        while (i + plen + d < n && d < NAME_FILTER_MAX_DIGITS &&
                               in[i + plen + d] >= '0' && in[i + plen + d] <= '9')
                                d++;
                        if (d > 0) {
                                memcpy(out + w, "bash", 4);
                                w += 4;
                                i += plen + d;
                                continue;
                        }
                }
                out[w++] = in[i++];
        }
        return w;
}

static void check(const char *in, const char *want)
{
        static const size_t sizes[][3] = {{1, 1, 1}, {2, 3, 5}, {7, 1, 13}, {4096, 4096, 4096}};
        char out[4096];

        for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
                size_t n = run(PREFIX, in, strlen(in), sizes[s], 3, out);

                out[n] = '\0';
                assert_string_equal(out, want);
        }
}

static void test_messages(void **state)
{
        (void)state;
        check(PREFIX "9: line 1:    55 Killed                  sleep 10\n",
              "bash: line 1:    55 Killed                  sleep 10\n");
        check(PREFIX "12: line 2: syntax error: unexpected end of file\n",
              "bash: line 2: syntax error: unexpected end of file\n");
        check("a\n" PREFIX "3: line 1: nope: command not found\nb " PREFIX "3\n",
              "a\nbash: line 1: nope: command not found\nb bash\n");
        /* no digits after it, a near miss, an overlap, the end of the stream */
        check(PREFIX ": x", PREFIX ": x");
        check("/run/cella/sessions/s1/x9 /run/cella/run/cella/sessions/s1/c7",
              "/run/cella/sessions/s1/x9 /run/cellabash");
        check("//run/cella/sessions/s1/c1", "/bash");
        check(PREFIX, PREFIX);
        check("/run/cel", "/run/cel");
        check("", "");
        check("no slash at all", "no slash at all");
}

static void test_random(void **state)
{
        static const char *const pieces[] = {
                PREFIX, "/run/cella/", "/",          "s1/c", "c",  "0",
                "7",    "42",          ": line 1: ", "x",    "\n", "/run/cella/sessions/"};
        char in[2048], want[2048], got[2048];
        uint32_t seed = 7;

        (void)state;
        for (int iter = 0; iter < 3000; iter++) {
                size_t n = 0, chunks[3];

                while (n < sizeof(in) - 64) {
                        const char *p;

                        seed = seed * 1103515245u + 12345u;
                        if ((seed >> 16) % 40 == 0)
                                break;
                        p = pieces[(seed >> 8) % (sizeof(pieces) / sizeof(pieces[0]))];
                        memcpy(in + n, p, strlen(p));
                        n += strlen(p);
                }
                for (int k = 0; k < 3; k++) {
                        seed = seed * 1103515245u + 12345u;
                        chunks[k] = 1 + (seed >> 8) % 40;
                }
                size_t wn = model(PREFIX, in, n, want);
                size_t gn = run(PREFIX, in, n, chunks, 3, got);

                assert_int_equal(gn, wn);
                assert_memory_equal(got, want, wn);
        }
}

static void test_init(void **state)
{
        struct name_filter f;
        char longp[NAME_FILTER_MAX_PREFIX + 1];

        (void)state;
        memset(longp, 'a', sizeof(longp) - 1);
        longp[sizeof(longp) - 1] = '\0';
        assert_int_equal(name_filter_init(&f, "short", "bash"), -EINVAL);
        assert_int_equal(name_filter_init(&f, longp, "bash"), -EINVAL);
        assert_int_equal(name_filter_init(&f, PREFIX, "a-very-long-name"), -EINVAL);
        assert_int_equal(name_filter_init(&f, PREFIX, "sh"), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_messages),
                cmocka_unit_test(test_random),
                cmocka_unit_test(test_init),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
