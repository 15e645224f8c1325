/* An etcd v3 client over etcd's JSON gateway (POST /v3/kv/range, /v3/kv/put,
 * /v3/kv/deleterange, /v3/kv/txn, /v3/lease/grant, /v3/lease/keepalive, /v3/lease/revoke),
 * with libcurl's multi interface driven by the daemon's libuv loop (a uv_poll per socket
 * and one uv_timer, curl_multi_socket_action): nothing blocks the loop. Keys and values
 * travel base64-encoded; 64-bit integers as JSON strings (the gateway's proto3 mapping),
 * numbers accepted too. Decision 0055 says how the cluster uses it.
 *
 * Several endpoints: a request goes to the current one; a connection error or an attempt
 * that times out moves the client to the next endpoint and retries there, until every
 * endpoint was tried once (then the request fails with CLUSTER_UNAVAILABLE). etcd's own
 * refusals (a lease not found, a bad request) fail at once.
 *
 * Every answer is decoded defensively by the etcd_decode_* functions, pure and fuzzed
 * (tests/fuzz/fuzz-etcd.c): an answer that is not what etcd sends is an error, never a
 * crash nor a guess.
 *
 * Loop thread only. Callbacks are called exactly once per request, never before the
 * function that made the request returns. */
#ifndef CELLA_DAEMON_ETCD_H
#define CELLA_DAEMON_ETCD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>
#include <uv.h>

#include "common/buf.h"
#include "common/error.h"

/* One key-value as etcd holds it. key and value are NUL-terminated copies (binary-safe
 * through the lengths). */
struct etcd_kv {
        char *key;
        size_t key_len;
        char *value;
        size_t value_len;
        int64_t create_revision;
        int64_t mod_revision;
        int64_t version;
        int64_t lease;
};

enum etcd_op {
        ETCD_OP_RANGE,
        ETCD_OP_PUT,
        ETCD_OP_DELETE,
        ETCD_OP_TXN,
        ETCD_OP_LEASE_GRANT,
        ETCD_OP_LEASE_KEEPALIVE,
        ETCD_OP_LEASE_REVOKE,
        ETCD_OP_MAX
};

/* What one request answered; the fields its operation fills, the rest zero. Borrowed by
 * the callback (freed after it returns). */
struct etcd_answer {
        int r; /* 0, or -errno with err set */
        struct cella_error err;
        int64_t revision;    /* the header's revision (every operation) */
        struct etcd_kv *kvs; /* range; a txn's failure branch's range */
        size_t n_kvs;
        int64_t count;    /* range: keys in the range (may exceed n_kvs with a limit) */
        int64_t deleted;  /* deleterange */
        bool succeeded;   /* txn: the compare held */
        int64_t lease_id; /* lease grant and keepalive */
        int64_t ttl;      /* lease grant and keepalive: seconds; keepalive of a lost lease: 0 */
};

void etcd_answer_clear(struct etcd_answer *a);

/* Answer decoders: body is one JSON answer of the gateway for op (for keepalive, one
 * {"result": ...} message). Fill *a (cleared first) and return 0, or -EPROTO/-ENOMEM
 * with a->err set (CLUSTER_UNAVAILABLE: "etcd answered ..."). An answer carrying the
 * gateway's error object ({"error", "code", "message"}) is decoded into a->err with the
 * code etcd_code_errno gives. */
int etcd_decode(enum etcd_op op, const char *body, size_t len, struct etcd_answer *a);
/* The gRPC status code of a gateway error as a negative errno: NOT_FOUND (5) -ENOENT,
 * FAILED_PRECONDITION (9) -ENOENT (etcd's "lease not found"), INVALID_ARGUMENT (3)
 * -EINVAL, UNAVAILABLE (14) and DEADLINE_EXCEEDED (4) -EAGAIN, anything else -EIO. */
int etcd_code_errno(int64_t grpc_code);
/* A gateway integer: a JSON string of decimal digits (optional '-') or a JSON integer.
 * Returns 0 with *ret, or -EINVAL. */
int etcd_int_parse(const char *s, int64_t *ret);

/* The client. */
struct etcd;

/* Per-operation counters, read by /metrics. */
struct etcd_stats {
        uint64_t requests[ETCD_OP_MAX]; /* requests answered (success or failure) */
        uint64_t failures[ETCD_OP_MAX]; /* of them, failed */
        uint64_t failovers;             /* moves to the next endpoint */
        bool healthy;                   /* the last attempt reached an endpoint that answered */
        int64_t last_ok_ms;             /* wall clock of the last answered request, 0 never */
};

typedef void (*etcd_cb)(const struct etcd_answer *a, void *userdata);

/* endpoints: "http://h:p[,http://h:p...]" (at most CELLA_ETCD_ENDPOINTS_MAX, each an
 * http:// or https:// URL without a path). Returns 0 with *ret, or -EINVAL (err set:
 * VALIDATION_FAILED) / -ENOMEM. */
int etcd_new(uv_loop_t *loop, const char *endpoints, struct etcd **ret, struct cella_error *err);
/* Fail every pending request with -ECANCELED (their callbacks run now), then close the
 * client's handles; the memory goes once the loop has closed them. NULL is fine. */
void etcd_free(struct etcd *e);
const struct etcd_stats *etcd_stats(const struct etcd *e);
/* The endpoint requests go to now. */
const char *etcd_endpoint(const struct etcd *e);

/* The operations: 0 when the request is on its way (cb will be called), or -ENOMEM,
 * -EBUSY (CELLA_ETCD_PENDING_MAX in flight) and cb will not be. Keys and values are bytes (key_len/value_len); prefix: the range is every
 * key starting with key. lease 0: none. */
int etcd_range(struct etcd *e, const char *key, size_t key_len, bool prefix, etcd_cb cb,
               void *userdata);
int etcd_put(struct etcd *e, const char *key, size_t key_len, const char *value, size_t value_len,
             int64_t lease, etcd_cb cb, void *userdata);
int etcd_delete(struct etcd *e, const char *key, size_t key_len, bool prefix, etcd_cb cb,
                void *userdata);
/* A txn: if key does not exist (create_revision == 0), put value under lease; otherwise
 * read key. The answer: succeeded, or the existing key in kvs[0]. Two clients racing on a
 * key: exactly one succeeds, the other reads the winner's value. */
int etcd_create(struct etcd *e, const char *key, size_t key_len, const char *value,
                size_t value_len, int64_t lease, etcd_cb cb, void *userdata);
/* A txn: if key is held under lease, delete it; otherwise read it (kvs[0], when it
 * exists). Releases what this lease holds, never another's. */
int etcd_delete_leased(struct etcd *e, const char *key, size_t key_len, int64_t lease, etcd_cb cb,
                       void *userdata);
/* A txn of the caller's: compare, success and failure are JSON arrays (taken) of the pieces
 * below. The failure branch's first request must be a range (etcd_req_range): a failed
 * txn answers its kvs. The pieces are NULL when memory runs out (etcd_txn then fails with
 * -ENOMEM). */
int etcd_txn(struct etcd *e, json_t *compare, json_t *success, json_t *failure, etcd_cb cb,
             void *userdata);
/* Compares: key does not exist (create_revision 0); key exists (version > 0); no key
 * starting with prefix was put after revision (an empty range holds; a deletion is not
 * seen). */
json_t *etcd_cmp_absent(const char *key, size_t key_len);
json_t *etcd_cmp_present(const char *key, size_t key_len);
json_t *etcd_cmp_prefix_unchanged(const char *prefix, size_t prefix_len, int64_t revision);
/* Requests: put (lease 0: none), delete of one key, range of one key. */
json_t *etcd_req_put(const char *key, size_t key_len, const char *value, size_t value_len,
                     int64_t lease);
json_t *etcd_req_delete(const char *key, size_t key_len);
json_t *etcd_req_range(const char *key, size_t key_len);
int etcd_lease_grant(struct etcd *e, int64_t ttl, etcd_cb cb, void *userdata);
/* One keepalive; the answer's ttl is 0 when the lease is gone (then r is -ENOENT). */
int etcd_lease_keepalive(struct etcd *e, int64_t id, etcd_cb cb, void *userdata);
int etcd_lease_revoke(struct etcd *e, int64_t id, etcd_cb cb, void *userdata);

#endif
