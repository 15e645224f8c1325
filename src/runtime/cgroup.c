/* Cgroup layout detection, plan and teardown (see cgroup.h). */
#include "runtime/cgroup.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/macros.h"

/* How deep the sandbox may nest its own sub-cgroups below its delegated directory. This
 * also bounds the recursion of cgroup_destroy(). */
#define CGROUP_MAX_DEPTH 8

static const char *const v1_names[_CGROUP_V1_MAX] = {
        [CGROUP_V1_MEMORY] = "memory",
        [CGROUP_V1_PIDS] = "pids",
        [CGROUP_V1_CPU] = "cpu",
};

const char *cgroup_mode_name(enum cgroup_mode mode)
{
        switch (mode) {
        case CGROUP_MODE_V2:
                return "v2";
        case CGROUP_MODE_HYBRID:
                return "hybrid (v1 controllers, v2 membership)";
        default:
                return "none";
        }
}

/* Copy a mountinfo field, decoding the \ooo escapes the kernel uses for spaces etc. */
static int unescape_field(const char *s, size_t len, char *out, size_t size)
{
        size_t o = 0;
        for (size_t i = 0; i < len; i++) {
                char c = s[i];
                if (c == '\\' && i + 3 < len && s[i + 1] >= '0' && s[i + 1] <= '3' &&
                    s[i + 2] >= '0' && s[i + 2] <= '7' && s[i + 3] >= '0' && s[i + 3] <= '7') {
                        c = (char)((s[i + 1] - '0') * 64 + (s[i + 2] - '0') * 8 + (s[i + 3] - '0'));
                        i += 3;
                }
                if (o + 1 >= size)
                        return -ENAMETOOLONG;
                out[o++] = c;
        }
        out[o] = '\0';
        return 0;
}

/* Does the comma-separated list contain word? */
static bool list_has(const char *list, size_t len, const char *word, char sep)
{
        size_t wl = strlen(word);
        size_t i = 0;
        while (i < len) {
                size_t j = i;
                while (j < len && list[j] != sep)
                        j++;
                if (j - i == wl && memcmp(list + i, word, wl) == 0)
                        return true;
                i = j + 1;
        }
        return false;
}

int cgroup_detect(const char *mountinfo, const char *v2_controllers, struct cgroup_layout *ret)
{
        struct cgroup_layout l = {.mode = CGROUP_MODE_NONE};
        const char *line = mountinfo;

        while (line && *line) {
                const char *eol = strchr(line, '\n');
                size_t len = eol ? (size_t)(eol - line) : strlen(line);
                const char *f[6] = {0};
                size_t fl[6] = {0};
                size_t nf = 0, i = 0;

                /* Fields 0..5 up to the optional fields, then " - " separator. */
                while (i < len && nf < 6) {
                        while (i < len && line[i] == ' ')
                                i++;
                        size_t st = i;
                        while (i < len && line[i] != ' ')
                                i++;
                        if (i > st) {
                                f[nf] = line + st;
                                fl[nf] = i - st;
                                nf++;
                        }
                }
                const char *sep = NULL;
                for (size_t k = i; k + 3 <= len; k++) {
                        if (line[k] == ' ' && line[k + 1] == '-' && line[k + 2] == ' ') {
                                sep = line + k + 3;
                                break;
                        }
                }
                if (nf == 6 && sep) {
                        const char *end = line + len;
                        const char *fstype = sep;
                        const char *p = memchr(fstype, ' ', (size_t)(end - fstype));
                        if (p) {
                                size_t tl = (size_t)(p - fstype);
                                const char *src = p + 1;
                                const char *q = memchr(src, ' ', (size_t)(end - src));
                                const char *opts = q ? q + 1 : end;
                                size_t ol = (size_t)(end - opts);
                                if (tl == 7 && memcmp(fstype, "cgroup2", 7) == 0 &&
                                    l.v2_root[0] == '\0') {
                                        if (unescape_field(f[4], fl[4], l.v2_root,
                                                           sizeof(l.v2_root)) < 0)
                                                l.v2_root[0] = '\0';
                                } else if (tl == 6 && memcmp(fstype, "cgroup", 6) == 0) {
                                        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                                                if (l.v1_root[c][0] ||
                                                    !list_has(opts, ol, v1_names[c], ','))
                                                        continue;
                                                if (unescape_field(f[4], fl[4], l.v1_root[c],
                                                                   sizeof(l.v1_root[c])) < 0)
                                                        l.v1_root[c][0] = '\0';
                                        }
                                }
                        }
                }
                line = eol ? eol + 1 : NULL;
        }

        if (l.v2_root[0] == '\0')
                return -ENOENT;
        const char *ctl = v2_controllers ? v2_controllers : "";
        size_t cl = strlen(ctl);
        while (cl > 0 && (ctl[cl - 1] == '\n' || ctl[cl - 1] == ' '))
                cl--;
        if (list_has(ctl, cl, "memory", ' ') && list_has(ctl, cl, "pids", ' ') &&
            list_has(ctl, cl, "cpu", ' ')) {
                l.mode = CGROUP_MODE_V2;
                for (int c = 0; c < _CGROUP_V1_MAX; c++)
                        l.v1_root[c][0] = '\0';
        } else if (l.v1_root[CGROUP_V1_MEMORY][0] && l.v1_root[CGROUP_V1_PIDS][0] &&
                   l.v1_root[CGROUP_V1_CPU][0]) {
                l.mode = CGROUP_MODE_HYBRID;
        } else {
                return -EOPNOTSUPP;
        }
        *ret = l;
        return 0;
}

static int read_file(const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t n = 0;
        while (n + 1 < size) {
                ssize_t r = read(fd, buf + n, size - 1 - n);
                if (r < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (r == 0)
                        break;
                n += (size_t)r;
        }
        buf[n] = '\0';
        return (int)n;
}

int cgroup_detect_host(struct cgroup_layout *ret)
{
        const size_t size = 1024 * 1024;
        _cleanup_free_ char *mountinfo = malloc(size);
        char ctl[512] = "";
        char path[CELLA_PATH_MAX + 32];
        struct cgroup_layout probe;

        if (!mountinfo)
                return -ENOMEM;
        int r = read_file("/proc/self/mountinfo", mountinfo, size);
        if (r < 0)
                return r;
        /* First pass without controllers to learn where cgroup2 is mounted. */
        r = cgroup_detect(mountinfo, "memory pids cpu", &probe);
        if (r < 0)
                return r;
        snprintf(path, sizeof(path), "%s/cgroup.controllers", probe.v2_root);
        if (read_file(path, ctl, sizeof(ctl)) < 0)
                ctl[0] = '\0';
        return cgroup_detect(mountinfo, ctl, ret);
}

int cgroup_v2_dir(const struct cgroup_layout *layout, const char *name, const char *id, char *buf,
                  size_t size)
{
        int n = snprintf(buf, size, "%s/%s/%s", layout->v2_root, name, id);
        if (n < 0 || (size_t)n >= size)
                return -ENAMETOOLONG;
        return 0;
}

static int add_step(struct cgroup_plan *p, enum cgroup_op op, bool optional, const char *dir,
                    const char *file, const char *value)
{
        if (p->n >= CGROUP_PLAN_MAX)
                return -E2BIG;
        struct cgroup_step *s = &p->steps[p->n];
        char tmp[sizeof(s->path)];
        /* dir may point into the plan itself: format aside, then copy. */
        int n = file ? snprintf(tmp, sizeof(tmp), "%s/%s", dir, file)
                     : snprintf(tmp, sizeof(tmp), "%s", dir);
        if (n < 0 || (size_t)n >= sizeof(tmp))
                return -ENAMETOOLONG;
        memcpy(s->path, tmp, (size_t)n + 1);
        s->op = op;
        s->optional = optional;
        snprintf(s->value, sizeof(s->value), "%s", value ? value : "");
        p->n++;
        return 0;
}

#define TRY(x)                     \
        do {                       \
                int _r = (x);      \
                if (_r < 0)        \
                        return _r; \
        } while (0)

int cgroup_plan_make(const struct cgroup_layout *layout, const char *name, const char *id,
                     const struct cgroup_limits *lim, uid_t owner, struct cgroup_plan *ret)
{
        char parent[CELLA_PATH_MAX];
        char v[64];
        struct cgroup_plan *p = ret;

        memset(p, 0, sizeof(*p));
        if (layout->mode == CGROUP_MODE_NONE)
                return -EOPNOTSUPP;
        int n = snprintf(parent, sizeof(parent), "%s/%s", layout->v2_root, name);
        if (n < 0 || (size_t)n >= sizeof(parent))
                return -ENAMETOOLONG;
        TRY(cgroup_v2_dir(layout, name, id, p->v2_dir, sizeof(p->v2_dir)));

        TRY(add_step(p, CGROUP_OP_MKDIR, false, parent, NULL, NULL));
        if (layout->mode == CGROUP_MODE_V2) {
                TRY(add_step(p, CGROUP_OP_WRITE, false, layout->v2_root, "cgroup.subtree_control",
                             "+memory +pids +cpu"));
                TRY(add_step(p, CGROUP_OP_WRITE, false, parent, "cgroup.subtree_control",
                             "+memory +pids +cpu"));
        }
        TRY(add_step(p, CGROUP_OP_MKDIR, false, p->v2_dir, NULL, NULL));
        snprintf(v, sizeof(v), "%d", CGROUP_MAX_DESCENDANTS);
        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v2_dir, "cgroup.max.descendants", v));
        snprintf(v, sizeof(v), "%d", CGROUP_MAX_DEPTH);
        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v2_dir, "cgroup.max.depth", v));

        if (layout->mode == CGROUP_MODE_V2) {
                if (lim->memory_bytes) {
                        snprintf(v, sizeof(v), "%" PRIu64, lim->memory_bytes);
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v2_dir, "memory.max", v));
                        TRY(add_step(p, CGROUP_OP_WRITE, true, p->v2_dir, "memory.swap.max", "0"));
                }
                if (lim->pids_max) {
                        snprintf(v, sizeof(v), "%" PRIu32, lim->pids_max);
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v2_dir, "pids.max", v));
                }
                if (lim->cpu_millis) {
                        snprintf(v, sizeof(v), "%" PRIu64 " 100000",
                                 (uint64_t)lim->cpu_millis * 100);
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v2_dir, "cpu.max", v));
                }
        } else {
                for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                        char d[CELLA_PATH_MAX];
                        n = snprintf(d, sizeof(d), "%s/%s", layout->v1_root[c], name);
                        if (n < 0 || (size_t)n >= sizeof(d))
                                return -ENAMETOOLONG;
                        TRY(add_step(p, CGROUP_OP_MKDIR, false, d, NULL, NULL));
                        n = snprintf(p->v1_dir[c], sizeof(p->v1_dir[c]), "%s/%s/%s",
                                     layout->v1_root[c], name, id);
                        if (n < 0 || (size_t)n >= sizeof(p->v1_dir[c]))
                                return -ENAMETOOLONG;
                        TRY(add_step(p, CGROUP_OP_MKDIR, false, p->v1_dir[c], NULL, NULL));
                }
                if (lim->memory_bytes) {
                        snprintf(v, sizeof(v), "%" PRIu64, lim->memory_bytes);
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v1_dir[CGROUP_V1_MEMORY],
                                     "memory.limit_in_bytes", v));
                        TRY(add_step(p, CGROUP_OP_WRITE, true, p->v1_dir[CGROUP_V1_MEMORY],
                                     "memory.memsw.limit_in_bytes", v));
                }
                if (lim->pids_max) {
                        snprintf(v, sizeof(v), "%" PRIu32, lim->pids_max);
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v1_dir[CGROUP_V1_PIDS],
                                     "pids.max", v));
                }
                if (lim->cpu_millis) {
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v1_dir[CGROUP_V1_CPU],
                                     "cpu.cfs_period_us", "100000"));
                        snprintf(v, sizeof(v), "%" PRIu64, (uint64_t)lim->cpu_millis * 100);
                        TRY(add_step(p, CGROUP_OP_WRITE, false, p->v1_dir[CGROUP_V1_CPU],
                                     "cpu.cfs_quota_us", v));
                }
        }

        /* Delegation: the sandbox's root may create sub-cgroups and move its processes. */
        snprintf(v, sizeof(v), "%u", (unsigned)owner);
        TRY(add_step(p, CGROUP_OP_CHOWN, false, p->v2_dir, NULL, v));
        TRY(add_step(p, CGROUP_OP_CHOWN, false, p->v2_dir, "cgroup.procs", v));
        TRY(add_step(p, CGROUP_OP_CHOWN, false, p->v2_dir, "cgroup.threads", v));
        TRY(add_step(p, CGROUP_OP_CHOWN, false, p->v2_dir, "cgroup.subtree_control", v));
        return 0;
}

static int write_str(const char *path, const char *value)
{
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
        if (fd < 0)
                return -errno;
        size_t len = strlen(value);
        ssize_t w = write(fd, value, len);
        if (w < 0)
                return -errno;
        if ((size_t)w != len)
                return -EIO;
        return 0;
}

int cgroup_plan_apply(const struct cgroup_plan *plan, size_t *ret_step)
{
        for (size_t i = 0; i < plan->n; i++) {
                const struct cgroup_step *s = &plan->steps[i];
                int r = 0;
                switch (s->op) {
                case CGROUP_OP_MKDIR:
                        if (mkdir(s->path, 0755) < 0 && errno != EEXIST)
                                r = -errno;
                        break;
                case CGROUP_OP_WRITE:
                        r = write_str(s->path, s->value);
                        break;
                case CGROUP_OP_CHOWN: {
                        char *end = NULL;
                        unsigned long uid = strtoul(s->value, &end, 10);
                        if (!end || *end)
                                r = -EINVAL;
                        else if (lchown(s->path, (uid_t)uid, (gid_t)uid) < 0)
                                r = -errno;
                        break;
                }
                }
                if (r == -ENOENT && s->optional)
                        r = 0;
                if (r < 0) {
                        if (ret_step)
                                *ret_step = i;
                        return r;
                }
        }
        return 0;
}

int cgroup_plan_open_v1_tasks(const struct cgroup_plan *plan, int fds[_CGROUP_V1_MAX],
                              size_t *ret_n)
{
        char path[CELLA_PATH_MAX + 32];
        size_t n = 0;

        for (int c = 0; c < _CGROUP_V1_MAX; c++)
                fds[c] = -EBADF;
        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                if (!plan->v1_dir[c][0])
                        continue;
                snprintf(path, sizeof(path), "%s/tasks", plan->v1_dir[c]);
                int fd = open(path, O_WRONLY | O_CLOEXEC | O_NOFOLLOW);
                if (fd < 0) {
                        int e = -errno;
                        for (size_t i = 0; i < n; i++) {
                                close(fds[i]);
                                fds[i] = -EBADF;
                        }
                        return e;
                }
                fds[n++] = fd;
        }
        *ret_n = n;
        return 0;
}

/* SIGKILL every process listed in dir/cgroup.procs and below. Returns how many were
 * listed. depth bounds the recursion (the sandbox cannot nest deeper, see max.depth). */
static int kill_tree(const char *dir, int depth)
{
        char path[CELLA_PATH_MAX + 32];
        char buf[16384];
        int count = 0;

        snprintf(path, sizeof(path), "%s/cgroup.procs", dir);
        if (read_file(path, buf, sizeof(buf)) > 0) {
                char *s = buf;
                while (*s) {
                        char *end = NULL;
                        long pid = strtol(s, &end, 10);
                        if (end == s)
                                break;
                        if (pid > 0) {
                                kill((pid_t)pid, SIGKILL);
                                count++;
                        }
                        s = end;
                        while (*s == '\n')
                                s++;
                }
        }
        if (depth <= 0)
                return count;
        _cleanup_closedir_ DIR *d = opendir(dir);
        if (!d)
                return count;
        struct dirent *de;
        while ((de = readdir(d))) {
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                count += kill_tree(path, depth - 1);
        }
        return count;
}

/* rmdir dir after its sub-directories, depth-first. 0 when gone. */
static int remove_tree(const char *dir, int depth)
{
        if (depth > 0) {
                _cleanup_closedir_ DIR *d = opendir(dir);
                if (!d)
                        return errno == ENOENT ? 0 : -errno;
                struct dirent *de;
                char path[CELLA_PATH_MAX + 1];
                while ((de = readdir(d))) {
                        if (de->d_type != DT_DIR || de->d_name[0] == '.')
                                continue;
                        int n = snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
                        if (n < 0 || (size_t)n >= sizeof(path))
                                continue;
                        remove_tree(path, depth - 1);
                }
        }
        if (rmdir(dir) < 0 && errno != ENOENT)
                return -errno;
        return 0;
}

static void sleep_ms(long ms)
{
        struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
                ;
}

int cgroup_destroy(const struct cgroup_layout *layout, const char *name, const char *id)
{
        char v2[CELLA_PATH_MAX], path[CELLA_PATH_MAX + 32];
        char v1[_CGROUP_V1_MAX][CELLA_PATH_MAX];
        int r = cgroup_v2_dir(layout, name, id, v2, sizeof(v2));
        if (r < 0)
                return r;
        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                v1[c][0] = '\0';
                if (layout->mode != CGROUP_MODE_HYBRID || !layout->v1_root[c][0])
                        continue;
                int n = snprintf(v1[c], sizeof(v1[c]), "%s/%s/%s", layout->v1_root[c], name, id);
                if (n < 0 || (size_t)n >= sizeof(v1[c]))
                        return -ENAMETOOLONG;
        }

        /* cgroup.kill kills the whole subtree atomically (no fork race). */
        snprintf(path, sizeof(path), "%s/cgroup.kill", v2);
        bool have_kill = write_str(path, "1") == 0;

        /* Up to ~10 s: processes die fast, but a zombie PID 1 that is not ours is reaped
         * by whoever inherited it. */
        for (int attempt = 0; attempt < 2000; attempt++) {
                if (!have_kill || attempt > 0) {
                        kill_tree(v2, CGROUP_MAX_DEPTH + 1);
                        for (int c = 0; c < _CGROUP_V1_MAX; c++)
                                if (v1[c][0])
                                        kill_tree(v1[c], 0);
                }
                r = remove_tree(v2, CGROUP_MAX_DEPTH + 1);
                for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                        if (!v1[c][0])
                                continue;
                        if (rmdir(v1[c]) < 0 && errno != ENOENT && r == 0)
                                r = -errno;
                }
                if (r != -EBUSY)
                        return r;
                sleep_ms(5);
        }
        return -EBUSY;
}
