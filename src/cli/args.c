#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
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

/* The value of --sleep-after: whole seconds, 1 s to 30 days. */
static int take_sleep_after(struct cli_args *a, const char *opt, const char *v)
{
        int64_t ms;

        if (duration_opt(a, opt, v, 1000, 1000, CLI_SLEEP_AFTER_MAX_S * 1000LL, &ms) < 0)
                return -1;
        a->sleep_after_s = (long)(ms / 1000);
        return 0;
}

static int take_timeout(struct cli_args *a, const char *opt, const char *v)
{
        int64_t ms;

        if (duration_opt(a, opt, v, 1, 1, CLI_TIMEOUT_MAX_MS, &ms) < 0)
                return -1;
        a->timeout_ms = (long)ms;
        return 0;
}

static int take_interval(struct cli_args *a, const char *opt, const char *v)
{
        int64_t ms;

        if (duration_opt(a, opt, v, 1, 1, CLI_INTERVAL_MAX_MS, &ms) < 0)
                return -1;
        if (ms < CLI_INTERVAL_MIN_MS)
                return fail(a, "%s takes %d ms or more, not '%s'", opt, CLI_INTERVAL_MIN_MS, v);
        a->interval_ms = (long)ms;
        return 0;
}

/* A number in [min, max] from v into *ret; -1 if v is not one. */
static int number_in(const char *v, long min, long max, long *ret)
{
        char *end;
        long n;

        errno = 0;
        n = strtol(v, &end, 10);
        if (errno || end == v || *end || n < min || n > max)
                return -1;
        *ret = n;
        return 0;
}

static int take_port(struct cli_args *a, const char *opt, const char *v)
{
        if (number_in(v, 1, 65535, &a->port) < 0)
                return fail(a, "--port takes a port in 1..65535, not '%s'", v);
        return 0;
}

static int take_depth(struct cli_args *a, const char *opt, const char *v)
{
        if (number_in(v, 1, 2147483647L, &a->depth) < 0)
                return fail(a, "--depth takes a number of commits >= 1, not '%s'", v);
        return 0;
}

int cli_size_parse(const char *s, long long *ret)
{
        unsigned long long v = 0, mul = 1;
        const char *p = s;

        if (*p < '0' || *p > '9')
                return -1;
        for (; *p >= '0' && *p <= '9'; p++) {
                if (v > (1ULL << 62) / 10)
                        return -1;
                v = v * 10 + (unsigned)(*p - '0');
        }
        switch (*p) {
        case 'K':
        case 'k':
                mul = 1ULL << 10;
                break;
        case 'M':
        case 'm':
                mul = 1ULL << 20;
                break;
        case 'G':
        case 'g':
                mul = 1ULL << 30;
                break;
        case 'T':
        case 't':
                mul = 1ULL << 40;
                break;
        case '\0':
                break;
        case 'B':
                if (p[1] == '\0')
                        break;
                return -1;
        default:
                return -1;
        }
        if (mul > 1) {
                p++;
                if (*p == 'i')
                        p++;
                if (*p == 'B')
                        p++;
        } else if (*p == 'B') {
                p++;
        }
        if (*p || (v && mul > (1ULL << 62) / v))
                return -1;
        *ret = (long long)(v * mul);
        return 0;
}

static int take_max_sandboxes(struct cli_args *a, const char *opt, const char *v)
{
        if (number_in(v, 0, 2147483647L, &a->max_sandboxes) < 0)
                return fail(a, "%s takes a number >= 0, not '%s'", opt, v);
        return 0;
}

static int take_max_memory(struct cli_args *a, const char *opt, const char *v)
{
        if (cli_size_parse(v, &a->max_memory) < 0)
                return fail(a, "%s takes a size (512M, 2G, or bytes), not '%s'", opt, v);
        return 0;
}

/* After the command word "expose", --token is the port's token; before it, the API's. */
static int take_token(struct cli_args *a, const char *opt, const char *v)
{
        if (a->npos > 0 && strcmp(a->pos[0], "expose") == 0)
                a->port_token = v;
        else
                a->token = v;
        return 0;
}

static int take_network(struct cli_args *a, const char *opt, const char *v)
{
        if (strcmp(v, "none") != 0 && strcmp(v, "outbound") != 0)
                return fail(a, "--network takes none or outbound, not '%s'", v);
        a->network = v;
        return 0;
}

static int take_sleep_mode(struct cli_args *a, const char *opt, const char *v)
{
        if (strcmp(v, "files") != 0 && strcmp(v, "memory") != 0)
                return fail(a, "%s takes files or memory, not '%s'", opt, v);
        a->sleep_mode = v;
        return 0;
}

static int take_lang(struct cli_args *a, const char *opt, const char *v)
{
        if (strcmp(v, "python") != 0 && strcmp(v, "javascript") != 0 &&
            strcmp(v, "typescript") != 0)
                return fail(a, "--lang takes python, javascript or typescript, not '%s'", v);
        a->lang = v;
        return 0;
}

/* --env and --label values are KEY=VALUE. */
static int check_kv(struct cli_args *a, const char *opt, const char *v)
{
        return kv_ok(a, v, opt);
}

/* One option of the command line. A FLAG sets the bool at field; a VALUE stores its value
 * (the next word, or what follows '=' in --opt=V) as the string at field, or hands it to
 * take; a LIST appends it to the array at field whose length is at count (at most
 * CLI_MAX_KV), after check. Names from "--" match with "=V" too; short ones exactly. */
struct opt_def {
        const char *names[4];
        enum { FLAG, VALUE, LIST } kind;
        size_t field, count;
        int (*take)(struct cli_args *a, const char *opt, const char *v);
};

#define FLAG_OPT(f, ...)                                                   \
        {                                                                  \
                {__VA_ARGS__}, FLAG, offsetof(struct cli_args, f), 0, NULL \
        }
#define VALUE_OPT(f, name)                                           \
        {                                                            \
                {name}, VALUE, offsetof(struct cli_args, f), 0, NULL \
        }
#define TAKE_OPT(fn, ...)                      \
        {                                      \
                {__VA_ARGS__}, VALUE, 0, 0, fn \
        }
#define LIST_OPT(f, n, check, ...)                                                               \
        {                                                                                        \
                {__VA_ARGS__}, LIST, offsetof(struct cli_args, f), offsetof(struct cli_args, n), \
                        check                                                                    \
        }

static const struct opt_def options[] = {
        FLAG_OPT(help, "--help", "-h"),
        FLAG_OPT(quiet, "--quiet", "-q"),
        FLAG_OPT(version, "--version"),
        FLAG_OPT(json, "--json"),
        FLAG_OPT(recursive, "-r", "-p", "--recursive", "--parents"),
        FLAG_OPT(all, "-a", "--all"),
        FLAG_OPT(replace, "--replace"),
        FLAG_OPT(keep_alive, "--keep-alive"),
        FLAG_OPT(memory, "--memory"),
        FLAG_OPT(no_default_session, "--no-default-session"),
        FLAG_OPT(no_recursive, "--no-recursive"),
        FLAG_OPT(gitignore, "--gitignore"),
        FLAG_OPT(consistent, "--consistent"),
        FLAG_OPT(no_multipart, "--no-multipart"),
        FLAG_OPT(follow, "-f", "--follow"),
        FLAG_OPT(regex, "--regex"),
        FLAG_OPT(exit, "--exit"),
        FLAG_OPT(once, "--once"),
        VALUE_OPT(url, "--url"),
        VALUE_OPT(port_name, "--name"),
        VALUE_OPT(cwd, "--cwd"),
        VALUE_OPT(image, "--image"),
        VALUE_OPT(context, "--context"),
        VALUE_OPT(out_dir, "--out-dir"),
        VALUE_OPT(instance_type, "--instance-type"),
        VALUE_OPT(id, "--id"),
        VALUE_OPT(session, "--session"),
        VALUE_OPT(signal, "--signal"),
        VALUE_OPT(log, "--log"),
        VALUE_OPT(http_path, "--http"),
        VALUE_OPT(branch, "--branch"),
        VALUE_OPT(dir, "--dir"),
        VALUE_OPT(tenant, "--tenant"),
        TAKE_OPT(take_max_sandboxes, "--max-sandboxes"),
        TAKE_OPT(take_max_memory, "--max-memory"),
        VALUE_OPT(ttl, "--ttl"),
        TAKE_OPT(take_token, "--token"),
        TAKE_OPT(take_sleep_after, "--sleep-after"),
        TAKE_OPT(take_network, "--network"),
        TAKE_OPT(take_sleep_mode, "--sleep-mode"),
        TAKE_OPT(take_lang, "--lang"),
        TAKE_OPT(take_timeout, "--timeout"),
        TAKE_OPT(take_port, "--port"),
        TAKE_OPT(take_depth, "--depth"),
        TAKE_OPT(take_interval, "--interval"),
        LIST_OPT(packages, npackages, NULL, "--package"),
        LIST_OPT(include, ninclude, NULL, "--include"),
        LIST_OPT(exclude, nexclude, NULL, "--exclude"),
        LIST_OPT(allow, nallow, NULL, "--allow"),
        LIST_OPT(env, nenv, check_kv, "--env", "-e"),
        LIST_OPT(labels, nlabels, check_kv, "--label"),
};

static bool opt_matches(const struct opt_def *d, const char *s)
{
        for (size_t i = 0; i < ARRAY_SIZE(d->names) && d->names[i]; i++) {
                const char *n = d->names[i];

                if (d->kind != FLAG && n[1] == '-' ? opt_is(s, n) : strcmp(s, n) == 0)
                        return true;
        }
        return false;
}

/* The option at argv[*i] (and its value, which moves *i past it): 0 or -1. */
static int take_option(struct cli_args *a, int argc, char **argv, int *i)
{
        const char *s = argv[*i], *v = NULL;
        const struct opt_def *d = NULL;
        char *base = (char *)a;

        for (size_t k = 0; k < ARRAY_SIZE(options) && !d; k++)
                if (opt_matches(&options[k], s))
                        d = &options[k];
        if (!d)
                return fail(a, "unknown option '%s'", s);
        if (d->kind == FLAG) {
                *(bool *)(base + d->field) = true;
                return 0;
        }
        if (need_value(a, argc, argv, i, &v) < 0)
                return -1;
        if (d->kind == VALUE) {
                if (d->take)
                        return d->take(a, d->names[0], v);
                *(const char **)(base + d->field) = v;
                return 0;
        }
        if (d->take && d->take(a, d->names[0], v) < 0)
                return -1;
        if (*(int *)(base + d->count) >= CLI_MAX_KV)
                return fail(a, "too many %s options", d->names[0]);
        ((const char **)(base + d->field))[(*(int *)(base + d->count))++] = v;
        return 0;
}

/* A word that is not an option: the command, NAME, or the command line of exec and start
 * (from the first word after NAME on, everything is the command's). */
static int take_word(struct cli_args *a, const char *s)
{
        if (a->npos >= (int)ARRAY_SIZE(a->pos) - 1) /* keep a NULL last */
                return fail(a, "too many arguments");
        a->pos[a->npos++] = s;
        if (a->npos == 3 && (strcmp(a->pos[0], "exec") == 0 || strcmp(a->pos[0], "start") == 0))
                a->rest_is_command = true;
        return 0;
}

/* What no single option can say: wait's one condition, and the options that go with
 * another. */
static int check_together(struct cli_args *a)
{
        if (a->pos[0] && strcmp(a->pos[0], "wait") == 0 && !a->help &&
            (a->log != NULL) + (a->port != 0) + a->exit != 1)
                return fail(a, "wait takes one of --log PATTERN, --port N or --exit");
        if ((a->regex && !a->log) || (a->http_path && !a->port))
                return fail(a, "--regex goes with --log, --http with --port");
        if (a->once && a->interval_ms)
                return fail(a, "--interval is for the refreshing view, not --once");
        return 0;
}

int cli_parse(int argc, char **argv, struct cli_args *a)
{
        memset(a, 0, sizeof(*a));
        for (int i = 1; i < argc; i++) {
                const char *s = argv[i];
                int r;

                if (a->rest_is_command || s[0] != '-' || s[1] == '\0')
                        r = take_word(a, s);
                else if (strcmp(s, "--") == 0)
                        r = (a->rest_is_command = true, 0);
                else
                        r = take_option(a, argc, argv, &i);
                if (r < 0)
                        return -1;
        }
        return check_together(a);
}
