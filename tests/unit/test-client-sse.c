/* The SSE parser: every split of a stream gives the same events; CRLF, CR, comments,
 * multi-line data, event names, limits. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "client/sse.h"

struct log {
        struct buf b;
        int n;
};

static int record(const char *event, const char *data, size_t len, void *ud)
{
        struct log *l = ud;
        l->n++;
        buf_printf(&l->b, "[%s:", event);
        buf_append(&l->b, data, len);
        buf_append(&l->b, "]", 1);
        return 0;
}

static void expect_all_splits(const char *in, const char *want, int nwant)
{
        size_t len = strlen(in);
        for (size_t cut = 0; cut <= len; cut++) {
                struct sse_parser p;
                struct log l = {BUF_INIT, 0};
                sse_parser_init(&p, 1024);
                assert_int_equal(sse_parser_feed(&p, in, cut, record, &l), 0);
                assert_int_equal(sse_parser_feed(&p, in + cut, len - cut, record, &l), 0);
                assert_int_equal(l.n, nwant);
                assert_string_equal(l.b.data ? l.b.data : "", want);
                sse_parser_free(&p);
                buf_free(&l.b);
        }
}

static void test_basic(void **state)
{
        expect_all_splits("data: {\"a\":1}\n\n", "[message:{\"a\":1}]", 1);
        expect_all_splits("data: one\r\n\r\ndata: two\r\r", "[message:one][message:two]", 2);
        expect_all_splits(": comment\ndata:x\ndata: y\n\n", "[message:x\ny]", 1);
        expect_all_splits("event: log\ndata: hi\n\ndata: plain\n\n", "[log:hi][message:plain]", 2);
        /* No data: nothing is dispatched; an unterminated event is not dispatched. */
        expect_all_splits("event: x\n\nid: 3\nretry: 10\n\ndata: tail", "", 0);
        /* Only one leading space is stripped. */
        expect_all_splits("data:  two spaces\n\n", "[message: two spaces]", 1);
}

static int stop(const char *event, const char *data, size_t len, void *ud)
{
        return -42;
}

static void test_limits(void **state)
{
        struct sse_parser p;
        char line[2048];
        memset(line, 'x', sizeof(line));
        sse_parser_init(&p, 1024);
        assert_int_equal(sse_parser_feed(&p, "data: ", 6, stop, NULL), 0);
        assert_int_equal(sse_parser_feed(&p, line, sizeof(line), stop, NULL), -E2BIG);
        sse_parser_free(&p);

        sse_parser_init(&p, 1024);
        assert_int_equal(sse_parser_feed(&p, "data: a\n\n", 9, stop, NULL), -42);
        sse_parser_free(&p);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_basic),
                cmocka_unit_test(test_limits),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
