/* A scripted terminal client for tests/integration/test-pty.sh and bench/, on libcella's
 * WebSocket client (cella_pty_*), so the tests exercise the real client.
 *
 *   pty-client [--url U] [--token T] [--session S] [--cols C] [--rows R] NAME STEP...
 *
 * Steps run in order; each is "verb:argument" (escapes \r \n \t \\ \xHH in arguments):
 *   ready           wait for {"type":"ready"}
 *   replay:TEXT     TEXT was in the output received before ready (the replay)
 *   send:TEXT       type TEXT
 *   expect:TEXT     wait until the output since the last expect contains TEXT
 *   control:JSON    send a raw control message
 *   expect-control:TEXT  wait for a control message containing TEXT
 *   resize:CxR      resize
 *   touch:PATH      create the file PATH (tells a test script this point was reached)
 *   wait-file:PATH  wait until PATH exists
 *   stall:PATH      stop reading until PATH exists (a client that does not keep up)
 *   exit:N          wait for {"type":"exit","code":N} and the end of the connection
 *   closed          wait for the end of the connection (without an exit message)
 *   open-error:CODE the connection itself must fail with API error CODE
 *   echo-bench:N    N keystroke round trips (send one byte, wait for its echo): prints
 *                   p50/p95/max in microseconds
 *
 *   pty-client --local-echo-bench N
 * is the baseline: the same round trips with `bash --norc -i` on a local pty (no cella).
 * Waits end after --timeout seconds (default 60) with a failure. Exit status 0 when every
 * step passed, 1 otherwise (with the reason and the output's tail on stderr). */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cella/cella.h"

struct state {
        char *out; /* all output */
        size_t len, cap;
        size_t mark; /* expect searches from here */
        size_t before_ready;
        bool ready;
        int exit_code;
        char *controls; /* every control message, newline-separated */
        size_t clen, ccap;
};

static void append(char **b, size_t *len, size_t *cap, const void *d, size_t n)
{
        if (*len + n + 1 > *cap) {
                size_t nc = (*cap ? *cap * 2 : 65536);

                while (nc < *len + n + 1)
                        nc *= 2;
                *b = realloc(*b, nc);
                if (!*b) {
                        fprintf(stderr, "pty-client: out of memory\n");
                        exit(1);
                }
                *cap = nc;
        }
        memcpy(*b + *len, d, n);
        *len += n;
        (*b)[*len] = '\0';
}

static void on_output(const void *data, size_t len, void *ud)
{
        struct state *st = ud;

        append(&st->out, &st->len, &st->cap, data, len);
}

static void on_ready(void *ud)
{
        struct state *st = ud;

        st->ready = true;
        st->before_ready = st->len;
}

static void on_exit_msg(int code, void *ud)
{
        ((struct state *)ud)->exit_code = code;
}

static void on_control(const char *json, size_t len, void *ud)
{
        struct state *st = ud;

        append(&st->controls, &st->clen, &st->ccap, json, len);
        append(&st->controls, &st->clen, &st->ccap, "\n", 1);
}

static const struct cella_pty_events events = {on_output, on_ready, on_exit_msg, on_control};

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Unescape \r \n \t \\ \xHH in place. */
static void unescape(char *s)
{
        char *w = s;

        for (char *r = s; *r; r++) {
                if (*r != '\\' || !r[1]) {
                        *w++ = *r;
                        continue;
                }
                r++;
                switch (*r) {
                case 'r':
                        *w++ = '\r';
                        break;
                case 'n':
                        *w++ = '\n';
                        break;
                case 't':
                        *w++ = '\t';
                        break;
                case 'x': {
                        char hex[3] = {r[1], r[1] ? r[2] : 0, 0};

                        *w++ = (char)strtol(hex, NULL, 16);
                        r += 2;
                        break;
                }
                default:
                        *w++ = *r;
                        break;
                }
        }
        *w = '\0';
}

static int num(const char *s)
{
        return (int)strtol(s, NULL, 10);
}

static cella_pty *pty;
static struct state st = {.exit_code = -1};
static double timeout_s = 60;
static bool closed;

__attribute__((format(printf, 1, 2))) static void fail(const char *fmt, ...);
static void fail(const char *fmt, ...)
{
        va_list ap;
        size_t tail = st.len > 2000 ? st.len - 2000 : 0;

        fprintf(stderr, "pty-client: ");
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fprintf(stderr, "\n--- output tail ---\n%s\n--- control messages ---\n%s\n",
                st.out ? st.out + tail : "", st.controls ? st.controls : "");
        exit(1);
}

/* Process the connection for up to ms (or until something arrived). */
static void pump(int ms)
{
        struct pollfd pf = {.fd = cella_pty_fd(pty),
                            .events = (short)(POLLIN | (cella_pty_want_write(pty) ? POLLOUT : 0))};

        if (closed) {
                return;
        }
        if (poll(&pf, 1, ms) > 0 && cella_pty_process(pty, &events, &st) != CELLA_OK)
                closed = true;
}

/* Wait until cond() holds. */
#define WAIT_FOR(cond, what, arg)                                      \
        do {                                                           \
                double end_ = now_s() + timeout_s;                     \
                while (!(cond)) {                                      \
                        if (closed && !(cond))                         \
                                fail("connection closed: " what, arg); \
                        if (now_s() > end_)                            \
                                fail("timed out: " what, arg);         \
                        pump(100);                                     \
                }                                                      \
        } while (0)

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static void print_figures(const char *what, double *t, int n)
{
        qsort(t, (size_t)n, sizeof(double), cmp_double);
        printf("%s: n=%d p50=%.0fus p95=%.0fus max=%.0fus\n", what, n, t[n / 2],
               t[(n * 95) / 100 < n ? (n * 95) / 100 : n - 1], t[n - 1]);
}

/* The baseline: bash on a pty of our own, the same keystrokes. */
static int local_echo_bench(int n)
{
        double *t = calloc((size_t)n, sizeof(double));
        char name[64], buf[4096];
        int m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        pid_t pid;

        if (!t || m < 0 || grantpt(m) < 0 || unlockpt(m) < 0 ||
            ptsname_r(m, name, sizeof(name)) != 0)
                fail("local pty: %s", strerror(errno));
        pid = fork();
        if (pid == 0) {
                int s;

                setsid();
                s = open(name, O_RDWR);
                if (s < 0 || ioctl(s, TIOCSCTTY, 0) < 0)
                        _exit(127);
                dup2(s, 0);
                dup2(s, 1);
                dup2(s, 2);
                execl("/bin/bash", "bash", "--norc", "-i", (char *)NULL);
                _exit(127);
        }
        /* wait for the prompt */
        for (;;) {
                struct pollfd pf = {.fd = m, .events = POLLIN};

                if (poll(&pf, 1, 1000) <= 0)
                        break; /* quiet: the prompt is out */
                if (read(m, buf, sizeof(buf)) <= 0)
                        fail("local bash went away%s", "");
        }
        for (int i = 0; i < n; i++) {
                char c = (char)('a' + i % 26);
                double t0 = now_s();
                bool seen = false;

                if (write(m, &c, 1) != 1)
                        fail("write: %s", strerror(errno));
                while (!seen) {
                        ssize_t k = read(m, buf, sizeof(buf));

                        if (k <= 0)
                                fail("local bash went away%s", "");
                        seen = memchr(buf, c, (size_t)k) != NULL;
                }
                t[i] = (now_s() - t0) * 1e6;
        }
        print_figures("local pty echo round trip (baseline)", t, n);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        close(m);
        free(t);
        return 0;
}

static void echo_bench(int n)
{
        double *t = calloc((size_t)n, sizeof(double));
        /* letters only: the shell echoes them as typed */
        for (int i = 0; i < n; i++) {
                char c = (char)('a' + i % 26);
                size_t from = st.len;
                double t0 = now_s();

                if (cella_pty_send(pty, &c, 1) < 0)
                        fail("send failed%s", "");
                WAIT_FOR(memchr(st.out + from, c, st.len - from) != NULL, "echo %s", "");
                t[i] = (now_s() - t0) * 1e6;
        }
        print_figures("cella pty echo round trip (WebSocket)", t, n);
        /* erase what was typed */
        cella_pty_send(pty, "\x15", 1);
        free(t);
}

int main(int argc, char **argv)
{
        const char *url = NULL, *token = NULL, *open_error = NULL;
        struct cella_pty_options o = {0};
        cella_client *c;
        int i, r;

        if (argc == 3 && strcmp(argv[1], "--local-echo-bench") == 0)
                return local_echo_bench(num(argv[2]) > 0 ? num(argv[2]) : 100);
        for (i = 1; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
                if (i + 1 >= argc)
                        fail("missing value for %s", argv[i]);
                if (strcmp(argv[i], "--url") == 0)
                        url = argv[i + 1];
                else if (strcmp(argv[i], "--token") == 0)
                        token = argv[i + 1];
                else if (strcmp(argv[i], "--session") == 0)
                        o.session_id = argv[i + 1];
                else if (strcmp(argv[i], "--cols") == 0)
                        o.cols = (unsigned)num(argv[i + 1]);
                else if (strcmp(argv[i], "--rows") == 0)
                        o.rows = (unsigned)num(argv[i + 1]);
                else if (strcmp(argv[i], "--timeout") == 0)
                        timeout_s = atof(argv[i + 1]);
                else
                        fail("unknown option %s", argv[i]);
        }
        if (i >= argc)
                fail("usage: pty-client [options] NAME STEP...%s", "");
        if (i + 1 < argc && strncmp(argv[i + 1], "open-error:", 11) == 0)
                open_error = argv[i + 1] + 11;
        if (cella_client_new(url, token, &c) < 0)
                fail("cannot make a client%s", "");
        r = cella_pty_open(c, argv[i], &o, &pty);
        if (open_error) {
                if (r != CELLA_ERR_API || strcmp(cella_client_error_code(c), open_error) != 0)
                        fail("expected the open to fail with %s", open_error);
                printf("open failed as expected: %s (HTTP %ld): %s\n", open_error,
                       cella_client_http_status(c), cella_client_error_message(c));
                cella_client_free(c);
                return 0;
        }
        if (r < 0) {
                fprintf(stderr, "pty-client: open: %s: %s\n", cella_client_error_code(c),
                        cella_client_error_message(c));
                return 1;
        }
        /* what came with the handshake */
        if (cella_pty_process(pty, &events, &st) != CELLA_OK)
                closed = true;
        for (i++; i < argc; i++) {
                char *step = strdup(argv[i]), *arg = strchr(step, ':');

                if (arg)
                        *arg++ = '\0';
                else
                        arg = step + strlen(step);
                unescape(arg);
                if (strcmp(step, "ready") == 0) {
                        WAIT_FOR(st.ready, "ready%s", "");
                } else if (strcmp(step, "replay") == 0) {
                        WAIT_FOR(st.ready, "ready%s", "");
                        if (!memmem(st.out ? st.out : "", st.before_ready, arg, strlen(arg)))
                                fail("not in the replay: %s", arg);
                } else if (strcmp(step, "send") == 0) {
                        if (cella_pty_send(pty, arg, strlen(arg)) < 0)
                                fail("send failed: %s", arg);
                } else if (strcmp(step, "expect") == 0) {
                        WAIT_FOR(st.out && memmem(st.out + st.mark, st.len - st.mark, arg,
                                                  strlen(arg)),
                                 "expected output %s", arg);
                        st.mark = (size_t)((char *)memmem(st.out + st.mark, st.len - st.mark, arg,
                                                          strlen(arg)) -
                                           st.out) +
                                  strlen(arg);
                } else if (strcmp(step, "control") == 0) {
                        if (cella_pty_send_control(pty, arg) < 0)
                                fail("send failed: %s", arg);
                } else if (strcmp(step, "expect-control") == 0) {
                        WAIT_FOR(st.controls && strstr(st.controls, arg), "control message %s",
                                 arg);
                } else if (strcmp(step, "resize") == 0) {
                        unsigned cols = 0, rows = 0;

                        if (sscanf(arg, "%ux%u", &cols, &rows) != 2 ||
                            cella_pty_resize(pty, cols, rows) < 0)
                                fail("resize failed: %s", arg);
                } else if (strcmp(step, "touch") == 0) {
                        int fd = open(arg, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

                        if (fd < 0)
                                fail("cannot create %s", arg);
                        close(fd);
                } else if (strcmp(step, "wait-file") == 0) {
                        WAIT_FOR(access(arg, F_OK) == 0, "file %s", arg);
                } else if (strcmp(step, "stall") == 0) {
                        double end = now_s() + timeout_s;

                        while (access(arg, F_OK) != 0) {
                                if (now_s() > end)
                                        fail("timed out: stalled until %s", arg);
                                usleep(50 * 1000);
                        }
                } else if (strcmp(step, "exit") == 0) {
                        WAIT_FOR(st.exit_code >= 0, "exit message%s", "");
                        if (st.exit_code != num(arg))
                                fail("wrong exit code, expected %s", arg);
                        WAIT_FOR(closed, "connection end after exit%s", "");
                } else if (strcmp(step, "closed") == 0) {
                        double end = now_s() + timeout_s;

                        while (!closed) {
                                if (now_s() > end)
                                        fail("timed out: connection end%s", "");
                                pump(100);
                        }
                        if (st.exit_code >= 0)
                                fail("got exit %d, not a bare close", st.exit_code);
                } else if (strcmp(step, "echo-bench") == 0) {
                        WAIT_FOR(st.ready, "ready%s", "");
                        echo_bench(num(arg) > 0 ? num(arg) : 100);
                } else {
                        fail("unknown step %s", step);
                }
                free(step);
        }
        cella_pty_close(pty);
        cella_client_free(c);
        free(st.out);
        free(st.controls);
        return 0;
}
