/* sdk-client: the C side of the SDK benchmark (bench/sdk.sh). Runs the same work as
 * bench/sdk-typescript.mjs through libcella, so that both clients are measured against one
 * cellad in the same run. Prints one line of `key=value` figures; never asserts on timing.
 *
 * usage: sdk-client URL SANDBOX rt N        exec `true` N times (after 100 warm-up calls):
 *                                           p50_us= p95_us=
 *        sdk-client URL SANDBOX stream BYTES  exec_stream of a command writing BYTES of text:
 *                                           bytes= seconds= mbps=
 *        sdk-client URL SANDBOX run CMD     cella_exec_stream (SSE) of CMD, its stdout counted
 *                                           and dropped: bytes= seconds= mbps=
 *        sdk-client URL SANDBOX raw CMD     the same through cella_exec_raw (the raw form)
 */
#include <cella/cella.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_us(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p)
{
        int i = (int)(p * (n - 1) + 0.5);

        return v[i < n ? i : n - 1];
}

static int exec_true(cella_client *c, const char *sb)
{
        cella_exec_result *r = NULL;
        int rc = cella_exec(c, sb, "true", NULL, &r);

        if (rc < 0 || cella_exec_result_exit_code(r) != 0) {
                fprintf(stderr, "exec true: %d %s %s\n", rc, cella_client_error_code(c),
                        cella_client_error_message(c));
                cella_exec_result_free(r);
                return -1;
        }
        cella_exec_result_free(r);
        return 0;
}

static int on_out(const void *data, size_t len, void *userdata)
{
        (void)data;
        *(unsigned long long *)userdata += len;
        return 0;
}

int main(int argc, char **argv)
{
        cella_client *c = NULL;

        if (argc != 5) {
                fprintf(stderr,
                        "usage: sdk-client URL SANDBOX rt N | stream BYTES | run CMD | raw CMD\n");
                return 2;
        }
        if (cella_client_new(argv[1], NULL, &c) < 0)
                return 1;
        if (strcmp(argv[3], "rt") == 0) {
                long n = strtol(argv[4], NULL, 10);
                double *t;

                if (n < 1 || n > 1000000 || !(t = calloc((size_t)n, sizeof(*t))))
                        return 2;
                for (int i = 0; i < 100; i++)
                        if (exec_true(c, argv[2]) < 0)
                                return 1;
                for (int i = 0; i < n; i++) {
                        double t0 = now_us();

                        if (exec_true(c, argv[2]) < 0)
                                return 1;
                        t[i] = now_us() - t0;
                }
                qsort(t, (size_t)n, sizeof(*t), cmp_double);
                printf("n=%ld p50_us=%.0f p95_us=%.0f\n", n, pct(t, (int)n, 0.5),
                       pct(t, (int)n, 0.95));
                free(t);
        } else if (strcmp(argv[3], "stream") == 0) {
                unsigned long long want = strtoull(argv[4], NULL, 10), got = 0;
                struct cella_exec_callbacks cb = {.on_stdout = on_out, .userdata = &got};
                char cmd[160];
                int code = -1;
                double t0, s;

                snprintf(cmd, sizeof(cmd),
                         "yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | "
                         "head -c %llu",
                         want);
                t0 = now_us();
                if (cella_exec_stream(c, argv[2], cmd, NULL, &cb, &code) < 0 || code != 0 ||
                    got != want) {
                        fprintf(stderr, "stream: exit %d, %llu of %llu bytes: %s\n", code, got,
                                want, cella_client_error_message(c));
                        return 1;
                }
                s = (now_us() - t0) / 1e6;
                printf("bytes=%llu seconds=%.2f mbps=%.0f\n", got, s, (double)got / 1e6 / s);
        } else if (strcmp(argv[3], "run") == 0 || strcmp(argv[3], "raw") == 0) {
                unsigned long long got = 0;
                struct cella_exec_callbacks cb = {.on_stdout = on_out, .userdata = &got};
                int code = -1;
                double t0 = now_us(), s;
                int rc = argv[3][1] == 'u'
                                 ? cella_exec_stream(c, argv[2], argv[4], NULL, &cb, &code)
                                 : cella_exec_raw(c, argv[2], argv[4], NULL, &cb, &code);

                if (rc < 0 || code != 0) {
                        fprintf(stderr, "run: exit %d after %llu bytes: %s\n", code, got,
                                cella_client_error_message(c));
                        return 1;
                }
                s = (now_us() - t0) / 1e6;
                printf("bytes=%llu seconds=%.2f mbps=%.0f\n", got, s, (double)got / 1e6 / s);
        } else {
                return 2;
        }
        cella_client_free(c);
        return 0;
}
