#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/duration.h"
#include "common/limits.h"
#include "common/macros.h"
#include "common/name.h"

int cli_join(char **words, int n, struct buf *out)
{
        for (int i = 0; i < n; i++) {
                int r = buf_append_str(out, words[i]);
                if (r < 0)
                        return r;
                if (i + 1 < n && (r = buf_append(out, " ", 1)) < 0)
                        return r;
        }
        return 0;
}

static int fail(struct cli_args *a, const char *fmt, ...) _printf_(2, 3);
static int fail(struct cli_args *a, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(a->error, sizeof(a->error), fmt, ap);
        va_end(ap);
        return -1;
}

static int need_value(struct cli_args *a, int argc, char **argv, int *i, const char **ret)
{
        const char *opt = argv[*i];
        const char *eq = strchr(opt, '=');
        if (opt[0] == '-' && opt[1] == '-' && eq) {
                *ret = eq + 1;
                return 0;
        }
        if (*i + 1 >= argc)
                return fail(a, "option %s needs a value", opt);
        *ret = argv[++*i];
        return 0;
}

static bool opt_is(const char *arg, const char *name)
{
        size_t n = strlen(name);
        return strncmp(arg, name, n) == 0 && (arg[n] == '\0' || arg[n] == '=');
}

static int kv_ok(struct cli_args *a, const char *kv, const char *what)
{
        const char *eq = strchr(kv, '=');
        if (!eq || eq == kv)
                return fail(a, "%s must be KEY=VALUE", what);
        return 0;
}

bool cli_sandbox_name_ok(const char *name, char *msg, size_t size)
{
        static const char rule[] = "a sandbox name is 1-63 characters of lower-case a-z, 0-9 "
                                   "and '-', not starting or ending with '-'";
        struct cella_error err = {0};
        char out[CELLA_NAME_MAX + 1];
        size_t len = strlen(name);
        bool upper = false;

        if (sandbox_name_check(name, len, false, out, &err) == 0)
                return true;
        for (size_t i = 0; i < len; i++)
                upper |= name[i] >= 'A' && name[i] <= 'Z';
        if (len > 0 && len <= CELLA_NAME_MAX && sandbox_name_is_reserved(name))
                /* the list of common/name.c */
                snprintf(msg, size,
                         "invalid sandbox name '%s': it is reserved (so are default, localhost, "
                         "health, metrics, api, v1, admin, system, cella, pool and pool-*)",
                         name);
        else
                snprintf(msg, size, "invalid sandbox name '%.80s'%s: %s%s", name,
                         len > CELLA_NAME_MAX ? "..." : "", rule,
                         upper ? " (write it in lower case)" : "");
        return false;
}

/* A duration option's value (cli/duration.h) in [min_ms, max_ms]; unit_ms is what a bare
 * number counts. */
static int duration_opt(struct cli_args *a, const char *opt, const char *v, int64_t unit_ms,
                        int64_t min_ms, int64_t max_ms, int64_t *ret_ms)
{
        char lo[32], hi[32];
        int64_t ms;
        int r = cli_duration_parse(v, strlen(v), unit_ms, &ms);

        if (r == -EINVAL)
                return fail(a,
                            "%s takes a duration such as 500ms, 30s, 10m or 1h30m (a bare number "
                            "is %s), not '%s'",
                            opt, unit_ms == 1 ? "milliseconds" : "seconds", v);
        cli_duration_format(min_ms, lo, sizeof(lo));
        cli_duration_format(max_ms, hi, sizeof(hi));
        if (r < 0 || ms < min_ms || ms > max_ms)
                return fail(a, "%s takes %s to %s, not '%s'", opt, lo, hi, v);
        if (ms % min_ms != 0)
                return fail(a, "%s takes a whole number of %s, not '%s'", opt,
                            min_ms == 1000 ? "seconds" : "milliseconds", v);
        *ret_ms = ms;
        return 0;
}

int cli_parse(int argc, char **argv, struct cli_args *a)
{
        bool is_exec = false;

        memset(a, 0, sizeof(*a));
        for (int i = 1; i < argc; i++) {
                const char *s = argv[i], *v;

                if (a->rest_is_command || (s[0] != '-' || s[1] == '\0')) {
                        if (a->npos >=
                            (int)(sizeof(a->pos) / sizeof(a->pos[0])) - 1) /* keep a NULL last */
                                return fail(a, "too many arguments");
                        a->pos[a->npos++] = s;
                        if (a->npos == 1 && (strcmp(s, "exec") == 0 || strcmp(s, "start") == 0))
                                is_exec = true;
                        /* exec NAME WORD...: the command starts at the first word. */
                        if (is_exec && a->npos == 3)
                                a->rest_is_command = true;
                        continue;
                }
                if (strcmp(s, "--") == 0) {
                        a->rest_is_command = true;
                        continue;
                }
                if (strcmp(s, "--help") == 0 || strcmp(s, "-h") == 0) {
                        a->help = true;
                } else if (strcmp(s, "--quiet") == 0 || strcmp(s, "-q") == 0) {
                        a->quiet = true;
                } else if (strcmp(s, "--version") == 0) {
                        a->version = true;
                } else if (strcmp(s, "--json") == 0) {
                        a->json = true;
                } else if (strcmp(s, "-r") == 0 || strcmp(s, "-p") == 0 ||
                           strcmp(s, "--recursive") == 0 || strcmp(s, "--parents") == 0) {
                        a->recursive = true;
                } else if (strcmp(s, "-a") == 0 || strcmp(s, "--all") == 0) {
                        a->all = true;
                } else if (opt_is(s, "--url")) {
                        if (need_value(a, argc, argv, &i, &a->url) < 0)
                                return -1;
                } else if (opt_is(s, "--token")) {
                        bool expose = a->npos > 0 && strcmp(a->pos[0], "expose") == 0;

                        if (need_value(a, argc, argv, &i, expose ? &a->port_token : &a->token) < 0)
                                return -1;
                } else if (opt_is(s, "--name")) {
                        if (need_value(a, argc, argv, &i, &a->port_name) < 0)
                                return -1;
                } else if (opt_is(s, "--cwd")) {
                        if (need_value(a, argc, argv, &i, &a->cwd) < 0)
                                return -1;
                } else if (opt_is(s, "--image")) {
                        if (need_value(a, argc, argv, &i, &a->image) < 0)
                                return -1;
                } else if (opt_is(s, "--package")) {
                        if (need_value(a, argc, argv, &i, &v) < 0)
                                return -1;
                        if (a->npackages >= CLI_MAX_KV)
                                return fail(a, "too many --package options");
                        a->packages[a->npackages++] = v;
                } else if (strcmp(s, "--replace") == 0) {
                        a->replace = true;
                } else if (strcmp(s, "--keep-alive") == 0) {
                        a->keep_alive = true;
                } else if (strcmp(s, "--no-default-session") == 0) {
                        a->no_default_session = true;

                } else if (opt_is(s, "--sleep-after")) {
                        int64_t ms;

                        if (need_value(a, argc, argv, &i, &v) < 0 ||
                            duration_opt(a, "--sleep-after", v, 1000, 1000,
                                         CLI_SLEEP_AFTER_MAX_S * 1000LL, &ms) < 0)
                                return -1;
                        a->sleep_after_s = (long)(ms / 1000);
                } else if (opt_is(s, "--network")) {
                        if (need_value(a, argc, argv, &i, &a->network) < 0)
                                return -1;
                        if (strcmp(a->network, "none") != 0 && strcmp(a->network, "outbound") != 0)
                                return fail(a, "--network takes none or outbound, not '%s'",
                                            a->network);
                } else if (opt_is(s, "--include") || opt_is(s, "--exclude")) {
                        bool inc = opt_is(s, "--include");
                        if (need_value(a, argc, argv, &i, &v) < 0)
                                return -1;
                        if ((inc ? a->ninclude : a->nexclude) >= CLI_MAX_KV)
                                return fail(a, "too many %s options",
                                            inc ? "--include" : "--exclude");
                        if (inc)
                                a->include[a->ninclude++] = v;
                        else
                                a->exclude[a->nexclude++] = v;
                } else if (opt_is(s, "--lang")) {
                        if (need_value(a, argc, argv, &i, &a->lang) < 0)
                                return -1;
                        if (strcmp(a->lang, "python") != 0 && strcmp(a->lang, "javascript") != 0 &&
                            strcmp(a->lang, "typescript") != 0)
                                return fail(a,
                                            "--lang takes python, javascript or typescript, not "
                                            "'%s'",
                                            a->lang);
                } else if (opt_is(s, "--context")) {
                        if (need_value(a, argc, argv, &i, &a->context) < 0)
                                return -1;
                } else if (opt_is(s, "--out-dir")) {
                        if (need_value(a, argc, argv, &i, &a->out_dir) < 0)
                                return -1;
                } else if (strcmp(s, "--no-recursive") == 0) {
                        a->no_recursive = true;
                } else if (opt_is(s, "--allow")) {
                        if (need_value(a, argc, argv, &i, &v) < 0)
                                return -1;
                        if (a->nallow >= CLI_MAX_KV)
                                return fail(a, "too many %s options", "--allow");
                        a->allow[a->nallow++] = v;
                } else if (opt_is(s, "--instance-type")) {
                        if (need_value(a, argc, argv, &i, &a->instance_type) < 0)
                                return -1;
                } else if (opt_is(s, "--timeout")) {
                        int64_t ms;

                        if (need_value(a, argc, argv, &i, &v) < 0 ||
                            duration_opt(a, "--timeout", v, 1, 1, CLI_TIMEOUT_MAX_MS, &ms) < 0)
                                return -1;
                        a->timeout_ms = (long)ms;
                } else if (opt_is(s, "--env") || strcmp(s, "-e") == 0) {
                        if (need_value(a, argc, argv, &i, &v) < 0 || kv_ok(a, v, "--env") < 0)
                                return -1;
                        if (a->nenv >= CLI_MAX_KV)
                                return fail(a, "too many %s options", "--env");
                        a->env[a->nenv++] = v;
                } else if (opt_is(s, "--id")) {
                        if (need_value(a, argc, argv, &i, &a->id) < 0)
                                return -1;
                } else if (opt_is(s, "--session")) {
                        if (need_value(a, argc, argv, &i, &a->session) < 0)
                                return -1;
                } else if (opt_is(s, "--signal")) {
                        if (need_value(a, argc, argv, &i, &a->signal) < 0)
                                return -1;
                } else if (strcmp(s, "-f") == 0 || strcmp(s, "--follow") == 0) {
                        a->follow = true;
                } else if (opt_is(s, "--log")) {
                        if (need_value(a, argc, argv, &i, &a->log) < 0)
                                return -1;
                } else if (strcmp(s, "--regex") == 0) {
                        a->regex = true;
                } else if (strcmp(s, "--exit") == 0) {
                        a->exit = true;
                } else if (opt_is(s, "--http")) {
                        if (need_value(a, argc, argv, &i, &a->http_path) < 0)
                                return -1;
                } else if (opt_is(s, "--port")) {
                        char *end;
                        if (need_value(a, argc, argv, &i, &v) < 0)
                                return -1;
                        errno = 0;
                        a->port = strtol(v, &end, 10);
                        if (errno || end == v || *end || a->port < 1 || a->port > 65535)
                                return fail(a, "--port takes a port in 1..65535, not '%s'", v);
                } else if (opt_is(s, "--branch")) {
                        if (need_value(a, argc, argv, &i, &a->branch) < 0)
                                return -1;
                } else if (opt_is(s, "--dir")) {
                        if (need_value(a, argc, argv, &i, &a->dir) < 0)
                                return -1;
                } else if (opt_is(s, "--depth")) {
                        char *end;
                        if (need_value(a, argc, argv, &i, &v) < 0)
                                return -1;
                        errno = 0;
                        a->depth = strtol(v, &end, 10);
                        if (errno || end == v || *end || a->depth < 1 || a->depth > 2147483647L)
                                return fail(a, "--depth takes a number of commits >= 1, not '%s'",
                                            v);
                } else if (opt_is(s, "--label")) {
                        if (need_value(a, argc, argv, &i, &v) < 0 || kv_ok(a, v, "--label") < 0)
                                return -1;
                        if (a->nlabels >= CLI_MAX_KV)
                                return fail(a, "too many %s options", "--label");
                        a->labels[a->nlabels++] = v;
                } else {
                        return fail(a, "unknown option '%s'", s);
                }
        }
        if (a->pos[0] && strcmp(a->pos[0], "wait") == 0 && !a->help &&
            (a->log != NULL) + (a->port != 0) + a->exit != 1)
                return fail(a, "wait takes one of --log PATTERN, --port N or --exit");
        if ((a->regex && !a->log) || (a->http_path && !a->port))
                return fail(a, "--regex goes with --log, --http with --port");
        return 0;
}
