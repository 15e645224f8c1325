/* Sessions and setEnvVars (docs/api.md "Sessions"): each call is one SESSION request on
 * the sandbox's agent, which owns the sessions (docs/decisions/0012). */
#include <errno.h>
#include <string.h>

#include "common/name.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"

struct sess_ctx {
        struct api *a;
        char name[CELLA_NAME_MAX + 1];
        char sid[CELLA_ID_MAX + 1]; /* from the path, or "" */
        int kind;                   /* enum below */
        int status;                 /* HTTP status of success */
        json_t *env;                /* setenv: the sandbox-level vars applied (for the count) */
        struct sandbox *sb;
};

enum { K_CREATE, K_LIST, K_GET, K_DELETE, K_ENV };

static void ctx_free(struct sess_ctx *c)
{
        json_decref(c->env);
        sandbox_unref(c->sb);
        free(c);
}

static void body_abort(struct http_request *req, void *ud)
{
        (void)req;
        ctx_free(ud);
}

static void answer(struct http_request *req, json_t *result, const struct cella_error *err,
                   json_t *error_payload, void *ud)
{
        struct sess_ctx *c = ud;

        (void)error_payload;
        if (!req) {
                ctx_free(c);
                return;
        }
        if (err) {
                http_respond_error(req, err, NULL);
        } else if (c->kind == K_GET) {
                json_t *list = json_object_get(result, "sessions"), *s;
                size_t i;
                bool found = false;

                json_array_foreach(list, i, s)
                {
                        const char *id = json_string_value(json_object_get(s, "id"));

                        if (id && strcmp(id, c->sid) == 0) {
                                http_respond_json(req, 200, s);
                                found = true;
                                break;
                        }
                }
                if (!found)
                        http_respond_code(req, CELLA_E_SESSION_NOT_FOUND, "no session '%s'",
                                          c->sid);
        } else if (c->kind == K_DELETE) {
                json_t *j = json_pack("{s:b, s:s}", "success", 1, "id", c->sid);

                http_respond_json(req, 200, j);
                json_decref(j);
        } else if (c->kind == K_ENV) {
                json_t *j = json_pack("{s:b}", "success", 1);

                if (j && c->env)
                        json_object_set_new(j, "count",
                                            json_integer((json_int_t)json_object_size(c->env)));
                if (j && c->sid[0])
                        json_object_set_new(j, "sessionId", json_string(c->sid));
                http_respond_json(req, 200, j);
                json_decref(j);
        } else {
                if (c->kind == K_CREATE)
                        json_object_set_new(result, "success", json_true());
                http_respond_json(req, c->status, result);
        }
        ctx_free(c);
}

/* c's sandbox (created and started if needed), referenced in c->sb; false (the request
 * answered, c freed) if there is none. */
static bool find_sandbox(struct http_request *req, struct sess_ctx *c)
{
        c->sb = api_sandbox_for(c->a, req, c->name);
        if (!c->sb) {
                ctx_free(c);
                return false;
        }
        sandbox_ref(c->sb);
        return true;
}

/* Send payload (consumed; NULL: out of memory) to c's sandbox's agent; c is consumed. */
static void send_call(struct http_request *req, struct sess_ctx *c, json_t *payload)
{
        if (!payload) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                ctx_free(c);
                return;
        }
        if (api_agent_call(req, c->sb, FRAME_SESSION, payload, answer, c) < 0)
                ctx_free(c);
        json_decref(payload);
}

/* Call the agent with payload (consumed) for c (consumed). */
static void call(struct http_request *req, struct sess_ctx *c, json_t *payload)
{
        if (!find_sandbox(req, c)) {
                json_decref(payload);
                return;
        }
        send_call(req, c, payload);
}

static void create_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct sess_ctx *c = ud;
        struct cella_error err = {0};
        struct api_session p;
        json_t *payload, *base;

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_session(body, len, &p, &err) < 0) {
                http_respond_error(req, &err, NULL);
                ctx_free(c);
                return;
        }
        if (!find_sandbox(req, c)) {
                api_session_done(&p);
                return;
        }
        base = sandbox_env(c->sb);
        payload =
                json_pack("{s:s, s:O, s:I}", "op", "create", "baseEnv", base ? base : json_object(),
                          "commandTimeoutMs", (json_int_t)p.timeout_ms);
        if (payload && p.id)
                json_object_set_new(payload, "id", json_string(p.id));
        if (payload && p.cwd)
                json_object_set_new(payload, "cwd", json_string(p.cwd));
        if (payload && p.env)
                json_object_set(payload, "env", p.env);
        api_session_done(&p);
        send_call(req, c, payload);
}

static void env_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct sess_ctx *c = ud;
        struct cella_error err = {0};
        struct api_env p;
        json_t *payload;

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_env(body, len, &p, &err) < 0) {
                http_respond_error(req, &err, NULL);
                ctx_free(c);
                return;
        }
        if (p.session_id) {
                if (c->sid[0] && strcmp(c->sid, p.session_id) != 0) {
                        http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                          "sessionId '%s' differs from the path's session '%s'",
                                          p.session_id, c->sid);
                        api_env_done(&p);
                        ctx_free(c);
                        return;
                }
                snprintf(c->sid, sizeof(c->sid), "%s", p.session_id);
        }
        if (!find_sandbox(req, c)) {
                api_env_done(&p);
                return;
        }
        if (!c->sid[0]) {
                /* The sandbox's env: kept in the registry (a new shell and every
                 * sessionless command get it), and applied to the live sessions. */
                if (sandbox_set_env(c->sb, p.vars, &err) < 0) {
                        http_respond_error(req, &err, NULL);
                        api_env_done(&p);
                        ctx_free(c);
                        return;
                }
                c->env = json_incref(sandbox_env(c->sb));
        }
        payload = json_pack("{s:s, s:O}", "op", "setenv", "env", p.vars);
        if (payload && c->sid[0])
                json_object_set_new(payload, "id", json_string(c->sid));
        api_env_done(&p);
        send_call(req, c, payload);
}

static void read_body(struct http_request *req, struct sess_ctx *c, http_body_cb cb)
{
        http_request_on_abort(req, body_abort, c);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, cb, c) < 0) {
                http_request_on_abort(req, NULL, NULL);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                ctx_free(c);
        }
}

static struct sess_ctx *ctx_new(struct api *a, struct http_request *req, const char *name, int kind)
{
        struct sess_ctx *c = calloc(1, sizeof(*c));

        if (!c) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        c->a = a;
        c->kind = kind;
        c->status = 200;
        snprintf(c->name, sizeof(c->name), "%s", name);
        return c;
}

void api_env(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct sess_ctx *c = ctx_new(a, req, name, K_ENV);

        if (c)
                read_body(req, c, env_body);
}

void api_sessions_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_ctx *c = ctx_new(a, req, p->name, K_CREATE);

        if (c) {
                c->status = 201;
                read_body(req, c, create_body);
        }
}

void api_sessions_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_ctx *c = ctx_new(a, req, p->name, K_LIST);

        if (c)
                call(req, c, json_pack("{s:s}", "op", "list"));
}

void api_session_env(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_ctx *c = ctx_new(a, req, p->name, K_ENV);

        if (c) {
                snprintf(c->sid, sizeof(c->sid), "%s", p->param);
                read_body(req, c, env_body);
        }
}

void api_session_get(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_ctx *c = ctx_new(a, req, p->name, K_GET);

        if (c) {
                snprintf(c->sid, sizeof(c->sid), "%s", p->param);
                call(req, c, json_pack("{s:s}", "op", "list"));
        }
}

void api_session_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sess_ctx *c = ctx_new(a, req, p->name, K_DELETE);

        if (c) {
                snprintf(c->sid, sizeof(c->sid), "%s", p->param);
                call(req, c, json_pack("{s:s, s:s}", "op", "delete", "id", p->param));
        }
}
