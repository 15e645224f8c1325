/* cellad's agent link against a scripted fake agent (a forked process speaking the wire
 * protocol over a real unix socket): stream multiplexing, flow control both ways, and the
 * connection torn down (every stream told) when the agent overruns its window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "common/limits.h"
#include "daemon/agent-conn.h"

static int read_full(int fd, void *p, size_t n)
{
        size_t got = 0;
        while (got < n) {
                ssize_t r = read(fd, (char *)p + got, n - got);
                if (r <= 0)
                        return -1;
                got += (size_t)r;
        }
        return 0;
}

static int send_frame(int fd, uint8_t type, uint32_t stream, const void *p, uint32_t len)
{
        struct buf b = BUF_INIT;
        int r = frame_append(&b, type, stream, p, len);
        if (r == 0 && write(fd, b.data, b.len) != (ssize_t)b.len)
                r = -1;
        buf_free(&b);
        return r;
}

/* Read one frame; payload into a static buffer. */
static int recv_frame(int fd, struct frame *f)
{
        static uint8_t in[CELLA_FRAME_HEADER + CELLA_FRAME_MAX];
        if (read_full(fd, in, CELLA_FRAME_HEADER) < 0)
                return -1;
        uint32_t len = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
        if (len > CELLA_FRAME_MAX || read_full(fd, in + CELLA_FRAME_HEADER, len) < 0)
                return -1;
        return frame_decode(in, CELLA_FRAME_HEADER + len, f) > 0 ? 0 : -1;
}

/* The fake agent: HELLO; for EXEC send 9 MiB of STDOUT (more than two windows), waiting
 * for WINDOW credit, then EXIT with the number of WINDOW frames and the smallest increment
 * it got (cellad returns credit in steps of CELLA_STREAM_ACK_BATCH or more); for FILE_WRITE receive DATA (granting credit) until END,
 * then RESULT with the byte count; then overrun the window of a third stream. */
#define EXEC_BYTES (9 * 1024 * 1024)

static void fake_agent(int lfd)
{
        int fd = accept(lfd, NULL, NULL);
        struct frame f;
        static char chunk[64 * 1024];
        uint64_t credit = CELLA_STREAM_WINDOW;
        char msg[128];
        uint32_t exec_stream = 0, write_stream = 0, third = 0;
        uint64_t sent = 0, received = 0, windows = 0, min_window = UINT64_MAX;

        memset(chunk, 'x', sizeof(chunk));
        send_frame(fd, FRAME_HELLO, 0, "{\"version\":1,\"pid\":1}", 21);
        while (recv_frame(fd, &f) == 0) {
                if (f.type == FRAME_EXEC && !exec_stream) {
                        exec_stream = f.stream;
                        send_frame(fd, FRAME_STARTED, exec_stream, "{\"pid\":7}", 9);
                } else if (f.type == FRAME_WINDOW && f.stream == exec_stream) {
                        uint32_t c;
                        frame_window_unpack(&f, &c);
                        credit += c;
                        windows++;
                        if (c < min_window)
                                min_window = c;
                } else if (f.type == FRAME_FILE_WRITE) {
                        write_stream = f.stream;
                } else if (f.type == FRAME_DATA && f.stream == write_stream) {
                        uint8_t w[4];
                        received += f.len;
                        frame_window_pack(w, f.len);
                        send_frame(fd, FRAME_WINDOW, write_stream, w, 4);
                } else if (f.type == FRAME_END && f.stream == write_stream) {
                        int n = snprintf(msg, sizeof(msg), "{\"size\":%llu}",
                                         (unsigned long long)received);
                        send_frame(fd, FRAME_RESULT, write_stream, msg, (uint32_t)n);
                } else if (f.type == FRAME_FILE_OP) {
                        third = f.stream;
                        /* Overrun: more than the window without any credit. */
                        for (uint64_t s = 0; s <= CELLA_STREAM_WINDOW; s += sizeof(chunk))
                                send_frame(fd, FRAME_DATA, third, chunk, sizeof(chunk));
                }
                while (exec_stream && sent < EXEC_BYTES && credit >= sizeof(chunk)) {
                        send_frame(fd, FRAME_STDOUT, exec_stream, chunk, sizeof(chunk));
                        credit -= sizeof(chunk);
                        sent += sizeof(chunk);
                        if (sent == EXEC_BYTES) {
                                int n = snprintf(msg, sizeof(msg),
                                                 "{\"exitCode\":0,\"windows\":%llu,"
                                                 "\"minWindow\":%llu}",
                                                 (unsigned long long)windows,
                                                 (unsigned long long)min_window);
                                send_frame(fd, FRAME_EXIT, exec_stream, msg, (uint32_t)n);
                        }
                }
        }
        _exit(0);
}

struct ctx {
        struct agent_conn *conn;
        struct agent_stream *exec, *upload, *third;
        uint64_t stdout_bytes;
        int exec_closed, upload_closed, third_closed;
        int exec_close_err, third_close_err;
        int exit_code;
        json_int_t windows, min_window;
        char upload_result[64];
        uint64_t upload_sent;
        int lost;
        uv_timer_t ack_timer;
        uint64_t to_ack;
};

static void on_ack_timer(uv_timer_t *t)
{
        struct ctx *c = t->data;
        /* Acknowledge later, as an HTTP client draining slowly would. */
        if (c->exec && c->to_ack) {
                agent_stream_ack(c->exec, c->to_ack);
                c->to_ack = 0;
        }
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *ud)
{
        struct ctx *c = ud;
        if (s == c->exec && f->type == FRAME_STDOUT) {
                c->stdout_bytes += f->len;
                c->to_ack += f->len;
                uv_timer_start(&c->ack_timer, on_ack_timer, 1, 0);
        } else if (s == c->exec && f->type == FRAME_EXIT) {
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
                c->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
                c->windows = json_integer_value(json_object_get(j, "windows"));
                c->min_window = json_integer_value(json_object_get(j, "minWindow"));
                json_decref(j);
        } else if (s == c->upload && f->type == FRAME_RESULT) {
                snprintf(c->upload_result, sizeof(c->upload_result), "%.*s", (int)f->len,
                         (const char *)f->payload);
        }
}

static void pump_upload(struct ctx *c)
{
        static char data[32 * 1024];
        while (c->upload && c->upload_sent < 5 * 1024 * 1024) {
                int r = agent_stream_send_data(c->upload, data, sizeof(data));
                if (r == -EAGAIN)
                        return;
                assert_int_equal(r, 0);
                c->upload_sent += sizeof(data);
        }
        if (c->upload && c->upload_sent == 5 * 1024 * 1024) {
                assert_int_equal(agent_stream_send_end(c->upload), 0);
                c->upload_sent++;
        }
}

static void on_writable(struct agent_stream *s, void *ud)
{
        pump_upload(ud);
}

static void on_close(struct agent_stream *s, int err, void *ud)
{
        struct ctx *c = ud;
        if (s == c->exec) {
                c->exec_closed++;
                c->exec_close_err = err;
                c->exec = NULL;
        } else if (s == c->upload) {
                c->upload_closed++;
                c->upload = NULL;
        } else if (s == c->third) {
                c->third_closed++;
                c->third_close_err = err;
                c->third = NULL;
                return;
        }
        if (c->exec_closed && c->upload_closed && !c->third && !c->third_closed) {
                static const struct agent_stream_ops ops = {on_frame, on_writable, on_close};
                json_t *op = json_pack("{s:s, s:s}", "op", "stat", "path", "/");
                struct cella_error e = {0};
                assert_int_equal(
                        agent_conn_open(c->conn, FRAME_FILE_OP, op, &ops, c, &c->third, &e), 0);
                json_decref(op);
        }
}

static void on_lost(struct agent_conn *conn, int err, void *ud)
{
        struct ctx *c = ud;
        c->lost++;
        uv_close((uv_handle_t *)&c->ack_timer, NULL);
}

static void test_agent_conn(void **state)
{
        static const struct agent_stream_ops ops = {on_frame, on_writable, on_close};
        char dir[] = "/tmp/cella-aconn-XXXXXX", path[sizeof(dir) + 16];
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct cella_error err = {0};
        struct ctx c = {0};
        uv_loop_t loop;
        int lfd, status;
        pid_t pid;

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/agent.sock", dir);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(lfd >= 0);
        assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(listen(lfd, 4), 0);
        pid = fork();
        assert_true(pid >= 0);
        if (pid == 0)
                fake_agent(lfd);
        close(lfd);

        uv_loop_init(&loop);
        uv_timer_init(&loop, &c.ack_timer);
        c.ack_timer.data = &c;
        assert_int_equal(agent_conn_new(&loop, path, on_lost, &c, &c.conn, &err), 0);
        json_t *exec = json_pack("{s:s}", "command", "true");
        json_t *wr = json_pack("{s:s}", "path", "/x");
        assert_int_equal(agent_conn_open(c.conn, FRAME_EXEC, exec, &ops, &c, &c.exec, &err), 0);
        assert_int_equal(agent_conn_open(c.conn, FRAME_FILE_WRITE, wr, &ops, &c, &c.upload, &err),
                         0);
        assert_int_not_equal(agent_stream_id(c.exec), agent_stream_id(c.upload));
        json_decref(exec);
        json_decref(wr);
        pump_upload(&c);
        /* More than one window was queued only if credit came back. */
        uv_run(&loop, UV_RUN_DEFAULT);

        assert_int_equal(c.stdout_bytes, EXEC_BYTES);
        assert_int_equal(c.exit_code, 0);
        /* credit came back (two windows at least) and in batches, not a WINDOW per frame */
        assert_true(c.windows >= 2);
        assert_true(c.min_window >= CELLA_STREAM_ACK_BATCH);
        assert_int_equal(c.exec_closed, 1);
        assert_int_equal(c.exec_close_err, 0);
        assert_int_equal(c.upload_closed, 1);
        assert_string_equal(c.upload_result, "{\"size\":5242880}");
        /* The overrun tore the connection down: the stream was told, then the owner. */
        assert_int_equal(c.third_closed, 1);
        assert_int_equal(c.third_close_err, -EPROTO);
        assert_int_equal(c.lost, 1);

        assert_int_equal(uv_loop_close(&loop), 0);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        unlink(path);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_agent_conn),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, NULL, NULL);
}
