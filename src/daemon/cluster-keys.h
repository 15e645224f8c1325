/* Tenants' API keys on a cluster node (docs/tenants.md, decisions 0053 and 0055): the
 * keys live in etcd, one record per key at /cella/keys/<id> (the registry row's fields as
 * JSON: the secret's SHA-256, never the secret), so that a key made on any node works on
 * every node.
 *
 * Each node keeps a copy of every key in memory, which authenticates requests without
 * waiting (the dispatcher decides before any handler runs). It is kept fresh by a cheap
 * poll: every write of a key (create, delete) also puts the marker /cella/keyset in the
 * same transaction, and each node reads the marker every CELLA_CLUSTER_KEYS_POLL_MS and
 * reads all keys again when the marker's revision moved (and every
 * CELLA_CLUSTER_KEYS_RELOAD_MS regardless, for a record written by hand). The node that
 * makes or removes a key changes its copy at once; the others follow within a poll and a
 * read. An unknown key asks for a poll at once, so the next try finds a key made a moment
 * ago elsewhere. etcd out of reach: the copy stays as it is (keys known keep working,
 * keys made or removed meanwhile elsewhere are not seen), new keys cannot be made (503
 * CLUSTER_UNAVAILABLE).
 *
 * The registry's keys of a node that joins a cluster are copied into etcd (unless their
 * id is taken there) once its first read of etcd succeeded; from then on the registry's
 * table is not read on that node.
 *
 * Loop thread only. */
#ifndef CELLA_DAEMON_CLUSTER_KEYS_H
#define CELLA_DAEMON_CLUSTER_KEYS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/apikey.h"
#include "common/error.h"
#include "common/limits.h"
#include "daemon/store.h"

struct etcd;

#define CLUSTER_KEYS_PREFIX "/cella/keys/"
#define CLUSTER_KEYSET_KEY "/cella/keyset"

/* One key as its etcd record holds it. */
struct cluster_key {
        char id[CELLA_KEY_ID_LEN + 1];
        char tenant[CELLA_TENANT_MAX + 1];
        char secret_sha256[CELLA_KEY_HASH_HEX + 1];
        int64_t created_ms;
        int64_t max_sandboxes;
        int64_t max_memory_bytes;
};

/* A record's JSON {id, tenant, secretSha256, maxSandboxes, maxMemory, createdMs} into out:
 * 0, or -EINVAL when it is not one (a bad id, tenant or hash, a negative or missing
 * figure). Other fields are ignored. Pure (fuzzed: tests/fuzz/fuzz-cluster-key.c). */
int cluster_key_decode(const char *json, size_t len, struct cluster_key *out);
/* The record of k (malloc'd, NUL-terminated), or NULL when memory runs out. */
char *cluster_key_encode(const struct store_key *k);

struct cluster_keys;

/* Start keeping the copy (its first read at once). registry: the node's own keys to copy
 * into etcd (borrowed; it outlives this). */
int cluster_keys_new(uv_loop_t *loop, struct etcd *etcd, struct store *registry,
                     struct cluster_keys **ret);
/* Stop; call before the etcd client is freed (its pending requests then answer with an
 * error, after which the memory goes). NULL is fine. */
void cluster_keys_free(struct cluster_keys *k);

/* The key of that id from the copy, given to fn as store_key_get gives it: fn's return, or
 * -ENOENT (and a poll of etcd is asked for at once). */
int cluster_keys_get(struct cluster_keys *k, const char *id,
                     int (*fn)(const struct store_key *k, void *userdata), void *userdata);
/* Keys in the copy. */
size_t cluster_keys_count(const struct cluster_keys *k);
/* Has the copy been read from etcd at least once? */
bool cluster_keys_loaded(const struct cluster_keys *k);

/* r: 0 done (for delete: 1 there was such a key, 0 none), or < 0 with err. */
typedef void (*cluster_keys_done_cb)(int r, const struct cella_error *err, void *userdata);
/* Put key's record into etcd (an id taken there: -EEXIST) and into the copy. 0 when on its
 * way (cb will be called, never before this returns), or -ENOMEM/-EBUSY. */
int cluster_keys_create(struct cluster_keys *k, const struct store_key *key,
                        cluster_keys_done_cb cb, void *userdata);
/* Remove the key of that id from etcd and from the copy. As create. */
int cluster_keys_delete(struct cluster_keys *k, const char *id, cluster_keys_done_cb cb,
                        void *userdata);
/* Every key as etcd holds it now, oldest first (the copy is refreshed from the same read).
 * cb gets them (borrowed for the call) or err. As create. */
typedef void (*cluster_keys_list_cb)(const struct store_key *keys, size_t n,
                                     const struct cella_error *err, void *userdata);
int cluster_keys_list(struct cluster_keys *k, cluster_keys_list_cb cb, void *userdata);

#endif
