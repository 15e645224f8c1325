/* The server's connections (see http-internal.h): the listener, accepting (with the
 * per-client and total caps, evicting the oldest idle connection), closing and shutting
 * down, and the deadlines.
 *
 * Deadlines are not one timer per connection: the server's sweep timer looks at every
 * connection's timestamps once a second (a few thousand comparisons), so that holding
 * thousands of trickling connections costs no timer churn. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "daemon/http.h"
#include "daemon/http-internal.h"
#include "daemon/metrics.h"

void http_conn_free(struct conn *c)
{
        buf_free(&c->in);
        buf_free(&c->url);
        buf_free(&c->field);
        buf_free(&c->value);
        free(c);
}

static void handle_closed(uv_handle_t *h)
{
        struct conn *c = h->data;

        if (--c->handles_open == 0)
                http_conn_free(c);
}

/* ---- client addresses ---- */

static void peer_key(const struct sockaddr_storage *ss, uint8_t key[16])
{
        memset(key, 0, 16);
        if (ss->ss_family == AF_INET6) {
                memcpy(key, &((const struct sockaddr_in6 *)ss)->sin6_addr, 16);
        } else if (ss->ss_family == AF_INET) {
                key[10] = key[11] = 0xff;
                memcpy(key + 12, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        }
}

/* A unix connection's key: its client's uid (SO_PEERCRED), in a range no IPv6 address of a
 * TCP client takes (ff00::/8 with the uid in the last four bytes is multicast). */
static int local_peer_key(struct conn *c, uint8_t key[16])
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        uv_os_fd_t fd;

        if (uv_fileno((uv_handle_t *)&c->pipe, &fd) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
                return -errno;
        c->peer_uid = cred.uid;
        memset(key, 0, 16);
        key[0] = 0xff;
        key[1] = 0x7f;
        memcpy(key + 12, &cred.uid, 4);
        return 0;
}

static unsigned peer_hash(const uint8_t key[16])
{
        uint32_t h = 2166136261u; /* FNV-1a */

        for (int i = 0; i < 16; i++)
                h = (h ^ key[i]) * 16777619u;
        return h % PEER_BUCKETS;
}

static struct peer *peer_find(struct http_server *srv, const uint8_t key[16])
{
        for (struct peer *p = srv->peers[peer_hash(key)]; p; p = p->next)
                if (memcmp(p->addr, key, 16) == 0)
                        return p;
        return NULL;
}

/* The address's entry with one more connection, or NULL without memory. */
static struct peer *peer_get(struct http_server *srv, const uint8_t key[16])
{
        struct peer *p = peer_find(srv, key);
        unsigned h;

        if (!p) {
                p = calloc(1, sizeof(*p));
                if (!p)
                        return NULL;
                memcpy(p->addr, key, 16);
                h = peer_hash(key);
                p->next = srv->peers[h];
                srv->peers[h] = p;
        }
        p->count++;
        return p;
}

static void peer_put(struct http_server *srv, struct peer *p)
{
        struct peer **pp;

        if (!p || --p->count > 0)
                return;
        for (pp = &srv->peers[peer_hash(p->addr)]; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        free(p);
}

void http_conn_close(struct conn *c)
{
        struct http_server *srv = c->srv;

        if (c->closing)
                return;
        c->closing = true;
        c->dead_input = true;
        http_conn_detach(c, true);
        if (c->fuzz)
                return;
        if (c->prev)
                c->prev->next = c->next;
        else
                srv->conns = c->next;
        if (c->next)
                c->next->prev = c->prev;
        else
                srv->tail = c->prev;
        srv->nconns--;
        metrics.connections_open--;
        peer_put(srv, c->peer);
        c->peer = NULL;
        c->handles_open = 2;
        uv_close((uv_handle_t *)&c->tcp, handle_closed);
        uv_close((uv_handle_t *)&c->kick, handle_closed);
}

/* Lingering: the client's bytes after the answer are dropped into one scratch buffer (the
 * loop is single-threaded). */
static char linger_scratch[16 * 1024];

static void linger_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
        (void)h;
        (void)suggested;
        *b = uv_buf_init(linger_scratch, sizeof(linger_scratch));
}

static void linger_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        struct conn *c = s->data;

        (void)b;
        if (nread < 0 || (c->linger_bytes += (size_t)nread) > CELLA_HTTP_LINGER_BYTES)
                http_conn_close(c);
}

static void shutdown_cb(uv_shutdown_t *sh, int status)
{
        struct conn *c = sh->data;

        /* The answer is flushed and the FIN sent. A client whose EOF has not come may still
         * have request bytes in flight or unread here: closing now would reset the
         * connection and could destroy the answer on its side; read on until its EOF
         * (or CELLA_HTTP_LINGER_MS / _BYTES, conn_sweep). */
        if (status == 0 && !c->eof && !c->closing && !c->srv->closing &&
            uv_read_start((uv_stream_t *)&c->tcp, linger_alloc, linger_read) == 0) {
                c->lingering = true;
                c->linger_ms = conn_now(c);
                return;
        }
        http_conn_close(c);
}

/* Close after the queued writes are flushed (a plain close would cancel them). */
void http_conn_shutdown(struct conn *c)
{
        c->dead_input = true;
        if (c->closing || c->shutting)
                return;
        if (c->fuzz) {
                c->closing = true;
                return;
        }
        c->shutting = true;
        uv_read_stop((uv_stream_t *)&c->tcp);
        c->reading = false;
        if (uv_shutdown(&c->shut, (uv_stream_t *)&c->tcp, shutdown_cb) < 0)
                http_conn_close(c);
}

/* A dispatched request's body did not arrive in time: 408 before any answer, else the
 * connection is closed. */
static void conn_body_timeout(struct conn *c, const char *what)
{
        struct http_request *req = c->cur;

        log_debug("http: %s %s: %s", req->method, http_request_path(req), what);
        if (req->begun || req->ended) {
                http_conn_close(c);
                return;
        }
        c->dead_input = true;
        req->keep_alive = false;
        req->body_mode = BODY_DISCARD;
        http_body_release(req);
        http_req_abort(req);
        http_respond_code(req, CELLA_E_REQUEST_TIMEOUT, "%s", what);
        if (c->cur == req && !c->closing)
                http_conn_close(c);
}

/* The deadlines of one connection (see http.h). */
static void conn_sweep(struct conn *c, uint64_t now)
{
        struct http_request *req = c->cur;
        bool queued = uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0;

        if (c->closing)
                return;
        if (c->lingering) {
                if (now - c->linger_ms >= CELLA_HTTP_LINGER_MS)
                        http_conn_close(c);
                return;
        }
        if (queued && now - c->write_ms >= CELLA_HTTP_SEND_TIMEOUT_MS) {
                log_debug("http: client took no answer bytes for %d s: closed",
                          CELLA_HTTP_SEND_TIMEOUT_MS / 1000);
                http_conn_close(c);
                return;
        }
        if (c->shutting || queued)
                return;
        if (!req) {
                if (!c->served ? now - c->head_ms >= CELLA_HTTP_HEADER_TIMEOUT_MS
                               : now - MAX(c->read_ms, c->write_ms) >= CELLA_HTTP_IDLE_TIMEOUT_MS)
                        http_conn_close(c);
        } else if (!req->dispatched) {
                if (now - c->head_ms >= CELLA_HTTP_HEADER_TIMEOUT_MS)
                        http_conn_send_error(c, CELLA_E_REQUEST_TIMEOUT);
        } else if (!req->body_complete && !req->body_paused) {
                if (req->body_mode == BODY_WHOLE &&
                    now - c->body_ms >= CELLA_HTTP_JSON_BODY_TIMEOUT_MS)
                        conn_body_timeout(c, "the request body did not arrive within "
                                             "60 s");
                else if (c->reading && now - c->read_ms >= CELLA_HTTP_BODY_IDLE_MS)
                        conn_body_timeout(c, "no byte of the request body for 30 s");
        }
}

static void sweep_cb(uv_timer_t *t)
{
        struct http_server *srv = t->data;
        uint64_t now = uv_now(srv->loop);
        struct conn *c = srv->conns, *next;

        for (; c; c = next) {
                next = c->next;
                conn_sweep(c, now);
        }
}

/* Make room for one more connection: close the oldest one that is not in a request (an
 * idle keep-alive connection, or one still sending its head) and has nothing queued.
 * false when every connection is busy. */
static bool server_evict(struct http_server *srv)
{
        for (struct conn *c = srv->tail; c; c = c->prev) {
                if (c->closing || c->shutting || (c->cur && c->cur->dispatched) ||
                    uv_stream_get_write_queue_size((uv_stream_t *)&c->tcp) > 0)
                        continue;
                log_debug("http: %u connections: the oldest waiting one closed", srv->nconns);
                http_conn_close(c);
                return true;
        }
        return false;
}

static void on_connection(uv_stream_t *ls, int status)
{
        struct http_server *srv = ls->data;
        struct sockaddr_storage ss;
        int sslen = sizeof(ss);
        uint8_t key[16];
        struct peer *p;
        struct conn *c;

        if (status < 0)
                return;
        c = calloc(1, sizeof(*c));
        if (!c)
                return; /* libuv's EMFILE path closes what it cannot accept */
        c->srv = srv;
        c->local = srv->cfg.unix_path != NULL;
        if (c->local)
                uv_pipe_init(srv->loop, &c->pipe, 0);
        else
                uv_tcp_init(srv->loop, &c->tcp);
        c->tcp.data = c;
        c->handles_open = 1;
        if (uv_accept(ls, (uv_stream_t *)&c->tcp) < 0 || srv->closing ||
            (c->local ? local_peer_key(c, key)
                      : uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sslen)) < 0) {
                uv_close((uv_handle_t *)&c->tcp, handle_closed);
                return;
        }
        if (!c->local)
                peer_key(&ss, key);
        p = peer_find(srv, key);
        if ((p && p->count >= srv->max_per_client) ||
            (srv->nconns >= srv->max_conns && !server_evict(srv)) || !(p = peer_get(srv, key))) {
                /* over the address's cap, or every connection busy: closed at once (a
                 * reset, so that nothing lingers in TIME_WAIT here) */
                if (c->local)
                        uv_close((uv_handle_t *)&c->pipe, handle_closed);
                else
                        uv_tcp_close_reset(&c->tcp, handle_closed);
                return;
        }
        c->peer = p;
        if (!c->local)
                uv_tcp_nodelay(&c->tcp, 1);
        uv_idle_init(srv->loop, &c->kick);
        c->kick.data = c;
        c->shut.data = c;
        http_parser_init(&c->parser, HTTP_REQUEST);
        c->parser.data = c;
        c->next = srv->conns;
        if (srv->conns)
                srv->conns->prev = c;
        else
                srv->tail = c;
        srv->conns = c;
        srv->nconns++;
        metrics.connections_open++;
        metrics.connections_accepted++;
        c->head_ms = c->read_ms = c->write_ms = uv_now(srv->loop);
        http_conn_update_reading(c);
        if (!c->reading)
                http_conn_close(c);
}

/* ---- server ---- */

static void server_closed(uv_handle_t *h)
{
        struct http_server *s = h->data;

        if (--s->handles_open == 0)
                free(s);
}

/* The connection limit the descriptor limit allows (cellad raises its soft limit to the
 * hard one at start). */
static unsigned fd_connection_limit(unsigned want)
{
        struct rlimit rl;
        rlim_t room;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
                return want;
        room = rl.rlim_cur > 2 * CELLA_HTTP_FD_RESERVE ? rl.rlim_cur - CELLA_HTTP_FD_RESERVE
                                                       : rl.rlim_cur / 2;
        if (room < want) {
                log_warn("http: %u connections at most (descriptor limit %llu)", (unsigned)room,
                         (unsigned long long)rl.rlim_cur);
                return (unsigned)room;
        }
        return want;
}

/* The unix listener at cfg->unix_path: a stale socket file there is removed (any other
 * file is left and refused); the socket takes its mode and group before it listens, so
 * that no client connects through a wider mode. */
static int unix_listen(struct http_server *s, struct cella_error *err)
{
        const struct http_server_config *cfg = &s->cfg;
        struct stat st;
        int r;

        if (lstat(cfg->unix_path, &st) == 0) {
                if (!S_ISSOCK(st.st_mode))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "listen on %s: a file that is not a socket is there",
                                               cfg->unix_path),
                               -EEXIST;
                if (unlink(cfg->unix_path) < 0 && errno != ENOENT)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "remove %s: %s",
                                               cfg->unix_path, strerror(errno)),
                               -errno;
        }
        r = uv_pipe_bind(&s->unix_listener, cfg->unix_path);
        if (r == 0 &&
            (chmod(cfg->unix_path, cfg->unix_mode) < 0 ||
             (cfg->unix_gid != (gid_t)-1 && chown(cfg->unix_path, (uid_t)-1, cfg->unix_gid) < 0)))
                r = -errno;
        if (r == 0)
                r = uv_listen((uv_stream_t *)&s->unix_listener, SOMAXCONN, on_connection);
        if (r < 0)
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "listen on %s: %s", cfg->unix_path,
                                uv_strerror(r));
        return r;
}

int http_server_new(uv_loop_t *loop, const struct http_server_config *cfg, struct http_server **ret,
                    struct cella_error *err)
{
        struct http_server *s;
        struct sockaddr_storage ss;
        struct sockaddr_storage bound;
        int namelen = sizeof(bound);
        int r;

        if (cfg->unix_path) {
                s = calloc(1, sizeof(*s));
                if (!s)
                        return -ENOMEM;
                s->loop = loop;
                s->cfg = *cfg;
                s->max_conns = fd_connection_limit(
                        cfg->max_connections ? cfg->max_connections : CELLA_HTTP_MAX_CONNECTIONS);
                s->max_per_client =
                        cfg->max_per_client ? cfg->max_per_client : CELLA_HTTP_MAX_PER_CLIENT;
                uv_pipe_init(loop, &s->unix_listener, 0);
                s->unix_listener.data = s;
                uv_timer_init(loop, &s->sweep);
                s->sweep.data = s;
                s->handles_open = 2;
                r = unix_listen(s, err);
                if (r < 0) {
                        s->cfg.unix_path = NULL; /* not ours to remove */
                        uv_close((uv_handle_t *)&s->unix_listener, server_closed);
                        uv_close((uv_handle_t *)&s->sweep, server_closed);
                        return r;
                }
                uv_timer_start(&s->sweep, sweep_cb, CELLA_HTTP_SWEEP_MS, CELLA_HTTP_SWEEP_MS);
                uv_unref((uv_handle_t *)&s->sweep);
                *ret = s;
                return 0;
        }
        if (uv_ip4_addr(cfg->host, cfg->port, (struct sockaddr_in *)&ss) != 0 &&
            uv_ip6_addr(cfg->host, cfg->port, (struct sockaddr_in6 *)&ss) != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "listen address '%s' is not an IP address", cfg->host),
                       -EINVAL;
        s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->loop = loop;
        s->cfg = *cfg;
        s->max_conns = fd_connection_limit(cfg->max_connections ? cfg->max_connections
                                                                : CELLA_HTTP_MAX_CONNECTIONS);
        s->max_per_client = cfg->max_per_client ? cfg->max_per_client : CELLA_HTTP_MAX_PER_CLIENT;
        uv_tcp_init(loop, &s->listener);
        s->listener.data = s;
        uv_timer_init(loop, &s->sweep);
        s->sweep.data = s;
        s->handles_open = 2;
        r = uv_tcp_bind(&s->listener, (struct sockaddr *)&ss, 0);
        if (r == 0)
                r = uv_listen((uv_stream_t *)&s->listener, SOMAXCONN, on_connection);
        if (r == 0)
                r = uv_tcp_getsockname(&s->listener, (struct sockaddr *)&bound, &namelen);
        if (r < 0) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "listen on %s:%d: %s", cfg->host,
                                cfg->port, uv_strerror(r));
                uv_close((uv_handle_t *)&s->listener, server_closed);
                uv_close((uv_handle_t *)&s->sweep, server_closed);
                return r;
        }
        uv_timer_start(&s->sweep, sweep_cb, CELLA_HTTP_SWEEP_MS, CELLA_HTTP_SWEEP_MS);
        uv_unref((uv_handle_t *)&s->sweep);
        if (bound.ss_family == AF_INET)
                s->port = ntohs(((struct sockaddr_in *)&bound)->sin_port);
        else
                s->port = ntohs(((struct sockaddr_in6 *)&bound)->sin6_port);
        *ret = s;
        return 0;
}

int http_server_port(const struct http_server *s)
{
        return s->port;
}

void http_server_free(struct http_server *s)
{
        if (!s)
                return;
        s->closing = true;
        while (s->conns)
                http_conn_close(s->conns);
        if (s->cfg.unix_path)
                unlink(s->cfg.unix_path);
        uv_close((uv_handle_t *)&s->listener, server_closed);
        uv_close((uv_handle_t *)&s->sweep, server_closed);
}
