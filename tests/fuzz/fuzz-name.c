/* Fuzz sandbox name validation (src/common/name.h), with and without normalization.
 *
 * Invariants: an accepted name is 1..CELLA_NAME_MAX bytes of [a-z0-9-], does not start or
 * end with '-', is not reserved, and is a fixed point (checking the output again, without
 * normalization, accepts it unchanged). A rejected name sets INVALID_SANDBOX_NAME and a
 * message. A name accepted strictly is accepted identically when normalizing.
 *
 * Slot ids (the names of sandbox cgroup and data directories): an accepted id is below
 * the bound and formats back to exactly the input (one spelling per slot). */
#include <stdio.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"
#include "fuzz.h"

static void check_accepted(const char *out)
{
        size_t n = strlen(out);
        char again[CELLA_NAME_MAX + 1];
        struct cella_error err = {0};

        FUZZ_CHECK(n >= 1 && n <= CELLA_NAME_MAX);
        for (size_t i = 0; i < n; i++) {
                char c = out[i];
                FUZZ_CHECK((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-');
        }
        FUZZ_CHECK(out[0] != '-' && out[n - 1] != '-');
        FUZZ_CHECK(!sandbox_name_is_reserved(out));
        FUZZ_CHECK(sandbox_name_check(out, n, false, again, &err) == 0);
        FUZZ_CHECK(strcmp(again, out) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char strict[CELLA_NAME_MAX + 1], norm[CELLA_NAME_MAX + 1];
        struct cella_error e1 = {0}, e2 = {0};
        int r1, r2;

        r1 = sandbox_name_check((const char *)data, size, false, strict, &e1);
        r2 = sandbox_name_check((const char *)data, size, true, norm, &e2);
        FUZZ_CHECK(r1 == 0 || r1 == cella_code_errno(e1.code));
        FUZZ_CHECK(r2 == 0 || r2 == cella_code_errno(e2.code));
        if (r1 == 0) {
                FUZZ_CHECK(!cella_error_is_set(&e1));
                FUZZ_CHECK(strlen(strict) == size && memcmp(strict, data, size) == 0);
                check_accepted(strict);
                FUZZ_CHECK(r2 == 0 && strcmp(norm, strict) == 0);
        } else {
                FUZZ_CHECK(e1.code == CELLA_E_INVALID_SANDBOX_NAME && e1.msg[0] != '\0');
        }
        if (r2 == 0) {
                FUZZ_CHECK(strlen(norm) == size);
                check_accepted(norm);
        } else {
                FUZZ_CHECK(e2.code == CELLA_E_INVALID_SANDBOX_NAME && e2.msg[0] != '\0');
        }

        unsigned slot = 0;
        if (slot_id_parse((const char *)data, size, CELLA_UID_SLOTS, &slot) == 0) {
                char id[16];
                FUZZ_CHECK(slot < CELLA_UID_SLOTS);
                FUZZ_CHECK(slot_id_format(slot, id, sizeof(id)) == 0);
                FUZZ_CHECK(strlen(id) == size && memcmp(id, data, size) == 0);
        }
        return 0;
}
