/* Exposed ports, preview URLs and the proxy (see preview.h). */
#include <errno.h>
#include <http_parser.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "common/log.h"
#include "common/name.h"
#include "daemon/preview.h"
#include "daemon/ratelimit.h"
#include "daemon/sandbox-directory.h"
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

static bool hop_by_hop(const char *name)
{
        static const char *const names[] = {
                "Connection", "Keep-Alive",         "Proxy-Connection", "TE",
                "Trailer",    "Transfer-Encoding",  "Upgrade",          "Proxy-Authorization",
                "Trailers",   "Proxy-Authenticate", "X-Forwarded-Host", "X-Forwarded-Proto",
        };

        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (strcasecmp(name, names[i]) == 0)
                        return true;
        return false;
}

/* Is name listed in a Connection header's value (comma-separated tokens)? */
static bool listed_in_connection(const struct preview_headers *h, const char *name)
{
        size_t nl = strlen(name);

        for (size_t i = 0; i < h->n; i++) {
                const char *v = h->values[i];

                if (strcasecmp(h->names[i], "Connection") != 0)
                        continue;
                while (*v) {
                        size_t len;

                        while (*v == ' ' || *v == '\t' || *v == ',')
                                v++;
                        len = strcspn(v, " \t,");
                        if (len == nl && strncasecmp(v, name, nl) == 0)
                                return true;
                        v += len;
                }
        }
        return false;
}

static bool value_has_token(const char *v, const char *tok)
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

/* ---- the proxy ---- */

struct hdr {
        char *name;
        char *value;
};

/* A connection to a port inside a sandbox. Owned by one proxied request at a time; after
 * a response that leaves it reusable (keep-alive, nothing left over) it waits in the
 * config's idle list for the next request to the same port of the same run of the same
 * sandbox, so that a busy preview URL does not cost a connection per request. */
struct upconn {
        uv_tcp_t tcp; /* data: this */
        struct preview_config *cfg;
        struct pxy *owner;          /* NULL while idle or closing */
        struct upconn *prev, *next; /* cfg->idle */
        char sandbox[CELLA_NAME_MAX + 1];
        int port;
        int64_t instance;
        bool idle;    /* in cfg->idle */
        bool reading; /* up_read is installed: it stays while the connection is reused */
};

/* One proxied request, and after a 101 the relay of the two sockets. */
struct pxy {
        int refs; /* the logic, the open handles, client writes in flight */
        struct preview_config *cfg;
        struct pxy *prev, *next; /* cfg->live */
        struct http_request *req;
        struct sandbox *sb;
        int port;
        bool finished;
        char *upgrade; /* the client's Upgrade value, or NULL */

        struct upconn *uc;
        bool up_open;    /* uc is ours (one reference held for it) */
        bool reused;     /* uc came from the idle list */
        bool got_bytes;  /* the sandbox answered something on uc */
        unsigned writes; /* writes to uc in flight */
        int64_t instance;
        uv_loop_t *loop;
        bool up_connected;
        uv_connect_t connect;
        struct buf head; /* request head, sent on connect */
        enum preview_body body;
        bool body_done;
        bool body_waiting; /* the client body is paused until the sandbox takes bytes */

        http_parser parser;
        struct hdr *hdrs;
        size_t nhdrs;
        struct buf field, value;
        bool in_value;
        size_t head_bytes;
        bool resp_begun;
        bool resp_done;
        bool up_paused; /* upstream reads stopped: the client is slow */
        bool upgraded;

        /* relay */
        uv_tcp_t cl;
        bool cl_open;
        bool eof_up, eof_cl;
        bool read_up, read_cl;
        uv_shutdown_t sh_up, sh_cl;
};

static void pxy_unref(struct pxy *p)
{
        if (--p->refs > 0)
                return;
        for (size_t i = 0; i < p->nhdrs; i++) {
                free(p->hdrs[i].name);
                free(p->hdrs[i].value);
        }
        free(p->hdrs);
        buf_free(&p->field);
        buf_free(&p->value);
        buf_free(&p->head);
        free(p->upgrade);
        free(p);
}

static void on_handle_closed(uv_handle_t *h)
{
        pxy_unref(h->data);
}

static void on_upconn_closed(uv_handle_t *h)
{
        struct upconn *uc = h->data;
        struct pxy *o = uc->owner;

        free(uc);
        if (o)
                pxy_unref(o);
}

static void idle_unlink(struct upconn *uc)
{
        if (uc->prev)
                uc->prev->next = uc->next;
        else
                uc->cfg->idle = uc->next;
        if (uc->next)
                uc->next->prev = uc->prev;
        uc->prev = uc->next = NULL;
        uc->idle = false;
        uc->cfg->nidle--;
}

static void upconn_close(struct upconn *uc)
{
        uv_close((uv_handle_t *)&uc->tcp, on_upconn_closed);
}

/* p's connection goes to the idle list (p drops its reference on it). */
static void upconn_release(struct pxy *p)
{
        struct upconn *uc = p->uc;
        struct preview_config *cfg = p->cfg;

        p->uc = NULL;
        p->up_open = false;
        uc->owner = NULL;
        pxy_unref(p);
        /* It keeps reading (up_read): anything arriving while it is idle (the server
         * closing it, bytes nobody asked for) ends it. */
        uc->idle = true;
        uc->next = cfg->idle;
        if (cfg->idle)
                cfg->idle->prev = uc;
        cfg->idle = uc;
        cfg->nidle++;
        if (cfg->nidle > CELLA_PREVIEW_IDLE_MAX) {
                struct upconn *last = cfg->idle;

                while (last->next)
                        last = last->next;
                idle_unlink(last);
                upconn_close(last);
        }
}

static struct upconn *upconn_take(struct preview_config *cfg, const char *sandbox, int port,
                                  int64_t instance)
{
        for (struct upconn *uc = cfg->idle; uc; uc = uc->next)
                if (uc->port == port && uc->instance == instance &&
                    strcmp(uc->sandbox, sandbox) == 0) {
                        idle_unlink(uc);
                        return uc;
                }
        return NULL;
}

/* Done with the request: close the sockets; memory goes with the last reference. */
static void pxy_finish(struct pxy *p)
{
        if (p->finished)
                return;
        p->finished = true;
        if (p->prev)
                p->prev->next = p->next;
        else
                p->cfg->live = p->next;
        if (p->next)
                p->next->prev = p->prev;
        if (p->req) {
                http_request_on_abort(p->req, NULL, NULL);
                http_request_set_userdata(p->req, NULL);
                http_request_unref(p->req);
                p->req = NULL;
        }
        if (p->sb) {
                sandbox_unref(p->sb);
                p->sb = NULL;
        }
        if (p->up_open) {
                p->up_open = false;
                upconn_close(p->uc); /* its close drops p's reference */
        }
        if (p->cl_open) {
                p->cl_open = false;
                uv_close((uv_handle_t *)&p->cl, on_handle_closed);
        }
        pxy_unref(p);
}

static void pxy_fail(struct pxy *p, int code, const char *msg)
{
        if (p->req) {
                if (!p->resp_begun)
                        http_respond_code(p->req, code, "%s", msg);
                else
                        http_request_close(p->req); /* the client sees a short body */
        }
        pxy_finish(p);
}

static void on_client_abort(struct http_request *req, void *ud)
{
        struct pxy *p = ud;

        (void)req;
        pxy_finish(p);
}

static void touch(struct pxy *p)
{
        if (p->sb)
                sandbox_touch(p->sb);
}

/* ---- writes to the sandbox ---- */

struct upw {
        uv_write_t w;
        struct pxy *p;
        char data[];
};

static bool up_backlogged(struct pxy *p)
{
        return uv_stream_get_write_queue_size((uv_stream_t *)&p->uc->tcp) >
               CELLA_HTTP_WRITE_HIGH_WATER;
}

static void on_up_written(uv_write_t *w, int status)
{
        struct upw *u = (struct upw *)w;
        struct pxy *p = u->p;

        free(u);
        p->writes--;
        if (status < 0 || p->finished || !p->up_open)
                return;
        if (p->body_waiting && p->req && !up_backlogged(p)) {
                p->body_waiting = false;
                http_request_resume_body(p->req);
        }
}

static int up_write(struct pxy *p, const void *a, size_t alen, const void *b, size_t blen,
                    const void *c, size_t clen)
{
        struct upw *u = malloc(sizeof(*u) + alen + blen + clen);
        uv_buf_t buf;

        if (!u)
                return -ENOMEM;
        u->p = p;
        memcpy(u->data, a, alen);
        if (blen)
                memcpy(u->data + alen, b, blen);
        if (clen)
                memcpy(u->data + alen + blen, c, clen);
        buf = uv_buf_init(u->data, (unsigned)(alen + blen + clen));
        if (uv_write(&u->w, (uv_stream_t *)&p->uc->tcp, &buf, 1, on_up_written) < 0) {
                free(u);
                return -EPIPE;
        }
        p->writes++;
        return 0;
}

static size_t body_data(struct http_request *req, const char *data, size_t len, void *ud)
{
        struct pxy *p = ud;
        char line[24];
        int n;

        (void)req;
        if (p->finished)
                return len;
        if (!p->up_connected || up_backlogged(p)) {
                p->body_waiting = true;
                return 0;
        }
        touch(p);
        if (p->body == PREVIEW_BODY_CHUNKED) {
                n = snprintf(line, sizeof(line), "%zx\r\n", len);
                if (up_write(p, line, (size_t)n, data, len, "\r\n", 2) < 0)
                        pxy_fail(p, CELLA_E_BAD_GATEWAY, "write to the sandbox failed");
        } else if (up_write(p, data, len, NULL, 0, NULL, 0) < 0) {
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "write to the sandbox failed");
        }
        return len;
}

static void body_end_send(struct pxy *p)
{
        if (p->body == PREVIEW_BODY_CHUNKED && up_write(p, "0\r\n\r\n", 5, NULL, 0, NULL, 0) < 0)
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "write to the sandbox failed");
}

static void body_end(struct http_request *req, void *ud)
{
        struct pxy *p = ud;

        (void)req;
        p->body_done = true;
        if (p->up_connected && !p->finished)
                body_end_send(p);
}

static const struct http_body_ops body_ops = {body_data, body_end};

/* ---- the relay after a 101 ---- */

static void relay_start_reading(struct pxy *p);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
        (void)h;
        (void)suggested;
        b->base = malloc(64 * 1024);
        b->len = b->base ? 64 * 1024 : 0;
}

struct relw {
        uv_write_t w;
        struct pxy *p;
        char *data;
};

static void relay_check_close(struct pxy *p)
{
        if (p->eof_up && p->eof_cl)
                pxy_finish(p);
}

static void on_relay_written(uv_write_t *w, int status)
{
        struct relw *r = (struct relw *)w;
        struct pxy *p = r->p;

        free(r->data);
        free(r);
        if (p->finished)
                return;
        if (status < 0) {
                pxy_finish(p);
                return;
        }
        relay_start_reading(p);
}

/* Queue data (owned, freed here) on dst. */
static int relay_write(struct pxy *p, uv_tcp_t *dst, char *data, size_t len)
{
        struct relw *r = malloc(sizeof(*r));
        uv_buf_t b = uv_buf_init(data, (unsigned)len);

        if (!r) {
                free(data);
                return -ENOMEM;
        }
        r->p = p;
        r->data = data;
        if (uv_write(&r->w, (uv_stream_t *)dst, &b, 1, on_relay_written) < 0) {
                free(data);
                free(r);
                return -EPIPE;
        }
        return 0;
}

static int relay_copy(struct pxy *p, uv_tcp_t *dst, const char *data, size_t len)
{
        char *d;

        if (len == 0)
                return 0;
        d = malloc(len);
        if (!d)
                return -ENOMEM;
        memcpy(d, data, len);
        return relay_write(p, dst, d, len);
}

static void on_shutdown(uv_shutdown_t *sh, int status)
{
        (void)sh;
        (void)status;
}

static void relay_read(struct pxy *p, bool from_up, ssize_t nread, const uv_buf_t *b)
{
        uv_stream_t *s = from_up ? (uv_stream_t *)&p->uc->tcp : (uv_stream_t *)&p->cl;
        uv_tcp_t *dst = from_up ? &p->cl : &p->uc->tcp;

        if (p->finished) {
                free(b->base);
                return;
        }
        if (nread > 0) {
                touch(p);
                if (relay_write(p, dst, b->base, (size_t)nread) < 0) {
                        pxy_finish(p);
                        return;
                }
                /* Backpressure: stop reading this side while the other is slow. */
                if (uv_stream_get_write_queue_size((uv_stream_t *)dst) >
                    CELLA_HTTP_WRITE_HIGH_WATER) {
                        uv_read_stop(s);
                        if (from_up)
                                p->read_up = false;
                        else
                                p->read_cl = false;
                }
                return;
        }
        free(b->base);
        if (nread == 0)
                return;
        if (nread != UV_EOF) {
                pxy_finish(p);
                return;
        }
        /* EOF: pass the half-close on once what was queued is written. */
        uv_read_stop(s);
        if (from_up) {
                p->eof_up = true;
                p->read_up = false;
                uv_shutdown(&p->sh_cl, (uv_stream_t *)&p->cl, on_shutdown);
        } else {
                p->eof_cl = true;
                p->read_cl = false;
                uv_shutdown(&p->sh_up, (uv_stream_t *)&p->uc->tcp, on_shutdown);
        }
        relay_check_close(p);
}

static void relay_read_up(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        struct upconn *uc = s->data;

        if (!uc->owner) {
                free(b->base);
                return;
        }
        relay_read(uc->owner, true, nread, b);
}

static void relay_read_cl(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        relay_read(s->data, false, nread, b);
}

static void relay_start_reading(struct pxy *p)
{
        if (p->finished)
                return;
        if (!p->read_up && !p->eof_up &&
            uv_stream_get_write_queue_size((uv_stream_t *)&p->cl) <= CELLA_HTTP_WRITE_HIGH_WATER &&
            uv_read_start((uv_stream_t *)&p->uc->tcp, on_alloc, relay_read_up) == 0)
                p->read_up = true;
        if (!p->read_cl && !p->eof_cl &&
            uv_stream_get_write_queue_size((uv_stream_t *)&p->uc->tcp) <=
                    CELLA_HTTP_WRITE_HIGH_WATER &&
            uv_read_start((uv_stream_t *)&p->cl, on_alloc, relay_read_cl) == 0)
                p->read_cl = true;
}

/* The sandbox answered 101: take the client's socket, send it the 101 head and what the
 * sandbox sent after it, send the sandbox what the client sent after its request, then
 * relay both ways. */
static void relay_begin(struct pxy *p, const char *rest, size_t restlen)
{
        struct preview_headers h;
        const char **names = NULL, **values = NULL;
        _cleanup_buf_ struct buf head = BUF_INIT;
        _cleanup_buf_ struct buf leftover = BUF_INIT;
        int fd, r;

        uv_read_stop((uv_stream_t *)&p->uc->tcp);
        p->uc->reading = false;
        names = calloc(p->nhdrs + 1, sizeof(*names));
        values = calloc(p->nhdrs + 1, sizeof(*values));
        if (!names || !values) {
                free(names);
                free(values);
                pxy_fail(p, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        for (size_t i = 0; i < p->nhdrs; i++) {
                names[i] = p->hdrs[i].name;
                values[i] = p->hdrs[i].value;
        }
        h = (struct preview_headers){p->nhdrs, names, values};
        r = buf_append_str(&head, "HTTP/1.1 101 Switching Protocols\r\n");
        if (r >= 0)
                r = preview_response_headers(&head, &h, true);
        free(names);
        free(values);
        if (r >= 0)
                r = buf_append_str(&head, "\r\n");
        if (r < 0) {
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "bad upgrade answer from the sandbox");
                return;
        }
        r = http_request_take_socket(p->req, &fd, &leftover);
        if (r < 0) {
                pxy_fail(p, CELLA_E_INTERNAL_ERROR, "cannot take the connection over");
                return;
        }
        http_request_on_abort(p->req, NULL, NULL);
        http_request_unref(p->req);
        p->req = NULL;
        p->resp_begun = true;
        p->upgraded = true;
        uv_tcp_init(p->uc->tcp.loop, &p->cl);
        p->cl.data = p;
        p->refs++;
        p->cl_open = true;
        if (uv_tcp_open(&p->cl, fd) < 0) {
                close(fd);
                pxy_finish(p);
                return;
        }
        uv_tcp_nodelay(&p->cl, 1);
        if (relay_copy(p, &p->cl, head.data, head.len) < 0 ||
            relay_copy(p, &p->cl, rest, restlen) < 0 ||
            relay_copy(p, &p->uc->tcp, leftover.data, leftover.len) < 0) {
                pxy_finish(p);
                return;
        }
        relay_start_reading(p);
}

/* ---- the sandbox's response ---- */

static struct pxy *ppxy(http_parser *hp)
{
        return hp->data;
}

static int commit_hdr(struct pxy *p)
{
        struct hdr *n;

        if (!p->in_value)
                return 0;
        n = realloc(p->hdrs, (p->nhdrs + 1) * sizeof(*n));
        if (!n)
                return -1;
        p->hdrs = n;
        n[p->nhdrs].name = strndup(p->field.data ? p->field.data : "", p->field.len);
        n[p->nhdrs].value = strndup(p->value.data ? p->value.data : "", p->value.len);
        p->nhdrs++;
        buf_reset(&p->field);
        buf_reset(&p->value);
        p->in_value = false;
        if (!n[p->nhdrs - 1].name || !n[p->nhdrs - 1].value)
                return -1;
        return 0;
}

static int count_head(struct pxy *p, size_t n)
{
        p->head_bytes += n;
        return p->head_bytes > CELLA_PREVIEW_HEAD_MAX ? -1 : 0;
}

static int up_on_message_begin(http_parser *hp)
{
        struct pxy *p = ppxy(hp);

        for (size_t i = 0; i < p->nhdrs; i++) {
                free(p->hdrs[i].name);
                free(p->hdrs[i].value);
        }
        p->nhdrs = 0;
        p->head_bytes = 0;
        p->in_value = false;
        buf_reset(&p->field);
        buf_reset(&p->value);
        return 0;
}

static int up_on_field(http_parser *hp, const char *at, size_t len)
{
        struct pxy *p = ppxy(hp);

        if (p->in_value && commit_hdr(p) < 0)
                return -1;
        if (count_head(p, len) < 0 || buf_append(&p->field, at, len) < 0)
                return -1;
        return 0;
}

static int up_on_value(http_parser *hp, const char *at, size_t len)
{
        struct pxy *p = ppxy(hp);

        p->in_value = true;
        if (count_head(p, len) < 0 || buf_append(&p->value, at, len) < 0)
                return -1;
        return 0;
}

static int up_on_headers_complete(http_parser *hp)
{
        struct pxy *p = ppxy(hp);
        _cleanup_buf_ struct buf extra = BUF_INIT;
        const char **names, **values;
        struct preview_headers h;
        int64_t len = -1;
        int r;

        if (commit_hdr(p) < 0)
                return -1;
        if (hp->status_code == 101)
                return p->upgrade ? 0 : -1; /* relay_begin after the parser stops */
        if (hp->status_code >= 100 && hp->status_code < 200)
                return 0; /* 100 Continue and the like: the final answer follows */
        if (!p->req)
                return -1;
        names = calloc(p->nhdrs + 1, sizeof(*names));
        values = calloc(p->nhdrs + 1, sizeof(*values));
        if (!names || !values) {
                free(names);
                free(values);
                return -1;
        }
        for (size_t i = 0; i < p->nhdrs; i++) {
                names[i] = p->hdrs[i].name;
                values[i] = p->hdrs[i].value;
        }
        h = (struct preview_headers){p->nhdrs, names, values};
        r = preview_response_headers(&extra, &h, false);
        free(names);
        free(values);
        if (r < 0)
                return -1;
        if (hp->status_code == 204 || hp->status_code == 304)
                len = 0;
        else if (!(hp->flags & F_CHUNKED) && hp->content_length != ULLONG_MAX)
                len = (int64_t)hp->content_length;
        p->resp_begun = true;
        if (http_response_begin(p->req, hp->status_code, NULL, len, extra.data) < 0)
                return -1;
        /* The sandbox answers a HEAD without a body, whatever its headers say. */
        return http_request_is_head(p->req) ? 1 : 0;
}

/* up_read hands what it read on before returning (parsed, copied into the client's
 * queue, or copied into the relay), so one buffer serves every connection. */
static void on_up_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
        static char buf[64 * 1024];

        (void)h;
        (void)suggested;
        *b = uv_buf_init(buf, sizeof(buf));
}

static void up_read_restart(struct pxy *p);

static void on_client_took(struct http_request *req, int status, size_t len, void *ud)
{
        struct pxy *p = ud;

        (void)len;
        if (!p->finished && status == 0 && p->up_paused && req &&
            http_response_queued(req) <= CELLA_HTTP_WRITE_HIGH_WATER / 2)
                up_read_restart(p);
        pxy_unref(p);
}

static int up_on_body(http_parser *hp, const char *at, size_t len)
{
        struct pxy *p = ppxy(hp);

        if (!p->req)
                return -1;
        p->refs++;
        if (http_response_write(p->req, at, len, on_client_took, p) < 0) {
                p->refs--;
                return -1;
        }
        /* HEAD: written nothing and no callback will come */
        if (http_request_is_head(p->req))
                p->refs--;
        return 0;
}

static int up_on_message_complete(http_parser *hp)
{
        struct pxy *p = ppxy(hp);

        if (hp->status_code >= 100 && hp->status_code < 200)
                return 0;
        if (!p->req)
                return 0;
        p->resp_done = true;
        http_response_end(p->req);
        http_parser_pause(hp, 1);
        return 0;
}

static const http_parser_settings up_settings = {
        .on_message_begin = up_on_message_begin,
        .on_header_field = up_on_field,
        .on_header_value = up_on_value,
        .on_headers_complete = up_on_headers_complete,
        .on_body = up_on_body,
        .on_message_complete = up_on_message_complete,
};

static void up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b);

static void up_read_restart(struct pxy *p)
{
        if (p->up_open && p->up_paused &&
            uv_read_start((uv_stream_t *)&p->uc->tcp, on_up_alloc, up_read) == 0) {
                p->up_paused = false;
                p->uc->reading = true;
        }
}

static void up_connect(struct pxy *p);

/* Can p's connection serve another request? The answer was complete, framed (not ended
 * by a close), keep-alive, with nothing after it, and every byte of the request went. */
static bool reusable(struct pxy *p, size_t leftover)
{
        return p->resp_done && leftover == 0 && !p->upgrade && p->body_done && p->writes == 0 &&
               http_should_keep_alive(&p->parser) && p->up_open;
}

static void up_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        struct upconn *uc = s->data;
        struct pxy *p = uc->owner;
        size_t n;

        if (!p || p->finished) {
                if (!p && uc->idle && nread != 0) {
                        idle_unlink(uc);
                        upconn_close(uc);
                }
                return;
        }
        if (nread == 0) {
                return;
        }
        touch(p);
        if (nread < 0) {
                /* A reused connection the server closed just before our request came: try
                 * a new one (nothing was answered, and a bodiless request can be sent
                 * again). */
                if (p->reused && !p->got_bytes && p->body == PREVIEW_BODY_NONE) {
                        p->up_open = false;
                        upconn_close(p->uc); /* drops p's reference */
                        p->uc = NULL;
                        up_connect(p);
                        return;
                }
                if (nread == UV_EOF)
                        http_parser_execute(&p->parser, &up_settings, NULL, 0);
                if (p->resp_done || p->finished) {
                        if (!p->finished)
                                pxy_finish(p);
                        return;
                }
                pxy_fail(p, CELLA_E_BAD_GATEWAY,
                         "the sandbox closed the connection before answering");
                return;
        }
        p->got_bytes = true;
        n = http_parser_execute(&p->parser, &up_settings, b->base, (size_t)nread);
        if (p->finished) {
                return;
        }
        if (p->parser.upgrade && p->parser.status_code == 101 && p->upgrade) {
                relay_begin(p, b->base + n, (size_t)nread - n);
                return;
        }
        if (p->resp_done) {
                if (reusable(p, (size_t)nread - n))
                        upconn_release(p);
                pxy_finish(p);
                return;
        }
        if (HTTP_PARSER_ERRNO(&p->parser) != HPE_OK) {
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "malformed HTTP answer from the sandbox");
                return;
        }
        if (p->req && http_response_queued(p->req) > CELLA_HTTP_WRITE_HIGH_WATER) {
                uv_read_stop(s);
                uc->reading = false;
                p->up_paused = true;
        }
}

static void on_connected(uv_connect_t *c, int status)
{
        struct pxy *p = c->data;

        if (p->finished)
                return;
        if (status < 0) {
                char msg[160];

                snprintf(msg, sizeof(msg), "cannot connect to port %d in the sandbox: %s", p->port,
                         status == UV_ECONNREFUSED ? "nothing listens there" : uv_strerror(status));
                pxy_fail(p, CELLA_E_BAD_GATEWAY, msg);
                return;
        }
        p->up_connected = true;
        if (up_write(p, p->head.data, p->head.len, NULL, 0, NULL, 0) < 0) {
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "write to the sandbox failed");
                return;
        }
        if (p->body_waiting && p->req) {
                p->body_waiting = false;
                http_request_resume_body(p->req);
        }
        if (p->finished)
                return;
        if (p->body_done)
                body_end_send(p);
        if (p->finished || p->uc->reading)
                return;
        if (uv_read_start((uv_stream_t *)&p->uc->tcp, on_up_alloc, up_read) < 0)
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "read from the sandbox failed");
        else
                p->uc->reading = true;
}

/* Reach the port: an idle connection to it when there is one, else a new socket made in
 * the sandbox's network namespace. */
static void up_connect(struct pxy *p)
{
        struct sockaddr_in sin;
        struct upconn *uc;
        int fd, r;

        if (!p->reused) {
                uc = upconn_take(p->cfg, sandbox_name(p->sb), p->port, p->instance);
                if (uc) {
                        uc->owner = p;
                        p->uc = uc;
                        p->refs++;
                        p->up_open = true;
                        p->reused = true;
                        p->connect.data = p;
                        on_connected(&p->connect, 0);
                        return;
                }
        }
        p->reused = false;
        fd = sandbox_socket(p->sb);
        if (fd < 0) {
                pxy_fail(p, fd == -ESRCH ? CELLA_E_STALE_PREVIEW_URL : CELLA_E_BAD_GATEWAY,
                         fd == -ESRCH ? "the sandbox is not running"
                                      : "cannot make a socket in the sandbox");
                return;
        }
        uc = calloc(1, sizeof(*uc));
        if (!uc) {
                close(fd);
                pxy_fail(p, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        uc->cfg = p->cfg;
        uc->owner = p;
        uc->port = p->port;
        uc->instance = p->instance;
        snprintf(uc->sandbox, sizeof(uc->sandbox), "%s", sandbox_name(p->sb));
        uv_tcp_init(p->loop, &uc->tcp);
        uc->tcp.data = uc;
        p->uc = uc;
        p->refs++;
        p->up_open = true;
        r = uv_tcp_open(&uc->tcp, fd);
        if (r < 0) {
                close(fd);
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "cannot use a socket in the sandbox");
                return;
        }
        uv_tcp_nodelay(&uc->tcp, 1);
        uv_ip4_addr("127.0.0.1", p->port, &sin);
        p->connect.data = p;
        if (uv_tcp_connect(&p->connect, &uc->tcp, (struct sockaddr *)&sin, on_connected) < 0)
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "cannot connect in the sandbox");
}

/* Forward req to port in sb (running) with target as the request target (and
 * host_override as its Host: see preview_request_head). */
static void proxy_start(struct preview_config *cfg, struct http_request *req, struct sandbox *sb,
                        int port, const char *target, const char *host_override,
                        bool require_upgrade)
{
        const char *upgrade = http_request_header(req, "Upgrade");
        const char *conn = http_request_header(req, "Connection");
        size_t n = http_request_header_count(req);
        const char **names = NULL, **values = NULL;
        struct preview_headers h;
        char peer[64];
        struct pxy *p;
        int r;

        if (!upgrade || !value_has_token(conn, "upgrade"))
                upgrade = NULL;
        if (require_upgrade && (!upgrade || strcasecmp(upgrade, "websocket") != 0)) {
                http_respond_code(req, CELLA_E_BAD_REQUEST,
                                  "this route takes a WebSocket upgrade (Upgrade: websocket)");
                return;
        }
        p = calloc(1, sizeof(*p));
        names = calloc(n + 1, sizeof(*names));
        values = calloc(n + 1, sizeof(*values));
        if (!p || !names || !values || (upgrade && !(p->upgrade = strdup(upgrade)))) {
                free(names);
                free(values);
                free(p);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        for (size_t i = 0; i < n; i++)
                http_request_header_at(req, i, &names[i], &values[i]);
        h = (struct preview_headers){n, names, values};
        r = preview_request_head(&p->head, http_request_method(req), target, &h,
                                 http_request_peer(req, peer, sizeof(peer)) == 0 ? peer : NULL,
                                 p->upgrade, host_override, &p->body);
        free(names);
        free(values);
        if (r < 0) {
                buf_free(&p->head);
                free(p->upgrade);
                free(p);
                http_respond_code(req, CELLA_E_BAD_REQUEST, "cannot forward this request");
                return;
        }
        p->refs = 1;
        p->cfg = cfg;
        p->next = cfg->live;
        if (cfg->live)
                cfg->live->prev = p;
        cfg->live = p;
        p->req = req;
        http_request_ref(req);
        p->sb = sb;
        sandbox_ref(sb);
        p->port = port;
        p->instance = sandbox_instance(sb);
        p->loop = http_request_loop(req);
        http_parser_init(&p->parser, HTTP_RESPONSE);
        p->parser.data = p;
        http_request_set_userdata(req, p);
        http_request_on_abort(req, on_client_abort, p);
        if (p->body != PREVIEW_BODY_NONE) {
                if (http_request_stream_body(req, &body_ops, p) < 0) {
                        pxy_fail(p, CELLA_E_INTERNAL_ERROR, "cannot read the body");
                        return;
                }
        } else {
                p->body_done = true;
        }
        touch(p);
        up_connect(p);
}

void preview_handle(struct preview_config *cfg, struct http_request *req,
                    const struct preview_target *t, const char *fwd_host)
{
        struct cella_error e = {0};
        struct sandbox *sb = NULL;
        char name[CELLA_PREVIEW_PORT_NAME_MAX + 1], token[CELLA_PREVIEW_TOKEN_MAX + 1];
        struct sandbox_directory *d = sandbox_table_directory(cfg->table);
        struct port_rec *rec;

        /* One answer for a missing sandbox, an unexposed port and a wrong token: the URL
         * reveals nothing about what exists. */
        if (d->ops->get_now(d, t->id, false, NULL, &sb, NULL, &e) < 0) {
                http_respond_code(req, CELLA_E_INVALID_TOKEN, "no such preview URL");
                return;
        }
        rec = cache_get(cfg, t->id, t->port);
        if (!rec) {
                int64_t instance = 0;

                if (store_port_get(d->ops->store(d), t->id, t->port, name, sizeof(name), token,
                                   sizeof(token), &instance) == 0) {
                        preview_port_remember(cfg, t->id, t->port, token, instance);
                        rec = cache_get(cfg, t->id, t->port);
                }
        }
        if (!rec || !auth_token_equal(t->token, rec->token)) {
                http_respond_code(req, CELLA_E_INVALID_TOKEN, "no such preview URL");
                return;
        }
        /* Never wakes the sandbox; an URL of an earlier run stays stale until exposed
         * again. */
        if (!sandbox_running(sb) || sandbox_instance(sb) != rec->instance) {
                http_respond_code(req, CELLA_E_STALE_PREVIEW_URL,
                                  "the sandbox is not running, or restarted since port %d was "
                                  "exposed: expose it again",
                                  t->port);
                return;
        }
        proxy_start(cfg, req, sb, t->port, http_request_target(req), fwd_host, false);
}

void preview_ws(struct preview_config *cfg, struct http_request *req, struct sandbox *sb, int port,
                const char *target)
{
        proxy_start(cfg, req, sb, port, target, NULL, true);
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

                idle_unlink(uc);
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
        int n;

        if (cfg->url_port > 0 && cfg->url_port != 80)
                n = snprintf(out, size, "http://%d-%s-%s.%s:%d/", port, sandbox, token, cfg->domain,
                             cfg->url_port);
        else
                n = snprintf(out, size, "http://%d-%s-%s.%s/", port, sandbox, token, cfg->domain);
        return n < 0 || (size_t)n >= size ? -ENAMETOOLONG : 0;
}
