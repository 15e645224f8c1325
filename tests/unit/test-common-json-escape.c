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

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_every_ascii_byte),
                cmocka_unit_test(test_plain_and_empty),
                cmocka_unit_test(test_random_utf8),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
