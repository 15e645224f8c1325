/* runtime_container_snapshot (container.h): freeze, capture the writable layer (a
 * reflinked clone of the sandbox's disk, or a copy of its upper layer), thaw. */
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/probe.h"
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

/* Is "frozen 1" in cgroup.events (open at fd)? */
static int is_frozen(int fd)
{
        char buf[512];
        ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return strstr(buf, "frozen 1") != NULL;
}

/* Freeze the cgroup and wait (bounded) until the kernel says every task is frozen: woken
 * by the change of cgroup.events (kernfs notifies pollers with POLLPRI), and looking again
 * every 5 ms whatever. */
static int freeze(int cg)
{
        _cleanup_close_ int ev = openat(cg, "cgroup.events", O_RDONLY | O_CLOEXEC);
        if (ev < 0)
                return -errno;
        int r = write_at(cg, "cgroup.freeze", "1");
        if (r < 0)
                return r;
        struct timespec t0, now;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (;;) {
                r = is_frozen(ev);
                if (r != 0)
                        return r < 0 ? r : 0;
                clock_gettime(CLOCK_MONOTONIC, &now);
                int64_t ms = (int64_t)(now.tv_sec - t0.tv_sec) * 1000 +
                             (now.tv_nsec - t0.tv_nsec) / 1000000;
                if (ms >= CELLA_SNAPSHOT_FREEZE_TIMEOUT_MS)
                        return -ETIMEDOUT;
                struct pollfd p = {.fd = ev, .events = POLLPRI};
                if (poll(&p, 1, 5) < 0 && errno != EINTR)
                        return -errno;
        }
}

/* Clone captures one at a time: two captures of one sandbox must not thaw each other's
 * freeze (nor freeze one filesystem twice: EBUSY). Each holds it for milliseconds. */
static pthread_mutex_t clone_lock = PTHREAD_MUTEX_INITIALIZER;

/* Does a failed FICLONE say "no reflinks between these files" (then the copy runs)? */
static bool is_no_reflink(int r)
{
        return r == -EXDEV || r == -EOPNOTSUPP || r == -EINVAL || r == -ENOTTY || r == -ENOSYS;
}

/* EXT4_IOC_CHECKPOINT (Linux 5.13, <linux/ext4.h> is not installed here): write every
 * committed journal transaction to its place and empty the journal. */
#ifndef EXT4_IOC_CHECKPOINT
#define EXT4_IOC_CHECKPOINT _IOW('f', 43, uint32_t)
#endif

/* Make the sandbox's filesystem (its tasks frozen) consistent on its image as it is,
 * without a journal to replay: dirty data and metadata written (syncfs), the journal
 * checkpointed into place and emptied (EXT4_IOC_CHECKPOINT). Returns 1 when done so, 0
 * when the kernel has no checkpoint ioctl (then the filesystem is frozen instead,
 * FIFREEZE: *ret_frozen), -errno on failure. */
static int settle(int fs_root, bool *ret_frozen)
{
        uint32_t flags = 0;

        *ret_frozen = false;
        if (syncfs(fs_root) < 0)
                return -errno;
        if (ioctl(fs_root, EXT4_IOC_CHECKPOINT, &flags) == 0)
                return 1;
        if (errno != ENOTTY && errno != EOPNOTSUPP && errno != EINVAL)
                return -errno;
        if (ioctl(fs_root, FIFREEZE, 0) < 0)
                return -errno;
        *ret_frozen = true;
        return 0;
}

/* The clone capture (docs/decisions/0051): the cgroup frozen (no task of the sandbox is in
 * a system call), then its filesystem settled on its image (settle(): written, journal
 * checkpointed and empty, so the clone mounts read-only without a replay), the image
 * cloned into dst_parent_fd/name/disk.img, the cgroup thawed whatever happened. Dirty
 * data is written once before the freeze, so the sandbox stays frozen only for what it
 * wrote meanwhile. Returns 0, or -errno with nothing left at dst_parent_fd/name. */
static int capture_clone(int cg, int fs_root, const char *dir, int dst_parent_fd, const char *name,
                         struct layer_copy_stats *st, const char **what)
{
        char image[CELLA_PATH_MAX];
        bool frozen = false;
        int r, t;

        if (snprintf(image, sizeof(image), "%s/disk.img", dir) >= (int)sizeof(image))
                return -ENAMETOOLONG;
        *what = "open its disk image";
        _cleanup_close_ int img = open(image, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (img < 0)
                return -errno;
        if (mkdirat(dst_parent_fd, name, 0700) < 0)
                return -errno;
        _cleanup_close_ int dst =
                openat(dst_parent_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dst < 0) {
                r = -errno;
                unlinkat(dst_parent_fd, name, AT_REMOVEDIR);
                return r;
        }
        (void)syncfs(fs_root); /* the bulk, while the sandbox runs */
        PROBE("syncfs");
        pthread_mutex_lock(&clone_lock);
        *what = "freeze";
        r = cg >= 0 ? freeze(cg) : 0;
        PROBE("freeze");
        if (r >= 0) {
                *what = "write its filesystem to its image";
                r = settle(fs_root, &frozen);
                PROBE("syncfs, journal checkpoint");
        }
        if (r >= 0) {
                *what = "clone its disk image";
                r = disk_clone(img, dst, &st->bytes);
                PROBE("FICLONE, fsync");
        }
        if (frozen && ioctl(fs_root, FITHAW, 0) < 0) {
                t = -errno;
                log_error("thaw a sandbox's filesystem: %s", strerror(-t));
        }
        if (cg >= 0) {
                t = write_at(cg, "cgroup.freeze", "0");
                if (t < 0)
                        log_error("thaw: %s", strerror(-t));
        }
        pthread_mutex_unlock(&clone_lock);
        PROBE("thaw");
        if (r < 0) {
                unlinkat(dst_parent_fd, name, AT_REMOVEDIR);
                return r;
        }
        st->disk_cloned = true;
        return 0;
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
        PROBE_BEGIN();
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
        PROBE("its disk mounted again");
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
        /* A disk on a filesystem with reflinks: cloned whole, O(metadata). */
        if (disk >= 0 && rt->reflink) {
                struct layer_copy_stats local = {0};
                const char *what = "clone";
                if (!stats)
                        stats = &local;
                memset(stats, 0, sizeof(*stats));
                r = capture_clone(cg, root, dir, dst_parent_fd, name, stats, &what);
                PROBE_END("snapshot capture");
                if (r >= 0 || !is_no_reflink(r))
                        return r < 0 ? cella_error_errno(err, -r, "%s", what) : 0;
                log_warn("sandbox %s: %s: %s; copying its writable layer instead", id, what,
                         strerror(-r));
                memset(stats, 0, sizeof(*stats));
        }
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

int runtime_container_freeze(struct runtime *rt, const char *id, bool frozen,
                             struct cella_error *err)
{
        char path[CELLA_PATH_MAX];
        int r = cgroup_v2_dir(&rt->cg, rt->cgroup_name, id, path, sizeof(path));

        if (r < 0)
                return cella_error_errno(err, -r, "cgroup");
        _cleanup_close_ int cg = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg < 0)
                return cella_error_errno(err, errno, "open cgroup");
        if (!frozen) {
                r = write_at(cg, "cgroup.freeze", "0");
                return r < 0 ? cella_error_errno(err, -r, "thaw") : 0;
        }
        r = freeze(cg);
        if (r < 0) {
                write_at(cg, "cgroup.freeze", "0");
                return cella_error_errno(err, -r, "freeze");
        }
        return 0;
}
