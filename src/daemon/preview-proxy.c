/* One proxied request (see preview-internal.h): the connection into the sandbox (an idle
 * one to the same port of the same run, else a new socket made in the sandbox's network
 * namespace), the request head and body sent with backpressure, the sandbox's response
 * parsed and streamed to the client, the connection kept for reuse when it can serve
 * another request. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "daemon/preview.h"
#include "daemon/preview-internal.h"

/* ---- the proxy ---- */

void pxy_unref(struct pxy *p)
{
        if (--p->refs > 0)
                return;
        http_headers_free(p->hdrs, p->nhdrs);
        buf_free(&p->field);
        buf_free(&p->value);
        buf_free(&p->head);
        free(p->upgrade);
        free(p);
}

void pxy_on_handle_closed(uv_handle_t *h)
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

void upconn_idle_unlink(struct upconn *uc)
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

void upconn_close(struct upconn *uc)
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
                upconn_idle_unlink(last);
                upconn_close(last);
        }
}

static struct upconn *upconn_take(struct preview_config *cfg, const char *sandbox, int port,
                                  int64_t instance)
{
        for (struct upconn *uc = cfg->idle; uc; uc = uc->next)
                if (uc->port == port && uc->instance == instance &&
                    strcmp(uc->sandbox, sandbox) == 0) {
                        upconn_idle_unlink(uc);
                        return uc;
                }
        return NULL;
}

/* A relayed request's head callback, once: the node's status, or -1. */
static void peer_head_once(struct pxy *p, int status)
{
        preview_peer_head_fn fn = p->peer_head;

        p->peer_head = NULL;
        if (fn)
                fn(p->peer_ud, status, p->peer_node);
}

/* Done with the request: close the sockets; memory goes with the last reference. */
void pxy_finish(struct pxy *p)
{
        if (p->finished)
                return;
        p->finished = true;
        if (p->peer_head)
                peer_head_once(p, 0); /* the client left before the node answered */
        if (p->upgrade)
                p->cfg->nupgrades--;
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
        if (p->fin_open) {
                p->fin_open = false;
                uv_close((uv_handle_t *)&p->fin, pxy_on_handle_closed);
        }
        if (p->cl_open) {
                p->cl_open = false;
                uv_close((uv_handle_t *)&p->cl, pxy_on_handle_closed);
        }
        pxy_unref(p);
}

/* What the upstream is called in messages. */
static const char *up_what(const struct pxy *p, char *out, size_t size)
{
        if (p->peer)
                snprintf(out, size, "node '%s'", p->peer_node);
        else
                snprintf(out, size, "the sandbox");
        return out;
}

void pxy_fail(struct pxy *p, int code, const char *msg)
{
        if (p->peer && !p->resp_begun)
                peer_head_once(p, -1);
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

void pxy_touch(struct pxy *p)
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
        pxy_touch(p);
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

/* ---- the sandbox's response ---- */

static struct pxy *ppxy(http_parser *hp)
{
        return hp->data;
}

static int commit_hdr(struct pxy *p)
{
        if (!p->in_value)
                return 0;
        /* A bounded count, not only bounded bytes: each header costs a pass over all of
         * them when the client's head is built (preview_response_headers). */
        if (p->nhdrs >= CELLA_PREVIEW_MAX_HEADERS) {
                p->head_over = true;
                return -1;
        }
        if (http_headers_add(&p->hdrs, &p->nhdrs, &p->field, &p->value) < 0)
                return -1;
        buf_reset(&p->field);
        buf_reset(&p->value);
        p->in_value = false;
        return 0;
}

static int count_head(struct pxy *p, size_t n)
{
        p->head_bytes += n;
        if (p->head_bytes > CELLA_PREVIEW_HEAD_MAX) {
                p->head_over = true;
                return -1;
        }
        return 0;
}

static int up_on_message_begin(http_parser *hp)
{
        struct pxy *p = ppxy(hp);

        http_headers_free(p->hdrs, p->nhdrs);
        p->hdrs = NULL;
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

int pxy_response_headers(struct pxy *p, struct buf *out, bool keep_upgrade)
{
        const char **names = calloc(p->nhdrs + 1, sizeof(*names));
        const char **values = calloc(p->nhdrs + 1, sizeof(*values));
        struct preview_headers h;
        int r = -ENOMEM;

        if (names && values) {
                for (size_t i = 0; i < p->nhdrs; i++) {
                        names[i] = p->hdrs[i].name;
                        values[i] = p->hdrs[i].value;
                }
                h = (struct preview_headers){p->nhdrs, names, values};
                r = preview_response_headers(out, &h, keep_upgrade);
        }
        free(names);
        free(values);
        return r;
}

static int up_on_headers_complete(http_parser *hp)
{
        struct pxy *p = ppxy(hp);
        _cleanup_buf_ struct buf extra = BUF_INIT;
        int64_t len = -1;

        if (commit_hdr(p) < 0)
                return -1;
        if (hp->status_code == 101) {
                if (p->upgrade)
                        peer_head_once(p, 101);
                return p->upgrade ? 0 : -1; /* pxy_relay_begin after the parser stops */
        }
        if (hp->status_code >= 100 && hp->status_code < 200)
                return 0; /* 100 Continue and the like: the final answer follows */
        if (!p->req)
                return -1;
        peer_head_once(p, hp->status_code);
        if (pxy_response_headers(p, &extra, false) < 0)
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
                        upconn_idle_unlink(uc);
                        upconn_close(uc);
                }
                return;
        }
        if (nread == 0) {
                return;
        }
        pxy_touch(p);
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
                char w[96], msg[160];

                snprintf(msg, sizeof(msg), "%s closed the connection before answering",
                         up_what(p, w, sizeof(w)));
                pxy_fail(p, p->peer ? CELLA_E_CLUSTER_UNAVAILABLE : CELLA_E_BAD_GATEWAY, msg);
                return;
        }
        p->got_bytes = true;
        n = http_parser_execute(&p->parser, &up_settings, b->base, (size_t)nread);
        if (p->finished) {
                return;
        }
        if (p->parser.upgrade && p->parser.status_code == 101 && p->upgrade) {
                pxy_relay_begin(p, b->base + n, (size_t)nread - n);
                return;
        }
        if (p->resp_done) {
                if (reusable(p, (size_t)nread - n))
                        upconn_release(p);
                pxy_finish(p);
                return;
        }
        if (HTTP_PARSER_ERRNO(&p->parser) != HPE_OK) {
                bool over = p->head_over || HTTP_PARSER_ERRNO(&p->parser) == HPE_HEADER_OVERFLOW;
                char msg[160], w[96];

                up_what(p, w, sizeof(w));
                if (over)
                        snprintf(msg, sizeof(msg),
                                 "the response head of %s is over %d KiB or %d header lines", w,
                                 CELLA_PREVIEW_HEAD_MAX / 1024, CELLA_PREVIEW_MAX_HEADERS);
                else
                        snprintf(msg, sizeof(msg), "malformed HTTP answer from %s", w);
                pxy_fail(p, CELLA_E_BAD_GATEWAY, msg);
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
        if (status < 0 && p->peer) {
                char msg[200];

                snprintf(msg, sizeof(msg), "node '%s' owns this name but cannot be reached: %s",
                         p->peer_node, uv_strerror(status));
                pxy_fail(p, CELLA_E_CLUSTER_UNAVAILABLE, msg);
                return;
        }
        if (status < 0) {
                char msg[160];

                snprintf(msg, sizeof(msg), "cannot connect to port %d in the sandbox: %s", p->port,
                         status == UV_ECONNREFUSED ? "nothing listens there" : uv_strerror(status));
                pxy_fail(p, CELLA_E_BAD_GATEWAY, msg);
                return;
        }
        p->up_connected = true;
        if (up_write(p, p->head.data, p->head.len, NULL, 0, NULL, 0) < 0) {
                pxy_fail(p, p->peer ? CELLA_E_CLUSTER_UNAVAILABLE : CELLA_E_BAD_GATEWAY,
                         "write to the upstream failed");
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
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "read from the upstream failed");
        else
                p->uc->reading = true;
}

/* In the idle list a node's connection is its name with port -1 (a sandbox's port is
 * 1..CELLA_PORT_MAX). */
#define PEER_PORT (-1)

/* Reach a node: an idle connection to it when there is one, else a new one. */
static void peer_connect(struct pxy *p)
{
        struct upconn *uc;

        if (!p->reused) {
                uc = upconn_take(p->cfg, p->peer_node, PEER_PORT, 0);
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
        uc = calloc(1, sizeof(*uc));
        if (!uc) {
                pxy_fail(p, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        uc->cfg = p->cfg;
        uc->owner = p;
        uc->port = PEER_PORT;
        snprintf(uc->sandbox, sizeof(uc->sandbox), "%s", p->peer_node);
        uv_tcp_init(p->loop, &uc->tcp);
        uc->tcp.data = uc;
        p->uc = uc;
        p->refs++;
        p->up_open = true;
        uv_tcp_nodelay(&uc->tcp, 1);
        p->connect.data = p;
        if (uv_tcp_connect(&p->connect, &uc->tcp, (struct sockaddr *)&p->peer_addr, on_connected) <
            0)
                on_connected(&p->connect, UV_ECONNREFUSED);
}

/* Reach the port: an idle connection to it when there is one, else a new socket made in
 * the sandbox's network namespace. */
static void up_connect(struct pxy *p)
{
        struct sockaddr_in sin;
        struct upconn *uc;
        int fd, r;

        if (p->peer) {
                peer_connect(p);
                return;
        }
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

/* A proxied request for req (target, host_override and extra as preview_request_head and
 * preview_peer), in cfg's live list, or NULL after answering req. */
static struct pxy *pxy_new(struct preview_config *cfg, struct http_request *req, const char *target,
                           const char *host_override, const char *extra, bool require_upgrade)
{
        const char *upgrade = http_request_header(req, "Upgrade");
        const char *conn = http_request_header(req, "Connection");
        size_t n = http_request_header_count(req);
        const char **names = NULL, **values = NULL;
        struct preview_headers h;
        char peer[64];
        struct pxy *p;
        int r;

        if (!upgrade || !preview_header_has_token(conn, "upgrade"))
                upgrade = NULL;
        if (require_upgrade && (!upgrade || strcasecmp(upgrade, "websocket") != 0)) {
                http_respond_code(req, CELLA_E_BAD_REQUEST,
                                  "this route takes a WebSocket upgrade (Upgrade: websocket)");
                return NULL;
        }
        /* A relay leaves the HTTP server's connection caps (the server forgets the socket it
         * hands over): this is what bounds the descriptors relays hold. */
        if (upgrade && cfg->nupgrades >= CELLA_PREVIEW_MAX_UPGRADES) {
                http_respond_code(req, CELLA_E_SANDBOX_UNAVAILABLE,
                                  "too many upgraded connections through the proxy (%d)",
                                  CELLA_PREVIEW_MAX_UPGRADES);
                return NULL;
        }
        p = calloc(1, sizeof(*p));
        names = calloc(n + 1, sizeof(*names));
        values = calloc(n + 1, sizeof(*values));
        if (!p || !names || !values || (upgrade && !(p->upgrade = strdup(upgrade)))) {
                free(names);
                free(values);
                free(p);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        for (size_t i = 0; i < n; i++)
                http_request_header_at(req, i, &names[i], &values[i]);
        h = (struct preview_headers){n, names, values};
        r = preview_request_head(&p->head, http_request_method(req), target, &h,
                                 http_request_peer(req, peer, sizeof(peer)) == 0 ? peer : NULL,
                                 p->upgrade, host_override, &p->body);
        free(names);
        free(values);
        /* extra lines go before the head's empty line */
        if (r >= 0 && extra && extra[0]) {
                p->head.len -= 2;
                r = buf_append_str(&p->head, extra);
                if (r >= 0)
                        r = buf_append_str(&p->head, "\r\n");
        }
        if (r < 0) {
                buf_free(&p->head);
                free(p->upgrade);
                free(p);
                http_respond_code(req, CELLA_E_BAD_REQUEST, "cannot forward this request");
                return NULL;
        }
        p->refs = 1;
        p->cfg = cfg;
        p->next = cfg->live;
        if (cfg->live)
                cfg->live->prev = p;
        cfg->live = p;
        if (p->upgrade)
                cfg->nupgrades++;
        p->req = req;
        http_request_ref(req);
        p->loop = http_request_loop(req);
        http_parser_init(&p->parser, HTTP_RESPONSE);
        p->parser.data = p;
        return p;
}

/* Stream req's body (if any) and connect. */
static void pxy_go(struct pxy *p)
{
        struct http_request *req = p->req;

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
        pxy_touch(p);
        up_connect(p);
}

/* Forward req to port in sb (running) with target as the request target (and
 * host_override as its Host: see preview_request_head). */
void preview_proxy_start(struct preview_config *cfg, struct http_request *req, struct sandbox *sb,
                         int port, const char *target, const char *host_override,
                         bool require_upgrade)
{
        struct pxy *p = pxy_new(cfg, req, target, host_override, NULL, require_upgrade);

        if (!p)
                return;
        p->sb = sb;
        sandbox_ref(sb);
        p->port = port;
        p->instance = sandbox_instance(sb);
        pxy_go(p);
}

void preview_proxy_peer(struct preview_config *cfg, struct http_request *req,
                        const struct preview_peer *peer)
{
        struct pxy *p;
        size_t alen = peer->addr->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
                                                        : sizeof(struct sockaddr_in);

        p = pxy_new(cfg, req, peer->target, peer->host_override, peer->extra, false);
        if (!p) {
                if (peer->head)
                        peer->head(peer->ud, -1, peer->node);
                return;
        }
        p->peer = true;
        memcpy(&p->peer_addr, peer->addr, alen);
        snprintf(p->peer_node, sizeof(p->peer_node), "%s", peer->node);
        p->peer_head = peer->head;
        p->peer_ud = peer->ud;
        pxy_go(p);
}
