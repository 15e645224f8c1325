/* Percent-encoding (src/common/pct.h): the unreserved characters and pct_decode. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/pct.h"

static void decodes(const char *in, bool plus_space, const char *want, size_t want_len)
{
        char out[64];
        size_t n = 12345;

        assert_int_equal(pct_decode(in, strlen(in), plus_space, out, sizeof(out), &n), 0);
        assert_int_equal(n, want_len);
        assert_memory_equal(out, want, want_len);
        assert_int_equal(out[n], '\0');
}

static void refused(const char *in, size_t len, size_t outsz)
{
        char out[64];

        assert_true(outsz <= sizeof(out));
        assert_int_equal(pct_decode(in, len, false, out, outsz, NULL), -EINVAL);
}

static void test_decode(void **state)
{
        (void)state;
        decodes("", false, "", 0);
        decodes("plain-._~", false, "plain-._~", 9);
        decodes("a%20b", false, "a b", 3);
        decodes("%2f%2F", false, "//", 2);
        decodes("%C3%A9", false, "\xc3\xa9", 2);
        decodes("%ff", false, "\xff", 1);
        /* '+' is a space only in form encoding */
        decodes("a+b", false, "a+b", 3);
        decodes("a+b%2B", true, "a b+", 4);
        /* a decoded '%' is not decoded again */
        decodes("%2541", false, "%41", 3);
}

static void test_decode_refused(void **state)
{
        (void)state;
        refused("%", 1, 8);
        refused("a%4", 3, 8);
        refused("%4g", 3, 8);
        refused("%g4", 3, 8);
        refused("% 41", 4, 8);
        /* a NUL, escaped or raw */
        refused("a%00b", 5, 8);
        refused("a\0b", 3, 8);
        /* n counts: "%41" cut to 2 bytes is a short escape */
        refused("%41", 2, 8);
        /* the result and its NUL must fit */
        refused("abcd", 4, 4);
        refused("ab", 2, 0);
        decodes("abc", false, "abc", 3);
        char out[4];
        assert_int_equal(pct_decode("abc", 3, false, out, sizeof(out), NULL), 0);
        assert_string_equal(out, "abc");
        assert_int_equal(pct_decode("%41%42%43", 9, false, out, sizeof(out), NULL), 0);
        assert_string_equal(out, "ABC");
        assert_int_equal(pct_decode("%41%42%43%44", 12, false, out, sizeof(out), NULL), -EINVAL);
}

static void test_unreserved(void **state)
{
        (void)state;
        for (int c = 1; c < 256; c++) {
                bool want = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                            (c >= '0' && c <= '9') || strchr("-._~", c) != NULL;
                assert_int_equal(pct_unreserved((char)c), want);
        }
        assert_false(pct_unreserved('\0'));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode),
                cmocka_unit_test(test_decode_refused),
                cmocka_unit_test(test_unreserved),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
