/* libcella's terminal client: a WebSocket (RFC 6455) over a libcurl CONNECT_ONLY
 * connection (libcurl 7.88 has no ws:// of its own; this way TLS and the client's URL
 * handling still come from libcurl), framed by wslay in client mode (masking, pings,
 * the closing handshake). The handshake is written and read here; the server's
 * Sec-WebSocket-Accept is checked. See cella.h for the API. */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <wslay/wslay.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/macros.h"
#include "common/ws-key.h"

#define HEAD_MAX CELLA_CLIENT_WS_HEAD_MAX
#define ERROR_BODY_MAX CELLA_CLIENT_WS_ERROR_BODY_MAX
#define HANDSHAKE_TIMEOUT_MS CELLA_CLIENT_WS_HANDSHAKE_TIMEOUT_MS
#define MESSAGE_MAX CELLA_CLIENT_WS_MESSAGE_MAX /* a message from the server */

struct cella_pty {
        cella_client *c;
        CURL *curl;
        curl_socket_t fd;
        wslay_event_context_ptr ctx;
        struct buf in; /* received after the handshake head, not yet framed */
        bool eof;
        bool failed;
        int exit_code;
        const struct cella_pty_events *ev; /* during cella_pty_process */
        void *ud;
};

/* Wait until fd is ready for events (POLLIN/POLLOUT) or timeout. */
static int wait_fd(curl_socket_t fd, short events, int timeout_ms)
{
        struct pollfd p = {.fd = fd, .events = events};
        int r;

        do
                r = poll(&p, 1, timeout_ms);
        while (r < 0 && errno == EINTR);
        return r;
}

static int send_all(cella_pty *p, const char *data, size_t len)
{
        while (len > 0) {
                size_t n = 0;
                CURLcode rc = curl_easy_send(p->curl, data, len, &n);

                if (rc == CURLE_AGAIN) {
                        if (wait_fd(p->fd, POLLOUT, HANDSHAKE_TIMEOUT_MS) <= 0)
                                return -1;
                        continue;
                }
                if (rc != CURLE_OK)
                        return -1;
                data += n;
                len -= n;
        }
        return 0;
}

/* Receive into b until it holds `until` (a head terminator) or want bytes, or EOF. */
static int recv_until(cella_pty *p, struct buf *b, const char *until, size_t want, size_t max)
{
        for (;;) {
                char tmp[4096];
                size_t n = 0;
                CURLcode rc;

                if (until && b->len && memmem(b->data, b->len, until, strlen(until)))
                        return 0;
                if (!until && b->len >= want)
                        return 0;
                if (b->len >= max)
                        return -1;
                rc = curl_easy_recv(p->curl, tmp, MIN(sizeof(tmp), max - b->len), &n);
                if (rc == CURLE_AGAIN) {
                        if (wait_fd(p->fd, POLLIN, HANDSHAKE_TIMEOUT_MS) <= 0)
                                return -1;
                        continue;
                }
                if (rc != CURLE_OK)
                        return -1;
                if (n == 0)
                        return until ? -1 : 0; /* EOF */
                if (buf_append(b, tmp, n) < 0)
                        return -1;
        }
}

/* The value of header name in a response head (NUL-terminated copy into out). */
static bool head_header(const char *head, const char *name, char *out, size_t size)
{
        size_t nl = strlen(name);

        for (const char *l = strstr(head, "\r\n"); l; l = strstr(l, "\r\n")) {
                const char *v, *end;

                l += 2;
                if (strncasecmp(l, name, nl) != 0 || l[nl] != ':')
                        continue;
                v = l + nl + 1;
                while (*v == ' ' || *v == '\t')
                        v++;
                end = strstr(v, "\r\n");
                if (!end)
                        return false;
                while (end > v && (end[-1] == ' ' || end[-1] == '\t'))
                        end--;
                snprintf(out, size, "%.*s", (int)(end - v), v);
                return true;
        }
        return false;
}

/* ---- wslay callbacks ---- */

static ssize_t recv_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, int flags, void *ud)
{
        cella_pty *p = ud;
        size_t n = 0;
        CURLcode rc;

        (void)flags;
        if (p->in.len > 0) {
                n = MIN(len, p->in.len);
                memcpy(buf, p->in.data, n);
                buf_consume(&p->in, n);
                return (ssize_t)n;
        }
        rc = curl_easy_recv(p->curl, buf, len, &n);
        if (rc == CURLE_AGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (rc != CURLE_OK || n == 0) {
                p->eof = true;
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return (ssize_t)n;
}

static ssize_t send_cb(wslay_event_context_ptr ctx, const uint8_t *data, size_t len, int flags,
                       void *ud)
{
        cella_pty *p = ud;
        size_t n = 0;
        CURLcode rc = curl_easy_send(p->curl, data, len, &n);

        (void)flags;
        if (rc == CURLE_AGAIN) {
                wslay_event_set_error(ctx, WSLAY_ERR_WOULDBLOCK);
                return -1;
        }
        if (rc != CURLE_OK) {
                p->failed = true;
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return (ssize_t)n;
}

static int genmask_cb(wslay_event_context_ptr ctx, uint8_t *buf, size_t len, void *ud)
{
        (void)ud;
        if (getrandom(buf, len, 0) != (ssize_t)len) {
                wslay_event_set_error(ctx, WSLAY_ERR_CALLBACK_FAILURE);
                return -1;
        }
        return 0;
}

static void on_control(cella_pty *p, const uint8_t *msg, size_t len)
{
        const struct cella_pty_events *ev = p->ev;
        _cleanup_json_ json_t *j = json_loadb((const char *)msg, len, 0, NULL);
        const char *type = json_string_value(json_object_get(j, "type"));

        if (ev && ev->on_control)
                ev->on_control((const char *)msg, len, p->ud);
        if (type && strcmp(type, "ready") == 0) {
                if (ev && ev->on_ready)
                        ev->on_ready(p->ud);
        } else if (type && strcmp(type, "exit") == 0) {
                json_t *code = json_object_get(j, "code");

                p->exit_code = json_is_integer(code) ? (int)json_integer_value(code) : 255;
                if (ev && ev->on_exit)
                        ev->on_exit(p->exit_code, p->ud);
        }
}

static void on_msg_recv(wslay_event_context_ptr ctx, const struct wslay_event_on_msg_recv_arg *arg,
                        void *ud)
{
        cella_pty *p = ud;

        (void)ctx;
        if (arg->opcode == WSLAY_BINARY_FRAME) {
                if (p->ev && p->ev->on_output)
                        p->ev->on_output(arg->msg, arg->msg_length, p->ud);
        } else if (arg->opcode == WSLAY_TEXT_FRAME) {
                on_control(p, arg->msg, arg->msg_length);
        }
}

/* ---- the API ---- */

static int handshake(cella_pty *p, const char *url)
{
        static const struct wslay_event_callbacks cbs = {
                .recv_callback = recv_cb,
                .send_callback = send_cb,
                .genmask_callback = genmask_cb,
                .on_msg_recv_callback = on_msg_recv,
        };
        cella_client *c = p->c;
        _cleanup_buf_ struct buf req = BUF_INIT;
        _cleanup_buf_ struct buf head = BUF_INIT;
        char key[25], want[WS_ACCEPT_LEN + 1], got[64], *host = NULL, *port = NULL;
        char *path = NULL, *query = NULL;
        CURLU *u = curl_url();
        curl_socket_t fd = CURL_SOCKET_BAD;
        const char *end;
        long status = 0;
        CURLcode rc;
        int r = CELLA_ERR_NOMEM;

        if (!u || ws_new_key(key) < 0 || ws_accept_key(key, want) < 0)
                goto out;
        if (curl_url_set(u, CURLUPART_URL, url, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_HOST, &host, 0) != CURLUE_OK ||
            curl_url_get(u, CURLUPART_PATH, &path, 0) != CURLUE_OK) {
                client_set_error(c, "INVALID_URL", "cannot parse the API URL");
                r = CELLA_ERR_INVALID;
                goto out;
        }
        curl_url_get(u, CURLUPART_PORT, &port, 0);
        curl_url_get(u, CURLUPART_QUERY, &query, 0);
        curl_easy_setopt(p->curl, CURLOPT_URL, url);
        if (c->unix_path)
                curl_easy_setopt(p->curl, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
        curl_easy_setopt(p->curl, CURLOPT_CONNECT_ONLY, 1L);
        curl_easy_setopt(p->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(p->curl, CURLOPT_CONNECTTIMEOUT_MS, CELLA_CLIENT_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(p->curl, CURLOPT_TCP_NODELAY, 1L);
        rc = curl_easy_perform(p->curl);
        if (rc == CURLE_OK)
                rc = curl_easy_getinfo(p->curl, CURLINFO_ACTIVESOCKET, &fd);
        if (rc != CURLE_OK || fd == CURL_SOCKET_BAD) {
                char msg[256];

                snprintf(msg, sizeof(msg), "%s: %s", url, curl_easy_strerror(rc));
                client_set_error(c, "TRANSPORT_ERROR", msg);
                r = CELLA_ERR_TRANSPORT;
                goto out;
        }
        p->fd = fd;
        if (buf_printf(&req,
                       "GET %s%s%s HTTP/1.1\r\nHost: %s%s%s\r\nUpgrade: websocket\r\n"
                       "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\n"
                       "Sec-WebSocket-Version: 13\r\n%s%s\r\n",
                       path, query ? "?" : "", query ? query : "", host, port ? ":" : "",
                       port ? port : "", key, c->auth ? c->auth : "", c->auth ? "\r\n" : "") < 0)
                goto out;
        r = CELLA_ERR_TRANSPORT;
        if (send_all(p, req.data, req.len) < 0 ||
            recv_until(p, &head, "\r\n\r\n", 0, HEAD_MAX) < 0) {
                client_set_error(c, "TRANSPORT_ERROR", "no WebSocket handshake answer");
                goto out;
        }
        end = memmem(head.data, head.len, "\r\n\r\n", 4);
        if (sscanf(head.data, "HTTP/1.%*1d %3ld", &status) != 1) {
                client_set_error(c, "TRANSPORT_ERROR", "not an HTTP answer");
                goto out;
        }
        /* what follows the head: frames, or an error answer's body */
        if (buf_append(&p->in, end + 4, head.len - (size_t)(end + 4 - head.data)) < 0) {
                r = CELLA_ERR_NOMEM;
                goto out;
        }
        head.len = (size_t)(end + 2 - head.data);
        head.data[head.len] = '\0';
        if (status != 101) {
                size_t clen = ERROR_BODY_MAX;

                if (head_header(head.data, "Content-Length", got, sizeof(got)))
                        clen = MIN((size_t)strtoul(got, NULL, 10), (size_t)ERROR_BODY_MAX);
                recv_until(p, &p->in, NULL, clen, ERROR_BODY_MAX);
                if (p->in.data)
                        p->in.data[p->in.len] = '\0';
                r = client_api_error(c, status, &p->in);
                goto out;
        }
        if (!head_header(head.data, "Sec-WebSocket-Accept", got, sizeof(got)) ||
            strcmp(got, want) != 0) {
                client_set_error(c, "TRANSPORT_ERROR", "bad Sec-WebSocket-Accept from the server");
                r = CELLA_ERR_INVALID;
                goto out;
        }
        if (wslay_event_context_client_init(&p->ctx, &cbs, p) != 0) {
                r = CELLA_ERR_NOMEM;
                goto out;
        }
        wslay_event_config_set_max_recv_msg_length(p->ctx, MESSAGE_MAX);
        r = CELLA_OK;
out:
        curl_free(host);
        curl_free(port);
        curl_free(path);
        curl_free(query);
        curl_url_cleanup(u);
        return r;
}

int cella_pty_open(cella_client *c, const char *sandbox, const struct cella_pty_options *o,
                   cella_pty **ret)
{
        _cleanup_buf_ struct buf q = BUF_INIT;
        char *es = NULL, *url = NULL;
        cella_pty *p;
        int r = CELLA_ERR_NOMEM;

        if (!sandbox ||
            (o && (o->cols > CELLA_CLIENT_PTY_SIZE_MAX || o->rows > CELLA_CLIENT_PTY_SIZE_MAX)))
                return CELLA_ERR_INVALID;
        p = calloc(1, sizeof(*p));
        if (!p)
                return CELLA_ERR_NOMEM;
        p->c = c;
        p->exit_code = -1;
        p->fd = CURL_SOCKET_BAD;
        p->curl = curl_easy_init();
        if (!p->curl)
                goto fail;
        if (o && o->session_id && !(es = curl_easy_escape(p->curl, o->session_id, 0)))
                goto fail;
        if (buf_printf(&q, "%s%s%scols=%u&rows=%u", es ? "session=" : "", es ? es : "",
                       es ? "&" : "", o && o->cols ? o->cols : 80,
                       o && o->rows ? o->rows : 24) < 0 ||
            !(url = client_sandbox_url(c, sandbox, "/pty", q.data)))
                goto fail;
        r = handshake(p, url);
        if (r < 0)
                goto fail;
        curl_free(es);
        free(url);
        *ret = p;
        return CELLA_OK;
fail:
        curl_free(es);
        free(url);
        cella_pty_close(p);
        return r;
}

int cella_pty_fd(const cella_pty *p)
{
        return (int)p->fd;
}

bool cella_pty_want_write(const cella_pty *p)
{
        return p->ctx && wslay_event_want_write(p->ctx);
}

int cella_pty_process(cella_pty *p, const struct cella_pty_events *ev, void *userdata)
{
        int r;

        if (!p->ctx)
                return CELLA_ERR_INVALID;
        p->ev = ev;
        p->ud = userdata;
        r = wslay_event_recv(p->ctx);
        if (r == 0 || p->eof)
                r = wslay_event_send(p->ctx);
        p->ev = NULL;
        p->ud = NULL;
        if (p->eof || p->failed || r != 0)
                return 1;
        if (!wslay_event_want_read(p->ctx) && !wslay_event_want_write(p->ctx))
                return 1;
        return CELLA_OK;
}

static int queue(cella_pty *p, uint8_t opcode, const void *data, size_t len)
{
        struct wslay_event_msg m = {.opcode = opcode, .msg = data, .msg_length = len};

        if (!p->ctx || wslay_event_get_close_sent(p->ctx) || p->failed)
                return CELLA_ERR_TRANSPORT;
        if (wslay_event_queue_msg(p->ctx, &m) != 0)
                return CELLA_ERR_NOMEM;
        if (wslay_event_send(p->ctx) != 0)
                return CELLA_ERR_TRANSPORT;
        return CELLA_OK;
}

int cella_pty_send(cella_pty *p, const void *data, size_t len)
{
        return queue(p, WSLAY_BINARY_FRAME, data, len);
}

int cella_pty_send_control(cella_pty *p, const char *json)
{
        return queue(p, WSLAY_TEXT_FRAME, json, strlen(json));
}

int cella_pty_resize(cella_pty *p, unsigned cols, unsigned rows)
{
        char msg[96];

        snprintf(msg, sizeof(msg), "{\"type\":\"resize\",\"cols\":%u,\"rows\":%u}", cols, rows);
        return cella_pty_send_control(p, msg);
}

int cella_pty_exit_code(const cella_pty *p)
{
        return p->exit_code;
}

void cella_pty_close(cella_pty *p)
{
        if (!p)
                return;
        if (p->ctx) {
                if (!wslay_event_get_close_sent(p->ctx) && !p->eof && !p->failed) {
                        wslay_event_queue_close(p->ctx, WSLAY_CODE_NORMAL_CLOSURE, NULL, 0);
                        wslay_event_send(p->ctx);
                }
                wslay_event_context_free(p->ctx);
        }
        if (p->curl)
                curl_easy_cleanup(p->curl);
        buf_free(&p->in);
        free(p);
}
