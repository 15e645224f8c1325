/* POST /v1/sandboxes/{id}/exec: one EXEC agent stream per request, answered as one
 * ExecResult (buffered) or as SSE events while output arrives.
 *
 * struct exec_op is a struct api_req (api-req.h) with the decoded request, the start time
 * and the command's pid. */
#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/timeutil.h"
#include "common/utf8.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"
#include "daemon/metrics.h"

struct exec_op {
        struct api_req base; /* first; base.out holds stdout, stderr (buffered mode) */
        struct api_exec in;
        uint64_t start_us;
        int pid;
        /* the raw form: stdout is the body, stderr is kept for a trailer */
        bool raw_begun;
        bool raw_ended;
        struct buf raw_err;
        bool raw_err_cut;
};

static int64_t duration_ms(const struct exec_op *op)
{
        return (int64_t)((time_mono_us() - op->start_us) / 1000);
}

/* ---- frames ---- */

/* The error shape for e with ctx (consumed) as its context, the output set in ctx: the 200
 * answer and the context of a COMMAND_TIMEOUT or SESSION_TERMINATED error carry the same
 * fields (`stdout`/`stderr`, each with its encoding when it is base64, and `truncated`
 * when some was dropped). */
static json_t *error_with_output(struct exec_op *op, const struct cella_error *e, json_t *ctx)
{
        json_t *j;

        api_outbuf_set(&op->base.out, ctx);
        j = http_error_json(e, ctx);
        json_decref(ctx);
        http_request_error_view(op->base.http, j);
        return j;
}

/* Answer with doc (consumed) whose markers are the output held so far. */
static void respond_output(struct exec_op *op, int status, json_t *doc)
{
        api_req_respond_output(&op->base, status, doc);
        json_decref(doc);
}

static void on_exit_frame(struct exec_op *op, const struct frame *f)
{
        struct api_exit x;
        json_t *r;
        char ts[32];

        api_exit_parse(f, &x);
        metrics_exec_done(http_request_start_us(op->base.http));
        /* a session's commandTimeoutMs is the agent's to apply: it says which it was */
        if (x.timeout_ms > 0)
                op->in.timeout_ms = x.timeout_ms;
        api_timestamp(ts);
        /* a JSON answer's timeout is counted where its error shape is built */
        if (x.timed_out && op->base.mode == API_REQ_SSE)
                metrics_error(CELLA_E_COMMAND_TIMEOUT);
        if (op->base.mode == API_REQ_SSE) {
                if (x.timed_out)
                        api_req_end_sse(&op->base,
                                        json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                                  "command timed out; its process tree was killed",
                                                  "code", "COMMAND_TIMEOUT"));
                else
                        api_req_end_sse(&op->base,
                                        json_pack("{s:s, s:I, s:I}", "type", "complete", "exitCode",
                                                  x.code, "duration", (json_int_t)duration_ms(op)));
                return;
        }
        if (x.timed_out) {
                struct cella_error e = {0};
                json_t *ctx = json_pack("{s:I}", "timeout", (json_int_t)op->in.timeout_ms);

                cella_error_set(&e, CELLA_E_COMMAND_TIMEOUT,
                                "command timed out after %lld ms; its process tree was killed",
                                (long long)op->in.timeout_ms);
                respond_output(op, cella_code_status(e.code), error_with_output(op, &e, ctx));
                return;
        }
        r = json_pack("{s:b, s:I, s:s, s:I, s:s}", "success", x.code == 0, "exitCode", x.code,
                      "command", op->in.command, "duration", (json_int_t)duration_ms(op),
                      "timestamp", ts);
        if (r) {
                if (op->in.session_id)
                        json_object_set_new(r, "sessionId", json_string(op->in.session_id));
                if (op->pid > 0)
                        json_object_set_new(r, "pid", json_integer(op->pid));
                api_outbuf_set(&op->base.out, r);
        }
        respond_output(op, 200, r);
}

/* An ERROR; a SESSION_TERMINATED carries the shell's exit code, answered with the output
 * the command wrote before the shell exited. */
static void on_error_frame(struct exec_op *op, const struct frame *f)
{
        struct cella_error e = {0};
        json_int_t code;
        json_t *ctx;

        if (!api_error_parse(f, &e, &code)) {
                api_req_fail(&op->base, &e, NULL);
        } else if (op->base.mode == API_REQ_SSE) {
                api_req_fail(&op->base, &e,
                             json_pack("{s:s, s:s, s:s, s:I}", "type", "error", "error", e.msg,
                                       "code", cella_code_name(e.code), "exitCode", code));
        } else {
                ctx = json_pack("{s:I}", "exitCode", code);
                if (ctx && op->in.session_id)
                        json_object_set_new(ctx, "sessionId", json_string(op->in.session_id));
                respond_output(op, cella_code_status(e.code), error_with_output(op, &e, ctx));
        }
}

/* ---- the raw form: stdout as the body, stderr and the end in trailers ---- */

#define RAW_TRAILERS                                                                       \
        "Trailer: Cella-Exit-Code, Cella-Duration, Cella-Stderr, Cella-Stderr-Truncated, " \
        "Cella-Error-Code, Cella-Error-Message\r\n"

#define RAW_STDERR_LINE 3000 /* base64 characters per Cella-Stderr line (a multiple of 4) */

static void raw_begin(struct exec_op *op)
{
        char extra[512];

        if (op->raw_begun || op->base.finished || !op->base.http)
                return;
        op->raw_begun = true;
        snprintf(extra, sizeof(extra),
                 "Cache-Control: no-cache\r\nX-Accel-Buffering: no\r\n" RAW_TRAILERS
                 "Cella-Pid: %d\r\n",
                 op->pid);
        http_response_begin(op->base.http, 200, "application/octet-stream", -1, extra);
}

/* A header value from text: control characters (CR, LF among them) become spaces. */
static void header_text(struct buf *b, const char *name, const char *text)
{
        size_t at;

        if (buf_printf(b, "%s: ", name) < 0)
                return;
        at = b->len;
        if (buf_append_str(b, text) < 0)
                return;
        for (size_t i = at; i < b->len; i++)
                if ((unsigned char)b->data[i] < 0x20 || b->data[i] == 0x7f)
                        b->data[i] = ' ';
        buf_append_str(b, "\r\n");
}

/* End the body with the trailers: the exit code (code >= 0), the duration, stderr (base64,
 * its first CELLA_EXEC_RAW_STDERR bytes) and the error, if any (e). Finishes. */
static void raw_end(struct exec_op *op, json_int_t code, const struct cella_error *e)
{
        _cleanup_buf_ struct buf t = BUF_INIT;
        _cleanup_buf_ struct buf b64 = BUF_INIT;
        struct api_req *r = &op->base;

        if (op->raw_ended || r->finished || !r->http) {
                api_req_finish(r);
                return;
        }
        op->raw_ended = true;
        raw_begin(op);
        if (code >= 0)
                buf_printf(&t, "Cella-Exit-Code: %lld\r\n", (long long)code);
        buf_printf(&t, "Cella-Duration: %lld\r\n", (long long)duration_ms(op));
        /* base64 in lines of RAW_STDERR_LINE characters: a client's trailer line is short
         * (curl takes 4 KiB); the lines join in order */
        if (op->raw_err.len && base64_encode(&b64, op->raw_err.data, op->raw_err.len) == 0)
                for (size_t at = 0; at < b64.len; at += RAW_STDERR_LINE)
                        buf_printf(&t, "Cella-Stderr: %.*s\r\n",
                                   (int)MIN((size_t)RAW_STDERR_LINE, b64.len - at), b64.data + at);
        if (op->raw_err_cut)
                buf_append_str(&t, "Cella-Stderr-Truncated: true\r\n");
        if (e) {
                buf_printf(&t, "Cella-Error-Code: %s\r\n", cella_code_name(e->code));
                header_text(&t, "Cella-Error-Message", e->msg);
        }
        http_response_end_trailers(r->http, t.data ? t.data : "");
        api_req_finish(r);
}

static void raw_stderr(struct exec_op *op, const uint8_t *data, size_t len)
{
        size_t n = MIN(len, (size_t)CELLA_EXEC_RAW_STDERR -
                                    MIN(op->raw_err.len, (size_t)CELLA_EXEC_RAW_STDERR));

        if (n && buf_append(&op->raw_err, data, n) < 0)
                n = 0;
        if (n < len)
                op->raw_err_cut = true;
}

/* A frame of a raw exec. */
static void raw_frame(struct exec_op *op, const struct frame *f)
{
        struct api_req *r = &op->base;

        switch (f->type) {
        case FRAME_STDOUT:
                metrics_bytes(METRICS_BYTES_STDOUT, f->len);
                raw_begin(op);
                if (r->finished || op->raw_ended) {
                        if (r->stream)
                                agent_stream_ack(r->stream, f->len);
                        return;
                }
                api_req_write(r, f->payload, f->len); /* credit back once the client took it */
                return;
        case FRAME_STDERR:
                metrics_bytes(METRICS_BYTES_STDERR, f->len);
                raw_stderr(op, f->payload, f->len);
                if (r->stream)
                        agent_stream_ack(r->stream, f->len);
                return;
        case FRAME_EXIT: {
                struct api_exit x;

                if (r->finished)
                        return;
                api_exit_parse(f, &x);
                metrics_exec_done(http_request_start_us(r->http));
                if (x.timed_out) {
                        struct cella_error e = {0};

                        metrics_error(CELLA_E_COMMAND_TIMEOUT);
                        cella_error_set(
                                &e, CELLA_E_COMMAND_TIMEOUT,
                                "command timed out after %lld ms; its process tree was "
                                "killed",
                                (long long)(x.timeout_ms > 0 ? x.timeout_ms : op->in.timeout_ms));
                        raw_end(op, -1, &e);
                } else {
                        raw_end(op, x.code, NULL);
                }
                return;
        }
        case FRAME_ERROR: {
                struct cella_error e = {0};
                json_int_t code = -1;

                if (r->finished)
                        return;
                if (!op->raw_begun) {
                        api_req_fail_frame(r, f); /* nothing sent yet: the JSON error */
                        return;
                }
                api_error_parse(f, &e, &code);
                metrics_error(e.code);
                raw_end(op, code, &e);
                return;
        }
        default:
                return;
        }
}

/* The agent stream closed before the end: a raw body already begun ends with the error. */
static void on_closed(struct api_req *r, int err)
{
        struct exec_op *op = (struct exec_op *)r;
        struct cella_error e = {0};

        if (r->finished)
                return;
        if (r->mode != API_REQ_RAW || !op->raw_begun) {
                api_req_lost(r, err);
                return;
        }
        cella_error_set(&e, CELLA_E_SANDBOX_UNAVAILABLE, "the sandbox's agent went away (%s)",
                        strerror(-err));
        metrics_error(e.code);
        raw_end(op, -1, &e);
}

static void on_frame(struct api_req *r, const struct frame *f)
{
        struct exec_op *op = (struct exec_op *)r;

        if (r->mode == API_REQ_RAW && f->type != FRAME_STARTED) {
                raw_frame(op, f);
                return;
        }

        switch (f->type) {
        case FRAME_STARTED: {
                _cleanup_json_ json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
                json_int_t pid = 0;

                if (j)
                        json_unpack(j, "{s?I}", "pid", &pid);
                op->pid = (int)pid;
                if (r->mode == API_REQ_RAW)
                        raw_begin(op);
                if (r->mode == API_REQ_SSE)
                        api_req_event(r,
                                      json_pack("{s:s, s:s, s:I}", "type", "start", "command",
                                                op->in.command, "pid", pid),
                                      0);
                break;
        }
        case FRAME_STDOUT:
        case FRAME_STDERR:
                api_req_output(r, f->type == FRAME_STDERR, f->payload, f->len);
                break;
        case FRAME_EXIT:
                if (!r->finished)
                        on_exit_frame(op, f);
                break;
        case FRAME_ERROR:
                on_error_frame(op, f); /* nothing once finished */
                break;
        default:
                break;
        }
}

static void exec_body(struct api_req *r, const char *body, size_t len)
{
        struct exec_op *op = (struct exec_op *)r;
        struct cella_error err = {0};
        _cleanup_json_ json_t *payload = NULL;
        const char *session;

        api_exec_done(&op->in); /* a second call, once the sandbox runs */
        if (api_decode_exec(body, len, &op->in, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (api_wants_raw(r->http) && !api_wants_sse(r->http) && http_request_is_http10(r->http)) {
                cella_error_set(&err, CELLA_E_VALIDATION_FAILED,
                                "Accept: application/octet-stream needs HTTP/1.1 (the exit code "
                                "is a trailer of a chunked body)");
                api_req_fail(r, &err, NULL);
                return;
        }
        if (!api_req_find_sandbox(r))
                return;
        session = op->in.session_id                ? op->in.session_id
                  : sandbox_default_session(r->sb) ? "default"
                                                   : NULL;
        if (session) {
                /* The session's shell has the sandbox's env; the command's own env and cwd
                 * apply to it alone (the agent runs it in a subshell). */
                json_t *base = sandbox_env(r->sb);
                _cleanup_json_ json_t *empty = base ? NULL : json_object();

                payload = wire_exec_encode(&(struct wire_exec){
                        .command = op->in.command,
                        .cwd = op->in.cwd,
                        .env = op->in.env,
                        .base_env = base ? base : empty,
                        .session = session,
                        .timeout_ms = op->in.timeout_ms,
                });
        } else {
                _cleanup_json_ json_t *env = api_req_base_env(r);

                if (env && op->in.env)
                        json_object_update(env, op->in.env);
                payload = env ? wire_exec_encode(&(struct wire_exec){
                                        .command = op->in.command,
                                        .cwd = op->in.cwd ? op->in.cwd : "/workspace",
                                        .env = env,
                                        .timeout_ms = op->in.timeout_ms,
                                })
                              : NULL;
        }
        r->mode = api_wants_sse(r->http)   ? API_REQ_SSE
                  : api_wants_raw(r->http) ? API_REQ_RAW
                                           : API_REQ_JSON;
        op->start_us = time_mono_us();
        if (api_req_open(r, FRAME_EXEC, payload) == 0 && r->mode == API_REQ_SSE)
                api_req_begin_sse(r);
}

static void op_free(struct api_req *r)
{
        api_exec_done(&((struct exec_op *)r)->in);
        buf_free(&((struct exec_op *)r)->raw_err);
}

static const struct api_req_ops exec_ops = {
        .frame = on_frame, .closed = on_closed, .free = op_free};

void api_exec(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct api_req *r = api_req_new(a, req, p->name, sizeof(struct exec_op), &exec_ops);

        if (!r)
                return;
        r->out.budget = a->cfg.budget;
        r->out.cap = CELLA_EXEC_MAX_BUFFERED;
        api_req_read_body(r, CELLA_HTTP_MAX_JSON_BODY, exec_body);
}
