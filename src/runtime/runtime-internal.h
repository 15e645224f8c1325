/* The runtime's state, shared by its parts: runtime.c makes and frees it (what is computed
 * once per daemon), container.c starts and stops sandboxes with it. Nothing outside
 * src/runtime includes this; the rest of the daemon sees struct runtime as opaque. */
#ifndef CELLA_RUNTIME_RUNTIME_INTERNAL_H
#define CELLA_RUNTIME_RUNTIME_INTERNAL_H

#include <stdbool.h>

#include "common/limits.h"
#include "runtime/caps.h"
#include "runtime/cgroup.h"
#include "runtime/container.h"
#include "runtime/disk.h"
#include "runtime/filter.h"
#include "runtime/mounts.h"
#include "runtime/net.h"

struct runtime {
        struct cgroup_layout cg;
        struct filter_prog filter;
        struct caps caps;
        struct mount_plan mounts;
        int agent_fd;                           /* O_PATH on cella-init in agent_mnt */
        int agent_mnt;                          /* cellad's detached read-only tmpfs */
        int criu_run_mnt;                       /* CRIU's /run in restores (checkpoint.c) */
        int uts_fd;                             /* our own UTS namespace (after a rename) */
        int net_fd;                             /* our own network namespace */
        bool oom_protect;                       /* we may lower oom_score_adj (CAP_SYS_RESOURCE) */
        bool check_only;                        /* cellad --check: nothing of ours on the host */
        bool disk_enforced;                     /* new sandboxes get a disk image */
        char mkfs[64];                          /* mkfs.ext4 (when disk_enforced) */
        char disk_template_dir[CELLA_PATH_MAX]; /* empty filesystems per size, or "" */
        struct disk_spares *spares;             /* new disks made ahead (disk.h); NULL: none */
        struct net *net;                        /* sandbox networking (net.h) */
        char disk_state[256];                   /* for runtime_describe and the startup log */
        bool reflink;            /* the data dir shares extents: snapshots clone disks (0051) */
        char reflink_state[256]; /* for runtime_describe, --check and /v1/health */
        char cgroup_name[64];
        char description[CELLA_PATH_MAX + 768];
};

/* container.c's parts a checkpoint's restore (checkpoint.c) shares with a start. */
int container_lower(const char *rootfs, int userns);
int container_lower_disk(const char *dir, uid_t id_base, const struct container_spec *spec,
                         int own_userns);
int container_mapped_userns(uint32_t from, uint32_t to, uint32_t count);
int container_open_disk(struct runtime *rt, const struct container_spec *spec, int dir_fd, int *ret,
                        struct cella_error *err);
int container_open_agent_log(int dir_fd, uid_t owner);
/* upper, work and the runtime's files in the upper layer (container.c's start, step 1; a
 * memory fork's child before its restore): 0, or -errno with *err set. */
int container_prepare_upper(struct runtime *rt, const struct container_spec *spec, int root_fd,
                            struct cella_error *err);
int container_agent_bind(const struct runtime *rt);

#endif
