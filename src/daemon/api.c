/* The API's dispatcher (docs/api.md; docs/architecture.md "The daemon's API"): preview
 * hosts first, then the route table (api-routes.c) for everything else: public routes
 * (health) before the cross-origin and bearer-token checks, the rest after; the path's
 * parameters checked; then the route's handler, 404 NOT_FOUND or 405 METHOD_NOT_ALLOWED. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/api-decode.h"
#include "daemon/backup-store.h"
#include "daemon/cluster-keys.h"
#include "daemon/cluster.h"
#include "daemon/cluster-auth.h"
#include "daemon/forward.h"
#include "daemon/api-routes.h"
#include "daemon/api-service.h"
#include "daemon/api.h"
#include "daemon/metrics.h"
#include "daemon/ratelimit.h"
#include "daemon/sandbox-directory.h"
#include "daemon/store.h"
#include "daemon/tenant.h"
#include "daemon/ws.h"
#include "common/ws-key.h"

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
        if (cfg->cluster)
                cluster_set_quota_source(cfg->cluster, api_quota_cluster, a);
        for (size_t i = 0; i < api_routes_count; i++)
                if (metrics_route(i, api_routes[i].pattern, api_routes[i].methods) < 0)
                        log_warn("metrics: route %s beyond METRICS_ROUTES_MAX: counted as "
                                 "unmatched",
                                 api_routes[i].pattern);
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
        metrics_http_done(http_request_tag(req), http_request_status(req));
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

static void method_not_allowed(struct http_request *req)
{
        http_respond_code(req, CELLA_E_METHOD_NOT_ALLOWED, "method %s not allowed on %s",
                          http_request_method(req), http_request_path(req));
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

/* Loopback-only mode's rules apply to req: cellad has no --token, or req came over its
 * unix socket, whose file's mode and owner decided who may connect (decision 0061). A
 * request without a tenant's key is then the admin's. */
static bool open_mode(struct api *a, struct http_request *req)
{
        return !a->cfg.token || !a->cfg.token[0] || http_request_is_local(req);
}

/* Browsers let any web page send "simple" cross-origin POSTs (no preflight) and DNS
 * rebinding lets a page reach a loopback port under its own name. So: a request that says
 * it comes from a web origin must come from the API's own origin, and without a token
 * (loopback-only mode, or the unix socket) the Host must be a loopback name. Non-browser
 * clients send no Origin and a loopback Host, and are not affected. */
static bool request_from_allowed_origin(struct api *a, struct http_request *req)
{
        const char *host = http_request_header(req, "Host");
        const char *origin = http_request_header(req, "Origin");

        if (origin) {
                const char *auth = strstr(origin, "://");

                if (!host || !auth || strcasecmp(auth + 3, host) != 0)
                        return false;
        }
        if (open_mode(a, req) && host && !host_is_loopback(host, strlen(host)))
                return false;
        return true;
}

/* The key a tenant's principal is made from (store_key_get's callback). */
struct key_check {
        const char *secret;
        struct principal *p;
};

static int key_found(const struct store_key *k, void *ud)
{
        struct key_check *c = ud;

        if (!apikey_secret_matches(c->secret, k->secret_sha256))
                return -EACCES;
        snprintf(c->p->tenant, sizeof(c->p->tenant), "%s", k->tenant);
        snprintf(c->p->key_id, sizeof(c->p->key_id), "%s", k->id);
        c->p->max_sandboxes = k->max_sandboxes;
        c->p->max_memory_bytes = k->max_memory_bytes;
        return 0;
}

/* A bearer token a browser's WebSocket carried in Sec-WebSocket-Protocol (it cannot set
 * Authorization), decoded: the dispatcher's, for one request at a time. */
struct ws_bearer {
        char token[CELLA_WS_BEARER_MAX + 1];
};

/* The bearer token of req, or NULL without one: its Authorization, or on a route that
 * allows it (API_ROUTE_WS_BEARER) a WebSocket upgrade's "cella.bearer." subprotocol
 * decoded into wb (one that does not decode is "" and fails as a wrong token would). */
static const char *bearer(struct http_request *req, const struct api_match *m, struct ws_bearer *wb)
{
        const char *h = http_request_header(req, "Authorization");

        if (!h && m && m->route && (m->route->flags & API_ROUTE_WS_BEARER) &&
            http_request_header(req, "Upgrade")) {
                int r = ws_protocol_bearer(http_request_header(req, "Sec-WebSocket-Protocol"),
                                           wb->token, sizeof(wb->token));

                if (r == 0)
                        return NULL;
                if (r < 0)
                        wb->token[0] = '\0';
                return wb->token;
        }
        if (!h || strncasecmp(h, "Bearer ", 7) != 0)
                return NULL;
        h += 7;
        while (*h == ' ')
                h++;
        return h;
}

/* Does req show a tenant's key (loopback-only mode checks only those)? */
static bool shows_key(struct http_request *req, const struct api_match *m, struct ws_bearer *wb)
{
        const char *h = bearer(req, m, wb);

        return h && strncmp(h, CELLA_KEY_PREFIX, sizeof(CELLA_KEY_PREFIX) - 1) == 0;
}

/* Who req comes from: 1 the admin (the --token; anyone in loopback-only mode who shows no
 * key), 0 a tenant's key (set as the request's principal: it is read from the registry
 * at every request, so a removed key stops at once), -1 neither. */
static int authenticate(struct api *a, struct http_request *req, const struct api_match *m,
                        struct ws_bearer *wb)
{
        bool open = open_mode(a, req);
        const char *h = bearer(req, m, wb);
        char id[CELLA_KEY_ID_LEN + 1], secret[CELLA_KEY_SECRET_LEN + 1];
        struct principal *p;
        int r;

        if (!open && h && auth_token_equal(h, a->cfg.token))
                return 1;
        if (!h || strncmp(h, CELLA_KEY_PREFIX, sizeof(CELLA_KEY_PREFIX) - 1) != 0)
                return open ? 1 : -1;
        if (apikey_parse(h, strlen(h), id, secret) < 0)
                return -1;
        p = calloc(1, sizeof(*p));
        if (!p)
                return -1;
        struct key_check c = {.secret = secret, .p = p};
        /* a cluster node's keys are etcd's, read from its copy (cluster-keys.h) */
        if (a->cfg.cluster)
                r = cluster_keys(a->cfg.cluster)
                            ? cluster_keys_get(cluster_keys(a->cfg.cluster), id, key_found, &c)
                            : -ENOENT;
        else
                r = store_key_get(sandbox_table_store(a->cfg.table), id, key_found, &c);
        explicit_bzero(secret, sizeof(secret));
        if (r < 0) {
                free(p);
                return -1;
        }
        http_request_set_auth(req, p, free);
        http_request_set_error_view(req, tenant_error_view);
        return 0;
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

void api_set_self_address(struct api *a, const char *host, int port)
{
        if (strcmp(host, "0.0.0.0") == 0 || host[0] == '\0')
                host = "127.0.0.1";
        else if (strcmp(host, "::") == 0)
                host = "::1";
        snprintf(a->self_url, sizeof(a->self_url),
                 strchr(host, ':') ? "http://[%s]:%d" : "http://%s:%d", host, port);
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

/* A preview request served here (after forward_resolve_preview, or at once). */
struct preview_here {
        struct api *a;
        struct preview_target pt;
        char *fwd;
        char addr[64];
};

static void preview_serve(struct http_request *req, bool here, void *ud)
{
        struct preview_here *h = ud;

        if (here) {
                preview_handle(&h->a->preview, req, &h->pt, h->fwd);
                /* preview_handle answers a wrong token at once (a proxied answer comes
                 * later): 404 now is INVALID_TOKEN */
                if (http_request_status(req) == 404)
                        auth_failed(h->a, h->addr);
        }
        free(h->fwd);
        free(h);
}

/* Is the preview id's sandbox (a default tenant's name, or a tenant's "<name>--<tenant>")
 * in the local table? */
static bool preview_is_local(struct api *a, const char *id)
{
        struct sandbox_directory *d = sandbox_table_directory(a->cfg.table);
        char internal[CELLA_NAME_MAX + 1];
        struct cella_error e = {0};
        struct sandbox *sb;

        return d->ops->get_now(d, id, &sb, &e) == 0 ||
               (tenant_preview_internal(id, internal) == 1 &&
                d->ops->get_now(d, internal, &sb, &e) == 0);
}

/* Answer req as a preview request when it is one (true). A wrong token counts as a failed
 * authentication of the client's address. A preview of a sandbox another node has is
 * relayed there (unless req was forwarded already). */
static bool preview_request(struct api *a, struct http_request *req, bool preview_only,
                            bool forwarded)
{
        _cleanup_free_ char *fwd = NULL;
        struct preview_target pt;
        char addr[64];
        int r = preview_target_of(a, req, &pt, &fwd);

        if (r == 0 && !preview_only)
                return false;
        http_request_set_tag(req, METRICS_TAG_PREVIEW);
        if (auth_throttled(a, req, addr))
                return true;
        if (r > 0) {
                struct preview_here *h = calloc(1, sizeof(*h));

                if (!h) {
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return true;
                }
                h->a = a;
                h->pt = pt;
                h->fwd = TAKE_PTR(fwd);
                memcpy(h->addr, addr, sizeof(h->addr));
                if (a->cfg.forward && !forwarded && !preview_is_local(a, pt.id))
                        forward_resolve_preview(a->cfg.forward, &a->preview, req, pt.id, h->fwd,
                                                preview_serve, h);
                else
                        preview_serve(req, true, h);
        } else if (r == -ENOMEM) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
        } else {
                http_respond_code(req, CELLA_E_INVALID_TOKEN, "no such preview URL");
                auth_failed(a, addr);
        }
        return true;
}

/* A request's X-Cella-Cluster checked: 1 forwarded (its principal set), 0 not, -1 answered
 * (refused). */
static int cluster_check(struct api *a, struct http_request *req)
{
        struct cella_error e = {0};
        char addr[64];
        int r;

        if (!http_request_header(req, CLUSTER_AUTH_HEADER))
                return 0;
        if (auth_throttled(a, req, addr))
                return -1;
        r = forward_check(a->cfg.forward, req, &e);
        if (r < 0) {
                auth_failed(a, addr);
                http_respond_error(req, &e, NULL);
        }
        return r;
}

void api_handle_preview(struct http_request *req, void *userdata)
{
        int fw = cluster_check(userdata, req);

        if (fw >= 0)
                preview_request(userdata, req, true, fw == 1);
}

/* The dispatcher's buffers for what api_args points at. */
struct args_buf {
        char name[CELLA_NAME_MAX + 1];
        struct principal acting;
        char param[CELLA_ID_MAX + 1];
};

/* A port of 1..6 digits at the start of s, in 1..CELLA_PORT_MAX; *end: after the digits. */
static long port_prefix(const char *s, const char **end)
{
        long port = 0;
        size_t i;

        for (i = 0; s[i] >= '0' && s[i] <= '9' && i < 6; i++)
                port = port * 10 + (s[i] - '0');
        *end = s + i;
        return i == 0 || port < 1 || port > CELLA_PORT_MAX ? -1 : port;
}

/* An id segment ({sid} or {pid}) into b->param; false after answering req. */
static bool id_param(struct http_request *req, const struct api_capture *c, bool session,
                     struct args_buf *b)
{
        if (c->len > 0 && c->len <= CELLA_ID_MAX) {
                memcpy(b->param, c->value, c->len);
                b->param[c->len] = '\0';
                if (cella_id_is_valid(b->param))
                        return true;
        }
        http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                          session ? "session id must be 1-%d characters of [A-Za-z0-9_.-]"
                                  : "process id must be 1..%d of [A-Za-z0-9_.-]",
                          CELLA_ID_MAX);
        return false;
}

/* Check the path's parameters, in the order they appear (a parameter is checked before
 * whatever follows it is looked at, so a bad one is answered even when the rest is not
 * a route), into p; false after answering req. */
static bool check_params(struct http_request *req, const struct api_match *m, struct api_args *p,
                         struct args_buf *b)
{
        for (size_t i = 0; i < m->n; i++) {
                const struct api_capture *c = &m->cap[i];
                struct cella_error err = {0};
                const char *end;
                long port;

#define IS(s) (c->name_len == sizeof(s) - 1 && memcmp(c->name, s, c->name_len) == 0)
                if (IS("id")) {
                        if (api_parse_bool(http_request_query(req, "normalizeId"), false,
                                           &p->normalize) < 0) {
                                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                                  "normalizeId must be true, false, 1 or 0");
                                return false;
                        }
                        p->raw = c->value;
                        p->raw_len = c->len;
                        if (m->status == 200 && (m->route->flags & API_ROUTE_RAW_ID))
                                continue;
                        if (sandbox_name_check(c->value, c->len, p->normalize, b->name, &err) < 0 ||
                            tenant_qualify(p->principal->tenant, b->name, b->name, &err) < 0) {
                                http_respond_error(req, &err, NULL);
                                return false;
                        }
                        p->name = b->name;
                } else if (IS("sid")) {
                        if (!id_param(req, c, true, b))
                                return false;
                        p->param = b->param;
                } else if (IS("pid")) {
                        if (!id_param(req, c, false, b))
                                return false;
                        p->param = b->param;
                } else if (IS("cid")) { /* the rest of the path */
                        if (!cella_id_is_valid(c->value)) {
                                http_respond_code(req, CELLA_E_CONTEXT_NOT_FOUND,
                                                  "no code context '%.64s'", c->value);
                                return false;
                        }
                        p->param = c->value;
                } else if (IS("port")) { /* the rest of the path: digits only */
                        port = port_prefix(c->value, &end);
                        if (port < 0 || *end) {
                                http_respond_code(req, CELLA_E_INVALID_PORT, "bad port '%s'",
                                                  c->value);
                                return false;
                        }
                        p->port = (int)port;
                } else if (IS("wsport")) { /* the rest of the path: digits, then a path */
                        port = port_prefix(c->value, &end);
                        if (port < 0 || (*end && *end != '/')) {
                                http_respond_code(req, CELLA_E_INVALID_PORT, "bad port in %s",
                                                  http_request_path(req));
                                return false;
                        }
                        p->port = (int)port;
                        p->tail = end;
                } else if (IS("key")) {
                        if (c->len != CELLA_KEY_ID_LEN) {
                                http_respond_code(req, CELLA_E_KEY_NOT_FOUND, "no key '%.*s'",
                                                  (int)(c->len > 64 ? 64 : c->len), c->value);
                                return false;
                        }
                        memcpy(b->param, c->value, c->len);
                        b->param[c->len] = '\0';
                        if (!apikey_id_is_valid(b->param)) {
                                http_respond_code(req, CELLA_E_KEY_NOT_FOUND, "no key '%s'",
                                                  b->param);
                                return false;
                        }
                        p->param = b->param;
                } else if (IS("bid")) { /* a backup's id (backup-store.h) */
                        if (c->len != BACKUP_ID_LEN || c->len > CELLA_ID_MAX) {
                                http_respond_code(req, CELLA_E_BACKUP_NOT_FOUND, "no backup '%.*s'",
                                                  (int)MIN(c->len, 64), c->value);
                                return false;
                        }
                        memcpy(b->param, c->value, c->len);
                        b->param[c->len] = '\0';
                        if (!backup_id_is_valid(b->param)) {
                                http_respond_code(req, CELLA_E_BACKUP_NOT_FOUND, "no backup '%s'",
                                                  b->param);
                                return false;
                        }
                        p->param = b->param;
                } else if (IS("image") || IS("snap")) {
                        if (c->len > CELLA_NAME_MAX) {
                                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                                  "image name too long");
                                return false;
                        }
                        memcpy(b->name, c->value, c->len);
                        b->name[c->len] = '\0';
                        p->name = b->name;
                }
#undef IS
        }
        return true;
}

/* A route's handler called once forwarding found the request is this node's to serve:
 * the dispatcher's arguments, copied (their pointers into the copy's buffers). */
struct route_here {
        struct api *a;
        api_handler handler;
        struct api_args p;
        struct args_buf b;
};

static void route_serve(struct http_request *req, bool here, void *ud)
{
        struct route_here *h = ud;

        if (here)
                h->handler(h->a, req, &h->p);
        free(h);
}

static bool is_method(struct http_request *req, const char *m)
{
        return strcmp(http_request_method(req), m) == 0;
}

/* Does req name a sandbox that another node may have (a route under /v1/sandboxes/{id})?
 * Its internal name into name (PUT checks its raw name here as it would without a
 * normalizeId in its body; one that needs it is served here). */
static bool sandbox_route_name(struct http_request *req, const struct api_match *m,
                               const struct api_args *p, char name[CELLA_NAME_MAX + 1])
{
        static const char sbx[] = "/v1/sandboxes/{id}";
        struct cella_error e = {0};

        if (strncmp(m->route->pattern, sbx, sizeof(sbx) - 1) != 0)
                return false;
        if (p->name) {
                snprintf(name, CELLA_NAME_MAX + 1, "%s", p->name);
                return true;
        }
        (void)req;
        return p->raw && sandbox_name_check(p->raw, p->raw_len, p->normalize, name, &e) == 0 &&
               tenant_qualify(p->principal->tenant, name, name, &e) == 0;
}

/* The handler of req's route, here or (a sandbox another node has, a new name placed on
 * another node) on that node through forwarding (forward.h). */
static void route_call(struct api *a, struct http_request *req, const struct api_match *m,
                       struct api_args *p, struct args_buf *b, bool forwarded)
{
        struct sandbox_directory *d = sandbox_table_directory(a->cfg.table);
        char name[CELLA_NAME_MAX + 1];
        struct cella_error e = {0};
        struct route_here *h;
        struct sandbox *sb;
        bool creates;

        if (!a->cfg.forward || forwarded || !sandbox_route_name(req, m, p, name) ||
            d->ops->get_now(d, name, &sb, &e) == 0) {
                m->route->handler(a, req, p);
                return;
        }
        h = malloc(sizeof(*h));
        if (!h) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        h->a = a;
        h->handler = m->route->handler;
        h->p = *p;
        h->b = *b;
        if (p->name == b->name)
                h->p.name = h->b.name;
        if (p->param == b->param)
                h->p.param = h->b.param;
        if (p->principal == &b->acting)
                h->p.principal = &h->b.acting;
        /* What creates a sandbox creates a name (api_sandbox_for): a write, or a WebSocket
         * upgrade; a GET, a HEAD, a DELETE or a sleep of a name nobody has is answered here. */
        creates = !(is_method(req, "GET") || is_method(req, "HEAD") || is_method(req, "DELETE") ||
                    strcmp(m->route->pattern, "/v1/sandboxes/{id}/sleep") == 0) ||
                  http_request_header(req, "Upgrade");
        forward_resolve(a->cfg.forward, &a->preview, req, name, creates, route_serve, h);
}

/* The route of the request: its parameters checked, then the handler, 404 or 405. */
static void route(struct api *a, struct http_request *req, const struct api_match *m,
                  bool forwarded)
{
        struct api_args p = {0};
        struct args_buf b;

        if (m->status == 200 && (m->route->flags & API_ROUTE_ADMIN) && !principal_of(req)->admin) {
                http_respond_code(req, CELLA_E_PERMISSION_DENIED,
                                  "%s %s is the admin's: a tenant's key may not call it",
                                  http_request_method(req), http_request_path(req));
                return;
        }
        p.principal = principal_acting(req, &b.acting);
        if (!p.principal || !check_params(req, m, &p, &b))
                return;
        if (m->status == 404)
                http_respond_code(req, CELLA_E_NOT_FOUND, "no route %s", http_request_path(req));
        else if (m->status == 405)
                method_not_allowed(req);
        else
                route_call(a, req, m, &p, &b, forwarded);
}

/* The route and method req is counted under in GET /metrics (unmatched: left untagged). */
static void tag_route(struct http_request *req, const struct api_match *m)
{
        size_t i = m->status == 200 ? (size_t)(m->route - api_routes) : METRICS_ROUTES_MAX;
        int mi = i < METRICS_ROUTES_MAX
                         ? metrics_method_index(m->route->methods, http_request_method(req))
                         : -1;

        if (mi >= 0)
                http_request_set_tag(req, METRICS_TAG_ROUTE(i, mi));
}

void api_handle(struct http_request *req, void *userdata)
{
        struct api *a = userdata;
        struct ws_bearer wb;
        struct api_match m;
        int r;
        /* A request another node forwarded: its authenticator checked, its principal the
         * original caller's (that node made the cross-origin and bearer-token checks). */
        int fw = cluster_check(a, req);

        if (fw < 0)
                return;
        /* Preview hosts first: the token in the host is the capability, and none of the
         * API's routes, auth or cross-origin checks apply to them (nor can a preview
         * page reach the API as its own origin). */
        if (preview_request(a, req, false, fw == 1))
                return;

        api_route_match(api_routes, api_routes_count, http_request_method(req),
                        http_request_path(req), &m);
        tag_route(req, &m);
        if (m.route && (m.route->flags & API_ROUTE_PUBLIC)) {
                route(a, req, &m, fw == 1);
                return;
        }
        if (fw == 1) {
                route(a, req, &m, true);
                return;
        }
        if (!request_from_allowed_origin(a, req)) {
                http_respond_code(req, CELLA_E_PERMISSION_DENIED,
                                  "cross-origin request refused (Origin or Host is not this "
                                  "API's)");
                return;
        }
        if (!open_mode(a, req) || shows_key(req, &m, &wb)) {
                char addr[64];

                if (auth_throttled(a, req, addr)) {
                        explicit_bzero(&wb, sizeof(wb));
                        return;
                }
                r = authenticate(a, req, &m, &wb);
                explicit_bzero(&wb, sizeof(wb));
                if (r < 0) {
                        auth_failed(a, addr);
                        http_respond_code(req, CELLA_E_UNAUTHORIZED,
                                          "missing or invalid bearer token (Authorization: "
                                          "Bearer ...)");
                        return;
                }
        }
        explicit_bzero(&wb, sizeof(wb)); /* a subprotocol's token shows_key decoded */
        route(a, req, &m, false);
}
