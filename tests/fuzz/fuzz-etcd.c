/* Fuzz the etcd client's answer decoders (src/daemon/etcd.h, etcd_decode): the first byte
 * picks the operation, the rest is the gateway's answer, which a broken or hostile etcd
 * endpoint may make anything.
 *
 * Invariants: a decode succeeds (r 0, no error) or fails with r < 0, a CLUSTER_UNAVAILABLE
 * error with a NUL-terminated message, and no keys kept; the keys kept are non-empty and
 * NUL-terminated at their length, as are the values; a count covers the keys; a keepalive
 * that succeeds has a positive TTL; decoding is deterministic. */
#include <string.h>

#include "daemon/etcd.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct etcd_answer a, b;
        enum etcd_op op;

        if (size < 1)
                return 0;
        op = (enum etcd_op)(data[0] % ETCD_OP_MAX);
        etcd_decode(op, (const char *)data + 1, size - 1, &a);
        etcd_decode(op, (const char *)data + 1, size - 1, &b);
        FUZZ_CHECK(a.r == b.r && a.n_kvs == b.n_kvs && a.revision == b.revision &&
                   a.succeeded == b.succeeded && a.ttl == b.ttl && a.lease_id == b.lease_id);
        FUZZ_CHECK(strcmp(a.err.msg, b.err.msg) == 0);
        if (a.r == 0) {
                FUZZ_CHECK(a.err.code == CELLA_E_OK);
        } else {
                FUZZ_CHECK(a.r < 0 && a.err.code == CELLA_E_CLUSTER_UNAVAILABLE);
                FUZZ_CHECK(memchr(a.err.msg, '\0', sizeof(a.err.msg)) != NULL);
                FUZZ_CHECK(a.n_kvs == 0 && a.kvs == NULL);
        }
        FUZZ_CHECK(a.count >= (int64_t)a.n_kvs);
        for (size_t i = 0; i < a.n_kvs; i++) {
                FUZZ_CHECK(a.kvs[i].key_len > 0 && a.kvs[i].key[a.kvs[i].key_len] == '\0');
                FUZZ_CHECK(a.kvs[i].value[a.kvs[i].value_len] == '\0');
                FUZZ_CHECK(memcmp(a.kvs[i].key, b.kvs[i].key, a.kvs[i].key_len) == 0);
        }
        if (op == ETCD_OP_LEASE_KEEPALIVE && a.r == 0)
                FUZZ_CHECK(a.ttl > 0);
        etcd_answer_clear(&a);
        etcd_answer_clear(&b);
        return 0;
}
