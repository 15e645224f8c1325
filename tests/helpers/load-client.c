/* load-client: drives one cellad at saturation from many clients for a while and reports
 * what it saw (tests/integration/test-load.sh, bench/reliability.sh). Each client is a
 * thread with its own libcella connection, working on sandbox (client % SANDBOXES); a
 * sampler thread reads cellad's resident memory every 500 ms.
 *
 * usage: load-client URL PREFIX SANDBOXES CLIENTS SECONDS CELLAD_PID exec|mixed
 *
 *   exec   every client runs `exec true` back to back.
 *   mixed  every client goes round exec `echo`, a 16 KiB file PUT then GET (compared), a
 *          background process started and killed, and a GET through the preview URL of the
 *          sandbox's port 8000 (exposed by the caller, with a server behind it); besides,
 *          one execStream per sandbox prints a line every 200 ms for the whole run.
 *
 * Sandboxes are PREFIX0 .. PREFIX<SANDBOXES-1>, made by the caller. The token, if any, is
 * $CELLA_TOKEN. Prints one line of key=value figures (latencies in microseconds, memory
 * in KiB; rss_start is taken a quarter into the run, after the warm-up) and the first
 * errors on stderr. Exit status 0 when it ran to the end, whatever it measured: the caller
 * judges the figures. Never asserts on timing.
 */
#include <cella/cella.h>
#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_CLIENTS 256
#define MAX_SANDBOXES 256
#define MAX_SAMPLES (1 << 18) /* per client and operation */
#define PAYLOAD 16384

enum op { OP_EXEC, OP_FILE, OP_PROCESS, OP_PREVIEW, OP_N };
static const char *const op_names[OP_N] = {"exec", "file", "process", "preview"};

struct client {
        pthread_t thread;
        int index;
        uint32_t *lat[OP_N]; /* microseconds */
        size_t n[OP_N];
        unsigned long errors;
};

struct streamer {
        pthread_t thread;
        int sandbox;
        unsigned long lines;
        unsigned long errors;
};

static const char *url, *prefix, *token;
static int nsandboxes, nclients, seconds;
static pid_t cellad_pid;
static bool mixed;
static double deadline;
static atomic_int errors_printed;
static char preview_host[MAX_SANDBOXES][256];
static char listen_url[256];

static double now_s(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void sandbox_name(int i, char *buf, size_t size)
{
        snprintf(buf, size, "%s%d", prefix, i);
}

static void report_error(const char *what, const char *sandbox, cella_client *c)
{
        if (atomic_fetch_add(&errors_printed, 1) < 20)
                fprintf(stderr, "error: %s on %s: %s %s\n", what, sandbox,
                        c ? cella_client_error_code(c) : "",
                        c ? cella_client_error_message(c) : "");
}

static int op_exec(cella_client *c, const char *sb, const char *cmd, const char *want)
{
        cella_exec_result *r = NULL;
        size_t len = 0;
        const void *out;
        int ok;

        if (cella_exec(c, sb, cmd, NULL, &r) < 0) {
                report_error("exec", sb, c);
                return -1;
        }
        out = cella_exec_result_stdout(r, &len);
        ok = cella_exec_result_exit_code(r) == 0 &&
             (!want || (len == strlen(want) && memcmp(out, want, len) == 0));
        cella_exec_result_free(r);
        if (!ok)
                report_error("exec: unexpected result", sb, NULL);
        return ok ? 0 : -1;
}

static int op_file(cella_client *c, const char *sb, int client, unsigned round)
{
        unsigned char data[PAYLOAD], back[PAYLOAD + 1];
        char path[64];
        FILE *f = tmpfile();
        size_t got;
        int r = -1;

        if (!f)
                return -1;
        for (size_t i = 0; i < sizeof(data); i++)
                data[i] = (unsigned char)(i * 31 + round + (unsigned)client);
        snprintf(path, sizeof(path), "/workspace/load-%d.bin", client);
        if (cella_file_write(c, sb, path, data, sizeof(data)) < 0) {
                report_error("file write", sb, c);
                goto out;
        }
        if (cella_file_read_fd(c, sb, path, fileno(f)) < 0) {
                report_error("file read", sb, c);
                goto out;
        }
        rewind(f);
        got = fread(back, 1, sizeof(back), f);
        if (got != sizeof(data) || memcmp(back, data, sizeof(data)) != 0) {
                report_error("file read: not what was written", sb, NULL);
                goto out;
        }
        r = 0;
out:
        fclose(f);
        return r;
}

static int op_process(cella_client *c, const char *sb, int client, unsigned round)
{
        char id[64], *json = NULL;
        struct cella_process_options o = {.id = id};

        snprintf(id, sizeof(id), "load-%d-%u", client, round);
        if (cella_process_start(c, sb, "sleep 300", &o, &json) < 0) {
                report_error("process start", sb, c);
                return -1;
        }
        free(json);
        json = NULL;
        if (cella_process_kill(c, sb, id, "KILL", &json) < 0) {
                report_error("process kill", sb, c);
                return -1;
        }
        free(json);
        return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *ud)
{
        (void)p;
        *(size_t *)ud += size * n;
        return size * n;
}

static int op_preview(CURL *h, int sandbox, const char *sb)
{
        char host[300];
        struct curl_slist *hdr;
        long status = 0;
        size_t bytes = 0;
        CURLcode rc;

        snprintf(host, sizeof(host), "Host: %s", preview_host[sandbox]);
        hdr = curl_slist_append(NULL, host);
        curl_easy_setopt(h, CURLOPT_URL, listen_url);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdr);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, &bytes);
        curl_easy_setopt(h, CURLOPT_TIMEOUT, 30L);
        rc = curl_easy_perform(h);
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdr);
        if (rc != CURLE_OK || status != 200 || bytes == 0) {
                if (atomic_fetch_add(&errors_printed, 1) < 20)
                        fprintf(stderr, "error: preview GET on %s: %s, HTTP %ld\n", sb,
                                curl_easy_strerror(rc), status);
                return -1;
        }
        return 0;
}

static void *client_main(void *arg)
{
        struct client *cl = arg;
        cella_client *c = NULL;
        CURL *h = curl_easy_init();
        int s = cl->index % nsandboxes;
        char sb[128];
        unsigned round = 0;

        sandbox_name(s, sb, sizeof(sb));
        if (!h || cella_client_new(url, token, &c) < 0) {
                cl->errors++;
                goto out;
        }
        while (now_s() < deadline) {
                enum op op = mixed ? (enum op)(round % OP_N) : OP_EXEC;
                double t0 = now_s();
                int r;

                switch (op) {
                case OP_EXEC:
                        r = mixed ? op_exec(c, sb, "echo hi", "hi\n")
                                  : op_exec(c, sb, "true", NULL);
                        break;
                case OP_FILE:
                        r = op_file(c, sb, cl->index, round);
                        break;
                case OP_PROCESS:
                        r = op_process(c, sb, cl->index, round);
                        break;
                default:
                        r = op_preview(h, s, sb);
                        break;
                }
                if (r < 0)
                        cl->errors++;
                else if (cl->n[op] < MAX_SAMPLES)
                        cl->lat[op][cl->n[op]++] = (uint32_t)((now_s() - t0) * 1e6);
                round++;
        }
out:
        curl_easy_cleanup(h);
        cella_client_free(c);
        return NULL;
}

static int on_line(const void *data, size_t len, void *ud)
{
        struct streamer *st = ud;

        for (size_t i = 0; i < len; i++)
                st->lines += ((const char *)data)[i] == '\n';
        return 0;
}

static void *streamer_main(void *arg)
{
        struct streamer *st = arg;
        cella_client *c = NULL;
        struct cella_exec_callbacks cb = {.on_stdout = on_line, .userdata = st};
        char sb[128], cmd[128];
        int code = -1;

        sandbox_name(st->sandbox, sb, sizeof(sb));
        /* sessionless would need a sandbox option: a session of its own keeps it off the
         * default session the clients use */
        snprintf(cmd, sizeof(cmd), "for i in $(seq 1 %d); do echo tick $i; sleep 0.2; done",
                 seconds * 5);
        if (cella_client_new(url, token, &c) < 0 ||
            cella_exec_stream(c, sb, cmd, &(struct cella_exec_options){.session_id = "load-stream"},
                              &cb, &code) < 0 ||
            code != 0) {
                report_error("execStream", sb, c);
                st->errors++;
        }
        cella_client_free(c);
        return NULL;
}

static long rss_kb(void)
{
        char path[64], line[256];
        long kb = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)cellad_pid);
        f = fopen(path, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld kB", &kb) == 1)
                        break;
        fclose(f);
        return kb;
}

static long rss_start = -1, rss_end = -1, rss_max = -1;

static void *sampler_main(void *arg)
{
        double start = now_s(), quarter = start + (deadline - start) / 4;

        (void)arg;
        while (now_s() < deadline) {
                long kb = rss_kb();

                if (kb > rss_max)
                        rss_max = kb;
                if (rss_start < 0 && now_s() >= quarter)
                        rss_start = kb;
                rss_end = kb;
                usleep(500 * 1000);
        }
        return NULL;
}

/* A whole decimal int in [lo, hi], or -1. */
static int arg_int(const char *s, int lo, int hi)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < lo || v > hi)
                return -1;
        return (int)v;
}

static int cmp_u32(const void *a, const void *b)
{
        uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;

        return x < y ? -1 : x > y;
}

static uint32_t pct(const uint32_t *v, size_t n, double p)
{
        size_t i = (size_t)(p * (double)(n - 1) + 0.5);

        return n ? v[i < n ? i : n - 1] : 0;
}

/* The preview host of each sandbox's port 8000, from GET /ports. */
static int find_previews(void)
{
        cella_client *c = NULL;
        int r = 0;

        if (cella_client_new(url, token, &c) < 0)
                return -1;
        for (int i = 0; i < nsandboxes && r == 0; i++) {
                char sb[128], *json = NULL;
                const char *h, *end;

                sandbox_name(i, sb, sizeof(sb));
                if (cella_port_list(c, sb, &json) < 0) {
                        report_error("port list", sb, c);
                        r = -1;
                        break;
                }
                /* {"ports":[{"url":"http://HOST/", ...}]}: the host of the first URL */
                h = strstr(json, "\"url\":\"http://");
                end = h ? strchr(h + 14, '/') : NULL;
                if (!h || !end || (size_t)(end - (h + 14)) >= sizeof(preview_host[i])) {
                        fprintf(stderr, "no preview URL for %s: %s\n", sb, json);
                        r = -1;
                } else {
                        memcpy(preview_host[i], h + 14, (size_t)(end - (h + 14)));
                        preview_host[i][end - (h + 14)] = '\0';
                }
                cella_free(json);
        }
        cella_client_free(c);
        snprintf(listen_url, sizeof(listen_url), "%s/", url);
        return r;
}

int main(int argc, char **argv)
{
        static struct client clients[MAX_CLIENTS];
        static struct streamer streamers[MAX_SANDBOXES];
        pthread_t sampler;
        unsigned long ops = 0, errors = 0, lines = 0, stream_errors = 0;
        uint32_t *all;
        size_t nall = 0;
        double start, elapsed;

        if (argc != 8 || (strcmp(argv[7], "exec") != 0 && strcmp(argv[7], "mixed") != 0)) {
                fprintf(stderr, "usage: load-client URL PREFIX SANDBOXES CLIENTS SECONDS "
                                "CELLAD_PID exec|mixed\n");
                return 2;
        }
        url = argv[1];
        prefix = argv[2];
        nsandboxes = arg_int(argv[3], 1, MAX_SANDBOXES);
        nclients = arg_int(argv[4], 1, MAX_CLIENTS);
        seconds = arg_int(argv[5], 1, 86400);
        cellad_pid = (pid_t)arg_int(argv[6], 1, 1 << 22);
        mixed = strcmp(argv[7], "mixed") == 0;
        token = getenv("CELLA_TOKEN");
        if (nsandboxes < 0 || nclients < 0 || seconds < 0 || cellad_pid < 0) {
                fprintf(stderr, "load-client: bad arguments\n");
                return 2;
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        if (mixed && find_previews() < 0)
                return 1;
        start = now_s();
        deadline = start + seconds;
        if (pthread_create(&sampler, NULL, sampler_main, NULL) != 0)
                return 1;
        for (int i = 0; mixed && i < nsandboxes; i++) {
                streamers[i].sandbox = i;
                if (pthread_create(&streamers[i].thread, NULL, streamer_main, &streamers[i]) != 0)
                        return 1;
        }
        for (int i = 0; i < nclients; i++) {
                clients[i].index = i;
                for (int k = 0; k < OP_N; k++)
                        if (!(clients[i].lat[k] = malloc(sizeof(uint32_t) * MAX_SAMPLES)))
                                return 1;
                if (pthread_create(&clients[i].thread, NULL, client_main, &clients[i]) != 0)
                        return 1;
        }
        for (int i = 0; i < nclients; i++)
                pthread_join(clients[i].thread, NULL);
        elapsed = now_s() - start;
        for (int i = 0; mixed && i < nsandboxes; i++) {
                pthread_join(streamers[i].thread, NULL);
                lines += streamers[i].lines;
                stream_errors += streamers[i].errors;
        }
        pthread_join(sampler, NULL);

        printf("mode=%s clients=%d sandboxes=%d seconds=%.1f", argv[7], nclients, nsandboxes,
               elapsed);
        for (int i = 0; i < nclients; i++)
                for (int k = 0; k < OP_N; k++)
                        ops += clients[i].n[k];
        all = malloc(sizeof(uint32_t) * (ops + 1));
        if (!all)
                return 1;
        for (int k = 0; k < OP_N; k++) {
                size_t n = 0;

                for (int i = 0; i < nclients; i++) {
                        memcpy(all + n, clients[i].lat[k], sizeof(uint32_t) * clients[i].n[k]);
                        n += clients[i].n[k];
                }
                if (n == 0)
                        continue;
                qsort(all, n, sizeof(uint32_t), cmp_u32);
                printf(" %s_n=%zu %s_p50_us=%" PRIu32 " %s_p99_us=%" PRIu32, op_names[k], n,
                       op_names[k], pct(all, n, 0.5), op_names[k], pct(all, n, 0.99));
        }
        for (int i = 0; i < nclients; i++) {
                errors += clients[i].errors;
                for (int k = 0; k < OP_N; k++) {
                        memcpy(all + nall, clients[i].lat[k], sizeof(uint32_t) * clients[i].n[k]);
                        nall += clients[i].n[k];
                        free(clients[i].lat[k]);
                }
        }
        qsort(all, nall, sizeof(uint32_t), cmp_u32);
        printf(" ops=%lu errors=%lu ops_per_s=%.0f p50_us=%" PRIu32 " p99_us=%" PRIu32
               " max_us=%" PRIu32,
               ops, errors, (double)ops / elapsed, pct(all, nall, 0.5), pct(all, nall, 0.99),
               nall ? all[nall - 1] : 0);
        if (mixed)
                printf(" stream_lines=%lu stream_errors=%lu", lines, stream_errors);
        printf(" rss_start_kb=%ld rss_end_kb=%ld rss_max_kb=%ld\n", rss_start, rss_end, rss_max);
        free(all);
        curl_global_cleanup();
        return 0;
}
