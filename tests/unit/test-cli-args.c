/* The CLI's argument parsing: exec's command words, flags before and after NAME, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cli/args.h"

#define ARGV(...) ((char *[]){"cella", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"cella", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, ...) cli_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), a)

static void test_exec(void **state)
{
        struct cli_args a;
        struct buf b = BUF_INIT;

        assert_int_equal(PARSE(&a, "exec", "--timeout", "500", "box", "ls", "-la", "--json"), 0);
        assert_int_equal(a.timeout_ms, 500);
        assert_int_equal(a.npos, 5);
        assert_false(a.json); /* after the command started, options are the command's */
        assert_int_equal(cli_join((char **)a.pos + 2, a.npos - 2, &b), 0);
        assert_string_equal(b.data, "ls -la --json");
        buf_free(&b);

        assert_int_equal(PARSE(&a, "exec", "box", "--env", "A=1", "--cwd=/tmp", "--", "-x"), 0);
        assert_int_equal(a.nenv, 1);
        assert_string_equal(a.env[0], "A=1");
        assert_string_equal(a.cwd, "/tmp");
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[2], "-x");

        assert_int_equal(PARSE(&a, "exec", "box", "python3 -c 'print(1)'"), 0);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[2], "python3 -c 'print(1)'");
}

static void test_flags_and_errors(void **state)
{
        struct cli_args a;
        assert_int_equal(PARSE(&a, "ls", "box", "/w", "-r", "-a", "--json"), 0);
        assert_true(a.recursive && a.all && a.json);
        assert_int_equal(a.npos, 3);
        assert_int_equal(PARSE(&a, "create", "box", "--label", "team=ml", "--image", "default",
                               "--instance-type", "lite"),
                         0);
        assert_string_equal(a.labels[0], "team=ml");
        assert_string_equal(a.image, "default");
        assert_string_equal(a.instance_type, "lite");

        assert_int_equal(PARSE(&a, "exec", "--timeout", "abc", "box", "true"), -1);
        assert_non_null(strstr(a.error, "--timeout"));
        assert_int_equal(PARSE(&a, "exec", "--timeout"), -1);
        assert_non_null(strstr(a.error, "needs a value"));
        assert_int_equal(PARSE(&a, "create", "box", "--env", "novalue"), -1);
        assert_non_null(strstr(a.error, "KEY=VALUE"));
        assert_int_equal(PARSE(&a, "list", "--bogus"), -1);
        assert_non_null(strstr(a.error, "unknown option"));
        assert_int_equal(PARSE(&a, "--help"), 0);
        assert_true(a.help);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec),
                cmocka_unit_test(test_flags_and_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
