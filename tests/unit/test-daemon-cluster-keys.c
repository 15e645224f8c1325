/* A tenant's key record in etcd (daemon/cluster-keys.h): what a node writes decodes to the
 * same key on every node; a record that is not one is refused, never half read. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/cluster-keys.h"

#define HASH "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"

static void test_round_trip(void **state)
{
        struct store_key k = {.id = "3f9c0a1b2c4d",
                              .tenant = "acme",
                              .secret_sha256 = HASH,
                              .created_ms = 1796000000123,
                              .max_sandboxes = 10,
                              .max_memory_bytes = 17179869184};
        struct cluster_key c;
        char *s = cluster_key_encode(&k);

        (void)state;
        assert_non_null(s);
        assert_null(strstr(s, "secret\"")); /* the hash's field alone */
        assert_int_equal(cluster_key_decode(s, strlen(s), &c), 0);
        assert_string_equal(c.id, k.id);
        assert_string_equal(c.tenant, k.tenant);
        assert_string_equal(c.secret_sha256, HASH);
        assert_int_equal(c.created_ms, k.created_ms);
        assert_int_equal(c.max_sandboxes, 10);
        assert_int_equal(c.max_memory_bytes, 17179869184);
        free(s);
}

static void refused(const char *s)
{
        struct cluster_key c;

        assert_int_equal(cluster_key_decode(s, strlen(s), &c), -EINVAL);
}

#define REC(id, tenant, hash, maxs)                                             \
        "{\"id\":\"" id "\",\"tenant\":\"" tenant "\",\"secretSha256\":\"" hash \
        "\",\"maxSandboxes\":" maxs ",\"maxMemory\":0,\"createdMs\":0}"

static void test_refused(void **state)
{
        struct cluster_key c;
        const char *ok = REC("3f9c0a1b2c4d", "acme", HASH, "0");

        (void)state;
        assert_int_equal(cluster_key_decode(ok, strlen(ok), &c), 0);
        refused(REC("3F9C0A1B2C4D", "acme", HASH, "0"));
        refused(REC("3f9c0a1b2c4", "acme", HASH, "0"));
        refused(REC("3f9c0a1b2c4d", "Acme", HASH, "0"));
        refused(REC("3f9c0a1b2c4d", "", HASH, "0"));
        refused(REC("3f9c0a1b2c4d", "acme", "2D711642", "0"));
        refused(REC("3f9c0a1b2c4d", "acme", HASH, "-1"));
        refused(REC("3f9c0a1b2c4d", "acme", HASH, "\"1\""));
        refused("{\"id\":\"3f9c0a1b2c4d\",\"tenant\":\"acme\"}");
        refused("[]");
        refused("");
        refused("{\"id\":\"3f9c0a1b2c4d\",\"id\":\"3f9c0a1b2c4d\"}");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_refused),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
