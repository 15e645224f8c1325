/* POST /v1/sandboxes/{id}/exec: one EXEC agent stream per request, answered as one
 * ExecResult (buffered) or as SSE events while output arrives.
 *
 * struct exec_op begins with a struct api_op (api-op.c): its references (the agent stream,
 * each SSE write in flight: credit goes back to the agent when the client took the bytes,
 * the body read), the request and the agent stream. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/timeutil.h"
#include "common/utf8.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"

struct exec_op {
        struct api_op base; /* first */
        bool sse;
        struct api_exec in;
        uint64_t start_us;
        int pid;
        struct api_outbuf ob; /* stdout, stderr (buffered mode) */
};

static int64_t duration_ms(const struct exec_op *op)
{
        return (int64_t)((time_mono_us() - op->start_us) / 1000);
}

/* ---- frames ---- */

/* The exitCode an agent ERROR carries (SESSION_TERMINATED); false if it has none. */
static bool agent_error_exit_code(const struct frame *f, json_int_t *ret)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        json_t *v = json_object_get(j, "exitCode");
        bool ok = json_is_integer(v);

        if (ok)
                *ret = json_integer_value(v);
        json_decref(j);
        return ok;
}

/* Answer with doc (consumed) whose `stdout`/`stderr` (the context's, for an error) are the
 * output held so far, each with its encoding when it is base64 (not UTF-8) and `truncated`
 * when some was dropped: the 200 answer and the context of a COMMAND_TIMEOUT or
 * SESSION_TERMINATED error carry the same fields. */
static void respond_output(struct exec_op *op, int status, json_t *doc)
{
        if (!doc)
                http_respond_code(op->base.io.req, CELLA_E_INTERNAL_ERROR, "out of memory");
        else
                api_outbuf_respond(op->base.io.req, status, doc, &op->ob);
        json_decref(doc);
}

/* The error shape for e with ctx (consumed) as its context, the output set in ctx. */
static json_t *error_with_output(struct exec_op *op, const struct cella_error *e, json_t *ctx)
{
        json_t *j;

        api_outbuf_set(&op->ob, ctx);
        j = http_error_json(e, ctx);
        json_decref(ctx);
        return j;
}

static void on_exit_frame(struct exec_op *op, const struct frame *f)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        json_int_t code = -1, timeout_ms = -1;
        int timed_out = 0;
        char ts[32];

        if (j)
                json_unpack(j, "{s?I, s?b, s?I}", "exitCode", &code, "timedOut", &timed_out,
                            "timeoutMs", &timeout_ms);
        /* a session's commandTimeoutMs is the agent's to apply: it says which it was */
        if (timeout_ms > 0)
                op->in.timeout_ms = timeout_ms;
        json_decref(j);
        api_timestamp(ts);
        if (op->sse) {
                api_sse_output(&op->base.io, 0, NULL, 0, true);
                api_sse_output(&op->base.io, 1, NULL, 0, true);
                if (timed_out)
                        api_sse_event(&op->base.io,
                                      json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                                "command timed out; its process tree was killed",
                                                "code", "COMMAND_TIMEOUT"),
                                      0);
                else
                        api_sse_event(&op->base.io,
                                      json_pack("{s:s, s:I, s:I}", "type", "complete", "exitCode",
                                                code, "duration", (json_int_t)duration_ms(op)),
                                      0);
                if (op->base.io.req)
                        http_response_end(op->base.io.req);
                api_op_finish(&op->base);
                return;
        }
        {
                json_t *r;

                if (timed_out) {
                        struct cella_error e = {0};
                        json_t *ctx = json_pack("{s:I}", "timeout", (json_int_t)op->in.timeout_ms);

                        cella_error_set(&e, CELLA_E_COMMAND_TIMEOUT,
                                        "command timed out after %lld ms; its process tree was "
                                        "killed",
                                        (long long)op->in.timeout_ms);
                        if (op->base.io.req)
                                respond_output(op, cella_code_status(e.code),
                                               error_with_output(op, &e, ctx));
                        else
                                json_decref(ctx);
                        api_op_finish(&op->base);
                        return;
                }
                r = json_pack("{s:b, s:I, s:s, s:I, s:s}", "success", code == 0, "exitCode", code,
                              "command", op->in.command, "duration", (json_int_t)duration_ms(op),
                              "timestamp", ts);
                if (r) {
                        if (op->in.session_id)
                                json_object_set_new(r, "sessionId", json_string(op->in.session_id));
                        if (op->pid > 0)
                                json_object_set_new(r, "pid", json_integer(op->pid));
                        api_outbuf_set(&op->ob, r);
                }
                if (op->base.io.req)
                        respond_output(op, 200, r);
                else
                        json_decref(r);
                api_op_finish(&op->base);
        }
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct exec_op *op = userdata;

        if (op->base.sb)
                sandbox_touch(op->base.sb);
        switch (f->type) {
        case FRAME_STARTED: {
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
                json_int_t pid = 0;

                if (j)
                        json_unpack(j, "{s?I}", "pid", &pid);
                json_decref(j);
                op->pid = (int)pid;
                if (op->sse)
                        api_sse_event(&op->base.io,
                                      json_pack("{s:s, s:s, s:I}", "type", "start", "command",
                                                op->in.command, "pid", pid),
                                      0);
                break;
        }
        case FRAME_STDOUT:
        case FRAME_STDERR: {
                int which = f->type == FRAME_STDERR;

                if (op->sse && !op->base.finished) {
                        api_sse_output(&op->base.io, which, f->payload, f->len, false);
                        break;
                }
                if (!op->base.finished)
                        api_outbuf_add(&op->ob, which, f->payload, f->len, CELLA_EXEC_MAX_BUFFERED);
                agent_stream_ack(s, f->len);
                break;
        }
        case FRAME_EXIT:
                if (!op->base.finished)
                        on_exit_frame(op, f);
                break;
        case FRAME_ERROR:
                if (op->base.finished)
                        break;
                {
                        struct cella_error e = {0};
                        json_int_t code = -1;
                        json_t *ev;

                        api_agent_error(f, &e);
                        if (!agent_error_exit_code(f, &code)) {
                                api_sse_fail(&op->base.io, op->sse, &e);
                        } else if (op->sse) {
                                /* SESSION_TERMINATED: the shell's exit code with the error,
                                 * after what output is still held. */
                                api_sse_output(&op->base.io, 0, NULL, 0, true);
                                api_sse_output(&op->base.io, 1, NULL, 0, true);
                                ev = json_pack("{s:s, s:s, s:s, s:I}", "type", "error", "error",
                                               e.msg, "code", cella_code_name(e.code), "exitCode",
                                               code);
                                api_sse_event(&op->base.io, ev, 0);
                                if (op->base.io.req)
                                        http_response_end(op->base.io.req);
                        } else if (op->base.io.req) {
                                /* SESSION_TERMINATED: the shell's exit code and the output
                                 * the command wrote before it exited. */
                                json_t *ctx = json_pack("{s:I}", "exitCode", code);

                                if (ctx && op->in.session_id)
                                        json_object_set_new(ctx, "sessionId",
                                                            json_string(op->in.session_id));
                                respond_output(op, cella_code_status(e.code),
                                               error_with_output(op, &e, ctx));
                        }
                }
                api_op_finish(&op->base);
                break;
        default:
                break;
        }
}

static const struct agent_stream_ops exec_ops = {on_frame, NULL, api_op_on_close};

static void exec_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct exec_op *op = ud;
        struct cella_error err = {0};
        json_t *env, *payload;
        const char *session;
        int r;

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_exec(body, len, &op->in, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (!api_op_find_sandbox(&op->base, req))
                goto out;
        session = op->in.session_id                      ? op->in.session_id
                  : sandbox_default_session(op->base.sb) ? "default"
                                                         : NULL;
        if (session) {
                /* The session's shell has the sandbox's env; the command's own env and cwd
                 * apply to it alone (the agent runs it in a subshell). */
                json_t *base = sandbox_env(op->base.sb);
                json_t *empty = base ? NULL : json_object();

                payload = wire_exec_encode(&(struct wire_exec){
                        .command = op->in.command,
                        .cwd = op->in.cwd,
                        .env = op->in.env,
                        .base_env = base ? base : empty,
                        .session = session,
                        .timeout_ms = op->in.timeout_ms,
                });
                json_decref(empty);
        } else {
                env = api_op_base_env(&op->base);
                if (env && op->in.env)
                        json_object_update(env, op->in.env);
                payload = env ? wire_exec_encode(&(struct wire_exec){
                                        .command = op->in.command,
                                        .cwd = op->in.cwd ? op->in.cwd : "/workspace",
                                        .env = env,
                                        .timeout_ms = op->in.timeout_ms,
                                })
                              : NULL;
                json_decref(env);
        }
        if (!payload) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        op->sse = api_wants_sse(req);
        op->start_us = time_mono_us();
        r = api_op_open(&op->base, req, FRAME_EXEC, payload, &exec_ops);
        json_decref(payload);
        if (r == 0 && op->sse) {
                op->base.sse_begun = true;
                http_response_begin_sse(req);
        }
out:
        api_op_unref(&op->base); /* the body read's */
}

static void op_free(struct api_op *base)
{
        struct exec_op *op = (struct exec_op *)base;

        api_exec_done(&op->in);
        api_outbuf_done(&op->ob);
}

void api_exec(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct api_op *op = api_op_new(a, name, sizeof(struct exec_op), op_free);

        if (op)
                ((struct exec_op *)op)->ob.budget = a->cfg.budget;
        api_op_read_body(op, req, exec_body);
}
