/* Sessions and setEnvVars (docs/api.md "Sessions"): each call is one SESSION request on
 * the sandbox's agent, which owns the sessions (docs/decisions/0012). */
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/name.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"

struct sess_call {
        struct api_req base;        /* first: an agent call */
        char sid[CELLA_ID_MAX + 1]; /* from the path, or "" */
        int kind;                   /* enum below */
        int status;                 /* HTTP status of success */
        json_t *env;                /* setenv: the sandbox-level vars applied (for the count) */
};

enum { K_CREATE, K_LIST, K_GET, K_DELETE, K_ENV };

static void answer(struct api_req *r, json_t *result)
{
        struct sess_call *c = (struct sess_call *)r;
        _cleanup_json_ json_t *j = NULL;

        if (c->kind == K_GET) {
                json_t *list = json_object_get(result, "sessions"), *s;
                size_t i;

                json_array_foreach(list, i, s)
                {
                        const char *id = json_string_value(json_object_get(s, "id"));

                        if (id && strcmp(id, c->sid) == 0) {
                                api_req_respond_json(r, 200, s);
                                return;
                        }
                }
                if (r->http)
                        http_respond_code(r->http, CELLA_E_SESSION_NOT_FOUND, "no session '%s'",
                                          c->sid);
                return;
        }
        if (c->kind == K_DELETE) {
                j = json_pack("{s:b, s:s}", "success", 1, "id", c->sid);
        } else if (c->kind == K_ENV) {
                j = json_pack("{s:b}", "success", 1);
                if (j && c->env)
                        json_object_set_new(j, "count",
                                            json_integer((json_int_t)json_object_size(c->env)));
                if (j && c->sid[0])
                        json_object_set_new(j, "sessionId", json_string(c->sid));
        } else {
                if (c->kind == K_CREATE)
                        json_object_set_new(result, "success", json_true());
                j = json_incref(result);
        }
        api_req_respond_json(r, c->status, j);
}

static void call_free(struct api_req *r)
{
        json_decref(((struct sess_call *)r)->env);
}

static const struct api_req_ops sess_ops = {.result = answer, .free = call_free};

static void create_body(struct api_req *r, const char *body, size_t len)
{
        struct cella_error err = {0};
        struct api_session p;
        _cleanup_json_ json_t *payload = NULL;

        if (api_decode_session(body, len, &p, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (!api_req_find_sandbox(r)) {
                api_session_done(&p);
                return;
        }
        payload = wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_CREATE,
                                                             .id = p.id,
                                                             .cwd = p.cwd,
                                                             .env = p.env,
                                                             .base_env = sandbox_env(r->sb),
                                                             .timeout_ms = p.timeout_ms});
        api_session_done(&p);
        api_req_open(r, FRAME_SESSION, payload);
}

static void env_body(struct api_req *r, const char *body, size_t len)
{
        struct sess_call *c = (struct sess_call *)r;
        struct cella_error err = {0};
        struct api_env p;
        _cleanup_json_ json_t *payload = NULL;

        if (api_decode_env(body, len, &p, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        if (p.session_id) {
                if (c->sid[0] && strcmp(c->sid, p.session_id) != 0) {
                        cella_error_set(&err, CELLA_E_VALIDATION_FAILED,
                                        "sessionId '%s' differs from the path's session '%s'",
                                        p.session_id, c->sid);
                        api_req_fail(r, &err, NULL);
                        api_env_done(&p);
                        return;
                }
                snprintf(c->sid, sizeof(c->sid), "%s", p.session_id);
        }
        if (!api_req_find_sandbox(r)) {
                api_env_done(&p);
                return;
        }
        if (!c->sid[0]) {
                /* The sandbox's env: kept in the registry (a new shell and every
                 * sessionless command get it), and applied to the live sessions. */
                if (sandbox_set_env(r->sb, p.vars, &err) < 0) {
                        api_req_fail(r, &err, NULL);
                        api_env_done(&p);
                        return;
                }
                c->env = json_incref(sandbox_env(r->sb));
        }
        payload = wire_session_encode(&(struct wire_session){
                .op = WIRE_SESSION_SETENV, .id = c->sid[0] ? c->sid : NULL, .env = p.vars});
        api_env_done(&p);
        api_req_open(r, FRAME_SESSION, payload);
}

/* A call of kind on the sandbox's agent for req; the path's {sid} when sid. */
static struct sess_call *call_new(struct api *a, struct http_request *req, const struct api_args *p,
                                  int kind, const char *sid)
{
        struct sess_call *c =
                (struct sess_call *)api_req_new(a, req, p->name, sizeof(*c), &sess_ops);

        if (!c)
                return NULL;
        c->kind = kind;
        c->status = kind == K_CREATE ? 201 : 200;
        snprintf(c->sid, sizeof(c->sid), "%s", sid ? sid : "");
        return c;
}

/* Send payload (consumed) for c, then drop the handler's reference. */
static void call(struct sess_call *c, json_t *payload)
{
        api_req_open(&c->base, FRAME_SESSION, payload);
        json_decref(payload);
        api_req_unref(&c->base);
}

void api_env(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_call *c = call_new(a, req, p, K_ENV, NULL);

        if (c)
                api_req_read_body(&c->base, CELLA_HTTP_MAX_JSON_BODY, env_body);
}

void api_sessions_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_call *c = call_new(a, req, p, K_CREATE, NULL);

        if (c)
                api_req_read_body(&c->base, CELLA_HTTP_MAX_JSON_BODY, create_body);
}

void api_sessions_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_call *c = call_new(a, req, p, K_LIST, NULL);

        if (c)
                call(c, wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_LIST}));
}

void api_session_env(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_call *c = call_new(a, req, p, K_ENV, p->param);

        if (c)
                api_req_read_body(&c->base, CELLA_HTTP_MAX_JSON_BODY, env_body);
}

void api_session_get(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_call *c = call_new(a, req, p, K_GET, p->param);

        if (c)
                call(c, wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_LIST}));
}

void api_session_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_call *c = call_new(a, req, p, K_DELETE, p->param);

        if (c)
                call(c, wire_session_encode(
                                &(struct wire_session){.op = WIRE_SESSION_DELETE, .id = p->param}));
}
