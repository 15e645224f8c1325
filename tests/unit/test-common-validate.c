/* common/validate.c: the one rule for environment variable names and for commands. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/validate.h"

static void test_env_name(void **state)
{
        char longest[CELLA_ENV_NAME_MAX + 2];

        (void)state;
        assert_true(env_name_is_valid("PATH"));
        assert_true(env_name_is_valid("_"));
        assert_true(env_name_is_valid("a_1"));
        assert_true(env_name_is_valid("_9"));
        assert_false(env_name_is_valid(NULL));
        assert_false(env_name_is_valid(""));
        assert_false(env_name_is_valid("1A"));
        assert_false(env_name_is_valid("A-B"));
        assert_false(env_name_is_valid("A=B"));
        assert_false(env_name_is_valid("A B"));
        assert_false(env_name_is_valid("\xc3\xa9"));
        memset(longest, 'A', sizeof(longest));
        longest[CELLA_ENV_NAME_MAX] = '\0';
        assert_true(env_name_is_valid(longest));
        longest[CELLA_ENV_NAME_MAX] = 'A';
        longest[CELLA_ENV_NAME_MAX + 1] = '\0';
        assert_false(env_name_is_valid(longest));
}

static void test_command(void **state)
{
        (void)state;
        assert_true(command_is_valid("ls", 2));
        assert_true(command_is_valid(" ", 1));
        assert_false(command_is_valid("", 0));
        assert_false(command_is_valid(NULL, 0));
        assert_false(command_is_valid("a\0b", 3));
        assert_true(command_is_valid("ab", CELLA_EXEC_MAX_COMMAND > 2 ? 2 : 1));
}

static void test_command_bounds(void **state)
{
        static char big[CELLA_EXEC_MAX_COMMAND + 1];

        (void)state;
        memset(big, 'x', sizeof(big));
        assert_true(command_is_valid(big, CELLA_EXEC_MAX_COMMAND));
        assert_false(command_is_valid(big, CELLA_EXEC_MAX_COMMAND + 1));
}

static void test_http_path(void **state)
{
        static char big[CELLA_PROC_MAX_HTTP_PATH + 1];

        (void)state;
        assert_true(http_path_is_valid("/", 1));
        assert_true(http_path_is_valid("/health?x=1&y=%20", 17));
        assert_false(http_path_is_valid("", 0));
        assert_false(http_path_is_valid(NULL, 0));
        assert_false(http_path_is_valid("health", 6));
        assert_false(http_path_is_valid("/a b", 4));
        assert_false(http_path_is_valid("/a\tb", 4));
        assert_false(http_path_is_valid("/a\0b", 4));
        assert_false(http_path_is_valid("/\x7f", 2));
        assert_false(http_path_is_valid("/\xc3\xa9", 3));
        memset(big, 'x', sizeof(big));
        big[0] = '/';
        assert_true(http_path_is_valid(big, CELLA_PROC_MAX_HTTP_PATH));
        assert_false(http_path_is_valid(big, CELLA_PROC_MAX_HTTP_PATH + 1));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_env_name),
                cmocka_unit_test(test_command),
                cmocka_unit_test(test_command_bounds),
                cmocka_unit_test(test_http_path),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
