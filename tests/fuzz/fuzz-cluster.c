/* Fuzz the cluster's failover parsers (decision 0057): the first byte picks one, the rest
 * is its input.
 *   0  a /cella/backups/<tenant>/<name> record (etcd's value, which another node wrote):
 *      success gives a valid backup id, a dir "" or one backup_dir_check accepts, and
 *      NUL-terminated fields that fit;
 *   1  the body of POST /v1/cluster/drain: empty or {stop?: boolean}, else
 *      VALIDATION_FAILED. */
#include <string.h>

#include "daemon/backup-archive.h"
#include "daemon/backup-store.h"
#include "daemon/cluster.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct cluster_backup_index idx;
        struct cella_error err = {0};
        bool stop = true;

        if (size < 1)
                return 0;
        const char *in = (const char *)data + 1;
        size_t len = size - 1;
        switch (data[0] % 2) {
        case 0:
                if (cluster_backup_index_parse(in, len, &idx) < 0)
                        return 0;
                FUZZ_CHECK(backup_id_is_valid(idx.backup_id));
                FUZZ_CHECK(!idx.dir[0] || backup_dir_check(idx.dir, NULL) == 0);
                FUZZ_CHECK(strlen(idx.created_at) < sizeof(idx.created_at));
                FUZZ_CHECK(strlen(idx.node) < sizeof(idx.node));
                break;
        case 1:
                if (cluster_decode_drain(in, len, &stop, &err) < 0)
                        FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED && !stop);
                else
                        FUZZ_CHECK(len > 0 || !stop);
                break;
        }
        return 0;
}
