/* Tenants' keys on a cluster (daemon/cluster-keys.h): what a node writes decodes to the same
 * key on every node, and a record that is not one is refused, never half read; and, against
 * a real etcd (Debian's etcd-server on loopback ports, skipped without /usr/bin/etcd), two
 * nodes' copies: a registry's key copied into etcd when its node joins, a key made on one
 * node found by the other, a key removed on one refused by the other, etcd gone and the
 * copy kept while a new key is refused. */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <netinet/in.h>
#include <unistd.h>

#include <cmocka.h>

#include "daemon/cluster-keys.h"
#include "daemon/etcd.h"

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

/* ---- two nodes' copies on a real etcd ---- */

#define ETCD_BIN "/usr/bin/etcd"

static pid_t etcd_pid = -1;
static char tmp_dir[] = "/tmp/cella-ckeys-test-XXXXXX";
static char client_url[64];

static int free_port(void)
{
        struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t len = sizeof(a);
        int fd = socket(AF_INET, SOCK_STREAM, 0), port;

        assert_true(fd >= 0);
        assert_int_equal(bind(fd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(getsockname(fd, (struct sockaddr *)&a, &len), 0);
        port = ntohs(a.sin_port);
        close(fd);
        return port;
}

static void etcd_stop(void)
{
        if (etcd_pid > 0) {
                kill(etcd_pid, SIGKILL);
                waitpid(etcd_pid, NULL, 0);
        }
        etcd_pid = -1;
}

static int etcd_up(void **state)
{
        char peer_url[64], dir[128], initial[128];
        int peer = free_port(), client = free_port();

        (void)state;
        if (access(ETCD_BIN, X_OK) != 0)
                return 0;
        assert_non_null(mkdtemp(tmp_dir));
        snprintf(client_url, sizeof(client_url), "http://127.0.0.1:%d", client);
        snprintf(peer_url, sizeof(peer_url), "http://127.0.0.1:%d", peer);
        snprintf(dir, sizeof(dir), "%s/etcd", tmp_dir);
        snprintf(initial, sizeof(initial), "test=%s", peer_url);
        etcd_pid = fork();
        assert_true(etcd_pid >= 0);
        if (etcd_pid == 0) {
                int null = open("/dev/null", O_WRONLY);

                dup2(null, 1);
                dup2(null, 2);
                execl(ETCD_BIN, ETCD_BIN, "--name", "test", "--data-dir", dir,
                      "--listen-client-urls", client_url, "--advertise-client-urls", client_url,
                      "--listen-peer-urls", peer_url, "--initial-advertise-peer-urls", peer_url,
                      "--initial-cluster", initial, (char *)NULL);
                _exit(127);
        }
        return 0;
}

static int etcd_down(void **state)
{
        (void)state;
        etcd_stop();
        if (tmp_dir[sizeof(tmp_dir) - 7] != 'X') {
                pid_t p = fork();

                if (p == 0) {
                        execl("/bin/rm", "rm", "-rf", tmp_dir, (char *)NULL);
                        _exit(127);
                }
                waitpid(p, NULL, 0);
        }
        return 0;
}

struct done {
        bool called;
        int r;
        int code;
};

static void on_done(int r, const struct cella_error *err, void *ud)
{
        struct done *d = ud;

        d->called = true;
        d->r = r;
        d->code = err ? err->code : 0;
}

static int found(const struct store_key *k, void *ud)
{
        snprintf(ud, 32, "%s", k->tenant);
        return 0;
}

/* Is the key of that id in k's copy? (Asking for an unknown one starts a poll.) */
static bool has(struct cluster_keys *k, const char *id)
{
        char tenant[32] = "";

        return cluster_keys_get(k, id, found, tenant) == 0;
}

/* Run the loop until cond holds, for at most about 30 s (a failure, not a timing). */
#define RUN_UNTIL(loop, cond)                                  \
        do {                                                   \
                for (int i_ = 0; i_ < 3000 && !(cond); i_++) { \
                        uv_run(loop, UV_RUN_NOWAIT);           \
                        usleep(10 * 1000);                     \
                }                                              \
                assert_true(cond);                             \
        } while (0)

static void test_two_nodes(void **state)
{
        uv_loop_t loop;
        struct cella_error err = {0};
        struct etcd *e1, *e2;
        struct cluster_keys *k1, *k2;
        struct store *st;
        char path[160];
        struct store_key reg = {.id = "aaaaaaaaaaaa",
                                .tenant = "reg",
                                .secret_sha256 = HASH,
                                .created_ms = 1,
                                .max_sandboxes = 1},
                         made = {.id = "bbbbbbbbbbbb",
                                 .tenant = "acme",
                                 .secret_sha256 = HASH,
                                 .created_ms = 2};
        struct done d1 = {0}, d2 = {0}, d3 = {0}, d4 = {0};

        (void)state;
        if (etcd_pid <= 0)
                skip();
        snprintf(path, sizeof(path), "%s/cella.db", tmp_dir);
        assert_int_equal(store_open(path, &st, &err), 0);
        assert_int_equal(store_key_save(st, &reg, &err), 0);
        uv_loop_init(&loop);
        assert_int_equal(etcd_new(&loop, client_url, &e1, &err), 0);
        assert_int_equal(etcd_new(&loop, client_url, &e2, &err), 0);
        /* node 1 joins with a registry's key; node 2 has none of its own */
        assert_int_equal(cluster_keys_new(&loop, e1, st, &k1), 0);
        assert_int_equal(cluster_keys_new(&loop, e2, NULL, &k2), 0);
        RUN_UNTIL(&loop, cluster_keys_loaded(k1) && cluster_keys_loaded(k2) && has(k1, reg.id) &&
                                 has(k2, reg.id));

        /* made on node 1: there at once, on node 2 after its poll */
        assert_int_equal(cluster_keys_create(k1, &made, on_done, &d1), 0);
        assert_false(d1.called);
        RUN_UNTIL(&loop, d1.called);
        assert_int_equal(d1.r, 0);
        assert_true(has(k1, made.id));
        RUN_UNTIL(&loop, has(k2, made.id));
        assert_int_equal(cluster_keys_count(k2), 2);

        /* the same id again: taken */
        assert_int_equal(cluster_keys_create(k2, &made, on_done, &d2), 0);
        RUN_UNTIL(&loop, d2.called);
        assert_int_equal(d2.r, -EEXIST);

        /* removed on node 2: gone there at once, on node 1 after its poll */
        assert_int_equal(cluster_keys_delete(k2, made.id, on_done, &d3), 0);
        RUN_UNTIL(&loop, d3.called);
        assert_int_equal(d3.r, 1);
        assert_false(has(k2, made.id));
        RUN_UNTIL(&loop, !has(k1, made.id));
        assert_true(has(k1, reg.id));

        /* etcd gone: the copy stays, a new key is CLUSTER_UNAVAILABLE */
        etcd_stop();
        for (int i = 0; i < 150; i++) { /* three polls and more */
                uv_run(&loop, UV_RUN_NOWAIT);
                usleep(10 * 1000);
        }
        assert_true(has(k1, reg.id) && has(k2, reg.id));
        assert_int_equal(cluster_keys_create(k1, &made, on_done, &d4), 0);
        RUN_UNTIL(&loop, d4.called);
        assert_true(d4.r < 0);
        assert_int_equal(d4.code, CELLA_E_CLUSTER_UNAVAILABLE);
        assert_false(has(k1, made.id));

        cluster_keys_free(k1);
        cluster_keys_free(k2);
        etcd_free(e1);
        etcd_free(e2);
        uv_run(&loop, UV_RUN_DEFAULT);
        assert_int_equal(uv_loop_close(&loop), 0);
        store_close(st);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_round_trip),
                cmocka_unit_test(test_refused),
        };
        const struct CMUnitTest live[] = {
                cmocka_unit_test(test_two_nodes),
        };
        int failed = cmocka_run_group_tests_name("key records", tests, NULL, NULL);

        return failed + cmocka_run_group_tests_name("keys live", live, etcd_up, etcd_down);
}
