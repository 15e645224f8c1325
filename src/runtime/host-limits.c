/* What a number of sandboxes needs of the host's kernel limits (host-limits.h). */
#include "runtime/host-limits.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"

/* A sandbox, idle with its default session, is cella-init and the session's shell: two
 * host pids, and a third while a command runs; its disk adds two kernel threads (the
 * journal's jbd2 and about one loop worker: 6,260 and 6,409 with 6,249 sandboxes in
 * bench/density.sh). Its namespaces (user, mount, pid, net, uts,
 * ipc, cgroup) are made by cellad's root and counted against root's in the host's user
 * namespace. An outbound sandbox's veth puts its address in the host's neighbour table. */
static const struct host_limit limits[] = {
        {"kernel.pid_max", 4096, 5, false,
         "pids: cella-init, its default session, a command, its disk's jbd2 thread and loop "
         "worker"},
        {"kernel.threads-max", 4096, 5, false,
         "tasks: cella-init, its default session, a command, its disk's jbd2 thread and loop "
         "worker"},
        {"user.max_user_namespaces", 64, 1, false, "a user namespace"},
        {"user.max_mnt_namespaces", 64, 1, false, "a mount namespace"},
        {"user.max_pid_namespaces", 64, 1, false, "a pid namespace"},
        {"user.max_net_namespaces", 64, 1, false, "a network namespace"},
        {"user.max_uts_namespaces", 64, 1, false, "a uts namespace"},
        {"user.max_ipc_namespaces", 64, 1, false, "an ipc namespace"},
        {"user.max_cgroup_namespaces", 64, 1, false, "a cgroup namespace"},
        {"net.ipv4.neigh.default.gc_thresh3", 128, 1, true,
         "a neighbour entry of its veth's host end"},
        {"fs.nr_open", 0, 0, false, "cellad's descriptors (its RLIMIT_NOFILE is raised to them)"},
};

size_t host_limits_count(void)
{
        return ARRAY_SIZE(limits);
}

const struct host_limit *host_limit_at(size_t i)
{
        return i < ARRAY_SIZE(limits) ? &limits[i] : NULL;
}

uint64_t host_limits_fds(unsigned n)
{
        return HOST_LIMITS_FDS_BASE + (uint64_t)HOST_LIMITS_FDS_PER_SANDBOX * n;
}

uint64_t host_limits_fit(uint64_t fds)
{
        return fds > HOST_LIMITS_FDS_BASE
                       ? (fds - HOST_LIMITS_FDS_BASE) / HOST_LIMITS_FDS_PER_SANDBOX
                       : 0;
}

uint64_t host_limit_need(const struct host_limit *l, unsigned n)
{
        if (strcmp(l->name, "fs.nr_open") == 0)
                return host_limits_fds(n);
        return l->base + l->per_sandbox * (uint64_t)n;
}

int host_limit_read(const char *name, uint64_t *ret)
{
        char path[256], buf[64];
        size_t i;
        ssize_t len;

        if (snprintf(path, sizeof(path), "/proc/sys/%s", name) >= (int)sizeof(path))
                return -ENAMETOOLONG;
        for (i = sizeof("/proc/sys/") - 1; path[i]; i++)
                if (path[i] == '.')
                        path[i] = '/';
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        len = read(fd, buf, sizeof(buf) - 1);
        if (len <= 0)
                return len < 0 ? -errno : -EINVAL;
        buf[len] = '\0';
        char *end;
        errno = 0;
        unsigned long long v = strtoull(buf, &end, 10);
        if (errno || end == buf)
                return -EINVAL;
        *ret = v;
        return 0;
}

int host_limits_report(unsigned n, FILE *out)
{
        struct rlimit rl;
        uint64_t need, have;
        int low = 0;

        fprintf(out, "kernel limits for --max-sandboxes %u:\n", n);
        for (size_t i = 0; i < ARRAY_SIZE(limits); i++) {
                const struct host_limit *l = &limits[i];

                need = host_limit_need(l, n);
                if (host_limit_read(l->name, &have) < 0) {
                        fprintf(out, "  %s: not readable here (%s)\n", l->name, l->what);
                        continue;
                }
                if (have >= need) {
                        fprintf(out, "  %s = %" PRIu64 ": enough (%" PRIu64 " needed%s)\n", l->name,
                                have, need, l->outbound_only ? " with every sandbox outbound" : "");
                } else {
                        low++;
                        fprintf(out,
                                "  %s = %" PRIu64 ": too low%s, set %s = %" PRIu64
                                " (each sandbox: %s)\n",
                                l->name, have,
                                l->outbound_only ? " for that many outbound sandboxes" : "",
                                l->name, need, l->what);
                }
        }
        need = host_limits_fds(n);
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
                /* what host_limits_raise_nofile could reach: the caller ran it */
                if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need) {
                        fprintf(out,
                                "  descriptors (RLIMIT_NOFILE) = %llu: enough (%" PRIu64
                                " for %u sandboxes; HTTP connections take the rest)\n",
                                (unsigned long long)rl.rlim_cur, need, n);
                } else {
                        low++;
                        fprintf(out,
                                "  descriptors (RLIMIT_NOFILE) = %llu: too low, %u sandboxes need "
                                "%" PRIu64 " (%d each; raise the hard limit: ulimit -Hn, "
                                "LimitNOFILE=, or run cellad with CAP_SYS_RESOURCE; with this "
                                "one at most %llu sandboxes fit)\n",
                                (unsigned long long)rl.rlim_cur, n, need,
                                HOST_LIMITS_FDS_PER_SANDBOX,
                                (unsigned long long)host_limits_fit(rl.rlim_cur));
                }
        }
        return low;
}

uint64_t host_limits_raise_nofile(uint64_t need)
{
        struct rlimit rl;
        uint64_t nr_open;

        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= need)
                return rl.rlim_cur;
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < need) {
                struct rlimit up = {need, need};

                if (host_limit_read("fs.nr_open", &nr_open) == 0 && nr_open < need)
                        up.rlim_cur = up.rlim_max = nr_open;
                if (up.rlim_max > rl.rlim_max && setrlimit(RLIMIT_NOFILE, &up) == 0)
                        return up.rlim_cur;
        }
        rl.rlim_cur = rl.rlim_max == RLIM_INFINITY || rl.rlim_max >= need ? need : rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 && getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        return rl.rlim_cur;
}
