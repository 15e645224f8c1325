/* Header pair lists (http-header.c), as both HTTP parsers fill them: pairs in the order
 * added, each name and value a NUL-terminated copy (an empty buffer, never written, gives
 * ""), independent of the buffers they came from. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "daemon/http-header.h"

static void test_add_in_order(void **state)
{
        struct http_header *v = NULL;
        size_t n = 0;
        struct buf name = BUF_INIT, value = BUF_INIT;

        (void)state;
        assert_int_equal(buf_append_str(&name, "Set-Cookie"), 0);
        assert_int_equal(buf_append_str(&value, "a=1"), 0);
        assert_int_equal(http_headers_add(&v, &n, &name, &value), 0);
        buf_reset(&value);
        assert_int_equal(buf_append_str(&value, "b=2; HttpOnly"), 0);
        assert_int_equal(http_headers_add(&v, &n, &name, &value), 0);
        /* the copies do not follow the buffers */
        buf_reset(&name);
        assert_int_equal(buf_append_str(&name, "X-Other"), 0);
        assert_int_equal(n, 2);
        assert_string_equal(v[0].name, "Set-Cookie");
        assert_string_equal(v[0].value, "a=1");
        assert_string_equal(v[1].name, "Set-Cookie");
        assert_string_equal(v[1].value, "b=2; HttpOnly");
        http_headers_free(v, n);
        buf_free(&name);
        buf_free(&value);
}

static void test_empty_buffers(void **state)
{
        struct http_header *v = NULL;
        size_t n = 0;
        struct buf name = BUF_INIT, value = BUF_INIT; /* never written: data is NULL */

        (void)state;
        assert_int_equal(http_headers_add(&v, &n, &name, &value), 0);
        assert_int_equal(n, 1);
        assert_string_equal(v[0].name, "");
        assert_string_equal(v[0].value, "");
        http_headers_free(v, n);
}

static void test_copies_stop_at_length(void **state)
{
        struct http_header *v = NULL;
        size_t n = 0;
        struct buf name = BUF_INIT, value = BUF_INIT;

        (void)state;
        /* http-parser hands pieces of a larger buffer: only len bytes are the header's */
        assert_int_equal(buf_append(&name, "Host: x", 4), 0);
        assert_int_equal(buf_append(&value, "example.test\r\nNext", 12), 0);
        assert_int_equal(http_headers_add(&v, &n, &name, &value), 0);
        assert_string_equal(v[0].name, "Host");
        assert_string_equal(v[0].value, "example.test");
        http_headers_free(v, n);
        http_headers_free(NULL, 0);
        buf_free(&name);
        buf_free(&value);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_add_in_order),
                cmocka_unit_test(test_empty_buffers),
                cmocka_unit_test(test_copies_stop_at_length),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
