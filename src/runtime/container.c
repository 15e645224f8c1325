/* Container start and teardown (see container.h and docs/runtime.md).
 *
 * Parent (cellad):  plan -> dirs, agent log, agent bind, cgroups, v1 "tasks" files opened
 *                   -> clone3 (into the v2 cgroup) -> uid/gid maps, oom_score_adj,
 *                   idmapped lower mount -> fds -> network -> wait for exec (EOF on the
 *                   sync socket) or a {step, errno} report.
 * Child:            joins its v1 cgroups ("0" to each "tasks") -> fds -> disk, ids,
 *                   overlay -> cgroupns, hostname, mounts, agent bind, pivot_root, agent
 *                   socket, lo, caps, no_new_privs, setsid, seccomp, fds,
 *                   execve(/run/.cella/cella-init).
 *
 * The child between clone3 and exec only uses data computed before the clone (its copy
 * of our memory), raw syscalls and stack buffers: cellad may have threads, so no malloc
 * and no locks there. */
#include "runtime/container.h"
#include "runtime/container-child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <grp.h>
#include <linux/openat2.h>
#include <linux/seccomp.h>
#include <sys/wait.h>
#include <dirent.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/probe.h"
#include "runtime/runtime-internal.h"
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* How long the child may take from clone to exec. */
#define START_TIMEOUT_MS 30000

/* ---- the parent ---- */

static int write_at(int dirfd, const char *name, const char *content, uid_t owner)
{
        if (unlinkat(dirfd, name, 0) < 0 && errno != ENOENT)
                return -errno;
        _cleanup_close_ int fd =
                openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        size_t len = strlen(content);
        if (write(fd, content, len) != (ssize_t)len)
                return -EIO;
        if (fchown(fd, owner, owner) < 0)
                return -errno;
        return 0;
}

/* The runtime's own /etc/hostname and /etc/hosts of a sandbox named hostname. */
static void etc_hostname_text(const char *hostname, char *buf, size_t size)
{
        snprintf(buf, size, "%s\n", hostname);
}

static void etc_hosts_text(const char *hostname, char *buf, size_t size)
{
        snprintf(buf, size, "127.0.0.1 localhost %s\n::1 localhost\n", hostname);
}

/* Replace the content of an existing regular file in place (same inode: an overlay that
 * has it as its upper file sees the new content), never following a symlink. Written over
 * and then cut to its length, not opened with O_TRUNC: ext4 flushes on close a file that
 * was truncated to nothing (its auto_da_alloc), a synchronous write-out on a claim's path
 * (decision 0059). The cut is made only when the file was longer than the text (an
 * ftruncate is a journalled inode change on the sandbox's disk even to the same size; a
 * claim's name is mostly longer than its pool name). */
static int rewrite_at(int dirfd, const char *name, const char *content)
{
        struct stat st;

        _cleanup_close_ int fd = openat(dirfd, name, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        size_t len = strlen(content);
        if (pwrite(fd, content, len, 0) != (ssize_t)len)
                return -EIO;
        if (st.st_size > (off_t)len && ftruncate(fd, (off_t)len) < 0)
                return -errno;
        return 0;
}

/* mkdir name in dirfd if missing, owned by owner, 0755; returns an O_PATH fd to it that
 * never follows a symlink the sandbox may have planted in its upper layer. */
static int ensure_dir(int dirfd, const char *name, uid_t owner, int flags)
{
        if (mkdirat(dirfd, name, 0755) < 0 && errno != EEXIST)
                return -errno;
        int fd = openat(dirfd, name, flags | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        char self[64];
        snprintf(self, sizeof(self), "/proc/self/fd/%d", fd);
        /* chmod through the descriptor: the name could be swapped for a symlink. */
        if (fchownat(fd, "", owner, owner, AT_EMPTY_PATH) < 0 || chmod(self, 0755) < 0) {
                int e = -errno;
                close(fd);
                return e;
        }
        return fd;
}

/* An error of ensure_dir() or write_at() that the tenant's own files explain: a symlink
 * (ELOOP), a file or whiteout where a directory should be (ENOTDIR, EEXIST), a directory
 * where a file should be (EISDIR). */
static bool is_tenant_made(int r)
{
        return r == -ELOOP || r == -ENOTDIR || r == -EEXIST || r == -EISDIR;
}

static int write_proc(pid_t pid, const char *file, const char *content)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, file);
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        size_t len = strlen(content);
        ssize_t w = write(fd, content, len);
        if (w < 0)
                return -errno;
        return (size_t)w == len ? 0 : -EIO;
}

static int send_fd(int sock, int fd)
{
        char byte = 'g';
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } cm;
        memset(&cm, 0, sizeof(cm));
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cm.buf,
                             .msg_controllen = sizeof(cm.buf)};
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        ssize_t n;
        do
                n = sendmsg(sock, &msg, MSG_NOSIGNAL);
        while (n < 0 && errno == EINTR);
        return n < 0 ? -errno : 0;
}

/* The idmapped, read-only, detached copy of rootfs (the image, or a snapshot's layer) seen
 * through the user namespace userns. */
int container_lower(const char *rootfs, int userns)
{
        _cleanup_close_ int tree =
                open_tree(AT_FDCWD, rootfs, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (tree < 0)
                return -errno;
        struct mount_attr attr = {
                .attr_set =
                        MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .userns_fd = (uint64_t)userns,
        };
        if (mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &attr, sizeof(attr)) < 0)
                return -errno;
        return TAKE_FD(tree);
}

/* The same for the child's user namespace. */
static int make_lower(const char *rootfs, pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        _cleanup_close_ int userns = open(path, O_RDONLY | O_CLOEXEC);
        if (userns < 0)
                return -errno;
        return container_lower(rootfs, userns);
}

/* A user namespace whose ids [from, from + count) are the host's [to, to + count), and
 * nothing else: an idmapped mount made with it shows a file that a sandbox of host range
 * `from` owns as owned by the same id of the sandbox of range `to` (ids outside `from`'s
 * range: the overflow id). Made by a child that only waits for its pipe to close (it
 * runs nothing but read and _exit: safe after a clone from a threaded process). Returns
 * an fd of the namespace or -errno. */
int container_mapped_userns(uint32_t from, uint32_t to, uint32_t count)
{
        char map[64], path[64];
        int pfd[2], r = 0;

        if (pipe2(pfd, O_CLOEXEC) < 0)
                return -errno;
        struct clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = CLONE_NEWUSER;
        ca.exit_signal = SIGCHLD;
        pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid == 0) {
                char b;
                close(pfd[1]);
                while (read(pfd[0], &b, 1) < 0 && errno == EINTR)
                        ;
                _exit(0);
        }
        close(pfd[0]);
        if (pid < 0) {
                r = -errno;
                close(pfd[1]);
                return r;
        }
        snprintf(map, sizeof(map), "%u %u %u\n", (unsigned)from, (unsigned)to, (unsigned)count);
        r = write_proc(pid, "uid_map", map);
        if (r >= 0)
                r = write_proc(pid, "gid_map", map);
        int ns = -EBADF;
        if (r >= 0) {
                snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
                ns = open(path, O_RDONLY | O_CLOEXEC);
                if (ns < 0)
                        r = -errno;
        }
        close(pfd[1]);
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR)
                ;
        return r < 0 ? r : ns;
}

/* The idmapped, read-only, detached copy of a layer stored in a snapshot's disk clone
 * (dir/disk.img): its filesystem mounted read-only (shared by every sandbox made from it),
 * "upper" of it cloned, its owners (id_base + n) mapped onto the sandbox's range. */
int container_lower_disk(const char *dir, uid_t id_base, const struct container_spec *spec,
                         int own_userns)
{
        int m, r;

        r = disk_open_ro(dir, &m);
        if (r < 0)
                return r;
        _cleanup_close_ int mnt = m;
        _cleanup_close_ int tree =
                open_tree(mnt, "upper", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_SYMLINK_NOFOLLOW);
        if (tree < 0)
                return -errno;
        _cleanup_close_ int userns = -EBADF;
        if (id_base) {
                userns = container_mapped_userns((uint32_t)id_base, (uint32_t)spec->uid_base,
                                                 spec->uid_count);
        } else {
                userns = fcntl(own_userns, F_DUPFD_CLOEXEC, 3);
                if (userns < 0)
                        userns = -errno;
        }
        if (userns < 0)
                return userns;
        struct mount_attr attr = {
                .attr_set =
                        MOUNT_ATTR_IDMAP | MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV,
                .userns_fd = (uint64_t)userns,
        };
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        return TAKE_FD(tree);
}

/* container_lower_disk() for the child's user namespace. */
static int lower_disk_of(const char *dir, uid_t id_base, const struct container_spec *spec,
                         pid_t pid)
{
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/ns/user", (int)pid);
        _cleanup_close_ int userns = open(path, O_RDONLY | O_CLOEXEC);
        if (userns < 0)
                return -errno;
        return container_lower_disk(dir, id_base, spec, userns);
}

static pid_t do_clone3(int cgroup_fd, int *ret_pidfd)
{
        struct clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = CLONE_NEWUSER | CLONE_NEWPID | CLONE_NEWNS | CLONE_NEWUTS | CLONE_NEWIPC |
                   CLONE_NEWNET | CLONE_PIDFD | CLONE_INTO_CGROUP;
        ca.pidfd = (uint64_t)(uintptr_t)ret_pidfd;
        ca.exit_signal = SIGCHLD;
        ca.cgroup = (uint64_t)cgroup_fd;
        return (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
}

/* SIGKILL PID 1 and reap it. The pidfd may be non-blocking (cellad watches it with
 * uv_poll, which sets O_NONBLOCK): then waitid answers EAGAIN until the process is gone,
 * so wait for the pidfd to become readable (= exited) first. */
static void kill_and_reap(int pidfd)
{
        struct pollfd pfd = {.fd = pidfd, .events = POLLIN};
        siginfo_t si;
        syscall(SYS_pidfd_send_signal, pidfd, SIGKILL, NULL, 0);
        for (;;) {
                if (waitid((idtype_t)P_PIDFD, (id_t)pidfd, &si, WEXITED) == 0)
                        return;
                if (errno == EINTR)
                        continue;
                if (errno != EAGAIN)
                        return;
                if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
                        return;
        }
}

/* Parent side after clone3: maps, oom_score_adj, lower mount, the descriptors to the
 * child (which then builds its root; it joined its v1 cgroups itself, decision 0059); the
 * network while it does; then wait for exec. Returns 0 or -errno with *err set (no
 * "create sandbox" context: the caller's). */
static int parent_setup(const struct runtime *rt, const struct container_spec *spec, pid_t pid,
                        int psync, struct cella_error *err)
{
        const char *what = "uid_map";
        char buf[64];
        int r;

        snprintf(buf, sizeof(buf), "0 %u %u\n", (unsigned)spec->uid_base,
                 (unsigned)spec->uid_count);
        r = write_proc(pid, "uid_map", buf);
        if (r >= 0) {
                what = "gid_map";
                r = write_proc(pid, "gid_map", buf);
        }
        if (r < 0)
                return cella_error_errno(err, -r, "%s", what);
        PROBE("id maps");
        if (rt->oom_protect) {
                /* The agent must not be the OOM victim; it resets this for what it runs. */
                what = "oom_score_adj";
                r = write_proc(pid, "oom_score_adj", "-1000");
        }
        _cleanup_close_ int lower = -EBADF;
        if (r >= 0) {
                what = "idmapped mount of the image";
                lower = make_lower(spec->rootfs, pid);
                r = lower < 0 ? lower : 0;
        }
        PROBE("oom_score_adj, idmapped image");
        int snap[CELLA_SNAPSHOT_MAX_LAYERS];
        size_t made = 0;
        for (; r >= 0 && made < spec->n_layers; made++) {
                const struct container_layer *li =
                        spec->layer_info ? &spec->layer_info[made] : NULL;
                what = "idmapped mount of a snapshot";
                if (li && li->disk)
                        snap[made] = lower_disk_of(spec->layers[made], li->id_base, spec, pid);
                else
                        snap[made] = make_lower(spec->layers[made], pid);
                r = snap[made] < 0 ? snap[made] : 0;
                if (r < 0)
                        break;
        }
        if (r >= 0) {
                what = "start child";
                r = send_fd(psync, lower);
        }
        for (size_t i = 0; r >= 0 && i < spec->n_layers; i++)
                r = send_fd(psync, snap[i]);
        for (size_t i = 0; i < made && i < spec->n_layers; i++)
                if (snap[i] >= 0)
                        close(snap[i]);
        if (r < 0)
                return cella_error_errno(err, -r, "%s", what);
        PROBE("fds sent");

        /* The network, while the child builds its root and execs: up before the start
         * returns, so before the agent is given anything to run. */
        if (spec->network) {
                r = net_sandbox_setup(rt->net, spec->slot, pid, spec->net_allow, spec->net_allow_n,
                                      err);
                if (r < 0)
                        return r;
                PROBE("network");
        }

        /* EOF: the child exec'd (the sync socket is close-on-exec). A child stuck in the
         * kernel (e.g. a hung filesystem) must not hang the daemon forever. */
        struct pollfd pfd = {.fd = psync, .events = POLLIN};
        int pr;
        do
                pr = poll(&pfd, 1, START_TIMEOUT_MS);
        while (pr < 0 && errno == EINTR);
        if (pr == 0)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "timed out setting up");
        struct child_report rep;
        ssize_t got;
        do
                got = recv(psync, &rep, sizeof(rep), 0);
        while (got < 0 && errno == EINTR);
        if (got == 0) {
                PROBE("child: the rest of its mounts, pivot, caps, seccomp, exec");
                return 0;
        }
        if (got != (ssize_t)sizeof(rep) || rep.step < 0 || rep.step >= _STEP_MAX)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "child failed");
        if (rep.step == STEP_MOUNTS && rep.index >= 0 && (size_t)rep.index < rt->mounts.n)
                return cella_error_errno(err, rep.err, "mount /%s",
                                         rt->mounts.steps[rep.index].target);
        return cella_error_errno(err, rep.err, "%s", container_child_step_names[rep.step]);
}

/* The upper layer's skeleton (container_prepare_upper: its inodes on the sandbox's disk)
 * made on a thread of its own while the start makes the cgroups and clones the child
 * (decision 0059): the child needs it only once it has its descriptors, so it is joined
 * before they are sent. Without a thread it is made inline, as before. */
struct upper_job {
        struct runtime *rt;
        const struct container_spec *spec;
        int root_fd;
        pthread_t thread;
        bool threaded;
        bool joined;
        int r;
        struct cella_error err;
};

static void *upper_run(void *arg)
{
        struct upper_job *u = arg;

        u->r = container_prepare_upper(u->rt, u->spec, u->root_fd, &u->err);
        return NULL;
}

static void upper_begin(struct upper_job *u)
{
        u->threaded = pthread_create(&u->thread, NULL, upper_run, u) == 0;
        if (!u->threaded)
                upper_run(u);
}

/* Wait for the skeleton: 0, or its -errno with *err set to its error. Once per job has
 * effect; later calls answer the same. */
static int upper_join(struct upper_job *u, struct cella_error *err)
{
        if (u->threaded && !u->joined)
                pthread_join(u->thread, NULL);
        u->joined = true;
        if (u->r < 0 && err)
                *err = u->err;
        return u->r < 0 ? u->r : 0;
}

static int spawn(const struct runtime *rt, const struct container_spec *spec,
                 const struct cgroup_plan *plan, struct child_args *args, struct upper_job *upper,
                 struct container *ret, struct cella_error *err)
{
        int sv[2], r;

        _cleanup_close_ int cgroup_fd = open(plan->v2_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cgroup_fd < 0)
                return cella_error_errno(err, errno, "open cgroup");
        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) < 0)
                return cella_error_errno(err, errno, "socketpair");
        _cleanup_close_ int psync = sv[0];
        _cleanup_close_ int csync = sv[1];
        args->sync_fd = csync;
        args->psync_fd = psync;

        r = cgroup_plan_open_v1_tasks(plan, args->v1_tasks, &args->n_v1_tasks);
        if (r < 0)
                return cella_error_errno(err, -r, "open v1 cgroups");

        int pidfd = -EBADF;
        PROBE("cgroup open, socketpair");
        pid_t pid = do_clone3(cgroup_fd, &pidfd);
        int clone_errno = errno;
        for (size_t i = 0; pid != 0 && i < args->n_v1_tasks; i++)
                close(args->v1_tasks[i]);
        if (pid < 0)
                return cella_error_errno(err, clone_errno, "clone3");
        if (pid == 0)
                container_child_main(args);
        close(TAKE_FD(csync));
        PROBE("clone3");
        /* The child is told nothing before the upper layer is there. */
        r = upper_join(upper, err);
        PROBE("upper, work, /etc files (their thread joined)");
        if (r < 0) {
                kill_and_reap(pidfd);
                close(pidfd);
                return r;
        }

        r = parent_setup(rt, spec, pid, psync, err);
        if (r < 0) {
                kill_and_reap(pidfd);
                close(pidfd);
                if (err)
                        err->code = CELLA_E_SANDBOX_UNAVAILABLE;
                return r;
        }
        ret->pid = pid;
        ret->pidfd = pidfd;
        return 0;
}

/* The sandbox's disk, as a detached mount in *ret (left -EBADF when the sandbox has no
 * image and gets none: disk limits not enforced here, no limit in the spec, or a sandbox
 * made before they were, whose upper layer is still in its directory). A sandbox that has
 * an image always uses it, enforcement or not. Returns 0 or -errno with *err set. */
int container_open_disk(struct runtime *rt, const struct container_spec *spec, int dir_fd, int *ret,
                        struct cella_error *err)
{
        const char *what = "disk";
        bool has_image = disk_exists(spec->dir), created = false;
        struct disk_plan plan;
        struct stat st;
        int r;

        if (!has_image) {
                bool legacy = fstatat(dir_fd, "upper", &st, AT_SYMLINK_NOFOLLOW) == 0;
                if (legacy || !rt->disk_enforced || spec->disk_bytes == 0)
                        return 0;
        }
        /* An existing image keeps the size it was made with. */
        r = disk_plan_make(spec->dir, rt->disk_template_dir[0] ? rt->disk_template_dir : NULL,
                           has_image ? CELLA_DISK_MIN_BYTES : spec->disk_bytes, &plan);
        if (r < 0)
                return cella_error_errno(err, -r, "disk limit of %llu bytes",
                                         (unsigned long long)spec->disk_bytes);
        /* A new disk made ahead of time, if one of this size is ready. */
        if (!has_image && rt->spares && disk_spares_take(rt->spares, &plan, ret) == 0)
                return 0;
        r = disk_open(&plan, rt->disk_enforced ? rt->mkfs : NULL, ret, &created, &what);
        if (r < 0)
                return cella_error_errno(err, -r, "%s", what);
        return 0;
}

/* The agent's log (its stdout and stderr), opened in the sandbox dir (cellad's, 0700: no
 * path of it is the tenant's) with no symlink followed, by resolution flags rather than
 * O_NOFOLLOW: the file's flags are what a checkpoint's restore reopens it with through
 * /proc/self/fd, where O_NOFOLLOW refuses the magic link. Owned by the sandbox's root,
 * whose restored agent does that reopen (docs/decisions/0050); it stays reachable only
 * through the descriptor. Returns the fd or -errno. */
int container_open_agent_log(int dir_fd, uid_t owner)
{
        struct open_how how = {
                .flags = O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC,
                .mode = 0600,
                .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                           RESOLVE_NO_XDEV,
        };
        _cleanup_close_ int fd = (int)syscall(SYS_openat2, dir_fd, "agent.log", &how, sizeof(how));
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode) || st.st_nlink != 1)
                return -EPERM;
        if ((st.st_uid != owner || st.st_gid != owner) && fchown(fd, owner, owner) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* A detached bind mount of the agent's executable, read-only, no setuid, no devices, for
 * one start (a detached mount is attached once). Returns the fd or -errno. */
int container_agent_bind(const struct runtime *rt)
{
        _cleanup_close_ int fd =
                open_tree(rt->agent_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        if (fd < 0)
                return -errno;
        struct mount_attr attr = {.attr_set =
                                          MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV};
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* The sandbox's upper and work dirs in root_fd (its disk, or its dir), and the runtime's
 * files in the upper layer: /etc/hostname, /etc/hosts, /etc/resolv.conf, /workspace when
 * the image has none. 0, or -errno with *err set. */
int container_prepare_upper(struct runtime *rt, const struct container_spec *spec, int root_fd,
                            struct cella_error *err)
{
        const char *name = spec->hostname;
        char buf[512];
        uid_t owner = spec->uid_base;
        int r;

        _cleanup_close_ int upper_fd = ensure_dir(root_fd, "upper", owner, O_RDONLY);
        if (upper_fd < 0)
                return cella_error_errno(err, -upper_fd, "upper dir");
        _cleanup_close_ int work_fd = ensure_dir(root_fd, "work", owner, O_PATH);
        if (work_fd < 0)
                return cella_error_errno(err, -work_fd, "work dir");
        /* The upper layer is the tenant's: whatever it made of /etc or /workspace (a
         * symlink, a file, a whiteout after rm -rf) is never followed and never fails the
         * start; the runtime's files are then not written (the tenant broke its own /etc)
         * and commands start in / (decision 0032). */
        {
                _cleanup_close_ int etc_fd = ensure_dir(upper_fd, "etc", owner, O_RDONLY);
                r = 0;
                if (etc_fd < 0 && !is_tenant_made(etc_fd))
                        return cella_error_errno(err, -etc_fd, "/etc");
                if (etc_fd >= 0) {
                        etc_hostname_text(spec->hostname, buf, sizeof(buf));
                        r = write_at(etc_fd, "hostname", buf, owner);
                        if (r >= 0) {
                                etc_hosts_text(spec->hostname, buf, sizeof(buf));
                                r = write_at(etc_fd, "hosts", buf, owner);
                        }
                        if (r >= 0 && spec->network)
                                r = write_at(etc_fd, "resolv.conf", net_resolv_conf(rt->net),
                                             owner);
                }
                if (r < 0 && !is_tenant_made(r))
                        return cella_error_errno(err, -r, "/etc/hosts");
                if (etc_fd < 0 || r < 0)
                        log_info("sandbox '%s': its /etc is not a plain directory (%s); "
                                 "/etc/hostname and /etc/hosts not written",
                                 name, strerror(etc_fd < 0 ? -etc_fd : -r));
                snprintf(buf, sizeof(buf), "%s/workspace", spec->rootfs);
                struct stat st;
                if (stat(buf, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        _cleanup_close_ int ws = ensure_dir(upper_fd, "workspace", owner, O_PATH);
                        if (ws < 0 && !is_tenant_made(ws))
                                return cella_error_errno(err, -ws, "/workspace");
                }
        }

        return 0;
}

static int container_start_rest(struct runtime *rt, const struct container_spec *spec, int dir_fd,
                                int disk_fd, struct upper_job *upper, struct container *ret,
                                struct cella_error *err);

/* The start, every failure undone; the messages say what failed, the caller adds whose. */
static int container_start(struct runtime *rt, const struct container_spec *spec,
                           struct container *ret, struct cella_error *err)
{
        int r;

        if (spec->uid_count == 0 || (uint64_t)spec->uid_base + spec->uid_count > UINT32_MAX)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "bad uid range");
        if (strlen(spec->hostname) > 64)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "hostname too long");
        if (spec->n_layers > CELLA_SNAPSHOT_MAX_LAYERS)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "more than %d snapshot layers",
                                       CELLA_SNAPSHOT_MAX_LAYERS);

        _cleanup_close_ int dir_fd = open(spec->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return cella_error_errno(err, errno, "open %s", spec->dir);

        /* 0. The disk: upper and work live in the sandbox's image when it has one. */
        _cleanup_close_ int disk_fd = -EBADF;
        PROBE_BEGIN();
        r = container_open_disk(rt, spec, dir_fd, &disk_fd, err);
        if (r < 0)
                return r;
        PROBE("disk");
        int root_fd = disk_fd >= 0 ? disk_fd : dir_fd;

        /* 1. upper, work, /etc/hostname, /etc/hosts, /workspace: on their own thread while
         * the rest goes on, joined before the child gets its descriptors (spawn). */
        struct upper_job upper = {.rt = rt, .spec = spec, .root_fd = root_fd};
        upper_begin(&upper);
        PROBE("upper, work, /etc files (their thread started)");
        r = container_start_rest(rt, spec, dir_fd, disk_fd, &upper, ret, err);
        if (r < 0)
                upper_join(&upper, NULL); /* the error is the first one's */
        return r;
}

/* container_start's part after the disk and the upper layer's thread: the agent's files,
 * the cgroups, the child. Every failure undone but the upper layer's (its caller joins). */
static int container_start_rest(struct runtime *rt, const struct container_spec *spec, int dir_fd,
                                int disk_fd, struct upper_job *upper, struct container *ret,
                                struct cella_error *err)
{
        uid_t owner = spec->uid_base;
        int r;

        /* 2. The agent's listening socket is bound by the child inside the sandbox
         * (child_main); a socket left at the path older builds used goes, so that only
         * the sandbox's own is ever reached (runtime_container_agent_socket). */
        if (unlinkat(dir_fd, "agent.sock", 0) < 0 && errno != ENOENT)
                return cella_error_errno(err, errno, "unlink %s/agent.sock", spec->dir);

        _cleanup_close_ int log_fd = container_open_agent_log(dir_fd, owner);
        if (log_fd < 0)
                return cella_error_errno(err, -log_fd, "open %s/agent.log", spec->dir);
        _cleanup_close_ int agent_mnt = container_agent_bind(rt);
        if (agent_mnt < 0)
                return cella_error_errno(err, -agent_mnt, "bind the agent's executable");
        _cleanup_close_ int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (null_fd < 0)
                return cella_error_errno(err, errno, "/dev/null");

        PROBE("agent log, agent bind");
        /* 3. cgroups. */
        _cleanup_free_ struct cgroup_plan *plan = calloc(1, sizeof(*plan));
        if (!plan)
                return cella_error_errno(err, ENOMEM, "cgroup plan");
        struct cgroup_limits lim = {.memory_bytes = spec->limits.memory_bytes,
                                    .cpu_millis = spec->limits.cpu_millis,
                                    .pids_max = spec->limits.pids_max};
        r = cgroup_plan_make(&rt->cg, rt->cgroup_name, spec->id, &lim, owner, plan);
        if (r < 0)
                return cella_error_errno(err, -r, "cgroup plan");
        size_t failed = 0;
        r = cgroup_plan_apply(plan, &failed);
        PROBE("cgroup mkdir and limits");
        if (r < 0)
                cella_error_errno(err, -r, "cgroup %s", plan->steps[failed].path);
        else {
                struct child_args args = {
                        .rt = rt,
                        .hostname = spec->hostname,
                        .dir = spec->dir,
                        .disk_fd = disk_fd,
                        .n_layers = spec->n_layers,
                        .agent_mnt = agent_mnt,
                        .log_fd = log_fd,
                        .null_fd = null_fd,
                };
                r = spawn(rt, spec, plan, &args, upper, ret, err);
        }
        PROBE_END("container start");
        if (r < 0) {
                cgroup_destroy(&rt->cg, rt->cgroup_name, spec->id);
                return r;
        }
        return 0;
}

int runtime_container_start(struct runtime *rt, const struct container_spec *spec,
                            struct container *ret, struct cella_error *err)
{
        int r = container_start(rt, spec, ret, err);

        if (r < 0)
                cella_error_prefix(err, "create sandbox '%s'", spec->hostname);
        return r;
}

int runtime_container_reap(struct container *c, int *ret_status)
{
        siginfo_t si;
        if (!c || c->pidfd < 0)
                return -EBADF;
        memset(&si, 0, sizeof(si));
        if (waitid((idtype_t)P_PIDFD, (id_t)c->pidfd, &si, WEXITED | WNOHANG) < 0)
                return -errno;
        if (si.si_pid == 0)
                return 0;
        if (ret_status) {
                if (si.si_code == CLD_EXITED)
                        *ret_status = (si.si_status & 0xff) << 8;
                else
                        *ret_status = (si.si_status & 0x7f) | (si.si_code == CLD_DUMPED ? 0x80 : 0);
        }
        close(c->pidfd);
        c->pidfd = -EBADF;
        return 1;
}

bool runtime_oom_protected(const struct runtime *rt)
{
        return rt->oom_protect;
}

bool runtime_container_is_alive(const struct container *c)
{
        if (!c || c->pidfd < 0)
                return false;
        struct pollfd p = {.fd = c->pidfd, .events = POLLIN};
        int r = poll(&p, 1, 0);
        return r == 0;
}

int runtime_container_destroy(struct runtime *rt, const char *id, struct container *c,
                              struct cella_error *err)
{
        if (c && c->pidfd >= 0) {
                /* PID 1 of a pid namespace takes every process of it along. */
                kill_and_reap(c->pidfd);
                close(c->pidfd);
                c->pidfd = -EBADF;
        }
        int r = cgroup_destroy(&rt->cg, rt->cgroup_name, id);
        if (r < 0)
                return cella_error_errno(err, -r, "destroy sandbox '%s': remove cgroup", id);
        return 0;
}

/* An O_PATH descriptor of the PID 1's root (the sandbox's view of its files), or -ESRCH
 * when it is gone. */
static int open_root(const struct container *c)
{
        char root_path[64];

        if (!c || c->pidfd < 0)
                return -ESRCH;
        snprintf(root_path, sizeof(root_path), "/proc/%d/root", (int)c->pid);
        _cleanup_close_ int root_fd = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        /* The pid was the sandbox's when its root was opened if the pidfd still lives. */
        if (!runtime_container_is_alive(c))
                return -ESRCH;
        return TAKE_FD(root_fd);
}

static int container_rename(struct runtime *rt, const struct container *c, const char *hostname,
                            struct cella_error *err)
{
        char buf[512];
        size_t len = strlen(hostname);
        int r;

        if (!c || c->pidfd < 0)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "not running");
        if (len > 64)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "hostname too long");
        /* Files first: a failure here leaves the kernel hostname as it was. They are
         * rewritten through the sandbox's own root (its upper layer may be inside its disk
         * image, mounted nowhere but in the sandbox), resolved in that root with no
         * symlink followed; the files exist (the start wrote them), so their owner stays
         * the sandbox's root. */
        _cleanup_close_ int root_fd = open_root(c);
        if (root_fd == -ESRCH)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "not running");
        if (root_fd < 0)
                return cella_error_errno(err, -root_fd, "open its root");
        struct open_how how = {
                .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS |
                           RESOLVE_NO_XDEV,
        };
        _cleanup_close_ int etc_fd = (int)syscall(SYS_openat2, root_fd, "etc", &how, sizeof(how));
        if (etc_fd < 0)
                return cella_error_errno(err, errno, "its /etc");
        etc_hostname_text(hostname, buf, sizeof(buf));
        r = rewrite_at(etc_fd, "hostname", buf);
        if (r >= 0) {
                etc_hosts_text(hostname, buf, sizeof(buf));
                r = rewrite_at(etc_fd, "hosts", buf);
        }
        if (r < 0)
                return cella_error_errno(err, -r, "rewrite /etc/hostname, /etc/hosts");

        /* The kernel hostname: this thread visits the sandbox's UTS namespace and comes
         * back. We are root of the namespace that owns the sandbox's user namespace, so
         * both setns and sethostname are ours to do; namespaces are per thread, so the
         * rest of the daemon never sees the visit. */
        if (setns(c->pidfd, CLONE_NEWUTS) < 0)
                return cella_error_errno(err, errno, "enter UTS namespace");
        int e = sethostname(hostname, len) < 0 ? errno : 0;
        if (setns(rt->uts_fd, CLONE_NEWUTS) < 0) {
                /* Cannot happen short of a kernel bug; our hostname is not used for
                 * anything, but say so loudly. */
                return cella_error_errno(err, errno, "leave UTS namespace");
        }
        if (e)
                return cella_error_errno(err, e, "sethostname");
        return 0;
}

int runtime_container_rename(struct runtime *rt, const struct container *c, const char *dir,
                             const char *hostname, struct cella_error *err)
{
        int r = container_rename(rt, c, hostname, err);

        (void)dir;
        if (r < 0)
                cella_error_prefix(err, "name sandbox '%s'", hostname);
        return r;
}

int runtime_container_agent_socket(const struct container *c)
{
        _cleanup_close_ int root_fd = open_root(c);
        if (root_fd < 0)
                return root_fd;
        /* The socket's path is the tenant's to change (the sandbox's root owns /run): any
         * symlink on it resolves inside the sandbox's root, never to a host path, and no
         * magic link (/proc/<pid>/fd, /proc/<pid>/root) leads out of it. */
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        _cleanup_close_ int fd =
                (int)syscall(SYS_openat2, root_fd, MOUNTS_AGENT_SOCKET, &how, sizeof(how));
        if (fd < 0)
                return -errno;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISSOCK(st.st_mode))
                return -ENOTSOCK;
        return TAKE_FD(fd);
}

/* This thread's file-system ids become uid/gid with no supplementary group (a non-zero
 * fsuid clears the effective file capabilities: CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH,
 * CAP_FOWNER); the raw system calls change this thread only, not the process (glibc's
 * setgroups would change every thread). */
static int fs_ids_enter(uid_t uid, gid_t gid)
{
        if (syscall(SYS_setgroups, 0, NULL) < 0)
                return -errno;
        syscall(SYS_setfsgid, gid);
        syscall(SYS_setfsuid, uid);
        /* setfsuid answers the previous id, never an error: ask again to be sure */
        if ((uid_t)syscall(SYS_setfsuid, (uid_t)-1) != uid ||
            (gid_t)syscall(SYS_setfsgid, (gid_t)-1) != gid)
                return -EPERM;
        return 0;
}

static void fs_ids_leave(const gid_t *saved, int n)
{
        syscall(SYS_setfsuid, geteuid());
        syscall(SYS_setfsgid, getegid());
        if (syscall(SYS_setgroups, (size_t)n, saved) < 0 ||
            (uid_t)syscall(SYS_setfsuid, (uid_t)-1) != geteuid()) {
                /* the loop thread would go on with a sandbox's ids: nothing sane can continue */
                log_error("restore the file-system ids: %s", strerror(errno));
                abort();
        }
}

static int open_file_as(int root_fd, const char *path, struct stat *st)
{
        struct open_how how = {
                .flags = O_PATH | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV,
        };
        char self[64];
        struct stat again;

        /* a symlink, the last component too, resolves inside the root as the agent's open
         * follows it */
        _cleanup_close_ int pfd = (int)syscall(SYS_openat2, root_fd, path, &how, sizeof(how));
        if (pfd < 0)
                return -errno;
        if (fstat(pfd, st) < 0)
                return -errno;
        if (!S_ISREG(st->st_mode))
                return -EINVAL; /* a directory, FIFO, device, socket: the agent answers */
        snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
        _cleanup_close_ int fd = open(self, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &again) < 0)
                return -errno;
        if (again.st_dev != st->st_dev || again.st_ino != st->st_ino || !S_ISREG(again.st_mode))
                return -ESTALE;
        *st = again;
        return TAKE_FD(fd);
}

int runtime_container_open_file(const struct container *c, uid_t uid, gid_t gid, const char *path,
                                struct stat *ret_st)
{
        gid_t saved[CELLA_FS_GROUPS_MAX];
        int n, r;

        if (uid == 0 || gid == 0)
                return -EPERM; /* host root's ids would keep its rights */
        _cleanup_close_ int root_fd = open_root(c);
        if (root_fd < 0)
                return root_fd;
        n = getgroups(CELLA_FS_GROUPS_MAX, saved);
        if (n < 0)
                return -errno;
        r = fs_ids_enter(uid, gid);
        if (r == 0)
                r = open_file_as(root_fd, path, ret_st);
        fs_ids_leave(saved, n);
        return r;
}

int runtime_container_socket(struct runtime *rt, const struct container *c)
{
        int fd, e;

        if (!c || c->pidfd < 0)
                return -ESRCH;
        /* The pidfd names the sandbox's PID 1 for as long as it lives (no pid reuse), and
         * setns on it enters that process's namespaces: this thread visits the sandbox's
         * network namespace just long enough to create the socket, which keeps that
         * namespace for its life. */
        if (setns(c->pidfd, CLONE_NEWNET) < 0)
                return errno == ESRCH ? -ESRCH : -errno;
        fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        e = fd < 0 ? errno : 0;
        if (setns(rt->net_fd, CLONE_NEWNET) < 0) {
                /* Cannot happen short of a kernel bug, and the thread would be left in the
                 * sandbox's namespace: nothing sane can continue. */
                log_error("leave a sandbox's network namespace: %s", strerror(errno));
                abort();
        }
        return fd < 0 ? -e : fd;
}

int runtime_foreach_id(struct runtime *rt, int (*fn)(const char *id, void *userdata),
                       void *userdata)
{
        char path[CELLA_PATH_MAX + 80];
        const char *roots[1 + _CGROUP_V1_MAX];
        int n = 0, r = 0;

        if (rt->cg.v2_root[0])
                roots[n++] = rt->cg.v2_root;
        for (int i = 0; i < _CGROUP_V1_MAX; i++)
                if (rt->cg.mode == CGROUP_MODE_HYBRID && rt->cg.v1_root[i][0])
                        roots[n++] = rt->cg.v1_root[i];
        for (int i = 0; i < n && r >= 0; i++) {
                snprintf(path, sizeof(path), "%s/%s", roots[i], rt->cgroup_name);
                DIR *d = opendir(path);
                if (!d)
                        continue;
                struct dirent *de;
                while (r >= 0 && (de = readdir(d)))
                        if (de->d_type == DT_DIR && de->d_name[0] != '.')
                                r = fn(de->d_name, userdata);
                closedir(d);
        }
        return r;
}

const char *runtime_cgroup_name(const struct runtime *rt)
{
        return rt->cgroup_name;
}
