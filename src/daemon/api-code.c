/* The code interpreter's routes (docs/api.md "Code interpreter", decision 0021):
 *
 *   POST   /v1/sandboxes/{id}/contexts        -> 201 {id, language, cwd, status}
 *   GET    /v1/sandboxes/{id}/contexts        -> {contexts: [...]}
 *   DELETE /v1/sandboxes/{id}/contexts/{cid}  -> {success, id} (404 CONTEXT_NOT_FOUND)
 *   POST   /v1/sandboxes/{id}/code            -> Execution, or SSE events as they happen
 *
 * Contexts live in the agent (CODE frames); the daemon keeps nothing about them, so they
 * end with the sandbox (sleep, restart). A run is one CODE stream: STDOUT/STDERR frames
 * are the run's output, DATA frames carry its result and error events as JSON lines
 * (reassembled here, at most CELLA_CODE_MAX_EVENT bytes each), RESULT {executionCount,
 * timedOut} ends it and an ERROR (CONTEXT_NOT_FOUND, CONTEXT_DEAD, ...) fails it.
 *
 * Buffered mode collects {results, logs: {stdout[], stderr[]}, error?, executionCount}
 * (CELLA_EXEC_MAX_BUFFERED bytes of output and events, then truncated). SSE mode begins
 * with the first frame of the run (an error before it, such as an unknown context, is an
 * ordinary error response) and passes each piece on as an event whose agent credit comes
 * back once the client took it, so a slow client slows the run instead of filling memory.
 * The client leaving cancels the stream: the agent interrupts the run.
 *
 * struct code_op begins with a struct api_op (api-op.c): its references, the request and
 * the agent stream. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"

/* ---- contexts: one agent call each ---- */

enum { K_CREATE, K_LIST, K_DELETE };

struct ctx_call {
        struct api *a;
        char name[CELLA_NAME_MAX + 1];
        char cid[CELLA_ID_MAX + 1];
        int kind;
        struct sandbox *sb;
};

static void ctx_free(struct ctx_call *c)
{
        sandbox_unref(c->sb);
        free(c);
}

static void ctx_answer(struct http_request *req, json_t *result, const struct cella_error *err,
                       json_t *error_payload, void *ud)
{
        struct ctx_call *c = ud;

        (void)error_payload;
        if (!req) {
                ctx_free(c);
                return;
        }
        if (err) {
                http_respond_error(req, err, NULL);
        } else if (c->kind == K_DELETE) {
                json_t *j = json_pack("{s:b, s:s}", "success", 1, "id", c->cid);

                http_respond_json(req, 200, j);
                json_decref(j);
        } else {
                http_respond_json(req, c->kind == K_CREATE ? 201 : 200, result);
        }
        ctx_free(c);
}

/* Send payload (consumed) for c (consumed). */
static void ctx_call(struct http_request *req, struct ctx_call *c, json_t *payload)
{
        c->sb = api_sandbox_for(c->a, req, c->name);
        if (!c->sb) {
                json_decref(payload);
                ctx_free(c);
                return;
        }
        sandbox_ref(c->sb);
        if (!payload) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                ctx_free(c);
                return;
        }
        if (c->kind == K_CREATE)
                json_object_set_new(payload, "baseEnv",
                                    sandbox_env(c->sb) ? json_deep_copy(sandbox_env(c->sb))
                                                       : json_object());
        if (api_agent_call(req, c->sb, FRAME_CODE, payload, ctx_answer, c) < 0)
                ctx_free(c);
        json_decref(payload);
}

static void ctx_body_abort(struct http_request *req, void *ud)
{
        (void)req;
        ctx_free(ud);
}

static void create_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct ctx_call *c = ud;
        struct cella_error err = {0};
        json_t *payload;

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_context_create(body, len, &payload, &err) < 0) {
                http_respond_error(req, &err, NULL);
                ctx_free(c);
                return;
        }
        ctx_call(req, c, payload);
}

static struct ctx_call *ctx_new(struct api *a, struct http_request *req, const char *name, int kind)
{
        struct ctx_call *c = calloc(1, sizeof(*c));

        if (!c) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        c->a = a;
        c->kind = kind;
        snprintf(c->name, sizeof(c->name), "%s", name);
        return c;
}

void api_contexts_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct ctx_call *c = ctx_new(a, req, p->name, K_LIST);

        if (c)
                ctx_call(req, c, json_pack("{s:s}", "op", "list"));
}

void api_contexts_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct ctx_call *c = ctx_new(a, req, p->name, K_CREATE);

        if (!c)
                return;
        http_request_on_abort(req, ctx_body_abort, c);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, create_body, c) < 0) {
                http_request_on_abort(req, NULL, NULL);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                ctx_free(c);
        }
}

void api_context_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct ctx_call *c = ctx_new(a, req, p->name, K_DELETE);

        if (!c)
                return;
        snprintf(c->cid, sizeof(c->cid), "%s", p->param);
        ctx_call(req, c, json_pack("{s:s, s:s}", "op", "delete", "id", p->param));
}

/* ---- runs ---- */

struct code_op {
        struct api_op base; /* first */
        bool sse;
        struct buf line; /* incomplete event line (DATA) */
        size_t unacked;  /* DATA bytes not yet acknowledged (SSE) */
        size_t buffered; /* buffered mode: bytes kept */
        bool truncated;
        struct buf out[2]; /* buffered mode: stdout, stderr */
        json_t *results;   /* buffered mode */
        json_t *error;
};

static void begin_sse(struct code_op *op)
{
        if (op->sse && !op->base.sse_begun && op->base.io.req) {
                op->base.sse_begun = true;
                http_response_begin_sse(op->base.io.req);
        }
}

/* Buffered mode: keep n more bytes? */
static bool room_for(struct code_op *op, size_t n)
{
        if (op->buffered + n > CELLA_EXEC_MAX_BUFFERED) {
                op->truncated = true;
                return false;
        }
        op->buffered += n;
        return true;
}

/* One event line from the agent (a result or an error), already validated there; checked
 * again here since it crossed from the sandbox. */
static void on_event_line(struct code_op *op, struct agent_stream *s, const char *line, size_t len,
                          size_t ack)
{
        json_t *ev = json_loadb(line, len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));

        if (!json_is_object(ev) || !type ||
            (strcmp(type, "result") != 0 && strcmp(type, "error") != 0)) {
                json_decref(ev);
                if (ack)
                        agent_stream_ack(s, ack);
                return;
        }
        if (op->sse) {
                begin_sse(op);
                api_sse_event(&op->base.io, ev, ack);
                return;
        }
        if (ack)
                agent_stream_ack(s, ack);
        if (!room_for(op, len)) {
                json_decref(ev);
        } else if (strcmp(type, "error") == 0) {
                json_object_del(ev, "type");
                json_decref(op->error);
                op->error = ev;
        } else {
                json_object_del(ev, "type");
                json_array_append_new(op->results, ev);
        }
}

static void on_data(struct code_op *op, struct agent_stream *s, const struct frame *f)
{
        size_t off = 0;

        if (op->base.finished || buf_append(&op->line, f->payload, f->len) < 0) {
                agent_stream_ack(s, f->len);
                return;
        }
        if (!op->sse)
                agent_stream_ack(s, f->len);
        else
                op->unacked += f->len;
        for (;;) {
                char *nl = memchr(op->line.data + off, '\n', op->line.len - off);
                size_t n, ack;

                if (!nl)
                        break;
                n = (size_t)(nl - (op->line.data + off));
                ack = MIN(op->unacked, n + 1);
                op->unacked -= ack;
                on_event_line(op, s, op->line.data + off, n, ack);
                off += n + 1;
        }
        buf_consume(&op->line, off);
        if (op->line.len == 0 && op->line.cap > 4 * CELLA_FRAME_DATA_CHUNK)
                buf_free(&op->line);
        if (op->line.len > CELLA_CODE_MAX_EVENT) {
                /* cannot be an event the agent sends: drop the stream's events */
                buf_free(&op->line);
        }
        if (op->unacked && op->line.len > CELLA_CODE_OUT_PENDING) {
                /* a large event: its bytes are credited as they come, or the agent would
                 * wait for credit that only the whole line brings */
                agent_stream_ack(s, op->unacked);
                op->unacked = 0;
        }
}

static json_t *logs_json(struct code_op *op)
{
        json_t *logs = json_object();

        for (int i = 0; logs && i < 2; i++) {
                json_t *arr = json_array();
                bool b64;

                if (op->out[i].len) {
                        json_array_append_new(arr, api_output_json(&op->out[i], &b64));
                        if (b64)
                                json_object_set_new(logs, i ? "stderrEncoding" : "stdoutEncoding",
                                                    json_string("base64"));
                }
                json_object_set_new(logs, i ? "stderr" : "stdout", arr);
        }
        return logs;
}

static void on_result(struct code_op *op, const struct frame *f)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        json_int_t count = 0;
        int timed_out = 0;

        if (j)
                json_unpack(j, "{s?I, s?b}", "executionCount", &count, "timedOut", &timed_out);
        json_decref(j);
        if (op->sse) {
                begin_sse(op);
                api_sse_output(&op->base.io, 0, NULL, 0, true);
                api_sse_output(&op->base.io, 1, NULL, 0, true);
                api_sse_event(&op->base.io,
                              json_pack("{s:s, s:I, s:b}", "type", "execution_complete",
                                        "executionCount", count, "timedOut", timed_out),
                              0);
                if (op->base.io.req)
                        http_response_end(op->base.io.req);
        } else if (op->base.io.req) {
                json_t *r = json_pack("{s:O, s:o, s:I}", "results", op->results, "logs",
                                      logs_json(op), "executionCount", count);

                if (r && op->error)
                        json_object_set(r, "error", op->error);
                if (r && timed_out)
                        json_object_set_new(r, "timedOut", json_true());
                if (r && op->truncated)
                        json_object_set_new(r, "truncated", json_true());
                if (r)
                        http_respond_json(op->base.io.req, 200, r);
                else
                        http_respond_code(op->base.io.req, CELLA_E_INTERNAL_ERROR, "out of memory");
                json_decref(r);
        }
        api_op_finish(&op->base);
}

static void on_error_frame(struct code_op *op, const struct frame *f)
{
        struct cella_error e = {0};

        api_agent_error(f, &e);
        if (op->base.sse_begun) {
                /* mid-run (the interpreter died): an error event in the run's vocabulary */
                api_sse_output(&op->base.io, 0, NULL, 0, true);
                api_sse_output(&op->base.io, 1, NULL, 0, true);
                api_sse_event(&op->base.io,
                              json_pack("{s:s, s:s, s:s, s:[], s:s}", "type", "error", "name",
                                        cella_code_name(e.code), "message", e.msg, "traceback",
                                        "code", cella_code_name(e.code)),
                              0);
                if (op->base.io.req)
                        http_response_end(op->base.io.req);
        } else if (op->base.io.req) {
                http_respond_error(op->base.io.req, &e, NULL);
        }
        api_op_finish(&op->base);
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct code_op *op = userdata;

        if (op->base.sb)
                sandbox_touch(op->base.sb);
        switch (f->type) {
        case FRAME_STDOUT:
        case FRAME_STDERR: {
                int which = f->type == FRAME_STDERR;

                if (op->sse && !op->base.finished) {
                        begin_sse(op);
                        api_sse_output(&op->base.io, which, f->payload, f->len, false);
                        break;
                }
                if (!op->base.finished && room_for(op, f->len))
                        buf_append(&op->out[which], f->payload, f->len);
                agent_stream_ack(s, f->len);
                break;
        }
        case FRAME_DATA:
                on_data(op, s, f);
                break;
        case FRAME_RESULT:
                if (!op->base.finished)
                        on_result(op, f);
                break;
        case FRAME_ERROR:
                if (!op->base.finished)
                        on_error_frame(op, f);
                break;
        default:
                break;
        }
}

static const struct agent_stream_ops code_ops = {on_frame, NULL, api_op_on_close};

static void run_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct code_op *op = ud;
        struct cella_error err = {0};
        json_t *payload = NULL;

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_code_run(body, len, &payload, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (!api_op_find_sandbox(&op->base, req))
                goto out;
        json_object_set_new(payload, "baseEnv", api_op_base_env(&op->base));
        op->sse = api_wants_sse(req);
        op->base.io.data_key = "text"; /* stdout/stderr events are {type, text} */
        op->results = json_array();
        if (!op->results) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        api_op_open(&op->base, req, FRAME_CODE, payload, &code_ops);
out:
        json_decref(payload);
        api_op_unref(&op->base); /* the body read's */
}

static void op_free(struct api_op *base)
{
        struct code_op *op = (struct code_op *)base;

        buf_free(&op->line);
        for (int i = 0; i < 2; i++)
                buf_free(&op->out[i]);
        json_decref(op->results);
        json_decref(op->error);
}

void api_code(struct api *a, struct http_request *req, const struct api_args *p)
{
        api_op_read_body(api_op_new(a, p->name, sizeof(struct code_op), op_free), req, run_body);
}
