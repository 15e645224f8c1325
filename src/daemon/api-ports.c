/* The ports of a sandbox as the API shows them (docs/api.md "Ports and preview URLs"):
 * expose (POST /ports), list (GET /ports), unexpose (DELETE /ports/{port}), and the
 * WebSocket bridge to a port (GET /ws/{port}[/path]). The registry (store.h) keeps the
 * exposed ports; the preview proxy (preview.c) serves their URLs and is told of every
 * change through preview_port_remember/preview_port_drop. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/preview.h"
#include "daemon/store.h"

static json_t *port_json(const struct preview_config *cfg, const char *sandbox, int port,
                         const char *name, const char *token, bool stale)
{
        char url[512];

        if (preview_url(cfg, sandbox, port, token, url, sizeof(url)) < 0)
                return NULL;
        return json_pack("{s:s, s:i, s:s, s:s}", "url", url, "port", port, "name", name, "status",
                         stale ? "stale" : "active");
}

struct list_ctx {
        struct preview_config *cfg;
        const char *sandbox;
        int64_t instance;
        json_t *arr;
};

static int list_one(const struct store_port *sp, void *ud)
{
        struct list_ctx *c = ud;
        json_t *j = port_json(c->cfg, c->sandbox, (int)sp->port, sp->name, sp->token,
                              c->instance == 0 || sp->instance != c->instance);

        if (!j || json_array_append_new(c->arr, j) < 0)
                return -ENOMEM;
        return 0;
}

static int parse_port(json_t *v, struct cella_error *err)
{
        json_int_t port;

        if (!json_is_integer(v))
                return cella_error_set(err, CELLA_E_INVALID_PORT, "port must be an integer");
        port = json_integer_value(v);
        if (port < CELLA_PORT_MIN || port > CELLA_PORT_MAX)
                return cella_error_set(err, CELLA_E_INVALID_PORT, "port must be in %d..%d",
                                       CELLA_PORT_MIN, CELLA_PORT_MAX);
        if (port == CELLA_PORT_RESERVED)
                return cella_error_set(err, CELLA_E_INVALID_PORT, "port %d is reserved",
                                       CELLA_PORT_RESERVED);
        return (int)port;
}

/* An expose whose body is checked, waiting for its sandbox (api_sandbox_for). */
struct expose {
        struct api_sandbox_wait wait;
        struct preview_config *cfg;
        char *sname;
        json_t *j; /* the body: name and want point into it */
        const char *name, *want;
        int port;
};

static void expose_done(struct http_request *req, struct sandbox *sb, void *ud);

static void expose_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct api *a = ud;
        const char *name = NULL, *want = NULL;
        struct cella_error err = {0};
        json_t *j, *port_v = NULL;
        struct expose *x;
        json_error_t je;
        int port;

        j = json_loadb(body, len, 0, &je);
        if (!j || json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?s, s?s}", "port", &port_v, "name",
                                 &name, "token", &want) < 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "body must be {port, name?, token?}: %s", je.text);
                goto out;
        }
        port = parse_port(port_v, &err);
        if (port < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (want && (!preview_token_valid(want) || strlen(want) < CELLA_PREVIEW_TOKEN_MIN)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "token must be %d of a-z, 0-9 and _ (a shorter one is "
                                  "guessed)",
                                  CELLA_PREVIEW_TOKEN_MIN);
                goto out;
        }
        if (name && (strlen(name) > CELLA_PREVIEW_PORT_NAME_MAX || strpbrk(name, "\r\n"))) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "name must be at most %d characters",
                                  CELLA_PREVIEW_PORT_NAME_MAX);
                goto out;
        }
        x = malloc(sizeof(*x));
        if (!x) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        *x = (struct expose){.cfg = &a->preview,
                             .sname = http_request_get_userdata(req),
                             .j = j,
                             .name = name,
                             .want = want,
                             .port = port};
        http_request_set_userdata(req, NULL); /* the wait's now */
        api_sandbox_for(a, req, x->sname, &x->wait, expose_done, x);
        return;
out:
        json_decref(j);
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

/* The sandbox runs (or its failure was answered, sb NULL): record the port. */
static void expose_done(struct http_request *req, struct sandbox *sb, void *ud)
{
        struct expose *x = ud;
        struct preview_config *cfg = x->cfg;
        const char *sname = x->sname, *name = x->name, *want = x->want;
        struct store *st = sandbox_table_store(cfg->table);
        char old_name[CELLA_PREVIEW_PORT_NAME_MAX + 1], old_token[CELLA_PREVIEW_TOKEN_MAX + 1];
        char token[CELLA_PREVIEW_TOKEN_MAX + 1];
        struct cella_error err = {0};
        int64_t old_instance = 0;
        int port = x->port;
        bool existed;
        json_t *out;

        if (!sb)
                goto out;
        existed = store_port_get(st, sname, port, old_name, sizeof(old_name), old_token,
                                 sizeof(old_token), &old_instance) == 0;
        if (existed && want && strcmp(want, old_token) != 0 &&
            old_instance == sandbox_instance(sb)) {
                http_respond_code(req, CELLA_E_PORT_ALREADY_EXPOSED,
                                  "port %d is already exposed with another token; unexpose it "
                                  "first",
                                  port);
                goto out;
        }
        if (want)
                snprintf(token, sizeof(token), "%s", want);
        else if (existed)
                snprintf(token, sizeof(token), "%s", old_token);
        else if (preview_token_generate(token) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "no random bytes");
                goto out;
        }
        if (!name)
                name = existed ? old_name : "";
        {
                struct store_port sp = {port, name, token, sandbox_instance(sb)};

                if (store_port_save(st, sname, &sp, &err) < 0) {
                        http_respond_error(req, &err, NULL);
                        goto out;
                }
                preview_port_remember(cfg, sname, port, token, sp.instance);
        }
        sandbox_touch(sb);
        out = port_json(cfg, sname, port, name, token, false);
        if (!out) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "preview URL too long");
                goto out;
        }
        json_object_del(out, "status");
        http_respond_json(req, existed ? 200 : 201, out);
        json_decref(out);
out:
        json_decref(x->j);
        free(x->sname);
        free(x);
}

static void expose_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

void api_ports_expose(struct api *a, struct http_request *req, const struct api_args *p)
{
        char *copy = strdup(p->name);

        if (!copy) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        http_request_set_userdata(req, copy);
        http_request_on_abort(req, expose_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, expose_body, a) < 0) {
                http_request_set_userdata(req, NULL);
                free(copy);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}

void api_ports_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        _cleanup_json_ json_t *ports = json_array();
        _cleanup_json_ json_t *j = NULL;
        struct list_ctx c = {&a->preview, p->name, 0, ports};
        struct cella_error err = {0};
        struct sandbox *sb = NULL;

        if (sandbox_table_get(a->cfg.table, p->name, false, NULL, &sb, NULL, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        c.instance = sandbox_instance(sb);
        if (!ports || store_port_foreach(sandbox_table_store(a->cfg.table), p->name, list_one, &c,
                                         &err) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot list ports");
                return;
        }
        j = json_pack("{s:O}", "ports", ports);
        http_respond_json(req, 200, j);
}

void api_port_unexpose(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        struct sandbox *sb = NULL;
        json_t *j;

        if (sandbox_table_get(a->cfg.table, p->name, false, NULL, &sb, NULL, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        preview_port_drop(&a->preview, p->name, p->port);
        if (store_port_delete(sandbox_table_store(a->cfg.table), p->name, p->port, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        j = json_pack("{s:i, s:s}", "port", p->port, "id", p->name);
        http_respond_json(req, 200, j);
        json_decref(j);
}

/* A wsConnect waiting for its sandbox. */
struct ws_wait {
        struct api_sandbox_wait wait;
        struct api *a;
        int port;
        char *fwd;
};

static void ws_ready(struct http_request *req, struct sandbox *sb, void *ud)
{
        struct ws_wait *w = ud;

        if (sb)
                preview_ws(&w->a->preview, req, sb, w->port, w->fwd);
        free(w->fwd);
        free(w);
}

/* GET /v1/sandboxes/{name}/ws/{port}[/path]: wsConnect. The path after the port (and the
 * query) is the target sent to the sandbox. */
void api_ws(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *target = http_request_target(req), *q = strchr(target, '?');
        _cleanup_free_ char *fwd = NULL;
        struct ws_wait *w;

        /* The raw target's path after /ws/{port}: find it by its decoded twin's length
         * is not safe, so rebuild it from the decoded path (percent-encoding what must
         * be) and the raw query. */
        {
                struct buf b = BUF_INIT;
                const char *rest = *p->tail ? p->tail : "/";
                int r = 0;

                for (const char *c = rest; *c && r >= 0; c++)
                        r = ((unsigned char)*c <= 0x20 || *c == '%' || *c == '?' || *c == '#' ||
                             (unsigned char)*c >= 0x7f)
                                    ? buf_printf(&b, "%%%02X", (unsigned char)*c)
                                    : buf_append(&b, c, 1);
                if (r >= 0 && q)
                        r = buf_append_str(&b, q);
                if (r < 0 || !(fwd = buf_steal(&b))) {
                        buf_free(&b);
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
        }
        w = malloc(sizeof(*w));
        if (!w) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        *w = (struct ws_wait){.a = a, .port = p->port, .fwd = fwd};
        fwd = NULL;
        api_sandbox_for(a, req, p->name, &w->wait, ws_ready, w);
}
