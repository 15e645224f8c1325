/* Fuzz the tenants' key string and names (src/common/apikey.h, src/daemon/tenant.h): the
 * bearer token a client sends, the tenant names the admin gives, the preview host's
 * "<name>--<tenant>" and the internal "<name>.<tenant>".
 *
 * Invariants: a parsed key is exactly "cella_" + its id + "_" + its secret (the id valid,
 * the secret 32 of [A-Za-z0-9]), and its secret matches its own hash and no other's; a
 * valid tenant joined to a name splits back to the same two; a preview id read as a
 * tenant's names a valid tenant, and the internal name maps back to that preview id; a
 * message shown to tenant "acme" (tenant_text_view) is never longer than the text, stays
 * within its buffer, and is the text itself when it names nothing of acme's. */
#include <stdio.h>
#include <string.h>

#include "common/apikey.h"
#include "common/limits.h"
#include "daemon/tenant.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char id[CELLA_KEY_ID_LEN + 1], secret[CELLA_KEY_SECRET_LEN + 1];
        char s[256], internal[CELLA_NAME_MAX + 1], back[CELLA_NAME_MAX + 1];
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        if (apikey_parse((const char *)data, size, id, secret) == 0) {
                char key[CELLA_KEY_LEN + 1], hash[CELLA_KEY_HASH_HEX + 1];

                FUZZ_CHECK(apikey_id_is_valid(id));
                FUZZ_CHECK(strlen(secret) == CELLA_KEY_SECRET_LEN);
                snprintf(key, sizeof(key), CELLA_KEY_PREFIX "%s_%s", id, secret);
                FUZZ_CHECK(size == CELLA_KEY_LEN && memcmp(key, data, size) == 0);
                FUZZ_CHECK(apikey_hash(secret, hash) == 0);
                FUZZ_CHECK(apikey_secret_matches(secret, hash));
                hash[0] = hash[0] == '0' ? '1' : '0';
                FUZZ_CHECK(!apikey_secret_matches(secret, hash));
        }
        if (size >= sizeof(s))
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        if (strlen(s) != size)
                return 0;
        if (tenant_name_is_valid(s)) {
                FUZZ_CHECK(size >= 1 && size <= CELLA_TENANT_MAX && !strchr(s, '-'));
                if (tenant_qualify(s, "web", internal, NULL) == 0) {
                        tenant_split(internal, n, t);
                        FUZZ_CHECK(strcmp(n, "web") == 0 && strcmp(t, s) == 0);
                        FUZZ_CHECK(tenant_owns(s, internal) && !tenant_owns("", internal));
                }
        }
        if (size <= CELLA_NAME_MAX && tenant_preview_internal(s, internal) == 1) {
                tenant_split(internal, n, t);
                FUZZ_CHECK(tenant_name_is_valid(t));
                tenant_preview_id(internal, back);
                FUZZ_CHECK(strcmp(back, s) == 0);
        }
        {
                char v[256], small[8];

                tenant_text_view("acme", s, v, sizeof(v));
                FUZZ_CHECK(strlen(v) <= size);
                tenant_text_view("acme", s, small, sizeof(small));
                FUZZ_CHECK(strlen(small) < sizeof(small));
                if (!strstr(s, "acme"))
                        FUZZ_CHECK(strcmp(v, s) == 0);
        }
        if (size <= CELLA_NAME_MAX) {
                tenant_split(s, n, t); /* any internal name: no overflow, a tenant or none */
                FUZZ_CHECK(strlen(n) <= CELLA_NAME_MAX && strlen(t) <= CELLA_TENANT_MAX);
        }
        return 0;
}
