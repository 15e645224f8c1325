/* The background-process routes under /v1/sandboxes/{id}/processes (docs/api.md). cellad
 * keeps no process table (decision 0012): each call is one PROC stream to the agent and the
 * answer is the agent's.
 *
 * struct proc_call is a struct api_req (api-req.h) with the route's kind and the path's
 * process id; a stream is its SSE mode, logs its collector. */
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/name.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"

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
        struct api_req base;        /* first; base.out: the logs' stdout, stderr */
        char pid[CELLA_ID_MAX + 1]; /* the process id or pid from the path ("" for none) */
        enum pkind kind;
};

static void respond_logs(struct proc_call *pc, json_t *info)
{
        const char *id = json_string_value(json_object_get(info, "id"));
        json_t *r = json_pack("{s:s}", "processId", id ? id : pc->pid);

        if (r) {
                /* the logs are counted in the memory budget and written piece by piece,
                 * like a buffered exec's output */
                api_outbuf_set(&pc->base.out, r);
                if (json_is_true(json_object_get(info, "logTruncated")))
                        json_object_set_new(r, "truncated", json_true());
        }
        api_req_respond_output(&pc->base, 200, r);
        json_decref(r);
}

static void on_result(struct proc_call *pc, const struct frame *f)
{
        _cleanup_json_ json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);

        if (!j) {
                struct cella_error e = {0};

                cella_error_set(&e, CELLA_E_INTERNAL_ERROR, "bad answer from the agent");
                api_req_fail(&pc->base, &e, NULL);
                return;
        }
        if (pc->kind == K_LOGS) {
                respond_logs(pc, j);
        } else if (pc->kind == K_STREAM) {
                json_t *ev = json_pack("{s:s, s:O?, s:O?, s:O?}", "type", "exit", "exitCode",
                                       json_object_get(j, "exitCode"), "status",
                                       json_object_get(j, "status"), "processId",
                                       json_object_get(j, "id"));

                if (ev && json_object_get(j, "signal"))
                        json_object_set(ev, "signal", json_object_get(j, "signal"));
                api_req_end_sse(&pc->base, ev);
        } else {
                api_req_respond_json(&pc->base, 200, j);
        }
}

static void on_frame(struct api_req *r, const struct frame *f)
{
        struct proc_call *pc = (struct proc_call *)r;

        switch (f->type) {
        case FRAME_STARTED:
                if (r->mode == API_REQ_SSE)
                        api_req_begin_sse(r);
                break;
        case FRAME_STDOUT:
        case FRAME_STDERR:
                api_req_output(r, f->type == FRAME_STDERR, f->payload, f->len);
                break;
        case FRAME_RESULT:
                if (!r->finished && r->http)
                        on_result(pc, f);
                api_req_finish(r);
                break;
        case FRAME_ERROR:
                api_req_fail_frame(r, f);
                break;
        default:
                break;
        }
}

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

static void call_body(struct api_req *r, const char *body, size_t len)
{
        struct proc_call *pc = (struct proc_call *)r;
        struct cella_error err = {0};
        json_t *payload;

        payload = payload_for(pc, r->http, body, len, &err);
        if (!payload) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (api_req_find_sandbox(r)) {
                if (pc->kind == K_START)
                        json_object_set_new(payload, "baseEnv", api_req_base_env(r));
                api_req_open(r, FRAME_PROC, payload);
        }
        json_decref(payload);
}

static const struct api_req_ops proc_ops = {.frame = on_frame};

static void processes(struct api *a, struct http_request *req, const struct api_args *p,
                      enum pkind kind)
{
        struct proc_call *pc =
                (struct proc_call *)api_req_new(a, req, p->name, sizeof(*pc), &proc_ops);

        if (!pc)
                return;
        pc->kind = kind;
        snprintf(pc->pid, sizeof(pc->pid), "%s", p->param ? p->param : "");
        if (kind == K_STREAM) {
                pc->base.mode = API_REQ_SSE;
        } else if (kind == K_LOGS) {
                pc->base.out.budget = a->cfg.budget;
                pc->base.out.cap = CELLA_EXEC_MAX_BUFFERED;
        }
        api_req_read_body(&pc->base, CELLA_HTTP_MAX_JSON_BODY, call_body);
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
