/* The layer capture (src/runtime/layer.h) on the real filesystem, without containers.
 *
 * The id shift (pure). A tree like an overlay upper layer — files with holes, a
 * subdirectory marked opaque (user.overlay.opaque), a whiteout (0/0 character device), a
 * symlink whose target lies outside the tree, a fifo, a setgid dir — owned by a sandbox's
 * host ids, copied: the same content, modes, xattrs and times, owners shifted into the
 * sandbox's own ids (foreign ids to 65534); the source untouched; the symlink copied, not
 * followed; an existing destination refused; the copy removed by layer_remove. Root only
 * (chown, mknod); skipped otherwise. */
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
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/macros.h"
#include "runtime/layer.h"

#define BASE 300000u
#define COUNT 65536u

static char tmpdir[] = "/tmp/cella-layer-test.XXXXXX";

static void test_shift_id(void **state)
{
        (void)state;
        assert_int_equal(layer_shift_id(BASE, BASE, COUNT), 0);
        assert_int_equal(layer_shift_id(BASE + 1000, BASE, COUNT), 1000);
        assert_int_equal(layer_shift_id(BASE + COUNT - 1, BASE, COUNT), COUNT - 1);
        assert_int_equal(layer_shift_id(BASE + COUNT, BASE, COUNT), 65534);
        assert_int_equal(layer_shift_id(0, BASE, COUNT), 65534);
        assert_int_equal(layer_shift_id(BASE - 1, BASE, COUNT), 65534);
        assert_int_equal(layer_shift_id(UINT32_MAX, UINT32_MAX - 1, 2), 1);
        assert_int_equal(layer_shift_id(5, 0, 0), 65534);
}

static void put(int dir, const char *name, const char *content, mode_t mode, uid_t uid)
{
        int fd = openat(dir, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, content, strlen(content)), (ssize_t)strlen(content));
        assert_int_equal(fchown(fd, uid, uid), 0);
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static void expect_owner(int dir, const char *name, uid_t uid, gid_t gid, mode_t mode)
{
        struct stat st;
        assert_int_equal(fstatat(dir, name, &st, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(st.st_uid, uid);
        assert_int_equal(st.st_gid, gid);
        if (mode)
                assert_int_equal(st.st_mode & 07777, mode);
}

static void test_copy_tree(void **state)
{
        (void)state;
        if (geteuid() != 0) {
                skip();
                return;
        }
        assert_non_null(mkdtemp(tmpdir));
        int top = open(tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(top >= 0);
        assert_int_equal(mkdirat(top, "upper", 0755), 0);
        int up = openat(top, "upper", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(up >= 0);
        assert_int_equal(fchown(up, BASE, BASE), 0);

        put(up, "hello.txt", "hello\n", 0644, BASE + 1000);
        put(up, "foreign", "x", 0600, 12345);
        /* a sparse file: 4 KiB of data at 1 MiB */
        int sp = openat(up, "sparse", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0640);
        assert_true(sp >= 0);
        char blk[4096];
        memset(blk, 'z', sizeof(blk));
        assert_int_equal(pwrite(sp, blk, sizeof(blk), 1 << 20), (ssize_t)sizeof(blk));
        assert_int_equal(fchown(sp, BASE, BASE), 0);
        close(sp);
        assert_int_equal(mkdirat(up, "opaque", 02775), 0);
        int op = openat(up, "opaque", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(op >= 0);
        assert_int_equal(fchown(op, BASE + 5, BASE + 6), 0);
        assert_int_equal(fchmod(op, 02775), 0);
        assert_int_equal(fsetxattr(op, "user.overlay.opaque", "y", 1, 0), 0);
        put(op, "inner", "inner\n", 0600, BASE);
        assert_int_equal(mknodat(up, "gone", S_IFCHR | 0000, makedev(0, 0)), 0);
        assert_int_equal(fchownat(up, "gone", BASE, BASE, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(symlinkat("/etc/passwd", up, "link"), 0);
        assert_int_equal(fchownat(up, "link", BASE + 7, BASE + 7, AT_SYMLINK_NOFOLLOW), 0);
        assert_int_equal(mkfifoat(up, "fifo", 0620), 0);
        assert_int_equal(fchmodat(up, "fifo", 0620, 0), 0);
        struct timespec old[2] = {{1000000000, 0}, {1000000000, 0}};
        assert_int_equal(utimensat(up, "hello.txt", old, 0), 0);

        struct layer_copy_stats st;
        assert_int_equal(layer_copy(up, top, "layer", BASE, COUNT, &st), 0);
        assert_int_equal(st.cloned + st.copied, 4);
        assert_int_equal(st.bytes, 6 + 1 + (1 << 20) + 4096 + 6);
        assert_int_equal(st.files, 8);
        /* An existing destination is refused. */
        assert_int_equal(layer_copy(up, top, "layer", BASE, COUNT, NULL), -EEXIST);

        int ly = openat(top, "layer", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(ly >= 0);
        expect_owner(top, "layer", 0, 0, 0755);
        expect_owner(ly, "hello.txt", 1000, 1000, 0644);
        expect_owner(ly, "foreign", 65534, 65534, 0600);
        expect_owner(ly, "sparse", 0, 0, 0640);
        expect_owner(ly, "opaque", 5, 6, 02775);
        expect_owner(ly, "opaque/inner", 0, 0, 0600);
        expect_owner(ly, "gone", 0, 0, 0);
        expect_owner(ly, "link", 7, 7, 0);
        expect_owner(ly, "fifo", 65534, 65534, 0620);

        char buf[64];
        int fd = openat(ly, "hello.txt", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(read(fd, buf, sizeof(buf)), 6);
        assert_memory_equal(buf, "hello\n", 6);
        struct stat s;
        assert_int_equal(fstat(fd, &s), 0);
        assert_int_equal(s.st_mtim.tv_sec, 1000000000);
        close(fd);
        fd = openat(ly, "sparse", O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fstat(fd, &s), 0);
        assert_int_equal(s.st_size, (1 << 20) + 4096);
        /* the hole stays a hole (cloned or copied, at most the data's blocks) */
        assert_true(s.st_blocks * 512 <= 64 * 1024);
        assert_int_equal(pread(fd, buf, 4, 1 << 20), 4);
        assert_memory_equal(buf, "zzzz", 4);
        assert_int_equal(pread(fd, buf, 4, 0), 4);
        assert_memory_equal(buf, "\0\0\0\0", 4);
        close(fd);

        fd = openat(ly, "opaque", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(fgetxattr(fd, "user.overlay.opaque", buf, sizeof(buf)), 1);
        assert_int_equal(buf[0], 'y');
        close(fd);
        assert_int_equal(fstatat(ly, "gone", &s, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISCHR(s.st_mode));
        assert_int_equal(s.st_rdev, makedev(0, 0));
        assert_int_equal(readlinkat(ly, "link", buf, sizeof(buf)), 11);
        assert_memory_equal(buf, "/etc/passwd", 11);
        assert_int_equal(fstatat(ly, "fifo", &s, AT_SYMLINK_NOFOLLOW), 0);
        assert_true(S_ISFIFO(s.st_mode));

        /* The source is untouched. */
        expect_owner(up, "hello.txt", BASE + 1000, BASE + 1000, 0644);
        expect_owner(up, "opaque", BASE + 5, BASE + 6, 02775);
        close(ly);

        /* Removal, and removal of what is not there. */
        assert_int_equal(layer_remove(top, "layer"), 0);
        assert_int_equal(faccessat(top, "layer", F_OK, AT_SYMLINK_NOFOLLOW), -1);
        assert_int_equal(layer_remove(top, "layer"), 0);
        assert_int_equal(layer_remove(top, "upper"), 0);
        close(up);
        close(top);
        assert_int_equal(rmdir(tmpdir), 0);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_shift_id),
                cmocka_unit_test(test_copy_tree),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
