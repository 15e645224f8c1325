/* WebSocket server connections (RFC 6455) on sockets the HTTP server hands over
 * (http_request_take_socket), framed by wslay. Any route can upgrade with it.
 *
 * A route checks the request with ws_upgrade_check() (before answering anything: a bad
 * upgrade is an ordinary HTTP error), and later, outside on_request, calls
 * ws_upgrade(): the socket is taken over, `101 Switching Protocols` with the
 * Sec-WebSocket-Accept is written, and from then on the route talks WebSocket through the
 * struct ws. wslay answers pings, enforces masking, reserved bits, control frame rules and
 * the message size limit, closing with the matching status code (1002, 1009); text
 * messages that are not UTF-8 are closed with 1007 here.
 *
 * Ownership: ws_upgrade's caller owns the struct ws until ops->on_close, which is called
 * exactly once (peer closed, socket error, ws_close completed, ws_abort), after which the
 * memory is freed by ws.c once libuv released the handle: drop the pointer in on_close.
 *
 * Backpressure: ws_queued() is what was handed to ws_send and not yet written to the
 * socket; ops->on_drain is called each time it falls to 0. Input is read only while the
 * route allows it (ws_set_reading) and the output queue is below CELLA_WS_HIGH_WATER,
 * so a client that sends without reading the answers (pings, errors) is not served
 * without bound. */
#ifndef CELLA_DAEMON_WS_H
#define CELLA_DAEMON_WS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct http_request;
struct ws;

struct ws_ops {
        /* One complete message (text is valid UTF-8). data is borrowed for the call. */
        void (*on_message)(struct ws *ws, bool text, const uint8_t *data, size_t len, void *ud);
        /* Everything queued was written. May be NULL. */
        void (*on_drain)(struct ws *ws, void *ud);
        /* Once; code is the status the peer sent (1005 none, 1006 the connection was lost). */
        void (*on_close)(struct ws *ws, int code, void *ud);
};

/* The request is a WebSocket upgrade (GET, Upgrade: websocket, Connection: upgrade,
 * Sec-WebSocket-Version: 13, a valid Sec-WebSocket-Key) that may be accepted. 0, or
 * -EINVAL with err set (VALIDATION_FAILED), or -EAGAIN (SANDBOX_UNAVAILABLE) when
 * CELLA_WS_MAX_CONNECTIONS are open. */
int ws_upgrade_check(struct http_request *req, struct cella_error *err);
/* Take req's connection over and answer 101 (see above). Not from on_request. 0 with
 * *ret, or -errno (the request is then still the caller's to answer, if it can be). */
int ws_upgrade(struct http_request *req, const struct ws_ops *ops, void *ud, struct ws **ret);

/* Queue a message (copied). -EPIPE once closing. */
int ws_send(struct ws *ws, bool text, const void *data, size_t len);
size_t ws_queued(const struct ws *ws);
/* Pause (false) or resume reading the client's messages. */
void ws_set_reading(struct ws *ws, bool on);
/* Send a close frame with code (and a short reason); the connection ends once the peer
 * answered or after a grace period, then on_close. */
void ws_close(struct ws *ws, int code, const char *reason);
/* Close the socket at once; on_close is called from here. */
void ws_abort(struct ws *ws);
/* Daemon shutdown: abort every connection. */
void ws_close_all(void);

#endif
