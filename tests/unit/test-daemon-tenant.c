/* Tenants (src/daemon/tenant.h): internal names, preview ids, the views a principal gets
 * of SandboxInfo and snapshots. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/tenant.h"

static void test_qualify_split(void **state)
{
        char out[CELLA_NAME_MAX + 1], n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        struct cella_error err = {0};
        char long_name[CELLA_NAME_MAX + 1];

        (void)state;
        assert_int_equal(tenant_qualify("", "web", out, &err), 0);
        assert_string_equal(out, "web"); /* the default tenant: today's names */
        assert_int_equal(tenant_qualify("acme", "web", out, &err), 0);
        assert_string_equal(out, "web.acme");
        tenant_split(out, n, t);
        assert_string_equal(n, "web");
        assert_string_equal(t, "acme");
        tenant_split("web", n, t);
        assert_string_equal(n, "web");
        assert_string_equal(t, "");
        assert_true(tenant_owns("acme", "web.acme"));
        assert_false(tenant_owns("acme", "web.acm"));
        assert_false(tenant_owns("acme", "web"));
        assert_true(tenant_owns("", "web"));
        /* in place, as the dispatcher does */
        memcpy(out, "db", 3);
        assert_int_equal(tenant_qualify("acme", out, out, &err), 0);
        assert_string_equal(out, "db.acme");
        /* a tenant's names leave room for "--" and the tenant */
        memset(long_name, 'a', 57);
        long_name[57] = '\0';
        assert_int_equal(tenant_qualify("acme", long_name, out, &err), 0);
        long_name[57] = 'a';
        long_name[58] = '\0';
        assert_true(tenant_qualify("acme", long_name, out, &err) < 0);
        assert_int_equal(err.code, CELLA_E_INVALID_SANDBOX_NAME);
        memset(&err, 0, sizeof(err));
        assert_int_equal(tenant_snapshot_qualify("acme", "base.v1", out, &err), 0);
        assert_string_equal(out, "base.v1:acme");
}

static void test_registry_names(void **state)
{
        char out[CELLA_NAME_MAX + 1];

        (void)state;
        assert_int_equal(tenant_internal_name_check("web", out), 0);
        assert_string_equal(out, "web");
        assert_int_equal(tenant_internal_name_check("web.acme", out), 0);
        assert_string_equal(out, "web.acme");
        assert_true(tenant_internal_name_check("web.Acme", out) < 0);
        assert_true(tenant_internal_name_check("-web.acme", out) < 0);
        assert_true(tenant_internal_name_check("web.", out) < 0);
        assert_true(tenant_internal_name_check(".acme", out) < 0);
        assert_true(tenant_internal_name_check("a.b.acme", out) < 0);
        assert_true(tenant_internal_name_check("default", out) < 0);
        assert_true(tenant_snapshot_name_is_valid("base.v1"));
        assert_true(tenant_snapshot_name_is_valid("base.v1:acme"));
        assert_false(tenant_snapshot_name_is_valid("base:"));
        assert_false(tenant_snapshot_name_is_valid(":acme"));
        assert_false(tenant_snapshot_name_is_valid("a:b:acme"));
}

static void test_preview_id(void **state)
{
        char out[CELLA_NAME_MAX + 1];

        (void)state;
        tenant_preview_id("web.acme", out);
        assert_string_equal(out, "web--acme");
        tenant_preview_id("web", out);
        assert_string_equal(out, "web");
        assert_int_equal(tenant_preview_internal("web--acme", out), 1);
        assert_string_equal(out, "web.acme");
        assert_int_equal(tenant_preview_internal("my--web--acme", out), 1);
        assert_string_equal(out, "my--web.acme"); /* the last "--": tenants have no '-' */
        assert_int_equal(tenant_preview_internal("web", out), 0);
        assert_int_equal(tenant_preview_internal("--acme", out), 0);
        assert_int_equal(tenant_preview_internal("web--", out), 0);
        assert_int_equal(tenant_preview_internal("web--Acme", out), 0);
}

static void test_views(void **state)
{
        json_t *info = json_pack("{s:s, s:s}", "id", "web.acme", "state", "running");
        json_t *snap = json_pack("{s:s, s:s, s:s}", "snapshotId", "snap-1", "name", "base:acme",
                                 "sandbox", "web.acme");
        struct principal acme = {.tenant = "acme"}, other = {.tenant = "other"};
        struct principal admin = {.admin = true};

        (void)state;
        tenant_info_view(info);
        assert_string_equal(json_string_value(json_object_get(info, "id")), "web");
        assert_string_equal(json_string_value(json_object_get(info, "tenant")), "acme");
        assert_false(tenant_snapshot_view(snap, &other));
        assert_false(tenant_snapshot_view(snap, &(struct principal){0})); /* the default */
        assert_true(tenant_snapshot_view(snap, &acme));
        assert_string_equal(json_string_value(json_object_get(snap, "name")), "base");
        assert_string_equal(json_string_value(json_object_get(snap, "sandbox")), "web");
        json_decref(snap);
        snap = json_pack("{s:s, s:s}", "name", "mine", "sandbox", "box");
        assert_false(tenant_snapshot_view(snap, &acme)); /* the default tenant's */
        assert_true(tenant_snapshot_view(snap, &admin));
        assert_null(json_object_get(snap, "tenant"));
        json_decref(snap);
        json_decref(info);
}

static void test_backup_view(void **state)
{
        (void)state;
        json_t *b = json_pack("{s:s, s:s}", "id", "x", "sandbox", "web.acme");

        tenant_backup_view(b);
        assert_string_equal(json_string_value(json_object_get(b, "sandbox")), "web");
        assert_string_equal(json_string_value(json_object_get(b, "tenant")), "acme");
        json_decref(b);
        b = json_pack("{s:s, s:s}", "id", "x", "sandbox", "web");
        tenant_backup_view(b);
        assert_string_equal(json_string_value(json_object_get(b, "sandbox")), "web");
        assert_null(json_object_get(b, "tenant"));
        json_decref(b);
        b = json_pack("{s:s}", "id", "x"); /* no sandbox: left as it is */
        tenant_backup_view(b);
        assert_int_equal(json_object_size(b), 1);
        json_decref(b);
}

static void test_text_view(void **state)
{
        char out[256];

        (void)state;
        tenant_text_view("acme", "sandbox 'web.acme' does not exist", out, sizeof(out));
        assert_string_equal(out, "sandbox 'web' does not exist");
        tenant_text_view("acme", "snapshot \"base:acme\" is used by 'kid.acme'", out, sizeof(out));
        assert_string_equal(out, "snapshot \"base\" is used by 'kid'");
        /* another tenant's, a file, an unquoted word, a quote left open: as they are */
        tenant_text_view("acme", "'web.other' '/w/x.acme' x.acme 'a.acme", out, sizeof(out));
        assert_string_equal(out, "'web.other' '/w/x.acme' x.acme 'a.acme");
        tenant_text_view("acme", "'.acme' ':acme' 'web.acme.acme'", out, sizeof(out));
        assert_string_equal(out, "'.acme' ':acme' 'web.acme.acme'");
        /* cut to the room given, still a string */
        tenant_text_view("acme", "sandbox 'web.acme'", out, 12);
        assert_int_equal(strlen(out), 11);
        tenant_text_view("acme", "", out, sizeof(out));
        assert_string_equal(out, "");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_qualify_split), cmocka_unit_test(test_registry_names),
                cmocka_unit_test(test_preview_id),    cmocka_unit_test(test_views),
                cmocka_unit_test(test_backup_view),   cmocka_unit_test(test_text_view),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
