/* A sandbox's disk image (see disk.h). */
#include "runtime/disk.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <linux/loop.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/macros.h"

extern char **environ;

/* Attempts at binding a free loop device (another process may take the one
 * LOOP_CTL_GET_FREE named before we bind it). */
#define LOOP_ATTACH_TRIES 16

int disk_mode_from_name(const char *name, enum disk_mode *ret)
{
        static const char *const names[] = {[DISK_MODE_AUTO] = "auto",
                                            [DISK_MODE_REQUIRED] = "required",
                                            [DISK_MODE_OFF] = "off"};
        for (size_t i = 0; i < ARRAY_SIZE(names); i++)
                if (name && strcmp(name, names[i]) == 0) {
                        *ret = (enum disk_mode)i;
                        return 0;
                }
        return -EINVAL;
}

const char *disk_mode_name(enum disk_mode m)
{
        switch (m) {
        case DISK_MODE_AUTO:
                return "auto";
        case DISK_MODE_REQUIRED:
                return "required";
        case DISK_MODE_OFF:
                return "off";
        }
        return "?";
}

int disk_size_parse(const char *s, size_t len, uint64_t *ret)
{
        uint64_t v = 0, mul = 1;
        size_t i = 0;

        if (!s || len == 0)
                return -EINVAL;
        for (; i < len && s[i] >= '0' && s[i] <= '9'; i++) {
                unsigned d = (unsigned)(s[i] - '0');
                if (v > (UINT64_MAX - d) / 10)
                        return -ERANGE;
                v = v * 10 + d;
        }
        if (i == 0)
                return -EINVAL;
        if (i < len) {
                switch (s[i]) {
                case 'k':
                case 'K':
                        mul = 1ull << 10;
                        break;
                case 'm':
                case 'M':
                        mul = 1ull << 20;
                        break;
                case 'g':
                case 'G':
                        mul = 1ull << 30;
                        break;
                case 't':
                case 'T':
                        mul = 1ull << 40;
                        break;
                case 'b':
                case 'B':
                        break;
                default:
                        return -EINVAL;
                }
                if (mul == 1) {
                        i++; /* a bare "B" */
                } else {
                        i++;
                        if (i < len && s[i] == 'i')
                                i++;
                        if (i < len && (s[i] == 'B' || s[i] == 'b'))
                                i++;
                }
                if (i != len)
                        return -EINVAL;
        }
        if (v == 0)
                return -EINVAL;
        if (v > (UINT64_MAX >> 1) / mul)
                return -ERANGE;
        *ret = v * mul;
        return 0;
}

int disk_plan_make(const char *dir, const char *template_dir, uint64_t limit_bytes,
                   struct disk_plan *ret)
{
        struct disk_plan p;
        int n;

        memset(&p, 0, sizeof(p));
        if (!dir || limit_bytes < CELLA_DISK_MIN_BYTES || limit_bytes > CELLA_DISK_MAX_BYTES)
                return -EINVAL;
        n = snprintf(p.image, sizeof(p.image), "%s/disk.img", dir);
        if (n < 0 || (size_t)n >= sizeof(p.image))
                return -ENAMETOOLONG;
        n = snprintf(p.loop_note, sizeof(p.loop_note), "%s/disk.loop", dir);
        if (n < 0 || (size_t)n >= sizeof(p.loop_note))
                return -ENAMETOOLONG;
        p.size_bytes = limit_bytes & ~(uint64_t)4095;
        p.inodes = p.size_bytes / CELLA_DISK_BYTES_PER_INODE;
        if (template_dir) {
                /* v1: the mkfs options of disk_mkfs_argv(); a change of them is a new name. */
                n = snprintf(p.template, sizeof(p.template), "%s/ext4-v1-%llu.img", template_dir,
                             (unsigned long long)p.size_bytes);
                if (n < 0 || (size_t)n >= sizeof(p.template))
                        return -ENAMETOOLONG;
                n = snprintf(p.spare, sizeof(p.spare), "%s/spare-%llu.img", template_dir,
                             (unsigned long long)p.size_bytes);
                if (n < 0 || (size_t)n >= sizeof(p.spare))
                        return -ENAMETOOLONG;
        }
        *ret = p;
        return 0;
}

void disk_mkfs_argv(const struct disk_plan *plan, const char *mkfs, const char *path,
                    struct disk_mkfs_argv *ret)
{
        size_t i = 0;

        memset(ret, 0, sizeof(*ret));
        snprintf(ret->inodes, sizeof(ret->inodes), "%llu", (unsigned long long)plan->inodes);
        /* Lazy inode tables and journal: mkfs writes about a megabyte, the image stays
         * sparse. nodiscard: there is nothing to discard in a new sparse file. */
        snprintf(ret->ext_opts, sizeof(ret->ext_opts),
                 "lazy_itable_init=1,lazy_journal_init=1,nodiscard,root_owner=0:0");
        snprintf(ret->journal, sizeof(ret->journal), "size=%u", CELLA_DISK_JOURNAL_MB);
        ret->argv[i++] = (char *)mkfs;
        ret->argv[i++] = "-q";
        ret->argv[i++] = "-F";   /* a regular file, not a block device */
        ret->argv[i++] = "-b";   /* 4 KiB blocks whatever the size ("small" */
        ret->argv[i++] = "4096"; /* filesystems would get 1 KiB) */
        ret->argv[i++] = "-I";   /* 256-byte inodes: timestamps past 2038 */
        ret->argv[i++] = "256";
        ret->argv[i++] = "-m"; /* no blocks reserved for host root: the */
        ret->argv[i++] = "0";  /* sandbox gets the whole limit */
        ret->argv[i++] = "-N"; /* inode limit proportional to the size */
        ret->argv[i++] = ret->inodes;
        ret->argv[i++] = "-O";            /* no blocks reserved for online growth: a new image */
        ret->argv[i++] = "^resize_inode"; /* then holds about 200 KiB instead of 1.1 MiB */
        ret->argv[i++] = "-J";
        ret->argv[i++] = ret->journal;
        ret->argv[i++] = "-E";
        ret->argv[i++] = ret->ext_opts;
        ret->argv[i++] = "--";
        ret->argv[i++] = (char *)path;
        ret->argv[i] = NULL;
}

bool runtime_has_filesystem(const char *table, const char *fs)
{
        _cleanup_fclose_ FILE *f = fopen(table, "re");
        char line[128];
        if (!f)
                return false;
        while (fgets(line, sizeof(line), f)) {
                char *t = strrchr(line, '\t');
                t = t ? t + 1 : line;
                t[strcspn(t, "\n")] = '\0';
                if (strcmp(t, fs) == 0)
                        return true;
        }
        return false;
}

int disk_probe(const struct disk_host *host, char *mkfs, size_t mkfs_sz, char *why, size_t why_sz)
{
        static const char *const host_mkfs[] = {"/usr/sbin/mkfs.ext4", "/sbin/mkfs.ext4", NULL};
        const char *filesystems =
                host && host->filesystems ? host->filesystems : "/proc/filesystems";
        const char *loop_control =
                host && host->loop_control ? host->loop_control : "/dev/loop-control";
        const char *const *mkfs_paths = host && host->mkfs ? host->mkfs : host_mkfs;
        const char *found = NULL;

        if (!runtime_has_filesystem(filesystems, "ext4")) {
                snprintf(why, why_sz, "the kernel has no ext4");
                return -ENODEV;
        }
        _cleanup_close_ int ctl = open(loop_control, O_RDWR | O_CLOEXEC);
        if (ctl < 0) {
                int e = errno;
                snprintf(why, why_sz, "%s: %s", loop_control, strerror(e));
                return -e;
        }
        if (ioctl(ctl, LOOP_CTL_GET_FREE) < 0) {
                int e = errno;
                snprintf(why, why_sz, "no free loop device: %s", strerror(e));
                return -e;
        }
        for (size_t i = 0; mkfs_paths[i] && !found; i++)
                if (access(mkfs_paths[i], X_OK) == 0)
                        found = mkfs_paths[i];
        if (!found) {
                snprintf(why, why_sz, "no mkfs.ext4 (install e2fsprogs)");
                return -ENOENT;
        }
        snprintf(mkfs, mkfs_sz, "%s", found);
        return 0;
}

/* Run mkfs.ext4 on path; its output goes to /dev/null (-q keeps it short). */
static int run_mkfs(const struct disk_plan *plan, const char *mkfs, const char *path)
{
        struct disk_mkfs_argv a;
        posix_spawn_file_actions_t fa;
        pid_t pid;
        int status, r;

        disk_mkfs_argv(plan, mkfs, path, &a);
        if (posix_spawn_file_actions_init(&fa) != 0)
                return -ENOMEM;
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
        r = posix_spawn(&pid, mkfs, &fa, NULL, a.argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return -r;
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return -EIO;
        return 0;
}

/* A new sparse file of plan's size at path, made with mkfs. */
static int mkfs_file(const struct disk_plan *plan, const char *mkfs, const char *path)
{
        _cleanup_close_ int fd =
                open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        int r;

        if (fd < 0)
                return -errno;
        if (ftruncate(fd, (off_t)plan->size_bytes) < 0) {
                r = -errno;
                unlink(path);
                return r;
        }
        close(TAKE_FD(fd));
        r = run_mkfs(plan, mkfs, path);
        if (r < 0)
                unlink(path);
        return r;
}

/* Copy the data regions of src to dst (same size), leaving the holes holes. */
static int copy_sparse(int src, int dst, off_t size)
{
        off_t off = 0;

        if (ftruncate(dst, size) < 0)
                return -errno;
        while (off < size) {
                off_t data = lseek(src, off, SEEK_DATA);
                if (data < 0)
                        return errno == ENXIO ? 0 : -errno;
                off_t hole = lseek(src, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                loff_t in = data, out = data;
                while (in < hole) {
                        ssize_t n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return -EIO;
                }
                off = hole;
        }
        return 0;
}

/* The template of plan's size: made once (mkfs into a temporary name, then renamed, so a
 * template is always complete). */
static int ensure_template(const struct disk_plan *plan, const char *mkfs)
{
        char tmp[CELLA_PATH_MAX + 24], dir[CELLA_PATH_MAX];
        struct stat st;
        int r;

        if (lstat(plan->template, &st) == 0)
                return S_ISREG(st.st_mode) && (uint64_t)st.st_size == plan->size_bytes ? 0
                                                                                       : -EINVAL;
        if (errno != ENOENT)
                return -errno;
        snprintf(dir, sizeof(dir), "%s", plan->template);
        if (strrchr(dir, '/'))
                *strrchr(dir, '/') = '\0';
        if (mkdir(dir, 0700) < 0 && errno != EEXIST)
                return -errno;
        /* Per thread: the spares' worker may be making the same template. */
        snprintf(tmp, sizeof(tmp), "%s.tmp%d", plan->template, (int)gettid());
        unlink(tmp); /* of an earlier daemon that died in mkfs */
        r = mkfs_file(plan, mkfs, tmp);
        if (r < 0)
                return r;
        if (rename(tmp, plan->template) < 0) {
                r = -errno;
                unlink(tmp);
                return r;
        }
        return 0;
}

/* A new image at path: a sparse copy of the template of its size (made first if
 * missing), or, without a template dir, mkfs on path itself. */
static int create_image(const struct disk_plan *plan, const char *mkfs, const char *path)
{
        int r;

        if (!plan->template[0])
                return mkfs_file(plan, mkfs, path);
        r = ensure_template(plan, mkfs);
        if (r < 0)
                return r;
        _cleanup_close_ int src = open(plan->template, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (src < 0)
                return -errno;
        _cleanup_close_ int dst =
                open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (dst < 0)
                return -errno;
        /* A reflink where the host's filesystem has them (btrfs, xfs), else a copy. */
        if (ioctl(dst, FICLONE, src) == 0)
                return 0;
        r = copy_sparse(src, dst, (off_t)plan->size_bytes);
        if (r < 0)
                unlink(path);
        return r;
}

/* The loop device whose number is in the note, if it is still bound to the image
 * (dev/ino of the open image fd): an open fd of it, else -ENOENT. */
static int find_bound_loop(const char *loop_note, const struct stat *img, bool read_only, char *dev,
                           size_t dev_sz)
{
        char buf[32];
        struct loop_info64 info;
        _cleanup_close_ int note = open(loop_note, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n;
        char *end;
        long num;

        if (note < 0)
                return -ENOENT;
        n = read(note, buf, sizeof(buf) - 1);
        if (n <= 0)
                return -ENOENT;
        buf[n] = '\0';
        errno = 0;
        num = strtol(buf, &end, 10);
        if (errno || end == buf || num < 0 || num > (1 << 20))
                return -ENOENT;
        snprintf(dev, dev_sz, "/dev/loop%ld", num);
        _cleanup_close_ int fd = open(dev, (read_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);
        if (fd < 0 || ioctl(fd, LOOP_GET_STATUS64, &info) < 0)
                return -ENOENT;
        /* lo_device is the kernel's new_encode_dev() of the backing file's device. */
        unsigned maj = (unsigned)((info.lo_device & 0xfff00) >> 8);
        unsigned min = (unsigned)((info.lo_device & 0xff) | ((info.lo_device >> 12) & 0xfff00));
        if (info.lo_inode != img->st_ino || maj != major(img->st_dev) || min != minor(img->st_dev))
                return -ENOENT;
        if (!!(info.lo_flags & LO_FLAGS_READ_ONLY) != read_only)
                return -ENOENT;
        return TAKE_FD(fd);
}

/* Write the loop device number to the note next to an image. */
static void write_note(const char *path, int num)
{
        char buf[32];
        int n = snprintf(buf, sizeof(buf), "%d\n", num);
        _cleanup_close_ int note =
                open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (note >= 0) {
                ssize_t _unused_ w = write(note, buf, (size_t)n);
        }
}

/* Bind a free loop device to img_fd (autoclear, read-only if asked); its fd, and its number
 * in *ret_num. */
static int attach_loop(int img_fd, bool read_only, char *dev, size_t dev_sz, int *ret_num)
{
        _cleanup_close_ int ctl = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        int r = -EBUSY;

        if (ctl < 0)
                return -errno;
        for (int i = 0; i < LOOP_ATTACH_TRIES; i++) {
                struct loop_config cfg;
                int num = ioctl(ctl, LOOP_CTL_GET_FREE);
                if (num < 0)
                        return -errno;
                snprintf(dev, dev_sz, "/dev/loop%d", num);
                _cleanup_close_ int fd = open(dev, O_RDWR | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                memset(&cfg, 0, sizeof(cfg));
                cfg.fd = (uint32_t)img_fd;
                cfg.block_size = 4096;
                /* Autoclear: the device is released with the filesystem's last user. */
                cfg.info.lo_flags = LO_FLAGS_AUTOCLEAR | (read_only ? LO_FLAGS_READ_ONLY : 0);
                if (ioctl(fd, LOOP_CONFIGURE, &cfg) < 0) {
                        r = -errno;
                        if (r == -EBUSY)
                                continue; /* taken meanwhile */
                        return r;
                }
                *ret_num = num;
                return TAKE_FD(fd);
        }
        return r;
}

/* An ext4 mount of dev (a detached fsmount fd) or -errno. Read-write: deleted files give
 * their blocks back to the host (the loop device punches holes in the image), inode
 * tables stay unwritten (and the image sparse), an error remounts it read-only.
 * Read-only (ro): a read-only superblock on a read-only device; the image was written
 * out with an empty journal, and norecovery makes sure no journal is ever replayed into
 * it. */
static int mount_ext4(const char *dev, bool ro)
{
        _cleanup_close_ int fs = fsopen("ext4", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        bool failed = fsconfig(fs, FSCONFIG_SET_STRING, "source", dev, 0) < 0;
        if (ro)
                failed = failed || fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 ||
                         fsconfig(fs, FSCONFIG_SET_FLAG, "norecovery", NULL, 0) < 0;
        else
                failed = failed || fsconfig(fs, FSCONFIG_SET_FLAG, "discard", NULL, 0) < 0 ||
                         fsconfig(fs, FSCONFIG_SET_FLAG, "noinit_itable", NULL, 0) < 0 ||
                         fsconfig(fs, FSCONFIG_SET_STRING, "errors", "remount-ro", 0) < 0;
        if (failed || fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        int m = fsmount(fs, FSMOUNT_CLOEXEC,
                        (ro ? MOUNT_ATTR_RDONLY : 0) | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        return m < 0 ? -errno : m;
}

int disk_open(const struct disk_plan *plan, const char *mkfs, int *ret_mount_fd, bool *ret_created,
              const char **what)
{
        char dev[64];
        struct stat st;
        bool created = false;
        int r;

        *what = "disk image";
        if (lstat(plan->image, &st) < 0) {
                if (errno != ENOENT)
                        return -errno;
                if (!mkfs)
                        return -ENOENT;
                *what = "make disk image";
                r = create_image(plan, mkfs, plan->image);
                if (r < 0)
                        return r;
                created = true;
        } else if (!S_ISREG(st.st_mode)) {
                return -EINVAL;
        }
        *what = "disk image";
        _cleanup_close_ int img = open(plan->image, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (img < 0 || fstat(img, &st) < 0)
                return -errno;
        *what = "attach disk image to a loop device";
        _cleanup_close_ int loop = find_bound_loop(plan->loop_note, &st, false, dev, sizeof(dev));
        if (loop < 0) {
                int num;
                loop = attach_loop(img, false, dev, sizeof(dev), &num);
                if (loop < 0)
                        return loop;
                /* Remember the device, so that the next start finds it if the previous
                 * mount of this image is still alive. */
                write_note(plan->loop_note, num);
        }
        *what = "mount disk image";
        r = mount_ext4(dev, false);
        if (r < 0)
                return r;
        /* From here the filesystem holds the loop device, which holds the image: closing
         * loop and img leaves both to the mount. */
        *ret_mount_fd = r;
        *ret_created = created;
        return 0;
}

/* One spare slot. size_bytes 0: free. wanted: the worker should make one; filling: the
 * worker is making it (outside the lock; the slot is not reassigned meanwhile). */
struct spare {
        uint64_t size_bytes;
        bool wanted;
        bool filling;
        int mount_fd; /* ready when >= 0 */
        int loop_num;
        char path[CELLA_PATH_MAX];
};

struct disk_spares {
        pthread_mutex_t lock;
        pthread_cond_t wake;
        pthread_t worker;
        bool stop;
        unsigned next; /* round robin when every slot has another size */
        char template_dir[CELLA_PATH_MAX];
        char mkfs[64];
        struct spare slots[CELLA_DISK_SPARES];
};

static void spare_drop(struct spare *s)
{
        /* Unlinked while mounted: the loop device keeps the file until the mount goes. */
        if (s->mount_fd >= 0) {
                unlink(s->path);
                close(s->mount_fd);
        }
        s->mount_fd = -EBADF;
        s->loop_num = -1;
}

/* Make a ready disk of plan's size at plan->spare: copy, attach, mount. */
static int spare_make(const struct disk_plan *plan, const char *mkfs, int *ret_mount_fd,
                      int *ret_loop_num)
{
        char dev[64];
        int r;

        unlink(plan->spare);
        r = create_image(plan, mkfs, plan->spare);
        if (r < 0)
                return r;
        _cleanup_close_ int img = open(plan->spare, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
        if (img < 0) {
                r = -errno;
                unlink(plan->spare);
                return r;
        }
        _cleanup_close_ int loop = attach_loop(img, false, dev, sizeof(dev), ret_loop_num);
        r = loop < 0 ? loop : mount_ext4(dev, false);
        if (r < 0) {
                unlink(plan->spare);
                return r;
        }
        *ret_mount_fd = r;
        return 0;
}

static void *spares_worker(void *arg)
{
        struct disk_spares *sp = arg;
        struct sched_param idle = {.sched_priority = 0};

        /* Spares are made with CPU nobody else wants: never in competition with the start
         * that took the last one (or anything else). If the CPUs stay busy, starts make
         * their own disks, as without spares. */
        pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);

        pthread_mutex_lock(&sp->lock);
        for (;;) {
                struct spare *s = NULL;
                for (size_t i = 0; i < ARRAY_SIZE(sp->slots) && !s; i++)
                        if (sp->slots[i].size_bytes && sp->slots[i].wanted &&
                            sp->slots[i].mount_fd < 0)
                                s = &sp->slots[i];
                if (sp->stop)
                        break;
                if (!s) {
                        pthread_cond_wait(&sp->wake, &sp->lock);
                        continue;
                }
                struct disk_plan plan;
                int fd = -EBADF, num = -1, r;
                s->filling = true;
                s->wanted = false;
                r = disk_plan_make(sp->template_dir, sp->template_dir, s->size_bytes, &plan);
                pthread_mutex_unlock(&sp->lock);
                if (r >= 0)
                        r = spare_make(&plan, sp->mkfs, &fd, &num);
                pthread_mutex_lock(&sp->lock);
                s->filling = false;
                if (r >= 0) {
                        s->mount_fd = fd;
                        s->loop_num = num;
                        snprintf(s->path, sizeof(s->path), "%s", plan.spare);
                }
                /* On failure the slot stays empty and unwanted: the next take asks again. */
        }
        pthread_mutex_unlock(&sp->lock);
        return NULL;
}

int disk_spares_new(const char *template_dir, const char *mkfs, struct disk_spares **ret)
{
        struct disk_spares *sp = calloc(1, sizeof(*sp));
        int r;

        if (!sp)
                return -ENOMEM;
        snprintf(sp->template_dir, sizeof(sp->template_dir), "%s", template_dir);
        snprintf(sp->mkfs, sizeof(sp->mkfs), "%s", mkfs);
        for (size_t i = 0; i < ARRAY_SIZE(sp->slots); i++) {
                sp->slots[i].mount_fd = -EBADF;
                sp->slots[i].loop_num = -1;
        }
        {
                _cleanup_closedir_ DIR *d = opendir(template_dir);
                struct dirent *e;
                while (d && (e = readdir(d)))
                        if (strncmp(e->d_name, "spare-", 6) == 0 || strstr(e->d_name, ".tmp"))
                                unlinkat(dirfd(d), e->d_name, 0);
        }
        pthread_mutex_init(&sp->lock, NULL);
        pthread_cond_init(&sp->wake, NULL);
        /* The worker blocks every signal: they are the daemon's main thread's. */
        sigset_t all, old;
        sigfillset(&all);
        pthread_sigmask(SIG_SETMASK, &all, &old);
        r = -pthread_create(&sp->worker, NULL, spares_worker, sp);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
        if (r < 0) {
                pthread_cond_destroy(&sp->wake);
                pthread_mutex_destroy(&sp->lock);
                free(sp);
                return r;
        }
        *ret = sp;
        return 0;
}

void disk_spares_free(struct disk_spares *sp)
{
        if (!sp)
                return;
        pthread_mutex_lock(&sp->lock);
        sp->stop = true;
        pthread_cond_signal(&sp->wake);
        pthread_mutex_unlock(&sp->lock);
        pthread_join(sp->worker, NULL);
        for (size_t i = 0; i < ARRAY_SIZE(sp->slots); i++)
                spare_drop(&sp->slots[i]);
        pthread_cond_destroy(&sp->wake);
        pthread_mutex_destroy(&sp->lock);
        free(sp);
}

int disk_spares_take(struct disk_spares *sp, const struct disk_plan *plan, int *ret_mount_fd)
{
        struct spare *s = NULL;
        int r = -ENOENT;

        pthread_mutex_lock(&sp->lock);
        for (size_t i = 0; i < ARRAY_SIZE(sp->slots) && !s; i++)
                if (sp->slots[i].size_bytes == plan->size_bytes)
                        s = &sp->slots[i];
        if (!s) /* a slot for this size: a free one, else one in turn that is not filling */
                for (size_t i = 0; i < ARRAY_SIZE(sp->slots) && !s; i++)
                        if (sp->slots[i].size_bytes == 0)
                                s = &sp->slots[i];
        for (size_t i = 0; i < ARRAY_SIZE(sp->slots) && !s; i++) {
                struct spare *c = &sp->slots[sp->next++ % ARRAY_SIZE(sp->slots)];
                if (!c->filling) {
                        spare_drop(c);
                        s = c;
                }
        }
        if (s && s->mount_fd >= 0 && s->size_bytes == plan->size_bytes) {
                if (renameat2(AT_FDCWD, s->path, AT_FDCWD, plan->image, RENAME_NOREPLACE) == 0) {
                        write_note(plan->loop_note, s->loop_num);
                        *ret_mount_fd = s->mount_fd;
                        s->mount_fd = -EBADF;
                        s->loop_num = -1;
                        r = 0;
                } else {
                        r = -errno;
                        spare_drop(s);
                }
        }
        if (s) {
                s->size_bytes = plan->size_bytes;
                s->wanted = true;
                pthread_cond_signal(&sp->wake);
        }
        pthread_mutex_unlock(&sp->lock);
        return r;
}

bool disk_exists(const char *dir)
{
        char path[CELLA_PATH_MAX];
        struct stat st;
        int n = snprintf(path, sizeof(path), "%s/disk.img", dir);
        return n > 0 && (size_t)n < sizeof(path) && lstat(path, &st) == 0;
}

int disk_usage(const char *dir, uint64_t *ret_limit, uint64_t *ret_used)
{
        char path[CELLA_PATH_MAX];
        struct stat st;
        int n = snprintf(path, sizeof(path), "%s/disk.img", dir);

        if (n < 0 || (size_t)n >= sizeof(path))
                return -ENAMETOOLONG;
        if (lstat(path, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        *ret_limit = (uint64_t)st.st_size;
        *ret_used = (uint64_t)st.st_blocks * 512;
        return 0;
}

int disk_reflink_probe(const char *dir, char *why, size_t why_sz)
{
        static const char block[4096] = "cella reflink probe";
        /* Unnamed files: nothing is left in dir, whatever happens. */
        _cleanup_close_ int src = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (src < 0) {
                int e = errno;
                snprintf(why, why_sz, "%s: %s", dir, strerror(e));
                return -e;
        }
        _cleanup_close_ int dst = open(dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
        if (dst < 0) {
                int e = errno;
                snprintf(why, why_sz, "%s: %s", dir, strerror(e));
                return -e;
        }
        if (write(src, block, sizeof(block)) != (ssize_t)sizeof(block) || fsync(src) < 0) {
                int e = errno ? errno : EIO;
                snprintf(why, why_sz, "write a probe file in %s: %s", dir, strerror(e));
                return -e;
        }
        if (ioctl(dst, FICLONE, src) < 0) {
                int e = errno;
                snprintf(why, why_sz, "%s has no reflinks (FICLONE: %s)", dir, strerror(e));
                return -e;
        }
        return 0;
}

int disk_clone(int src_fd, int dst_dir_fd, uint64_t *ret_allocated)
{
        struct stat st;
        int r;

        _cleanup_close_ int dst = openat(
                dst_dir_fd, "disk.img", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (dst < 0)
                return -errno;
        if (ioctl(dst, FICLONE, src_fd) < 0 || fsync(dst) < 0 || fstat(dst, &st) < 0) {
                r = -errno;
                unlinkat(dst_dir_fd, "disk.img", 0);
                return r;
        }
        *ret_allocated = (uint64_t)st.st_blocks * 512;
        return 0;
}

int disk_open_ro(const char *dir, int *ret_mount_fd)
{
        char image[CELLA_PATH_MAX], note[CELLA_PATH_MAX], dev[64];
        struct stat st;
        int m = -ENOENT;

        if (snprintf(image, sizeof(image), "%s/disk.img", dir) >= (int)sizeof(image) ||
            snprintf(note, sizeof(note), "%s/disk.loop", dir) >= (int)sizeof(note))
                return -ENAMETOOLONG;
        _cleanup_close_ int img = open(image, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (img < 0 || fstat(img, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        /* The device a sandbox still mounts (one superblock per snapshot)... */
        _cleanup_close_ int loop = find_bound_loop(note, &st, true, dev, sizeof(dev));
        if (loop >= 0)
                m = mount_ext4(dev, true);
        /* ...or, when there is none (or it is being released with its last mount), a new
         * one. */
        if (m < 0) {
                int num;
                if (loop >= 0)
                        close(TAKE_FD(loop));
                loop = attach_loop(img, true, dev, sizeof(dev), &num);
                if (loop < 0)
                        return loop;
                write_note(note, num);
                m = mount_ext4(dev, true);
                if (m < 0)
                        return m;
        }
        *ret_mount_fd = m;
        return 0;
}
