/* Forwarding between the nodes of a cluster (forward.h; decision 0056).
 *
 * Invariants: a resolution (struct fq) holds one reference to its request until it relays
 * it or hands it back; the nodes' view is refreshed by one range read at a time, the
 * resolutions waiting for it queued; an owner cached is at most CELLA_FORWARD_CACHE_MS
 * old, and is dropped when its node cannot be reached. */
#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/prom.h"
#include "common/timeutil.h"
#include "daemon/cluster-auth.h"
#include "daemon/cluster.h"
#include "daemon/etcd.h"
#include "daemon/forward.h"
#include "daemon/tenant.h"

#define NODES_PREFIX "/cella/nodes/"

/* One live node as its record says. */
struct node_rec {
        char node[64];
        char advertise[CELLA_CLUSTER_URL_MAX + 1];
        struct sockaddr_storage addr;
        bool addr_ok; /* advertise is http://<IP address>:<port> */
        int64_t capacity, sandboxes, lease;
        bool has_image;  /* the default image */
        bool draining;   /* handing its sandboxes over (decision 0057): placed nothing */
        unsigned placed; /* names this node placed there since the records were read */
};

struct owner_slot {
        char name[CELLA_NAME_MAX + 1];
        char node[64];
        int64_t expires_ms;
};

struct fq;

/* The counters of /metrics. */
enum { K_API, K_PREVIEW, K_N };
enum { R_ANSWERED, R_UNREACHABLE, R_LEFT, R_N };
static const uint64_t bounds_us[] = {250, 500, 1000, 2500, 5000, 10000, 25000, 100000, 1000000};

struct forward {
        struct cluster *cluster;
        unsigned char secret[CELLA_CLUSTER_SECRET_MAX];
        size_t secret_len;
        char default_image[CELLA_NAME_MAX + 1];
        struct nonce_cache *nonces;

        struct owner_slot owners[CELLA_FORWARD_CACHE_MAX];

        struct node_rec *nodes;
        size_t n_nodes;
        int64_t nodes_ms; /* when they were read (monotonic ms); 0: never */
        bool nodes_reading;
        struct fq *nodes_waiting; /* resolutions waiting for them */

        uint64_t relayed[K_N][R_N];
        uint64_t hist[K_N][ARRAY_SIZE(bounds_us) + 1], hist_sum[K_N];
        uint64_t lookups_cache, lookups_etcd, lookups_failed;
        uint64_t placed_self, placed_other, placed_lost;
        uint64_t refused_bad, refused_replay, refused_full, accepted;
};

/* ---- the secret ---- */

int forward_secret_read(const char *path, unsigned char *out, size_t outsz, size_t *ret_len,
                        struct cella_error *err)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        struct stat st;
        ssize_t n;
        size_t len;

        if (fd < 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "--cluster-secret-file %s: %s", path, strerror(errno)),
                       -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "--cluster-secret-file %s: not a regular file", path);
                return -EINVAL;
        }
        if (st.st_mode & 077) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "--cluster-secret-file %s: mode %04o lets others read it (chmod "
                                "600)",
                                path, (unsigned)(st.st_mode & 07777));
                return -EPERM;
        }
        n = read(fd, out, outsz);
        if (n < 0)
                return -errno;
        len = (size_t)n;
        while (len > 0 && (out[len - 1] == '\n' || out[len - 1] == '\r'))
                len--;
        if (len < CELLA_CLUSTER_SECRET_MIN || (size_t)n == outsz) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "--cluster-secret-file %s: the secret must be %d..%d bytes", path,
                                CELLA_CLUSTER_SECRET_MIN, CELLA_CLUSTER_SECRET_MAX - 1);
                return -EINVAL;
        }
        *ret_len = len;
        return 0;
}

int forward_new(const struct forward_config *cfg, struct forward **ret)
{
        struct forward *f;

        if (cfg->secret_len == 0 || cfg->secret_len > sizeof(f->secret))
                return -EINVAL;
        f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->nonces = nonce_cache_new();
        if (!f->nonces) {
                free(f);
                return -ENOMEM;
        }
        f->cluster = cfg->cluster;
        memcpy(f->secret, cfg->secret, cfg->secret_len);
        f->secret_len = cfg->secret_len;
        snprintf(f->default_image, sizeof(f->default_image), "%s",
                 cfg->default_image ? cfg->default_image : "default");
        *ret = f;
        return 0;
}

void forward_free(struct forward *f)
{
        if (!f)
                return;
        /* Freed after the cluster (cluster_free): its etcd client has answered every
         * resolution still waiting, so none points here any more. */
        explicit_bzero(f->secret, sizeof(f->secret));
        nonce_cache_free(f->nonces);
        free(f->nodes);
        free(f);
}

/* ---- checking a forwarded request ---- */

static void principal_free(void *p)
{
        free(p);
}

int forward_check(struct forward *f, struct http_request *req, struct cella_error *err)
{
        const char *h = http_request_header(req, CLUSTER_AUTH_HEADER);
        struct cluster_auth a;
        struct principal *p;
        int64_t now = time_now_ms();
        int r;

        if (!h)
                return 0;
        if (!f) {
                cella_error_set(err, CELLA_E_UNAUTHORIZED,
                                "this node takes no forwarded requests (no cluster secret)");
                return -1;
        }
        if (cluster_auth_parse(h, &a) < 0) {
                f->refused_bad++;
                cella_error_set(err, CELLA_E_UNAUTHORIZED, "malformed %s header",
                                CLUSTER_AUTH_HEADER);
                return -1;
        }
        if (cluster_auth_verify(f->secret, f->secret_len, http_request_method(req),
                                http_request_target(req), &a, now, err) < 0) {
                f->refused_bad++;
                return -1;
        }
        r = nonce_cache_add(f->nonces, a.nonce, a.ts_ms, now);
        if (r == -EEXIST) {
                f->refused_replay++;
                cella_error_set(err, CELLA_E_UNAUTHORIZED,
                                "cluster authenticator replayed (its nonce was seen)");
                return -1;
        }
        if (r < 0) {
                f->refused_full++;
                cella_error_set(err, CELLA_E_UNAUTHORIZED,
                                "too many forwarded requests to remember their nonces: retry");
                return -1;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -1;
        }
        p->admin = a.admin;
        snprintf(p->tenant, sizeof(p->tenant), "%s", a.tenant);
        snprintf(p->key_id, sizeof(p->key_id), "%s", a.key_id);
        p->max_sandboxes = a.max_sandboxes;
        p->max_memory_bytes = a.max_memory_bytes;
        http_request_set_auth(req, p, principal_free);
        if (!p->admin)
                http_request_set_error_view(req, tenant_error_view);
        f->accepted++;
        return 1;
}

/* ---- the nodes' records and names' owners ---- */

static unsigned hash_str(const char *s, unsigned h)
{
        while (*s)
                h = (h ^ (unsigned char)*s++) * 16777619u;
        return h;
}

static struct owner_slot *owner_slot(struct forward *f, const char *name)
{
        return &f->owners[hash_str(name, 2166136261u) % CELLA_FORWARD_CACHE_MAX];
}

static const char *owner_cached(struct forward *f, const char *name)
{
        struct owner_slot *s = owner_slot(f, name);

        if (s->name[0] && strcmp(s->name, name) == 0 &&
            s->expires_ms > (int64_t)(time_mono_us() / 1000))
                return s->node;
        return NULL;
}

static void owner_remember(struct forward *f, const char *name, const char *node)
{
        struct owner_slot *s = owner_slot(f, name);

        snprintf(s->name, sizeof(s->name), "%s", name);
        snprintf(s->node, sizeof(s->node), "%s", node);
        s->expires_ms = (int64_t)(time_mono_us() / 1000) + CELLA_FORWARD_CACHE_MS;
}

static void owner_forget(struct forward *f, const char *name)
{
        struct owner_slot *s = owner_slot(f, name);

        if (strcmp(s->name, name) == 0)
                s->name[0] = '\0';
}

/* "http://<IPv4>:<port>[/]" or "http://[<IPv6>]:<port>[/]" ("localhost" is 127.0.0.1). */
static bool advertise_addr(const char *url, struct sockaddr_storage *ss)
{
        char host[64];
        const char *h, *end, *colon;
        long port = 0;

        if (strncmp(url, "http://", 7) != 0)
                return false;
        h = url + 7;
        if (*h == '[') {
                end = strchr(h, ']');
                if (!end || end[1] != ':')
                        return false;
                colon = end + 1;
                h++;
        } else {
                colon = strchr(h, ':');
                if (!colon)
                        return false;
                end = colon;
        }
        if ((size_t)(end - h) >= sizeof(host))
                return false;
        memcpy(host, h, (size_t)(end - h));
        host[end - h] = '\0';
        for (const char *p = colon + 1; *p && *p != '/'; p++) {
                if (*p < '0' || *p > '9' || port > 65535)
                        return false;
                port = port * 10 + (*p - '0');
        }
        if (port < 1 || port > 65535)
                return false;
        if (strcmp(host, "localhost") == 0)
                snprintf(host, sizeof(host), "127.0.0.1");
        memset(ss, 0, sizeof(*ss));
        if (uv_ip4_addr(host, (int)port, (struct sockaddr_in *)ss) == 0)
                return true;
        return uv_ip6_addr(host, (int)port, (struct sockaddr_in6 *)ss) == 0;
}

static int64_t int_field(json_t *rec, const char *k)
{
        json_t *v = json_object_get(rec, k);
        int64_t n = 0;

        if (json_is_integer(v))
                return json_integer_value(v);
        if (json_is_string(v) && etcd_int_parse(json_string_value(v), &n) == 0)
                return n;
        return 0;
}

/* The records of a range over NODES_PREFIX into f->nodes. */
static void nodes_set(struct forward *f, const struct etcd_answer *a)
{
        struct node_rec *n = calloc(a->n_kvs + 1, sizeof(*n));
        size_t k = 0;

        if (!n)
                return;
        for (size_t i = 0; i < a->n_kvs; i++) {
                _cleanup_json_ json_t *rec =
                        json_loadb(a->kvs[i].value, a->kvs[i].value_len, 0, NULL);
                const char *node = json_string_value(json_object_get(rec, "node"));
                const char *adv = json_string_value(json_object_get(rec, "advertise"));
                json_t *img;
                size_t j;

                if (!node || !adv || strlen(node) >= sizeof(n[k].node) ||
                    strlen(adv) >= sizeof(n[k].advertise))
                        continue;
                snprintf(n[k].node, sizeof(n[k].node), "%s", node);
                snprintf(n[k].advertise, sizeof(n[k].advertise), "%s", adv);
                n[k].addr_ok = advertise_addr(adv, &n[k].addr);
                n[k].capacity = int_field(rec, "capacity");
                n[k].sandboxes = int_field(rec, "sandboxes");
                n[k].lease = int_field(rec, "lease");
                n[k].draining = json_is_true(json_object_get(rec, "draining"));
                json_array_foreach(json_object_get(rec, "images"), j, img)
                {
                        if (json_is_string(img) &&
                            strcmp(json_string_value(img), f->default_image) == 0)
                                n[k].has_image = true;
                }
                k++;
        }
        free(f->nodes);
        f->nodes = n;
        f->n_nodes = k;
        f->nodes_ms = (int64_t)(time_mono_us() / 1000);
}

static struct node_rec *node_find(struct forward *f, const char *node)
{
        for (size_t i = 0; i < f->n_nodes; i++)
                if (strcmp(f->nodes[i].node, node) == 0)
                        return &f->nodes[i];
        return NULL;
}

/* ---- a resolution ---- */

struct fq {
        struct forward *f;
        struct preview_config *preview;
        struct http_request *req;
        forward_local_fn local;
        void *ud;
        bool creates, is_preview;
        char name[CELLA_NAME_MAX + 1];
        char alt[CELLA_NAME_MAX + 1]; /* a preview id's other reading, or "" */
        char key[CELLA_CLUSTER_KEY_MAX];
        char owner[64];
        char *host_override;
        uint64_t t0_us;
        struct fq *next; /* f->nodes_waiting */
};

static void fq_free(struct fq *q)
{
        if (q->local) /* relayed or answered: the caller's ud goes */
                q->local(q->req, false, q->ud);
        if (q->req)
                http_request_unref(q->req);
        free(q->host_override);
        free(q);
}

static void fq_local(struct fq *q)
{
        forward_local_fn local = q->local;

        q->local = NULL;
        local(q->req, true, q->ud);
        fq_free(q);
}

static void fq_fail(struct fq *q, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fq_fail(struct fq *q, const char *fmt, ...)
{
        char msg[256];
        va_list ap;

        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        http_respond_code(q->req, CELLA_E_CLUSTER_UNAVAILABLE, "%s", msg);
        fq_free(q);
}

/* What a relay's head callback needs. */
struct obs {
        struct forward *f;
        int kind;
        uint64_t t0_us;
        char name[CELLA_NAME_MAX + 1];
};

static void on_relay_head(void *ud, int status, const char *node)
{
        struct obs *o = ud;
        struct forward *f = o->f;

        if (status > 0) {
                uint64_t us = time_mono_us() - o->t0_us;

                f->relayed[o->kind][R_ANSWERED]++;
                prom_histogram_observe(bounds_us, ARRAY_SIZE(bounds_us), f->hist[o->kind],
                                       &f->hist_sum[o->kind], us);
        } else if (status < 0) {
                f->relayed[o->kind][R_UNREACHABLE]++;
                owner_forget(f, o->name);
                f->nodes_ms = 0; /* read the records again */
                log_warn("forward: node '%s' (owner of '%s') unreachable", node, o->name);
        } else {
                f->relayed[o->kind][R_LEFT]++;
        }
        free(o);
}

/* Relay q's request to node (its record in f->nodes). */
static void relay(struct fq *q, struct node_rec *n)
{
        struct forward *f = q->f;
        const struct principal *pr = principal_of(q->req);
        _cleanup_(buf_freep) struct buf extra = BUF_INIT;
        struct cluster_auth a = {0};
        struct preview_peer peer;
        struct obs *o;

        if (!n->addr_ok) {
                fq_fail(q,
                        "node '%s' has an advertise URL this node cannot reach (forwarding "
                        "takes http://<IP address>:<port>)",
                        n->node);
                return;
        }
        snprintf(a.node, sizeof(a.node), "%s", cluster_self(f->cluster));
        a.ts_ms = time_now_ms();
        a.admin = pr->admin;
        snprintf(a.tenant, sizeof(a.tenant), "%s", pr->tenant);
        snprintf(a.key_id, sizeof(a.key_id), "%s", pr->key_id);
        a.max_sandboxes = pr->max_sandboxes;
        a.max_memory_bytes = pr->max_memory_bytes;
        o = calloc(1, sizeof(*o));
        if (!o || cluster_auth_sign(f->secret, f->secret_len, http_request_method(q->req),
                                    http_request_target(q->req), &a, &extra) < 0) {
                free(o);
                http_respond_code(q->req, CELLA_E_INTERNAL_ERROR,
                                  "cannot sign the forwarded "
                                  "request");
                fq_free(q);
                return;
        }
        o->f = f;
        o->kind = q->is_preview ? K_PREVIEW : K_API;
        o->t0_us = q->t0_us;
        snprintf(o->name, sizeof(o->name), "%s", q->name);
        peer = (struct preview_peer){
                .node = n->node,
                .addr = (const struct sockaddr *)&n->addr,
                .target = http_request_target(q->req),
                .host_override = q->host_override,
                .extra = extra.data,
                .head = on_relay_head,
                .ud = o,
        };
        preview_proxy_peer(q->preview, q->req, &peer);
        fq_free(q);
}

static void with_nodes(struct fq *q);

static void on_nodes(const struct etcd_answer *a, void *ud)
{
        struct forward *f = ud;
        struct fq *w = f->nodes_waiting;

        f->nodes_reading = false;
        f->nodes_waiting = NULL;
        if (a->r == 0) {
                nodes_set(f, a);
                f->lookups_etcd++;
        } else {
                f->lookups_failed++;
        }
        while (w) {
                struct fq *next = w->next;

                w->next = NULL;
                if (a->r < 0)
                        fq_fail(w, "read the cluster's nodes: %s", a->err.msg);
                else
                        with_nodes(w);
                w = next;
        }
}

/* Call with_nodes(q) once the nodes' records are at most CELLA_FORWARD_CACHE_MS old. */
static void need_nodes(struct fq *q)
{
        struct forward *f = q->f;
        int64_t now = (int64_t)(time_mono_us() / 1000);

        if (f->nodes_ms && now - f->nodes_ms < CELLA_FORWARD_CACHE_MS) {
                f->lookups_cache++;
                with_nodes(q);
                return;
        }
        q->next = f->nodes_waiting;
        f->nodes_waiting = q;
        if (f->nodes_reading)
                return;
        if (etcd_range(cluster_etcd(f->cluster), NODES_PREFIX, strlen(NODES_PREFIX), true, on_nodes,
                       f) < 0) {
                struct etcd_answer a = {.r = -EBUSY};

                cella_error_set(&a.err, CELLA_E_CLUSTER_UNAVAILABLE, "too many requests to etcd");
                on_nodes(&a, f);
                return;
        }
        f->nodes_reading = true;
}

/* The node a new name goes to: of the live nodes with the image and room, the least loaded
 * (its record's sandboxes, plus what this node placed there since it read them); ties
 * go to the node whose hash with the name is lowest (the same on every node, different
 * for each name). NULL: none can take it. */
static struct node_rec *place(struct forward *f, const char *name)
{
        struct node_rec *best = NULL;
        unsigned best_h = 0;
        int64_t best_load = 0;

        for (size_t i = 0; i < f->n_nodes; i++) {
                struct node_rec *n = &f->nodes[i];
                int64_t load = n->sandboxes + n->placed;
                unsigned h = hash_str(n->node, hash_str(name, 2166136261u));

                if (!n->has_image || n->draining || n->lease == 0 ||
                    (n->capacity > 0 && load >= n->capacity))
                        continue;
                if (!best || load < best_load || (load == best_load && h < best_h)) {
                        best = n;
                        best_load = load;
                        best_h = h;
                }
        }
        return best;
}

static void on_placed(const struct etcd_answer *a, void *ud)
{
        struct fq *q = ud;
        struct forward *f = q->f;
        _cleanup_json_ json_t *rec = NULL;
        const char *owner;
        struct node_rec *n;

        if (a->r < 0) {
                fq_fail(q, "place a new name: %s", a->err.msg);
                return;
        }
        if (!a->succeeded) {
                /* Another node placed it first: go where it went. */
                f->placed_lost++;
                rec = a->n_kvs > 0 ? json_loadb(a->kvs[0].value, a->kvs[0].value_len, 0, NULL)
                                   : NULL;
                owner = json_string_value(json_object_get(rec, "node"));
                if (!owner) {
                        fq_fail(q, "place a new name: %s", "its record in etcd is unreadable");
                        return;
                }
                snprintf(q->owner, sizeof(q->owner), "%s", owner);
        } else if (strcmp(q->owner, cluster_self(f->cluster)) == 0) {
                f->placed_self++;
        } else {
                f->placed_other++;
        }
        owner_remember(f, q->name, q->owner);
        if (strcmp(q->owner, cluster_self(f->cluster)) == 0) {
                fq_local(q);
                return;
        }
        n = node_find(f, q->owner);
        if (!n) {
                q->creates = false; /* the owner is known: with_nodes relays */
                f->nodes_ms = 0;
                need_nodes(q);
                return;
        }
        relay(q, n);
}

/* The name is nobody's and q creates: choose its node and claim the name for it. */
static void place_new(struct fq *q)
{
        struct forward *f = q->f;
        const struct principal *pr = principal_of(q->req);
        struct node_rec *n = place(f, q->name);
        char since[32];
        _cleanup_json_ json_t *rec = NULL;
        _cleanup_free_ char *value = NULL;

        /* A tenant held to quotas: its new names are claimed here, in the transaction that
         * counts its names across the cluster (cluster.h, struct cluster_quota); a claim
         * made for another node would skip that count. */
        if (pr && (pr->max_sandboxes > 0 || pr->max_memory_bytes > 0))
                n = NULL;
        /* Nowhere: the local claim decides (and says why it cannot). Here or elsewhere, the
         * name is claimed for its node in etcd first, so that a node that loses the race
         * for it relays the request to the winner (on_placed) instead of refusing it. */
        if (!n) {
                f->placed_self++;
                fq_local(q);
                return;
        }
        n->placed++;
        snprintf(q->owner, sizeof(q->owner), "%s", n->node);
        time_format_iso(time_now_ms(), since, sizeof(since));
        rec = json_pack("{s:s, s:s, s:s}", "node", n->node, "since", since, "image",
                        f->default_image);
        value = rec ? json_dumps(rec, JSON_COMPACT) : NULL;
        if (!value || etcd_create(cluster_etcd(f->cluster), q->key, strlen(q->key), value,
                                  strlen(value), n->lease, on_placed, q) < 0)
                fq_fail(q, "place a new name: %s", "too many requests to etcd at once");
}

static void with_nodes(struct fq *q)
{
        struct node_rec *n;

        if (!q->owner[0]) {
                place_new(q);
                return;
        }
        n = node_find(q->f, q->owner);
        if (!n) {
                char msg[128];

                snprintf(msg, sizeof(msg), "%s", q->owner);
                fq_fail(q, "node '%s' owns this name but is not live (its lease lapsed)", msg);
                return;
        }
        relay(q, n);
}

static void lookup(struct fq *q);

static void have_owner(struct fq *q, const char *owner)
{
        if (!owner) {
                if (q->alt[0]) { /* a preview id's other reading */
                        memcpy(q->name, q->alt, sizeof(q->name));
                        q->alt[0] = '\0';
                        lookup(q);
                        return;
                }
                if (!q->creates) {
                        fq_local(q); /* answered here: not found */
                        return;
                }
                q->owner[0] = '\0';
                need_nodes(q);
                return;
        }
        snprintf(q->owner, sizeof(q->owner), "%s", owner);
        if (strcmp(owner, cluster_self(q->f->cluster)) == 0) {
                fq_local(q);
                return;
        }
        need_nodes(q);
}

static void on_owner(const struct etcd_answer *a, void *ud)
{
        struct fq *q = ud;
        _cleanup_json_ json_t *rec = NULL;
        const char *owner;

        if (a->r < 0) {
                q->f->lookups_failed++;
                fq_fail(q, "find the sandbox's node: %s", a->err.msg);
                return;
        }
        q->f->lookups_etcd++;
        rec = a->n_kvs > 0 ? json_loadb(a->kvs[0].value, a->kvs[0].value_len, 0, NULL) : NULL;
        owner = json_string_value(json_object_get(rec, "node"));
        if (owner)
                owner_remember(q->f, q->name, owner);
        have_owner(q, owner);
}

static void lookup(struct fq *q)
{
        const char *owner;

        if (cluster_name_key(q->name, q->key, sizeof(q->key)) < 0) {
                fq_local(q);
                return;
        }
        owner = owner_cached(q->f, q->name);
        if (owner) {
                q->f->lookups_cache++;
                have_owner(q, owner);
                return;
        }
        if (etcd_range(cluster_etcd(q->f->cluster), q->key, strlen(q->key), false, on_owner, q) < 0)
                fq_fail(q, "find the sandbox's node: %s", "too many requests to etcd at once");
}

static struct fq *fq_new(struct forward *f, struct preview_config *preview,
                         struct http_request *req, const char *name, forward_local_fn local,
                         void *ud)
{
        struct fq *q = calloc(1, sizeof(*q));

        if (!q) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                local(req, false, ud);
                return NULL;
        }
        q->f = f;
        q->preview = preview;
        q->req = req;
        http_request_ref(req);
        /* The body waits for where the request is served (a handler here, or the relay). */
        (void)http_request_hold_body(req);
        q->local = local;
        q->ud = ud;
        q->t0_us = time_mono_us();
        snprintf(q->name, sizeof(q->name), "%s", name);
        return q;
}

void forward_resolve(struct forward *f, struct preview_config *preview, struct http_request *req,
                     const char *name, bool creates, forward_local_fn local, void *ud)
{
        struct fq *q = fq_new(f, preview, req, name, local, ud);

        if (!q)
                return;
        q->creates = creates;
        lookup(q);
}

void forward_resolve_preview(struct forward *f, struct preview_config *preview,
                             struct http_request *req, const char *id, const char *host_override,
                             forward_local_fn local, void *ud)
{
        struct fq *q = fq_new(f, preview, req, id, local, ud);

        if (!q)
                return;
        q->is_preview = true;
        if (host_override && !(q->host_override = strdup(host_override))) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                fq_free(q);
                return;
        }
        if (tenant_preview_internal(id, q->alt) != 1)
                q->alt[0] = '\0';
        lookup(q);
}

/* ---- /metrics ---- */

int forward_metrics(struct forward *f, struct buf *b)
{
        static const char *const kinds[K_N] = {"api", "preview"};
        static const char *const results[R_N] = {"answered", "unreachable", "client_left"};
        int r;

        r = prom_family(b, "cella_forward_requests_total", "counter",
                        "Requests relayed to the node owning their sandbox, by kind and result");
        for (int k = 0; r >= 0 && k < K_N; k++)
                for (int i = 0; r >= 0 && i < R_N; i++) {
                        struct prom_label l[] = {{"kind", kinds[k]}, {"result", results[i]}};

                        r = prom_sample_u64(b, "cella_forward_requests_total", l, 2,
                                            f->relayed[k][i]);
                }
        if (r >= 0)
                r = prom_family(b, "cella_forward_seconds", "histogram",
                                "From a relayed request's arrival to its owner's answer head");
        for (int k = 0; r >= 0 && k < K_N; k++) {
                struct prom_label l[] = {{"kind", kinds[k]}};
                struct prom_histogram h = {bounds_us, ARRAY_SIZE(bounds_us), f->hist[k],
                                           f->hist_sum[k]};

                r = prom_histogram_write(b, "cella_forward_seconds", l, 1, &h);
        }
        if (r >= 0)
                r = prom_family(b, "cella_forward_lookups_total", "counter",
                                "Owners and node records found, by where from");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_lookups_total",
                                    (struct prom_label[]){{"source", "cache"}}, 1,
                                    f->lookups_cache);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_lookups_total",
                                    (struct prom_label[]){{"source", "etcd"}}, 1, f->lookups_etcd);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_lookups_total",
                                    (struct prom_label[]){{"source", "failed"}}, 1,
                                    f->lookups_failed);
        if (r >= 0)
                r = prom_family(b, "cella_forward_placements_total", "counter",
                                "New names placed by this node, by where they went");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_placements_total",
                                    (struct prom_label[]){{"on", "self"}}, 1, f->placed_self);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_placements_total",
                                    (struct prom_label[]){{"on", "other"}}, 1, f->placed_other);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_placements_total",
                                    (struct prom_label[]){{"on", "raced"}}, 1, f->placed_lost);
        if (r >= 0)
                r = prom_family(b, "cella_forward_received_total", "counter",
                                "Forwarded requests received, by the authenticator's check");
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_received_total",
                                    (struct prom_label[]){{"result", "accepted"}}, 1, f->accepted);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_received_total",
                                    (struct prom_label[]){{"result", "bad"}}, 1, f->refused_bad);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_received_total",
                                    (struct prom_label[]){{"result", "replay"}}, 1,
                                    f->refused_replay);
        if (r >= 0)
                r = prom_sample_u64(b, "cella_forward_received_total",
                                    (struct prom_label[]){{"result", "busy"}}, 1, f->refused_full);
        return r;
}
