/* cellad's HTTP/1.1 server (see http.h for the contract, http-internal.h for how its
 * files divide it): the request object and its accessors, the request body (whole or
 * streamed, with backpressure), and a connection's input: reading the socket and running
 * the parser over what was read (http_conn_process). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/timeutil.h"
#include "daemon/http.h"
#include "daemon/http-internal.h"

/* ---- requests ---- */

struct http_request *http_req_new(struct conn *c)
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

void http_request_ref(struct http_request *req)
{
        req->refs++;
}

void http_request_unref(struct http_request *req)
{
        if (!req || --req->refs > 0)
                return;
        http_body_release(req);
        free(req->path);
        free(req->target);
        http_headers_free(req->query, req->nquery);
        http_headers_free(req->headers, req->nheaders);
        buf_free(&req->body);
        buf_free(&req->pending);
        if (req->auth_free)
                req->auth_free(req->auth);
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

bool http_request_is_local(const struct http_request *req)
{
        return req->conn && req->conn->local;
}

bool http_request_is_http10(const struct http_request *req)
{
        return req->http10;
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

        if (req->conn && req->conn->local)
                return snprintf(out, size, "uid:%u", (unsigned)req->conn->peer_uid) < (int)size
                               ? 0
                               : -EINVAL;
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

void http_request_set_auth(struct http_request *req, void *auth, void (*free_fn)(void *))
{
        if (req->auth_free)
                req->auth_free(req->auth);
        req->auth = auth;
        req->auth_free = free_fn;
}

const void *http_request_auth(const struct http_request *req)
{
        return req->auth;
}

void http_request_set_error_view(struct http_request *req, http_error_view_fn fn)
{
        req->error_view = fn;
}

void http_request_error_view(const struct http_request *req, json_t *error)
{
        if (req && error && req->error_view)
                req->error_view(req, error);
}

void http_request_set_tag(struct http_request *req, int tag)
{
        req->tag = tag;
}

int http_request_tag(const struct http_request *req)
{
        return req->tag;
}

void http_request_on_abort(struct http_request *req, void (*cb)(struct http_request *req, void *ud),
                           void *ud)
{
        req->abort_cb = cb;
        req->abort_ud = ud;
}

/* Detach the current request from its connection and drop the connection's reference.
 * With abort, the handler is told the client is gone (once, if it has not ended). */
void http_conn_detach(struct conn *c, bool abort)
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
void http_req_abort(struct http_request *req)
{
        if (req->dispatched && !req->aborted && !req->ended) {
                req->aborted = true;
                if (req->abort_cb)
                        req->abort_cb(req, req->abort_ud);
        }
}

/* ---- body ---- */

static void send_continue(struct http_request *req)
{
        static const char line[] = "HTTP/1.1 100 Continue\r\n\r\n";
        struct iovec iov = {(void *)line, sizeof(line) - 1};

        if (req->expect_continue && !req->continue_sent && !req->begun && req->conn) {
                req->continue_sent = true;
                (void)http_conn_write(req->conn, NULL, &iov, 1, 0, NULL, NULL);
        }
}

int http_request_hold_body(struct http_request *req)
{
        if (!req->conn || req->body_mode != BODY_DISCARD || req->ended)
                return -EINVAL;
        req->body_mode = BODY_HELD;
        return 0;
}

/* A held body is asked for: the parser goes on (what it parses goes to the new mode). */
static void unhold(struct http_request *req)
{
        if (req->body_paused) {
                req->body_paused = false;
                http_conn_kick(req->conn);
        }
}

int http_request_read_body(struct http_request *req, size_t limit, http_body_cb cb, void *ud)
{
        bool held = req->body_mode == BODY_HELD;

        if (!req->conn || (req->body_mode != BODY_DISCARD && !held) || req->ended)
                return -EINVAL;
        if (held)
                unhold(req);
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
        bool held = req->body_mode == BODY_HELD;

        if (!req->conn || (req->body_mode != BODY_DISCARD && !held) || req->ended)
                return -EINVAL;
        if (held)
                unhold(req);
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
        http_conn_kick(req->conn);
}

/* A whole body's memory and its share of the budget go as soon as it was handed over. */
void http_body_release(struct http_request *req)
{
        buf_free(&req->body);
        mem_budget_give(req->budget, req->body_counted);
        req->body_counted = 0;
}

/* ---- connection input ---- */

/* Answer a parse error on the connection itself and close it. */
void http_conn_send_error(struct conn *c, int code)
{
        struct http_request *req = c->cur;

        c->dead_input = true;
        if (req && req->dispatched && req->begun) {
                http_conn_close(c); /* mid-response: nothing sensible to send */
                return;
        }
        if (!req) {
                req = http_req_new(c);
                if (!req) {
                        http_conn_close(c);
                        return;
                }
                c->cur = req;
        }
        http_req_abort(req);
        req->keep_alive = false;
        req->body_mode = BODY_DISCARD;
        http_respond_code(req, code, "%s",
                          code == CELLA_E_HEADERS_TOO_LARGE ? "request headers too large"
                          : code == CELLA_E_URI_TOO_LONG    ? "request target too long"
                          : code == CELLA_E_REQUEST_TIMEOUT
                                  ? "the request's head did not arrive within 20 s"
                                  : "malformed HTTP request");
        if (c->cur)
                http_conn_close(c);
}

static bool conn_blocked(const struct conn *c)
{
        const struct http_request *req = c->cur;

        if (c->dead_input || c->closing)
                return true;
        if (!req || !req->dispatched) /* between requests, or inside the next one's head */
                return http_conn_write_backlogged(c);
        return req->body_paused || (req->body_complete && !req->ended);
}

void http_conn_process(struct conn *c)
{
        if (c->in_process || c->closing)
                return;
        c->in_process = true;
        while (c->in.len > 0 && !conn_blocked(c)) {
                size_t n;
                enum http_errno e;

                if ((c->scan != SCAN_DONE && http_head_scan(c) < 0) ||
                    (c->crlf_need && http_chunk_crlf_pending(c) < 0)) {
                        http_conn_send_error(c, CELLA_E_BAD_REQUEST);
                        break;
                }
                n = http_parser_execute(&c->parser, &http_parser_callbacks, c->in.data, c->in.len);
                e = HTTP_PARSER_ERRNO(&c->parser);
                if (c->closing)
                        break;
                buf_consume(&c->in, n);
                c->scan_off = c->scan_off > n ? c->scan_off - n : 0;
                if (e == HPE_PAUSED) {
                        http_parser_pause(&c->parser, 0);
                        if (c->perr) {
                                http_conn_send_error(c, c->perr);
                                break;
                        }
                        if (c->parser.upgrade) {
                                c->dead_input = true;
                                break;
                        }
                        continue;
                }
                if (e != HPE_OK) {
                        http_conn_send_error(c, c->perr ? c->perr : http_errno_code(e));
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
                http_conn_shutdown(c);
                return;
        }
        http_conn_update_reading(c);
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
                http_conn_close(c);
                return;
        }
        if (nread < 0) {
                /* A client that half-closes is treated as gone once what it sent has been
                 * answered: a request still waiting for its answer is aborted. */
                c->eof = true;
                uv_read_stop(s);
                c->reading = false;
                if (nread != UV_EOF) {
                        http_conn_close(c);
                        return;
                }
                http_conn_process(c);
                if (c->closing || c->shutting)
                        return;
                if (c->cur && !c->cur->ended)
                        http_conn_close(c);
                else if (c->in.len == 0 || c->dead_input)
                        http_conn_shutdown(c);
                /* else: pipelined requests wait for the write queue; http_conn_process
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
        http_conn_process(c);
        if (!c->closing && c->in.len == 0)
                buf_free(&c->in); /* an idle connection holds no buffer */
}

void http_conn_update_reading(struct conn *c)
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
