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

/* A line that lies whole in a chunk is read in place: up to max_line it is taken, one
 * byte more is -E2BIG, as for a line fed in pieces. */
static void test_line_in_place(void **state)
{
        struct sse_parser p;
        struct log l = {BUF_INIT, 0};
        char in[1100];

        (void)state;
        memcpy(in, "data: ", 6);
        memset(in + 6, 'y', 1018); /* a line of 1024 bytes */
        memcpy(in + 1024, "\n\n", 2);
        sse_parser_init(&p, 1024);
        assert_int_equal(sse_parser_feed(&p, in, 1026, record, &l), 0);
        assert_int_equal(l.n, 1);
        assert_int_equal(l.b.len, strlen("[message:]") + 1018);
        sse_parser_free(&p);
        memcpy(in + 1024, "y\n\n", 3);
        sse_parser_init(&p, 1024);
        assert_int_equal(sse_parser_feed(&p, in, 1027, record, &l), -E2BIG);
        sse_parser_free(&p);
        buf_free(&l.b);
}

/* The plain output event is taken in place only when its text needs no escape, wherever
 * the first byte that would lies (in or after the scan's 16-byte blocks). */
static void test_plain_output(void **state)
{
        static const char head[] = "{\"type\":\"stdout\",\"data\":\"";
        static const char tail[] = "\",\"timestamp\":\"2026-11-27T19:00:00.000Z\"}";
        char ev[200];
        const char *text;
        size_t tlen, n = strlen(head);

        (void)state;
        for (size_t pos = 0; pos <= 40; pos++) {
                memcpy(ev, head, n);
                memset(ev + n, 'a', 40);
                memcpy(ev + n + 40, tail, sizeof(tail));
                if (pos == 40) {
                        assert_int_equal(sse_plain_output(ev, strlen(ev), &text, &tlen), 0);
                        assert_ptr_equal(text, ev + n);
                        assert_int_equal(tlen, 40);
                        continue;
                }
                ev[n + pos] = '\x01';
                assert_int_equal(sse_plain_output(ev, strlen(ev), &text, &tlen), -1);
                ev[n + pos] = '\\';
                assert_int_equal(sse_plain_output(ev, strlen(ev), &text, &tlen), -1);
                ev[n + pos] = '\xff'; /* not UTF-8 */
                assert_int_equal(sse_plain_output(ev, strlen(ev), &text, &tlen), -1);
        }
        /* the timestamp is a plain JSON string too, or jansson decides */
        for (size_t k = 0; k < 3; k++) {
                static const char bad[] = {'\x01', '\\', '\xff'};
                size_t at = n + 40 + strlen("\",\"timestamp\":\"") + 3;

                memcpy(ev, head, n);
                memset(ev + n, 'a', 40);
                memcpy(ev + n + 40, tail, sizeof(tail));
                ev[at] = bad[k];
                assert_int_equal(sse_plain_output(ev, strlen(ev), &text, &tlen), -1);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_basic),
                cmocka_unit_test(test_limits),
                cmocka_unit_test(test_line_in_place),
                cmocka_unit_test(test_plain_output),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
