/* The sandbox table's part of a GET /metrics scrape (sandbox-metrics.h). */
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox-metrics.h"

void sandbox_table_metrics(const struct sandbox_table *t, struct metrics_gauges *g)
{
        for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                for (const struct sandbox *s = t->buckets[i]; s; s = s->next) {
                        switch (s->state) {
                        case SANDBOX_RUNNING:
                                g->sandboxes[0]++;
                                break;
                        case SANDBOX_SLEEPING:
                                g->sandboxes[1]++;
                                break;
                        case SANDBOX_NEW:
                        case SANDBOX_STOPPED:
                                g->sandboxes[2]++;
                                break;
                        case SANDBOX_STARTING:
                                g->sandboxes[3]++;
                                break;
                        case SANDBOX_DESTROYED:
                                break;
                        }
                }
        g->pool_target = t->pool_size;
        g->pool_ready = t->pool_ready;
        g->pool_claims = t->pool_claims;
}
