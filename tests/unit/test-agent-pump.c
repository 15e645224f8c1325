/* The agent's output pump (src/agent/pump.h) on real pipes and a real libuv loop: a UTF-8
 * character split across reads, pausing and resuming by credit, what is held flushed at
 * EOF, a sink's cap, reads as large as a chunk, poll mode, drain and close. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>
#include <cmocka.h>

#include "agent/conn.h"
#include "agent/pump.h"
#include "agent/service.h"
#include "common/limits.h"
#include "common/proto.h"

struct sink {
        uv_loop_t loop;
        struct pump p;
        int wfd;
        size_t credit; /* what the sink takes; SIZE_MAX: anything */
        char *got;
        size_t len, cap;
        unsigned calls;
        size_t largest;
        bool eof, closed;
        unsigned writes; /* poll mode: on_writable calls */
        bool want_write;
};

static size_t sink_allowance(struct pump *p)
{
        struct sink *k = p->owner;

        return k->credit;
}

static void sink_data(struct pump *p, const char *d, size_t n)
{
        struct sink *k = p->owner;

        assert_false(k->eof);
        assert_true(n > 0);
        assert_true(n <= CELLA_PUMP_READ + 3);
        if (k->credit != SIZE_MAX) {
                assert_true(n <= k->credit);
                k->credit -= n;
        }
        if (k->len + n > k->cap) {
                k->cap = (k->len + n) * 2;
                k->got = realloc(k->got, k->cap);
                assert_non_null(k->got);
        }
        memcpy(k->got + k->len, d, n);
        k->len += n;
        k->calls++;
        if (n > k->largest)
                k->largest = n;
}

static void sink_eof(struct pump *p)
{
        ((struct sink *)p->owner)->eof = true;
}

static void sink_closed(struct pump *p)
{
        ((struct sink *)p->owner)->closed = true;
}

static bool sink_wants_write(struct pump *p)
{
        return ((struct sink *)p->owner)->want_write;
}

static void sink_writable(struct pump *p)
{
        struct sink *k = p->owner;

        k->writes++;
        k->want_write = false;
}

static const struct pump_ops ops = {
        .allowance = sink_allowance,
        .on_data = sink_data,
        .on_eof = sink_eof,
        .on_closed = sink_closed,
        .wants_write = sink_wants_write,
        .on_writable = sink_writable,
};

static struct sink *sink_new(bool poll, bool utf8)
{
        struct sink *k = calloc(1, sizeof(*k));
        int fds[2];

        assert_non_null(k);
        assert_int_equal(uv_loop_init(&k->loop), 0);
        assert_int_equal(pipe2(fds, O_CLOEXEC | O_NONBLOCK), 0);
        k->wfd = fds[1];
        k->credit = SIZE_MAX;
        if (poll)
                assert_int_equal(pump_open_poll(&k->p, &k->loop, fds[0], &ops, k, 1), 0);
        else
                assert_int_equal(pump_open_pipe(&k->p, &k->loop, fds[0], &ops, k, 1), 0);
        k->p.utf8 = utf8;
        return k;
}

/* Run the loop until nothing more happens now (bounded). */
static void spin(struct sink *k)
{
        for (int i = 0; i < 50; i++)
                uv_run(&k->loop, UV_RUN_NOWAIT);
}

/* Run the loop until cond holds; fails after a generous deadline. */
#define SPIN_UNTIL(k, cond)                                    \
        do {                                                   \
                for (int i_ = 0; i_ < 100000 && !(cond); i_++) \
                        uv_run(&(k)->loop, UV_RUN_ONCE);       \
                assert_true(cond);                             \
        } while (0)

static void put(struct sink *k, const void *d, size_t n)
{
        assert_int_equal(write(k->wfd, d, n), (ssize_t)n);
}

static void sink_free(struct sink *k)
{
        if (k->wfd >= 0)
                close(k->wfd);
        pump_close(&k->p);
        SPIN_UNTIL(k, k->closed);
        assert_int_equal(uv_loop_close(&k->loop), 0);
        free(k->got);
        free(k);
}

static void test_utf8_split(void **state)
{
        struct sink *k = sink_new(false, true);

        (void)state;
        pump_resume(&k->p);
        put(k, "h\xc3", 2); /* é cut after its first byte */
        SPIN_UNTIL(k, k->len == 1);
        spin(k);
        assert_int_equal(k->len, 1);
        assert_int_equal(k->p.ncarry, 1);
        put(k, "\xa9\xe2\x82", 3); /* its second byte, and 2 of the 3 of € */
        SPIN_UNTIL(k, k->len == 3);
        spin(k);
        assert_memory_equal(k->got, "h\xc3\xa9", 3);
        put(k, "\xac!", 2);
        SPIN_UNTIL(k, k->len == 7);
        assert_memory_equal(k->got, "h\xc3\xa9\xe2\x82\xac!", 7);
        assert_int_equal(k->p.ncarry, 0);
        /* invalid bytes are not held: the reader decides about them */
        put(k, "\xff", 1);
        SPIN_UNTIL(k, k->len == 8);
        assert_false(k->eof);
        sink_free(k);
}

static void test_eof_flush(void **state)
{
        struct sink *k = sink_new(false, true);

        (void)state;
        pump_resume(&k->p);
        put(k, "ab\xf0\x9f\x98", 5); /* 3 of the 4 bytes of an emoji */
        SPIN_UNTIL(k, k->len == 2);
        close(k->wfd);
        k->wfd = -1;
        SPIN_UNTIL(k, k->eof);
        /* what was held goes out before the end, as it is */
        assert_int_equal(k->len, 5);
        assert_memory_equal(k->got, "ab\xf0\x9f\x98", 5);
        assert_false(pump_is_live(&k->p));
        sink_free(k);
}

static void test_credit(void **state)
{
        struct sink *k = sink_new(false, false);
        char data[100];
        int left = 0;

        (void)state;
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (char)('a' + i % 26);
        k->credit = 10;
        pump_resume(&k->p);
        put(k, data, sizeof(data));
        SPIN_UNTIL(k, k->len == 10);
        spin(k);
        /* paused with no credit: nothing more is read, the rest waits in the pipe */
        assert_int_equal(k->len, 10);
        assert_false(k->p.reading);
        assert_int_equal(ioctl(k->p.fd, FIONREAD, &left), 0);
        assert_int_equal(left, 90);
        /* credit arrives: reading resumes for exactly that much */
        k->credit = 50;
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->len == 60);
        spin(k);
        assert_int_equal(k->len, 60);
        assert_false(k->p.reading);
        k->credit = SIZE_MAX;
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->len == 100);
        assert_memory_equal(k->got, data, 100);
        assert_true(k->p.reading);
        /* EOF comes through also while paused, once resumed */
        pump_pause(&k->p);
        close(k->wfd);
        k->wfd = -1;
        spin(k);
        assert_false(k->eof);
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->eof);
        sink_free(k);
}

/* A bounded sink (a buffer of at most cap bytes): reading stops at the cap. */
static void test_cap(void **state)
{
        struct sink *k = sink_new(false, false);
        static char data[600 * 1024];
        size_t total = 0;

        (void)state;
        assert_true(fcntl(k->wfd, F_SETPIPE_SZ, 1024 * 1024) >= (int)sizeof(data));
        memset(data, 'x', sizeof(data));
        put(k, data, sizeof(data));
        k->credit = 100000;
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->len == 100000);
        spin(k);
        assert_int_equal(k->len, 100000);
        /* a read is as large as the allowance... */
        assert_int_equal(k->largest, 100000);
        k->credit = SIZE_MAX;
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->len == sizeof(data));
        /* ...and never larger than CELLA_PUMP_READ */
        assert_int_equal(k->largest, CELLA_PUMP_READ);
        total = k->len;
        assert_int_equal(total, sizeof(data));
        sink_free(k);
}

/* A pipe whose read fills a chunk grows to CELLA_PUMP_PIPE_SIZE; one that never does keeps
 * its size. */
static void test_pipe_grows(void **state)
{
        struct sink *k = sink_new(false, false);
        struct sink *q = sink_new(false, false);
        static char data[CELLA_FRAME_DATA_CHUNK];
        int before = fcntl(q->wfd, F_GETPIPE_SZ);

        (void)state;
        memset(data, 'y', sizeof(data));
        put(k, data, sizeof(data));
        k->credit = SIZE_MAX;
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->len == sizeof(data));
        assert_int_equal(fcntl(k->wfd, F_GETPIPE_SZ), CELLA_PUMP_PIPE_SIZE);
        put(q, "small", 5);
        q->credit = SIZE_MAX;
        pump_resume(&q->p);
        SPIN_UNTIL(q, q->len == 5);
        assert_int_equal(fcntl(q->wfd, F_GETPIPE_SZ), before);
        sink_free(k);
        sink_free(q);
}

static void test_poll_mode(void **state)
{
        struct sink *k = sink_new(true, false);

        (void)state;
        k->credit = 4;
        pump_resume(&k->p);
        put(k, "0123456789", 10);
        SPIN_UNTIL(k, k->len == 4);
        spin(k);
        assert_int_equal(k->len, 4);
        assert_false(k->p.poll_events & UV_READABLE);
        k->credit = SIZE_MAX;
        pump_resume(&k->p);
        SPIN_UNTIL(k, k->len == 10);
        assert_memory_equal(k->got, "0123456789", 10);
        close(k->wfd);
        k->wfd = -1;
        SPIN_UNTIL(k, k->eof);
        sink_free(k);
}

/* Poll mode on a descriptor the owner also writes to (a socket here, a pty master in the
 * agent): writability is reported while the owner wants to write, reading goes on. */
static void test_poll_writable(void **state)
{
        struct sink *k = sink_new(true, false);
        int sv[2];

        (void)state;
        /* the same pump on a socket pair instead of the pipe */
        close(k->wfd);
        pump_close(&k->p);
        SPIN_UNTIL(k, k->closed);
        k->closed = false;
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv), 0);
        k->wfd = sv[1];
        assert_int_equal(pump_open_poll(&k->p, &k->loop, sv[0], &ops, k, 0), 0);
        k->want_write = true;
        pump_resume(&k->p);
        assert_true(k->p.poll_events & UV_WRITABLE);
        SPIN_UNTIL(k, k->writes == 1);
        /* the owner has nothing more to write: only reading is watched */
        assert_false(k->want_write);
        assert_int_equal(k->p.poll_events, UV_READABLE);
        put(k, "ping", 4);
        SPIN_UNTIL(k, k->len == 4);
        assert_int_equal(k->writes, 1);
        sink_free(k);
}

/* drain reads what is there whatever the allowance; close ends every callback. */
static void test_drain_close(void **state)
{
        struct sink *k = sink_new(false, false);

        (void)state;
        k->credit = 0;
        pump_resume(&k->p);
        put(k, "abc", 3);
        spin(k);
        assert_int_equal(k->len, 0);
        k->credit = SIZE_MAX;
        pump_drain(&k->p);
        assert_int_equal(k->len, 3);
        assert_false(k->eof);
        put(k, "def", 3);
        pump_close(&k->p);
        assert_false(pump_is_live(&k->p));
        SPIN_UNTIL(k, k->closed);
        assert_int_equal(k->len, 3);
        assert_false(k->eof);
        /* the read end is closed: the writer sees EPIPE */
        assert_int_equal(write(k->wfd, "g", 1), -1);
        assert_int_equal(errno, EPIPE);
        sink_free(k);
}

/* A bulk reader's credit on a real connection to a peer that does not read: once the
 * socket holds back part of a frame, pump_credit_bulk answers 0 (the output waits in its
 * pipe); when the peer has read it all, the queue drains, on_window runs and reading goes
 * on with a whole read's worth. */
struct busy_stream {
        struct stream s;
        unsigned windows;
};

static void busy_window(struct stream *s)
{
        ((struct busy_stream *)s)->windows++;
}

static const struct stream_ops busy_ops = {.on_window = busy_window};

static void busy_closed(uv_handle_t *h)
{
        *(bool *)h->data = true;
}

static void test_busy_socket_holds_bulk_reads(void **state)
{
        static char payload[CELLA_PUMP_READ];
        static char sink[1 << 16];
        struct busy_stream b = {0};
        struct conn c = {0};
        uv_loop_t loop;
        bool closed = false;
        int sv[2], i;

        (void)state;
        assert_int_equal(uv_loop_init(&loop), 0);
        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        assert_int_equal(fcntl(sv[1], F_SETFL, O_NONBLOCK), 0);
        assert_int_equal(uv_pipe_init(&loop, &c.pipe, 0), 0);
        assert_int_equal(uv_pipe_open(&c.pipe, sv[0]), 0);
        b.s.conn = &c;
        b.s.ops = &busy_ops;
        b.s.send_credit = UINT64_MAX / 2;
        c.streams = &b.s;
        assert_int_equal(pump_credit_bulk(&b.s), CELLA_PUMP_READ);
        for (i = 0; i < 64 && c.queued == 0; i++)
                assert_int_equal(conn_send(&c, FRAME_STDOUT, 1, payload, sizeof(payload)), 0);
        assert_true(c.queued > 0);
        assert_false(stream_congested(&b.s));
        assert_int_equal(pump_credit_bulk(&b.s), 0);
        assert_true(c.held);
        uv_run(&loop, UV_RUN_NOWAIT);
        assert_int_equal(b.windows, 0);
        for (i = 0; i < 100000 && (c.queued > 0 || b.windows == 0); i++) {
                while (read(sv[1], sink, sizeof(sink)) > 0)
                        ;
                uv_run(&loop, UV_RUN_NOWAIT);
        }
        assert_int_equal(c.queued, 0);
        assert_int_equal(b.windows, 1);
        assert_false(c.held);
        assert_int_equal(pump_credit_bulk(&b.s), CELLA_PUMP_READ);
        c.pipe.data = &closed;
        uv_close((uv_handle_t *)&c.pipe, busy_closed);
        while (!closed)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(uv_loop_close(&loop), 0);
        close(sv[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_utf8_split),
                cmocka_unit_test(test_eof_flush),
                cmocka_unit_test(test_credit),
                cmocka_unit_test(test_cap),
                cmocka_unit_test(test_pipe_grows),
                cmocka_unit_test(test_poll_mode),
                cmocka_unit_test(test_poll_writable),
                cmocka_unit_test(test_drain_close),
                cmocka_unit_test(test_busy_socket_holds_bulk_reads),
        };

        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
