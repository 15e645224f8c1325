/* libcella: files of a sandbox (write, read, list, exists, mkdir, move, delete) and file
 * watch. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "client/head.h"
#include "common/limits.h"

static int file_put(cella_client *c, const char *sandbox, const char *path, struct upload *up)
{
        struct sink s = {.body = BUF_INIT};
        char *url = client_url(c, sandbox, "/files", "path", path, NULL);
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = client_perform(c, "PUT", url, NULL, up, NULL, &s);
        free(url);
        return client_finish_json(&s, r, NULL);
}

int cella_file_write(cella_client *c, const char *sandbox, const char *path, const void *data,
                     size_t len)
{
        struct upload up = {.data = data, .len = len, .fd = -1};
        return file_put(c, sandbox, path, &up);
}

int cella_file_write_fd(cella_client *c, const char *sandbox, const char *path, int fd)
{
        struct upload up = {.fd = fd};
        return file_put(c, sandbox, path, &up);
}

static int write_fd_chunk(const char *p, size_t n, void *ud)
{
        int fd = *(int *)ud;
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return CELLA_ERR_IO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

/* ---- a download spliced into a file or a pipe (decision 0061) ----
 * libcurl reads every body into its buffer, a copy the kernel need not make: cellad sends a
 * file's pages into the socket (sendfile), and splice moves them from the socket into a
 * pipe and copies them from there into the target's page cache, the one copy `cp` makes.
 * So for plain HTTP into a regular file or a pipe, libcurl only connects
 * (CURLOPT_CONNECT_ONLY, as the terminal does) and the exchange is ours: a GET with
 * Connection: close, the answer's head read, then a 200's Content-Length bytes spliced. An
 * answer that is not a 200 is read whole and reported as the API's error; a 200 without a
 * Content-Length goes back to libcurl's path (nothing was written). */

struct spliced {
        cella_client *c;
        CURL *h;
        curl_socket_t sock;
        int pipe[2];
        char head[CELLA_CLIENT_HEAD_MAX + 1];
        size_t len; /* bytes read into head */
        size_t end; /* the head's length, its blank line included */
};

/* Wait until the non-blocking socket (libcurl's) is ready for events. */
static int sock_wait(curl_socket_t fd, short events)
{
        struct pollfd p = {.fd = fd, .events = events};
        int r;

        do
                r = poll(&p, 1, -1);
        while (r < 0 && errno == EINTR);
        return r < 0 ? -errno : 0;
}

static int spliced_transport(struct spliced *sp, const char *what)
{
        if (atomic_load(&sp->c->interrupted)) {
                client_errorf(sp->c, "INTERRUPTED", "the call was interrupted");
                return CELLA_ERR_CALLBACK;
        }
        client_errorf(sp->c, "TRANSPORT_ERROR", "%s%s: %s", sp->c->unix_path ? "unix:" : "",
                      sp->c->unix_path ? sp->c->unix_path : sp->c->base, what);
        return CELLA_ERR_TRANSPORT;
}

/* recv into p (n > 0): bytes read, 0 at the end, or <0 (-errno). */
static ssize_t sock_recv(curl_socket_t fd, char *p, size_t n)
{
        for (;;) {
                ssize_t r = recv(fd, p, n, 0);

                if (r >= 0)
                        return r;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN || sock_wait(fd, POLLIN) < 0)
                        return -errno;
        }
}

static int sock_send_all(curl_socket_t fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t r = send(fd, p, n, MSG_NOSIGNAL);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r < 0 && errno == EAGAIN) {
                        if (sock_wait(fd, POLLOUT) < 0)
                                return -errno;
                        continue;
                }
                if (r < 0)
                        return -errno;
                p += r;
                n -= (size_t)r;
        }
        return 0;
}

/* The answer's head into sp->head and *h; what follows it stays after it (sp->len). */
static int read_head(struct spliced *sp, struct client_head *h)
{
        for (;;) {
                int r = client_head_parse(sp->head, sp->len, h);
                ssize_t n;

                if (r > 0) {
                        sp->end = h->end;
                        return 0;
                }
                if (r < 0)
                        return spliced_transport(sp, "not an HTTP answer");
                if (sp->len == CELLA_CLIENT_HEAD_MAX)
                        return spliced_transport(sp, "the answer's head is too long");
                n = sock_recv(sp->sock, sp->head + sp->len, CELLA_CLIENT_HEAD_MAX - sp->len);
                if (n <= 0)
                        return spliced_transport(sp, "the connection closed before the answer");
                sp->len += (size_t)n;
        }
}

/* A non-200 answer: its body read whole (to its Content-Length or the connection's end),
 * reported as the API's error. */
static int spliced_error(struct spliced *sp, const struct client_head *h)
{
        _cleanup_buf_ struct buf b = BUF_INIT;
        size_t want = h->has_length && !h->encoded
                              ? (size_t)MIN(h->length, (uint64_t)CELLA_CLIENT_JSON_ANSWER_MAX)
                              : CELLA_CLIENT_JSON_ANSWER_MAX;
        char chunk[4096];

        if (buf_append(&b, sp->head + sp->end, MIN(sp->len - sp->end, want)) < 0)
                return CELLA_ERR_NOMEM;
        while (b.len < want) {
                ssize_t n = sock_recv(sp->sock, chunk, MIN(sizeof(chunk), want - b.len));

                if (n <= 0)
                        break;
                if (buf_append(&b, chunk, (size_t)n) < 0)
                        return CELLA_ERR_NOMEM;
        }
        return client_api_error(sp->c, h->status, &b);
}

/* Move n bytes from the socket into fd through the pipe. */
static int splice_body(struct spliced *sp, int fd, uint64_t n)
{
        while (n > 0) {
                ssize_t in = splice(sp->sock, NULL, sp->pipe[1], NULL,
                                    (size_t)MIN(n, (uint64_t)CELLA_CLIENT_SPLICE_PIPE),
                                    SPLICE_F_MOVE | SPLICE_F_NONBLOCK);

                if (in < 0 && errno == EINTR)
                        continue;
                if (in < 0 && errno == EAGAIN) {
                        if (sock_wait(sp->sock, POLLIN) < 0)
                                return spliced_transport(sp, strerror(errno));
                        continue;
                }
                if (in <= 0)
                        return spliced_transport(sp, in < 0 ? strerror(errno)
                                                            : "the connection closed before "
                                                              "the whole file came");
                n -= (uint64_t)in;
                while (in > 0) {
                        ssize_t out =
                                splice(sp->pipe[0], NULL, fd, NULL, (size_t)in, SPLICE_F_MOVE);

                        if (out < 0 && errno == EINTR)
                                continue;
                        if (out <= 0) {
                                client_errorf(sp->c, "IO_ERROR", "write: %s",
                                              strerror(out < 0 ? errno : EIO));
                                return CELLA_ERR_IO;
                        }
                        in -= out;
                }
        }
        return CELLA_OK;
}

/* 1 with *ret when the download was made here; 0 when it is libcurl's to make (the URL is
 * not plain HTTP, fd is neither a regular file nor a pipe, or the 200 has no
 * Content-Length): nothing was written then. */
static int read_spliced(cella_client *c, const char *url, int fd, int *ret)
{
        struct spliced *sp;
        _cleanup_buf_ struct buf req = BUF_INIT;
        const char *authority = url + 7, *target;
        struct client_head h;
        struct stat st;
        int fl, r = 0;

        if (strncmp(url, "http://", 7) != 0 || !(target = strchr(authority, '/')) ||
            fstat(fd, &st) < 0 || !(S_ISREG(st.st_mode) || S_ISFIFO(st.st_mode)) ||
            (fl = fcntl(fd, F_GETFL)) < 0 || (fl & O_APPEND))
                return 0;
        if (!(sp = calloc(1, sizeof(*sp))))
                return 0;
        sp->c = c;
        sp->sock = CURL_SOCKET_BAD;
        sp->pipe[0] = sp->pipe[1] = -1;
        c->code[0] = c->message[0] = '\0';
        c->status = 0;
        sp->h = curl_easy_init();
        if (!sp->h || pipe2(sp->pipe, O_CLOEXEC) < 0) {
                r = 0;
                goto out;
        }
        (void)fcntl(sp->pipe[1], F_SETPIPE_SZ, CELLA_CLIENT_SPLICE_PIPE);
        curl_easy_setopt(sp->h, CURLOPT_URL, url);
        if (c->unix_path)
                curl_easy_setopt(sp->h, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
        curl_easy_setopt(sp->h, CURLOPT_CONNECT_ONLY, 1L);
        curl_easy_setopt(sp->h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(sp->h, CURLOPT_CONNECTTIMEOUT_MS, CELLA_CLIENT_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(sp->h, CURLOPT_TCP_NODELAY, 1L);
        r = 1;
        if (curl_easy_perform(sp->h) != CURLE_OK ||
            curl_easy_getinfo(sp->h, CURLINFO_ACTIVESOCKET, &sp->sock) != CURLE_OK ||
            sp->sock == CURL_SOCKET_BAD) {
                sp->sock = CURL_SOCKET_BAD;
                *ret = spliced_transport(sp, "cannot connect");
                goto out;
        }
        /* cella_client_interrupt shuts this socket down */
        pthread_mutex_lock(&c->sock_lock);
        c->sock = sp->sock;
        if (atomic_load(&c->interrupted))
                shutdown(sp->sock, SHUT_RDWR);
        pthread_mutex_unlock(&c->sock_lock);
        if (buf_printf(&req, "GET %s HTTP/1.1\r\nHost: %.*s\r\n%s%sConnection: close\r\n\r\n",
                       target, (int)(target - authority), authority, c->auth ? c->auth : "",
                       c->auth ? "\r\n" : "") < 0) {
                *ret = CELLA_ERR_NOMEM;
                goto out;
        }
        if (sock_send_all(sp->sock, req.data, req.len) < 0) {
                *ret = spliced_transport(sp, strerror(errno));
                goto out;
        }
        if ((*ret = read_head(sp, &h)) < 0)
                goto out;
        if (h.status != 200) {
                *ret = spliced_error(sp, &h);
                goto out;
        }
        if (!h.has_length || h.encoded) {
                r = 0; /* libcurl's path decodes it */
                goto out;
        }
        c->status = 200;
        {
                uint64_t n = h.length;
                size_t early = (size_t)MIN((uint64_t)(sp->len - sp->end), n);

                if (early && write_fd_chunk(sp->head + sp->end, early, &fd) < 0) {
                        client_errorf(c, "IO_ERROR", "write: %s", strerror(errno));
                        *ret = CELLA_ERR_IO;
                        goto out;
                }
                *ret = splice_body(sp, fd, n - early);
        }
out:
        if (sp->sock != CURL_SOCKET_BAD) {
                pthread_mutex_lock(&c->sock_lock);
                if (c->sock == sp->sock)
                        c->sock = CURL_SOCKET_BAD;
                pthread_mutex_unlock(&c->sock_lock);
        }
        if (sp->h)
                curl_easy_cleanup(sp->h);
        if (sp->pipe[0] >= 0)
                close(sp->pipe[0]);
        if (sp->pipe[1] >= 0)
                close(sp->pipe[1]);
        free(sp);
        return r;
}

int cella_file_read_fd(cella_client *c, const char *sandbox, const char *path, int fd)
{
        struct sink s = {.body = BUF_INIT,
                         .stream = write_fd_chunk,
                         .ud = &fd,
                         .read_size = CELLA_CLIENT_RAW_READ};
        char *url = client_url(c, sandbox, "/files", "path", path, NULL);
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        if (atomic_load(&c->interrupted)) {
                free(url);
                client_errorf(c, "INTERRUPTED", "the call was interrupted");
                return CELLA_ERR_CALLBACK;
        }
        if (read_spliced(c, url, fd, &r)) {
                free(url);
                return r;
        }
        r = client_perform(c, "GET", url, NULL, NULL, NULL, &s);
        if (r == CELLA_ERR_IO)
                client_errorf(c, "IO_ERROR", "write: %s", strerror(errno));
        free(url);
        return client_finish_json(&s, r, NULL);
}

int cella_file_list(cella_client *c, const char *sandbox, const char *path, bool recursive,
                    bool include_hidden, char **ret_json)
{
        char q[64];
        snprintf(q, sizeof(q), "recursive=%s&includeHidden=%s", recursive ? "true" : "false",
                 include_hidden ? "true" : "false");
        return client_request_url(c, "GET", client_url(c, sandbox, "/files/list", "path", path, q),
                                  NULL, ret_json);
}

int cella_file_exists(cella_client *c, const char *sandbox, const char *path, bool *ret)
{
        char *body = NULL;
        int r = client_request_url(
                c, "GET", client_url(c, sandbox, "/files/exists", "path", path, NULL), NULL, &body);
        if (r == CELLA_OK) {
                json_t *j = json_loads(body, 0, NULL);
                *ret = json_is_true(json_object_get(j, "exists"));
                json_decref(j);
        }
        free(body);
        return r;
}

int cella_file_mkdir(cella_client *c, const char *sandbox, const char *path, bool recursive)
{
        return client_request_json(
                c, "POST", client_url(c, sandbox, "/files/mkdir", NULL, NULL, NULL),
                json_pack("{s:s, s:b}", "path", path, "recursive", recursive), NULL);
}

int cella_file_move(cella_client *c, const char *sandbox, const char *from, const char *to)
{
        return client_request_json(c, "POST",
                                   client_url(c, sandbox, "/files/move", NULL, NULL, NULL),
                                   json_pack("{s:s, s:s}", "from", from, "to", to), NULL);
}

int cella_file_delete(cella_client *c, const char *sandbox, const char *path, bool recursive)
{
        return client_request_url(
                c, "DELETE",
                client_url(c, sandbox, "/files", "path", path, recursive ? "recursive=true" : NULL),
                NULL, NULL);
}

static json_t *string_array(const char *const *v)
{
        json_t *a = json_array();

        for (size_t i = 0; a && v[i]; i++)
                if (json_array_append_new(a, json_string(v[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

int cella_watch(cella_client *c, const char *sandbox, const char *path,
                const struct cella_watch_options *o,
                int (*on_event)(const char *json, size_t len, void *userdata), void *userdata)
{
        json_t *b = json_pack("{s:s, s:b}", "path", path, "recursive", !(o && o->no_recursive));

        if (!b)
                return CELLA_ERR_NOMEM;
        if (o && o->include)
                json_object_set_new(b, "include", string_array(o->include));
        if (o && o->exclude)
                json_object_set_new(b, "exclude", string_array(o->exclude));
        return client_json_events(c, client_url(c, sandbox, "/files/watch", NULL, NULL, NULL), b,
                                  CELLA_CLIENT_SSE_LINE_MAX, false, on_event, userdata);
}
