/* Building and tearing down a sandbox's container (see docs/architecture.md, "runtime").
 *
 * struct runtime holds what is computed once per daemon: the cgroup layout of the host
 * (v2 controllers, or the v1 + unified hybrid), the seccomp BPF program, the capability
 * set, and a descriptor on cella-init that every sandbox execs as PID 1 from a read-only
 * bind mount at /run/.cella/cella-init.
 *
 * runtime_container_start() plans (pure data) and then applies: clone3 into new user, pid, mount, uts, ipc,
 * net (and then cgroup) namespaces, uid/gid map of the sandbox's 65536-uid host range,
 * cgroup placement and limits, an idmapped mount of the image rootfs as overlay lower
 * layer, upper/work in the sandbox's disk image <dir>/disk.img (disk.h: the kernel
 * enforces its size; without one, in <dir>), fresh /proc, minimal /dev, /tmp, /workspace,
 * pivot_root, a listening unix socket at /run/.cella/agent.sock inside the sandbox handed
 * to the agent as fd 3, capabilities, no_new_privs, seccomp, exec of cella-init. Mounts live only in the
 * sandbox's mount namespace, so nothing is left on the host when it dies. */
#ifndef CELLA_RUNTIME_CONTAINER_H
#define CELLA_RUNTIME_CONTAINER_H

#include <stdbool.h>
#include <pthread.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "common/error.h"
#include "runtime/disk.h"
#include "runtime/net.h"

struct runtime;

struct runtime_config {
        const char *agent_path;        /* path of the (static) cella-init binary */
        const char *cgroup_name;       /* sub-directory used in each hierarchy, e.g. "cella" */
        enum disk_mode disk_mode;      /* --disk-quota (disk.h) */
        const char *disk_template_dir; /* a dir of cellad's for disk templates; NULL: none */
        const char *network_range;     /* --network-range CIDR; NULL: NET_DEFAULT_RANGE */
        bool check_only;               /* cellad --check: probe, change nothing on the host */
        /* The data dir, where snapshots are made: probed for reflinks (disk.h,
         * disk_reflink_probe; docs/decisions/0051). NULL: not probed, none assumed. */
        const char *data_dir;
};

int runtime_new(const struct runtime_config *cfg, struct runtime **ret, struct cella_error *err);
void runtime_free(struct runtime *rt);
/* Does the runtime set the agent's oom_score_adj to -1000? (needs CAP_SYS_RESOURCE) */
bool runtime_oom_protected(const struct runtime *rt);
/* Human-readable description of what the host offers (cgroup mode, idmap, seccomp...). */
const char *runtime_describe(const struct runtime *rt);
/* One line on disk limits here (enforced, off, or not enforceable and why), for the log. */
const char *runtime_disk_state(const struct runtime *rt);
/* Does a sandbox started now get a disk image of its own (limits enforced)? */
bool runtime_disk_enforced(const struct runtime *rt);
/* Does the data dir share extents (FICLONE), so that a snapshot of a sandbox with a disk
 * is a reflinked clone of its disk image (docs/decisions/0051)? And one line saying so, or
 * why not. */
bool runtime_reflink(const struct runtime *rt);
const char *runtime_reflink_state(const struct runtime *rt);
/* Sandbox networking of this daemon (net.h): NULL only for a runtime without one. */
struct net *runtime_net(const struct runtime *rt);

struct container_limits {
        uint64_t memory_bytes; /* 0: none */
        uint32_t cpu_millis;   /* 1000 = one CPU; 0: none */
        uint32_t pids_max;     /* 0: none */
};

/* A snapshot's layer as it is stored (docs/decisions/0048, 0051). */
struct container_layer {
        /* false: layers[i] is the layer's directory. true: layers[i] is a snapshot's
         * directory holding disk.img, a reflinked clone of a sandbox's disk; the layer is
         * "upper" in its filesystem, mounted read-only (disk_open_ro). */
        bool disk;
        /* Owners in the layer are host ids id_base + n, n < uid_count (a sandbox's upper
         * layer as it wrote it): the layer is seen through a mapping of that range onto
         * the sandbox's. 0: they are n (a copied layer), seen through the sandbox's own
         * namespace like the image. */
        uid_t id_base;
};

struct container_spec {
        const char *id;       /* cgroup directory name; [a-z0-9-] */
        const char *hostname; /* sandbox name */
        const char *rootfs;   /* image rootfs (read-only lower layer) */
        /* Snapshots' layers (layer.h), topmost first: read-only lower layers above the
         * image's, under the sandbox's own upper layer (a snapshot of a sandbox made from a
         * snapshot goes over that one's layers); at most CELLA_SNAPSHOT_MAX_LAYERS. */
        const char *const *layers;
        size_t n_layers;
        /* n_layers entries saying how each layer is stored; NULL: every one a directory
         * of the sandbox-relative ids (0048). */
        const struct container_layer *layer_info;
        const char *dir;    /* sandbox dir: disk.img (or upper/, work/), agent.sock */
        uid_t uid_base;     /* first host uid/gid of the sandbox's range */
        uint32_t uid_count; /* CELLA_UID_RANGE */
        struct container_limits limits;
        /* Disk limit (bytes) of a sandbox that gets a new disk image; 0: none. A sandbox
         * whose dir already holds an image keeps it (and its size) regardless. */
        uint64_t disk_bytes;
        /* Network "outbound" (net.h): a veth, addresses of uid slot `slot`, a resolv.conf
         * and the allow chain; false: loopback only. */
        bool network;
        unsigned slot;
        const struct net_allow *net_allow;
        size_t net_allow_n;
};

struct container {
        pid_t pid; /* host pid of the sandbox's PID 1 */
        int pidfd; /* pidfd of it, close-on-exec; -EBADF when not running */
};

/* Start a container. On success *ret has the pid and a pidfd; the agent is listening on
 * /run/.cella/agent.sock inside the sandbox when this returns (the child binds it before
 * the exec): runtime_container_agent_socket() reaches it. */
int runtime_container_start(struct runtime *rt, const struct container_spec *spec,
                            struct container *ret, struct cella_error *err);

/* The agent's listening socket of a running container: an O_PATH descriptor on
 * /run/.cella/agent.sock resolved inside the PID 1's root (RESOLVE_IN_ROOT, no magic
 * link), so that whatever the tenant made of that path leads to nothing outside the
 * sandbox. Connect to it as "/proc/self/fd/<fd>" and close it. Returns the fd, -ESRCH when
 * the container is not running, -ENOTSOCK when the path is not a socket, or -errno. */
int runtime_container_agent_socket(const struct container *c);

/* A regular file of a running container opened for reading as the sandbox's root could:
 * path is resolved from the PID 1's root (pinned by the pidfd) with RESOLVE_IN_ROOT |
 * RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV (a symlink resolves inside the sandbox, nothing
 * leads out of it, no mount is crossed: /proc, /dev, /tmp are never reached) as an O_PATH
 * descriptor (no open side effect), and only a regular file is reopened for reading
 * through /proc/self/fd (the same inode). The walk and the open run on this thread under
 * fsuid uid, fsgid gid and no supplementary group, so without capabilities: never more than
 * the sandbox's root may read. *ret_st gets the file's stat. Returns the fd, -ESRCH when
 * the container is not running, -EXDEV (a mount on the way), -EINVAL (not a regular
 * file), -errno. */
int runtime_container_open_file(const struct container *c, uid_t uid, gid_t gid, const char *path,
                                struct stat *ret_st);

/* Kill every process of the container (cgroup.kill where the kernel has it, else SIGKILL
 * to every pid of its cgroups), wait for PID 1 to be gone, close the pidfd, remove its
 * cgroup directories. Idempotent; works from the id alone after a daemon restart (c may be
 * NULL). */
int runtime_container_destroy(struct runtime *rt, const char *id, struct container *c,
                              struct cella_error *err);

/* Reap PID 1 if it has exited: waitid(P_PIDFD, WEXITED|WNOHANG). Returns 1 when reaped
 * (*ret_status, if not NULL, gets the wait status; the pidfd is closed), 0 while it still
 * runs, -errno on error. */
int runtime_container_reap(struct container *c, int *ret_status);

/* Is the process behind the pidfd still alive? */
bool runtime_container_is_alive(const struct container *c);

/* Give a running container a new hostname (a warm-pool claim): rewrite the runtime's own
 * /etc/hostname and /etc/hosts in place in <dir>/upper/etc, then set the kernel hostname
 * in the container's UTS namespace. The container's files must still be the runtime's
 * (nothing has run in it yet). */
int runtime_container_rename(struct runtime *rt, const struct container *c, const char *dir,
                             const char *hostname, struct cella_error *err);

/* A new TCP socket (IPv4, non-blocking, close-on-exec) in the container's network
 * namespace, made by visiting it from this thread (docs/decisions/0018-preview-urls.md):
 * connecting it to 127.0.0.1:port reaches a port inside the sandbox whatever its network
 * mode, and nothing is exposed on the host. Returns the fd or -errno (-ESRCH: not running). */
int runtime_container_socket(struct runtime *rt, const struct container *c);

/* Call fn for the id of every container directory under this runtime's cgroup parent, in
 * the v2 hierarchy and in every v1 one (an id may come more than once). Stops at, and
 * returns, the first negative return of fn. */
int runtime_foreach_id(struct runtime *rt, int (*fn)(const char *id, void *userdata),
                       void *userdata);

/* The cgroup parent's directory name in every hierarchy (e.g. "cella"). */
const char *runtime_cgroup_name(const struct runtime *rt);

struct layer_copy_stats;

/* Capture a running (or stopped) container's writable layer as a snapshot's layer
 * (layer.h) at dst_parent_fd/name: its processes are frozen (cgroup v2 cgroup.freeze, which
 * every v2 cgroup has, controllers or not) for the copy and thawed after it, whatever
 * happens; a stopped container (no cgroup) is copied as it is. The upper layer is read
 * from the sandbox's disk (a second mount of its filesystem: the same superblock as the
 * sandbox's, so what its processes wrote before they froze is there) or from <dir>/upper.
 * Owners are stored shifted out of [uid_base, uid_base + uid_count). On failure nothing
 * is left at dst_parent_fd/name. disk_lock (or NULL) is held while the disk is attached
 * and mounted: what a start of the same sandbox holds for its own, so that both find one
 * loop device (two devices on one image would be two filesystems on it). */
/* Freeze (frozen true: every task of its cgroup stopped, waited for as a snapshot's freeze
 * is) or thaw the running container id: what a consistent backup holds while it reads the
 * sandbox's files (docs/decisions/0049). 0, or -1 with err set (a freeze that failed is
 * undone). */
int runtime_container_freeze(struct runtime *rt, const char *id, bool frozen,
                             struct cella_error *err);

int runtime_container_snapshot(struct runtime *rt, const char *id, const char *dir, uid_t uid_base,
                               uint32_t uid_count, int dst_parent_fd, const char *name,
                               pthread_mutex_t *disk_lock, struct layer_copy_stats *stats,
                               struct cella_error *err);

#endif
