/* The file watch filters (src/agent/watch.h): default excludes, exclude and include globs. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "agent/watch.h"

static void test_defaults(void **state)
{
        struct watch_filter f = {0};

        (void)state;
        assert_true(watch_filter_matches(&f, "a.txt"));
        assert_true(watch_filter_matches(&f, "src/a.c"));
        assert_true(watch_filter_excludes(&f, ".git"));
        assert_true(watch_filter_excludes(&f, ".git/objects/ab"));
        assert_true(watch_filter_excludes(&f, "sub/.git/HEAD"));
        assert_true(watch_filter_excludes(&f, "node_modules"));
        assert_true(watch_filter_excludes(&f, "web/node_modules/x/y.js"));
        assert_false(watch_filter_excludes(&f, ".gitignore"));
        assert_false(watch_filter_excludes(&f, "node_modules2"));
        assert_false(watch_filter_matches(&f, "node_modules/x"));
}

static void test_exclude(void **state)
{
        char *ex[] = {"*.log", "build/out"};
        struct watch_filter f = {.exclude = ex, .n_exclude = 2, .exclude_given = true};

        (void)state;
        /* given excludes replace the defaults */
        assert_false(watch_filter_excludes(&f, ".git/HEAD"));
        assert_true(watch_filter_excludes(&f, "a.log"));
        assert_true(watch_filter_excludes(&f, "deep/er/a.log"));
        assert_true(watch_filter_excludes(&f, "build/out"));
        assert_true(watch_filter_excludes(&f, "build/out/x.o"));
        assert_false(watch_filter_excludes(&f, "build/outer"));
        assert_false(watch_filter_excludes(&f, "x/build/out"));
        assert_true(watch_filter_matches(&f, "a.txt"));

        struct watch_filter none = {.exclude_given = true};
        assert_false(watch_filter_excludes(&none, "node_modules/a"));
}

static void test_include(void **state)
{
        char *inc[] = {"*.c", "docs/*.md"};
        struct watch_filter f = {.include = inc, .n_include = 2};

        (void)state;
        assert_true(watch_filter_matches(&f, "a.c"));
        assert_true(watch_filter_matches(&f, "src/deep/a.c"));
        assert_false(watch_filter_matches(&f, "a.h"));
        assert_false(watch_filter_matches(&f, "src"));
        assert_true(watch_filter_matches(&f, "docs/a.md"));
        assert_false(watch_filter_matches(&f, "docs/sub/a.md"));
        assert_false(watch_filter_matches(&f, "x/docs/a.md"));
        /* excludes win over includes */
        assert_false(watch_filter_matches(&f, "node_modules/x.c"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_defaults),
                cmocka_unit_test(test_exclude),
                cmocka_unit_test(test_include),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
