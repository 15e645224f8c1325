/* The mounts inside a sandbox's new root, as data. mounts_plan() is pure; mounts_apply()
 * runs in the child between clone and exec (no allocation), with the current directory at
 * the root of the overlay and the host's root still reachable (fresh proc and sysfs need
 * a fully visible instance in the mount namespace). Targets are relative to the new root.
 */
#ifndef CELLA_RUNTIME_MOUNTS_H
#define CELLA_RUNTIME_MOUNTS_H

#include <stdbool.h>
#include <stddef.h>

enum mount_kind {
        MOUNT_FS,       /* fresh filesystem: fstype at target with flags and data */
        MOUNT_BIND,     /* source (absolute host path or relative) bound on target */
        MOUNT_RO_BIND,  /* target bound on itself, then remounted read-only */
        MOUNT_MKDIR,    /* directory target with mode */
        MOUNT_FILE,     /* empty file target (bind mount point) */
        MOUNT_SYMLINK,  /* target -> source */
        MOUNT_DIR,      /* directory target of the sandbox's own files: made with mode when
                        * absent, replaced when not a directory, else left as it is */
        MOUNT_EMPTY_RO, /* an empty, unreachable directory bound read-only on target: source
                         * (a fresh directory of a tmpfs of the plan) is made, bound with
                         * flags and removed, so nothing can ever be created in it */
};

struct mount_step {
        enum mount_kind kind;
        const char *source;
        const char *target;
        const char *fstype;
        unsigned long flags;
        const char *data;
        unsigned mode;
        bool optional; /* failure (e.g. missing target, refused by the kernel) is skipped;
                        * for MOUNT_EMPTY_RO only a missing target */
};

#define MOUNTS_MAX 48

/* The agent's directory, its executable's mount point and its listening socket, relative
 * to the new root (the socket is bound at "/" MOUNTS_AGENT_SOCKET after pivot_root). The
 * executable's name is the agent's comm and argv[0]: "cella-init". */
#define MOUNTS_AGENT_DIR "run/.cella"
#define MOUNTS_AGENT_EXE MOUNTS_AGENT_DIR "/cella-init"
#define MOUNTS_AGENT_SOCKET MOUNTS_AGENT_DIR "/agent.sock"

struct mount_plan {
        size_t n;
        struct mount_step steps[MOUNTS_MAX];
};

/* Returns 0 or -E2BIG. */
int mounts_plan(struct mount_plan *ret);
/* Apply in the child. On failure *ret_step is the failing index. Returns 0 or -errno. */
int mounts_apply(const struct mount_plan *plan, size_t *ret_step);

#endif
