/* What the parts of the sandbox table share (sandbox.h is the interface; this header is
 * only for sandbox-*.c): struct sandbox, struct sandbox_table, and the functions one part
 * calls in another.
 *
 *   sandbox-table.c    the hash by name, lookup, list, info, accessors, the record
 *   sandbox-slots.c    uid/network slots, disk admission, network options
 *   sandbox-pool.c     the warm pool
 *   sandbox-start.c    starting (on the loop or its thread pool), waiting for a start,
 *                      the watch of PID 1, the agent link, the one teardown
 *   sandbox-life.c     lifecycle: create, sleep, wake, update, destroy; the directory ops
 *   sandbox-recover.c  start-up: instance claim, registry load/migration, reattach, sweep
 *
 * No part includes another's header: they meet here, so the include graph stays a tree. */
#ifndef CELLA_DAEMON_SANDBOX_INTERNAL_H
#define CELLA_DAEMON_SANDBOX_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/limits.h"
#include "daemon/sandbox-directory.h"
#include "daemon/sandbox.h"
#include "daemon/store.h"
#include "runtime/container.h"
#include "runtime/criu.h"
#include "runtime/net.h"

#define TABLE_BUCKETS 1024

/* One state instead of separate flags. Transitions (sandbox-life.c):
 *   NEW -> STARTING -> RUNNING              sandbox_start, or sandbox_start_async (then
 *                                           STARTING while its job runs: s->job)
 *   STARTING -> the state before            a start that failed (its teardown done; a new
 *                                           sandbox is then destroyed)
 *   RUNNING -> SLEEPING                     idle, or POST /sleep (sandbox_sleep)
 *   RUNNING -> STOPPED                      PID 1 exited (on_container_exit)
 *   SLEEPING, STOPPED -> STARTING           the next operation (sandbox_ensure_running)
 *   any -> DESTROYED                        removed from the table or the pool; the memory
 *                                           lives while referenced
 * Only RUNNING has a live PID 1 with its exit watched. */
enum sandbox_state {
        SANDBOX_NEW,
        SANDBOX_STARTING,
        SANDBOX_RUNNING,
        SANDBOX_SLEEPING,
        SANDBOX_STOPPED,
        SANDBOX_DESTROYED,
};

struct sandbox {
        int refs;
        struct sandbox_table *table;
        struct sandbox *next; /* hash chain */
        char name[CELLA_NAME_MAX + 1];
        unsigned slot;
        char id[16]; /* "s<slot>": cgroup and data directory name, fixed for life */
        enum sandbox_state state;
        bool pooled;        /* a warm-pool sandbox: not in the table, no registry record */
        bool claimed;       /* taken from the pool by this daemon */
        bool commit_queued; /* claimed, its record in the table's commit queue */
        bool pool_ready;    /* pooled, its default session has run its first command */
        struct sandbox *pool_next;
        struct sandbox *commit_next; /* the commit queue (sandbox-pool.c) */
        char *image;
        char *instance_type;
        json_t *env;
        json_t *labels;
        int64_t created_ms;
        int64_t last_active_ms;
        int64_t persisted_active_ms;
        int64_t sleep_after_ms;
        bool sleep_memory; /* sleepMode "memory" asked for (0050); in effect only where the
                            * table's memsleep_reason is empty */
        /* Bytes of its memory checkpoint (<dir>/checkpoint) while it sleeps with its
         * memory; 0: none; -1: not looked at since the daemon started or it slept. */
        int64_t ckpt_bytes;
        /* Why its last memory sleep or wake kept only its files (SandboxInfo's
         * memorySleepError); "": it did not, or nothing went wrong. */
        char memsleep_note[CRIU_REASON_MAX + 256];
        bool keep_alive;
        bool default_session;
        bool network;          /* "outbound" (else "none": loopback only) */
        json_t *network_allow; /* array of canonical "CIDR[:port]" strings */
        char *snapshot;        /* id of the snapshot its files start from (0048), or NULL */
        struct container ct;
        int64_t pid_start;     /* start time of ct.pid (/proc/PID/stat), to recognise it later */
        uv_poll_t *exit_watch; /* readable when PID 1 exits; heap: closed asynchronously */
        struct agent_conn *agent;
        /* The agent link's other end is its PID 1's (checked at connect): the link's end
         * watches the exit and ct.pidfd is held only while something needs it (0060). */
        bool pid_by_link;
        /* Bytes of disk promised to it: its disk image's size (0: it has none); -1: not
         * looked at since its last start (sandbox_disk_promise() reads it then). */
        int64_t disk_promise;
        char *identity;         /* the text of its identity file as last written (rebuild.h) */
        struct start_job *job;  /* its start in progress off the loop, or NULL */
        struct snap_job *snaps; /* its snapshot captures: the running one first, then those
                                  * waiting for it (sandbox-snapshot.c) */
        struct sandbox_waiter *waiters; /* gets waiting for that start, in arrival order */
        bool fresh;         /* made by the start in progress: a failed start destroys it */
        bool checkpointing; /* the job in progress is a memory sleep's checkpoint */
        /* a memory fork's child whose first start restores the parent's processes from
         * <dir>/checkpoint: a restore that fails is the start's failure (0050) */
        bool memory_fork;
        bool forking; /* the job in progress is a memory fork's dump of it */

        /* POST /sleep calls waiting for the memory sleep's checkpoint in progress
         * (checkpoint_finish calls them back once it sleeps) */
        struct sleep_waiter *sleepers;

        /* {backupId, createdAt, dir}: a cluster's failover restored its files from that
         * backup (decision 0057); NULL: none */
        json_t *restored_from;
        /* when --cluster-backup-every last backed it up (0: never) */
        int64_t auto_backup_ms;
};

struct sandbox_table {
        struct sandbox_directory dir; /* the table as a directory (sandbox-directory.h) */
        uv_loop_t *loop;
        char *data_dir;
        char *images_dir;
        char *default_image;
        unsigned max_sandboxes;
        uint64_t disk_limit_override; /* every sandbox's disk limit, 0: the instance type's */
        double disk_overcommit;       /* promised disk / the data dir's size that is allowed */
        bool disk_overcommit_refuse;  /* past it, refuse new disks (else only warn) */
        bool disk_overcommitted;      /* past it now (logged once per crossing) */
        /* Why sleepMode "memory" falls back to files on this host (criu.h, 0050); "": it
         * does not. */
        char memsleep_reason[CRIU_REASON_MAX];
        struct runtime *rt;
        struct store *store;
        int lock_fd;              /* <data-dir>/cellad.lock, flock()ed for the daemon's life */
        struct host_claim *claim; /* network range and host uids of this instance */
        uint32_t uid_base;        /* host uid of slot 0's root: slot N's is + N * RANGE */
        unsigned count;
        uv_timer_t *idle_timer; /* heap: closed asynchronously */
        struct sandbox *buckets[TABLE_BUCKETS];
        unsigned next_slot; /* slots are handed out round robin from here */
        unsigned uid_slots; /* slots of the claim's uid block (host_claim_uid_slots) */
        uint8_t slot_used[CELLA_UID_SLOTS_MAX];
        /* The warm pool: running sandboxes of the default image and instance type, built
         * ahead by pool_timer (one per callback), taken by sandbox_create. At most
         * pool_target() of them; pool_len counts the list, pool_ready those of it whose
         * default session has run its first command (what a claim takes first). */
        unsigned pool_size;
        unsigned pool_len;
        unsigned pool_ready;
        struct sandbox *pool;
        uv_timer_t *pool_timer; /* heap: closed asynchronously */
        uint64_t pool_claims;
        uint64_t pool_builds;
        int64_t pool_last_claim_ms;
        uint64_t pool_retry_ms; /* back-off after failed builds; 0 after a success */
        unsigned reattached;    /* sandboxes of an earlier daemon taken over at start-up */
        unsigned pool_building; /* pool sandboxes whose start is in progress (0 or 1) */
        /* Claims whose registry record is not written yet, oldest first, each holding a
         * reference: written in one transaction at the end of the loop turn that made
         * them (commit_check) or before any HTTP answer is queued, whichever comes first
         * (sandbox_table_commit). */
        struct sandbox *commit_queue, **commit_tail;
        uv_check_t *commit_check; /* heap: closed asynchronously */
        /* Held by every runtime call that changes the host (start, destroy, rename,
         * network rules), on the loop or on a worker thread: struct runtime is not
         * thread-safe. */
        pthread_mutex_t rt_lock;
        struct start_job *jobs; /* starts in progress off the loop */
};

/* sandbox-table.c */
struct sandbox *table_find(struct sandbox_table *t, const char *name);
void table_insert(struct sandbox_table *t, struct sandbox *s);
void table_remove(struct sandbox_table *t, struct sandbox *s);
/* <data-dir>/sandboxes/s<slot> into out; -ENAMETOOLONG. */
int sandbox_dir(const struct sandbox *s, char *out, size_t outsz);
/* Remove a directory tree without following symlinks or crossing mounts. */
int rm_rf(const char *path);
/* A new sandbox of slot with the table's reference (refs 1), state NEW; NULL: no memory. */
struct sandbox *sandbox_alloc(struct sandbox_table *t, const char *name, unsigned slot);
void sandbox_free(struct sandbox *s);
/* Write the record of s (and its identity file when it changed). */
int sandbox_persist(struct sandbox *s, struct cella_error *err);
/* Write the identity file of s from rec when it differs from what was last written. */
int identity_sync(struct sandbox *s, const struct store_sandbox *rec, struct cella_error *err);
void on_handle_closed(uv_handle_t *h); /* frees a heap handle */

/* sandbox-slots.c */
int alloc_slot(struct sandbox_table *t, unsigned *ret);
void release_slot(struct sandbox_table *t, unsigned slot);
uint64_t sandbox_disk_promise(struct sandbox *s);
uint64_t new_disk_bytes(const struct sandbox_table *t, const char *itype);
int disk_admit(struct sandbox_table *t, uint64_t more, struct cella_error *err);
bool network_default(const struct sandbox_table *t);
int network_wanted(const struct sandbox_table *t, const struct sandbox_options *opts, bool *ret,
                   struct cella_error *err);
size_t network_allow_list(const struct sandbox *s, struct net_allow *out);

/* sandbox-pool.c */
void pool_schedule(struct sandbox_table *t, uint64_t delay_ms);
void pool_discard(struct sandbox *s);
void on_pool_timer(uv_timer_t *timer);
/* A live pool sandbox taken out of the pool, or NULL. */
struct sandbox *pool_take(struct sandbox_table *t);
/* Give s (taken) the name and options of a new sandbox; on failure s is discarded. */
int pool_claim(struct sandbox *s, const char *name, const struct sandbox_options *opts,
               struct cella_error *err);
/* The start of pool sandbox s is over (err NULL: it runs): into the pool, or discarded. */
void pool_built(struct sandbox *s, const struct cella_error *err);
/* Take claimed s out of the commit queue (destroyed before its record was written). */
void pool_commit_cancel(struct sandbox *s);

/* sandbox-start.c */
/* Build and start the container of s, on the loop: NEW/STOPPED/SLEEPING -> STARTING ->
 * RUNNING, or back to where it was with everything of the attempt undone. */
int sandbox_start(struct sandbox *s, struct cella_error *err);
/* The same with the runtime's part on the loop's thread pool: 0 when the job is queued
 * (s STARTING; when it is over, a pool sandbox goes to pool_built(), the waiters of any
 * other are called back, and a fresh one that failed is destroyed), -1 with err. */
int sandbox_start_async(struct sandbox *s, struct cella_error *err);
/* Wait for the start in progress of s, if any, and complete it now (blocks the loop for
 * what is left of it: for callers that must answer before they return). */
void sandbox_join(struct sandbox *s);
void sandbox_join_all(struct sandbox_table *t);
/* Make sure s (without a start in progress) runs and has an agent connection; with async
 * a start it needs is queued (sandbox_start_async) instead of run before this returns. */
int sandbox_ensure_running(struct sandbox *s, bool async, struct cella_error *err);
/* Queue cb to be called when the start in progress of s is over. */
int sandbox_wait(struct sandbox *s, bool created, sandbox_get_cb cb, void *userdata,
                 struct cella_error *err);
/* Call back every waiter of s: with s (err NULL) or with err. */
void sandbox_waiters_flush(struct sandbox *s, const struct cella_error *err);
/* The one stop sequence: the agent link closed, the exit watch stopped, every process
 * killed and the cgroups removed (runtime_container_destroy); s is in state next
 * afterwards whatever happened. Returns runtime_container_destroy's result. */
int sandbox_teardown(struct sandbox *s, enum sandbox_state next, struct cella_error *err);
/* Only the daemon's links to s go (agent, exit watch, pidfd); its processes keep running. */
void sandbox_unlink(struct sandbox *s);
int watch_exit(struct sandbox *s);
/* Connect to the agent; once the link's other end is known to be PID 1's, PID 1's pidfd
 * and its exit watch are let go (the link's end watches the exit, 0060). */
int connect_agent(struct sandbox *s, struct cella_error *err);
/* s->ct.pidfd made valid for a use of the container (a signal, setns, its root): taken
 * from the agent link (SO_PEERPIDFD) when not held. 0 or -errno (no process). */
int sandbox_pidfd_hold(struct sandbox *s);
/* After such a use: the pidfd closed again when the link watches the exit. */
void sandbox_pidfd_release(struct sandbox *s);
/* Does PID 1 of running s live (its pidfd not readable)? */
bool sandbox_alive(struct sandbox *s);
/* A memory sleep of running s: its agent told and its link closed, then a job on the
 * loop's thread pool checkpoints it whole into <dir>/checkpoint (runtime/checkpoint.h:
 * through checkpoint.partial, renamed when complete) and, back on the loop, puts it to
 * sleep (with its files only when the dump failed). 0: queued (s STARTING, s->job set,
 * requests wait for it as for a start); -1 with err: nothing done (the caller sleeps it
 * with its files). */
int sandbox_checkpoint_async(struct sandbox *s, struct cella_error *err);
/* A memory fork's dump of running s (0050, "memory fork") into images (an empty 0700
 * directory of cellad's): its agent told and its link closed, the dump on the loop's
 * thread pool with the tree left running and its cgroup frozen, then, on the loop, the
 * agent connected again and cb(s, NULL, ud) with the cgroup still FROZEN (the caller
 * takes the files snapshot, which thaws it; or thaws it) or cb(s, err, ud) with it
 * thawed. 0: queued (s STARTING while it runs, requests wait for it as for a start);
 * -1 with err: nothing done. */
int sandbox_memfork_dump_async(struct sandbox *s, const char *images,
                               void (*cb)(struct sandbox *s, const struct cella_error *err,
                                          void *ud),
                               void *ud, struct cella_error *err);
/* <dir>/<name> of s into out; -ENAMETOOLONG. */
int sandbox_path(const struct sandbox *s, const char *name, char *out, size_t outsz);
/* Bytes of the memory checkpoint of s (0: none), looked at when not known. */
uint64_t sandbox_checkpoint_bytes(struct sandbox *s);

/* sandbox-life.c */
struct sleep_waiter {
        struct sleep_waiter *next;
        sandbox_sleep_cb cb;
        void *ud;
};
/* Call back every POST /sleep waiting for s (asleep, or err). */
void sandbox_sleepers_flush(struct sandbox *s, const struct cella_error *err);
void image_env_under(const struct sandbox_table *t, const char *image, json_t *env);
void on_idle_check(uv_timer_t *timer);
extern const struct sandbox_directory_ops sandbox_local_ops;

#endif
