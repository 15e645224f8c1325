/* GET /metrics: cellad's counters in the Prometheus text format 0.0.4 (docs/metrics.md,
 * decision 0054), behind the bearer token like every route but /v1/health. */
#include "common/prom.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/cluster.h"
#include "daemon/forward.h"
#include "daemon/metrics.h"
#include "daemon/sandbox-metrics.h"

void api_metrics(struct api *a, struct http_request *req, const struct api_args *p)
{
        _cleanup_(buf_freep) struct buf b = BUF_INIT;
        struct metrics_gauges g = {0};

        (void)p;
        sandbox_table_metrics(a->cfg.table, &g);
        if (metrics_render(&g, &b) < 0 ||
            (a->cfg.cluster && cluster_metrics(a->cfg.cluster, &b) < 0) ||
            (a->cfg.forward && forward_metrics(a->cfg.forward, &b) < 0)) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        http_respond_bytes(req, 200, PROM_CONTENT_TYPE, b.data, b.len);
}
