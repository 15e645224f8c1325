/* WebSocket server connections over libuv with wslay's event API (see ws.h).
 *
 * Bytes read from the socket wait in `in` and are handed to wslay by recv_cb; wslay's
 * send_cb copies what it frames into a uv_write of its own. Everything runs on the loop
 * thread; a struct ws is freed only from its handle's close callback, after on_close. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <wslay/wslay.h>
#include <uv.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/utf8.h"
#include "common/ws-key.h"
#include "daemon/http.h"
#include "daemon/ws.h"

#define CLOSE_GRACE_MS 2000 /* after our close frame, wait this long for the peer's */

struct ws {
        struct ws *prev, *next; /* in live, until ws_end */
        uv_tcp_t tcp;
        uv_timer_t timer;
        wslay_event_context_ptr ctx;
        const struct ws_ops *ops;
        void *ud;
        struct buf in;     /* read, not yet taken by wslay */
        size_t uv_queued;  /* bytes in uv_write requests not yet completed */
        bool want_reading; /* the route's wish */
        bool reading;      /* uv_read_start is active */
        bool closing;      /* handles closing, on_close called */
        bool in_recv;      /* inside wslay_event_recv */
        bool failing;      /* a frame wslay refused: our 1002 is being written, then we end */
        unsigned handles;
};

struct ws_write {
        uv_write_t req;
        struct ws *ws;
        size_t len;
        char data[];
};

/* Every connection not yet ended (ws_close_all at daemon shutdown). */
static struct ws *live;
static unsigned n_live;

static void ws_flush(struct ws *ws);
static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret);
static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b);

/* ---- the handshake ---- */

int ws_upgrade_check(struct http_request *req, struct cella_error *err)
{
        const char *v;
        char accept[WS_ACCEPT_LEN + 1];

        if (strcmp(http_request_method(req), "GET") != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "a WebSocket upgrade must be a GET");
        v = http_request_header(req, "Upgrade");
        if (!v || !ws_header_has_token(v, "websocket"))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "this route is a WebSocket (Upgrade: websocket)");
        v = http_request_header(req, "Connection");
        if (!v || !ws_header_has_token(v, "upgrade"))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "a WebSocket upgrade needs Connection: Upgrade");
        v = http_request_header(req, "Sec-WebSocket-Version");
        if (!v || strcmp(v, "13") != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "Sec-WebSocket-Version must be 13");
        if (ws_accept_key(http_request_header(req, "Sec-WebSocket-Key"), accept) < 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "bad Sec-WebSocket-Key (base64 of 16 bytes)");
        if (n_live >= CELLA_WS_MAX_CONNECTIONS)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "too many WebSocket connections (%d)",
                                       CELLA_WS_MAX_CONNECTIONS);
        return 0;
}

/* ---- socket I/O ---- */

static void on_handle_closed(uv_handle_t *h)
{
        struct ws *ws = h->data;

        if (--ws->handles > 0)
                return;
        if (ws->ctx)
                wslay_event_context_free(ws->ctx);
        buf_free(&ws->in);
        free(ws);
}

/* Close everything and tell the route (once). */
static void ws_end(struct ws *ws, int code)
{
        if (ws->closing)
                return;
        ws->closing = true;
        n_live--;
        if (ws->prev)
                ws->prev->next = ws->next;
        else
                live = ws->next;
        if (ws->next)
                ws->next->prev = ws->prev;
        ws->prev = ws->next = NULL;
        uv_timer_stop(&ws->timer);
        uv_close((uv_handle_t *)&ws->tcp, on_handle_closed);
        uv_close((uv_handle_t *)&ws->timer, on_handle_closed);
        if (ws->ops->on_close)
                ws->ops->on_close(ws, code, ws->ud);
}

size_t ws_queued(const struct ws *ws)
{
        return ws->uv_queued + (ws->ctx ? wslay_event_get_queued_msg_length(ws->ctx) : 0);
}

static void update_reading(struct ws *ws)
{
        bool on = ws->want_reading && !ws->closing && !ws->failing &&
                  ws_queued(ws) < CELLA_WS_HIGH_WATER && wslay_event_want_read(ws->ctx);

        if (on == ws->reading)
                return;
        ws->reading = on;
        if (on)
                uv_read_start((uv_stream_t *)&ws->tcp, on_alloc, on_read);
        else
                uv_read_stop((uv_stream_t *)&ws->tcp);
}

static void on_write_done(uv_write_t *req, int status)
{
        struct ws_write *w = (struct ws_write *)req;
        struct ws *ws = w->ws;

        ws->uv_queued -= w->len;
        free(w);
        if (ws->closing)
                return;
        if (status < 0) {
                ws_end(ws, WSLAY_CODE_ABNORMAL_CLOSURE);
                return;
        }
        if (ws->failing) {
                if (ws->uv_queued == 0)
                        ws_end(ws, WSLAY_CODE_PROTOCOL_ERROR);
                return;
        }
        ws_flush(ws);
}

static void on_close_grace(uv_timer_t *t);

/* wslay's frame parser refused a frame header (a non-minimal length, a control frame over
 * 125 bytes or fragmented): it queues a close without a status and fails. Say 1002 as
 * RFC 6455 asks, behind what is already being written (closing the handle now would
 * cancel those writes and the close frame with them), then end: when the writes are done,
 * or after the grace period if the peer does not read. */
static void fail_protocol(struct ws *ws)
{
        static const char close_1002[] = {(char)0x88, 0x02, 0x03, (char)0xea};
        struct ws_write *w = malloc(sizeof(*w) + sizeof(close_1002));
        uv_buf_t b;

        ws->failing = true;
        buf_reset(&ws->in);
        update_reading(ws);
        if (!w) {
                ws_end(ws, WSLAY_CODE_PROTOCOL_ERROR);
                return;
        }
        w->ws = ws;
        w->len = sizeof(close_1002);
        memcpy(w->data, close_1002, sizeof(close_1002));
        b = uv_buf_init(w->data, (unsigned)w->len);
        if (uv_write(&w->req, (uv_stream_t *)&ws->tcp, &b, 1, on_write_done) < 0) {
                free(w);
                ws_end(ws, WSLAY_CODE_PROTOCOL_ERROR);
                return;
        }
        ws->uv_queued += w->len;
        uv_timer_start(&ws->timer, on_close_grace, CLOSE_GRACE_MS, 0);
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud)
{
        struct ws *ws = ud;
        struct ws_write *w;
        uv_buf_t b;

        (void)flags;
        if (ws->uv_queued >= CELLA_WS_HIGH_WATER) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        w = malloc(sizeof(*w) + len);
        if (!w) {
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        w->ws = ws;
        w->len = len;
        memcpy(w->data, data, len);
        b = uv_buf_init(w->data, (unsigned)len);
        if (uv_write(&w->req, (uv_stream_t *)&ws->tcp, &b, 1, on_write_done) < 0) {
                free(w);
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        ws->uv_queued += len;
        return (ssize_t)len;
}

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
        struct ws *ws = ud;
        size_t n = MIN(len, ws->in.len);

        (void)flags;
        if (n == 0) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        memcpy(buf, ws->in.data, n);
        buf_consume(&ws->in, n);
        return (ssize_t)n;
}

static void on_msg_recv(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                        void *ud)
{
        struct ws *ws = ud;

        if (ws->closing || wslay_event_get_close_sent(ctx))
                return;
        if (arg->opcode == WSLAY_TEXT_FRAME || arg->opcode == WSLAY_BINARY_FRAME) {
                bool text = arg->opcode == WSLAY_TEXT_FRAME;

                if (text && !utf8_is_valid((const char *)arg->msg, arg->msg_length)) {
                        wslay_event_queue_close(ctx, WSLAY_CODE_INVALID_FRAME_PAYLOAD_DATA,
                                                (const uint8_t *)"text is not UTF-8", 17);
                        return;
                }
                ws->ops->on_message(ws, text, arg->msg, arg->msg_length, ws->ud);
        }
}

/* Send what wslay has queued; end the connection when neither side has anything more to
 * say; tell the route when everything was written. Never parses input, so sending from a
 * route's callback does not call the route back with a message. */
static void ws_flush(struct ws *ws)
{
        if (ws->closing || ws->failing)
                return;
        if (wslay_event_want_write(ws->ctx) && wslay_event_send(ws->ctx) != 0) {
                ws_end(ws, WSLAY_CODE_ABNORMAL_CLOSURE);
                return;
        }
        if (!wslay_event_want_read(ws->ctx) && !wslay_event_want_write(ws->ctx) &&
            ws->uv_queued == 0) {
                ws_end(ws, wslay_event_get_close_received(ws->ctx)
                                   ? wslay_event_get_status_code_received(ws->ctx)
                                   : WSLAY_CODE_ABNORMAL_CLOSURE);
                return;
        }
        if (ws_queued(ws) == 0 && ws->ops->on_drain)
                ws->ops->on_drain(ws, ws->ud);
        if (!ws->closing)
                update_reading(ws);
}

/* Let wslay parse what was read (it takes all of it; messages go to the route), then
 * flush. */
static void ws_pump(struct ws *ws)
{
        if (ws->closing || ws->failing || ws->in_recv)
                return;
        if (ws->in.len > 0 && wslay_event_want_read(ws->ctx)) {
                ws->in_recv = true;
                if (wslay_event_recv(ws->ctx) != 0) {
                        ws->in_recv = false;
                        fail_protocol(ws);
                        return;
                }
                ws->in_recv = false;
                if (ws->closing)
                        return;
        }
        if (!wslay_event_want_read(ws->ctx))
                buf_reset(&ws->in); /* after a close: nothing more is parsed */
        ws_flush(ws);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct ws *ws = h->data;

        (void)suggested;
        if (buf_reserve(&ws->in, 16 * 1024) < 0) {
                *ret = uv_buf_init(NULL, 0);
                return;
        }
        *ret = uv_buf_init(ws->in.data + ws->in.len, (unsigned)(ws->in.cap - ws->in.len - 1));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct ws *ws = st->data;

        (void)b;
        if (n < 0) {
                ws_end(ws, wslay_event_get_close_received(ws->ctx)
                                   ? wslay_event_get_status_code_received(ws->ctx)
                                   : WSLAY_CODE_ABNORMAL_CLOSURE);
                return;
        }
        ws->in.len += (size_t)n;
        ws_pump(ws);
}

static void on_close_grace(uv_timer_t *t)
{
        struct ws *ws = t->data;

        ws_end(ws, wslay_event_get_close_received(ws->ctx)
                           ? wslay_event_get_status_code_received(ws->ctx)
                           : WSLAY_CODE_ABNORMAL_CLOSURE);
}

/* Bytes the client sent right behind its upgrade request: parsed once the route has
 * its struct ws (never from inside ws_upgrade). */
static void on_leftover(uv_timer_t *t)
{
        ws_pump(t->data);
}

int ws_upgrade(struct http_request *req, const struct ws_ops *ops, void *ud, struct ws **ret)
{
        static const struct wslay_event_callbacks cbs = {
                .recv_callback = recv_cb,
                .send_callback = send_cb,
                .on_msg_recv_callback = on_msg_recv,
        };
        _cleanup_buf_ struct buf head = BUF_INIT;
        char accept[WS_ACCEPT_LEN + 1];
        uv_loop_t *loop = http_request_loop(req);
        struct ws *ws;
        uv_buf_t b;
        int fd, r;

        if (!loop)
                return -EPIPE;
        r = ws_accept_key(http_request_header(req, "Sec-WebSocket-Key"), accept);
        if (r < 0)
                return r;
        /* A browser that offered subprotocols (the "cella.bearer." one carries its token,
         * docs/api.md "Auth") fails the connection unless one is answered: WS_PROTOCOL,
         * when offered, never the one with the token. */
        if (buf_printf(&head,
                       "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Accept: %s\r\n%s\r\n",
                       accept,
                       ws_header_has_token(http_request_header(req, "Sec-WebSocket-Protocol"),
                                           WS_PROTOCOL)
                               ? "Sec-WebSocket-Protocol: " WS_PROTOCOL "\r\n"
                               : "") < 0)
                return -ENOMEM;
        ws = calloc(1, sizeof(*ws));
        if (!ws)
                return -ENOMEM;
        ws->ops = ops;
        ws->ud = ud;
        ws->want_reading = true;
        if (wslay_event_context_server_init(&ws->ctx, &cbs, ws) != 0) {
                free(ws);
                return -ENOMEM;
        }
        wslay_event_config_set_max_recv_msg_length(ws->ctx, CELLA_WS_MAX_MESSAGE);
        r = http_request_take_socket(req, &fd, &ws->in);
        if (r < 0) {
                wslay_event_context_free(ws->ctx);
                buf_free(&ws->in);
                free(ws);
                return r;
        }
        uv_tcp_init(loop, &ws->tcp);
        uv_timer_init(loop, &ws->timer);
        ws->tcp.data = ws->timer.data = ws;
        ws->handles = 2;
        if (uv_tcp_open(&ws->tcp, fd) < 0) {
                close(fd);
                ws->closing = true;
                uv_close((uv_handle_t *)&ws->tcp, on_handle_closed);
                uv_close((uv_handle_t *)&ws->timer, on_handle_closed);
                return -EIO;
        }
        uv_tcp_nodelay(&ws->tcp, 1);
        uv_tcp_keepalive(&ws->tcp, 1, 60); /* a terminal may be idle for hours */
        /* The 101 goes out first, through the same write path as the frames. */
        {
                struct ws_write *w = malloc(sizeof(*w) + head.len);

                if (!w) {
                        ws->closing = true;
                        uv_close((uv_handle_t *)&ws->tcp, on_handle_closed);
                        uv_close((uv_handle_t *)&ws->timer, on_handle_closed);
                        return -ENOMEM;
                }
                w->ws = ws;
                w->len = head.len;
                memcpy(w->data, head.data, head.len);
                b = uv_buf_init(w->data, (unsigned)head.len);
                if (uv_write(&w->req, (uv_stream_t *)&ws->tcp, &b, 1, on_write_done) < 0) {
                        free(w);
                        ws->closing = true;
                        uv_close((uv_handle_t *)&ws->tcp, on_handle_closed);
                        uv_close((uv_handle_t *)&ws->timer, on_handle_closed);
                        return -EIO;
                }
                ws->uv_queued += head.len;
        }
        ws->reading = true;
        uv_read_start((uv_stream_t *)&ws->tcp, on_alloc, on_read);
        ws->next = live;
        if (live)
                live->prev = ws;
        live = ws;
        n_live++;
        if (ws->in.len > 0)
                uv_timer_start(&ws->timer, on_leftover, 0, 0);
        *ret = ws;
        return 0;
}

/* ---- sending ---- */

int ws_send(struct ws *ws, bool text, const void *data, size_t len)
{
        struct wslay_event_msg msg = {
                .opcode = text ? WSLAY_TEXT_FRAME : WSLAY_BINARY_FRAME,
                .msg = data,
                .msg_length = len,
        };

        if (ws->closing || wslay_event_get_close_sent(ws->ctx))
                return -EPIPE;
        if (wslay_event_queue_msg(ws->ctx, &msg) != 0)
                return -ENOMEM;
        if (!ws->in_recv)
                ws_flush(ws); /* else after the parse (ws_pump) */
        return 0;
}

void ws_set_reading(struct ws *ws, bool on)
{
        ws->want_reading = on;
        if (!ws->closing)
                update_reading(ws);
}

void ws_close(struct ws *ws, int code, const char *reason)
{
        if (ws->closing)
                return;
        if (!wslay_event_get_close_sent(ws->ctx))
                wslay_event_queue_close(ws->ctx, (uint16_t)code, (const uint8_t *)reason,
                                        reason ? strlen(reason) : 0);
        uv_timer_start(&ws->timer, on_close_grace, CLOSE_GRACE_MS, 0);
        if (!ws->in_recv)
                ws_flush(ws);
}

void ws_abort(struct ws *ws)
{
        ws_end(ws, WSLAY_CODE_ABNORMAL_CLOSURE);
}

void ws_close_all(void)
{
        while (live)
                ws_end(live, WSLAY_CODE_GOING_AWAY);
}
