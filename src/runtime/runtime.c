/* The runtime: what is computed once per daemon (see container.h): the host's cgroup
 * layout, the seccomp program, the capability set, the mount plan, cella-init's executable
 * (a private read-only copy), disk limits and networking. Sandboxes are started with it in container.c. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "runtime/runtime-internal.h"

#ifndef MFD_EXEC
#define MFD_EXEC 0x0010U
#endif

/* The agent's executable: a copy of the host's cella-init in a tmpfs of cellad's own that
 * is mounted nowhere (a detached mount, reachable only through our descriptors) and
 * read-only once written. Each start attaches a read-only bind of that file in the sandbox
 * (container.c). A regular file rather than a memfd, since a checkpoint (CRIU) restores a
 * process's executable only from a file it can reopen by path (docs/decisions/0050); a
 * private copy rather than a bind of the host's path, which would show that path in the
 * sandbox's mountinfo (the bind's root is the file's path in its filesystem: here
 * "/cella-init") and would change under the sandboxes when the host's file is rebuilt.
 * *ret_mnt is the tmpfs (kept open: the bind is cloned from it), the return value an
 * O_PATH descriptor on the file, or -errno. */
static int load_agent(const char *path, int *ret_mnt)
{
        _cleanup_close_ int src = open(path, O_RDONLY | O_CLOEXEC);
        if (src < 0)
                return -errno;
        struct stat st;
        if (fstat(src, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EINVAL;
        _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs < 0)
                return -errno;
        if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
            fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        _cleanup_close_ int mnt =
                fsmount(fs, FSMOUNT_CLOEXEC, MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV);
        if (mnt < 0)
                return -errno;
        {
                _cleanup_close_ int fd =
                        openat(mnt, "cella-init", O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
                if (fd < 0)
                        return -errno;
                off_t left = st.st_size;
                while (left > 0) {
                        ssize_t n = sendfile(fd, src, NULL, (size_t)left);
                        if (n < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        if (n == 0)
                                return -EIO;
                        left -= n;
                }
                if (fchmod(fd, 0555) < 0)
                        return -errno;
        }
        struct mount_attr ro = {.attr_set = MOUNT_ATTR_RDONLY};
        if (mount_setattr(mnt, "", AT_EMPTY_PATH, &ro, sizeof(ro)) < 0)
                return -errno;
        int fd = openat(mnt, "cella-init", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        *ret_mnt = TAKE_FD(mnt);
        return fd;
}

/* What the host must offer, checked and prepared once: cgroups, overlay, idmapped mounts,
 * the seccomp program, capabilities, the mount plan, the agent, disk limits. Returns 0 or
 * -errno with *err set (the caller says it is the runtime's). */
static int runtime_probe(struct runtime *rt, const struct runtime_config *cfg, size_t *ret_skipped,
                         struct cella_error *err)
{
        int r;

        r = cgroup_detect_host(&rt->cg);
        if (r < 0)
                return cella_error_errno(err, -r,
                                         "no usable cgroups (need cgroup2, with memory, pids "
                                         "and cpu in v2 or v1)");
        if (!runtime_has_filesystem("/proc/filesystems", "overlay")) {
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "the kernel has no overlay filesystem");
        }
        /* open_tree/mount_setattr exist (the real idmap test is the first start). */
        if (mount_setattr(-1, "", 0, NULL, 0) < 0 && errno == ENOSYS)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "kernel lacks mount_setattr (idmapped mounts)");
        r = filter_build(&rt->filter, ret_skipped);
        if (r < 0)
                return cella_error_errno(err, -r, "build seccomp filter");
        r = caps_init(&rt->caps);
        if (r < 0)
                return cella_error_errno(err, -r, "capabilities");
        r = mounts_plan(&rt->mounts);
        if (r < 0)
                return cella_error_errno(err, -r, "mount plan");
        r = load_agent(cfg->agent_path, &rt->agent_mnt);
        if (r < 0)
                return cella_error_errno(err, -r, "load agent %s", cfg->agent_path);
        rt->agent_fd = r;
        if (cfg->disk_mode == DISK_MODE_OFF) {
                snprintf(rt->disk_state, sizeof(rt->disk_state),
                         "disk limits off (--disk-quota=off)");
        } else {
                char why[200] = "";
                r = disk_probe(NULL, rt->mkfs, sizeof(rt->mkfs), why, sizeof(why));
                if (r < 0 && cfg->disk_mode == DISK_MODE_REQUIRED)
                        return cella_error_errno(
                                err, -r, "disk limits required but not enforceable: %s", why);
                rt->disk_enforced = r >= 0;
                /* Spares need the templates; without them (cellad --check) there are none. */
                if (rt->disk_enforced && rt->disk_template_dir[0]) {
                        r = disk_spares_new(rt->disk_template_dir, rt->mkfs, &rt->spares);
                        if (r < 0)
                                return cella_error_errno(err, -r, "disk spares");
                }
                if (rt->disk_enforced)
                        snprintf(rt->disk_state, sizeof(rt->disk_state),
                                 "disk limits enforced (one sparse ext4 image per sandbox on a "
                                 "loop device, %s)",
                                 rt->mkfs);
                else
                        snprintf(rt->disk_state, sizeof(rt->disk_state),
                                 "disk limits NOT enforced: %s", why);
        }
        if (!cfg->data_dir) {
                snprintf(rt->reflink_state, sizeof(rt->reflink_state),
                         "snapshots copy the writable layer (data dir not probed)");
        } else {
                char why[200] = "", dir[CELLA_PATH_MAX];
                /* A data dir not made yet (cellad --check): its nearest existing parent,
                 * which it will be made on. */
                snprintf(dir, sizeof(dir), "%s", cfg->data_dir);
                r = disk_reflink_probe(dir, why, sizeof(why));
                for (char *slash; r == -ENOENT && (slash = strrchr(dir, '/')) && slash != dir;) {
                        *slash = '\0';
                        r = disk_reflink_probe(dir, why, sizeof(why));
                }
                rt->reflink = r >= 0;
                if (rt->reflink)
                        snprintf(rt->reflink_state, sizeof(rt->reflink_state),
                                 "data dir has reflinks: a snapshot of a sandbox with a disk "
                                 "clones its image");
                else
                        snprintf(rt->reflink_state, sizeof(rt->reflink_state),
                                 "snapshots copy the writable layer: %s", why);
        }
        return 0;
}

int runtime_new(const struct runtime_config *cfg, struct runtime **ret, struct cella_error *err)
{
        struct runtime *rt = calloc(1, sizeof(*rt));
        size_t skipped = 0;
        int r;

        if (!rt)
                return cella_error_errno(err, ENOMEM, "runtime");
        rt->agent_fd = -EBADF;
        rt->agent_mnt = -EBADF;
        rt->criu_run_mnt = -EBADF;
        rt->uts_fd = -EBADF;
        rt->net_fd = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        if (rt->net_fd < 0) {
                r = cella_error_errno(err, errno, "runtime: open own network namespace");
                goto free_runtime;
        }
        rt->uts_fd = open("/proc/thread-self/ns/uts", O_RDONLY | O_CLOEXEC);
        if (rt->uts_fd < 0) {
                r = cella_error_errno(err, errno, "runtime: open own UTS namespace");
                goto free_runtime;
        }
        rt->disk_enforced = false;
        rt->check_only = cfg->check_only;
        if (cfg->disk_template_dir)
                snprintf(rt->disk_template_dir, sizeof(rt->disk_template_dir), "%s",
                         cfg->disk_template_dir);
        snprintf(rt->cgroup_name, sizeof(rt->cgroup_name), "%s",
                 cfg->cgroup_name ? cfg->cgroup_name : "cella");

        {
                struct net_config ncfg = {.table = rt->cgroup_name,
                                          .range = cfg->network_range,
                                          .probe_only = cfg->check_only};
                r = net_new(&ncfg, &rt->net, err);
                if (r < 0)
                        goto free_runtime;
        }
        r = runtime_probe(rt, cfg, &skipped, err);
        if (r < 0) {
                cella_error_prefix(err, "runtime");
                goto free_runtime;
        }
        {
                cap_t cur = cap_get_proc();
                cap_flag_value_t v = CAP_CLEAR;
                if (cur && cap_get_flag(cur, CAP_SYS_RESOURCE, CAP_EFFECTIVE, &v) == 0)
                        rt->oom_protect = v == CAP_SET;
                if (cur)
                        cap_free(cur);
        }
        snprintf(rt->description, sizeof(rt->description),
                 "cgroups %s at %s; idmapped overlay lower (userxattr); seccomp deny list "
                 "(%u instructions, %zu syscalls unknown here); agent copied to a private tmpfs "
                 "and bound read-only at /" MOUNTS_AGENT_EXE "; %s; %s; "
                 "%s; %s",
                 cgroup_mode_name(rt->cg.mode), rt->cg.v2_root, (unsigned)rt->filter.len, skipped,
                 rt->oom_protect ? "agent oom_score_adj -1000"
                                 : "no CAP_SYS_RESOURCE: agent oom_score_adj left at 0",
                 rt->disk_state, rt->reflink_state, net_state(rt->net));
        *ret = rt;
        return 0;
free_runtime:
        runtime_free(rt);
        return r;
}

void runtime_free(struct runtime *rt)
{
        if (!rt)
                return;
        /* The daemon's cgroup parents go with it when no sandbox is left in them (rmdir
         * refuses a non-empty cgroup, so running sandboxes keep theirs). */
        char path[CELLA_PATH_MAX + 80];
        bool empty = true;
        /* A probe made nothing, and the cgroup parent may be a running daemon's. */
        if (rt->check_only)
                memset(&rt->cg, 0, sizeof(rt->cg));
        if (rt->cg.v2_root[0]) {
                snprintf(path, sizeof(path), "%s/%s", rt->cg.v2_root, rt->cgroup_name);
                empty = rmdir(path) == 0 || errno == ENOENT;
        }
        /* Likewise the nft table: running sandboxes keep their filter and NAT. */
        if (empty && rt->net && net_remove_table(rt->net) < 0)
                log_warn("network: could not remove the nft table");
        net_free(rt->net);
        for (int i = 0; i < _CGROUP_V1_MAX; i++)
                if (rt->cg.v1_root[i][0]) {
                        snprintf(path, sizeof(path), "%s/%s", rt->cg.v1_root[i], rt->cgroup_name);
                        rmdir(path);
                }
        disk_spares_free(rt->spares);
        filter_prog_done(&rt->filter);
        caps_done(&rt->caps);
        if (rt->agent_fd >= 0)
                close(rt->agent_fd);
        if (rt->agent_mnt >= 0)
                close(rt->agent_mnt);
        if (rt->criu_run_mnt >= 0)
                close(rt->criu_run_mnt);
        if (rt->uts_fd >= 0)
                close(rt->uts_fd);
        if (rt->net_fd >= 0)
                close(rt->net_fd);
        free(rt);
}

const char *runtime_describe(const struct runtime *rt)
{
        return rt->description;
}

const char *runtime_disk_state(const struct runtime *rt)
{
        return rt->disk_state;
}

bool runtime_reflink(const struct runtime *rt)
{
        return rt->reflink;
}

const char *runtime_reflink_state(const struct runtime *rt)
{
        return rt->reflink_state;
}

bool runtime_disk_enforced(const struct runtime *rt)
{
        return rt->disk_enforced;
}

struct net *runtime_net(const struct runtime *rt)
{
        return rt->net;
}
