/* json_escape_append: the same text as jansson's dump of the same string, for every byte
 * value and for random UTF-8 (the SSE encoder writes output events without a json_t). */
#include <jansson.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "common/json-escape.h"
#include "common/utf8.h"

/* jansson's dump of s as a string, without its quotes */
static void check_same(const char *s, size_t len)
{
        struct buf b = BUF_INIT;
        json_t *j = json_stringn(s, len);
        char *want = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;

        assert_non_null(want);
        assert_int_equal(json_escape_append(&b, s, len), 0);
        assert_int_equal(b.len, strlen(want) - 2);
        assert_memory_equal(b.data ? b.data : "", want + 1, b.len);
        free(want);
        json_decref(j);
        buf_free(&b);
}

static void test_every_ascii_byte(void **state)
{
        char s[40];

        (void)state;
        for (int c = 0; c < 0x80; c++) {
                /* the byte alone, and inside runs long enough for the 8-byte scan */
                memset(s, 'a', sizeof(s));
                s[0] = (char)c;
                check_same(s, 1);
                s[0] = 'a';
                s[17] = (char)c;
                check_same(s, sizeof(s));
        }
}

static void test_plain_and_empty(void **state)
{
        static char big[300000];

        (void)state;
        check_same("", 0);
        memset(big, 'a', sizeof(big));
        check_same(big, sizeof(big));
        check_same("h\xc3\xa9llo \xe2\x98\x83 \"q\" \\ /\n\t\r", 22);
}

static void test_random_utf8(void **state)
{
        char s[512];

        (void)state;
        srand(58);
        for (int round = 0; round < 20000; round++) {
                size_t len = (size_t)(rand() % (int)sizeof(s));

                for (size_t i = 0; i < len; i++) {
                        int r = rand() % 10;

                        /* mostly ASCII (controls and specials among it), some high bytes */
                        s[i] = (char)(r < 6   ? 0x20 + rand() % 0x5f
                                      : r < 8 ? rand() % 0x20
                                              : rand() % 256);
                }
                len = utf8_valid_prefix(s, len);
                check_same(s, len);
        }
}

/* json_escape_safe_span stops at the first byte that needs an escape wherever it lies
 * in or after the 16-byte blocks, and the escaper around it writes what jansson writes. */
static void test_span_every_position(void **state)
{
        static const unsigned char special[] = {0x00, 0x01, '\n', 0x1f, '"', '\\'};
        static const unsigned char plain[] = {0x20, '!', '#', '[', ']', 0x7f, 0x80, 0xff};
        char s[50];

        (void)state;
        for (size_t pos = 0; pos < sizeof(s); pos++) {
                for (size_t k = 0; k < sizeof(special); k++) {
                        memset(s, 'a', sizeof(s));
                        s[pos] = (char)special[k];
                        assert_int_equal(json_escape_safe_span(s, sizeof(s)), pos);
                        assert_int_equal(json_escape_safe_span(s, pos), pos);
                        check_same(s, sizeof(s));
                }
                for (size_t k = 0; k < sizeof(plain); k++) {
                        memset(s, 'a', sizeof(s));
                        s[pos] = (char)plain[k];
                        assert_int_equal(json_escape_safe_span(s, sizeof(s)), sizeof(s));
                }
        }
        assert_int_equal(json_escape_safe_span("", 0), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_ascii_byte),
                cmocka_unit_test(test_plain_and_empty),
                cmocka_unit_test(test_random_utf8),
                cmocka_unit_test(test_span_every_position),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
