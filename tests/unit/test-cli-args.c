/* The cella CLI's argument parsing: exec's command-word joining, flags before and after the
 * sandbox name, "--", KEY=VALUE checks and usage errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cli/args.h"

#define ARGV(...) ((char *[]){"cella", __VA_ARGS__, NULL})
#define ARGC(...) ((int)(sizeof((char *[]){"cella", __VA_ARGS__}) / sizeof(char *)))
#define PARSE(a, ...) cli_parse(ARGC(__VA_ARGS__), ARGV(__VA_ARGS__), (a))

static void assert_joined(struct cli_args *a, int from, const char *want)
{
        struct buf b = BUF_INIT;
        assert_int_equal(cli_join((char **)a->pos + from, a->npos - from, &b), 0);
        assert_string_equal(b.data ? b.data : "", want);
        buf_free(&b);
}

static void exec_words_joined(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "exec", "box", "echo", "hello", "world"), 0);
        assert_int_equal(a.npos, 5);
        assert_string_equal(a.pos[1], "box");
        assert_joined(&a, 2, "echo hello world");
}

static void exec_options_after_command_are_command(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "exec", "--timeout", "500", "box", "ls", "-la", "--json"), 0);
        assert_int_equal(a.timeout_ms, 500);
        assert_false(a.json);
        assert_joined(&a, 2, "ls -la --json");
}

static void exec_double_dash(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "exec", "box", "--cwd", "/tmp", "--env", "A=1", "-e", "B=x=y",
                               "--", "--help", "me"),
                         0);
        assert_false(a.help);
        assert_string_equal(a.cwd, "/tmp");
        assert_int_equal(a.nenv, 2);
        assert_string_equal(a.env[0], "A=1");
        assert_string_equal(a.env[1], "B=x=y");
        assert_joined(&a, 2, "--help me");
}

static void single_word_command_kept_verbatim(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "exec", "box", "echo 'a  b' | wc -c"), 0);
        assert_joined(&a, 2, "echo 'a  b' | wc -c");
}

static void flags_and_equals_form(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "--url=http://127.0.0.1:1", "ls", "box", "/w", "-r", "-a",
                               "--json", "--token", "t0k"),
                         0);
        assert_string_equal(a.url, "http://127.0.0.1:1");
        assert_string_equal(a.token, "t0k");
        assert_true(a.recursive);
        assert_true(a.all);
        assert_true(a.json);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[0], "ls");
        assert_string_equal(a.pos[2], "/w");
}

static void create_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "create", "box", "--image", "default", "--instance-type",
                               "small", "--label", "team=a", "--label=x=", "--env", "K=V"),
                         0);
        assert_string_equal(a.image, "default");
        assert_string_equal(a.instance_type, "small");
        assert_int_equal(a.nlabels, 2);
        assert_string_equal(a.labels[1], "x=");
        assert_int_equal(a.nenv, 1);
        assert_false(a.rest_is_command);
        assert_null(a.network);
        assert_int_equal(PARSE(&a, "create", "box", "--network", "none", "--allow",
                               "10.1.2.3/32:5432", "--allow=203.0.113.0/24"),
                         0);
        assert_string_equal(a.network, "none");
        assert_int_equal(a.nallow, 2);
        assert_string_equal(a.allow[1], "203.0.113.0/24");
        assert_int_equal(PARSE(&a, "create", "box", "--network", "all"), -1);
        assert_non_null(strstr(a.error, "none or outbound"));
}

static void usage_errors(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "exec", "box", "--timeout"), -1); /* option, no value */
        assert_int_equal(PARSE(&a, "exec", "--timeout"), -1);
        assert_non_null(strstr(a.error, "needs a value"));
        assert_int_equal(PARSE(&a, "exec", "--timeout", "0", "box", "x"), -1);
        assert_int_equal(PARSE(&a, "exec", "--timeout", "12ms", "box", "x"), -1);
        assert_non_null(strstr(a.error, "12ms"));
        assert_int_equal(PARSE(&a, "create", "box", "--env", "NOEQUALS"), -1);
        assert_int_equal(PARSE(&a, "create", "box", "--label", "=v"), -1);
        assert_int_equal(PARSE(&a, "list", "--bogus"), -1);
        assert_non_null(strstr(a.error, "--bogus"));
        assert_int_equal(PARSE(&a, "--help"), 0);
        assert_true(a.help);
        assert_int_equal(a.npos, 0);
}

static void join_edge_cases(void **state)
{
        struct buf b = BUF_INIT;
        char *w[] = {"a", "", "b"};
        (void)state;
        assert_int_equal(cli_join(w, 0, &b), 0);
        assert_true(b.len == 0);
        assert_int_equal(cli_join(w, 3, &b), 0);
        assert_string_equal(b.data, "a  b");
        buf_free(&b);
}

static void sleep_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "10m", "--keep-alive"), 0);
        assert_string_equal(a.sleep_after, "10m");
        assert_true(a.keep_alive);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after=30s"), 0);
        assert_string_equal(a.sleep_after, "30s");
        assert_false(a.keep_alive);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after"), -1);
}

static void process_commands(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "start", "box", "--id", "web", "--session", "s1", "python3",
                               "-m", "http.server", "--id", "x"),
                         0);
        assert_string_equal(a.id, "web");
        assert_string_equal(a.session, "s1");
        assert_joined(&a, 2, "python3 -m http.server --id x");
        assert_int_equal(PARSE(&a, "logs", "box", "proc-1", "-f"), 0);
        assert_true(a.follow);
        assert_int_equal(PARSE(&a, "kill", "box", "--all", "--signal", "INT"), 0);
        assert_true(a.all);
        assert_string_equal(a.signal, "INT");
        assert_int_equal(
                PARSE(&a, "wait", "box", "p", "--log", "ready.*", "--regex", "--timeout", "100"),
                0);
        assert_string_equal(a.log, "ready.*");
        assert_true(a.regex);
        assert_int_equal(a.timeout_ms, 100);
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--port", "8080", "--http", "/health"), 0);
        assert_int_equal(a.port, 8080);
        assert_string_equal(a.http_path, "/health");
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--exit"), 0);
        assert_true(a.exit);
        assert_int_equal(PARSE(&a, "wait", "box", "p"), -1);
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--exit", "--port", "1"), -1);
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--port", "0"), -1);
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--port", "80x"), -1);
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--exit", "--regex"), -1);
        assert_int_equal(PARSE(&a, "wait", "box", "p", "--exit", "--http", "/"), -1);
        assert_int_equal(PARSE(&a, "start", "box", "--id"), -1);
}

static void git_clone(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "git", "clone", "box", "https://h/r.git", "--branch", "dev",
                               "--depth", "1", "--dir", "src/r", "--timeout", "5000"),
                         0);
        assert_int_equal(a.npos, 4);
        assert_string_equal(a.pos[3], "https://h/r.git");
        assert_string_equal(a.branch, "dev");
        assert_int_equal(a.depth, 1);
        assert_string_equal(a.dir, "src/r");
        assert_int_equal(a.timeout_ms, 5000);
        assert_int_equal(PARSE(&a, "git", "clone", "box", "git@h:o/r"), 0);
        assert_null(a.branch);
        assert_int_equal(a.depth, 0);
        assert_null(a.dir);
        assert_int_equal(PARSE(&a, "git", "clone", "box", "u", "--depth", "0"), -1);
        assert_int_equal(PARSE(&a, "git", "clone", "box", "u", "--depth", "x"), -1);
        assert_int_equal(PARSE(&a, "git", "clone", "box", "u", "--branch"), -1);
        /* a URL that looks like an option is an unknown option, never a URL */
        assert_int_equal(PARSE(&a, "git", "clone", "box", "--upload-pack=x"), -1);
}

/* expose: --token after the command word is the port's token; before it, the API's. */
static void expose_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "--token", "api", "expose", "box", "8080", "--name", "web",
                               "--token", "t_1"),
                         0);
        assert_string_equal(a.token, "api");
        assert_string_equal(a.port_token, "t_1");
        assert_string_equal(a.port_name, "web");
        assert_int_equal(a.npos, 3);
        assert_int_equal(PARSE(&a, "ports", "box", "--token", "api"), 0);
        assert_string_equal(a.token, "api");
        assert_null(a.port_token);
}

static void watch_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "watch", "box", "/workspace", "--include", "*.c",
                               "--include=*.h", "--exclude", "build", "--no-recursive", "--json"),
                         0);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[2], "/workspace");
        assert_int_equal(a.ninclude, 2);
        assert_string_equal(a.include[0], "*.c");
        assert_string_equal(a.include[1], "*.h");
        assert_int_equal(a.nexclude, 1);
        assert_string_equal(a.exclude[0], "build");
        assert_true(a.no_recursive);
        assert_true(a.json);
        assert_int_equal(PARSE(&a, "watch", "box", "/w"), 0);
        assert_int_equal(a.ninclude, 0);
        assert_int_equal(a.nexclude, 0);
        assert_false(a.no_recursive);
        assert_int_equal(PARSE(&a, "watch", "box", "/w", "--include"), -1);
        assert_int_equal(PARSE(&a, "watch", "box", "/w", "--exclude"), -1);
}

static void code_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "code", "box", "--lang", "javascript", "--context", "ctx-1",
                               "--timeout", "900", "--out-dir", "/tmp/o", "--json", "1 + 1"),
                         0);
        assert_string_equal(a.lang, "javascript");
        assert_string_equal(a.context, "ctx-1");
        assert_int_equal(a.timeout_ms, 900);
        assert_string_equal(a.out_dir, "/tmp/o");
        assert_true(a.json);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[2], "1 + 1");
        /* "-" (code from stdin) is a positional word */
        assert_int_equal(PARSE(&a, "code", "box", "-"), 0);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[2], "-");
        assert_int_equal(PARSE(&a, "code", "box", "--lang=typescript", "x"), 0);
        assert_string_equal(a.lang, "typescript");
        assert_int_equal(PARSE(&a, "code", "box", "--lang", "ruby", "x"), -1);
        assert_non_null(strstr(a.error, "--lang"));
        assert_int_equal(PARSE(&a, "code", "box", "--context"), -1);
        assert_int_equal(PARSE(&a, "context", "create", "box", "--lang", "python", "--cwd", "/w",
                               "--env", "A=1"),
                         0);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.lang, "python");
        assert_string_equal(a.cwd, "/w");
        assert_int_equal(a.nenv, 1);
        assert_int_equal(PARSE(&a, "context", "rm", "box", "ctx-1"), 0);
        assert_int_equal(a.npos, 4);
}

static void image_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "image", "build", "tools", "--package", "busybox-static",
                               "--package=g++"),
                         0);
        assert_int_equal(a.npos, 3);
        assert_string_equal(a.pos[2], "tools");
        assert_int_equal(a.npackages, 2);
        assert_string_equal(a.packages[0], "busybox-static");
        assert_string_equal(a.packages[1], "g++");
        assert_int_equal(PARSE(&a, "image", "import", "bb", "bb.tar", "--replace"), 0);
        assert_int_equal(a.npos, 4);
        assert_true(a.replace);
        assert_int_equal(PARSE(&a, "image", "build", "x", "--package"), -1);
}

/* shell: NAME and --session on either side of it. */
static void shell_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "shell", "box"), 0);
        assert_int_equal(a.npos, 2);
        assert_string_equal(a.pos[1], "box");
        assert_null(a.session);
        assert_int_equal(PARSE(&a, "shell", "box", "--session", "s1"), 0);
        assert_int_equal(a.npos, 2);
        assert_string_equal(a.session, "s1");
        assert_int_equal(PARSE(&a, "--session=s2", "shell", "box"), 0);
        assert_string_equal(a.session, "s2");
        assert_int_equal(a.npos, 2);
        assert_int_equal(PARSE(&a, "shell", "box", "--session"), -1);
        assert_int_equal(PARSE(&a, "shell", "box", "--bogus"), -1);
        /* extra words are counted (main's usage check refuses them) */
        assert_int_equal(PARSE(&a, "shell", "box", "bash"), 0);
        assert_int_equal(a.npos, 3);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(exec_words_joined),
                cmocka_unit_test(exec_options_after_command_are_command),
                cmocka_unit_test(exec_double_dash),
                cmocka_unit_test(single_word_command_kept_verbatim),
                cmocka_unit_test(flags_and_equals_form),
                cmocka_unit_test(create_options),
                cmocka_unit_test(usage_errors),
                cmocka_unit_test(join_edge_cases),
                cmocka_unit_test(sleep_options),
                cmocka_unit_test(process_commands),
                cmocka_unit_test(git_clone),
                cmocka_unit_test(expose_options),
                cmocka_unit_test(watch_options),
                cmocka_unit_test(code_options),
                cmocka_unit_test(image_options),
                cmocka_unit_test(shell_options),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
