/* The disk module (src/runtime/disk.h) against the real kernel, without containers.
 *
 * Probe: the reasons for "not enforceable" with fake /proc/filesystems, loop-control and
 * mkfs paths (no root needed). Live (root, loop devices, ext4, mkfs.ext4; skipped
 * otherwise): a 32 MiB disk is made from a template, mounted detached; writes through the
 * mount fd stop at ENOSPC near the limit, the inode limit holds, files survive a release
 * and a reopen (which attaches a fresh loop device), a second open while the first mount
 * lives reuses its loop device (also after a rename of the sandbox dir), a spare is taken by rename and replaced by the worker,
 * usage follows the image; nothing stays bound to a loop device afterwards. A snapshot's
 * image (0051) mounts read-only, shared, and the reflink probe leaves nothing behind. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/macros.h"
#include "runtime/disk.h"

static char tmpdir[] = "/tmp/cella-disk-test.XXXXXX";

static void write_file(const char *path, const char *content)
{
        FILE *f = fopen(path, "we");
        assert_non_null(f);
        fputs(content, f);
        fclose(f);
}

static void test_probe_reasons(void **state)
{
        char fs_ok[256], fs_no[256], mkfs[64], why[200];
        static const char *const no_mkfs[] = {"/nonexistent/mkfs.ext4", NULL};
        struct disk_host h = {0};

        snprintf(fs_ok, sizeof(fs_ok), "%s/filesystems-ok", tmpdir);
        snprintf(fs_no, sizeof(fs_no), "%s/filesystems-no", tmpdir);
        write_file(fs_ok, "nodev\tsysfs\nnodev\ttmpfs\n\text4\n\txfs\n");
        write_file(fs_no, "nodev\tsysfs\nnodev\ttmpfs\n\tvfat\n");

        h.filesystems = fs_no;
        assert_int_equal(disk_probe(&h, mkfs, sizeof(mkfs), why, sizeof(why)), -ENODEV);
        assert_string_equal(why, "the kernel has no ext4");

        h.filesystems = fs_ok;
        h.loop_control = "/nonexistent/loop-control";
        assert_int_equal(disk_probe(&h, mkfs, sizeof(mkfs), why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "/nonexistent/loop-control"));

        /* Not a loop-control device: the ioctl is refused. */
        h.loop_control = "/dev/null";
        assert_true(disk_probe(&h, mkfs, sizeof(mkfs), why, sizeof(why)) < 0);
        assert_non_null(strstr(why, "no free loop device"));

        if (access("/dev/loop-control", R_OK | W_OK) == 0) {
                h.loop_control = NULL;
                h.mkfs = no_mkfs;
                assert_int_equal(disk_probe(&h, mkfs, sizeof(mkfs), why, sizeof(why)), -ENOENT);
                assert_non_null(strstr(why, "mkfs.ext4"));
        }
}

/* Loop devices bound to a file whose path contains what. */
static int loops_bound(const char *what)
{
        char path[64], buf[4096];
        int n = 0;
        for (int i = 0; i < 4096; i++) {
                snprintf(path, sizeof(path), "/sys/block/loop%d/loop/backing_file", i);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                if (fgets(buf, sizeof(buf), f) && strstr(buf, what))
                        n++;
                fclose(f);
        }
        return n;
}

/* Is a loop device bound to a file below tmpdir? */
static bool loop_left(void)
{
        return loops_bound(tmpdir) > 0;
}

static int live_prereqs(char *mkfs, size_t mkfs_sz)
{
        char why[200];
        if (geteuid() != 0)
                return -EPERM;
        return disk_probe(NULL, mkfs, mkfs_sz, why, sizeof(why));
}

/* Fill the disk behind mount fd m with 1 MiB writes; returns the bytes written. */
static uint64_t fill(int m, const char *name, int *ret_errno)
{
        static char chunk[1 << 20];
        uint64_t total = 0;
        int fd = openat(m, name, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        memset(chunk, 'x', sizeof(chunk));
        for (;;) {
                ssize_t n = write(fd, chunk, sizeof(chunk));
                if (n <= 0) {
                        *ret_errno = n < 0 ? errno : 0;
                        break;
                }
                total += (uint64_t)n;
                assert_true(total < (64u << 20)); /* a 32 MiB disk never takes this */
        }
        /* Data in the page cache is counted at write time by ext4 (delayed allocation
         * reserves blocks), so ENOSPC comes from write() itself. */
        close(fd);
        return total;
}

static void test_live_disk(void **state)
{
        char mkfs[64], dir[256], tdir[256], path[512];
        struct disk_plan plan;
        struct statfs sfs;
        bool created = false;
        const char *what = NULL;
        int m, e = 0;
        uint64_t limit, used;

        if (live_prereqs(mkfs, sizeof(mkfs)) < 0)
                skip();
        snprintf(dir, sizeof(dir), "%s/sbx", tmpdir);
        snprintf(tdir, sizeof(tdir), "%s/templates", tmpdir);
        assert_int_equal(mkdir(dir, 0700), 0);
        assert_int_equal(disk_plan_make(dir, tdir, CELLA_DISK_MIN_BYTES, &plan), 0);

        /* Not allowed to create: no image yet. */
        assert_int_equal(disk_open(&plan, NULL, &m, &created, &what), -ENOENT);

        assert_int_equal(disk_open(&plan, mkfs, &m, &created, &what), 0);
        assert_true(created);
        assert_int_equal(access(plan.template, F_OK), 0);
        assert_int_equal(fstatfs(m, &sfs), 0);
        assert_true((uint64_t)sfs.f_blocks * sfs.f_bsize <= CELLA_DISK_MIN_BYTES);
        assert_true((uint64_t)sfs.f_blocks * sfs.f_bsize > CELLA_DISK_MIN_BYTES / 2);
        assert_int_equal(sfs.f_files, CELLA_DISK_MIN_BYTES / CELLA_DISK_BYTES_PER_INODE);
        assert_int_equal(disk_usage(dir, &limit, &used), 0);
        assert_int_equal(limit, CELLA_DISK_MIN_BYTES);
        assert_true(used < (4u << 20));

        /* Bytes: ENOSPC close to the limit. */
        uint64_t n = fill(m, "big", &e);
        assert_int_equal(e, ENOSPC);
        assert_true(n > CELLA_DISK_MIN_BYTES / 2 && n <= CELLA_DISK_MIN_BYTES);
        assert_int_equal(unlinkat(m, "big", 0), 0);

        int keep = openat(m, "kept", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(keep >= 0);
        assert_int_equal(write(keep, "hi", 2), 2);
        close(keep);

        /* Inodes: ENOSPC after about f_files files. */
        assert_int_equal(mkdirat(m, "many", 0755), 0);
        int made = 0;
        for (;; made++) {
                snprintf(path, sizeof(path), "many/f%d", made);
                int fd = openat(m, path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
                if (fd < 0) {
                        assert_int_equal(errno, ENOSPC);
                        break;
                }
                close(fd);
                assert_true(made < 100000);
        }
        assert_true(made > 1900 && made < 2048);

        /* A second open while this mount lives: the same loop device, the same filesystem
         * (a file made through the first mount is visible through the second). */
        int m2;
        assert_int_equal(disk_open(&plan, mkfs, &m2, &created, &what), 0);
        assert_false(created);
        assert_int_equal(faccessat(m2, "kept", F_OK, 0), 0);
        assert_int_equal(loops_bound(plan.image), 1);
        close(m2);

        /* The sandbox dir renamed while mounted (a warm pool's claim): the image, its note
         * and its loop device follow; opening under the new name reuses that device. */
        char dir2[300];
        struct disk_plan plan2;
        snprintf(dir2, sizeof(dir2), "%s-renamed", dir);
        assert_int_equal(rename(dir, dir2), 0);
        assert_int_equal(disk_plan_make(dir2, tdir, CELLA_DISK_MIN_BYTES, &plan2), 0);
        assert_int_equal(disk_open(&plan2, mkfs, &m2, &created, &what), 0);
        assert_false(created);
        assert_int_equal(faccessat(m2, "kept", F_OK, 0), 0);
        assert_int_equal(loops_bound(tmpdir), 1);
        close(m2);
        assert_int_equal(rename(dir2, dir), 0);
        close(m);

        /* Released: the loop device goes with the last mount. */
        for (int i = 0; i < 100 && loop_left(); i++)
                usleep(10000);
        assert_false(loop_left());

        /* Reopened from the image: files kept. */
        assert_int_equal(disk_open(&plan, mkfs, &m, &created, &what), 0);
        assert_false(created);
        assert_int_equal(faccessat(m, "kept", F_OK, 0), 0);
        close(m);
        for (int i = 0; i < 100 && loop_left(); i++)
                usleep(10000);
        assert_false(loop_left());
}

static void test_live_spares(void **state)
{
        char mkfs[64], dir[256], tdir[256];
        struct disk_spares *sp = NULL;
        struct disk_plan plan;
        int m = -1, r = -ENOENT;

        if (live_prereqs(mkfs, sizeof(mkfs)) < 0)
                skip();
        snprintf(tdir, sizeof(tdir), "%s/templates", tmpdir);
        mkdir(tdir, 0700);
        /* A stale spare of an earlier daemon is swept. */
        char stale[512];
        snprintf(stale, sizeof(stale), "%s/spare-1234.img", tdir);
        write_file(stale, "x");
        assert_int_equal(disk_spares_new(tdir, mkfs, &sp), 0);
        assert_int_equal(access(stale, F_OK), -1);

        snprintf(dir, sizeof(dir), "%s/spare-user", tmpdir);
        assert_int_equal(mkdir(dir, 0700), 0);
        assert_int_equal(disk_plan_make(dir, tdir, CELLA_DISK_MIN_BYTES, &plan), 0);
        /* The first take finds none and asks the worker; poll until one is ready. */
        for (int i = 0; i < 1000 && r == -ENOENT; i++) {
                r = disk_spares_take(sp, &plan, &m);
                if (r == -ENOENT)
                        usleep(10000);
        }
        assert_int_equal(r, 0);
        assert_int_equal(access(plan.image, F_OK), 0);
        struct statfs sfs;
        assert_int_equal(fstatfs(m, &sfs), 0);
        assert_true((uint64_t)sfs.f_blocks * sfs.f_bsize <= CELLA_DISK_MIN_BYTES);
        int fd = openat(m, "x", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        close(fd);
        close(m);

        /* Never over an existing image: a spare is not taken for a dir that has one. */
        for (int i = 0; i < 1000 && access(plan.spare, F_OK) != 0; i++)
                usleep(10000);
        assert_int_equal(access(plan.spare, F_OK), 0);
        assert_true(disk_spares_take(sp, &plan, &m) < 0);
        assert_int_equal(access(plan.image, F_OK), 0);

        disk_spares_free(sp);
        assert_int_equal(access(plan.spare, F_OK), -1);
        for (int i = 0; i < 100 && loop_left(); i++)
                usleep(10000);
        assert_false(loop_left());
}

/* Entries of dir (without . and ..). */
static int count_entries(const char *dir)
{
        char cmd[512];
        snprintf(cmd, sizeof(cmd), "%s", dir);
        DIR *d = opendir(cmd);
        struct dirent *e;
        int n = 0;
        assert_non_null(d);
        while ((e = readdir(d)))
                n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
        closedir(d);
        return n;
}

/* The reflink probe leaves nothing in its dir and says why it fails; a snapshot's image
 * (here a byte copy: /tmp has no reflinks on this host, and then disk_clone refuses and
 * leaves nothing) mounts read-only on a read-only loop device, once for every opener, and
 * the device goes with the last mount (docs/decisions/0051). */
static void test_live_readonly(void **state)
{
        char mkfs[64], dir[256], snap[256], path[CELLA_PATH_MAX * 2 + 64], why[200] = "";
        struct disk_plan plan;
        bool created = false;
        const char *what = NULL;
        uint64_t alloc = 0;
        int m, r1, r2;

        (void)state;
        assert_int_equal(disk_reflink_probe("/nonexistent-cella-dir", why, sizeof(why)), -ENOENT);
        assert_non_null(strstr(why, "/nonexistent-cella-dir"));
        if (live_prereqs(mkfs, sizeof(mkfs)) < 0)
                skip();
        int before = count_entries(tmpdir);
        why[0] = '\0';
        int probe = disk_reflink_probe(tmpdir, why, sizeof(why));
        assert_true(probe == 0 || why[0] != '\0');
        assert_int_equal(count_entries(tmpdir), before);

        snprintf(dir, sizeof(dir), "%s/ro-src", tmpdir);
        snprintf(snap, sizeof(snap), "%s/ro-snap", tmpdir);
        assert_int_equal(mkdir(dir, 0700), 0);
        assert_int_equal(mkdir(snap, 0700), 0);
        assert_int_equal(disk_plan_make(dir, NULL, CELLA_DISK_MIN_BYTES, &plan), 0);
        assert_int_equal(disk_open(&plan, mkfs, &m, &created, &what), 0);
        assert_int_equal(mkdirat(m, "upper", 0755), 0);
        int fd = openat(m, "upper/kept", O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "hi", 2), 2);
        close(fd);
        fd = openat(m, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* the mount fd is O_PATH */
        assert_true(fd >= 0);
        assert_int_equal(syncfs(fd), 0);
        close(fd);

        int img = open(plan.image, O_RDONLY | O_CLOEXEC);
        int sfd = open(snap, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(img >= 0 && sfd >= 0);
        r1 = disk_clone(img, sfd, &alloc);
        if (probe < 0) {
                assert_true(r1 < 0);
                assert_int_equal(count_entries(snap), 0);
                snprintf(path, sizeof(path), "cp --sparse=always %s %s/disk.img", plan.image, snap);
                char *argv[] = {"sh", "-c", path, NULL};
                extern char **environ;
                pid_t pid = fork();
                if (pid == 0) {
                        execve("/bin/sh", argv, environ);
                        _exit(127);
                }
                int st;
                waitpid(pid, &st, 0);
                assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
        } else {
                assert_int_equal(r1, 0);
                assert_true(alloc > 0);
        }
        close(img);
        close(sfd);
        close(m);

        r1 = r2 = -1;
        assert_int_equal(disk_open_ro(snap, &r1), 0);
        assert_int_equal(disk_open_ro(snap, &r2), 0);
        snprintf(path, sizeof(path), "%s/disk.img", snap);
        assert_int_equal(loops_bound(path), 1);
        char buf[8] = "";
        fd = openat(r2, "upper/kept", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(read(fd, buf, sizeof(buf)), 2);
        assert_memory_equal(buf, "hi", 2);
        close(fd);
        assert_int_equal(openat(r1, "upper/new", O_WRONLY | O_CREAT | O_CLOEXEC, 0644), -1);
        assert_int_equal(errno, EROFS);
        close(r1);
        close(r2);
        for (int i = 0; i < 100 && loop_left(); i++)
                usleep(10000);
        assert_false(loop_left());
}

static int setup(void **state)
{
        return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
        char cmd[128];
        pid_t pid;
        snprintf(cmd, sizeof(cmd), "%s", tmpdir);
        char *argv[] = {"rm", "-rf", "--", cmd, NULL};
        extern char **environ;
        pid = fork();
        if (pid == 0) {
                execve("/bin/rm", argv, environ);
                _exit(127);
        }
        int st;
        waitpid(pid, &st, 0);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_probe_reasons),
                cmocka_unit_test(test_live_disk),
                cmocka_unit_test(test_live_spares),
                cmocka_unit_test(test_live_readonly),
        };
        return cmocka_run_group_tests(tests, setup, teardown);
}
