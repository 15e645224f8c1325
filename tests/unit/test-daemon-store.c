/* The registry on a real SQLite file: save, replace, touch, list, delete, reopen; a
 * damaged or missing one kept aside; identity files (rebuild.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/rebuild.h"
#include "daemon/store.h"

struct seen {
        int n;
        char names[4][64];
        int64_t slot[4];
        int64_t active[4];
        int64_t pid[4], pid_start[4];
        char env[4][64];
        char sleep_mode[4][16];
};

static int collect(const struct store_sandbox *sb, void *userdata)
{
        struct seen *s = userdata;
        if (s->n < 4) {
                snprintf(s->names[s->n], 64, "%s", sb->name);
                snprintf(s->env[s->n], 64, "%s", sb->env_json);
                snprintf(s->sleep_mode[s->n], 16, "%s", sb->sleep_mode);
                s->slot[s->n] = sb->slot;
                s->active[s->n] = sb->last_active_ms;
                s->pid[s->n] = sb->pid;
                s->pid_start[s->n] = sb->pid_start;
        }
        s->n++;
        return 0;
}

/* A sandbox's record with every field of its own (what test_identity starts from too). */
static const struct store_sandbox alpha = {
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

static void rm_dir(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        char f[512];

        while (d && (de = readdir(d)))
                if (de->d_name[0] != '.') {
                        snprintf(f, sizeof(f), "%s/%s", dir, de->d_name);
                        unlink(f);
                }
        if (d)
                closedir(d);
        assert_int_equal(rmdir(dir), 0);
}

/* The fixture: a registry opened in a directory of its own, removed with all it holds. */
struct reg {
        char dir[32];
        char path[64];
        struct store *st;
        struct cella_error err;
};

static int reg_setup(void **state)
{
        struct reg *r = calloc(1, sizeof(*r));

        assert_non_null(r);
        snprintf(r->dir, sizeof(r->dir), "/tmp/cella-store-XXXXXX");
        assert_non_null(mkdtemp(r->dir));
        snprintf(r->path, sizeof(r->path), "%s/cella.db", r->dir);
        assert_int_equal(store_open(r->path, &r->st, &r->err), 0);
        *state = r;
        return 0;
}

static void reg_close(struct reg *r)
{
        store_close(r->st);
        r->st = NULL;
}

/* Closed and opened again (what a restart of cellad does). */
static void reg_reopen(struct reg *r)
{
        reg_close(r);
        assert_int_equal(store_open(r->path, &r->st, &r->err), 0);
}

static int reg_teardown(void **state)
{
        struct reg *r = *state;

        reg_close(r);
        rm_dir(r->dir);
        free(r);
        return 0;
}

static void test_store_roundtrip(void **state)
{
        struct reg *r = *state;
        struct store *st = r->st;
        struct cella_error err = {0};
        struct seen seen = {0};
        struct store_sandbox a = alpha;

        struct store_sandbox b = {"beta", 1,       "default", "basic",    NULL,
                                  NULL,   20,      20,        0,          0,
                                  600000, 1,       0,         "outbound", "[\"192.0.2.0/24:80\"]",
                                  NULL,   "memory"};
        assert_int_equal(store_sandbox_save(st, &a, &err), 0);
        assert_int_equal(store_sandbox_save(st, &b, &err), 0);
        /* The slot is unique: another name on slot 1 is refused and reported. */
        struct store_sandbox c = {"gamma", 1,      "default", "lite", NULL,   NULL, 30,   30,  0,
                                  0,       600000, 0,         1,      "none", "[]", NULL, NULL};
        assert_int_equal(store_sandbox_save(st, &c, &err), -EIO);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
        assert_non_null(strstr(err.msg, "UNIQUE"));
        assert_int_equal(store_sandbox_touch(st, "beta", 99), 0);

        /* Everything is there after reopening. */
        reg_reopen(r);
        st = r->st;
        assert_int_equal(store_sandbox_foreach(st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.names[0], "alpha");
        assert_string_equal(seen.env[0], "{\"K\":\"V\"}");
        assert_int_equal(seen.pid[0], 4321);
        assert_int_equal(seen.pid_start[0], 777);
        /* sleepMode: "files" unless given (0050) */
        assert_string_equal(seen.sleep_mode[0], "files");
        assert_string_equal(seen.sleep_mode[1], "memory");
        assert_string_equal(seen.names[1], "beta");
        assert_int_equal(seen.slot[1], 1);
        assert_int_equal(seen.active[1], 99);
        assert_string_equal(seen.env[1], "{}");

        assert_int_equal(store_sandbox_delete(st, "alpha", &err), 0);
        memset(&seen, 0, sizeof(seen));
        assert_int_equal(store_sandbox_foreach(st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 1);
        assert_string_equal(seen.names[0], "beta");
}

/* A batch of records in one transaction (the claims of a loop turn, decision 0059): all
 * of it after a commit, none of it after a rollback, and a failed write in a batch
 * leaves the registry as it was before the batch. */
static void test_store_batch(void **state)
{
        struct reg *r = *state;
        struct cella_error err = {0};
        struct seen seen = {0};
        struct store_sandbox a = alpha, b = alpha, c = alpha;

        b.name = "beta";
        b.slot = 1;
        c.name = "gamma";
        c.slot = 2;
        assert_int_equal(store_begin(r->st, &err), 0);
        assert_int_equal(store_sandbox_save(r->st, &a, &err), 0);
        assert_int_equal(store_sandbox_save(r->st, &b, &err), 0);
        assert_int_equal(store_commit(r->st, &err), 0);

        assert_int_equal(store_begin(r->st, &err), 0);
        assert_int_equal(store_sandbox_save(r->st, &c, &err), 0);
        store_rollback(r->st);

        /* gamma first, then a name on beta's slot: the batch fails and is rolled back. */
        assert_int_equal(store_begin(r->st, &err), 0);
        assert_int_equal(store_sandbox_save(r->st, &c, &err), 0);
        c.name = "delta";
        c.slot = 1;
        assert_true(store_sandbox_save(r->st, &c, &err) < 0);
        store_rollback(r->st);
        store_rollback(r->st); /* none open: nothing happens */

        reg_reopen(r);
        assert_int_equal(store_sandbox_foreach(r->st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 2);
        assert_string_equal(seen.names[0], "alpha");
        assert_string_equal(seen.names[1], "beta");
        /* A commit with no transaction open is an error, not a silent success. */
        assert_true(store_commit(r->st, &err) < 0);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
}

static int collect_snap(const struct store_snapshot *sn, void *userdata)
{
        char *out = userdata;
        size_t n = strlen(out);
        snprintf(out + n, 256 - n, "%s,%s,%s,%s,%lld,%lld,%s,%s,%lld;", sn->id, sn->name,
                 sn->sandbox, sn->image, (long long)sn->size_bytes, (long long)sn->created_ms,
                 sn->parent, sn->method, (long long)sn->id_base);
        return 0;
}

static int collect_snapshot_of(const struct store_sandbox *sb, void *userdata)
{
        char *out = userdata;
        size_t n = strlen(out);
        snprintf(out + n, 256 - n, "%s=%s;", sb->name, sb->snapshot);
        return 0;
}

/* Snapshots and a sandbox's snapshot survive a reopen; an id or a name is taken once. */
static void test_store_snapshots(void **state)
{
        struct reg *r = *state;
        struct store *st = r->st;
        struct cella_error err = {0};
        char got[256] = "";

        /* a copied layer (no method given: "copy") and a disk clone with its owners' base */
        struct store_snapshot a = {"snap-1", "one", "alpha", "default", 4096, 10, NULL, NULL, 0};
        struct store_snapshot b = {"snap-2", "two",    "alpha", "py",  1 << 20,
                                   20,       "snap-1", "clone", 196608};
        struct store_snapshot dup_id = {"snap-1", "three", "alpha", "default", 0,
                                        30,       NULL,    NULL,    0};
        struct store_snapshot dup_name = {"snap-3", "two", "alpha", "default", 0,
                                          30,       NULL,  NULL,    0};
        assert_int_equal(store_snapshot_save(st, &b, &err), 0);
        assert_int_equal(store_snapshot_save(st, &a, &err), 0);
        assert_int_equal(store_snapshot_save(st, &dup_id, &err), -EIO);
        assert_int_equal(store_snapshot_save(st, &dup_name, &err), -EIO);
        struct store_sandbox child = {.name = "child",
                                      .slot = 3,
                                      .image = "default",
                                      .instance_type = "lite",
                                      .created_ms = 5,
                                      .last_active_ms = 5,
                                      .snapshot = "snap-1"};
        struct store_sandbox plain = {.name = "plain",
                                      .slot = 4,
                                      .image = "default",
                                      .instance_type = "lite",
                                      .created_ms = 6,
                                      .last_active_ms = 6};
        assert_int_equal(store_sandbox_save(st, &child, &err), 0);
        assert_int_equal(store_sandbox_save(st, &plain, &err), 0);

        reg_reopen(r);
        st = r->st;
        assert_int_equal(store_snapshot_foreach(st, collect_snap, got, &err), 0);
        assert_string_equal(
                got,
                "snap-1,one,alpha,default,4096,10,,copy,0;snap-2,two,alpha,py,1048576,20,snap-1,"
                "clone,196608;");
        got[0] = '\0';
        assert_int_equal(store_sandbox_foreach(st, collect_snapshot_of, got, &err), 0);
        assert_string_equal(got, "child=snap-1;plain=;");
        assert_int_equal(store_snapshot_delete(st, "snap-1", &err), 0);
        assert_int_equal(store_snapshot_delete(st, "snap-1", &err), 0);
        got[0] = '\0';
        assert_int_equal(store_snapshot_foreach(st, collect_snap, got, &err), 0);
        assert_string_equal(got, "snap-2,two,alpha,py,1048576,20,snap-1,clone,196608;");
}

static void test_store_open_failure(void **state)
{
        struct cella_error err = {0};
        struct store *st = NULL;
        assert_int_equal(store_open("/nonexistent-dir/x/cella.db", &st, &err), -EIO);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
        assert_non_null(strstr(err.msg, "/nonexistent-dir/x/cella.db"));
}

static void write_file(const char *path, const void *data, size_t len)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, data, len), (ssize_t)len);
        close(fd);
}

/* Files of dir whose name starts with prefix. */
static int count_prefixed(const char *dir, const char *prefix)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;

        assert_non_null(d);
        while ((de = readdir(d)))
                n += strncmp(de->d_name, prefix, strlen(prefix)) == 0;
        closedir(d);
        return n;
}

static void test_store_damaged(void **state)
{
        struct reg *r = *state;
        struct cella_error err = {0};
        char wal[80], buf[4096];
        struct seen seen = {0};

        snprintf(wal, sizeof(wal), "%s-wal", r->path);

        /* New: fresh. Reopened: not fresh, records kept. */
        assert_true(store_is_fresh(r->st));
        assert_int_equal(store_sandbox_save(r->st, &alpha, &err), 0);
        reg_reopen(r);
        assert_false(store_is_fresh(r->st));
        assert_int_equal(store_sandbox_foreach(r->st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 1);
        reg_close(r);

        /* Garbage: kept aside as it was, a new empty registry. */
        memset(buf, 0x5a, sizeof(buf));
        write_file(r->path, buf, sizeof(buf));
        reg_reopen(r);
        assert_true(store_is_fresh(r->st));
        seen.n = 0;
        assert_int_equal(store_sandbox_foreach(r->st, collect, &seen, &err), 0);
        assert_int_equal(seen.n, 0);
        assert_int_equal(count_prefixed(r->dir, "cella.db.corrupt-"), 1);
        reg_close(r);

        /* A -wal without its database is kept aside, not replayed. */
        unlink(r->path);
        write_file(wal, buf, sizeof(buf));
        reg_reopen(r);
        assert_true(store_is_fresh(r->st));
        assert_true(count_prefixed(r->dir, "cella.db.corrupt-") >= 2);
}

static void test_identity(void **state)
{
        struct store_sandbox rec = alpha;
        struct identity id;

        (void)state;
        rec.env_json = "{\"SECRET\":\"x\"}";
        rec.labels_json = "{\"LABELED\":\"b\"}";
        rec.keep_alive = 1;
        rec.network = "outbound";
        rec.network_allow_json = "[\"203.0.113.0/24:443\"]";
        rec.sleep_mode = "memory";
        char *text = identity_format(&rec);
        assert_non_null(text);
        /* env and labels stay in the registry */
        assert_null(strstr(text, "SECRET"));
        assert_null(strstr(text, "LABELED"));
        assert_int_equal(identity_parse(text, strlen(text), &id), 0);
        assert_string_equal(id.rec.name, "alpha");
        assert_string_equal(id.rec.image, "default");
        assert_string_equal(id.rec.instance_type, "lite");
        assert_string_equal(id.rec.network, "outbound");
        assert_string_equal(id.rec.network_allow_json, "[\"203.0.113.0/24:443\"]");
        assert_string_equal(id.rec.env_json, "{}");
        assert_int_equal(id.rec.created_ms, 10);
        assert_int_equal(id.rec.sleep_after_ms, 600000);
        assert_int_equal(id.rec.keep_alive, 1);
        assert_int_equal(id.rec.default_session, 0);
        assert_int_equal(id.rec.pid, 0);
        assert_string_equal(id.rec.sleep_mode, "memory");
        free(text);
        /* "files", the default, is left out: files of sandboxes made before stay as they are */
        rec.sleep_mode = "files";
        text = identity_format(&rec);
        assert_non_null(text);
        assert_null(strstr(text, "sleepMode"));
        assert_int_equal(identity_parse(text, strlen(text), &id), 0);
        assert_string_equal(id.rec.sleep_mode, "files");
        free(text);

        static const char *const bad[] = {
                "",
                "{}",
                "[]",
                "{\"name\":\"Bad Name\",\"image\":\"default\",\"instanceType\":\"lite\","
                "\"createdMs\":1,\"network\":\"none\",\"networkAllow\":[],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true}",
                "{\"name\":\"ok\",\"image\":\"../x\",\"instanceType\":\"lite\","
                "\"createdMs\":1,\"network\":\"none\",\"networkAllow\":[],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true}",
                "{\"name\":\"ok\",\"image\":\"default\",\"instanceType\":\"huge\","
                "\"createdMs\":1,\"network\":\"none\",\"networkAllow\":[],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true}",
                "{\"name\":\"ok\",\"image\":\"default\",\"instanceType\":\"lite\","
                "\"createdMs\":1,\"network\":\"all\",\"networkAllow\":[],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true}",
                "{\"name\":\"ok\",\"image\":\"default\",\"instanceType\":\"lite\","
                "\"createdMs\":1,\"network\":\"none\",\"networkAllow\":[1],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true}",
                "{\"name\":\"pool-3\",\"image\":\"default\",\"instanceType\":\"lite\","
                "\"createdMs\":1,\"network\":\"none\",\"networkAllow\":[],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true}",
                "{\"name\":\"ok\",\"image\":\"default\",\"instanceType\":\"lite\","
                "\"createdMs\":1,\"network\":\"none\",\"networkAllow\":[],\"sleepAfterMs\":1,"
                "\"keepAlive\":false,\"enableDefaultSession\":true,\"sleepMode\":\"disk\"}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(identity_parse(bad[i], strlen(bad[i]), &id), -EINVAL);
}

/* identity_write over a prepared (empty) temporary file, over a longer stale one, and
 * without one: the file holds exactly the text each time, and no temporary is left. */
static void test_identity_write(void **state)
{
        char dir[] = "/tmp/cella-test-identity.XXXXXX", path[128], tmp[128], buf[256];
        struct cella_error err = {0};

        assert_non_null(mkdtemp(dir));
        snprintf(path, sizeof(path), "%s/" IDENTITY_FILE, dir);
        snprintf(tmp, sizeof(tmp), "%s/." IDENTITY_FILE ".tmp", dir);
        const char *texts[] = {"{\"a\":1}", "{\"a\":1,\"b\":2}", "{}"};
        for (int round = 0; round < 3; round++) {
                if (round == 0) {
                        assert_int_equal(identity_prepare(dir), 0);
                } else if (round == 1) {
                        FILE *f = fopen(tmp, "w"); /* a longer stale temporary */
                        assert_non_null(f);
                        fputs("{\"stale\":\"xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx\"}", f);
                        fclose(f);
                }
                assert_int_equal(identity_write(dir, texts[round], &err), 0);
                FILE *f = fopen(path, "r");
                assert_non_null(f);
                size_t n = fread(buf, 1, sizeof(buf) - 1, f);
                fclose(f);
                buf[n] = '\0';
                assert_string_equal(buf, texts[round]);
                assert_true(identity_is(dir, texts[round]));
                assert_int_equal(access(tmp, F_OK), -1);
        }
        unlink(path);
        rmdir(dir);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_store_roundtrip, reg_setup, reg_teardown),
                cmocka_unit_test_setup_teardown(test_store_snapshots, reg_setup, reg_teardown),
                cmocka_unit_test_setup_teardown(test_store_batch, reg_setup, reg_teardown),
                cmocka_unit_test_setup_teardown(test_store_damaged, reg_setup, reg_teardown),
                cmocka_unit_test(test_store_open_failure),
                cmocka_unit_test(test_identity),
                cmocka_unit_test(test_identity_write),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
