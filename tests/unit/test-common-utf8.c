/* UTF-8 validation and the "longest complete prefix" used to cut SSE output. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/utf8.h"

#define V(s) utf8_is_valid(s, sizeof(s) - 1)

static void test_valid(void **state)
{
        (void)state;
        assert_true(V(""));
        assert_true(V("plain ascii"));
        assert_true(V("nul\0inside"));
        assert_true(V("caf\xc3\xa9"));      /* é */
        assert_true(V("\xe2\x82\xac"));     /* € */
        assert_true(V("\xf0\x9f\x98\x80")); /* 😀 */
        assert_true(V("\xf4\x8f\xbf\xbf")); /* U+10FFFF */
        assert_true(V("\xed\x9f\xbf"));     /* U+D7FF */
}

static void test_invalid(void **state)
{
        (void)state;
        assert_false(V("\x80"));             /* lone continuation */
        assert_false(V("\xc0\xaf"));         /* overlong '/' */
        assert_false(V("\xc1\xbf"));         /* overlong */
        assert_false(V("\xe0\x80\xaf"));     /* overlong 3-byte */
        assert_false(V("\xf0\x80\x80\xaf")); /* overlong 4-byte */
        assert_false(V("\xed\xa0\x80"));     /* surrogate U+D800 */
        assert_false(V("\xf4\x90\x80\x80")); /* above U+10FFFF */
        assert_false(V("\xf5\x80\x80\x80"));
        assert_false(V("\xff"));
        assert_false(V("caf\xc3"));   /* truncated at the end */
        assert_false(V("\xe2\x82x")); /* bad continuation */
}

static void test_valid_prefix(void **state)
{
        (void)state;
        assert_int_equal(utf8_valid_prefix("", 0), 0);
        assert_int_equal(utf8_valid_prefix("abc", 3), 3);
        assert_int_equal(utf8_valid_prefix("1\n2\n\xff", 5), 4);
        assert_int_equal(utf8_valid_prefix("caf\xc3\xa9\xc3", 6), 5); /* incomplete tail */
        assert_int_equal(utf8_valid_prefix("\xed\xa0\x80x", 4), 0);   /* surrogate */
}

static void test_complete_prefix(void **state)
{
        const char euro[] = "ab\xe2\x82\xac";
        const char smile[] = "\xf0\x9f\x98\x80";

        (void)state;
        assert_int_equal(utf8_complete_prefix("", 0), 0);
        assert_int_equal(utf8_complete_prefix("abc", 3), 3);
        /* every cut inside the € keeps "ab" */
        assert_int_equal(utf8_complete_prefix(euro, 3), 2);
        assert_int_equal(utf8_complete_prefix(euro, 4), 2);
        assert_int_equal(utf8_complete_prefix(euro, 5), 5);
        for (size_t n = 1; n < 4; n++)
                assert_int_equal(utf8_complete_prefix(smile, n), 0);
        assert_int_equal(utf8_complete_prefix(smile, 4), 4);
        /* invalid bytes are not held back: the caller sends them as base64 */
        assert_int_equal(utf8_complete_prefix("a\xff", 2), 2);
        assert_int_equal(utf8_complete_prefix("a\x80", 2), 2);
        assert_int_equal(utf8_complete_prefix("a\xc0", 2), 2);     /* never a valid lead */
        assert_int_equal(utf8_complete_prefix("a\xe0\x80", 3), 3); /* invalid already */
        /* the pieces of a split stream rejoin to valid text */
        {
                const char text[] = "x\xc3\xa9y\xe2\x82\xacz\xf0\x9f\x98\x80";
                char acc[64];
                size_t have = 0, carry = 0;
                char held[4];

                for (size_t i = 0; i < sizeof(text) - 1; i++) {
                        char piece[8];
                        size_t n, k;

                        memcpy(piece, held, carry);
                        piece[carry] = text[i];
                        n = carry + 1;
                        k = utf8_complete_prefix(piece, n);
                        assert_true(utf8_is_valid(piece, k));
                        memcpy(acc + have, piece, k);
                        have += k;
                        carry = n - k;
                        memcpy(held, piece + k, carry);
                }
                assert_int_equal(carry, 0);
                assert_int_equal(have, sizeof(text) - 1);
                assert_memory_equal(acc, text, have);
        }
}

/* Display forms: U+FFFD (or '?' in place) for each byte that starts no valid character. */
static void test_sanitize(void **state)
{
        struct buf b = BUF_INIT;
        char msg[] = "a\xff\xc3\xbc\xe6\x97z\xe6";

        (void)state;
        assert_int_equal(utf8_sanitize(&b, "inv\xffname", 8), 0);
        assert_int_equal(b.len, 10);
        assert_memory_equal(b.data, "inv\xef\xbf\xbdname", 10);
        assert_true(utf8_is_valid(b.data, b.len));
        buf_reset(&b);
        assert_int_equal(utf8_sanitize(&b, "ok \xc3\xbc", 5), 0);
        assert_memory_equal(b.data, "ok \xc3\xbc", 5);
        buf_reset(&b);
        assert_int_equal(utf8_sanitize(&b, "", 0), 0);
        assert_non_null(b.data);
        assert_int_equal(b.len, 0);
        buf_free(&b);

        utf8_scrub(msg);
        assert_string_equal(msg, "a?\xc3\xbc??z?");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_valid),        cmocka_unit_test(test_invalid),
                cmocka_unit_test(test_valid_prefix), cmocka_unit_test(test_complete_prefix),
                cmocka_unit_test(test_sanitize),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
