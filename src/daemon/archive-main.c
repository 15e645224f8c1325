/* cella-archive: the archiver of backups (docs/decisions/0049-backups.md), run by cellad
 * for one backup or one restore and gone after it.
 *
 *   cella-archive create DIR [--gitignore] [--exclude PATTERN]...
 *                                             the archive of DIR on stdout, without what
 *                                             the patterns leave out (backup-ignore.h)
 *   cella-archive restore DIR SHA256 SIZE     the archive on stdin replaces DIR
 *
 * fd 3 is a pidfd of the sandbox's PID 1. Before it reads or writes anything the program
 * joins that process's user, mount, network, IPC and UTS namespaces (one setns on the
 * pidfd) and takes the ids of the sandbox's root: its root directory is the sandbox's,
 * every path and every symbolic link resolves inside the sandbox, and the kernel grants it
 * what the sandbox's root may do, nothing of the host's. What it loads lazily (locale,
 * OpenSSL's configuration, libarchive's conversions) is loaded before, from the host's
 * files, and it never looks a name up (no NSS). On failure it writes "CODE message" on
 * stderr (CODE: an API error code) and exits 1. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <grp.h>
#include <dirent.h>

#include "common/error.h"
#include "common/limits.h"
#include "common/macros.h"
#include "daemon/backup-archive.h"

static _Noreturn void fail(const struct cella_error *err)
{
        fprintf(stderr, "%s %s\n", cella_code_name(err->code), err->msg);
        exit(1);
}

static _Noreturn void fail_errno(int code, int e, const char *what)
{
        struct cella_error err = {0};

        cella_error_set(&err, code, "%s: %s", what, strerror(e));
        fail(&err);
}

/* Into the sandbox of the pidfd on fd 3, as its root. */
static void enter(int code)
{
        if (setgroups(0, NULL) < 0)
                fail_errno(code, errno, "setgroups");
        if (setns(3, CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWNET | CLONE_NEWIPC | CLONE_NEWUTS) < 0)
                fail_errno(code, errno, "enter the sandbox");
        close(3);
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                fail_errno(code, errno, "take the sandbox's root ids");
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) < 0)
                fail_errno(code, errno, "prctl");
        if (chdir("/") < 0)
                fail_errno(code, errno, "chdir /");
        umask(0);
}

static int do_create(const char *dir, struct backup_filter *filter)
{
        struct cella_error err = {0};
        struct backup_archive_stats st;
        int fd;

        enter(CELLA_E_BACKUP_CREATE_FAILED);
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                cella_error_set(&err, CELLA_E_INVALID_BACKUP_CONFIG, "dir '%.200s': %s", dir,
                                errno == ENOENT    ? "no such directory in the sandbox"
                                : errno == ENOTDIR ? "not a directory"
                                                   : strerror(errno));
                fail(&err);
        }
        if (fchdir(fd) < 0)
                fail_errno(CELLA_E_BACKUP_CREATE_FAILED, errno, dir);
        close(fd);
        if (backup_archive_write_cwd(STDOUT_FILENO, filter, &st, &err) < 0)
                fail(&err);
        fprintf(stderr, "OK %llu entries, %llu skipped, %llu excluded\n",
                (unsigned long long)st.entries, (unsigned long long)st.skipped,
                (unsigned long long)st.excluded);
        return 0;
}

/* The directory path (absolute, checked) opened, each missing directory made (0755). */
static int open_dirs(const char *path)
{
        int fd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        for (const char *s = path + 1; fd >= 0 && *s;) {
                size_t n = strcspn(s, "/");
                char name[256];
                int next;

                if (n >= sizeof(name)) {
                        close(fd);
                        errno = ENAMETOOLONG;
                        return -1;
                }
                memcpy(name, s, n);
                name[n] = '\0';
                if (mkdirat(fd, name, 0755) < 0 && errno != EEXIST) {
                        int e = errno;
                        close(fd);
                        errno = e;
                        return -1;
                }
                next = openat(fd, name, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                close(fd);
                fd = next;
                s += n;
                if (*s == '/')
                        s++;
        }
        return fd;
}

/* Every entry of dir_fd but keep removed. */
static int empty_dir(int dir_fd, const char *keep)
{
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int r = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, "..") ||
                    (keep && !strcmp(de->d_name, keep)))
                        continue;
                int rr = backup_remove_tree(dir_fd, de->d_name);
                if (rr < 0 && rr != -ENOENT && r == 0)
                        r = rr;
        }
        closedir(d);
        return r;
}

/* Every entry of from_fd moved into to_fd. */
static int move_entries(int from_fd, int to_fd)
{
        int fd = openat(from_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        struct dirent *de;
        int r = 0;

        if (!d)
                return -errno;
        while ((de = readdir(d))) {
                if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (renameat(from_fd, de->d_name, to_fd, de->d_name) < 0 && r == 0)
                        r = -errno;
        }
        closedir(d);
        return r;
}

/* The target's contents replaced by tmp's (tmp a directory in tmp_parent_fd), where the
 * directory itself cannot be swapped by a rename: one of the image's directories (overlayfs
 * renames only its own) or a mount point. The archive is whole and checked by now; only
 * removals and renames within one filesystem are left. */
static int replace_contents(int target_fd, int tmp_parent_fd, const char *tmp, bool tmp_inside)
{
        int tmp_fd = openat(tmp_parent_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        struct stat sb;
        int r;

        if (tmp_fd < 0)
                return -errno;
        r = empty_dir(target_fd, tmp_inside ? tmp : NULL);
        if (r >= 0)
                r = move_entries(tmp_fd, target_fd);
        if (r >= 0 && fstat(tmp_fd, &sb) == 0) {
                if (fchown(target_fd, sb.st_uid, sb.st_gid) < 0 ||
                    fchmod(target_fd, sb.st_mode & 07777) < 0)
                        r = -errno;
        }
        close(tmp_fd);
        if (unlinkat(tmp_parent_fd, tmp, AT_REMOVEDIR) < 0 && r >= 0)
                r = -errno;
        return r;
}

static int do_restore(const char *dir, const char *sha, const char *size_s)
{
        struct cella_error err = {0};
        struct backup_archive_stats st;
        char parent[CELLA_BACKUP_DIR_MAX + 1], tmp[64];
        const char *base;
        struct stat psb, tsb;
        uint8_t rnd[6];
        bool exists, inside;
        int parent_fd, target_fd = -1, tmp_parent_fd, tmp_fd, r;
        char *end;
        long long size = strtoll(size_s, &end, 10);

        if (*end || size < 0 || strlen(sha) != 64)
                fail_errno(CELLA_E_INTERNAL_ERROR, EINVAL, "arguments");
        enter(CELLA_E_BACKUP_RESTORE_FAILED);
        snprintf(parent, sizeof(parent), "%s", dir);
        *strrchr(parent, '/') = '\0';
        base = dir + strlen(parent) + 1;
        parent_fd = open_dirs(parent[0] ? parent : "/");
        if (parent_fd < 0 || fstat(parent_fd, &psb) < 0)
                fail_errno(CELLA_E_BACKUP_RESTORE_FAILED, errno, parent[0] ? parent : "/");
        exists = fstatat(parent_fd, base, &tsb, AT_SYMLINK_NOFOLLOW) == 0;
        /* A mount point (the sandbox's /tmp, say) is extracted into, under a hidden name:
         * renames do not cross filesystems. */
        inside = exists && S_ISDIR(tsb.st_mode) && tsb.st_dev != psb.st_dev;
        if (exists && S_ISDIR(tsb.st_mode)) {
                target_fd =
                        openat(parent_fd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (target_fd < 0)
                        fail_errno(CELLA_E_BACKUP_RESTORE_FAILED, errno, dir);
        }
        tmp_parent_fd = inside ? target_fd : parent_fd;
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                fail_errno(CELLA_E_BACKUP_RESTORE_FAILED, errno, "getrandom");
        snprintf(tmp, sizeof(tmp), ".cella-restore-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5]);
        if (mkdirat(tmp_parent_fd, tmp, 0700) < 0 ||
            (tmp_fd = openat(tmp_parent_fd, tmp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) <
                    0 ||
            fchdir(tmp_fd) < 0)
                fail_errno(CELLA_E_BACKUP_RESTORE_FAILED, errno, "make a directory beside dir");
        close(tmp_fd);
        if (backup_archive_extract_cwd(STDIN_FILENO, sha, size, &st, &err) < 0) {
                if (chdir("/") < 0) { /* keep going: the tree is removed by its parent's fd */
                }
                backup_remove_tree(tmp_parent_fd, tmp);
                fail(&err);
        }
        if (chdir("/") < 0)
                fail_errno(CELLA_E_BACKUP_RESTORE_FAILED, errno, "chdir /");
        /* Commit: the extracted tree takes the target's place. */
        if (inside) {
                r = replace_contents(target_fd, tmp_parent_fd, tmp, true);
        } else if (!exists) {
                r = renameat2(parent_fd, tmp, parent_fd, base, RENAME_NOREPLACE) < 0 ? -errno : 0;
        } else if (renameat2(parent_fd, tmp, parent_fd, base, RENAME_EXCHANGE) == 0) {
                r = backup_remove_tree(parent_fd, tmp); /* the old tree */
                if (r < 0)
                        fprintf(stderr, "WARN the old %s stays as %s/%s: %s\n", dir, parent, tmp,
                                strerror(-r));
                r = 0;
        } else if (target_fd >= 0 && (errno == EXDEV || errno == EINVAL || errno == EBUSY)) {
                r = replace_contents(target_fd, parent_fd, tmp, false);
        } else if (target_fd < 0 && unlinkat(parent_fd, base, 0) == 0) {
                r = renameat2(parent_fd, tmp, parent_fd, base, RENAME_NOREPLACE) < 0 ? -errno : 0;
        } else {
                r = -errno;
        }
        if (r < 0) {
                backup_remove_tree(tmp_parent_fd, tmp);
                fail_errno(CELLA_E_BACKUP_RESTORE_FAILED, -r, "replace dir");
        }
        fprintf(stderr, "OK %llu entries\n", (unsigned long long)st.entries);
        return 0;
}

int main(int argc, char **argv)
{
        struct cella_error err = {0};

        backup_archive_warm_up();
        if (argc >= 3 && strcmp(argv[1], "create") == 0) {
                struct backup_filter *filter = NULL;
                bool gitignore = false;
                int i;

                if (backup_dir_check(argv[2], &err) < 0)
                        fail(&err);
                for (i = 3; i < argc; i++)
                        if (strcmp(argv[i], "--gitignore") == 0)
                                gitignore = true;
                if ((argc > 3) && backup_filter_new(gitignore, &filter) < 0)
                        fail_errno(CELLA_E_BACKUP_CREATE_FAILED, ENOMEM, "filter");
                for (i = 3; i < argc; i++) {
                        if (strcmp(argv[i], "--gitignore") == 0)
                                continue;
                        if (strcmp(argv[i], "--exclude") != 0 || i + 1 >= argc)
                                fail_errno(CELLA_E_INTERNAL_ERROR, EINVAL, "arguments");
                        if (backup_filter_exclude(filter, argv[++i], &err) < 0)
                                fail(&err);
                }
                return do_create(argv[2], filter);
        }
        if (argc == 5 && strcmp(argv[1], "restore") == 0) {
                if (backup_dir_check(argv[2], &err) < 0)
                        fail(&err);
                return do_restore(argv[2], argv[3], argv[4]);
        }
        fprintf(stderr, "usage: cella-archive create DIR [--gitignore] [--exclude P]... | "
                        "restore DIR SHA256 SIZE "
                        "(fd 3: the sandbox's pidfd)\n");
        return 2;
}
