/* The container's child between clone3 and exec (see container.c's head comment and
 * docs/runtime.md): it only uses data computed before the clone (its copy of the parent's
 * memory), raw syscalls and stack buffers: cellad may have threads, so no malloc and no
 * locks here. */
#include "runtime/container.h"
#include "runtime/container-child.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <net/if.h>
#include <poll.h>
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
#include "runtime/runtime-internal.h"
#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* How long the child may take from clone to exec. */
#define START_TIMEOUT_MS 30000

const char *const container_child_step_names[_STEP_MAX] = {
        [STEP_SYNC] = "wait for parent",
        [STEP_SOCKET] = "agent socket",
        [STEP_SETGROUPS] = "setgroups",
        [STEP_SETGID] = "setresgid",
        [STEP_SETUID] = "setresuid",
        [STEP_CGROUPNS] = "unshare cgroup namespace",
        [STEP_CGROUPS] = "join v1 cgroups",
        [STEP_HOSTNAME] = "sethostname",
        [STEP_PRIVATE] = "make / private",
        [STEP_DISK] = "attach disk",
        [STEP_DIRS] = "open sandbox dir",
        [STEP_LOWER] = "attach idmapped image",
        [STEP_OVERLAY] = "mount overlay",
        [STEP_ROOT] = "enter new root",
        [STEP_MOUNTS] = "mount",
        [STEP_AGENT] = "bind agent executable",
        [STEP_PIVOT] = "pivot_root",
        [STEP_OLDROOT] = "detach old root",
        [STEP_WORKSPACE] = "chdir /workspace",
        [STEP_LOOPBACK] = "bring up lo",
        [STEP_CAPS] = "set capabilities",
        [STEP_NNP] = "set no_new_privs",
        [STEP_SESSION] = "setsid",
        [STEP_SIGNALS] = "reset signals",
        [STEP_SECCOMP] = "install seccomp filter",
        [STEP_FDS] = "set up file descriptors",
        [STEP_EXEC] = "exec agent",
};

_Noreturn static void child_fail(int fd, int step, int err, int index)
{
        struct child_report rep = {.step = step, .err = err < 0 ? -err : err, .index = index};
        ssize_t _unused_ w = write(fd, &rep, sizeof(rep));
        _exit(127);
}

#define CHECK(step, expr)                                         \
        do {                                                      \
                if ((expr) < 0)                                   \
                        child_fail(a->sync_fd, (step), errno, 0); \
        } while (0)

static int recv_fd(int sock)
{
        char byte;
        struct iovec iov = {.iov_base = &byte, .iov_len = 1};
        union {
                struct cmsghdr h;
                char buf[CMSG_SPACE(sizeof(int))];
        } cm;
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = cm.buf,
                             .msg_controllen = sizeof(cm.buf)};
        ssize_t n;
        do
                n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
        while (n < 0 && errno == EINTR);
        if (n < 0)
                return -1;
        if (n == 0) {
                errno = ECONNRESET;
                return -1;
        }
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);
        if (!c || c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
            c->cmsg_len != CMSG_LEN(sizeof(int))) {
                errno = EPROTO;
                return -1;
        }
        int fd;
        memcpy(&fd, CMSG_DATA(c), sizeof(fd));
        return fd;
}

static int loopback_up(void)
{
        int s = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        if (s < 0)
                return -1;
        struct ifreq ifr;
        memset(&ifr, 0, sizeof(ifr));
        memcpy(ifr.ifr_name, "lo", 3);
        int r = ioctl(s, SIOCGIFFLAGS, &ifr);
        if (r == 0) {
                ifr.ifr_flags |= IFF_UP | IFF_RUNNING;
                r = ioctl(s, SIOCSIFFLAGS, &ifr);
        }
        int e = errno;
        close(s);
        errno = e;
        return r;
}

/* Put fd at target, without close-on-exec unless cloexec. */
static int place_fd(int fd, int target, bool cloexec)
{
        return dup3(fd, target, cloexec ? O_CLOEXEC : 0);
}

_Noreturn void container_child_main(const struct child_args *a)
{
        const struct runtime *rt = a->rt;
        int lower, snap[CELLA_SNAPSHOT_MAX_LAYERS], snap_tree[CELLA_SNAPSHOT_MAX_LAYERS], r;
        size_t idx = 0;

        close(a->psync_fd);
        /* Our v1 cgroups, joined by ourselves before anything else (so everything below is
         * charged to the sandbox): "0" in a v1 "tasks" file moves the writing thread, our
         * only one, and the kernel does that without the global threadgroup lock whose
         * write side waits for an RCU grace period, as the parent's write of our pid to
         * cgroup.procs did (decision 0059). The files were opened by the parent, as host
         * root: the kernel checks the opener's credentials. */
        for (size_t i = 0; i < a->n_v1_tasks; i++) {
                ssize_t w;
                do
                        w = write(a->v1_tasks[i], "0", 1);
                while (w < 0 && errno == EINTR);
                if (w != 1)
                        child_fail(a->sync_fd, STEP_CGROUPS, w < 0 ? errno : EIO, 0);
                close(a->v1_tasks[i]);
        }
        lower = recv_fd(a->sync_fd);
        if (lower < 0)
                child_fail(a->sync_fd, STEP_SYNC, errno, 0);
        for (size_t i = 0; i < a->n_layers; i++) {
                snap[i] = recv_fd(a->sync_fd);
                if (snap[i] < 0)
                        child_fail(a->sync_fd, STEP_SYNC, errno, 0);
        }

        CHECK(STEP_PRIVATE, mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL));
        /* The sandbox's disk (upper and work inside) goes over the sandbox dir, in this
         * namespace only: overlay takes its upper layer from a mount of our namespace.
         * Only this namespace holds the filesystem; it is unmounted when it dies. */
        if (a->disk_fd >= 0)
                CHECK(STEP_DISK,
                      move_mount(a->disk_fd, "", AT_FDCWD, a->dir, MOVE_MOUNT_F_EMPTY_PATH));
        /* Descriptors from before the clone point into the parent's mount namespace, so
         * the sandbox dir is opened again here. Our fsuid is still host root (the owner
         * of the daemon's 0700 directories) until setresuid below. */
        int dir_fd = open(a->dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        CHECK(STEP_DIRS, dir_fd);
        /* upper and work are taken from a detached copy of the sandbox dir (the disk's
         * root, or the dir itself): overlayfs records a layer given by descriptor as its
         * path from the root of its mount tree and shows that in the sandbox's
         * /proc/self/mountinfo. From a detached tree that is "/upper" and "/work", not
         * the daemon's data directory. Both from one tree: overlay wants them on one
         * mount. */
        int layers = open_tree(dir_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        CHECK(STEP_DIRS, layers);
        int upper_fd = openat(layers, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        CHECK(STEP_DIRS, upper_fd);
        int work_fd = openat(layers, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        CHECK(STEP_DIRS, work_fd);

        /* The parent wrote our uid/gid maps: become the namespace's root. Raw system
         * calls: glibc's wrappers in a copy of a threaded process (nptl's setxid) wait for
         * the parent's threads, and one that was starting or exiting at the clone never
         * answers here. */
        CHECK(STEP_SETGID, (int)syscall(SYS_setresgid, 0, 0, 0));
        CHECK(STEP_SETUID, (int)syscall(SYS_setresuid, 0, 0, 0));
        CHECK(STEP_SETGROUPS, (int)syscall(SYS_setgroups, 0, NULL));

        /* The idmapped image goes over the sandbox dir (in our namespace only), the
         * overlay on top of it; lower/upper/work are given by descriptor, so no host
         * path is resolved with the sandbox's credentials. The image's copy was made in
         * the daemon's namespace, where the sandbox is not privileged enough to use it
         * as a layer: once attached here, it is copied again, detached (its path in
         * mountinfo is then "/", not the sandbox dir). */
        CHECK(STEP_LOWER,
              move_mount(lower, "", dir_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
        int lower_tree = open_tree(lower, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        CHECK(STEP_LOWER, lower_tree);
        /* Snapshots' layers: the same way, over the image, topmost first (the first
         * "lowerdir+" given is the top one). */
        for (size_t i = 0; i < a->n_layers; i++) {
                CHECK(STEP_LOWER, move_mount(snap[i], "", dir_fd, "",
                                             MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
                snap_tree[i] =
                        open_tree(snap[i], "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
                CHECK(STEP_LOWER, snap_tree[i]);
        }
        int ofs = fsopen("overlay", FSOPEN_CLOEXEC);
        CHECK(STEP_OVERLAY, ofs);
        for (size_t i = 0; i < a->n_layers; i++)
                CHECK(STEP_OVERLAY,
                      fsconfig(ofs, FSCONFIG_SET_FD, "lowerdir+", NULL, snap_tree[i]));
        CHECK(STEP_OVERLAY, fsconfig(ofs, FSCONFIG_SET_FD, "lowerdir+", NULL, lower_tree));
        CHECK(STEP_OVERLAY, fsconfig(ofs, FSCONFIG_SET_FD, "upperdir", NULL, upper_fd));
        CHECK(STEP_OVERLAY, fsconfig(ofs, FSCONFIG_SET_FD, "workdir", NULL, work_fd));
        CHECK(STEP_OVERLAY, fsconfig(ofs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0));
        CHECK(STEP_OVERLAY, fsconfig(ofs, FSCONFIG_CMD_CREATE, NULL, NULL, 0));
        int root = fsmount(ofs, FSMOUNT_CLOEXEC, 0);
        CHECK(STEP_OVERLAY, root);
        CHECK(STEP_ROOT,
              move_mount(root, "", dir_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH));
        CHECK(STEP_ROOT, fchdir(root));
        close(lower);
        close(lower_tree);
        for (size_t i = 0; i < a->n_layers; i++) {
                close(snap[i]);
                close(snap_tree[i]);
        }
        close(layers);
        close(ofs);

        /* Our cgroups (v2 since clone3, v1 joined above) become our cgroup namespace's
         * root, before anything mounts a cgroup filesystem or runs the tenant's code. */
        CHECK(STEP_CGROUPNS, unshare(CLONE_NEWCGROUP));
        CHECK(STEP_HOSTNAME, sethostname(a->hostname, strlen(a->hostname)));

        r = mounts_apply(&rt->mounts, &idx);
        if (r < 0)
                child_fail(a->sync_fd, STEP_MOUNTS, r, (int)idx);
        /* The agent's executable: cellad's copy of cella-init, read-only, on the mount point
         * the plan made in the agent's dir. A regular file that a checkpoint can restore
         * as the agent's executable, which the tenant can neither write (read-only mounts,
         * a host root's file), unmount or cover (no CAP_SYS_ADMIN) nor rename or remove
         * (a mount point). */
        CHECK(STEP_AGENT,
              move_mount(a->agent_mnt, "", AT_FDCWD, MOUNTS_AGENT_EXE, MOVE_MOUNT_F_EMPTY_PATH));

        CHECK(STEP_PIVOT, syscall(SYS_pivot_root, ".", "."));
        CHECK(STEP_OLDROOT, umount2(".", MNT_DETACH));
        CHECK(STEP_OLDROOT, chdir("/"));
        close(root);
        /* The agent's listening socket, made here so that it belongs to the sandbox's
         * network namespace and bound in the sandbox's own /run: a checkpoint (CRIU)
         * takes no socket of a namespace outside the tree and rebinds a listening socket
         * only at a path of a mount it restores (docs/decisions/0050). Nothing of the
         * tenant runs yet. cellad reaches it through the PID 1's root, resolved inside
         * that root (runtime_container_agent_socket). */
        int listen_fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        CHECK(STEP_SOCKET, listen_fd);
        {
                static const struct sockaddr_un sa = {.sun_family = AF_UNIX,
                                                      .sun_path = "/" MOUNTS_AGENT_SOCKET};
                CHECK(STEP_SOCKET, bind(listen_fd, (const struct sockaddr *)&sa, sizeof(sa)));
        }
        CHECK(STEP_SOCKET, chmod("/" MOUNTS_AGENT_SOCKET, 0600));
        CHECK(STEP_SOCKET, listen(listen_fd, 16));
        /* The agent's cwd: /workspace, or / when the tenant made /workspace something
         * that cannot be entered (the old root is gone: nothing it points to is the
         * host's). */
        if (chdir("/workspace") < 0)
                CHECK(STEP_WORKSPACE, chdir("/"));
        CHECK(STEP_LOOPBACK, loopback_up());

        r = caps_apply(&rt->caps);
        if (r < 0)
                child_fail(a->sync_fd, STEP_CAPS, r, 0);
        CHECK(STEP_NNP, prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0));
        /* The agent leads its own session (and process group): nothing of the sandbox
         * belongs to cellad's, which a checkpoint of the tree could not take along
         * (docs/decisions/0050). Pid 1 of a new pid namespace leads no group yet. */
        CHECK(STEP_SESSION, setsid());

        /* Dispositions set to ignore and the signal mask survive exec: the agent (and
         * everything it runs) starts with defaults, whatever cellad's thread had.
         * The raw system calls reach the signals glibc reserves (32, 33) as well, which
         * sigaction() refuses: an ignored SIGRTMIN would otherwise leak into the sandbox. */
        struct {
                void (*handler)(int);
                unsigned long flags;
                void (*restorer)(void);
                uint64_t mask;
        } dfl = {SIG_DFL, 0, NULL, 0};
        uint64_t none = 0;
        for (int sig = 1; sig <= 64; sig++)
                if (sig != SIGKILL && sig != SIGSTOP)
                        syscall(SYS_rt_sigaction, sig, &dfl, NULL, sizeof(uint64_t));
        CHECK(STEP_SIGNALS, syscall(SYS_rt_sigprocmask, SIG_SETMASK, &none, NULL, sizeof(none)));

        /* fds: 0 null, 1-2 log, 3 agent socket, 5 sync (cloexec); everything else
         * closed. Sources move above 5 first so that no placement clobbers another
         * source. */
        int nul = fcntl(a->null_fd, F_DUPFD_CLOEXEC, 6);
        int log = fcntl(a->log_fd, F_DUPFD_CLOEXEC, 6);
        int lis = fcntl(listen_fd, F_DUPFD_CLOEXEC, 6);
        int syn = fcntl(a->sync_fd, F_DUPFD_CLOEXEC, 6);
        if (nul < 0 || log < 0 || lis < 0 || syn < 0)
                child_fail(a->sync_fd, STEP_FDS, errno, 0);
        if (place_fd(syn, 5, true) < 0)
                child_fail(a->sync_fd, STEP_FDS, errno, 0);
        if (place_fd(nul, 0, false) < 0 || place_fd(log, 1, false) < 0 ||
            place_fd(log, 2, false) < 0 || place_fd(lis, 3, false) < 0)
                child_fail(5, STEP_FDS, errno, 0);
        if (close_range(6, ~0U, 0) < 0)
                child_fail(5, STEP_FDS, errno, 0);

        struct sock_fprog prog = {.len = rt->filter.len, .filter = rt->filter.insns};
        if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, 0, &prog) < 0)
                child_fail(5, STEP_SECCOMP, errno, 0);

        static char *const argv[] = {"cella-init", NULL};
        static char *const envp[] = {NULL};
        execve("/" MOUNTS_AGENT_EXE, argv, envp);
        child_fail(5, STEP_EXEC, errno, 0);
}
