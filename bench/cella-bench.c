/* cella-bench: latency and memory figures of a real cellad, with baselines measured in the
 * same run (bwrap on the same rootfs, host fork+exec). Prints a markdown table; never
 * asserts on timing.
 *
 * usage: cella-bench [--cellad PATH] [--images DIR] [--image NAME] [--tti N] [--warm N]
 */

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

struct resp {
        char *data;
        size_t len;
};

static pid_t cellad_pid = -1;
static char data_dir[] = "/tmp/cella-bench.XXXXXX";
static char base_url[128];
static CURL *curl;

static double now_ms(void)
{
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static size_t on_data(char *p, size_t size, size_t n, void *user)
{
        struct resp *r = user;
        size_t len = size * n;
        char *d = realloc(r->data, r->len + len + 1);

        if (!d)
                return 0;
        memcpy(d + r->len, p, len);
        r->data = d;
        r->len += len;
        d[r->len] = '\0';
        return len;
}

/* One request on the reused handle; returns the HTTP status (0 on transport error). */
static long request(const char *method, const char *path, const char *body, struct resp *r)
{
        char url[512];
        long status = 0;
        struct curl_slist *hdrs = NULL;

        snprintf(url, sizeof(url), "%s%s", base_url, path);
        r->data = NULL;
        r->len = 0;
        curl_easy_setopt(curl, CURLOPT_URL, url);
        /* HTTPGET resets the handle's method and body state left by the previous request. */
        curl_easy_setopt(curl, CURLOPT_HTTPGET, 1L);
        if (body) {
                curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)strlen(body));
        }
        curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, method);
        curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_data);
        curl_easy_setopt(curl, CURLOPT_WRITEDATA, r);
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(curl, CURLOPT_HTTPHEADER, hdrs);
        if (curl_easy_perform(curl) == CURLE_OK)
                curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
        curl_slist_free_all(hdrs);
        return status;
}

/* exec COMMAND in sandbox NAME; true when HTTP 200 and stdout equals WANT. */
static bool exec_in(const char *name, const char *command, const char *want)
{
        char path[256], body[256];
        struct resp r;
        long status;
        bool ok = false;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", name);
        snprintf(body, sizeof(body), "{\"command\":\"%s\"}", command);
        status = request("POST", path, body, &r);
        if (status == 200 && r.data) {
                json_t *j = json_loads(r.data, 0, NULL);
                const char *out = json_string_value(json_object_get(j, "stdout"));

                ok = out && strcmp(out, want) == 0;
                json_decref(j);
        }
        if (!ok)
                fprintf(stderr, "exec in %s: HTTP %ld: %.300s\n", name, status,
                        r.data ? r.data : "");
        free(r.data);
        return ok;
}

static void destroy(const char *name)
{
        char path[256];
        struct resp r;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s", name);
        request("DELETE", path, NULL, &r);
        free(r.data);
}

static int parse_count(const char *s)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || *end || end == s || v < 1 || v > 100000)
                return -1;
        return (int)v;
}

static int cmp_double(const void *a, const void *b)
{
        double x = *(const double *)a, y = *(const double *)b;

        return (x > y) - (x < y);
}

static double pct(double *v, int n, double p)
{
        int i;

        qsort(v, (size_t)n, sizeof(*v), cmp_double);
        i = (int)(p * (n - 1) + 0.5);
        return v[i];
}

static void stop_cellad(void)
{
        if (cellad_pid > 0) {
                kill(cellad_pid, SIGTERM);
                waitpid(cellad_pid, NULL, 0);
                cellad_pid = -1;
        }
        /* data_dir is ours (mkdtemp); remove it with rm -r, no shell expansion of input. */
        if (strcmp(data_dir, "/tmp/cella-bench.XXXXXX") != 0) {
                pid_t pid;
                char *argv[] = {"rm", "-rf", "--", data_dir, NULL};

                if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0)
                        waitpid(pid, NULL, 0);
        }
}

/* Start cellad on a fresh temp data dir; extra (NULL-terminated, may be NULL) are more
 * options for it. */
static int start_cellad(const char *cellad, const char *images, char *const extra[])
{
        int pfd[2];
        FILE *f;
        char line[512];
        char datasub[256];

        snprintf(data_dir, sizeof(data_dir), "/tmp/cella-bench.XXXXXX");
        if (!mkdtemp(data_dir)) {
                perror("mkdtemp");
                return -1;
        }
        snprintf(datasub, sizeof(datasub), "%s/data", data_dir);
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -1;
        cellad_pid = fork();
        if (cellad_pid < 0)
                return -1;
        if (cellad_pid == 0) {
                int null = open("/dev/null", O_WRONLY);

                dup2(pfd[1], 1);
                dup2(null >= 0 ? null : pfd[1], 2);
                char *argv[16] = {(char *)cellad, "--listen",    "127.0.0.1:0",
                                  "--data-dir",   datasub,       "--images",
                                  (char *)images, "--log-level", "warn"};
                for (int i = 0; extra && extra[i] && i < 6; i++)
                        argv[9 + i] = extra[i];
                execv(cellad, argv);
                _exit(127);
        }
        close(pfd[1]);
        f = fdopen(pfd[0], "r");
        while (f && fgets(line, sizeof(line), f)) {
                char *p = strstr(line, "cellad listening on ");

                if (p) {
                        p += strlen("cellad listening on ");
                        p[strcspn(p, "\r\n")] = '\0';
                        snprintf(base_url, sizeof(base_url), "%s", p);
                        /* Keep draining its stdout in a child so cellad never blocks. */
                        if (fork() == 0) {
                                while (fgets(line, sizeof(line), f))
                                        ;
                                _exit(0);
                        }
                        fclose(f);
                        return 0;
                }
        }
        if (f)
                fclose(f);
        fprintf(stderr, "cellad did not become ready\n");
        return -1;
}

/* Run argv, stdout to a pipe, compare with WANT (NULL: ignore). Returns 0 when it exited 0. */
static int run(char *const argv[], const char *want)
{
        int pfd[2];
        pid_t pid;
        int st;
        char buf[64];
        ssize_t n, len = 0;
        posix_spawn_file_actions_t fa;

        if (pipe(pfd) < 0)
                return -1;
        posix_spawn_file_actions_init(&fa);
        posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
        posix_spawn_file_actions_addclose(&fa, pfd[0]);
        if (posix_spawn(&pid, argv[0], &fa, NULL, argv, environ) != 0) {
                posix_spawn_file_actions_destroy(&fa);
                close(pfd[0]);
                close(pfd[1]);
                return -1;
        }
        posix_spawn_file_actions_destroy(&fa);
        close(pfd[1]);
        while ((n = read(pfd[0], buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
                len += n;
        close(pfd[0]);
        buf[len] = '\0';
        if (waitpid(pid, &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
                return -1;
        if (want && strcmp(buf, want) != 0)
                return -1;
        return 0;
}

/* Memory charged to a sandbox's cgroup (v2 memory.current, or v1 memory.usage_in_bytes);
 * the runtime's parent cgroup is /sys/fs/cgroup/[HIERARCHY/]cella[-SUFFIX]/NAME. */
static long long sandbox_memory(const char *name)
{
        const char *pat[] = {"/sys/fs/cgroup/cella*/", "/sys/fs/cgroup/memory/cella*/",
                             "/sys/fs/cgroup/unified/cella*/"};
        const char *file[] = {"memory.current", "memory.usage_in_bytes", "memory.current"};
        char path[512];
        long long v = -1;

        for (size_t i = 0; i < sizeof(pat) / sizeof(pat[0]) && v < 0; i++) {
                glob_t g;

                snprintf(path, sizeof(path), "%s%s/%s", pat[i], name, file[i]);
                if (glob(path, 0, NULL, &g) != 0)
                        continue;
                for (size_t k = 0; k < g.gl_pathc && v < 0; k++) {
                        FILE *f = fopen(g.gl_pathv[k], "r");

                        if (!f)
                                continue;
                        if (fscanf(f, "%lld", &v) != 1)
                                v = -1;
                        fclose(f);
                }
                globfree(&g);
        }
        return v;
}

int main(int argc, char **argv)
{
        static char cellad_buf[4096];
        const char *cellad = "cellad", *images = "/var/lib/cella/images";
        const char *image = "default";
        int n_tti = 50, n_warm = 200, n_mem = 5;
        char rootfs[512], name[64];
        double *tti, *tti_nodisk, *warm, *bw, *host, *hostsh;
        double t0;
        long long mem_sum = 0;
        int mem_n = 0, rc = 1;

        /* Defaults: IMAGES from the environment, cellad next to this program's build dir. */
        if (getenv("IMAGES") && *getenv("IMAGES"))
                images = getenv("IMAGES");
        {
                ssize_t n = readlink("/proc/self/exe", cellad_buf, sizeof(cellad_buf) - 16);

                if (n > 0) {
                        char *slash;

                        cellad_buf[n] = '\0';
                        slash = strrchr(cellad_buf, '/');
                        if (slash) {
                                *slash = '\0';
                                slash = strrchr(cellad_buf, '/');
                        }
                        if (slash && strcmp(slash, "/bench") == 0) {
                                memcpy(slash, "/cellad", sizeof("/cellad"));
                                cellad = cellad_buf;
                        }
                }
        }
        for (int i = 1; i + 1 < argc; i += 2) {
                if (strcmp(argv[i], "--cellad") == 0)
                        cellad = argv[i + 1];
                else if (strcmp(argv[i], "--images") == 0)
                        images = argv[i + 1];
                else if (strcmp(argv[i], "--image") == 0)
                        image = argv[i + 1];
                else if (strcmp(argv[i], "--tti") == 0)
                        n_tti = parse_count(argv[i + 1]);
                else if (strcmp(argv[i], "--warm") == 0)
                        n_warm = parse_count(argv[i + 1]);
        }
        if (n_tti < 1 || n_tti > 10000 || n_warm < 1 || n_warm > 100000) {
                fprintf(stderr, "bad counts\n");
                return 2;
        }
        snprintf(rootfs, sizeof(rootfs), "%s/%s/rootfs", images, image);
        tti = calloc((size_t)n_tti, sizeof(double));
        tti_nodisk = calloc((size_t)n_tti, sizeof(double));
        bw = calloc((size_t)n_tti, sizeof(double));
        warm = calloc((size_t)n_warm, sizeof(double));
        host = calloc((size_t)n_warm, sizeof(double));
        hostsh = calloc((size_t)n_warm, sizeof(double));
        if (!tti || !tti_nodisk || !bw || !warm || !host || !hostsh)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl = curl_easy_init();
        if (!curl || start_cellad(cellad, images, NULL) < 0)
                goto out;
        fprintf(stderr, "cellad at %s\n", base_url);

        /* Time to interactive: a new name to the result of `echo hi` over HTTP. */
        for (int i = 0; i < n_tti; i++) {
                snprintf(name, sizeof(name), "bench-%d-%d", (int)getpid(), i);
                t0 = now_ms();
                if (!exec_in(name, "echo hi", "hi\n"))
                        goto out;
                tti[i] = now_ms() - t0;
                destroy(name);
        }
        /* Warm exec: `true` in a running sandbox. It gets the whole machine's CPU
         * (standard-3: 2 vCPU): back to back, `bash -c true` keeps about half a CPU busy,
         * and the default type's 1/2 vCPU quota would then measure CFS throttling, not
         * the exec path. */
        snprintf(name, sizeof(name), "bench-%d-warm", (int)getpid());
        {
                char path[128];
                struct resp r = {0};
                snprintf(path, sizeof(path), "/v1/sandboxes/%s", name);
                if (request("PUT", path, "{\"instanceType\":\"standard-3\"}", &r) / 100 != 2) {
                        fprintf(stderr, "create %s: %.300s\n", name, r.data ? r.data : "");
                        free(r.data);
                        goto out;
                }
                free(r.data);
        }
        if (!exec_in(name, "true", ""))
                goto out;
        for (int i = 0; i < n_warm; i++) {
                t0 = now_ms();
                if (!exec_in(name, "true", ""))
                        goto out;
                warm[i] = now_ms() - t0;
        }
        destroy(name);
        /* Baseline: bwrap running the same echo in the same rootfs. */
        for (int i = 0; i < n_tti; i++) {
                char *bargv[] = {"/usr/bin/bwrap", "--unshare-all", "--ro-bind", rootfs, "/",
                                 "--proc",         "/proc",         "--dev",     "/dev", "--tmpfs",
                                 "/tmp",           "echo",          "hi",        NULL};

                t0 = now_ms();
                if (run(bargv, "hi\n") < 0) {
                        fprintf(stderr, "bwrap failed\n");
                        goto out;
                }
                bw[i] = now_ms() - t0;
        }
        /* Baseline: host fork+exec of /bin/true. */
        for (int i = 0; i < n_warm; i++) {
                char *targv[] = {"/bin/true", NULL};

                t0 = now_ms();
                if (run(targv, NULL) < 0)
                        goto out;
                host[i] = now_ms() - t0;
        }
        /* Baseline: host fork+exec of `bash -c true`, the work a sandbox exec does. */
        for (int i = 0; i < n_warm; i++) {
                char *sargv[] = {"/bin/bash", "-c", "true", NULL};

                t0 = now_ms();
                if (run(sargv, NULL) < 0)
                        goto out;
                hostsh[i] = now_ms() - t0;
        }
        /* Idle memory: n_mem sandboxes that ran `true`, then sat idle for a second. */
        for (int i = 0; i < n_mem; i++) {
                snprintf(name, sizeof(name), "bench-%d-idle-%d", (int)getpid(), i);
                if (!exec_in(name, "true", ""))
                        goto out;
        }
        sleep(1);
        for (int i = 0; i < n_mem; i++) {
                long long v;

                snprintf(name, sizeof(name), "bench-%d-idle-%d", (int)getpid(), i);
                v = sandbox_memory(name);
                if (v >= 0) {
                        mem_sum += v;
                        mem_n++;
                }
                destroy(name);
        }

        /* Time to interactive again, with a cellad whose sandboxes get no disk image: what
         * the kernel-enforced disk limit adds to a start (docs/decisions/0014). */
        stop_cellad();
        {
                char *off[] = {"--disk-quota", "off", NULL};
                if (start_cellad(cellad, images, off) < 0)
                        goto out;
        }
        for (int i = 0; i < n_tti; i++) {
                snprintf(name, sizeof(name), "bench-%d-nodisk-%d", (int)getpid(), i);
                t0 = now_ms();
                if (!exec_in(name, "echo hi", "hi\n"))
                        goto out;
                tti_nodisk[i] = now_ms() - t0;
                destroy(name);
        }

        {
                double tti50 = pct(tti, n_tti, 0.5), tti95 = pct(tti, n_tti, 0.95);
                double nd50 = pct(tti_nodisk, n_tti, 0.5), nd95 = pct(tti_nodisk, n_tti, 0.95);
                double bw50 = pct(bw, n_tti, 0.5), bw95 = pct(bw, n_tti, 0.95);
                double w50 = pct(warm, n_warm, 0.5), w95 = pct(warm, n_warm, 0.95);
                double h50 = pct(host, n_warm, 0.5), h95 = pct(host, n_warm, 0.95);
                double s50 = pct(hostsh, n_warm, 0.5), s95 = pct(hostsh, n_warm, 0.95);

                printf("| figure | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
                printf("| cella time-to-interactive (new sandbox, `echo hi`) | %d | %.2f | "
                       "%.2f |\n",
                       n_tti, tti50, tti95);
                printf("| cella time-to-interactive without disk limits (`--disk-quota off`) | "
                       "%d | %.2f | %.2f |\n",
                       n_tti, nd50, nd95);
                printf("| bwrap `echo hi` in the same rootfs (baseline) | %d | %.2f | %.2f |\n",
                       n_tti, bw50, bw95);
                printf("| cella warm exec (`true`, HTTP round trip) | %d | %.2f | %.2f |\n", n_warm,
                       w50, w95);
                printf("| host fork+exec of /bin/true (baseline) | %d | %.3f | %.3f |\n", n_warm,
                       h50, h95);
                printf("| host fork+exec of `bash -c true` (baseline) | %d | %.3f | %.3f |\n\n",
                       n_warm, s50, s95);
                printf("| ratio | p50 | target |\n|---|---|---|\n");
                printf("| TTI / bwrap | %.2fx | <= 1.5x |\n", tti50 / bw50);
                printf("| TTI / TTI without disk limits | %.2fx | (cost of the disk) |\n",
                       tti50 / nd50);
                printf("| warm exec / host fork+exec of /bin/true | %.2fx | <= 1.2x |\n",
                       w50 / h50);
                printf("| warm exec / host fork+exec of `bash -c true` | %.2fx | (same work) |\n\n",
                       w50 / s50);
                if (mem_n > 0)
                        printf("Idle memory per sandbox (cgroup memory usage, mean of %d): "
                               "%.1f MiB\n",
                               mem_n, (double)mem_sum / mem_n / 1048576.0);
                else
                        printf("Idle memory per sandbox: not available (no memory cgroup)\n");
        }
        rc = 0;
out:
        stop_cellad();
        curl_easy_cleanup(curl);
        curl_global_cleanup();
        free(tti);
        free(tti_nodisk);
        free(bw);
        free(warm);
        free(host);
        free(hostsh);
        return rc;
}
