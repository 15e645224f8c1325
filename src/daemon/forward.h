/* Forwarding between the nodes of a cluster (docs/cluster.md, decision 0056): a request for
 * a sandbox this node does not have is relayed to the node that owns its name, and the
 * first use of a new name places it on the least loaded live node that can take it.
 *
 * The dispatcher (api.c) asks forward_resolve for every request naming a sandbox that is
 * not in the local table and was not forwarded already: the module finds the name's owner
 * (etcd, cached for CELLA_FORWARD_CACHE_MS), and either relays the request to it (through
 * the preview proxy's relay: preview_proxy_peer) with an X-Cella-Cluster authenticator
 * carrying the caller's principal (cluster-auth.h), or hands it back to be served here
 * (this node owns it, nobody does and it is not a creating request, or placement chose
 * this node). A request that carries an authenticator is checked by forward_check and is
 * never forwarded again: a loop cannot form.
 *
 * Loop thread only. */
#ifndef CELLA_DAEMON_FORWARD_H
#define CELLA_DAEMON_FORWARD_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/buf.h"
#include "common/error.h"
#include "daemon/http.h"
#include "daemon/preview.h"

struct cluster;
struct forward;

struct forward_config {
        struct cluster *cluster;
        const unsigned char *secret; /* the cluster's secret (copied) */
        size_t secret_len;
        const char *default_image; /* what a new name gets without an image: placement needs
                                      a node that has it */
};

/* The secret of --cluster-secret-file path into out (at most outsz bytes; a trailing
 * newline dropped): the file must be a regular file that neither group nor others may
 * read, of CELLA_CLUSTER_SECRET_MIN..CELLA_CLUSTER_SECRET_MAX bytes. *ret_len; 0, or
 * -errno with err (VALIDATION_FAILED) saying why. */
int forward_secret_read(const char *path, unsigned char *out, size_t outsz, size_t *ret_len,
                        struct cella_error *err);

int forward_new(const struct forward_config *cfg, struct forward **ret);
void forward_free(struct forward *f);

/* A request's X-Cella-Cluster (f NULL: this node takes none): 0 when it has none; 1 when
 * it holds (the caller's principal is set on req: principal_of); -1 with err (401
 * UNAUTHORIZED: a forged, stale, replayed or unexpected authenticator). */
int forward_check(struct forward *f, struct http_request *req, struct cella_error *err);

/* Called exactly once per resolution: here true, the request is the caller's again (serve
 * it); here false, it was relayed or answered (an error): only ud is the caller's to free. */
typedef void (*forward_local_fn)(struct http_request *req, bool here, void *ud);

/* Resolve internal name (not in the local table) for req: relay req to the name's owner,
 * or place a new name (creates: the request may create it) on the node chosen, or call
 * local (possibly before this returns) to serve it here. Errors finding the owner are
 * answered (503 CLUSTER_UNAVAILABLE) and local is not called. preview is the proxy whose
 * relay carries the request. Holds a reference to req until it is relayed or local ran. */
void forward_resolve(struct forward *f, struct preview_config *preview, struct http_request *req,
                     const char *name, bool creates, forward_local_fn local, void *ud);

/* The same for a preview request whose sandbox id (a default tenant's name, or a tenant's
 * "<name>--<tenant>") is not here: relayed to the owner of either name with host_override
 * (the preview host named in X-Forwarded-Host, or NULL), else local. Never places. */
void forward_resolve_preview(struct forward *f, struct preview_config *preview,
                             struct http_request *req, const char *id, const char *host_override,
                             forward_local_fn local, void *ud);

/* /metrics: the forwarding series (docs/metrics.md). */
int forward_metrics(struct forward *f, struct buf *b);

#endif
