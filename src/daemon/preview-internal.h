/* The preview proxy's internals, shared by its files (preview.h is the contract):
 *
 *   preview.c        preview hosts and tokens, the request and response heads (pure), the
 *                    cache of exposed ports, routing a request to its sandbox's port
 *   preview-proxy.c  one proxied request: the connection into the sandbox (new or idle),
 *                    the request and its body sent, the sandbox's response parsed and
 *                    streamed to the client
 *   preview-relay.c  after a 101 (WebSockets): the client's socket taken over and bytes
 *                    relayed both ways with backpressure
 *
 * Only these files include this header, each after daemon/preview.h (checked below): it
 * is the preview module's own (including preview.h here would make the module graph see a
 * cycle between preview.c and this header). */
#ifndef CELLA_DAEMON_PREVIEW_INTERNAL_H
#define CELLA_DAEMON_PREVIEW_INTERNAL_H

#ifndef CELLA_DAEMON_PREVIEW_H
#error "include daemon/preview.h before daemon/preview-internal.h"
#endif

#include <http_parser.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/limits.h"
#include "daemon/http-header.h"

/* A connection to a port inside a sandbox. Owned by one proxied request at a time; after
 * a response that leaves it reusable (keep-alive, nothing left over) it waits in the
 * config's idle list for the next request to the same port of the same run of the same
 * sandbox, so that a busy preview URL does not cost a connection per request. */
struct upconn {
        uv_tcp_t tcp; /* data: this */
        struct preview_config *cfg;
        struct pxy *owner;          /* NULL while idle or closing */
        struct upconn *prev, *next; /* cfg->idle */
        char sandbox[CELLA_NAME_MAX + 1];
        int port;
        int64_t instance;
        bool idle;    /* in cfg->idle */
        bool reading; /* up_read is installed: it stays while the connection is reused */
};

/* One proxied request, and after a 101 the relay of the two sockets. Its upstream is a
 * port in a sandbox (sb), or another node of the cluster (peer: the request relayed to
 * its owner, preview_proxy_peer). */
struct pxy {
        int refs; /* the logic, the open handles, client writes in flight */
        struct preview_config *cfg;
        struct pxy *prev, *next; /* cfg->live */
        struct http_request *req;
        struct sandbox *sb;
        int port;
        bool peer;                         /* upstream is a node: */
        struct sockaddr_storage peer_addr; /* its address */
        char peer_node[64];                /* its name (messages, the idle list's key) */
        preview_peer_head_fn peer_head;    /* called once: the owner's status, or -1 */
        void *peer_ud;
        bool finished;
        char *upgrade; /* the client's Upgrade value, or NULL */

        struct upconn *uc;
        bool up_open;    /* uc is ours (one reference held for it) */
        bool reused;     /* uc came from the idle list */
        bool got_bytes;  /* the sandbox answered something on uc */
        unsigned writes; /* writes to uc in flight */
        int64_t instance;
        uv_loop_t *loop;
        bool up_connected;
        uv_connect_t connect;
        struct buf head; /* request head, sent on connect */
        enum preview_body body;
        bool body_done;
        bool body_waiting; /* the client body is paused until the sandbox takes bytes */

        http_parser parser;
        struct http_header *hdrs;
        size_t nhdrs;
        struct buf field, value;
        bool in_value;
        size_t head_bytes;
        bool head_over; /* the head went over CELLA_PREVIEW_HEAD_MAX or _MAX_HEADERS */
        bool resp_begun;
        bool resp_done;
        bool up_paused; /* upstream reads stopped: the client is slow */
        bool upgraded;

        /* relay */
        uv_tcp_t cl;
        bool cl_open;
        bool eof_up, eof_cl;
        bool read_up, read_cl;
        uv_shutdown_t sh_up, sh_cl;
        uv_timer_t fin; /* after one side's EOF: CELLA_PREVIEW_HALF_CLOSE_MS for the other */
        bool fin_open;
};

/* preview.c */
/* Does the comma-separated token list v (NULL: none) hold tok (case-insensitive)? */
bool preview_header_has_token(const char *v, const char *tok);

/* preview-proxy.c */
/* Forward req to port in sb (running) with target as the request target (and
 * host_override as its Host: see preview_request_head); with require_upgrade, only a
 * WebSocket upgrade (400 otherwise). */
void preview_proxy_start(struct preview_config *cfg, struct http_request *req, struct sandbox *sb,
                         int port, const char *target, const char *host_override,
                         bool require_upgrade);
void pxy_unref(struct pxy *p);
/* Done with the request: close the sockets; memory goes with the last reference. */
void pxy_finish(struct pxy *p);
/* Answer code and msg if nothing was answered yet (else cut the client's response
 * short), then finish. */
void pxy_fail(struct pxy *p, int code, const char *msg);
/* The sandbox is in use (its idle clock restarts). */
void pxy_touch(struct pxy *p);
/* A handle of p closed: its reference goes. */
void pxy_on_handle_closed(uv_handle_t *h);
/* The sandbox's response headers as the client gets them (preview_response_headers),
 * appended to out. 0, -ENOMEM, -EINVAL (a header that would split the head). */
int pxy_response_headers(struct pxy *p, struct buf *out, bool keep_upgrade);
void upconn_idle_unlink(struct upconn *uc);
/* Close the connection; its owner's reference (if any) goes once it is closed. */
void upconn_close(struct upconn *uc);

/* preview-relay.c */
/* The sandbox answered 101: take the client's socket, send it the 101 head and what the
 * sandbox sent after it (rest), send the sandbox what the client sent after its request,
 * then relay both ways. */
void pxy_relay_begin(struct pxy *p, const char *rest, size_t restlen);

#endif
