/* The sandbox table through its directory operations (sandbox-directory.h), with the real
 * runtime on the default image: state transitions, a start off the loop that gets of one
 * name wait for (started once), a synchronous get joining such a start, a wake after PID 1
 * died, PUT (a new name off the loop, an update at once), the warm pool's claim, and a
 * failed start undone at each step (the spec, the runtime). Needs root, the default image
 * and a built cella-init; skips otherwise.
 *
 * Network range: a /18 of 10.128.0.0/9 taken with the integration tests' lock files
 * (tests/integration/lib.sh it_net_range), so that parallel runs never share one. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/log.h"
#include "daemon/sandbox-directory.h"
#include "daemon/sandbox-internal.h"
#include "runtime/cgroup.h"

#define IMAGES "/var/lib/cella/images"
#define AGENT CELLA_BUILD_DIR "/cella-init"

static uv_loop_t loop;
static char tmpdir[] = "/tmp/cella-test-sandbox-XXXXXX";
static char images[CELLA_PATH_MAX], netrange[24], netlock[64];
static bool ready;
static struct sandbox_table *current; /* closed by the test's teardown if still open */
static struct cgroup_layout layout;

/* ---- helpers ---- */

static int take_net_range(void)
{
        int lock;

        mkdir("/tmp/cella-it-net", 0755);
        lock = open("/tmp/cella-it-net/.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock < 0 || flock(lock, LOCK_EX) < 0)
                return -1;
        for (int i = 0; i < 512; i++) {
                char path[64], owner[32] = "";
                FILE *f;

                if (i >= 340 && i <= 343)
                        continue; /* the automatic choice of daemons without a range */
                snprintf(path, sizeof(path), "/tmp/cella-it-net/%d", i);
                f = fopen(path, "r");
                if (f) {
                        if (!fgets(owner, sizeof(owner), f))
                                owner[0] = '\0';
                        fclose(f);
                }
                if (owner[0] && kill((pid_t)strtol(owner, NULL, 10), 0) == 0)
                        continue;
                f = fopen(path, "w");
                if (!f)
                        continue;
                fprintf(f, "%d\n", (int)getpid());
                fclose(f);
                snprintf(netlock, sizeof(netlock), "%s", path);
                snprintf(netrange, sizeof(netrange), "10.%d.%d.0/18", 128 + i / 4, i % 4 * 64);
                close(lock);
                return 0;
        }
        close(lock);
        return -1;
}

static void rm_tree(const char *path)
{
        pid_t pid = fork();

        if (pid == 0) {
                execl("/bin/rm", "rm", "-rf", "--", path, (char *)NULL);
                _exit(127);
        }
        waitpid(pid, NULL, 0);
}

static void on_tick(uv_timer_t *t)
{
        (void)t;
}

/* Run the loop until *flag (or n callbacks) or 120 s (a hang guard: the test fails). */
static void run_until(const unsigned *count, unsigned want)
{
        uv_timer_t tick;
        int64_t until = time(NULL) + 120;

        uv_timer_init(&loop, &tick);
        uv_timer_start(&tick, on_tick, 20, 20);
        while (*count < want && time(NULL) < until)
                uv_run(&loop, UV_RUN_ONCE);
        uv_close((uv_handle_t *)&tick, NULL);
        uv_run(&loop, UV_RUN_NOWAIT);
        assert_true(*count >= want);
}

/* Each test opens the table on the same data dir (its instance claim, with the network
 * range, belongs to the data dir) and leaves it empty. */
static struct sandbox_table *table_open(unsigned pool)
{
        char data[CELLA_PATH_MAX];
        struct cella_error err = {0};
        struct sandbox_table *t = NULL;

        snprintf(data, sizeof(data), "%s/data", tmpdir);
        struct sandbox_table_config cfg = {
                .data_dir = data,
                .images_dir = images,
                .default_image = "default",
                .agent_path = AGENT,
                .max_sandboxes = 8,
                .pool_size = pool,
                .network_range = netrange,
        };
        if (sandbox_table_new(&loop, &cfg, &t, &err) < 0)
                fail_msg("sandbox_table_new: %s", err.msg);
        current = t;
        return t;
}

static void table_close(struct sandbox_table *t)
{
        struct cella_error err = {0};
        json_t *list = sandbox_table_list(t), *v;
        size_t i;

        json_array_foreach(list, i, v)
        {
                bool existed;
                assert_int_equal(sandbox_table_destroy(t,
                                                       json_string_value(json_object_get(v, "id")),
                                                       &existed, &err),
                                 0);
        }
        json_decref(list);
        sandbox_table_free(t);
        current = NULL;
        uv_run(&loop, UV_RUN_NOWAIT); /* closes what the table closed */
}

/* After a failed test too: nothing of it stays on the host. */
static int test_teardown(void **state)
{
        *state = NULL;
        if (current) {
                struct sandbox_table *t = current;
                for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                        while (t->buckets[i]) {
                                bool existed;
                                char name[CELLA_NAME_MAX + 1];
                                snprintf(name, sizeof(name), "%s", t->buckets[i]->name);
                                sandbox_table_destroy(t, name, &existed, NULL);
                        }
                sandbox_table_free(t);
                current = NULL;
                uv_run(&loop, UV_RUN_NOWAIT);
        }
        return 0;
}

/* What a get called back with. */
struct got {
        unsigned calls;
        struct sandbox *s;
        bool created;
        int code;
        char msg[256];
};

static void on_got(struct sandbox *s, bool created, const struct cella_error *err, void *ud)
{
        struct got *g = ud;

        g->calls++;
        g->s = s;
        g->created = created;
        g->code = err ? err->code : 0;
        snprintf(g->msg, sizeof(g->msg), "%s", err ? err->msg : "");
}

static const char *state_of(struct sandbox *s)
{
        static char buf[32];
        json_t *info = sandbox_info(s);

        snprintf(buf, sizeof(buf), "%s", json_string_value(json_object_get(info, "state")));
        json_decref(info);
        return buf;
}

/* Nothing of slot is left: no directory, no cgroup (v2). */
static void assert_slot_gone(struct sandbox_table *t, unsigned slot)
{
        char path[CELLA_PATH_MAX + 64], cg[32];
        struct stat st;

        snprintf(path, sizeof(path), "%s/sandboxes/s%u", t->data_dir, slot);
        assert_int_not_equal(stat(path, &st), 0);
        sandbox_instance_name(t->data_dir, cg, sizeof(cg));
        snprintf(path, sizeof(path), "%s/%s/s%u", layout.v2_root, cg, slot);
        assert_int_not_equal(stat(path, &st), 0);
        assert_int_equal(t->slot_used[slot], 0);
}

/* The test's table (from its setup) and directory; the test is skipped without one. */
#define TABLE_OR_SKIP(t, d)               \
        struct sandbox_table *t = *state; \
        if (!t)                           \
                skip();                   \
        struct sandbox_directory *d = sandbox_table_directory(t)

/* g was called back calls times, the last time with code (0: success). */
static void expect_got(const struct got *g, unsigned calls, int code)
{
        assert_int_equal(g->calls, calls);
        assert_int_equal(g->code, code);
}

/* Each test gets a table (in *state; NULL when the host cannot run sandboxes). */
static int with_table(void **state)
{
        *state = ready ? table_open(0) : NULL;
        return 0;
}

static int with_pool(void **state)
{
        *state = ready ? table_open(1) : NULL;
        return 0;
}

/* ---- tests ---- */

static const struct sandbox_options no_net = {.network = "none"};

/* Lookup, create, a get of a running one, and the states SandboxInfo shows. */
static void test_states(void **state)
{
        TABLE_OR_SKIP(t, d);
        struct cella_error err = {0};
        struct got g = {0};
        struct sandbox *s = NULL;

        d->ops->get(d, "states", false, NULL, on_got, &g);
        assert_int_equal(g.calls, 1); /* a lookup is answered at once */
        assert_int_equal(g.code, CELLA_E_SANDBOX_NOT_FOUND);

        memset(&g, 0, sizeof(g));
        d->ops->get(d, "states", true, &no_net, on_got, &g);
        run_until(&g.calls, 1);
        assert_int_equal(g.code, 0);
        assert_true(g.created);
        assert_int_equal(d->ops->get_now(d, "states", &s, &err), 0);
        assert_ptr_equal(s, g.s);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_string_equal(state_of(s), "running");
        assert_non_null(sandbox_agent(s));
        assert_int_equal(d->ops->count(d), 1);

        memset(&g, 0, sizeof(g));
        d->ops->get(d, "states", true, NULL, on_got, &g);
        assert_int_equal(g.calls, 1); /* running: no start, answered at once */
        assert_ptr_equal(g.s, s);
        assert_false(g.created);

        /* PID 1 dies: STOPPED, which a lookup does not change. */
        kill(s->ct.pid, SIGKILL);
        while (s->state == SANDBOX_RUNNING)
                uv_run(&loop, UV_RUN_ONCE);
        assert_int_equal(s->state, SANDBOX_STOPPED);
        assert_string_equal(state_of(s), "stopped");
        assert_null(sandbox_agent(s));
        memset(&g, 0, sizeof(g));
        d->ops->get(d, "states", false, NULL, on_got, &g);
        assert_int_equal(g.calls, 1);
        assert_int_equal(s->state, SANDBOX_STOPPED);

        /* A get with create wakes it off the loop: STARTING until the callback. */
        int64_t before = sandbox_instance(s);
        memset(&g, 0, sizeof(g));
        d->ops->get(d, "states", true, NULL, on_got, &g);
        assert_int_equal(g.calls, 0);
        assert_int_equal(s->state, SANDBOX_STARTING);
        assert_non_null(s->job);
        assert_string_equal(state_of(s), "stopped"); /* not visible to clients */
        run_until(&g.calls, 1);
        assert_int_equal(g.code, 0);
        assert_ptr_equal(g.s, s);
        assert_false(g.created);
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_null(s->job);
        assert_non_null(sandbox_agent(s));
        assert_int_not_equal(sandbox_instance(s), before);

        bool existed = false;
        unsigned slot = s->slot;
        assert_int_equal(d->ops->destroy(d, "states", &existed, &err), 0);
        assert_true(existed);
        assert_int_equal(d->ops->count(d), 0);
        assert_slot_gone(t, slot);
        table_close(t);
}

/* Gets of one new name while it starts wait for that one start. */
static void test_start_once(void **state)
{
        TABLE_OR_SKIP(t, d);
        struct got g[3] = {{0}};
        unsigned done = 0;

        for (int i = 0; i < 3; i++)
                d->ops->get(d, "once", true, &no_net, on_got, &g[i]);
        assert_int_equal(g[0].calls + g[1].calls + g[2].calls, 0);
        assert_int_equal(d->ops->count(d), 1);
        struct sandbox *s = table_find(t, "once");
        assert_non_null(s);
        assert_int_equal(s->state, SANDBOX_STARTING);
        unsigned used = 0;
        for (unsigned i = 0; i < CELLA_UID_SLOTS; i++)
                used += t->slot_used[i];
        assert_int_equal(used, 1); /* one slot, one container */
        /* A lookup meanwhile does not wait for the start. */
        struct cella_error err = {0};
        struct sandbox *seen = NULL;
        assert_int_equal(d->ops->get_now(d, "once", &seen, &err), 0);
        assert_ptr_equal(seen, s);
        assert_int_equal(s->state, SANDBOX_STARTING);
        assert_false(sandbox_running(s));

        while (done < 3) {
                run_until(&g[2].calls, 1);
                done = g[0].calls + g[1].calls + g[2].calls;
        }
        for (int i = 0; i < 3; i++) {
                expect_got(&g[i], 1, 0);
                assert_ptr_equal(g[i].s, s);
                assert_int_equal(g[i].created, i == 0); /* the first get made it */
        }
        assert_int_equal(s->state, SANDBOX_RUNNING);
        assert_int_equal(d->ops->count(d), 1);
        table_close(t);
}

/* PUT: a new name starts off the loop; an existing one is updated at once. */
static void test_put(void **state)
{
        TABLE_OR_SKIP(t, d);
        json_t *labels = json_pack("{s:s}", "team", "a");
        struct sandbox_options o = {.network = "none", .labels = labels};
        struct got g = {0};

        d->ops->put(d, "put", &o, on_got, &g);
        json_decref(labels); /* read before put returned */
        assert_int_equal(g.calls, 0);
        run_until(&g.calls, 1);
        assert_int_equal(g.code, 0);
        assert_true(g.created);
        assert_int_equal(g.s->state, SANDBOX_RUNNING);
        assert_string_equal(json_string_value(json_object_get(g.s->labels, "team")), "a");

        struct sandbox_options keep = {.has_keep_alive = true, .keep_alive = true};
        memset(&g, 0, sizeof(g));
        d->ops->put(d, "put", &keep, on_got, &g);
        expect_got(&g, 1, 0);
        assert_false(g.created);
        assert_true(g.s->keep_alive);

        struct sandbox_options other = {.image = "broken"};
        memset(&g, 0, sizeof(g));
        d->ops->put(d, "put", &other, on_got, &g);
        expect_got(&g, 1, CELLA_E_VALIDATION_FAILED);
        assert_non_null(strstr(g.msg, "exists with image 'default'"));
        table_close(t);
}

/* An update by PUT joins a start in progress (it must not race the worker); the waiting
 * get is answered by then. */
static void test_join(void **state)
{
        TABLE_OR_SKIP(t, d);
        struct got g = {0}, g2 = {0};
        struct sandbox *s = NULL;

        d->ops->get(d, "joined", true, &no_net, on_got, &g);
        assert_int_equal(g.calls, 0);
        d->ops->put(d, "joined", &no_net, on_got, &g2);
        expect_got(&g2, 1, 0);    /* answered before put returned */
        assert_false(g2.created); /* the first get made it */
        s = g2.s;
        assert_int_equal(s->state, SANDBOX_RUNNING);
        expect_got(&g, 1, 0);
        assert_ptr_equal(g.s, s);
        assert_true(g.created);
        /* The job's after-work callback still comes, and finds nothing left to do. */
        uv_run(&loop, UV_RUN_NOWAIT);
        assert_int_equal(g.calls, 1);
        table_close(t);
}

/* A failed start is undone, at each step: nothing of the sandbox is left. */
static void test_failure_undone(void **state)
{
        TABLE_OR_SKIP(t, d);
        struct sandbox *s = NULL;
        struct got g = {0};

        /* The image is not there: refused before anything is made. */
        struct sandbox_options absent = {.image = "absent", .network = "none"};
        d->ops->get(d, "f1", true, &absent, on_got, &g);
        expect_got(&g, 1, CELLA_E_IMAGE_NOT_FOUND);
        assert_int_equal(d->ops->count(d), 0);

        /* The spec step (an instance type the decoder would have refused): the slot taken
         * for it is given back. */
        struct sandbox_options badtype = {.instance_type = "nope", .network = "none"};
        memset(&g, 0, sizeof(g));
        d->ops->get(d, "f2", true, &badtype, on_got, &g);
        expect_got(&g, 1, CELLA_E_VALIDATION_FAILED);
        assert_int_equal(d->ops->count(d), 0);
        for (unsigned i = 0; i < CELLA_UID_SLOTS; i++)
                assert_int_equal(t->slot_used[i], 0);

        /* The runtime step, off the loop: an image whose rootfs the kernel refuses to
         * mount idmapped (it is in procfs). Every waiter
         * gets the error, and the sandbox, its slot, directory and cgroups are gone. */
        struct sandbox_options broken = {.image = "broken", .network = "none"};
        struct got g2 = {0};
        memset(&g, 0, sizeof(g));
        d->ops->get(d, "f3", true, &broken, on_got, &g);
        d->ops->get(d, "f3", true, NULL, on_got, &g2);
        assert_int_equal(g.calls + g2.calls, 0);
        s = table_find(t, "f3");
        assert_non_null(s);
        unsigned slot = s->slot;
        run_until(&g2.calls, 1);
        assert_int_equal(g.calls, 1);
        assert_int_not_equal(g.code, 0);
        assert_int_equal(g2.code, g.code);
        assert_null(g.s);
        print_message("runtime failure as expected: %s\n", g.msg);
        assert_null(table_find(t, "f3"));
        assert_int_equal(d->ops->count(d), 0);
        assert_slot_gone(t, slot);

        table_close(t);
}

/* The warm pool builds off the loop; a new name of the default options is a claim. */
static void test_pool_claim(void **state)
{
        TABLE_OR_SKIP(t, d);
        struct got g = {0};

        run_until(&t->pool_len, 1);
        assert_int_equal(t->pool_builds, 1);
        struct sandbox *pooled = t->pool;
        assert_int_equal(pooled->state, SANDBOX_RUNNING);
        assert_true(pooled->pooled);

        d->ops->get(d, "claimed", true, NULL, on_got, &g);
        assert_int_equal(g.calls, 1); /* a claim: answered at once */
        assert_int_equal(g.code, 0);
        assert_true(g.created);
        assert_ptr_equal(g.s, pooled);
        assert_false(pooled->pooled);
        assert_true(pooled->claimed);
        assert_string_equal(sandbox_name(pooled), "claimed");
        assert_int_equal(t->pool_claims, 1);
        assert_int_equal(t->pool_len, 0);

        /* The pool refills, off the loop again. */
        run_until(&t->pool_len, 1);
        assert_int_equal(t->pool_builds, 2);
        table_close(t);
}

/* ---- setup ---- */

static int group_setup(void **state)
{
        char path[CELLA_PATH_MAX + 32];
        struct stat st;

        (void)state;
        log_set_level(LOG_LEVEL_WARN);
        uv_loop_init(&loop);
        if (geteuid() != 0) {
                print_message("SKIP: sandbox table tests need root\n");
                return 0;
        }
        if (stat(IMAGES "/default/.complete", &st) < 0) {
                print_message("SKIP: default image missing at " IMAGES "/default\n");
                return 0;
        }
        if (access(AGENT, X_OK) < 0) {
                print_message("SKIP: %s not built\n", AGENT);
                return 0;
        }
        if (!mkdtemp(tmpdir) || take_net_range() < 0)
                return -1;
        /* The default image, and one that cannot start (see test_failure_undone). */
        snprintf(images, sizeof(images), "%s/images", tmpdir);
        mkdir(images, 0755);
        snprintf(path, sizeof(path), "%s/default", images);
        if (symlink(IMAGES "/default", path) < 0)
                return -1;
        snprintf(path, sizeof(path), "%s/broken", images);
        mkdir(path, 0755);
        snprintf(path, sizeof(path), "%s/broken/rootfs", images);
        if (symlink("/proc/sys", path) < 0 || cgroup_detect_host(&layout) < 0)
                return -1;
        snprintf(path, sizeof(path), "%s/broken/.complete", images);
        close(open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
        ready = true;
        return 0;
}

static int group_teardown(void **state)
{
        (void)state;
        if (ready) {
                char data[CELLA_PATH_MAX], name[32], claim[CELLA_PATH_MAX];

                snprintf(data, sizeof(data), "%s/data", tmpdir);
                sandbox_instance_name(data, name, sizeof(name));
                snprintf(claim, sizeof(claim), "/run/cella/instances/%s", name);
                rm_tree(tmpdir);
                unlink(claim); /* stale now anyway: its data dir is gone */
                unlink(netlock);
        }
        uv_run(&loop, UV_RUN_NOWAIT);
        uv_loop_close(&loop);
        return 0;
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test_setup_teardown(test_states, with_table, test_teardown),
                cmocka_unit_test_setup_teardown(test_start_once, with_table, test_teardown),
                cmocka_unit_test_setup_teardown(test_put, with_table, test_teardown),
                cmocka_unit_test_setup_teardown(test_join, with_table, test_teardown),
                cmocka_unit_test_setup_teardown(test_failure_undone, with_table, test_teardown),
                cmocka_unit_test_setup_teardown(test_pool_claim, with_pool, test_teardown),
        };
        return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
