/* The cella CLI's argument parsing: exec's command-word joining, flags before and after the
 * sandbox name, "--", KEY=VALUE checks and usage errors; the one duration parser (and its
 * inverse) behind --timeout and --sleep-after; sandbox-name errors that state the rule; the
 * command table behind help. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cli/args.h"
#include "cli/duration.h"
#include "cli/help.h"

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
        assert_null(a.sleep_mode);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-mode", "memory"), 0);
        assert_string_equal(a.sleep_mode, "memory");
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-mode=files"), 0);
        assert_string_equal(a.sleep_mode, "files");
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-mode", "Memory"), -1);
        assert_non_null(strstr(a.error, "--sleep-mode takes files or memory, not 'Memory'"));
        assert_int_equal(PARSE(&a, "fork", "box", "box-2", "--memory"), 0);
        assert_true(a.memory);
        assert_int_equal(PARSE(&a, "fork", "box", "box-2"), 0);
        assert_false(a.memory);
}

static void key_options(void **state)
{
        struct cli_args a;
        long long v = -1;

        (void)state;
        assert_int_equal(PARSE(&a, "key", "create", "--tenant", "acme", "--max-sandboxes", "10",
                               "--max-memory", "2G"),
                         0);
        assert_string_equal(a.tenant, "acme");
        assert_int_equal(a.max_sandboxes, 10);
        assert_true(a.max_memory == 2LL << 30);
        assert_int_equal(PARSE(&a, "key", "create", "--tenant=acme"), 0);
        assert_int_equal(a.max_sandboxes, 0);
        assert_true(a.max_memory == 0);
        assert_int_equal(PARSE(&a, "key", "create", "--tenant", "acme", "--max-sandboxes", "-1"),
                         -1);
        assert_int_equal(PARSE(&a, "key", "create", "--tenant", "acme", "--max-memory", "2X"), -1);
        assert_non_null(strstr(a.error, "--max-memory takes a size"));
        assert_int_equal(cli_size_parse("512M", &v), 0);
        assert_true(v == 512LL << 20);
        assert_int_equal(cli_size_parse("1KiB", &v), 0);
        assert_true(v == 1024);
        assert_int_equal(cli_size_parse("1Gi", &v), 0);
        assert_true(v == 1LL << 30);
        assert_int_equal(cli_size_parse("4096", &v), 0);
        assert_true(v == 4096);
        assert_int_equal(cli_size_parse("10B", &v), 0);
        assert_true(v == 10);
        assert_int_equal(cli_size_parse("", &v), -1);
        assert_int_equal(cli_size_parse("G", &v), -1);
        assert_int_equal(cli_size_parse("1GG", &v), -1);
        assert_int_equal(cli_size_parse("-1", &v), -1);
        assert_int_equal(cli_size_parse("99999999999T", &v), -1);
        assert_int_equal(cli_size_parse("99999999999999999999", &v), -1);
}

static void usage_errors(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "exec", "box", "--timeout"), -1); /* option, no value */
        assert_int_equal(PARSE(&a, "exec", "--timeout"), -1);
        assert_non_null(strstr(a.error, "needs a value"));
        assert_int_equal(PARSE(&a, "exec", "--timeout", "0", "box", "x"), -1);
        assert_non_null(strstr(a.error, "1ms to 7d"));
        assert_int_equal(PARSE(&a, "exec", "--timeout", "12x", "box", "x"), -1);
        assert_non_null(strstr(a.error, "12x"));
        assert_non_null(strstr(a.error, "milliseconds"));
        assert_int_equal(PARSE(&a, "exec", "--timeout", "8d", "box", "x"), -1);
        assert_non_null(strstr(a.error, "1ms to 7d"));
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
        assert_int_equal(a.sleep_after_s, 600);
        assert_true(a.keep_alive);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after=30s"), 0);
        assert_int_equal(a.sleep_after_s, 30);
        assert_false(a.keep_alive);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "90"), 0); /* seconds */
        assert_int_equal(a.sleep_after_s, 90);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "1h30m"), 0);
        assert_int_equal(a.sleep_after_s, 5400);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "30d"), 0);
        assert_int_equal(PARSE(&a, "create", "box"), 0);
        assert_int_equal(a.sleep_after_s, 0);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after"), -1);
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "1500ms"), -1);
        assert_non_null(strstr(a.error, "whole number of seconds"));
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "500ms"), -1);
        assert_non_null(strstr(a.error, "1s to 30d"));
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "31d"), -1);
        assert_non_null(strstr(a.error, "1s to 30d"));
        assert_int_equal(PARSE(&a, "create", "box", "--sleep-after", "ten"), -1);
        assert_non_null(strstr(a.error, "a bare number is seconds"));
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

static void backup_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "backup", "create", "box", "/workspace/app", "--ttl", "600",
                               "--exclude", "node_modules", "--exclude=!keep.log", "--gitignore",
                               "--consistent", "--no-multipart"),
                         0);
        assert_int_equal(a.npos, 4);
        assert_string_equal(a.ttl, "600");
        assert_int_equal(a.nexclude, 2);
        assert_string_equal(a.exclude[0], "node_modules");
        assert_string_equal(a.exclude[1], "!keep.log");
        assert_true(a.gitignore);
        assert_true(a.consistent);
        assert_true(a.no_multipart);
        assert_int_equal(PARSE(&a, "backup", "create", "box", "/w"), 0);
        assert_int_equal(a.nexclude, 0);
        assert_false(a.gitignore);
        assert_false(a.consistent);
        assert_false(a.no_multipart);
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

static int64_t dur(const char *s, int64_t unit)
{
        int64_t ms = -12345;
        int r = cli_duration_parse(s, strlen(s), unit, &ms);

        return r < 0 ? r : ms;
}

/* One grammar for every duration option: bare numbers in the option's unit, NUMBER UNIT
 * groups from the largest unit to the smallest. */
static void top_options(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "top"), 0);
        assert_false(a.once);
        assert_int_equal(a.interval_ms, 0);
        assert_int_equal(PARSE(&a, "top", "--once"), 0);
        assert_true(a.once);
        assert_int_equal(PARSE(&a, "top", "--interval", "500ms"), 0);
        assert_int_equal(a.interval_ms, 500);
        assert_int_equal(PARSE(&a, "top", "--interval=1h"), 0);
        assert_int_equal(a.interval_ms, 3600000);
        assert_int_equal(PARSE(&a, "top", "--interval", "99"), -1);
        assert_non_null(strstr(a.error, "100 ms or more"));
        assert_int_equal(PARSE(&a, "top", "--interval", "0"), -1);
        assert_int_equal(PARSE(&a, "top", "--interval", "61m"), -1);
        assert_int_equal(PARSE(&a, "top", "--interval", "soon"), -1);
        assert_int_equal(PARSE(&a, "top", "--once", "--interval", "1s"), -1);
        assert_non_null(strstr(a.error, "--interval"));
}

static void duration_forms(void **state)
{
        (void)state;
        assert_int_equal(dur("500ms", 1), 500);
        assert_int_equal(dur("30s", 1), 30000);
        assert_int_equal(dur("10m", 1), 600000);
        assert_int_equal(dur("1h", 1), 3600000);
        assert_int_equal(dur("1h30m", 1), 5400000);
        assert_int_equal(dur("2d", 1), 2 * 86400000LL);
        assert_int_equal(dur("1d2h3m4s5ms", 1), 86400000LL + 7200000 + 180000 + 4000 + 5);
        assert_int_equal(dur("1m30s500ms", 1), 90500);
        assert_int_equal(dur("90", 1), 90);       /* --timeout: milliseconds */
        assert_int_equal(dur("90", 1000), 90000); /* --sleep-after: seconds */
        assert_int_equal(dur("0", 1000), 0);
        assert_int_equal(dur("0s", 1), 0);
        assert_int_equal(dur("007s", 1), 7000);
        assert_int_equal(dur("366d", 1), CLI_DURATION_MAX_MS);
}

static void duration_errors(void **state)
{
        (void)state;
        static const char *const bad[] = {
                "",   "s",   "ms",    "-1s",  "+1s", "1.5s", "1 s",  " 1s",  "1s ",
                "1S", "1M",  "1x",    "1sm",  "1h1", "1s1m", "1m1h", "1s1s", "1ms5",
                "h1", "1hh", "1h-1m", "0x10", "1e3", "1msx", "1d1d", "1,5s", "9s9",
        };
        int64_t ms = 77;

        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                if (dur(bad[i], 1) != -EINVAL)
                        fail_msg("'%s' parsed as %lld", bad[i], (long long)dur(bad[i], 1));
        }
        assert_int_equal(dur("367d", 1), -ERANGE);
        assert_int_equal(dur("99999999999999999999999s", 1), -ERANGE);
        assert_int_equal(dur("99999999999999999999999", 1), -ERANGE);
        assert_int_equal(dur("31622400001", 1), -ERANGE);
        assert_int_equal(dur("366d1ms", 1), -ERANGE);
        assert_int_equal(dur("31622401", 1000), -ERANGE);
        /* a NUL inside the given length is not a duration; nothing written on failure */
        assert_int_equal(cli_duration_parse("1s\0", 3, 1, &ms), -EINVAL);
        assert_int_equal(ms, 77);
        assert_int_equal(cli_duration_parse("10s", 2, 1, &ms), 0); /* "10": the length counts */
        assert_int_equal(ms, 10);
}

static void duration_format_round_trip(void **state)
{
        static const struct {
                int64_t ms;
                const char *text;
        } cases[] = {
                {0, "0s"},
                {1, "1ms"},
                {999, "999ms"},
                {1000, "1s"},
                {1500, "1s500ms"},
                {60000, "1m"},
                {90000, "1m30s"},
                {3600000, "1h"},
                {5400000, "1h30m"},
                {86400000, "1d"},
                {90061001, "1d1h1m1s1ms"},
                {CLI_DURATION_MAX_MS, "366d"},
        };
        char buf[64];
        (void)state;

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                assert_int_equal(cli_duration_format(cases[i].ms, buf, sizeof(buf)), 0);
                assert_string_equal(buf, cases[i].text);
                assert_int_equal(dur(buf, 1000), cases[i].ms);
        }
        assert_int_equal(cli_duration_format(-1, buf, sizeof(buf)), -ERANGE);
        assert_int_equal(cli_duration_format(CLI_DURATION_MAX_MS + 1, buf, sizeof(buf)), -ERANGE);
        assert_int_equal(cli_duration_format(90061001, buf, 5), -ENOBUFS);
        assert_int_equal(cli_duration_format(0, buf, 2), -ENOBUFS);
}

static void time_parse(void **state)
{
        int64_t ms = 0;
        (void)state;

        assert_int_equal(cli_time_parse("1970-01-01T00:00:01.002Z", 24, &ms), 0);
        assert_int_equal(ms, 1002);
        assert_int_equal(cli_time_parse("2026-11-27T03:03:52.449Z", 24, &ms), 0);
        assert_int_equal(ms, 1795748632449LL);
        assert_int_equal(cli_time_parse("2024-02-29T00:00:00.000Z", 24, &ms), 0);
        assert_int_equal(cli_time_parse("2023-02-29T00:00:00.000Z", 24, &ms), -EINVAL);
        assert_int_equal(cli_time_parse("2026-13-01T00:00:00.000Z", 24, &ms), -EINVAL);
        assert_int_equal(cli_time_parse("2026-11-27T24:00:00.000Z", 24, &ms), -EINVAL);
        assert_int_equal(cli_time_parse("2026-11-27 03:03:52.449Z", 24, &ms), -EINVAL);
        assert_int_equal(cli_time_parse("2026-11-27T03:03:52Z", 20, &ms), -EINVAL);
        assert_int_equal(cli_time_parse("", 0, &ms), -EINVAL);
}

/* The name error states the rule, never an API option. */
static void sandbox_names(void **state)
{
        char msg[512];
        (void)state;

        assert_true(cli_sandbox_name_ok("box-1", msg, sizeof(msg)));
        assert_true(cli_sandbox_name_ok("1box", msg, sizeof(msg)));
        assert_false(cli_sandbox_name_ok("My_Box", msg, sizeof(msg)));
        assert_non_null(strstr(msg, "'My_Box'"));
        assert_non_null(strstr(msg, "1-63 characters of lower-case a-z, 0-9 and '-'"));
        assert_null(strstr(msg, "normalizeId"));
        assert_false(cli_sandbox_name_ok("-box", msg, sizeof(msg)));
        assert_non_null(strstr(msg, "not starting or ending with '-'"));
        assert_false(cli_sandbox_name_ok("", msg, sizeof(msg)));
        assert_non_null(strstr(msg, "1-63 characters"));
        assert_false(cli_sandbox_name_ok(
                "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", msg,
                sizeof(msg))); /* 64 */
        assert_non_null(strstr(msg, "1-63 characters"));
        assert_false(cli_sandbox_name_ok("default", msg, sizeof(msg)));
        assert_non_null(strstr(msg, "reserved"));
        assert_false(cli_sandbox_name_ok("pool-3", msg, sizeof(msg)));
        assert_non_null(strstr(msg, "reserved"));
}

static void global_flags(void **state)
{
        struct cli_args a;
        (void)state;
        assert_int_equal(PARSE(&a, "-q", "rm", "box", "/w/x"), 0);
        assert_true(a.quiet);
        assert_int_equal(PARSE(&a, "mkdir", "box", "/w/d", "--quiet", "-p"), 0);
        assert_true(a.quiet);
        assert_true(a.recursive);
        /* after exec's first command word, -q is the command's */
        assert_int_equal(PARSE(&a, "exec", "box", "grep", "-q", "x"), 0);
        assert_false(a.quiet);
        assert_int_equal(PARSE(&a, "--version"), 0);
        assert_true(a.version);
        assert_int_equal(PARSE(&a, "wait", "-h"), 0); /* help needs no --log/--port/--exit */
        assert_true(a.help);
        assert_int_equal(PARSE(&a, "help", "exec"), 0);
        assert_int_equal(a.npos, 2);
        assert_false(a.rest_is_command);
}

/* Every command has a usage starting with its own words, a summary and an example. */
static void command_table(void **state)
{
        char word[64];
        (void)state;
        assert_true(cli_ncommands >= 29);
        for (size_t i = 0; i < cli_ncommands; i++) {
                const struct cli_command *c = &cli_commands[i];

                snprintf(word, sizeof(word), "cella %s", c->name);
                assert_ptr_equal(cli_command_find(c->name), c);
                assert_int_equal(strncmp(c->usage, word, strlen(word)), 0);
                assert_non_null(c->summary);
                assert_non_null(c->example);
                assert_true(strlen(c->example) > 0);
                assert_true(c->name_at >= 0 && c->name_at <= 2);
                if (c->name_at > 0)
                        assert_non_null(strstr(c->usage, "NAME"));
        }
        assert_null(cli_command_find("bogus"));
        assert_null(cli_command_find(NULL));
        assert_int_equal(cli_command_find("session")->name_at, 2);
        assert_int_equal(cli_command_find("exec")->name_at, 1);
        assert_int_equal(cli_command_find("image")->name_at, 0);
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
                cmocka_unit_test(key_options),
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
                cmocka_unit_test(top_options),
                cmocka_unit_test(duration_forms),
                cmocka_unit_test(duration_errors),
                cmocka_unit_test(duration_format_round_trip),
                cmocka_unit_test(time_parse),
                cmocka_unit_test(sandbox_names),
                cmocka_unit_test(global_flags),
                cmocka_unit_test(command_table),
                cmocka_unit_test(backup_options),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
