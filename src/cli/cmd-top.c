/* cella top: the node at a glance, refreshed (docs/cli.md): its counters from GET /metrics
 * (totals, and the rates over the last interval once there are two scrapes) and its
 * sandboxes from GET /v1/sandboxes; on a cluster node also the live nodes from GET
 * /v1/cluster/nodes, the forwarding counters, and each sandbox's node. --once prints one
 * frame, totals only, for scripts. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/duration.h"
#include "common/timeutil.h"

#define TOP_DEFAULT_INTERVAL_MS 2000

/* One refresh: both answers and when they came. */
struct frame_data {
        char *metrics;       /* the text exposition */
        json_t *list;        /* {sandboxes: [...]} */
        json_t *nodes;       /* {nodes: [...]} on a cluster node, else NULL */
        char nodes_err[160]; /* why the nodes are not shown ("" when they are, or no cluster) */
        uint64_t mono_us;
};

/* Whether the daemon answered GET /v1/cluster/nodes with 404: not a cluster node, not
 * asked again. */
static bool no_cluster;

static void frame_data_done(struct frame_data *f)
{
        cella_free(f->metrics);
        json_decref(f->list);
        json_decref(f->nodes);
        memset(f, 0, sizeof(*f));
}

static int fetch(cella_client *c, struct frame_data *f)
{
        char *text = NULL;
        int r = cella_metrics(c, &f->metrics);

        if (r < 0)
                return r;
        r = cella_sandbox_list(c, &text);
        if (r < 0)
                return r;
        f->list = json_loads(text, 0, NULL);
        cella_free(text);
        text = NULL;
        if (!f->list)
                return CELLA_ERR_INVALID;
        if (!no_cluster) {
                r = cella_cluster_nodes(c, &text);
                if (r >= 0)
                        f->nodes = json_loads(text, 0, NULL);
                else if (cella_client_http_status(c) == 404)
                        no_cluster = true;
                else /* etcd away, or a tenant's key (the nodes are the admin's) */
                        snprintf(f->nodes_err, sizeof(f->nodes_err), "%s: %s",
                                 cella_client_error_code(c), cella_client_error_message(c));
                cella_free(text);
        }
        f->mono_us = time_mono_us();
        return 0;
}

/* The sum of a series' samples with up to two labels ("k=v"; NULL: none); 0 if absent. */
static double val(const char *text, const char *name, const char *l1, const char *l2)
{
        const char *match[3] = {l1, l1 ? l2 : NULL, NULL};
        double v = 0;

        if (!text || cella_metrics_value(text, name, match, &v) < 0)
                return 0;
        return v;
}

/* "N" and, with a previous frame, " (R/s)": a counter's total and its rate. */
static void counter(char *out, size_t size, const struct frame_data *cur,
                    const struct frame_data *prev, const char *name, const char *l1, const char *l2)
{
        double now = val(cur->metrics, name, l1, l2);
        int n = snprintf(out, size, "%.0f", now);

        if (prev && prev->metrics && cur->mono_us > prev->mono_us && n > 0 && (size_t)n < size) {
                double secs = (double)(cur->mono_us - prev->mono_us) / 1e6;
                double rate = (now - val(prev->metrics, name, l1, l2)) / secs;

                snprintf(out + n, size - (size_t)n, " (%.1f/s)", rate < 0 ? 0 : rate);
        }
}

/* "p50 0.62 ms p95 1.9 ms" of a duration histogram (over the interval with prev), or "-". */
static void quantiles(char *out, size_t size, const struct frame_data *cur,
                      const struct frame_data *prev, const char *name)
{
        double p50 = -1, p95 = -1;
        const char *before = prev ? prev->metrics : NULL;

        cella_metrics_quantile(cur->metrics, before, name, 0.5, &p50);
        cella_metrics_quantile(cur->metrics, before, name, 0.95, &p95);
        if (p50 < 0 || p95 < 0)
                snprintf(out, size, "-");
        else
                snprintf(out, size, "p50 %.3g ms p95 %.3g ms", p50 * 1000, p95 * 1000);
}

static const char *fmt_bytes(double b, char out[32])
{
        static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
        size_t u = 0;

        while (b >= 1024 && u < ARRAY_SIZE(units) - 1) {
                b /= 1024;
                u++;
        }
        snprintf(out, 32, u ? "%.1f %s" : "%.0f %s", b, units[u]);
        return out;
}

/* A cluster node's part: the live nodes and what this node relayed. */
static void print_cluster(const struct frame_data *cur, const struct frame_data *prev)
{
        const char *m = cur->metrics;
        char fwd[48], recv[48];
        json_t *n;
        size_t i;

        if (cur->nodes_err[0]) {
                printf("nodes: not shown (%s)\n", cur->nodes_err);
                return;
        }
        if (!cur->nodes)
                return;
        counter(fwd, sizeof(fwd), cur, prev, "cella_forward_requests_total", NULL, NULL);
        counter(recv, sizeof(recv), cur, prev, "cella_forward_received_total", "result=accepted",
                NULL);
        printf("forwarded %s  unreachable %.0f  received from nodes %s\n", fwd,
               val(m, "cella_forward_requests_total", "result=unreachable", NULL), recv);
        printf("\n%-20s %-28s %-12s %-8s %s\n", "NODE", "ADVERTISE", "SANDBOXES", "RUNNING",
               "STATE");
        json_array_foreach(json_object_get(cur->nodes, "nodes"), i, n)
        {
                char count[32];
                json_int_t cap = json_integer_value(json_object_get(n, "capacity"));

                snprintf(count, sizeof(count), cap > 0 ? "%lld/%lld" : "%lld",
                         (long long)json_integer_value(json_object_get(n, "sandboxes")),
                         (long long)cap);
                printf("%-20s %-28s %-12s %-8lld %s%s\n", cli_str(n, "node"),
                       cli_str(n, "advertise"), count,
                       (long long)json_integer_value(json_object_get(n, "running")),
                       json_is_true(json_object_get(n, "draining")) ? "draining" : "live",
                       json_is_true(json_object_get(n, "self")) ? " (this node)" : "");
        }
}

static void print_frame(cella_client *c, const struct frame_data *cur,
                        const struct frame_data *prev)
{
        const char *m = cur->metrics;
        char up[32], execs[48], starts[48], reqs[48], errs[48], previews[48], exec_q[64],
                start_q[64], b[4][32];
        double uptime = val(m, "cella_uptime_seconds", NULL, NULL);
        json_t *s;
        size_t i;

        if (cli_duration_format((int64_t)uptime * 1000, up, sizeof(up)) < 0)
                snprintf(up, sizeof(up), "-");
        printf("cellad %s  up %s  connections %.0f\n", cella_client_url(c), up,
               val(m, "cella_http_connections_open", NULL, NULL));
        printf("sandboxes %.0f: running %.0f, sleeping %.0f, stopped %.0f, starting %.0f  "
               "pool %.0f ready of %.0f\n",
               val(m, "cella_sandboxes", NULL, NULL),
               val(m, "cella_sandboxes", "state=running", NULL),
               val(m, "cella_sandboxes", "state=sleeping", NULL),
               val(m, "cella_sandboxes", "state=stopped", NULL),
               val(m, "cella_sandboxes", "state=starting", NULL),
               val(m, "cella_pool_ready", NULL, NULL), val(m, "cella_pool_size", NULL, NULL));
        counter(execs, sizeof(execs), cur, prev, "cella_execs_total", NULL, NULL);
        quantiles(exec_q, sizeof(exec_q), cur, prev, "cella_exec_duration_seconds");
        counter(starts, sizeof(starts), cur, prev, "cella_sandbox_starts_total", "result=ok", NULL);
        quantiles(start_q, sizeof(start_q), cur, prev, "cella_sandbox_start_duration_seconds");
        printf("execs %s  exec %s  starts %s  start %s  failed starts %.0f\n", execs, exec_q,
               starts, start_q, val(m, "cella_sandbox_starts_total", "result=error", NULL));
        counter(reqs, sizeof(reqs), cur, prev, "cella_http_requests_total", NULL, NULL);
        counter(errs, sizeof(errs), cur, prev, "cella_errors_total", NULL, NULL);
        counter(previews, sizeof(previews), cur, prev, "cella_preview_requests_total", NULL, NULL);
        printf("requests %s  4xx %.0f  5xx %.0f  errors %s  preview %s\n", reqs,
               val(m, "cella_http_requests_total", "status=4xx", NULL),
               val(m, "cella_http_requests_total", "status=5xx", NULL), errs, previews);
        printf("streamed stdout %s  stderr %s  upload %s  download %s\n",
               fmt_bytes(val(m, "cella_stream_bytes_total", "stream=stdout", NULL), b[0]),
               fmt_bytes(val(m, "cella_stream_bytes_total", "stream=stderr", NULL), b[1]),
               fmt_bytes(val(m, "cella_stream_bytes_total", "stream=upload", NULL), b[2]),
               fmt_bytes(val(m, "cella_stream_bytes_total", "stream=download", NULL), b[3]));
        print_cluster(cur, prev);
        printf("\n%-32s %-9s %-12s %-9s %-12s %s%s\n", "NAME", "STATE", "IMAGE", "NETWORK",
               "DISK USED", "LAST ACTIVE", cur->nodes ? "               NODE" : "");
        json_array_foreach(json_object_get(cur->list, "sandboxes"), i, s)
        {
                json_t *used = json_object_get(json_object_get(s, "disk"), "usedBytes");
                char disk[32];

                printf("%-32s %-9s %-12s %-9s %-12s %-24s%s%s\n", cli_str(s, "id"),
                       cli_str(s, "state"), cli_str(s, "image"), cli_str(s, "network"),
                       json_is_integer(used) ? fmt_bytes((double)json_integer_value(used), disk)
                                             : "-",
                       cli_str(s, "lastActiveAt"), cur->nodes ? " " : "",
                       cur->nodes ? cli_str(s, "node") : "");
        }
}

static void sleep_ms(long ms)
{
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int cmd_top(cella_client *c, struct cli_args *a)
{
        struct frame_data cur = {0}, prev = {0};
        long interval = a->interval_ms ? a->interval_ms : TOP_DEFAULT_INTERVAL_MS;
        bool clear = !a->once && isatty(STDOUT_FILENO);
        int r;

        if (!cli_has_args(a, 1))
                return cli_bad_args(a);
        for (;;) {
                r = fetch(c, &cur);
                if (r < 0) {
                        frame_data_done(&cur);
                        frame_data_done(&prev);
                        return cli_api_fail(c, r);
                }
                if (clear)
                        fputs("\033[H\033[2J", stdout);
                print_frame(c, &cur, prev.metrics ? &prev : NULL);
                if (!a->once && !clear)
                        putchar('\n'); /* frames apart in a pipe or a file */
                fflush(stdout);
                if (a->once)
                        break;
                frame_data_done(&prev);
                prev = cur;
                memset(&cur, 0, sizeof(cur));
                sleep_ms(interval);
        }
        frame_data_done(&cur);
        frame_data_done(&prev);
        return 0;
}
