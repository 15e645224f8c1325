/* Ending process trees: the one SIGKILL path of the agent (EXEC commands, session commands
 * and shells, background processes, interpreters, terminals; docs/decisions/0031).
 *
 * A target is a cgroup (every process in it and its sub-cgroups), a process group, and/or
 * the descendants of a root pid found through /proc (where there is no cgroup), minus what
 * must live: one spared pid (a session's shell: its descendants are targets) and a set of
 * kept processes with their descendants (what earlier commands of a session left running),
 * recognised by pid and start time so that a reused pid is not mistaken for one of them.
 *
 * The result is bounded whatever the tree does:
 *  * a whole cgroup goes with one write to cgroup.kill (the kernel kills every member and
 *    any child forked meanwhile);
 *  * otherwise (something is spared, or the kernel has no cgroup.kill) the cgroup is frozen
 *    (cgroup.freeze; at most FREEZE_WAIT_MS waiting for cgroup.events to say frozen, as a
 *    task in D state may delay it), so that nothing in it can fork while it is listed,
 *    then every target gets SIGKILL, rounds repeat until one finds nothing new (at most
 *    KILL_MAX_ROUNDS, KILL_BUDGET_MS), and the cgroup is thawed: the killed die, the spared
 *    go on. Without a cgroup the same rounds run over the /proc tree, unfrozen.
 * A process in D state dies when it leaves it; nothing here waits for that. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "agent/service.h"
#include "common/fsutil.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeutil.h"

#define FREEZE_WAIT_MS 100
#define KILL_MAX_ROUNDS 16
#define KILL_BUDGET_MS 1000
#define MAX_ANCESTRY 128 /* ppid links followed to decide whether a process is kept */
#define MAX_CGROUP_DEPTH 8

/* ---- pid lists ---- */

struct pid_list {
        pid_t *v;
        size_t n, cap;
};

static bool pid_list_has(const struct pid_list *l, pid_t pid)
{
        for (size_t i = 0; i < l->n; i++)
                if (l->v[i] == pid)
                        return true;
        return false;
}

/* Add pid unless present: 1 added, 0 present, -ENOMEM. */
static int pid_list_add(struct pid_list *l, pid_t pid)
{
        if (pid_list_has(l, pid))
                return 0;
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 64;
                pid_t *v = realloc(l->v, cap * sizeof(pid_t));

                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        l->v[l->n++] = pid;
        return 1;
}

/* ---- /proc ---- */

/* ppid and start time (clock ticks since boot) of pid from /proc/PID/stat. 0, or -errno
 * (the process is gone). */
int agent_proc_stat(pid_t pid, pid_t *ret_ppid, unsigned long long *ret_start)
{
        char path[64], buf[1024], *p;
        unsigned long long start = 0;
        long ppid = 0;
        ssize_t len;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        len = fs_read_small(path, buf, sizeof(buf));
        if (len < 0)
                return (int)len;
        if (len == 0)
                return -ESRCH;
        /* pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
         * utime stime cutime cstime priority nice threads itrealvalue starttime: comm may
         * hold anything, so the fields are counted from the last ')'. */
        p = strrchr(buf, ')');
        if (!p || sscanf(p + 1,
                         " %*c %ld %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d "
                         "%*d %*d %llu",
                         &ppid, &start) != 2)
                return -EINVAL;
        *ret_ppid = (pid_t)ppid;
        *ret_start = start;
        return 0;
}

/* Add the children of pid (every thread's /proc/PID/task/TID/children) to l. */
static int add_children(struct pid_list *l, pid_t pid)
{
        char path[64];
        DIR *d;
        struct dirent *de;
        int r = 0;

        snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
        d = opendir(path);
        if (!d)
                return 0;
        while ((de = readdir(d)) && r >= 0) {
                char cpath[400], buf[4096];

                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                snprintf(cpath, sizeof(cpath), "%s/%s/children", path, de->d_name);
                if (fs_read_small(cpath, buf, sizeof(buf)) <= 0)
                        continue;
                for (char *p = buf, *end;; p = end) {
                        long c = strtol(p, &end, 10);

                        if (end == p)
                                break;
                        if (c > 1 && pid_list_add(l, (pid_t)c) < 0)
                                r = -ENOMEM;
                }
        }
        closedir(d);
        return r;
}

/* Without /proc/.../children (CONFIG_PROC_CHILDREN off): every process's ppid from
 * /proc/PID/stat, then the descendants of root by repeated passes. */
static void add_descendants_scan(struct pid_list *l, pid_t root)
{
        struct pair {
                pid_t pid, ppid;
        } *v = NULL;
        size_t n = 0, cap = 0, first = l->n;
        DIR *d = opendir("/proc");
        struct dirent *de;
        bool grew = true;

        while (d && (de = readdir(d))) {
                long pid = strtol(de->d_name, NULL, 10);
                unsigned long long start;
                pid_t ppid;

                if (pid <= 1 || agent_proc_stat((pid_t)pid, &ppid, &start) < 0)
                        continue;
                if (n == cap) {
                        size_t ncap = cap ? cap * 2 : 256;
                        struct pair *nv = realloc(v, ncap * sizeof(*v));

                        if (!nv)
                                break;
                        v = nv;
                        cap = ncap;
                }
                v[n].pid = (pid_t)pid;
                v[n].ppid = ppid;
                n++;
        }
        if (d)
                closedir(d);
        while (grew) {
                grew = false;
                for (size_t i = 0; i < n; i++) {
                        bool parent_in = v[i].ppid == root;

                        for (size_t k = first; k < l->n && !parent_in; k++)
                                parent_in = l->v[k] == v[i].ppid;
                        if (parent_in && pid_list_add(l, v[i].pid) > 0)
                                grew = true;
                }
        }
        free(v);
}

/* root's descendants (not root) into l. */
static void add_descendants(struct pid_list *l, pid_t root)
{
        size_t first = l->n;
        int r;

        if (access("/proc/thread-self/children", F_OK) < 0) {
                add_descendants_scan(l, root);
                return;
        }
        /* breadth first: l grows while it is walked */
        r = add_children(l, root);
        for (size_t i = first; r >= 0 && i < l->n; i++)
                r = add_children(l, l->v[i]);
}

/* ---- cgroups ---- */

static int write_text(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = write(fd, text, strlen(text));
        n = n < 0 ? -errno : 0;
        close(fd);
        return (int)n;
}

/* Every pid of cgroup and its sub-cgroups into l. */
static void add_cgroup_procs(struct pid_list *l, const char *cgroup, int depth)
{
        char path[CELLA_PATH_MAX], line[32];
        struct dirent *de;
        FILE *f;
        DIR *d;

        snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
        f = fopen(path, "re");
        if (f) {
                while (fgets(line, sizeof(line), f)) {
                        long pid = strtol(line, NULL, 10);

                        if (pid > 1)
                                (void)pid_list_add(l, (pid_t)pid);
                }
                fclose(f);
        }
        if (depth >= MAX_CGROUP_DEPTH || !(d = opendir(cgroup)))
                return;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", cgroup, de->d_name);
                add_cgroup_procs(l, path, depth + 1);
        }
        closedir(d);
}

static bool cgroup_is_frozen(const char *cgroup)
{
        char path[CELLA_PATH_MAX], buf[256];

        snprintf(path, sizeof(path), "%s/cgroup.events", cgroup);
        return fs_read_small(path, buf, sizeof(buf)) > 0 && strstr(buf, "frozen 1") != NULL;
}

/* Freeze cgroup; wait (bounded) until the kernel says it is. Returns whether it was
 * asked to freeze (and must be thawed). */
static bool cgroup_freeze(const char *cgroup)
{
        char path[CELLA_PATH_MAX];
        uint64_t until;

        snprintf(path, sizeof(path), "%s/cgroup.freeze", cgroup);
        if (write_text(path, "1") < 0)
                return false;
        until = time_mono_us() + FREEZE_WAIT_MS * 1000ULL;
        while (!cgroup_is_frozen(cgroup) && time_mono_us() < until) {
                struct timespec ts = {0, 1000 * 1000};

                nanosleep(&ts, NULL);
        }
        return true;
}

static void cgroup_thaw(const char *cgroup)
{
        char path[CELLA_PATH_MAX];

        snprintf(path, sizeof(path), "%s/cgroup.freeze", cgroup);
        if (write_text(path, "0") < 0)
                log_warn("thaw %s: %s", cgroup, strerror(errno));
}

/* ---- the kill ---- */

static bool is_kept_ident(const struct kill_target *t, pid_t pid, unsigned long long start)
{
        for (size_t i = 0; i < t->n_keep; i++)
                if (t->keep[i].pid == pid && t->keep[i].start == start)
                        return true;
        return false;
}

/* Whether pid must live: the spared pid itself, a kept process or a descendant of one. A
 * process whose ancestry leaves the tree (an orphan, reparented to the agent) is a target:
 * it was started after the keep set was taken. */
static bool is_spared(const struct kill_target *t, pid_t pid)
{
        if (pid == t->spare)
                return true;
        if (t->n_keep == 0)
                return false;
        for (int depth = 0; depth < MAX_ANCESTRY && pid > 1; depth++) {
                unsigned long long start;
                pid_t ppid;

                if (depth > 0 && pid == t->spare)
                        return false; /* below the spared shell: a command's process */
                if (agent_proc_stat(pid, &ppid, &start) < 0)
                        return false;
                if (is_kept_ident(t, pid, start))
                        return true;
                pid = ppid;
        }
        return false;
}

int agent_kill_tree(const struct kill_target *t)
{
        bool whole = t->spare <= 0 && t->n_keep == 0;
        struct pid_list killed = {0};
        bool frozen = false;
        uint64_t until = time_mono_us() + KILL_BUDGET_MS * 1000ULL;
        int n = 0;

        if (t->cgroup && whole) {
                char path[CELLA_PATH_MAX];

                snprintf(path, sizeof(path), "%s/cgroup.kill", t->cgroup);
                if (write_text(path, "1") == 0) {
                        n = 1;
                        if (t->pgid > 0)
                                kill(-t->pgid, SIGKILL);
                        if (t->root <= 0)
                                return n;
                        /* and whatever of root's tree left the cgroup: the rounds below */
                }
        }
        if (t->cgroup)
                frozen = cgroup_freeze(t->cgroup);
        for (int round = 0; round < KILL_MAX_ROUNDS; round++) {
                struct pid_list l = {0};
                int fresh = 0;

                if (t->cgroup)
                        add_cgroup_procs(&l, t->cgroup, 0);
                if (t->root > 0) {
                        if (t->root != t->spare && whole)
                                (void)pid_list_add(&l, t->root);
                        add_descendants(&l, t->root);
                }
                for (size_t i = 0; i < l.n; i++) {
                        pid_t pid = l.v[i];

                        if (pid <= 1 || pid == getpid() || pid_list_has(&killed, pid) ||
                            is_spared(t, pid))
                                continue;
                        if (kill(pid, SIGKILL) == 0) {
                                fresh++;
                                (void)pid_list_add(&killed, pid);
                        }
                }
                free(l.v);
                if (t->pgid > 0 && whole)
                        kill(-t->pgid, SIGKILL);
                n += fresh;
                if (fresh == 0 || time_mono_us() >= until)
                        break;
        }
        if (frozen)
                cgroup_thaw(t->cgroup);
        free(killed.v);
        return n;
}

int agent_tree_snapshot(const char *cgroup, pid_t root, pid_t except, struct proc_ident **ret,
                        size_t *ret_n)
{
        struct pid_list l = {0};
        struct proc_ident *v;
        size_t n = 0;

        if (cgroup)
                add_cgroup_procs(&l, cgroup, 0);
        if (root > 0)
                add_descendants(&l, root);
        v = calloc(l.n ? l.n : 1, sizeof(*v));
        if (!v) {
                free(l.v);
                return -ENOMEM;
        }
        for (size_t i = 0; i < l.n; i++) {
                pid_t ppid;

                if (l.v[i] == except || agent_proc_stat(l.v[i], &ppid, &v[n].start) < 0)
                        continue;
                v[n++].pid = l.v[i];
        }
        free(l.v);
        *ret = v;
        *ret_n = n;
        return 0;
}
