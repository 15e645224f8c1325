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
 * struct pty_op is a struct api_req (api-req.h): its references (the handler's, the agent
 * stream's) and one more for the WebSocket (until its on_close); the HTTP request is held
 * until the upgrade or the error response. */
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/name.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"
#include "daemon/sandbox.h"
#include "daemon/ws.h"

struct pty_op {
        struct api_req base; /* first */
        struct ws *ws;
        bool ended;                 /* exit or error sent to the client */
        struct buf input;           /* typed bytes waiting for agent credit */
        char sid[CELLA_ID_MAX + 1]; /* the session ("default" when not given) */
        unsigned cols, rows;
};

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
        struct agent_stream *s = op->base.stream;
        size_t n;

        if (s && op->input.len > 0) {
                n = MIN(op->input.len, agent_stream_send_credit(s));
                if (n > 0 && agent_stream_send_data(s, op->input.data, n) == 0)
                        buf_consume(&op->input, n);
        } else if (!s) {
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
        sandbox_touch(op->base.sb);
        if (!text) {
                if (op->base.stream && !op->ended && buf_append(&op->input, data, len) == 0)
                        flush_input(op);
                return;
        }
        if (api_decode_pty_control((const char *)data, len, &ctl, &err) < 0) {
                send_error(op, err.code, err.msg);
                return;
        }
        if (op->base.stream) {
                json_t *j = wire_pty_encode(&(struct wire_pty){.cols = ctl.cols, .rows = ctl.rows});

                if (j)
                        agent_stream_send_json(op->base.stream, FRAME_PTY, j);
                json_decref(j);
        }
}

static void ws_drain(struct ws *ws, void *ud)
{
        struct pty_op *op = ud;

        (void)ws;
        if (op->base.stream)
                agent_stream_ack(op->base.stream, CELLA_STREAM_WINDOW);
}

static void ws_closed(struct ws *ws, int code, void *ud)
{
        struct pty_op *op = ud;

        (void)ws;
        (void)code;
        op->ws = NULL;
        if (op->base.stream)
                agent_stream_cancel(op->base.stream); /* the terminal runs on */
        api_req_unref(&op->base);
}

static const struct ws_ops pty_ws_ops = {ws_message, ws_drain, ws_closed};

/* ---- the agent stream ---- */

static bool upgrade(struct pty_op *op)
{
        struct api_req *r = &op->base;
        int rc;

        api_req_ref(r); /* the WebSocket's */
        /* The 101 is an answer, and does not go through the HTTP server's writes: a claim
         * it tells of is committed first (decision 0059). */
        sandbox_table_commit(r->api->cfg.table);
        rc = ws_upgrade(r->http, &pty_ws_ops, op, &op->ws);
        if (rc < 0) {
                api_req_unref(r);
                http_respond_code(r->http, CELLA_E_INTERNAL_ERROR,
                                  "cannot take the connection over: %s", strerror(-rc));
                api_req_finish(r);
                if (r->stream)
                        agent_stream_cancel(r->stream);
                return false;
        }
        api_req_finish(r); /* the connection is the WebSocket's now */
        return true;
}

/* The request holds a reference around it (a send can end the WebSocket, whose on_close
 * drops another). */
static void on_frame(struct api_req *r, const struct frame *f)
{
        struct pty_op *op = (struct pty_op *)r;
        struct agent_stream *s = r->stream;

        if (r->http) {
                if (f->type == FRAME_ERROR) {
                        api_req_fail_frame(r, f);
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
                struct api_exit x;

                api_exit_parse(f, &x);
                op->ended = true;
                send_json(op, json_pack("{s:s, s:I}", "type", "exit", "code", x.code));
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

static void on_writable(struct api_req *r)
{
        flush_input((struct pty_op *)r);
}

/* The agent stream closed: before the upgrade an HTTP error, after it an error message
 * unless the terminal ended or the client left. */
static void on_closed(struct api_req *r, int err)
{
        struct pty_op *op = (struct pty_op *)r;

        if (r->http) {
                http_respond_code(r->http, CELLA_E_SANDBOX_UNAVAILABLE,
                                  "the sandbox's agent went away");
        } else if (op->ws && !op->ended && err != -ECANCELED) {
                op->ended = true;
                send_error(op, CELLA_E_SANDBOX_UNAVAILABLE, "the sandbox's agent went away");
                if (op->ws)
                        ws_close(op->ws, 1011, "sandbox unavailable");
        }
}

static void op_free(struct api_req *r)
{
        buf_free(&((struct pty_op *)r)->input);
}

static const struct api_req_ops pty_ops = {
        .frame = on_frame, .writable = on_writable, .closed = on_closed, .free = op_free};

/* The terminal's agent stream, once the sandbox runs. */
static void pty_open(struct api_req *r)
{
        struct pty_op *op = (struct pty_op *)r;
        _cleanup_json_ json_t *payload = NULL;

        if (!api_req_find_sandbox(r))
                return;
        payload = wire_pty_encode(&(struct wire_pty){.session = op->sid,
                                                     .cols = op->cols,
                                                     .rows = op->rows,
                                                     .base_env = sandbox_env(r->sb)});
        api_req_open(r, FRAME_PTY, payload);
}

void api_pty(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct cella_error err = {0};
        const char *sid = http_request_query(req, "session");
        unsigned cols, rows;
        struct api_req *r;
        struct pty_op *op;

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
        r = api_req_new(a, req, name, sizeof(struct pty_op), &pty_ops);
        if (!r)
                return;
        r->mode = API_REQ_RAW;
        r->frames_wake = false; /* typing keeps the sandbox awake, output alone does not */
        op = (struct pty_op *)r;
        snprintf(op->sid, sizeof(op->sid), "%s", sid ? sid : "default");
        op->cols = cols;
        op->rows = rows;
        api_req_run(r, pty_open);
        api_req_unref(r);
}
