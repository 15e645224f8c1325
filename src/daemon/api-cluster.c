/* GET /v1/cluster/nodes: the cluster's live nodes as etcd holds them (docs/api.md
 * "Cluster", docs/cluster.md); the admin's. A cellad without --cluster is no cluster's
 * node: 404 NOT_FOUND. POST /v1/cluster/drain (decision 0057). */
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/limits.h"
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

/* POST /v1/cluster/drain {stop?}: the node hands its sandboxes over (cluster_drain) and
 * answers when each was tried; with stop and none failed, cellad stops once the answer is
 * out (cellad --drain asks this way). The admin's. */
struct drain_req {
        struct api *a;
        bool stop;
};

static void on_stop_timer_closed(uv_handle_t *h)
{
        free(h);
}

static void on_stop_timer(uv_timer_t *t)
{
        uv_close((uv_handle_t *)t, on_stop_timer_closed);
        /* the daemon's own stop, as on SIGTERM: the lease revoked, the loop ended */
        kill(getpid(), SIGTERM);
}

static void drained(json_t *j, const struct cella_error *err, void *ud)
{
        struct http_request *req = ud;
        struct drain_req *r = http_request_get_userdata(req);
        bool stop = r && r->stop && j && json_array_size(json_object_get(j, "failed")) == 0;
        uv_loop_t *loop = r ? r->a->cfg.loop : NULL;

        if (j)
                json_object_set_new(j, "stopping", json_boolean(stop));
        http_request_set_userdata(req, NULL);
        free(r);
        api_answer_json(j, err, req);
        if (stop) {
                uv_timer_t *t = malloc(sizeof(*t));

                if (t && uv_timer_init(loop, t) == 0)
                        uv_timer_start(t, on_stop_timer, CELLA_CLUSTER_DRAIN_STOP_DELAY_MS, 0);
                else
                        free(t);
        }
}

static void drain_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct drain_req *r = ud;
        struct cella_error err = {0};

        if (cluster_decode_drain(body, len, &r->stop, &err) < 0) {
                http_request_set_userdata(req, NULL);
                free(r);
                http_respond_error(req, &err, NULL);
                return;
        }
        http_request_ref(req);
        if (cluster_drain(r->a->cfg.cluster, drained, req, &err) < 0) {
                http_request_set_userdata(req, NULL);
                free(r);
                http_request_unref(req);
                http_respond_error(req, &err, NULL);
        }
}

static void drain_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

void api_cluster_drain(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct drain_req *r;

        (void)p;
        if (!a->cfg.cluster) {
                http_respond_code(req, CELLA_E_NOT_FOUND,
                                  "this cellad is not a cluster's node (cellad --cluster)");
                return;
        }
        r = calloc(1, sizeof(*r));
        if (!r) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        r->a = a;
        http_request_set_userdata(req, r);
        http_request_on_abort(req, drain_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, drain_body, r) < 0) {
                http_request_set_userdata(req, NULL);
                free(r);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}
