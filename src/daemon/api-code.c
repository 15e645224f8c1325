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
 * struct code_op is a struct api_req (api-req.h) with the event line being reassembled and
 * the buffered results. */
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/name.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"

/* ---- contexts: one agent call each ---- */

enum { K_CREATE, K_LIST, K_DELETE };

struct ctx_call {
        struct api_req base; /* first: an agent call */
        char cid[CELLA_ID_MAX + 1];
        int kind;
};

static void ctx_answer(struct api_req *r, json_t *result)
{
        struct ctx_call *c = (struct ctx_call *)r;

        if (c->kind == K_DELETE) {
                _cleanup_json_ json_t *j = json_pack("{s:b, s:s}", "success", 1, "id", c->cid);

                api_req_respond_json(r, 200, j);
        } else {
                api_req_respond_json(r, c->kind == K_CREATE ? 201 : 200, result);
        }
}

static const struct api_req_ops ctx_ops = {.result = ctx_answer};

/* Open the CODE stream of x for c. */
static void ctx_call(struct ctx_call *c, const struct wire_code *x)
{
        _cleanup_json_ json_t *payload = wire_code_encode(x);

        api_req_open(&c->base, FRAME_CODE, payload);
}

static void create_body(struct api_req *r, const char *body, size_t len)
{
        struct cella_error err = {0};
        struct api_context_create in;
        _cleanup_json_ json_t *base_env = NULL;

        if (api_decode_context_create(body, len, &in, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (api_req_find_sandbox(r)) {
                base_env = api_req_base_env(r);
                ctx_call((struct ctx_call *)r,
                         &(struct wire_code){.op = WIRE_CODE_CREATE,
                                             .language = (enum wire_code_lang)in.language,
                                             .cwd = in.cwd,
                                             .env = in.env,
                                             .base_env = base_env});
        }
        api_context_create_done(&in);
}

static struct ctx_call *ctx_new(struct api *a, struct http_request *req, const char *name, int kind)
{
        struct ctx_call *c =
                (struct ctx_call *)api_req_new(a, req, name, sizeof(struct ctx_call), &ctx_ops);

        if (c)
                c->kind = kind;
        return c;
}

void api_contexts_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct ctx_call *c = ctx_new(a, req, p->name, K_LIST);

        if (!c)
                return;
        ctx_call(c, &(struct wire_code){.op = WIRE_CODE_LIST});
        api_req_unref(&c->base);
}

void api_contexts_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct ctx_call *c = ctx_new(a, req, p->name, K_CREATE);

        if (c)
                api_req_read_body(&c->base, CELLA_HTTP_MAX_JSON_BODY, create_body);
}

void api_context_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct ctx_call *c = ctx_new(a, req, p->name, K_DELETE);

        if (!c)
                return;
        snprintf(c->cid, sizeof(c->cid), "%s", p->param);
        ctx_call(c, &(struct wire_code){.op = WIRE_CODE_DELETE, .id = c->cid});
        api_req_unref(&c->base);
}

/* ---- runs ---- */

struct code_op {
        struct api_req base; /* first; base.out: stdout, stderr (buffered mode), with the
                                events under one CELLA_EXEC_MAX_BUFFERED total */
        struct buf line;     /* incomplete event line (DATA) */
        size_t unacked;      /* DATA bytes not yet acknowledged (SSE) */
        json_t *results;     /* buffered mode */
        json_t *error;
};

/* One event line from the agent (a result or an error), already validated there; checked
 * again here since it crossed from the sandbox. */
static void on_event_line(struct code_op *op, const char *line, size_t len, size_t ack)
{
        struct api_req *r = &op->base;
        json_t *ev = json_loadb(line, len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));

        if (!json_is_object(ev) || !type ||
            (strcmp(type, "result") != 0 && strcmp(type, "error") != 0)) {
                json_decref(ev);
                if (ack && r->stream)
                        agent_stream_ack(r->stream, ack);
                return;
        }
        if (r->mode == API_REQ_SSE) {
                api_req_event(r, ev, ack);
                return;
        }
        if (ack && r->stream)
                agent_stream_ack(r->stream, ack);
        if (!api_outbuf_room(&r->out, len)) {
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
        if (op->base.mode != API_REQ_SSE)
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
                on_event_line(op, op->line.data + off, n, ack);
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

                if (op->base.out.out[i].len) {
                        json_array_append_new(arr, api_output_json(&op->base.out.out[i], &b64));
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
        _cleanup_json_ json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        _cleanup_json_ json_t *r = NULL;
        json_int_t count = 0;
        int timed_out = 0;

        if (j)
                json_unpack(j, "{s?I, s?b}", "executionCount", &count, "timedOut", &timed_out);
        if (op->base.mode == API_REQ_SSE) {
                api_req_end_sse(&op->base,
                                json_pack("{s:s, s:I, s:b}", "type", "execution_complete",
                                          "executionCount", count, "timedOut", timed_out));
                return;
        }
        r = json_pack("{s:O, s:o, s:I}", "results", op->results, "logs", logs_json(op),
                      "executionCount", count);
        if (r && op->error)
                json_object_set(r, "error", op->error);
        if (r && timed_out)
                json_object_set_new(r, "timedOut", json_true());
        if (r && op->base.out.dropped)
                json_object_set_new(r, "truncated", json_true());
        api_req_respond_json(&op->base, 200, r);
}

/* An ERROR: mid-run (the interpreter died) an error event in the run's vocabulary, before
 * the run an ordinary error response. */
static void on_error_frame(struct code_op *op, const struct frame *f)
{
        struct cella_error e = {0};

        api_agent_error(f, &e);
        api_req_fail(&op->base, &e,
                     json_pack("{s:s, s:s, s:s, s:[], s:s}", "type", "error", "name",
                               cella_code_name(e.code), "message", e.msg, "traceback", "code",
                               cella_code_name(e.code)));
}

static void on_frame(struct api_req *r, const struct frame *f)
{
        struct code_op *op = (struct code_op *)r;

        switch (f->type) {
        case FRAME_STDOUT:
        case FRAME_STDERR:
                api_req_output(r, f->type == FRAME_STDERR, f->payload, f->len);
                break;
        case FRAME_DATA:
                on_data(op, r->stream, f);
                break;
        case FRAME_ERROR:
                on_error_frame(op, f); /* nothing once finished */
                break;
        case FRAME_RESULT:
                if (!r->finished)
                        on_result(op, f);
                api_req_finish(r);
                break;
        default:
                break;
        }
}

static void run_body(struct api_req *r, const char *body, size_t len)
{
        struct code_op *op = (struct code_op *)r;
        struct cella_error err = {0};
        struct api_code_run in;
        _cleanup_json_ json_t *base_env = NULL;
        _cleanup_json_ json_t *payload = NULL;

        if (api_decode_code_run(body, len, &in, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (!api_req_find_sandbox(r)) {
                api_code_run_done(&in);
                return;
        }
        base_env = api_req_base_env(r);
        payload = wire_code_encode(&(struct wire_code){.op = WIRE_CODE_RUN,
                                                       .id = in.context_id,
                                                       .language = (enum wire_code_lang)in.language,
                                                       .language_given = in.language_given,
                                                       .code = in.code,
                                                       .timeout_ms = in.timeout_ms,
                                                       .base_env = base_env});
        api_code_run_done(&in);
        r->mode = api_wants_sse(r->http) ? API_REQ_SSE : API_REQ_JSON;
        r->data_key = "text"; /* stdout/stderr events are {type, text} */
        op->results = json_array();
        if (!op->results) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                api_req_fail(r, &err, NULL);
                return;
        }
        api_req_open(r, FRAME_CODE, payload);
}

static void op_free(struct api_req *r)
{
        struct code_op *op = (struct code_op *)r;

        buf_free(&op->line);
        json_decref(op->results);
        json_decref(op->error);
}

static const struct api_req_ops code_ops = {.frame = on_frame, .free = op_free};

void api_code(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct api_req *r = api_req_new(a, req, p->name, sizeof(struct code_op), &code_ops);

        if (!r)
                return;
        r->out.total = CELLA_EXEC_MAX_BUFFERED;
        api_req_read_body(r, CELLA_HTTP_MAX_JSON_BODY, run_body);
}
