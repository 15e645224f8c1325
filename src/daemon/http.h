/* cellad's HTTP/1.1 server: libuv TCP + http-parser, one loop, nothing blocks.
 *
 * A connection parses requests strictly in order: while a request's response is not ended
 * the parser is paused at the end of that request, so pipelined requests wait in the input
 * buffer (and the socket is not read once one of them is buffered). Limits come from
 * common/limits.h: header bytes/count (431), URL (414), JSON body (413), connections, idle
 * timeout. Malformed HTTP is answered 400 and the connection closed.
 *
 * Deadlines (checked every CELLA_HTTP_SWEEP_MS): a request's head must arrive within
 * CELLA_HTTP_HEADER_TIMEOUT_MS of its first byte (of the connection, for the first one),
 * a body being read must not stall for CELLA_HTTP_BODY_IDLE_MS and a JSON body must be
 * whole within CELLA_HTTP_JSON_BODY_TIMEOUT_MS (408 REQUEST_TIMEOUT, then close), an
 * answer's queued bytes must be taken within CELLA_HTTP_SEND_TIMEOUT_MS (close), a
 * keep-alive connection may idle CELLA_HTTP_IDLE_TIMEOUT_MS. The head is checked beyond
 * what http-parser checks: no bare LF, no obs-fold, no whitespace before a header's colon,
 * Transfer-Encoding only "chunked" (400 otherwise).
 *
 * Requests: the server calls on_request once the headers of a request are parsed. The
 * handler then, synchronously or later, answers with one of the http_respond_*() calls or
 * a streamed response (http_response_begin/_write/_end, SSE). To see the body it calls,
 * synchronously in on_request, http_request_read_body() (whole body, with a limit) or
 * http_request_stream_body() (chunks with backpressure). A body nobody asked for is
 * discarded. "Expect: 100-continue" is answered when the handler asks for the body.
 *
 * Ownership: a request is refcounted. The server holds one reference from on_request until
 * the response is ended and the request's body is fully parsed (or the connection is gone);
 * a handler that keeps the pointer across loop iterations takes its own with
 * http_request_ref(). Callbacks are never invoked on a request whose memory is gone, and a
 * request is never freed inside one of its own callbacks. When the client disconnects
 * before the response ended, the on_abort callback (http_request_on_abort) is called once;
 * every later response call is a no-op returning -EPIPE. */
#ifndef CELLA_DAEMON_HTTP_H
#define CELLA_DAEMON_HTTP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/error.h"
#include "daemon/budget.h"

struct http_server;
struct http_request;

struct http_server_config {
        const char *host; /* IPv4 or IPv6 literal */
        int port;         /* 0: ephemeral */
        /* Called once per request when its headers are parsed (the request is borrowed for
         * the call; take a reference to keep it). */
        void (*on_request)(struct http_request *req, void *userdata);
        void *userdata;
        /* Optional: called when a request is finished (response ended), for access logs. */
        void (*on_done)(struct http_request *req, void *userdata);
        /* Connections held at most (0: CELLA_HTTP_MAX_CONNECTIONS; lowered to what the
         * descriptor limit allows). A new connection beyond it evicts the oldest one that
         * is not in a request (idle, or still sending its head), else it is closed. */
        unsigned max_connections;
        /* Connections per client address at most (0: CELLA_HTTP_MAX_PER_CLIENT); beyond it
         * a new connection is closed at once. */
        unsigned max_per_client;
        /* JSON bodies being read are counted here (borrowed; NULL: not counted): a body
         * that does not fit is answered 503 SERVER_BUSY. */
        struct mem_budget *budget;
        /* Optional: called before the bytes of any answer are queued, with its userdata:
         * what an answer may tell of is committed first (the registry's claims). */
        void (*before_write)(void *userdata);
        void *before_write_userdata;
        /* Instead of host and port: a unix socket made at this path (a stale socket there
         * is replaced; any other file is an error), given unix_mode and, when unix_gid is
         * not (gid_t)-1, that group; removed by http_server_free. */
        const char *unix_path;
        unsigned unix_mode;
        gid_t unix_gid;
};

int http_server_new(uv_loop_t *loop, const struct http_server_config *cfg, struct http_server **ret,
                    struct cella_error *err);
/* The bound port (the real one when 0 was asked). */
int http_server_port(const struct http_server *s);
/* Stop listening and close every connection (active requests get on_abort); the memory is
 * released once the loop has closed the handles. */
void http_server_free(struct http_server *s);

/* ---- request ---- */
void http_request_ref(struct http_request *req);
void http_request_unref(struct http_request *req);

const char *http_request_method(const struct http_request *req); /* "GET" */
bool http_request_is_head(const struct http_request *req);
/* The request came over a unix socket (http_server_config.unix_path): its file's mode and
 * owner decided who may connect. */
bool http_request_is_local(const struct http_request *req);
/* An HTTP/1.0 request (its streamed answers are close-delimited: no chunks, no trailers). */
bool http_request_is_http10(const struct http_request *req);
/* The percent-decoded path (NUL-free: %00 is refused with 400 before dispatch). */
const char *http_request_path(const struct http_request *req);
/* The request target exactly as the client sent it (path and query, not decoded). */
const char *http_request_target(const struct http_request *req);
/* The server's loop (NULL when the connection is gone). */
uv_loop_t *http_request_loop(const struct http_request *req);
/* The client's address (IP literal, or "uid:N" on a unix connection: the client's user);
 * -ENOTCONN when the connection is gone. */
int http_request_peer(const struct http_request *req, char *out, size_t size);
/* The headers in the order received (name and value borrowed from the request). */
size_t http_request_header_count(const struct http_request *req);
void http_request_header_at(const struct http_request *req, size_t i, const char **name,
                            const char **value);
/* Query parameter by name (percent-decoded, '+' is a space, NUL-free), or NULL. The first
 * occurrence wins. */
const char *http_request_query(const struct http_request *req, const char *name);
/* Header value by name (case-insensitive), or NULL. */
const char *http_request_header(const struct http_request *req, const char *name);
/* Monotonic start time in microseconds (for logs). */
uint64_t http_request_start_us(const struct http_request *req);
/* Status of the response (0 before it began). */
int http_request_status(const struct http_request *req);
/* Opaque per-request pointer for the handler. */
void http_request_set_userdata(struct http_request *req, void *userdata);
void *http_request_get_userdata(const struct http_request *req);
/* Who the application found the request to come from (its principal, decision 0053):
 * an opaque pointer, freed with free_fn (may be NULL) when the request is freed or set
 * again. */
void http_request_set_auth(struct http_request *req, void *auth, void (*free_fn)(void *));
const void *http_request_auth(const struct http_request *req);
/* How an error is shown to the request's client (decision 0053: a tenant sees its own
 * names): fn rewrites an error's JSON in place (an answer's {code, message, context} or
 * an event's {type, error, code}). Set by the application with the principal; every
 * error answer (http_respond_error*) goes through it. */
typedef void (*http_error_view_fn)(const struct http_request *req, json_t *error);
void http_request_set_error_view(struct http_request *req, http_error_view_fn fn);
/* The request's error view applied to error (NULL, or no view set: nothing done); for
 * errors the application writes itself (SSE and WebSocket events). */
void http_request_error_view(const struct http_request *req, json_t *error);
/* A number the application keeps with the request (0 until set), e.g. for its on_done. */
void http_request_set_tag(struct http_request *req, int tag);
int http_request_tag(const struct http_request *req);
/* Called once if the client goes away before the response is ended. */
void http_request_on_abort(struct http_request *req, void (*cb)(struct http_request *req, void *ud),
                           void *ud);

/* The handler decides later (after an asynchronous step) whether and how it reads the
 * body: nothing after the head is parsed until http_request_read_body or
 * http_request_stream_body, called then from any callback, or the response's end (the
 * body is discarded). Call from on_request only. */
int http_request_hold_body(struct http_request *req);

/* Whole body, up to limit bytes (413 PAYLOAD_TOO_LARGE is answered by the server beyond
 * it, and the callback is not called). cb gets the body (NUL-terminated, borrowed for the
 * call). Call from on_request only (or after http_request_hold_body). */
typedef void (*http_body_cb)(struct http_request *req, const char *body, size_t len, void *ud);
int http_request_read_body(struct http_request *req, size_t limit, http_body_cb cb, void *ud);

/* Streamed body. on_data returns how many of the len bytes it took; taking fewer pauses
 * the body (the rest is kept and handed again after http_request_resume_body). on_end is
 * called once after the last byte. Call from on_request only (or after
 * http_request_hold_body). */
struct http_body_ops {
        size_t (*on_data)(struct http_request *req, const char *data, size_t len, void *ud);
        void (*on_end)(struct http_request *req, void *ud);
};
int http_request_stream_body(struct http_request *req, const struct http_body_ops *ops, void *ud);
void http_request_resume_body(struct http_request *req);

/* ---- responses (each returns 0 or -EPIPE when the client is gone, -EALREADY when a
 * response was already begun) ---- */

/* JSON body (borrowed, serialised here). */
int http_respond_json(struct http_request *req, int status, json_t *body);
/* The error shape of docs/api.md: {code, message, context, httpStatus, timestamp}; status
 * from cella_code_status(err->code). context is borrowed, may be NULL. */
int http_respond_error(struct http_request *req, const struct cella_error *err, json_t *context);
int http_respond_code(struct http_request *req, int code, const char *fmt, ...) _printf_(3, 4);
/* The error shape as an object (new reference, NULL without memory), for an answer that is
 * written some other way; its status is cella_code_status(err->code). */
json_t *http_error_json(const struct cella_error *err, json_t *context);
/* The error shape with extra header lines ("Retry-After: 1\r\n"). */
int http_respond_error_headers(struct http_request *req, const struct cella_error *err,
                               json_t *context, const char *extra_headers);
int http_respond_bytes(struct http_request *req, int status, const char *content_type,
                       const void *data, size_t len);

/* Streamed response: content_length >= 0 sends exactly that many bytes, < 0 is chunked.
 * extra_headers, if not NULL, is a block of "Name: value\r\n" lines. */
int http_response_begin(struct http_request *req, int status, const char *content_type,
                        int64_t content_length, const char *extra_headers);
/* Queue bytes (offered to the socket at once; what it does not take is copied). done, if
 * not NULL, is called once the socket took them (status 0)
 * or the connection failed (status < 0); it is how a handler returns agent credit only
 * when the client took the bytes. For a HEAD request the bytes are discarded and done is
 * not called. */
typedef void (*http_write_cb)(struct http_request *req, int status, size_t len, void *ud);
int http_response_write(struct http_request *req, const void *data, size_t len, http_write_cb done,
                        void *ud);
/* The same without a copy: data is written from where it is and must stay unchanged
 * until done is called (done is required; it comes also when the connection failed). */
int http_response_write_held(struct http_request *req, const void *data, size_t len,
                             http_write_cb done, void *ud);
/* Up to len bytes of file fd from offset as body bytes of a sized (Content-Length)
 * response: offered to the socket by sendfile (from the page cache, no copy) while nothing
 * is queued before them and it takes them; where it stops taking, at most
 * CELLA_HTTP_SENDFILE_COPY more bytes are read (pread) into one queued write. done is
 * called once the socket took them all or the connection failed, from the loop as for any
 * write (required). Returns the bytes sent or queued (> 0 when len > 0), -ENODATA when
 * the file holds fewer bytes (some may have been sent: the caller closes the connection),
 * -EINVAL (a chunked response), -EPIPE, -errno; done is not called on an error. For a HEAD
 * request nothing is sent, 0 is returned and done is not called. */
int64_t http_response_sendfile(struct http_request *req, int fd, uint64_t offset, size_t len,
                               http_write_cb done, void *ud);
/* Bytes queued and not yet taken by the socket. */
size_t http_response_queued(const struct http_request *req);
int http_response_end(struct http_request *req);
/* End a chunked response with trailers, a block of "Name: value\r\n" lines (a response
 * that is not chunked, an HTTP/1.0 one, ends without them: its body is close-delimited
 * or sized). */
int http_response_end_trailers(struct http_request *req, const char *trailers);
/* The response is chunked (trailers can follow its body). */
bool http_response_is_chunked(const struct http_request *req);
/* Close the connection at once (e.g. a streamed response cannot be completed: the client
 * sees a short body). on_abort is not called for this request. */
void http_request_close(struct http_request *req);

/* Take the connection over (a protocol upgrade relayed as raw bytes): before any
 * response was begun and with nothing queued on the socket, the connection is detached
 * from the server (the request counts as answered with 101 for on_done; the server
 * forgets the connection) and *ret_fd gets a duplicate of its socket, non-blocking, for
 * the caller to own (uv_tcp_open). leftover gets the bytes the client already sent after
 * this request's head. Not from on_request (later: after the upstream answered, from a
 * timer...). Returns 0, -EPIPE (connection gone), -EALREADY (a response was begun),
 * -EBUSY (bytes still queued, or called from inside on_request). */
int http_request_take_socket(struct http_request *req, int *ret_fd, struct buf *leftover);

/* SSE: 200, text/event-stream, no-cache, chunked. Each event is `data: <json>\n\n`. */
int http_response_begin_sse(struct http_request *req);
int http_sse_send(struct http_request *req, json_t *event, http_write_cb done, void *ud);

/* For the fuzz target: run bytes through the parser and limit code of a connection (no
 * socket). Returns the number of requests parsed. Never crashes, never leaks. */
int http_parse_fuzz(const uint8_t *data, size_t len);

#endif
