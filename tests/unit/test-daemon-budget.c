/* The daemon-wide memory budget (budget.c) and the failed-authentication buckets
 * (ratelimit.c): pure bookkeeping, driven with explicit sizes and clocks. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "common/limits.h"
#include "daemon/budget.h"
#include "daemon/ratelimit.h"

static void test_budget(void **state)
{
        struct mem_budget b = {.limit = 100};

        (void)state;
        assert_true(mem_budget_take(&b, 60));
        assert_true(mem_budget_take(&b, 40));
        assert_false(mem_budget_take(&b, 1)); /* full: refused, nothing counted */
        assert_int_equal(b.used, 100);
        assert_int_equal(b.refused, 1);
        mem_budget_force(&b, 10); /* a reserve is counted over the limit */
        assert_int_equal(b.used, 110);
        mem_budget_give(&b, 50);
        assert_true(mem_budget_take(&b, 40));
        assert_int_equal(b.peak, 110);
        mem_budget_give(&b, 1000); /* more than held: clamped */
        assert_int_equal(b.used, 0);
        assert_true(mem_budget_take(NULL, (size_t)-1)); /* no budget: always fits */
}

static void test_auth_buckets(void **state)
{
        struct auth_limiter *l = auth_limiter_new();
        uint64_t t = 1000000;
        int i;

        (void)state;
        assert_non_null(l);
        assert_false(auth_limiter_blocked(l, "127.0.0.1", t)); /* unknown: not blocked */
        for (i = 0; i < CELLA_AUTH_FAIL_BURST; i++) {
                assert_false(auth_limiter_blocked(l, "127.0.0.1", t));
                auth_limiter_failed(l, "127.0.0.1", t);
        }
        assert_true(auth_limiter_blocked(l, "127.0.0.1", t));  /* the burst is spent */
        assert_false(auth_limiter_blocked(l, "127.0.0.2", t)); /* another address is not */
        /* one failure's worth refills in 1/RATE s */
        assert_true(auth_limiter_blocked(l, "127.0.0.1", t + 1000 / CELLA_AUTH_FAIL_RATE / 2));
        assert_false(auth_limiter_blocked(l, "127.0.0.1", t + 1000 / CELLA_AUTH_FAIL_RATE));
        auth_limiter_failed(l, "127.0.0.1", t + 1000 / CELLA_AUTH_FAIL_RATE);
        assert_true(auth_limiter_blocked(l, "127.0.0.1", t + 1000 / CELLA_AUTH_FAIL_RATE));
        /* guessing at the refill rate never gets more than one try per refill */
        for (i = 2; i < 50; i++) {
                uint64_t now = t + (uint64_t)i * 1000 / CELLA_AUTH_FAIL_RATE;

                assert_false(auth_limiter_blocked(l, "127.0.0.1", now));
                auth_limiter_failed(l, "127.0.0.1", now);
                assert_true(auth_limiter_blocked(l, "127.0.0.1", now));
        }
        /* a long pause refills the whole burst, no more */
        t += 3600 * 1000;
        for (i = 0; i < CELLA_AUTH_FAIL_BURST; i++)
                auth_limiter_failed(l, "127.0.0.1", t);
        assert_true(auth_limiter_blocked(l, "127.0.0.1", t));
        auth_limiter_free(l);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_budget),
                cmocka_unit_test(test_auth_buckets),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
