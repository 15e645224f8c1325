/* Fuzz the decoder of a tenant's key record in etcd (src/daemon/cluster-keys.h,
 * cluster_key_decode): /cella/keys/<id> is written by any node of the cluster, or by hand,
 * and a node reads every record into the copy that authenticates requests.
 *
 * Invariants: a record decodes or is refused (-EINVAL) without touching out's meaning; a
 * decoded one has a valid id, tenant and 64 hex digits of hash, figures >= 0, and encodes
 * back (cluster_key_encode) into a record that decodes to the same key; decoding is
 * deterministic. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/apikey.h"
#include "daemon/cluster-keys.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct cluster_key k, again;
        struct store_key v;
        char *s;
        int r = cluster_key_decode((const char *)data, size, &k);

        FUZZ_CHECK(r == 0 || r == -EINVAL);
        FUZZ_CHECK(cluster_key_decode((const char *)data, size, &again) == r);
        if (r < 0)
                return 0;
        FUZZ_CHECK(memcmp(&k, &again, sizeof(k)) == 0);
        FUZZ_CHECK(apikey_id_is_valid(k.id) && tenant_name_is_valid(k.tenant));
        FUZZ_CHECK(strlen(k.secret_sha256) == CELLA_KEY_HASH_HEX);
        FUZZ_CHECK(k.created_ms >= 0 && k.max_sandboxes >= 0 && k.max_memory_bytes >= 0);
        v = (struct store_key){.id = k.id,
                               .tenant = k.tenant,
                               .secret_sha256 = k.secret_sha256,
                               .created_ms = k.created_ms,
                               .max_sandboxes = k.max_sandboxes,
                               .max_memory_bytes = k.max_memory_bytes};
        s = cluster_key_encode(&v);
        if (!s)
                return 0;
        FUZZ_CHECK(cluster_key_decode(s, strlen(s), &again) == 0);
        FUZZ_CHECK(memcmp(&k, &again, sizeof(k)) == 0);
        free(s);
        return 0;
}
