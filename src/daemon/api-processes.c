/* The background-process routes under /v1/sandboxes/{id}/processes (docs/api.md). cellad
 * keeps no process table (decision 0012): each call is one PROC stream to the agent and the
 * answer is the agent's.
 *
 * struct proc_call begins with a struct api_op (api-op.c): its references (the agent
 * stream, each SSE write in flight: agent credit is returned when the client took the
 * bytes, the body read), the request and the agent stream. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"

enum pkind {
        K_START,
        K_LIST,
        K_GET,
        K_LOGS,
        K_STREAM,
        K_KILL,
        K_KILLALL,
        K_WAIT_LOG,
        K_WAIT_PORT,
        K_WAIT_EXIT
};

struct proc_call {
        struct api_op base;         /* first */
        char pid[CELLA_ID_MAX + 1]; /* the process id or pid from the path ("" for none) */
        enum pkind kind;
        struct api_outbuf ob; /* logs: stdout, stderr */
};

static void respond_logs(struct proc_call *pc, json_t *info)
{
        const char *id = json_string_value(json_object_get(info, "id"));
        json_t *r = json_pack("{s:s}", "processId", id ? id : pc->pid);

        if (r) {
                /* the logs are counted in the memory budget and written piece by piece,
                 * like a buffered exec's output */
                api_outbuf_set(&pc->ob, r);
                if (json_is_true(json_object_get(info, "logTruncated")))
                        json_object_set_new(r, "truncated", json_true());
                api_outbuf_respond(pc->base.io.req, 200, r, &pc->ob);
        } else {
                http_respond_code(pc->base.io.req, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        json_decref(r);
}

static void begin_sse(struct proc_call *pc)
{
        if (!pc->base.sse_begun && pc->base.io.req) {
                pc->base.sse_begun = true;
                http_response_begin_sse(pc->base.io.req);
        }
}

static void on_result(struct proc_call *pc, const struct frame *f)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);

        if (!j) {
                http_respond_code(pc->base.io.req, CELLA_E_INTERNAL_ERROR,
                                  "bad answer from the agent");
                return;
        }
        if (pc->kind == K_LOGS) {
                respond_logs(pc, j);
        } else if (pc->kind == K_STREAM) {
                json_t *ev;

                begin_sse(pc);
                api_sse_output(&pc->base.io, 0, NULL, 0, true);
                api_sse_output(&pc->base.io, 1, NULL, 0, true);
                ev = json_pack("{s:s, s:O?, s:O?, s:O?}", "type", "exit", "exitCode",
                               json_object_get(j, "exitCode"), "status",
                               json_object_get(j, "status"), "processId", json_object_get(j, "id"));
                if (ev && json_object_get(j, "signal"))
                        json_object_set(ev, "signal", json_object_get(j, "signal"));
                api_sse_event(&pc->base.io, ev, 0);
                http_response_end(pc->base.io.req);
        } else {
                http_respond_json(pc->base.io.req, 200, j);
        }
        json_decref(j);
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct proc_call *pc = userdata;

        if (pc->base.sb)
                sandbox_touch(pc->base.sb);
        switch (f->type) {
        case FRAME_STARTED:
                if (pc->kind == K_STREAM && !pc->base.finished)
                        begin_sse(pc);
                break;
        case FRAME_STDOUT:
        case FRAME_STDERR: {
                int which = f->type == FRAME_STDERR;

                if (pc->kind == K_STREAM && !pc->base.finished) {
                        begin_sse(pc);
                        api_sse_output(&pc->base.io, which, f->payload, f->len, false);
                        break;
                }
                if (pc->kind == K_LOGS && !pc->base.finished)
                        api_outbuf_add(&pc->ob, which, f->payload, f->len, CELLA_EXEC_MAX_BUFFERED);
                agent_stream_ack(s, f->len);
                break;
        }
        case FRAME_RESULT:
                if (!pc->base.finished && pc->base.io.req)
                        on_result(pc, f);
                api_op_finish(&pc->base);
                break;
        case FRAME_ERROR:
                if (pc->base.finished)
                        break;
                {
                        struct cella_error e = {0};

                        api_agent_error(f, &e);
                        api_sse_fail(&pc->base.io, pc->base.sse_begun, &e);
                }
                api_op_finish(&pc->base);
                break;
        default:
                break;
        }
}

static const struct agent_stream_ops proc_ops = {on_frame, NULL, api_op_on_close};

/* The PROC body for this call, from the request body (validated, nothing touched yet). */
static json_t *payload_for(struct proc_call *pc, struct http_request *req, const char *body,
                           size_t len, struct cella_error *err)
{
        static const char *const plain[] = {
                [K_LIST] = "list", [K_GET] = "get", [K_LOGS] = "logs", [K_STREAM] = "stream"};
        const char *qsig = http_request_query(req, "signal");
        json_t *p = NULL;

        switch (pc->kind) {
        case K_START:
                api_decode_process(API_PROC_START, body, len, NULL, &p, err);
                break;
        case K_KILL:
        case K_KILLALL:
                if (api_decode_process(API_PROC_KILL, body, len, qsig, &p, err) == 0 &&
                    pc->kind == K_KILLALL)
                        json_object_set_new(p, "op", json_string("killall"));
                break;
        case K_WAIT_LOG:
                api_decode_process(API_PROC_WAIT_LOG, body, len, NULL, &p, err);
                break;
        case K_WAIT_PORT:
                api_decode_process(API_PROC_WAIT_PORT, body, len, NULL, &p, err);
                break;
        case K_WAIT_EXIT:
                api_decode_process(API_PROC_WAIT_EXIT, body, len, NULL, &p, err);
                break;
        default:
                if (len > 0) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "this route takes no request body");
                        return NULL;
                }
                p = json_pack("{s:s}", "op", plain[pc->kind]);
                if (!p)
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                break;
        }
        if (p && pc->pid[0])
                json_object_set_new(p, "id", json_string(pc->pid));
        return p;
}

static void call_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct proc_call *pc = ud;
        struct cella_error err = {0};
        json_t *payload;

        http_request_on_abort(req, NULL, NULL);
        payload = payload_for(pc, req, body, len, &err);
        if (!payload) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (api_op_find_sandbox(&pc->base, req)) {
                if (pc->kind == K_START)
                        json_object_set_new(payload, "baseEnv", api_op_base_env(&pc->base));
                api_op_open(&pc->base, req, FRAME_PROC, payload, &proc_ops);
        }
        json_decref(payload);
out:
        api_op_unref(&pc->base); /* the body read's */
}

static void call_free(struct api_op *op)
{
        struct proc_call *pc = (struct proc_call *)op;

        api_outbuf_done(&pc->ob);
}

static void processes(struct api *a, struct http_request *req, const struct api_args *p,
                      enum pkind kind)
{
        struct proc_call *pc = (struct proc_call *)api_op_new(a, p->name, sizeof(*pc), call_free);

        if (pc) {
                pc->ob.budget = a->cfg.budget;
                pc->kind = kind;
                snprintf(pc->pid, sizeof(pc->pid), "%s", p->param ? p->param : "");
        }
        api_op_read_body(pc ? &pc->base : NULL, req, call_body);
}

/* One handler per route of the table. */
#define PROCESS_ROUTE(fn, kind)                                                    \
        void fn(struct api *a, struct http_request *req, const struct api_args *p) \
        {                                                                          \
                processes(a, req, p, kind);                                        \
        }
PROCESS_ROUTE(api_process_start, K_START)
PROCESS_ROUTE(api_process_list, K_LIST)
PROCESS_ROUTE(api_process_kill_all, K_KILLALL)
PROCESS_ROUTE(api_process_get, K_GET)
PROCESS_ROUTE(api_process_kill, K_KILL)
PROCESS_ROUTE(api_process_logs, K_LOGS)
PROCESS_ROUTE(api_process_stream, K_STREAM)
PROCESS_ROUTE(api_process_wait_log, K_WAIT_LOG)
PROCESS_ROUTE(api_process_wait_port, K_WAIT_PORT)
PROCESS_ROUTE(api_process_wait_exit, K_WAIT_EXIT)
