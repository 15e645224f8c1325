/* Tenants' API keys (src/common/apikey.h): the key's shape, its generation, the hash and
 * the constant-time compare, tenant names. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "common/apikey.h"

static const char good[] = "cella_0123456789ab_AbCdEfGhIjKlMnOpQrStUvWxYz012345";

static void test_parse(void **state)
{
        char id[CELLA_KEY_ID_LEN + 1], secret[CELLA_KEY_SECRET_LEN + 1];
        char bad[sizeof(good)];

        (void)state;
        assert_int_equal(apikey_parse(good, strlen(good), id, secret), 0);
        assert_string_equal(id, "0123456789ab");
        assert_string_equal(secret, "AbCdEfGhIjKlMnOpQrStUvWxYz012345");
        /* one byte short, one more, a NUL inside: not keys */
        assert_int_equal(apikey_parse(good, strlen(good) - 1, id, secret), -EINVAL);
        assert_int_equal(apikey_parse("cella_0123456789ab_AbCdEfGhIjKlMnOpQrStUvWxYz0123456",
                                      strlen(good) + 1, id, secret),
                         -EINVAL);
        memcpy(bad, good, sizeof(good));
        bad[25] = '\0';
        assert_int_equal(apikey_parse(bad, strlen(good), id, secret), -EINVAL);
        /* an upper-case id, a '-' in the secret, the wrong prefix, no separator */
        memcpy(bad, good, sizeof(good));
        bad[6] = 'A';
        assert_int_equal(apikey_parse(bad, strlen(bad), id, secret), -EINVAL);
        memcpy(bad, good, sizeof(good));
        bad[30] = '-';
        assert_int_equal(apikey_parse(bad, strlen(bad), id, secret), -EINVAL);
        memcpy(bad, good, sizeof(good));
        bad[0] = 'C';
        assert_int_equal(apikey_parse(bad, strlen(bad), id, secret), -EINVAL);
        memcpy(bad, good, sizeof(good));
        bad[18] = 'x';
        assert_int_equal(apikey_parse(bad, strlen(bad), id, secret), -EINVAL);
}

static void test_generate(void **state)
{
        char id[CELLA_KEY_ID_LEN + 1], secret[CELLA_KEY_SECRET_LEN + 1], key[CELLA_KEY_LEN + 1];
        char id2[CELLA_KEY_ID_LEN + 1], secret2[CELLA_KEY_SECRET_LEN + 1];
        char pid[CELLA_KEY_ID_LEN + 1], psecret[CELLA_KEY_SECRET_LEN + 1];

        (void)state;
        assert_int_equal(apikey_generate(id, secret, key), 0);
        assert_int_equal(strlen(key), CELLA_KEY_LEN);
        assert_int_equal(apikey_parse(key, strlen(key), pid, psecret), 0);
        assert_string_equal(pid, id);
        assert_string_equal(psecret, secret);
        assert_true(apikey_id_is_valid(id));
        assert_int_equal(apikey_generate(id2, secret2, key), 0);
        assert_string_not_equal(id, id2);
        assert_string_not_equal(secret, secret2);
}

static void test_hash(void **state)
{
        char h[CELLA_KEY_HASH_HEX + 1];

        (void)state;
        /* SHA-256("abc") */
        assert_int_equal(apikey_hash("abc", h), 0);
        assert_string_equal(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
        assert_true(apikey_secret_matches("abc", h));
        assert_false(apikey_secret_matches("abd", h));
        assert_false(apikey_secret_matches("abc", "ba7816bf"));
        h[63] = 'c';
        assert_false(apikey_secret_matches("abc", h));
}

static void test_tenant_names(void **state)
{
        (void)state;
        assert_true(tenant_name_is_valid("acme"));
        assert_true(tenant_name_is_valid("a1"));
        assert_true(tenant_name_is_valid("abcdefghijklmnop"));
        assert_false(tenant_name_is_valid("abcdefghijklmnopq"));
        assert_false(tenant_name_is_valid(""));
        assert_false(tenant_name_is_valid("ac-me"));
        assert_false(tenant_name_is_valid("Acme"));
        assert_false(tenant_name_is_valid("a.b"));
        assert_false(apikey_id_is_valid("0123456789aB"));
        assert_false(apikey_id_is_valid("0123456789a"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_generate),
                cmocka_unit_test(test_hash),
                cmocka_unit_test(test_tenant_names),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
