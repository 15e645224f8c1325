/* Memory sleep's host check: see criu.h. */
#include "runtime/criu.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/macros.h"
#include "common/timeutil.h"

extern char **environ;

const char *criu_binary(const char *env, bool built)
{
        if (env && *env)
                return env;
        return built ? CRIU_BUILT_PATH : "criu";
}

int criu_version_parse(const char *out, size_t len, char *ver, size_t versz)
{
        static const char key[] = "Version: ";
        const size_t klen = sizeof(key) - 1;

        for (size_t i = 0; i + klen <= len; i++) {
                if ((i > 0 && out[i - 1] != '\n') || memcmp(out + i, key, klen) != 0)
                        continue;
                size_t n = 0, j = i + klen;
                while (j + n < len && n < 31 && n + 1 < versz &&
                       (strchr("0123456789.+~-", out[j + n]) ||
                        (out[j + n] >= 'a' && out[j + n] <= 'z') ||
                        (out[j + n] >= 'A' && out[j + n] <= 'Z')) &&
                       out[j + n] != '\0')
                        n++;
                if (n == 0)
                        return -EINVAL;
                memcpy(ver, out + j, n);
                ver[n] = '\0';
                return 0;
        }
        return -EINVAL;
}

/* out[b..e) into reason (sz >= 1) with control bytes as '?'; returns its length. */
static size_t put_line(const char *out, size_t b, size_t e, char *reason, size_t sz)
{
        size_t n = 0;

        while (b < e && (out[b] == ' ' || out[b] == '\t'))
                b++;
        while (e > b && (out[e - 1] == ' ' || out[e - 1] == '\t' || out[e - 1] == '\r'))
                e--;
        for (; b < e && n + 1 < sz; b++)
                reason[n++] = (unsigned char)out[b] < 0x20 || out[b] == 0x7f ? '?' : out[b];
        reason[n] = '\0';
        return n;
}

/* The message of "... Error (criu/vdso.c:381): message" in out[b..e): its start, or e. */
static size_t error_message(const char *out, size_t b, size_t e)
{
        static const char key[] = "Error (";
        const size_t klen = sizeof(key) - 1;

        for (size_t i = b; i + klen <= e; i++) {
                if (memcmp(out + i, key, klen) != 0)
                        continue;
                for (size_t j = i + klen; j + 1 < e; j++)
                        if (out[j] == ')' && out[j + 1] == ':')
                                return j + 2;
                return e;
        }
        return e;
}

static bool has(const char *s, size_t len, const char *what)
{
        size_t w = strlen(what);

        for (size_t i = 0; i + w <= len; i++)
                if (memcmp(s + i, what, w) == 0)
                        return true;
        return false;
}

size_t criu_check_reason(const char *out, size_t len, bool vvar_vclock, char *reason, size_t sz)
{
        size_t last_b = 0, last_e = 0, n;
        bool found = false;

        reason[0] = '\0';
        for (size_t b = 0; b < len;) {
                size_t e = b;
                while (e < len && out[e] != '\n')
                        e++;
                size_t m = error_message(out, b, e);
                if (m < e && !has(out + m, e - m, "exited, status=")) {
                        last_b = m;
                        last_e = e;
                        found = true;
                        break;
                }
                for (size_t i = b; i < e; i++)
                        if (out[i] != ' ' && out[i] != '\t' && out[i] != '\r') {
                                last_b = b;
                                last_e = e;
                                break;
                        }
                b = e + 1;
        }
        n = put_line(out, last_b, last_e, reason, sz);
        if (found && vvar_vclock && has(reason, n, "vDSO")) {
                int k = snprintf(reason + n, sz - n,
                                 " (this kernel splits the vDSO's data into [vvar] and "
                                 "[vvar_vclock], Linux 6.13 and later; CRIU knows that "
                                 "layout from 4.1 on)");
                if (k > 0)
                        n += (size_t)k < sz - n ? (size_t)k : sz - n - 1;
        }
        return n;
}

/* Run argv with stdout and stderr into out (at most outsz - 1 bytes kept, NUL-ended),
 * within CELLA_CRIU_CHECK_TIMEOUT_MS (then killed). *status: its wait status. Returns 0,
 * -ENOENT (no such binary), -ETIMEDOUT or -errno. */
static int run_capture(const char *bin, char *const argv[], char *out, size_t outsz, int *status)
{
        posix_spawn_file_actions_t fa;
        int p[2], r;
        size_t n = 0;
        pid_t pid;
        int64_t deadline = (int64_t)(time_mono_us() / 1000) + CELLA_CRIU_CHECK_TIMEOUT_MS;

        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        if (posix_spawn_file_actions_init(&fa) != 0) {
                close(p[0]);
                close(p[1]);
                return -ENOMEM;
        }
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, p[1], 1);
        posix_spawn_file_actions_adddup2(&fa, p[1], 2);
        r = strchr(bin, '/') ? posix_spawn(&pid, bin, &fa, NULL, argv, environ)
                             : posix_spawnp(&pid, bin, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        close(p[1]);
        if (r != 0) {
                close(p[0]);
                return -r;
        }
        for (;;) {
                int64_t left = deadline - (int64_t)(time_mono_us() / 1000);
                struct pollfd pfd = {.fd = p[0], .events = POLLIN};
                char tmp[4096];
                ssize_t k;

                if (left <= 0) {
                        kill(pid, SIGKILL);
                        r = -ETIMEDOUT;
                        break;
                }
                if (poll(&pfd, 1, (int)left) < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        kill(pid, SIGKILL);
                        break;
                }
                k = read(p[0], tmp, sizeof(tmp));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k <= 0)
                        break;
                size_t keep = MIN((size_t)k, outsz - 1 - n);
                memcpy(out + n, tmp, keep);
                n += keep;
        }
        close(p[0]);
        out[n] = '\0';
        while (waitpid(pid, status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return r;
}

static bool host_has_vvar_vclock(void)
{
        char buf[8192];
        bool found = false;
        FILE *f = fopen("/proc/self/maps", "re");

        if (!f)
                return false;
        while (!found && fgets(buf, sizeof(buf), f))
                found = strstr(buf, "[vvar_vclock]") != NULL;
        fclose(f);
        return found;
}

void criu_probe_host(struct criu_probe *p)
{
        const char *bin = getenv("CELLA_CRIU");
        char *version_argv[] = {(char *)"criu", (char *)"--version", NULL};
        char *check_argv[] = {(char *)"criu", (char *)"check", NULL};
        _cleanup_free_ char *out = malloc(CELLA_CRIU_OUTPUT_MAX);
        char why[CRIU_REASON_MAX - 80];
        int status = 0, r;

        memset(p, 0, sizeof(*p));
        bin = criu_binary(bin, access(CRIU_BUILT_PATH, X_OK) == 0);
        snprintf(p->binary, sizeof(p->binary), "%s", bin);
        if (!out) {
                snprintf(p->reason, sizeof(p->reason), "out of memory");
                return;
        }
        r = run_capture(bin, version_argv, out, CELLA_CRIU_OUTPUT_MAX, &status);
        if (r == -ENOENT || r == -EACCES) {
                snprintf(p->reason, sizeof(p->reason),
                         "no CRIU: %s: %s (Debian's package criu provides it)", bin, strerror(-r));
                return;
        }
        if (r < 0 || !WIFEXITED(status) || WEXITSTATUS(status) != 0 ||
            criu_version_parse(out, strlen(out), p->version, sizeof(p->version)) < 0) {
                snprintf(p->reason, sizeof(p->reason), "%s --version: %s", bin,
                         r < 0 ? strerror(-r) : "no version in its output");
                return;
        }
        r = run_capture(bin, check_argv, out, CELLA_CRIU_OUTPUT_MAX, &status);
        if (r == 0 && WIFEXITED(status) && WEXITSTATUS(status) == 0) {
                p->check_passed = true;
                return;
        }
        if (r < 0)
                snprintf(why, sizeof(why), "%s", strerror(-r));
        else if (criu_check_reason(out, strlen(out), host_has_vvar_vclock(), why, sizeof(why)) == 0)
                snprintf(why, sizeof(why), "%s %d with no message",
                         WIFEXITED(status) ? "exit status" : "signal",
                         WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
        snprintf(p->reason, sizeof(p->reason), "criu %s check fails on this kernel: %s", p->version,
                 why);
}

/* a.b.c of v (missing parts 0): negative, 0 or positive as strcmp. */
static int version_cmp(const char *v, unsigned a, unsigned b)
{
        unsigned x = 0, y = 0;

        sscanf(v, "%u.%u", &x, &y);
        if (x != a)
                return x < a ? -1 : 1;
        return y == b ? 0 : (y < b ? -1 : 1);
}

size_t criu_version_reason_for(const char *version, const char *kernel, char *out, size_t sz)
{
        bool new_kernel = version_cmp(kernel, 6, 16) >= 0;
        const char *min = new_kernel ? "4.2" : "4.1";

        out[0] = '\0';
        if (version_cmp(version, 4, new_kernel ? 2 : 1) >= 0)
                return 0;
        int n = snprintf(out, sz,
                         "criu %s passes its check here, but a sandbox on Linux %.32s needs CRIU "
                         "%s or later (docs/decisions/0050; scripts/criu.sh builds one)",
                         version[0] ? version : "(unknown version)", kernel, min);
        return n < 0 ? 0 : MIN((size_t)n, sz - 1);
}

void criu_version_reason(const char *version, char *out, size_t sz)
{
        struct utsname u;

        if (uname(&u) < 0)
                snprintf(u.release, sizeof(u.release), "0");
        criu_version_reason_for(version, u.release, out, sz);
}
