/* runtime/host-limits: what n sandboxes need of the kernel's limits and of cellad's
 * descriptors, the sysctl reader, the --check report and the descriptor raise. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include <cmocka.h>

#include "common/limits.h"
#include "runtime/host-limits.h"

static const struct host_limit *find(const char *name)
{
        for (size_t i = 0; i < host_limits_count(); i++)
                if (strcmp(host_limit_at(i)->name, name) == 0)
                        return host_limit_at(i);
        return NULL;
}

static void test_need(void **state)
{
        const struct host_limit *pid = find("kernel.pid_max");
        const struct host_limit *userns = find("user.max_user_namespaces");
        const struct host_limit *neigh = find("net.ipv4.neigh.default.gc_thresh3");
        const struct host_limit *nr_open = find("fs.nr_open");

        (void)state;
        assert_non_null(pid);
        assert_non_null(userns);
        assert_non_null(neigh);
        assert_non_null(nr_open);
        assert_null(host_limit_at(host_limits_count()));
        /* 10,000 sandboxes: three pids each beside the host's 4096, a user namespace each */
        assert_int_equal(host_limit_need(pid, 10000), 54096);
        assert_int_equal(host_limit_need(userns, 10000), 10064);
        assert_true(neigh->outbound_only);
        assert_false(pid->outbound_only);
        assert_int_equal(host_limit_need(neigh, 10000), 10128);
        /* descriptors: two per sandbox beside cellad's own */
        assert_int_equal(host_limits_fds(0), HOST_LIMITS_FDS_BASE);
        assert_int_equal(host_limits_fds(10000), HOST_LIMITS_FDS_BASE + 10000);
        assert_int_equal(host_limit_need(nr_open, 10000), host_limits_fds(10000));
        /* and back: what a limit holds */
        assert_int_equal(host_limits_fit(host_limits_fds(10000)), 10000);
        assert_int_equal(host_limits_fit(host_limits_fds(10000) - 1), 9999);
        assert_int_equal(host_limits_fit(20000), 20000 - HOST_LIMITS_FDS_BASE);
        assert_int_equal(host_limits_fit(10), 0);
        /* every limit's need grows with n, none shrinks */
        for (size_t i = 0; i < host_limits_count(); i++) {
                const struct host_limit *l = host_limit_at(i);
                assert_true(host_limit_need(l, CELLA_UID_SLOTS_MAX) >= host_limit_need(l, 1));
                assert_non_null(l->what);
        }
}

static void test_read(void **state)
{
        uint64_t v = 0;

        (void)state;
        assert_int_equal(host_limit_read("kernel.pid_max", &v), 0);
        assert_true(v >= 301); /* the kernel's minimum */
        assert_int_equal(host_limit_read("kernel.no_such_limit", &v), -ENOENT);
        assert_int_equal(host_limit_read("kernel.ostype", &v), -EINVAL); /* "Linux" */
}

static void test_report(void **state)
{
        char *text = NULL;
        size_t len = 0;
        uint64_t pid_max;
        FILE *f;
        int low;

        (void)state;
        assert_int_equal(host_limit_read("kernel.pid_max", &pid_max), 0);
        /* so many sandboxes that kernel.pid_max cannot hold them: named, with its value */
        unsigned n = CELLA_UID_SLOTS_MAX;
        f = open_memstream(&text, &len);
        assert_non_null(f);
        low = host_limits_report(n, f);
        fclose(f);
        for (size_t i = 0; i < host_limits_count(); i++)
                assert_non_null(strstr(text, host_limit_at(i)->name));
        assert_non_null(strstr(text, "descriptors (RLIMIT_NOFILE)"));
        if (pid_max < host_limit_need(find("kernel.pid_max"), n)) {
                char want[128];
                snprintf(want, sizeof(want), "set kernel.pid_max = %llu",
                         (unsigned long long)host_limit_need(find("kernel.pid_max"), n));
                assert_non_null(strstr(text, want));
                assert_true(low >= 1);
        }
        free(text);
        /* one sandbox: nothing this host runs tests on is too low for it */
        text = NULL;
        f = open_memstream(&text, &len);
        low = host_limits_report(1, f);
        fclose(f);
        assert_int_equal(low, 0);
        assert_null(strstr(text, "too low"));
        free(text);
}

static void test_raise_nofile(void **state)
{
        struct rlimit rl, was;

        (void)state;
        assert_int_equal(getrlimit(RLIMIT_NOFILE, &was), 0);
        /* a need below the soft limit: nothing changes */
        rl = was;
        rl.rlim_cur = 64;
        assert_int_equal(setrlimit(RLIMIT_NOFILE, &rl), 0);
        assert_int_equal(host_limits_raise_nofile(32), 64);
        /* a need within the hard limit: the soft one is raised to it */
        if (was.rlim_max == RLIM_INFINITY || was.rlim_max >= 128) {
                assert_int_equal(host_limits_raise_nofile(128), 128);
                assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
                assert_int_equal(rl.rlim_cur, 128);
        }
        /* beyond the hard limit: the hard one where the process may, else the hard one */
        if (was.rlim_max != RLIM_INFINITY) {
                uint64_t got = host_limits_raise_nofile((uint64_t)was.rlim_max + 1);
                assert_int_equal(getrlimit(RLIMIT_NOFILE, &rl), 0);
                assert_int_equal(got, rl.rlim_cur);
                assert_true(got == was.rlim_max || got == was.rlim_max + 1);
        }
        setrlimit(RLIMIT_NOFILE, &was);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_need),
                cmocka_unit_test(test_read),
                cmocka_unit_test(test_report),
                cmocka_unit_test(test_raise_nofile),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
