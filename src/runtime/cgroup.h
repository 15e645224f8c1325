/* Cgroups of a container: host layout detection, a plan of directory creations and file
 * writes (pure data), its application, and teardown.
 *
 * Two layouts are supported. Pure v2 (controllers in the unified hierarchy, usually at
 * /sys/fs/cgroup): limits are written in the container's v2 directory. Hybrid (v1
 * controllers memory/cpu/pids under their own mounts, a controller-less v2 hierarchy at
 * /sys/fs/cgroup/unified): limits go to v1 directories, while the v2 directory still holds
 * membership (CLONE_INTO_CGROUP), cgroup.kill and cgroup.freeze. In both layouts the v2
 * directory is delegated to the sandbox's root (uid_base) so the agent can make
 * sub-cgroups. */
#ifndef CELLA_RUNTIME_CGROUP_H
#define CELLA_RUNTIME_CGROUP_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/limits.h"

enum cgroup_mode {
        CGROUP_MODE_NONE,   /* no usable cgroup2 mount */
        CGROUP_MODE_V2,     /* controllers memory, pids, cpu in the unified hierarchy */
        CGROUP_MODE_HYBRID, /* v1 controllers + controller-less v2 for membership */
};

enum { CGROUP_V1_MEMORY, CGROUP_V1_PIDS, CGROUP_V1_CPU, _CGROUP_V1_MAX };

struct cgroup_layout {
        enum cgroup_mode mode;
        char v2_root[CELLA_PATH_MAX];                 /* mount point of cgroup2 */
        char v1_root[_CGROUP_V1_MAX][CELLA_PATH_MAX]; /* "" when the controller is absent */
};

/* Detect the layout from the text of /proc/self/mountinfo and the content of the v2
 * root's cgroup.controllers (may be NULL or ""). Pure. Returns 0 or -ENOENT when there is
 * no cgroup2 mount, -EOPNOTSUPP when neither v2 nor v1 provides memory, pids and cpu. */
int cgroup_detect(const char *mountinfo, const char *v2_controllers, struct cgroup_layout *ret);
/* The same against the running system. */
int cgroup_detect_host(struct cgroup_layout *ret);
const char *cgroup_mode_name(enum cgroup_mode mode);

#define CGROUP_PLAN_MAX 32
#define CGROUP_MAX_DESCENDANTS 1024

enum cgroup_op {
        CGROUP_OP_MKDIR, /* path */
        CGROUP_OP_WRITE, /* value -> path */
        CGROUP_OP_CHOWN, /* path to uid */
};

struct cgroup_step {
        enum cgroup_op op;
        bool optional; /* ENOENT (file absent on this kernel) is not an error */
        char path[CELLA_PATH_MAX];
        char value[64];
};

struct cgroup_limits {
        uint64_t memory_bytes; /* 0: none */
        uint32_t cpu_millis;   /* 0: none */
        uint32_t pids_max;     /* 0: none */
};

struct cgroup_plan {
        char v2_dir[CELLA_PATH_MAX];                 /* <v2_root>/<name>/<id> */
        char v1_dir[_CGROUP_V1_MAX][CELLA_PATH_MAX]; /* "" if not used */
        size_t n;
        struct cgroup_step steps[CGROUP_PLAN_MAX];
};

/* Compute what to create and write for container id under <name>. Pure. Returns 0,
 * -ENAMETOOLONG or -E2BIG. */
int cgroup_plan_make(const struct cgroup_layout *layout, const char *name, const char *id,
                     const struct cgroup_limits *limits, uid_t owner, struct cgroup_plan *ret);
/* Apply a plan. On failure *ret_step gets the index of the failing step. */
int cgroup_plan_apply(const struct cgroup_plan *plan, size_t *ret_step);
/* Open the "tasks" file of every v1 directory of the plan for writing, close-on-exec, into
 * fds (unused entries -EBADF); *ret_n gets how many. A single-threaded process that writes
 * "0" to them joins those cgroups itself: the kernel then moves one thread, the caller,
 * without its global threadgroup lock, whose write side waits for an RCU grace period
 * (decision 0059). The files' opener (root) is whose permission the kernel checks. Returns
 * 0 or -errno (nothing left open). */
int cgroup_plan_open_v1_tasks(const struct cgroup_plan *plan, int fds[_CGROUP_V1_MAX],
                              size_t *ret_n);

/* Kill every process below the container's cgroups, then remove the directories
 * depth-first. Waits (bounded) for the processes to disappear. Returns 0, or -EBUSY when
 * something did not die in time, or another -errno. Missing directories are fine. */
int cgroup_destroy(const struct cgroup_layout *layout, const char *name, const char *id);

/* Pure helper for tests: the v2 directory of a container. */
int cgroup_v2_dir(const struct cgroup_layout *layout, const char *name, const char *id, char *buf,
                  size_t size);

#endif
