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
#include "common/wire.h"
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
        _cleanup_json_ json_t *r = json_pack("{s:s}", "processId", id ? id : pc->pid);

        if (r) {
                /* the logs are counted in the memory budget and written piece by piece,
                 * like a buffered exec's output */
                api_outbuf_set(&pc->base.out, r);
                if (json_is_true(json_object_get(info, "logTruncated")))
                        json_object_set_new(r, "truncated", json_true());
        }
        api_req_respond_output(&pc->base, 200, r);
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

/* The agent's PROC op and the API's body decoder of each kind of call. */
static const struct {
        enum wire_proc_op op;
        int call; /* enum api_proc_call; -1: the route takes no body */
} kinds[] = {
        [K_START] = {WIRE_PROC_START, API_PROC_START},
        [K_LIST] = {WIRE_PROC_LIST, -1},
        [K_GET] = {WIRE_PROC_GET, -1},
        [K_LOGS] = {WIRE_PROC_LOGS, -1},
        [K_STREAM] = {WIRE_PROC_STREAM, -1},
        [K_KILL] = {WIRE_PROC_KILL, API_PROC_KILL},
        [K_KILLALL] = {WIRE_PROC_KILLALL, API_PROC_KILL},
        [K_WAIT_LOG] = {WIRE_PROC_WAIT_LOG, API_PROC_WAIT_LOG},
        [K_WAIT_PORT] = {WIRE_PROC_WAIT_PORT, API_PROC_WAIT_PORT},
        [K_WAIT_EXIT] = {WIRE_PROC_WAIT_EXIT, API_PROC_WAIT_EXIT},
};

static void call_body(struct api_req *r, const char *body, size_t len)
{
        struct proc_call *pc = (struct proc_call *)r;
        struct cella_error err = {0};
        struct api_process in = {0};
        _cleanup_json_ json_t *base_env = NULL;
        _cleanup_json_ json_t *payload = NULL;

        if (kinds[pc->kind].call < 0 && len > 0) {
                cella_error_set(&err, CELLA_E_VALIDATION_FAILED,
                                "this route takes no request body");
                api_req_fail(r, &err, NULL);
                return;
        }
        if (kinds[pc->kind].call >= 0 &&
            api_decode_process((enum api_proc_call)kinds[pc->kind].call, body, len,
                               http_request_query(r->http, "signal"), &in, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (!api_req_find_sandbox(r)) {
                api_process_done(&in);
                return;
        }
        if (pc->kind == K_START)
                base_env = api_req_base_env(r);
        payload = wire_proc_encode(&(struct wire_proc){
                .op = kinds[pc->kind].op,
                .id = pc->kind == K_START ? in.process_id
                      : pc->pid[0]        ? pc->pid
                                          : NULL,
                .command = in.command,
                .session = in.session_id,
                .cwd = in.cwd,
                .env = in.env,
                .base_env = base_env,
                .signal = in.signal,
                .pattern = in.pattern,
                .regex = in.regex,
                .port = (int)in.port,
                .http = in.mode == 1,
                .path = in.path,
                .status_min = (int)in.status_min,
                .status_max = (int)in.status_max,
                .interval_ms = in.interval_ms,
                .timeout_ms = in.timeout_ms,
        });
        api_process_done(&in);
        api_req_open(r, FRAME_PROC, payload);
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
