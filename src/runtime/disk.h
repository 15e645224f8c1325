/* A sandbox's disk: a sparse ext4 image per sandbox, <dir>/disk.img, whose size is the
 * sandbox's disk limit (see docs/runtime.md, "Disk limits", and
 * docs/decisions/0014-disk-limits.md).
 *
 * The overlay's upper and work directories live inside the image, so everything the
 * sandbox writes (its root filesystem changes, /workspace) is bounded by the image's size
 * and inode count: the kernel answers ENOSPC, nothing polls. The image is attached to a
 * loop device (autoclear) and mounted by cellad as a detached mount (fsmount) that only
 * the sandbox's mount namespace ever holds: when the sandbox's last process is gone the
 * filesystem is unmounted and the loop device released by the kernel, so nothing is left
 * on the host, and a restarted cellad has nothing to remount.
 *
 * New disks are sparse copies of one template per size, and usually made ahead of time
 * by a worker thread (disk_spares_*), so that a start only renames one into place.
 *
 * disk_plan_make() and disk_mkfs_argv() are pure (unit tests); disk_probe(), disk_open(),
 * the spares and disk_usage() do the system calls. */
#ifndef CELLA_RUNTIME_DISK_H
#define CELLA_RUNTIME_DISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

/* --disk-quota: required (refuse to start without enforcement), auto (enforce where the
 * host can), off (never make images; sandboxes that already have one still use it). */
enum disk_mode {
        DISK_MODE_AUTO,
        DISK_MODE_REQUIRED,
        DISK_MODE_OFF,
};

int disk_mode_from_name(const char *name, enum disk_mode *ret);
const char *disk_mode_name(enum disk_mode m);

/* "64M", "2G", "1536m", "4096", "10GiB"... (K, M, G, T: powers of 1024; a trailing "B"
 * or "iB" is accepted; no suffix: bytes). len bytes of s, which need not be
 * NUL-terminated. Returns 0 or -EINVAL (empty, junk, zero) / -ERANGE (over 2^63). */
int disk_size_parse(const char *s, size_t len, uint64_t *ret);

struct disk_plan {
        char image[CELLA_PATH_MAX];     /* <dir>/disk.img */
        char template[CELLA_PATH_MAX];  /* <template_dir>/ext4-v1-<size>.img, or "" */
        char spare[CELLA_PATH_MAX];     /* <template_dir>/spare-<size>.img, or "" */
        char loop_note[CELLA_PATH_MAX]; /* <dir>/disk.loop: loop device the image had */
        uint64_t size_bytes;            /* image size: limit rounded down to 4 KiB */
        uint64_t inodes;                /* size_bytes / CELLA_DISK_BYTES_PER_INODE */
};

/* The image path and its size for a sandbox dir and a disk limit (bytes; at least
 * CELLA_DISK_MIN_BYTES, else -EINVAL). template_dir (may be NULL: none) holds one empty,
 * freshly made filesystem per size, which new images are sparse copies of: mkfs runs once
 * per size, not once per sandbox. Returns 0, -EINVAL or -ENAMETOOLONG. */
int disk_plan_make(const char *dir, const char *template_dir, uint64_t limit_bytes,
                   struct disk_plan *ret);

#define DISK_MKFS_ARGS 24
struct disk_mkfs_argv {
        char *argv[DISK_MKFS_ARGS]; /* NULL-terminated; points into the buffers below */
        char inodes[32];
        char ext_opts[128];
        char journal[32];
};

/* The mkfs.ext4 command line for plan's size (program path mkfs, image file path). */
void disk_mkfs_argv(const struct disk_plan *plan, const char *mkfs, const char *path,
                    struct disk_mkfs_argv *ret);

/* Can this host enforce disk limits (loop devices, ext4, mkfs.ext4)? On success 0 and the
 * mkfs.ext4 path in mkfs; else -errno with a reason in why. */
struct disk_host {
        const char *filesystems;  /* NULL: /proc/filesystems */
        const char *loop_control; /* NULL: /dev/loop-control */
        const char *const *mkfs;  /* NULL-terminated candidates; NULL: /usr/sbin, /sbin */
};
/* host: where to look (tests point it at fakes); NULL: this host. */
int disk_probe(const struct disk_host *host, char *mkfs, size_t mkfs_sz, char *why, size_t why_sz);

/* Make the sandbox's disk ready and return a detached mount of its filesystem (an fsmount
 * fd, nosuid+nodev, close-on-exec) in *ret_mount_fd. The image is created when it does
 * not exist (*ret_created says so): a sparse copy of the template of its size, which is
 * made with mkfs first if missing (or, without a template dir, mkfs on the image itself);
 * mkfs NULL means creating is not allowed: -ENOENT then. A loop device that is still bound to the image
 * (its previous mount not yet released) is reused, never a second one: one image, one
 * filesystem instance. what names the failing step for messages. Returns 0 or -errno. */
int disk_open(const struct disk_plan *plan, const char *mkfs, int *ret_mount_fd, bool *ret_created,
              const char **what);

/* Spares: new disks made ahead of time by a worker thread, one per recently used size
 * (up to CELLA_DISK_SPARES sizes): image copied from the template, attached, mounted,
 * held as a detached mount. A new sandbox of that size takes one (a rename into its dir
 * and the mount fd: no copy, no loop attach, no mount on its start), and the worker
 * makes the next one meanwhile. Dropping a spare (or cellad exiting) releases its mount
 * and loop device and unlinks its file. Thread-safe; the worker never touches anything
 * but <template_dir>/spare-*.img and its own mounts. */
struct disk_spares;

/* template_dir: where the templates are (plan->template's dir); mkfs for missing
 * templates. Removes spare files an earlier cellad left (unmounted: its fds are gone)
 * and unfinished templates.
 * Returns 0 or -errno. */
int disk_spares_new(const char *template_dir, const char *mkfs, struct disk_spares **ret);
void disk_spares_free(struct disk_spares *sp); /* stops the worker, drops every spare */
/* Take the ready spare of plan's size: moved to plan->image (never over an existing file),
 * its loop device noted, its mount in *ret_mount_fd. -ENOENT when none is ready. In any
 * case the worker is asked to have one of that size ready for the next start. */
int disk_spares_take(struct disk_spares *sp, const struct disk_plan *plan, int *ret_mount_fd);

/* Does <dir> hold a disk image? */
bool disk_exists(const char *dir);
/* Does table (a /proc/filesystems) list filesystem type fs? */
bool runtime_has_filesystem(const char *table, const char *fs);

/* The image's size (= the limit) and the bytes it occupies on the host (its allocated
 * blocks: files plus filesystem metadata). Returns 0, or -ENOENT without an image. */
int disk_usage(const char *dir, uint64_t *ret_limit, uint64_t *ret_used);

/* Does the filesystem of dir share extents between files (FICLONE: XFS with reflink=1,
 * btrfs)? Tried on two unnamed files in dir (nothing is left there). 0, or -errno with the
 * reason in why. */
int disk_reflink_probe(const char *dir, char *why, size_t why_sz);

/* A reflinked clone of the disk image open at src_fd as dst_dir_fd/disk.img (new, synced):
 * its extents shared with the source, O(metadata) (docs/decisions/0051). The clone's
 * allocated bytes in *ret_allocated. On failure nothing is left. 0 or -errno (-EXDEV,
 * -EOPNOTSUPP, -EINVAL: the filesystem has no reflinks). */
int disk_clone(int src_fd, int dst_dir_fd, uint64_t *ret_allocated);

/* A read-only detached mount (fsmount fd: ro, nosuid, nodev, close-on-exec) of the
 * filesystem in <dir>/disk.img, a snapshot's clone: on a read-only loop device (autoclear;
 * the one still bound to it, noted in <dir>/disk.loop, is reused, so that every sandbox
 * made from the snapshot shares one device and one superblock), mounted ro with
 * norecovery (the journal is never replayed into it). 0 or -errno. */
int disk_open_ro(const char *dir, int *ret_mount_fd);

#endif
