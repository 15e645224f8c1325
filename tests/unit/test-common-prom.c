/* The Prometheus text format (src/common/prom.h): label values and HELP texts escaped,
 * samples and histograms as the format writes them, and the line parser reading all of it
 * back (label values unescaped), refusing what is not the format. */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/prom.h"

static void test_escape(void **state)
{
        struct buf b = BUF_INIT;

        (void)state;
        assert_int_equal(prom_label_escape(&b, "plain"), 0);
        assert_string_equal(b.data, "plain");
        buf_reset(&b);
        assert_int_equal(prom_label_escape(&b, "a\\b\"c\nd"), 0);
        assert_string_equal(b.data, "a\\\\b\\\"c\\nd");
        buf_reset(&b);
        assert_int_equal(prom_label_escape(&b, "\\\\\"\"\n\n"), 0);
        assert_string_equal(b.data, "\\\\\\\\\\\"\\\"\\n\\n");
        buf_reset(&b);
        assert_int_equal(prom_label_escape(&b, ""), 0);
        assert_int_equal(b.len, 0);
        /* HELP: '\' and newline, but a quote stays */
        buf_reset(&b);
        assert_int_equal(prom_family(&b, "x_total", "counter", "say \"hi\"\\\nbye"), 0);
        assert_string_equal(b.data,
                            "# HELP x_total say \"hi\"\\\\\\nbye\n# TYPE x_total counter\n");
        buf_free(&b);
}

static void test_samples(void **state)
{
        struct buf b = BUF_INIT;
        struct prom_label l[] = {{"route", "/v1/sandboxes/{id}"}, {"msg", "a\"b\\c\nd"}};

        (void)state;
        assert_int_equal(prom_sample_u64(&b, "n_total", NULL, 0, 18446744073709551615ull), 0);
        assert_int_equal(prom_sample_u64(&b, "n_total", l, 2, 0), 0);
        assert_int_equal(prom_sample_double(&b, "g", NULL, 0, 1.5), 0);
        assert_int_equal(prom_sample_double(&b, "g", NULL, 0, INFINITY), 0);
        assert_int_equal(prom_sample_double(&b, "g", NULL, 0, NAN), 0);
        assert_int_equal(prom_sample_double(&b, "g", NULL, 0, 0.1), 0);
        assert_int_equal(prom_sample_double(&b, "g", NULL, 0, 1795771676.477), 0);
        assert_int_equal(prom_sample_seconds(&b, "s", NULL, 0, 647148), 0);
        assert_int_equal(prom_sample_seconds(&b, "s", NULL, 0, 12000000), 0);
        assert_string_equal(b.data,
                            "n_total 18446744073709551615\n"
                            "n_total{route=\"/v1/sandboxes/{id}\",msg=\"a\\\"b\\\\c\\nd\"} 0\n"
                            "g 1.5\n"
                            "g +Inf\n"
                            "g NaN\n"
                            "g 0.1\n"
                            "g 1795771676.477\n"
                            "s 0.647148\n"
                            "s 12\n");
        buf_free(&b);
}

static void test_histogram(void **state)
{
        static const uint64_t bounds[] = {500, 1000, 2500000};
        uint64_t counts[4] = {0}, sum = 0;
        struct prom_label l = {"kind", "x"};
        struct prom_histogram h = {bounds, 3, counts, 0};
        struct buf b = BUF_INIT;

        (void)state;
        prom_histogram_observe(bounds, 3, counts, &sum, 500);     /* le 0.0005: bound included */
        prom_histogram_observe(bounds, 3, counts, &sum, 501);     /* le 0.001 */
        prom_histogram_observe(bounds, 3, counts, &sum, 0);       /* le 0.0005 */
        prom_histogram_observe(bounds, 3, counts, &sum, 9000000); /* +Inf only */
        assert_int_equal(counts[0], 2);
        assert_int_equal(counts[1], 1);
        assert_int_equal(counts[2], 0);
        assert_int_equal(counts[3], 1);
        h.sum_us = sum;
        assert_int_equal(prom_histogram_write(&b, "d_seconds", &l, 1, &h), 0);
        assert_string_equal(b.data, "d_seconds_bucket{kind=\"x\",le=\"0.0005\"} 2\n"
                                    "d_seconds_bucket{kind=\"x\",le=\"0.001\"} 3\n"
                                    "d_seconds_bucket{kind=\"x\",le=\"2.5\"} 3\n"
                                    "d_seconds_bucket{kind=\"x\",le=\"+Inf\"} 4\n"
                                    "d_seconds_sum{kind=\"x\"} 9.001001\n"
                                    "d_seconds_count{kind=\"x\"} 4\n");
        buf_free(&b);
}

static int parse(const char *line, struct prom_parsed *s)
{
        return prom_parse_line(line, strlen(line), s);
}

static void test_parse(void **state)
{
        struct prom_parsed s;

        (void)state;
        assert_int_equal(parse("", &s), 0);
        assert_int_equal(parse("   ", &s), 0);
        assert_int_equal(parse("# HELP x y", &s), 0);
        assert_int_equal(parse("x 1", &s), 1);
        assert_string_equal(s.name, "x");
        assert_int_equal(s.nlabels, 0);
        assert_true(s.value == 1.0);
        assert_false(s.has_timestamp);
        assert_int_equal(parse("a:b_c{l=\"v\",m=\"w\",} -2.5e3 1700000000000", &s), 1);
        assert_string_equal(s.name, "a:b_c");
        assert_int_equal(s.nlabels, 2);
        assert_string_equal(prom_parsed_label(&s, "l"), "v");
        assert_string_equal(prom_parsed_label(&s, "m"), "w");
        assert_null(prom_parsed_label(&s, "z"));
        assert_true(s.value == -2500.0);
        assert_true(s.has_timestamp);
        assert_true(s.timestamp_ms == 1700000000000LL);
        assert_int_equal(parse("x{msg=\"a\\\"b\\\\c\\nd\"} +Inf", &s), 1);
        assert_string_equal(prom_parsed_label(&s, "msg"), "a\"b\\c\nd");
        assert_true(isinf(s.value) && s.value > 0);
        assert_int_equal(parse("x NaN", &s), 1);
        assert_true(isnan(s.value));
        assert_int_equal(parse("x{} 3", &s), 1);
        assert_int_equal(s.nlabels, 0);

        /* not the format */
        assert_int_equal(parse("x", &s), -EINVAL);
        assert_int_equal(parse("1x 1", &s), -EINVAL);
        assert_int_equal(parse("x{l=v} 1", &s), -EINVAL);
        assert_int_equal(parse("x{l=\"v} 1", &s), -EINVAL);
        assert_int_equal(parse("x{l=\"\\t\"} 1", &s), -EINVAL);
        assert_int_equal(parse("x{l=\"a\",l=\"b\"} 1", &s), -EINVAL);
        assert_int_equal(parse("x{:l=\"a\"} 1", &s), -EINVAL);
        assert_int_equal(parse("x 0x10", &s), -EINVAL);
        assert_int_equal(parse("x inf", &s), -EINVAL);
        assert_int_equal(parse("x 1 2 3", &s), -EINVAL);
        assert_int_equal(parse("x 1 1.5", &s), -EINVAL);
        assert_int_equal(parse("x 1\r", &s), -EINVAL);
        assert_int_equal(prom_parse_line("x 1\n", 4, &s), -EINVAL);
        /* beyond the limits */
        assert_int_equal(
                parse("x{a=\"\",b=\"\",c=\"\",d=\"\",e=\"\",f=\"\",g=\"\",h=\"\",i=\"\"} 1", &s),
                -E2BIG);
}

/* What the encoder writes, the parser reads back: label values byte for byte. */
static void test_round_trip(void **state)
{
        static const char *const values[] = {"",   "plain",    "\\",     "\"",
                                             "\n", "a\\\"\nb", "{}=,# ", "\xc3\xa9t\xc3\xa9"};
        struct buf b = BUF_INIT;
        struct prom_parsed s;

        (void)state;
        for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
                struct prom_label l[] = {{"v", values[i]}, {"w", "x"}};

                buf_reset(&b);
                assert_int_equal(prom_sample_u64(&b, "rt_total", l, 2, i), 0);
                assert_int_equal(prom_parse_line(b.data, b.len - 1, &s), 1);
                assert_string_equal(s.name, "rt_total");
                assert_string_equal(prom_parsed_label(&s, "v"), values[i]);
                assert_string_equal(prom_parsed_label(&s, "w"), "x");
                assert_true(s.value == (double)i);
        }
        buf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_escape),     cmocka_unit_test(test_samples),
                cmocka_unit_test(test_histogram),  cmocka_unit_test(test_parse),
                cmocka_unit_test(test_round_trip),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
