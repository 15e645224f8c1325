/* cellad as a node of a cluster on etcd (cluster.h; docs/cluster.md, decision 0055):
 * membership under a lease, the names' ownership, the cluster's view of nodes and
 * sandboxes, and the directory that stands in front of the local table.
 *
 * Invariants: lease is 0 or the lease etcd granted last (it may have lapsed unseen while
 * etcd is out of reach); at most one grant, one keepalive and one record put are in
 * flight; a claim holds its copy of the request's options until its callback has run; the
 * struct goes once closing, its etcd client freed and its timers closed. */
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <curl/curl.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/name.h"
#include "common/prom.h"
#include "common/timeutil.h"
#include "daemon/backup-archive.h"
#include "daemon/backup-store.h"
#include "daemon/backup.h"
#include "daemon/cluster-keys.h"
#include "daemon/cluster.h"
#include "daemon/etcd.h"
#include "daemon/instance-type.h"
#include "daemon/metrics.h"
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox-metrics.h"
#include "daemon/store.h"
#include "daemon/tenant.h"

#define NODES_PREFIX "/cella/nodes/"
#define NAMES_PREFIX "/cella/names/"
#define BACKUPS_PREFIX "/cella/backups/"

struct cluster {
        struct sandbox_directory dir; /* first: the ops get it back as the cluster */
        uv_loop_t *loop;
        struct etcd *etcd;
        struct sandbox_table *table;
        struct sandbox_directory *local;
        char node[64];
        char advertise[CELLA_CLUSTER_URL_MAX + 1];
        char images_dir[4096];
        char version[32];
        unsigned capacity;
        int64_t started_ms;

        int64_t lease; /* 0: not registered */
        bool granting, keepalive_pending, publishing, publish_again;
        bool unreachable_logged;
        uv_timer_t tick;    /* keepalive, and registering again */
        uv_timer_t publish; /* the coalesced record put */
        unsigned published_running, published_count;
        bool published;

        /* counters for /metrics */
        uint64_t registrations, lease_losses, claims_won, claims_lost, stale_copies;

        /* failover, stale copies, drain (decision 0057) */
        struct backups *backups; /* the shared backup store; NULL: no restores */
        bool draining;           /* places no new names; its record says so */
        struct drain *drain;     /* the drain in progress, or NULL */
        uint64_t restores_ok, restores_fresh, restores_failed, stale_destroyed, drained;
        /* backups on a schedule (--cluster-backup-every; 0: none) */
        int64_t backup_every_ms;
        uv_timer_t autobackup;
        bool auto_running;
        json_t *auto_names; /* the round's internal names */
        size_t auto_next;
        char auto_name[CELLA_NAME_MAX + 1];
        char auto_old[BACKUP_ID_LEN + 1]; /* the scheduled backup the next one replaces */
        uv_timer_t auto_stamp_timer;      /* marks the sandbox just backed up (on_auto_stamp) */
        char auto_stamp[CELLA_NAME_MAX + 1];
        uint64_t auto_backups, auto_failures;

        bool closing;
        unsigned handles; /* open timers */

        /* tenants: their keys (cluster-keys.c), and where claims find their quotas */
        struct cluster_keys *keys;
        cluster_quota_fn quota_fn;
        void *quota_ud;
        uint64_t quota_refusals, quota_retries;
};

static const struct sandbox_directory_ops cluster_ops;
struct claim;

/* ---- names, keys, the command line ---- */

int cluster_spec_parse(const char *spec, const char **ret_endpoints)
{
        if (strncmp(spec, "etcd=", 5) != 0 || !spec[5] || strlen(spec) > CELLA_ETCD_SPEC_MAX)
                return -EINVAL;
        *ret_endpoints = spec + 5;
        return 0;
}

bool cluster_node_name_is_valid(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > 63 || s[0] == '-')
                return false;
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

int cluster_name_key(const char *internal, char *out, size_t outsz)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        int w;

        if (!internal[0] || strlen(internal) > CELLA_NAME_MAX)
                return -EINVAL;
        tenant_split(internal, n, t);
        w = snprintf(out, outsz, NAMES_PREFIX "%s/%s", t[0] ? t : "-", n);
        return w < 0 || (size_t)w >= outsz ? -EINVAL : 0;
}

/* ---- membership ---- */

static void grant(struct cluster *c);
static void publish_now(struct cluster *c);
static void reclaim(struct cluster *c);
static void failover_restore(struct claim *q, struct sandbox *s, bool created);
static void reclaim_answered(struct cluster *c, const char *name, const char *key,
                             const struct etcd_answer *a);
static void restored_from_load(struct cluster *c, const char *name);
static void backup_index_forget(struct cluster *c, const char *name);

static void lease_lost(struct cluster *c, const char *why)
{
        if (!c->lease)
                return;
        log_warn("cluster: node '%s' lost its lease %lld (%s): registering again", c->node,
                 (long long)c->lease, why);
        c->lease = 0;
        c->published = false;
        c->lease_losses++;
        grant(c);
}

static int cmp_str(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The images this node has (a directory with a rootfs), sorted, into arr. */
static void images_json(struct cluster *c, json_t *arr)
{
        DIR *d = opendir(c->images_dir);
        struct dirent *de;
        char *names[CELLA_CLUSTER_IMAGES_MAX];
        size_t n = 0;

        if (!d)
                return;
        while ((de = readdir(d)) && n < CELLA_CLUSTER_IMAGES_MAX) {
                char path[4096 + 300];
                struct stat st;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(path, sizeof(path), "%s/%s/rootfs", c->images_dir, de->d_name);
                if (stat(path, &st) == 0 && S_ISDIR(st.st_mode) && (names[n] = strdup(de->d_name)))
                        n++;
        }
        closedir(d);
        qsort(names, n, sizeof(names[0]), cmp_str);
        for (size_t i = 0; i < n; i++) {
                json_array_append_new(arr, json_string(names[i]));
                free(names[i]);
        }
}

static void load(struct cluster *c, unsigned *running, unsigned *count)
{
        struct metrics_gauges g = {0};

        sandbox_table_metrics(c->table, &g);
        *running = g.sandboxes[0] + g.sandboxes[3]; /* running and starting */
        *count = sandbox_table_count(c->table);
}

static void on_published(const struct etcd_answer *a, void *ud)
{
        struct cluster *c = ud;

        c->publishing = false;
        if (c->closing)
                return;
        if (a->r == -ENOENT) {
                lease_lost(c, a->err.msg);
                return;
        }
        if (a->r < 0) {
                c->published = false;
                log_warn("cluster: publishing node '%s': %s", c->node, a->err.msg);
                return;
        }
        c->published = true;
        if (c->publish_again) {
                c->publish_again = false;
                publish_now(c);
        }
}

static void publish_now(struct cluster *c)
{
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_free_ char *s = NULL;
        char key[sizeof(NODES_PREFIX) + 64], started[32];
        unsigned running, count;

        if (!c->lease || c->closing)
                return;
        if (c->publishing) {
                c->publish_again = true;
                return;
        }
        load(c, &running, &count);
        time_format_iso(c->started_ms, started, sizeof(started));
        rec = json_pack("{s:s, s:s, s:I, s:I, s:I, s:[], s:s, s:s, s:s}", "node", c->node,
                        "advertise", c->advertise, "capacity", (json_int_t)c->capacity, "sandboxes",
                        (json_int_t)count, "running", (json_int_t)running, "images", "version",
                        c->version, "startedAt", started, "lease", "");
        /* the lease as etcd's gateway writes it (a decimal string): placement on another
         * node puts a new name's record under it (forward.c) */
        if (rec) {
                char lease[24];

                snprintf(lease, sizeof(lease), "%lld", (long long)c->lease);
                json_object_set_new(rec, "lease", json_string(lease));
        }
        if (!rec)
                return;
        images_json(c, json_object_get(rec, "images"));
        if (c->draining)
                json_object_set_new(rec, "draining", json_true());
        s = json_dumps(rec, JSON_COMPACT);
        if (!s)
                return;
        snprintf(key, sizeof(key), NODES_PREFIX "%s", c->node);
        if (etcd_put(c->etcd, key, strlen(key), s, strlen(s), c->lease, on_published, c) == 0) {
                c->publishing = true;
                c->published_running = running;
                c->published_count = count;
        }
}

static void on_publish_timer(uv_timer_t *t)
{
        publish_now(t->data);
}

void cluster_load_changed(struct cluster *c)
{
        if (c && !c->closing && !uv_is_active((uv_handle_t *)&c->publish))
                uv_timer_start(&c->publish, on_publish_timer, CELLA_CLUSTER_PUBLISH_MS, 0);
}

static void on_granted(const struct etcd_answer *a, void *ud)
{
        struct cluster *c = ud;

        c->granting = false;
        if (c->closing)
                return;
        if (a->r < 0) {
                if (!c->unreachable_logged)
                        log_warn("cluster: node '%s' cannot register: %s (serving its own "
                                 "sandboxes; trying again)",
                                 c->node, a->err.msg);
                c->unreachable_logged = true;
                return;
        }
        c->unreachable_logged = false;
        c->lease = a->lease_id;
        c->registrations++;
        log_info("cluster: node '%s' registered at %s (lease %lld, ttl %llds)", c->node,
                 etcd_endpoint(c->etcd), (long long)c->lease, (long long)a->ttl);
        publish_now(c);
        reclaim(c);
}

static void grant(struct cluster *c)
{
        if (c->granting || c->lease || c->closing)
                return;
        if (etcd_lease_grant(c->etcd, CELLA_CLUSTER_LEASE_TTL, on_granted, c) == 0)
                c->granting = true;
}

static void on_keepalive(const struct etcd_answer *a, void *ud)
{
        struct cluster *c = ud;

        c->keepalive_pending = false;
        if (c->closing)
                return;
        if (a->r == -ENOENT) {
                lease_lost(c, a->err.msg);
                return;
        }
        if (a->r < 0) {
                /* etcd out of reach: the lease may live on; serve, and keep asking. */
                if (!c->unreachable_logged)
                        log_warn("cluster: keepalive of node '%s': %s (serving its own "
                                 "sandboxes)",
                                 c->node, a->err.msg);
                c->unreachable_logged = true;
                return;
        }
        if (c->unreachable_logged)
                log_info("cluster: etcd answers again (%s)", etcd_endpoint(c->etcd));
        c->unreachable_logged = false;
        if (!c->published)
                publish_now(c);
}

static void on_tick(uv_timer_t *t)
{
        struct cluster *c = t->data;
        unsigned running, count;

        if (!c->lease) {
                grant(c);
                return;
        }
        if (!c->keepalive_pending && etcd_lease_keepalive(c->etcd, c->lease, on_keepalive, c) == 0)
                c->keepalive_pending = true;
        load(c, &running, &count);
        if (c->published && (running != c->published_running || count != c->published_count))
                cluster_load_changed(c);
}

/* ---- claims: a name's ownership ---- */

struct claim {
        struct cluster *c;
        bool is_put, create;
        bool won;          /* the name was free: this node placed it (a failover restores) */
        struct sandbox *s; /* referenced while its latest backup is looked up and restored */
        sandbox_get_cb cb;
        void *userdata;
        char name[CELLA_NAME_MAX + 1];
        char key[CELLA_CLUSTER_KEY_MAX];
        /* the request's options, copied (put reads them before it returns; the claim
         * answers later) */
        bool has_opts;
        struct sandbox_options o;
        char *image, *instance_type, *sleep_mode, *network, *snapshot;
        /* a tenant's quotas (quota_claim): its record, the tries of its txn */
        struct cluster_quota quota;
        char *value;
        unsigned tries;
};

static void claim_free(struct claim *q)
{
        json_decref(q->o.env);
        json_decref(q->o.labels);
        json_decref(q->o.network_allow);
        free(q->image);
        free(q->instance_type);
        free(q->sleep_mode);
        free(q->network);
        free(q->snapshot);
        free(q->value);
        free(q);
}

static int dup_opt(const char *in, char **keep, const char **out)
{
        if (!in)
                return 0;
        *keep = strdup(in);
        if (!*keep)
                return -ENOMEM;
        *out = *keep;
        return 0;
}

static int claim_copy_opts(struct claim *q, const struct sandbox_options *o)
{
        if (!o)
                return 0;
        q->has_opts = true;
        q->o = *o;
        q->o.image = q->o.instance_type = q->o.sleep_mode = q->o.network = q->o.snapshot = NULL;
        json_incref(q->o.env);
        json_incref(q->o.labels);
        json_incref(q->o.network_allow);
        if (dup_opt(o->image, &q->image, &q->o.image) < 0 ||
            dup_opt(o->instance_type, &q->instance_type, &q->o.instance_type) < 0 ||
            dup_opt(o->sleep_mode, &q->sleep_mode, &q->o.sleep_mode) < 0 ||
            dup_opt(o->network, &q->network, &q->o.network) < 0 ||
            dup_opt(o->snapshot, &q->snapshot, &q->o.snapshot) < 0)
                return -ENOMEM;
        return 0;
}

static void on_released(const struct etcd_answer *a, void *ud)
{
        char *key = ud;

        if (a->r < 0)
                log_warn("cluster: releasing %s: %s (its lease frees it)", key, a->err.msg);
        free(key);
}

/* Give up name's record if this node's lease holds it (after a failed create, a destroy). */
static void release(struct cluster *c, const char *name)
{
        char key[CELLA_CLUSTER_KEY_MAX];
        char *k;

        if (!c->lease || c->closing || cluster_name_key(name, key, sizeof(key)) < 0)
                return;
        k = strdup(key);
        if (k && etcd_delete_leased(c->etcd, k, strlen(k), c->lease, on_released, k) < 0)
                free(k);
}

/* The local table's answer to a claimed name's create. */
static void claim_local_done(struct sandbox *s, bool created, const struct cella_error *err,
                             void *ud)
{
        struct claim *q = ud;

        if (err && !q->c->closing)
                release(q->c, q->name);
        else
                cluster_load_changed(q->c);
        if (!err && q->won && q->c->backups && !q->c->closing) {
                failover_restore(q, s, created);
                return;
        }
        q->cb(s, created, err, q->userdata);
        claim_free(q);
}

static void claim_go_local(struct claim *q)
{
        struct sandbox_directory *l = q->c->local;

        if (q->is_put)
                l->ops->put(l, q->name, q->has_opts ? &q->o : NULL, claim_local_done, q);
        else
                l->ops->get(l, q->name, q->create, q->has_opts ? &q->o : NULL, claim_local_done, q);
}

static void claim_fail(struct claim *q, const struct cella_error *err)
{
        q->cb(NULL, false, err, q->userdata);
        claim_free(q);
}

static void on_claimed(const struct etcd_answer *a, void *ud)
{
        struct claim *q = ud;
        struct cluster *c = q->c;
        struct cella_error err = {0};
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        const char *owner = NULL;
        _cleanup_json_ json_t *rec = NULL;

        tenant_split(q->name, n, t);
        if (c->closing) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY, "cellad is stopping");
                claim_fail(q, &err);
                return;
        }
        if (a->r < 0) {
                if (a->r == -ENOENT)
                        lease_lost(c, a->err.msg);
                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE, "place sandbox '%s': %s", n,
                                a->err.msg);
                claim_fail(q, &err);
                return;
        }
        if (a->succeeded) {
                c->claims_won++;
                q->won = true;
                claim_go_local(q);
                return;
        }
        if (a->n_kvs > 0)
                rec = json_loadb(a->kvs[0].value, a->kvs[0].value_len, 0, NULL);
        owner = json_string_value(json_object_get(rec, "node"));
        if (owner && strcmp(owner, c->node) == 0) {
                /* Ours already: a create racing on this node, one re-claimed, or a name
                 * another node placed here for its request (decision 0056). A create that
                 * makes the sandbox here is then the name's first since it was free: its
                 * latest backup is restored as for a won claim (an existing sandbox is
                 * left as it is: failover_restore looks only at a create). */
                q->won = true;
                claim_go_local(q);
                return;
        }
        c->claims_lost++;
        cella_error_set(&err, CELLA_E_SANDBOX_ON_OTHER_NODE,
                        "sandbox '%s' lives on node '%.63s': send its requests to that node "
                        "(a forwarded request is not forwarded again)",
                        n, owner ? owner : "?");
        claim_fail(q, &err);
}

/* ---- claims held to a tenant's quotas ---- */

/* The memory of an instance type (NULL: the default's), 0 for an unknown one. */
static uint64_t type_memory(const char *type)
{
        const struct instance_type *it = instance_type_find(type ? type : INSTANCE_TYPE_DEFAULT);

        return it ? it->memory_bytes : 0;
}

static void quota_claim(struct claim *q);

/* The tenant's prefix of q's name: "/cella/names/<tenant or ->/". */
static void quota_prefix(const struct claim *q, char *out, size_t outsz)
{
        const char *slash = strrchr(q->key, '/');

        snprintf(out, outsz, "%.*s", (int)(slash - q->key + 1), q->key);
}

/* q's name is taken (its record: value): by this node, go on; by another, 409. */
static void quota_claim_taken(struct claim *q, const char *value, size_t len)
{
        struct cella_error err = {0};
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        _cleanup_json_ json_t *rec = json_loadb(value, len, 0, NULL);
        const char *owner = json_string_value(json_object_get(rec, "node"));

        if (owner && strcmp(owner, q->c->node) == 0) {
                claim_go_local(q);
                return;
        }
        tenant_split(q->name, n, t);
        q->c->claims_lost++;
        cella_error_set(&err, CELLA_E_SANDBOX_ON_OTHER_NODE,
                        "sandbox '%s' lives on node '%.63s': send its requests to that node "
                        "(this node does not forward them yet)",
                        n, owner ? owner : "?");
        claim_fail(q, &err);
}

/* A failed step of a claim: the node is stopping, or etcd failed. false when it went on. */
static bool quota_claim_failed(struct claim *q, const struct etcd_answer *a)
{
        struct cella_error err = {0};
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        if (q->c->closing) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY, "cellad is stopping");
                claim_fail(q, &err);
                return true;
        }
        if (a->r >= 0)
                return false;
        if (a->r == -ENOENT)
                lease_lost(q->c, a->err.msg);
        tenant_split(q->name, n, t);
        cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE, "place sandbox '%s': %s", n, a->err.msg);
        claim_fail(q, &err);
        return true;
}

static void on_quota_claimed(const struct etcd_answer *a, void *ud)
{
        struct claim *q = ud;
        struct cella_error err = {0};

        if (quota_claim_failed(q, a))
                return;
        if (a->succeeded) {
                q->c->claims_won++;
                q->won = true;
                claim_go_local(q);
                return;
        }
        if (a->n_kvs > 0) {
                quota_claim_taken(q, a->kvs[0].value, a->kvs[0].value_len);
                return;
        }
        /* Another name of the tenant was claimed since it was counted: count again. */
        q->c->quota_retries++;
        if (q->tries < CELLA_CLUSTER_CLAIM_TRIES) {
                quota_claim(q);
                return;
        }
        cella_error_set(&err, CELLA_E_SERVER_BUSY,
                        "place sandbox: the tenant's sandboxes changed %u times while this one "
                        "was counted: retry",
                        q->tries);
        claim_fail(q, &err);
}

/* The tenant's names as etcd holds them now: count them against the quotas, then claim
 * q's name in a txn that holds only while none of the tenant's names was put since. */
static void on_quota_counted(const struct etcd_answer *a, void *ud)
{
        struct claim *q = ud;
        struct cluster *c = q->c;
        struct cella_error err = {0};
        char prefix[CELLA_CLUSTER_KEY_MAX], t[CELLA_TENANT_MAX + 1], n[CELLA_NAME_MAX + 1];
        uint64_t remote = 0;
        int64_t count = 0;
        json_t *cmp, *ok, *no;

        if (quota_claim_failed(q, a))
                return;
        for (size_t i = 0; i < a->n_kvs; i++) {
                _cleanup_json_ json_t *rec = NULL;
                const char *node;
                json_int_t mem;

                if (strcmp(a->kvs[i].key, q->key) == 0) {
                        quota_claim_taken(q, a->kvs[i].value, a->kvs[i].value_len);
                        return;
                }
                count++;
                rec = json_loadb(a->kvs[i].value, a->kvs[i].value_len, 0, NULL);
                node = json_string_value(json_object_get(rec, "node"));
                mem = json_integer_value(json_object_get(rec, "memory"));
                /* this node's own are in local_memory, as they run now */
                if (mem > 0 && (!node || strcmp(node, c->node) != 0))
                        remote += (uint64_t)mem;
        }
        tenant_split(q->name, n, t);
        if (q->quota.max_sandboxes > 0 && count + 1 > q->quota.max_sandboxes) {
                c->quota_refusals++;
                cella_error_set(&err, CELLA_E_QUOTA_EXCEEDED,
                                "tenant '%s' has %lld sandboxes across the cluster, its key's "
                                "maxSandboxes is %lld: destroy one first",
                                t, (long long)count, (long long)q->quota.max_sandboxes);
                claim_fail(q, &err);
                return;
        }
        if (q->quota.max_memory > 0 &&
            remote + q->quota.local_memory + q->quota.memory > (uint64_t)q->quota.max_memory) {
                c->quota_refusals++;
                cella_error_set(&err, CELLA_E_QUOTA_EXCEEDED,
                                "tenant '%s' holds sandboxes of %llu bytes of memory across the "
                                "cluster; %llu more would pass its key's maxMemory of %lld bytes",
                                t, (unsigned long long)(remote + q->quota.local_memory),
                                (unsigned long long)q->quota.memory,
                                (long long)q->quota.max_memory);
                claim_fail(q, &err);
                return;
        }
        if (!c->lease) {
                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE,
                                "place sandbox: node '%s' lost its lease", c->node);
                claim_fail(q, &err);
                return;
        }
        quota_prefix(q, prefix, sizeof(prefix));
        cmp = json_pack("[o, o]", etcd_cmp_absent(q->key, strlen(q->key)),
                        etcd_cmp_prefix_unchanged(prefix, strlen(prefix), a->revision));
        ok = json_pack("[o]",
                       etcd_req_put(q->key, strlen(q->key), q->value, strlen(q->value), c->lease));
        no = json_pack("[o]", etcd_req_range(q->key, strlen(q->key)));
        if (etcd_txn(c->etcd, cmp, ok, no, on_quota_claimed, q) < 0) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY,
                                "place sandbox: too many requests to etcd at once");
                claim_fail(q, &err);
        }
}

/* Claim q's name within its tenant's quotas (q->quota, q->value: the record). */
static void quota_claim(struct claim *q)
{
        struct cella_error err = {0};
        char prefix[CELLA_CLUSTER_KEY_MAX];

        q->tries++;
        quota_prefix(q, prefix, sizeof(prefix));
        if (etcd_range(q->c->etcd, prefix, strlen(prefix), true, on_quota_counted, q) < 0) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY,
                                "place sandbox: too many requests to etcd at once");
                claim_fail(q, &err);
        }
}

struct wake_check {
        struct cluster *c;
        struct cluster_quota q;
        char name[CELLA_NAME_MAX + 1];
        char key[CELLA_CLUSTER_KEY_MAX];
        cluster_check_cb cb;
        void *userdata;
};

static void on_wake_counted(const struct etcd_answer *a, void *ud)
{
        struct wake_check *w = ud;
        struct cluster *c = w->c;
        struct cella_error err = {0};
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        uint64_t remote = 0;

        if (c->closing) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY, "cellad is stopping");
                w->cb(&err, w->userdata);
                free(w);
                return;
        }
        for (size_t i = 0; a->r == 0 && i < a->n_kvs; i++) {
                _cleanup_json_ json_t *rec = NULL;
                const char *node;
                json_int_t mem;

                if (strcmp(a->kvs[i].key, w->key) == 0)
                        continue;
                rec = json_loadb(a->kvs[i].value, a->kvs[i].value_len, 0, NULL);
                node = json_string_value(json_object_get(rec, "node"));
                mem = json_integer_value(json_object_get(rec, "memory"));
                if (mem > 0 && node && strcmp(node, c->node) != 0)
                        remote += (uint64_t)mem;
        }
        if (remote + w->q.local_memory + w->q.memory <= (uint64_t)w->q.max_memory) {
                w->cb(NULL, w->userdata);
                free(w);
                return;
        }
        tenant_split(w->name, n, t);
        c->quota_refusals++;
        cella_error_set(&err, CELLA_E_QUOTA_EXCEEDED,
                        "tenant '%s' holds sandboxes of %llu bytes of memory across the cluster; "
                        "waking '%s' (%llu more) would pass its key's maxMemory of %lld bytes",
                        t, (unsigned long long)(remote + w->q.local_memory), n,
                        (unsigned long long)w->q.memory, (long long)w->q.max_memory);
        w->cb(&err, w->userdata);
        free(w);
}

int cluster_quota_check_wake(struct cluster *c, const char *name, const struct cluster_quota *q,
                             cluster_check_cb cb, void *userdata)
{
        struct wake_check *w;
        char prefix[CELLA_CLUSTER_KEY_MAX];
        const char *slash;
        int r;

        if (c->closing)
                return -EBUSY;
        w = calloc(1, sizeof(*w));
        if (!w)
                return -ENOMEM;
        if (cluster_name_key(name, w->key, sizeof(w->key)) < 0) {
                free(w);
                return -EINVAL;
        }
        w->c = c;
        w->q = *q;
        w->cb = cb;
        w->userdata = userdata;
        snprintf(w->name, sizeof(w->name), "%s", name);
        slash = strrchr(w->key, '/');
        snprintf(prefix, sizeof(prefix), "%.*s", (int)(slash - w->key + 1), w->key);
        r = etcd_range(c->etcd, prefix, strlen(prefix), true, on_wake_counted, w);
        if (r < 0)
                free(w);
        return r;
}

void cluster_set_quota_source(struct cluster *c, cluster_quota_fn fn, void *userdata)
{
        c->quota_fn = fn;
        c->quota_ud = userdata;
}

struct cluster_keys *cluster_keys(struct cluster *c)
{
        return c->keys;
}

/* Claim name for this node, then create it here (get with create, or put). */
static void claim(struct cluster *c, const char *name, bool is_put, bool create,
                  const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct cella_error err = {0};
        struct claim *q = calloc(1, sizeof(*q));
        _cleanup_free_ char *value = NULL;
        char since[32];
        _cleanup_json_ json_t *rec = NULL;

        if (!q) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                cb(NULL, false, &err, userdata);
                return;
        }
        q->c = c;
        q->is_put = is_put;
        q->create = create;
        q->cb = cb;
        q->userdata = userdata;
        snprintf(q->name, sizeof(q->name), "%s", name);
        if (claim_copy_opts(q, opts) < 0 || cluster_name_key(name, q->key, sizeof(q->key)) < 0) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                claim_fail(q, &err);
                return;
        }
        if (!c->lease) {
                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE,
                                "place sandbox: node '%s' is not registered with etcd (it "
                                "cannot reach it): new names cannot be placed",
                                c->node);
                claim_fail(q, &err);
                return;
        }
        if (c->draining) {
                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE,
                                "place sandbox: node '%s' is draining and places no new "
                                "names: send the request to another node",
                                c->node);
                claim_fail(q, &err);
                return;
        }
        time_format_iso(time_now_ms(), since, sizeof(since));
        rec = json_pack("{s:s, s:s, s:s, s:I}", "node", c->node, "since", since, "image",
                        opts && opts->image ? opts->image : "", "memory",
                        (json_int_t)type_memory(opts ? opts->instance_type : NULL));
        value = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
        if (value && c->quota_fn && c->quota_fn(name, &q->quota, c->quota_ud)) {
                q->value = TAKE_PTR(value);
                quota_claim(q);
                return;
        }
        if (!value || etcd_create(c->etcd, q->key, strlen(q->key), value, strlen(value), c->lease,
                                  on_claimed, q) < 0) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY,
                                "place sandbox: too many requests "
                                "to etcd at once");
                claim_fail(q, &err);
        }
}

struct reclaim {
        struct cluster *c;
        char name[CELLA_NAME_MAX + 1];
        char key[CELLA_CLUSTER_KEY_MAX];
};

static void on_reclaimed(const struct etcd_answer *a, void *ud)
{
        struct reclaim *r = ud;
        struct cluster *c = r->c;

        if (!c->closing)
                reclaim_answered(c, r->name, r->key, a);
        free(r);
}

/* After (re)registering: claim the names of the sandboxes this node has. */
static void reclaim(struct cluster *c)
{
        _cleanup_json_ json_t *list = sandbox_table_list(c->table);
        size_t i;
        json_t *info;

        json_array_foreach(list, i, info)
        {
                const char *id = json_string_value(json_object_get(info, "id"));
                const char *t = json_string_value(json_object_get(info, "tenant"));
                struct reclaim *r;
                char key[CELLA_CLUSTER_KEY_MAX], since[32];
                _cleanup_free_ char *value = NULL;
                _cleanup_json_ json_t *rec = NULL;

                if (!id)
                        continue;
                r = calloc(1, sizeof(*r));
                if (!r)
                        return;
                r->c = c;
                if (tenant_qualify(t ? t : "", id, r->name, NULL) < 0 ||
                    cluster_name_key(r->name, key, sizeof(key)) < 0) {
                        free(r);
                        continue;
                }
                snprintf(r->key, sizeof(r->key), "%s", key);
                restored_from_load(c, r->name);
                time_format_iso(time_now_ms(), since, sizeof(since));
                rec = json_pack("{s:s, s:s, s:s, s:I}", "node", c->node, "since", since, "image",
                                json_string_value(json_object_get(info, "image")) ?: "", "memory",
                                (json_int_t)type_memory(
                                        json_string_value(json_object_get(info, "instanceType"))));
                value = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
                if (!value || etcd_create(c->etcd, key, strlen(key), value, strlen(value), c->lease,
                                          on_reclaimed, r) < 0)
                        free(r);
        }
}

/* ---- failover: a name's latest backup, restored where the name is placed anew ----
 *
 * /cella/backups/<tenant>/<name> = {backupId, createdAt, dir, node}: the name's latest
 * backup in the shared store, put (without a lease: it outlives its node) whenever this
 * node makes one, deleted when the sandbox is destroyed through the API (a name destroyed
 * on purpose starts empty again). A claim that finds the name free (won) reads it once the
 * sandbox runs and restores that backup before the request is answered (decision 0057). */

int cluster_backup_index_parse(const char *value, size_t len, struct cluster_backup_index *ret)
{
        _cleanup_json_ json_t *j = NULL;
        const char *id = NULL, *created = NULL, *dir = NULL, *node = NULL, *name = NULL;
        json_error_t je;

        memset(ret, 0, sizeof(*ret));
        j = json_loadb(value, len, JSON_REJECT_DUPLICATES, &je);
        if (!j ||
            json_unpack_ex(j, &je, 0, "{s:s, s?s, s?s, s?s, s?s}", "backupId", &id, "createdAt",
                           &created, "dir", &dir, "node", &node, "name", &name) < 0)
                return -EINVAL;
        if (!backup_id_is_valid(id) || (dir && backup_dir_check(dir, NULL) < 0) ||
            strlen(created ? created : "") >= sizeof(ret->created_at) ||
            strlen(node ? node : "") >= sizeof(ret->node) ||
            strlen(name ? name : "") >= sizeof(ret->name))
                return -EINVAL;
        snprintf(ret->name, sizeof(ret->name), "%s", name ? name : "");
        snprintf(ret->backup_id, sizeof(ret->backup_id), "%s", id);
        snprintf(ret->created_at, sizeof(ret->created_at), "%s", created ? created : "");
        snprintf(ret->dir, sizeof(ret->dir), "%s", dir ? dir : "");
        snprintf(ret->node, sizeof(ret->node), "%s", node ? node : "");
        return 0;
}

static int backup_index_key(const char *internal, char *out, size_t outsz)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        int w;

        if (!internal[0] || strlen(internal) > CELLA_NAME_MAX)
                return -EINVAL;
        tenant_split(internal, n, t);
        w = snprintf(out, outsz, BACKUPS_PREFIX "%s/%s", t[0] ? t : "-", n);
        return w < 0 || (size_t)w >= outsz ? -EINVAL : 0;
}

static void on_index_written(const struct etcd_answer *a, void *ud)
{
        char *key = ud;

        if (a->r < 0)
                log_warn("cluster: recording %s: %s (a failover would not restore it)", key,
                         a->err.msg);
        free(key);
}

/* Record bk (a backup's JSON, its sandbox by internal name) as its name's latest. cb NULL:
 * logged only. 0, or -errno (cb not called). */
static int backup_index_put(struct cluster *c, const json_t *bk, etcd_cb cb, void *ud)
{
        const char *sandbox = json_string_value(json_object_get(bk, "sandbox"));
        char key[CELLA_CLUSTER_KEY_MAX];
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_free_ char *value = NULL;
        int r;

        if (!sandbox || backup_index_key(sandbox, key, sizeof(key)) < 0)
                return -EINVAL;
        rec = json_pack("{s:O, s:O, s:O, s:s}", "backupId", json_object_get(bk, "id"), "createdAt",
                        json_object_get(bk, "createdAt"), "dir", json_object_get(bk, "dir"), "node",
                        c->node);
        if (rec && json_is_string(json_object_get(bk, "name")))
                json_object_set(rec, "name", json_object_get(bk, "name"));
        value = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
        if (!value)
                return -ENOMEM;
        if (!cb) {
                char *k = strdup(key);

                if (!k)
                        return -ENOMEM;
                r = etcd_put(c->etcd, key, strlen(key), value, strlen(value), 0, on_index_written,
                             k);
                if (r < 0)
                        free(k);
                return r;
        }
        return etcd_put(c->etcd, key, strlen(key), value, strlen(value), 0, cb, ud);
}

/* backups_on_created: every backup this node makes is its name's latest. */
static void backup_made(const json_t *bk, void *ud)
{
        struct cluster *c = ud;

        if (!c->closing && backup_index_put(c, bk, NULL, NULL) < 0)
                log_warn("cluster: cannot record backup '%s' as its sandbox's latest",
                         json_string_value(json_object_get(bk, "id")) ?: "?");
}

/* The name was destroyed on purpose: a later create starts empty. */
static void on_index_forgotten(const struct etcd_answer *a, void *ud)
{
        char *key = ud;

        if (a->r < 0)
                log_warn("cluster: removing %s: %s (a later create of the name would restore "
                         "its backup)",
                         key, a->err.msg);
        free(key);
}

static void backup_index_forget(struct cluster *c, const char *name)
{
        char key[CELLA_CLUSTER_KEY_MAX];
        char *k;

        if (c->closing || !c->backups || backup_index_key(name, key, sizeof(key)) < 0)
                return;
        k = strdup(key);
        if (k && etcd_delete(c->etcd, k, strlen(k), false, on_index_forgotten, k) < 0)
                free(k);
}

/* SandboxInfo's restoredFrom (sandbox-internal.h): set here alone. */
static void sandbox_set_restored_from(struct sandbox *s, json_t *from)
{
        json_t *old = s->restored_from;

        s->restored_from = json_incref(from);
        json_decref(old);
}

/* restoredFrom survives a restart of the node in its registry's meta table, keyed by the
 * name and tied to the sandbox's creation time (a later sandbox of the name is not it). */
static void restored_from_save(struct cluster *c, struct sandbox *s, json_t *from)
{
        struct store *st = c->local->ops->store(c->local);
        struct cella_error err = {0};
        char key[CELLA_NAME_MAX + 32];
        _cleanup_json_ json_t *rec = json_deep_copy(from);
        _cleanup_free_ char *text = NULL;

        if (!st || !rec)
                return;
        json_object_set_new(rec, "sandboxCreatedMs", json_integer(s->created_ms));
        text = json_dumps(rec, JSON_COMPACT);
        snprintf(key, sizeof(key), "restoredFrom:%s", sandbox_name(s));
        if (text && store_meta_set(st, key, text, &err) < 0)
                log_warn("cluster: keeping restoredFrom of '%s': %s", sandbox_name(s), err.msg);
}

static void restored_from_load(struct cluster *c, const char *name)
{
        struct store *st = c->local->ops->store(c->local);
        struct sandbox *s = NULL;
        struct cella_error err = {0};
        char key[CELLA_NAME_MAX + 32], text[1024];
        _cleanup_json_ json_t *rec = NULL;

        if (!st || c->local->ops->get_now(c->local, name, &s, &err) < 0 || s->restored_from)
                return;
        snprintf(key, sizeof(key), "restoredFrom:%s", name);
        if (store_meta_get(st, key, text, sizeof(text)) < 0)
                return;
        rec = json_loads(text, 0, NULL);
        if (!json_is_object(rec) ||
            json_integer_value(json_object_get(rec, "sandboxCreatedMs")) != s->created_ms)
                return;
        json_object_del(rec, "sandboxCreatedMs");
        sandbox_set_restored_from(s, rec);
}

static void restore_finish(struct claim *q, bool created, const struct cella_error *err)
{
        struct sandbox *s = q->s;

        q->cb(err ? NULL : s, created, err, q->userdata);
        sandbox_unref(s);
        claim_free(q);
}

/* The restore failed in a way a retry may mend: the name is given back, nothing made here
 * stays, the backup stays recorded. */
static void restore_undo(struct claim *q, const struct cella_error *why)
{
        struct cluster *c = q->c;
        struct cella_error err = {0};
        bool existed = false;

        c->restores_failed++;
        if (c->local->ops->destroy(c->local, q->name, &existed, &err) < 0)
                log_warn("cluster: removing '%s' after its failed restore: %s", q->name, err.msg);
        release(c, q->name);
        cluster_load_changed(c);
        restore_finish(q, false, why);
}

struct restoring {
        struct claim *q;
        bool created;
        struct cluster_backup_index idx;
};

static void on_failover_restored(json_t *result, const struct cella_error *err, void *ud)
{
        struct restoring *r = ud;
        struct claim *q = r->q;
        struct cluster *c = q->c;
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        tenant_split(q->name, n, t);
        if (err && (err->code == CELLA_E_BACKUP_NOT_FOUND || err->code == CELLA_E_BACKUP_EXPIRED)) {
                /* Gone from the store (deleted, expired): nothing to restore. */
                log_warn("cluster: sandbox '%s' placed here anew: its latest backup '%s' is "
                         "gone (%s); it starts empty",
                         q->name, r->idx.backup_id, err->msg);
                c->restores_fresh++;
                backup_index_forget(c, q->name);
                restore_finish(q, r->created, NULL);
        } else if (err || c->closing) {
                struct cella_error e = {0};

                cella_error_set(&e, CELLA_E_BACKUP_RESTORE_FAILED,
                                "sandbox '%s' was placed on node '%s' anew, but restoring its "
                                "latest backup '%s' failed: %s; the name is free again, try "
                                "again",
                                n, c->node, r->idx.backup_id, err ? err->msg : "cellad stops");
                restore_undo(q, &e);
        } else {
                _cleanup_json_ json_t *from =
                        json_pack("{s:s, s:s, s:s}", "backupId", r->idx.backup_id, "createdAt",
                                  r->idx.created_at, "dir",
                                  json_string_value(json_object_get(result, "dir")) ?: "");

                c->restores_ok++;
                log_info("cluster: sandbox '%s' placed here anew with its latest backup '%s' "
                         "(%s, made on node '%s')",
                         q->name, r->idx.backup_id, r->idx.created_at,
                         r->idx.node[0] ? r->idx.node : "?");
                if (from) {
                        sandbox_set_restored_from(q->s, from);
                        restored_from_save(c, q->s, from);
                }
                restore_finish(q, r->created, NULL);
        }
        free(r);
}

static void on_index_read(const struct etcd_answer *a, void *ud)
{
        struct restoring *r = ud;
        struct claim *q = r->q;
        struct cluster *c = q->c;
        struct cella_error err = {0};
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        tenant_split(q->name, n, t);
        if (a->r < 0 || c->closing) {
                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE,
                                "place sandbox '%s': looking up its latest backup: %s", n,
                                a->r < 0 ? a->err.msg : "cellad stops");
                restore_undo(q, &err);
                free(r);
                return;
        }
        if (a->n_kvs == 0) {
                c->restores_fresh++;
                restore_finish(q, r->created, NULL);
                free(r);
                return;
        }
        if (cluster_backup_index_parse(a->kvs[0].value, a->kvs[0].value_len, &r->idx) < 0) {
                log_warn("cluster: %s holds no backup record etcd-side; '%s' starts empty",
                         a->kvs[0].key, q->name);
                c->restores_fresh++;
                restore_finish(q, r->created, NULL);
                free(r);
                return;
        }
        /* The name's tenant owns the backup, or it is not restored (a record of another
         * tenant's backup under this key is refused as an absent one). */
        if (backups_restore(c->backups, q->s, r->idx.backup_id, NULL, t, on_failover_restored, r,
                            &err) < 0)
                on_failover_restored(NULL, &err, r);
}

/* A claimed name now runs here, made anew (created) or found: restore its latest backup
 * when there is one, then answer the claim. */
static void failover_restore(struct claim *q, struct sandbox *s, bool created)
{
        struct cluster *c = q->c;
        struct restoring *r = calloc(1, sizeof(*r));
        char key[CELLA_CLUSTER_KEY_MAX];
        struct cella_error err = {0};

        sandbox_ref(s);
        q->s = s;
        if (!r || backup_index_key(q->name, key, sizeof(key)) < 0) {
                free(r);
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                restore_undo(q, &err);
                return;
        }
        r->q = q;
        r->created = created;
        if (!created) {
                /* Another request's create made it (it restores): this one only waits. */
                restore_finish(q, created, NULL);
                free(r);
                return;
        }
        if (etcd_range(c->etcd, key, strlen(key), false, on_index_read, r) < 0) {
                free(r);
                cella_error_set(&err, CELLA_E_SERVER_BUSY,
                                "place sandbox: too many requests to etcd at once");
                restore_undo(q, &err);
        }
}

/* ---- stale copies: a name this node has, owned by another ---- */

static void on_moved(const struct etcd_answer *a, void *ud)
{
        char *key = ud;

        if (a->r < 0)
                log_warn("cluster: moving %s to this node's new lease: %s", key, a->err.msg);
        free(key);
}

/* The answer to a re-claim of name (key) after this node registered. */
static void reclaim_answered(struct cluster *c, const char *name, const char *key,
                             const struct etcd_answer *a)
{
        _cleanup_json_ json_t *rec = NULL;
        const char *owner;

        if (a->r < 0 || a->succeeded || a->n_kvs == 0)
                return;
        rec = json_loadb(a->kvs[0].value, a->kvs[0].value_len, 0, NULL);
        owner = json_string_value(json_object_get(rec, "node"));
        if (!owner)
                return;
        if (strcmp(owner, c->node) == 0) {
                /* Ours, under an earlier lease of this node (restarted before it lapsed):
                 * moved to the new one, or it would lapse under a sandbox that lives. */
                if (a->kvs[0].lease != c->lease && c->lease) {
                        char *k = strdup(key);

                        if (k && etcd_put(c->etcd, k, strlen(k), a->kvs[0].value,
                                          a->kvs[0].value_len, c->lease, on_moved, k) < 0)
                                free(k);
                }
                return;
        }
        c->stale_copies++;
        {
                struct cella_error err = {0};
                bool existed = false;

                if (c->local->ops->destroy(c->local, name, &existed, &err) < 0) {
                        log_warn("cluster: sandbox '%s' is owned by node '%s': destroying the "
                                 "stale copy here failed: %s",
                                 name, owner, err.msg);
                        return;
                }
                if (existed) {
                        c->stale_destroyed++;
                        log_warn("cluster: sandbox '%s' is owned by node '%s': the stale copy "
                                 "here is destroyed",
                                 name, owner);
                        cluster_load_changed(c);
                }
        }
}

/* ---- backups on a schedule (--cluster-backup-every) ----
 *
 * Every backup_every_ms, one after the other: each running sandbox active since its last
 * scheduled backup gets CELLA_CLUSTER_DRAIN_DIR backed up (name "auto"), recorded as its
 * name's latest (backup_made); the scheduled backup it replaces as the latest is deleted
 * from the store. A sleeping sandbox is not woken: its files are as they were when it ran. */

static void auto_step(struct cluster *c);

static void on_auto_deleted(json_t *result, const struct cella_error *err, void *ud)
{
        (void)ud;
        if (!result && err && err->code != CELLA_E_BACKUP_NOT_FOUND)
                log_warn("cluster: removing a replaced scheduled backup: %s", err->msg);
}

static void on_auto_stamp(uv_timer_t *t)
{
        struct cluster *c = t->data;
        struct sandbox *s = NULL;
        struct cella_error err = {0};

        if (c->auto_stamp[0] && c->local->ops->get_now(c->local, c->auto_stamp, &s, &err) == 0)
                s->auto_backup_ms = time_now_ms();
        c->auto_stamp[0] = '\0';
}

static void on_auto_backed_up(json_t *result, const struct cella_error *err, void *ud)
{
        struct cluster *c = ud;
        struct cella_error e = {0};
        const char *id = json_string_value(json_object_get(result, "id"));

        if (!result) {
                c->auto_failures++;
                log_warn("cluster: scheduled backup of '%s': %s", c->auto_name, err->msg);
        } else {
                c->auto_backups++;
                /* stamped once the backup's own last touch of the sandbox (after this
                 * callback, in the same turn of the loop) is past: it is no activity */
                snprintf(c->auto_stamp, sizeof(c->auto_stamp), "%s", c->auto_name);
                uv_timer_start(&c->auto_stamp_timer, on_auto_stamp, 0, 0);
                /* the one it replaces as the latest, when it was a scheduled one too */
                if (c->auto_old[0] && id && strcmp(c->auto_old, id) != 0 &&
                    backups_delete(c->backups, c->auto_old, NULL, on_auto_deleted, c, &e) < 0)
                        log_warn("cluster: removing scheduled backup '%s': %s", c->auto_old, e.msg);
        }
        auto_step(c);
}

static void on_auto_index(const struct etcd_answer *a, void *ud)
{
        struct cluster *c = ud;
        struct cluster_backup_index idx;
        struct sandbox *s = NULL;
        struct cella_error err = {0};

        c->auto_old[0] = '\0';
        if (c->closing)
                return;
        if (a->r == 0 && a->n_kvs > 0 &&
            cluster_backup_index_parse(a->kvs[0].value, a->kvs[0].value_len, &idx) == 0 &&
            strcmp(idx.name, CELLA_CLUSTER_AUTO_BACKUP_NAME) == 0)
                snprintf(c->auto_old, sizeof(c->auto_old), "%s", idx.backup_id);
        if (c->local->ops->get_now(c->local, c->auto_name, &s, &err) < 0 ||
            s->state != SANDBOX_RUNNING || c->draining) {
                auto_step(c);
                return;
        }
        if (backups_create(c->backups, s, CELLA_CLUSTER_DRAIN_DIR, CELLA_CLUSTER_AUTO_BACKUP_NAME,
                           CELLA_BACKUP_TTL_DEFAULT, on_auto_backed_up, c, &err) < 0) {
                c->auto_failures++;
                log_warn("cluster: scheduled backup of '%s': %s", c->auto_name, err.msg);
                auto_step(c);
        }
}

static void auto_step(struct cluster *c)
{
        char key[CELLA_CLUSTER_KEY_MAX];

        while (!c->closing && !c->draining && c->auto_next < json_array_size(c->auto_names)) {
                struct sandbox *s = NULL;
                struct cella_error err = {0};

                snprintf(c->auto_name, sizeof(c->auto_name), "%s",
                         json_string_value(json_array_get(c->auto_names, c->auto_next++)));
                if (c->local->ops->get_now(c->local, c->auto_name, &s, &err) < 0 ||
                    s->state != SANDBOX_RUNNING || s->last_active_ms <= s->auto_backup_ms ||
                    backup_index_key(c->auto_name, key, sizeof(key)) < 0)
                        continue;
                if (etcd_range(c->etcd, key, strlen(key), false, on_auto_index, c) == 0)
                        return;
        }
        json_decref(c->auto_names);
        c->auto_names = NULL;
        c->auto_running = false;
}

static void on_auto_timer(uv_timer_t *t)
{
        struct cluster *c = t->data;
        json_t *list;
        size_t i;
        json_t *info;

        if (c->auto_running || c->closing || c->draining || c->drain || !c->lease || !c->backups)
                return;
        list = sandbox_table_list(c->table);
        c->auto_names = json_array();
        if (!list || !c->auto_names) {
                json_decref(list);
                json_decref(c->auto_names);
                c->auto_names = NULL;
                return;
        }
        json_array_foreach(list, i, info)
        {
                const char *id = json_string_value(json_object_get(info, "id"));
                const char *tn = json_string_value(json_object_get(info, "tenant"));
                char name[CELLA_NAME_MAX + 1];

                if (id && tenant_qualify(tn ? tn : "", id, name, NULL) == 0)
                        json_array_append_new(c->auto_names, json_string(name));
        }
        json_decref(list);
        c->auto_next = 0;
        c->auto_running = true;
        auto_step(c);
}

/* ---- drain: every sandbox backed up, its name released, then stopped here ---- */

int cluster_decode_drain(const char *body, size_t len, bool *ret_stop, struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_error_t je;
        int stop = 0;

        *ret_stop = false;
        if (len == 0)
                return 0;
        j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!j || json_unpack_ex(j, &je, JSON_STRICT, "{s?b}", "stop", &stop) < 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "body must be {stop?: boolean}: %s", je.text);
        *ret_stop = stop;
        return 0;
}

struct drain {
        struct cluster *c;
        cluster_json_cb cb;
        void *userdata;
        json_t *names; /* internal names, in the order they go */
        size_t next;
        json_t *drained, *failed;
        char name[CELLA_NAME_MAX + 1];
        char key[CELLA_CLUSTER_KEY_MAX];
        char backup_id[BACKUP_ID_LEN + 1];
        int64_t t0_ms;
};

static void drain_step(struct drain *d);

static void drain_entry(struct drain *d, json_t *arr, json_t *e)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        tenant_split(d->name, n, t);
        json_object_set_new(e, "id", json_string(n));
        if (t[0])
                json_object_set_new(e, "tenant", json_string(t));
        json_array_append_new(arr, e);
}

static void drain_failed(struct drain *d, const struct cella_error *err)
{
        log_warn("cluster: drain of node '%s': sandbox '%s' stays: %s", d->c->node, d->name,
                 err->msg);
        drain_entry(
                d, d->failed,
                json_pack("{s:s, s:s}", "code", cella_code_name(err->code), "message", err->msg));
        drain_step(d);
}

static void drain_released(const struct etcd_answer *a, void *ud)
{
        struct drain *d = ud;
        struct cluster *c = d->c;
        struct cella_error err = {0};
        bool existed = false;

        if (a->r < 0)
                log_warn("cluster: drain: releasing %s: %s (the node's lease frees it when it "
                         "stops)",
                         d->key, a->err.msg);
        if (c->local->ops->destroy(c->local, d->name, &existed, &err) < 0)
                log_warn("cluster: drain: destroying '%s' here: %s", d->name, err.msg);
        c->drained++;
        cluster_load_changed(c);
        log_info("cluster: drain of node '%s': sandbox '%s' handed over (backup '%s')", c->node,
                 d->name, d->backup_id);
        drain_entry(d, d->drained, json_pack("{s:s}", "backupId", d->backup_id));
        drain_step(d);
}

static void drain_indexed(const struct etcd_answer *a, void *ud)
{
        struct drain *d = ud;
        struct cluster *c = d->c;
        struct cella_error err = {0};

        if (a->r < 0 || c->closing || !c->lease) {
                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE,
                                "recording its backup '%s' in etcd: %s", d->backup_id,
                                a->r < 0 ? a->err.msg : "the node is not registered");
                drain_failed(d, &err);
                return;
        }
        if (cluster_name_key(d->name, d->key, sizeof(d->key)) < 0 ||
            etcd_delete_leased(c->etcd, d->key, strlen(d->key), c->lease, drain_released, d) < 0) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY, "releasing its name: etcd is busy");
                drain_failed(d, &err);
        }
}

static void drain_backed_up(json_t *result, const struct cella_error *err, void *ud)
{
        struct drain *d = ud;
        struct cella_error e = {0};

        if (!result) {
                drain_failed(d, err);
                return;
        }
        snprintf(d->backup_id, sizeof(d->backup_id), "%s",
                 json_string_value(json_object_get(result, "id")) ?: "");
        if (d->c->closing || backup_index_put(d->c, result, drain_indexed, d) < 0) {
                cella_error_set(&e, CELLA_E_SERVER_BUSY, "recording its backup: etcd is busy");
                drain_failed(d, &e);
        }
}

static void drain_got(struct sandbox *s, bool created, const struct cella_error *err, void *ud)
{
        struct drain *d = ud;
        struct cella_error e = {0};

        (void)created;
        if (!s) {
                drain_failed(d, err);
                return;
        }
        if (d->c->closing) {
                cella_error_set(&e, CELLA_E_SERVER_BUSY, "cellad is stopping");
                drain_failed(d, &e);
                return;
        }
        if (backups_create(d->c->backups, s, CELLA_CLUSTER_DRAIN_DIR, "drain",
                           CELLA_BACKUP_TTL_DEFAULT, drain_backed_up, d, &e) < 0)
                drain_failed(d, &e);
}

static void drain_step(struct drain *d)
{
        struct cluster *c = d->c;
        _cleanup_json_ json_t *j = NULL;

        while (d->next < json_array_size(d->names) && !c->closing) {
                struct sandbox *s = NULL;
                struct cella_error err = {0};

                snprintf(d->name, sizeof(d->name), "%s",
                         json_string_value(json_array_get(d->names, d->next++)));
                d->backup_id[0] = '\0';
                /* destroyed meanwhile: nothing to hand over (a get with create would make
                 * it anew, empty) */
                if (c->local->ops->get_now(c->local, d->name, &s, &err) < 0)
                        continue;
                /* with create: a sleeping or stopped sandbox is woken for its backup */
                c->local->ops->get(c->local, d->name, true, NULL, drain_got, d);
                return;
        }
        j = json_pack("{s:s, s:b, s:O, s:O, s:I}", "node", c->node, "draining", 1, "drained",
                      d->drained, "failed", d->failed, "durationMs",
                      (json_int_t)(time_now_ms() - d->t0_ms));
        log_info("cluster: drain of node '%s' done: %zu handed over, %zu stay", c->node,
                 json_array_size(d->drained), json_array_size(d->failed));
        c->drain = NULL;
        if (j) {
                d->cb(j, NULL, d->userdata);
                j = NULL; /* taken by cb */
        } else {
                struct cella_error err = {0};

                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                d->cb(NULL, &err, d->userdata);
        }
        json_decref(d->names);
        json_decref(d->drained);
        json_decref(d->failed);
        free(d);
}

int cluster_drain(struct cluster *c, cluster_json_cb cb, void *userdata, struct cella_error *err)
{
        _cleanup_json_ json_t *list = NULL;
        struct drain *d;
        size_t i;
        json_t *info;

        if (!c->backups)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backups are not configured");
        if (c->drain)
                return cella_error_set(err, CELLA_E_SERVER_BUSY,
                                       "node '%s' is draining already: wait for that drain's "
                                       "answer",
                                       c->node);
        if (!c->lease)
                return cella_error_set(err, CELLA_E_CLUSTER_UNAVAILABLE,
                                       "node '%s' is not registered with etcd: it cannot hand "
                                       "its names over now",
                                       c->node);
        d = calloc(1, sizeof(*d));
        list = sandbox_table_list(c->table);
        if (!d || !list || !(d->names = json_array()) || !(d->drained = json_array()) ||
            !(d->failed = json_array())) {
                if (d) {
                        json_decref(d->names);
                        json_decref(d->drained);
                        json_decref(d->failed);
                }
                free(d);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        json_array_foreach(list, i, info)
        {
                const char *id = json_string_value(json_object_get(info, "id"));
                const char *t = json_string_value(json_object_get(info, "tenant"));
                char name[CELLA_NAME_MAX + 1];

                if (id && tenant_qualify(t ? t : "", id, name, NULL) == 0)
                        json_array_append_new(d->names, json_string(name));
        }
        d->c = c;
        d->cb = cb;
        d->userdata = userdata;
        d->t0_ms = time_now_ms();
        c->drain = d;
        if (!c->draining) {
                c->draining = true;
                log_info("cluster: node '%s' drains: %zu sandboxes to hand over; no new names",
                         c->node, json_array_size(d->names));
                publish_now(c);
        }
        drain_step(d);
        return 0;
}

bool cluster_draining(const struct cluster *c)
{
        return c->draining;
}

/* ---- the directory ---- */

static struct cluster *of(struct sandbox_directory *d)
{
        return (struct cluster *)d;
}

static void dir_get(struct sandbox_directory *d, const char *name, bool create,
                    const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct cluster *c = of(d);
        struct sandbox *s = NULL;
        struct cella_error err = {0};

        if (!create || c->local->ops->get_now(c->local, name, &s, &err) == 0)
                c->local->ops->get(c->local, name, create, opts, cb, userdata);
        else
                claim(c, name, false, create, opts, cb, userdata);
}

static int dir_get_now(struct sandbox_directory *d, const char *name, struct sandbox **ret,
                       struct cella_error *err)
{
        struct cluster *c = of(d);

        return c->local->ops->get_now(c->local, name, ret, err);
}

static void dir_put(struct sandbox_directory *d, const char *name,
                    const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct cluster *c = of(d);
        struct sandbox *s = NULL;
        struct cella_error err = {0};

        if (c->local->ops->get_now(c->local, name, &s, &err) == 0)
                c->local->ops->put(c->local, name, opts, cb, userdata);
        else
                claim(c, name, true, true, opts, cb, userdata);
}

static int dir_destroy(struct sandbox_directory *d, const char *name, bool *ret_existed,
                       struct cella_error *err)
{
        struct cluster *c = of(d);
        bool existed = false;
        int r = c->local->ops->destroy(c->local, name, &existed, err);

        if (r >= 0 && existed) {
                release(c, name);
                backup_index_forget(c, name);
                cluster_load_changed(c);
        }
        if (r >= 0 && ret_existed)
                *ret_existed = existed;
        return r;
}

static json_t *dir_list(struct sandbox_directory *d)
{
        return of(d)->local->ops->list(of(d)->local);
}

static unsigned dir_count(struct sandbox_directory *d)
{
        return of(d)->local->ops->count(of(d)->local);
}

static bool dir_image_in_use(struct sandbox_directory *d, const char *image)
{
        return of(d)->local->ops->image_in_use(of(d)->local, image);
}

static struct store *dir_store(struct sandbox_directory *d)
{
        return of(d)->local->ops->store(of(d)->local);
}

static const struct sandbox_directory_ops cluster_ops = {
        .get = dir_get,
        .get_now = dir_get_now,
        .put = dir_put,
        .destroy = dir_destroy,
        .list = dir_list,
        .count = dir_count,
        .image_in_use = dir_image_in_use,
        .store = dir_store,
};

struct sandbox_directory *cluster_directory(struct cluster *c)
{
        return &c->dir;
}

struct etcd *cluster_etcd(struct cluster *c)
{
        return c->etcd;
}

const char *cluster_self(const struct cluster *c)
{
        return c->node;
}

int64_t cluster_lease(const struct cluster *c)
{
        return c->lease;
}

/* ---- the cluster's views ---- */

struct view {
        struct cluster *c;
        cluster_json_cb cb;
        void *userdata;
        bool all_tenants;
        char tenant[CELLA_TENANT_MAX + 1];
};

static void on_nodes(const struct etcd_answer *a, void *ud)
{
        struct view *v = ud;
        _cleanup_json_ json_t *arr = json_array();
        _cleanup_json_ json_t *j = NULL;

        if (a->r < 0 || !arr) {
                struct cella_error err = {0};

                cella_error_set(&err, CELLA_E_CLUSTER_UNAVAILABLE, "list nodes: %s",
                                a->r < 0 ? a->err.msg : "out of memory");
                v->cb(NULL, &err, v->userdata);
                free(v);
                return;
        }
        for (size_t i = 0; i < a->n_kvs; i++) {
                json_t *rec = json_loadb(a->kvs[i].value, a->kvs[i].value_len, 0, NULL);
                const char *node = json_string_value(json_object_get(rec, "node"));

                if (!json_is_object(rec) || !node) {
                        json_decref(rec);
                        continue;
                }
                json_object_set_new(rec, "self", json_boolean(strcmp(node, v->c->node) == 0));
                json_array_append_new(arr, rec);
        }
        j = json_pack("{s:O}", "nodes", arr);
        v->cb(j, NULL, v->userdata);
        j = NULL; /* taken by cb */
        free(v);
}

static struct view *view_new(struct cluster *c, cluster_json_cb cb, void *userdata)
{
        struct view *v = calloc(1, sizeof(*v));

        if (v) {
                v->c = c;
                v->cb = cb;
                v->userdata = userdata;
        }
        return v;
}

int cluster_nodes(struct cluster *c, cluster_json_cb cb, void *userdata)
{
        struct view *v = view_new(c, cb, userdata);
        int r;

        if (!v)
                return -ENOMEM;
        r = etcd_range(c->etcd, NODES_PREFIX, strlen(NODES_PREFIX), true, on_nodes, v);
        if (r < 0)
                free(v);
        return r;
}

static void on_names(const struct etcd_answer *a, void *ud)
{
        struct view *v = ud;
        struct cluster *c = v->c;
        _cleanup_json_ json_t *arr = sandbox_table_list(c->table);
        size_t i;
        json_t *info;

        if (!arr) {
                struct cella_error err = {0};

                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                v->cb(NULL, &err, v->userdata);
                free(v);
                return;
        }
        /* This node's own, in full. */
        for (i = json_array_size(arr); i-- > 0;) {
                const char *t;

                info = json_array_get(arr, i);
                t = json_string_value(json_object_get(info, "tenant"));
                if (!v->all_tenants && strcmp(t ? t : "", v->tenant) != 0) {
                        json_array_remove(arr, i);
                        continue;
                }
                json_object_set_new(info, "node", json_string(c->node));
        }
        /* Other nodes', as their names' records say. */
        for (size_t k = 0; a->r == 0 && k < a->n_kvs; k++) {
                const char *key = a->kvs[k].key + strlen(NAMES_PREFIX);
                const char *slash = strchr(key, '/');
                _cleanup_json_ json_t *rec = NULL;
                const char *node;
                char tenant[CELLA_TENANT_MAX + 1];

                if (strncmp(a->kvs[k].key, NAMES_PREFIX, strlen(NAMES_PREFIX)) != 0 || !slash ||
                    (size_t)(slash - key) > CELLA_TENANT_MAX || !slash[1])
                        continue;
                rec = json_loadb(a->kvs[k].value, a->kvs[k].value_len, 0, NULL);
                node = json_string_value(json_object_get(rec, "node"));
                if (!node || strcmp(node, c->node) == 0)
                        continue;
                snprintf(tenant, sizeof(tenant), "%.*s", (int)(slash - key), key);
                if (strcmp(tenant, "-") == 0)
                        tenant[0] = '\0';
                info = json_pack("{s:s, s:s, s:s, s:s}", "id", slash + 1, "node", node, "image",
                                 json_string_value(json_object_get(rec, "image")) ?: "",
                                 "createdAt",
                                 json_string_value(json_object_get(rec, "since")) ?: "");
                if (info && tenant[0])
                        json_object_set_new(info, "tenant", json_string(tenant));
                json_array_append_new(arr, info);
        }
        if (a->r < 0) {
                /* etcd out of reach: this node's own, said to be only those. */
                json_t *j = json_pack("{s:O, s:b, s:s}", "sandboxes", arr, "partial", 1,
                                      "partialReason", a->err.msg);

                v->cb(j, NULL, v->userdata); /* takes j */
        } else {
                json_t *j = json_pack("{s:O}", "sandboxes", arr);

                v->cb(j, NULL, v->userdata); /* takes j */
        }
        free(v);
}

int cluster_sandboxes(struct cluster *c, const char *tenant, cluster_json_cb cb, void *userdata)
{
        struct view *v = view_new(c, cb, userdata);
        char prefix[sizeof(NAMES_PREFIX) + CELLA_TENANT_MAX + 2];
        int r;

        if (!v)
                return -ENOMEM;
        v->all_tenants = !tenant;
        snprintf(v->tenant, sizeof(v->tenant), "%s", tenant ? tenant : "");
        if (tenant)
                snprintf(prefix, sizeof(prefix), NAMES_PREFIX "%s/", tenant[0] ? tenant : "-");
        else
                snprintf(prefix, sizeof(prefix), NAMES_PREFIX);
        r = etcd_range(c->etcd, prefix, strlen(prefix), true, on_names, v);
        if (r < 0)
                free(v);
        return r;
}

/* The failover's, stale copies' and drain's series (decision 0057, metrics.md). */
static int failover_metrics(struct cluster *c, struct buf *b)
{
        static const char *const restores[] = {"restored", "fresh", "failed"};
        static const char *const results[] = {"ok", "error"};
        const uint64_t rv[] = {c->restores_ok, c->restores_fresh, c->restores_failed};
        const uint64_t av[] = {c->auto_backups, c->auto_failures};
        int r = prom_family_by_label(
                b, "cella_cluster_failover_restores_total", "counter",
                "Names this node placed anew after they were free, by what their latest backup "
                "gave (restored; fresh: none or gone; failed: the name given back)",
                "result", restores, rv, ARRAY_SIZE(rv), true);

        if (r >= 0)
                r = prom_family_u64(b, "cella_cluster_stale_copies_destroyed_total", "counter",
                                    "Local sandboxes destroyed because another node owns their "
                                    "name",
                                    c->stale_destroyed);
        if (r >= 0)
                r = prom_family_u64(b, "cella_cluster_draining", "gauge",
                                    "1 while this node drains (it places no new names)",
                                    c->draining ? 1 : 0);
        if (r >= 0)
                r = prom_family_u64(b, "cella_cluster_drained_total", "counter",
                                    "Sandboxes a drain backed up, released and removed here",
                                    c->drained);
        if (r >= 0)
                r = prom_family_by_label(b, "cella_cluster_scheduled_backups_total", "counter",
                                         "Backups made by --cluster-backup-every, by result",
                                         "result", results, av, ARRAY_SIZE(av), true);
        return r;
}

/* The tenants' series of a cluster node: its copy of the keys, the quotas' claims. */
static int cluster_tenant_metrics(struct cluster *c, struct buf *b)
{
        static const char *const results[] = {"refused", "recounted"};
        const uint64_t v[] = {c->quota_refusals, c->quota_retries};
        int r = prom_family_u64(b, "cella_cluster_keys", "gauge",
                                "Tenants' keys in this node's copy of etcd's",
                                c->keys ? cluster_keys_count(c->keys) : 0);

        if (r >= 0)
                r = prom_family_by_label(
                        b, "cella_cluster_quota_claims_total", "counter",
                        "A tenant's new names and wakes checked against its quotas across the "
                        "cluster, by outcome (refused: QUOTA_EXCEEDED; recounted: another of its "
                        "names was claimed meanwhile)",
                        "result", results, v, ARRAY_SIZE(v), true);
        return r;
}

int cluster_metrics(struct cluster *c, struct buf *b)
{
        static const char *const ops[ETCD_OP_MAX] = {
                "range",           "put",         "deleterange", "txn", "lease_grant",
                "lease_keepalive", "lease_revoke"};
        const struct etcd_stats *st = etcd_stats(c->etcd);
        int r = prom_family(b, "cella_etcd_requests_total", "counter",
                            "Requests to etcd answered, by operation and result");

        for (int i = 0; r >= 0 && i < ETCD_OP_MAX; i++) {
                struct prom_label ok[] = {{"op", ops[i]}, {"result", "ok"}};
                struct prom_label bad[] = {{"op", ops[i]}, {"result", "error"}};

                r = prom_sample_u64(b, "cella_etcd_requests_total", ok, 2,
                                    st->requests[i] - st->failures[i]);
                if (r >= 0)
                        r = prom_sample_u64(b, "cella_etcd_requests_total", bad, 2,
                                            st->failures[i]);
        }
        if (r >= 0)
                r = prom_family(b, "cella_etcd_failovers_total", "counter",
                                "Moves to the next etcd endpoint after one did not answer");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_etcd_failovers_total", NULL, 0, st->failovers);
        if (r >= 0)
                r = prom_family(b, "cella_etcd_up", "gauge",
                                "1 when the last request reached an etcd endpoint that answered");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_etcd_up", NULL, 0, st->healthy ? 1 : 0);
        if (r >= 0)
                r = prom_family(b, "cella_cluster_registered", "gauge",
                                "1 while this node holds a lease and its record");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_cluster_registered", NULL, 0, c->lease ? 1 : 0);
        if (r >= 0)
                r = prom_family(b, "cella_cluster_registrations_total", "counter",
                                "Leases granted to this node (1 + registrations after a loss)");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_cluster_registrations_total", NULL, 0,
                                    c->registrations);
        if (r >= 0)
                r = prom_family(b, "cella_cluster_lease_losses_total", "counter",
                                "Times etcd said this node's lease was gone");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_cluster_lease_losses_total", NULL, 0,
                                    c->lease_losses);
        if (r >= 0)
                r = prom_family(b, "cella_cluster_claims_total", "counter",
                                "New names this node asked etcd for, by result (won: placed "
                                "here; lost: owned by another node)");
        if (r >= 0) {
                struct prom_label won = {"result", "won"}, lost = {"result", "lost"};

                r = prom_sample_u64(b, "cella_cluster_claims_total", &won, 1, c->claims_won);
                if (r >= 0)
                        r = prom_sample_u64(b, "cella_cluster_claims_total", &lost, 1,
                                            c->claims_lost);
        }
        if (r >= 0)
                r = cluster_tenant_metrics(c, b);
        if (r >= 0)
                r = failover_metrics(c, b);
        return r < 0 ? r : 0;
}

/* ---- life ---- */

static void on_timer_closed(uv_handle_t *h)
{
        struct cluster *c = h->data;

        if (--c->handles == 0) {
                json_decref(c->auto_names);
                free(c);
        }
}

int cluster_new(uv_loop_t *loop, const struct cluster_config *cfg, struct sandbox_table *table,
                struct cluster **ret, struct cella_error *err)
{
        struct cluster *c;
        int r;

        if (!cluster_node_name_is_valid(cfg->node))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "--node '%.80s': 1 to 63 of a-z, 0-9 and '-', not "
                                       "starting with '-'",
                                       cfg->node);
        if (strlen(cfg->advertise) > CELLA_CLUSTER_URL_MAX ||
            (strncmp(cfg->advertise, "http://", 7) != 0 &&
             strncmp(cfg->advertise, "https://", 8) != 0))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "--advertise '%.80s': the node's API as other nodes reach "
                                       "it, an http:// or https:// URL",
                                       cfg->advertise);
        c = calloc(1, sizeof(*c));
        if (!c)
                return cella_error_errno(err, ENOMEM, "cluster");
        r = etcd_new(loop, cfg->etcd, &c->etcd, err);
        if (r < 0) {
                free(c);
                return cella_error_prefix(err, "--cluster");
        }
        c->dir.ops = &cluster_ops;
        c->loop = loop;
        c->table = table;
        c->local = sandbox_table_directory(table);
        snprintf(c->node, sizeof(c->node), "%s", cfg->node);
        snprintf(c->advertise, sizeof(c->advertise), "%s", cfg->advertise);
        snprintf(c->images_dir, sizeof(c->images_dir), "%s", cfg->images_dir);
        snprintf(c->version, sizeof(c->version), "%s", cfg->version);
        c->capacity = cfg->capacity;
        c->started_ms = time_now_ms();
        c->backups = cfg->backups;
        if (c->backups)
                backups_on_created(c->backups, backup_made, c);
        uv_timer_init(loop, &c->tick);
        uv_timer_init(loop, &c->publish);
        uv_timer_init(loop, &c->autobackup);
        uv_timer_init(loop, &c->auto_stamp_timer);
        c->autobackup.data = c->auto_stamp_timer.data = c;
        c->backup_every_ms = cfg->backup_every_ms;
        if (c->backups && c->backup_every_ms > 0)
                uv_timer_start(&c->autobackup, on_auto_timer, (uint64_t)c->backup_every_ms,
                               (uint64_t)c->backup_every_ms);
        c->tick.data = c->publish.data = c;
        c->handles = 4;
        uv_timer_start(&c->tick, on_tick, CELLA_CLUSTER_KEEPALIVE_MS, CELLA_CLUSTER_KEEPALIVE_MS);
        if (cluster_keys_new(loop, c->etcd, sandbox_table_store(table), &c->keys) < 0)
                log_warn("cluster: no memory for the tenants' keys: no key authenticates");
        grant(c);
        *ret = c;
        return 0;
}

static size_t discard(char *p, size_t size, size_t n, void *userdata)
{
        return size * n;
}

/* The lease's revoke at exit, blocking for at most CELLA_CLUSTER_REVOKE_TIMEOUT_MS: the
 * loop has stopped by then, and a node that says it goes frees its names at once rather
 * than a TTL later. */
static void revoke_now(struct cluster *c)
{
        CURL *h = curl_easy_init();
        char url[600], body[64];

        if (!h)
                return;
        snprintf(url, sizeof(url), "%s/v3/lease/revoke", etcd_endpoint(c->etcd));
        snprintf(body, sizeof(body), "{\"ID\":\"%lld\"}", (long long)c->lease);
        curl_easy_setopt(h, CURLOPT_URL, url);
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, (long)CELLA_CLUSTER_REVOKE_TIMEOUT_MS);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, discard);
        curl_easy_perform(h);
        curl_easy_cleanup(h);
}

void cluster_free(struct cluster *c)
{
        if (!c)
                return;
        c->closing = true;
        if (c->backups)
                backups_on_created(c->backups, NULL, NULL);
        if (c->lease)
                revoke_now(c);
        cluster_keys_free(c->keys); /* its pending requests answer with etcd_free's error */
        etcd_free(c->etcd);         /* pending claims answer now, with an error */
        uv_timer_stop(&c->tick);
        uv_timer_stop(&c->publish);
        uv_timer_stop(&c->autobackup);
        uv_timer_stop(&c->auto_stamp_timer);
        uv_close((uv_handle_t *)&c->autobackup, on_timer_closed);
        uv_close((uv_handle_t *)&c->auto_stamp_timer, on_timer_closed);
        uv_close((uv_handle_t *)&c->tick, on_timer_closed);
        uv_close((uv_handle_t *)&c->publish, on_timer_closed);
}
