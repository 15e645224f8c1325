/* POST /v1/sandboxes/{id}/exec: one EXEC agent stream per request, answered as one
 * ExecResult (buffered) or as SSE events while output arrives.
 *
 * struct exec_op is refcounted: one reference for the agent stream (dropped in on_close),
 * one per SSE write in flight (credit is returned to the agent when the client took the
 * bytes), one while the request body is read. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/timeutil.h"
#include "common/utf8.h"
#include "daemon/api-decode.h"
#include "daemon/api-internal.h"

struct exec_op {
        unsigned refs;
        struct api *api;
        char name[CELLA_NAME_MAX + 1];
        struct api_sse io;  /* io.req referenced until the response ended or the client left */
        struct sandbox *sb; /* referenced once found */
        bool sse;
        bool finished; /* response given */
        struct api_exec in;
        uint64_t start_us;
        int pid;
        struct buf out[2]; /* stdout, stderr (buffered mode) */
        bool truncated[2];
};

static void op_unref(struct exec_op *op);

static void op_hold(void *owner)
{
        ((struct exec_op *)owner)->refs++;
}

static void op_release(void *owner)
{
        op_unref(owner);
}

static void op_unref(struct exec_op *op)
{
        if (--op->refs > 0)
                return;
        if (op->io.req) {
                http_request_on_abort(op->io.req, NULL, NULL);
                http_request_unref(op->io.req);
        }
        sandbox_unref(op->sb);
        api_exec_done(&op->in);
        for (int i = 0; i < 2; i++)
                buf_free(&op->out[i]);
        api_sse_done(&op->io);
        free(op);
}

static int64_t duration_ms(const struct exec_op *op)
{
        return (int64_t)((time_mono_us() - op->start_us) / 1000);
}

static void finish(struct exec_op *op)
{
        op->finished = true;
        if (op->io.req) {
                http_request_on_abort(op->io.req, NULL, NULL);
                http_request_unref(op->io.req);
                op->io.req = NULL;
        }
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
                api_sse_output(&op->io, 0, NULL, 0, true);
                api_sse_output(&op->io, 1, NULL, 0, true);
                if (timed_out)
                        api_sse_event(&op->io,
                                      json_pack("{s:s, s:s, s:s}", "type", "error", "error",
                                                "command timed out; its process tree was killed",
                                                "code", "COMMAND_TIMEOUT"),
                                      0);
                else
                        api_sse_event(&op->io,
                                      json_pack("{s:s, s:I, s:I}", "type", "complete", "exitCode",
                                                code, "duration", (json_int_t)duration_ms(op)),
                                      0);
                if (op->io.req)
                        http_response_end(op->io.req);
                finish(op);
                return;
        }
        {
                bool b64o, b64e;
                json_t *so = api_output_json(&op->out[0], &b64o);
                json_t *se = api_output_json(&op->out[1], &b64e);
                json_t *r;

                if (timed_out) {
                        struct cella_error e = {0};
                        json_t *ctx = json_pack("{s:I, s:o, s:o}", "timeout",
                                                (json_int_t)op->in.timeout_ms, "stdout",
                                                so ? so : json_string(""), "stderr",
                                                se ? se : json_string(""));

                        cella_error_set(&e, CELLA_E_COMMAND_TIMEOUT,
                                        "command timed out after %lld ms; its process tree was "
                                        "killed",
                                        (long long)op->in.timeout_ms);
                        if (op->io.req)
                                http_respond_error(op->io.req, &e, ctx);
                        json_decref(ctx);
                        finish(op);
                        return;
                }
                r = json_pack("{s:b, s:I, s:o, s:o, s:s, s:I, s:s}", "success", code == 0,
                              "exitCode", code, "stdout", so ? so : json_string(""), "stderr",
                              se ? se : json_string(""), "command", op->in.command, "duration",
                              (json_int_t)duration_ms(op), "timestamp", ts);
                if (r) {
                        if (b64o)
                                json_object_set_new(r, "stdoutEncoding", json_string("base64"));
                        if (b64e)
                                json_object_set_new(r, "stderrEncoding", json_string("base64"));
                        if (op->truncated[0] || op->truncated[1])
                                json_object_set_new(r, "truncated", json_true());
                        if (op->in.session_id)
                                json_object_set_new(r, "sessionId", json_string(op->in.session_id));
                        if (op->pid > 0)
                                json_object_set_new(r, "pid", json_integer(op->pid));
                }
                if (op->io.req) {
                        if (r)
                                http_respond_json(op->io.req, 200, r);
                        else
                                http_respond_code(op->io.req, CELLA_E_INTERNAL_ERROR,
                                                  "out of memory");
                }
                json_decref(r);
                finish(op);
        }
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct exec_op *op = userdata;

        if (op->sb)
                sandbox_touch(op->sb);
        switch (f->type) {
        case FRAME_STARTED: {
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
                json_int_t pid = 0;

                if (j)
                        json_unpack(j, "{s?I}", "pid", &pid);
                json_decref(j);
                op->pid = (int)pid;
                if (op->sse)
                        api_sse_event(&op->io,
                                      json_pack("{s:s, s:s, s:I}", "type", "start", "command",
                                                op->in.command, "pid", pid),
                                      0);
                break;
        }
        case FRAME_STDOUT:
        case FRAME_STDERR: {
                int which = f->type == FRAME_STDERR;

                if (op->sse && !op->finished) {
                        api_sse_output(&op->io, which, f->payload, f->len, false);
                        break;
                }
                if (!op->finished) {
                        size_t room = CELLA_EXEC_MAX_BUFFERED -
                                      MIN(op->out[which].len, CELLA_EXEC_MAX_BUFFERED);
                        size_t n = MIN(room, (size_t)f->len);

                        if (n < f->len)
                                op->truncated[which] = true;
                        if (n && buf_append(&op->out[which], f->payload, n) < 0)
                                op->truncated[which] = true;
                }
                agent_stream_ack(s, f->len);
                break;
        }
        case FRAME_EXIT:
                if (!op->finished)
                        on_exit_frame(op, f);
                break;
        case FRAME_ERROR:
                if (op->finished)
                        break;
                {
                        struct cella_error e = {0};
                        json_int_t code = -1;
                        json_t *ev;

                        api_agent_error(f, &e);
                        if (!agent_error_exit_code(f, &code)) {
                                api_sse_fail(&op->io, op->sse, &e);
                        } else if (op->sse) {
                                /* SESSION_TERMINATED: the shell's exit code with the error,
                                 * after what output is still held. */
                                api_sse_output(&op->io, 0, NULL, 0, true);
                                api_sse_output(&op->io, 1, NULL, 0, true);
                                ev = json_pack("{s:s, s:s, s:s, s:I}", "type", "error", "error",
                                               e.msg, "code", cella_code_name(e.code), "exitCode",
                                               code);
                                api_sse_event(&op->io, ev, 0);
                                if (op->io.req)
                                        http_response_end(op->io.req);
                        } else if (op->io.req) {
                                /* SESSION_TERMINATED: the shell's exit code and the output
                                 * the command wrote before it exited. */
                                bool b64o, b64e;
                                json_t *so = api_output_json(&op->out[0], &b64o);
                                json_t *se = api_output_json(&op->out[1], &b64e);
                                json_t *ctx = json_pack("{s:I, s:o, s:o}", "exitCode", code,
                                                        "stdout", so ? so : json_string(""),
                                                        "stderr", se ? se : json_string(""));

                                if (ctx && op->in.session_id)
                                        json_object_set_new(ctx, "sessionId",
                                                            json_string(op->in.session_id));
                                http_respond_error(op->io.req, &e, ctx);
                                json_decref(ctx);
                        }
                }
                finish(op);
                break;
        default:
                break;
        }
}

static void on_close(struct agent_stream *s, int err, void *userdata)
{
        struct exec_op *op = userdata;

        (void)s;
        op->io.stream = NULL;
        if (!op->finished)
                api_sse_agent_lost(&op->io, op->sse, err);
        finish(op);
        op_unref(op);
}

static const struct agent_stream_ops exec_ops = {on_frame, NULL, on_close};

/* The client went away: cancel the command (its process tree is killed). */
static void on_abort(struct http_request *req, void *ud)
{
        struct exec_op *op = ud;

        (void)req;
        finish(op);
        if (op->io.stream)
                agent_stream_cancel(op->io.stream);
}

static void exec_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct exec_op *op = ud;
        struct cella_error err = {0};
        json_t *env, *payload;
        struct agent_conn *conn;
        const char *session;

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_exec(body, len, &op->in, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        op->sb = api_sandbox_for(op->api, req, op->name);
        if (!op->sb)
                goto out;
        sandbox_ref(op->sb);
        conn = sandbox_agent(op->sb);
        session = op->in.session_id                 ? op->in.session_id
                  : sandbox_default_session(op->sb) ? "default"
                                                    : NULL;
        if (session) {
                /* The session's shell has the sandbox's env; the command's own env and cwd
                 * apply to it alone (the agent runs it in a subshell). */
                json_t *base = sandbox_env(op->sb);

                payload = json_pack("{s:s, s:s, s:O, s:I}", "command", op->in.command, "session",
                                    session, "baseEnv", base ? base : json_object(), "timeoutMs",
                                    (json_int_t)op->in.timeout_ms);
                if (payload && op->in.env)
                        json_object_set(payload, "env", op->in.env);
                if (payload && op->in.cwd)
                        json_object_set_new(payload, "cwd", json_string(op->in.cwd));
        } else {
                env = sandbox_env(op->sb) ? json_deep_copy(sandbox_env(op->sb)) : json_object();
                if (env && op->in.env)
                        json_object_update(env, op->in.env);
                payload = json_pack("{s:s, s:s, s:o, s:I}", "command", op->in.command, "cwd",
                                    op->in.cwd ? op->in.cwd : "/workspace", "env",
                                    env ? env : json_object(), "timeoutMs",
                                    (json_int_t)op->in.timeout_ms);
        }
        if (!payload) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        op->sse = api_wants_sse(req);
        op->start_us = time_mono_us();
        op->refs++; /* the stream's */
        if (agent_conn_open(conn, FRAME_EXEC, payload, &exec_ops, op, &op->io.stream, &err) < 0) {
                op->refs--;
                json_decref(payload);
                http_respond_error(req, &err, NULL);
                goto out;
        }
        json_decref(payload);
        op->io.req = req;
        http_request_ref(req);
        http_request_on_abort(req, on_abort, op);
        if (op->sse)
                http_response_begin_sse(req);
out:
        op_unref(op); /* the body read's */
}

static void body_abort(struct http_request *req, void *ud)
{
        (void)req;
        op_unref(ud);
}

void api_exec(struct api *a, struct http_request *req, const char *name)
{
        struct exec_op *op = calloc(1, sizeof(*op));

        if (!op) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        op->refs = 1;
        op->api = a;
        op->io.hold = op_hold;
        op->io.release = op_release;
        op->io.owner = op;
        snprintf(op->name, sizeof(op->name), "%s", name);
        http_request_on_abort(req, body_abort, op);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, exec_body, op) < 0) {
                http_request_on_abort(req, NULL, NULL);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                op_unref(op);
        }
}
