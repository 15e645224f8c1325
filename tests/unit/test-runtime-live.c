/* Live tests of the runtime: real containers (user/pid/mount/net/uts/ipc/cgroup
 * namespaces, idmapped overlay, cgroups, seccomp) running tests/helpers/probe-init as PID 1
 * on the default image. Needs root and the image; skips with a message otherwise. Uses uid
 * slots above 4000 of the last uid block a daemon can claim (runtime/host-claim.h: daemons
 * take the first free block, and refuse to start on a block where processes they do not
 * know run) and the cgroup name "cella-test", so it never meets a running daemon. */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "common/macros.h"
#include "runtime/caps.h"
#include "runtime/cgroup.h"
#include "runtime/container.h"
#include "runtime/host-claim.h"
#include "runtime/layer.h"
#include "runtime-fixture.h"

#define ROOTFS RUNTIME_FIXTURE_ROOTFS
#define CG_NAME "cella-test"

static const char *const test_ids[] = {"iso", "mem",     "pids", "sep-a",  "sep-b",    "again",
                                       "bad", "planted", "nest", "orphan", "planted2", "rename"};
/* CELLA_TEST_PROBE overrides the probe, e.g. a static one for a sanitizer build. */
static struct runtime_fixture fx = {.what = "runtime live tests",
                                    .cgroup_name = CG_NAME,
                                    .ids = test_ids,
                                    .n_ids = ARRAY_SIZE(test_ids),
                                    .tmpdir = "/tmp/cella-runtime-test-XXXXXX"};
/* Containers started (static storage: a failed assertion leaves the test function), so
 * the group teardown can destroy what a failing test left running. */
struct tracked {
        const char *id;
        struct container *c;
};
static struct tracked live[16];

static void track(const char *id, struct container *c)
{
        for (size_t i = 0; i < ARRAY_SIZE(live); i++)
                if (!live[i].c || live[i].c == c) {
                        live[i] = (struct tracked){id, c};
                        return;
                }
}

static uid_t slot_base(unsigned slot)
{
        uint32_t last_block = CELLA_UID_BASE + (HOST_CLAIM_UID_BASE_MAX - CELLA_UID_BASE) /
                                                       HOST_CLAIM_UID_BLOCK * HOST_CLAIM_UID_BLOCK;

        return last_block + (4000u + slot) * CELLA_UID_RANGE;
}

static void make_dir(char *out, size_t size, const char *name)
{
        snprintf(out, size, "%s/%s", fx.tmpdir, name);
        assert_true(mkdir(out, 0700) == 0 || errno == EEXIST);
}

static int start_layer(const char *name, unsigned slot, const char *rootfs, const char *layer,
                       uint64_t mem, uint32_t pids, struct container *c, struct cella_error *err)
{
        char dir[256];
        make_dir(dir, sizeof(dir), name);
        struct container_spec spec = {
                .id = name,
                .hostname = name,
                .rootfs = rootfs,
                .layers = &layer,
                .n_layers = layer ? 1 : 0,
                .dir = dir,
                .uid_base = slot_base(slot),
                .uid_count = CELLA_UID_RANGE,
                .limits = {.memory_bytes = mem, .cpu_millis = 1000, .pids_max = pids},
        };
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int r = runtime_container_start(fx.rt, &spec, c, err);
        clock_gettime(CLOCK_MONOTONIC, &b);
        if (r == 0)
                track(name, c);
        if (r == 0)
                print_message("start '%s': %.2f ms\n", name,
                              (double)(b.tv_sec - a.tv_sec) * 1e3 +
                                      (double)(b.tv_nsec - a.tv_nsec) / 1e6);
        return r;
}

static int start(const char *name, unsigned slot, const char *rootfs, uint64_t mem, uint32_t pids,
                 struct container *c, struct cella_error *err)
{
        return start_layer(name, slot, rootfs, NULL, mem, pids, c, err);
}

/* The host pid of a sandbox's PID 1, found in its v2 cgroup (whichever process of this
 * program started it): the process whose innermost pid is 1. 0 when there is none. */
static pid_t pid1_of(const char *name)
{
        char path[CELLA_PATH_MAX + 64], line[256];
        pid_t found = 0;

        cgroup_v2_dir(&fx.layout, CG_NAME, name, path, sizeof(path));
        strncat(path, "/cgroup.procs", sizeof(path) - strlen(path) - 1);
        FILE *procs = fopen(path, "re");
        if (!procs)
                return 0;
        while (!found && fgets(line, sizeof(line), procs)) {
                pid_t pid = (pid_t)strtol(line, NULL, 10);
                snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
                FILE *st = fopen(path, "re");
                while (st && fgets(line, sizeof(line), st))
                        if (strncmp(line, "NSpid:", 6) == 0) {
                                const char *last = strrchr(line, '\t');
                                if (last && strtol(last + 1, NULL, 10) == 1)
                                        found = pid;
                        }
                if (st)
                        fclose(st);
        }
        fclose(procs);
        return found;
}

/* Connect to a sandbox's agent socket as cellad does: resolved in its root
 * (runtime_container_agent_socket), connected through /proc/self/fd. Returns the
 * connected socket, or -errno (-ESRCH: no sandbox runs). */
static int agent_connect(const char *name)
{
        struct container c = {.pid = pid1_of(name), .pidfd = -EBADF};
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        if (c.pid <= 0)
                return -ESRCH;
        c.pidfd = (int)syscall(SYS_pidfd_open, c.pid, 0);
        if (c.pidfd < 0)
                return -ESRCH;
        int path_fd = runtime_container_agent_socket(&c);
        close(c.pidfd);
        if (path_fd < 0)
                return path_fd;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "/proc/self/fd/%d", path_fd);
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int r = fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
        close(path_fd);
        if (r < 0) {
                if (fd >= 0)
                        close(fd);
                return r;
        }
        return fd;
}

/* Send one command to the probe, return its JSON answer. */
static json_t *ask(const char *name, const char *cmd)
{
        int fd = agent_connect(name);
        if (fd < 0)
                fail_msg("connect to %s's agent: %s", name, strerror(-fd));
        assert_int_equal(write(fd, cmd, strlen(cmd)), (ssize_t)strlen(cmd));
        static char buf[1 << 20];
        size_t n = 0;
        for (;;) {
                ssize_t r = read(fd, buf + n, sizeof(buf) - 1 - n);
                assert_true(r >= 0);
                if (r == 0)
                        break;
                n += (size_t)r;
        }
        close(fd);
        buf[n] = '\0';
        json_error_t je;
        json_t *j = json_loads(buf, 0, &je);
        if (!j)
                fail_msg("probe answered '%s' to '%s'", buf, cmd);
        return j;
}

static const char *jstr(json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        if (!json_is_string(v))
                fail_msg("probe fact %s missing", k);
        return json_string_value(v);
}

static json_int_t jint(json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        if (!json_is_integer(v))
                fail_msg("probe fact %s missing", k);
        return json_integer_value(v);
}

static bool jbool(json_t *o, const char *k)
{
        json_t *v = json_object_get(o, k);
        if (!json_is_boolean(v))
                fail_msg("probe fact %s missing", k);
        return json_is_true(v);
}

/* Is there a read-only mount at mountpoint in this mountinfo text? */
static bool mount_is_ro(const char *mountinfo, const char *mountpoint)
{
        char needle[256];
        snprintf(needle, sizeof(needle), " %s ro,", mountpoint);
        for (const char *line = mountinfo; line && *line;) {
                const char *eol = strchr(line, '\n');
                size_t len = eol ? (size_t)(eol - line) : strlen(line);
                const char *hit = strstr(line, needle);
                if (hit && hit < line + len)
                        return true;
                line = eol ? eol + 1 : NULL;
        }
        return false;
}

static bool host_mountinfo_mentions(const char *s)
{
        FILE *f = fopen("/proc/self/mountinfo", "re");
        char line[4096];
        bool found = false;
        assert_non_null(f);
        while (fgets(line, sizeof(line), f))
                if (strstr(line, s))
                        found = true;
        fclose(f);
        return found;
}

static void destroy_and_check(const char *id, struct container *c)
{
        struct cella_error err = {0};
        pid_t pid = c->pid;
        assert_int_equal(runtime_container_destroy(fx.rt, id, c, &err), 0);
        assert_int_equal(c->pidfd, -EBADF);
        assert_int_equal(kill(pid, 0), -1);
        assert_int_equal(errno, ESRCH);
        assert_false(runtime_fixture_cgroup_left(&fx, id));
        assert_false(host_mountinfo_mentions(fx.tmpdir));
}

static int group_setup(void **state)
{
        (void)state;
        return runtime_fixture_setup(&fx);
}

static int group_teardown(void **state)
{
        (void)state;
        /* what a failing test left running, with its container (pidfd) */
        for (size_t i = 0; fx.rt && i < ARRAY_SIZE(live); i++)
                if (live[i].c && live[i].c->pidfd >= 0)
                        runtime_container_destroy(fx.rt, live[i].id, live[i].c, NULL);
        runtime_fixture_teardown(&fx);
        return 0;
}

#define REQUIRE_RUNTIME()       \
        do {                    \
                if (!fx.rt)     \
                        skip(); \
        } while (0)

static void test_isolation(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        char expect[256], path[512];
        struct stat st;

        /* What cellad's thread may have: ignored and blocked signals. The sandbox must
         * not inherit them. */
        sigset_t blk, old;
        sigemptyset(&blk);
        sigaddset(&blk, SIGUSR1);
        sigaddset(&blk, SIGTERM);
        void (*old_pipe)(int) = signal(SIGPIPE, SIG_IGN);
        sigprocmask(SIG_BLOCK, &blk, &old);
        int started = start("iso", 1, ROOTFS, 256u << 20, 128, &c, &err);
        sigprocmask(SIG_SETMASK, &old, NULL);
        signal(SIGPIPE, old_pipe);
        if (started < 0)
                fail_msg("start: %s", err.msg);
        assert_true(c.pid > 0);
        assert_true(c.pidfd >= 0);
        assert_true(runtime_container_is_alive(&c));
        assert_int_equal(runtime_container_reap(&c, NULL), 0);

        json_t *f = ask("iso", "facts");
        assert_int_equal(jint(f, "pid"), 1);
        assert_int_equal(jint(f, "uid"), 0);
        assert_int_equal(jint(f, "gid"), 0);
        snprintf(expect, sizeof(expect), "%u", (unsigned)slot_base(1));
        assert_non_null(strstr(jstr(f, "uid_map"), expect));
        assert_non_null(strstr(jstr(f, "gid_map"), expect));
        assert_string_equal(jstr(f, "hostname"), "iso");
        assert_string_equal(jstr(f, "etc_hostname"), "iso\n");
        assert_non_null(strstr(jstr(f, "etc_hosts"), "127.0.0.1 localhost iso"));
        json_t *ifs = json_object_get(f, "interfaces");
        assert_int_equal(json_array_size(ifs), 1);
        assert_string_equal(json_string_value(json_array_get(ifs, 0)), "lo");
        assert_true(jbool(f, "lo_up"));
        assert_false(jbool(f, "host_work_visible"));
        assert_false(jbool(f, "host_images_visible"));
        assert_int_equal(jint(f, "mount_errno"), EPERM);
        assert_int_equal(jint(f, "unshare_user_errno"), EPERM);
        assert_int_equal(jint(f, "personality_set_errno"), EPERM);
        assert_true(jint(f, "personality_query") >= 0);
        assert_int_equal(jint(f, "clone_newuser_errno"), EPERM);
        assert_int_equal(jint(f, "clone3_errno"), ENOSYS);
        /* PID 1 runs from the read-only bind of the agent's binary in its own dir, not
         * from a host path, and cannot write it. */
        assert_string_equal(jstr(f, "exe"), "/run/.cella/cella-init");
        assert_true(jint(f, "exe_write_errno") != 0);
        snprintf(expect, sizeof(expect), "%016llx", (unsigned long long)caps_default_mask());
        assert_string_equal(jstr(f, "cap_eff"), expect);
        assert_string_equal(jstr(f, "cap_bnd"), expect);
        assert_string_equal(jstr(f, "cap_amb"), "0000000000000000");
        assert_string_equal(jstr(f, "seccomp"), "2");
        assert_string_equal(jstr(f, "sig_ign"), "0000000000000000");
        assert_string_equal(jstr(f, "sig_blk"), "0000000000000000");
        assert_string_equal(jstr(f, "no_new_privs"), "1");
        assert_string_equal(jstr(f, "oom_score_adj"),
                            runtime_oom_protected(fx.rt) ? "-1000\n" : "0\n");
        assert_non_null(strstr(jstr(f, "cgroup"), "0::/\n"));
        assert_true(jbool(f, "lower_root_owned"));
        assert_true(jbool(f, "workspace_writable"));
        assert_true(jbool(f, "etc_writable"));
        assert_true(jbool(f, "copy_up"));
        assert_true(jbool(f, "tmp_writable"));
        /* /tmp on the writable layer, /dev/shm in the /dev tmpfs: no mounts of their own;
         * the block devices hidden by an empty directory nothing can be made in */
        assert_null(strstr(jstr(f, "mountinfo"), " /tmp "));
        assert_null(strstr(jstr(f, "mountinfo"), " /dev/shm "));
        assert_true(jbool(f, "shm_writable"));
        assert_true(jbool(f, "shm_on_dev"));
        assert_true(mount_is_ro(jstr(f, "mountinfo"), "/sys/devices/virtual/block"));
        assert_int_equal(jint(f, "block_mask_entries"), 0);
        assert_true(jint(f, "block_mask_mkdir_errno") != 0);
        assert_true(jint(f, "block_mask_create_errno") != 0);
        assert_string_equal(jstr(f, "cwd"), "/workspace");
        assert_true(jbool(f, "keys_masked"));
        assert_true(jbool(f, "kcore_masked")); /* or absent on this kernel */
        assert_true(jint(f, "proc_sys_write_errno") != 0);
        assert_true(mount_is_ro(jstr(f, "mountinfo"), "/proc/sys"));
        assert_true(mount_is_ro(jstr(f, "mountinfo"), "/proc/bus"));
        assert_true(mount_is_ro(jstr(f, "mountinfo"), "/sys"));
        assert_true(jbool(f, "dev_null"));
        assert_true(jbool(f, "dev_ptmx"));
        assert_true(jbool(f, "devpts"));
        assert_true(jbool(f, "cgroup_delegated"));
        /* Only 0-3 and the accepted connection. */
        json_t *fds = json_object_get(f, "fds");
        for (size_t i = 0; i < json_array_size(fds); i++)
                assert_true(json_integer_value(json_array_get(fds, i)) <= 4);
        json_decref(f);

        /* Host side: writes landed in upper/, owned by the sandbox's root. */
        snprintf(path, sizeof(path), "%s/iso/upper/workspace/probe.txt", fx.tmpdir);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_uid, slot_base(1));
        snprintf(path, sizeof(path), "%s/iso/upper/etc/debian_version", fx.tmpdir);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_uid, slot_base(1));
        /* The agent's socket is the sandbox's own (/run/.cella/agent.sock, sandbox
         * root's, 0600), none in the sandbox dir; its log is the sandbox root's. */
        snprintf(path, sizeof(path), "/proc/%d/root/run/.cella/agent.sock", (int)c.pid);
        assert_int_equal(lstat(path, &st), 0);
        assert_true(S_ISSOCK(st.st_mode));
        assert_int_equal(st.st_mode & 0777, 0600);
        assert_int_equal(st.st_uid, slot_base(1));
        snprintf(path, sizeof(path), "/proc/%d/root/run/.cella", (int)c.pid);
        assert_int_equal(lstat(path, &st), 0);
        assert_int_equal(st.st_mode & 0777, 0700);
        snprintf(path, sizeof(path), "%s/iso/agent.sock", fx.tmpdir);
        assert_int_equal(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/iso/agent.log", fx.tmpdir);
        assert_int_equal(stat(path, &st), 0);
        assert_int_equal(st.st_uid, slot_base(1));
        assert_int_equal(st.st_mode & 0777, 0600);
        /* The image itself is untouched. */
        assert_int_equal(access(ROOTFS "/etc/probe-copy-up", F_OK), -1);
        /* Nothing mounted on the host. */
        assert_false(host_mountinfo_mentions(fx.tmpdir));

        destroy_and_check("iso", &c);
        /* Idempotent. */
        assert_int_equal(runtime_container_destroy(fx.rt, "iso", NULL, &err), 0);
}

static void test_memory_limit(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        if (start("mem", 2, ROOTFS, 64u << 20, 128, &c, &err) < 0)
                fail_msg("start: %s", err.msg);
        json_t *r = ask("mem", "oom 256");
        assert_int_equal(jint(r, "killed_by"), 9);
        json_decref(r);
        /* PID 1 survived (oom_score_adj -1000). */
        assert_true(runtime_container_is_alive(&c));
        r = ask("mem", "oom 8");
        assert_int_equal(jint(r, "exit"), 0);
        json_decref(r);
        destroy_and_check("mem", &c);
}

/* Sub-cgroups the sandbox made (as the agent does per command), with processes in them,
 * are killed and removed depth-first. */
static void test_destroy_removes_sub_cgroups(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        char path[CELLA_PATH_MAX + 64];
        if (start("nest", 9, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("start: %s", err.msg);
        json_t *r = ask("nest", "subcgroup");
        if (!jbool(r, "ok"))
                fail_msg("subcgroup failed: errno %d", (int)jint(r, "errno"));
        assert_true(strlen(jstr(r, "cgroup_procs")) > 0);
        json_decref(r);
        cgroup_v2_dir(&fx.layout, CG_NAME, "nest", path, sizeof(path));
        strncat(path, "/cmd/1/cgroup.procs", sizeof(path) - strlen(path) - 1);
        assert_int_equal(access(path, F_OK), 0);
        destroy_and_check("nest", &c);
}

/* After a daemon restart PID 1 is not our child: destroy works from the id alone. A
 * forked process starts the container and exits without tearing it down. */
static void test_destroy_after_restart(void **state)
{
        REQUIRE_RUNTIME();
        struct cella_error err = {0};
        char path[CELLA_PATH_MAX + 64];
        int status = 0;
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
                struct container c;
                _exit(start("orphan", 10, ROOTFS, 0, 64, &c, &err) == 0 ? 0 : 1);
        }
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
        json_t *f = ask("orphan", "facts");
        assert_int_equal(jint(f, "pid"), 1);
        json_decref(f);
        assert_true(runtime_fixture_cgroup_left(&fx, "orphan"));
        assert_int_equal(runtime_container_destroy(fx.rt, "orphan", NULL, &err), 0);
        assert_false(runtime_fixture_cgroup_left(&fx, "orphan"));
        /* Nobody listens any more: no PID 1, no socket. */
        assert_int_equal(agent_connect("orphan"), -ESRCH);
        cgroup_v2_dir(&fx.layout, CG_NAME, "orphan", path, sizeof(path));
        assert_int_equal(access(path, F_OK), -1);
}

static void test_pids_limit(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        if (start("pids", 3, ROOTFS, 0, 16, &c, &err) < 0)
                fail_msg("start: %s", err.msg);
        json_t *r = ask("pids", "pids 100");
        assert_true(jint(r, "forked") < 16);
        assert_int_equal(jint(r, "errno"), EAGAIN);
        json_decref(r);
        destroy_and_check("pids", &c);
}

static void test_uid_ranges_separate(void **state)
{
        REQUIRE_RUNTIME();
        static struct container a, b;
        struct cella_error err = {0};
        char path[512];
        if (start("sep-a", 4, ROOTFS, 0, 64, &a, &err) < 0)
                fail_msg("start a: %s", err.msg);
        /* A file owned by A's root, placed where B can see it. */
        /* Before B starts (the overlay caches what it looked up). */
        make_dir(path, sizeof(path), "sep-b");
        snprintf(path, sizeof(path), "%s/sep-b/upper", fx.tmpdir);
        assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
        snprintf(path, sizeof(path), "%s/sep-b/upper/workspace", fx.tmpdir);
        assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
        assert_int_equal(chown(path, slot_base(5), slot_base(5)), 0);
        snprintf(path, sizeof(path), "%s/sep-b/upper/workspace/a-secret", fx.tmpdir);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(fchown(fd, slot_base(4), slot_base(4)), 0);
        close(fd);
        if (start("sep-b", 5, ROOTFS, 0, 64, &b, &err) < 0)
                fail_msg("start b: %s", err.msg);
        json_t *r = ask("sep-b", "read /workspace/a-secret");
        assert_int_equal(jint(r, "stat_errno"), 0);
        assert_int_equal(jint(r, "uid"), 65534); /* unmapped */
        assert_int_equal(jint(r, "open_errno"), EACCES);
        json_decref(r);
        /* A's files are not in B's view at all, and the reverse. */
        json_decref(ask("sep-a", "facts"));
        r = ask("sep-b", "read /workspace/probe.txt");
        assert_int_equal(jint(r, "stat_errno"), ENOENT);
        json_decref(r);
        destroy_and_check("sep-a", &a);
        destroy_and_check("sep-b", &b);
}

static void test_restart_keeps_upper_and_reaps(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        int status = 0;
        if (start("again", 6, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("start: %s", err.msg);
        json_decref(ask("again", "facts")); /* writes /workspace/probe.txt */
        /* PID 1 exits by itself: reap reports its status. */
        int sfd = agent_connect("again");
        assert_true(sfd >= 0);
        assert_int_equal(write(sfd, "exit 7", 6), 6);
        char byte;
        assert_int_equal(read(sfd, &byte, 1), 0);
        close(sfd);
        int r;
        while ((r = runtime_container_reap(&c, &status)) == 0) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
        }
        assert_int_equal(r, 1);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 7);
        assert_int_equal(c.pidfd, -EBADF);
        assert_int_equal(runtime_container_destroy(fx.rt, "again", &c, &err), 0);
        assert_false(runtime_fixture_cgroup_left(&fx, "again"));

        if (start("again", 6, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("restart: %s", err.msg);
        json_t *j = ask("again", "read /workspace/probe.txt");
        assert_int_equal(jint(j, "stat_errno"), 0);
        assert_int_equal(jint(j, "uid"), 0);
        json_decref(j);
        destroy_and_check("again", &c);
}

/* A sandbox may leave anything in its upper layer, e.g. /etc as a symlink to a host path:
 * the next start must not write through it, and it still starts (the tenant's /etc is its
 * own business). */
static void test_planted_symlink_not_followed(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        char path[600], target[256];
        make_dir(path, sizeof(path), "planted");
        snprintf(path, sizeof(path), "%s/planted/upper", fx.tmpdir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(target, sizeof(target), "%s/host-target", fx.tmpdir);
        assert_int_equal(mkdir(target, 0700), 0);
        snprintf(path, sizeof(path), "%s/planted/upper/etc", fx.tmpdir);
        assert_int_equal(symlink(target, path), 0);
        if (start("planted", 8, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("start with /etc a symlink: %s", err.msg);
        snprintf(path, sizeof(path), "%s/hosts", target);
        assert_int_equal(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/hostname", target);
        assert_int_equal(access(path, F_OK), -1);
        destroy_and_check("planted", &c);

        /* /tmp planted as a symlink to a host path: replaced by a directory of the
         * sandbox's own, nothing written through it. */
        make_dir(path, sizeof(path), "planted2");
        snprintf(path, sizeof(path), "%s/planted2/upper", fx.tmpdir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/planted2/upper/tmp", fx.tmpdir);
        assert_int_equal(symlink(target, path), 0);
        if (start("planted2", 11, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("start: %s", err.msg);
        json_t *f = ask("planted2", "facts");
        assert_true(jbool(f, "tmp_writable"));
        json_decref(f);
        snprintf(path, sizeof(path), "%s/planted2/upper/tmp", fx.tmpdir);
        struct stat tst;
        assert_int_equal(lstat(path, &tst), 0);
        assert_true(S_ISDIR(tst.st_mode));
        assert_int_equal(tst.st_mode & 07777, 01777);
        snprintf(path, sizeof(path), "%s/probe", target);
        assert_int_equal(access(path, F_OK), -1);
        destroy_and_check("planted2", &c);

        /* /tmp and /run planted as files, /workspace as a symlink out of the sandbox: the
         * mount points become directories, the agent starts in / (not in the target). */
        make_dir(path, sizeof(path), "planted3");
        snprintf(path, sizeof(path), "%s/planted3/upper", fx.tmpdir);
        assert_int_equal(mkdir(path, 0755), 0);
        snprintf(path, sizeof(path), "%s/planted3/upper/tmp", fx.tmpdir);
        assert_int_equal(close(open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)), 0);
        snprintf(path, sizeof(path), "%s/planted3/upper/run", fx.tmpdir);
        assert_int_equal(close(open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644)), 0);
        snprintf(path, sizeof(path), "%s/planted3/upper/workspace", fx.tmpdir);
        assert_int_equal(symlink(target, path), 0);
        if (start("planted3", 13, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("start with /tmp and /run files: %s", err.msg);
        f = ask("planted3", "facts");
        assert_true(jbool(f, "tmp_writable"));
        assert_non_null(strstr(jstr(f, "mountinfo"), " /run rw,nosuid,nodev"));
        json_decref(f);
        destroy_and_check("planted3", &c);
}

/* A warm-pool claim names a running container: kernel hostname, /etc/hostname and
 * /etc/hosts change, the daemon's own hostname does not; a symlink planted over
 * /etc/hostname in the upper layer is not written through. */
static void test_rename(void **state)
{
        REQUIRE_RUNTIME();
        static struct container c;
        struct cella_error err = {0};
        char dir[300], target[300], before[128], after[128];
        if (start("rename", 12, ROOTFS, 0, 64, &c, &err) < 0)
                fail_msg("start: %s", err.msg);
        assert_int_equal(gethostname(before, sizeof(before)), 0);
        snprintf(dir, sizeof(dir), "%s/rename", fx.tmpdir);
        if (runtime_container_rename(fx.rt, &c, dir, "claimed-name", &err) < 0)
                fail_msg("rename: %s", err.msg);
        assert_int_equal(gethostname(after, sizeof(after)), 0);
        assert_string_equal(before, after);
        json_t *f = ask("rename", "facts");
        assert_string_equal(jstr(f, "hostname"), "claimed-name");
        assert_string_equal(jstr(f, "etc_hostname"), "claimed-name\n");
        assert_non_null(strstr(jstr(f, "etc_hosts"), "127.0.0.1 localhost claimed-name\n"));
        json_decref(f);

        snprintf(target, sizeof(target), "%s/rename-target", fx.tmpdir);
        int fd = open(target, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, "host\n", 5), 5);
        close(fd);
        /* A symlink planted at /etc/hostname inside the sandbox (through its own root, as
         * its processes would) pointing at a host path: the rename refuses it and writes
         * nothing anywhere. */
        {
                pid_t child = fork();
                int st = -1;

                assert_true(child >= 0);
                if (child == 0) {
                        char ns[64];
                        int ufd, mfd;

                        snprintf(ns, sizeof(ns), "/proc/%d/ns/user", (int)c.pid);
                        ufd = open(ns, O_RDONLY | O_CLOEXEC);
                        snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int)c.pid);
                        mfd = open(ns, O_RDONLY | O_CLOEXEC);
                        if (ufd < 0 || mfd < 0)
                                _exit(10);
                        if (setns(ufd, CLONE_NEWUSER) < 0 || setresgid(0, 0, 0) < 0 ||
                            setresuid(0, 0, 0) < 0)
                                _exit(20 + (errno & 15));
                        if (setns(mfd, CLONE_NEWNS) < 0)
                                _exit(40 + (errno & 15));
                        if (unlink("/etc/hostname") < 0)
                                _exit(60 + (errno & 15));
                        if (symlink(target, "/etc/hostname") < 0)
                                _exit(80 + (errno & 15));
                        _exit(0);
                }
                assert_int_equal(waitpid(child, &st, 0), child);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        fail_msg("plant a symlink in the sandbox: step %d", WEXITSTATUS(st));
        }
        assert_int_equal(runtime_container_rename(fx.rt, &c, dir, "other", &err), -ELOOP);
        print_message("expected failure: %s\n", err.msg);
        char buf[16] = "";
        fd = open(target, O_RDONLY | O_CLOEXEC);
        assert_true(fd >= 0);
        assert_int_equal(read(fd, buf, sizeof(buf) - 1), 5);
        close(fd);
        assert_string_equal(buf, "host\n");
        destroy_and_check("rename", &c);
}

/* A running container's writable layer captured (frozen and thawed), then the lower layer
 * of another container on another uid slot: it sees the file as root's, its own writes go
 * to its own upper layer and leave the snapshot as it was, and the first still runs. */
static void test_snapshot_layer(void **state)
{
        REQUIRE_RUNTIME();
        static struct container p, c;
        struct cella_error err = {0};
        struct layer_copy_stats st;
        struct stat before, after;
        char path[512];

        if (start("snapp", 9, ROOTFS, 0, 64, &p, &err) < 0)
                fail_msg("start: %s", err.msg);
        json_decref(ask("snapp", "facts")); /* writes /workspace/probe.txt */
        int top = open(fx.tmpdir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        assert_true(top >= 0);
        snprintf(path, sizeof(path), "%s/snapp", fx.tmpdir);
        if (runtime_container_snapshot(fx.rt, "snapp", path, slot_base(9), CELLA_UID_RANGE, top,
                                       "snapl", NULL, &st, &err) < 0)
                fail_msg("snapshot: %s", err.msg);
        assert_true(st.cloned + st.copied >= 1);
        snprintf(path, sizeof(path), "%s/snapl/workspace/probe.txt", fx.tmpdir);
        assert_int_equal(stat(path, &before), 0);
        assert_int_equal(before.st_uid, 0);
        /* thawed: the parent answers */
        json_t *j = ask("snapp", "read /workspace/probe.txt");
        assert_int_equal(jint(j, "stat_errno"), 0);
        json_decref(j);

        snprintf(path, sizeof(path), "%s/snapl", fx.tmpdir);
        if (start_layer("snapc", 10, ROOTFS, path, 0, 64, &c, &err) < 0)
                fail_msg("start from snapshot: %s", err.msg);
        j = ask("snapc", "read /workspace/probe.txt");
        assert_int_equal(jint(j, "stat_errno"), 0);
        assert_int_equal(jint(j, "uid"), 0);
        json_decref(j);
        json_decref(ask("snapc", "facts")); /* rewrites it: a copy-up into its own upper */
        snprintf(path, sizeof(path), "%s/snapc/upper/workspace/probe.txt", fx.tmpdir);
        assert_int_equal(access(path, F_OK), 0);
        snprintf(path, sizeof(path), "%s/snapl/workspace/probe.txt", fx.tmpdir);
        assert_int_equal(stat(path, &after), 0);
        assert_int_equal(after.st_ino, before.st_ino);
        assert_int_equal(after.st_mtim.tv_sec, before.st_mtim.tv_sec);
        assert_int_equal(after.st_mtim.tv_nsec, before.st_mtim.tv_nsec);
        destroy_and_check("snapc", &c);
        destroy_and_check("snapp", &p);
        assert_int_equal(layer_remove(top, "snapl"), 0);
        close(top);
}

static void test_start_failure_is_reported(void **state)
{
        REQUIRE_RUNTIME();
        struct container c = {.pid = 0, .pidfd = -EBADF};
        struct cella_error err = {0};
        assert_int_equal(start("bad", 7, "/nonexistent-rootfs", 0, 64, &c, &err), -ENOENT);
        assert_true(cella_error_is_set(&err));
        assert_non_null(strstr(err.msg, "create sandbox 'bad': "));
        print_message("expected failure: %s\n", err.msg);
        assert_false(runtime_fixture_cgroup_left(&fx, "bad"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_isolation),
                cmocka_unit_test(test_memory_limit),
                cmocka_unit_test(test_pids_limit),
                cmocka_unit_test(test_destroy_removes_sub_cgroups),
                cmocka_unit_test(test_destroy_after_restart),
                cmocka_unit_test(test_uid_ranges_separate),
                cmocka_unit_test(test_restart_keeps_upper_and_reaps),
                cmocka_unit_test(test_start_failure_is_reported),
                cmocka_unit_test(test_planted_symlink_not_followed),
                cmocka_unit_test(test_rename),
                cmocka_unit_test(test_snapshot_layer),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
