/* cellad as one node of a cluster on etcd (docs/cluster.md, decision 0055).
 *
 * Membership: the node grants itself a lease (CELLA_CLUSTER_LEASE_TTL s), keeps it alive
 * every CELLA_CLUSTER_KEEPALIVE_MS and publishes /cella/nodes/<node> under it (its
 * advertise URL, capacity, load, images, version, start time), again when its load changes
 * (coalesced: at most one put per CELLA_CLUSTER_PUBLISH_MS). etcd out of reach: the node
 * serves its own sandboxes on and registers again (a new lease, its record, its names) as
 * soon as etcd answers.
 *
 * Names: /cella/names/<tenant>/<name> (tenant "-" for the default one) = {node, since,
 * image}, put under the owner's lease by a create-if-absent transaction, so that two
 * nodes racing on a name agree on one owner and a lapsed lease frees its names. The
 * cluster's sandbox directory (cluster_directory) stands in front of the local table:
 * a name that is not here is claimed before it is created here; a name owned by another
 * node is refused with 409 SANDBOX_ON_OTHER_NODE naming the owner (forwarding will serve it
 * instead), etcd out of reach with 503 CLUSTER_UNAVAILABLE.
 *
 * Loop thread only. */
#ifndef CELLA_DAEMON_CLUSTER_H
#define CELLA_DAEMON_CLUSTER_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/limits.h"
#include "daemon/sandbox-directory.h"

struct etcd;

/* The version a node publishes: GET /v1/health's (api-sandboxes.c says it too). */
#ifndef CELLA_VERSION
#define CELLA_VERSION "0.1.0"
#endif

struct cluster_config {
        const char *etcd;       /* "http://h:p[,...]" (--cluster etcd=...) */
        const char *node;       /* --node: 1-63 of [a-z0-9-], not starting with '-' */
        const char *advertise;  /* --advertise: the node's API as other nodes reach it */
        const char *images_dir; /* the images it publishes */
        const char *version;
        unsigned capacity; /* --max-sandboxes */
        /* The backup store the cluster's nodes share (--backup-store): a name placed anew
         * after its owner went restores its latest backup from it; a drain backs up
         * there. NULL: neither (decision 0057). */
        struct backups *backups;
        /* --cluster-backup-every: each running sandbox active since its last one gets
         * CELLA_CLUSTER_DRAIN_DIR backed up this often (ms; 0: never). */
        int64_t backup_every_ms;
};

struct cluster;

/* "etcd=URL[,URL...]" (the value of --cluster) into its endpoint list (a pointer into
 * spec). 0, or -EINVAL. */
int cluster_spec_parse(const char *spec, const char **ret_endpoints);
/* A node name: 1-63 of [a-z0-9-], first not '-'. */
bool cluster_node_name_is_valid(const char *s);
/* The name's key: "/cella/names/<tenant or ->/<name>" of an internal name. 0 or -EINVAL. */
int cluster_name_key(const char *internal, char *out, size_t outsz);

/* Join: starts registering at once (the loop does the rest). local is the table's
 * directory, in front of which cluster_directory stands. */
int cluster_new(uv_loop_t *loop, const struct cluster_config *cfg, struct sandbox_table *table,
                struct cluster **ret, struct cella_error *err);
/* Leave: the lease is revoked when etcd answers in time (the names and the record go at
 * once), else it lapses. */
void cluster_free(struct cluster *c);

struct sandbox_directory *cluster_directory(struct cluster *c);
/* The load changed (a sandbox made, destroyed, started, slept): publish it (coalesced). */
void cluster_load_changed(struct cluster *c);

/* The live nodes: calls cb with {"nodes":[record + "node", ...]} (new reference) or err. */
typedef void (*cluster_json_cb)(json_t *j, const struct cella_error *err, void *userdata);
int cluster_nodes(struct cluster *c, cluster_json_cb cb, void *userdata);
/* The cluster's sandboxes of tenant (NULL: every tenant's): local (full SandboxInfo) and
 * remote (what the name's record says: id, tenant, node, image, createdAt), each with
 * "node". cb gets a JSON array (new reference) or err. */
int cluster_sandboxes(struct cluster *c, const char *tenant, cluster_json_cb cb, void *userdata);

/* ---- failover, stale copies, drain (decision 0057) ----
 *
 * Every backup a node makes is recorded as its name's latest:
 * /cella/backups/<tenant>/<name> = {backupId, createdAt, dir, node}, without a lease (it
 * outlives the node), deleted when the sandbox is destroyed through the API. A name
 * claimed while free is created here and its latest backup restored into it before the
 * request is answered (SandboxInfo.restoredFrom {backupId, createdAt, dir}); a backup gone
 * from the store leaves it empty; a restore that fails gives the name back (500
 * BACKUP_RESTORE_FAILED). After registering, a local sandbox whose name another node owns
 * is a stale copy and is destroyed. */

/* The directory a drain backs up of each sandbox. */
#define CELLA_CLUSTER_DRAIN_DIR "/workspace"
/* The name of the backups --cluster-backup-every makes (a later one replaces it). */
#define CELLA_CLUSTER_AUTO_BACKUP_NAME "auto"

/* A /cella/backups/ record, as another node may have written it. */
struct cluster_backup_index {
        char backup_id[36 + 1]; /* a UUID: BACKUP_ID_LEN (backup-store.h) */
        char created_at[40];
        char dir[CELLA_BACKUP_DIR_MAX + 1];
        char node[64];
        char name[CELLA_BACKUP_NAME_MAX + 1]; /* the backup's name, "" without one */
};
/* 0 with *ret (a valid backup id, a dir backup_dir_check accepts or ""), or -EINVAL. */
int cluster_backup_index_parse(const char *value, size_t len, struct cluster_backup_index *ret);

/* The body of POST /v1/cluster/drain: empty or {stop?: boolean}. 0, or -1 with err
 * (VALIDATION_FAILED). */
int cluster_decode_drain(const char *body, size_t len, bool *ret_stop, struct cella_error *err);
/* Drain: the node places no new names from now on (its record says "draining": true) and,
 * one after the other, backs each of its sandboxes' CELLA_CLUSTER_DRAIN_DIR up to the
 * store, records it as the name's latest, releases the name and destroys the sandbox here.
 * cb gets {node, draining, drained: [{id, tenant?, backupId}], failed: [{id, tenant?,
 * code, message}], durationMs} once every sandbox was tried; one that failed stays here,
 * its name owned. 0, or -1 with err (another drain running: SERVER_BUSY; not registered:
 * CLUSTER_UNAVAILABLE). */
int cluster_drain(struct cluster *c, cluster_json_cb cb, void *userdata, struct cella_error *err);
bool cluster_draining(const struct cluster *c);
/* cellad --drain: POST /v1/cluster/drain {"stop":true} to the cellad at host:port (token:
 * CELLA_TOKEN), its answer on stdout, then wait until it stops. main's exit status: 0
 * drained and stopped, 1 otherwise. */
int cluster_drain_client(const char *host, int port, const char *token);

/* Tenants' keys on this node (cluster-keys.h): etcd's, with this node's copy. */
struct cluster_keys *cluster_keys(struct cluster *c);

/* What a tenant's new sandbox must fit across the cluster (its key's quotas, decision
 * 0053): a name of a tenant held to them is claimed only in a transaction that counts the
 * tenant's names (/cella/names/<tenant>/, each record with its "memory") and fails when
 * another name of the tenant was claimed meanwhile (then it counts again). */
struct cluster_quota {
        int64_t max_sandboxes; /* 0: none */
        int64_t max_memory;    /* bytes; 0: none */
        uint64_t memory;       /* the new sandbox's instance type's */
        uint64_t local_memory; /* what the tenant's sandboxes and starts on this node hold */
};
/* The quotas a start of name (internal) is held to: true with *out, false when none. */
typedef bool (*cluster_quota_fn)(const char *name, struct cluster_quota *out, void *userdata);
/* Where claims find them (NULL: nowhere; every claim is a plain create-if-absent). */
void cluster_set_quota_source(struct cluster *c, cluster_quota_fn fn, void *userdata);
/* A wake of name (internal; q: its quotas, memory the sandbox's) checked across the
 * cluster: the memory of the tenant's sandboxes on the other nodes (their records, running
 * or not) + q->local_memory + q->memory must fit q->max_memory. cb gets QUOTA_EXCEEDED, or
 * NULL: it fits, or etcd did not answer (a wake waits on nothing of etcd's; the node's own
 * check has passed). Not a claim: two nodes waking at once may together pass the quota.
 * 0 when on its way (cb is called, never before this returns), or -ENOMEM/-EBUSY. */
typedef void (*cluster_check_cb)(const struct cella_error *err, void *userdata);
int cluster_quota_check_wake(struct cluster *c, const char *name, const struct cluster_quota *q,
                             cluster_check_cb cb, void *userdata);
/* What forwarding (forward.h) reads of the node: its etcd client, its name, its lease (0:
 * not registered). */
struct etcd *cluster_etcd(struct cluster *c);
const char *cluster_self(const struct cluster *c);
int64_t cluster_lease(const struct cluster *c);

/* /metrics: the etcd client's and the membership's series. */
int cluster_metrics(struct cluster *c, struct buf *b);

#endif
