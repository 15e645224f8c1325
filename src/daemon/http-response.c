/* The server's answers (see http-internal.h): writes queued on the socket, the status
 * line and headers, sized and chunked bodies, the JSON error shape, SSE events, the end
 * of a response (and what it means for the connection), and handing the socket over to a
 * relay. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/timeutil.h"
#include "daemon/http.h"
#include "daemon/http-internal.h"
#include "daemon/metrics.h"

struct wreq {
        uv_write_t w;
        struct conn *conn;
        struct http_request *req; /* referenced, or NULL */
        http_write_cb cb;
        void *ud;
        size_t counted; /* bytes counted in req->queued */
        size_t len;
        char data[];
};

/* ---- writing ---- */

static void kick_cb(uv_idle_t *h)
{
        struct conn *c = h->data;

        uv_idle_stop(h);
        http_conn_process(c);
}

void http_conn_kick(struct conn *c)
{
        if (c->fuzz || c->closing)
                return;
        uv_idle_start(&c->kick, kick_cb);
}

/* A client that pipelines requests and does not read the answers: no new request is
 * started while more than the high water of answers waits in the socket's queue. */
bool http_conn_write_backlogged(const struct conn *c)
{
        return !c->fuzz && uv_stream_get_write_queue_size((const uv_stream_t *)&c->tcp) >
                                   CELLA_HTTP_WRITE_HIGH_WATER;
}

static void write_cb(uv_write_t *w, int status)
{
        struct wreq *wr = (struct wreq *)w;
        struct conn *c = wr->conn;
        struct http_request *req = wr->req;

        if (req)
                req->queued -= wr->counted;
        if (status < 0 && !c->closing)
                http_conn_close(c);
        else if (!c->closing)
                c->write_ms = conn_now(c);
        if (!c->closing && (!c->cur || !c->cur->dispatched) && c->in.len > 0 &&
            !http_conn_write_backlogged(c))
                http_conn_kick(c); /* parsing may have waited for the queue to drain */
        if (wr->cb)
                wr->cb(req, status < 0 ? -EPIPE : 0, wr->counted, wr->ud);
        http_request_unref(req);
        free(wr);
}

#define WRITE_PARTS 8 /* parts of one write at most */

/* Queue the concatenation of parts on the socket. counted bytes are reported to cb and
 * counted in req->queued. held < nparts: that part is not copied but written from where
 * it is, which the caller keeps until cb (the others are copied behind the request). */
static int conn_write(struct conn *c, struct http_request *req, const struct iovec *parts,
                      size_t nparts, size_t held, size_t counted, http_write_cb cb, void *ud)
{
        size_t len = 0, copied = 0, taken = 0, skip;
        uv_buf_t bufs[WRITE_PARTS];
        unsigned nbufs = 0;
        bool last_copied = false; /* bufs[nbufs - 1] is in wr->data */
        struct wreq *wr;
        int r;

        if (c->closing)
                return -EPIPE;
        if (nparts > WRITE_PARTS)
                return -EINVAL;
        for (size_t i = 0; i < nparts; i++) {
                len += parts[i].iov_len;
                bufs[i] = uv_buf_init(parts[i].iov_base, (unsigned)parts[i].iov_len);
        }
        if (c->fuzz)
                return 0;
        /* what must be durable before an answer leaves (a claim's record, decision 0059) */
        if (c->srv && c->srv->cfg.before_write)
                c->srv->cfg.before_write(c->srv->cfg.before_write_userdata);
        /* offered to the socket from where the bytes are when nothing is queued before them
         * (one writev); only what it did not take is copied behind the write request, which
         * is queued in any case, so that cb comes from the loop as for any write */
        if (len && held >= nparts && uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) {
                r = uv_try_write((uv_stream_t *)&c->tcp, bufs, (unsigned)nparts);
                if (r > 0 && (size_t)r <= len)
                        taken = (size_t)r;
        }
        for (size_t i = 0; i < nparts; i++)
                if (i != held)
                        copied += parts[i].iov_len;
        wr = malloc(sizeof(*wr) + copied - MIN(taken, copied));
        if (!wr) {
                if (taken)
                        http_conn_close(c); /* an answer cut inside: nothing can follow */
                return -ENOMEM;
        }
        wr->conn = c;
        wr->req = req;
        wr->cb = cb;
        wr->ud = ud;
        wr->counted = counted;
        wr->len = len;
        copied = 0;
        skip = taken;
        for (size_t i = 0; i < nparts; i++) {
                size_t n = parts[i].iov_len, k = MIN(skip, n);

                skip -= k;
                if (i == held) {
                        bufs[nbufs++] = uv_buf_init(parts[i].iov_base, (unsigned)n);
                        last_copied = false;
                        continue;
                }
                if (n > k) {
                        memcpy(wr->data + copied, (const char *)parts[i].iov_base + k, n - k);
                        /* copied parts next to each other are one buffer */
                        if (nbufs > 0 && last_copied)
                                bufs[nbufs - 1].len += (unsigned)(n - k);
                        else
                                bufs[nbufs++] = uv_buf_init(wr->data + copied, (unsigned)(n - k));
                        copied += n - k;
                        last_copied = true;
                }
        }
        if (nbufs == 0)
                bufs[nbufs++] = uv_buf_init(wr->data, 0); /* taken whole: cb from the loop */
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
                c->write_ms = conn_now(c); /* the send deadline counts from here */
        r = uv_write(&wr->w, (uv_stream_t *)&c->tcp, bufs, nbufs, write_cb);
        if (r < 0) {
                free(wr);
                http_conn_close(c);
                return -EPIPE;
        }
        if (req) {
                http_request_ref(req);
                req->queued += counted;
        }
        return 0;
}

int http_conn_write(struct conn *c, struct http_request *req, const struct iovec *parts,
                    size_t nparts, size_t counted, http_write_cb cb, void *ud)
{
        return conn_write(c, req, parts, nparts, SIZE_MAX, counted, cb, ud);
}

static const char *status_text(int status)
{
        const char *s = http_status_str((enum http_status)status);

        return s && strcmp(s, "<unknown>") != 0 ? s : "Unknown";
}

/* The status line and headers. content_length < 0: chunked (close-delimited on HTTP/1.0). */
static int send_head(struct http_request *req, int status, const char *content_type,
                     int64_t content_length, const char *extra)
{
        _cleanup_buf_ struct buf h = BUF_INIT;
        struct iovec iov;
        int r;

        if (!req->conn || req->conn->closing)
                return -EPIPE;
        if (req->begun)
                return -EALREADY;
        req->begun = true;
        req->status = status;
        if (content_length < 0) {
                if (req->http10)
                        req->keep_alive = false;
                else
                        req->chunked = true;
        }
        r = buf_printf(&h, "HTTP/1.1 %d %s\r\n", status, status_text(status));
        if (r >= 0 && content_type)
                r = buf_printf(&h, "Content-Type: %s\r\n", content_type);
        if (r >= 0 && content_length >= 0)
                r = buf_printf(&h, "Content-Length: %lld\r\n", (long long)content_length);
        if (r >= 0 && req->chunked)
                r = buf_append_str(&h, "Transfer-Encoding: chunked\r\n");
        if (r >= 0 && extra)
                r = buf_append_str(&h, extra);
        if (r >= 0)
                r = buf_append_str(&h, req->keep_alive ? "Connection: keep-alive\r\n\r\n"
                                                       : "Connection: close\r\n\r\n");
        if (r < 0)
                return r;
        iov = (struct iovec){h.data, h.len};
        return http_conn_write(req->conn, req, &iov, 1, 0, NULL, NULL);
}

/* A response is ended when the handler answered and before the body was asked for with
 * Expect: 100-continue: the client may never send the body, so the connection cannot
 * be reused. */
static void before_response(struct http_request *req)
{
        if (req->expect_continue && !req->continue_sent && !req->body_complete)
                req->keep_alive = false;
}

int http_response_begin(struct http_request *req, int status, const char *content_type,
                        int64_t content_length, const char *extra_headers)
{
        if (!req->conn)
                return -EPIPE;
        if (req->begun)
                return -EALREADY;
        before_response(req);
        return send_head(req, status, content_type, content_length, extra_headers);
}

static int response_write(struct http_request *req, const void *data, size_t len, bool held,
                          http_write_cb done, void *ud)
{
        char size_line[32];
        struct iovec iov[3];
        int n;

        if (!req->conn || req->ended)
                return -EPIPE;
        if (!req->begun)
                return -EINVAL;
        if (req->head || len == 0)
                return 0;
        if (!req->chunked) {
                iov[0] = (struct iovec){(void *)data, len};
                return conn_write(req->conn, req, iov, 1, held ? 0 : SIZE_MAX, len, done, ud);
        }
        n = snprintf(size_line, sizeof(size_line), "%zx\r\n", len);
        iov[0] = (struct iovec){size_line, (size_t)n};
        iov[1] = (struct iovec){(void *)data, len};
        iov[2] = (struct iovec){"\r\n", 2};
        return conn_write(req->conn, req, iov, 3, held ? 1 : SIZE_MAX, len, done, ud);
}

int http_response_write(struct http_request *req, const void *data, size_t len, http_write_cb done,
                        void *ud)
{
        return response_write(req, data, len, false, done, ud);
}

int http_response_write_held(struct http_request *req, const void *data, size_t len,
                             http_write_cb done, void *ud)
{
        return response_write(req, data, len, true, done, ud);
}

int64_t http_response_sendfile(struct http_request *req, int fd, uint64_t offset, size_t len,
                               http_write_cb done, void *ud)
{
        struct conn *c = req->conn;
        size_t taken = 0, rest;
        struct wreq *wr;
        uv_buf_t buf;
        int sock;

        if (!c || req->ended || c->closing)
                return -EPIPE;
        if (!req->begun || req->chunked || !done)
                return -EINVAL;
        if (req->head || len == 0)
                return 0;
        if (c->fuzz || uv_fileno((uv_handle_t *)&c->tcp, &sock) < 0)
                return -EPIPE;
        if (c->srv && c->srv->cfg.before_write)
                c->srv->cfg.before_write(c->srv->cfg.before_write_userdata);
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0) {
                while (taken < len) {
                        off_t off = (off_t)(offset + taken);
                        ssize_t n = sendfile(sock, fd, &off, len - taken);

                        if (n > 0) {
                                taken += (size_t)n;
                                continue;
                        }
                        if (n == 0 || errno == EAGAIN || errno == EINTR)
                                break; /* the file's end (it shrank), or the socket is full */
                        http_conn_close(c);
                        return -EPIPE;
                }
        }
        if (taken)
                c->write_ms = conn_now(c); /* progress */
        /* the socket is full (or something is queued): a little more is copied, whose
         * write completes once the socket has room again for sendfile */
        rest = MIN(len - taken, (size_t)CELLA_HTTP_SENDFILE_COPY);
        len = taken + rest;
        wr = malloc(sizeof(*wr) + rest);
        if (!wr) {
                if (taken)
                        http_conn_close(c); /* an answer cut inside: nothing can follow */
                return -ENOMEM;
        }
        for (size_t got = 0; taken + got < len;) {
                ssize_t n =
                        pread(fd, wr->data + got, len - taken - got, (off_t)(offset + taken + got));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0) {
                        int e = n < 0 ? -errno : -ENODATA;

                        free(wr);
                        if (taken || got)
                                http_conn_close(c);
                        return e;
                }
                got += (size_t)n;
        }
        wr->conn = c;
        wr->req = req;
        wr->cb = done;
        wr->ud = ud;
        wr->counted = len;
        wr->len = len;
        buf = uv_buf_init(wr->data, (unsigned)rest); /* empty when taken whole */
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
                c->write_ms = conn_now(c); /* the send deadline counts from here */
        if (uv_write(&wr->w, (uv_stream_t *)&c->tcp, &buf, 1, write_cb) < 0) {
                free(wr);
                http_conn_close(c);
                return -EPIPE;
        }
        http_request_ref(req);
        req->queued += len;
        return (int64_t)len;
}

size_t http_response_queued(const struct http_request *req)
{
        return req->queued;
}

int http_response_end_trailers(struct http_request *req, const char *trailers)
{
        struct iovec iov[3];
        int r;

        if (!req->conn)
                return -EPIPE;
        if (req->ended)
                return -EALREADY;
        if (!req->begun)
                return -EINVAL;
        if (req->chunked && !req->head) {
                iov[0] = (struct iovec){"0\r\n", 3};
                iov[1] = (struct iovec){(void *)(trailers ? trailers : ""),
                                        trailers ? strlen(trailers) : 0};
                iov[2] = (struct iovec){"\r\n", 2};
                r = http_conn_write(req->conn, req, iov, 3, 0, NULL, NULL);
                if (r < 0)
                        return r;
        }
        return http_req_end(req);
}

int http_response_end(struct http_request *req)
{
        return http_response_end_trailers(req, NULL);
}

bool http_response_is_chunked(const struct http_request *req)
{
        return req->chunked;
}

void http_request_close(struct http_request *req)
{
        struct conn *c = req->conn;

        if (!c)
                return;
        req->aborted = true;
        http_conn_close(c);
}

int http_request_take_socket(struct http_request *req, int *ret_fd, struct buf *leftover)
{
        struct conn *c = req->conn;
        uv_os_fd_t fd;
        int nfd;

        if (!c || c->closing || c->shutting || c->fuzz)
                return -EPIPE;
        if (req->begun || req->ended)
                return -EALREADY;
        if (c->in_process)
                return -EBUSY; /* inside on_request: the head is not consumed yet */
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0)
                return -EBUSY;
        if (uv_fileno((uv_handle_t *)&c->tcp, &fd) < 0)
                return -EBADF;
        nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
        if (nfd < 0)
                return -errno;
        /* What the client sent after this request's head is the new protocol's. */
        buf_reset(leftover);
        if (c->in.len > 0 && buf_append(leftover, c->in.data, c->in.len) < 0) {
                close(nfd);
                return -ENOMEM;
        }
        buf_reset(&c->in);
        req->status = 101;
        req->begun = true;
        req->ended = true;
        req->keep_alive = false;
        http_conn_detach(c, false);
        /* libuv drops the fd from its poller before closing it; the duplicate keeps the
         * socket open for the new owner. */
        http_conn_close(c);
        *ret_fd = nfd;
        return 0;
}

static int respond_bytes(struct http_request *req, int status, const char *content_type,
                         const void *data, size_t len, const char *extra)
{
        struct iovec iov;
        int r;

        r = http_response_begin(req, status, content_type, (int64_t)len, extra);
        if (r < 0)
                return r;
        if (!req->head && len > 0) {
                iov = (struct iovec){(void *)data, len};
                r = http_conn_write(req->conn, req, &iov, 1, 0, NULL, NULL);
                if (r < 0)
                        return r;
        }
        return http_req_end(req);
}

int http_respond_bytes(struct http_request *req, int status, const char *content_type,
                       const void *data, size_t len)
{
        return respond_bytes(req, status, content_type, data, len, NULL);
}

static int respond_json(struct http_request *req, int status, json_t *body, const char *extra)
{
        _cleanup_free_ char *s = json_dumps(body, JSON_COMPACT);

        if (!s)
                return -ENOMEM;
        return respond_bytes(req, status, "application/json", s, strlen(s), extra);
}

int http_respond_json(struct http_request *req, int status, json_t *body)
{
        return respond_json(req, status, body, NULL);
}

static json_t *error_json(int code, const char *message, json_t *context)
{
        char ts[32];

        time_format_iso(time_now_ms(), ts, sizeof(ts));
        return json_pack("{s:s, s:s, s:O, s:i, s:s}", "code", cella_code_name(code), "message",
                         message, "context", context ? context : json_object(), "httpStatus",
                         cella_code_status(code), "timestamp", ts);
}

int http_respond_error(struct http_request *req, const struct cella_error *err, json_t *context)
{
        return http_respond_error_headers(req, err, context, NULL);
}

json_t *http_error_json(const struct cella_error *err, json_t *context)
{
        int code = err && err->code != CELLA_E_OK ? err->code : CELLA_E_INTERNAL_ERROR;
        json_t *ctx = context ? json_incref(context) : json_object();
        json_t *j = error_json(code, err && err->msg[0] ? err->msg : cella_code_name(code), ctx);

        metrics_error(code);
        json_decref(ctx);
        return j;
}

int http_respond_error_headers(struct http_request *req, const struct cella_error *err,
                               json_t *context, const char *extra_headers)
{
        int code = err && err->code != CELLA_E_OK ? err->code : CELLA_E_INTERNAL_ERROR;
        _cleanup_json_ json_t *j = http_error_json(err, context);

        if (!j)
                return -ENOMEM;
        http_request_error_view(req, j);
        return respond_json(req, cella_code_status(code), j, extra_headers);
}

int http_respond_code(struct http_request *req, int code, const char *fmt, ...)
{
        struct cella_error e = {0};
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(&e, code, fmt, ap);
        va_end(ap);
        return http_respond_error(req, &e, NULL);
}

int http_response_begin_sse(struct http_request *req)
{
        return http_response_begin(req, 200, "text/event-stream", -1,
                                   "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n");
}

int http_sse_send(struct http_request *req, json_t *event, http_write_cb done, void *ud)
{
        _cleanup_buf_ struct buf b = BUF_INIT;
        _cleanup_free_ char *s = json_dumps(event, JSON_COMPACT);

        if (!s)
                return -ENOMEM;
        if (buf_append_str(&b, "data: ") < 0 || buf_append_str(&b, s) < 0 ||
            buf_append_str(&b, "\n\n") < 0)
                return -ENOMEM;
        return http_response_write(req, b.data, b.len, done, ud);
}

/* The request's response is complete. The connection goes on with the next request once
 * the body has been parsed too; a body still arriving after the answer is discarded (up
 * to a limit), or the connection is closed when the client will not send it. */
int http_req_end(struct http_request *req)
{
        struct conn *c = req->conn;

        req->ended = true;
        if (!c)
                return 0;
        req->body_mode = BODY_DISCARD;
        if (!req->keep_alive) {
                http_conn_detach(c, false);
                http_conn_shutdown(c);
                return 0;
        }
        if (req->body_complete) {
                http_conn_detach(c, false);
                http_conn_kick(c);
        } else if (req->body_paused) {
                req->body_paused = false;
                buf_reset(&req->pending);
                http_conn_kick(c);
        }
        return 0;
}
