/* GET /v1/cluster/nodes: the cluster's live nodes as etcd holds them (docs/api.md
 * "Cluster", docs/cluster.md); the admin's. A cellad without --cluster is no cluster's
 * node: 404 NOT_FOUND. */
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/cluster.h"

void api_cluster_nodes(struct api *a, struct http_request *req, const struct api_args *p)
{
        (void)p;
        if (!a->cfg.cluster) {
                http_respond_code(req, CELLA_E_NOT_FOUND,
                                  "this cellad is not a cluster's node (cellad --cluster)");
                return;
        }
        http_request_ref(req);
        if (cluster_nodes(a->cfg.cluster, api_answer_json, req) < 0) {
                http_respond_code(req, CELLA_E_SERVER_BUSY, "too many requests to etcd at once");
                http_request_unref(req);
        }
}
