/* A backup's archive (docs/decisions/0049-backups.md): a zstd-compressed pax tar of one
 * directory of a sandbox, written and extracted with libarchive by cella-archive, a program
 * that runs inside the sandbox's namespaces with its root's ids (archive-main.c). These
 * functions are its work once it is there; they touch only what is reachable from the
 * descriptors they are given and never follow a symbolic link. */
#ifndef CELLA_DAEMON_BACKUP_ARCHIVE_H
#define CELLA_DAEMON_BACKUP_ARCHIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"

struct backup_archive_stats {
        uint64_t entries;  /* files, directories, links written or extracted */
        uint64_t bytes;    /* bytes of the archive read or written */
        uint64_t skipped;  /* entries left out (sockets, devices) */
        uint64_t excluded; /* entries left out by the filter (a directory counts once) */
};

/* Is dir a directory a backup may be of or restored into: absolute, normalised (no "",
 * "." or ".." component, no trailing '/'), at most CELLA_BACKUP_DIR_MAX bytes, and
 * /workspace, /home, /tmp, /var/tmp, /app or below one of them? 0, or -EINVAL with err
 * set (INVALID_BACKUP_CONFIG) saying why. */
int backup_dir_check(const char *dir, struct cella_error *err);

/* What a backup leaves out (backup-ignore.h): the request's excludes and, with gitignore,
 * the .gitignore files of the tree as the walk meets them. Applied to the tree of
 * backup_archive_write_cwd: an excluded directory is not entered (nothing below it comes
 * back, as with git); excludes come before the .gitignore files (a "!x" exclude takes back
 * what a .gitignore left out), a deeper .gitignore before a higher one, and within one
 * source the last pattern that matches decides. */
struct backup_filter;
/* 0 or -ENOMEM. */
int backup_filter_new(bool gitignore, struct backup_filter **ret);
void backup_filter_free(struct backup_filter *f);
/* One exclude (ignore_pattern_check's rules). 0 or -1 with err set (INVALID_BACKUP_CONFIG). */
int backup_filter_exclude(struct backup_filter *f, const char *pat, struct cella_error *err);

/* Write the archive of the current working directory's tree ("." and below, symbolic
 * links as links, one filesystem) to out_fd, without what filter (NULL: nothing) leaves
 * out (counted in excluded). Owners are kept as numbers, set-id bits are dropped, devices
 * and sockets are left out (counted in skipped). A .gitignore the filter cannot take (over
 * CELLA_BACKUP_GITIGNORE_BYTES, a line over CELLA_BACKUP_PATTERN_MAX, more than
 * CELLA_BACKUP_GITIGNORE_ACTIVE patterns in effect) fails it: INVALID_BACKUP_CONFIG naming
 * the file. 0 or -1 with err set. */
int backup_archive_write_cwd(int out_fd, struct backup_filter *filter,
                             struct backup_archive_stats *st, struct cella_error *err);

/* Extract the archive read from in_fd into the current working directory (an empty
 * directory made for it), refusing absolute names, "..", names through a symbolic link,
 * hard links, devices and sockets; set-id bits are dropped. When sha256_hex is not NULL
 * the whole input (read to its end) must have that SHA-256 and size bytes. 0 or -1 with
 * err set (BACKUP_RESTORE_FAILED); what was extracted stays for the caller to remove. */
int backup_archive_extract_cwd(int in_fd, const char *sha256_hex, int64_t size,
                               struct backup_archive_stats *st, struct cella_error *err);

/* Remove name in dir_fd and everything below it, never following a link. 0 or -errno. */
int backup_remove_tree(int dir_fd, const char *name);

/* Make libarchive, zstd, OpenSSL's SHA-256 and the C library's character conversion load
 * what they load lazily (locale data, configuration), so that nothing is read later from
 * the sandbox's files. Called before entering the sandbox. */
void backup_archive_warm_up(void);

#endif
