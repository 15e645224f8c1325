/* The HTTP server's internals, shared by its files (http.h is the contract):
 *
 *   http.c           the request object, its body (whole or streamed), the connection's
 *                    input: reading, conn_process, parse errors answered
 *   http-parse.c     http-parser's callbacks, the checks beyond it (head scan, chunk CRLF,
 *                    framing), the request target and query decoding; the fuzz entry
 *   http-response.c  writes on the socket, status line and headers, sized, chunked and
 *                    SSE bodies, the end of a response, taking the socket over
 *   http-server.c    the listener, accepting and closing connections, per-client counts,
 *                    the deadline sweep
 *
 * A connection owns an input buffer, one http_parser and at most one current request.
 * Input is parsed by http_conn_process() only, never re-entered: the parser is paused (1)
 * at the end of a request whose response has not ended yet, (2) when a streamed body's
 * consumer took fewer bytes than offered, (3) to report an error found in a callback
 * (conn->perr). Socket reads stop while the parser is blocked and bytes are buffered, so a
 * pipelining or uploading client cannot make the daemon buffer more than one read ahead.
 *
 * Deferred work (continuing to parse after a response ended or a body was resumed) runs
 * from an idle handle, so a handler's call into this module never re-enters its own code.
 *
 * Only these files include this header, each after daemon/http.h (checked below): it is
 * the http module's own, and including http.h from here would make the module graph see a
 * cycle between http.c and this header (tests/layering/check-includes.py). */
#ifndef CELLA_DAEMON_HTTP_INTERNAL_H
#define CELLA_DAEMON_HTTP_INTERNAL_H

#ifndef CELLA_DAEMON_HTTP_H
#error "include daemon/http.h before daemon/http-internal.h"
#endif

#include <http_parser.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>
#include <uv.h>

#include "common/buf.h"
#include "daemon/budget.h"
#include "daemon/http-header.h"

/* BODY_HELD: the handler will say later (http_request_hold_body): the parser waits after
 * the head. */
enum body_mode { BODY_DISCARD, BODY_WHOLE, BODY_STREAM, BODY_HELD };

struct http_request {
        unsigned refs;
        struct conn *conn; /* NULL once detached (finished or connection gone) */
        const char *method;
        bool head;
        bool http10;
        char *path;
        char *target;              /* the request target as sent */
        struct http_header *query; /* name/value pairs, decoded */
        size_t nquery;
        struct http_header *headers;
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
        int tag;    /* http_request_set_tag */
        void *auth; /* http_request_set_auth */
        void (*auth_free)(void *);
        http_error_view_fn error_view; /* http_request_set_error_view */
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
        /* the client's stream: a TCP connection, or a unix one (the server's unix_path); the
         * handle is cast to uv_stream_t, the same either way */
        union {
                uv_tcp_t tcp;
                uv_pipe_t pipe;
        };
        bool local; /* a unix connection: peer_uid is the client's (SO_PEERCRED) */
        uid_t peer_uid;
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
        bool served;    /* a request was dispatched on it */
        bool over_cap;  /* refused (per-client cap): closed at once, not counted */
        bool lingering; /* answered and shut down: reading and dropping until EOF */
        size_t linger_bytes;
        uint64_t linger_ms; /* lingering began */
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
        union {
                uv_tcp_t listener;
                uv_pipe_t unix_listener; /* cfg.unix_path set */
        };
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

extern const http_parser_settings http_parser_callbacks;

static inline uint64_t conn_now(const struct conn *c)
{
        return c->fuzz || !c->srv || !c->srv->loop ? 0 : uv_now(c->srv->loop);
}

/* http.c */
struct http_request *http_req_new(struct conn *c);
/* Detach the current request from its connection and drop the connection's reference.
 * With abort, the handler is told the client is gone (once, if it has not ended). */
void http_conn_detach(struct conn *c, bool abort);
/* The server answers a dispatched request itself (413, a broken body): the handler is
 * told through on_abort, once, so that it releases what it holds for the request. */
void http_req_abort(struct http_request *req);
/* A whole body's memory and its share of the budget go as soon as it was handed over. */
void http_body_release(struct http_request *req);
void http_conn_process(struct conn *c);
void http_conn_update_reading(struct conn *c);
/* Answer a parse error on the connection itself and close it. */
void http_conn_send_error(struct conn *c, int code);

/* http-parse.c */
/* Scan the head bytes of `in` not scanned yet (see http-parse.c). -EBADMSG for a bare LF
 * or CR, an obs-fold line, or whitespace in a header's name. */
int http_head_scan(struct conn *c);
/* The rest of a chunk's CRLF, at the front of `in` (the data ended where the last read
 * did, and the parser took everything up to there). 0 or -EBADMSG. */
int http_chunk_crlf_pending(struct conn *c);
int http_errno_code(enum http_errno e);

/* http-response.c */
/* Queue the concatenation of parts on the socket. counted bytes are reported to cb and
 * counted in req->queued. */
int http_conn_write(struct conn *c, struct http_request *req, const struct iovec *parts,
                    size_t nparts, size_t counted, http_write_cb cb, void *ud);
/* A client that pipelines requests and does not read the answers: no new request is
 * started while more than the high water of answers waits in the socket's queue. */
bool http_conn_write_backlogged(const struct conn *c);
/* Parse on from the loop's next turn (an idle handle), not from inside the caller. */
void http_conn_kick(struct conn *c);
/* The request's response is complete (see http-response.c). */
int http_req_end(struct http_request *req);

/* http-server.c */
void http_conn_close(struct conn *c);
/* Close after the queued writes are flushed (a plain close would cancel them). */
void http_conn_shutdown(struct conn *c);
void http_conn_free(struct conn *c);

#endif
