/* Capture of a writable layer as a read-only one (layer.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/macros.h"
#include "runtime/layer.h"

#define OVERFLOW_ID 65534u

uint32_t layer_shift_id(uint32_t id, uint32_t from, uint32_t count)
{
        if (id >= from && (uint64_t)id < (uint64_t)from + count)
                return id - from;
        return OVERFLOW_ID;
}

/* Every xattr of src onto dst (both opened, not O_PATH for regular files and dirs; for
 * symlinks, by /proc/self/fd path with the l* calls). */
static int copy_xattrs(int src, int dst, bool is_link)
{
        char path_s[64], path_d[64];
        char names[CELLA_LAYER_XATTR_LIST_MAX];
        char value[CELLA_LAYER_XATTR_VALUE_MAX];
        ssize_t n;

        snprintf(path_s, sizeof(path_s), "/proc/self/fd/%d", src);
        snprintf(path_d, sizeof(path_d), "/proc/self/fd/%d", dst);
        n = is_link ? llistxattr(path_s, names, sizeof(names))
                    : flistxattr(src, names, sizeof(names));
        if (n < 0)
                return errno == ENOTSUP ? 0 : -errno;
        for (ssize_t i = 0; i < n; i += (ssize_t)strlen(names + i) + 1) {
                const char *k = names + i;
                ssize_t v = is_link ? lgetxattr(path_s, k, value, sizeof(value))
                                    : fgetxattr(src, k, value, sizeof(value));
                if (v < 0)
                        return -errno;
                int r = is_link ? lsetxattr(path_d, k, value, (size_t)v, 0)
                                : fsetxattr(dst, k, value, (size_t)v, 0);
                /* A symlink takes no user.* xattrs on most filesystems: nothing to keep. */
                if (r < 0 && !(is_link && errno == EPERM))
                        return -errno;
        }
        return 0;
}

/* The data of a regular file: a clone where extents can be shared, else a copy that keeps
 * holes (SEEK_DATA/SEEK_HOLE, copy_file_range). */
static int copy_data(int src, int dst, off_t size, struct layer_copy_stats *st)
{
        bool cfr_fails = false, *no_cfr = &cfr_fails;

        if (ioctl(dst, FICLONE, src) == 0) {
                st->cloned++;
                return 0;
        }
        st->copied++;
        off_t pos = 0;
        while (pos < size) {
                off_t data = lseek(src, pos, SEEK_DATA);
                if (data < 0) {
                        if (errno == ENXIO)
                                break;
                        return -errno;
                }
                off_t hole = lseek(src, data, SEEK_HOLE);
                if (hole < 0)
                        return -errno;
                off_t in = data, out = data;
                while (in < hole) {
                        ssize_t n = -1;
                        /* copy_file_range across filesystems (the sandbox's disk to the
                         * data dir) is EXDEV on most: then sendfile, at the same offset. */
                        if (!*no_cfr) {
                                n = copy_file_range(src, &in, dst, &out, (size_t)(hole - in), 0);
                                if (n < 0 && (errno == EXDEV || errno == EOPNOTSUPP ||
                                              errno == ENOSYS || errno == EINVAL)) {
                                        *no_cfr = true;
                                        continue;
                                }
                        } else {
                                if (lseek(dst, in, SEEK_SET) < 0)
                                        return -errno;
                                n = sendfile(dst, src, &in, (size_t)(hole - in));
                        }
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                return -EIO; /* the file shrank under us */
                        out = in;
                }
                pos = hole;
        }
        return ftruncate(dst, size) < 0 ? -errno : 0;
}

static int set_meta(int fd, const struct stat *s, uint32_t from, uint32_t count, bool is_link)
{
        uid_t uid = layer_shift_id((uint32_t)s->st_uid, from, count);
        gid_t gid = layer_shift_id((uint32_t)s->st_gid, from, count);
        struct timespec ts[2] = {s->st_atim, s->st_mtim};

        if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!is_link) {
                char p[64];
                snprintf(p, sizeof(p), "/proc/self/fd/%d", fd);
                /* After the chown: it clears setuid/setgid bits. */
                if (chmod(p, s->st_mode & 07777) < 0)
                        return -errno;
        }
        return utimensat(fd, "", ts, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0 ? -errno : 0;
}

/* Where a walk is: the level below the root (0: its entries) and, for a copy, the
 * directory the entries go to, the id shift and the counts. */
struct walk {
        unsigned depth;
        int dst;
        uint32_t from, count;
        struct layer_copy_stats *st;
};

typedef int (*walk_fn)(int dir, const char *name, const struct walk *w);

/* fn(dir, name, w) for every entry of the directory open at dir but "." and "..", in
 * readdir's order (fn may remove the entry it is given), up to the first failure. The
 * stream reads a duplicate of dir, which stays open. 0, or fn's or readdir's -errno. */
static int walk_dir(int dir, walk_fn fn, const struct walk *w)
{
        int dup_fd = fcntl(dir, F_DUPFD_CLOEXEC, 3);
        if (dup_fd < 0)
                return -errno;
        _cleanup_closedir_ DIR *d = fdopendir(dup_fd);
        if (!d) {
                int e = errno;
                close(dup_fd);
                return -e;
        }
        struct dirent *e;
        while ((errno = 0, e = readdir(d))) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                        continue;
                int r = fn(dir, e->d_name, w);
                if (r < 0)
                        return r;
        }
        return errno ? -errno : 0;
}

static int copy_dir(int sfd, const struct stat *s, int ddir, const char *name, struct walk w);

/* Copy the entry name of sdir into w->dst (a directory with all below it). */
static int copy_entry(int sdir, const char *name, const struct walk *w)
{
        uint32_t from = w->from, count = w->count;
        int ddir = w->dst;
        struct layer_copy_stats *st = w->st;
        struct stat s;
        int r;

        if (fstatat(sdir, name, &s, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        st->files++;
        if (S_ISDIR(s.st_mode)) {
                if (w->depth >= CELLA_LAYER_MAX_DEPTH)
                        return -ELOOP;
                _cleanup_close_ int sfd =
                        openat(sdir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                        return -errno;
                struct walk below = *w;
                below.depth++;
                return copy_dir(sfd, &s, ddir, name, below);
        }
        if (S_ISREG(s.st_mode)) {
                _cleanup_close_ int sfd = openat(sdir, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                        return -errno;
                _cleanup_close_ int dfd = openat(
                        ddir, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (dfd < 0)
                        return -errno;
                st->bytes += (uint64_t)s.st_size;
                r = copy_data(sfd, dfd, s.st_size, st);
                if (r >= 0)
                        r = copy_xattrs(sfd, dfd, false);
                return r < 0 ? r : set_meta(dfd, &s, from, count, false);
        }
        if (S_ISLNK(s.st_mode)) {
                char target[PATH_MAX];
                ssize_t n = readlinkat(sdir, name, target, sizeof(target) - 1);
                if (n < 0)
                        return -errno;
                target[n] = '\0';
                if (symlinkat(target, ddir, name) < 0)
                        return -errno;
        } else if (S_ISCHR(s.st_mode) || S_ISFIFO(s.st_mode) || S_ISBLK(s.st_mode) ||
                   S_ISSOCK(s.st_mode)) {
                /* Whiteouts are 0/0 character devices; a sandbox can make no other device
                 * (its user namespace cannot), but copy what is there as it is. */
                if (mknodat(ddir, name, s.st_mode & (S_IFMT | 0777), s.st_rdev) < 0)
                        return -errno;
        } else {
                return -EINVAL;
        }
        bool link = S_ISLNK(s.st_mode);
        _cleanup_close_ int sfd = openat(sdir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        _cleanup_close_ int dfd = openat(ddir, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (sfd < 0 || dfd < 0)
                return -errno;
        /* xattrs of special files by /proc path; symlinks by the l* calls. */
        r = copy_xattrs(sfd, dfd, true);
        if (r < 0)
                return r;
        if (fchownat(dfd, "", layer_shift_id((uint32_t)s.st_uid, from, count),
                     layer_shift_id((uint32_t)s.st_gid, from, count),
                     AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!link) {
                char p[64];
                snprintf(p, sizeof(p), "/proc/self/fd/%d", (int)dfd);
                if (chmod(p, s.st_mode & 07777) < 0)
                        return -errno;
        }
        return 0;
}

/* Make directory name in ddir and fill it from the directory open at sfd (s: its stat):
 * the entries (w: their depth, the id shift and the counts), then the xattrs and the
 * metadata, which the entries' creation would change. */
static int copy_dir(int sfd, const struct stat *s, int ddir, const char *name, struct walk w)
{
        if (mkdirat(ddir, name, 0700) < 0)
                return -errno;
        _cleanup_close_ int dfd =
                openat(ddir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return -errno;
        w.dst = dfd;
        int r = walk_dir(sfd, copy_entry, &w);
        if (r >= 0)
                r = copy_xattrs(sfd, dfd, false);
        return r < 0 ? r : set_meta(dfd, s, w.from, w.count, false);
}

int layer_copy(int src_fd, int dst_parent_fd, const char *name, uint32_t from, uint32_t count,
               struct layer_copy_stats *stats)
{
        struct layer_copy_stats local = {0};
        struct stat s;

        if (!stats)
                stats = &local;
        memset(stats, 0, sizeof(*stats));
        if (fstat(src_fd, &s) < 0)
                return -errno;
        if (!S_ISDIR(s.st_mode))
                return -ENOTDIR;
        return copy_dir(src_fd, &s, dst_parent_fd, name,
                        (struct walk){.from = from, .count = count, .st = stats});
}

/* Remove the entry name of dir, a directory with all below it. */
static int remove_entry(int dir, const char *name, const struct walk *w)
{
        if (unlinkat(dir, name, 0) == 0 || errno == ENOENT)
                return 0;
        if (errno != EISDIR || w->depth >= CELLA_LAYER_MAX_DEPTH + 1)
                return -errno;
        _cleanup_close_ int sub =
                openat(dir, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
                return -errno;
        int r = walk_dir(sub, remove_entry, &(struct walk){.depth = w->depth + 1});
        if (r < 0)
                return r;
        return unlinkat(dir, name, AT_REMOVEDIR) < 0 ? -errno : 0;
}

int layer_remove(int dir_fd, const char *name)
{
        _cleanup_close_ int fd =
                openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return errno == ENOENT ? 0 : -errno;
        int r = walk_dir(fd, remove_entry, &(struct walk){.depth = 0});
        if (r < 0)
                return r;
        return unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && errno != ENOENT ? -errno : 0;
}
