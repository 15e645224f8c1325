/* cella-bench: latency and memory figures of a real cellad, with baselines measured in the
 * same run (bwrap on the same rootfs, host fork+exec). Prints a markdown table; never
 * asserts on timing.
 *
 * Two daemons in turn: one without a warm pool (--pool 0: every new name is a container
 * build) and one with a pool as large as the burst (--pool BURST), for time to interactive
 * and for a burst of BURST new names requested at once (one client, BURST parallel
 * requests on as many connections, libcurl multi).
 *
 * A third daemon has a pool of --burst-big sandboxes (1,000 by default) for a burst of
 * that many new names at once. A failed request of a burst does not stop the run: the
 * failures are counted and printed beside the burst's figures.
 *
 * usage: cella-bench [--cellad PATH] [--images DIR] [--image NAME] [--tti N] [--warm N]
 *                    [--burst N] [--burst-big N] [--cellad-log FILE] [--dense N]
 *                    [--procs N] [--code N] [--only code|warm|procs|start]
 *
 * --cellad-log appends the daemons' own log (level info: per-request and per-start times)
 * to FILE, to see where the time of a figure goes.
 */

#include <curl/curl.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <jansson.h>
#include <signal.h>
#include <spawn.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
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
#define DATA_DIR_TEMPLATE "/tmp/cella-bench.XXXXXX"
static char data_dir[] = DATA_DIR_TEMPLATE;
static char base_url[128];
static CURL *curl;
static const char *cellad_log; /* --cellad-log: the daemons' stderr, at level info */

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
        if (strcmp(data_dir, DATA_DIR_TEMPLATE) != 0) {
                pid_t pid;
                char *argv[] = {"rm", "-rf", "--", data_dir, NULL};

                if (posix_spawnp(&pid, "rm", NULL, NULL, argv, environ) == 0)
                        waitpid(pid, NULL, 0);
                memcpy(data_dir, DATA_DIR_TEMPLATE, sizeof(data_dir));
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
                int null = cellad_log ? open(cellad_log, O_WRONLY | O_CREAT | O_APPEND, 0600)
                                      : open("/dev/null", O_WRONLY);

                dup2(pfd[1], 1);
                dup2(null >= 0 ? null : pfd[1], 2);
                char *argv[24] = {(char *)cellad, "--listen",    "127.0.0.1:0",
                                  "--data-dir",   datasub,       "--images",
                                  (char *)images, "--log-level", cellad_log ? "info" : "warn"};
                for (int i = 0; extra && extra[i] && i < 14; i++)
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

static long long read_number(const char *path)
{
        FILE *f = fopen(path, "r");
        long long v = -1;

        if (!f)
                return -1;
        if (fscanf(f, "%lld", &v) != 1)
                v = -1;
        fclose(f);
        return v;
}

/* Memory charged to the cgroup of the sandbox whose PID 1 is pid: v1 memory
 * (memory.usage_in_bytes) on hybrid hosts, else v2 memory.current. Sandboxes' cgroups are
 * named by slot, so they are found through the process, not by name. */
static long long sandbox_memory_of(pid_t pid)
{
        char path[600], line[512], v1[512] = "", v2[512] = "";
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int)pid);
        f = fopen(path, "r");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f)) {
                char *p = strrchr(line, ':');

                if (!p)
                        continue;
                p[strcspn(p, "\n")] = '\0';
                if (strstr(line, ":memory:"))
                        snprintf(v1, sizeof(v1), "%s", p + 1);
                else if (strncmp(line, "0::", 3) == 0)
                        snprintf(v2, sizeof(v2), "%s", p + 1);
        }
        fclose(f);
        if (v1[0]) {
                snprintf(path, sizeof(path), "/sys/fs/cgroup/memory%s/memory.usage_in_bytes", v1);
                return read_number(path);
        }
        snprintf(path, sizeof(path), "/sys/fs/cgroup%s/memory.current", v2);
        long long v = read_number(path);
        if (v < 0) {
                snprintf(path, sizeof(path), "/sys/fs/cgroup/unified%s/memory.current", v2);
                v = read_number(path);
        }
        return v;
}

/* Sum of sandbox_memory_of() over the sandboxes of our cellad (its children: each
 * sandbox's PID 1); *ret_n gets how many were measured. */
static long long sandboxes_memory(int *ret_n)
{
        glob_t g;
        long long sum = 0;

        *ret_n = 0;
        if (glob("/proc/[0-9]*/stat", 0, NULL, &g) != 0)
                return 0;
        for (size_t i = 0; i < g.gl_pathc; i++) {
                char buf[512];
                FILE *f = fopen(g.gl_pathv[i], "r");
                int pid = 0, ppid = 0;
                char *p;

                if (!f)
                        continue;
                p = fgets(buf, sizeof(buf), f);
                fclose(f);
                if (!p || sscanf(buf, "%d", &pid) != 1 || !(p = strrchr(buf, ')')) ||
                    sscanf(p + 1, " %*c %d", &ppid) != 1 || ppid != cellad_pid)
                        continue;
                long long v = sandbox_memory_of(pid);
                if (v >= 0) {
                        sum += v;
                        (*ret_n)++;
                }
        }
        globfree(&g);
        return sum;
}

/* MemAvailable of /proc/meminfo in bytes, or -1. */
static long long mem_available(void)
{
        char line[256];
        long long kb = -1;
        FILE *f = fopen("/proc/meminfo", "r");

        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "MemAvailable: %lld kB", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb < 0 ? -1 : kb * 1024;
}

/* Baseline for the session round trip: `echo hi` written to a bash already running on the
 * host, its answer read back through a pipe, n times. 0, or -1. */
static int host_shell_builtin(double *out, int n)
{
        int in[2], outp[2];
        pid_t pid;
        char buf[64];

        if (pipe2(in, O_CLOEXEC) < 0 || pipe2(outp, O_CLOEXEC) < 0)
                return -1;
        pid = fork();
        if (pid < 0)
                return -1;
        if (pid == 0) {
                dup2(in[0], 0);
                dup2(outp[1], 1);
                execl("/bin/bash", "bash", "--noprofile", "--norc", (char *)NULL);
                _exit(127);
        }
        close(in[0]);
        close(outp[1]);
        for (int i = 0; i < n; i++) {
                double t0 = now_ms();
                size_t got = 0;

                if (write(in[1], "echo hi\n", 8) != 8)
                        break;
                while (got < 3) {
                        ssize_t k = read(outp[0], buf + got, sizeof(buf) - got);

                        if (k <= 0)
                                break;
                        got += (size_t)k;
                }
                if (got != 3 || memcmp(buf, "hi\n", 3) != 0) {
                        n = -1;
                        break;
                }
                out[i] = now_ms() - t0;
        }
        close(in[1]);
        close(outp[0]);
        waitpid(pid, NULL, 0);
        return n < 0 ? -1 : 0;
}

/* exec COMMAND in session SESSION of sandbox NAME; true when 200 and stdout is want. */
static bool exec_in_session(const char *name, const char *session, const char *command,
                            const char *want)
{
        char path[160], body[512];
        struct resp r;
        long status;
        bool ok;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/exec", name);
        snprintf(body, sizeof(body), "{\"command\":\"%s\",\"sessionId\":\"%s\"}", command, session);
        status = request("POST", path, body, &r);
        ok = status == 200 && r.data && strstr(r.data, want);
        if (!ok)
                fprintf(stderr, "exec in %s/%s: %ld %.300s\n", name, session, status,
                        r.data ? r.data : "");
        free(r.data);
        return ok;
}

/* Idle density: sandboxes name-0..n-1 that each ran `true` in their default session (so
 * each has its agent and an idle bash), then sat for 2 s. *ret_cgroup: mean memory charged
 * to their cgroups; *ret_host: the host's MemAvailable drop per sandbox since mem0. */
static int measure_density(int from, int n, long long mem0, double *ret_cgroup, double *ret_host)
{
        char name[64];
        long long sum;
        int got = 0;

        for (int i = from; i < n; i++) {
                snprintf(name, sizeof(name), "bench-%d-dense-%d", (int)getpid(), i);
                if (!exec_in(name, "true", ""))
                        return -1;
        }
        sleep(2);
        sum = sandboxes_memory(&got);
        *ret_cgroup = got > 0 ? (double)sum / got : -1;
        *ret_host = mem0 > 0 ? (double)(mem0 - mem_available()) / n : -1;
        return 0;
}

/* Warm exec (`true`) and the session round trip (`echo hi` in a named session), n each,
 * in one sandbox of type standard-3. 0, or -1 with a message. */
static int measure_warm(double *warm, double *sess, int n_warm)
{
        char name[64];
        double t0;

        snprintf(name, sizeof(name), "bench-%d-warm", (int)getpid());
        {
                char path[128];
                struct resp r = {0};
                snprintf(path, sizeof(path), "/v1/sandboxes/%s", name);
                if (request("PUT", path, "{\"instanceType\":\"standard-3\"}", &r) / 100 != 2) {
                        fprintf(stderr, "create %s: %.300s\n", name, r.data ? r.data : "");
                        free(r.data);
                        goto fail;
                }
                free(r.data);
        }
        if (!exec_in(name, "true", ""))
                goto fail;
        for (int i = 0; i < n_warm; i++) {
                t0 = now_ms();
                if (!exec_in(name, "true", ""))
                        goto fail;
                warm[i] = now_ms() - t0;
        }
        /* Session builtin round trip: `echo hi` in a named session. */
        {
                char path[128];
                struct resp r = {0};

                snprintf(path, sizeof(path), "/v1/sandboxes/%s/sessions", name);
                if (request("POST", path, "{\"id\":\"bench\"}", &r) != 201) {
                        fprintf(stderr, "session: %.300s\n", r.data ? r.data : "");
                        free(r.data);
                        goto fail;
                }
                free(r.data);
        }
        for (int i = 0; i < n_warm; i++) {
                t0 = now_ms();
                if (!exec_in_session(name, "bench", "echo hi", "hi"))
                        goto fail;
                sess[i] = now_ms() - t0;
        }
        destroy(name);
        return 0;
fail:
        destroy(name);
        return -1;
}

/* Poll /v1/health until the warm pool holds want sandboxes (30 s, plus half a second per
 * sandbox, at most: the pool builds one sandbox at a time). */
static int wait_pool(int want)
{
        for (int i = 0; i < 3000 + 50 * want; i++) {
                struct resp r;
                long status = request("GET", "/v1/health", NULL, &r);
                json_t *j = status == 200 && r.data ? json_loads(r.data, 0, NULL) : NULL;
                json_int_t ready =
                        json_integer_value(json_object_get(json_object_get(j, "pool"), "ready"));

                json_decref(j);
                free(r.data);
                if (ready == want)
                        return 0;
                usleep(10000);
        }
        fprintf(stderr, "the warm pool did not fill up to %d\n", want);
        return -1;
}

/* Time to interactive: n new names, each to the result of `echo hi` over HTTP, destroyed
 * after its sample. With pool, each sample starts with a full pool (waiting not timed). */
static int measure_tti(double *out, int n, const char *tag, int pool)
{
        char name[64];

        for (int i = 0; i < n; i++) {
                if (pool > 0 && wait_pool(pool) < 0)
                        return -1;
                snprintf(name, sizeof(name), "bench-%d-%s-%d", (int)getpid(), tag, i);
                double t0 = now_ms();
                if (!exec_in(name, "echo hi", "hi\n"))
                        return -1;
                out[i] = now_ms() - t0;
                destroy(name);
        }
        return 0;
}

/* Time to interactive by network mode (docs/decisions/0017): n samples of each, taken in
 * turns, each a PUT with {"network": ...} of a new name and then `echo hi` in it, on a
 * daemon without a pool (a pool sandbox would hide the network setup). */
static int measure_tti_network(double *out_none, double *out_outbound, int n)
{
        static const char *const modes[] = {"none", "outbound"};
        char name[64], path[128], body[64];

        for (int i = 0; i < n; i++)
                for (int m = 0; m < 2; m++) {
                        struct resp r = {0};
                        snprintf(name, sizeof(name), "bench-%d-net%s-%d", (int)getpid(), modes[m],
                                 i);
                        snprintf(path, sizeof(path), "/v1/sandboxes/%s", name);
                        snprintf(body, sizeof(body), "{\"network\":\"%s\"}", modes[m]);
                        double t0 = now_ms();
                        long st = request("PUT", path, body, &r);
                        if (st / 100 != 2 || !exec_in(name, "echo hi", "hi\n")) {
                                fprintf(stderr, "network %s: %ld %.300s\n", modes[m], st,
                                        r.data ? r.data : "");
                                free(r.data);
                                destroy(name);
                                return -1;
                        }
                        (m ? out_outbound : out_none)[i] = now_ms() - t0;
                        free(r.data);
                        destroy(name);
                }
        return 0;
}

/* CPU time (user + system, ms) used so far by process pid, or -1. */
static double cpu_ms(pid_t pid)
{
        char path[64], buf[1024], *p;
        unsigned long long ut = 0, st = 0;
        FILE *f;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        f = fopen(path, "r");
        if (!f)
                return -1;
        p = fgets(buf, sizeof(buf), f);
        fclose(f);
        if (!p || !(p = strrchr(buf, ')')) ||
            sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
                return -1;
        return (double)(ut + st) * 1000.0 / (double)sysconf(_SC_CLK_TCK);
}

static double burst_cellad_cpu_ms; /* cellad's CPU time during the last burst */

/* A burst: n new names requested at once, each `echo hi`, each on its own connection
 * (libcurl multi, all transfers added before the first is driven). out[i] is request i's
 * latency from the start of the burst to its complete answer (or its failure). Returns the
 * number of failed requests (transport error, HTTP status other than 200, or an answer
 * without `hi`; the first few are printed), or -1 when the burst could not be run. */
static int measure_burst(double *out, int n, const char *tag)
{
        CURLM *m = curl_multi_init();
        CURL **h = calloc((size_t)n, sizeof(*h));
        struct resp *r = calloc((size_t)n, sizeof(*r));
        double *sent_ms = calloc((size_t)n, sizeof(*sent_ms));
        const char *body = "{\"command\":\"echo hi\"}";
        struct curl_slist *hdrs = curl_slist_append(NULL, "Content-Type: application/json");
        char url[512], name[64];
        int running = 0, done = 0, failed = 0, rc = -1;
        double t0, cpu0;

        if (!m || !h || !r || !sent_ms || !hdrs)
                goto out;
        /* One connection per request, all open at once. */
        curl_multi_setopt(m, CURLMOPT_MAXCONNECTS, (long)n);
        for (int i = 0; i < n; i++) {
                snprintf(url, sizeof(url), "%s/v1/sandboxes/bench-%d-%s-%d/exec", base_url,
                         (int)getpid(), tag, i);
                h[i] = curl_easy_init();
                if (!h[i])
                        goto out;
                curl_easy_setopt(h[i], CURLOPT_URL, url);
                curl_easy_setopt(h[i], CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(h[i], CURLOPT_HTTPHEADER, hdrs);
                curl_easy_setopt(h[i], CURLOPT_WRITEFUNCTION, on_data);
                curl_easy_setopt(h[i], CURLOPT_WRITEDATA, &r[i]);
                curl_easy_setopt(h[i], CURLOPT_PRIVATE, (char *)(intptr_t)i);
                curl_multi_add_handle(m, h[i]);
        }
        cpu0 = cpu_ms(cellad_pid);
        t0 = now_ms();
        do {
                CURLMsg *msg;
                int left;

                curl_multi_perform(m, &running);
                while ((msg = curl_multi_info_read(m, &left))) {
                        char *priv = NULL;
                        long status = 0;

                        if (msg->msg != CURLMSG_DONE)
                                continue;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &priv);
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_RESPONSE_CODE, &status);
                        int i = (int)(intptr_t)priv;
                        curl_off_t sent = 0;
                        out[i] = now_ms() - t0;
                        done++;
                        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRETRANSFER_TIME_T, &sent);
                        sent_ms[i] = (double)sent / 1000.0;
                        if (msg->data.result != CURLE_OK || status != 200 || !r[i].data ||
                            !strstr(r[i].data, "\"stdout\":\"hi\\n\"")) {
                                if (failed++ < 5)
                                        fprintf(stderr, "burst request %d: %s, HTTP %ld: %.300s\n",
                                                i, curl_easy_strerror(msg->data.result), status,
                                                r[i].data ? r[i].data : "");
                        }
                }
                if (running)
                        curl_multi_poll(m, NULL, 0, 1000, NULL);
        } while (running);
        if (done != n) {
                fprintf(stderr, "burst: %d of %d requests answered\n", done, n);
                failed += n - done;
        }
        if (failed)
                fprintf(stderr, "burst %s: %d of %d requests failed\n", tag, failed, n);
        /* Where a slow burst waits: the client's sending (connect to request sent) or the
         * daemon's answers. */
        fprintf(stderr, "burst %s: requests sent after %.1f ms (p50), %.1f ms (p99)\n", tag,
                pct(sent_ms, n, 0.5), pct(sent_ms, n, 0.99));
        burst_cellad_cpu_ms = cpu_ms(cellad_pid) - cpu0;
        rc = failed;
out:
        for (int i = 0; h && i < n; i++) {
                if (!h[i])
                        continue;
                curl_multi_remove_handle(m, h[i]);
                curl_easy_cleanup(h[i]);
                free(r[i].data);
        }
        curl_slist_free_all(hdrs);
        if (m)
                curl_multi_cleanup(m);
        free(h);
        free(r);
        free(sent_ms);
        for (int i = 0; i < n; i++) {
                snprintf(name, sizeof(name), "bench-%d-%s-%d", (int)getpid(), tag, i);
                destroy(name);
        }
        return rc;
}

/* The burst on a daemon of its own with a warm pool as large as it (full before the
 * burst): its latencies in out, its failures in *ret_failed. */
static int measure_burst_pool(const char *cellad, const char *images, double *out, int n,
                              const char *tag, int *ret_failed)
{
        char pool_arg[16], max_arg[16];
        char *extra[] = {"--pool", pool_arg, "--max-sandboxes", max_arg, NULL};
        int r;

        snprintf(pool_arg, sizeof(pool_arg), "%d", n);
        snprintf(max_arg, sizeof(max_arg), "%d", n < 1000 ? 1000 : n);
        if (start_cellad(cellad, images, extra) < 0)
                return -1;
        fprintf(stderr, "cellad --pool %d at %s\n", n, base_url);
        double t0 = now_ms();
        if (wait_pool(n) < 0) {
                stop_cellad();
                return -1;
        }
        fprintf(stderr, "pool of %d built in %.1f s\n", n, (now_ms() - t0) / 1000.0);
        r = measure_burst(out, n, tag);
        stop_cellad();
        curl_easy_cleanup(curl);
        curl = curl_easy_init(); /* no connection to the old daemon is reused */
        if (r < 0 || !curl)
                return -1;
        *ret_failed = r;
        return 0;
}

/* The bwrap baseline: `echo hi` in the same rootfs, n times. */
static int measure_bwrap(const char *rootfs, double *out, int n)
{
        for (int i = 0; i < n; i++) {
                char *bargv[] = {"/usr/bin/bwrap",
                                 "--unshare-all",
                                 "--ro-bind",
                                 (char *)rootfs,
                                 "/",
                                 "--proc",
                                 "/proc",
                                 "--dev",
                                 "/dev",
                                 "--tmpfs",
                                 "/tmp",
                                 "echo",
                                 "hi",
                                 NULL};
                double t0 = now_ms();

                if (run(bargv, "hi\n") < 0) {
                        fprintf(stderr, "bwrap failed\n");
                        return -1;
                }
                out[i] = now_ms() - t0;
        }
        return 0;
}

/* Host pid of the sandbox's PID 1: a child of our cellad whose hostname (its UTS
 * namespace's, read through /proc/PID/root/etc/hostname) is the sandbox's name. Cgroups
 * are named by slot, so the name is not in them. -1 if not found. */
static pid_t sandbox_init_pid(const char *name)
{
        char path[300], line[512], want[96];
        struct dirent *de;
        pid_t found = -1;
        DIR *d = opendir("/proc");

        snprintf(want, sizeof(want), "%s\n", name);
        while (d && found < 0 && (de = readdir(d))) {
                int ppid = 0;
                char *p;
                FILE *f;

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/stat", de->d_name);
                f = fopen(path, "r");
                p = f ? fgets(line, sizeof(line), f) : NULL;
                if (f)
                        fclose(f);
                if (!p || !(p = strrchr(line, ')')) || sscanf(p + 1, " %*c %d", &ppid) != 1 ||
                    ppid != cellad_pid)
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/root/etc/hostname", de->d_name);
                f = fopen(path, "r");
                p = f ? fgets(line, sizeof(line), f) : NULL;
                if (f)
                        fclose(f);
                if (p && strcmp(line, want) == 0)
                        found = (pid_t)strtol(de->d_name, NULL, 10);
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

/* ---- code interpreter (docs/decisions/0021-code-interpreter.md) ---- */

enum { CB_PY, CB_JS, CB_TS, CB_LANGS };
static const char *const cb_lang[CB_LANGS] = {"python", "javascript", "typescript"};

struct code_figures {
        int n_cold, n_warm, n_rt;
        double *cold[2], *warm[2];   /* context creation: python, javascript */
        double *rt[CB_LANGS];        /* `1+1` round trip */
        double *py_exec, *node_exec; /* baselines: `python3 -c 1`, `node -e 1` through exec */
};

/* POST /contexts {language}: the new id in ret (64 bytes), the time taken, or -1. */
static double create_context(const char *sb, const char *lang, char *ret)
{
        char path[256], body[64];
        struct resp r;
        double t0 = now_ms(), dt;
        long st;
        json_t *j;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/contexts", sb);
        snprintf(body, sizeof(body), "{\"language\":\"%s\"}", lang);
        st = request("POST", path, body, &r);
        dt = now_ms() - t0;
        j = st == 201 && r.data ? json_loads(r.data, 0, NULL) : NULL;
        snprintf(ret, 64, "%s", j ? json_string_value(json_object_get(j, "id")) : "");
        json_decref(j);
        if (!ret[0]) {
                fprintf(stderr, "create %s context in %s: HTTP %ld %.300s\n", lang, sb, st,
                        r.data ? r.data : "");
                dt = -1;
        }
        free(r.data);
        return dt;
}

static void delete_context(const char *sb, const char *id)
{
        char path[256];
        struct resp r;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/contexts/%s", sb, id);
        request("DELETE", path, NULL, &r);
        free(r.data);
}

/* Run `1+1` in context id: the time taken, or -1 unless the answer is 2. */
static double run_code(const char *sb, const char *id)
{
        char path[256], body[128];
        struct resp r;
        double t0 = now_ms(), dt;
        long st;

        snprintf(path, sizeof(path), "/v1/sandboxes/%s/code", sb);
        snprintf(body, sizeof(body), "{\"code\":\"1+1\",\"contextId\":\"%s\"}", id);
        st = request("POST", path, body, &r);
        dt = now_ms() - t0;
        if (st != 200 || !r.data || !strstr(r.data, "\"text\":\"2\"")) {
                fprintf(stderr, "run in %s: HTTP %ld %.300s\n", id, st, r.data ? r.data : "");
                dt = -1;
        }
        free(r.data);
        return dt;
}

/* Cold: the first context of a language in a fresh sandbox (the interpreter starts and
 * preloads). Warm: a context taken from the spare the agent keeps once a language was used
 * (given time to start between samples). Round trips: `1+1` in a ready context. Baselines:
 * a cold interpreter start through exec. */
static int measure_code(struct code_figures *f)
{
        char sb[64], id[64];

        for (int l = 0; l < 2; l++)
                for (int i = 0; i < f->n_cold; i++) {
                        snprintf(sb, sizeof(sb), "bench-%d-code-cold-%d-%d", (int)getpid(), l, i);
                        if (!exec_in(sb, "true", "") ||
                            (f->cold[l][i] = create_context(sb, cb_lang[l], id)) < 0)
                                return -1;
                        destroy(sb);
                }
        snprintf(sb, sizeof(sb), "bench-%d-code", (int)getpid());
        for (int l = 0; l < 2; l++) {
                if (create_context(sb, cb_lang[l], id) < 0)
                        return -1;
                for (int i = 0; i < f->n_warm; i++) {
                        sleep(l == 0 ? 4 : 2); /* the spare started after the last take */
                        if ((f->warm[l][i] = create_context(sb, cb_lang[l], id)) < 0)
                                return -1;
                        delete_context(sb, id);
                }
        }
        for (int l = 0; l < CB_LANGS; l++) {
                if (create_context(sb, cb_lang[l], id) < 0 || run_code(sb, id) < 0)
                        return -1;
                sleep(l == CB_PY ? 4 : 2); /* the refilled spare's start is not measured */
                for (int i = 0; i < f->n_rt; i++)
                        if ((f->rt[l][i] = run_code(sb, id)) < 0)
                                return -1;
        }
        for (int i = 0; i < f->n_cold; i++) {
                double t0 = now_ms();

                if (!exec_in(sb, "python3 -c 1", ""))
                        return -1;
                f->py_exec[i] = now_ms() - t0;
                t0 = now_ms();
                if (!exec_in(sb, "node -e 1", ""))
                        return -1;
                f->node_exec[i] = now_ms() - t0;
        }
        destroy(sb);
        return 0;
}

static void print_code(struct code_figures *f, const double *sess, int n_sess)
{
        printf("| code interpreter | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
        for (int l = 0; l < 2; l++)
                printf("| %s context creation, cold (first in a fresh sandbox) | %d | %.1f | "
                       "%.1f |\n",
                       cb_lang[l], f->n_cold, pct(f->cold[l], f->n_cold, 0.5),
                       pct(f->cold[l], f->n_cold, 0.95));
        for (int l = 0; l < 2; l++)
                printf("| %s context creation, warm (a spare ready) | %d | %.2f | %.2f |\n",
                       cb_lang[l], f->n_warm, pct(f->warm[l], f->n_warm, 0.5),
                       pct(f->warm[l], f->n_warm, 0.95));
        for (int l = 0; l < CB_LANGS; l++)
                printf("| `1+1` round trip, %s | %d | %.2f | %.2f |\n", cb_lang[l], f->n_rt,
                       pct(f->rt[l], f->n_rt, 0.5), pct(f->rt[l], f->n_rt, 0.95));
        if (sess)
                printf("| session round trip, `echo hi` (baseline) | %d | %.2f | %.2f |\n", n_sess,
                       pct((double *)sess, n_sess, 0.5), pct((double *)sess, n_sess, 0.95));
        printf("| exec `python3 -c 1`, a cold interpreter (baseline) | %d | %.1f | %.1f |\n",
               f->n_cold, pct(f->py_exec, f->n_cold, 0.5), pct(f->py_exec, f->n_cold, 0.95));
        printf("| exec `node -e 1`, a cold interpreter (baseline) | %d | %.1f | %.1f |\n\n",
               f->n_cold, pct(f->node_exec, f->n_cold, 0.5), pct(f->node_exec, f->n_cold, 0.95));
}

static int code_figures_alloc(struct code_figures *f, int n_cold, int n_warm, int n_rt)
{
        f->n_cold = n_cold;
        f->n_warm = n_warm;
        f->n_rt = n_rt;
        for (int l = 0; l < 2; l++) {
                f->cold[l] = calloc((size_t)n_cold, sizeof(double));
                f->warm[l] = calloc((size_t)n_warm, sizeof(double));
                if (!f->cold[l] || !f->warm[l])
                        return -1;
        }
        for (int l = 0; l < CB_LANGS; l++)
                if (!(f->rt[l] = calloc((size_t)n_rt, sizeof(double))))
                        return -1;
        f->py_exec = calloc((size_t)n_cold, sizeof(double));
        f->node_exec = calloc((size_t)n_cold, sizeof(double));
        return f->py_exec && f->node_exec ? 0 : -1;
}

static void code_figures_free(struct code_figures *f)
{
        for (int l = 0; l < 2; l++) {
                free(f->cold[l]);
                free(f->warm[l]);
        }
        for (int l = 0; l < CB_LANGS; l++)
                free(f->rt[l]);
        free(f->py_exec);
        free(f->node_exec);
}

int main(int argc, char **argv)
{
        static char cellad_buf[4096];
        const char *cellad = "cellad", *images = "/var/lib/cella/images";
        const char *image = "default";
        int n_tti = 50, n_warm = 200, n_mem = 5, n_burst = 100, n_procs = 10000;
        int n_big = 1000, fail_burst = 0, fail_burst_pool = 0, fail_big = 0;
        double *burst_big = NULL;
        long long rss_base = -1, rss_cap = -1, rss_end = -1;
        double *pstart = NULL;
        char rootfs[512], name[64];
        double *tti_netnone, *tti_netout;
        double *tti, *tti_pool, *tti_nodisk, *burst, *burst_pool, *warm, *bw, *host, *hostsh, *sess,
                *hostb;
        double dense_cg[2] = {-1, -1}, dense_host[2] = {-1, -1};
        int n_dense[2] = {100, 1000};
        double t0, cpu_burst_pool = 0, cpu_burst = 0;
        long long mem_sum = 0;
        int mem_n = 0, rc = 1;
        struct code_figures cf = {0};
        int n_code = 100;
        bool only_code = false, only_warm = false, only_procs = false, only_start = false;

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
                else if (strcmp(argv[i], "--burst") == 0)
                        n_burst = parse_count(argv[i + 1]);
                else if (strcmp(argv[i], "--burst-big") == 0)
                        n_big = parse_count(argv[i + 1]);
                else if (strcmp(argv[i], "--cellad-log") == 0)
                        cellad_log = argv[i + 1];
                else if (strcmp(argv[i], "--dense") == 0)
                        n_dense[1] = parse_count(argv[i + 1]);
                else if (strcmp(argv[i], "--procs") == 0)
                        n_procs = parse_count(argv[i + 1]);
                else if (strcmp(argv[i], "--code") == 0)
                        n_code = parse_count(argv[i + 1]);
                else if (strcmp(argv[i], "--only") == 0) {
                        only_code = strcmp(argv[i + 1], "code") == 0;
                        only_warm = strcmp(argv[i + 1], "warm") == 0;
                        only_procs = strcmp(argv[i + 1], "procs") == 0;
                        only_start = strcmp(argv[i + 1], "start") == 0;
                }
        }
        if (n_tti < 1 || n_tti > 10000 || n_warm < 1 || n_warm > 100000 || n_burst < 1 ||
            n_burst > 1000 || n_big < 1 || n_big > 1000 || n_procs < 200 || n_code < 10 ||
            n_code > 100000) {
                fprintf(stderr, "bad counts\n");
                return 2;
        }
        snprintf(rootfs, sizeof(rootfs), "%s/%s/rootfs", images, image);
        tti = calloc((size_t)n_tti, sizeof(double));
        tti_pool = calloc((size_t)n_tti, sizeof(double));
        burst = calloc((size_t)n_burst, sizeof(double));
        burst_pool = calloc((size_t)n_burst, sizeof(double));
        burst_big = calloc((size_t)n_big, sizeof(double));
        tti_nodisk = calloc((size_t)n_tti, sizeof(double));
        tti_netnone = calloc((size_t)n_tti, sizeof(double));
        tti_netout = calloc((size_t)n_tti, sizeof(double));
        bw = calloc((size_t)n_tti, sizeof(double));
        warm = calloc((size_t)n_warm, sizeof(double));
        host = calloc((size_t)n_warm, sizeof(double));
        hostsh = calloc((size_t)n_warm, sizeof(double));
        sess = calloc((size_t)n_warm, sizeof(double));
        hostb = calloc((size_t)n_warm, sizeof(double));
        pstart = calloc((size_t)n_procs, sizeof(double));
        if (!tti || !tti_pool || !tti_nodisk || !tti_netnone || !tti_netout || !burst ||
            !burst_pool || !burst_big || !bw || !warm || !host || !hostsh || !sess || !hostb ||
            !pstart)
                return 1;
        signal(SIGPIPE, SIG_IGN);
        /* A burst holds one connection per request: the soft descriptor limit up to the
         * hard one (cellad raises its own). */
        {
                struct rlimit rl;

                if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                        rl.rlim_cur = rl.rlim_max;
                        setrlimit(RLIMIT_NOFILE, &rl);
                }
                if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)n_big + 64)
                        fprintf(stderr, "descriptor limit %llu: a burst of %d may fail\n",
                                (unsigned long long)rl.rlim_cur, n_big);
        }
        curl_global_init(CURL_GLOBAL_DEFAULT);
        curl = curl_easy_init();
        if (code_figures_alloc(&cf, 5, 8, n_code) < 0)
                goto out;
        if (only_code) {
                /* `--only code`: the code interpreter's figures alone (bench/run.sh --only
                 * code would replace the whole figures section: run the binary directly). */
                char *extra[] = {"--pool", "0", NULL};

                if (!curl || start_cellad(cellad, images, extra) < 0 || measure_code(&cf) < 0)
                        goto out;
                print_code(&cf, NULL, 0);
                rc = 0;
                goto out;
        }
        if (only_warm) {
                /* `--only warm`: the agent's hot paths alone, warm exec and the session
                 * round trip (run the binary directly, as for --only code). */
                char *extra[] = {"--pool", "0", NULL};

                if (!curl || start_cellad(cellad, images, extra) < 0 ||
                    measure_warm(warm, sess, n_warm) < 0)
                        goto out;
                printf("| figure | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
                printf("| cella warm exec (`true`, HTTP round trip) | %d | %.2f | %.2f |\n", n_warm,
                       pct(warm, n_warm, 0.5), pct(warm, n_warm, 0.95));
                printf("| cella session round trip (`echo hi` in a named session) | %d | %.3f | "
                       "%.3f |\n",
                       n_warm, pct(sess, n_warm, 0.5), pct(sess, n_warm, 0.95));
                rc = 0;
                goto out;
        }
        if (only_procs) {
                /* `--only procs`: background process starts alone (`--procs N` of them in
                 * one sandbox; run the binary directly, as for --only code). */
                char *extra[] = {"--pool", "0", NULL};

                snprintf(name, sizeof(name), "bench-%d-procs", (int)getpid());
                if (!curl || start_cellad(cellad, images, extra) < 0)
                        goto out;
                /* sandboxes outlive cellad: this one is destroyed on every path */
                for (int i = 0; i < n_procs && (i > 0 || exec_in(name, "true", "")); i++)
                        if ((pstart[i] = start_true(name)) < 0)
                                break;
                destroy(name);
                if (pstart[n_procs - 1] <= 0)
                        goto out;
                printf("| figure | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
                printf("| cella background process start (`true`, HTTP round trip) | %d | %.2f | "
                       "%.2f |\n",
                       n_procs, pct(pstart, n_procs, 0.5), pct(pstart, n_procs, 0.95));
                rc = 0;
                goto out;
        }
        if (only_start) {
                /* `--only start`: the start figures alone (run the binary directly, as for
                 * --only code): TTI with and without the pool beside bwrap, the burst with a
                 * pool as large as it, and the big burst with its own pool. */
                char pool_arg[16];
                char *extra[] = {"--pool", pool_arg, "--max-sandboxes", "1000", NULL};
                char *nopool[] = {"--pool", "0", NULL};

                snprintf(pool_arg, sizeof(pool_arg), "%d", n_burst);
                if (!curl || start_cellad(cellad, images, extra) < 0 ||
                    measure_tti(tti_pool, n_tti, "pool", n_burst) < 0 || wait_pool(n_burst) < 0 ||
                    (fail_burst_pool = measure_burst(burst_pool, n_burst, "pburst")) < 0)
                        goto out;
                stop_cellad();
                curl_easy_cleanup(curl);
                curl = curl_easy_init();
                if (!curl || start_cellad(cellad, images, nopool) < 0 ||
                    measure_tti(tti, n_tti, "tti", 0) < 0)
                        goto out;
                stop_cellad();
                curl_easy_cleanup(curl);
                curl = curl_easy_init();
                if (!curl || measure_bwrap(rootfs, bw, n_tti) < 0 ||
                    measure_burst_pool(cellad, images, burst_big, n_big, "bigburst", &fail_big) < 0)
                        goto out;
                {
                        double tp50 = pct(tti_pool, n_tti, 0.5), tn50 = pct(tti, n_tti, 0.5);
                        double bw50 = pct(bw, n_tti, 0.5);

                        printf("| figure | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
                        printf("| cella time-to-interactive, warm pool | %d | %.2f | %.2f |\n",
                               n_tti, tp50, pct(tti_pool, n_tti, 0.95));
                        printf("| cella time-to-interactive, no pool | %d | %.2f | %.2f |\n", n_tti,
                               tn50, pct(tti, n_tti, 0.95));
                        printf("| bwrap `echo hi` (baseline) | %d | %.2f | %.2f |\n\n", n_tti, bw50,
                               pct(bw, n_tti, 0.95));
                        printf("| burst | N | p50 (ms) | p99 (ms) | failed |\n"
                               "|---|---|---|---|---|\n");
                        printf("| warm pool (`--pool %d`) | %d | %.2f | %.2f | %d |\n", n_burst,
                               n_burst, pct(burst_pool, n_burst, 0.5),
                               pct(burst_pool, n_burst, 0.99), fail_burst_pool);
                        printf("| warm pool (`--pool %d`) | %d | %.2f | %.2f | %d |\n\n", n_big,
                               n_big, pct(burst_big, n_big, 0.5), pct(burst_big, n_big, 0.99),
                               fail_big);
                        printf("TTI (no pool) / bwrap: %.2fx\n", tn50 / bw50);
                }
                rc = fail_burst_pool || fail_big ? 3 : 0;
                goto out;
        }
        /* The daemon with a warm pool as large as the burst. */
        {
                char pool_arg[16];
                char *extra[] = {"--pool", pool_arg, "--max-sandboxes", "1000", NULL};

                snprintf(pool_arg, sizeof(pool_arg), "%d", n_burst);
                if (!curl || start_cellad(cellad, images, extra) < 0)
                        goto out;
        }
        fprintf(stderr, "cellad --pool %d at %s\n", n_burst, base_url);
        if (measure_tti(tti_pool, n_tti, "pool", n_burst) < 0 || wait_pool(n_burst) < 0 ||
            (fail_burst_pool = measure_burst(burst_pool, n_burst, "pburst")) < 0)
                goto out;
        cpu_burst_pool = burst_cellad_cpu_ms;
        stop_cellad();
        curl_easy_cleanup(curl);
        curl = curl_easy_init(); /* no connection to the old daemon is reused */
        /* The big burst, on a daemon with a pool as large as it. */
        if (!curl ||
            measure_burst_pool(cellad, images, burst_big, n_big, "bigburst", &fail_big) < 0)
                goto out;

        /* The daemon without a pool, for everything else. */
        {
                char *extra[] = {"--pool", "0", NULL};

                if (!curl || start_cellad(cellad, images, extra) < 0)
                        goto out;
        }
        fprintf(stderr, "cellad --pool 0 at %s\n", base_url);
        if (measure_tti(tti, n_tti, "tti", 0) < 0 ||
            (fail_burst = measure_burst(burst, n_burst, "burst")) < 0 ||
            measure_tti_network(tti_netnone, tti_netout, n_tti) < 0)
                goto out;
        cpu_burst = burst_cellad_cpu_ms;
        /* Warm exec: `true` in a running sandbox. It gets the whole machine's CPU
         * (standard-3: 2 vCPU): back to back, `bash -c true` keeps about half a CPU busy,
         * and the default type's 1/2 vCPU quota would then measure CFS throttling, not
         * the exec path. */
        if (measure_warm(warm, sess, n_warm) < 0)
                goto out;
        if (measure_code(&cf) < 0)
                goto out;
        if (host_shell_builtin(hostb, n_warm) < 0) {
                fprintf(stderr, "host bash builtin baseline failed\n");
                goto out;
        }
        /* Baseline: bwrap running the same echo in the same rootfs. */
        if (measure_bwrap(rootfs, bw, n_tti) < 0)
                goto out;
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
        mem_sum = sandboxes_memory(&mem_n); /* no pool: the idle sandboxes are all there is */
        for (int i = 0; i < n_mem; i++) {
                snprintf(name, sizeof(name), "bench-%d-idle-%d", (int)getpid(), i);
                destroy(name);
        }
        stop_cellad();
        curl_easy_cleanup(curl);
        curl = curl_easy_init();

        /* Idle density, on a daemon allowed that many sandboxes. */
        if (n_dense[1] < n_dense[0])
                n_dense[1] = n_dense[0];
        {
                char max_arg[16];
                char *extra[] = {"--pool", "0", "--max-sandboxes", max_arg, NULL};

                snprintf(max_arg, sizeof(max_arg), "%d", n_dense[1] + 10);
                if (!curl || start_cellad(cellad, images, extra) < 0)
                        goto out;
        }
        {
                long long mem0 = mem_available();

                if (measure_density(0, n_dense[0], mem0, &dense_cg[0], &dense_host[0]) < 0 ||
                    measure_density(n_dense[0], n_dense[1], mem0, &dense_cg[1], &dense_host[1]) < 0)
                        fprintf(stderr, "density: stopped early\n");
                for (int i = 0; i < n_dense[1]; i++) {
                        snprintf(name, sizeof(name), "bench-%d-dense-%d", (int)getpid(), i);
                        destroy(name);
                }
        }

        /* Time to interactive again, with a cellad whose sandboxes get no disk image: what
         * the kernel-enforced disk limit adds to a start (docs/decisions/0014). */
        stop_cellad();
        {
                char *off[] = {"--disk-quota", "off", "--pool", "0", NULL};
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
                double tp50 = pct(tti_pool, n_tti, 0.5), tp95 = pct(tti_pool, n_tti, 0.95);
                double b50 = pct(burst, n_burst, 0.5), b99 = pct(burst, n_burst, 0.99);
                double bp50 = pct(burst_pool, n_burst, 0.5), bp99 = pct(burst_pool, n_burst, 0.99);
                double nd50 = pct(tti_nodisk, n_tti, 0.5), nd95 = pct(tti_nodisk, n_tti, 0.95);
                double bw50 = pct(bw, n_tti, 0.5), bw95 = pct(bw, n_tti, 0.95);
                double w50 = pct(warm, n_warm, 0.5), w95 = pct(warm, n_warm, 0.95);
                double h50 = pct(host, n_warm, 0.5), h95 = pct(host, n_warm, 0.95);
                double s50 = pct(hostsh, n_warm, 0.5), s95 = pct(hostsh, n_warm, 0.95);

                printf("| figure | N | p50 (ms) | p95 (ms) |\n|---|---|---|---|\n");
                printf("| cella time-to-interactive, warm pool (new name, `echo hi`) | %d | %.2f | "
                       "%.2f |\n",
                       n_tti, tp50, tp95);
                printf("| cella time-to-interactive, no pool (`--pool 0`) | %d | %.2f | "
                       "%.2f |\n",
                       n_tti, tti50, tti95);
                printf("| cella time-to-interactive without disk limits (`--disk-quota off`) | "
                       "%d | %.2f | %.2f |\n",
                       n_tti, nd50, nd95);
                printf("| cella time-to-interactive, `network: none` (PUT + `echo hi`, `--pool 0`) "
                       "| %d | %.2f | %.2f |\n",
                       n_tti, pct(tti_netnone, n_tti, 0.5), pct(tti_netnone, n_tti, 0.95));
                printf("| cella time-to-interactive, `network: outbound` (PUT + `echo hi`, "
                       "`--pool 0`) | %d | %.2f | %.2f |\n",
                       n_tti, pct(tti_netout, n_tti, 0.5), pct(tti_netout, n_tti, 0.95));
                printf("| bwrap `echo hi` in the same rootfs (baseline) | %d | %.2f | %.2f |\n",
                       n_tti, bw50, bw95);
                printf("| cella warm exec (`true`, HTTP round trip) | %d | %.2f | %.2f |\n", n_warm,
                       w50, w95);
                printf("| host fork+exec of /bin/true (baseline) | %d | %.3f | %.3f |\n", n_warm,
                       h50, h95);
                printf("| host fork+exec of `bash -c true` (baseline) | %d | %.3f | %.3f |\n",
                       n_warm, s50, s95);
                printf("| cella session round trip (`echo hi` in a named session) | %d | %.3f | "
                       "%.3f |\n",
                       n_warm, pct(sess, n_warm, 0.5), pct(sess, n_warm, 0.95));
                printf("| host: `echo hi` to a running bash through pipes (baseline) | %d | %.3f | "
                       "%.3f |\n",
                       n_warm, pct(hostb, n_warm, 0.5), pct(hostb, n_warm, 0.95));
                printf("| cella background process start (`true`, HTTP round trip) | %d | %.2f "
                       "| %.2f |\n\n",
                       n_procs, pct(pstart, n_procs, 0.5), pct(pstart, n_procs, 0.95));
                print_code(&cf, sess, n_warm);
                printf("| burst of new names at once | N | p50 (ms) | p99 (ms) | failed |\n"
                       "|---|---|---|---|---|\n");
                printf("| warm pool (`--pool %d`) | %d | %.2f | %.2f | %d |\n", n_burst, n_burst,
                       bp50, bp99, fail_burst_pool);
                printf("| warm pool (`--pool %d`) | %d | %.2f | %.2f | %d |\n", n_big, n_big,
                       pct(burst_big, n_big, 0.5), pct(burst_big, n_big, 0.99), fail_big);
                printf("| no pool (`--pool 0`) | %d | %.2f | %.2f | %d |\n\n", n_burst, b50, b99,
                       fail_burst);
                if (fail_burst_pool || fail_big || fail_burst)
                        printf("**Failed requests in a burst: %d** (every one is a defect).\n\n",
                               fail_burst_pool + fail_big + fail_burst);
                printf("cellad's own CPU time during the burst: %.0f ms with the pool, %.0f ms "
                       "without (clock-tick resolution).\n\n",
                       cpu_burst_pool, cpu_burst);
                printf("| ratio or target | value | target |\n|---|---|---|\n");
                printf("| TTI with warm pool, p50 | %.2f ms | <= 1 ms |\n", tp50);
                printf("| burst with warm pool, p99 | %.2f ms | <= 150 ms |\n", bp99);
                printf("| burst of %d with a warm pool of %d, p99 | %.2f ms | <= 1000 ms, 0 "
                       "failed |\n",
                       n_big, n_big, pct(burst_big, n_big, 0.99));
                printf("| TTI (warm pool) / bwrap | %.2fx | <= 1.5x |\n", tp50 / bw50);
                printf("| TTI (no pool) / bwrap | %.2fx | <= 1.5x |\n", tti50 / bw50);
                printf("| TTI / TTI without disk limits | %.2fx | (cost of the disk) |\n",
                       tti50 / nd50);
                printf("| warm exec / host fork+exec of /bin/true | %.2fx | <= 1.2x |\n",
                       w50 / h50);
                printf("| warm exec / host fork+exec of `bash -c true` | %.2fx | (same work) |\n",
                       w50 / s50);
                printf("| session round trip, p50 | %.3f ms | <= 0.5 ms |\n",
                       pct(sess, n_warm, 0.5));
                for (int k = 0; k < 2; k++)
                        printf("| idle memory per sandbox with its default session, %d "
                               "sandboxes | %.2f MiB (cgroup) / %.2f MiB (host MemAvailable) | "
                               "<= 2 MiB |\n",
                               n_dense[k], dense_cg[k] / 1048576.0, dense_host[k] / 1048576.0);
                printf("\n");
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
        if (curl)
                curl_easy_cleanup(curl);
        curl_global_cleanup();
        free(tti);
        free(tti_pool);
        free(burst);
        free(burst_pool);
        free(burst_big);
        free(tti_nodisk);
        free(tti_netnone);
        free(tti_netout);
        free(bw);
        free(warm);
        free(host);
        free(hostsh);
        free(sess);
        free(hostb);
        free(pstart);
        code_figures_free(&cf);
        return rc;
}
