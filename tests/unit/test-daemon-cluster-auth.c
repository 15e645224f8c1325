/* The authenticator of node-to-node requests (src/daemon/cluster-auth.h): the header's
 * parser, the MAC over method, target and every field, the clock skew, and the nonces
 * remembered against replays. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/buf.h"
#include "daemon/cluster-auth.h"

static const unsigned char secret[] = "0123456789abcdef0123456789abcdef";
#define SECRET secret, sizeof(secret) - 1
#define NOW 1764240000000LL

/* A signed header for method and target, parsed back into *ret. */
static void signed_auth(const char *method, const char *target, struct cluster_auth *ret)
{
        struct cluster_auth a = {
                .ts_ms = NOW, .admin = false, .max_sandboxes = 3, .max_memory_bytes = 1 << 30};
        struct buf b = BUF_INIT;
        const char *v;

        snprintf(a.node, sizeof(a.node), "node-a");
        snprintf(a.tenant, sizeof(a.tenant), "acme");
        snprintf(a.key_id, sizeof(a.key_id), "0123456789ab");
        assert_int_equal(cluster_auth_sign(SECRET, method, target, &a, &b), 0);
        assert_true(strncmp(b.data, CLUSTER_AUTH_HEADER ": ", strlen(CLUSTER_AUTH_HEADER) + 2) ==
                    0);
        assert_true(b.len > 2 && memcmp(b.data + b.len - 2, "\r\n", 2) == 0);
        b.data[b.len - 2] = '\0';
        v = b.data + strlen(CLUSTER_AUTH_HEADER) + 2;
        assert_int_equal(cluster_auth_parse(v, ret), 0);
        assert_string_equal(ret->node, "node-a");
        assert_string_equal(ret->tenant, "acme");
        assert_string_equal(ret->key_id, "0123456789ab");
        assert_int_equal(ret->max_sandboxes, 3);
        assert_int_equal(ret->max_memory_bytes, 1 << 30);
        assert_false(ret->admin);
        assert_string_equal(ret->nonce, a.nonce);
        buf_free(&b);
}

static void test_sign_verify(void **state)
{
        struct cluster_auth a;
        struct cella_error err = {0};

        (void)state;
        signed_auth("POST", "/v1/sandboxes/web/exec?x=1", &a);
        assert_int_equal(
                cluster_auth_verify(SECRET, "POST", "/v1/sandboxes/web/exec?x=1", &a, NOW, &err),
                0);
}

static void test_tampered(void **state)
{
        struct cluster_auth a, t;
        struct cella_error err = {0};

        (void)state;
        signed_auth("GET", "/v1/sandboxes/web", &a);
        /* another method, another target */
        assert_int_equal(cluster_auth_verify(SECRET, "DELETE", "/v1/sandboxes/web", &a, NOW, &err),
                         -EACCES);
        assert_int_equal(err.code, CELLA_E_UNAUTHORIZED);
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/other", &a, NOW, &err),
                         -EACCES);
        /* another secret */
        assert_int_equal(
                cluster_auth_verify((const unsigned char *)"another secret, 32 bytes long!!", 31,
                                    "GET", "/v1/sandboxes/web", &a, NOW, &err),
                -EACCES);
        /* each field changed: the principal cannot be raised */
        t = a;
        t.admin = true;
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
        t = a;
        snprintf(t.tenant, sizeof(t.tenant), "other");
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
        t = a;
        t.max_sandboxes = 0;
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
        t = a;
        t.ts_ms++;
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
        t = a;
        t.nonce[0] = t.nonce[0] == '0' ? '1' : '0';
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
        t = a;
        snprintf(t.node, sizeof(t.node), "node-b");
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
        t = a;
        t.mac[63] = t.mac[63] == '0' ? '1' : '0';
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/v1/sandboxes/web", &t, NOW, &err),
                         -EACCES);
}

static void test_skew(void **state)
{
        struct cluster_auth a;
        struct cella_error err = {0};

        (void)state;
        signed_auth("GET", "/", &a);
        assert_int_equal(
                cluster_auth_verify(SECRET, "GET", "/", &a, NOW + CELLA_CLUSTER_AUTH_SKEW_MS, &err),
                0);
        assert_int_equal(
                cluster_auth_verify(SECRET, "GET", "/", &a, NOW - CELLA_CLUSTER_AUTH_SKEW_MS, &err),
                0);
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/", &a,
                                             NOW + CELLA_CLUSTER_AUTH_SKEW_MS + 1, &err),
                         -EACCES);
        assert_non_null(strstr(err.msg, "clock"));
        assert_int_equal(cluster_auth_verify(SECRET, "GET", "/", &a,
                                             NOW - CELLA_CLUSTER_AUTH_SKEW_MS - 1, &err),
                         -EACCES);
}

static void test_parse_refuses(void **state)
{
        static const char *const bad[] = {
                "",
                "v1",
                "node=a; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=1; tenant=; key=; "
                "maxsb=0; maxmem=0; mac=" /* no v1 */,
                "v1; node=a; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=1; tenant=; "
                "key=; maxsb=0; maxmem=0" /* no mac */,
                "v1; node=a; node=b; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=1; "
                "tenant=; key=; maxsb=0; maxmem=0; "
                "mac=abababababababababababababababababababababababababababababababab",
                "v1; node=A; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=1; tenant=; "
                "key=; maxsb=0; maxmem=0; "
                "mac=abababababababababababababababababababababababababababababababab",
                "v1; node=a; ts=-1; nonce=0123456789abcdef0123456789abcdef; admin=1; tenant=; "
                "key=; maxsb=0; maxmem=0; "
                "mac=abababababababababababababababababababababababababababababababab",
                "v1; node=a; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=yes; "
                "tenant=; key=; maxsb=0; maxmem=0; "
                "mac=abababababababababababababababababababababababababababababababab",
                "v1; node=a; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=0; "
                "tenant=a-b; key=; maxsb=0; maxmem=0; "
                "mac=abababababababababababababababababababababababababababababababab",
                "v1; node=a; ts=1; nonce=0123456789abcdef0123456789abcdef; admin=0; tenant=; "
                "key=; maxsb=0; maxmem=0; x=1; "
                "mac=abababababababababababababababababababababababababababababababab",
        };
        struct cluster_auth a;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(cluster_auth_parse(bad[i], &a), -EINVAL);
        assert_int_equal(cluster_auth_parse(NULL, &a), -EINVAL);
}

static void test_replay(void **state)
{
        struct nonce_cache *nc = nonce_cache_new();
        const char *n1 = "0123456789abcdef0123456789abcdef";
        const char *n2 = "fedcba9876543210fedcba9876543210";

        (void)state;
        assert_non_null(nc);
        assert_int_equal(nonce_cache_add(nc, n1, NOW, NOW), 0);
        assert_int_equal(nonce_cache_add(nc, n1, NOW, NOW + 1), -EEXIST);
        assert_int_equal(nonce_cache_add(nc, n2, NOW, NOW + 1), 0);
        assert_int_equal(nonce_cache_add(nc, n2, NOW, NOW + CELLA_CLUSTER_AUTH_SKEW_MS), -EEXIST);
        /* past two windows the slot is free again (the skew check refuses such a ts) */
        assert_int_equal(nonce_cache_add(nc, n1, NOW + 3 * CELLA_CLUSTER_AUTH_SKEW_MS,
                                         NOW + 3 * CELLA_CLUSTER_AUTH_SKEW_MS),
                         0);
        nonce_cache_free(nc);
}

/* Many nonces within the window: each is remembered until the table is full around its
 * slot, then refused (-ENOSPC), never forgotten while live. */
static void test_replay_many(void **state)
{
        struct nonce_cache *nc = nonce_cache_new();
        char n[CLUSTER_AUTH_NONCE_LEN + 1];
        unsigned added = 0, full = 0;

        (void)state;
        for (unsigned i = 0; i < 2 * CELLA_CLUSTER_AUTH_NONCES; i++) {
                int r;

                snprintf(n, sizeof(n), "%016x%016x", i * 2654435761u, i);
                r = nonce_cache_add(nc, n, NOW, NOW);
                assert_true(r == 0 || r == -ENOSPC);
                if (r == 0)
                        added++;
                else
                        full++;
        }
        assert_true(added >= CELLA_CLUSTER_AUTH_NONCES / 2);
        assert_true(full > 0);
        for (unsigned i = 0; i < 1000; i++) {
                int r;

                snprintf(n, sizeof(n), "%016x%016x", i * 2654435761u, i);
                r = nonce_cache_add(nc, n, NOW, NOW + 1);
                assert_true(r == -EEXIST || r == -ENOSPC);
        }
        nonce_cache_free(nc);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_sign_verify), cmocka_unit_test(test_tampered),
                cmocka_unit_test(test_skew),        cmocka_unit_test(test_parse_refuses),
                cmocka_unit_test(test_replay),      cmocka_unit_test(test_replay_many),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
