/* The authenticator of node-to-node requests (decision 0056, docs/cluster.md): a node that
 * relays a request to another node adds
 *
 *   X-Cella-Cluster: v1; node=<from>; ts=<unix ms>; nonce=<32 hex>; admin=<0|1>;
 *                    tenant=<t>; key=<id>; maxsb=<n>; maxmem=<n>; mac=<64 hex>
 *
 * (one line): the node it comes from, when, a random nonce, the original caller's
 * principal (what the receiver applies instead of a bearer token: tenant keys live in the
 * registry of the node that made them) and an HMAC-SHA256 with the cluster's secret over
 * the method, the request target and every other field. The receiver accepts the
 * principal only when the MAC holds (compared in constant time), the timestamp is within
 * CELLA_CLUSTER_AUTH_SKEW_MS of its clock and the nonce was not seen within that window
 * (a replay). Parsing, signing and verifying are pure (unit tests, fuzz/cluster-auth); the
 * nonce cache is a bounded table. */
#ifndef CELLA_DAEMON_CLUSTER_AUTH_H
#define CELLA_DAEMON_CLUSTER_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/limits.h"

#define CLUSTER_AUTH_HEADER "X-Cella-Cluster"
#define CLUSTER_AUTH_NONCE_LEN 32 /* hex digits */
#define CLUSTER_AUTH_MAC_LEN 64   /* hex digits of an HMAC-SHA256 */

/* The fields of one header value. */
struct cluster_auth {
        char node[64];
        int64_t ts_ms;
        char nonce[CLUSTER_AUTH_NONCE_LEN + 1];
        bool admin;
        char tenant[CELLA_TENANT_MAX + 1];
        char key_id[CELLA_KEY_ID_LEN + 1];
        int64_t max_sandboxes;
        int64_t max_memory_bytes;
        char mac[CLUSTER_AUTH_MAC_LEN + 1];
};

/* A header value into *ret: 0, or -EINVAL (a field missing, repeated, unknown, too long,
 * or not of its shape; "v1" first). Pure. */
int cluster_auth_parse(const char *value, struct cluster_auth *ret);

/* The MAC of a (its mac field aside) for method and target, in hex, into out. 0, -ENOMEM,
 * -E2BIG, -EIO. */
int cluster_auth_mac(const unsigned char *secret, size_t secret_len, const char *method,
                     const char *target, const struct cluster_auth *a,
                     char out[CLUSTER_AUTH_MAC_LEN + 1]);

/* Fill a's nonce (getrandom) and mac, then append "X-Cella-Cluster: ...\r\n" to out. The
 * other fields are the caller's. 0, -EIO, -ENOMEM. */
int cluster_auth_sign(const unsigned char *secret, size_t secret_len, const char *method,
                      const char *target, struct cluster_auth *a, struct buf *out);

/* Does a's MAC hold for method and target, and is its ts within CELLA_CLUSTER_AUTH_SKEW_MS
 * of now_ms? 0, or -EACCES with err set (UNAUTHORIZED, saying which). Pure. */
int cluster_auth_verify(const unsigned char *secret, size_t secret_len, const char *method,
                        const char *target, const struct cluster_auth *a, int64_t now_ms,
                        struct cella_error *err);

/* The nonces seen within the skew window: a table of CELLA_CLUSTER_AUTH_NONCES slots. */
struct nonce_cache;
struct nonce_cache *nonce_cache_new(void);
void nonce_cache_free(struct nonce_cache *nc);
/* Record nonce (32 hex digits) seen with ts_ms at now_ms (entries older than now_ms - 2 *
 * skew are free again): 0 when it is new, -EEXIST for a replay, -ENOSPC when its slots are
 * all taken by live nonces (refused: the node is asked more than it can remember). */
int nonce_cache_add(struct nonce_cache *nc, const char *nonce, int64_t ts_ms, int64_t now_ms);

#endif
