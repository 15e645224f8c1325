/* The etcd client (src/daemon/etcd.h) against a real etcd: Debian's etcd-server, started by
 * the test on loopback ports with its own data dir (skipped when /usr/bin/etcd is missing),
 * requests driven by a libuv loop as in cellad. Also the answer decoders on crafted
 * answers and the endpoint list's checks. */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <fcntl.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/etcd.h"

#define ETCD_BIN "/usr/bin/etcd"

static pid_t etcd_pid = -1;
static char etcd_dir[] = "/tmp/cella-etcd-test-XXXXXX";
static char client_url[64];
static int dead_port; /* a loopback port nothing listens on */

static int free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t n = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        int port;

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &n), 0);
        port = ntohs(a.sin_port);
        close(fd);
        return port;
}

/* Run the loop until *done or the deadline (generous: a failure, not a timing). */
static void run_until(uv_loop_t *loop, const bool *done)
{
        for (int i = 0; i < 3000 && !*done; i++)
                uv_run(loop, UV_RUN_ONCE);
        assert_true(*done);
}

struct result {
        bool done;
        struct etcd_answer a; /* a copy of the scalars; kvs[0] copied below */
        char value0[256];
        size_t n_kvs;
};

static void on_answer(const struct etcd_answer *a, void *userdata)
{
        struct result *res = userdata;

        res->done = true;
        res->a = *a;
        res->a.kvs = NULL;
        res->n_kvs = a->n_kvs;
        if (a->n_kvs > 0)
                snprintf(res->value0, sizeof(res->value0), "%s", a->kvs[0].value);
}

static int etcd_up(void **state)
{
        int peer = free_port(), client = free_port();
        char peer_url[64], dir[128];

        if (access(ETCD_BIN, X_OK) != 0)
                return 0;
        dead_port = free_port();
        assert_non_null(mkdtemp(etcd_dir));
        snprintf(client_url, sizeof(client_url), "http://127.0.0.1:%d", client);
        snprintf(peer_url, sizeof(peer_url), "http://127.0.0.1:%d", peer);
        snprintf(dir, sizeof(dir), "%s/data", etcd_dir);
        etcd_pid = fork();
        assert_true(etcd_pid >= 0);
        if (etcd_pid == 0) {
                int null = open("/dev/null", O_WRONLY);
                char initial[128];

                dup2(null, 1);
                dup2(null, 2);
                snprintf(initial, sizeof(initial), "test=%s", peer_url);
                execl(ETCD_BIN, ETCD_BIN, "--name", "test", "--data-dir", dir,
                      "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                      "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                      "--initial-cluster", initial, (char *)NULL);
                _exit(127);
        }
        /* Ready when a range answers (within 30 s). */
        for (int i = 0; i < 300; i++) {
                uv_loop_t loop;
                struct etcd *e;
                struct result res = {0};
                struct cella_error err = {0};

                uv_loop_init(&loop);
                assert_int_equal(etcd_new(&loop, client_url, &e, &err), 0);
                assert_int_equal(etcd_range(e, "x", 1, false, on_answer, &res), 0);
                run_until(&loop, &res.done);
                etcd_free(e);
                uv_run(&loop, UV_RUN_DEFAULT);
                assert_int_equal(uv_loop_close(&loop), 0);
                if (res.a.r == 0)
                        return 0;
                usleep(100 * 1000);
        }
        fail_msg("etcd did not answer within 30 s");
        return -1;
}

static int etcd_down(void **state)
{
        char cmd[256];

        if (etcd_pid > 0) {
                kill(etcd_pid, SIGKILL);
                waitpid(etcd_pid, NULL, 0);
                snprintf(cmd, sizeof(cmd), "%s", etcd_dir);
                /* The data dir: two levels, etcd's own files. */
                pid_t p = fork();
                if (p == 0) {
                        execl("/bin/rm", "rm", "-rf", cmd, (char *)NULL);
                        _exit(127);
                }
                waitpid(p, NULL, 0);
        }
        return 0;
}

#define NEED_ETCD()                \
        do {                       \
                if (etcd_pid <= 0) \
                        skip();    \
        } while (0)

struct client {
        uv_loop_t loop;
        struct etcd *e;
};

static void client_open(struct client *c, const char *endpoints)
{
        struct cella_error err = {0};

        uv_loop_init(&c->loop);
        assert_int_equal(etcd_new(&c->loop, endpoints, &c->e, &err), 0);
}

static void client_close(struct client *c)
{
        etcd_free(c->e);
        uv_run(&c->loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&c->loop), 0);
}

static void test_put_range_delete(void **state)
{
        struct client c;
        struct result r1 = {0}, r2 = {0}, r3 = {0}, r4 = {0}, r5 = {0};
        const char value[] = "v\0with a NUL";

        NEED_ETCD();
        client_open(&c, client_url);
        assert_int_equal(etcd_put(c.e, "/t/a", 4, value, sizeof(value), 0, on_answer, &r1), 0);
        assert_int_equal(etcd_put(c.e, "/t/b", 4, "2", 1, 0, on_answer, &r2), 0);
        assert_false(r1.done); /* never called back before the request returns */
        run_until(&c.loop, &r1.done);
        run_until(&c.loop, &r2.done);
        assert_int_equal(r1.a.r, 0);
        assert_true(r2.a.revision > 0);

        assert_int_equal(etcd_range(c.e, "/t/", 3, true, on_answer, &r3), 0);
        run_until(&c.loop, &r3.done);
        assert_int_equal(r3.a.r, 0);
        assert_int_equal(r3.n_kvs, 2);
        assert_int_equal(r3.a.count, 2);
        assert_string_equal(r3.value0, "v");

        assert_int_equal(etcd_delete(c.e, "/t/", 3, true, on_answer, &r4), 0);
        run_until(&c.loop, &r4.done);
        assert_int_equal(r4.a.r, 0);
        assert_int_equal(r4.a.deleted, 2);

        assert_int_equal(etcd_range(c.e, "/t/a", 4, false, on_answer, &r5), 0);
        run_until(&c.loop, &r5.done);
        assert_int_equal(r5.a.r, 0);
        assert_int_equal(r5.n_kvs, 0);
        client_close(&c);
}

static void test_create_race(void **state)
{
        struct client c1, c2;
        struct result r[2] = {0};

        NEED_ETCD();
        client_open(&c1, client_url);
        client_open(&c2, client_url);
        assert_int_equal(etcd_create(c1.e, "/race", 5, "one", 3, 0, on_answer, &r[0]), 0);
        assert_int_equal(etcd_create(c2.e, "/race", 5, "two", 3, 0, on_answer, &r[1]), 0);
        while (!r[0].done || !r[1].done) {
                uv_run(&c1.loop, UV_RUN_NOWAIT);
                uv_run(&c2.loop, UV_RUN_NOWAIT);
                usleep(1000);
        }
        assert_int_equal(r[0].a.r, 0);
        assert_int_equal(r[1].a.r, 0);
        /* Exactly one won; the other read the winner's value. */
        assert_true(r[0].a.succeeded != r[1].a.succeeded);
        if (r[0].a.succeeded)
                assert_string_equal(r[1].value0, "one");
        else
                assert_string_equal(r[0].value0, "two");
        client_close(&c1);
        client_close(&c2);
}

/* etcd_txn with the pieces cluster.c and cluster-keys.c build: the prefix compare holds
 * while no key under the prefix was put after the revision read (an empty range too), and
 * fails once one was, so a count read at that revision is stale; the failure branch's range
 * is answered. */
static void test_txn_prefix(void **state)
{
        struct client c;
        struct result r[6] = {0};
        int64_t rev;

        NEED_ETCD();
        client_open(&c, client_url);
        /* an empty tenant: the compare holds against nothing */
        assert_int_equal(etcd_range(c.e, "/q/t/", 5, true, on_answer, &r[0]), 0);
        run_until(&c.loop, &r[0].done);
        rev = r[0].a.revision;
        assert_int_equal(etcd_txn(c.e,
                                  json_pack("[o, o]", etcd_cmp_absent("/q/t/a", 6),
                                            etcd_cmp_prefix_unchanged("/q/t/", 5, rev)),
                                  json_pack("[o, o]", etcd_req_put("/q/t/a", 6, "A", 1, 0),
                                            etcd_req_put("/q/mark", 7, "1", 1, 0)),
                                  json_pack("[o]", etcd_req_range("/q/t/a", 6)), on_answer, &r[1]),
                         0);
        run_until(&c.loop, &r[1].done);
        assert_int_equal(r[1].a.r, 0);
        assert_true(r[1].a.succeeded);
        /* another name counted at the old revision: the set moved, nothing is put */
        assert_int_equal(etcd_txn(c.e,
                                  json_pack("[o, o]", etcd_cmp_absent("/q/t/b", 6),
                                            etcd_cmp_prefix_unchanged("/q/t/", 5, rev)),
                                  json_pack("[o]", etcd_req_put("/q/t/b", 6, "B", 1, 0)),
                                  json_pack("[o]", etcd_req_range("/q/t/b", 6)), on_answer, &r[2]),
                         0);
        run_until(&c.loop, &r[2].done);
        assert_int_equal(r[2].a.r, 0);
        assert_false(r[2].a.succeeded);
        assert_int_equal(r[2].n_kvs, 0);
        /* counted again at the new revision: it holds */
        assert_int_equal(etcd_txn(c.e,
                                  json_pack("[o, o]", etcd_cmp_absent("/q/t/b", 6),
                                            etcd_cmp_prefix_unchanged("/q/t/", 5, r[1].a.revision)),
                                  json_pack("[o]", etcd_req_put("/q/t/b", 6, "B", 1, 0)),
                                  json_pack("[o]", etcd_req_range("/q/t/b", 6)), on_answer, &r[3]),
                         0);
        run_until(&c.loop, &r[3].done);
        assert_true(r[3].a.succeeded);
        /* present/delete: the first removes, the second finds nothing */
        assert_int_equal(etcd_txn(c.e, json_pack("[o]", etcd_cmp_present("/q/t/a", 6)),
                                  json_pack("[o]", etcd_req_delete("/q/t/a", 6)),
                                  json_pack("[o]", etcd_req_range("/q/t/a", 6)), on_answer, &r[4]),
                         0);
        run_until(&c.loop, &r[4].done);
        assert_true(r[4].a.succeeded);
        assert_int_equal(etcd_txn(c.e, json_pack("[o]", etcd_cmp_present("/q/t/a", 6)),
                                  json_pack("[o]", etcd_req_delete("/q/t/a", 6)),
                                  json_pack("[o]", etcd_req_range("/q/t/a", 6)), on_answer, &r[5]),
                         0);
        run_until(&c.loop, &r[5].done);
        assert_int_equal(r[5].a.r, 0);
        assert_false(r[5].a.succeeded);
        assert_int_equal(r[5].n_kvs, 0);
        client_close(&c);
}

static void test_lease(void **state)
{
        struct client c;
        struct result g = {0}, p = {0}, k = {0}, v = {0}, rg = {0}, k2 = {0};

        NEED_ETCD();
        client_open(&c, client_url);
        assert_int_equal(etcd_lease_grant(c.e, 30, on_answer, &g), 0);
        run_until(&c.loop, &g.done);
        assert_int_equal(g.a.r, 0);
        assert_true(g.a.lease_id != 0);
        assert_int_equal(g.a.ttl, 30);

        assert_int_equal(etcd_put(c.e, "/leased", 7, "x", 1, g.a.lease_id, on_answer, &p), 0);
        run_until(&c.loop, &p.done);
        assert_int_equal(p.a.r, 0);

        assert_int_equal(etcd_lease_keepalive(c.e, g.a.lease_id, on_answer, &k), 0);
        run_until(&c.loop, &k.done);
        assert_int_equal(k.a.r, 0);
        assert_int_equal(k.a.lease_id, g.a.lease_id);
        assert_int_equal(k.a.ttl, 30);

        /* A delete under another lease leaves the key; under its own it goes. */
        {
                struct result d1 = {0}, d2 = {0}, d3 = {0};

                assert_int_equal(
                        etcd_delete_leased(c.e, "/leased", 7, g.a.lease_id + 1, on_answer, &d1), 0);
                run_until(&c.loop, &d1.done);
                assert_int_equal(d1.a.r, 0);
                assert_false(d1.a.succeeded);
                assert_string_equal(d1.value0, "x");
                assert_int_equal(etcd_put(c.e, "/leased2", 8, "y", 1, g.a.lease_id, on_answer, &d2),
                                 0);
                run_until(&c.loop, &d2.done);
                assert_int_equal(
                        etcd_delete_leased(c.e, "/leased2", 8, g.a.lease_id, on_answer, &d3), 0);
                run_until(&c.loop, &d3.done);
                assert_int_equal(d3.a.r, 0);
                assert_true(d3.a.succeeded);
        }

        /* Revoking the lease deletes what was put under it. */
        assert_int_equal(etcd_lease_revoke(c.e, g.a.lease_id, on_answer, &v), 0);
        run_until(&c.loop, &v.done);
        assert_int_equal(v.a.r, 0);
        assert_int_equal(etcd_range(c.e, "/leased", 7, false, on_answer, &rg), 0);
        run_until(&c.loop, &rg.done);
        assert_int_equal(rg.n_kvs, 0);

        assert_int_equal(etcd_lease_keepalive(c.e, g.a.lease_id, on_answer, &k2), 0);
        run_until(&c.loop, &k2.done);
        assert_int_equal(k2.a.r, -ENOENT);
        assert_int_equal(k2.a.err.code, CELLA_E_CLUSTER_UNAVAILABLE);

        /* A put under a lease etcd does not know is refused, not retried. */
        struct result bad = {0};
        assert_int_equal(etcd_put(c.e, "/leased", 7, "x", 1, g.a.lease_id, on_answer, &bad), 0);
        run_until(&c.loop, &bad.done);
        assert_true(bad.a.r < 0);
        assert_int_equal(etcd_stats(c.e)->failovers, 0);
        client_close(&c);
}

static void test_failover(void **state)
{
        struct client c;
        struct result r = {0}, r2 = {0};
        char endpoints[160];

        NEED_ETCD();
        snprintf(endpoints, sizeof(endpoints), "http://127.0.0.1:%d,%s", dead_port, client_url);
        client_open(&c, endpoints);
        assert_int_equal(etcd_put(c.e, "/f", 2, "1", 1, 0, on_answer, &r), 0);
        run_until(&c.loop, &r.done);
        assert_int_equal(r.a.r, 0);
        assert_int_equal(etcd_stats(c.e)->failovers, 1);
        assert_string_equal(etcd_endpoint(c.e), client_url);
        assert_true(etcd_stats(c.e)->healthy);
        /* The next request goes to the endpoint that answered. */
        assert_int_equal(etcd_range(c.e, "/f", 2, false, on_answer, &r2), 0);
        run_until(&c.loop, &r2.done);
        assert_int_equal(r2.a.r, 0);
        assert_string_equal(r2.value0, "1");
        assert_int_equal(etcd_stats(c.e)->failovers, 1);
        assert_int_equal(etcd_stats(c.e)->requests[ETCD_OP_PUT], 1);
        assert_int_equal(etcd_stats(c.e)->requests[ETCD_OP_RANGE], 1);
        client_close(&c);
}

static void test_unreachable(void **state)
{
        struct client c;
        struct result r = {0};
        char endpoints[160];

        snprintf(endpoints, sizeof(endpoints), "http://127.0.0.1:%d,http://127.0.0.1:%d",
                 dead_port ? dead_port : free_port(), free_port());
        client_open(&c, endpoints);
        assert_int_equal(etcd_range(c.e, "/x", 2, false, on_answer, &r), 0);
        run_until(&c.loop, &r.done);
        assert_int_equal(r.a.r, -EAGAIN);
        assert_int_equal(r.a.err.code, CELLA_E_CLUSTER_UNAVAILABLE);
        assert_non_null(strstr(r.a.err.msg, "etcd unreachable"));
        assert_false(etcd_stats(c.e)->healthy);
        assert_int_equal(etcd_stats(c.e)->failures[ETCD_OP_RANGE], 1);
        client_close(&c);
}

static void test_free_cancels(void **state)
{
        struct client c;
        struct result r = {0};

        client_open(&c, "http://127.0.0.1:9");
        assert_int_equal(etcd_range(c.e, "/x", 2, false, on_answer, &r), 0);
        etcd_free(c.e);
        assert_true(r.done);
        assert_int_equal(r.a.r, -ECANCELED);
        uv_run(&c.loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&c.loop), 0);
}

static void test_endpoints(void **state)
{
        uv_loop_t loop;
        struct etcd *e = NULL;
        struct cella_error err = {0};
        static const char *const bad[] = {"",
                                          "127.0.0.1:2379",
                                          "http://",
                                          "ftp://h:1",
                                          "http://h:1,",
                                          "http://h:1/v3 x",
                                          "http://a b:1"};

        uv_loop_init(&loop);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                err = (struct cella_error){0};
                assert_int_equal(etcd_new(&loop, bad[i], &e, &err), -EINVAL);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        }
        assert_int_equal(etcd_new(&loop, "http://a:1,https://[::1]:2/", &e, &err), 0);
        assert_string_equal(etcd_endpoint(e), "http://a:1");
        etcd_free(e);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&loop), 0);
}

static void decode(enum etcd_op op, const char *s, struct etcd_answer *a)
{
        etcd_decode(op, s, strlen(s), a);
}

static void test_decode(void **state)
{
        struct etcd_answer a;

        decode(ETCD_OP_RANGE,
               "{\"header\":{\"revision\":\"7\"},\"kvs\":[{\"key\":\"YQ==\",\"value\":\"Yg==\","
               "\"create_revision\":\"3\",\"mod_revision\":\"4\",\"version\":\"2\","
               "\"lease\":\"99\"}],\"count\":\"1\"}",
               &a);
        assert_int_equal(a.r, 0);
        assert_int_equal(a.revision, 7);
        assert_int_equal(a.n_kvs, 1);
        assert_string_equal(a.kvs[0].key, "a");
        assert_string_equal(a.kvs[0].value, "b");
        assert_int_equal(a.kvs[0].create_revision, 3);
        assert_int_equal(a.kvs[0].lease, 99);
        etcd_answer_clear(&a);

        /* An empty range: every field left out. */
        decode(ETCD_OP_RANGE, "{\"header\":{}}", &a);
        assert_int_equal(a.r, 0);
        assert_int_equal(a.n_kvs, 0);

        /* The gateway's error object. */
        decode(ETCD_OP_PUT,
               "{\"error\":\"etcdserver: requested lease not found\",\"code\":5,"
               "\"message\":\"etcdserver: requested lease not found\"}",
               &a);
        assert_int_equal(a.r, -ENOENT);
        assert_non_null(strstr(a.err.msg, "lease not found"));

        /* A failed txn carries the owner; a succeeded one nothing. */
        decode(ETCD_OP_TXN,
               "{\"header\":{\"revision\":\"9\"},\"responses\":[{\"response_range\":{\"kvs\":"
               "[{\"key\":\"YQ==\",\"value\":\"bm9kZQ==\",\"create_revision\":\"8\"}],"
               "\"count\":\"1\"}}]}",
               &a);
        assert_int_equal(a.r, 0);
        assert_false(a.succeeded);
        assert_string_equal(a.kvs[0].value, "node");
        etcd_answer_clear(&a);
        decode(ETCD_OP_TXN, "{\"header\":{},\"succeeded\":true,\"responses\":[{}]}", &a);
        assert_true(a.succeeded);

        decode(ETCD_OP_LEASE_KEEPALIVE, "{\"result\":{\"ID\":\"12\",\"TTL\":\"5\"}}", &a);
        assert_int_equal(a.r, 0);
        assert_int_equal(a.ttl, 5);
        decode(ETCD_OP_LEASE_KEEPALIVE, "{\"result\":{\"ID\":\"12\"}}", &a);
        assert_int_equal(a.r, -ENOENT);

        /* What etcd never sends. */
        static const char *const bad[] = {
                "",
                "[]",
                "{\"kvs\":{}}",
                "{\"kvs\":[{\"key\":\"!!\"}]}",
                "{\"kvs\":[{}]}",
                "{\"count\":\"-1\"}",
                "{\"header\":{\"revision\":\"1x\"}}",
                "{\"kvs\":[{\"key\":\"YQ==\",\"lease\":\"99999999999999999999\"}]}",
                "{\"header\":[]}",
                "{\"code\":\"x\"}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                decode(ETCD_OP_RANGE, bad[i], &a);
                assert_true(a.r < 0);
                assert_int_equal(a.err.code, CELLA_E_CLUSTER_UNAVAILABLE);
                assert_null(a.kvs);
        }
        decode(ETCD_OP_TXN, "{\"header\":{}}", &a);
        assert_true(a.r < 0);
        decode(ETCD_OP_LEASE_GRANT, "{\"header\":{},\"TTL\":\"5\"}", &a);
        assert_true(a.r < 0);
}

static void test_int_parse(void **state)
{
        int64_t v;

        assert_int_equal(etcd_int_parse("0", &v), 0);
        assert_int_equal(v, 0);
        assert_int_equal(etcd_int_parse("-7", &v), 0);
        assert_int_equal(v, -7);
        assert_int_equal(etcd_int_parse("9223372036854775807", &v), 0);
        assert_int_equal(v, INT64_MAX);
        assert_int_equal(etcd_int_parse("9223372036854775808", &v), -EINVAL);
        assert_int_equal(etcd_int_parse("", &v), -EINVAL);
        assert_int_equal(etcd_int_parse("-", &v), -EINVAL);
        assert_int_equal(etcd_int_parse("1 ", &v), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest pure[] = {
                cmocka_unit_test(test_decode),
                cmocka_unit_test(test_int_parse),
                cmocka_unit_test(test_endpoints),
                cmocka_unit_test(test_free_cancels),
        };
        const struct CMUnitTest live[] = {
                cmocka_unit_test(test_put_range_delete), cmocka_unit_test(test_create_race),
                cmocka_unit_test(test_txn_prefix),       cmocka_unit_test(test_lease),
                cmocka_unit_test(test_failover),         cmocka_unit_test(test_unreachable),
        };
        int failed = cmocka_run_group_tests_name("etcd answers", pure, NULL, NULL);

        return failed + cmocka_run_group_tests_name("etcd live", live, etcd_up, etcd_down);
}
