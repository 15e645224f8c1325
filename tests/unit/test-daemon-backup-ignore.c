/* gitignore patterns for backups (backup-ignore.h): one component's glob (against
 * fnmatch(3) where both define the answer), anchoring, "**" in each of its places, a
 * trailing '/' for directories, negation and the last match winning, a .gitignore's
 * syntax (comments, escapes, trailing spaces, CRLF), a nested file's base, the checks of
 * the request's excludes, and patterns built to make a backtracking matcher take
 * exponential time (answered here in a bounded number of steps). */
#include <fnmatch.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/limits.h"
#include "daemon/backup-ignore.h"

static bool glob(const char *g, const char *s)
{
        return ignore_glob_match(g, strlen(g), s, strlen(s));
}

static void test_glob(void **state)
{
        (void)state;
        assert_true(glob("*.o", "a.o"));
        assert_true(glob("*.o", ".o"));
        assert_false(glob("*.o", "a.c"));
        assert_true(glob("a?c", "abc"));
        assert_false(glob("a?c", "ac"));
        assert_true(glob("[abc]x", "bx"));
        assert_false(glob("[abc]x", "dx"));
        assert_true(glob("[!abc]x", "dx"));
        assert_true(glob("[^abc]x", "dx"));
        assert_false(glob("[!abc]x", "ax"));
        assert_true(glob("[a-c]", "b"));
        assert_false(glob("[a-c]", "d"));
        assert_true(glob("[]]", "]"));
        assert_true(glob("[[:digit:]]*", "7up"));
        assert_false(glob("[[:digit:]]*", "up"));
        assert_false(glob("[[:nope:]]", "a"));
        assert_false(glob("[ab", "a")); /* malformed: matches nothing, as with git */
        assert_true(glob("\\*", "*"));
        assert_false(glob("\\*", "a"));
        assert_true(glob("a**b", "axxb")); /* "**" inside a component is '*' */
        assert_true(glob("*", "anything"));
        assert_true(glob("foo", "foo"));
        assert_false(glob("foo", "foobar"));
        assert_false(glob("foo*", "fo"));
        assert_true(glob("*a*b*c", "xaybzc"));
        assert_false(glob("*a*b*c", "xaybz"));
}

/* Every glob of [ab*?] up to 5 characters against every string of [ab] up to 5: the same
 * answers as fnmatch(3). */
static void test_glob_fnmatch(void **state)
{
        static const char gset[] = "ab*?";
        char g[8], s[8];

        (void)state;
        for (int gl = 0; gl <= 5; gl++) {
                int gn = 1;
                for (int i = 0; i < gl; i++)
                        gn *= 4;
                for (int gi = 0; gi < gn; gi++) {
                        for (int i = 0, v = gi; i < gl; i++, v /= 4)
                                g[i] = gset[v % 4];
                        g[gl] = '\0';
                        for (int sl = 0; sl <= 5; sl++) {
                                for (int si = 0; si < (1 << sl); si++) {
                                        for (int i = 0; i < sl; i++)
                                                s[i] = (si >> i) & 1 ? 'b' : 'a';
                                        s[sl] = '\0';
                                        bool want = fnmatch(g, s, FNM_PATHNAME) == 0;
                                        if (glob(g, s) != want)
                                                fail_msg("glob '%s' on '%s': %d, fnmatch %d", g, s,
                                                         !want, want);
                                }
                        }
                }
        }
}

static int match(struct ignore_list *l, const char *path, bool is_dir)
{
        return ignore_list_match(l, path, strlen(path), is_dir);
}

static void add(struct ignore_list *l, const char *pat)
{
        struct cella_error err = {0};

        if (ignore_list_add(l, pat, strlen(pat), &err) < 0)
                fail_msg("add '%s': %s", pat, err.msg);
}

/* One pattern at the root: match(path, is_dir). */
static int one(const char *pat, const char *path, bool is_dir)
{
        struct ignore_list l;

        assert_int_equal(ignore_list_init(&l, "", 0), 0);
        add(&l, pat);
        int r = match(&l, path, is_dir);
        ignore_list_free(&l);
        return r;
}

static void test_anchoring(void **state)
{
        (void)state;
        /* no slash: the last component, at any depth */
        assert_int_equal(one("foo", "foo", false), 1);
        assert_int_equal(one("foo", "a/b/foo", false), 1);
        assert_int_equal(one("foo", "a/foo/b", false), -1); /* the walk stops at a/foo */
        assert_int_equal(one("*.log", "x/y/z.log", false), 1);
        /* a leading slash: at the base only */
        assert_int_equal(one("/foo", "foo", false), 1);
        assert_int_equal(one("/foo", "a/foo", false), -1);
        /* a slash in the middle: anchored too */
        assert_int_equal(one("doc/frotz", "doc/frotz", false), 1);
        assert_int_equal(one("doc/frotz", "a/doc/frotz", false), -1);
        assert_int_equal(one("doc/*.txt", "doc/a.txt", false), 1);
        assert_int_equal(one("doc/*.txt", "doc/x/a.txt", false), -1);
        /* a trailing slash: directories only, and not anchoring */
        assert_int_equal(one("build/", "build", true), 1);
        assert_int_equal(one("build/", "build", false), -1);
        assert_int_equal(one("build/", "x/build", true), 1);
        assert_int_equal(one("/build/", "x/build", true), -1);
}

static void test_double_star(void **state)
{
        (void)state;
        /* leading: in every directory */
        assert_int_equal(one("**/foo", "foo", false), 1);
        assert_int_equal(one("**/foo", "a/b/foo", false), 1);
        assert_int_equal(one("**/foo/bar", "foo/bar", false), 1);
        assert_int_equal(one("**/foo/bar", "x/y/foo/bar", false), 1);
        assert_int_equal(one("**/foo/bar", "x/foo/baz", false), -1);
        /* trailing: everything inside, not the directory itself */
        assert_int_equal(one("abc/**", "abc/x", false), 1);
        assert_int_equal(one("abc/**", "abc/x/y", false), 1);
        assert_int_equal(one("abc/**", "abc", true), -1);
        assert_int_equal(one("abc/**", "x/abc/y", false), -1);
        /* in the middle: zero or more directories */
        assert_int_equal(one("a/**/b", "a/b", false), 1);
        assert_int_equal(one("a/**/b", "a/x/b", false), 1);
        assert_int_equal(one("a/**/b", "a/x/y/b", false), 1);
        assert_int_equal(one("a/**/b", "a/x/y/c", false), -1);
        assert_int_equal(one("a/**/b/**/c", "a/1/b/2/3/c", false), 1);
        assert_int_equal(one("a/**/b/**/c", "a/1/c/2/3/b", false), -1);
        /* alone */
        assert_int_equal(one("**", "x/y", false), 1);
        assert_int_equal(one("/**", "x", false), 1);
}

static void test_negation_and_order(void **state)
{
        struct ignore_list l;

        (void)state;
        assert_int_equal(ignore_list_init(&l, "", 0), 0);
        add(&l, "*.log");
        add(&l, "!important.log");
        assert_int_equal(match(&l, "a.log", false), 1);
        assert_int_equal(match(&l, "important.log", false), 0);
        assert_int_equal(match(&l, "x/important.log", false), 0);
        assert_int_equal(match(&l, "a.txt", false), -1);
        add(&l, "important.log"); /* the last match decides */
        assert_int_equal(match(&l, "important.log", false), 1);
        ignore_list_free(&l);
}

/* A nested .gitignore: its patterns are relative to its directory. */
static void test_base(void **state)
{
        struct ignore_list l;

        (void)state;
        assert_int_equal(ignore_list_init(&l, "sub", 3), 0);
        add(&l, "x");
        add(&l, "/top");
        add(&l, "d/e");
        assert_int_equal(match(&l, "sub/x", false), 1);
        assert_int_equal(match(&l, "sub/y/x", false), 1);
        assert_int_equal(match(&l, "x", false), -1);
        assert_int_equal(match(&l, "subx/x", false), -1);
        assert_int_equal(match(&l, "sub", true), -1);
        assert_int_equal(match(&l, "sub/top", false), 1);
        assert_int_equal(match(&l, "sub/y/top", false), -1);
        assert_int_equal(match(&l, "sub/d/e", false), 1);
        assert_int_equal(match(&l, "sub/y/d/e", false), -1);
        ignore_list_free(&l);
}

static void test_parse(void **state)
{
        static const char text[] = "# a comment\n"
                                   "\n"
                                   "*.o   \n"
                                   "\\#hash\n"
                                   "\\!bang\n"
                                   "space\\ \n"
                                   "crlf\r\n"
                                   "[broken\n"
                                   "!keep.o\n"
                                   "   \n"
                                   "last";
        struct ignore_list l;

        (void)state;
        assert_int_equal(ignore_list_init(&l, "", 0), 0);
        /* *.o, \#hash, \!bang, space\ , crlf, !keep.o, last (the malformed one skipped) */
        assert_int_equal(ignore_list_parse(&l, text, sizeof(text) - 1), 7);
        assert_int_equal(match(&l, "a.o", false), 1);
        assert_int_equal(match(&l, "keep.o", false), 0);
        assert_int_equal(match(&l, "#hash", false), 1);
        assert_int_equal(match(&l, "# a comment", false), -1);
        assert_int_equal(match(&l, "!bang", false), 1);
        assert_int_equal(match(&l, "bang", false), -1);
        assert_int_equal(match(&l, "space ", false), 1);
        assert_int_equal(match(&l, "space", false), -1);
        assert_int_equal(match(&l, "crlf", false), 1);
        assert_int_equal(match(&l, "last", false), 1);
        assert_int_equal(match(&l, "[broken", false), -1);
        ignore_list_free(&l);

        /* a line over the limit */
        size_t n = CELLA_BACKUP_PATTERN_MAX + 2;
        char *big = malloc(n);
        assert_non_null(big);
        memset(big, 'a', n);
        assert_int_equal(ignore_list_init(&l, "", 0), 0);
        assert_int_equal(ignore_list_parse(&l, big, n), -E2BIG);
        ignore_list_free(&l);
        free(big);
}

static void test_check(void **state)
{
        static const char *const bad[] = {"",    "!",    "/",   "//",   "!/",
                                          "a[b", "a//b", "a\\", "a\tb", "[[:nope:]]"};
        static const char *const good[] = {"node_modules", "*.log", "!keep.log", "/build/",
                                           "a/**/b",       "[ab]c", "\\!x",      "**"};
        struct cella_error err = {0};
        char big[CELLA_BACKUP_PATTERN_MAX + 2];

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (ignore_pattern_check(bad[i], strlen(bad[i]), &err) == 0)
                        fail_msg("'%s' was taken", bad[i]);
                assert_int_equal(err.code, CELLA_E_INVALID_BACKUP_CONFIG);
        }
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                if (ignore_pattern_check(good[i], strlen(good[i]), &err) < 0)
                        fail_msg("'%s' was refused: %s", good[i], err.msg);
        memset(big, 'a', sizeof(big));
        assert_int_equal(ignore_pattern_check(big, sizeof(big), &err), -EINVAL);
}

/* Patterns that take a backtracking matcher exponential time: answered (correctly) by
 * the single backtrack. */
static void test_pathological(void **state)
{
        char name[1001], pat[CELLA_BACKUP_PATTERN_MAX + 1], path[4096];
        size_t o = 0;

        (void)state;
        memset(name, 'a', 1000);
        name[1000] = '\0';
        for (int i = 0; i < 40; i++) {
                pat[o++] = '*';
                pat[o++] = 'a';
        }
        pat[o++] = 'b';
        pat[o] = '\0';
        assert_false(glob(pat, name));
        pat[o - 1] = '*';
        assert_true(glob(pat, name));

        /* "**" segments against a deep path of "a" directories ending without "b" */
        o = 0;
        for (int i = 0; i < 40; i++)
                o += (size_t)snprintf(pat + o, sizeof(pat) - o, "**/a/");
        snprintf(pat + o, sizeof(pat) - o, "b");
        o = 0;
        for (int i = 0; i < 1000; i++)
                o += (size_t)snprintf(path + o, sizeof(path) - o, "a/");
        path[o - 1] = '\0';
        assert_int_equal(one(pat, path, false), -1);
        path[o - 1] = '/';
        snprintf(path + o, sizeof(path) - o, "b");
        assert_int_equal(one(pat, path, false), 1);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_glob),
                cmocka_unit_test(test_glob_fnmatch),
                cmocka_unit_test(test_anchoring),
                cmocka_unit_test(test_double_star),
                cmocka_unit_test(test_negation_and_order),
                cmocka_unit_test(test_base),
                cmocka_unit_test(test_parse),
                cmocka_unit_test(test_check),
                cmocka_unit_test(test_pathological),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
