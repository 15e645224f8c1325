/* daemon/api-field.c: the walker unpacks strictly as the table spells (jansson's messages
 * for a missing field, a wrong boolean, an unknown member), runs the checks in table order
 * and stores into a struct. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/api-field.h"

struct demo {
        char *name;
        bool flag;
        bool has_flag;
        int64_t n;
        char dir[CELLA_PATH_MAX + 1];
};

static const struct field demo_fields[] = {
        {"name", ":o", field_chk_id, 0, .off = offsetof(struct demo, name),
         .msg = "%s must be 1-%d characters of [A-Za-z0-9_.-]"},
        {"flag", "?b", field_chk_bool, 0, .off = offsetof(struct demo, flag),
         .has = offsetof(struct demo, has_flag) + 1},
        {"n", "?o", field_chk_number, F_NULL_ABSENT | F_REAL_WHOLE, .off = offsetof(struct demo, n),
         .msg = "%s must be an integer from %lld to %lld", .lo = 1, .hi = 9},
        {"dir", "?o", field_chk_path, F_NULL_ABSENT | F_STRING | F_INLINE,
         .off = offsetof(struct demo, dir), .msg = "%s must be a string"},
};

static int run(const char *body, struct demo *d, struct cella_error *err)
{
        memset(d, 0, sizeof(*d));
        memset(err, 0, sizeof(*err));
        return field_decode(body, strlen(body), demo_fields,
                            sizeof(demo_fields) / sizeof(demo_fields[0]), d, err);
}

static void test_struct(void **state)
{
        struct cella_error err;
        struct demo d;

        (void)state;
        assert_int_equal(
                run("{\"name\":\"a1\",\"flag\":true,\"n\":3.0,\"dir\":\"x/../y\"}", &d, &err), 0);
        assert_string_equal(d.name, "a1");
        assert_true(d.flag && d.has_flag);
        assert_int_equal(d.n, 3);
        assert_string_equal(d.dir, "/workspace/y");
        free(d.name);
        assert_int_equal(run("{\"name\":\"a1\",\"n\":null}", &d, &err), 0);
        assert_false(d.has_flag);
        assert_int_equal(d.n, 0);
        free(d.name);
}

static void test_messages(void **state)
{
        static const struct {
                const char *body, *msg;
        } cases[] = {
                {"{}", "invalid request: Object item not found: name"},
                {"{\"name\":\"a\",\"flag\":1}",
                 "invalid request: Expected true or false, got integer"},
                {"{\"name\":\"a\",\"x\":1,\"y\":2}",
                 "invalid request: 2 object item(s) left unpacked: x, y"},
                {"{\"name\":\"..\"}", "name must be 1-64 characters of [A-Za-z0-9_.-]"},
                {"{\"name\":\"a\",\"n\":10}", "n must be an integer from 1 to 9"},
                {"{\"name\":\"a\",\"n\":2.5}", "n must be an integer from 1 to 9"},
                {"{\"name\":\"a\",\"dir\":5}", "dir must be a string"},
                /* table order: name's fault is found before n's */
                {"{\"name\":\"..\",\"n\":10}", "name must be 1-64 characters of [A-Za-z0-9_.-]"},
                {"[]", "body must be a JSON object"},
        };
        struct cella_error err;
        struct demo d;

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                assert_int_equal(run(cases[i].body, &d, &err), -EINVAL);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                assert_string_equal(err.msg, cases[i].msg);
                free(d.name);
        }
}

/* A real truncated into an integer and a boolean's default when absent (F_ALWAYS). */
static void test_defaults(void **state)
{
        struct opts {
                int64_t timeout_ms;
                bool recursive;
        } o = {0};
        static const struct field t[] = {
                {"timeout", "?o", field_chk_number, F_REAL_TRUNC,
                 .off = offsetof(struct opts, timeout_ms),
                 .msg = "%s must be milliseconds between %lld and %lld", .lo = 0, .hi = 100},
                {"recursive", "?b", field_chk_bool, F_ALWAYS,
                 .off = offsetof(struct opts, recursive), .lo = 1},
        };
        struct cella_error err = {0};
        json_t *j = json_loads("{\"timeout\":7.9}", 0, NULL);

        (void)state;
        assert_int_equal(field_walk(j, t, 2, &o, &err), 0);
        assert_int_equal(o.timeout_ms, 7);
        assert_true(o.recursive);
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_struct),
                cmocka_unit_test(test_messages),
                cmocka_unit_test(test_defaults),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
