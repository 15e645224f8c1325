/* The registry on a real SQLite file: save, replace, touch, list, delete, reopen. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "daemon/store.h"

struct seen {
        int n;
        char names[4][64];
        int64_t slot[4];
        int64_t active[4];
        int64_t pid[4], pid_start[4];
        char env[4][64];
};

static int collect(const struct store_sandbox *sb, void *userdata)
{
        struct seen *s = userdata;
        if (s->n < 4) {
                snprintf(s->names[s->n], 64, "%s", sb->name);
                snprintf(s->env[s->n], 64, "%s", sb->env_json);
                s->slot[s->n] = sb->slot;
                s->active[s->n] = sb->last_active_ms;
                s->pid[s->n] = sb->pid;
                s->pid_start[s->n] = sb->pid_start;
        }
        s->n++;
        return 0;
}

static void test_store_roundtrip(void **state)
{
        char dir[] = "/tmp/cella-store-XXXXXX", path[128];
        struct cella_error err = {0};
        struct store *st = NULL;
        struct seen seen = {0};

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/cella.db", dir);
        assert_int_equal(store_open(path, &st, &err), 0);

        struct store_sandbox a = {
                .name = "alpha",
                .slot = 0,
                .image = "default",
                .instance_type = "lite",
                .env_json = "{\"K\":\"V\"}",
                .labels_json = "{}",
                .created_ms = 10,
                .last_active_ms = 10,
                .pid = 4321,
                .pid_start = 777,
                .sleep_after_ms = 600000,
        };
        struct store_sandbox b = {"beta", 1,  "default", "basic",    NULL,
                                  NULL,   20, 20,        0,          0,
                                  600000, 1,  0,         "outbound", "[\"192.0.2.0/24:80\"]"};
        assert_int_equal(store_sandbox_save(st, &a, &err), 0);
        assert_int_equal(store_sandbox_save(st, &b, &err), 0);
        /* The slot is unique: another name on slot 1 is refused and reported. */
        struct store_sandbox c = {"gamma", 1, "default", "lite", NULL, NULL,   30,  30,
                                  0,       0, 600000,    0,      1,    "none", "[]"};
        assert_int_equal(store_sandbox_save(st, &c, &err), -1);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
        assert_non_null(strstr(err.msg, "UNIQUE"));
        assert_int_equal(store_sandbox_touch(st, "beta", 99), 0);
        store_close(st);

        /* Everything is there after reopening. */
        assert_int_equal(store_open(path, &st, &err), 0);
        assert_int_equal(store_sandbox_foreach(st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.names[0], "alpha");
        assert_string_equal(seen.env[0], "{\"K\":\"V\"}");
        assert_int_equal(seen.pid[0], 4321);
        assert_int_equal(seen.pid_start[0], 777);
        assert_string_equal(seen.names[1], "beta");
        assert_int_equal(seen.slot[1], 1);
        assert_int_equal(seen.active[1], 99);
        assert_string_equal(seen.env[1], "{}");

        assert_int_equal(store_sandbox_delete(st, "alpha", &err), 0);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_sandbox_foreach(st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.names[0], "beta");
        store_close(st);

        char f[160];
        const char *sfx[] = {"/cella.db", "/cella.db-wal", "/cella.db-shm"};
        for (size_t i = 0; i < 3; i++) {
                snprintf(f, sizeof(f), "%s%s", dir, sfx[i]);
                unlink(f);
        }
        assert_int_equal(rmdir(dir), 0);
}

static void test_store_open_failure(void **state)
{
        struct cella_error err = {0};
        struct store *st = NULL;
        assert_int_equal(store_open("/nonexistent-dir/x/cella.db", &st, &err), -1);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
        assert_non_null(strstr(err.msg, "/nonexistent-dir/x/cella.db"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_store_roundtrip),
                cmocka_unit_test(test_store_open_failure),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
