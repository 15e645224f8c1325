/* runtime_container_snapshot (container.h): freeze, copy the writable layer, thaw. */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "runtime/cgroup.h"
#include "runtime/container.h"
#include "runtime/disk.h"
#include "runtime/layer.h"
#include "runtime/runtime-internal.h"

static int write_at(int dir, const char *file, const char *value)
{
        _cleanup_close_ int fd = openat(dir, file, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = write(fd, value, strlen(value));
        return n < 0 ? -errno : 0;
}

/* Is "frozen 1" in cgroup.events? */
static int is_frozen(int cg)
{
        char buf[512];
        _cleanup_close_ int fd = openat(cg, "cgroup.events", O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        ssize_t n = read(fd, buf, sizeof(buf) - 1);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return strstr(buf, "frozen 1") != NULL;
}

/* Freeze the cgroup and wait (bounded) until the kernel says every task is frozen. */
static int freeze(int cg)
{
        int r = write_at(cg, "cgroup.freeze", "1");
        if (r < 0)
                return r;
        for (int waited = 0; waited < CELLA_SNAPSHOT_FREEZE_TIMEOUT_MS; waited += 5) {
                r = is_frozen(cg);
                if (r != 0)
                        return r < 0 ? r : 0;
                struct timespec ts = {0, 5 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        return -ETIMEDOUT;
}

int runtime_container_snapshot(struct runtime *rt, const char *id, const char *dir, uid_t uid_base,
                               uint32_t uid_count, int dst_parent_fd, const char *name,
                               pthread_mutex_t *disk_lock, struct layer_copy_stats *stats,
                               struct cella_error *err)
{
        char path[CELLA_PATH_MAX];
        int r;

        /* The sandbox's filesystem: its disk mounted once more, or its dir. */
        _cleanup_close_ int disk = -EBADF;
        if (disk_exists(dir)) {
                struct disk_plan plan;
                const char *what = "disk";
                bool created = false;
                r = disk_plan_make(dir, NULL, CELLA_DISK_MIN_BYTES, &plan);
                if (r >= 0) {
                        if (disk_lock)
                                pthread_mutex_lock(disk_lock);
                        r = disk_open(&plan, NULL, &disk, &created, &what);
                        if (disk_lock)
                                pthread_mutex_unlock(disk_lock);
                }
                if (r < 0)
                        return cella_error_errno(err, -r, "%s", what);
        }
        _cleanup_close_ int root =
                disk >= 0 ? openat(disk, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC)
                          : open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return cella_error_errno(err, errno, "open sandbox's disk");
        _cleanup_close_ int upper =
                openat(root, "upper", O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (upper < 0)
                return cella_error_errno(err, errno, "open its writable layer");

        /* Its cgroup, if it runs. */
        _cleanup_close_ int cg = -EBADF;
        r = cgroup_v2_dir(&rt->cg, rt->cgroup_name, id, path, sizeof(path));
        if (r < 0)
                return cella_error_errno(err, -r, "cgroup");
        cg = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg < 0 && errno != ENOENT)
                return cella_error_errno(err, errno, "open cgroup");
        if (cg >= 0) {
                r = freeze(cg);
                if (r < 0) {
                        write_at(cg, "cgroup.freeze", "0");
                        return cella_error_errno(err, -r, "freeze");
                }
        }
        r = layer_copy(upper, dst_parent_fd, name, (uint32_t)uid_base, uid_count, stats);
        if (cg >= 0) {
                int t = write_at(cg, "cgroup.freeze", "0");
                if (t < 0)
                        log_error("sandbox %s: thaw: %s", id, strerror(-t));
        }
        if (r < 0) {
                int e = layer_remove(dst_parent_fd, name);
                if (e < 0)
                        log_error("snapshot %s: remove partial copy: %s", name, strerror(-e));
                return cella_error_errno(err, -r, "copy writable layer");
        }
        return 0;
}
