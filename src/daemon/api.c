/* Routing, auth, and the sandbox/health routes of the API (docs/api.md). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/api.h"
#include "daemon/ratelimit.h"
#include "daemon/ws.h"

#define CELLA_VERSION "0.1.0"

int api_new(const struct api_config *cfg, struct api **ret)
{
        struct api *a = calloc(1, sizeof(*a));

        if (!a)
                return -ENOMEM;
        a->cfg = *cfg;
        a->auth_fails = auth_limiter_new();
        if (!a->auth_fails) {
                free(a);
                return -ENOMEM;
        }
        if (a->cfg.image_import_max <= 0)
                a->cfg.image_import_max = CELLA_IMAGE_IMPORT_MAX;
        a->preview.table = cfg->table;
        a->preview.domain = cfg->preview_domain ? cfg->preview_domain : "localhost";
        a->preview.url_port = cfg->preview_url_port;
        *ret = a;
        return 0;
}

void api_free(struct api *a)
{
        if (a) {
                json_decref(a->images_busy);
                auth_limiter_free(a->auth_fails);
        }
        free(a);
}

void api_log_request(struct http_request *req, void *userdata)
{
        uint64_t us = time_mono_us() - http_request_start_us(req);
        const char *p = http_request_path(req);
        char path[256];
        size_t i;

        (void)userdata;
        /* The decoded path is the client's: no control bytes reach the log (one line per
         * request, no forged lines), and it is cut to a sane length. */
        for (i = 0; p[i] && i < sizeof(path) - 4; i++)
                path[i] = (unsigned char)p[i] < 0x20 || p[i] == 0x7f || p[i] == ' ' ? '?' : p[i];
        if (p[i]) {
                memcpy(path + i, "...", 3);
                i += 3;
        }
        path[i] = '\0';
        log_info("request method=%s path=%s status=%d duration_ms=%llu.%03llu",
                 http_request_method(req), path, http_request_status(req),
                 (unsigned long long)(us / 1000), (unsigned long long)(us % 1000));
}

static bool is(const struct http_request *req, const char *m)
{
        return strcmp(http_request_method(req), m) == 0;
}

static void method_not_allowed(struct http_request *req)
{
        http_respond_code(req, CELLA_E_METHOD_NOT_ALLOWED, "method %s not allowed on %s",
                          http_request_method(req), http_request_path(req));
}

static void health(struct api *a, struct http_request *req)
{
        json_t *j = json_pack("{s:s, s:s, s:I, s:o, s:o}", "status", "ok", "version", CELLA_VERSION,
                              "sandboxes", (json_int_t)sandbox_table_count(a->cfg.table), "pool",
                              sandbox_table_pool_info(a->cfg.table), "disk",
                              sandbox_table_disk_info(a->cfg.table));

        http_respond_json(req, 200, j);
        json_decref(j);
}

static void list_sandboxes(struct api *a, struct http_request *req)
{
        json_t *j = json_pack("{s:o}", "sandboxes", sandbox_table_list(a->cfg.table));

        if (!j) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        http_respond_json(req, 200, j);
        json_decref(j);
}

static void put_abort(struct http_request *req, void *ud);

/* PUT /v1/sandboxes/{id}: the body is read first; the name is checked again with the
 * body's normalizeId. */
struct put_ctx {
        struct api *a;
        char raw[CELLA_NAME_MAX * 4 + 1]; /* the name as given (checked again) */
        bool query_normalize;
};

static void put_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct put_ctx *ctx = ud;
        struct api_put_sandbox p;
        struct cella_error err = {0};
        char name[CELLA_NAME_MAX + 1];
        struct sandbox *sb = NULL;
        bool created = false;

        if (api_decode_put_sandbox(body, len, &p, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (sandbox_name_check(ctx->raw, strlen(ctx->raw), ctx->query_normalize || p.normalize_id,
                               name, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto done;
        }
        {
                struct sandbox_options o = {
                        .image = p.image,
                        .instance_type = p.instance_type,
                        .env = p.env,
                        .labels = p.labels,
                        .sleep_after_ms = p.sleep_after_ms,
                        .has_keep_alive = p.has_keep_alive,
                        .keep_alive = p.keep_alive,
                        .has_default_session = p.has_default_session,
                        .default_session = p.default_session,
                        .network = p.network,
                        .network_allow = p.network_allow,
                };

                if (sandbox_table_put(ctx->a->cfg.table, name, &o, &sb, &created, &err) < 0) {
                        http_respond_error(req, &err, NULL);
                        goto done;
                }
        }
        {
                json_t *info = sandbox_info(sb);

                sandbox_touch(sb);
                http_respond_json(req, created ? 201 : 200, info);
                json_decref(info);
        }
done:
        api_put_sandbox_done(&p);
out:
        http_request_set_userdata(req, NULL);
        free(ctx);
}

static void put_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

static void sandbox_route(struct api *a, struct http_request *req, const char *id, size_t idlen,
                          const char *rest)
{
        struct cella_error err = {0};
        char name[CELLA_NAME_MAX + 1];
        bool normalize = false;
        struct sandbox *sb = NULL;

        if (api_parse_bool(http_request_query(req, "normalizeId"), false, &normalize) < 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "normalizeId must be true, false, 1 or 0");
                return;
        }
        if (!*rest && is(req, "PUT")) {
                struct put_ctx *ctx;

                if (idlen >= sizeof(ctx->raw)) {
                        http_respond_code(req, CELLA_E_INVALID_SANDBOX_NAME,
                                          "sandbox name is too long");
                        return;
                }
                ctx = calloc(1, sizeof(*ctx));
                if (!ctx) {
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
                ctx->a = a;
                memcpy(ctx->raw, id, idlen);
                ctx->query_normalize = normalize;
                http_request_set_userdata(req, ctx);
                http_request_on_abort(req, put_abort, NULL);
                if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, put_body, ctx) < 0) {
                        http_request_set_userdata(req, NULL);
                        free(ctx);
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
                }
                return;
        }
        if (sandbox_name_check(id, idlen, normalize, name, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        if (!*rest) {
                if (is(req, "GET") || is(req, "HEAD")) {
                        json_t *info;

                        if (sandbox_table_get(a->cfg.table, name, false, NULL, &sb, NULL, &err) <
                            0) {
                                http_respond_error(req, &err, NULL);
                                return;
                        }
                        info = sandbox_info(sb);
                        http_respond_json(req, 200, info);
                        json_decref(info);
                } else if (is(req, "DELETE")) {
                        bool existed = false;
                        json_t *j;

                        if (sandbox_table_destroy(a->cfg.table, name, &existed, &err) < 0) {
                                http_respond_error(req, &err, NULL);
                                return;
                        }
                        preview_forget(&a->preview, name);
                        j = json_pack("{s:s, s:b}", "id", name, "destroyed", existed);
                        http_respond_json(req, 200, j);
                        json_decref(j);
                } else {
                        method_not_allowed(req);
                }
                return;
        }

        /* sub-routes: check the route and method before creating anything */
        enum { R_EXEC, R_FILES } kind;
        const char *sub = "";

        if (strcmp(rest, "/processes") == 0 || strncmp(rest, "/processes/", 11) == 0) {
                api_processes(a, req, name, rest + 10);
                return;
        }
        if (strcmp(rest, "/env") == 0) {
                if (!is(req, "POST"))
                        method_not_allowed(req);
                else
                        api_env(a, req, name);
                return;
        }
        if (strcmp(rest, "/ports") == 0 || strncmp(rest, "/ports/", 7) == 0) {
                api_ports(a, req, name, rest);
                return;
        }
        if (strncmp(rest, "/ws/", 4) == 0) {
                api_ws(a, req, name, rest + 4);
                return;
        }
        if (strncmp(rest, "/sessions", 9) == 0 && (rest[9] == '\0' || rest[9] == '/')) {
                api_sessions(a, req, name, rest);
                return;
        }
        if (strncmp(rest, "/contexts", 9) == 0 && (rest[9] == '\0' || rest[9] == '/')) {
                api_contexts(a, req, name, rest);
                return;
        }
        if (strcmp(rest, "/code") == 0) {
                if (!is(req, "POST"))
                        method_not_allowed(req);
                else
                        api_code(a, req, name);
                return;
        }
        if (strcmp(rest, "/pty") == 0) {
                if (!is(req, "GET"))
                        method_not_allowed(req);
                else
                        api_pty(a, req, name);
                return;
        }
        if (strcmp(rest, "/files/watch") == 0) {
                if (!is(req, "POST"))
                        method_not_allowed(req);
                else
                        api_watch(a, req, name);
                return;
        }
        if (strcmp(rest, "/git/checkout") == 0) {
                if (!is(req, "POST"))
                        method_not_allowed(req);
                else
                        api_git_checkout(a, req, name);
                return;
        }
        if (strcmp(rest, "/exec") == 0) {
                if (!is(req, "POST")) {
                        method_not_allowed(req);
                        return;
                }
                kind = R_EXEC;
        } else if (strcmp(rest, "/files") == 0) {
                if (!is(req, "GET") && !is(req, "HEAD") && !is(req, "PUT") && !is(req, "DELETE")) {
                        method_not_allowed(req);
                        return;
                }
                kind = R_FILES;
        } else if (strncmp(rest, "/files/", 7) == 0) {
                static const char *const posts[] = {"read", "write", "mkdir", "move"};
                static const char *const gets[] = {"list", "exists"};
                bool found = false;

                sub = rest + 7;
                for (size_t i = 0; i < ARRAY_SIZE(posts); i++)
                        if (strcmp(sub, posts[i]) == 0) {
                                if (!is(req, "POST")) {
                                        method_not_allowed(req);
                                        return;
                                }
                                found = true;
                        }
                for (size_t i = 0; i < ARRAY_SIZE(gets); i++)
                        if (strcmp(sub, gets[i]) == 0) {
                                if (!is(req, "GET") && !is(req, "HEAD")) {
                                        method_not_allowed(req);
                                        return;
                                }
                                found = true;
                        }
                if (!found) {
                        http_respond_code(req, CELLA_E_NOT_FOUND, "no route %s",
                                          http_request_path(req));
                        return;
                }
                kind = R_FILES;
        } else {
                http_respond_code(req, CELLA_E_NOT_FOUND, "no route %s", http_request_path(req));
                return;
        }

        if (kind == R_EXEC)
                api_exec(a, req, name);
        else
                api_files(a, req, name, sub);
}

/* host[:port] of a Host header or an origin's authority is a loopback name. */
static bool host_is_loopback(const char *h, size_t n)
{
        static const char lh[] = ".localhost";
        size_t hl = n;

        if (n > 0 && h[0] == '[') /* [v6]:port */
                return n >= 5 && strncmp(h, "[::1]", 5) == 0 && (n == 5 || h[5] == ':');
        for (size_t i = 0; i < n; i++)
                if (h[i] == ':') {
                        hl = i;
                        break;
                }
        if (hl == 9 && strncasecmp(h, "localhost", 9) == 0)
                return true;
        if (hl > sizeof(lh) - 1 && strncasecmp(h + hl - (sizeof(lh) - 1), lh, sizeof(lh) - 1) == 0)
                return true;
        if (hl >= 4 && strncmp(h, "127.", 4) == 0) {
                for (size_t i = 4; i < hl; i++)
                        if (!((h[i] >= '0' && h[i] <= '9') || h[i] == '.'))
                                return false;
                return true;
        }
        return false;
}

/* Browsers let any web page send "simple" cross-origin POSTs (no preflight) and DNS
 * rebinding lets a page reach a loopback port under its own name. So: a request that says
 * it comes from a web origin must come from the API's own origin, and without a token
 * (loopback-only mode) the Host must be a loopback name. Non-browser clients send no
 * Origin and a loopback Host, and are not affected. */
static bool request_from_allowed_origin(struct api *a, struct http_request *req)
{
        const char *host = http_request_header(req, "Host");
        const char *origin = http_request_header(req, "Origin");

        if (origin) {
                const char *auth = strstr(origin, "://");

                if (!host || !auth || strcasecmp(auth + 3, host) != 0)
                        return false;
        }
        if ((!a->cfg.token || !a->cfg.token[0]) && host && !host_is_loopback(host, strlen(host)))
                return false;
        return true;
}

static bool authorized(struct api *a, struct http_request *req)
{
        const char *h;

        if (!a->cfg.token || !a->cfg.token[0])
                return true;
        h = http_request_header(req, "Authorization");
        if (!h || strncasecmp(h, "Bearer ", 7) != 0)
                return false;
        h += 7;
        while (*h == ' ')
                h++;
        return auth_token_equal(h, a->cfg.token);
}

void api_shutdown(struct api *a)
{
        ws_close_all();
        preview_shutdown(&a->preview);
}

void api_set_preview_port(struct api *a, int port)
{
        a->preview.url_port = port;
}

/* The preview target of a request: its Host, or when the Host is not a preview host the
 * first host of its X-Forwarded-Host (a reverse proxy written with fetch cannot set Host).
 * 1 with *t, and *fwd_host (to free) when the target came from X-Forwarded-Host; 0 for an
 * API request; -EINVAL for a preview-shaped host that does not parse; -ENOMEM. */
static int preview_target_of(struct api *a, struct http_request *req, struct preview_target *t,
                             char **fwd_host)
{
        int r = preview_host_parse(http_request_header(req, "Host"), a->preview.domain, t);

        *fwd_host = NULL;
        if (r != 0)
                return r;
        return preview_forwarded_host_parse(http_request_header(req, "X-Forwarded-Host"),
                                            a->preview.domain, t, fwd_host);
}

/* The client's address has failed to authenticate too often lately: 429 (true). */
static bool auth_throttled(struct api *a, struct http_request *req, char addr[64])
{
        struct cella_error e = {0};
        char extra[64];

        if (http_request_peer(req, addr, 64) < 0)
                snprintf(addr, 64, "?");
        if (!auth_limiter_blocked(a->auth_fails, addr, time_mono_us() / 1000))
                return false;
        cella_error_set(&e, CELLA_E_TOO_MANY_REQUESTS,
                        "too many failed authentications from %s: retry later", addr);
        snprintf(extra, sizeof(extra), "Retry-After: %d\r\n", CELLA_HTTP_RETRY_AFTER_S);
        http_respond_error_headers(req, &e, NULL, extra);
        return true;
}

static void auth_failed(struct api *a, const char *addr)
{
        auth_limiter_failed(a->auth_fails, addr, time_mono_us() / 1000);
}

/* Answer req as a preview request when it is one (true). A wrong token counts as a failed
 * authentication of the client's address. */
static bool preview_request(struct api *a, struct http_request *req, bool preview_only)
{
        _cleanup_free_ char *fwd = NULL;
        struct preview_target pt;
        char addr[64];
        int r = preview_target_of(a, req, &pt, &fwd);

        if (r == 0 && !preview_only)
                return false;
        if (auth_throttled(a, req, addr))
                return true;
        if (r > 0) {
                preview_handle(&a->preview, req, &pt, fwd);
                /* preview_handle answers a wrong token at once (a proxied answer comes
                 * later): 404 now is INVALID_TOKEN */
                if (http_request_status(req) == 404)
                        auth_failed(a, addr);
        } else if (r == -ENOMEM) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
        } else {
                http_respond_code(req, CELLA_E_INVALID_TOKEN, "no such preview URL");
                auth_failed(a, addr);
        }
        return true;
}

void api_handle_preview(struct http_request *req, void *userdata)
{
        preview_request(userdata, req, true);
}

void api_handle(struct http_request *req, void *userdata)
{
        struct api *a = userdata;
        const char *path = http_request_path(req);

        /* Preview hosts first: the token in the host is the capability, and none of the
         * API's routes, auth or cross-origin checks apply to them (nor can a preview
         * page reach the API as its own origin). */
        if (preview_request(a, req, false))
                return;

        if (strcmp(path, "/v1/health") == 0) {
                if (is(req, "GET") || is(req, "HEAD"))
                        health(a, req);
                else
                        method_not_allowed(req);
                return;
        }
        if (!request_from_allowed_origin(a, req)) {
                http_respond_code(req, CELLA_E_PERMISSION_DENIED,
                                  "cross-origin request refused (Origin or Host is not this "
                                  "API's)");
                return;
        }
        if (a->cfg.token && a->cfg.token[0]) {
                char addr[64];

                if (auth_throttled(a, req, addr))
                        return;
                if (!authorized(a, req)) {
                        auth_failed(a, addr);
                        http_respond_code(req, CELLA_E_UNAUTHORIZED,
                                          "missing or invalid bearer token (Authorization: "
                                          "Bearer ...)");
                        return;
                }
        }
        if (strcmp(path, "/v1/sandboxes") == 0) {
                if (is(req, "GET") || is(req, "HEAD"))
                        list_sandboxes(a, req);
                else
                        method_not_allowed(req);
                return;
        }
        if (strncmp(path, "/v1/sandboxes/", 14) == 0) {
                const char *id = path + 14;
                const char *slash = strchr(id, '/');
                size_t idlen = slash ? (size_t)(slash - id) : strlen(id);

                sandbox_route(a, req, id, idlen, id + idlen);
                return;
        }
        if (strcmp(path, "/v1/images") == 0) {
                if (is(req, "GET") || is(req, "HEAD"))
                        api_images_list(a, req);
                else
                        method_not_allowed(req);
                return;
        }
        if (strncmp(path, "/v1/images/", 11) == 0) {
                const char *name = path + 11;
                const char *slash = strchr(name, '/');
                size_t len = slash ? (size_t)(slash - name) : strlen(name);
                char n[CELLA_NAME_MAX + 1];

                if (len > CELLA_NAME_MAX) {
                        http_respond_code(req, CELLA_E_VALIDATION_FAILED, "image name too long");
                        return;
                }
                memcpy(n, name, len);
                n[len] = '\0';
                if (!slash) {
                        if (is(req, "DELETE"))
                                api_images_delete(a, req, n);
                        else
                                method_not_allowed(req);
                        return;
                }
                if (strcmp(slash, "/build") == 0 || strcmp(slash, "/import") == 0) {
                        if (!is(req, "POST"))
                                method_not_allowed(req);
                        else if (slash[1] == 'b')
                                api_images_build(a, req, n);
                        else
                                api_images_import(a, req, n);
                        return;
                }
        }
        http_respond_code(req, CELLA_E_NOT_FOUND, "no route %s", path);
}
