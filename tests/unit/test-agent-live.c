/* Runs the real cella-init as an ordinary child process (not in a sandbox): the test binds
 * a listening unix socket in a temp dir, hands it to the agent as fd 3 and speaks the
 * agent protocol to it (docs/protocol.md). Paths are host paths under the temp dir; the
 * agent runs with --no-cgroup, so trees are killed through their process group. */
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include <jansson.h>

#include "common/limits.h"
#include "common/proto.h"

#define IO_TIMEOUT_MS 60000 /* only to turn a hang into a failure, never asserted on */

static char tmpdir[64];
static char sockpath[100];
static pid_t agent_pid = -1;
static int conn = -1;

struct rframe {
        uint8_t type;
        uint32_t stream;
        uint32_t len;
        uint8_t *payload; /* malloc'd, NUL-terminated */
};

/* ---- plumbing ---- */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

static void write_all(int fd, const void *p, size_t n)
{
        const char *c = p;

        while (n > 0) {
                ssize_t k = write(fd, c, n);

                if (k < 0 && errno == EINTR)
                        continue;
                assert_true(k > 0);
                c += k;
                n -= (size_t)k;
        }
}

static void send_frame(int fd, uint8_t type, uint32_t stream, const void *p, size_t len)
{
        uint8_t hdr[CELLA_FRAME_HEADER];

        frame_header_pack(hdr, type, stream, (uint32_t)len);
        write_all(fd, hdr, sizeof(hdr));
        if (len)
                write_all(fd, p, len);
}

static void send_json(int fd, uint8_t type, uint32_t stream, const char *fmt, ...)
{
        char text[8192];
        va_list ap;
        int n;

        va_start(ap, fmt);
        n = vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        assert_true(n > 0 && (size_t)n < sizeof(text));
        send_frame(fd, type, stream, text, (size_t)n);
}

/* EXEC with the temp dir as default cwd (/workspace does not exist on the host). */
static void send_exec(int fd, uint32_t stream, const char *fmt, ...)
{
        char text[8192], full[8400];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        if (strstr(text, "\"cwd\"") || text[0] != '{')
                snprintf(full, sizeof(full), "%s", text);
        else
                snprintf(full, sizeof(full), "{\"cwd\":\"%s\",%s", tmpdir, text + 1);
        send_frame(fd, FRAME_EXEC, stream, full, strlen(full));
}

static void send_window(int fd, uint32_t stream, uint32_t credit)
{
        uint8_t w[4];

        frame_window_pack(w, credit);
        send_frame(fd, FRAME_WINDOW, stream, w, 4);
}

/* Count len data bytes against the stream's window; credit goes back only once the whole
 * window is outstanding (the agent must have stopped there), which sets *hit. */
static void take_credit(int fd, uint32_t stream, uint64_t *unacked, size_t len, bool *hit)
{
        *unacked += len;
        assert_true(*unacked <= CELLA_STREAM_WINDOW);
        if (*unacked == CELLA_STREAM_WINDOW) {
                *hit = true;
                send_window(fd, stream, (uint32_t)*unacked);
                *unacked = 0;
        }
}

/* Read exactly n bytes; returns false on EOF before any byte. */
static bool read_exact(int fd, void *p, size_t n)
{
        char *c = p;
        size_t got = 0;

        while (got < n) {
                struct pollfd pfd = {.fd = fd, .events = POLLIN};
                ssize_t k;

                assert_int_equal(poll(&pfd, 1, IO_TIMEOUT_MS), 1);
                k = read(fd, c + got, n - got);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0 && got == 0 && (k == 0 || errno == ECONNRESET))
                        return false;
                assert_true(k > 0);
                got += (size_t)k;
        }
        return true;
}

/* Next frame; false when the agent closed the connection. */
static bool recv_frame(int fd, struct rframe *f)
{
        uint8_t hdr[CELLA_FRAME_HEADER];
        struct frame dec;

        if (!read_exact(fd, hdr, sizeof(hdr)))
                return false;
        assert_int_equal(frame_decode(hdr, sizeof(hdr), &dec) == 0 ||
                                 frame_decode(hdr, sizeof(hdr), &dec) == CELLA_FRAME_HEADER,
                         1);
        f->len = (uint32_t)hdr[0] << 24 | (uint32_t)hdr[1] << 16 | (uint32_t)hdr[2] << 8 | hdr[3];
        assert_true(f->len <= CELLA_FRAME_MAX);
        f->type = hdr[4];
        f->stream =
                (uint32_t)hdr[8] << 24 | (uint32_t)hdr[9] << 16 | (uint32_t)hdr[10] << 8 | hdr[11];
        f->payload = malloc(f->len + 1);
        assert_non_null(f->payload);
        if (f->len)
                assert_true(read_exact(fd, f->payload, f->len));
        f->payload[f->len] = '\0';
        return true;
}

static json_t *frame_json(const struct rframe *f)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);

        assert_non_null(j);
        return j;
}

static int connect_agent(void)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        struct rframe f;
        json_t *j;
        int fd;

        fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(fd >= 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_true(recv_frame(fd, &f));
        assert_int_equal(f.type, FRAME_HELLO);
        assert_int_equal(f.stream, 0);
        j = frame_json(&f);
        assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
        assert_int_equal(json_integer_value(json_object_get(j, "pid")), agent_pid);
        json_decref(j);
        free(f.payload);
        return fd;
}

static int setup(void **state)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        char logpath[160];
        int lfd;

        (void)state;
        snprintf(tmpdir, sizeof(tmpdir), "/tmp/cella-agent-test-XXXXXX");
        if (!mkdtemp(tmpdir))
                return -1;
        snprintf(sockpath, sizeof(sockpath), "%s/agent.sock", tmpdir);
        snprintf(logpath, sizeof(logpath), "%s/agent.log", tmpdir);
        lfd = socket(AF_UNIX, SOCK_STREAM, 0);
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sockpath);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 8) < 0)
                return -1;
        agent_pid = fork();
        if (agent_pid < 0)
                return -1;
        if (agent_pid == 0) {
                int logfd = open(logpath, O_WRONLY | O_CREAT | O_APPEND, 0644);

                if (logfd < 0 || dup2(lfd, 3) < 0 || dup2(logfd, 1) < 0 || dup2(logfd, 2) < 0)
                        _exit(127);
                char rundir[100], procdir[100];

                snprintf(rundir, sizeof(rundir), "%s/run", tmpdir);
                snprintf(procdir, sizeof(procdir), "%s/proclogs", tmpdir);
                execl(CELLA_BUILD_DIR "/" CELLA_AGENT_HOST_BIN, "cella-init", "--no-cgroup",
                      "--log-level", "debug", "--run-dir", rundir, "--proc-log-dir", procdir,
                      (char *)NULL);
                _exit(127);
        }
        close(lfd);
        conn = connect_agent();
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        if (conn >= 0)
                close(conn);
        if (agent_pid > 0) {
                kill(agent_pid, SIGKILL);
                waitpid(agent_pid, NULL, 0);
        }
        if (getenv("CELLA_TEST_KEEP") == NULL)
                nftw(tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
        return 0;
}

/* ---- exec helper ---- */

struct exec_result {
        bool started;
        int pid;
        char *out, *err;
        size_t out_len, err_len;
        json_t *end; /* EXIT or ERROR payload */
        uint8_t end_type;
        bool hit_window; /* unacknowledged output reached the full window once */
};

static void exec_result_free(struct exec_result *r)
{
        free(r->out);
        free(r->err);
        json_decref(r->end);
}

static void append(char **buf, size_t *len, const uint8_t *p, size_t n)
{
        *buf = realloc(*buf, *len + n + 1);
        assert_non_null(*buf);
        memcpy(*buf + *len, p, n);
        *len += n;
        (*buf)[*len] = '\0';
}

/* Collect a stream's frames until it ends. Output is acknowledged only when the whole
 * window is outstanding, which makes the agent stop and wait at the window's edge. */
static void collect(int fd, uint32_t stream, struct exec_result *r)
{
        uint64_t unacked = 0;

        for (;;) {
                struct rframe f;

                assert_true(recv_frame(fd, &f));
                assert_int_equal(f.stream, stream);
                switch (f.type) {
                case FRAME_STARTED: {
                        json_t *j = frame_json(&f);

                        assert_false(r->started);
                        r->started = true;
                        r->pid = (int)json_integer_value(json_object_get(j, "pid"));
                        json_decref(j);
                        break;
                }
                case FRAME_STDOUT:
                case FRAME_STDERR:
                        assert_true(r->started);
                        if (f.type == FRAME_STDOUT)
                                append(&r->out, &r->out_len, f.payload, f.len);
                        else
                                append(&r->err, &r->err_len, f.payload, f.len);
                        take_credit(fd, stream, &unacked, f.len, &r->hit_window);
                        break;
                case FRAME_EXIT:
                case FRAME_ERROR:
                        r->end_type = f.type;
                        r->end = frame_json(&f);
                        free(f.payload);
                        return;
                default:
                        fail_msg("unexpected frame type %d", f.type);
                }
                free(f.payload);
        }
}

static void run(uint32_t stream, struct exec_result *r, const char *fmt, ...)
{
        char text[8192];
        va_list ap;

        memset(r, 0, sizeof(*r));
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        send_exec(conn, stream, "%s", text);
        collect(conn, stream, r);
}

static int exit_code(const struct exec_result *r)
{
        if (r->end_type != FRAME_EXIT)
                fail_msg("ERROR %s: %s", json_string_value(json_object_get(r->end, "code")),
                         json_string_value(json_object_get(r->end, "message")));
        return (int)json_integer_value(json_object_get(r->end, "exitCode"));
}

static const char *error_code(const json_t *end)
{
        return json_string_value(json_object_get(end, "code"));
}

/* ---- tests ---- */

static void test_exec_bytes(void **state)
{
        struct exec_result r;

        (void)state;
        run(1, &r, "{\"command\":\"printf 'a\\\\0b\\\\n'; echo err >&2; exit 3\",\"cwd\":\"%s\"}",
            tmpdir);
        assert_true(r.started);
        assert_true(r.pid > 0);
        assert_int_equal(r.out_len, 4);
        assert_memory_equal(r.out, "a\0b\n", 4);
        assert_int_equal(r.err_len, 4);
        assert_memory_equal(r.err, "err\n", 4);
        assert_int_equal(exit_code(&r), 3);
        assert_false(json_is_true(json_object_get(r.end, "timedOut")));
        assert_null(json_object_get(r.end, "signal"));
        exec_result_free(&r);
}

static void test_exec_no_leaked_fds(void **state)
{
        struct exec_result r;

        (void)state;
        /* the command sees stdin, stdout, stderr and nothing of the agent's; ls itself
         * holds the directory open as fd 3 */
        run(9, &r, "{\"command\":\"ls /proc/self/fd | tr '\\\\n' ' '; cat\"}");
        assert_int_equal(exit_code(&r), 0);
        assert_string_equal(r.out, "0 1 2 3 ");
        exec_result_free(&r);
}

static void test_exec_long_command(void **state)
{
        const size_t pad = 600 * 1024; /* longer than one execve argument may be */
        struct exec_result r;
        char *cmd, *text;
        json_t *j;
        size_t n;

        (void)state;
        cmd = malloc(pad + 256);
        assert_non_null(cmd);
        n = (size_t)snprintf(cmd, 256, "echo start; : ");
        memset(cmd + n, 'a', pad);
        snprintf(cmd + n + pad, 256, "\necho end $#; ls /proc/self/fd | tr '\\n' ' '; exit 5");
        j = json_pack("{s:s, s:s}", "command", cmd, "cwd", tmpdir);
        text = json_dumps(j, JSON_COMPACT);
        assert_non_null(text);
        memset(&r, 0, sizeof(r));
        send_frame(conn, FRAME_EXEC, 10, text, strlen(text));
        collect(conn, 10, &r);
        assert_int_equal(exit_code(&r), 5);
        assert_string_equal(r.out, "start\nend 0\n0 1 2 3 ");
        exec_result_free(&r);
        free(text);
        json_decref(j);
        free(cmd);
}

static void test_exec_cwd_env(void **state)
{
        struct exec_result r;
        char want[512];

        (void)state;
        run(2, &r,
            "{\"command\":\"pwd; echo \\\"$FOO|$HOME|$LANG|$PWD\\\"; test -t 0 || cat\","
            "\"cwd\":\"%s\",\"env\":{\"FOO\":\"b a r\",\"LANG\":\"C\"}}",
            tmpdir);
        snprintf(want, sizeof(want), "%s\nb a r|/root|C|%s\n", tmpdir, tmpdir);
        assert_non_null(r.out);
        assert_string_equal(r.out, want);
        assert_int_equal(exit_code(&r), 0);
        exec_result_free(&r);

        /* a cwd that does not exist: ERROR and nothing runs */
        run(3, &r, "{\"command\":\"touch %s/ran\",\"cwd\":\"%s/missing\"}", tmpdir, tmpdir);
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_false(r.started);
        assert_string_equal(error_code(r.end), "FILE_NOT_FOUND");
        exec_result_free(&r);
        snprintf(want, sizeof(want), "%s/ran", tmpdir);
        assert_int_equal(access(want, F_OK), -1);

        /* a cwd that is a file */
        run(3, &r, "{\"command\":\"true\",\"cwd\":\"%s/agent.log\"}", tmpdir);
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_string_equal(error_code(r.end), "NOT_DIRECTORY");
        exec_result_free(&r);

        /* invalid requests */
        run(4, &r, "{\"command\":\"true\",\"env\":{\"A-B\":\"x\"}}");
        assert_string_equal(error_code(r.end), "VALIDATION_FAILED");
        exec_result_free(&r);
        run(4, &r, "{\"command\":\"\"}");
        assert_string_equal(error_code(r.end), "VALIDATION_FAILED");
        exec_result_free(&r);
        run(4, &r, "{\"command\":\"true\",\"cwd\":\"relative\"}");
        assert_string_equal(error_code(r.end), "VALIDATION_FAILED");
        exec_result_free(&r);
}

/* A process is gone when it no longer exists or is a zombie nobody reaped yet. */
static bool process_gone(int pid)
{
        char path[64], buf[512];
        char *p;
        FILE *f;
        size_t n;

        if (kill(pid, 0) < 0 && errno == ESRCH)
                return true;
        snprintf(path, sizeof(path), "/proc/%d/stat", pid);
        f = fopen(path, "re");
        if (!f)
                return true;
        n = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[n] = '\0';
        p = strrchr(buf, ')');
        return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

/* EXIT comes after both pipes reached EOF, so every process of the tree has released its
 * descriptors, which happens in exit(); it may not have reached the zombie state yet. A
 * killed process gets there at once; the bound only turns a survivor into a failure. */
static bool wait_gone(int pid)
{
        for (int i = 0; i < 2000; i++) {
                if (process_gone(pid))
                        return true;
                usleep(5000);
        }
        return false;
}

static void test_exec_timeout_kills_tree(void **state)
{
        struct exec_result r;
        int pids[2];

        (void)state;
        run(5, &r,
            "{\"command\":\"sleep 1000 & echo $!; sleep 1000 & echo $!; wait\","
            "\"timeoutMs\":300}");
        assert_int_equal(exit_code(&r), 128 + SIGKILL);
        assert_int_equal(json_integer_value(json_object_get(r.end, "signal")), SIGKILL);
        assert_true(json_is_true(json_object_get(r.end, "timedOut")));
        assert_non_null(r.out);
        assert_int_equal(sscanf(r.out, "%d\n%d\n", &pids[0], &pids[1]), 2);
        assert_true(wait_gone(pids[0]));
        assert_true(wait_gone(pids[1]));
        exec_result_free(&r);
}

static void test_exec_cancel(void **state)
{
        struct exec_result r;
        struct rframe f;

        (void)state;
        memset(&r, 0, sizeof(r));
        send_exec(conn, 6, "{\"command\":\"echo go; exec sleep 1000\"}");
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_STARTED);
        free(f.payload);
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_STDOUT);
        free(f.payload);
        send_frame(conn, FRAME_CANCEL, 6, NULL, 0);
        r.started = true;
        collect(conn, 6, &r);
        assert_int_equal(exit_code(&r), 128 + SIGKILL);
        assert_false(json_is_true(json_object_get(r.end, "timedOut")));
        exec_result_free(&r);
}

static void test_exec_background_leftover(void **state)
{
        struct exec_result r;
        int pid;

        (void)state;
        /* The shell exits at once while a background process keeps the pipes open: EXIT
         * still comes (after the grace period), with the shell's status. */
        run(7, &r, "{\"command\":\"sleep 1000 & echo $!; exit 4\"}");
        assert_int_equal(exit_code(&r), 4);
        assert_int_equal(sscanf(r.out, "%d", &pid), 1);
        assert_false(process_gone(pid));
        kill(pid, SIGKILL);
        exec_result_free(&r);
}

static void test_exec_window(void **state)
{
        struct exec_result r;

        (void)state;
        run(8, &r, "{\"command\":\"yes abcdefg | head -c 5242880; echo done >&2\"}");
        assert_int_equal(exit_code(&r), 0);
        assert_int_equal(r.out_len, 5 * 1024 * 1024);
        for (size_t i = 0; i < r.out_len; i++)
                if (r.out[i] != "abcdefg\n"[i % 8])
                        fail_msg("byte %zu differs", i);
        assert_string_equal(r.err, "done\n");
        assert_true(r.hit_window);
        exec_result_free(&r);
}

static void test_many_concurrent(void **state)
{
        unsigned ended = 0;

        (void)state;
        for (uint32_t id = 100; id < 120; id++)
                send_exec(conn, id, "{\"command\":\"echo %u\"}", id);
        while (ended < 20) {
                struct rframe f;

                assert_true(recv_frame(conn, &f));
                assert_true(f.stream >= 100 && f.stream < 120);
                if (f.type == FRAME_STDOUT) {
                        char want[16];

                        snprintf(want, sizeof(want), "%u\n", f.stream);
                        assert_string_equal((char *)f.payload, want);
                }
                if (f.type == FRAME_EXIT)
                        ended++;
                free(f.payload);
        }
}

/* ---- files ---- */

static json_t *file_op(uint32_t stream, uint8_t *ret_type, const char *fmt, ...)
{
        char text[8192];
        struct rframe f;
        va_list ap;
        json_t *j;

        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        send_frame(conn, FRAME_FILE_OP, stream, text, strlen(text));
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.stream, stream);
        assert_true(f.type == FRAME_RESULT || f.type == FRAME_ERROR);
        *ret_type = f.type;
        j = frame_json(&f);
        free(f.payload);
        return j;
}

static void expect_ok(uint32_t stream, const char *fmt, const char *a, const char *b)
{
        uint8_t type;
        json_t *j = file_op(stream, &type, fmt, a, b);

        if (type != FRAME_RESULT)
                fail_msg("%s: %s", fmt, json_string_value(json_object_get(j, "message")));
        json_decref(j);
}

static void expect_error(uint32_t stream, const char *code, const char *fmt, const char *a,
                         const char *b)
{
        uint8_t type;
        json_t *j = file_op(stream, &type, fmt, a, b);

        assert_int_equal(type, FRAME_ERROR);
        assert_string_equal(error_code(j), code);
        json_decref(j);
}

/* Upload data with FILE_WRITE, honouring the agent's window. Returns the RESULT size. */
static json_t *upload(uint32_t stream, const char *path, int mode, const uint8_t *data, size_t len,
                      uint8_t *ret_type)
{
        uint64_t credit = CELLA_STREAM_WINDOW;
        size_t sent = 0;
        struct rframe f;
        json_t *j;

        if (mode >= 0)
                send_json(conn, FRAME_FILE_WRITE, stream, "{\"path\":\"%s\",\"mode\":%d}", path,
                          mode);
        else
                send_json(conn, FRAME_FILE_WRITE, stream, "{\"path\":\"%s\"}", path);
        while (sent < len) {
                size_t n =
                        len - sent < CELLA_FRAME_DATA_CHUNK ? len - sent : CELLA_FRAME_DATA_CHUNK;
                uint32_t w;

                if (credit >= n) {
                        send_frame(conn, FRAME_DATA, stream, data + sent, n);
                        credit -= n;
                        sent += n;
                        continue;
                }
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, stream);
                assert_int_equal(f.type, FRAME_WINDOW);
                assert_int_equal(f.len, 4);
                w = (uint32_t)f.payload[0] << 24 | (uint32_t)f.payload[1] << 16 |
                    (uint32_t)f.payload[2] << 8 | f.payload[3];
                credit += w;
                free(f.payload);
        }
        send_frame(conn, FRAME_END, stream, NULL, 0);
        for (;;) {
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, stream);
                if (f.type != FRAME_WINDOW)
                        break;
                free(f.payload);
        }
        assert_true(f.type == FRAME_RESULT || f.type == FRAME_ERROR);
        *ret_type = f.type;
        j = frame_json(&f);
        free(f.payload);
        return j;
}

/* FILE_READ path; returns the bytes (malloc'd) or NULL with *ret_err set to the ERROR. */
static uint8_t *download(uint32_t stream, const char *path, size_t *ret_len, json_t **ret_err)
{
        uint8_t *data = NULL;
        size_t len = 0;
        int64_t size = -1;
        struct rframe f;

        *ret_err = NULL;
        send_json(conn, FRAME_FILE_READ, stream, "{\"path\":\"%s\"}", path);
        for (;;) {
                json_t *j;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, stream);
                switch (f.type) {
                case FRAME_FILE_INFO:
                        j = frame_json(&f);
                        assert_string_equal(json_string_value(json_object_get(j, "type")), "file");
                        size = json_integer_value(json_object_get(j, "size"));
                        json_decref(j);
                        break;
                case FRAME_DATA:
                        assert_true(size >= 0);
                        data = realloc(data, len + f.len + 1);
                        assert_non_null(data);
                        memcpy(data + len, f.payload, f.len);
                        len += f.len;
                        send_window(conn, stream, f.len);
                        break;
                case FRAME_RESULT:
                        j = frame_json(&f);
                        assert_int_equal(json_integer_value(json_object_get(j, "size")), len);
                        assert_int_equal(size, (int64_t)len);
                        json_decref(j);
                        free(f.payload);
                        *ret_len = len;
                        return data ? data : calloc(1, 1);
                case FRAME_ERROR:
                        *ret_err = frame_json(&f);
                        free(f.payload);
                        free(data);
                        return NULL;
                default:
                        fail_msg("unexpected frame %d", f.type);
                }
                free(f.payload);
        }
}

/* A file cut while it is read: the stream ends with ERROR after the bytes the file still
 * held were sent in whole frames, never with a RESULT or with bytes it never held. */
static void test_file_read_shrinks(void **state)
{
        const size_t size = 3 * CELLA_STREAM_WINDOW, cut = CELLA_STREAM_WINDOW + 12345;
        uint8_t *data, *got;
        size_t len = 0;
        char path[256];
        bool window_sent = false, ended = false;
        struct rframe f;
        FILE *fp;

        (void)state;
        data = malloc(size);
        got = malloc(size);
        assert_non_null(data);
        assert_non_null(got);
        for (size_t i = 0; i < size; i++)
                data[i] = (uint8_t)((i * 2654435761u) >> 11);
        snprintf(path, sizeof(path), "%s/shrinks.bin", tmpdir);
        fp = fopen(path, "wb");
        assert_non_null(fp);
        assert_int_equal(fwrite(data, 1, size, fp), size);
        assert_int_equal(fclose(fp), 0);

        send_json(conn, FRAME_FILE_READ, 30, "{\"path\":\"%s\"}", path);
        while (!ended) {
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 30);
                switch (f.type) {
                case FRAME_FILE_INFO:
                        break;
                case FRAME_DATA:
                        assert_true(len + f.len <= size);
                        memcpy(got + len, f.payload, f.len);
                        len += f.len;
                        /* the first window is used up: cut the file, then give credit */
                        if (len == CELLA_STREAM_WINDOW && !window_sent) {
                                assert_int_equal(truncate(path, (off_t)cut), 0);
                                send_window(conn, 30, CELLA_STREAM_WINDOW);
                                window_sent = true;
                        }
                        break;
                case FRAME_ERROR:
                        ended = true;
                        break;
                default:
                        fail_msg("unexpected frame %d", f.type);
                }
                free(f.payload);
        }
        assert_true(window_sent);
        assert_true(len >= CELLA_STREAM_WINDOW && len <= cut);
        assert_memory_equal(got, data, len);
        unlink(path);
        free(data);
        free(got);
}

static void test_file_write_read(void **state)
{
        const size_t size = 5 * 1024 * 1024;
        char path[256], dir[128];
        uint8_t *data, *back, type;
        json_t *j, *err;
        struct stat st;
        size_t len;
        DIR *d;
        struct dirent *de;

        (void)state;
        data = malloc(size);
        assert_non_null(data);
        for (size_t i = 0; i < size; i++)
                data[i] = (uint8_t)((i * 2654435761u) >> 13);
        snprintf(dir, sizeof(dir), "%s/up/nested", tmpdir);
        snprintf(path, sizeof(path), "%s/big.bin", dir);
        j = upload(20, path, -1, data, size, &type);
        assert_int_equal(type, FRAME_RESULT);
        assert_int_equal(json_integer_value(json_object_get(j, "size")), size);
        json_decref(j);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, size);
        assert_int_equal(st.st_mode & 07777, 0644);
        assert_int_equal(stat(dir, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755);

        back = download(21, path, &len, &err);
        assert_non_null(back);
        assert_int_equal(len, size);
        assert_memory_equal(back, data, size);
        free(back);

        /* overwrite keeps the mode; an explicit mode wins */
        assert_int_equal(chmod(path, 0600), 0);
        j = upload(22, path, -1, (const uint8_t *)"short", 5, &type);
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 5);
        assert_int_equal(st.st_mode & 07777, 0600);
        j = upload(23, path, 0751, (const uint8_t *)"", 0, &type);
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 0);
        assert_int_equal(st.st_mode & 07777, 0751);

        /* a cancelled upload leaves the old file and no temporary file */
        send_json(conn, FRAME_FILE_WRITE, 24, "{\"path\":\"%s\"}", path);
        send_frame(conn, FRAME_DATA, 24, "partial", 7);
        send_frame(conn, FRAME_CANCEL, 24, NULL, 0);
        for (;;) {
                struct rframe f;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 24);
                free(f.payload);
                if (f.type == FRAME_ERROR)
                        break;
                assert_int_equal(f.type, FRAME_WINDOW);
        }
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 0);
        d = opendir(dir);
        assert_non_null(d);
        while ((de = readdir(d)))
                assert_null(strstr(de->d_name, "cella-upload"));
        closedir(d);

        /* errors */
        j = upload(25, dir, -1, (const uint8_t *)"x", 1, &type);
        assert_int_equal(type, FRAME_ERROR);
        assert_string_equal(error_code(j), "IS_DIRECTORY");
        json_decref(j);
        back = download(26, dir, &len, &err);
        assert_null(back);
        assert_string_equal(error_code(err), "IS_DIRECTORY");
        json_decref(err);
        snprintf(path, sizeof(path), "%s/nope", tmpdir);
        back = download(27, path, &len, &err);
        assert_null(back);
        assert_string_equal(error_code(err), "FILE_NOT_FOUND");
        json_decref(err);
        free(data);
}

static void touch(const char *dir, const char *name)
{
        char p[512];
        int fd;

        snprintf(p, sizeof(p), "%s/%s", dir, name);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        write_all(fd, "hello", 5);
        close(fd);
}

/* List dir; returns the RESULT count and checks each FILE_INFO's relativePath against
 * the '|'-separated set in want (any order). */
static int list(uint32_t stream, const char *dir, bool recursive, bool hidden, const char *want)
{
        struct rframe f;
        int count = 0;

        send_json(conn, FRAME_FILE_OP, stream,
                  "{\"op\":\"list\",\"path\":\"%s\",\"recursive\":%s,\"includeHidden\":%s}", dir,
                  recursive ? "true" : "false", hidden ? "true" : "false");
        for (;;) {
                json_t *j;
                char needle[300], abs[600];
                const char *rel;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, stream);
                j = frame_json(&f);
                if (f.type != FRAME_FILE_INFO) {
                        int n;

                        assert_int_equal(f.type, FRAME_RESULT);
                        n = (int)json_integer_value(json_object_get(j, "count"));
                        assert_int_equal(n, count);
                        json_decref(j);
                        free(f.payload);
                        return n;
                }
                rel = json_string_value(json_object_get(j, "relativePath"));
                assert_non_null(rel);
                snprintf(needle, sizeof(needle), "|%s|", rel);
                if (!strstr(want, needle))
                        fail_msg("unexpected entry %s", rel);
                snprintf(abs, sizeof(abs), "%s/%s", dir, rel);
                assert_string_equal(json_string_value(json_object_get(j, "absolutePath")), abs);
                assert_non_null(json_object_get(j, "modifiedAt"));
                assert_non_null(json_object_get(j, "permissions"));
                count++;
                json_decref(j);
                free(f.payload);
        }
}

static void test_file_ops(void **state)
{
        char d[128], p[256], q[256];
        uint8_t type;
        json_t *j;

        (void)state;
        snprintf(d, sizeof(d), "%s/ops", tmpdir);
        expect_ok(30, "{\"op\":\"mkdir\",\"path\":\"%s\",\"recursive\":false}", d, NULL);
        expect_error(30, "FILE_EXISTS", "{\"op\":\"mkdir\",\"path\":\"%s\"}", d, NULL);
        expect_ok(30, "{\"op\":\"mkdir\",\"path\":\"%s\",\"recursive\":true}", d, NULL);
        snprintf(p, sizeof(p), "%s/x/y", d);
        expect_error(30, "FILE_NOT_FOUND", "{\"op\":\"mkdir\",\"path\":\"%s\"}", p, NULL);
        expect_ok(30, "{\"op\":\"mkdir\",\"path\":\"%s\",\"recursive\":true}", p, NULL);

        touch(d, "a.txt");
        touch(d, ".hidden");
        touch(p, "deep.txt");
        snprintf(q, sizeof(q), "%s/link", d);
        assert_int_equal(symlink("/", q), 0);

        j = file_op(31, &type, "{\"op\":\"exists\",\"path\":\"%s/a.txt\"}", d);
        assert_int_equal(type, FRAME_RESULT);
        assert_true(json_is_true(json_object_get(j, "exists")));
        assert_string_equal(json_string_value(json_object_get(j, "type")), "file");
        json_decref(j);
        j = file_op(31, &type, "{\"op\":\"exists\",\"path\":\"%s/none\"}", d);
        assert_int_equal(type, FRAME_RESULT);
        assert_true(json_is_false(json_object_get(j, "exists")));
        json_decref(j);

        j = file_op(32, &type, "{\"op\":\"stat\",\"path\":\"%s/a.txt\"}", d);
        assert_int_equal(type, FRAME_RESULT);
        assert_string_equal(json_string_value(json_object_get(j, "name")), "a.txt");
        assert_int_equal(json_integer_value(json_object_get(j, "size")), 5);
        assert_string_equal(json_string_value(json_object_get(j, "mode")), "rw-r--r--");
        json_decref(j);
        expect_error(32, "FILE_NOT_FOUND", "{\"op\":\"stat\",\"path\":\"%s/none\"}", d, NULL);

        assert_int_equal(list(33, d, false, false, "|a.txt|x|link|"), 3);
        assert_int_equal(list(33, d, false, true, "|a.txt|x|link|.hidden|"), 4);
        /* recursive, and the symlink to / is not followed */
        assert_int_equal(list(33, d, true, false, "|a.txt|x|link|x/y|x/y/deep.txt|"), 5);
        snprintf(q, sizeof(q), "%s/a.txt", d);
        expect_error(33, "NOT_DIRECTORY", "{\"op\":\"list\",\"path\":\"%s\"}", q, NULL);
        expect_error(33, "FILE_NOT_FOUND", "{\"op\":\"list\",\"path\":\"%s/none\"}", d, NULL);

        snprintf(q, sizeof(q), "%s/b.txt", d);
        expect_ok(34, "{\"op\":\"move\",\"from\":\"%s/a.txt\",\"to\":\"%s\"}", d, q);
        assert_int_equal(access(q, F_OK), 0);
        expect_error(34, "FILE_NOT_FOUND", "{\"op\":\"move\",\"from\":\"%s/a.txt\",\"to\":\"%s\"}",
                     d, q);

        /* deleting the symlink removes the link, not what it points to */
        expect_ok(35, "{\"op\":\"delete\",\"path\":\"%s/link\"}", d, NULL);
        assert_int_equal(access("/", F_OK), 0);
        expect_ok(35, "{\"op\":\"delete\",\"path\":\"%s\"}", q, NULL);
        assert_int_equal(access(q, F_OK), -1);
        snprintf(q, sizeof(q), "%s/x", d);
        expect_error(35, "IS_DIRECTORY", "{\"op\":\"delete\",\"path\":\"%s\"}", q, NULL);
        expect_ok(35, "{\"op\":\"delete\",\"path\":\"%s\",\"recursive\":true}", q, NULL);
        assert_int_equal(access(q, F_OK), -1);
        expect_error(35, "FILE_NOT_FOUND", "{\"op\":\"delete\",\"path\":\"%s\"}", q, NULL);
        expect_error(36, "VALIDATION_FAILED", "{\"op\":\"chmod\",\"path\":\"%s\"}", q, NULL);
        expect_error(36, "VALIDATION_FAILED", "{\"op\":\"stat\",\"path\":\"rel%s\"}", q, NULL);
}

/* ---- sessions ---- */

/* A SESSION request; returns its final frame's payload (RESULT or ERROR) and type. */
static json_t *session_call(uint32_t stream, uint8_t *ret_type, const char *fmt, ...)
{
        char text[4096];
        struct rframe f;
        va_list ap;
        json_t *j;

        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        send_frame(conn, FRAME_SESSION, stream, text, strlen(text));
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.stream, stream);
        *ret_type = f.type;
        j = frame_json(&f);
        free(f.payload);
        return j;
}

/* EXEC in a session; fields is the rest of the JSON object (no cwd: nothing is added). */
static void run_in_session(uint32_t stream, struct exec_result *r, const char *session,
                           const char *fields)
{
        char text[4096];

        memset(r, 0, sizeof(r[0]));
        snprintf(text, sizeof(text), "{\"session\":\"%s\",%s}", session, fields);
        send_frame(conn, FRAME_EXEC, stream, text, strlen(text));
        collect(conn, stream, r);
}

static void test_sessions(void **state)
{
        struct exec_result r;
        uint8_t type;
        json_t *j;
        int pid;

        (void)state;
        /* the default session's cwd, /workspace, does not exist outside a sandbox (as when
         * a tenant removed it): the shell starts in / instead */
        run_in_session(40, &r, "default", "\"command\":\"pwd\"");
        assert_int_equal(exit_code(&r), 0);
        assert_int_equal(r.out_len, 2);
        assert_memory_equal(r.out, "/\n", 2);
        exec_result_free(&r);

        j = session_call(41, &type,
                         "{\"op\":\"create\",\"id\":\"s1\",\"cwd\":\"%s\",\"env\":{\"A\":\"1\"},"
                         "\"baseEnv\":{\"B\":\"2\"}}",
                         tmpdir);
        assert_int_equal(type, FRAME_RESULT);
        assert_string_equal(json_string_value(json_object_get(j, "id")), "s1");
        json_decref(j);
        j = session_call(42, &type, "{\"op\":\"create\",\"id\":\"s1\"}");
        assert_int_equal(type, FRAME_ERROR);
        assert_string_equal(error_code(j), "SESSION_ALREADY_EXISTS");
        json_decref(j);

        /* state persists; output is byte-exact */
        run_in_session(43, &r, "s1", "\"command\":\"cd /; export C=3; f() { printf 'x\\\\0y'; }\"");
        assert_int_equal(exit_code(&r), 0);
        exec_result_free(&r);
        run_in_session(44, &r, "s1", "\"command\":\"echo $PWD $A $B $C; f\"");
        assert_int_equal(exit_code(&r), 0);
        assert_int_equal(r.out_len, 11);
        assert_memory_equal(r.out, "/ 1 2 3\nx\0y", 11);
        exec_result_free(&r);

        /* a timeout kills what the command started and keeps the shell and its state */
        run_in_session(45, &r, "s1",
                       "\"command\":\"sleep 1000 & echo $!; sleep 1000\",\"timeoutMs\":300");
        (void)exit_code(&r); /* an EXIT (fails with the error's code otherwise) */
        assert_true(json_is_true(json_object_get(r.end, "timedOut")));
        assert_int_equal(json_integer_value(json_object_get(r.end, "timeoutMs")), 300);
        assert_int_equal(sscanf(r.out, "%d", &pid), 1);
        assert_true(wait_gone(pid));
        exec_result_free(&r);
        run_in_session(46, &r, "s1", "\"command\":\"echo $PWD $C\"");
        assert_string_equal(r.out, "/ 3\n");
        exec_result_free(&r);

        /* CANCEL stops the command the same way */
        send_frame(conn, FRAME_EXEC, 47, "{\"session\":\"s1\",\"command\":\"sleep 1001\"}",
                   strlen("{\"session\":\"s1\",\"command\":\"sleep 1001\"}"));
        {
                struct rframe f;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.type, FRAME_STARTED);
                free(f.payload);
        }
        send_frame(conn, FRAME_CANCEL, 47, NULL, 0);
        memset(&r, 0, sizeof(r));
        r.started = true;
        collect(conn, 47, &r);
        (void)exit_code(&r);
        assert_false(json_is_true(json_object_get(r.end, "timedOut")));
        exec_result_free(&r);

        /* setenv applies between commands */
        j = session_call(48, &type,
                         "{\"op\":\"setenv\",\"id\":\"s1\",\"env\":{\"A\":\"9\",\"C\":null}}");
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        run_in_session(49, &r, "s1", "\"command\":\"echo $A ${C-unset}\"");
        assert_string_equal(r.out, "9 unset\n");
        exec_result_free(&r);

        /* setenv while a command runs: answered at once; the lines reach the shell behind
         * the running command's line, so that command keeps the env it started with and the
         * next one has the new one (decision 0059) */
        {
                struct rframe f;

                memset(&r, 0, sizeof(r));
                send_frame(conn, FRAME_EXEC, 55,
                           "{\"session\":\"s1\",\"command\":\"sleep 0.3; echo $A\"}",
                           strlen("{\"session\":\"s1\",\"command\":\"sleep 0.3; echo $A\"}"));
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 55);
                assert_int_equal(f.type, FRAME_STARTED);
                free(f.payload);
                r.started = true;
                j = session_call(56, &type,
                                 "{\"op\":\"setenv\",\"id\":\"s1\",\"env\":{\"A\":\"10\"}}");
                assert_int_equal(type, FRAME_RESULT);
                json_decref(j);
                collect(conn, 55, &r);
                assert_int_equal(exit_code(&r), 0);
                assert_string_equal(r.out, "9\n");
                exec_result_free(&r);
                run_in_session(57, &r, "s1", "\"command\":\"echo $A\"");
                assert_string_equal(r.out, "10\n");
                exec_result_free(&r);
                j = session_call(58, &type,
                                 "{\"op\":\"setenv\",\"id\":\"s1\",\"env\":{\"A\":\"9\"}}");
                assert_int_equal(type, FRAME_RESULT);
                json_decref(j);
        }

        /* exit ends the shell: SESSION_TERMINATED, then a fresh shell with the session's env */
        run_in_session(50, &r, "s1", "\"command\":\"echo bye; exit 3\"");
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_string_equal(error_code(r.end), "SESSION_TERMINATED");
        assert_int_equal(json_integer_value(json_object_get(r.end, "exitCode")), 3);
        assert_string_equal(r.out, "bye\n");
        exec_result_free(&r);
        run_in_session(51, &r, "s1", "\"command\":\"echo $A ${C-unset}\"");
        assert_string_equal(r.out, "9 unset\n");
        exec_result_free(&r);

        j = session_call(52, &type, "{\"op\":\"list\"}");
        assert_int_equal(type, FRAME_RESULT);
        /* s1 and default (started in /) */
        assert_int_equal(json_array_size(json_object_get(j, "sessions")), 2);
        json_decref(j);
        j = session_call(53, &type, "{\"op\":\"delete\",\"id\":\"s1\"}");
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        run_in_session(54, &r, "s1", "\"command\":\"true\"");
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_string_equal(error_code(r.end), "SESSION_NOT_FOUND");
        exec_result_free(&r);
}

static void test_ping(void **state)
{
        struct rframe f;

        (void)state;
        send_frame(conn, FRAME_PING, 0, "abc", 3);
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_PONG);
        assert_int_equal(f.len, 3);
        assert_memory_equal(f.payload, "abc", 3);
        free(f.payload);
}

static void test_malformed_and_reconnect(void **state)
{
        uint8_t hdr[CELLA_FRAME_HEADER];
        struct exec_result r;
        struct rframe f;
        int old;

        (void)state;
        /* non-zero flags: protocol error, the connection is closed */
        frame_header_pack(hdr, FRAME_PING, 0, 0);
        hdr[5] = 1;
        write_all(conn, hdr, sizeof(hdr));
        assert_false(recv_frame(conn, &f));
        close(conn);

        /* the agent keeps running and serves a new connection */
        conn = connect_agent();
        run(40, &r, "{\"command\":\"echo again\"}");
        assert_string_equal(r.out, "again\n");
        exec_result_free(&r);

        /* a frame the daemon never sends closes the connection too */
        send_json(conn, FRAME_RESULT, 41, "{}");
        assert_false(recv_frame(conn, &f));
        close(conn);

        /* a new connection replaces the old one, whose running command is killed */
        conn = connect_agent();
        send_exec(conn, 42, "{\"command\":\"echo $$; exec sleep 1000\"}");
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_STARTED);
        free(f.payload);
        old = conn;
        conn = connect_agent();
        for (;;) {
                if (!recv_frame(old, &f))
                        break;
                free(f.payload);
        }
        close(old);
        run(43, &r, "{\"command\":\"echo fine\"}");
        assert_string_equal(r.out, "fine\n");
        exec_result_free(&r);
}

/* ---- background processes (PROC) ---- */

struct pcall {
        char *out, *err;
        size_t out_len, err_len;
        bool started;
        uint8_t end_type; /* RESULT or ERROR */
        json_t *end;
};

static void pcall_free(struct pcall *r)
{
        free(r->out);
        free(r->err);
        json_decref(r->end);
        memset(r, 0, sizeof(*r));
}

/* Collect a PROC stream until RESULT or ERROR, acknowledging output as it comes. */
static void pcollect(int fd, uint32_t stream, struct pcall *r)
{
        for (;;) {
                struct rframe f;

                assert_true(recv_frame(fd, &f));
                assert_int_equal(f.stream, stream);
                switch (f.type) {
                case FRAME_STARTED:
                        r->started = true;
                        break;
                case FRAME_STDOUT:
                case FRAME_STDERR:
                        if (f.type == FRAME_STDOUT)
                                append(&r->out, &r->out_len, f.payload, f.len);
                        else
                                append(&r->err, &r->err_len, f.payload, f.len);
                        send_window(fd, stream, f.len);
                        break;
                case FRAME_RESULT:
                case FRAME_ERROR:
                        r->end_type = f.type;
                        r->end = frame_json(&f);
                        free(f.payload);
                        return;
                default:
                        fail_msg("unexpected frame type %d", f.type);
                }
                free(f.payload);
        }
}

static void pcall(uint32_t stream, struct pcall *r, const char *fmt, ...) _printf_(3, 4);
static void pcall(uint32_t stream, struct pcall *r, const char *fmt, ...)
{
        char text[8192];
        va_list ap;

        memset(r, 0, sizeof(*r));
        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        send_frame(conn, FRAME_PROC, stream, text, strlen(text));
        pcollect(conn, stream, r);
}

static const char *jstr(json_t *j, const char *k)
{
        const char *s = json_string_value(json_object_get(j, k));

        return s ? s : "";
}

static void expect_result(const struct pcall *r)
{
        if (r->end_type != FRAME_RESULT)
                fail_msg("expected RESULT, got %d: %s %s", r->end_type, jstr(r->end, "code"),
                         jstr(r->end, "message"));
}

static void expect_code(const struct pcall *r, const char *code)
{
        assert_int_equal(r->end_type, FRAME_ERROR);
        assert_string_equal(jstr(r->end, "code"), code);
}

/* A process started in a session takes the session's cwd and env, and dies with it. */
static void test_proc_in_session(void **state)
{
        struct pcall r;
        uint8_t type;
        json_t *j;

        (void)state;
        j = session_call(
                300, &type,
                "{\"op\":\"create\",\"id\":\"ps\",\"cwd\":\"%s\",\"env\":{\"SV\":\"sess\"}}",
                tmpdir);
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        pcall(301, &r,
              "{\"op\":\"start\",\"id\":\"insess\",\"session\":\"ps\","
              "\"command\":\"echo \\\"$SV $PWD\\\"; exec sleep 1000\"}");
        expect_result(&r);
        pcall_free(&r);
        pcall(302, &r, "{\"op\":\"waitLog\",\"id\":\"insess\",\"pattern\":\"sess\"}");
        expect_result(&r);
        {
                char want[200];

                snprintf(want, sizeof(want), "sess %s", tmpdir);
                assert_string_equal(jstr(r.end, "line"), want);
        }
        pcall_free(&r);
        j = session_call(303, &type, "{\"op\":\"delete\",\"id\":\"ps\"}");
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        pcall(304, &r, "{\"op\":\"waitExit\",\"id\":\"insess\",\"timeoutMs\":20000}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "status"), "killed");
        pcall_free(&r);
        pcall(305, &r, "{\"op\":\"start\",\"session\":\"nope\",\"command\":\"true\"}");
        expect_code(&r, "SESSION_NOT_FOUND");
        pcall_free(&r);
}

static void test_proc_basics(void **state)
{
        struct pcall r;
        int pid;

        (void)state;
        {
                uint8_t type;
                json_t *j = session_call(
                        199, &type, "{\"op\":\"create\",\"id\":\"s1\",\"cwd\":\"%s\"}", tmpdir);

                assert_int_equal(type, FRAME_RESULT);
                json_decref(j);
        }
        pcall(200, &r,
              "{\"op\":\"start\",\"id\":\"one\",\"cwd\":\"%s\",\"command\":"
              "\"echo out; echo err >&2; printf 'a\\\\000b'; exit 3\",\"env\":{\"X\":\"1\"},"
              "\"session\":\"s1\"}",
              tmpdir);
        expect_result(&r);
        assert_string_equal(jstr(r.end, "id"), "one");
        assert_string_equal(jstr(r.end, "sessionId"), "s1");
        pid = (int)json_integer_value(json_object_get(r.end, "pid"));
        assert_true(pid > 1);
        pcall_free(&r);

        pcall(201, &r, "{\"op\":\"waitExit\",\"id\":\"one\"}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "status"), "failed");
        assert_int_equal(json_integer_value(json_object_get(r.end, "exitCode")), 3);
        pcall_free(&r);

        pcall(202, &r, "{\"op\":\"logs\",\"id\":%d}", pid);
        expect_result(&r);
        assert_int_equal(r.out_len, 7);
        assert_memory_equal(r.out, "out\na\0b", 7);
        assert_string_equal(r.err, "err\n");
        pcall_free(&r);

        pcall(203, &r, "{\"op\":\"start\",\"id\":\"one\",\"command\":\"true\"}");
        expect_code(&r, "PROCESS_ALREADY_EXISTS");
        pcall_free(&r);
        pcall(204, &r, "{\"op\":\"get\",\"id\":\"nope\"}");
        expect_code(&r, "PROCESS_NOT_FOUND");
        pcall_free(&r);
        pcall(205, &r, "{\"op\":\"start\",\"command\":\"true\",\"cwd\":\"/no/such/dir\"}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "status"), "error");
        pcall_free(&r);
        pcall(206, &r, "{\"op\":\"kill\",\"id\":\"one\",\"signal\":\"NOPE\"}");
        expect_code(&r, "VALIDATION_FAILED");
        pcall_free(&r);
        pcall(207, &r, "{\"op\":\"list\"}");
        expect_result(&r);
        assert_true(json_array_size(json_object_get(r.end, "processes")) >= 2);
        pcall_free(&r);
}

static void test_proc_stream_and_waits(void **state)
{
        char flag[128];
        struct pcall r;

        (void)state;
        snprintf(flag, sizeof(flag), "%s/go", tmpdir);
        pcall(210, &r,
              "{\"op\":\"start\",\"id\":\"st\",\"cwd\":\"%s\",\"command\":"
              "\"echo first; while [ ! -e %s ]; do sleep 0.02; done; echo second >&2\"}",
              tmpdir, flag);
        expect_result(&r);
        pcall_free(&r);
        pcall(211, &r, "{\"op\":\"waitLog\",\"id\":\"st\",\"pattern\":\"^fi.st$\",\"regex\":true}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "line"), "first");
        assert_string_equal(jstr(r.end, "stream"), "stdout");
        pcall_free(&r);
        pcall(212, &r, "{\"op\":\"waitLog\",\"id\":\"st\",\"pattern\":\"never\",\"timeoutMs\":50}");
        expect_code(&r, "PROCESS_READY_TIMEOUT");
        pcall_free(&r);
        pcall(213, &r, "{\"op\":\"waitExit\",\"id\":\"st\",\"timeoutMs\":50}");
        expect_code(&r, "PROCESS_READY_TIMEOUT");
        pcall_free(&r);

        /* stream: the output so far, then (once the flag exists) the rest, then RESULT */
        send_frame(conn, FRAME_PROC, 214, "{\"op\":\"stream\",\"id\":\"st\"}",
                   strlen("{\"op\":\"stream\",\"id\":\"st\"}"));
        {
                struct rframe f;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.type, FRAME_STARTED);
                free(f.payload);
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.type, FRAME_STDOUT);
                assert_int_equal(f.len, 6);
                assert_memory_equal(f.payload, "first\n", 6);
                send_window(conn, 214, f.len);
                free(f.payload);
        }
        close(open(flag, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        memset(&r, 0, sizeof(r));
        pcollect(conn, 214, &r);
        expect_result(&r);
        assert_string_equal(r.err, "second\n");
        assert_string_equal(jstr(r.end, "status"), "completed");
        pcall_free(&r);

        pcall(215, &r, "{\"op\":\"waitLog\",\"id\":\"st\",\"pattern\":\"never\"}");
        expect_code(&r, "PROCESS_EXITED_BEFORE_READY");
        pcall_free(&r);
        pcall(216, &r, "{\"op\":\"waitLog\",\"id\":\"st\",\"pattern\":\"cond\"}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "stream"), "stderr");
        pcall_free(&r);
        pcall(217, &r, "{\"op\":\"waitPort\",\"id\":\"st\",\"port\":9}");
        expect_code(&r, "PROCESS_EXITED_BEFORE_READY");
        pcall_free(&r);
}

static void test_proc_kill_and_reconnect(void **state)
{
        struct pcall r;
        struct rframe f;

        (void)state;
        /* SIGTERM ignored: SIGKILL after the grace */
        pcall(220, &r,
              "{\"op\":\"start\",\"id\":\"stubborn\",\"cwd\":\"%s\",\"command\":"
              "\"trap '' TERM; echo armed; while true; do sleep 0.05; done\"}",
              tmpdir);
        expect_result(&r);
        pcall_free(&r);
        pcall(221, &r, "{\"op\":\"waitLog\",\"id\":\"stubborn\",\"pattern\":\"armed\"}");
        pcall_free(&r);
        pcall(222, &r, "{\"op\":\"kill\",\"id\":\"stubborn\"}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "status"), "killed");
        assert_int_equal(json_integer_value(json_object_get(r.end, "signal")), 9);
        pcall_free(&r);

        /* a lost connection leaves processes running; followers on it are dropped */
        pcall(223, &r,
              "{\"op\":\"start\",\"id\":\"keep\",\"cwd\":\"%s\",\"command\":\"sleep 1000\"}",
              tmpdir);
        expect_result(&r);
        pcall_free(&r);
        send_frame(conn, FRAME_PROC, 224, "{\"op\":\"waitExit\",\"id\":\"keep\"}",
                   strlen("{\"op\":\"waitExit\",\"id\":\"keep\"}"));
        send_frame(conn, FRAME_PROC, 225, "{\"op\":\"stream\",\"id\":\"keep\"}",
                   strlen("{\"op\":\"stream\",\"id\":\"keep\"}"));
        assert_true(recv_frame(conn, &f)); /* STARTED of the stream */
        assert_int_equal(f.type, FRAME_STARTED);
        free(f.payload);
        close(conn);
        conn = connect_agent();
        pcall(226, &r, "{\"op\":\"get\",\"id\":\"keep\"}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "status"), "running");
        pcall_free(&r);
        /* CANCEL ends a wait */
        send_frame(conn, FRAME_PROC, 227, "{\"op\":\"waitExit\",\"id\":\"keep\"}",
                   strlen("{\"op\":\"waitExit\",\"id\":\"keep\"}"));
        send_frame(conn, FRAME_CANCEL, 227, NULL, 0);
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.stream, 227);
        assert_int_equal(f.type, FRAME_ERROR);
        free(f.payload);
        pcall(228, &r, "{\"op\":\"killall\",\"signal\":\"SIGKILL\"}");
        expect_result(&r);
        assert_int_equal(json_integer_value(json_object_get(r.end, "killed")), 1);
        pcall_free(&r);
        pcall(229, &r, "{\"op\":\"waitExit\",\"id\":\"keep\"}");
        expect_result(&r);
        assert_string_equal(jstr(r.end, "status"), "killed");
        pcall_free(&r);
}

/* More processes than the table keeps: the oldest finished ones are forgotten with their
 * logs, so the table (and the log directory) stay bounded. */
static void test_proc_table_bounded(void **state)
{
        char dir[128];
        struct pcall r;
        int nlogs = 0;
        DIR *d;
        struct dirent *de;

        (void)state;
        for (int i = 0; i < CELLA_PROC_MAX + 50; i++) {
                pcall(300, &r,
                      "{\"op\":\"start\",\"id\":\"t%d\",\"cwd\":\"%s\",\"command\":\"true\"}", i,
                      tmpdir);
                expect_result(&r);
                pcall_free(&r);
                pcall(301, &r, "{\"op\":\"waitExit\",\"id\":\"t%d\"}", i);
                expect_result(&r);
                pcall_free(&r);
        }
        pcall(302, &r, "{\"op\":\"list\"}");
        expect_result(&r);
        assert_true(json_array_size(json_object_get(r.end, "processes")) <= CELLA_PROC_MAX);
        pcall_free(&r);
        pcall(303, &r, "{\"op\":\"get\",\"id\":\"t0\"}");
        expect_code(&r, "PROCESS_NOT_FOUND");
        pcall_free(&r);
        pcall(304, &r, "{\"op\":\"get\",\"id\":\"t%d\"}", CELLA_PROC_MAX + 49);
        expect_result(&r);
        pcall_free(&r);
        snprintf(dir, sizeof(dir), "%s/proclogs", tmpdir);
        d = opendir(dir);
        assert_non_null(d);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        nlogs++;
        closedir(d);
        assert_true(nlogs <= CELLA_PROC_MAX);
}

/* Output larger than the stream window comes back whole through logs (flow-controlled). */
static void test_proc_big_logs(void **state)
{
        struct pcall r;

        (void)state;
        pcall(310, &r,
              "{\"op\":\"start\",\"id\":\"big\",\"cwd\":\"%s\",\"command\":"
              "\"head -c 3000000 /dev/zero | tr '\\\\0' x\"}",
              tmpdir);
        expect_result(&r);
        pcall_free(&r);
        pcall(311, &r, "{\"op\":\"waitExit\",\"id\":\"big\"}");
        pcall_free(&r);
        pcall(312, &r, "{\"op\":\"logs\",\"id\":\"big\"}");
        expect_result(&r);
        assert_int_equal(r.out_len, 3000000);
        assert_int_equal(r.out[2999999], 'x');
        pcall_free(&r);
}

/* ---- code interpreter (CODE frames; needs python3 on the host) ---- */

struct ccall {
        char *out, *data;
        size_t out_len, data_len;
        uint8_t end_type; /* RESULT or ERROR */
        json_t *end;
        bool hit_window;
};

static void ccall_free(struct ccall *r)
{
        free(r->out);
        free(r->data);
        json_decref(r->end);
        memset(r, 0, sizeof(*r));
}

/* Send a CODE request and collect its stream until RESULT or ERROR. Data (STDOUT, STDERR,
 * DATA) is acknowledged only when the whole window is outstanding, so the agent must stop
 * at the window's edge. */
static void ccall(uint32_t stream, struct ccall *r, const char *text)
{
        uint64_t unacked = 0;

        memset(r, 0, sizeof(*r));
        send_frame(conn, FRAME_CODE, stream, text, strlen(text));
        for (;;) {
                struct rframe f;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, stream);
                switch (f.type) {
                case FRAME_STDOUT:
                case FRAME_STDERR:
                case FRAME_DATA:
                        if (f.type == FRAME_DATA)
                                append(&r->data, &r->data_len, f.payload, f.len);
                        else
                                append(&r->out, &r->out_len, f.payload, f.len);
                        take_credit(conn, stream, &unacked, f.len, &r->hit_window);
                        break;
                case FRAME_RESULT:
                case FRAME_ERROR:
                        r->end_type = f.type;
                        r->end = frame_json(&f);
                        free(f.payload);
                        return;
                default:
                        fail_msg("unexpected frame type %d", f.type);
                }
                free(f.payload);
        }
}

static void test_code(void **state)
{
        struct ccall r;
        char ctx[80], text[256];

        (void)state;
        if (access("/usr/bin/python3", X_OK) != 0)
                skip();
        ccall(300, &r, "{\"op\":\"create\",\"language\":\"python\",\"cwd\":\"/tmp\"}");
        if (r.end_type != FRAME_RESULT)
                fail_msg("create: %s %s", jstr(r.end, "code"), jstr(r.end, "message"));
        snprintf(ctx, sizeof(ctx), "%s", jstr(r.end, "id"));
        assert_int_equal(strncmp(ctx, "ctx-", 4), 0);
        assert_string_equal(jstr(r.end, "cwd"), "/tmp");
        ccall_free(&r);

        /* 5 MiB of output from one run: the agent stops at each window's edge */
        snprintf(text, sizeof(text),
                 "{\"op\":\"run\",\"id\":\"%s\",\"code\":\"import sys\\nfor i in range(5):\\n"
                 "    sys.stdout.write('y' * 1048576)\\n'end'\"}",
                 ctx);
        ccall(301, &r, text);
        assert_int_equal(r.end_type, FRAME_RESULT);
        assert_int_equal(r.out_len, 5 * 1024 * 1024);
        assert_true(r.hit_window);
        assert_int_equal(json_integer_value(json_object_get(r.end, "executionCount")), 1);
        assert_non_null(r.data);
        assert_non_null(strstr(r.data, "\"type\":\"result\""));
        assert_non_null(strstr(r.data, "'end'"));
        assert_int_equal(r.data[r.data_len - 1], '\n');
        ccall_free(&r);

        ccall(302, &r, "{\"op\":\"run\",\"id\":\"no-such\",\"code\":\"1\"}");
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_string_equal(jstr(r.end, "code"), "CONTEXT_NOT_FOUND");
        ccall_free(&r);
        ccall(303, &r, "{\"op\":\"run\",\"code\":\"1\",\"timeoutMs\":-1}");
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_string_equal(jstr(r.end, "code"), "VALIDATION_FAILED");
        ccall_free(&r);

        ccall(304, &r, "{\"op\":\"list\"}");
        assert_int_equal(r.end_type, FRAME_RESULT);
        assert_int_equal(json_array_size(json_object_get(r.end, "contexts")), 1);
        ccall_free(&r);
        snprintf(text, sizeof(text), "{\"op\":\"delete\",\"id\":\"%s\"}", ctx);
        ccall(305, &r, text);
        assert_int_equal(r.end_type, FRAME_RESULT);
        ccall_free(&r);
        ccall(306, &r, text);
        assert_int_equal(r.end_type, FRAME_ERROR);
        assert_string_equal(jstr(r.end, "code"), "CONTEXT_NOT_FOUND");
        ccall_free(&r);
}

/* ---- the frame table ---- */

/* Send a frame with a JSON payload and read the next frame, which must be on its stream. */
static void call_frame(uint8_t type, uint32_t stream, struct rframe *f, const char *fmt, ...)
        _printf_(4, 5);
static void call_frame(uint8_t type, uint32_t stream, struct rframe *f, const char *fmt, ...)
{
        char text[4096];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(text, sizeof(text), fmt, ap);
        va_end(ap);
        send_frame(conn, type, stream, text, strlen(text));
        assert_true(recv_frame(conn, f));
        assert_int_equal(f->stream, stream);
}

/* A JSON frame of the given type whose object has the key. */
static void expect_frame(struct rframe *f, uint8_t type, const char *key)
{
        json_t *j;

        if (f->type != type)
                fail_msg("expected frame %d, got %d: %s", type, f->type, (char *)f->payload);
        j = frame_json(f);
        assert_non_null(json_object_get(j, key));
        json_decref(j);
        free(f->payload);
}

/* Read the terminal stream's frames until its output contains want. */
static void pty_expect(uint32_t stream, const char *want)
{
        char *out = NULL;
        size_t len = 0;

        while (!out || !strstr(out, want)) {
                struct rframe f;

                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, stream);
                if (f.type == FRAME_STDOUT) {
                        append(&out, &len, f.payload, f.len);
                        send_window(conn, stream, f.len);
                }
                free(f.payload);
        }
        free(out);
}

/* Drain the connection after the agent closed it. */
static void expect_closed(void)
{
        struct rframe f;

        while (recv_frame(conn, &f))
                free(f.payload);
        close(conn);
        conn = connect_agent();
}

/* Every frame type cellad sends reaches its handler through the dispatcher's frame table
 * (src/agent/agent.c); a frame on an open stream reaches that stream's ops; what has no
 * route closes the connection (docs/protocol.md). */
static void test_frame_table(void **state)
{
        char path[160];
        struct exec_result r;
        struct stat st;
        struct rframe f;
        uint8_t type;
        json_t *j;

        (void)state;
        /* EXEC without a session: exec.c (a cwd of its own, the temp dir) */
        run(500, &r, "{\"command\":\"pwd\"}");
        assert_int_equal(exit_code(&r), 0);
        assert_int_equal(strncmp(r.out, tmpdir, strlen(tmpdir)), 0);
        exec_result_free(&r);

        /* SESSION: session.c; EXEC with a session: its shell, where `cd` persists */
        j = session_call(501, &type, "{\"op\":\"create\",\"id\":\"ft\",\"cwd\":\"%s\"}", tmpdir);
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        run_in_session(502, &r, "ft", "\"command\":\"cd /\"");
        exec_result_free(&r);
        run_in_session(503, &r, "ft", "\"command\":\"pwd\"");
        assert_string_equal(r.out, "/\n");
        exec_result_free(&r);
        j = session_call(504, &type, "{\"op\":\"list\"}");
        assert_int_equal(type, FRAME_RESULT);
        assert_non_null(json_object_get(j, "sessions"));
        json_decref(j);

        /* FILE_WRITE with DATA and END (routed to the upload), then FILE_READ and FILE_OP:
         * files.c */
        snprintf(path, sizeof(path), "%s/frame-table", tmpdir);
        send_json(conn, FRAME_FILE_WRITE, 505, "{\"path\":\"%s\"}", path);
        send_frame(conn, FRAME_DATA, 505, "routed", 6);
        send_frame(conn, FRAME_END, 505, NULL, 0);
        for (;;) { /* credit given back for the DATA, then the result */
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 505);
                if (f.type != FRAME_WINDOW)
                        break;
                free(f.payload);
        }
        assert_int_equal(f.type, FRAME_RESULT);
        free(f.payload);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_size, 6);
        call_frame(FRAME_FILE_READ, 506, &f, "{\"path\":\"%s\"}", path);
        expect_frame(&f, FRAME_FILE_INFO, "size");
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_DATA);
        assert_memory_equal(f.payload, "routed", 6);
        free(f.payload);
        assert_true(recv_frame(conn, &f));
        expect_frame(&f, FRAME_RESULT, "size");
        call_frame(FRAME_FILE_OP, 507, &f, "{\"op\":\"exists\",\"path\":\"%s\"}", path);
        expect_frame(&f, FRAME_RESULT, "exists");

        /* PROC: proc.c; CODE: code.c */
        call_frame(FRAME_PROC, 508, &f, "{\"op\":\"list\"}");
        expect_frame(&f, FRAME_RESULT, "processes");
        call_frame(FRAME_CODE, 509, &f, "{\"op\":\"list\"}");
        expect_frame(&f, FRAME_RESULT, "contexts");

        /* WATCH: watch.c (its first event says it watches); its CANCEL reaches the watch,
         * which ends with RESULT after the events already queued (the agent's log is in the
         * watched directory) */
        call_frame(FRAME_WATCH, 510, &f, "{\"path\":\"%s\"}", tmpdir);
        assert_int_equal(f.type, FRAME_DATA);
        assert_non_null(strstr((char *)f.payload, "\"watching\""));
        free(f.payload);
        send_frame(conn, FRAME_CANCEL, 510, NULL, 0);
        for (;;) {
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 510);
                if (f.type != FRAME_DATA)
                        break;
                free(f.payload);
        }
        assert_int_equal(f.type, FRAME_RESULT);
        free(f.payload);

        /* PTY opening a stream: pty.c; PTY on that open stream: a resize of its terminal;
         * DATA on it: keyboard input */
        call_frame(FRAME_PTY, 511, &f, "{\"sessionId\":\"ft\",\"cols\":80,\"rows\":24}");
        expect_frame(&f, FRAME_STARTED, "pid");
        send_json(conn, FRAME_PTY, 511, "{\"cols\":101,\"rows\":31}");
        send_frame(conn, FRAME_DATA, 511, "stty size\n", 10);
        pty_expect(511, "31 101");
        send_frame(conn, FRAME_CANCEL, 511, NULL, 0);
        /* a WINDOW for a stream that is no longer open is dropped, the connection stays */
        send_window(conn, 999, 10);
        send_frame(conn, FRAME_PING, 0, "still", 5);
        for (;;) {
                assert_true(recv_frame(conn, &f));
                if (f.type == FRAME_PONG)
                        break;
                assert_int_equal(f.stream, 511); /* the terminal's last output, its end */
                free(f.payload);
        }
        assert_memory_equal(f.payload, "still", 5);
        free(f.payload);

        /* PTY on an open stream that is not a terminal closes the connection */
        send_exec(conn, 512, "{\"command\":\"exec sleep 1000\"}");
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_STARTED);
        free(f.payload);
        send_json(conn, FRAME_PTY, 512, "{\"cols\":80,\"rows\":24}");
        expect_closed();
        /* so does DATA on a stream that is not an upload */
        send_exec(conn, 513, "{\"command\":\"exec sleep 1000\"}");
        assert_true(recv_frame(conn, &f));
        assert_int_equal(f.type, FRAME_STARTED);
        free(f.payload);
        send_frame(conn, FRAME_DATA, 513, "x", 1);
        expect_closed();
        /* and a type cellad never sends (HELLO), and one no frame has (the header is bad) */
        send_json(conn, FRAME_HELLO, 0, "{}");
        expect_closed();
        send_frame(conn, _FRAME_TYPE_MAX, 514, NULL, 0);
        expect_closed();
        run(515, &r, "{\"command\":\"echo fine\"}");
        assert_string_equal(r.out, "fine\n");
        exec_result_free(&r);
}

/* A resize that crosses the end of its terminal: the shell exited and the agent ended the
 * stream with EXIT while cellad, not having read that EXIT yet, passed a client's resize on
 * as a PTY frame on the same stream. That PTY is a late frame for a stream that ended and is
 * dropped; it must not open a stream (a phantom attach that starts the default session's
 * shell, or a stream cellad never acknowledges, whose window then stalls the terminal). */
static void test_pty_late_resize(void **state)
{
        struct rframe f;
        uint8_t type;
        bool ended = false;
        json_t *j;

        (void)state;
        j = session_call(700, &type, "{\"op\":\"create\",\"id\":\"late\",\"cwd\":\"%s\"}", tmpdir);
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
        send_json(conn, FRAME_PTY, 701, "{\"sessionId\":\"late\",\"cols\":80,\"rows\":24}");
        send_frame(conn, FRAME_DATA, 701, "exit 3\n", 7);
        while (!ended) {
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 701);
                if (f.type == FRAME_STDOUT) {
                        send_window(conn, 701, f.len);
                } else if (f.type == FRAME_EXIT) {
                        j = frame_json(&f);
                        assert_int_equal(json_integer_value(json_object_get(j, "exitCode")), 3);
                        json_decref(j);
                        ended = true;
                } else if (f.type != FRAME_STARTED && f.type != FRAME_WINDOW) {
                        fail_msg("unexpected frame %d: %s", f.type, (char *)f.payload);
                }
                free(f.payload);
        }
        /* the resize cellad sent before it read the EXIT: nothing answers it */
        send_json(conn, FRAME_PTY, 701, "{\"cols\":132,\"rows\":43}");
        send_frame(conn, FRAME_PING, 0, "late", 4);
        assert_true(recv_frame(conn, &f));
        if (f.type != FRAME_PONG)
                fail_msg("the late resize was answered with frame %d on stream %u: %s", f.type,
                         f.stream, (char *)f.payload);
        free(f.payload);
        /* the session's next terminal is a new shell, at the size its own stream opens with */
        call_frame(FRAME_PTY, 702, &f, "{\"sessionId\":\"late\",\"cols\":90,\"rows\":20}");
        expect_frame(&f, FRAME_STARTED, "pid");
        send_frame(conn, FRAME_DATA, 702, "stty size\n", 10);
        pty_expect(702, "20 90");
        send_frame(conn, FRAME_CANCEL, 702, NULL, 0);
        for (;;) {
                assert_true(recv_frame(conn, &f));
                assert_int_equal(f.stream, 702);
                type = f.type;
                free(f.payload);
                if (type == FRAME_RESULT)
                        break;
        }
        j = session_call(703, &type, "{\"op\":\"delete\",\"id\":\"late\"}");
        assert_int_equal(type, FRAME_RESULT);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_bytes),
                cmocka_unit_test(test_exec_no_leaked_fds),
                cmocka_unit_test(test_exec_long_command),
                cmocka_unit_test(test_exec_cwd_env),
                cmocka_unit_test(test_exec_timeout_kills_tree),
                cmocka_unit_test(test_exec_cancel),
                cmocka_unit_test(test_exec_background_leftover),
                cmocka_unit_test(test_exec_window),
                cmocka_unit_test(test_many_concurrent),
                cmocka_unit_test(test_file_write_read),
                cmocka_unit_test(test_file_read_shrinks),
                cmocka_unit_test(test_file_ops),
                cmocka_unit_test(test_sessions),
                cmocka_unit_test(test_proc_in_session),
                cmocka_unit_test(test_ping),
                cmocka_unit_test(test_malformed_and_reconnect),
                cmocka_unit_test(test_proc_basics),
                cmocka_unit_test(test_proc_stream_and_waits),
                cmocka_unit_test(test_proc_kill_and_reconnect),
                cmocka_unit_test(test_proc_big_logs),
                cmocka_unit_test(test_code),
                cmocka_unit_test(test_proc_table_bounded),
                cmocka_unit_test(test_frame_table),
                cmocka_unit_test(test_pty_late_resize),
        };

        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, setup, teardown);
}
