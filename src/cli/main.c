/* cella: the command-line tool, on libcella. Exit status: the command's own for exec (and
 * the process's for wait --exit), 0 on success, 1 for an API or transport error, 2 for a
 * usage error, 124 for an exec timeout or a wait that timed out. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cella/cella.h"
#include "cli/args.h"
#include "cli/duration.h"
#include "cli/help.h"
#include "cli/shell.h"
#include "common/base64.h"
#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/macros.h"
#include "common/timeutil.h"

/* A usage error: the message, then the command's usage lines (or the command list) on
 * stderr; exit status 2. */
static int usage_error(const struct cli_args *a, const char *fmt, ...) _printf_(2, 3);
static int usage_error(const struct cli_args *a, const char *fmt, ...)
{
        const struct cli_command *cmd = a->npos > 0 ? cli_command_find(a->pos[0]) : NULL;
        va_list ap;

        fputs("cella: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        if (cmd)
                cli_usage_lines_print(stderr, cmd);
        else
                cli_usage_print(stderr);
        return 2;
}

/* A wrong number of words for the command. */
static int bad_args(const struct cli_args *a)
{
        return usage_error(a, "wrong arguments for '%s'", a->pos[0]);
}

/* The one line a mutating command prints on success; none with --quiet or --json. */
static void confirm(const struct cli_args *a, const char *fmt, ...) _printf_(2, 3);
static void confirm(const struct cli_args *a, const char *fmt, ...)
{
        va_list ap;

        if (a->quiet || a->json)
                return;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
}

static int api_fail(cella_client *c, int r)
{
        const char *code = cella_client_error_code(c);
        const char *msg = cella_client_error_message(c);
        if (r == CELLA_ERR_NOMEM)
                fprintf(stderr, "cella: out of memory\n");
        else
                fprintf(stderr, "cella: %s: %s\n", *code ? code : "ERROR",
                        *msg ? msg : "request failed");
        return 1;
}

static int write_all(int fd, const void *p, size_t n)
{
        const char *s = p;
        while (n > 0) {
                ssize_t w = write(fd, s, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -1;
                s += w;
                n -= (size_t)w;
        }
        return 0;
}

static int on_out(const void *d, size_t n, void *ud)
{
        return write_all(1, d, n);
}

static int on_err(const void *d, size_t n, void *ud)
{
        return write_all(2, d, n);
}

static void print_json(const char *text)
{
        _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
        char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        printf("%s\n", s ? s : text);
        free(s);
}

static const char *str(json_t *o, const char *k)
{
        const char *s = json_string_value(json_object_get(o, k));
        return s ? s : "";
}

static int cmd_exec(cella_client *c, struct cli_args *a, int argc, char **argv)
{
        struct cella_exec_options o = {
                .cwd = a->cwd, .timeout_ms = a->timeout_ms, .session_id = a->session};
        struct cella_exec_callbacks cb = {.on_stdout = on_out, .on_stderr = on_err};
        struct buf cmd = BUF_INIT;
        int code = 0, r;

        if (a->npos < 3)
                return bad_args(a);
        if (a->nenv)
                o.env = a->env;
        if (cli_join((char **)a->pos + 2, a->npos - 2, &cmd) < 0)
                return api_fail(c, CELLA_ERR_NOMEM);
        r = cella_exec_stream(c, a->pos[1], cmd.data, &o, &cb, &code);
        buf_free(&cmd);
        if (r < 0) {
                /* `exit 3` ended the session's shell: that is the command's exit status, as
                 * it would be for a shell of one's own. */
                if (strcmp(cella_client_error_code(c), "SESSION_TERMINATED") == 0)
                        return code;
                api_fail(c, r);
                return strcmp(cella_client_error_code(c), "COMMAND_TIMEOUT") == 0 ? 124 : 1;
        }
        return code;
}

static int cmd_session(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;

        if (a->npos < 3)
                return bad_args(a);
        if (strcmp(a->pos[1], "create") == 0 && a->npos == 3) {
                struct cella_session_options o = {.id = a->id,
                                                  .cwd = a->cwd,
                                                  .env = a->nenv ? a->env : NULL,
                                                  .command_timeout_ms = a->timeout_ms};
                _cleanup_json_ json_t *j = NULL;

                r = cella_session_create(c, a->pos[2], &o, &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%s\n", str(j, "id"));
                }
        } else if (strcmp(a->pos[1], "ls") == 0 && a->npos == 3) {
                _cleanup_json_ json_t *j = NULL;
                json_t *s;
                size_t i;

                r = cella_session_list(c, a->pos[2], &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%-24s %-5s %-24s %s\n", "ID", "BUSY", "CREATED", "CWD");
                        json_array_foreach(json_object_get(j, "sessions"), i, s)
                                printf("%-24s %-5s %-24s %s\n", str(s, "id"),
                                       json_is_true(json_object_get(s, "busy")) ? "yes" : "no",
                                       str(s, "createdAt"), str(s, "cwd"));
                }
        } else if (strcmp(a->pos[1], "rm") == 0 && a->npos == 4) {
                r = cella_session_delete(c, a->pos[2], a->pos[3]);
                if (r < 0)
                        return api_fail(c, r);
                confirm(a, "removed session %s", a->pos[3]);
        } else {
                return bad_args(a);
        }
        free(text);
        return 0;
}

static int cmd_context(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        json_t *x;
        size_t i;
        int r;

        if (a->npos < 3)
                return bad_args(a);
        if (strcmp(a->pos[1], "create") == 0 && a->npos == 3) {
                struct cella_context_options o = {
                        .language = a->lang, .cwd = a->cwd, .env = a->nenv ? a->env : NULL};

                r = cella_context_create(c, a->pos[2], &o, &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%s\n", str(j, "id"));
                }
        } else if (strcmp(a->pos[1], "ls") == 0 && a->npos == 3) {
                r = cella_context_list(c, a->pos[2], &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%-24s %-11s %-9s %s\n", "ID", "LANGUAGE", "STATUS", "CWD");
                        json_array_foreach(json_object_get(j, "contexts"), i, x)
                                printf("%-24s %-11s %-9s %s\n", str(x, "id"), str(x, "language"),
                                       str(x, "status"), str(x, "cwd"));
                }
        } else if (strcmp(a->pos[1], "rm") == 0 && a->npos == 4) {
                r = cella_context_delete(c, a->pos[2], a->pos[3]);
                if (r < 0)
                        return api_fail(c, r);
                confirm(a, "removed context %s", a->pos[3]);
        } else {
                return bad_args(a);
        }
        free(text);
        return 0;
}

struct code_out {
        const char *out_dir;
        int images;
        bool error; /* the code raised */
        bool timed_out;
};

/* Write a base64 image result to DIR/result-N.EXT; prints the path. */
static void save_image(struct code_out *o, const char *b64, const char *ext, bool is_text)
{
        char path[4096];
        FILE *f;

        if (!o->out_dir) {
                fprintf(stderr, "cella: a %s result (use --out-dir DIR to save it)\n", ext);
                return;
        }
        snprintf(path, sizeof(path), "%s/result-%d.%s", o->out_dir, ++o->images, ext);
        f = fopen(path, "we");
        if (!f) {
                fprintf(stderr, "cella: %s: %s\n", path, strerror(errno));
                return;
        }
        if (is_text) {
                fputs(b64, f);
        } else {
                struct buf bytes = BUF_INIT;

                if (base64_decode(&bytes, b64, strlen(b64)) == 0 && bytes.len)
                        fwrite(bytes.data, 1, bytes.len, f);
                else
                        fprintf(stderr, "cella: %s: the result is not valid base64\n", path);
                buf_free(&bytes);
        }
        if (fclose(f) != 0)
                fprintf(stderr, "cella: %s: %s\n", path, strerror(errno));
        else
                printf("%s\n", path);
}

static void print_code_result(struct code_out *o, json_t *r)
{
        const char *png = str(r, "png"), *jpeg = str(r, "jpeg"), *svg = str(r, "svg");

        if (*png)
                save_image(o, png, "png", false);
        if (*jpeg)
                save_image(o, jpeg, "jpeg", false);
        if (*svg)
                save_image(o, svg, "svg", true);
        if (!*png && !*jpeg && !*svg && json_object_get(r, "text"))
                printf("%s\n", str(r, "text"));
}

static void print_code_error(struct code_out *o, json_t *e)
{
        json_t *line;
        size_t i;

        o->error = true;
        fflush(stdout);
        json_array_foreach(json_object_get(e, "traceback"), i, line)
                fprintf(stderr, "%s\n", json_string_value(line) ? json_string_value(line) : "");
        if (json_array_size(json_object_get(e, "traceback")) == 0)
                fprintf(stderr, "%s: %s\n", str(e, "name"), str(e, "message"));
}

static int on_code_event(const char *json, size_t len, void *ud)
{
        struct code_out *o = ud;
        _cleanup_json_ json_t *j = json_loadb(json, len, 0, NULL);
        const char *type = str(j, "type");

        if (strcmp(type, "stdout") == 0) {
                fputs(str(j, "text"), stdout);
                fflush(stdout);
        } else if (strcmp(type, "stderr") == 0) {
                fputs(str(j, "text"), stderr);
        } else if (strcmp(type, "result") == 0) {
                print_code_result(o, j);
        } else if (strcmp(type, "error") == 0) {
                print_code_error(o, j);
        } else if (strcmp(type, "execution_complete") == 0) {
                o->timed_out = json_is_true(json_object_get(j, "timedOut"));
        }
        fflush(stdout);
        return 0;
}

static int cmd_code(cella_client *c, struct cli_args *a)
{
        struct cella_code_options o = {
                .language = a->lang, .context_id = a->context, .timeout_ms = a->timeout_ms};
        struct code_out out = {.out_dir = a->out_dir};
        struct buf code = BUF_INIT;
        const char *src = a->pos[2];
        char *text = NULL;
        int r;

        if (strcmp(src, "-") == 0) {
                char chunk[65536];
                size_t n;

                while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
                        if (buf_append(&code, chunk, n) < 0)
                                return api_fail(c, CELLA_ERR_NOMEM);
                if (buf_append(&code, "", 1) < 0)
                        return api_fail(c, CELLA_ERR_NOMEM);
                src = code.data;
        }
        if (a->json) {
                r = cella_code_run(c, a->pos[1], src, &o, NULL, NULL, &text);
        } else {
                r = cella_code_run(c, a->pos[1], src, &o, on_code_event, &out, NULL);
        }
        buf_free(&code);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                _cleanup_json_ json_t *j = json_loads(text, 0, NULL);

                print_json(text);
                out.error = json_object_get(j, "error") != NULL;
                out.timed_out = json_is_true(json_object_get(j, "timedOut"));
                free(text);
        }
        if (out.timed_out)
                fprintf(stderr, "cella: timed out\n");
        return out.error || out.timed_out ? 1 : 0;
}

/* "2m13s ago" for an API timestamp (whole seconds; "just now" under one), "-" when it does
 * not parse. */
static const char *fmt_ago(const char *iso, char out[48])
{
        int64_t t, d;
        char dur[32];

        if (cli_time_parse(iso, strlen(iso), &t) < 0)
                return "-";
        d = time_now_ms() - t;
        if (d < 1000)
                return "just now";
        if (d > CLI_DURATION_MAX_MS)
                d = CLI_DURATION_MAX_MS;
        cli_duration_format(d / 1000 * 1000, dur, sizeof(dur));
        snprintf(out, 48, "%s ago", dur);
        return out;
}

/* A sandbox's sleepAfter for display: "10m", or "never" with keepAlive. */
static const char *fmt_sleep_after(json_t *sb, char out[32])
{
        json_int_t s = json_integer_value(json_object_get(sb, "sleepAfter"));

        if (json_is_true(json_object_get(sb, "keepAlive")))
                return "never";
        if (s <= 0 || cli_duration_format((int64_t)s * 1000, out, 32) < 0)
                return "-";
        return out;
}

static int cmd_list(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r = cella_sandbox_list(c, &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
        } else {
                _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
                json_t *s;
                size_t i;
                printf("%-32s %-9s %-11s %-14s %-12s %s\n", "NAME", "STATE", "SLEEP AFTER",
                       "LAST ACTIVE", "IMAGE", "TYPE");
                json_array_foreach(json_object_get(j, "sandboxes"), i, s)
                {
                        char sl[32], ago[48];

                        printf("%-32s %-9s %-11s %-14s %-12s %s\n", str(s, "id"), str(s, "state"),
                               fmt_sleep_after(s, sl), fmt_ago(str(s, "lastActiveAt"), ago),
                               str(s, "image"), str(s, "instanceType"));
                }
        }
        free(text);
        return 0;
}

/* state, and what sleeping means for what runs in it */
static void print_state(json_t *j)
{
        const char *state = str(j, "state");
        json_int_t sleep_s = json_integer_value(json_object_get(j, "sleepAfter"));
        char sl[32], left[32];
        int64_t t;

        if (strcmp(state, "sleeping") == 0)
                printf("state:         sleeping (idle for its sleep-after time: its processes, "
                       "sessions and code\n"
                       "               contexts were stopped, its files kept; the next command "
                       "wakes it)\n");
        else if (strcmp(state, "stopped") == 0)
                printf("state:         stopped (starts again, with its files, on the next "
                       "command)\n");
        else
                printf("state:         %s\n", state);
        if (json_is_true(json_object_get(j, "keepAlive"))) {
                printf("sleep after:   never (keep alive)\n");
        } else {
                printf("sleep after:   %s without activity", fmt_sleep_after(j, sl));
                if (strcmp(state, "running") == 0 &&
                    cli_time_parse(str(j, "lastActiveAt"), strlen(str(j, "lastActiveAt")), &t) ==
                            0) {
                        int64_t rest = t + (int64_t)sleep_s * 1000 - time_now_ms();

                        rest = rest < 0 ? 0 : rest / 1000 * 1000;
                        if (rest > CLI_DURATION_MAX_MS)
                                rest = CLI_DURATION_MAX_MS;
                        cli_duration_format(rest, left, sizeof(left));
                        printf(" (then background processes, sessions and code contexts stop;\n"
                               "               in %s unless there is activity: requests, a "
                               "running command,\n"
                               "               an open stream or wait)",
                               left);
                }
                putchar('\n');
        }
        printf("keep alive:    %s\n", json_is_true(json_object_get(j, "keepAlive")) ? "yes" : "no");
}

static int print_info(const char *text, bool json)
{
        _cleanup_json_ json_t *j = NULL;
        json_t *v;
        const char *k;
        char ago[48];

        if (json) {
                print_json(text);
                return 0;
        }
        j = json_loads(text, 0, NULL);
        printf("name:          %s\n", str(j, "id"));
        print_state(j);
        printf("last active:   %s (%s)\n", str(j, "lastActiveAt"),
               fmt_ago(str(j, "lastActiveAt"), ago));
        printf("image:         %s\ninstance type: %s\ncreated:       %s\n", str(j, "image"),
               str(j, "instanceType"), str(j, "createdAt"));
        if (json_object_get(j, "network"))
                printf("network:       %s%s%s\n", str(j, "network"),
                       json_object_get(j, "networkAddress") ? " " : "",
                       json_object_get(j, "networkAddress") ? str(j, "networkAddress") : "");
        {
                size_t i;
                json_array_foreach(json_object_get(j, "networkAllow"), i, v)
                        printf("network allow: %s\n", json_string_value(v));
        }
        v = json_object_get(j, "disk");
        if (json_is_object(v))
                printf("disk:          %.1f of %.1f MiB used\n",
                       (double)json_integer_value(json_object_get(v, "usedBytes")) / 1048576.0,
                       (double)json_integer_value(json_object_get(v, "limitBytes")) / 1048576.0);
        json_object_foreach(json_object_get(j, "labels"), k, v)
                printf("label:         %s=%s\n", k, json_string_value(v));
        json_object_foreach(json_object_get(j, "env"), k, v)
                printf("env:           %s=%s\n", k, json_string_value(v));
        return 0;
}

static int cmd_ls(cella_client *c, struct cli_args *a)
{
        const char *path = a->npos >= 3 ? a->pos[2] : "/workspace";
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        json_t *f;
        size_t i;
        int r = cella_file_list(c, a->pos[1], path, a->recursive, a->all, &text);

        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
                free(text);
                return 0;
        }
        j = json_loads(text, 0, NULL);
        json_array_foreach(json_object_get(j, "files"), i, f)
        {
                const char *type = str(f, "type");
                printf("%c%s %12lld %s %s%s\n",
                       type[0] == 'd'   ? 'd'
                       : type[0] == 's' ? 'l'
                                        : '-',
                       str(f, "mode"), (long long)json_integer_value(json_object_get(f, "size")),
                       str(f, "modifiedAt"), str(f, "relativePath"), type[0] == 'd' ? "/" : "");
        }
        free(text);
        return 0;
}

static void on_build_line(const char *line, size_t len, void *ud)
{
        fwrite(line, 1, len, stderr);
        if (len == 0 || line[len - 1] != '\n')
                fputc('\n', stderr);
}

static const char *fmt_size(uint64_t b, char out[32])
{
        static const char units[] = "BKMGT";
        double v = (double)b;
        int u = 0;

        while (v >= 1024 && u < 4) {
                v /= 1024;
                u++;
        }
        snprintf(out, 32, u ? "%.1f%c" : "%.0f%c", v, units[u]);
        return out;
}

static int cmd_image(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;
        if (a->npos < 2)
                return bad_args(a);
        if (strcmp(a->pos[1], "build") == 0) {
                const char *name = a->npos >= 3 ? a->pos[2] : "default";
                r = cella_image_build_packages(c, name, a->packages, (size_t)a->npackages,
                                               on_build_line, NULL);
                if (r < 0)
                        return api_fail(c, r);
                confirm(a, "built image '%s'", name);
                return 0;
        }
        if (strcmp(a->pos[1], "import") == 0) {
                int fd;

                if (a->npos != 4)
                        return bad_args(a);
                fd = strcmp(a->pos[3], "-") == 0 ? 0 : open(a->pos[3], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        fprintf(stderr, "cella: %s: %s\n", a->pos[3], strerror(errno));
                        return 1;
                }
                if (!a->quiet)
                        fprintf(stderr, "importing %s as '%s'...\n", a->pos[3], a->pos[2]);
                r = cella_image_import(c, a->pos[2], fd, a->replace, &text);
                if (fd > 0)
                        close(fd);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
                        char sz[32];
                        confirm(a, "imported image '%s': %lld layers, %lld entries, %s", a->pos[2],
                                json_integer_value(json_object_get(j, "layers")),
                                json_integer_value(json_object_get(j, "entries")),
                                fmt_size((uint64_t)json_integer_value(
                                                 json_object_get(j, "sizeBytes")),
                                         sz));
                }
                free(text);
                return 0;
        }
        if (strcmp(a->pos[1], "rm") == 0) {
                if (a->npos != 3)
                        return bad_args(a);
                r = cella_image_delete(c, a->pos[2], &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json)
                        print_json(text);
                else
                        confirm(a, "deleted image '%s'", a->pos[2]);
                free(text);
                return 0;
        }
        if (strcmp(a->pos[1], "ls") != 0)
                return bad_args(a);
        r = cella_image_list(c, &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
        } else {
                _cleanup_json_ json_t *j = json_loads(text, 0, NULL);
                json_t *im;
                size_t i;
                printf("%-24s %-7s %-9s %s\n", "NAME", "SOURCE", "SIZE", "CREATED");
                json_array_foreach(json_object_get(j, "images"), i, im)
                {
                        json_t *sz = json_object_get(im, "sizeBytes");
                        char b[32];
                        printf("%-24s %-7s %-9s %s\n", str(im, "name"), str(im, "source"),
                               json_is_integer(sz) ? fmt_size((uint64_t)json_integer_value(sz), b)
                                                   : "-",
                               str(im, "createdAt"));
                }
        }
        free(text);
        return 0;
}

/* ---- background processes ---- */

static int cmd_start(cella_client *c, struct cli_args *a)
{
        struct cella_process_options o = {.id = a->id,
                                          .session_id = a->session,
                                          .cwd = a->cwd,
                                          .env = a->nenv ? a->env : NULL};
        struct buf cmd = BUF_INIT;
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        int r;

        if (a->npos < 3)
                return bad_args(a);
        if (cli_join((char **)a->pos + 2, a->npos - 2, &cmd) < 0)
                return api_fail(c, CELLA_ERR_NOMEM);
        r = cella_process_start(c, a->pos[1], cmd.data, &o, &text);
        buf_free(&cmd);
        if (r < 0)
                return api_fail(c, r);
        j = json_loads(text, 0, NULL);
        if (a->json)
                print_json(text);
        else
                printf("%s\n", str(j, "id"));
        if (strcmp(str(j, "status"), "error") == 0)
                fprintf(stderr, "cella: the process could not start: %s\n", str(j, "error"));
        r = strcmp(str(j, "status"), "error") == 0 ? 1 : 0;
        free(text);
        return r;
}

static int cmd_ps(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        json_t *p;
        size_t i;
        int r = cella_process_list(c, a->pos[1], &text);

        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
                free(text);
                return 0;
        }
        j = json_loads(text, 0, NULL);
        printf("%-20s %7s %-10s %4s %-24s %s\n", "ID", "PID", "STATUS", "EXIT", "STARTED",
               "COMMAND");
        json_array_foreach(json_object_get(j, "processes"), i, p)
        {
                json_t *code = json_object_get(p, "exitCode");
                char exit[16] = "-";

                if (code)
                        snprintf(exit, sizeof(exit), "%lld", (long long)json_integer_value(code));
                printf("%-20s %7lld %-10s %4s %-24s %s\n", str(p, "id"),
                       (long long)json_integer_value(json_object_get(p, "pid")), str(p, "status"),
                       exit, str(p, "startTime"), str(p, "command"));
        }
        free(text);
        return 0;
}

static int cmd_logs(cella_client *c, struct cli_args *a)
{
        struct cella_exec_callbacks cb = {.on_stdout = on_out, .on_stderr = on_err};
        cella_exec_result *res = NULL;
        const void *p;
        size_t n;
        int r;

        if (a->follow) {
                r = cella_process_stream(c, a->pos[1], a->pos[2], &cb, NULL);
                return r < 0 ? api_fail(c, r) : 0;
        }
        r = cella_process_logs(c, a->pos[1], a->pos[2], &res);
        if (r < 0)
                return api_fail(c, r);
        p = cella_exec_result_stdout(res, &n);
        write_all(1, p, n);
        p = cella_exec_result_stderr(res, &n);
        write_all(2, p, n);
        cella_exec_result_free(res);
        return 0;
}

/* One line per event: "create /workspace/a.txt" (a directory ends in '/'), or the event's
 * JSON with --json. */
static int on_watch_event(const char *json, size_t len, void *ud)
{
        const struct cli_args *a = ud;
        _cleanup_json_ json_t *j = NULL;
        const char *type, *et, *path;

        if (a->json) {
                write_all(1, json, len);
                write_all(1, "\n", 1);
                return 0;
        }
        j = json_loadb(json, len, 0, NULL);
        type = json_string_value(json_object_get(j, "type"));
        path = json_string_value(json_object_get(j, "path"));
        et = json_string_value(json_object_get(j, "eventType"));
        if (type && strcmp(type, "event") == 0 && et && path)
                printf("%s %s%s\n", et, path,
                       json_is_true(json_object_get(j, "isDirectory")) ? "/" : "");
        else if (type && strcmp(type, "watching") == 0 && path)
                fprintf(stderr, "cella: watching %s\n", path);
        else if (type && strcmp(type, "overflow") == 0)
                printf("overflow\n");
        fflush(stdout);
        return 0;
}

static int cmd_watch(cella_client *c, struct cli_args *a)
{
        struct cella_watch_options o = {
                .no_recursive = a->no_recursive,
                .include = a->ninclude ? a->include : NULL,
                .exclude = a->nexclude ? a->exclude : NULL,
        };
        int r = cella_watch(c, a->pos[1], a->pos[2], &o, on_watch_event, a);

        return r < 0 ? api_fail(c, r) : 0;
}

static int cmd_kill(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r, killed = 0;

        if (a->all) {
                if (a->npos != 2)
                        return bad_args(a);
                r = cella_process_kill_all(c, a->pos[1], a->signal, &killed);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json)
                        printf("{\"killed\": %d}\n", killed);
                else
                        confirm(a, "%d", killed);
                return 0;
        }
        if (a->npos != 3)
                return bad_args(a);
        r = cella_process_kill(c, a->pos[1], a->pos[2], a->signal, &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
        } else {
                _cleanup_json_ json_t *j = json_loads(text, 0, NULL);

                confirm(a, "%s %s", str(j, "id"), str(j, "status"));
        }
        free(text);
        return 0;
}

static int cmd_wait(cella_client *c, struct cli_args *a)
{
        const char *sb = a->pos[1], *id = a->pos[2];
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        int r;

        if (a->log) {
                r = cella_process_wait_log(c, sb, id, a->log, a->regex, a->timeout_ms, &text);
        } else if (a->port) {
                struct cella_wait_port_options o = {.http_path = a->http_path,
                                                    .timeout_ms = a->timeout_ms};

                r = cella_process_wait_port(c, sb, id, (int)a->port, &o, &text);
        } else {
                r = cella_process_wait_exit(c, sb, id, a->timeout_ms, &text);
        }
        if (r < 0) {
                api_fail(c, r);
                return strcmp(cella_client_error_code(c), "PROCESS_READY_TIMEOUT") == 0 ? 124 : 1;
        }
        j = json_loads(text, 0, NULL);
        if (a->json)
                print_json(text);
        else if (a->log)
                printf("%s\n", str(j, "line"));
        r = a->exit ? (int)json_integer_value(json_object_get(j, "exitCode")) : 0;
        free(text);
        return r;
}

/* git clone NAME URL [--branch B] [--depth N] [--dir D] [--timeout MS] [--json]: prints
 * the directory (or the answer with --json); 124 on a timeout. */
static int cmd_git(cella_client *c, struct cli_args *a)
{
        struct cella_git_options o = {.branch = a->branch,
                                      .target_dir = a->dir,
                                      .depth = a->depth,
                                      .timeout_ms = a->timeout_ms};
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        int r;

        if (a->npos != 4 || strcmp(a->pos[1], "clone") != 0)
                return bad_args(a);
        r = cella_git_checkout(c, a->pos[2], a->pos[3], &o, &text);
        if (r < 0) {
                api_fail(c, r);
                return strcmp(cella_client_error_code(c), "COMMAND_TIMEOUT") == 0 ? 124 : 1;
        }
        if (a->json) {
                print_json(text);
        } else {
                j = json_loads(text, 0, NULL);
                confirm(a, "cloned %s (%s) into %s", str(j, "repoUrl"), str(j, "branch"),
                        str(j, "targetDir"));
        }
        free(text);
        return 0;
}

/* After a preview URL, the same request for clients that do not resolve *.localhost (wget,
 * Python, Go, getaddrinfo on glibc): to the address the client reaches the daemon at,
 * with the preview host in the Host header; cellad routes by Host on its API listener
 * (docs/api.md "Exposed ports and preview URLs"). Nothing with --quiet, or when either URL
 * is not http://AUTHORITY/... */
static void print_preview_hint(cella_client *c, const struct cli_args *a, const char *url)
{
        const char *base = cella_client_url(c), *host, *end, *daemon;
        size_t hn, dn;

        if (a->quiet || strncmp(url, "http://", 7) != 0 || strncmp(base, "http://", 7) != 0)
                return;
        host = url + 7;
        end = strchr(host, '/');
        hn = end ? (size_t)(end - host) : strlen(host);
        daemon = base + 7;
        end = strchr(daemon, '/');
        dn = end ? (size_t)(end - daemon) : strlen(daemon);
        if (hn == 0 || dn == 0 || memchr(host, '\'', hn) || memchr(daemon, '\'', dn))
                return;
        printf("  without DNS: curl -H 'Host: %.*s' http://%.*s/\n", (int)hn, host, (int)dn,
               daemon);
}

static int parse_port_arg(const char *s)
{
        char *end;
        long v;

        errno = 0;
        v = strtol(s, &end, 10);
        if (errno || end == s || *end || v < 1 || v > 65535)
                return -1;
        return (int)v;
}

static int cmd_ports(cella_client *c, struct cli_args *a, const char *cmd)
{
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        json_t *p;
        size_t i;
        int port = a->npos >= 3 ? parse_port_arg(a->pos[2]) : 0;
        int r;

        if (strcmp(cmd, "expose") == 0) {
                if (a->npos != 3 || port < 0)
                        return bad_args(a);
                r = cella_port_expose(c, a->pos[1], port, a->port_name, a->port_token, &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%s\n", str(j, "url"));
                        print_preview_hint(c, a, str(j, "url"));
                }
                free(text);
                return 0;
        }
        if (strcmp(cmd, "unexpose") == 0) {
                if (a->npos != 3 || port < 0)
                        return bad_args(a);
                r = cella_port_unexpose(c, a->pos[1], port);
                if (r < 0)
                        return api_fail(c, r);
                confirm(a, "unexposed port %d", port);
                return 0;
        }
        if (a->npos != 2)
                return bad_args(a);
        r = cella_port_list(c, a->pos[1], &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
                free(text);
                return 0;
        }
        j = json_loads(text, 0, NULL);
        printf("%-6s %-7s %-16s %s\n", "PORT", "STATUS", "NAME", "URL");
        json_array_foreach(json_object_get(j, "ports"), i, p)
        {
                printf("%-6lld %-7s %-16s %s\n",
                       (long long)json_integer_value(json_object_get(p, "port")), str(p, "status"),
                       str(p, "name"), str(p, "url"));
        }
        free(text);
        return 0;
}

/* Exactly n words (command word included)? */
static bool has_args(const struct cli_args *a, int n)
{
        return a->npos == n;
}

/* --help, help CMD, --version, version: answered without a daemon. Returns the exit status,
 * or -1 when the command line is for a command. */
static int answer_locally(const struct cli_args *a)
{
        const struct cli_command *cmd = a->npos > 0 ? cli_command_find(a->pos[0]) : NULL;

        if (a->npos > 0 && !cmd) {
                fprintf(stderr, "cella: unknown command '%s'\n", a->pos[0]);
                cli_usage_print(stderr);
                return 2;
        }
        if (cmd && a->help) {
                cli_help_print(stdout, cmd);
                return 0;
        }
        if (a->version || (cmd && strcmp(cmd->name, "version") == 0)) {
                if (a->npos > 1)
                        return bad_args(a);
                printf("cella %s\n", CELLA_VERSION);
                return 0;
        }
        if (cmd && strcmp(cmd->name, "help") == 0) {
                const struct cli_command *about = a->npos > 1 ? cli_command_find(a->pos[1]) : NULL;

                if (a->npos == 1) {
                        cli_usage_print(stdout);
                        return 0;
                }
                if (a->npos > 2)
                        return bad_args(a);
                if (!about) {
                        fprintf(stderr, "cella: no command '%s'\n", a->pos[1]);
                        cli_usage_print(stderr);
                        return 2;
                }
                cli_help_print(stdout, about);
                return 0;
        }
        if (!cmd) {
                if (!a->help) {
                        fputs("cella: no command given\n", stderr);
                        cli_usage_print(stderr);
                        return 2;
                }
                cli_usage_print(stdout);
                return 0;
        }
        return -1;
}

/* The sandbox NAME of the command line, checked before any request (exit 2 with the rule
 * when it is not a name the daemon takes). */
static int check_name(const struct cli_args *a)
{
        const struct cli_command *cmd = cli_command_find(a->pos[0]);
        char msg[512];

        if (!cmd || cmd->name_at == 0 || a->npos <= cmd->name_at)
                return 0;
        if (cli_sandbox_name_ok(a->pos[cmd->name_at], msg, sizeof(msg)))
                return 0;
        fprintf(stderr, "cella: %s\n", msg);
        return 2;
}

/* env set NAME K=V|K... [--session S] */
static int cmd_env(cella_client *c, struct cli_args *a)
{
        int r, set = 0, unset = 0;

        if (a->npos < 4 || strcmp(a->pos[1], "set") != 0)
                return bad_args(a);
        r = a->session ? cella_session_set_env(c, a->pos[2], a->session, a->pos + 3)
                       : cella_sandbox_set_env(c, a->pos[2], a->pos + 3);
        if (r < 0)
                return api_fail(c, r);
        for (int i = 3; i < a->npos; i++) {
                if (strchr(a->pos[i], '='))
                        set++;
                else
                        unset++;
        }
        if (a->session)
                confirm(a, "set %d and unset %d variables of session %s", set, unset, a->session);
        else
                confirm(a, "set %d and unset %d variables of sandbox '%s'", set, unset, a->pos[2]);
        return 0;
}

static int cmd_create(cella_client *c, struct cli_args *a)
{
        char sleep_after[32];
        struct cella_sandbox_options o = {.image = a->image,
                                          .instance_type = a->instance_type,
                                          .env = a->nenv ? a->env : NULL,
                                          .labels = a->nlabels ? a->labels : NULL,
                                          .keep_alive = a->keep_alive,
                                          .no_default_session = a->no_default_session,
                                          .network = a->network,
                                          .network_allow = a->nallow ? a->allow : NULL};
        char *text = NULL;
        int r;

        if (!has_args(a, 2))
                return bad_args(a);
        if (a->sleep_after_s > 0) {
                snprintf(sleep_after, sizeof(sleep_after), "%lds", a->sleep_after_s);
                o.sleep_after = sleep_after;
        }
        r = cella_sandbox_create(c, a->pos[1], &o, &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json)
                print_json(text);
        else
                confirm(a, "%s sandbox '%s'",
                        cella_client_http_status(c) == 201 ? "created" : "updated", a->pos[1]);
        free(text);
        return 0;
}

static int cmd_destroy(cella_client *c, struct cli_args *a)
{
        bool existed = false;
        int r;

        if (!has_args(a, 2))
                return bad_args(a);
        r = cella_sandbox_destroy(c, a->pos[1], &existed);
        if (r < 0)
                return api_fail(c, r);
        if (existed)
                confirm(a, "destroyed sandbox '%s'", a->pos[1]);
        else
                confirm(a, "sandbox '%s' did not exist", a->pos[1]);
        return 0;
}

/* write, read, rm, mkdir, mv */
static int cmd_file(cella_client *c, struct cli_args *a, const char *cmd)
{
        int r;

        if (strcmp(cmd, "mv") == 0) {
                if (!has_args(a, 4))
                        return bad_args(a);
                if ((r = cella_file_move(c, a->pos[1], a->pos[2], a->pos[3])) < 0)
                        return api_fail(c, r);
                confirm(a, "moved %s to %s", a->pos[2], a->pos[3]);
                return 0;
        }
        if (!has_args(a, 3))
                return bad_args(a);
        if (strcmp(cmd, "write") == 0) {
                if ((r = cella_file_write_fd(c, a->pos[1], a->pos[2], 0)) < 0)
                        return api_fail(c, r);
                confirm(a, "wrote %s", a->pos[2]);
        } else if (strcmp(cmd, "read") == 0) {
                if ((r = cella_file_read_fd(c, a->pos[1], a->pos[2], 1)) < 0)
                        return api_fail(c, r);
        } else if (strcmp(cmd, "rm") == 0) {
                if ((r = cella_file_delete(c, a->pos[1], a->pos[2], a->recursive)) < 0)
                        return api_fail(c, r);
                confirm(a, "removed %s", a->pos[2]);
        } else {
                if ((r = cella_file_mkdir(c, a->pos[1], a->pos[2], a->recursive)) < 0)
                        return api_fail(c, r);
                confirm(a, "created directory %s", a->pos[2]);
        }
        return 0;
}

int main(int argc, char **argv)
{
        struct cli_args a;
        cella_client *c = NULL;
        const char *cmd;
        char *text = NULL;
        int r, rc = 0;

        signal(SIGPIPE, SIG_IGN);
        if (cli_parse(argc, argv, &a) < 0)
                return usage_error(&a, "%s", a.error);
        if ((rc = answer_locally(&a)) >= 0)
                return rc;
        if ((rc = check_name(&a)) != 0)
                return rc;
        if (cella_client_new(a.url, a.token, &c) < 0) {
                fprintf(stderr, "cella: cannot initialise the client\n");
                return 1;
        }
        cmd = a.pos[0];
        if (strcmp(cmd, "exec") == 0) {
                rc = cmd_exec(c, &a, argc, argv);
        } else if (strcmp(cmd, "write") == 0 || strcmp(cmd, "read") == 0 ||
                   strcmp(cmd, "rm") == 0 || strcmp(cmd, "mkdir") == 0 || strcmp(cmd, "mv") == 0) {
                rc = cmd_file(c, &a, cmd);
        } else if (strcmp(cmd, "ls") == 0) {
                if (a.npos == 1)
                        rc = cmd_list(c, &a);
                else
                        rc = a.npos > 3 ? bad_args(&a) : cmd_ls(c, &a);
        } else if (strcmp(cmd, "create") == 0) {
                rc = cmd_create(c, &a);
        } else if (strcmp(cmd, "info") == 0) {
                if (!has_args(&a, 2))
                        rc = bad_args(&a);
                else if ((r = cella_sandbox_info(c, a.pos[1], &text)) < 0)
                        rc = api_fail(c, r);
                else
                        print_info(text, a.json);
        } else if (strcmp(cmd, "list") == 0) {
                rc = has_args(&a, 1) ? cmd_list(c, &a) : bad_args(&a);
        } else if (strcmp(cmd, "destroy") == 0) {
                rc = cmd_destroy(c, &a);
        } else if (strcmp(cmd, "env") == 0) {
                rc = cmd_env(c, &a);
        } else if (strcmp(cmd, "session") == 0) {
                rc = cmd_session(c, &a);
        } else if (strcmp(cmd, "start") == 0) {
                rc = cmd_start(c, &a);
        } else if (strcmp(cmd, "ps") == 0) {
                if (a.npos == 1)
                        rc = cmd_list(c, &a);
                else
                        rc = has_args(&a, 2) ? cmd_ps(c, &a) : bad_args(&a);
        } else if (strcmp(cmd, "logs") == 0) {
                rc = has_args(&a, 3) ? cmd_logs(c, &a) : bad_args(&a);
        } else if (strcmp(cmd, "code") == 0) {
                rc = has_args(&a, 3) ? cmd_code(c, &a) : bad_args(&a);
        } else if (strcmp(cmd, "context") == 0) {
                rc = cmd_context(c, &a);
        } else if (strcmp(cmd, "watch") == 0) {
                rc = has_args(&a, 3) ? cmd_watch(c, &a) : bad_args(&a);
        } else if (strcmp(cmd, "shell") == 0) {
                rc = has_args(&a, 2) ? cli_shell(c, a.pos[1], a.session) : bad_args(&a);
        } else if (strcmp(cmd, "kill") == 0) {
                rc = cmd_kill(c, &a);
        } else if (strcmp(cmd, "wait") == 0) {
                rc = has_args(&a, 3) ? cmd_wait(c, &a) : bad_args(&a);
        } else if (strcmp(cmd, "git") == 0) {
                rc = cmd_git(c, &a);
        } else if (strcmp(cmd, "image") == 0) {
                rc = cmd_image(c, &a);
        } else if (strcmp(cmd, "expose") == 0 || strcmp(cmd, "ports") == 0 ||
                   strcmp(cmd, "unexpose") == 0) {
                rc = cmd_ports(c, &a, cmd);
        } else if (strcmp(cmd, "health") == 0) {
                if (!has_args(&a, 1))
                        rc = bad_args(&a);
                else if ((r = cella_health(c, &text)) < 0)
                        rc = api_fail(c, r);
                else
                        print_json(text);
        } else {
                /* in the command table but not dispatched here: a bug */
                fprintf(stderr, "cella: command '%s' is not implemented\n", cmd);
                rc = 1;
        }
        free(text);
        cella_client_free(c);
        return rc;
}
