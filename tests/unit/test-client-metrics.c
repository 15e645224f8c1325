/* libcella's reading of a GET /metrics answer (src/client/client-metrics.c): a series'
 * sum over matching labels, and a histogram's quantiles, whole or between two answers. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cella/cella.h"

static const char before[] = "# HELP r_total requests\n"
                             "# TYPE r_total counter\n"
                             "r_total{route=\"/a\",status=\"2xx\"} 3\n"
                             "r_total{route=\"/a\",status=\"4xx\"} 1\n"
                             "r_total{route=\"/b\",status=\"2xx\"} 5\n"
                             "d_seconds_bucket{le=\"0.001\"} 10\n"
                             "d_seconds_bucket{le=\"0.01\"} 10\n"
                             "d_seconds_bucket{le=\"+Inf\"} 10\n"
                             "d_seconds_sum 0.005\n"
                             "d_seconds_count 10\n";

static const char after[] = "r_total{route=\"/a\",status=\"2xx\"} 4\n"
                            "d_seconds_bucket{le=\"+Inf\"} 30\n"
                            "d_seconds_bucket{le=\"0.001\"} 10\n"
                            "d_seconds_bucket{le=\"0.01\"} 30\n";

static void test_value(void **state)
{
        const char *const a2xx[] = {"route=/a", "status=2xx", NULL};
        const char *const ok[] = {"status=2xx", NULL};
        const char *const none[] = {"route=/c", NULL};
        const char *const bad[] = {"route", NULL};
        double v = -1;

        (void)state;
        assert_int_equal(cella_metrics_value(before, "r_total", NULL, &v), CELLA_OK);
        assert_true(v == 9);
        assert_int_equal(cella_metrics_value(before, "r_total", a2xx, &v), CELLA_OK);
        assert_true(v == 3);
        assert_int_equal(cella_metrics_value(before, "r_total", ok, &v), CELLA_OK);
        assert_true(v == 8);
        assert_int_equal(cella_metrics_value(before, "r_total", none, &v), CELLA_OK);
        assert_true(v == 0);
        assert_int_equal(cella_metrics_value(before, "r_total", bad, &v), CELLA_OK);
        assert_true(v == 0);
        assert_int_equal(cella_metrics_value(before, "nothing", NULL, &v), CELLA_OK);
        assert_true(v == 0);
        assert_int_equal(cella_metrics_value("x{l=\"v} 1\n", "x", NULL, &v), CELLA_ERR_INVALID);
        assert_int_equal(cella_metrics_value("", "x", NULL, &v), CELLA_OK);
        assert_true(v == 0);
}

static void test_quantile(void **state)
{
        double q = 0;

        (void)state;
        /* every observation in the first bucket: linear from 0 */
        assert_int_equal(cella_metrics_quantile(before, NULL, "d_seconds", 0.5, &q), CELLA_OK);
        assert_true(fabs(q - 0.0005) < 1e-12);
        /* since before: the 20 new ones are all in (0.001, 0.01] (buckets out of order) */
        assert_int_equal(cella_metrics_quantile(after, before, "d_seconds", 0.5, &q), CELLA_OK);
        assert_true(fabs(q - 0.0055) < 1e-12);
        /* nothing new between an answer and itself */
        assert_int_equal(cella_metrics_quantile(before, before, "d_seconds", 0.5, &q), CELLA_OK);
        assert_true(q == -1);
        /* beyond the last bound: that bound */
        assert_int_equal(cella_metrics_quantile("h_bucket{le=\"1\"} 0\nh_bucket{le=\"+Inf\"} 4\n",
                                                NULL, "h", 0.9, &q),
                         CELLA_OK);
        assert_true(q == 1);
        assert_int_equal(cella_metrics_quantile(before, NULL, "nothing", 0.5, &q), CELLA_OK);
        assert_true(q == -1);
        assert_int_equal(cella_metrics_quantile(before, NULL, "d_seconds", 1.5, &q),
                         CELLA_ERR_INVALID);
        assert_int_equal(cella_metrics_quantile("h_bucket{le=\"x\"} 1\n", NULL, "h", 0.5, &q),
                         CELLA_ERR_INVALID);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_value),
                cmocka_unit_test(test_quantile),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
