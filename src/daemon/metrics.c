/* cellad's counters and their exposition (metrics.h; docs/metrics.md lists every series). */
#include <errno.h>
#include <string.h>

#include "common/prom.h"
#include "common/timeutil.h"
#include "daemon/metrics.h"

struct metrics metrics;

/* 5 ms .. 30 s: a pool claim is ~2 ms, a cold start tens of ms, a start behind a busy
 * thread pool or a big disk image seconds. */
const uint64_t metrics_start_bounds_us[METRICS_START_BUCKETS] = {
        5000,   10000,   25000,   50000,   100000,   250000,
        500000, 1000000, 2500000, 5000000, 10000000, 30000000,
};
/* 0.25 ms .. 60 s: a warm exec is about half a millisecond (docs/performance.md). */
const uint64_t metrics_exec_bounds_us[METRICS_EXEC_BUCKETS] = {
        250,    500,    1000,    2500,    5000,    10000,    25000,    50000,    100000,
        250000, 500000, 1000000, 2500000, 5000000, 10000000, 30000000, 60000000,
};

void metrics_init(void)
{
        metrics.start_ms = time_now_ms();
        metrics.start_mono_us = time_mono_us();
}

int metrics_route(size_t i, const char *pattern, const char *methods)
{
        if (i >= METRICS_ROUTES_MAX)
                return -ERANGE;
        metrics.route_pattern[i] = pattern;
        metrics.route_methods[i] = methods;
        if (i >= metrics.nroutes)
                metrics.nroutes = i + 1;
        return 0;
}

int metrics_method_index(const char *methods, const char *method)
{
        size_t ml = strlen(method);
        int idx = 0;

        for (const char *s = methods; *s; idx++) {
                size_t n = strcspn(s, " ");

                if (n == ml && memcmp(s, method, n) == 0)
                        return idx < METRICS_ROUTE_METHODS ? idx : -1;
                s += n;
                while (*s == ' ')
                        s++;
        }
        return -1;
}

void metrics_http_done(int tag, int status)
{
        unsigned c = metrics_status_class(status);

        if (tag == METRICS_TAG_PREVIEW)
                metrics.preview[c]++;
        else if (tag > 0 && (size_t)(tag - 1) < ARRAY_SIZE(metrics.http))
                metrics.http[tag - 1][c]++;
        else
                metrics.http_unmatched[c]++;
}

void metrics_start_done(uint64_t us)
{
        prom_histogram_observe(metrics_start_bounds_us, METRICS_START_BUCKETS, metrics.start_counts,
                               &metrics.start_sum_us, us);
}

void metrics_exec_done(uint64_t since_us)
{
        uint64_t now = time_mono_us();

        prom_histogram_observe(metrics_exec_bounds_us, METRICS_EXEC_BUCKETS, metrics.exec_counts,
                               &metrics.exec_sum_us, now > since_us ? now - since_us : 0);
}

/* ---- the exposition ---- */

static const char *const status_class[METRICS_STATUS_CLASSES] = {"1xx", "2xx", "3xx", "4xx", "5xx"};

/* The n-th method of a space-separated list into out. */
static void nth_method(const char *methods, unsigned n, char out[16])
{
        const char *s = methods;

        out[0] = '\0';
        for (unsigned i = 0; *s; i++) {
                size_t l = strcspn(s, " ");

                if (i == n) {
                        if (l < 16) {
                                memcpy(out, s, l);
                                out[l] = '\0';
                        }
                        return;
                }
                s += l;
                while (*s == ' ')
                        s++;
        }
}

static uint64_t hist_count(const uint64_t *counts, size_t nbounds)
{
        uint64_t n = 0;

        for (size_t i = 0; i <= nbounds; i++)
                n += counts[i];
        return n;
}

static int family_histogram(struct buf *b, const char *name, const char *help,
                            const struct prom_histogram *h)
{
        int r = prom_family(b, name, "histogram", help);

        return r < 0 ? r : prom_histogram_write(b, name, NULL, 0, h);
}

static int render_http(struct buf *b)
{
        static const char name[] = "cella_http_requests_total";
        int r = prom_family(b, name, "counter",
                            "HTTP requests answered on the API listener, by route (the route "
                            "table's pattern, \"unmatched\" when none), method and status class");

        for (size_t i = 0; r == 0 && i < metrics.nroutes; i++) {
                for (unsigned m = 0; r == 0 && m < METRICS_ROUTE_METHODS; m++) {
                        char method[16];

                        if (!metrics.route_pattern[i])
                                break;
                        nth_method(metrics.route_methods[i], m, method);
                        if (!method[0])
                                break;
                        for (unsigned c = 0; r == 0 && c < METRICS_STATUS_CLASSES; c++) {
                                uint64_t v = metrics.http[i * METRICS_ROUTE_METHODS + m][c];
                                struct prom_label l[] = {{"route", metrics.route_pattern[i]},
                                                         {"method", method},
                                                         {"status", status_class[c]}};

                                if (v)
                                        r = prom_sample_u64(b, name, l, 3, v);
                        }
                }
        }
        for (unsigned c = 0; r == 0 && c < METRICS_STATUS_CLASSES; c++) {
                struct prom_label l[] = {
                        {"route", "unmatched"}, {"method", "other"}, {"status", status_class[c]}};

                if (metrics.http_unmatched[c])
                        r = prom_sample_u64(b, name, l, 3, metrics.http_unmatched[c]);
        }
        if (r == 0)
                r = prom_family_by_label(b, "cella_preview_requests_total", "counter",
                                         "Requests to preview URLs (proxied to a sandbox's port or "
                                         "refused), by status class",
                                         "status", status_class, metrics.preview,
                                         METRICS_STATUS_CLASSES, false);
        return r;
}

static int render_sandboxes(const struct metrics_gauges *g, struct buf *b)
{
        static const char *const states[] = {"running", "sleeping", "stopped", "starting"};
        uint64_t starts = hist_count(metrics.start_counts, METRICS_START_BUCKETS);
        struct prom_histogram h = {metrics_start_bounds_us, METRICS_START_BUCKETS,
                                   metrics.start_counts, metrics.start_sum_us};
        struct prom_label ok = {"result", "ok"}, failed = {"result", "error"};
        int r = prom_family(b, "cella_sandboxes", "gauge",
                            "Sandboxes of this node by state (warm pool sandboxes not included)");

        for (size_t i = 0; r == 0 && i < ARRAY_SIZE(states); i++) {
                struct prom_label l = {"state", states[i]};

                r = prom_sample_u64(b, "cella_sandboxes", &l, 1, g->sandboxes[i]);
        }
        if (r == 0)
                r = prom_family_u64(b, "cella_pool_size", "gauge",
                                    "Warm pool sandboxes to keep ready (--pool; fewer while "
                                    "--max-sandboxes leaves no room)",
                                    g->pool_target);
        if (r == 0)
                r = prom_family_u64(b, "cella_pool_ready", "gauge",
                                    "Warm pool sandboxes running and ready to be claimed",
                                    g->pool_ready);
        if (r == 0)
                r = prom_family_u64(b, "cella_pool_claims_total", "counter",
                                    "Sandboxes created by claiming a warm pool sandbox",
                                    g->pool_claims);
        if (r == 0)
                r = prom_family(b, "cella_sandbox_starts_total", "counter",
                                "Sandbox container starts (create, wake, restart, warm pool "
                                "build), by result");
        if (r == 0)
                r = prom_sample_u64(b, "cella_sandbox_starts_total", &ok, 1, starts);
        if (r == 0)
                r = prom_sample_u64(b, "cella_sandbox_starts_total", &failed, 1,
                                    metrics.start_failures);
        if (r == 0)
                r = family_histogram(b, "cella_sandbox_start_duration_seconds",
                                     "Time from a container start's beginning to its agent "
                                     "answering, of the starts that succeeded",
                                     &h);
        return r;
}

static int render_exec(struct buf *b)
{
        static const char *const kinds[METRICS_BYTES_KINDS] = {"stdout", "stderr", "upload",
                                                               "download"};
        struct prom_histogram h = {metrics_exec_bounds_us, METRICS_EXEC_BUCKETS,
                                   metrics.exec_counts, metrics.exec_sum_us};
        int r = prom_family_u64(b, "cella_execs_total", "counter",
                                "Commands run through POST /v1/sandboxes/{id}/exec that ended "
                                "(exit or timeout)",
                                hist_count(metrics.exec_counts, METRICS_EXEC_BUCKETS));

        if (r == 0)
                r = family_histogram(b, "cella_exec_duration_seconds",
                                     "Time from an exec request's arrival to its command's end, "
                                     "sandbox start or wake included",
                                     &h);
        if (r == 0)
                r = prom_family_by_label(b, "cella_stream_bytes_total", "counter",
                                         "Bytes streamed between clients and sandboxes: commands' "
                                         "stdout and stderr, raw file uploads and downloads",
                                         "stream", kinds, metrics.bytes, METRICS_BYTES_KINDS, true);
        return r;
}

static int render_errors(struct buf *b)
{
        const char *codes[_CELLA_E_MAX - 1];

        for (int c = 1; c < _CELLA_E_MAX; c++)
                codes[c - 1] = cella_code_name(c);
        return prom_family_by_label(
                b, "cella_errors_total", "counter",
                "Errors answered in the API's error shape, by code (docs/api.md)", "code", codes,
                metrics.errors + 1, _CELLA_E_MAX - 1, true);
}

static int render_process(struct buf *b)
{
        uint64_t up = time_mono_us() - metrics.start_mono_us;
        int r = prom_family(b, "process_start_time_seconds", "gauge",
                            "Start time of cellad since the Unix epoch, in seconds");

        if (r == 0)
                r = prom_sample_double(b, "process_start_time_seconds", NULL, 0,
                                       (double)metrics.start_ms / 1000.0);
        if (r == 0)
                r = prom_family(b, "cella_uptime_seconds", "gauge", "Seconds since cellad started");
        if (r == 0)
                r = prom_sample_seconds(b, "cella_uptime_seconds", NULL, 0, up);
        if (r == 0)
                r = prom_family_u64(b, "cella_http_connections_open", "gauge",
                                    "HTTP connections open (API and preview listeners)",
                                    metrics.connections_open);
        if (r == 0)
                r = prom_family_u64(b, "cella_http_connections_accepted_total", "counter",
                                    "HTTP connections accepted (API and preview listeners)",
                                    metrics.connections_accepted);
        return r;
}

int metrics_render(const struct metrics_gauges *g, struct buf *b)
{
        if (render_process(b) < 0 || render_sandboxes(g, b) < 0 || render_exec(b) < 0 ||
            render_errors(b) < 0 || render_http(b) < 0)
                return -ENOMEM;
        return 0;
}
