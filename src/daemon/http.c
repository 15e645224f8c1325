/* cellad's HTTP/1.1 server (see http.h for the contract).
 *
 * A connection owns an input buffer, one http_parser and at most one current request.
 * Input is parsed by conn_process() only, never re-entered: the parser is paused (1) at the
 * end of a request whose response has not ended yet, (2) when a streamed body's consumer
 * took fewer bytes than offered, (3) to report an error found in a callback (conn->perr).
 * Socket reads stop while the parser is blocked and bytes are buffered, so a pipelining or
 * uploading client cannot make the daemon buffer more than one read ahead.
 *
 * Deferred work (continuing to parse after a response ended or a body was resumed) runs
 * from an idle handle, so a handler's call into this module never re-enters its own code.
 *
 * Deadlines are not one timer per connection: the server's sweep timer looks at every
 * connection's timestamps once a second (a few thousand comparisons), so that holding
 * thousands of trickling connections costs no timer churn.
 *
 * A request's head is scanned byte by byte (head_scan) before the parser sees it, for what
 * http-parser lets through in its lenient mode (bare LF, obs-fold, "Name : value"); the
 * parser is paused after every message so that the scan restarts at the next head. In a
 * chunked body, the CRLF after each chunk's data is checked the same way (chunk_crlf):
 * the lenient parser would take any two bytes there and read a chunk size from what
 * follows. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>
#include <http_parser.h>
#include <sys/resource.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "daemon/http.h"

struct header {
        char *name;
        char *value;
};

enum body_mode { BODY_DISCARD, BODY_WHOLE, BODY_STREAM };

struct http_request {
        unsigned refs;
        struct conn *conn; /* NULL once detached (finished or connection gone) */
        const char *method;
        bool head;
        bool http10;
        char *path;
        char *target;         /* the request target as sent */
        struct header *query; /* name/value pairs, decoded */
        size_t nquery;
        struct header *headers;
        size_t nheaders;
        uint64_t start_us;
        int status;
        bool dispatched;
        bool begun;         /* status line sent */
        bool ended;         /* response complete */
        bool body_complete; /* message complete in the parser */
        bool keep_alive;
        bool expect_continue;
        bool continue_sent;
        bool chunked;
        bool aborted;
        size_t queued;

        enum body_mode body_mode;
        struct mem_budget *budget; /* the server's, for body_counted */
        struct buf body;
        size_t body_limit;
        size_t discarded;
        size_t body_counted; /* bytes of body taken from the server's budget */
        http_body_cb body_cb;
        const struct http_body_ops *ops;
        void *body_ud;
        bool body_paused;
        struct buf pending; /* streamed-body bytes the consumer did not take yet */

        void (*abort_cb)(struct http_request *req, void *ud);
        void *abort_ud;
        void *userdata;
};

/* Connections of one client address (in the server's hash of them). */
struct peer {
        struct peer *next;
        uint8_t addr[16]; /* IPv6, or IPv4-mapped */
        unsigned count;
};

enum head_scan_state {
        SCAN_LINE_START, /* at the start of a line (request line or header) */
        SCAN_NAME,       /* in a header's name */
        SCAN_LINE,       /* in the request line or a header's value */
        SCAN_CR,         /* after a CR: LF must follow */
        SCAN_CR_SKIP,    /* after the CR of an empty line before the request line */
        SCAN_DONE_CR,    /* after the CR of the empty line that ends the head */
        SCAN_DONE,       /* the head ended: the body is the parser's */
};

struct conn {
        uv_tcp_t tcp;
        uv_idle_t kick;
        uv_shutdown_t shut;
        struct http_server *srv;
        struct conn *prev, *next;
        http_parser parser;
        struct buf in;
        struct http_request *cur;
        /* header accumulation for cur */
        struct buf url, field, value;
        bool in_value;
        size_t header_bytes;
        int perr; /* enum cella_code of an error found while parsing, 0 none */
        bool in_process;
        bool dead_input; /* parse nothing more */
        bool closing;
        bool shutting;
        bool eof;
        bool reading;
        bool fuzz;
        bool served;   /* a request was dispatched on it */
        bool over_cap; /* refused (per-client cap): closed at once, not counted */
        int handles_open;
        uint64_t head_ms;  /* the current head began (the connection, for the first) */
        uint64_t body_ms;  /* the current request was dispatched */
        uint64_t read_ms;  /* last byte read (or reading resumed) */
        uint64_t write_ms; /* last write progress (or the write queue became non-empty) */
        struct peer *peer; /* its address's count (NULL in fuzz mode) */
        /* head scan (see the top of this file) */
        enum head_scan_state scan;
        bool scan_headers; /* past the request line */
        size_t scan_off;   /* bytes at the front of `in` already scanned */
        /* Bytes of the CRLF after a chunk's data still to be checked at the front of `in`
         * (0, 1: the LF, 2: both), when the data ended at the end of what was read. */
        unsigned crlf_need;
};

#define PEER_BUCKETS 4096

struct http_server {
        uv_loop_t *loop;
        uv_tcp_t listener;
        uv_timer_t sweep;
        struct http_server_config cfg;
        struct conn *conns, *tail; /* newest first; tail is the oldest */
        unsigned nconns;
        unsigned max_conns, max_per_client;
        struct peer *peers[PEER_BUCKETS];
        int port;
        int handles_open;
        bool closing;
};

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

static void conn_close(struct conn *c);
static void conn_process(struct conn *c);
static void conn_update_reading(struct conn *c);
static void conn_shutdown(struct conn *c);
static int req_end(struct http_request *req);
static void body_release(struct http_request *req);

static uint64_t conn_now(const struct conn *c)
{
        return c->fuzz || !c->srv || !c->srv->loop ? 0 : uv_now(c->srv->loop);
}

/* ---- requests ---- */

static struct http_request *req_new(struct conn *c)
{
        struct http_request *req = calloc(1, sizeof(*req));

        if (!req)
                return NULL;
        req->refs = 1;
        req->conn = c;
        req->start_us = time_mono_us();
        req->method = "GET";
        return req;
}

static void free_pairs(struct header *h, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(h[i].name);
                free(h[i].value);
        }
        free(h);
}

void http_request_ref(struct http_request *req)
{
        req->refs++;
}

void http_request_unref(struct http_request *req)
{
        if (!req || --req->refs > 0)
                return;
        body_release(req);
        free(req->path);
        free(req->target);
        free_pairs(req->query, req->nquery);
        free_pairs(req->headers, req->nheaders);
        buf_free(&req->body);
        buf_free(&req->pending);
        free(req);
}

const char *http_request_method(const struct http_request *req)
{
        return req->method;
}

bool http_request_is_head(const struct http_request *req)
{
        return req->head;
}

const char *http_request_path(const struct http_request *req)
{
        return req->path ? req->path : "/";
}

const char *http_request_target(const struct http_request *req)
{
        return req->target ? req->target : "/";
}

int http_request_peer(const struct http_request *req, char *out, size_t size)
{
        struct sockaddr_storage ss;
        int len = sizeof(ss);

        if (!req->conn || req->conn->fuzz ||
            uv_tcp_getpeername(&req->conn->tcp, (struct sockaddr *)&ss, &len) < 0)
                return -ENOTCONN;
        if (ss.ss_family == AF_INET)
                return uv_ip4_name((struct sockaddr_in *)&ss, out, size) < 0 ? -EINVAL : 0;
        return uv_ip6_name((struct sockaddr_in6 *)&ss, out, size) < 0 ? -EINVAL : 0;
}

uv_loop_t *http_request_loop(const struct http_request *req)
{
        return req->conn && req->conn->srv ? req->conn->srv->loop : NULL;
}

size_t http_request_header_count(const struct http_request *req)
{
        return req->nheaders;
}

void http_request_header_at(const struct http_request *req, size_t i, const char **name,
                            const char **value)
{
        *name = req->headers[i].name;
        *value = req->headers[i].value;
}

const char *http_request_query(const struct http_request *req, const char *name)
{
        for (size_t i = 0; i < req->nquery; i++)
                if (strcmp(req->query[i].name, name) == 0)
                        return req->query[i].value;
        return NULL;
}

const char *http_request_header(const struct http_request *req, const char *name)
{
        for (size_t i = 0; i < req->nheaders; i++)
                if (strcasecmp(req->headers[i].name, name) == 0)
                        return req->headers[i].value;
        return NULL;
}

uint64_t http_request_start_us(const struct http_request *req)
{
        return req->start_us;
}

int http_request_status(const struct http_request *req)
{
        return req->status;
}

void http_request_set_userdata(struct http_request *req, void *userdata)
{
        req->userdata = userdata;
}

void *http_request_get_userdata(const struct http_request *req)
{
        return req->userdata;
}

void http_request_on_abort(struct http_request *req, void (*cb)(struct http_request *req, void *ud),
                           void *ud)
{
        req->abort_cb = cb;
        req->abort_ud = ud;
}

/* Detach the current request from its connection and drop the connection's reference.
 * With abort, the handler is told the client is gone (once, if it has not ended). */
static void conn_detach(struct conn *c, bool abort)
{
        struct http_request *req = c->cur;

        if (!req)
                return;
        c->cur = NULL;
        req->conn = NULL;
        if (req->dispatched && c->srv && c->srv->cfg.on_done)
                c->srv->cfg.on_done(req, c->srv->cfg.userdata); /* status 0: never answered */
        if (abort && req->dispatched && !req->ended && !req->aborted) {
                req->aborted = true;
                if (req->abort_cb)
                        req->abort_cb(req, req->abort_ud);
        }
        http_request_unref(req);
}

/* The server answers a dispatched request itself (413, a broken body): the handler is
 * told through on_abort, once, so that it releases what it holds for the request. */
static void req_abort_handler(struct http_request *req)
{
        if (req->dispatched && !req->aborted && !req->ended) {
                req->aborted = true;
                if (req->abort_cb)
                        req->abort_cb(req, req->abort_ud);
        }
}

/* ---- writing ---- */

static void kick_cb(uv_idle_t *h)
{
        struct conn *c = h->data;

        uv_idle_stop(h);
        conn_process(c);
}

static void conn_kick(struct conn *c)
{
        if (c->fuzz || c->closing)
                return;
        uv_idle_start(&c->kick, kick_cb);
}

/* A client that pipelines requests and does not read the answers: no new request is
 * started while more than the high water of answers waits in the socket's queue. */
static bool conn_write_backlogged(const struct conn *c)
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
                conn_close(c);
        else if (!c->closing)
                c->write_ms = conn_now(c);
        if (!c->closing && (!c->cur || !c->cur->dispatched) && c->in.len > 0 &&
            !conn_write_backlogged(c))
                conn_kick(c); /* parsing may have waited for the queue to drain */
        if (wr->cb)
                wr->cb(req, status < 0 ? -EPIPE : 0, wr->counted, wr->ud);
        http_request_unref(req);
        free(wr);
}

/* Queue the concatenation of parts on the socket. counted bytes are reported to cb and
 * counted in req->queued. */
static int conn_write(struct conn *c, struct http_request *req, const struct iovec *parts,
                      size_t nparts, size_t counted, http_write_cb cb, void *ud)
{
        size_t len = 0;
        struct wreq *wr;
        uv_buf_t b;
        int r;

        if (c->closing)
                return -EPIPE;
        for (size_t i = 0; i < nparts; i++)
                len += parts[i].iov_len;
        if (c->fuzz)
                return 0;
        wr = malloc(sizeof(*wr) + len);
        if (!wr)
                return -ENOMEM;
        wr->conn = c;
        wr->req = req;
        wr->cb = cb;
        wr->ud = ud;
        wr->counted = counted;
        wr->len = len;
        len = 0;
        for (size_t i = 0; i < nparts; i++) {
                if (parts[i].iov_len)
                        memcpy(wr->data + len, parts[i].iov_base, parts[i].iov_len);
                len += parts[i].iov_len;
        }
        b = uv_buf_init(wr->data, (unsigned)len);
        if (uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) == 0)
                c->write_ms = conn_now(c); /* the send deadline counts from here */
        r = uv_write(&wr->w, (uv_stream_t *)&c->tcp, &b, 1, write_cb);
        if (r < 0) {
                free(wr);
                conn_close(c);
                return -EPIPE;
        }
        if (req) {
                http_request_ref(req);
                req->queued += counted;
        }
        return 0;
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
        return conn_write(req->conn, req, &iov, 1, 0, NULL, NULL);
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

int http_response_write(struct http_request *req, const void *data, size_t len, http_write_cb done,
                        void *ud)
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
                return conn_write(req->conn, req, iov, 1, len, done, ud);
        }
        n = snprintf(size_line, sizeof(size_line), "%zx\r\n", len);
        iov[0] = (struct iovec){size_line, (size_t)n};
        iov[1] = (struct iovec){(void *)data, len};
        iov[2] = (struct iovec){"\r\n", 2};
        return conn_write(req->conn, req, iov, 3, len, done, ud);
}

size_t http_response_queued(const struct http_request *req)
{
        return req->queued;
}

int http_response_end(struct http_request *req)
{
        struct iovec iov;
        int r;

        if (!req->conn)
                return -EPIPE;
        if (req->ended)
                return -EALREADY;
        if (!req->begun)
                return -EINVAL;
        if (req->chunked && !req->head) {
                iov = (struct iovec){"0\r\n\r\n", 5};
                r = conn_write(req->conn, req, &iov, 1, 0, NULL, NULL);
                if (r < 0)
                        return r;
        }
        return req_end(req);
}

void http_request_close(struct http_request *req)
{
        struct conn *c = req->conn;

        if (!c)
                return;
        req->aborted = true;
        conn_close(c);
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
        conn_detach(c, false);
        /* libuv drops the fd from its poller before closing it; the duplicate keeps the
         * socket open for the new owner. */
        conn_close(c);
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
                r = conn_write(req->conn, req, &iov, 1, 0, NULL, NULL);
                if (r < 0)
                        return r;
        }
        return req_end(req);
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

        json_decref(ctx);
        return j;
}

int http_respond_error_headers(struct http_request *req, const struct cella_error *err,
                               json_t *context, const char *extra_headers)
{
        int code = err && err->code != CELLA_E_OK ? err->code : CELLA_E_INTERNAL_ERROR;
        json_t *j = http_error_json(err, context);
        int r;

        if (!j)
                return -ENOMEM;
        r = respond_json(req, cella_code_status(code), j, extra_headers);
        json_decref(j);
        return r;
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
static int req_end(struct http_request *req)
{
        struct conn *c = req->conn;

        req->ended = true;
        if (!c)
                return 0;
        req->body_mode = BODY_DISCARD;
        if (!req->keep_alive) {
                conn_detach(c, false);
                conn_shutdown(c);
                return 0;
        }
        if (req->body_complete) {
                conn_detach(c, false);
                conn_kick(c);
        } else if (req->body_paused) {
                req->body_paused = false;
                buf_reset(&req->pending);
                conn_kick(c);
        }
        return 0;
}

/* ---- body ---- */

static void send_continue(struct http_request *req)
{
        static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";
        struct iovec iov = {(void *)line, sizeof(line) - 1};

        if (req->expect_continue && !req->continue_sent && !req->begun && req->conn) {
                req->continue_sent = true;
                (void)conn_write(req->conn, NULL, &iov, 1, 0, NULL, NULL);
        }
}

int http_request_read_body(struct http_request *req, size_t limit, http_body_cb cb, void *ud)
{
        if (!req->conn || req->body_mode != BODY_DISCARD || req->ended)
                return -EINVAL;
        req->body_mode = BODY_WHOLE;
        req->budget = req->conn->srv ? req->conn->srv->cfg.budget : NULL;
        req->body_limit = limit;
        req->body_cb = cb;
        req->body_ud = ud;
        send_continue(req);
        return 0;
}

int http_request_stream_body(struct http_request *req, const struct http_body_ops *ops, void *ud)
{
        if (!req->conn || req->body_mode != BODY_DISCARD || req->ended)
                return -EINVAL;
        req->body_mode = BODY_STREAM;
        req->ops = ops;
        req->body_ud = ud;
        send_continue(req);
        return 0;
}

void http_request_resume_body(struct http_request *req)
{
        size_t took;

        if (!req->conn || !req->body_paused || req->body_mode != BODY_STREAM)
                return;
        took = req->ops->on_data(req, req->pending.data, req->pending.len, req->body_ud);
        if (!req->conn || req->body_mode != BODY_STREAM)
                return;
        if (took < req->pending.len) {
                buf_consume(&req->pending, took);
                return;
        }
        buf_reset(&req->pending);
        req->body_paused = false;
        req->conn->read_ms = conn_now(req->conn); /* the body's idle deadline restarts */
        conn_kick(req->conn);
}

/* A whole body's memory and its share of the budget go as soon as it was handed over. */
static void body_release(struct http_request *req)
{
        buf_free(&req->body);
        mem_budget_give(req->budget, req->body_counted);
        req->body_counted = 0;
}

/* 503 SERVER_BUSY: the daemon holds as much for clients as its budget allows. */
static void respond_busy(struct http_request *req)
{
        struct cella_error e = {0};
        char extra[64];

        cella_error_set(&e, CELLA_E_SERVER_BUSY,
                        "cellad is holding its whole buffer budget (%zu MiB) for requests: "
                        "retry later",
                        req->budget ? req->budget->limit >> 20 : 0);
        snprintf(extra, sizeof(extra), "Retry-After: %d\r\n", CELLA_HTTP_RETRY_AFTER_S);
        http_respond_error_headers(req, &e, NULL, extra);
}

/* ---- parser callbacks ---- */

static struct conn *pconn(http_parser *p)
{
        return p->data;
}

/* Nothing more is parsed on a connection that is closing or answered an error, and no
 * callback runs without a current request (parsing stops at once). */
static bool stopped(struct conn *c)
{
        if (c->dead_input || c->closing || !c->cur) {
                http_parser_pause(&c->parser, 1);
                return true;
        }
        return false;
}

static int fail(struct conn *c, int code)
{
        if (!c->perr)
                c->perr = code;
        http_parser_pause(&c->parser, 1);
        return 0;
}

static int on_message_begin(http_parser *p)
{
        struct conn *c = pconn(p);

        if (c->dead_input || c->closing) {
                http_parser_pause(p, 1);
                return 0;
        }
        if (c->cur) /* a request is still current: cannot happen, parser is paused then */
                return fail(c, CELLA_E_INTERNAL_ERROR);
        c->cur = req_new(c);
        if (!c->cur)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        buf_reset(&c->url);
        buf_reset(&c->field);
        buf_reset(&c->value);
        c->in_value = false;
        c->header_bytes = 0;
        c->crlf_need = 0;
        if (c->served)
                c->head_ms = conn_now(c); /* the first head counts from the connection */
        return 0;
}

static int count_header_bytes(struct conn *c, size_t n)
{
        c->header_bytes += n;
        if (c->header_bytes > CELLA_HTTP_MAX_HEADER_BYTES)
                return fail(c, CELLA_E_HEADERS_TOO_LARGE);
        return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);

        if (stopped(c))
                return 0;

        if (c->url.len + len > CELLA_HTTP_MAX_URL)
                return fail(c, CELLA_E_URI_TOO_LONG);
        if (count_header_bytes(c, len) < 0 || c->perr)
                return 0;
        if (buf_append(&c->url, at, len) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        return 0;
}

static int commit_header(struct conn *c)
{
        struct http_request *req = c->cur;
        struct header *n;

        if (!c->in_value)
                return 0;
        if (req->nheaders >= CELLA_HTTP_MAX_HEADERS)
                return fail(c, CELLA_E_HEADERS_TOO_LARGE);
        if (memchr(c->field.data, 0, c->field.len) || memchr(c->value.data, 0, c->value.len))
                return fail(c, CELLA_E_BAD_REQUEST);
        n = realloc(req->headers, (req->nheaders + 1) * sizeof(*n));
        if (!n)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        req->headers = n;
        n[req->nheaders].name = strndup(c->field.data ? c->field.data : "", c->field.len);
        n[req->nheaders].value = strndup(c->value.data ? c->value.data : "", c->value.len);
        req->nheaders++;
        if (!n[req->nheaders - 1].name || !n[req->nheaders - 1].value)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        buf_reset(&c->field);
        buf_reset(&c->value);
        c->in_value = false;
        return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);

        if (stopped(c))
                return 0;

        if (c->in_value && (commit_header(c) < 0 || c->perr))
                return 0;
        if (count_header_bytes(c, len + (c->field.len == 0 ? 4 : 0)) < 0 || c->perr)
                return 0;
        if (buf_append(&c->field, at, len) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);

        if (stopped(c))
                return 0;

        c->in_value = true;
        if (count_header_bytes(c, len) < 0 || c->perr)
                return 0;
        if (buf_append(&c->value, at, len) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        return 0;
}

static int hexval(char ch)
{
        if (ch >= '0' && ch <= '9')
                return ch - '0';
        if (ch >= 'a' && ch <= 'f')
                return ch - 'a' + 10;
        if (ch >= 'A' && ch <= 'F')
                return ch - 'A' + 10;
        return -1;
}

/* Percent-decode s[0..len) into a new string. -EINVAL for a bad escape or a NUL. */
static int pct_decode(const char *s, size_t len, bool plus_space, char **ret)
{
        char *out = malloc(len + 1);
        size_t o = 0;

        if (!out)
                return -ENOMEM;
        for (size_t i = 0; i < len; i++) {
                char ch = s[i];

                if (ch == '%') {
                        int hi, lo;

                        if (len - i < 3) {
                                free(out);
                                return -EINVAL;
                        }
                        hi = hexval(s[i + 1]);
                        lo = hexval(s[i + 2]);
                        if (hi < 0 || lo < 0) {
                                free(out);
                                return -EINVAL;
                        }
                        ch = (char)(hi * 16 + lo);
                        i += 2;
                } else if (ch == '+' && plus_space) {
                        ch = ' ';
                }
                if (ch == '\0') {
                        free(out);
                        return -EINVAL;
                }
                out[o++] = ch;
        }
        out[o] = '\0';
        *ret = out;
        return 0;
}

static int parse_query(struct http_request *req, const char *q, size_t len)
{
        size_t i = 0;

        while (i < len) {
                size_t end = i, eq;
                struct header *n;
                char *k = NULL, *v = NULL;

                while (end < len && q[end] != '&')
                        end++;
                eq = i;
                while (eq < end && q[eq] != '=')
                        eq++;
                if (end > i) {
                        if (pct_decode(q + i, eq - i, true, &k) < 0)
                                return -EINVAL;
                        if (pct_decode(q + (eq < end ? eq + 1 : end), eq < end ? end - eq - 1 : 0,
                                       true, &v) < 0) {
                                free(k);
                                return -EINVAL;
                        }
                        n = realloc(req->query, (req->nquery + 1) * sizeof(*n));
                        if (!n) {
                                free(k);
                                free(v);
                                return -ENOMEM;
                        }
                        req->query = n;
                        n[req->nquery].name = k;
                        n[req->nquery].value = v;
                        req->nquery++;
                }
                i = end + 1;
        }
        return 0;
}

static int parse_target(struct conn *c, struct http_request *req)
{
        struct http_parser_url u;
        const char *url = c->url.data ? c->url.data : "";

        http_parser_url_init(&u);
        if (c->url.len == 0 || http_parser_parse_url(url, c->url.len, 0, &u) != 0)
                return -EINVAL;
        if (memchr(url, 0, c->url.len))
                return -EINVAL;
        req->target = strndup(url, c->url.len);
        if (!req->target)
                return -ENOMEM;
        if (u.field_set & (1 << UF_PATH)) {
                if (pct_decode(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len, false,
                               &req->path) < 0)
                        return -EINVAL;
        } else {
                req->path = strdup("/");
                if (!req->path)
                        return -ENOMEM;
        }
        if (u.field_set & (1 << UF_QUERY))
                return parse_query(req, url + u.field_data[UF_QUERY].off,
                                   u.field_data[UF_QUERY].len);
        return 0;
}

/* Message framing beyond http-parser: at most one Content-Length, and Transfer-Encoding
 * only as one "chunked" (a coding cellad does not decode, or a list, is refused rather than
 * guessed at: a proxy in front may frame it differently). */
static int check_framing(const struct http_request *req)
{
        unsigned cl = 0, te = 0;

        for (size_t i = 0; i < req->nheaders; i++) {
                const char *v = req->headers[i].value;

                if (strcasecmp(req->headers[i].name, "Content-Length") == 0)
                        cl++;
                else if (strcasecmp(req->headers[i].name, "Transfer-Encoding") == 0) {
                        size_t n;

                        te++;
                        v += strspn(v, " \t");
                        n = strlen(v);
                        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                                n--;
                        if (n != 7 || strncasecmp(v, "chunked", 7) != 0)
                                return -EINVAL;
                }
        }
        return cl > 1 || te > 1 || (cl && te) ? -EINVAL : 0;
}

static int on_headers_complete(http_parser *p)
{
        struct conn *c = pconn(p);
        struct http_request *req = c->cur;
        const char *expect;

        if (stopped(c))
                return 0;

        if (commit_header(c) < 0 || c->perr)
                return 0;
        if (p->http_major != 1)
                return fail(c, CELLA_E_BAD_REQUEST);
        req->method = http_method_str((enum http_method)p->method);
        req->head = p->method == HTTP_HEAD;
        req->http10 = p->http_minor == 0;
        req->keep_alive = http_should_keep_alive(p) && !p->upgrade;
        if (p->method == HTTP_CONNECT)
                return fail(c, CELLA_E_METHOD_NOT_ALLOWED);
        if (parse_target(c, req) < 0)
                return fail(c, CELLA_E_BAD_REQUEST);
        if (check_framing(req) < 0)
                return fail(c, CELLA_E_BAD_REQUEST);
        expect = http_request_header(req, "Expect");
        if (expect) {
                if (strcasecmp(expect, "100-continue") != 0)
                        return fail(c, CELLA_E_BAD_REQUEST);
                req->expect_continue = !req->http10;
        }
        req->dispatched = true;
        c->served = true;
        c->body_ms = c->read_ms = conn_now(c);
        http_request_ref(req);
        c->srv->cfg.on_request(req, c->srv->cfg.userdata);
        http_request_unref(req);
        return 0;
}

/* A chunk's data ends at q (in `in`): the CRLF that must follow, as far as it was read;
 * the rest is checked when more arrives (chunk_crlf_pending). 0 or -EBADMSG. */
static int chunk_crlf(struct conn *c, const char *q)
{
        const char *end = c->in.data + c->in.len;

        c->crlf_need = 0;
        for (unsigned i = 0; i < 2; i++) {
                if (q + i >= end) {
                        c->crlf_need = 2 - i;
                        return 0;
                }
                if (q[i] != "\r\n"[i])
                        return -EBADMSG;
        }
        return 0;
}

/* The rest of a chunk's CRLF, at the front of `in` (the data ended where the last read
 * did, and the parser took everything up to there). 0 or -EBADMSG. */
static int chunk_crlf_pending(struct conn *c)
{
        const char *want = c->crlf_need == 2 ? "\r\n" : "\n";
        size_t i;

        for (i = 0; i < c->crlf_need && i < c->in.len; i++)
                if (c->in.data[i] != want[i])
                        return -EBADMSG;
        c->crlf_need -= (unsigned)i;
        return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);
        struct http_request *req = c->cur;
        size_t took;

        if ((p->flags & F_CHUNKED) && p->content_length == 0 && chunk_crlf(c, at + len) < 0)
                return fail(c, CELLA_E_BAD_REQUEST);
        if (stopped(c))
                return 0;

        if (!req)
                return 0;
        switch (req->body_mode) {
        case BODY_DISCARD:
                req->discarded += len;
                if (req->ended && req->discarded > CELLA_HTTP_MAX_JSON_BODY) {
                        c->dead_input = true;
                        http_parser_pause(p, 1);
                }
                return 0;
        case BODY_WHOLE: {
                size_t reserved = req->body.len < CELLA_HTTP_BODY_RESERVE
                                          ? MIN(len, CELLA_HTTP_BODY_RESERVE - req->body.len)
                                          : 0;

                if (req->body.len + len > req->body_limit ||
                    (len > reserved && !mem_budget_take(req->budget, len - reserved))) {
                        bool busy = req->body.len + len <= req->body_limit;

                        req->body_mode = BODY_DISCARD;
                        req->keep_alive = false;
                        body_release(req);
                        req_abort_handler(req);
                        if (busy)
                                respond_busy(req);
                        else
                                http_respond_code(req, CELLA_E_PAYLOAD_TOO_LARGE,
                                                  "request body over %zu bytes", req->body_limit);
                        c->dead_input = true;
                        http_parser_pause(p, 1);
                        return 0;
                }
                mem_budget_force(req->budget, reserved);
                req->body_counted += len;
                if (buf_append(&req->body, at, len) < 0)
                        return fail(c, CELLA_E_INTERNAL_ERROR);
                return 0;
        }
        case BODY_STREAM:
                http_request_ref(req);
                took = req->ops->on_data(req, at, len, req->body_ud);
                if (took < len && req->conn && req->body_mode == BODY_STREAM) {
                        if (buf_append(&req->pending, at + took, len - took) < 0) {
                                http_request_unref(req);
                                return fail(c, CELLA_E_INTERNAL_ERROR);
                        }
                        req->body_paused = true;
                        http_parser_pause(p, 1);
                }
                http_request_unref(req);
                return 0;
        }
        return 0;
}

static int on_message_complete(http_parser *p)
{
        struct conn *c = pconn(p);
        struct http_request *req = c->cur;

        if (stopped(c))
                return 0;

        if (!req)
                return 0;
        req->body_complete = true;
        http_request_ref(req);
        if (req->body_mode == BODY_WHOLE && !req->ended) {
                if (buf_reserve(&req->body, 1) < 0) {
                        http_request_unref(req);
                        return fail(c, CELLA_E_INTERNAL_ERROR);
                }
                req->body_cb(req, req->body.data ? req->body.data : "", req->body.len,
                             req->body_ud);
                body_release(req);
        } else if (req->body_mode == BODY_STREAM && !req->ended && req->ops->on_end) {
                req->ops->on_end(req, req->body_ud);
        }
        if (req->conn && c->cur == req && req->ended)
                conn_detach(c, false);
        /* Stop here in any case: the response is awaited, or the next head is to be scanned
         * (head_scan) before the parser sees it. */
        http_parser_pause(p, 1);
        c->scan = SCAN_LINE_START;
        c->scan_headers = false;
        c->scan_off = 0;
        http_request_unref(req);
        return 0;
}

static const http_parser_settings settings = {
        .on_message_begin = on_message_begin,
        .on_url = on_url,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

/* ---- connection ---- */

static int errno_code(enum http_errno e)
{
        switch (e) {
        case HPE_HEADER_OVERFLOW:
                return CELLA_E_HEADERS_TOO_LARGE;
        default:
                return CELLA_E_BAD_REQUEST;
        }
}

/* Answer a parse error on the connection itself and close it. */
static void conn_send_error(struct conn *c, int code)
{
        struct http_request *req = c->cur;

        c->dead_input = true;
        if (req && req->dispatched && req->begun) {
                conn_close(c); /* mid-response: nothing sensible to send */
                return;
        }
        if (!req) {
                req = req_new(c);
                if (!req) {
                        conn_close(c);
                        return;
                }
                c->cur = req;
        }
        req_abort_handler(req);
        req->keep_alive = false;
        req->body_mode = BODY_DISCARD;
        http_respond_code(req, code, "%s",
                          code == CELLA_E_HEADERS_TOO_LARGE ? "request headers too large"
                          : code == CELLA_E_URI_TOO_LONG    ? "request target too long"
                          : code == CELLA_E_REQUEST_TIMEOUT
                                  ? "the request's head did not arrive within 20 s"
                                  : "malformed HTTP request");
        if (c->cur)
                conn_close(c);
}

static bool conn_blocked(const struct conn *c)
{
        const struct http_request *req = c->cur;

        if (c->dead_input || c->closing)
                return true;
        if (!req || !req->dispatched) /* between requests, or inside the next one's head */
                return conn_write_backlogged(c);
        return req->body_paused || (req->body_complete && !req->ended);
}

/* Scan the head bytes of `in` not scanned yet (see the top of this file). -EBADMSG for a
 * bare LF or CR, an obs-fold line, or whitespace in a header's name. */
static int head_scan(struct conn *c)
{
        for (; c->scan_off < c->in.len && c->scan != SCAN_DONE; c->scan_off++) {
                char ch = c->in.data[c->scan_off];

                switch (c->scan) {
                case SCAN_LINE_START:
                        if (ch == '\r')
                                /* an empty line: the end of the head, or (before the
                                 * request line) one that is skipped */
                                c->scan = c->scan_headers ? SCAN_DONE_CR : SCAN_CR_SKIP;
                        else if (ch == '\n' || ch == ' ' || ch == '\t')
                                return -EBADMSG; /* bare LF, obs-fold */
                        else
                                c->scan = c->scan_headers ? SCAN_NAME : SCAN_LINE;
                        break;
                case SCAN_NAME:
                        if (ch == ' ' || ch == '\t' || ch == '\n')
                                return -EBADMSG; /* "Name : v", bare LF */
                        if (ch == ':')
                                c->scan = SCAN_LINE;
                        else if (ch == '\r')
                                c->scan = SCAN_CR; /* no colon: the parser answers 400 */
                        break;
                case SCAN_LINE:
                        if (ch == '\n')
                                return -EBADMSG;
                        if (ch == '\r')
                                c->scan = SCAN_CR;
                        break;
                case SCAN_CR:
                        if (ch != '\n')
                                return -EBADMSG;
                        c->scan = SCAN_LINE_START;
                        c->scan_headers = true;
                        break;
                case SCAN_CR_SKIP:
                        if (ch != '\n')
                                return -EBADMSG;
                        c->scan = SCAN_LINE_START;
                        break;
                case SCAN_DONE_CR:
                        if (ch != '\n')
                                return -EBADMSG;
                        c->scan = SCAN_DONE;
                        break;
                case SCAN_DONE:
                        break;
                }
        }
        return 0;
}

static void conn_process(struct conn *c)
{
        if (c->in_process || c->closing)
                return;
        c->in_process = true;
        while (c->in.len > 0 && !conn_blocked(c)) {
                size_t n;
                enum http_errno e;

                if ((c->scan != SCAN_DONE && head_scan(c) < 0) ||
                    (c->crlf_need && chunk_crlf_pending(c) < 0)) {
                        conn_send_error(c, CELLA_E_BAD_REQUEST);
                        break;
                }
                n = http_parser_execute(&c->parser, &settings, c->in.data, c->in.len);
                e = HTTP_PARSER_ERRNO(&c->parser);
                if (c->closing)
                        break;
                buf_consume(&c->in, n);
                c->scan_off = c->scan_off > n ? c->scan_off - n : 0;
                if (e == HPE_PAUSED) {
                        http_parser_pause(&c->parser, 0);
                        if (c->perr) {
                                conn_send_error(c, c->perr);
                                break;
                        }
                        if (c->parser.upgrade) {
                                c->dead_input = true;
                                break;
                        }
                        continue;
                }
                if (e != HPE_OK) {
                        conn_send_error(c, c->perr ? c->perr : errno_code(e));
                        break;
                }
                if (c->parser.upgrade) {
                        /* No protocol upgrades (yet): the request was answered like any
                         * other and the connection closes after it. */
                        c->dead_input = true;
                        break;
                }
                if (n == 0)
                        break;
        }
        c->in_process = false;
        if (c->closing)
                return;
        if (c->eof && !c->cur && (c->in.len == 0 || c->dead_input)) {
                conn_shutdown(c);
                return;
        }
        conn_update_reading(c);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
        struct conn *c = h->data;
        /* Small reads while a head is awaited (thousands of idle or trickling connections
         * must not hold 64 KiB each), full ones for bodies. */
        size_t want = c->cur && c->cur->dispatched ? 64 * 1024 : 4 * 1024;

        (void)suggested;
        if (buf_reserve(&c->in, want) < 0) {
                *b = uv_buf_init(NULL, 0);
                return;
        }
        *b = uv_buf_init(c->in.data + c->in.len, (unsigned)(c->in.cap - c->in.len - 1));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        struct conn *c = s->data;

        (void)b;
        if (nread == UV_ENOBUFS) {
                conn_close(c);
                return;
        }
        if (nread < 0) {
                /* A client that half-closes is treated as gone once what it sent has been
                 * answered: a request still waiting for its answer is aborted. */
                c->eof = true;
                uv_read_stop(s);
                c->reading = false;
                if (nread != UV_EOF) {
                        conn_close(c);
                        return;
                }
                conn_process(c);
                if (c->closing || c->shutting)
                        return;
                if (c->cur && !c->cur->ended)
                        conn_close(c);
                else if (c->in.len == 0 || c->dead_input)
                        conn_shutdown(c);
                /* else: pipelined requests wait for the write queue; conn_process
                 * shuts down once they are answered */
                return;
        }
        if (nread == 0) {
                if (c->in.len == 0)
                        buf_free(&c->in);
                return;
        }
        c->in.len += (size_t)nread;
        c->in.data[c->in.len] = '\0';
        c->read_ms = conn_now(c);
        conn_process(c);
        if (!c->closing && c->in.len == 0)
                buf_free(&c->in); /* an idle connection holds no buffer */
}

static void conn_update_reading(struct conn *c)
{
        bool want = !c->eof && !c->closing && !c->dead_input && !(conn_blocked(c) && c->in.len > 0);

        if (c->fuzz || want == c->reading)
                return;
        if (want) {
                if (uv_read_start((uv_stream_t *)&c->tcp, alloc_cb, read_cb) == 0) {
                        c->reading = true;
                        c->read_ms = conn_now(c); /* a stall counts from here */
                }
        } else {
                uv_read_stop((uv_stream_t *)&c->tcp);
                c->reading = false;
        }
}

static void conn_free(struct conn *c)
{
        buf_free(&c->in);
        buf_free(&c->url);
        buf_free(&c->field);
        buf_free(&c->value);
        free(c);
}

static void handle_closed(uv_handle_t *h)
{
        struct conn *c = h->data;

        if (--c->handles_open == 0)
                conn_free(c);
}

/* ---- client addresses ---- */

static void peer_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
        memset(key, 0, 16);
        if (ss->ss_family == AF_INET6) {
                memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
        } else if (ss->ss_family == AF_INET) {
                key[10] = key[11] = 0xff;
                memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        }
}

static unsigned peer_hash(const uint8_t key[16])
{
        uint32_t h = 2166136261u; /* FNV-1a */

        for (int i = 0; i < 16; i++)
                h = (h ^ key[i]) * 16777619u;
        return h % PEER_BUCKETS;
}

static struct peer *peer_find(struct http_server *srv, const uint8_t key[16])
{
        for (struct peer *p = srv->peers[peer_hash(key)]; p; p = p->next)
                if (memcmp(p->addr, key, 16) == 0)
                        return p;
        return NULL;
}

/* The address's entry with one more connection, or NULL without memory. */
static struct peer *peer_get(struct http_server *srv, const uint8_t key[16])
{
        struct peer *p = peer_find(srv, key);
        unsigned h;

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p)
                        return NULL;
                memcpy(p->addr, key, 16);
                h = peer_hash(key);
                p->next = srv->peers[h];
                srv->peers[h] = p;
        }
        p->count++;
        return p;
}

static void peer_put(struct http_server *srv, struct peer *p)
{
        struct peer **pp;

        if (!p || --p->count > 0)
                return;
        for (pp = &srv->peers[peer_hash(p->addr)]; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        free(p);
}

static void conn_close(struct conn *c)
{
        struct http_server *srv = c->srv;

        if (c->closing)
                return;
        c->closing = true;
        c->dead_input = true;
        conn_detach(c, true);
        if (c->fuzz)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                srv->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                srv->tail = c->prev;
        srv->nconns--;
        peer_put(srv, c->peer);
        c->peer = NULL;
        c->handles_open = 2;
        uv_close((uv_handle_t *)&c->tcp, handle_closed);
        uv_close((uv_handle_t *)&c->kick, handle_closed);
}

static void shutdown_cb(uv_shutdown_t *sh, int status)
{
        (void)status;
        conn_close(sh->data);
}

/* Close after the queued writes are flushed (a plain close would cancel them). */
static void conn_shutdown(struct conn *c)
{
        c->dead_input = true;
        if (c->closing || c->shutting)
                return;
        if (c->fuzz) {
                c->closing = true;
                return;
        }
        c->shutting = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
        if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shutdown_cb) < 0)
                conn_close(c);
}

/* A dispatched request's body did not arrive in time: 408 before any answer, else the
 * connection is closed. */
static void conn_body_timeout(struct conn *c, const char *what)
{
        struct http_request *req = c->cur;

        log_debug("http: %s %s: %s", req->method, http_request_path(req), what);
        if (req->begun || req->ended) {
                conn_close(c);
                return;
        }
        c->dead_input = true;
        req->keep_alive = false;
        req->body_mode = BODY_DISCARD;
        body_release(req);
        req_abort_handler(req);
        http_respond_code(req, CELLA_E_REQUEST_TIMEOUT, "%s", what);
        if (c->cur == req && !c->closing)
                conn_close(c);
}

/* The deadlines of one connection (see http.h). */
static void conn_sweep(struct conn *c, uint64_t now)
{
        struct http_request *req = c->cur;
        bool queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0;

        if (c->closing)
                return;
        if (queued && now - c->write_ms >= CELLA_HTTP_SEND_TIMEOUT_MS) {
                log_debug("http: client took no answer bytes for %d s: closed",
                          CELLA_HTTP_SEND_TIMEOUT_MS / 1000);
                conn_close(c);
                return;
        }
        if (c->shutting || queued)
                return;
        if (!req) {
                if (!c->served ? now - c->head_ms >= CELLA_HTTP_HEADER_TIMEOUT_MS
                               : now - MAX(c->read_ms, c->write_ms) >= CELLA_HTTP_IDLE_TIMEOUT_MS)
                        conn_close(c);
        } else if (!req->dispatched) {
                if (now - c->head_ms >= CELLA_HTTP_HEADER_TIMEOUT_MS)
                        conn_send_error(c, CELLA_E_REQUEST_TIMEOUT);
        } else if (!req->body_complete && !req->body_paused) {
                if (req->body_mode == BODY_WHOLE &&
                    now - c->body_ms >= CELLA_HTTP_JSON_BODY_TIMEOUT_MS)
                        conn_body_timeout(c, "the request body did not arrive within "
                                             "60 s");
                else if (c->reading && now - c->read_ms >= CELLA_HTTP_BODY_IDLE_MS)
                        conn_body_timeout(c, "no byte of the request body for 30 s");
        }
}

static void sweep_cb(uv_timer_t *t)
{
        struct http_server *srv = t->data;
        uint64_t now = uv_now(srv->loop);
        struct conn *c = srv->conns, *next;

        for (; c; c = next) {
                next = c->next;
                conn_sweep(c, now);
        }
}

/* Make room for one more connection: close the oldest one that is not in a request (an
 * idle keep-alive connection, or one still sending its head) and has nothing queued.
 * false when every connection is busy. */
static bool server_evict(struct http_server *srv)
{
        for (struct conn *c = srv->tail; c; c = c->prev) {
                if (c->closing || c->shutting || (c->cur && c->cur->dispatched) ||
                    uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0)
                        continue;
                log_debug("http: %u connections: the oldest waiting one closed", srv->nconns);
                conn_close(c);
                return true;
        }
        return false;
}

static void on_connection(uv_stream_t *ls, int status)
{
        struct http_server *srv = ls->data;
        struct sockaddr_storage ss;
        int sslen = sizeof(ss);
        uint8_t key[16];
        struct peer *p;
        struct conn *c;

        if (status < 0)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return; /* libuv's EMFILE path closes what it cannot accept */
        c->srv = srv;
        uv_tcp_init(srv->loop, &c->tcp);
        c->tcp.data = c;
        c->handles_open = 1;
        if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 || srv->closing ||
            uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen) < 0) {
                uv_close((uv_handle_t *)&c->tcp, handle_closed);
                return;
        }
        peer_key(&ss, key);
        p = peer_find(srv, key);
        if ((p && p->count >= srv->max_per_client) ||
            (srv->nconns >= srv->max_conns && !server_evict(srv)) || !(p = peer_get(srv, key))) {
                /* over the address's cap, or every connection busy: closed at once (a
                 * reset, so that nothing lingers in TIME_WAIT here) */
                uv_tcp_close_reset(&c->tcp, handle_closed);
                return;
        }
        c->peer = p;
        uv_tcp_nodelay(&c->tcp, 1);
        uv_idle_init(srv->loop, &c->kick);
        c->kick.data = c;
        c->shut.data = c;
        http_parser_init(&c->parser, HTTP_REQUEST);
        c->parser.data = c;
        c->next = srv->conns;
        if (srv->conns)
                srv->conns->prev = c;
        else
                srv->tail = c;
        srv->conns = c;
        srv->nconns++;
        c->head_ms = c->read_ms = c->write_ms = uv_now(srv->loop);
        conn_update_reading(c);
        if (!c->reading)
                conn_close(c);
}

/* ---- server ---- */

static void server_closed(uv_handle_t *h)
{
        struct http_server *s = h->data;

        if (--s->handles_open == 0)
                free(s);
}

/* The connection limit the descriptor limit allows (cellad raises its soft limit to the
 * hard one at start). */
static unsigned fd_connection_limit(unsigned want)
{
        struct rlimit rl;
        rlim_t room;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return want;
        room = rl.rlim_cur > 2 * CELLA_HTTP_FD_RESERVE ? rl.rlim_cur - CELLA_HTTP_FD_RESERVE
                                                       : rl.rlim_cur / 2;
        if (room < want) {
                log_warn("http: %u connections at most (descriptor limit %llu)", (unsigned)room,
                         (unsigned long long)rl.rlim_cur);
                return (unsigned)room;
        }
        return want;
}

int http_server_new(uv_loop_t *loop, const struct http_server_config *cfg, struct http_server **ret,
                    struct cella_error *err)
{
        struct http_server *s;
        struct sockaddr_storage ss;
        struct sockaddr_storage bound;
        int namelen = sizeof(bound);
        int r;

        if (uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&ss) != 0 &&
            uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&ss) != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "listen address '%s' is not an IP address", cfg->host),
                       -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->loop = loop;
        s->cfg = *cfg;
        s->max_conns = fd_connection_limit(cfg->max_connections ? cfg->max_connections
                                                                : CELLA_HTTP_MAX_CONNECTIONS);
        s->max_per_client = cfg->max_per_client ? cfg->max_per_client : CELLA_HTTP_MAX_PER_CLIENT;
        uv_tcp_init(loop, &s->listener);
        s->listener.data = s;
        uv_timer_init(loop, &s->sweep);
        s->sweep.data = s;
        s->handles_open = 2;
        r = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
        if (r == 0)
                r = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_connection);
        if (r == 0)
                r = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &namelen);
        if (r < 0) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "listen on %s:%d: %s", cfg->host,
                                cfg->port, uv_strerror(r));
                uv_close((uv_handle_t *)&s->listener, server_closed);
                uv_close((uv_handle_t *)&s->sweep, server_closed);
                return r;
        }
        uv_timer_start(&s->sweep, sweep_cb, CELLA_HTTP_SWEEP_MS, CELLA_HTTP_SWEEP_MS);
        uv_unref((uv_handle_t *)&s->sweep);
        if (bound.ss_family == AF_INET)
                s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
        else
                s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
        *ret = s;
        return 0;
}

int http_server_port(const struct http_server *s)
{
        return s->port;
}

void http_server_free(struct http_server *s)
{
        if (!s)
                return;
        s->closing = true;
        while (s->conns)
                conn_close(s->conns);
        uv_close((uv_handle_t *)&s->listener, server_closed);
        uv_close((uv_handle_t *)&s->sweep, server_closed);
}

/* ---- fuzzing ---- */

static size_t fuzz_on_data(struct http_request *req, const char *data, size_t len, void *ud)
{
        size_t *calls = ud;

        (void)req;
        (void)data;
        /* take half of every other chunk, to exercise pausing and resuming */
        return (++*calls % 2) ? len : len / 2;
}

static void fuzz_on_end(struct http_request *req, void *ud)
{
        (void)ud;
        http_respond_code(req, CELLA_E_OK, "ok");
}

static const struct http_body_ops fuzz_ops = {fuzz_on_data, fuzz_on_end};

static void fuzz_on_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        json_t *j = json_loadb(body, len, 0, NULL);

        (void)ud;
        http_respond_json(req, 200, j ? j : json_null());
        json_decref(j);
}

struct fuzz_state {
        int count;
        size_t calls;
};

static void fuzz_on_request(struct http_request *req, void *ud)
{
        struct fuzz_state *st = ud;
        const char *path = http_request_path(req);

        st->count++;
        (void)http_request_query(req, "path");
        (void)http_request_header(req, "accept");
        if (strcmp(req->method, "PUT") == 0 && strstr(path, "files"))
                http_request_stream_body(req, &fuzz_ops, &st->calls);
        else if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0)
                http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, fuzz_on_body, NULL);
        else if (strstr(path, "sse")) {
                json_t *e = json_pack("{s:s}", "type", "start");

                http_response_begin_sse(req);
                http_sse_send(req, e, NULL, NULL);
                http_response_end(req);
                json_decref(e);
        } else
                http_respond_code(req, CELLA_E_NOT_FOUND, "no route %s", path);
}

int http_parse_fuzz(const uint8_t *data, size_t len)
{
        struct http_server srv = {0};
        struct conn *c = calloc(1, sizeof(*c));
        struct fuzz_state st = {0};
        size_t off = 0;

        if (!c)
                return 0;
        srv.cfg.on_request = fuzz_on_request;
        srv.cfg.userdata = &st;
        c->srv = &srv;
        c->fuzz = true;
        http_parser_init(&c->parser, HTTP_REQUEST);
        c->parser.data = c;
        /* feed in two reads to exercise split callbacks, then keep resuming */
        while (off < len && !c->closing) {
                size_t n = MIN(len - off, (size_t)(len / 2 + 1));

                if (buf_append(&c->in, data + off, n) < 0)
                        break;
                off += n;
                for (int guard = 0; guard < 64 && !c->closing; guard++) {
                        size_t before = c->in.len;

                        if (c->cur && c->cur->body_paused)
                                http_request_resume_body(c->cur);
                        conn_process(c);
                        if (c->in.len == before && !(c->cur && c->cur->body_paused))
                                break;
                }
        }
        c->closing = true;
        conn_detach(c, true);
        conn_free(c);
        return st.count;
}
