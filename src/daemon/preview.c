/* Exposed ports, preview URLs and the proxy (see preview.h; preview-internal.h for how
 * the files divide it): preview hosts and tokens, the heads sent each way, the cache of
 * exposed ports, and routing a request to its sandbox's port. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "common/name.h"
#include "daemon/preview.h"
#include "daemon/preview-internal.h"
#include "daemon/ratelimit.h"
#include "daemon/sandbox-directory.h"
#include "daemon/tenant.h"
#include "daemon/store.h"

/* ---- pure parts ---- */

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

static bool is_token_char(char c)
{
        return (c >= 'a' && c <= 'z') || is_digit(c) || c == '_';
}

bool preview_token_valid(const char *t)
{
        size_t n = strlen(t);

        if (n == 0 || n > CELLA_PREVIEW_TOKEN_MAX)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!is_token_char(t[i]))
                        return false;
        return true;
}

int preview_token_generate(char out[CELLA_PREVIEW_TOKEN_LEN + 1])
{
        static const char alphabet[] = "abcdefghijklmnopqrstuvwxyz0123456789_";
        const unsigned n = sizeof(alphabet) - 1; /* 37 */
        const unsigned limit = 256 - 256 % n;    /* rejection sampling: no bias */
        unsigned char rnd[64];
        size_t got = 0;

        while (got < CELLA_PREVIEW_TOKEN_LEN) {
                ssize_t r = getrandom(rnd, sizeof(rnd), 0);

                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                for (ssize_t i = 0; i < r && got < CELLA_PREVIEW_TOKEN_LEN; i++)
                        if (rnd[i] < limit)
                                out[got++] = alphabet[rnd[i] % n];
        }
        out[got] = '\0';
        return 0;
}

int preview_host_parse(const char *host, const char *domain, struct preview_target *ret)
{
        size_t hl, dl = strlen(domain), ll;
        const char *colon, *first, *last;
        struct cella_error e = {0};
        char label[256];
        unsigned long port = 0;

        if (!host || !host[0] || host[0] == '[' || dl == 0)
                return 0;
        colon = strchr(host, ':');
        hl = colon ? (size_t)(colon - host) : strlen(host);
        if (colon) {
                if (!colon[1])
                        return 0;
                for (const char *p = colon + 1; *p; p++)
                        if (!is_digit(*p))
                                return 0;
        }
        /* A trailing dot names the same host. */
        if (hl > 0 && host[hl - 1] == '.')
                hl--;
        if (hl < dl + 2 || host[hl - dl - 1] != '.' || strncasecmp(host + hl - dl, domain, dl) != 0)
                return 0;
        ll = hl - dl - 1;
        if (ll >= sizeof(label) || memchr(host, '.', ll) || !is_digit(host[0]) ||
            !memchr(host, '-', ll))
                return 0;
        for (size_t i = 0; i < ll; i++)
                label[i] =
                        (char)((host[i] >= 'A' && host[i] <= 'Z') ? host[i] - 'A' + 'a' : host[i]);
        label[ll] = '\0';
        /* {port}-{id}-{token}: ids hold '-', tokens do not */
        first = strchr(label, '-');
        last = strrchr(label, '-');
        if (first == last || first - label > 5)
                return -EINVAL;
        for (const char *p = label; p < first; p++) {
                if (!is_digit(*p))
                        return -EINVAL;
                port = port * 10 + (unsigned long)(*p - '0');
        }
        if (label[0] == '0' || port < 1 || port > CELLA_PORT_MAX)
                return -EINVAL;
        if (!preview_token_valid(last + 1))
                return -EINVAL;
        if (sandbox_name_check(first + 1, (size_t)(last - first - 1), false, ret->id, &e) < 0)
                return -EINVAL;
        ret->port = (int)port;
        memcpy(ret->token, last + 1, strlen(last + 1) + 1);
        return 1;
}

int preview_forwarded_host_parse(const char *value, const char *domain, struct preview_target *ret,
                                 char **ret_host)
{
        size_t len;
        char *host;
        int r;

        *ret_host = NULL;
        if (!value)
                return 0;
        value += strspn(value, " \t");
        len = strcspn(value, ",");
        while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
                len--;
        host = strndup(value, len);
        if (!host)
                return -ENOMEM;
        r = preview_host_parse(host, domain, ret);
        if (r > 0)
                *ret_host = host;
        else
                free(host);
        return r;
}

/* X-Cella-Cluster, a node's authenticator (cluster-auth.h), never reaches a sandbox's app,
 * which could replay it to another node; a client's is never relayed to a node. */
static bool hop_by_hop(const char *name)
{
        static const char *const names[] = {
                "Connection",      "Keep-Alive",         "Proxy-Connection", "TE",
                "Trailer",         "Transfer-Encoding",  "Upgrade",          "Proxy-Authorization",
                "Trailers",        "Proxy-Authenticate", "X-Forwarded-Host", "X-Forwarded-Proto",
                "X-Cella-Cluster",
        };

        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcasecmp(name, names[i]) == 0)
                        return true;
        return false;
}

/* Does the comma-separated token list v (NULL: none) hold tok (case-insensitive)? */
bool preview_header_has_token(const char *v, const char *tok)
{
        size_t tl = strlen(tok);

        while (v && *v) {
                size_t len;

                while (*v == ' ' || *v == '\t' || *v == ',')
                        v++;
                len = strcspn(v, " \t,");
                if (len == tl && strncasecmp(v, tok, tl) == 0)
                        return true;
                v += len;
        }
        return false;
}

/* Is name listed in a Connection header's value (comma-separated tokens)? */
static bool listed_in_connection(const struct preview_headers *h, const char *name)
{
        for (size_t i = 0; i < h->n; i++)
                if (strcasecmp(h->names[i], "Connection") == 0 &&
                    preview_header_has_token(h->values[i], name))
                        return true;
        return false;
}

/* Header values reach the sandbox or the client verbatim; the parser already refused
 * CR/LF inside them, but a value with one would split the head, so check again. */
static bool clean(const char *s)
{
        return !strpbrk(s, "\r\n");
}

int preview_request_head(struct buf *out, const char *method, const char *target,
                         const struct preview_headers *h, const char *client_addr,
                         const char *upgrade, const char *host_override,
                         enum preview_body *ret_body)
{
        const char *host = host_override, *xff = NULL;
        enum preview_body body = PREVIEW_BODY_NONE;
        int r;

        if (!clean(method) || !clean(target) || strchr(target, ' ') ||
            (host_override && !clean(host_override)))
                return -EINVAL;
        r = buf_printf(out, "%s %s HTTP/1.1\r\n", method, target);
        if (r >= 0 && host_override)
                r = buf_printf(out, "Host: %s\r\n", host_override);
        for (size_t i = 0; r >= 0 && i < h->n; i++) {
                const char *n = h->names[i], *v = h->values[i];

                if (!clean(n) || !clean(v))
                        return -EINVAL;
                if (strcasecmp(n, "Transfer-Encoding") == 0)
                        body = PREVIEW_BODY_CHUNKED;
                if (strcasecmp(n, "Content-Length") == 0 && body == PREVIEW_BODY_NONE)
                        body = PREVIEW_BODY_LENGTH;
                if (strcasecmp(n, "Host") == 0) {
                        if (host_override)
                                continue;
                        if (!host)
                                host = v;
                }
                /* Never the client's credentials for cellad (the API's bearer token on
                 * /ws/{port}); the app's own cookies pass. */
                if (strcasecmp(n, "Authorization") == 0)
                        continue;
                if (strcasecmp(n, "X-Forwarded-For") == 0) {
                        if (!xff)
                                xff = v;
                        continue;
                }
                if (hop_by_hop(n) || listed_in_connection(h, n))
                        continue;
                if (strcasecmp(n, "Content-Length") == 0 && body == PREVIEW_BODY_CHUNKED)
                        continue;
                r = buf_printf(out, "%s: %s\r\n", n, v);
        }
        /* Content-Length after Transfer-Encoding in the loop above: drop it too. */
        if (r >= 0 && body == PREVIEW_BODY_CHUNKED) {
                struct buf tmp = BUF_INIT;
                const char *p = out->data, *end = out->data + out->len;

                while (p < end) {
                        const char *eol = memchr(p, '\n', (size_t)(end - p));
                        size_t len = eol ? (size_t)(eol - p + 1) : (size_t)(end - p);

                        if (!(len > 15 && strncasecmp(p, "Content-Length:", 15) == 0) &&
                            buf_append(&tmp, p, len) < 0) {
                                buf_free(&tmp);
                                return -ENOMEM;
                        }
                        p += len;
                }
                buf_reset(out);
                r = buf_append(out, tmp.data, tmp.len);
                buf_free(&tmp);
                if (r >= 0)
                        r = buf_append_str(out, "Transfer-Encoding: chunked\r\n");
        }
        if (r >= 0 && client_addr)
                r = xff ? buf_printf(out, "X-Forwarded-For: %s, %s\r\n", xff, client_addr)
                        : buf_printf(out, "X-Forwarded-For: %s\r\n", client_addr);
        if (r >= 0 && host)
                r = buf_printf(out, "X-Forwarded-Host: %s\r\n", host);
        if (r >= 0)
                r = buf_append_str(out, "X-Forwarded-Proto: http\r\n");
        if (r >= 0 && upgrade) {
                if (!clean(upgrade))
                        return -EINVAL;
                r = buf_printf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n", upgrade);
        }
        if (r >= 0)
                r = buf_append_str(out, "\r\n");
        if (r < 0)
                return r;
        *ret_body = body;
        return 0;
}

int preview_response_headers(struct buf *out, const struct preview_headers *h, bool keep_upgrade)
{
        for (size_t i = 0; i < h->n; i++) {
                const char *n = h->names[i], *v = h->values[i];
                int r;

                if (!clean(n) || !clean(v))
                        return -EINVAL;
                if (keep_upgrade &&
                    (strcasecmp(n, "Connection") == 0 || strcasecmp(n, "Upgrade") == 0)) {
                        /* kept */
                } else if (strcasecmp(n, "Content-Length") == 0 ||
                           (hop_by_hop(n) && strcasecmp(n, "Proxy-Authenticate") != 0 &&
                            strncasecmp(n, "X-Forwarded-", 12) != 0) ||
                           listed_in_connection(h, n)) {
                        continue;
                }
                r = buf_printf(out, "%s: %s\r\n", n, v);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* ---- exposed ports, cached ---- */

/* The registry's port records as the proxy last saw them: every proxied request needs
 * one, and a SQLite read (with its file locks) per request is most of the proxy's own
 * cost. Changed only through this file (expose, unexpose) and preview_forget (destroy). */
struct port_rec {
        struct port_rec *next;
        char sandbox[CELLA_NAME_MAX + 1];
        int port;
        char token[CELLA_PREVIEW_TOKEN_MAX + 1];
        int64_t instance;
};

static unsigned cache_hash(const char *sandbox, int port)
{
        unsigned h = 5381;

        while (*sandbox)
                h = h * 33 + (unsigned char)*sandbox++;
        return (h * 33 + (unsigned)port) % PREVIEW_CACHE_BUCKETS;
}

static struct port_rec *cache_get(struct preview_config *cfg, const char *sandbox, int port)
{
        for (struct port_rec *r = cfg->cache[cache_hash(sandbox, port)]; r; r = r->next)
                if (r->port == port && strcmp(r->sandbox, sandbox) == 0)
                        return r;
        return NULL;
}

void preview_port_drop(struct preview_config *cfg, const char *sandbox, int port)
{
        for (unsigned i = 0; i < PREVIEW_CACHE_BUCKETS; i++) {
                if (port >= 0 && i != cache_hash(sandbox, port))
                        continue;
                for (struct port_rec **pp = &cfg->cache[i]; *pp;) {
                        struct port_rec *r = *pp;

                        if ((port < 0 || r->port == port) && strcmp(r->sandbox, sandbox) == 0) {
                                *pp = r->next;
                                free(r);
                        } else {
                                pp = &r->next;
                        }
                }
        }
}

void preview_port_remember(struct preview_config *cfg, const char *sandbox, int port,
                           const char *token, int64_t instance)
{
        struct port_rec *r = cache_get(cfg, sandbox, port);

        if (!r) {
                unsigned h = cache_hash(sandbox, port);

                r = calloc(1, sizeof(*r));
                if (!r)
                        return; /* the registry stays the truth */
                snprintf(r->sandbox, sizeof(r->sandbox), "%s", sandbox);
                r->port = port;
                r->next = cfg->cache[h];
                cfg->cache[h] = r;
        }
        snprintf(r->token, sizeof(r->token), "%s", token);
        r->instance = instance;
}

void preview_forget(struct preview_config *cfg, const char *sandbox)
{
        preview_port_drop(cfg, sandbox, -1);
}

/* ---- routing ---- */

/* The sandbox named id (internal) with port exposed under token: true with *ret_sb and
 * *ret_rec. */
static bool preview_find(struct preview_config *cfg, const char *id, const struct preview_target *t,
                         struct sandbox **ret_sb, struct port_rec **ret_rec)
{
        struct cella_error e = {0};
        char name[CELLA_PREVIEW_PORT_NAME_MAX + 1], token[CELLA_PREVIEW_TOKEN_MAX + 1];
        struct sandbox_directory *d = sandbox_table_directory(cfg->table);
        struct port_rec *rec;

        if (d->ops->get_now(d, id, ret_sb, &e) < 0)
                return false;
        rec = cache_get(cfg, id, t->port);
        if (!rec) {
                int64_t instance = 0;

                if (store_port_get(d->ops->store(d), id, t->port, name, sizeof(name), token,
                                   sizeof(token), &instance) == 0) {
                        preview_port_remember(cfg, id, t->port, token, instance);
                        rec = cache_get(cfg, id, t->port);
                }
        }
        if (!rec || !auth_token_equal(t->token, rec->token))
                return false;
        *ret_rec = rec;
        return true;
}

/* rec's instance re-read from the registry: a wake from a memory checkpoint carries the
 * exposures over to the restored PID 1 there (0050). */
static void port_refresh(struct preview_config *cfg, const char *id, int port,
                         struct port_rec **rec)
{
        struct sandbox_directory *d = sandbox_table_directory(cfg->table);
        char name[CELLA_PREVIEW_PORT_NAME_MAX + 1], token[CELLA_PREVIEW_TOKEN_MAX + 1];
        int64_t instance = 0;

        if (store_port_get(d->ops->store(d), id, port, name, sizeof(name), token, sizeof(token),
                           &instance) == 0 &&
            instance != (*rec)->instance) {
                preview_port_remember(cfg, id, port, token, instance);
                *rec = cache_get(cfg, id, port);
        }
}

/* A preview request waiting for its sandbox's wake from a memory checkpoint. */
struct preview_wake {
        struct preview_config *cfg;
        struct http_request *req;
        struct preview_target t;
        char *fwd_host;
};

static void preview_route(struct preview_config *cfg, struct http_request *req,
                          const struct preview_target *t, const char *fwd_host, bool woken);

static void on_preview_woken(struct sandbox *s, bool created, const struct cella_error *err,
                             void *userdata)
{
        struct preview_wake *w = userdata;

        (void)s;
        (void)created;
        if (err)
                http_respond_code(w->req, err->code, "the sandbox did not wake: %s", err->msg);
        else
                preview_route(w->cfg, w->req, &w->t, w->fwd_host, true);
        http_request_unref(w->req);
        free(w->fwd_host);
        free(w);
}

void preview_handle(struct preview_config *cfg, struct http_request *req,
                    const struct preview_target *t, const char *fwd_host)
{
        preview_route(cfg, req, t, fwd_host, false);
}

static void preview_route(struct preview_config *cfg, struct http_request *req,
                          const struct preview_target *t, const char *fwd_host, bool woken)
{
        struct sandbox *sb = NULL;
        struct port_rec *rec = NULL;
        char internal[CELLA_NAME_MAX + 1];
        const char *id = t->id;

        /* One answer for a missing sandbox, an unexposed port and a wrong token: the URL
         * reveals nothing about what exists. The id is a default tenant's name, or a
         * tenant's "<name>--<tenant>" (decision 0053): the token decides which. */
        if (!preview_find(cfg, t->id, t, &sb, &rec)) {
                if (!(tenant_preview_internal(t->id, internal) == 1 &&
                      preview_find(cfg, internal, t, &sb, &rec))) {
                        http_respond_code(req, CELLA_E_INVALID_TOKEN, "no such preview URL");
                        return;
                }
                id = internal;
        }
        /* A sandbox asleep with its memory is woken: the same processes answer once they
         * are restored (0050). Otherwise the proxy never wakes a sandbox; an URL of an
         * earlier run stays stale until exposed again. */
        if (!woken && sandbox_memory_asleep(sb)) {
                struct sandbox_directory *d = sandbox_table_directory(cfg->table);
                struct preview_wake *w = calloc(1, sizeof(*w));
                if (!w || (fwd_host && !(w->fwd_host = strdup(fwd_host)))) {
                        free(w);
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
                w->cfg = cfg;
                w->req = req;
                w->t = *t;
                http_request_ref(req);
                d->ops->get(d, id, true, NULL, on_preview_woken, w);
                return;
        }
        if (sandbox_running(sb) && sandbox_instance(sb) != rec->instance)
                port_refresh(cfg, id, t->port, &rec);
        if (!rec || !sandbox_running(sb) || sandbox_instance(sb) != rec->instance) {
                http_respond_code(req, CELLA_E_STALE_PREVIEW_URL,
                                  "the sandbox is not running, or restarted since port %d was "
                                  "exposed: expose it again",
                                  t->port);
                return;
        }
        preview_proxy_start(cfg, req, sb, t->port, http_request_target(req), fwd_host, false);
}

void preview_ws(struct preview_config *cfg, struct http_request *req, struct sandbox *sb, int port,
                const char *target)
{
        preview_proxy_start(cfg, req, sb, port, target, NULL, true);
}

void preview_shutdown(struct preview_config *cfg)
{
        while (cfg->live) {
                /* The clients' connections were closed with the server: what is left are
                 * relays after a 101 (their own sockets). */
                pxy_finish(cfg->live);
        }
        while (cfg->idle) {
                struct upconn *uc = cfg->idle;

                upconn_idle_unlink(uc);
                upconn_close(uc);
        }
        for (unsigned i = 0; i < PREVIEW_CACHE_BUCKETS; i++)
                while (cfg->cache[i]) {
                        struct port_rec *r = cfg->cache[i];

                        cfg->cache[i] = r->next;
                        free(r);
                }
}

int preview_url(const struct preview_config *cfg, const char *sandbox, int port, const char *token,
                char *out, size_t size)
{
        char id[CELLA_NAME_MAX + 1];
        int n;

        tenant_preview_id(sandbox, id); /* a tenant's: "<name>--<tenant>" */
        sandbox = id;
        if (cfg->url_port > 0 && cfg->url_port != 80)
                n = snprintf(out, size, "http://%d-%s-%s.%s:%d/", port, sandbox, token, cfg->domain,
                             cfg->url_port);
        else
                n = snprintf(out, size, "http://%d-%s-%s.%s/", port, sandbox, token, cfg->domain);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}
