/* A registry rebuilt from the sandboxes themselves (docs/decisions/0035-registry-rebuild.md).
 *
 * Every named sandbox's directory holds an identity file, <data-dir>/sandboxes/s<slot>/
 * sandbox.json, written by cellad (never visible inside the sandbox) whenever what it
 * records changes: the sandbox's name, image, instance type, creation time, network and
 * allowlist, sleepAfter, keepAlive and enableDefaultSession. When the registry is gone or
 * damaged (store_is_fresh), rebuild_registry() turns every identity file into a record and
 * finds each running sandbox's PID 1 through its cgroup, so that the sandbox table's usual
 * start-up reattaches it. What only the registry held is lost: the sandbox's env and
 * labels, its exposed ports and their tokens, lastActiveAt. Warm-pool sandboxes have no
 * identity file (their claim writes it), so they stay leftovers as before. */
#ifndef CELLA_DAEMON_REBUILD_H
#define CELLA_DAEMON_REBUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/limits.h"
#include "daemon/store.h"

#define IDENTITY_FILE "sandbox.json"
#define IDENTITY_MAX 8192 /* bytes of an identity file */

/* A parsed identity file: rec's strings point into the buffers. */
struct identity {
        struct store_sandbox rec; /* env, labels "{}"; last_active_ms, pid, pid_start 0 */
        char name[CELLA_NAME_MAX + 1];
        char image[65];
        char instance_type[32];
        char network[16];
        char network_allow[IDENTITY_MAX];
        char snapshot[65];  /* the snapshot its files start from (0048), or "" */
        char sleep_mode[8]; /* "files" or "memory" (0050) */
};

/* The identity text of rec (compact JSON, keys sorted; the caller frees it), or NULL when
 * out of memory. Only the fields named above are in it. */
char *identity_format(const struct store_sandbox *rec);
/* Parse an identity file's text (len bytes, not NUL-terminated). Pure. Returns 0 or
 * -EINVAL for anything that is not a valid identity (unknown fields are ignored). */
int identity_parse(const char *text, size_t len, struct identity *ret);
/* Does <dir>/sandbox.json hold exactly text? (a restarted daemon rewrites nothing) */
bool identity_is(const char *dir, const char *text);
/* Write text to <dir>/sandbox.json (a temporary file renamed over it, mode 0600). */
int identity_write(const char *dir, const char *text, struct cella_error *err);
/* Make identity_write's temporary file ahead, empty (a pool sandbox's, at its build): the
 * claim's write then allocates no inode on the request path. Returns 0 or -errno. */
int identity_prepare(const char *dir);

/* A snapshot's record, kept beside its files as <data-dir>/snapshots/<id>/snapshot.json
 * (decision 0048), so that a rebuilt registry gets its snapshots back. */
#define SNAPSHOT_IDENTITY_FILE "snapshot.json"
struct snapshot_identity {
        struct store_snapshot rec;
        char id[65], name[65], sandbox[CELLA_NAME_MAX + 1], image[65], parent[65];
        char method[8];
};
/* Its text (compact JSON, keys sorted; the caller frees it), or NULL: out of memory. */
char *snapshot_identity_format(const struct store_snapshot *rec);
/* Parse it (len bytes). Pure. 0, or -EINVAL for anything that is not a valid one. */
int snapshot_identity_parse(const char *text, size_t len, struct snapshot_identity *ret);
/* The records of every <data-dir>/snapshots/<id>/ with a valid snapshot.json whose id is
 * its directory's, into st; *ret_found of them. */
int rebuild_snapshots(struct store *st, const char *data_dir, unsigned *ret_found,
                      struct cella_error *err);

/* Field 22 of /proc/PID/stat (start time in clock ticks since boot), or -1. Together with
 * the pid it names one process for the life of the machine. */
int64_t proc_start_time(pid_t pid);

struct rebuild_result {
        unsigned found;     /* identity files turned into records */
        unsigned running;   /* of them, with a live PID 1 */
        unsigned skipped;   /* directories without a (valid, unique) identity file */
        double duration_ms; /* the whole rebuild */
};

/* Records for every sandbox directory below <data_dir>/sandboxes with an identity file,
 * saved in st (a fresh registry), with the pid and start time of the PID 1 found in the
 * cgroup <cgroup_name>/s<slot> when it runs. Also marks the layout as slot-named. Returns 0
 * or -1 with err set (a registry write failed). */
int rebuild_registry(struct store *st, const char *data_dir, const char *cgroup_name,
                     struct rebuild_result *ret, struct cella_error *err);

#endif
