/* cellad's counters for GET /metrics (docs/metrics.md; decision 0054).
 *
 * One process-wide record, written and read on the loop thread only: every instrumentation
 * point is one plain increment (or a histogram's bucket walk over a dozen constants), no
 * lock, no allocation, no atomic. What a scrape reads from elsewhere at that moment (the
 * sandbox table's states, the pool, the open connections) is not kept here.
 *
 * Invariants: counters only grow; a histogram's buckets add up to its count; indices out
 * of range are counted in the "other" slot of their array, never outside it. */
#ifndef CELLA_DAEMON_METRICS_H
#define CELLA_DAEMON_METRICS_H

#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"

/* Routes the HTTP counters tell apart (the route table is shorter: unit/test-daemon-routes
 * checks it), each with up to METRICS_ROUTE_METHODS methods. */
#define METRICS_ROUTES_MAX 96
#define METRICS_ROUTE_METHODS 4
/* Status classes 1xx..5xx (index 0..4). */
#define METRICS_STATUS_CLASSES 5

#define METRICS_START_BUCKETS 12
#define METRICS_EXEC_BUCKETS 17

enum metrics_bytes {
        METRICS_BYTES_STDOUT, /* a command's output, from the agent (exec, process logs, code) */
        METRICS_BYTES_STDERR,
        METRICS_BYTES_UPLOAD,   /* raw file bodies written into sandboxes (PUT /files) */
        METRICS_BYTES_DOWNLOAD, /* raw file bodies read out of them (GET /files) */
        METRICS_BYTES_KINDS
};

/* A request's tag for the counters (http_request_set_tag): 0 nothing matched, a route
 * METRICS_TAG_ROUTE(i, m) (i its index in the table, m the method's index in its list), a
 * preview request METRICS_TAG_PREVIEW. */
#define METRICS_TAG_NONE 0
#define METRICS_TAG_PREVIEW (-1)
#define METRICS_TAG_ROUTE(i, m) (1 + (int)(i)*METRICS_ROUTE_METHODS + (int)(m))

struct metrics {
        int64_t start_ms; /* wall clock at metrics_init */
        uint64_t start_mono_us;

        uint64_t http[METRICS_ROUTES_MAX * METRICS_ROUTE_METHODS][METRICS_STATUS_CLASSES];
        uint64_t http_unmatched[METRICS_STATUS_CLASSES];
        uint64_t preview[METRICS_STATUS_CLASSES];
        uint64_t errors[_CELLA_E_MAX];
        uint64_t bytes[METRICS_BYTES_KINDS];
        uint64_t connections_accepted;
        uint64_t connections_open;

        uint64_t start_failures;
        uint64_t start_counts[METRICS_START_BUCKETS + 1];
        uint64_t start_sum_us;
        uint64_t exec_counts[METRICS_EXEC_BUCKETS + 1];
        uint64_t exec_sum_us;

        /* The routes' names (metrics_route), borrowed: route i's pattern and its methods
         * ("GET HEAD"), i < nroutes. */
        const char *route_pattern[METRICS_ROUTES_MAX];
        const char *route_methods[METRICS_ROUTES_MAX];
        size_t nroutes;
};

extern struct metrics metrics;
extern const uint64_t metrics_start_bounds_us[METRICS_START_BUCKETS];
extern const uint64_t metrics_exec_bounds_us[METRICS_EXEC_BUCKETS];

/* Set the start time (cellad's main, once). */
void metrics_init(void);
/* Name route i (the dispatcher, for each entry of its table; pattern and methods are
 * borrowed for the process's life). -ERANGE when i is beyond METRICS_ROUTES_MAX. */
int metrics_route(size_t i, const char *pattern, const char *methods);
/* The index of method in a route's space-separated methods, or -1. */
int metrics_method_index(const char *methods, const char *method);

/* ---- instrumentation points (loop thread) ---- */
static inline unsigned metrics_status_class(int status)
{
        return status >= 100 && status < 600 ? (unsigned)(status / 100 - 1) : 4;
}
/* A request answered with status; tag as above. */
void metrics_http_done(int tag, int status);
static inline void metrics_error(int code)
{
        metrics.errors[code > 0 && code < _CELLA_E_MAX ? code : CELLA_E_INTERNAL_ERROR]++;
}
static inline void metrics_bytes(enum metrics_bytes kind, size_t n)
{
        metrics.bytes[kind] += n;
}
/* A sandbox's container started and its agent answered, us after the start began. */
void metrics_start_done(uint64_t us);
static inline void metrics_start_failed(void)
{
        metrics.start_failures++;
}
/* A command ran to its end (exit or timeout), since_us (time_mono_us) after its request
 * arrived. */
void metrics_exec_done(uint64_t since_us);

/* ---- the scrape ---- */

/* What a scrape takes from the rest of cellad at that moment. */
struct metrics_gauges {
        unsigned sandboxes[4]; /* by state: running, sleeping, stopped, starting */
        unsigned pool_target, pool_ready;
        uint64_t pool_claims;
};

/* The whole exposition (PROM_CONTENT_TYPE) of the counters and g into b. 0 or -ENOMEM. */
int metrics_render(const struct metrics_gauges *g, struct buf *b);

#endif
