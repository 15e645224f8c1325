/* Exposed ports, preview URLs and the proxy to ports inside sandboxes
 * (docs/decisions/0018-preview-urls.md).
 *
 * A preview URL is http://{port}-{id}-{token}.{domain}[:daemon-port]/: a request whose Host
 * has that shape, or whose Host is not one but whose X-Forwarded-Host's first host is (a
 * reverse proxy written with fetch cannot set Host), goes to preview_handle() before the
 * API sees it (the token is the capability; no API auth). The proxy reaches
 * 127.0.0.1:{port} in the sandbox's network namespace through a socket created there
 * (sandbox_socket), so it works whatever the sandbox's network mode and never exposes a
 * port on the host. Bodies stream both ways with backpressure; a 101 answer turns the
 * connection into a raw byte relay (WebSockets). The routes that expose and list ports
 * are the API's (api-ports.c); this module keeps the proxy and its cache of exposed ports. */
#ifndef CELLA_DAEMON_PREVIEW_H
#define CELLA_DAEMON_PREVIEW_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/limits.h"
#include "daemon/http.h"
#include "daemon/sandbox.h"

struct preview_target {
        int port;
        char id[CELLA_NAME_MAX + 1];
        char token[CELLA_PREVIEW_TOKEN_MAX + 1];
};

/* Is host (a Host header: name[:port]) a preview host under domain? 1 with *ret filled, 0
 * when it is not one (the API's), -EINVAL when it has the shape of one (a label starting
 * with a digit and holding a '-', directly under domain) but is malformed. Case-insensitive;
 * the id comes out lower case. */
int preview_host_parse(const char *host, const char *domain, struct preview_target *ret);
/* The same for an X-Forwarded-Host value (NULL: none): its first host (a comma-separated
 * list: the first is the original client's), trimmed of spaces and tabs. On 1 *ret_host is
 * that host (malloc'd, the caller frees it), else NULL; -ENOMEM when out of memory. */
int preview_forwarded_host_parse(const char *value, const char *domain, struct preview_target *ret,
                                 char **ret_host);

/* A token in a preview host: 1..CELLA_PREVIEW_TOKEN_MAX of [a-z0-9_] (a custom one given
 * to POST /ports must also have CELLA_PREVIEW_TOKEN_MIN). */
bool preview_token_valid(const char *t);
/* CELLA_PREVIEW_TOKEN_LEN characters of [a-z0-9_] from getrandom, NUL-terminated. */
int preview_token_generate(char out[CELLA_PREVIEW_TOKEN_LEN + 1]);

/* A header list (borrowed strings). */
struct preview_headers {
        size_t n;
        const char *const *names;
        const char *const *values;
};

enum preview_body { PREVIEW_BODY_NONE, PREVIEW_BODY_LENGTH, PREVIEW_BODY_CHUNKED };

/* The request head sent to the sandbox: method and target as received, the client's
 * headers without hop-by-hop ones (Connection, Keep-Alive, Proxy-Connection, TE, Trailer,
 * Transfer-Encoding, Upgrade, Proxy-Authorization and every header Connection names) and
 * without Authorization (it may carry the API's bearer token) nor X-Cella-Cluster (a
 * node's authenticator: decision 0056), X-Forwarded-For (client
 * appended), X-Forwarded-Host (the client's Host) and X-Forwarded-Proto (http) set, each
 * once; Content-Length kept for a sized body, "Transfer-Encoding: chunked" for a chunked
 * one; with upgrade (the client's Upgrade value) "Connection: Upgrade" and "Upgrade: ..."
 * are sent, else nothing (HTTP/1.1 keep-alive: connections into a sandbox are reused).
 * With host_override (the preview host a request named in X-Forwarded-Host) the client's
 * Host is replaced by it and X-Forwarded-Host is it: the app sees what a client coming
 * directly would have sent. *ret_body says how the client's body is framed. */
int preview_request_head(struct buf *out, const char *method, const char *target,
                         const struct preview_headers *h, const char *client_addr,
                         const char *upgrade, const char *host_override,
                         enum preview_body *ret_body);
/* The response headers passed to the client: the sandbox's, in order (several Set-Cookie,
 * Location unchanged), without hop-by-hop ones and Content-Length (the server frames the
 * body). With keep_upgrade (a 101), Connection and Upgrade are kept. */
int preview_response_headers(struct buf *out, const struct preview_headers *h, bool keep_upgrade);

struct pxy;
struct upconn;
struct port_rec;

#define PREVIEW_CACHE_BUCKETS 256

struct preview_config {
        struct sandbox_table *table;
        const char *domain;  /* "localhost" by default */
        int url_port;        /* port printed in URLs (0 or 80: none) */
        struct pxy *live;    /* proxied requests and relays in progress */
        struct upconn *idle; /* connections into sandboxes kept for reuse, newest first */
        unsigned nidle;
        unsigned nupgrades; /* live proxied requests with an upgrade (forwarded or relayed) */
        struct port_rec *cache[PREVIEW_CACHE_BUCKETS]; /* exposed ports seen (registry) */
};

/* The request goes to a preview host (see preview_host_parse); 404 INVALID_TOKEN for a
 * malformed one. fwd_host is that host when it came from X-Forwarded-Host (the Host sent
 * into the sandbox), else NULL. */
void preview_handle(struct preview_config *cfg, struct http_request *req,
                    const struct preview_target *t, const char *fwd_host);
/* GET /v1/sandboxes/{name}/ws/{port}[/path]: a WebSocket upgrade bridged to port (sb
 * running, borrowed); target is the path and query sent to the sandbox. */
void preview_ws(struct preview_config *cfg, struct http_request *req, struct sandbox *sb, int port,
                const char *target);
/* A request relayed to another node of the cluster (decision 0056): what it is sent as. */
typedef void (*preview_peer_head_fn)(void *ud, int status, const char *node);
struct preview_peer {
        const char *node;            /* the node's name */
        const struct sockaddr *addr; /* its API's address (from its advertise URL) */
        const char *target;          /* the request target sent */
        const char *host_override;   /* as preview_request_head's, or NULL */
        const char *extra;           /* header lines appended to the head ("...\r\n"), or NULL */
        preview_peer_head_fn head;   /* called once: the node's status (its answer's head),
                                        or -1 when it could not be reached */
        void *ud;
};
/* Relay req to a node: the same request (head as preview_request_head makes it, plus
 * peer->extra), its body streamed, the node's answer streamed back whatever it is, a 101
 * turning into a byte relay; keep-alive connections to nodes are reused like those into
 * sandboxes. A node that cannot be reached: 503 CLUSTER_UNAVAILABLE naming it. */
void preview_proxy_peer(struct preview_config *cfg, struct http_request *req,
                        const struct preview_peer *peer);
/* The sandbox was destroyed: forget its ports (the registry rows go with the sandbox). */
void preview_forget(struct preview_config *cfg, const char *sandbox);
/* Close every proxied connection (daemon shutdown, before the sandbox table goes). */
void preview_shutdown(struct preview_config *cfg);
/* The ports API (api-ports.c) changed the registry: port of sandbox is exposed with token
 * in the sandbox's run instance (remember), or no longer exposed (drop; port -1: all). */
void preview_port_remember(struct preview_config *cfg, const char *sandbox, int port,
                           const char *token, int64_t instance);
void preview_port_drop(struct preview_config *cfg, const char *sandbox, int port);
/* The preview URL of port of sandbox with token, into out; -ENAMETOOLONG when it does not
 * fit. */
int preview_url(const struct preview_config *cfg, const char *sandbox, int port, const char *token,
                char *out, size_t size);

#endif
