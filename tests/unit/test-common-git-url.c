/* Git checkout requests (common/git-url.h): which URLs and branches are accepted, the
 * default directory name, the credential scrubber, and git's stderr to error codes. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/git-url.h"
#include "common/limits.h"

static int url(const char *u)
{
        struct cella_error err = {0};
        int r = git_url_check(u, strlen(u), &err);

        if (r < 0) {
                assert_int_equal(err.code, CELLA_E_INVALID_GIT_URL);
                /* the message never repeats the URL (it may carry a password) */
                if (strlen(u) > 8)
                        assert_null(strstr(err.msg, u));
        }
        return r;
}

static void test_urls(void **state)
{
        static const char *const good[] = {
                "https://github.com/org/repo.git",
                "http://127.0.0.1:8000/repo.git",
                "HTTPS://host/r",
                "git://127.0.0.1:9418/repo.git",
                "ssh://git@host:2222/org/repo",
                "git+ssh://host/r",
                "https://user:secret@host/r.git",
                "https://ghp_token@github.com/o/r",
                "http://[::1]:8000/r",
                "git@github.com:org/repo.git",
                "host:repo",
                "https://host/scope/@pkg/r.git",
        };
        static const char *const bad[] = {
                "",
                "file:///srv/repo.git",
                "/srv/repo.git",
                "./repo",
                "../repo",
                "repo",
                "-uhttp://x/y",
                "--upload-pack=touch /tmp/x",
                "http://h/r.git; rm -rf /",
                "http://h/$(id)x y",
                "http://h/r\n",
                "http://h/r\\x",
                "ext::sh -c touch% /tmp/x",
                "ftp://host/repo",
                "http:///repo",
                "https://host",
                "https://host/",
                "https://-host/r",
                "https://host:99999999/r",
                "https://host:x/r",
                "https://u:p?x@host/r",
                "https://u:p#x@host/r",
                "@host:r",
                "host:-r",
                "h/x:r",
        };
        char big[CELLA_GIT_MAX_URL + 2];

        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                if (url(good[i]) != 0)
                        fail_msg("refused: %s", good[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (url(bad[i]) == 0)
                        fail_msg("accepted: %s", bad[i]);
        {
                struct cella_error err = {0};

                assert_int_equal(git_url_check("https://h/a\0b", 13, &err), -EINVAL);
        }
        memcpy(big, "https://h/", 10);
        memset(big + 10, 'a', sizeof(big) - 11);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(url(big), -EINVAL);
        big[CELLA_GIT_MAX_URL] = '\0';
        assert_int_equal(url(big), 0);
}

static void test_branches(void **state)
{
        static const char *const good[] = {"main", "dev", "feature/x-1", "v1.2.3", "a@b", "x;y"};
        static const char *const bad[] = {"",     "-b",     "--upload-pack=x",
                                          "a..b", "a b",    "x:y",
                                          "a\\b", "a~1",    "a^",
                                          "a?",   "a*",     "a[",
                                          "/a",   "a/",     ".a",
                                          "a.",   "x.lock", "a//b",
                                          "a/.b", "@",      "a@{1}",
                                          "a\tb"};
        struct cella_error err = {0};
        char big[CELLA_GIT_MAX_BRANCH + 2];

        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (git_branch_check(good[i], strlen(good[i]), &err) != 0)
                        fail_msg("refused: %s", good[i]);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (git_branch_check(bad[i], strlen(bad[i]), &err) == 0)
                        fail_msg("accepted: %s", bad[i]);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        }
        memset(big, 'a', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        assert_int_equal(git_branch_check(big, strlen(big), &err), -EINVAL);
        memset(&err, 0, sizeof(err));
        assert_int_equal(git_branch_check(big, CELLA_GIT_MAX_BRANCH, &err), 0);
}

static void name_is(const char *u, const char *want)
{
        char out[64];
        int r = git_url_repo_name(u, out, sizeof(out));

        if (!want) {
                assert_int_equal(r, -1);
                return;
        }
        assert_int_equal(r, (int)strlen(want));
        assert_string_equal(out, want);
}

static void test_repo_names(void **state)
{
        (void)state;
        name_is("https://github.com/org/repo.git", "repo");
        name_is("https://github.com/org/repo.git/", "repo");
        name_is("https://github.com/org/repo", "repo");
        name_is("https://github.com/org/repo/", "repo");
        name_is("git@github.com:org/repo.git", "repo");
        name_is("host:repo.git", "repo");
        name_is("https://h/a.b.c", "a.b.c");
        name_is("https://h/.git", NULL);
        name_is("https://h/..", NULL);
        name_is("https://h/.", NULL);
        name_is("https://host", NULL);
        name_is("https://h/0123456789012345678901234567890123456789012345678901234567890123456789",
                NULL); /* does not fit */
}

static void redacts(const char *in, const char *want)
{
        char out[256];
        size_t n = git_url_redact(in, strlen(in), out, sizeof(out));

        assert_string_equal(out, want);
        assert_int_equal(n, strlen(want));
}

static void test_redact(void **state)
{
        char small[6];

        (void)state;
        redacts("https://user:secret@host/r.git", "https://host/r.git");
        redacts("https://ghp_token@github.com/o/r", "https://github.com/o/r");
        redacts("https://host/r.git", "https://host/r.git");
        redacts("https://host/scope/@pkg", "https://host/scope/@pkg");
        redacts("https://u:p@ss@host:8000/r", "https://host:8000/r");
        redacts("git@github.com:o/r.git", "git@github.com:o/r.git"); /* no password there */
        redacts("fatal: could not read Username for 'http://u:secret@127.0.0.1:8001': "
                "terminal prompts disabled",
                "fatal: could not read Username for 'http://127.0.0.1:8001': terminal prompts "
                "disabled");
        redacts("a 'https://a:b@x/1' and \"http://c:d@y\" and git://e@z/r",
                "a 'https://x/1' and \"http://y\" and git://z/r");
        redacts("https://u:secret@", "https://");
        redacts("://@", "://");
        redacts("", "");
        assert_int_equal(git_url_redact("https://u:s@h/r", 15, small, sizeof(small)), 5);
        assert_string_equal(small, "https");
        assert_int_equal(git_url_redact("x", 1, small, 0), 0);
}

static void test_clone_errors(void **state)
{
        (void)state;
        assert_int_equal(git_clone_error_code("fatal: repository 'http://127.0.0.1:8000/nope.git/' "
                                              "not found\n"),
                         CELLA_E_GIT_REPOSITORY_NOT_FOUND);
        assert_int_equal(git_clone_error_code("fatal: 'x' does not appear to be a git repository\n"
                                              "fatal: Could not read from remote repository."),
                         CELLA_E_GIT_REPOSITORY_NOT_FOUND);
        assert_int_equal(git_clone_error_code("warning: Could not find remote branch nope to "
                                              "clone.\nfatal: Remote branch nope not found in "
                                              "upstream origin\n"),
                         CELLA_E_GIT_BRANCH_NOT_FOUND);
        assert_int_equal(git_clone_error_code("fatal: could not read Username for "
                                              "'http://127.0.0.1:8001': terminal prompts "
                                              "disabled\n"),
                         CELLA_E_GIT_AUTH_FAILED);
        assert_int_equal(git_clone_error_code("fatal: Authentication failed for 'https://h/r/'"),
                         CELLA_E_GIT_AUTH_FAILED);
        assert_int_equal(git_clone_error_code("git@h: Permission denied (publickey).\nfatal: Could "
                                              "not read from remote repository."),
                         CELLA_E_GIT_AUTH_FAILED);
        assert_int_equal(git_clone_error_code("fatal: unable to access 'http://127.0.0.1:1/r/': "
                                              "Failed to connect to 127.0.0.1 port 1"),
                         CELLA_E_GIT_NETWORK_ERROR);
        assert_int_equal(git_clone_error_code("fatal: unable to access 'https://nohost/r/': Could "
                                              "not resolve host: nohost"),
                         CELLA_E_GIT_NETWORK_ERROR);
        assert_int_equal(git_clone_error_code("fatal: destination path 'x' already exists and is "
                                              "not an empty directory.\n"),
                         CELLA_E_DIRECTORY_NOT_EMPTY);
        assert_int_equal(git_clone_error_code("fatal: dumb http transport does not support "
                                              "shallow capabilities"),
                         CELLA_E_GIT_CLONE_FAILED);
        assert_int_equal(git_clone_error_code(""), CELLA_E_GIT_CLONE_FAILED);
        assert_string_equal(cella_code_name(CELLA_E_GIT_AUTH_FAILED), "GIT_AUTH_FAILED");
        assert_int_equal(cella_code_status(CELLA_E_GIT_AUTH_FAILED), 401);
        assert_int_equal(cella_code_status(CELLA_E_GIT_REPOSITORY_NOT_FOUND), 404);
        assert_int_equal(cella_code_status(CELLA_E_GIT_BRANCH_NOT_FOUND), 404);
        assert_int_equal(cella_code_status(CELLA_E_GIT_NETWORK_ERROR), 502);
        assert_int_equal(cella_code_status(CELLA_E_INVALID_GIT_URL), 400);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_urls),         cmocka_unit_test(test_branches),
                cmocka_unit_test(test_repo_names),   cmocka_unit_test(test_redact),
                cmocka_unit_test(test_clone_errors),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
