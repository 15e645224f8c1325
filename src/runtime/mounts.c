/* Mount plan of the new root (see mounts.h). */
#include "runtime/mounts.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"

#define NSN (MS_NOSUID | MS_NODEV | MS_NOEXEC)

static int push(struct mount_plan *p, struct mount_step s)
{
        if (p->n >= MOUNTS_MAX)
                return -E2BIG;
        p->steps[p->n++] = s;
        return 0;
}

#define PUSH(...)                                                   \
        do {                                                        \
                int _r = push(p, (struct mount_step){__VA_ARGS__}); \
                if (_r < 0)                                         \
                        return _r;                                  \
        } while (0)

static const char *const dev_nodes[][2] = {
        {"/dev/null", "dev/null"},     {"/dev/zero", "dev/zero"},       {"/dev/full", "dev/full"},
        {"/dev/random", "dev/random"}, {"/dev/urandom", "dev/urandom"}, {"/dev/tty", "dev/tty"},
};

static const char *const masked_files[] = {"proc/kcore", "proc/keys", "proc/timer_list",
                                           "proc/sched_debug"};
static const char *const ro_paths[] = {"proc/sys", "proc/sysrq-trigger", "proc/irq", "proc/bus"};

/* The /dev tmpfs holds /dev/shm as a plain directory (one superblock, no mount of its
 * own): its size is the 64 MiB /dev and the 64 MiB /dev/shm each had alone
 * (docs/decisions/0050, "Fewer superblocks"). */
#define DEV_TMPFS_DATA "mode=755,size=131072k"
/* The mask's source: a directory of the /dev tmpfs, gone once bound. */
#define EMPTY_DIR_SOURCE "dev/.cella-empty"

int mounts_plan(struct mount_plan *p)
{
        memset(p, 0, sizeof(*p));

        /* proc first: the kernel allows a fresh proc only while a fully visible one is in
         * the namespace, i.e. before the old root is detached. */
        PUSH(.kind = MOUNT_FS, .source = "proc", .target = "proc", .fstype = "proc", .flags = NSN);
        PUSH(.kind = MOUNT_FS, .source = "tmpfs", .target = "dev", .fstype = "tmpfs",
             .flags = MS_NOSUID | MS_NOEXEC, .data = DEV_TMPFS_DATA);
        for (size_t i = 0; i < ARRAY_SIZE(dev_nodes); i++) {
                PUSH(.kind = MOUNT_FILE, .target = dev_nodes[i][1], .mode = 0666);
                PUSH(.kind = MOUNT_BIND, .source = dev_nodes[i][0], .target = dev_nodes[i][1],
                     .flags = MS_BIND);
        }
        PUSH(.kind = MOUNT_MKDIR, .target = "dev/pts", .mode = 0755);
        PUSH(.kind = MOUNT_FS, .source = "devpts", .target = "dev/pts", .fstype = "devpts",
             .flags = MS_NOSUID | MS_NOEXEC, .data = "newinstance,ptmxmode=0666,mode=0620,gid=5");
        PUSH(.kind = MOUNT_SYMLINK, .source = "pts/ptmx", .target = "dev/ptmx");
        PUSH(.kind = MOUNT_SYMLINK, .source = "/proc/self/fd", .target = "dev/fd");
        PUSH(.kind = MOUNT_SYMLINK, .source = "/proc/self/fd/0", .target = "dev/stdin");
        PUSH(.kind = MOUNT_SYMLINK, .source = "/proc/self/fd/1", .target = "dev/stdout");
        PUSH(.kind = MOUNT_SYMLINK, .source = "/proc/self/fd/2", .target = "dev/stderr");
        PUSH(.kind = MOUNT_MKDIR, .target = "dev/shm", .mode = 01777);
        /* /tmp is a directory of the sandbox's own files (its writable layer, on its disk),
         * as in a container of Docker's: no tmpfs of its own. One the upper layer turned
         * into a symlink or a file is a directory again. */
        PUSH(.kind = MOUNT_DIR, .target = "tmp", .mode = 01777);
        /* /run as on any Linux system: empty at each start. The agent keeps its session
         * scripts there (/run/cella), so a tenant that replaced /run cannot stop the next
         * start's sessions (decision 0032). */
        PUSH(.kind = MOUNT_FS, .source = "tmpfs", .target = "run", .fstype = "tmpfs",
             .flags = MS_NOSUID | MS_NODEV, .data = "mode=755,size=65536k");
        PUSH(.kind = MOUNT_FS, .source = "sysfs", .target = "sys", .fstype = "sysfs",
             .flags = NSN | MS_RDONLY, .optional = true);
        PUSH(.kind = MOUNT_FS, .source = "cgroup2", .target = "sys/fs/cgroup", .fstype = "cgroup2",
             .flags = NSN, .optional = true);
        /* Virtual block devices are the host's: a loop device's backing_file names a
         * sandbox's disk image in the daemon's data directory (every sandbox's, not only
         * this one's). An empty directory hides them: made in the /dev tmpfs, bound
         * read-only here and removed, so that no path reaches it and nothing can be
         * created in it (a removed directory takes no entries, and the bind is
         * read-only); no tmpfs of its own. */
        PUSH(.kind = MOUNT_EMPTY_RO, .source = EMPTY_DIR_SOURCE,
             .target = "sys/devices/virtual/block", .flags = NSN | MS_RDONLY, .mode = 0555,
             .optional = true);
        for (size_t i = 0; i < ARRAY_SIZE(masked_files); i++)
                PUSH(.kind = MOUNT_BIND, .source = "dev/null", .target = masked_files[i],
                     .flags = MS_BIND, .optional = true);
        for (size_t i = 0; i < ARRAY_SIZE(ro_paths); i++)
                PUSH(.kind = MOUNT_RO_BIND, .target = ro_paths[i], .flags = NSN, .optional = true);
        /* The agent's own directory on /run (sandbox root's, 0700): the mount point of its
         * executable (a read-only bind of the host's cella-init, attached by the child) and
         * its listening socket (bound by the child after pivot_root). Both are in the
         * sandbox's own mounts, where a checkpoint (CRIU) finds and restores them
         * (docs/decisions/0050). */
        PUSH(.kind = MOUNT_MKDIR, .target = MOUNTS_AGENT_DIR, .mode = 0700);
        PUSH(.kind = MOUNT_FILE, .target = MOUNTS_AGENT_EXE, .mode = 0555);
        return 0;
}

/* MOUNT_EMPTY_RO: -ENOENT when the target is absent (the only failure an optional step
 * skips); on any other failure nothing of the step is left (no bind, no source). */
static int apply_empty_ro(const struct mount_step *s)
{
        struct stat st;
        if (lstat(s->target, &st) < 0)
                return errno == ENOENT ? -ENOENT : -errno;
        if (mkdir(s->source, s->mode) < 0)
                return -errno;
        int r = 0;
        if (chmod(s->source, s->mode) < 0 || mount(s->source, s->target, NULL, MS_BIND, NULL) < 0) {
                r = -errno;
                rmdir(s->source);
                return r == -ENOENT ? -EIO : r;
        }
        /* The remount keeps the flags the kernel locked on the original. */
        if (mount(NULL, s->target, NULL, MS_BIND | MS_REMOUNT | s->flags, NULL) < 0 ||
            rmdir(s->source) < 0) {
                r = -errno;
                umount2(s->target, MNT_DETACH);
                rmdir(s->source);
                return r == -ENOENT ? -EIO : r;
        }
        return 0;
}

static int apply_one(const struct mount_step *s)
{
        switch (s->kind) {
        case MOUNT_FS: {
                /* The overlay's top-level directories come from the sandbox's upper layer,
                 * which may hold a symlink planted by an earlier run; mount() would follow
                 * it (to the host's root: the old root is still ours). Replace it, and
                 * anything else that is not a directory (a file, a fifo): what the tenant
                 * left there is hidden by the mount anyway, and the sandbox must start. */
                struct stat st;
                if (lstat(s->target, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        if (unlink(s->target) < 0 && errno != ENOENT)
                                return -errno;
                        if (mkdir(s->target, 0755) < 0)
                                return -errno;
                }
                if (mount(s->source, s->target, s->fstype, s->flags, s->data) < 0)
                        return -errno;
                return 0;
        }
        case MOUNT_BIND:
                if (mount(s->source, s->target, NULL, s->flags | MS_BIND, NULL) < 0)
                        return -errno;
                return 0;
        case MOUNT_RO_BIND:
                if (mount(s->target, s->target, NULL, MS_BIND | MS_REC, NULL) < 0)
                        return -errno;
                /* The remount keeps the flags the kernel locked on the original. */
                if (mount(NULL, s->target, NULL, MS_BIND | MS_REMOUNT | MS_RDONLY | s->flags,
                          NULL) < 0)
                        return -errno;
                return 0;
        case MOUNT_MKDIR:
                if (mkdir(s->target, s->mode) < 0 && errno != EEXIST)
                        return -errno;
                /* mkdir is subject to the umask; set the exact mode. */
                if (chmod(s->target, s->mode) < 0)
                        return -errno;
                return 0;
        case MOUNT_FILE: {
                int fd = open(s->target, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, s->mode);
                if (fd < 0)
                        return -errno;
                close(fd);
                return 0;
        }
        case MOUNT_SYMLINK:
                if (symlink(s->source, s->target) < 0 && errno != EEXIST)
                        return -errno;
                return 0;
        case MOUNT_DIR: {
                /* As for a mount point above: what is not a directory (a symlink planted by
                 * an earlier run, a file) is replaced; a directory stays as the tenant
                 * left it (its mode, its files). */
                struct stat st;
                if (lstat(s->target, &st) == 0 && S_ISDIR(st.st_mode))
                        return 0;
                if (unlink(s->target) < 0 && errno != ENOENT)
                        return -errno;
                if (mkdir(s->target, s->mode) < 0)
                        return -errno;
                if (chmod(s->target, s->mode) < 0)
                        return -errno;
                return 0;
        }
        case MOUNT_EMPTY_RO:
                return apply_empty_ro(s);
        }
        return -EINVAL;
}

int mounts_apply(const struct mount_plan *plan, size_t *ret_step)
{
        bool skip_children_of_sys = false;
        for (size_t i = 0; i < plan->n; i++) {
                const struct mount_step *s = &plan->steps[i];
                if (skip_children_of_sys && strncmp(s->target, "sys/", 4) == 0)
                        continue;
                int r = apply_one(s);
                if (r < 0 && s->optional && (s->kind != MOUNT_EMPTY_RO || r == -ENOENT)) {
                        if (strcmp(s->target, "sys") == 0)
                                skip_children_of_sys = true;
                        continue;
                }
                if (r < 0) {
                        *ret_step = i;
                        return r;
                }
        }
        return 0;
}
