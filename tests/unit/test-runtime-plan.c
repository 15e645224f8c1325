/* The runtime's pure parts: cgroup layout detection from mountinfo text, the cgroup plan,
 * the mount plan, the seccomp rule table, the capability set and the disk plan. */
#include <errno.h>
#include <linux/capability.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <sys/mount.h>
#include <string.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/caps.h"
#include "runtime/cgroup.h"
#include "runtime/disk.h"
#include "runtime/filter.h"
#include "runtime/mounts.h"

static const char hybrid_mountinfo[] =
        "22 1 254:0 / / rw,relatime - ext4 /dev/vda rw\n"
        "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
        "32 31 0:29 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu\n"
        "33 31 0:30 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct\n"
        "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
        "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
        "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd\n"
        "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n";

static const char v2_mountinfo[] =
        "22 1 254:0 / / rw,relatime shared:1 - ext4 /dev/vda rw\n"
        "30 22 0:26 / /sys/fs/cgroup rw,nosuid,nodev,noexec,relatime shared:4 - cgroup2 "
        "cgroup2 rw,nsdelegate,memory_recursiveprot\n";

static void test_detect_hybrid(void **state)
{
        struct cgroup_layout l;
        assert_int_equal(cgroup_detect(hybrid_mountinfo, "", &l), 0);
        assert_int_equal(l.mode, CGROUP_MODE_HYBRID);
        assert_string_equal(l.v2_root, "/sys/fs/cgroup/unified");
        assert_string_equal(l.v1_root[CGROUP_V1_MEMORY], "/sys/fs/cgroup/memory");
        assert_string_equal(l.v1_root[CGROUP_V1_PIDS], "/sys/fs/cgroup/pids");
        /* "cpu", not "cpuacct" (whole words of the option list). */
        assert_string_equal(l.v1_root[CGROUP_V1_CPU], "/sys/fs/cgroup/cpu");
}

static void test_detect_v2(void **state)
{
        struct cgroup_layout l;
        assert_int_equal(
                cgroup_detect(v2_mountinfo, "cpuset cpu io memory hugetlb pids rdma\n", &l), 0);
        assert_int_equal(l.mode, CGROUP_MODE_V2);
        assert_string_equal(l.v2_root, "/sys/fs/cgroup");
        assert_string_equal(l.v1_root[CGROUP_V1_MEMORY], "");
        /* v2 without the controllers and no v1: refused. */
        assert_int_equal(cgroup_detect(v2_mountinfo, "cpuset io\n", &l), -EOPNOTSUPP);
        /* Hybrid wins over a v2 root lacking controllers. */
        assert_int_equal(cgroup_detect(hybrid_mountinfo, "cpuset", &l), 0);
        assert_int_equal(l.mode, CGROUP_MODE_HYBRID);
}

static void test_detect_none_and_escapes(void **state)
{
        struct cgroup_layout l;
        assert_int_equal(cgroup_detect("22 1 254:0 / / rw - ext4 /dev/vda rw\n", "", &l), -ENOENT);
        assert_int_equal(cgroup_detect("", NULL, &l), -ENOENT);
        assert_int_equal(cgroup_detect("garbage\n\n - \n", NULL, &l), -ENOENT);
        assert_int_equal(cgroup_detect("30 22 0:26 / /my\\040cgroup rw - cgroup2 cgroup2 rw\n",
                                       "memory pids cpu", &l),
                         0);
        assert_string_equal(l.v2_root, "/my cgroup");
}

static const struct cgroup_step *find_step(const struct cgroup_plan *p, enum cgroup_op op,
                                           const char *path)
{
        for (size_t i = 0; i < p->n; i++)
                if (p->steps[i].op == op && strcmp(p->steps[i].path, path) == 0)
                        return &p->steps[i];
        return NULL;
}

static size_t index_of(const struct cgroup_plan *p, const struct cgroup_step *s)
{
        return (size_t)(s - p->steps);
}

static void test_plan_v2(void **state)
{
        struct cgroup_layout l;
        static struct cgroup_plan p;
        struct cgroup_limits lim = {
                .memory_bytes = 512u << 20, .cpu_millis = 1500, .pids_max = 100};
        assert_int_equal(cgroup_detect(v2_mountinfo, "memory pids cpu", &l), 0);
        assert_int_equal(cgroup_plan_make(&l, "cella", "box-1", &lim, 1000, &p), 0);
        assert_string_equal(p.v2_dir, "/sys/fs/cgroup/cella/box-1");
        const struct cgroup_step *s;
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cgroup.subtree_control");
        assert_non_null(s);
        assert_string_equal(s->value, "+memory +pids +cpu");
        assert_non_null(
                find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cella/cgroup.subtree_control"));
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cella/box-1/memory.max");
        assert_non_null(s);
        assert_string_equal(s->value, "536870912");
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cella/box-1/memory.swap.max");
        assert_non_null(s);
        assert_string_equal(s->value, "0");
        assert_true(s->optional);
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cella/box-1/pids.max");
        assert_string_equal(s->value, "100");
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cella/box-1/cpu.max");
        assert_string_equal(s->value, "150000 100000");
        /* max.descendants is written before the directory is delegated. */
        const struct cgroup_step *desc =
                find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cella/box-1/cgroup.max.descendants");
        const struct cgroup_step *own =
                find_step(&p, CGROUP_OP_CHOWN, "/sys/fs/cgroup/cella/box-1");
        assert_non_null(desc);
        assert_non_null(own);
        assert_true(index_of(&p, desc) < index_of(&p, own));
        assert_string_equal(own->value, "1000");
        assert_non_null(find_step(&p, CGROUP_OP_CHOWN, "/sys/fs/cgroup/cella/box-1/cgroup.procs"));
        assert_non_null(
                find_step(&p, CGROUP_OP_CHOWN, "/sys/fs/cgroup/cella/box-1/cgroup.threads"));
        assert_non_null(find_step(&p, CGROUP_OP_CHOWN,
                                  "/sys/fs/cgroup/cella/box-1/cgroup.subtree_control"));
        /* The limit files themselves are never handed to the sandbox. */
        assert_null(find_step(&p, CGROUP_OP_CHOWN, "/sys/fs/cgroup/cella/box-1/memory.max"));
        assert_string_equal(p.v1_dir[CGROUP_V1_MEMORY], "");
}

static void test_plan_hybrid(void **state)
{
        struct cgroup_layout l;
        static struct cgroup_plan p;
        struct cgroup_limits lim = {.memory_bytes = 1u << 30, .cpu_millis = 500, .pids_max = 64};
        assert_int_equal(cgroup_detect(hybrid_mountinfo, "", &l), 0);
        assert_int_equal(cgroup_plan_make(&l, "cella", "b", &lim, 4242, &p), 0);
        assert_string_equal(p.v2_dir, "/sys/fs/cgroup/unified/cella/b");
        assert_string_equal(p.v1_dir[CGROUP_V1_MEMORY], "/sys/fs/cgroup/memory/cella/b");
        assert_null(
                find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/unified/cgroup.subtree_control"));
        const struct cgroup_step *s = find_step(
                &p, CGROUP_OP_WRITE, "/sys/fs/cgroup/memory/cella/b/memory.limit_in_bytes");
        assert_string_equal(s->value, "1073741824");
        s = find_step(&p, CGROUP_OP_WRITE,
                      "/sys/fs/cgroup/memory/cella/b/memory.memsw.limit_in_bytes");
        assert_true(s->optional);
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/pids/cella/b/pids.max");
        assert_string_equal(s->value, "64");
        s = find_step(&p, CGROUP_OP_WRITE, "/sys/fs/cgroup/cpu/cella/b/cpu.cfs_quota_us");
        assert_string_equal(s->value, "50000");
        assert_non_null(find_step(&p, CGROUP_OP_MKDIR, "/sys/fs/cgroup/cpu/cella"));
        assert_non_null(find_step(&p, CGROUP_OP_CHOWN, "/sys/fs/cgroup/unified/cella/b"));
        /* No limits: no limit writes. */
        struct cgroup_limits none = {0};
        assert_int_equal(cgroup_plan_make(&l, "cella", "b", &none, 4242, &p), 0);
        assert_null(find_step(&p, CGROUP_OP_WRITE,
                              "/sys/fs/cgroup/memory/cella/b/memory.limit_in_bytes"));
}

/* The v1 "tasks" files a child joins its cgroups by: each opened write-only and
 * close-on-exec, none left open when one is missing, none for a plan without v1 dirs. */
static void test_open_v1_tasks(void **state)
{
        static struct cgroup_plan p;
        char root[] = "/tmp/cella-test-tasks.XXXXXX";
        int fds[_CGROUP_V1_MAX];
        size_t n = 99;

        assert_non_null(mkdtemp(root));
        memset(&p, 0, sizeof(p));
        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                char f[CELLA_PATH_MAX + 32];
                snprintf(p.v1_dir[c], sizeof(p.v1_dir[c]), "%s/%d", root, c);
                assert_int_equal(mkdir(p.v1_dir[c], 0755), 0);
                snprintf(f, sizeof(f), "%s/tasks", p.v1_dir[c]);
                int fd = open(f, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
                assert_true(fd >= 0);
                close(fd);
        }
        assert_int_equal(cgroup_plan_open_v1_tasks(&p, fds, &n), 0);
        assert_int_equal(n, _CGROUP_V1_MAX);
        for (size_t i = 0; i < n; i++) {
                int fl = fcntl(fds[i], F_GETFL);
                assert_int_equal(fl & O_ACCMODE, O_WRONLY);
                assert_true(fcntl(fds[i], F_GETFD) & FD_CLOEXEC);
                assert_int_equal(write(fds[i], "0", 1), 1);
                close(fds[i]);
        }
        /* One missing: an error, and the ones opened before it are closed again. */
        char f[CELLA_PATH_MAX + 32];
        snprintf(f, sizeof(f), "%s/tasks", p.v1_dir[CGROUP_V1_CPU]);
        assert_int_equal(unlink(f), 0);
        int probe = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_true(probe >= 0);
        close(probe);
        assert_int_equal(cgroup_plan_open_v1_tasks(&p, fds, &n), -ENOENT);
        for (int c = 0; c < _CGROUP_V1_MAX; c++)
                assert_int_equal(fds[c], -EBADF);
        int next = open("/dev/null", O_RDONLY | O_CLOEXEC);
        assert_int_equal(next, probe); /* nothing leaked */
        close(next);
        /* Pure v2: no v1 dir, nothing to open. */
        static struct cgroup_plan v2;
        memset(&v2, 0, sizeof(v2));
        assert_int_equal(cgroup_plan_open_v1_tasks(&v2, fds, &n), 0);
        assert_int_equal(n, 0);
        for (int c = 0; c < _CGROUP_V1_MAX; c++) {
                char d[CELLA_PATH_MAX + 32];
                snprintf(d, sizeof(d), "%s/tasks", p.v1_dir[c]);
                unlink(d);
                rmdir(p.v1_dir[c]);
        }
        rmdir(root);
}

static void test_plan_too_long(void **state)
{
        struct cgroup_layout l;
        static struct cgroup_plan p;
        static char id[CELLA_PATH_MAX];
        struct cgroup_limits lim = {0};
        memset(id, 'a', sizeof(id) - 1);
        assert_int_equal(cgroup_detect(v2_mountinfo, "memory pids cpu", &l), 0);
        assert_int_equal(cgroup_plan_make(&l, "cella", id, &lim, 1, &p), -ENAMETOOLONG);
}

static void test_mount_plan(void **state)
{
        static struct mount_plan p;
        assert_int_equal(mounts_plan(&p), 0);
        assert_true(p.n > 10);
        /* proc first, while the host's proc is still visible. */
        assert_int_equal(p.steps[0].kind, MOUNT_FS);
        assert_string_equal(p.steps[0].fstype, "proc");
        assert_true(p.steps[0].flags & MS_NOSUID);
        assert_true(p.steps[0].flags & MS_NOEXEC);
        bool tmp = false, run = false, devpts = false, cg = false, kcore = false, sys_ro = false;
        bool sysfs_seen = false, agent_dir = false, agent_exe = false, shm = false, mask = false;
        int n_tmpfs = 0;
        for (size_t i = 0; i < p.n; i++) {
                const struct mount_step *s = &p.steps[i];
                /* All targets are relative to the new root, never host paths. */
                assert_true(s->target[0] != '/');
                assert_null(strstr(s->target, ".."));
                if (s->kind == MOUNT_FS && strcmp(s->target, "run") == 0) {
                        run = true;
                        assert_string_equal(s->fstype, "tmpfs");
                        assert_true(s->flags & MS_NOSUID);
                }
                /* /tmp is a directory of the sandbox's own files, /dev/shm one of the /dev
                 * tmpfs: no filesystem of their own (fewer superblocks, decision 0060) */
                if (strcmp(s->target, "tmp") == 0) {
                        tmp = true;
                        assert_int_equal(s->kind, MOUNT_DIR);
                        assert_int_equal(s->mode, 01777);
                }
                if (strcmp(s->target, "dev/shm") == 0) {
                        shm = true;
                        assert_int_equal(s->kind, MOUNT_MKDIR);
                        assert_int_equal(s->mode, 01777);
                }
                if (s->kind == MOUNT_FS && strcmp(s->fstype, "tmpfs") == 0)
                        n_tmpfs++;
                /* the block devices' mask: an empty dir of the /dev tmpfs, read-only */
                if (strcmp(s->target, "sys/devices/virtual/block") == 0) {
                        mask = true;
                        assert_true(sysfs_seen);
                        assert_int_equal(s->kind, MOUNT_EMPTY_RO);
                        assert_true(s->flags & MS_RDONLY);
                        assert_true(strncmp(s->source, "dev/", 4) == 0);
                }
                if (s->kind == MOUNT_FS && strcmp(s->fstype, "devpts") == 0) {
                        devpts = true;
                        assert_non_null(strstr(s->data, "newinstance"));
                        assert_non_null(strstr(s->data, "ptmxmode=0666"));
                }
                if (s->kind == MOUNT_FS && strcmp(s->fstype, "sysfs") == 0) {
                        sysfs_seen = true;
                        assert_true(s->flags & MS_RDONLY);
                }
                if (s->kind == MOUNT_FS && strcmp(s->fstype, "cgroup2") == 0) {
                        cg = true;
                        assert_true(sysfs_seen);
                        assert_string_equal(s->target, "sys/fs/cgroup");
                        assert_false(s->flags & MS_RDONLY);
                }
                if (s->kind == MOUNT_BIND && strcmp(s->target, "proc/kcore") == 0) {
                        kcore = true;
                        assert_string_equal(s->source, "dev/null");
                }
                if (s->kind == MOUNT_RO_BIND && strcmp(s->target, "proc/sys") == 0)
                        sys_ro = true;
                if (s->kind == MOUNT_BIND && s->source[0] == '/')
                        assert_true(strncmp(s->source, "/dev/", 5) == 0);
                /* The agent's dir is made after /run is mounted, the sandbox root's only;
                 * its executable's mount point is a file in it. */
                if (s->kind == MOUNT_MKDIR && strcmp(s->target, "run/.cella") == 0) {
                        assert_true(run);
                        assert_int_equal(s->mode, 0700);
                        agent_dir = true;
                }
                if (s->kind == MOUNT_FILE && strcmp(s->target, "run/.cella/cella-init") == 0) {
                        assert_true(agent_dir);
                        agent_exe = true;
                }
        }
        assert_true(tmp && run && devpts && cg && kcore && sys_ro && agent_dir && agent_exe);
        assert_true(shm && mask);
        assert_int_equal(n_tmpfs, 2); /* /dev and /run */
}

static bool has_rule(const char *name, int err, enum filter_match m)
{
        size_t n;
        const struct filter_rule *r = filter_rules(&n);
        for (size_t i = 0; i < n; i++)
                if (strcmp(r[i].syscall, name) == 0)
                        return r[i].err == err && r[i].match == m;
        return false;
}

static void test_filter_rules(void **state)
{
        static const char *const always[] = {
                "kexec_load",
                "kexec_file_load",
                "init_module",
                "finit_module",
                "delete_module",
                "bpf",
                "keyctl",
                "add_key",
                "request_key",
                "mount",
                "umount2",
                "pivot_root",
                "move_mount",
                "open_tree",
                "fsopen",
                "fsmount",
                "fsconfig",
                "fspick",
                "mount_setattr",
                "setns",
                "swapon",
                "swapoff",
                "reboot",
                "acct",
                "quotactl",
                "perf_event_open",
                "userfaultfd",
                "open_by_handle_at",
                "syslog",
                "lookup_dcookie",
                "iopl",
                "ioperm",
                "vhangup",
                "uselib",
                "settimeofday",
                "clock_settime",
                "clock_adjtime",
                "adjtimex",
                "io_uring_setup",
                "io_uring_enter",
                "io_uring_register",
                "nfsservctl",
        };
        for (size_t i = 0; i < sizeof(always) / sizeof(always[0]); i++)
                if (!has_rule(always[i], EPERM, FILTER_ALWAYS))
                        fail_msg("no EPERM rule for %s", always[i]);
        assert_true(has_rule("clone3", ENOSYS, FILTER_ALWAYS));
        assert_true(has_rule("unshare", EPERM, FILTER_A0_HAS_FLAG));
        assert_true(has_rule("clone", EPERM, FILTER_A0_HAS_FLAG));
        assert_true(has_rule("personality", EPERM, FILTER_PERSONALITY));
        /* Never the basics. */
        assert_false(has_rule("execve", EPERM, FILTER_ALWAYS));
        assert_false(has_rule("read", EPERM, FILTER_ALWAYS));

        struct filter_prog prog = {0};
        size_t skipped = 99;
        assert_int_equal(filter_build(&prog, &skipped), 0);
        assert_non_null(prog.insns);
        assert_true(prog.len > 20);
        assert_int_equal(skipped, 0);
        filter_prog_done(&prog);
        assert_null(prog.insns);
}

static void test_caps(void **state)
{
        uint64_t m = caps_default_mask();
        assert_true(m & (1ull << CAP_CHOWN));
        assert_true(m & (1ull << CAP_NET_BIND_SERVICE));
        assert_true(m & (1ull << CAP_AUDIT_WRITE));
        assert_false(m & (1ull << CAP_SYS_ADMIN));
        assert_false(m & (1ull << CAP_NET_ADMIN));
        assert_false(m & (1ull << CAP_SYS_PTRACE));
        assert_false(m & (1ull << CAP_SYS_MODULE));
        assert_int_equal(__builtin_popcountll(m), 14);
        struct caps c;
        assert_int_equal(caps_init(&c), 0);
        assert_int_equal(c.keep, m);
        caps_done(&c);
}

/* The instance types' disk sizes (src/daemon/instance-type.c) become image sizes (4 KiB
 * multiples) and inode limits (one per 16 KiB). */
static void test_disk_plan_instance_types(void **state)
{
        static const struct {
                uint64_t disk;
                uint64_t size;
                uint64_t inodes;
        } want[] = {
                {2000000000ull, 1999998976ull, 122070},    /* lite */
                {4000000000ull, 3999997952ull, 244140},    /* basic */
                {8000000000ull, 8000000000ull, 488281},    /* standard-1 */
                {12000000000ull, 11999997952ull, 732421},  /* standard-2 */
                {16000000000ull, 16000000000ull, 976562},  /* standard-3 */
                {20000000000ull, 19999997952ull, 1220703}, /* standard-4 */
                {64ull << 20, 64ull << 20, 4096},          /* --disk-limit-override 64M */
        };
        struct disk_plan p;

        for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
                assert_int_equal(disk_plan_make("/d/sandboxes/box", "/d/t", want[i].disk, &p), 0);
                assert_int_equal(p.size_bytes, want[i].size);
                assert_int_equal(p.size_bytes % 4096, 0);
                assert_int_equal(p.inodes, want[i].inodes);
                assert_string_equal(p.image, "/d/sandboxes/box/disk.img");
                assert_string_equal(p.loop_note, "/d/sandboxes/box/disk.loop");
                char t[64];
                snprintf(t, sizeof(t), "/d/t/ext4-v1-%llu.img", (unsigned long long)want[i].size);
                assert_string_equal(p.template, t);
                snprintf(t, sizeof(t), "/d/t/spare-%llu.img", (unsigned long long)want[i].size);
                assert_string_equal(p.spare, t);
        }
}

static void test_disk_plan_errors(void **state)
{
        struct disk_plan p;
        char dir[CELLA_PATH_MAX];

        assert_int_equal(disk_plan_make("/d", NULL, 0, &p), -EINVAL);
        assert_int_equal(disk_plan_make("/d", NULL, CELLA_DISK_MIN_BYTES - 1, &p), -EINVAL);
        assert_int_equal(disk_plan_make("/d", NULL, CELLA_DISK_MIN_BYTES, &p), 0);
        assert_int_equal(disk_plan_make("/d", NULL, CELLA_DISK_MAX_BYTES, &p), 0);
        assert_int_equal(disk_plan_make("/d", NULL, CELLA_DISK_MAX_BYTES + 1, &p), -EINVAL);
        assert_int_equal(disk_plan_make(NULL, NULL, CELLA_DISK_MIN_BYTES, &p), -EINVAL);
        memset(dir, 'a', sizeof(dir) - 8);
        dir[0] = '/';
        dir[sizeof(dir) - 8] = '\0';
        assert_int_equal(disk_plan_make(dir, NULL, CELLA_DISK_MIN_BYTES, &p), -ENAMETOOLONG);
        assert_int_equal(disk_plan_make("/d", dir, CELLA_DISK_MIN_BYTES, &p), -ENAMETOOLONG);
        assert_int_equal(disk_plan_make("/d", NULL, CELLA_DISK_MIN_BYTES, &p), 0);
        assert_string_equal(p.template, "");
        assert_string_equal(p.spare, "");
}

static void test_disk_mkfs_argv(void **state)
{
        struct disk_plan p;
        struct disk_mkfs_argv a;
        char line[1024] = "";

        assert_int_equal(disk_plan_make("/d/s/x", NULL, 2000000000ull, &p), 0);
        disk_mkfs_argv(&p, "/usr/sbin/mkfs.ext4", p.image, &a);
        for (size_t i = 0; a.argv[i]; i++) {
                assert_true(i < DISK_MKFS_ARGS - 1);
                if (i)
                        strncat(line, " ", sizeof(line) - strlen(line) - 1);
                strncat(line, a.argv[i], sizeof(line) - strlen(line) - 1);
        }
        assert_string_equal(line,
                            "/usr/sbin/mkfs.ext4 -q -F -b 4096 -I 256 -m 0 -N 122070 "
                            "-O ^resize_inode -J size=4 -E lazy_itable_init=1,lazy_journal_init=1,"
                            "nodiscard,root_owner=0:0 -- /d/s/x/disk.img");
}

static void test_disk_size_parse(void **state)
{
        static const struct {
                const char *s;
                int r;
                uint64_t v;
        } cases[] = {
                {"64M", 0, 64ull << 20},
                {"64m", 0, 64ull << 20},
                {"64MiB", 0, 64ull << 20},
                {"64MB", 0, 64ull << 20},
                {"2G", 0, 2ull << 30},
                {"1T", 0, 1ull << 40},
                {"512k", 0, 512ull << 10},
                {"4096", 0, 4096},
                {"4096B", 0, 4096},
                {"0", -EINVAL, 0},
                {"0M", -EINVAL, 0},
                {"", -EINVAL, 0},
                {"M", -EINVAL, 0},
                {"-1M", -EINVAL, 0},
                {"64X", -EINVAL, 0},
                {"64MiBx", -EINVAL, 0},
                {"64 M", -EINVAL, 0},
                {"1.5G", -EINVAL, 0},
                {"99999999999999999999", -ERANGE, 0},
                {"9999999999T", -ERANGE, 0},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                uint64_t v = 0;
                int r = disk_size_parse(cases[i].s, strlen(cases[i].s), &v);
                if (r != cases[i].r)
                        fail_msg("'%s': %d, want %d", cases[i].s, r, cases[i].r);
                if (r == 0)
                        assert_int_equal(v, cases[i].v);
        }
        /* Not NUL-terminated: only len bytes count. */
        uint64_t v = 0;
        assert_int_equal(disk_size_parse("64Mjunk", 3, &v), 0);
        assert_int_equal(v, 64ull << 20);
}

static void test_disk_mode(void **state)
{
        enum disk_mode m;
        assert_int_equal(disk_mode_from_name("required", &m), 0);
        assert_int_equal(m, DISK_MODE_REQUIRED);
        assert_string_equal(disk_mode_name(m), "required");
        assert_int_equal(disk_mode_from_name("auto", &m), 0);
        assert_int_equal(m, DISK_MODE_AUTO);
        assert_int_equal(disk_mode_from_name("off", &m), 0);
        assert_int_equal(m, DISK_MODE_OFF);
        assert_string_equal(disk_mode_name(m), "off");
        assert_int_equal(disk_mode_from_name("on", &m), -EINVAL);
        assert_int_equal(disk_mode_from_name(NULL, &m), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_detect_hybrid),
                cmocka_unit_test(test_detect_v2),
                cmocka_unit_test(test_detect_none_and_escapes),
                cmocka_unit_test(test_plan_v2),
                cmocka_unit_test(test_plan_hybrid),
                cmocka_unit_test(test_open_v1_tasks),
                cmocka_unit_test(test_plan_too_long),
                cmocka_unit_test(test_mount_plan),
                cmocka_unit_test(test_filter_rules),
                cmocka_unit_test(test_caps),
                cmocka_unit_test(test_disk_plan_instance_types),
                cmocka_unit_test(test_disk_plan_errors),
                cmocka_unit_test(test_disk_mkfs_argv),
                cmocka_unit_test(test_disk_size_parse),
                cmocka_unit_test(test_disk_mode),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
