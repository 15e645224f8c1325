/* Tenants' API keys in etcd and each node's copy of them (cluster-keys.h).
 *
 * Invariants: keys[0..n) is sorted by id, ids unique; pending counts the requests to etcd
 * whose callbacks have not run, and the struct goes once closing, its timer closed and
 * pending 0; at most one poll (the marker's read, then every key's) is in flight;
 * local_rev is the etcd revision of this node's last key written or removed, and no read
 * of an older revision replaces the copy (it would bring back what was just removed, or
 * lose what was just made). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/cluster-keys.h"
#include "daemon/etcd.h"

struct cluster_keys {
        uv_loop_t *loop;
        struct etcd *etcd;
        struct store *registry;
        struct cluster_key *keys; /* sorted by id */
        size_t n, cap;
        bool loaded, imported;
        bool polling;
        int64_t marker_rev;  /* the marker's mod revision of the copy (0: no marker) */
        int64_t reading_rev; /* the marker's, of the read in flight */
        int64_t local_rev;
        int64_t last_full_ms; /* monotonic, of the last read of every key */
        bool warned;
        uv_timer_t timer;
        bool closing, timer_open;
        unsigned pending;
};

/* ---- records ---- */

static bool is_hash_hex(const char *s)
{
        if (strlen(s) != CELLA_KEY_HASH_HEX)
                return false;
        for (; *s; s++)
                if (!((*s >= '0' && *s <= '9') || (*s >= 'a' && *s <= 'f')))
                        return false;
        return true;
}

int cluster_key_decode(const char *json, size_t len, struct cluster_key *out)
{
        _cleanup_json_ json_t *j = json_loadb(json, len, JSON_REJECT_DUPLICATES, NULL);
        const char *id = NULL, *tenant = NULL, *hash = NULL;
        json_int_t ms = -1, maxs = -1, maxm = -1;

        if (!json_is_object(j) ||
            json_unpack(j, "{s:s, s:s, s:s, s:I, s:I, s:I}", "id", &id, "tenant", &tenant,
                        "secretSha256", &hash, "maxSandboxes", &maxs, "maxMemory", &maxm,
                        "createdMs", &ms) < 0)
                return -EINVAL;
        if (!apikey_id_is_valid(id) || !tenant_name_is_valid(tenant) || !is_hash_hex(hash) ||
            ms < 0 || maxs < 0 || maxm < 0)
                return -EINVAL;
        memset(out, 0, sizeof(*out));
        memcpy(out->id, id, strlen(id) + 1);
        memcpy(out->tenant, tenant, strlen(tenant) + 1);
        memcpy(out->secret_sha256, hash, strlen(hash) + 1);
        out->created_ms = ms;
        out->max_sandboxes = maxs;
        out->max_memory_bytes = maxm;
        return 0;
}

char *cluster_key_encode(const struct store_key *k)
{
        _cleanup_json_ json_t *j = json_pack(
                "{s:s, s:s, s:s, s:I, s:I, s:I}", "id", k->id, "tenant", k->tenant, "secretSha256",
                k->secret_sha256, "maxSandboxes", (json_int_t)k->max_sandboxes, "maxMemory",
                (json_int_t)k->max_memory_bytes, "createdMs", (json_int_t)k->created_ms);

        return j ? json_dumps(j, JSON_COMPACT) : NULL;
}

static struct store_key view(const struct cluster_key *c)
{
        return (struct store_key){.id = c->id,
                                  .tenant = c->tenant,
                                  .secret_sha256 = c->secret_sha256,
                                  .created_ms = c->created_ms,
                                  .max_sandboxes = c->max_sandboxes,
                                  .max_memory_bytes = c->max_memory_bytes};
}

static void key_of_store(const struct store_key *s, struct cluster_key *out)
{
        memset(out, 0, sizeof(*out));
        snprintf(out->id, sizeof(out->id), "%s", s->id);
        snprintf(out->tenant, sizeof(out->tenant), "%s", s->tenant);
        snprintf(out->secret_sha256, sizeof(out->secret_sha256), "%s", s->secret_sha256);
        out->created_ms = s->created_ms;
        out->max_sandboxes = s->max_sandboxes;
        out->max_memory_bytes = s->max_memory_bytes;
}

/* ---- the copy ---- */

static int by_id(const void *a, const void *b)
{
        return strcmp(((const struct cluster_key *)a)->id, ((const struct cluster_key *)b)->id);
}

static int by_age(const void *a, const void *b)
{
        const struct cluster_key *x = a, *y = b;

        if (x->created_ms != y->created_ms)
                return x->created_ms < y->created_ms ? -1 : 1;
        return strcmp(x->id, y->id);
}

static struct cluster_key *find(const struct cluster_keys *k, const char *id)
{
        struct cluster_key probe;

        if (strlen(id) > CELLA_KEY_ID_LEN || !k->n)
                return NULL;
        memcpy(probe.id, id, strlen(id) + 1);
        return bsearch(&probe, k->keys, k->n, sizeof(*k->keys), by_id);
}

static int insert(struct cluster_keys *k, const struct cluster_key *c)
{
        struct cluster_key *at = find(k, c->id);
        size_t i;

        if (at) {
                *at = *c;
                return 0;
        }
        if (k->n == k->cap) {
                size_t cap = k->cap ? k->cap * 2 : 16;
                struct cluster_key *p = realloc(k->keys, cap * sizeof(*p));

                if (!p)
                        return -ENOMEM;
                k->keys = p;
                k->cap = cap;
        }
        for (i = k->n; i > 0 && strcmp(k->keys[i - 1].id, c->id) > 0; i--)
                k->keys[i] = k->keys[i - 1];
        k->keys[i] = *c;
        k->n++;
        return 0;
}

static void remove_id(struct cluster_keys *k, const char *id)
{
        struct cluster_key *at = find(k, id);

        if (!at)
                return;
        memmove(at, at + 1, (size_t)(k->keys + k->n - at - 1) * sizeof(*at));
        k->n--;
}

/* The records of a range answer, sorted by id (a record that does not decode is left out,
 * and said once). *ret malloc'd (NULL when none). */
static int decode_all(struct cluster_keys *k, const struct etcd_answer *a, struct cluster_key **ret,
                      size_t *ret_n)
{
        struct cluster_key *v = a->n_kvs ? calloc(a->n_kvs, sizeof(*v)) : NULL;
        size_t n = 0;

        if (a->n_kvs && !v)
                return -ENOMEM;
        for (size_t i = 0; i < a->n_kvs; i++) {
                if (cluster_key_decode(a->kvs[i].value, a->kvs[i].value_len, &v[n]) == 0 &&
                    strcmp(a->kvs[i].key + strlen(CLUSTER_KEYS_PREFIX), v[n].id) == 0)
                        n++;
                else if (k && !k->warned) {
                        log_warn("cluster: %.200s is not a key's record: left out", a->kvs[i].key);
                        k->warned = true;
                }
        }
        if (n > 1)
                qsort(v, n, sizeof(*v), by_id); /* v is NULL when there is none */
        *ret = v;
        *ret_n = n;
        return 0;
}

/* Replace the copy with what a read at revision rev found (taken), unless this node wrote
 * a key after it. */
static bool replace(struct cluster_keys *k, struct cluster_key *v, size_t n, int64_t rev)
{
        if (rev < k->local_rev) {
                free(v);
                return false;
        }
        free(k->keys);
        k->keys = v;
        k->n = k->cap = n;
        return true;
}

/* ---- lifetime ---- */

static void maybe_free(struct cluster_keys *k)
{
        if (!k->closing || k->timer_open || k->pending)
                return;
        free(k->keys);
        free(k);
}

static void on_timer_closed(uv_handle_t *h)
{
        struct cluster_keys *k = h->data;

        k->timer_open = false;
        maybe_free(k);
}

/* A request's callback has run: false when the struct is closing (and maybe gone now). */
static bool answered(struct cluster_keys *k)
{
        k->pending--;
        if (k->closing) {
                maybe_free(k);
                return false;
        }
        return true;
}

/* ---- the poll ---- */

static void on_imported(const struct etcd_answer *a, void *ud)
{
        struct cluster_keys *k = ud;

        if (!answered(k))
                return;
        if (a->r < 0)
                log_warn("cluster: copying a key of the registry into etcd: %s (it is tried "
                         "again at the next start)",
                         a->err.msg);
        else if (a->succeeded)
                k->local_rev = a->revision;
}

static int put_txn(struct cluster_keys *k, const struct store_key *key, etcd_cb cb, void *ud);

static int import_one(const struct store_key *key, void *ud)
{
        struct cluster_keys *k = ud;
        struct cluster_key c;

        if (find(k, key->id))
                return 0;
        key_of_store(key, &c);
        if (insert(k, &c) < 0 || put_txn(k, key, on_imported, k) < 0)
                return 0;
        k->pending++;
        log_info("cluster: key '%s' of tenant '%s' copied from the registry into etcd", key->id,
                 key->tenant);
        return 0;
}

static void on_all(const struct etcd_answer *a, void *ud)
{
        struct cluster_keys *k = ud;
        struct cluster_key *v = NULL;
        size_t n = 0;

        if (!answered(k))
                return;
        k->polling = false;
        if (a->r < 0 || decode_all(k, a, &v, &n) < 0) {
                if (a->r < 0)
                        log_warn("cluster: reading the keys: %s (keeping the %zu known)",
                                 a->err.msg, k->n);
                return;
        }
        if (!replace(k, v, n, a->revision)) {
                k->marker_rev = -1; /* read again at the next poll */
                return;
        }
        k->marker_rev = k->reading_rev;
        k->last_full_ms = (int64_t)(time_mono_us() / 1000);
        if (!k->loaded)
                log_info("cluster: %zu tenants' keys read from etcd", k->n);
        k->loaded = true;
        if (!k->imported && k->registry) {
                struct cella_error err = {0};

                k->imported = true;
                store_key_foreach(k->registry, import_one, k, &err);
        }
}

static void on_marker(const struct etcd_answer *a, void *ud)
{
        struct cluster_keys *k = ud;
        int64_t rev, now = (int64_t)(time_mono_us() / 1000);

        if (!answered(k))
                return;
        if (a->r < 0) {
                k->polling = false;
                return;
        }
        rev = a->n_kvs ? a->kvs[0].mod_revision : 0;
        if (k->loaded && rev == k->marker_rev &&
            now - k->last_full_ms < CELLA_CLUSTER_KEYS_RELOAD_MS) {
                k->polling = false;
                return;
        }
        k->reading_rev = rev;
        if (etcd_range(k->etcd, CLUSTER_KEYS_PREFIX, strlen(CLUSTER_KEYS_PREFIX), true, on_all, k) <
            0) {
                k->polling = false;
                return;
        }
        k->pending++;
}

static void poll_now(struct cluster_keys *k)
{
        if (k->polling || k->closing)
                return;
        if (etcd_range(k->etcd, CLUSTER_KEYSET_KEY, strlen(CLUSTER_KEYSET_KEY), false, on_marker,
                       k) < 0)
                return;
        k->polling = true;
        k->pending++;
}

static void on_tick(uv_timer_t *t)
{
        poll_now(t->data);
}

int cluster_keys_new(uv_loop_t *loop, struct etcd *etcd, struct store *registry,
                     struct cluster_keys **ret)
{
        struct cluster_keys *k = calloc(1, sizeof(*k));

        if (!k)
                return -ENOMEM;
        k->loop = loop;
        k->etcd = etcd;
        k->registry = registry;
        k->marker_rev = -1;
        uv_timer_init(loop, &k->timer);
        k->timer.data = k;
        k->timer_open = true;
        uv_timer_start(&k->timer, on_tick, CELLA_CLUSTER_KEYS_POLL_MS, CELLA_CLUSTER_KEYS_POLL_MS);
        poll_now(k);
        *ret = k;
        return 0;
}

void cluster_keys_free(struct cluster_keys *k)
{
        if (!k)
                return;
        k->closing = true;
        uv_timer_stop(&k->timer);
        uv_close((uv_handle_t *)&k->timer, on_timer_closed);
}

int cluster_keys_get(struct cluster_keys *k, const char *id,
                     int (*fn)(const struct store_key *k, void *userdata), void *userdata)
{
        struct cluster_key *c = find(k, id);
        struct store_key v;

        if (!c) {
                poll_now(k); /* a key made elsewhere a moment ago: the next try finds it */
                return -ENOENT;
        }
        v = view(c);
        return fn(&v, userdata);
}

size_t cluster_keys_count(const struct cluster_keys *k)
{
        return k->n;
}

bool cluster_keys_loaded(const struct cluster_keys *k)
{
        return k->loaded;
}

/* ---- writes ---- */

struct key_op {
        struct cluster_keys *k;
        cluster_keys_done_cb cb;
        cluster_keys_list_cb list_cb;
        void *userdata;
        struct cluster_key key;
};

static char *keyset_value(void)
{
        char *s = malloc(32);

        if (s)
                snprintf(s, 32, "%lld", (long long)time_now_ms());
        return s;
}

/* txn: if /cella/keys/<id> is absent, put it and touch the marker; else read it. */
static int put_txn(struct cluster_keys *k, const struct store_key *key, etcd_cb cb, void *ud)
{
        char name[sizeof(CLUSTER_KEYS_PREFIX) + CELLA_KEY_ID_LEN];
        _cleanup_free_ char *value = cluster_key_encode(key), *mark = keyset_value();
        json_t *cmp, *ok, *no;

        if (!value || !mark)
                return -ENOMEM;
        snprintf(name, sizeof(name), CLUSTER_KEYS_PREFIX "%s", key->id);
        cmp = json_pack("[o]", etcd_cmp_absent(name, strlen(name)));
        ok = json_pack("[o, o]", etcd_req_put(name, strlen(name), value, strlen(value), 0),
                       etcd_req_put(CLUSTER_KEYSET_KEY, strlen(CLUSTER_KEYSET_KEY), mark,
                                    strlen(mark), 0));
        no = json_pack("[o]", etcd_req_range(name, strlen(name)));
        return etcd_txn(k->etcd, cmp, ok, no, cb, ud);
}

/* An answer come while the node stops: the op is answered so (and freed); true then. */
static bool op_stopped(struct key_op *op)
{
        struct cella_error err = {0};

        if (answered(op->k))
                return false;
        cella_error_set(&err, CELLA_E_SERVER_BUSY, "cellad is stopping");
        op->cb(-ECANCELED, &err, op->userdata);
        free(op);
        return true;
}

static void on_created(const struct etcd_answer *a, void *ud)
{
        struct key_op *op = ud;
        struct cluster_keys *k = op->k;
        struct cella_error err = {0};

        if (op_stopped(op))
                return;
        if (a->r < 0) {
                op->cb(a->r, &a->err, op->userdata);
        } else if (!a->succeeded) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "key id '%s' is taken: try again",
                                op->key.id);
                op->cb(-EEXIST, &err, op->userdata);
        } else {
                k->local_rev = a->revision;
                if (insert(k, &op->key) < 0)
                        k->marker_rev = -1; /* the next poll reads it */
                op->cb(0, NULL, op->userdata);
        }
        free(op);
}

int cluster_keys_create(struct cluster_keys *k, const struct store_key *key,
                        cluster_keys_done_cb cb, void *userdata)
{
        struct key_op *op = calloc(1, sizeof(*op));
        int r;

        if (!op)
                return -ENOMEM;
        op->k = k;
        op->cb = cb;
        op->userdata = userdata;
        key_of_store(key, &op->key);
        r = put_txn(k, key, on_created, op);
        if (r < 0) {
                free(op);
                return r;
        }
        k->pending++;
        return 0;
}

static void on_deleted(const struct etcd_answer *a, void *ud)
{
        struct key_op *op = ud;
        struct cluster_keys *k = op->k;

        if (op_stopped(op))
                return;
        if (a->r < 0) {
                op->cb(a->r, &a->err, op->userdata);
        } else {
                if (a->succeeded)
                        k->local_rev = a->revision;
                remove_id(k, op->key.id);
                op->cb(a->succeeded ? 1 : 0, NULL, op->userdata);
        }
        free(op);
}

int cluster_keys_delete(struct cluster_keys *k, const char *id, cluster_keys_done_cb cb,
                        void *userdata)
{
        char name[sizeof(CLUSTER_KEYS_PREFIX) + CELLA_KEY_ID_LEN];
        _cleanup_free_ char *mark = keyset_value();
        struct key_op *op;
        json_t *cmp, *ok, *no;
        int r;

        if (strlen(id) > CELLA_KEY_ID_LEN || !mark)
                return -EINVAL;
        op = calloc(1, sizeof(*op));
        if (!op)
                return -ENOMEM;
        op->k = k;
        op->cb = cb;
        op->userdata = userdata;
        snprintf(op->key.id, sizeof(op->key.id), "%s", id);
        snprintf(name, sizeof(name), CLUSTER_KEYS_PREFIX "%s", id);
        cmp = json_pack("[o]", etcd_cmp_present(name, strlen(name)));
        ok = json_pack("[o, o]", etcd_req_delete(name, strlen(name)),
                       etcd_req_put(CLUSTER_KEYSET_KEY, strlen(CLUSTER_KEYSET_KEY), mark,
                                    strlen(mark), 0));
        no = json_pack("[o]", etcd_req_range(name, strlen(name)));
        r = etcd_txn(k->etcd, cmp, ok, no, on_deleted, op);
        if (r < 0) {
                free(op);
                return r;
        }
        k->pending++;
        return 0;
}

static void on_listed(const struct etcd_answer *a, void *ud)
{
        struct key_op *op = ud;
        struct cluster_keys *k = op->k;
        struct cella_error err = {0};
        struct cluster_key *v = NULL, *copy = NULL;
        struct store_key *views = NULL;
        size_t n = 0;

        if (!answered(k)) {
                cella_error_set(&err, CELLA_E_SERVER_BUSY, "cellad is stopping");
                op->list_cb(NULL, 0, &err, op->userdata);
                free(op);
                return;
        }
        if (a->r < 0) {
                op->list_cb(NULL, 0, &a->err, op->userdata);
                free(op);
                return;
        }
        if (decode_all(k, a, &v, &n) < 0 || (n && !(copy = malloc(n * sizeof(*copy)))) ||
            (n && !(views = calloc(n, sizeof(*views))))) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                op->list_cb(NULL, 0, &err, op->userdata);
                free(v);
                free(copy);
                free(op);
                return;
        }
        if (n) {
                memcpy(copy, v, n * sizeof(*v));
                qsort(copy, n, sizeof(*copy), by_age);
        }
        for (size_t i = 0; i < n; i++)
                views[i] = view(&copy[i]);
        replace(k, v, n, a->revision); /* the freshest read there is */
        op->list_cb(views, n, NULL, op->userdata);
        free(views);
        free(copy);
        free(op);
}

int cluster_keys_list(struct cluster_keys *k, cluster_keys_list_cb cb, void *userdata)
{
        struct key_op *op = calloc(1, sizeof(*op));
        int r;

        if (!op)
                return -ENOMEM;
        op->k = k;
        op->list_cb = cb;
        op->userdata = userdata;
        r = etcd_range(k->etcd, CLUSTER_KEYS_PREFIX, strlen(CLUSTER_KEYS_PREFIX), true, on_listed,
                       op);
        if (r < 0) {
                free(op);
                return r;
        }
        k->pending++;
        return 0;
}
