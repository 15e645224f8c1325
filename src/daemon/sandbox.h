/* The sandbox table: names to running sandboxes, lazy creation, destroy.
 *
 * A struct sandbox is owned by the table; handlers borrow it for the duration of a
 * callback and keep it across callbacks only with sandbox_ref()/sandbox_unref().
 * The HTTP handlers and the preview proxy find sandboxes through the table's directory
 * (sandbox-directory.h, sandbox_table_directory()), an operations table another
 * directory (several nodes) can stand behind; the functions here are the local one. */
#ifndef CELLA_DAEMON_SANDBOX_H
#define CELLA_DAEMON_SANDBOX_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <uv.h>

#include "common/error.h"
#include "daemon/agent-conn.h"
#include "runtime/disk.h"

struct sandbox_table;
struct sandbox;
struct runtime;
struct store;

/* Options as api_decode_put_sandbox() gives them: checked, and networkAllow in its
 * canonical form (sandbox-options.h); the table checks only what needs itself or the host
 * (an existing sandbox's image, instance type and network; the image being built; the
 * network mode being there; disk). */
struct sandbox_options {
        const char *image;         /* NULL: daemon default */
        const char *instance_type; /* NULL: default (see docs/decisions) */
        json_t *env;               /* object of strings, or NULL; borrowed */
        json_t *labels;            /* object of strings, or NULL; borrowed */
        int64_t sleep_after_ms;    /* idle time before the sandbox sleeps; 0: default */
        const char *sleep_mode;    /* "files" or "memory" (0050); NULL: not given ("files") */
        bool has_keep_alive;       /* keep_alive given */
        bool keep_alive;           /* never sleep */
        bool has_default_session;  /* default_session given */
        bool default_session;      /* calls without a sessionId use the session "default" */
        const char *network;       /* "none" or "outbound"; NULL: the daemon's default */
        json_t *network_allow;     /* array of canonical "CIDR[:port]", or NULL; borrowed */
        /* id of a snapshot its files start from (0048), checked by the caller, whose image
         * is then image; NULL: none */
        const char *snapshot;
        /* a memory fork's images (sandbox_table_memory_fork), moved into the new sandbox's
         * dir: its first start restores the parent's processes, or fails; NULL: none */
        const char *memory_images;
};

struct sandbox_table_config {
        const char *data_dir;   /* sandboxes/s<slot>/ below it, cella.db */
        const char *images_dir; /* <images_dir>/<image>/rootfs */
        const char *default_image;
        const char *agent_path; /* cella-init binary */
        unsigned max_sandboxes;
        unsigned pool_size;           /* warm pool: sandboxes built ahead; 0: none */
        enum disk_mode disk_mode;     /* --disk-quota */
        uint64_t disk_limit_override; /* --disk-limit-override: every sandbox's disk limit */
        const char *network_range;    /* --network-range CIDR; NULL: recorded or chosen */
        const uint32_t *uid_base;     /* --uid-base; NULL: recorded or chosen */
        /* --disk-overcommit: disk promised to sandboxes (their images' sizes) over the data
         * dir's filesystem size that is allowed; 0: CELLA_DISK_OVERCOMMIT_DEFAULT */
        double disk_overcommit;
        bool disk_overcommit_refuse; /* --disk-overcommit-policy refuse (else warn) */
        /* Why sleepMode "memory" cannot be had on this host (runtime/criu.h, decision
         * 0050): sandboxes asking for it sleep as "files" and say this; NULL: it can. */
        const char *memory_sleep_unavailable;
};

struct host_claim;
/* The instance name of a data directory: its cgroup parent in every hierarchy and its nft
 * table ("cella" for /var/lib/cella, "cella-<hash>" for any other). out: 32 bytes. */
void sandbox_instance_name(const char *data_dir, char *out, size_t outsz);
/* Claim the network range and host uid block of the daemon of data_dir
 * (runtime/host-claim.h), its uid slots enough for max_sandboxes; probe_only (cellad
 * --check): only choose them. 0 or -1 with *err set. */
int sandbox_instance_claim(const char *data_dir, const char *network_range,
                           const uint32_t *uid_base, unsigned max_sandboxes, bool probe_only,
                           struct host_claim **ret, struct cella_error *err);

int sandbox_table_new(uv_loop_t *loop, const struct sandbox_table_config *cfg,
                      struct sandbox_table **ret, struct cella_error *err);
/* Why sleepMode "memory" and fork with memory fall back or are refused on this host
 * (decision 0050). Owned by the table. Never "" while cellad has no checkpoint of its
 * own ("" is what a host where they work will say). */
const char *sandbox_table_memory_sleep_fallback(const struct sandbox_table *t);
void sandbox_table_free(struct sandbox_table *t); /* stops every sandbox's agent link */

/* Find the sandbox named name (already validated). With create, make it (with opts, or
 * defaults when opts is NULL) if it does not exist, or start it again if it is stopped;
 * it is running when this returns; *ret_created says whether it was made. Without create
 * it is only looked up (a stopped sandbox stays stopped): SANDBOX_NOT_FOUND if absent. */
int sandbox_table_get(struct sandbox_table *t, const char *name, bool create,
                      const struct sandbox_options *opts, struct sandbox **ret, bool *ret_created,
                      struct cella_error *err);
/* PUT semantics: create with opts, or update env/labels of an existing one. */
int sandbox_table_put(struct sandbox_table *t, const char *name, const struct sandbox_options *opts,
                      struct sandbox **ret, bool *ret_created, struct cella_error *err);
/* Destroy: kill every process, remove cgroups, files and the record. *ret_existed says
 * whether there was one. */
int sandbox_table_destroy(struct sandbox_table *t, const char *name, bool *ret_existed,
                          struct cella_error *err);
/* Some sandbox (any state: a sleeping one wakes on it) or the pool uses image, or it is
 * the daemon's default image. */
bool sandbox_table_image_in_use(struct sandbox_table *t, const char *image);
/* Was a sandbox of the table made from snapshot id (docs/decisions/0048)? */
bool sandbox_table_snapshot_in_use(struct sandbox_table *t, const char *id);
/* Filesystem snapshots (docs/decisions/0048-snapshots-and-fork.md); a snapshot's JSON is
 * {snapshotId, name, sandbox, image, sizeBytes, createdAt}, a new reference, NULL with
 * *err set. Create: the sandbox named name_of (any state but starting) frozen while its
 * writable layer is copied on the loop's thread pool; snap_name NULL: its id. cb gets the
 * snapshot (borrowed) or the error, on the loop; a -1 return (err set) means no call. */
typedef void (*sandbox_snapshot_cb)(json_t *snapshot, const struct cella_error *err,
                                    void *userdata);
int sandbox_table_snapshot_create(struct sandbox_table *t, const char *name_of,
                                  const char *snap_name, sandbox_snapshot_cb cb, void *userdata,
                                  struct cella_error *err);
/* A memory fork of the running sandbox name_of (docs/decisions/0050, "memory fork"): its
 * processes dumped by CRIU with the tree left running, into an images directory of
 * cellad's (0700, in its sandbox dir), and a files snapshot of the same instant (the
 * cgroup frozen from before the dump to the end of the capture). cb gets the snapshot
 * (borrowed) and the images' path, which the child's PUT moves into its own dir
 * (sandbox_options.memory_images; the caller removes them if it makes no child), or the
 * error (MEMORY_FORK_FAILED with CRIU's first error; nothing left), on the loop; the
 * parent runs on either way. A -1 return (err set) means no call. */
typedef void (*sandbox_memfork_cb)(json_t *snapshot, const char *images,
                                   const struct cella_error *err, void *userdata);
int sandbox_table_memory_fork(struct sandbox_table *t, const char *name_of, sandbox_memfork_cb cb,
                              void *userdata, struct cella_error *err);
/* Put the sandbox named name to sleep now, as an idle sleep does (its sleepMode: a memory
 * checkpoint where the host can, else its files; 0050's fallbacks), whatever its keepAlive
 * and open streams (they end as a sleep ends them): docs/decisions/0063. cb gets it asleep
 * (borrowed) or the error, on the loop, once the sleep is over (a memory sleep: after its
 * checkpoint); a sleeping one is called back before this returns; a start in progress is
 * waited for, then the sandbox sleeps. A -1 return (err set: SANDBOX_NOT_FOUND,
 * SANDBOX_STOPPED, SANDBOX_UNAVAILABLE while a snapshot captures it) means no call. */
typedef void (*sandbox_sleep_cb)(struct sandbox *s, const struct cella_error *err, void *ud);
int sandbox_table_sleep(struct sandbox_table *t, const char *name, sandbox_sleep_cb cb, void *ud,
                        struct cella_error *err);
/* A memory fork's images that no child took, removed (0, or -errno; absent: -ENOENT). */
int sandbox_memfork_images_remove(const char *images);
/* All snapshots (sandbox NULL) or those of one sandbox: a JSON array. */
json_t *sandbox_table_snapshots(struct sandbox_table *t, const char *sandbox,
                                struct cella_error *err);
/* The snapshot of that id or name (SNAPSHOT_NOT_FOUND); its image into image if not NULL. */
json_t *sandbox_table_snapshot_get(struct sandbox_table *t, const char *id, char *image,
                                   size_t image_sz, struct cella_error *err);
/* Another capture of s that freezes its cgroup (a consistent backup, backup.c): it takes
 * its place in s's queue of captures, after the snapshots and captures before it, so that
 * none thaws the sandbox under another. run(ud) is called on the loop when its turn comes
 * (at once when the queue is empty); the capture, thawed, calls sandbox_capture_done(s)
 * on the loop, which starts the next. s is referenced meanwhile. 0 or -ENOMEM. */
int sandbox_capture_queue(struct sandbox *s, void (*run)(void *ud), void *ud);
void sandbox_capture_done(struct sandbox *s);
/* Delete: SNAPSHOT_IN_USE while a sandbox was made from it, SNAPSHOT_NOT_FOUND. */
int sandbox_table_snapshot_delete(struct sandbox_table *t, const char *id_or_name,
                                  struct cella_error *err);
/* The layers of snapshot id, topmost first: its own, then its parent's... (paths of
 * CELLA_PATH_MAX; at most max); SNAPSHOT_NOT_FOUND, VALIDATION_FAILED past max. */
int sandbox_table_snapshot_layers(struct sandbox_table *t, const char *id,
                                  char (*paths)[CELLA_PATH_MAX], size_t max, size_t *ret_n,
                                  struct cella_error *err);
/* The same, with how each layer is stored (container.h: a directory, or a disk clone and
 * the base of its owners, 0051) in info (max entries; NULL: not wanted). */
struct container_layer;
int sandbox_table_snapshot_chain(struct sandbox_table *t, const char *id,
                                 char (*paths)[CELLA_PATH_MAX], struct container_layer *info,
                                 size_t max, size_t *ret_n, struct cella_error *err);
/* Bytes of every snapshot's files, each counted once however many sandboxes share it. */
uint64_t sandbox_table_snapshot_bytes(struct sandbox_table *t);
/* Remove what captures cut short by a stop of cellad left (snapshots/.partial-*). */
void sandbox_table_snapshot_sweep(struct sandbox_table *t);
/* JSON array of sandbox_info() for every sandbox; new reference. */
json_t *sandbox_table_list(struct sandbox_table *t);
unsigned sandbox_table_count(const struct sandbox_table *t);
/* Disk for /v1/health: {capacityBytes, freeBytes, promisedBytes, overcommit,
 * overcommitLimit, overcommitPolicy, overcommitted}; new reference. */
json_t *sandbox_table_disk_info(struct sandbox_table *t);
/* The warm pool for /v1/health: {size, ready, claims, builds}; new reference. */
json_t *sandbox_table_pool_info(const struct sandbox_table *t);
/* Write the registry records of the claims made since the last call, in one transaction
 * (decision 0059): the commit point of a claim, which every HTTP answer waits for (cellad
 * calls it before it queues any answer's bytes) and the end of each loop turn does anyway.
 * A claim whose record cannot be written is undone: its sandbox is removed. */
void sandbox_table_commit(struct sandbox_table *t);

/* SandboxInfo: {id, state, image, instanceType, createdAt, lastActiveAt, labels, env,
 * sleepAfter, keepAlive, network, networkAllow, networkAddress (outbound only),
 * disk: {limitBytes, usedBytes} (with a disk image)};
 * new reference. */
json_t *sandbox_info(const struct sandbox *s);
const char *sandbox_name(const struct sandbox *s);
/* Merged environment for commands (sandbox env); borrowed. */
json_t *sandbox_env(const struct sandbox *s);
/* setEnvVars: strings set, nulls unset (vars validated by the caller); persisted. */
int sandbox_set_env(struct sandbox *s, json_t *vars, struct cella_error *err);
/* Do calls without a sessionId go to the session "default" (else sessionless)? */
bool sandbox_default_session(const struct sandbox *s);
/* Mark activity (every request and stream does this). */
void sandbox_touch(struct sandbox *s);
/* The sandbox's agent connection (NULL if it is not running). */
struct agent_conn *sandbox_agent(struct sandbox *s);
/* Is it asleep with its memory (a checkpoint the next wake restores, 0050)? */
bool sandbox_memory_asleep(struct sandbox *s);
/* Is its container running (not sleeping, stopped or destroyed)? */
bool sandbox_running(const struct sandbox *s);
/* What tells this run of the sandbox from earlier ones (its PID 1's start time); 0 when
 * it is not running. */
int64_t sandbox_instance(const struct sandbox *s);
/* A TCP socket created in the sandbox's network namespace (runtime_container_socket);
 * fd or -errno (-ESRCH when it is not running). */
int sandbox_socket(struct sandbox *s);
/* A regular file of the running sandbox opened for reading from the host, as its root
 * could (runtime_container_open_file, under the ids of its root on the host), with
 * *ret_st; *ret_pidfd gets a duplicate of its PID 1's pidfd (readable once it exits: the
 * caller closes the file then). fd or -errno (-ESRCH when it is not running). */
int sandbox_open_file(struct sandbox *s, const char *path, struct stat *ret_st, int *ret_pidfd);
/* A pidfd of the running sandbox's PID 1 of the caller's own (close-on-exec; from the
 * agent link when cellad holds none, decision 0060): fd or -errno (-ESRCH when it is not
 * running). */
int sandbox_pidfd_dup(struct sandbox *s);
/* The registry (for the exposed ports kept beside the sandboxes). */
struct store *sandbox_table_store(struct sandbox_table *t);
void sandbox_ref(struct sandbox *s);
void sandbox_unref(struct sandbox *s);

#endif
