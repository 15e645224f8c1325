/* The runtime's failure paths: runtime_container_start with one step made to fail by
 * wrapping the call it makes (-Wl,--wrap, see tests/CMakeLists.txt): the socketpair, clone3,
 * a cgroup directory, a cgroup limit, the uid map, the idmapped mount of the image, the
 * disk's mkfs and its mount (loop device attached), the upper layer's files (made while
 * the child is cloned); then the teardown's cgroup removal and
 * the rename's sethostname. Each test checks the error (its code, its message with the
 * "create sandbox" context, the errno returned) and that everything done before the step
 * was undone: no descriptor, mount, cgroup, child process or loop device left behind; then
 * that the same sandbox starts cleanly afterwards.
 *
 * Real containers like test-runtime-live (root, the default image, tests/helpers/probe-init
 * as PID 1); skips with a message otherwise. Its own cgroup name and uid slots (4100 and
 * up of the last block, see test-runtime-live.c), so both can run at once. */
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/mount.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/macros.h"
#include "runtime/cgroup.h"
#include "runtime/container.h"
#include "runtime/host-claim.h"
#include "runtime-fixture.h"

#define ROOTFS RUNTIME_FIXTURE_ROOTFS
#define CG_NAME "cella-test-faults"

static const char *const test_ids[] = {"f-sock",    "f-clone",  "f-cgdir", "f-cglim",
                                       "f-uidmap",  "f-idmap",  "f-mount", "f-disk",
                                       "f-destroy", "f-rename", "f-mkfs",  "f-upper"};
static struct runtime_fixture fx = {.what = "runtime fault tests",
                                    .cgroup_name = CG_NAME,
                                    .ids = test_ids,
                                    .n_ids = ARRAY_SIZE(test_ids),
                                    .tmpdir = "/tmp/cella-runtime-faults-XXXXXX"};

/* ---- the wrapped calls: each fails with its errno while armed ---- */

static int fail_socketpair, fail_clone3, fail_mount_setattr, fail_fsmount;
static int fail_mkdir, fail_write, fail_rmdir, fail_sethostname, fail_spawn;
/* mkdir, rmdir and write fail only on a path holding both substrings (a write: its fd's
 * path). */
static const char *match_a, *match_b;
static int hits; /* how many armed calls failed */

int __wrap_socketpair(int domain, int type, int protocol, int sv[2]);
long __wrap_syscall(long number, ...);
int __wrap_mount_setattr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                         size_t size);
int __wrap_fsmount(int fd, unsigned int flags, unsigned int attr_flags);
int __wrap_mkdir(const char *path, mode_t mode);
int __wrap_rmdir(const char *path);
int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);
int __wrap_sethostname(const char *name, size_t len);
ssize_t __wrap_write(int fd, const void *buf, size_t n);

static bool path_matches(const char *path)
{
        return strstr(path, match_a) && strstr(path, match_b);
}

int __real_socketpair(int domain, int type, int protocol, int sv[2]);
int __wrap_socketpair(int domain, int type, int protocol, int sv[2])
{
        if (fail_socketpair) {
                hits++;
                errno = fail_socketpair;
                return -1;
        }
        return __real_socketpair(domain, type, protocol, sv);
}

/* syscall(2) is variadic: every argument is read as a long (what the kernel takes, six of
 * them on x86-64 and arm64) and passed on. */
long __real_syscall(long number, ...);
long __wrap_syscall(long number, ...)
{
        long a[6];
        va_list ap;

        va_start(ap, number);
        for (int i = 0; i < 6; i++)
                a[i] = va_arg(ap, long);
        va_end(ap);
        if (number == SYS_clone3 && fail_clone3) {
                hits++;
                errno = fail_clone3;
                return -1;
        }
        return __real_syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

int __real_mount_setattr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                         size_t size);
int __wrap_mount_setattr(int dfd, const char *path, unsigned int flags, struct mount_attr *attr,
                         size_t size)
{
        if (fail_mount_setattr && attr && (attr->attr_set & MOUNT_ATTR_IDMAP)) {
                hits++;
                errno = fail_mount_setattr;
                return -1;
        }
        return __real_mount_setattr(dfd, path, flags, attr, size);
}

int __real_fsmount(int fd, unsigned int flags, unsigned int attr_flags);
int __wrap_fsmount(int fd, unsigned int flags, unsigned int attr_flags)
{
        if (fail_fsmount) {
                hits++;
                errno = fail_fsmount;
                return -1;
        }
        return __real_fsmount(fd, flags, attr_flags);
}

int __real_mkdir(const char *path, mode_t mode);
int __wrap_mkdir(const char *path, mode_t mode)
{
        if (fail_mkdir && path_matches(path)) {
                hits++;
                errno = fail_mkdir;
                return -1;
        }
        return __real_mkdir(path, mode);
}

int __real_rmdir(const char *path);
int __wrap_rmdir(const char *path)
{
        if (fail_rmdir && path_matches(path)) {
                hits++;
                errno = fail_rmdir;
                return -1;
        }
        return __real_rmdir(path);
}

/* posix_spawn returns the error number instead of setting errno. */
int __real_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[]);
int __wrap_posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
        if (fail_spawn) {
                hits++;
                return fail_spawn;
        }
        return __real_posix_spawn(pid, path, fa, attr, argv, envp);
}

int __real_sethostname(const char *name, size_t len);
int __wrap_sethostname(const char *name, size_t len)
{
        if (fail_sethostname) {
                hits++;
                errno = fail_sethostname;
                return -1;
        }
        return __real_sethostname(name, len);
}

ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
        if (fail_write) {
                char link[64], path[512];
                snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
                ssize_t len = readlink(link, path, sizeof(path) - 1);
                if (len > 0) {
                        path[len] = '\0';
                        if (path_matches(path)) {
                                hits++;
                                errno = fail_write;
                                return -1;
                        }
                }
        }
        return __real_write(fd, buf, n);
}

static void disarm(void)
{
        fail_socketpair = fail_clone3 = fail_mount_setattr = fail_fsmount = 0;
        fail_mkdir = fail_write = fail_rmdir = fail_sethostname = fail_spawn = 0;
        match_a = match_b = NULL;
        hits = 0;
}

/* ---- what a host looks like: counted before a start and after its failure ---- */

struct host_state {
        int fds;
        int mounts;
};

static int count_fds(void)
{
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n - 1; /* the directory's own */
}

static int count_lines(const char *path)
{
        FILE *f = fopen(path, "re");
        int n = 0, c;

        assert_non_null(f);
        while ((c = fgetc(f)) != EOF)
                n += c == '\n';
        fclose(f);
        return n;
}

static struct host_state host_state(void)
{
        return (struct host_state){.fds = count_fds(),
                                   .mounts = count_lines("/proc/self/mountinfo")};
}

/* A loop device whose backing file is under our fx.tmpdir. */
static bool loop_left(void)
{
        DIR *d = opendir("/sys/block");
        struct dirent *de;
        bool found = false;

        if (!d)
                return false;
        while (!found && (de = readdir(d))) {
                char p[300], b[512];
                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                snprintf(p, sizeof(p), "/sys/block/%s/loop/backing_file", de->d_name);
                FILE *f = fopen(p, "re");
                if (!f)
                        continue;
                if (fgets(b, sizeof(b), f) && strstr(b, fx.tmpdir))
                        found = true;
                fclose(f);
        }
        closedir(d);
        return found;
}

/* Nothing of the failed start of id is left: descriptors and mounts as before, its
 * cgroups gone, no child (running or zombie: the runtime reaps what it cloned), and (with
 * a bounded wait: the kernel releases an autoclear loop device after the last close) no
 * loop device on its disk image. */
static void assert_nothing_left(const char *id, struct host_state before)
{
        struct host_state now = host_state();

        assert_int_equal(now.fds, before.fds);
        assert_int_equal(now.mounts, before.mounts);
        assert_false(runtime_fixture_cgroup_left(&fx, id));
        errno = 0;
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
        for (int i = 0; loop_left() && i < 200; i++) {
                struct timespec ts = {0, 50 * 1000 * 1000};
                nanosleep(&ts, NULL);
        }
        assert_false(loop_left());
}

/* ---- starting ---- */

static uid_t slot_base(unsigned slot)
{
        uint32_t last_block = CELLA_UID_BASE + (HOST_CLAIM_UID_BASE_MAX - CELLA_UID_BASE) /
                                                       HOST_CLAIM_UID_BLOCK * HOST_CLAIM_UID_BLOCK;

        return last_block + (4100u + slot) * CELLA_UID_RANGE;
}

static int start(const char *id, unsigned slot, bool disk, struct container *c,
                 struct cella_error *err)
{
        char dir[256];

        snprintf(dir, sizeof(dir), "%s/%s", fx.tmpdir, id);
        assert_true(mkdir(dir, 0700) == 0 || errno == EEXIST);
        struct container_spec spec = {
                .id = id,
                .hostname = id,
                .rootfs = ROOTFS,
                .dir = dir,
                .uid_base = slot_base(slot),
                .uid_count = CELLA_UID_RANGE,
                .limits = {.memory_bytes = 64ull << 20, .cpu_millis = 1000, .pids_max = 64},
                .disk_bytes = disk ? CELLA_DISK_MIN_BYTES : 0,
        };
        *c = (struct container){.pid = 0, .pidfd = -EBADF};
        return runtime_container_start(fx.rt, &spec, c, err);
}

/* Start id with one step armed to fail: the failure is reported as want_code with the
 * message want_msg and want_errno returned, and nothing is left; disarmed, id then starts
 * and is destroyed cleanly. */
static void expect_failure(const char *id, unsigned slot, bool disk, int want_errno, int want_code,
                           const char *want_msg)
{
        struct cella_error err = {0};
        struct container c;
        struct host_state before = host_state();

        int r = start(id, slot, disk, &c, &err);
        int failed_calls = hits;
        disarm();
        print_message("%s: %s\n", id, err.msg);
        assert_int_equal(failed_calls, 1);
        assert_int_equal(r, want_errno);
        assert_int_equal(err.code, want_code);
        assert_string_equal(err.msg, want_msg);
        assert_int_equal(c.pidfd, -EBADF);
        assert_nothing_left(id, before);

        memset(&err, 0, sizeof(err));
        r = start(id, slot, disk, &c, &err);
        if (r < 0)
                fail_msg("%s: the start after the failure: %s", id, err.msg);
        assert_true(runtime_container_is_alive(&c));
        assert_int_equal(runtime_container_destroy(fx.rt, id, &c, &err), 0);
        assert_false(runtime_fixture_cgroup_left(&fx, id));
}

#define REQUIRE_RUNTIME()       \
        do {                    \
                if (!fx.rt)     \
                        skip(); \
        } while (0)

#define REQUIRE_DISK()                                                          \
        do {                                                                    \
                REQUIRE_RUNTIME();                                              \
                if (!runtime_disk_enforced(fx.rt)) {                            \
                        print_message("SKIP: %s\n", runtime_disk_state(fx.rt)); \
                        skip();                                                 \
                }                                                               \
        } while (0)

static void test_socketpair(void **state)
{
        (void)state;
        REQUIRE_RUNTIME();
        fail_socketpair = EMFILE;
        expect_failure("f-sock", 0, false, -EMFILE, CELLA_E_INTERNAL_ERROR,
                       "create sandbox 'f-sock': socketpair: Too many open files");
}

static void test_clone3(void **state)
{
        (void)state;
        REQUIRE_RUNTIME();
        fail_clone3 = EAGAIN;
        expect_failure("f-clone", 1, false, -EAGAIN, CELLA_E_INTERNAL_ERROR,
                       "create sandbox 'f-clone': clone3: Resource temporarily unavailable");
}

/* The sandbox's own v2 directory is made, then one of its cgroups fails: the one made
 * goes. */
static void test_cgroup_dir(void **state)
{
        char want[CELLA_PATH_MAX + 256];
        const char *v1_or_v2 = fx.layout.mode == CGROUP_MODE_HYBRID ? "memory" : "";

        (void)state;
        REQUIRE_RUNTIME();
        /* hybrid: the v1 memory directory (after v2's); pure v2: the v2 one */
        fail_mkdir = EACCES;
        match_a = CG_NAME "/f-cgdir";
        match_b = v1_or_v2;
        if (fx.layout.mode == CGROUP_MODE_HYBRID)
                snprintf(want, sizeof(want),
                         "create sandbox 'f-cgdir': cgroup %s/%s/f-cgdir: Permission denied",
                         fx.layout.v1_root[CGROUP_V1_MEMORY], CG_NAME);
        else
                snprintf(want, sizeof(want),
                         "create sandbox 'f-cgdir': cgroup %s/%s/f-cgdir: Permission denied",
                         fx.layout.v2_root, CG_NAME);
        expect_failure("f-cgdir", 2, false, -EACCES, CELLA_E_PERMISSION_DENIED, want);
}

/* A limit that cannot be written, after the directories were made. */
static void test_cgroup_limit(void **state)
{
        (void)state;
        REQUIRE_RUNTIME();
        fail_write = EINVAL;
        match_a = CG_NAME "/f-cglim/";
        match_b = "pids.max";
        struct cella_error err = {0};
        struct container c;
        struct host_state before = host_state();
        int r = start("f-cglim", 3, false, &c, &err);
        int failed_calls = hits;
        disarm();
        print_message("f-cglim: %s\n", err.msg);
        assert_int_equal(failed_calls, 1);
        assert_int_equal(r, -EINVAL);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        assert_non_null(strstr(err.msg, "create sandbox 'f-cglim': cgroup "));
        assert_non_null(strstr(err.msg, "/f-cglim/pids.max: Invalid argument"));
        assert_nothing_left("f-cglim", before);
}

/* After clone3: the child exists and waits for its maps. It is killed and reaped. */
static void test_uid_map(void **state)
{
        (void)state;
        REQUIRE_RUNTIME();
        fail_write = EPERM;
        match_a = "/proc/";
        match_b = "/uid_map";
        expect_failure("f-uidmap", 4, false, -EPERM, CELLA_E_SANDBOX_UNAVAILABLE,
                       "create sandbox 'f-uidmap': uid_map: Operation not permitted");
}

static void test_idmapped_mount(void **state)
{
        (void)state;
        REQUIRE_RUNTIME();
        fail_mount_setattr = EINVAL;
        expect_failure("f-idmap", 5, false, -EINVAL, CELLA_E_SANDBOX_UNAVAILABLE,
                       "create sandbox 'f-idmap': idmapped mount of the image: Invalid argument");
}

/* mkfs cannot run: the half-made image (a sparse file of the size) is removed, so the next
 * start makes a whole one. */
static void test_disk_mkfs(void **state)
{
        char img[300];

        (void)state;
        REQUIRE_DISK();
        snprintf(img, sizeof(img), "%s/f-mkfs/disk.img", fx.tmpdir);
        fail_spawn = ENOEXEC;
        struct cella_error err = {0};
        struct container c;
        struct host_state before = host_state();
        int r = start("f-mkfs", 10, true, &c, &err);
        int failed_calls = hits;
        disarm();
        print_message("f-mkfs: %s\n", err.msg);
        assert_int_equal(failed_calls, 1);
        assert_int_equal(r, -ENOEXEC);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
        assert_string_equal(err.msg, "create sandbox 'f-mkfs': make disk image: Exec format error");
        assert_int_equal(access(img, F_OK), -1);
        assert_int_equal(errno, ENOENT);
        assert_nothing_left("f-mkfs", before);
        memset(&err, 0, sizeof(err));
        r = start("f-mkfs", 10, true, &c, &err);
        if (r < 0)
                fail_msg("the start after the failure: %s", err.msg);
        assert_int_equal(access(img, F_OK), 0);
        assert_int_equal(runtime_container_destroy(fx.rt, "f-mkfs", &c, &err), 0);
}

/* The disk image is made and attached to a loop device, its mount fails: the loop device
 * is released (autoclear, on the last close). */
static void test_disk_mount(void **state)
{
        (void)state;
        REQUIRE_DISK();
        fail_fsmount = ENOMEM;
        expect_failure("f-mount", 6, true, -ENOMEM, CELLA_E_INTERNAL_ERROR,
                       "create sandbox 'f-mount': mount disk image: Cannot allocate memory");
}

/* The disk is mounted (detached) when a later step fails: the mount and its loop device
 * go with the last descriptor. */
static void test_disk_then_clone3(void **state)
{
        (void)state;
        REQUIRE_DISK();
        fail_clone3 = ENOSPC;
        expect_failure("f-disk", 7, true, -ENOSPC, CELLA_E_NO_SPACE,
                       "create sandbox 'f-disk': clone3: No space left on device");
}

/* The upper layer's files are made on a thread of their own while the child is cloned
 * (decision 0059): their failure comes after the clone, and the child is killed and
 * reaped before anything is sent to it. */
static void test_upper_after_clone3(void **state)
{
        (void)state;
        REQUIRE_RUNTIME();
        fail_write = ENOSPC; /* a short write: EIO */
        match_a = "/f-upper/";
        match_b = "etc/hostname";
        expect_failure("f-upper", 11, false, -EIO, CELLA_E_INTERNAL_ERROR,
                       "create sandbox 'f-upper': /etc/hosts: Input/output error");
}

/* Teardown: the cgroup cannot be removed. The sandbox's processes are gone all the same
 * (PID 1 killed and reaped, its pidfd closed), the error says what is left, and a later
 * destroy (as after a restart: no pidfd) removes it. */
static void test_destroy_cgroup_left(void **state)
{
        struct cella_error err = {0};
        struct container c;
        struct host_state before;
        int r;

        (void)state;
        REQUIRE_RUNTIME();
        before = host_state();
        r = start("f-destroy", 8, false, &c, &err);
        if (r < 0)
                fail_msg("start: %s", err.msg);
        fail_rmdir = EACCES;
        match_a = CG_NAME "/f-destroy";
        match_b = "";
        r = runtime_container_destroy(fx.rt, "f-destroy", &c, &err);
        int failed_calls = hits;
        disarm();
        print_message("f-destroy: %s\n", err.msg);
        assert_true(failed_calls >= 1);
        assert_int_equal(r, -EACCES);
        assert_int_equal(err.code, CELLA_E_PERMISSION_DENIED);
        assert_string_equal(err.msg,
                            "destroy sandbox 'f-destroy': remove cgroup: Permission denied");
        assert_int_equal(c.pidfd, -EBADF);
        errno = 0;
        assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
        assert_int_equal(errno, ECHILD);
        assert_int_equal(host_state().fds, before.fds);
        assert_true(runtime_fixture_cgroup_left(&fx, "f-destroy"));
        assert_int_equal(runtime_container_destroy(fx.rt, "f-destroy", NULL, NULL), 0);
        assert_false(runtime_fixture_cgroup_left(&fx, "f-destroy"));
}

/* Renaming: the kernel hostname cannot be set. The thread that visited the sandbox's UTS
 * namespace is back in the daemon's, and the error names the sandbox. */
static void test_rename_sethostname(void **state)
{
        struct cella_error err = {0};
        struct container c;
        struct stat uts_before, uts_after;
        char dir[256];
        int r;

        (void)state;
        REQUIRE_RUNTIME();
        r = start("f-rename", 9, false, &c, &err);
        if (r < 0)
                fail_msg("start: %s", err.msg);
        snprintf(dir, sizeof(dir), "%s/f-rename", fx.tmpdir);
        assert_int_equal(stat("/proc/thread-self/ns/uts", &uts_before), 0);
        int fds = count_fds();
        fail_sethostname = EPERM;
        r = runtime_container_rename(fx.rt, &c, dir, "renamed", &err);
        int failed_calls = hits;
        disarm();
        print_message("f-rename: %s\n", err.msg);
        assert_int_equal(failed_calls, 1);
        assert_int_equal(r, -EPERM);
        assert_int_equal(err.code, CELLA_E_PERMISSION_DENIED);
        assert_string_equal(err.msg,
                            "name sandbox 'renamed': sethostname: Operation not permitted");
        assert_int_equal(stat("/proc/thread-self/ns/uts", &uts_after), 0);
        assert_int_equal(uts_after.st_ino, uts_before.st_ino);
        assert_int_equal(uts_after.st_dev, uts_before.st_dev);
        assert_int_equal(count_fds(), fds);
        memset(&err, 0, sizeof(err));
        assert_int_equal(runtime_container_rename(fx.rt, &c, dir, "renamed", &err), 0);
        assert_int_equal(runtime_container_destroy(fx.rt, "f-rename", &c, &err), 0);
}

/* The block devices' mask is a directory removed once bound: when it cannot be removed
 * (a path would still reach it, and the tenant could fill the mask through it), the start
 * fails with the mask's step instead of going on without it, and leaves nothing. The
 * failure is in the child (its own copy of the counters), so hits stays 0 here. */
static void test_mask_source_kept(void **state)
{
        struct cella_error err = {0};
        struct container c;

        (void)state;
        REQUIRE_RUNTIME();
        struct host_state before = host_state();
        fail_rmdir = EBUSY;
        match_a = ".cella-empty";
        match_b = "";
        int r = start("f-mask", 12, false, &c, &err);
        disarm();
        print_message("f-mask: %s\n", err.msg);
        assert_int_equal(r, -EBUSY);
        assert_string_equal(err.msg, "create sandbox 'f-mask': mount /sys/devices/virtual/block: "
                                     "Device or resource busy");
        assert_int_equal(c.pidfd, -EBADF);
        assert_nothing_left("f-mask", before);

        memset(&err, 0, sizeof(err));
        r = start("f-mask", 12, false, &c, &err);
        if (r < 0)
                fail_msg("f-mask: the start after the failure: %s", err.msg);
        assert_true(runtime_container_is_alive(&c));
        assert_int_equal(runtime_container_destroy(fx.rt, "f-mask", &c, &err), 0);
}

/* ---- setup ---- */

static int group_setup(void **state)
{
        (void)state;
        return runtime_fixture_setup(&fx);
}

static int group_teardown(void **state)
{
        (void)state;
        runtime_fixture_teardown(&fx);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_socketpair),
                cmocka_unit_test(test_clone3),
                cmocka_unit_test(test_cgroup_dir),
                cmocka_unit_test(test_cgroup_limit),
                cmocka_unit_test(test_uid_map),
                cmocka_unit_test(test_idmapped_mount),
                cmocka_unit_test(test_disk_mount),
                cmocka_unit_test(test_disk_then_clone3),
                cmocka_unit_test(test_upper_after_clone3),
                cmocka_unit_test(test_disk_mkfs),
                cmocka_unit_test(test_destroy_cgroup_left),
                cmocka_unit_test(test_rename_sethostname),
                cmocka_unit_test(test_mask_source_kept),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
