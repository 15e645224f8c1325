/* The container's child between clone3 and exec (container-child.c), and what the parent
 * (container.c) shares with it: the steps it reports, its report, its arguments. */
#ifndef CELLA_RUNTIME_CONTAINER_CHILD_H
#define CELLA_RUNTIME_CONTAINER_CHILD_H

#include <stddef.h>
#include <stdint.h>

#include "runtime/cgroup.h"

struct runtime;

enum child_step {
        STEP_SYNC,
        STEP_SOCKET,
        STEP_SETGROUPS,
        STEP_SETGID,
        STEP_SETUID,
        STEP_CGROUPNS,
        STEP_CGROUPS,
        STEP_HOSTNAME,
        STEP_PRIVATE,
        STEP_DISK,
        STEP_DIRS,
        STEP_LOWER,
        STEP_OVERLAY,
        STEP_ROOT,
        STEP_MOUNTS,
        STEP_AGENT,
        STEP_PIVOT,
        STEP_OLDROOT,
        STEP_WORKSPACE,
        STEP_LOOPBACK,
        STEP_CAPS,
        STEP_NNP,
        STEP_SESSION,
        STEP_SIGNALS,
        STEP_SECCOMP,
        STEP_FDS,
        STEP_EXEC,
        _STEP_MAX,
};

extern const char *const container_child_step_names[_STEP_MAX];

struct child_report {
        int32_t step;
        int32_t err;   /* positive errno */
        int32_t index; /* mount step index for STEP_MOUNTS */
};

/* Everything the child needs, prepared by the parent. */
struct child_args {
        const struct runtime *rt;
        const char *hostname;
        int sync_fd;     /* child's end */
        int psync_fd;    /* parent's end (closed in the child) */
        const char *dir; /* the sandbox dir: overlay mount point */
        int disk_fd;     /* detached mount of the sandbox's disk (upper, work), or -EBADF */
        size_t n_layers; /* snapshots' layers that follow the image on the sync socket */
        /* a detached read-only bind mount of cellad's copy of cella-init (cloned in the
         * parent, whose descriptors reach it), attached by the child at MOUNTS_AGENT_EXE */
        int agent_mnt;
        /* the "tasks" files of its v1 cgroups, opened by the parent (cgroup_plan_open_v1_tasks):
         * the child joins them itself, first thing */
        int v1_tasks[_CGROUP_V1_MAX];
        size_t n_v1_tasks;
        int log_fd;  /* -> fd 1, 2 */
        int null_fd; /* -> fd 0 */
};

/* The child: ids, namespaces, mounts, pivot_root, the agent's socket, caps, seccomp, fds,
 * then exec of the agent; a failure is reported as {step, errno} on a->sync_fd. */
_Noreturn void container_child_main(const struct child_args *a);

#endif
