/* GET /v1/sandboxes/{id}/pty?session=S&cols=C&rows=R: the session's terminal over a
 * WebSocket (docs/api.md "Terminal", decision 0022).
 *
 * The request is checked (a WebSocket upgrade, the query), then one PTY agent stream is
 * opened. The upgrade happens with the agent's first frame: an ERROR before it (no such
 * session) is an ordinary HTTP error response; anything else takes the connection over
 * (ws_upgrade) and is passed on: STDOUT as binary messages (the replay, then live output),
 * STARTED as {"type":"ready"}, EXIT as {"type":"exit","code":n} followed by a close
 * (1000). From the client, binary messages are typed input (DATA frames, sent only within
 * the agent's window: without credit the WebSocket is not read further), text messages
 * are JSON control ({"type":"resize","cols","rows"} becomes a PTY frame on the stream; a
 * bad one is answered {"type":"error","code","message"} and the connection stays).
 *
 * Output credit goes back to the agent once the WebSocket's queue has drained (everything
 * written to the socket), so a slow client slows the terminal down and the daemon holds
 * at most one window per connection.
 *
 * struct pty_op is refcounted: one reference while the HTTP request is held (until the
 * upgrade or the error response), one for the agent stream (until its on_close), one for
 * the WebSocket (until its on_close). */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/ws.h"

struct pty_op {
        unsigned refs;
        struct sandbox *sb;
        struct http_request *req;
        struct agent_stream *stream;
        struct ws *ws;
        bool ended;       /* exit or error sent to the client */
        struct buf input; /* typed bytes waiting for agent credit */
};

static void op_unref(struct pty_op *op)
{
        if (--op->refs > 0)
                return;
        sandbox_unref(op->sb);
        buf_free(&op->input);
        free(op);
}

static void release_req(struct pty_op *op)
{
        if (!op->req)
                return;
        http_request_on_abort(op->req, NULL, NULL);
        http_request_unref(op->req);
        op->req = NULL;
        op_unref(op);
}

static void send_json(struct pty_op *op, json_t *j)
{
        _cleanup_free_ char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;

        json_decref(j);
        if (op->ws && text)
                ws_send(op->ws, true, text, strlen(text));
}

static void send_error(struct pty_op *op, int code, const char *message)
{
        send_json(op, json_pack("{s:s, s:s, s:s}", "type", "error", "code", cella_code_name(code),
                                "message", message));
}

/* Pass typed input on as far as the agent's credit goes; the WebSocket is read again
 * once nothing waits. */
static void flush_input(struct pty_op *op)
{
        size_t n;

        if (op->stream && op->input.len > 0) {
                n = MIN(op->input.len, agent_stream_send_credit(op->stream));
                if (n > 0 && agent_stream_send_data(op->stream, op->input.data, n) == 0)
                        buf_consume(&op->input, n);
        } else if (!op->stream) {
                buf_reset(&op->input);
        }
        if (op->ws)
                ws_set_reading(op->ws, op->input.len == 0);
}

/* ---- the WebSocket ---- */

static void ws_message(struct ws *ws, bool text, const uint8_t *data, size_t len, void *ud)
{
        struct pty_op *op = ud;
        struct cella_error err = {0};
        struct api_pty_control ctl;

        (void)ws;
        sandbox_touch(op->sb);
        if (!text) {
                if (op->stream && !op->ended && buf_append(&op->input, data, len) == 0)
                        flush_input(op);
                return;
        }
        if (api_decode_pty_control((const char *)data, len, &ctl, &err) < 0) {
                send_error(op, err.code, err.msg);
                return;
        }
        if (op->stream) {
                json_t *j = wire_pty_encode(&(struct wire_pty){.cols = ctl.cols, .rows = ctl.rows});

                if (j)
                        agent_stream_send_json(op->stream, FRAME_PTY, j);
                json_decref(j);
        }
}

static void ws_drain(struct ws *ws, void *ud)
{
        struct pty_op *op = ud;

        (void)ws;
        if (op->stream)
                agent_stream_ack(op->stream, CELLA_STREAM_WINDOW);
}

static void ws_closed(struct ws *ws, int code, void *ud)
{
        struct pty_op *op = ud;

        (void)ws;
        (void)code;
        op->ws = NULL;
        if (op->stream)
                agent_stream_cancel(op->stream); /* the terminal runs on */
        op_unref(op);
}

static const struct ws_ops pty_ws_ops = {ws_message, ws_drain, ws_closed};

/* ---- the agent stream ---- */

static bool upgrade(struct pty_op *op)
{
        int r;

        op->refs++; /* the WebSocket's */
        r = ws_upgrade(op->req, &pty_ws_ops, op, &op->ws);
        if (r < 0) {
                op->refs--;
                http_respond_code(op->req, CELLA_E_INTERNAL_ERROR,
                                  "cannot take the connection over: %s", strerror(-r));
                release_req(op);
                if (op->stream)
                        agent_stream_cancel(op->stream);
                return false;
        }
        release_req(op);
        return true;
}

/* Called with a reference held (a send can end the WebSocket, whose on_close drops
 * others). */
static void handle_frame(struct pty_op *op, struct agent_stream *s, const struct frame *f)
{
        if (op->req) {
                if (f->type == FRAME_ERROR) {
                        api_respond_agent_error(op->req, f);
                        release_req(op);
                        return;
                }
                if (!upgrade(op))
                        return;
        }
        switch (f->type) {
        case FRAME_STDOUT:
                if (!op->ws || ws_send(op->ws, false, f->payload, f->len) < 0)
                        agent_stream_ack(s, f->len);
                break;
        case FRAME_STARTED:
                send_json(op, json_pack("{s:s}", "type", "ready"));
                break;
        case FRAME_EXIT: {
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
                json_t *code = json_object_get(j, "exitCode");

                op->ended = true;
                send_json(op, json_pack("{s:s, s:I}", "type", "exit", "code",
                                        json_is_integer(code) ? json_integer_value(code) : -1));
                json_decref(j);
                if (op->ws)
                        ws_close(op->ws, 1000, "shell exited");
                break;
        }
        case FRAME_ERROR: {
                struct cella_error e = {0};

                api_agent_error(f, &e);
                op->ended = true;
                send_error(op, e.code, e.msg);
                if (op->ws)
                        ws_close(op->ws, 1011, "terminal failed");
                break;
        }
        default:
                break;
        }
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *ud)
{
        struct pty_op *op = ud;

        op->refs++;
        handle_frame(op, s, f);
        op_unref(op);
}

static void on_writable(struct agent_stream *s, void *ud)
{
        struct pty_op *op = ud;

        (void)s;
        op->refs++;
        flush_input(op);
        op_unref(op);
}

static void on_close(struct agent_stream *s, int err, void *ud)
{
        struct pty_op *op = ud;

        (void)s;
        op->stream = NULL;
        if (op->req) {
                http_respond_code(op->req, CELLA_E_SANDBOX_UNAVAILABLE,
                                  "the sandbox's agent went away");
                release_req(op);
        } else if (op->ws && !op->ended && err != -ECANCELED) {
                op->ended = true;
                send_error(op, CELLA_E_SANDBOX_UNAVAILABLE, "the sandbox's agent went away");
                if (op->ws)
                        ws_close(op->ws, 1011, "sandbox unavailable");
        }
        op_unref(op);
}

static const struct agent_stream_ops pty_stream_ops = {on_frame, on_writable, on_close};

/* The client left before the upgrade. */
static void on_abort(struct http_request *req, void *ud)
{
        struct pty_op *op = ud;

        (void)req;
        op->refs++;
        release_req(op);
        if (op->stream)
                agent_stream_cancel(op->stream);
        op_unref(op);
}

void api_pty(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct cella_error err = {0};
        const char *sid = http_request_query(req, "session");
        unsigned cols, rows;
        struct pty_op *op;
        json_t *payload, *base;
        int r;

        if (!sid)
                sid = http_request_query(req, "sessionId");
        if (ws_upgrade_check(req, &err) < 0 ||
            api_parse_pty_dim(http_request_query(req, "cols"), "cols", 80, &cols, &err) < 0 ||
            api_parse_pty_dim(http_request_query(req, "rows"), "rows", 24, &rows, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        if (sid && !cella_id_is_valid(sid)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "session must be 1..%d of [A-Za-z0-9_.-]", CELLA_ID_MAX);
                return;
        }
        op = calloc(1, sizeof(*op));
        if (!op) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        op->refs = 1;
        op->sb = api_sandbox_for(a, req, name);
        if (!op->sb) {
                free(op);
                return;
        }
        sandbox_ref(op->sb);
        base = sandbox_env(op->sb);
        payload = wire_pty_encode(&(struct wire_pty){
                .session = sid ? sid : "default", .cols = cols, .rows = rows, .base_env = base});
        op->refs++; /* the stream's */
        r = payload ? agent_conn_open(sandbox_agent(op->sb), FRAME_PTY, payload, &pty_stream_ops,
                                      op, &op->stream, &err)
                    : cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
        json_decref(payload);
        if (r < 0) {
                op->refs--;
                http_respond_error(req, &err, NULL);
                op_unref(op);
                return;
        }
        op->req = req;
        http_request_ref(req);
        http_request_on_abort(req, on_abort, op);
}
