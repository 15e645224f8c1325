/* The registry: sandboxes and their options in SQLite (WAL), <data-dir>/cella.db.
 *
 * Calls are synchronous on the loop thread; with WAL and synchronous=NORMAL a write costs
 * tens of microseconds. Statements are prepared once. */
#ifndef CELLA_DAEMON_STORE_H
#define CELLA_DAEMON_STORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"

struct store;

struct store_sandbox {
        const char *name;
        int64_t slot; /* uid range slot */
        const char *image;
        const char *instance_type;
        const char *env_json;    /* JSON object text */
        const char *labels_json; /* JSON object text */
        int64_t created_ms;
        int64_t last_active_ms;
        int64_t pid;       /* host pid of the sandbox's PID 1 when it last started; 0: none */
        int64_t pid_start; /* its start time (clock ticks after boot, /proc/PID/stat) */
        int64_t sleep_after_ms;
        int64_t keep_alive;      /* 0 or 1 */
        int64_t default_session; /* 0 or 1: calls without a sessionId use the session "default" */
        const char *network;     /* "none" or "outbound" */
        const char *network_allow_json; /* JSON array of "CIDR[:port]" */
        const char *snapshot;           /* id of the snapshot it was made from; NULL or "": none */
        const char *sleep_mode;         /* "files" or "memory" (0050); NULL: "files" */
};

/* Open (or create) the registry. A file that is not a sound SQLite database (garbage,
 * truncated, a page overwritten: SQLITE_NOTADB, SQLITE_CORRUPT or a failed quick_check)
 * is moved aside with its -wal and -shm to <path>.corrupt-<UTC time>, never deleted, and
 * a new one is made; so is a -wal left without its database. */
int store_open(const char *path, struct store **ret, struct cella_error *err);
/* Was the registry made by store_open (none was there, or a damaged one was moved aside)?
 * Then the sandboxes on disk are not in it yet (docs/decisions/0035-registry-rebuild.md). */
bool store_is_fresh(const struct store *s);
void store_close(struct store *s);

/* Insert or update the record of sb->name; a slot taken by another name is an error. */
int store_sandbox_save(struct store *s, const struct store_sandbox *sb, struct cella_error *err);
int store_sandbox_delete(struct store *s, const char *name, struct cella_error *err);
int store_sandbox_touch(struct store *s, const char *name, int64_t last_active_ms);
/* One transaction around several writes (the registry's batch of records made in one loop
 * turn): store_begin, the writes, then store_commit, or store_rollback after a failed
 * write (nothing of the batch is kept). Not nested. */
int store_begin(struct store *s, struct cella_error *err);
int store_commit(struct store *s, struct cella_error *err);
void store_rollback(struct store *s);
/* Call fn for every record (fields borrowed for the call). fn returning < 0 stops. */
/* meta table: key/value text. get: 0, or -ENOENT when absent, -EIO. */
int store_meta_get(struct store *s, const char *key, char *buf, size_t size);
int store_meta_set(struct store *s, const char *key, const char *value, struct cella_error *err);
int store_sandbox_foreach(struct store *s,
                          int (*fn)(const struct store_sandbox *sb, void *userdata), void *userdata,
                          struct cella_error *err);

/* Exposed ports of a sandbox (the preview proxy's capability tokens). instance is the
 * start time of the sandbox's PID 1 when the port was exposed (stale when it differs). */
struct store_port {
        int64_t port;
        const char *name;
        const char *token;
        int64_t instance;
};
int store_port_save(struct store *s, const char *sandbox, const struct store_port *p,
                    struct cella_error *err);
/* 0, -ENOENT when not exposed, -EIO. */
int store_port_get(struct store *s, const char *sandbox, int port, char *name, size_t namesz,
                   char *token, size_t tokensz, int64_t *ret_instance);
/* port < 0: every port of the sandbox. Deleting what is absent is not an error. */
int store_port_delete(struct store *s, const char *sandbox, int port, struct cella_error *err);
int store_port_foreach(struct store *s, const char *sandbox,
                       int (*fn)(const struct store_port *p, void *userdata), void *userdata,
                       struct cella_error *err);

/* Filesystem snapshots (docs/decisions/0048-snapshots-and-fork.md). */
struct store_snapshot {
        const char *id;
        const char *name;
        const char *sandbox; /* the sandbox it was taken of */
        const char *image;   /* that sandbox's image: the snapshot's layers go over it */
        int64_t size_bytes;
        int64_t created_ms;
        /* the snapshot that sandbox was made from: this one's layer goes over that one's
         * (and its parent's...); NULL or "": none */
        const char *parent;
        /* how the layer is stored (0051): "copy" (snapshots/<id>/layer, owners the
         * sandbox's own ids) or "clone" (snapshots/<id>/layer/disk.img, a reflinked clone
         * of the sandbox's disk, owners id_base + n); NULL or "": "copy" */
        const char *method;
        int64_t id_base; /* "clone": the host uid/gid base of the sandbox it was taken of */
};
/* Insert a new snapshot; an id or a name taken is an error. */
int store_snapshot_save(struct store *s, const struct store_snapshot *sn, struct cella_error *err);
/* Deleting what is absent is not an error. */
int store_snapshot_delete(struct store *s, const char *id, struct cella_error *err);
/* Every snapshot, oldest first (fields borrowed for the call); fn returning < 0 stops. */
int store_snapshot_foreach(struct store *s,
                           int (*fn)(const struct store_snapshot *sn, void *userdata),
                           void *userdata, struct cella_error *err);

/* Tenants' API keys (docs/tenants.md, decision 0053). Limits of 0 are none. */
struct store_key {
        const char *id;            /* CELLA_KEY_ID_LEN hex */
        const char *tenant;        /* tenant_name_is_valid() */
        const char *secret_sha256; /* hex */
        int64_t created_ms;
        int64_t max_sandboxes;
        int64_t max_memory_bytes;
};
/* Insert a new key (an id taken is an error). */
int store_key_save(struct store *s, const struct store_key *k, struct cella_error *err);
/* The key of that id given to fn (fields borrowed for the call): fn's return, -ENOENT
 * when there is none, -EIO when the registry fails. */
int store_key_get(struct store *s, const char *id,
                  int (*fn)(const struct store_key *k, void *userdata), void *userdata);
/* Remove the key of that id (*ret_existed: there was one). */
int store_key_delete(struct store *s, const char *id, bool *ret_existed, struct cella_error *err);
/* Every key, oldest first; fn returning < 0 stops (that is returned). */
int store_key_foreach(struct store *s, int (*fn)(const struct store_key *k, void *userdata),
                      void *userdata, struct cella_error *err);

#endif
