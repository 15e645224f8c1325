#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/utf8.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp-internal.h"
#include "mcp/schema.h"
#include "mcp/server.h"

const char *const mcp_protocol_versions[] = {MCP_PROTOCOL_LATEST, "2025-06-18", NULL};

/* One session. Invariants: lock guards calls[], ncalls, version, closed and refs; send_lock
 * serialises the transport's send (taken after lock when both are held, never before). A
 * call in calls[] is owned by its worker thread, which removes it under lock before it
 * frees it. */
struct mcp_server {
        pthread_mutex_t lock;
        pthread_mutex_t send_lock;
        pthread_cond_t idle;
        struct mcp_transport t;
        char *url, *token;
        char version[16];
        bool closed;
        unsigned refs;
        unsigned workers; /* worker and killer threads not yet ended */
        struct mcp_call *calls[CELLA_MCP_MAX_INFLIGHT];
};

static void send_msg(struct mcp_server *s, json_t *take_msg, const json_t *related)
{
        _cleanup_json_ json_t *msg = take_msg;
        _cleanup_free_ char *text = NULL;
        bool closed;

        if (!msg)
                return;
        pthread_mutex_lock(&s->lock);
        closed = s->closed;
        pthread_mutex_unlock(&s->lock);
        if (closed || !(text = jsonrpc_dump(msg)))
                return;
        pthread_mutex_lock(&s->send_lock);
        s->t.send(text, strlen(text), related, s->t.userdata);
        pthread_mutex_unlock(&s->send_lock);
}

static void send_error(struct mcp_server *s, json_t *id, int code, const char *msg)
{
        send_msg(s, jsonrpc_error(id, code, msg, NULL), id);
}

void mcp_server_notify(struct mcp_server *s, const char *method, json_t *take_params)
{
        send_msg(s, jsonrpc_notification(method, take_params), NULL);
}

int mcp_server_new(const struct mcp_server_options *o, const struct mcp_transport *t,
                   struct mcp_server **ret)
{
        struct mcp_server *s;

        /* The tool calls' clients are made on worker threads: the transport's global
         * setup happens here, on the caller's. */
        if (cella_global_init() < 0)
                return -EIO;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        if ((o->url && !(s->url = strdup(o->url))) ||
            (o->token && !(s->token = strdup(o->token)))) {
                free(s->url);
                free(s);
                return -ENOMEM;
        }
        pthread_mutex_init(&s->lock, NULL);
        pthread_mutex_init(&s->send_lock, NULL);
        pthread_cond_init(&s->idle, NULL);
        s->t = *t;
        s->refs = 1;
        *ret = s;
        return 0;
}

void mcp_server_ref(struct mcp_server *s)
{
        pthread_mutex_lock(&s->lock);
        s->refs++;
        pthread_mutex_unlock(&s->lock);
}

void mcp_server_unref(struct mcp_server *s)
{
        bool last;

        pthread_mutex_lock(&s->lock);
        last = --s->refs == 0;
        pthread_mutex_unlock(&s->lock);
        if (!last)
                return;
        pthread_mutex_destroy(&s->lock);
        pthread_mutex_destroy(&s->send_lock);
        pthread_cond_destroy(&s->idle);
        free(s->url);
        free(s->token);
        free(s);
}

bool mcp_server_is_closed(struct mcp_server *s)
{
        bool closed;

        pthread_mutex_lock(&s->lock);
        closed = s->closed;
        pthread_mutex_unlock(&s->lock);
        return closed;
}

cella_client *mcp_server_client(struct mcp_server *s)
{
        cella_client *c = NULL;

        return cella_client_new(s->url, s->token, &c) == CELLA_OK ? c : NULL;
}

const char *mcp_server_protocol_version(struct mcp_server *s)
{
        const char *v;

        pthread_mutex_lock(&s->lock);
        v = s->version[0] ? s->version : NULL;
        pthread_mutex_unlock(&s->lock);
        return v;
}

unsigned mcp_server_inflight(struct mcp_server *s)
{
        unsigned n = 0;

        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < ARRAY_SIZE(s->calls); i++)
                n += s->calls[i] != NULL;
        pthread_mutex_unlock(&s->lock);
        return n;
}

/* ---- cancellation ---- */

struct kill_job {
        struct mcp_server *srv;
        char sandbox[CELLA_NAME_MAX + 1];
        char process[CELLA_ID_MAX + 1];
};

/* A killer thread: SIGKILL to the cancelled call's process (its whole tree, through the
 * processes API), on a client of its own. */
static void *kill_main(void *arg)
{
        struct kill_job *k = arg;
        struct mcp_server *s = k->srv;
        cella_client *c = mcp_server_client(s);
        char *info = NULL;

        if (c && cella_process_kill(c, k->sandbox, k->process, "SIGKILL", &info) != CELLA_OK)
                log_msg(LOG_LEVEL_DEBUG, "mcp: kill %s/%s: %s", k->sandbox, k->process,
                        cella_client_error_message(c));
        cella_free(info);
        cella_client_free(c);
        free(k);
        pthread_mutex_lock(&s->lock);
        s->workers--;
        pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->lock);
        mcp_server_unref(s);
        return NULL;
}

/* With s->lock held: start a killer thread for the call's process, if it has one. */
static void kill_locked(struct mcp_server *s, struct mcp_call *call)
{
        struct kill_job *k;
        pthread_attr_t attr;
        pthread_t th;

        if (!call->kill_process[0] || !(k = calloc(1, sizeof(*k))))
                return;
        k->srv = s;
        memcpy(k->sandbox, call->kill_sandbox, sizeof(k->sandbox));
        memcpy(k->process, call->kill_process, sizeof(k->process));
        call->kill_process[0] = '\0';
        s->refs++;
        s->workers++;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, kill_main, k) != 0) {
                s->refs--;
                s->workers--;
                free(k);
        }
        pthread_attr_destroy(&attr);
}

void mcp_call_set_kill(struct mcp_call *call, const char *sandbox, const char *process)
{
        struct mcp_server *s = call->srv;

        pthread_mutex_lock(&s->lock);
        snprintf(call->kill_sandbox, sizeof(call->kill_sandbox), "%s", sandbox);
        snprintf(call->kill_process, sizeof(call->kill_process), "%s", process);
        if (atomic_load(&call->cancelled))
                kill_locked(s, call);
        pthread_mutex_unlock(&s->lock);
}

bool mcp_call_is_cancelled(struct mcp_call *call)
{
        return atomic_load(&call->cancelled);
}

static void cancel(struct mcp_server *s, const json_t *id)
{
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < ARRAY_SIZE(s->calls); i++) {
                struct mcp_call *call = s->calls[i];

                if (call && (!id || json_equal(call->id, id))) {
                        atomic_store(&call->cancelled, true);
                        kill_locked(s, call);
                        /* a call blocked on cellad (a silent code run) ends now: its
                         * connection closing interrupts the run */
                        if (call->client)
                                cella_client_interrupt(call->client);
                }
        }
        pthread_mutex_unlock(&s->lock);
}

/* ---- progress ---- */

void mcp_call_progress(struct mcp_call *call, double delta, const char *msg, size_t len)
{
        _cleanup_(buf_freep) struct buf text = {0};
        json_t *p;

        if (!call->progress_token || atomic_load(&call->cancelled))
                return;
        if (utf8_sanitize(&text, msg, MIN(len, (size_t)CELLA_MCP_PROGRESS_TEXT)) < 0)
                return;
        call->progress += delta;
        p = json_pack("{sOsfss#}", "progressToken", call->progress_token, "progress",
                      call->progress, "message", text.data ? text.data : "", text.len);
        send_msg(call->srv, jsonrpc_notification("notifications/progress", p), call->id);
}

/* ---- results ---- */

json_t *mcp_result_structured(json_t *take)
{
        _cleanup_json_ json_t *structured = take;
        _cleanup_free_ char *text = NULL;

        if (!structured || !(text = json_dumps(structured, JSON_COMPACT)))
                return NULL;
        return json_pack("{s[{ssss}]sO}", "content", "type", "text", "text", text,
                         "structuredContent", structured);
}

static json_t *error_result(const char *code, const char *message, long status)
{
        char text[1024];
        json_t *meta;

        if (status > 0)
                snprintf(text, sizeof(text), "%s (HTTP %ld): %s", code, status, message);
        else
                snprintf(text, sizeof(text), "%s: %s", code, message);
        meta = json_pack("{s{ssss}}", "cella/error", "code", code, "message", message);
        if (meta && status > 0)
                json_object_set_new(json_object_get(meta, "cella/error"), "httpStatus",
                                    json_integer(status));
        return json_pack("{s[{ssss}]sbso}", "content", "type", "text", "text", text, "isError", 1,
                         "_meta", meta ? meta : json_object());
}

json_t *mcp_result_client_error(struct mcp_call *call, int rc)
{
        switch (rc) {
        case CELLA_ERR_API:
                return error_result(cella_client_error_code(call->client),
                                    cella_client_error_message(call->client),
                                    cella_client_http_status(call->client));
        case CELLA_ERR_TRANSPORT:
                return error_result("UNAVAILABLE", "cellad did not answer", 0);
        case CELLA_ERR_NOMEM:
                return error_result("INTERNAL_ERROR", "out of memory", 0);
        case CELLA_ERR_CALLBACK:
                return error_result("CANCELLED", "the call was cancelled", 0);
        default:
                return error_result("INVALID_RESPONSE", "cellad's answer was not understood", 0);
        }
}

json_t *mcp_result_error(const char *code, const char *fmt, ...)
{
        char msg[768];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        return error_result(code, msg, 0);
}

/* ---- requests ---- */

static json_t *run_call(struct mcp_call *call, int *ret_code, char *errmsg, size_t errlen)
{
        const char *m = call->method;

        if (strcmp(m, "tools/call") == 0) {
                const struct mcp_tool *t =
                        mcp_tool_find(json_string_value(json_object_get(call->params, "name")));
                json_t *args = json_object_get(call->params, "arguments");
                _cleanup_json_ json_t *empty = args ? NULL : json_object();

                return mcp_tool_run(t, call, args ? args : empty);
        }
        if (strcmp(m, "resources/list") == 0)
                return mcp_resources_list(call, ret_code, errmsg, errlen);
        if (strcmp(m, "resources/read") == 0)
                return mcp_resources_read(call, ret_code, errmsg, errlen);
        return mcp_resources_subscribe(call, strcmp(m, "resources/subscribe") == 0, ret_code,
                                       errmsg, errlen);
}

static void call_free(struct mcp_call *call)
{
        json_decref(call->id);
        json_decref(call->params);
        json_decref(call->progress_token);
        free(call->method);
        cella_client_free(call->client);
        free(call);
}

static void *call_main(void *arg)
{
        struct mcp_call *call = arg;
        struct mcp_server *s = call->srv;
        cella_client *c;
        char errmsg[512] = "";
        int code = JSONRPC_INTERNAL_ERROR;
        json_t *result;

        c = mcp_server_client(s);
        pthread_mutex_lock(&s->lock);
        call->client = c; /* under the lock: a cancellation interrupts it */
        if (c && atomic_load(&call->cancelled))
                cella_client_interrupt(c);
        pthread_mutex_unlock(&s->lock);
        result = call->client ? run_call(call, &code, errmsg, sizeof(errmsg)) : NULL;
        if (!result && !errmsg[0])
                snprintf(errmsg, sizeof(errmsg), "out of memory");
        /* A cancelled request gets no answer (the MCP cancellation rules). */
        if (!atomic_load(&call->cancelled)) {
                if (result)
                        send_msg(s, jsonrpc_result(call->id, result), call->id);
                else
                        send_error(s, call->id, code, errmsg);
        } else {
                json_decref(result);
        }
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < ARRAY_SIZE(s->calls); i++)
                if (s->calls[i] == call)
                        s->calls[i] = NULL;
        s->workers--;
        pthread_cond_broadcast(&s->idle);
        pthread_mutex_unlock(&s->lock);
        call_free(call);
        mcp_server_unref(s);
        return NULL;
}

/* Start a worker for the request (its id and params borrowed). */
static void start_call(struct mcp_server *s, struct jsonrpc_msg *m)
{
        struct mcp_call *call = calloc(1, sizeof(*call));
        json_t *meta = json_object_get(m->params, "_meta");
        pthread_attr_t attr;
        pthread_t th;
        size_t slot = SIZE_MAX;

        if (!call || !(call->method = strdup(m->method))) {
                free(call);
                send_error(s, m->id, JSONRPC_INTERNAL_ERROR, "out of memory");
                return;
        }
        call->srv = s;
        call->id = json_incref(m->id);
        call->params = m->params ? json_incref(m->params) : json_object();
        call->progress_token = json_incref(json_object_get(meta, "progressToken"));
        if (call->progress_token && !json_is_string(call->progress_token) &&
            !json_is_integer(call->progress_token)) {
                json_decref(call->progress_token);
                call->progress_token = NULL;
        }
        atomic_init(&call->cancelled, false);
        pthread_mutex_lock(&s->lock);
        for (size_t i = 0; i < ARRAY_SIZE(s->calls); i++) {
                if (s->calls[i] && json_equal(s->calls[i]->id, m->id)) {
                        slot = SIZE_MAX - 1;
                        break;
                }
                if (!s->calls[i] && slot == SIZE_MAX)
                        slot = i;
        }
        if (slot >= ARRAY_SIZE(s->calls)) {
                pthread_mutex_unlock(&s->lock);
                send_error(s, m->id, JSONRPC_INVALID_REQUEST,
                           slot == SIZE_MAX ? "too many requests running at once"
                                            : "a request with this id is running");
                call_free(call);
                return;
        }
        s->calls[slot] = call;
        s->refs++;
        s->workers++;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, call_main, call) != 0) {
                s->calls[slot] = NULL;
                s->refs--;
                s->workers--;
                pthread_mutex_unlock(&s->lock);
                pthread_attr_destroy(&attr);
                send_error(s, m->id, JSONRPC_INTERNAL_ERROR, "cannot start a thread");
                call_free(call);
                return;
        }
        pthread_mutex_unlock(&s->lock);
        pthread_attr_destroy(&attr);
}

static json_t *initialize(struct mcp_server *s, json_t *params, char *errmsg, size_t errlen)
{
        const char *want = json_string_value(json_object_get(params, "protocolVersion"));
        const char *v = MCP_PROTOCOL_LATEST;

        if (!want || !json_is_object(json_object_get(params, "capabilities"))) {
                snprintf(errmsg, errlen,
                         "initialize needs params.protocolVersion (a string) "
                         "and params.capabilities (an object)");
                return NULL;
        }
        for (size_t i = 0; mcp_protocol_versions[i]; i++)
                if (strcmp(want, mcp_protocol_versions[i]) == 0)
                        v = mcp_protocol_versions[i];
        pthread_mutex_lock(&s->lock);
        snprintf(s->version, sizeof(s->version), "%s", v);
        pthread_mutex_unlock(&s->lock);
        return json_pack(
                "{sss{s{sb}s{sbsb}}s{ssssss}ss}", "protocolVersion", v, "capabilities", "tools",
                "listChanged", 0, "resources", "subscribe", 1, "listChanged", 0, "serverInfo",
                "name", "cella", "title", "cella sandboxes", "version", CELLA_VERSION,
                "instructions",
                "cella runs code in isolated Linux sandboxes (Debian, bash, python3, node). "
                "A sandbox is made on first use by any tool that names it (or by "
                "sandbox_create) and keeps its files between calls; paths are absolute or "
                "relative to /workspace. Use exec for shell commands, run_code for "
                "Python/JavaScript/TypeScript with rich results (plots come back as images), "
                "process_start for servers, then wait_for_port and expose_port for a URL.");
}

static json_t *tools_list(void)
{
        json_t *tools = json_array();

        for (size_t i = 0; tools && i < mcp_ntools; i++)
                if (json_array_append_new(tools, mcp_tool_describe(&mcp_tools[i])) < 0) {
                        json_decref(tools);
                        return NULL;
                }
        return tools ? json_pack("{so}", "tools", tools) : NULL;
}

/* tools/call's params checked before a worker starts: -32602 with what is wrong. */
static bool tool_params_ok(json_t *params, char *errmsg, size_t errlen)
{
        const char *name = json_string_value(json_object_get(params, "name"));
        json_t *args = json_object_get(params, "arguments");
        const struct mcp_tool *t;
        _cleanup_json_ json_t *schema = NULL, *empty = NULL;

        if (!name) {
                snprintf(errmsg, errlen, "tools/call needs params.name (a string)");
                return false;
        }
        if (!(t = mcp_tool_find(name))) {
                snprintf(errmsg, errlen, "unknown tool \"%.64s\" (tools/list names them)", name);
                return false;
        }
        if (args && !json_is_object(args)) {
                snprintf(errmsg, errlen, "arguments: must be an object");
                return false;
        }
        if (!(schema = json_loads(t->input_schema, 0, NULL))) {
                snprintf(errmsg, errlen, "out of memory");
                return false;
        }
        empty = json_object();
        return schema_check(schema, args ? args : empty, "arguments", errmsg, errlen);
}

static void handle_request(struct mcp_server *s, struct jsonrpc_msg *m)
{
        const char *method = m->method;
        char errmsg[512] = "";
        json_t *result;

        if (strcmp(method, "initialize") == 0) {
                if (mcp_server_protocol_version(s)) {
                        send_error(s, m->id, JSONRPC_INVALID_REQUEST,
                                   "the session is already initialized");
                        return;
                }
                result = initialize(s, m->params, errmsg, sizeof(errmsg));
                if (!result)
                        send_error(s, m->id, JSONRPC_INVALID_PARAMS, errmsg);
                else
                        send_msg(s, jsonrpc_result(m->id, result), m->id);
                return;
        }
        if (strcmp(method, "ping") == 0) {
                send_msg(s, jsonrpc_result(m->id, json_object()), m->id);
                return;
        }
        if (!mcp_server_protocol_version(s)) {
                send_error(s, m->id, JSONRPC_INVALID_REQUEST,
                           "the session is not initialized: send initialize first");
                return;
        }
        if (strcmp(method, "tools/list") == 0) {
                send_msg(s, jsonrpc_result(m->id, tools_list()), m->id);
        } else if (strcmp(method, "tools/call") == 0) {
                if (!tool_params_ok(m->params, errmsg, sizeof(errmsg)))
                        send_error(s, m->id, JSONRPC_INVALID_PARAMS, errmsg);
                else
                        start_call(s, m);
        } else if (strcmp(method, "resources/templates/list") == 0) {
                send_msg(s, jsonrpc_result(m->id, mcp_resources_templates()), m->id);
        } else if (strcmp(method, "resources/list") == 0 || strcmp(method, "resources/read") == 0 ||
                   strcmp(method, "resources/subscribe") == 0 ||
                   strcmp(method, "resources/unsubscribe") == 0) {
                if (strcmp(method, "resources/list") != 0 &&
                    !json_is_string(json_object_get(m->params, "uri")))
                        send_error(s, m->id, JSONRPC_INVALID_PARAMS,
                                   "params.uri (a string) is required");
                else
                        start_call(s, m);
        } else {
                snprintf(errmsg, sizeof(errmsg), "method not found: %.64s", method);
                send_error(s, m->id, JSONRPC_METHOD_NOT_FOUND, errmsg);
        }
}

void mcp_server_handle(struct mcp_server *s, const char *text, size_t len)
{
        struct jsonrpc_msg m;
        json_t *bad_id = NULL;
        char errmsg[256];
        int r;

        r = jsonrpc_decode(text, len, &m, &bad_id, errmsg, sizeof(errmsg));
        if (r < 0) {
                send_error(s, bad_id, r, errmsg);
                json_decref(bad_id);
                return;
        }
        switch (m.kind) {
        case JSONRPC_REQUEST:
                handle_request(s, &m);
                break;
        case JSONRPC_NOTIFICATION:
                if (strcmp(m.method, "notifications/cancelled") == 0) {
                        json_t *id = json_object_get(m.params, "requestId");

                        if (json_is_string(id) || json_is_integer(id))
                                cancel(s, id);
                }
                /* notifications/initialized and the rest need nothing */
                break;
        case JSONRPC_RESPONSE:
                break; /* the server sends no requests */
        }
        jsonrpc_msg_clear(&m);
}

void mcp_server_drain(struct mcp_server *s)
{
        pthread_mutex_lock(&s->lock);
        while (s->workers > 0)
                pthread_cond_wait(&s->idle, &s->lock);
        pthread_mutex_unlock(&s->lock);
}

void mcp_server_close(struct mcp_server *s)
{
        cancel(s, NULL);
        mcp_resources_close(s);
        pthread_mutex_lock(&s->lock);
        s->closed = true;
        while (s->workers > 0)
                pthread_cond_wait(&s->idle, &s->lock);
        pthread_mutex_unlock(&s->lock);
        mcp_server_unref(s);
}
