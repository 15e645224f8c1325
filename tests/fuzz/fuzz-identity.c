/* Fuzz the identity file parser (src/daemon/rebuild.h): the input is a file's text, as
 * read from a sandbox directory. Invariants: success gives a valid sandbox name, a known
 * instance type, network "none" or "outbound", a positive sleepAfter, sleepMode "files" or
 * "memory" and env/labels "{}";
 * formatting the parsed record and parsing that again gives the same record (the file
 * cellad writes is a fixed point); failure is -EINVAL. The same input goes to the
 * snapshot record parser (snapshot.json, decision 0048), with the same invariants: valid
 * names, a format/parse fixed point, -EINVAL otherwise; a disk clone's record (decision
 * 0051) has a positive owners' base that leaves room for a whole range, a copy's none. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/name.h"
#include "daemon/instance-type.h"
#include "daemon/rebuild.h"
#include "fuzz.h"

static void snapshot_record(const uint8_t *data, size_t size)
{
        static struct snapshot_identity a, b;
        char name[CELLA_NAME_MAX + 1];
        char *text;
        int r;

        r = snapshot_identity_parse((const char *)data, size, &a);
        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL);
                return;
        }
        FUZZ_CHECK(sandbox_name_check(a.rec.sandbox, strlen(a.rec.sandbox), false, name, NULL) ==
                   0);
        FUZZ_CHECK(image_name_is_valid(a.rec.id) && image_name_is_valid(a.rec.name));
        FUZZ_CHECK(a.rec.size_bytes >= 0 && a.rec.created_ms >= 0);
        if (strcmp(a.method, "clone") == 0)
                FUZZ_CHECK(a.rec.id_base > 0 &&
                           a.rec.id_base <= (int64_t)UINT32_MAX - CELLA_UID_RANGE);
        else
                FUZZ_CHECK(strcmp(a.method, "copy") == 0 && a.rec.id_base == 0);
        text = snapshot_identity_format(&a.rec);
        if (!text)
                return;
        FUZZ_CHECK(snapshot_identity_parse(text, strlen(text), &b) == 0);
        FUZZ_CHECK(strcmp(a.id, b.id) == 0 && strcmp(a.name, b.name) == 0);
        FUZZ_CHECK(strcmp(a.sandbox, b.sandbox) == 0 && strcmp(a.image, b.image) == 0);
        FUZZ_CHECK(strcmp(a.parent, b.parent) == 0 && strcmp(a.method, b.method) == 0);
        FUZZ_CHECK(a.rec.id_base == b.rec.id_base);
        FUZZ_CHECK(a.rec.size_bytes == b.rec.size_bytes && a.rec.created_ms == b.rec.created_ms);
        free(text);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct identity a, b;
        char name[CELLA_NAME_MAX + 1];
        char *text;
        int r;

        snapshot_record(data, size);
        r = identity_parse((const char *)data, size, &a);
        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL);
                return 0;
        }
        FUZZ_CHECK(sandbox_name_check(a.rec.name, strlen(a.rec.name), false, name, NULL) == 0);
        FUZZ_CHECK(instance_type_find(a.rec.instance_type) != NULL);
        FUZZ_CHECK(strcmp(a.rec.network, "none") == 0 || strcmp(a.rec.network, "outbound") == 0);
        FUZZ_CHECK(a.rec.sleep_after_ms > 0 && a.rec.created_ms >= 0);
        FUZZ_CHECK(strcmp(a.rec.env_json, "{}") == 0 && strcmp(a.rec.labels_json, "{}") == 0);
        FUZZ_CHECK(a.rec.pid == 0 && a.rec.pid_start == 0);
        text = identity_format(&a.rec);
        if (!text)
                return 0; /* out of memory */
        FUZZ_CHECK(identity_parse(text, strlen(text), &b) == 0);
        FUZZ_CHECK(strcmp(a.name, b.name) == 0 && strcmp(a.image, b.image) == 0);
        FUZZ_CHECK(strcmp(a.instance_type, b.instance_type) == 0);
        FUZZ_CHECK(strcmp(a.network, b.network) == 0);
        FUZZ_CHECK(strcmp(a.network_allow, b.network_allow) == 0);
        FUZZ_CHECK(a.rec.created_ms == b.rec.created_ms);
        FUZZ_CHECK(a.rec.sleep_after_ms == b.rec.sleep_after_ms);
        FUZZ_CHECK(a.rec.keep_alive == b.rec.keep_alive);
        FUZZ_CHECK(a.rec.default_session == b.rec.default_session);
        FUZZ_CHECK(strcmp(a.snapshot, b.snapshot) == 0);
        FUZZ_CHECK(strcmp(a.sleep_mode, "files") == 0 || strcmp(a.sleep_mode, "memory") == 0);
        FUZZ_CHECK(strcmp(a.sleep_mode, b.sleep_mode) == 0);
        free(text);
        return 0;
}
