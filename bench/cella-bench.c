/* cella-bench: latency and memory figures of a real cellad, with baselines measured in the
 * same run (bwrap on the same rootfs, host fork+exec). Prints a markdown table; never
 * asserts on timing.
 *
 * usage: cella-bench [--cellad PATH] [--images DIR] [--image NAME] [--tti N] [--warm N]
 *                    [--procs N]
 */

#include <curl/curl.h>
#include <dirent.h>
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

static int start_cellad(const char *cellad, const char *images)
{
        int pfd[2];
        FILE *f;
        char line[512];
        char datasub[256];

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
                execl(cellad, cellad, "--listen", "127.0.0.1:0", "--data-dir", datasub, "--images",
                      images, "--log-level", "warn", (char *)NULL);
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

/* Host pid of the sandbox's PID 1: a process in a cgroup named after the sandbox whose
 * NSpid ends in 1. -1 if not found. */
static pid_t sandbox_init_pid(const char *name)
{
        char path[300], line[512], needle[80];
        struct dirent *de;
        pid_t found = -1;
        DIR *d = opendir("/proc");

        snprintf(needle, sizeof(needle), "/%s", name);
        while (d && found < 0 && (de = readdir(d))) {
                bool in_cgroup = false;
                FILE *f;

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/cgroup", de->d_name);
                f = fopen(path, "r");
                while (f && fgets(line, sizeof(line), f))
                        if (strstr(line, needle))
                                in_cgroup = true;
                if (f)
                        fclose(f);
                if (!in_cgroup)
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
                f = fopen(path, "r");
                while (f && fgets(line, sizeof(line), f)) {
                        size_t n = strlen(line);

                        if (strncmp(line, "NSpid:", 6) == 0 && n >= 3 && line[n - 2] == '1' &&
                            (line[n - 3] == '\t' || line[n - 3] == ' '))
                                found = (pid_t)strtol(de->d_name, NULL, 10);
                }
                if (f)
                        fclose(f);
        }
        if (d)
                closedir(d);
        return found;
}

/* VmRSS of pid in KiB, or -1. */
static long long rss_kib(pid_t pid)
{
        char path[64], line[256];
        long long v = -1;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        f = fopen(path, "r");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %lld kB", &v) == 1)
                        break;
        if (f)
                fclose(f);
        return v;
}

/* Start a background `true` in name; its time in ms, or < 0 on failure. */
static double start_true(const char *name)
{
        char path[256];
        struct resp r;
        double t0 = now_ms(), t;
        long status;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/processes", name);
        status = request("POST", path, "{\"command\":\"true\"}", &r);
        t = now_ms() - t0;
        if (status != 200)
                fprintf(stderr, "start in %s: HTTP %ld: %.300s\n", name, status,
                        r.data ? r.data : "");
        free(r.data);
        return status == 200 ? t : -1;
}

int main(int argc, char **argv)
{
        static char cellad_buf[4096];
        const char *cellad = "cellad", *images = "/var/lib/cella/images";
        const char *image = "default";
        int n_tti = 50, n_warm = 200, n_mem = 5, n_procs = 10000;
        long long rss_base = -1, rss_cap = -1, rss_end = -1;
        double *pstart = NULL;
        char rootfs[512], name[64];
        double *tti, *warm, *bw, *host, *hostsh;
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
                else if (strcmp(argv[i], "--procs") == 0)
                        n_procs = parse_count(argv[i + 1]);
        }
        if (n_tti < 1 || n_tti > 10000 || n_warm < 1 || n_warm > 100000 || n_procs < 200) {
                fprintf(stderr, "bad counts\n");
                return 2;
        }
        snprintf(rootfs, sizeof(rootfs), "%s/%s/rootfs", images, image);
        tti = calloc((size_t)n_tti, sizeof(double));
        bw = calloc((size_t)n_tti, sizeof(double));
        warm = calloc((size_t)n_warm, sizeof(double));
        host = calloc((size_t)n_warm, sizeof(double));
        hostsh = calloc((size_t)n_warm, sizeof(double));
        pstart = calloc((size_t)n_procs, sizeof(double));
        if (!tti || !bw || !warm || !host || !hostsh || !pstart)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl = curl_easy_init();
        if (!curl || start_cellad(cellad, images) < 0)
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
        /* Background processes: n_procs short `true` processes started through the API
         * in one sandbox; the agent's (PID 1's) VmRSS after the first 100 (baseline),
         * just past the table's 1024 (where forgetting starts) and at the end. */
        snprintf(name, sizeof(name), "bench-%d-procs", (int)getpid());
        if (!exec_in(name, "true", ""))
                goto out;
        {
                pid_t init = sandbox_init_pid(name);

                for (int i = 0; i < n_procs; i++) {
                        pstart[i] = start_true(name);
                        if (pstart[i] < 0)
                                goto out;
                        if (i + 1 == 100 || i + 1 == 1100) {
                                usleep(200 * 1000); /* let them finish */
                                if (i + 1 == 100)
                                        rss_base = rss_kib(init);
                                else
                                        rss_cap = rss_kib(init);
                        }
                }
                usleep(200 * 1000);
                rss_end = rss_kib(init);
                if (init < 0)
                        fprintf(stderr, "PID 1 of %s not found: no agent memory figures\n", name);
        }
        destroy(name);
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

        {
                double tti50 = pct(tti, n_tti, 0.5), tti95 = pct(tti, n_tti, 0.95);
                double bw50 = pct(bw, n_tti, 0.5), bw95 = pct(bw, n_tti, 0.95);
                double w50 = pct(warm, n_warm, 0.5), w95 = pct(warm, n_warm, 0.95);
                double h50 = pct(host, n_warm, 0.5), h95 = pct(host, n_warm, 0.95);
                double s50 = pct(hostsh, n_warm, 0.5), s95 = pct(hostsh, n_warm, 0.95);

                printf("| figure | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
                printf("| cella time-to-interactive (new sandbox, `echo hi`) | %d | %.2f | "
                       "%.2f |\n",
                       n_tti, tti50, tti95);
                printf("| bwrap `echo hi` in the same rootfs (baseline) | %d | %.2f | %.2f |\n",
                       n_tti, bw50, bw95);
                printf("| cella warm exec (`true`, HTTP round trip) | %d | %.2f | %.2f |\n", n_warm,
                       w50, w95);
                printf("| host fork+exec of /bin/true (baseline) | %d | %.3f | %.3f |\n", n_warm,
                       h50, h95);
                printf("| host fork+exec of `bash -c true` (baseline) | %d | %.3f | %.3f |\n",
                       n_warm, s50, s95);
                printf("| cella background process start (`true`, HTTP round trip) | %d | %.2f "
                       "| %.2f |\n\n",
                       n_procs, pct(pstart, n_procs, 0.5), pct(pstart, n_procs, 0.95));
                printf("| ratio | p50 | target |\n|---|---|---|\n");
                printf("| TTI / bwrap | %.2fx | <= 1.5x |\n", tti50 / bw50);
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
                if (rss_base > 0 && rss_end > 0)
                        printf("\nAgent memory (VmRSS of the sandbox's PID 1) with background "
                               "processes: %.2f MiB after 100 `true` processes (baseline), "
                               "%.2f MiB after 1100 (past the 1024 kept), %.2f MiB after %d "
                               "(%+.2f MiB from the baseline)\n",
                               rss_base / 1024.0, rss_cap / 1024.0, rss_end / 1024.0, n_procs,
                               (rss_end - rss_base) / 1024.0);
        }
        rc = 0;
out:
        stop_cellad();
        curl_easy_cleanup(curl);
        curl_global_cleanup();
        free(tti);
        free(bw);
        free(warm);
        free(host);
        free(hostsh);
        free(pstart);
        return rc;
}
