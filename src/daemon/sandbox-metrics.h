/* What GET /metrics reads from the sandbox table at a scrape (sandbox-metrics.c): the
 * sandboxes by state and the warm pool. */
#ifndef CELLA_DAEMON_SANDBOX_METRICS_H
#define CELLA_DAEMON_SANDBOX_METRICS_H

#include "daemon/metrics.h"
#include "daemon/sandbox.h"

/* Fill g's sandbox and pool fields from t (one walk of the table; loop thread). */
void sandbox_table_metrics(const struct sandbox_table *t, struct metrics_gauges *g);

#endif
