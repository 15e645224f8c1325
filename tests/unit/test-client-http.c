/* libcella against a tiny canned HTTP/1.1 server on a loopback ephemeral port (a forked
 * process, one connection at a time): chunked SSE split at odd places, base64 and NUL bytes,
 * error JSON, streamed uploads (Content-Length and chunked), streamed downloads, keep-alive,
 * transport errors, and cella_client_interrupt ending a silent stream from another thread. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cella/cella.h"
#include "client/head.h"
#include "common/buf.h"

static pid_t server_pid = -1;
static char server_url[64];

/* ---- the server (child process) ---- */

struct conn {
        int fd;
        char in[1 << 16];
        size_t len;
};

static int fill(struct conn *c)
{
        ssize_t n;
        if (c->len == sizeof(c->in))
                return -1;
        n = read(c->fd, c->in + c->len, sizeof(c->in) - c->len);
        if (n <= 0)
                return -1;
        c->len += (size_t)n;
        return 0;
}

static void consume(struct conn *c, size_t n)
{
        memmove(c->in, c->in + n, c->len - n);
        c->len -= n;
}

static int read_line(struct conn *c, char *out, size_t size)
{
        char *nl;
        while (!(nl = memmem(c->in, c->len, "\r\n", 2)))
                if (fill(c) < 0)
                        return -1;
        size_t n = (size_t)(nl - c->in);
        if (n >= size)
                return -1;
        memcpy(out, c->in, n);
        out[n] = '\0';
        consume(c, n + 2);
        return 0;
}

static int read_exact(struct conn *c, struct buf *body, size_t n)
{
        while (n > 0) {
                if (c->len == 0 && fill(c) < 0)
                        return -1;
                size_t k = n < c->len ? n : c->len;
                if (buf_append(body, c->in, k) < 0)
                        return -1;
                consume(c, k);
                n -= k;
        }
        return 0;
}

static void put_all(int fd, const void *p, size_t n)
{
        const char *s = p;
        while (n > 0) {
                ssize_t w = write(fd, s, n);
                if (w <= 0)
                        _exit(1);
                s += w;
                n -= (size_t)w;
        }
}

static void respond(int fd, int status, const char *type, const void *body, size_t len)
{
        char head[256];
        int n = snprintf(head, sizeof(head),
                         "HTTP/1.1 %d X\r\nContent-Type: %s\r\nContent-Length: %zu\r\n\r\n", status,
                         type, len);
        put_all(fd, head, (size_t)n);
        put_all(fd, body, len);
}

static void respond_json(int fd, int status, const char *json)
{
        respond(fd, status, "application/json", json, strlen(json));
}

/* Send an SSE stream as HTTP chunks of 7 bytes, so events and lines split anywhere. */
static void respond_sse(int fd, const char *stream)
{
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";
        size_t len = strlen(stream);
        put_all(fd, head, strlen(head));
        for (size_t off = 0; off < len; off += 7) {
                char size[16];
                size_t k = len - off < 7 ? len - off : 7;
                int n = snprintf(size, sizeof(size), "%zx\r\n", k);
                put_all(fd, size, (size_t)n);
                put_all(fd, stream + off, k);
                put_all(fd, "\r\n", 2);
        }
        put_all(fd, "0\r\n\r\n", 5);
}

static unsigned char pattern(size_t i)
{
        return (unsigned char)((i * 7) % 251);
}

static bool body_is_pattern(const struct buf *b)
{
        for (size_t i = 0; i < b->len; i++)
                if ((unsigned char)b->data[i] != pattern(i))
                        return false;
        return true;
}

static const char exec_sse[] =
        "data: {\"type\":\"start\",\"command\":\"x\",\"pid\":42}\n\n"
        ": a comment\n\n"
        "data: {\"type\":\"stdout\",\"data\":\"hello\\n\"}\r\n\r\n"
        "data: {\"type\":\"stdout\",\"data\":\"AP8B\",\"encoding\":\"base64\"}\n\n"
        "data: {\"type\":\"stderr\",\r\ndata: \"data\":\"err\\u0000\"}\r\n\r\n"
        "data: {\"type\":\"complete\",\"exitCode\":3,\"duration\":1}\n\n";

static const char timeout_sse[] =
        "data: {\"type\":\"start\",\"command\":\"x\",\"pid\":7}\n\n"
        "data: {\"type\":\"stdout\",\"data\":\"partial\"}\n\n"
        "data: {\"type\":\"error\",\"error\":\"timed out after 100 ms\",\"code\":"
        "\"COMMAND_TIMEOUT\"}\n\n";

static int serve_one(struct conn *c, int nconns)
{
        char line[8192], method[16], target[4096];
        long clen = 0;
        bool chunked = false, sse = false;
        struct buf body = BUF_INIT;

        if (read_line(c, line, sizeof(line)) < 0)
                return -1;
        if (sscanf(line, "%15s %4095s", method, target) != 2)
                return -1;
        for (;;) {
                if (read_line(c, line, sizeof(line)) < 0)
                        return -1;
                if (!line[0])
                        break;
                if (strncasecmp(line, "Content-Length:", 15) == 0)
                        clen = strtol(line + 15, NULL, 10);
                else if (strncasecmp(line, "Transfer-Encoding: chunked", 26) == 0)
                        chunked = true;
                else if (strncasecmp(line, "Accept: text/event-stream", 25) == 0)
                        sse = true;
        }
        if (chunked) {
                for (;;) {
                        long k;
                        if (read_line(c, line, sizeof(line)) < 0)
                                return -1;
                        k = strtol(line, NULL, 16);
                        if (k == 0) {
                                if (read_line(c, line, sizeof(line)) < 0)
                                        return -1;
                                break;
                        }
                        if (read_exact(c, &body, (size_t)k) < 0 ||
                            read_line(c, line, sizeof(line)) < 0)
                                return -1;
                }
        } else if (read_exact(c, &body, (size_t)clen) < 0) {
                return -1;
        }

        if (strcmp(method, "GET") == 0 && strcmp(target, "/v1/health") == 0) {
                char j[64];
                snprintf(j, sizeof(j), "{\"status\":\"ok\",\"connections\":%d}", nconns);
                respond_json(c->fd, 200, j);
        } else if (strcmp(method, "GET") == 0 &&
                   strcmp(target, "/v1/sandboxes/box/files?path=%2Fbin.dat") == 0) {
                respond(c->fd, 200, "application/octet-stream", "a\0b\xff\r\n", 6);
        } else if (strcmp(method, "GET") == 0 &&
                   strcmp(target, "/v1/sandboxes/box/files?path=%2Fbig.dat") == 0) {
                /* 3 MiB of the pattern, in pieces (the head apart from the body) */
                size_t n = 3 << 20;
                char *d = malloc(n);
                char head[128];
                int hl = snprintf(head, sizeof(head),
                                  "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n\r\n", n);

                for (size_t i = 0; d && i < n; i++)
                        d[i] = (char)pattern(i);
                put_all(c->fd, head, (size_t)hl);
                if (d)
                        put_all(c->fd, d, n);
                free(d);
        } else if (strcmp(method, "GET") == 0 &&
                   strcmp(target, "/v1/sandboxes/box/files?path=%2Fchunked.dat") == 0) {
                static const char a[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
                                        "3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
                put_all(c->fd, a, sizeof(a) - 1);
        } else if (strcmp(method, "GET") == 0 &&
                   strcmp(target, "/v1/sandboxes/box/files?path=%2Fshort.dat") == 0) {
                static const char a[] = "HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\nonly ten..";
                put_all(c->fd, a, sizeof(a) - 1);
                buf_free(&body);
                return -1; /* the connection closes 990 bytes short */
        } else if (strcmp(method, "PUT") == 0 &&
                   strncmp(target, "/v1/sandboxes/box/files?path=", 29) == 0) {
                char j[96];
                if (!body_is_pattern(&body) || body.len == 0) {
                        respond_json(c->fd, 400, "{\"code\":\"BAD_BODY\",\"message\":\"wrong\"}");
                } else {
                        snprintf(j, sizeof(j), "{\"success\":true,\"size\":%zu,\"chunked\":%s}",
                                 body.len, chunked ? "true" : "false");
                        respond_json(c->fd, 200, j);
                }
        } else if (strcmp(method, "POST") == 0 && strcmp(target, "/v1/sandboxes/box/exec") == 0) {
                if (sse)
                        respond_sse(c->fd, exec_sse);
                else
                        respond_json(c->fd, 200,
                                     "{\"success\":true,\"exitCode\":0,\"stdout\":\"a\\u0000b\","
                                     "\"stderr\":\"AP8=\",\"stderrEncoding\":\"base64\"}");
        } else if (strcmp(method, "POST") == 0 && strcmp(target, "/v1/sandboxes/slow/exec") == 0 &&
                   sse) {
                respond_sse(c->fd, timeout_sse);
        } else {
                respond_json(c->fd, 404,
                             "{\"code\":\"FILE_NOT_FOUND\",\"message\":\"no such file: /x\","
                             "\"httpStatus\":404}");
        }
        buf_free(&body);
        return 0;
}

/* One process per connection: a client's kept-alive connection does not hold up its next
 * one (libcella's spliced download opens its own). */
static void serve(int lfd)
{
        static struct conn c;
        int nconns = 0;

        signal(SIGCHLD, SIG_IGN);
        for (;;) {
                c.fd = accept(lfd, NULL, NULL);
                if (c.fd < 0)
                        _exit(1);
                c.len = 0;
                nconns++;
                if (fork() == 0) {
                        close(lfd);
                        while (serve_one(&c, nconns) == 0) {
                        }
                        _exit(0);
                }
                close(c.fd);
        }
}

static int setup(void **state)
{
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t alen = sizeof(a);
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        (void)state;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(lfd, 8) < 0 ||
            getsockname(lfd, (struct sockaddr *)&a, &alen) < 0)
                return -1;
        snprintf(server_url, sizeof(server_url), "http://127.0.0.1:%d", ntohs(a.sin_port));
        server_pid = fork();
        if (server_pid < 0)
                return -1;
        if (server_pid == 0) {
                signal(SIGPIPE, SIG_IGN);
                serve(lfd);
                _exit(0);
        }
        close(lfd);
        return 0;
}

static int teardown(void **state)
{
        (void)state;
        if (server_pid > 0) {
                kill(server_pid, SIGKILL);
                waitpid(server_pid, NULL, 0);
        }
        return 0;
}

/* ---- the tests ---- */

static int health_connections(cella_client *c)
{
        char *body = NULL;
        int n = -1;
        assert_int_equal(cella_health(c, &body), CELLA_OK);
        assert_non_null(strstr(body, "\"status\":\"ok\""));
        assert_int_equal(sscanf(strstr(body, "connections"), "connections\":%d", &n), 1);
        cella_free(body);
        return n;
}

struct seen {
        int pid;
        struct buf out, err;
        int stop_after;
};

static void on_start(int pid, void *ud)
{
        ((struct seen *)ud)->pid = pid;
}

static int on_stdout(const void *p, size_t n, void *ud)
{
        struct seen *s = ud;
        buf_append(&s->out, p, n);
        return s->stop_after && s->out.len >= (size_t)s->stop_after;
}

static int on_stderr(const void *p, size_t n, void *ud)
{
        buf_append(&((struct seen *)ud)->err, p, n);
        return 0;
}

static void exec_stream_and_keepalive(void **state)
{
        cella_client *c;
        struct seen s = {.out = BUF_INIT, .err = BUF_INIT};
        struct cella_exec_callbacks cb = {on_start, on_stdout, on_stderr, &s};
        int code = -1, first;
        (void)state;

        assert_int_equal(cella_client_new(server_url, "tok", &c), CELLA_OK);
        first = health_connections(c);
        assert_int_equal(cella_exec_stream(c, "box", "x", NULL, &cb, &code), CELLA_OK);
        assert_int_equal(code, 3);
        assert_int_equal(s.pid, 42);
        assert_int_equal(s.out.len, 9);
        assert_memory_equal(s.out.data, "hello\n\0\xff\x01", 9);
        assert_int_equal(s.err.len, 4);
        assert_memory_equal(s.err.data, "err\0", 4);

        /* An API error leaves the connection usable. */
        assert_int_equal(cella_request(c, "GET", "/v1/nope", NULL, NULL), CELLA_ERR_API);
        assert_string_equal(cella_client_error_code(c), "FILE_NOT_FOUND");
        assert_string_equal(cella_client_error_message(c), "no such file: /x");
        assert_int_equal(cella_client_http_status(c), 404);

        /* One connection for all of it. */
        assert_int_equal(health_connections(c), first);
        assert_string_equal(cella_client_error_code(c), "");
        cella_client_free(c);
        buf_free(&s.out);
        buf_free(&s.err);
}

static void exec_stream_timeout_and_stop(void **state)
{
        cella_client *c;
        struct seen s = {.out = BUF_INIT, .err = BUF_INIT};
        struct cella_exec_callbacks cb = {on_start, on_stdout, on_stderr, &s};
        int code = -1;
        (void)state;

        assert_int_equal(cella_client_new(server_url, NULL, &c), CELLA_OK);
        assert_int_equal(cella_exec_stream(c, "slow", "x", NULL, &cb, &code), CELLA_ERR_API);
        assert_string_equal(cella_client_error_code(c), "COMMAND_TIMEOUT");
        assert_string_equal(cella_client_error_message(c), "timed out after 100 ms");
        assert_int_equal(code, -1);
        assert_int_equal(s.out.len, 7);

        buf_free(&s.out);
        s.stop_after = 1;
        assert_int_equal(cella_exec_stream(c, "box", "x", NULL, &cb, &code), CELLA_ERR_CALLBACK);
        /* The client recovers (a new connection) after an aborted transfer. */
        assert_true(health_connections(c) > 0);
        cella_client_free(c);
        buf_free(&s.out);
        buf_free(&s.err);
}

static void exec_buffered_bytes(void **state)
{
        cella_client *c;
        cella_exec_result *r;
        const char *p;
        size_t n;
        (void)state;

        assert_int_equal(cella_client_new(server_url, NULL, &c), CELLA_OK);
        assert_int_equal(cella_exec(c, "box", "x", NULL, &r), CELLA_OK);
        assert_int_equal(cella_exec_result_exit_code(r), 0);
        p = cella_exec_result_stdout(r, &n);
        assert_int_equal(n, 3);
        assert_memory_equal(p, "a\0b", 3);
        p = cella_exec_result_stderr(r, &n);
        assert_int_equal(n, 2);
        assert_memory_equal(p, "\0\xff", 2);
        cella_exec_result_free(r);
        cella_client_free(c);
}

static void files_streamed(void **state)
{
        cella_client *c;
        int pfd[2], mfd;
        size_t big = 1 << 20, small = 60000;
        char *data = malloc(big), got[16];
        (void)state;

        assert_non_null(data);
        for (size_t i = 0; i < big; i++)
                data[i] = (char)pattern(i);
        assert_int_equal(cella_client_new(server_url, NULL, &c), CELLA_OK);

        /* From memory (Content-Length). */
        assert_int_equal(cella_file_write(c, "box", "/f", data, big), CELLA_OK);
        /* A corrupted body is noticed by the server: the check is real. */
        data[5] ^= 1;
        assert_int_equal(cella_file_write(c, "box", "/f", data, big), CELLA_ERR_API);
        assert_string_equal(cella_client_error_code(c), "BAD_BODY");
        assert_int_equal(cella_client_http_status(c), 400);
        data[5] ^= 1;

        /* From a pipe (chunked). */
        assert_int_equal(pipe2(pfd, O_CLOEXEC), 0);
        assert_int_equal(write(pfd[1], data, small), (ssize_t)small);
        close(pfd[1]);
        assert_int_equal(cella_file_write_fd(c, "box", "/f", pfd[0]), CELLA_OK);
        close(pfd[0]);

        /* Download to a descriptor, byte-exact. */
        mfd = memfd_create("read", MFD_CLOEXEC);
        assert_true(mfd >= 0);
        assert_int_equal(cella_file_read_fd(c, "box", "/bin.dat", mfd), CELLA_OK);
        assert_int_equal(pread(mfd, got, sizeof(got), 0), 6);
        assert_memory_equal(got, "a\0b\xff\r\n", 6);

        /* 3 MiB spliced into a regular file and into a pipe, byte-exact. */
        {
                size_t n = 3 << 20;
                char *back = malloc(n + 1);
                int p[2];

                assert_non_null(back);
                assert_int_equal(ftruncate(mfd, 0), 0);
                assert_int_equal(lseek(mfd, 0, SEEK_SET), 0);
                assert_int_equal(cella_file_read_fd(c, "box", "/big.dat", mfd), CELLA_OK);
                assert_int_equal(pread(mfd, back, n + 1, 0), (ssize_t)n);
                for (size_t i = 0; i < n; i++)
                        assert_int_equal((unsigned char)back[i], pattern(i));
                /* into a pipe a child reads: exit status 0 if it got the pattern whole */
                assert_int_equal(pipe2(p, O_CLOEXEC), 0);
                pid_t reader = fork();
                int st = -1;

                assert_true(reader >= 0);
                if (reader == 0) {
                        size_t have = 0;
                        ssize_t r;

                        close(p[1]);
                        while ((r = read(p[0], back + have, n + 1 - have)) > 0)
                                have += (size_t)r;
                        for (size_t i = 0; have == n && i < n; i++)
                                if ((unsigned char)back[i] != pattern(i))
                                        _exit(2);
                        _exit(have == n ? 0 : 1);
                }
                close(p[0]);
                assert_int_equal(cella_file_read_fd(c, "box", "/big.dat", p[1]), CELLA_OK);
                close(p[1]);
                assert_int_equal(waitpid(reader, &st, 0), reader);
                assert_true(WIFEXITED(st));
                assert_int_equal(WEXITSTATUS(st), 0);
                free(back);
        }
        /* A chunked 200 goes the libcurl way; a body cut short is a transport error. */
        assert_int_equal(ftruncate(mfd, 0), 0);
        assert_int_equal(lseek(mfd, 0, SEEK_SET), 0);
        assert_int_equal(cella_file_read_fd(c, "box", "/chunked.dat", mfd), CELLA_OK);
        assert_int_equal(pread(mfd, got, sizeof(got), 0), 5);
        assert_memory_equal(got, "abcde", 5);
        assert_int_equal(cella_file_read_fd(c, "box", "/short.dat", mfd), CELLA_ERR_TRANSPORT);
        assert_string_equal(cella_client_error_code(c), "TRANSPORT_ERROR");
        assert_int_equal(ftruncate(mfd, 0), 0);
        assert_int_equal(lseek(mfd, 0, SEEK_SET), 0);

        /* A missing file writes nothing and reports the API error. */
        assert_int_equal(ftruncate(mfd, 0), 0);
        assert_int_equal(cella_file_read_fd(c, "box", "/missing", mfd), CELLA_ERR_API);
        assert_string_equal(cella_client_error_code(c), "FILE_NOT_FOUND");
        assert_int_equal(pread(mfd, got, sizeof(got), 0), 0);
        close(mfd);
        cella_client_free(c);
        free(data);
}

static void transport_error(void **state)
{
        cella_client *c;
        int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t alen = sizeof(a);
        char url[64];
        (void)state;

        /* A port that was just free and has no listener. */
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &alen), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
        assert_int_equal(cella_client_new(url, NULL, &c), CELLA_OK);
        assert_int_equal(cella_health(c, NULL), CELLA_ERR_TRANSPORT);
        assert_true(strlen(cella_client_error_message(c)) > 0);
        cella_client_free(c);
        close(lfd);
}

/* The spliced download's head reader (client/head.h). */
static void head_parse(void **state)
{
        static const char ok[] = "HTTP/1.1 200 OK\r\ncontent-length:\t 7 \r\nX: y\r\n\r\nbody";
        struct client_head h;
        (void)state;

        assert_int_equal(client_head_parse(ok, sizeof(ok) - 1, &h), 1);
        assert_int_equal(h.status, 200);
        assert_true(h.has_length && !h.encoded);
        assert_int_equal(h.length, 7);
        assert_int_equal(h.end, sizeof(ok) - 1 - 4);
        assert_int_equal(client_head_parse(ok, h.end - 1, &h), 0);
#define HEAD(s, want) assert_int_equal(client_head_parse(s, sizeof(s) - 1, &h), want)
        HEAD("HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", 1);
        assert_int_equal(h.status, 404);
        HEAD("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", 1);
        assert_true(h.encoded && !h.has_length);
        /* http-parser refuses a second Content-Length, even an equal one */
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
             -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: 9223372036854775808\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: 1 2\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nno colon\r\n\r\n", -EBADMSG);
        HEAD("HTTP/2 200 OK\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 099 X\r\n\r\n", -EBADMSG);
        HEAD("HTTP/1.1 200 OK\r\nContent-Length: 10", 0);
#undef HEAD
}

/* CELLA_URL unix:/PATH and unix:///PATH: HTTP over the socket at /PATH (a path where no
 * one listens: a transport error naming it); a relative path is refused. */
static void unix_url(void **state)
{
        cella_client *c = NULL;
        (void)state;

        assert_int_equal(cella_client_new("unix:relative.sock", NULL, &c), CELLA_ERR_INVALID);
        assert_int_equal(cella_client_new("unix:///nonexistent/cellad.sock", NULL, &c), CELLA_OK);
        assert_string_equal(cella_client_url(c), "http://localhost");
        assert_int_equal(cella_health(c, NULL), CELLA_ERR_TRANSPORT);
        assert_non_null(strstr(cella_client_error_message(c), "unix:/nonexistent/cellad.sock"));
        cella_client_free(c);
}

/* ---- cella_client_interrupt: a stream that never sends ends at once ---- */

struct silent {
        int lfd;
        int seen[2]; /* a pipe: the server writes 'r' once the request is in */
        bool eof;    /* the server saw the client close its connection */
};

/* Accept one connection, read its request head, start an SSE answer and send nothing
 * more: wait for the client's end of the connection. */
static void *silent_main(void *arg)
{
        struct silent *sv = arg;
        static struct conn c;
        char line[8192], tmp[64];
        const char *head = "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                           "Transfer-Encoding: chunked\r\n\r\n";

        c.fd = accept(sv->lfd, NULL, NULL);
        c.len = 0;
        if (c.fd < 0)
                return NULL;
        do {
                if (read_line(&c, line, sizeof(line)) < 0)
                        goto out;
        } while (line[0]);
        if (write(c.fd, head, strlen(head)) < 0 || write(sv->seen[1], "r", 1) != 1)
                goto out;
        /* the body (a code run's JSON) is not read: the first read after it ends is EOF */
        for (;;) {
                ssize_t n = read(c.fd, tmp, sizeof(tmp));
                if (n == 0) {
                        sv->eof = true;
                        break;
                }
                if (n < 0)
                        break;
        }
out:
        close(c.fd);
        return NULL;
}

struct run {
        cella_client *c;
        int rc;
};

static int never_called(const char *json, size_t len, void *ud)
{
        (void)json;
        (void)len;
        (void)ud;
        return 0;
}

static void *run_main(void *arg)
{
        struct run *r = arg;
        r->rc = cella_code_run(r->c, "box", "import time; time.sleep(100)", NULL, never_called,
                               NULL, NULL);
        return NULL;
}

static void interrupt_ends_a_silent_stream(void **state)
{
        struct silent sv = {0};
        struct run r = {.rc = 1};
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t alen = sizeof(a);
        pthread_t srv, worker;
        struct timespec deadline;
        char url[64], ch;
        (void)state;

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(sv.lfd >= 0);
        assert_int_equal(bind(sv.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(sv.lfd, 1), 0);
        assert_int_equal(getsockname(sv.lfd, (struct sockaddr *)&a, &alen), 0);
        assert_int_equal(pipe2(sv.seen, O_CLOEXEC), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
        assert_int_equal(cella_client_new(url, NULL, &r.c), CELLA_OK);
        assert_int_equal(pthread_create(&srv, NULL, silent_main, &sv), 0);
        assert_int_equal(pthread_create(&worker, NULL, run_main, &r), 0);
        /* the run is in and its stream open (and silent): interrupt it */
        assert_int_equal(read(sv.seen[0], &ch, 1), 1);
        cella_client_interrupt(r.c);
        /* a generous bound: without the interrupt the stream would wait for ever */
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 60;
        assert_int_equal(pthread_timedjoin_np(worker, NULL, &deadline), 0);
        assert_int_equal(r.rc, CELLA_ERR_CALLBACK);
        assert_string_equal(cella_client_error_code(r.c), "INTERRUPTED");
        assert_int_equal(pthread_timedjoin_np(srv, NULL, &deadline), 0);
        assert_true(sv.eof); /* the server saw the client go: cellad interrupts the run */
        /* every later call fails at once, without a connection */
        assert_int_equal(cella_health(r.c, NULL), CELLA_ERR_CALLBACK);
        cella_client_free(r.c);
        close(sv.lfd);
        close(sv.seen[0]);
        close(sv.seen[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(exec_stream_and_keepalive),
                cmocka_unit_test(exec_stream_timeout_and_stop),
                cmocka_unit_test(exec_buffered_bytes),
                cmocka_unit_test(files_streamed),
                cmocka_unit_test(transport_error),
                cmocka_unit_test(unix_url),
                cmocka_unit_test(head_parse),
                cmocka_unit_test(interrupt_ends_a_silent_stream),
        };
        signal(SIGPIPE, SIG_IGN);
        return cmocka_run_group_tests(tests, setup, teardown);
}
