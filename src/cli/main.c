/* cella: the command-line tool, on libcella. Exit status: the command's own for exec (and
 * the process's for wait --exit), 0 on success, 1 for an API or transport error, 2 for a
 * usage error, 124 for an exec timeout or a wait that timed out. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cella/cella.h"
#include "cli/args.h"
#include "common/base64.h"
#include "cli/shell.h"
#include "common/buf.h"

static const char usage_text[] =
        "usage: cella [--url URL] [--token TOKEN] COMMAND [ARGS]\n"
        "\n"
        "commands:\n"
        "  exec NAME [--session S] [--timeout MS] [--cwd DIR] [--env K=V]... [--] COMMAND...\n"
        "                      run a shell command line (in the default session, or S),\n"
        "                      streaming its output\n"
        "  write NAME PATH     write stdin to a file\n"
        "  read NAME PATH      write a file to stdout\n"
        "  ls NAME [PATH] [-r] [-a] [--json]\n"
        "  rm NAME PATH [-r]   mkdir NAME PATH [-p]   mv NAME FROM TO\n"
        "  shell NAME [--session S]\n"
        "                      an interactive terminal in the session (default: the\n"
        "                      default session); exits with the shell's status\n"
        "  watch NAME PATH [--include G]... [--exclude G]... [--no-recursive] [--json]\n"
        "                      print file changes under PATH, one line each, until ^C\n"
        "  code NAME [--lang L] [--context ID] [--timeout MS] [--out-dir DIR] [--json] CODE|-\n"
        "                      run code in an interpreter context (python, javascript,\n"
        "                      typescript), streaming its output; images go to DIR\n"
        "  context create NAME [--lang L] [--cwd DIR] [--env K=V]...\n"
        "  context ls NAME [--json]   context rm NAME ID\n"
        "  create NAME [--image I] [--instance-type T] [--sleep-after D] [--keep-alive]\n"
        "              [--no-default-session] [--network none|outbound]\n"
        "              [--allow CIDR[:PORT]]... [--env K=V]... [--label K=V]...\n"
        "  env set NAME K=V|K... [--session S]\n"
        "                      set (K=V) or unset (K) sandbox (or session) variables\n"
        "  session create NAME [--id S] [--cwd DIR] [--env K=V]... [--timeout MS]\n"
        "  session ls NAME [--json]   session rm NAME S\n"
        "  info NAME [--json]  list [--json]  destroy NAME\n"
        "  image build [NAME] [--package P]...  image import NAME FILE.tar [--replace]\n"
        "  image ls [--json]  image rm NAME\n"
        "  start NAME [--id ID] [--session S] [--cwd DIR] [--env K=V]... [--] COMMAND...\n"
        "                      start a background process; prints its id\n"
        "  ps NAME [--json]    list background processes\n"
        "  logs NAME ID [-f]   a process's output (-f: follow until it exits)\n"
        "  kill NAME ID [--signal SIG]   kill NAME --all [--signal SIG]\n"
        "  wait NAME ID --log PATTERN [--regex] | --port N [--http PATH] | --exit\n"
        "              [--timeout MS]   exit 0 when ready, 124 on timeout (--exit: the\n"
        "                               process's exit code)\n"
        "  git clone NAME URL [--branch B] [--depth N] [--dir D] [--timeout MS] [--json]\n"
        "                      clone a repository inside the sandbox; prints the\n"
        "                      directory it made\n"
        "  expose NAME PORT [--name N] [--token T]\n"
        "                      expose a port: prints its preview URL\n"
        "  ports NAME [--json] unexpose NAME PORT\n"
        "  health\n"
        "\n"
        "environment: CELLA_URL (default http://127.0.0.1:7070), CELLA_TOKEN\n";

static int usage_error(const char *msg)
{
        fprintf(stderr, "cella: %s\n(see cella --help)\n", msg);
        return 2;
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
        json_t *j = json_loads(text, 0, NULL);
        char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        printf("%s\n", s ? s : text);
        free(s);
        json_decref(j);
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
                return usage_error("usage: cella exec NAME COMMAND...");
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
        static const char usage[] =
                "usage: cella session create NAME [--id S] [--cwd DIR] [--env K=V]... "
                "[--timeout MS] | cella session ls NAME [--json] | cella session rm NAME S";
        char *text = NULL;
        int r;

        if (a->npos < 3)
                return usage_error(usage);
        if (strcmp(a->pos[1], "create") == 0 && a->npos == 3) {
                struct cella_session_options o = {.id = a->id,
                                                  .cwd = a->cwd,
                                                  .env = a->nenv ? a->env : NULL,
                                                  .command_timeout_ms = a->timeout_ms};
                json_t *j;

                r = cella_session_create(c, a->pos[2], &o, &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%s\n", str(j, "id"));
                        json_decref(j);
                }
        } else if (strcmp(a->pos[1], "ls") == 0 && a->npos == 3) {
                json_t *j, *s;
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
                        json_decref(j);
                }
        } else if (strcmp(a->pos[1], "rm") == 0 && a->npos == 4) {
                r = cella_session_delete(c, a->pos[2], a->pos[3]);
                if (r < 0)
                        return api_fail(c, r);
        } else {
                return usage_error(usage);
        }
        free(text);
        return 0;
}

static int cmd_context(cella_client *c, struct cli_args *a)
{
        static const char usage[] = "usage: cella context create NAME [--lang L] [--cwd DIR] "
                                    "[--env K=V]... | cella context ls NAME [--json] | "
                                    "cella context rm NAME ID";
        char *text = NULL;
        json_t *j, *x;
        size_t i;
        int r;

        if (a->npos < 3)
                return usage_error(usage);
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
                        json_decref(j);
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
                        json_decref(j);
                }
        } else if (strcmp(a->pos[1], "rm") == 0 && a->npos == 4) {
                r = cella_context_delete(c, a->pos[2], a->pos[3]);
                if (r < 0)
                        return api_fail(c, r);
        } else {
                return usage_error(usage);
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
        json_t *j = json_loadb(json, len, 0, NULL);
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
        json_decref(j);
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
                json_t *j = json_loads(text, 0, NULL);

                print_json(text);
                out.error = json_object_get(j, "error") != NULL;
                out.timed_out = json_is_true(json_object_get(j, "timedOut"));
                json_decref(j);
                free(text);
        }
        if (out.timed_out)
                fprintf(stderr, "cella: timed out\n");
        return out.error || out.timed_out ? 1 : 0;
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
                json_t *j = json_loads(text, 0, NULL), *s;
                size_t i;
                printf("%-32s %-9s %-12s %-12s %s\n", "NAME", "STATE", "IMAGE", "TYPE",
                       "LAST ACTIVE");
                json_array_foreach(json_object_get(j, "sandboxes"), i, s)
                        printf("%-32s %-9s %-12s %-12s %s\n", str(s, "id"), str(s, "state"),
                               str(s, "image"), str(s, "instanceType"), str(s, "lastActiveAt"));
                json_decref(j);
        }
        free(text);
        return 0;
}

static int print_info(const char *text, bool json)
{
        json_t *j, *v;
        const char *k;
        if (json) {
                print_json(text);
                return 0;
        }
        j = json_loads(text, 0, NULL);
        printf("name:          %s\nstate:         %s\nimage:         %s\ninstance type: %s\n"
               "created:       %s\nlast active:   %s\nsleep after:   %llds%s\n",
               str(j, "id"), str(j, "state"), str(j, "image"), str(j, "instanceType"),
               str(j, "createdAt"), str(j, "lastActiveAt"),
               (long long)json_integer_value(json_object_get(j, "sleepAfter")),
               json_is_true(json_object_get(j, "keepAlive")) ? " (keepAlive: never)" : "");
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
        json_decref(j);
        return 0;
}

static int cmd_ls(cella_client *c, struct cli_args *a)
{
        const char *path = a->npos >= 3 ? a->pos[2] : "/workspace";
        char *text = NULL;
        json_t *j, *f;
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
        json_decref(j);
        free(text);
        return 0;
}

static void on_build_line(const char *line, size_t len, void *ud)
{
        fwrite(line, 1, len, stderr);
        if (len == 0 || line[len - 1] != '\n')
                fputc('\n', stderr);
}

#define IMAGE_USAGE                                                                            \
        "usage: cella image build [NAME] [--package P]... | cella image import NAME FILE.tar " \
        "[--replace] | cella image ls | cella image rm NAME"

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
                return usage_error(IMAGE_USAGE);
        if (strcmp(a->pos[1], "build") == 0) {
                const char *name = a->npos >= 3 ? a->pos[2] : "default";
                r = cella_image_build_packages(c, name, a->packages, (size_t)a->npackages,
                                               on_build_line, NULL);
                if (r < 0)
                        return api_fail(c, r);
                fprintf(stderr, "image '%s' built\n", name);
                return 0;
        }
        if (strcmp(a->pos[1], "import") == 0) {
                int fd;

                if (a->npos != 4)
                        return usage_error(IMAGE_USAGE);
                fd = strcmp(a->pos[3], "-") == 0 ? 0 : open(a->pos[3], O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        fprintf(stderr, "cella: %s: %s\n", a->pos[3], strerror(errno));
                        return 1;
                }
                fprintf(stderr, "importing %s as '%s'...\n", a->pos[3], a->pos[2]);
                r = cella_image_import(c, a->pos[2], fd, a->replace, &text);
                if (fd > 0)
                        close(fd);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        json_t *j = json_loads(text, 0, NULL);
                        char sz[32];
                        fprintf(stderr, "image '%s' imported: %lld layers, %lld entries, %s\n",
                                a->pos[2], json_integer_value(json_object_get(j, "layers")),
                                json_integer_value(json_object_get(j, "entries")),
                                fmt_size((uint64_t)json_integer_value(
                                                 json_object_get(j, "sizeBytes")),
                                         sz));
                        json_decref(j);
                }
                free(text);
                return 0;
        }
        if (strcmp(a->pos[1], "rm") == 0) {
                if (a->npos != 3)
                        return usage_error(IMAGE_USAGE);
                r = cella_image_delete(c, a->pos[2], &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json)
                        print_json(text);
                else
                        fprintf(stderr, "image '%s' deleted\n", a->pos[2]);
                free(text);
                return 0;
        }
        if (strcmp(a->pos[1], "ls") != 0)
                return usage_error(IMAGE_USAGE);
        r = cella_image_list(c, &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
        } else {
                json_t *j = json_loads(text, 0, NULL), *im;
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
                json_decref(j);
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
        json_t *j;
        int r;

        if (a->npos < 3)
                return usage_error("usage: cella start NAME [--id ID] [--session S] [--cwd DIR] "
                                   "[--env K=V]... COMMAND...");
        if (cli_join((char **)a->pos + 2, a->npos - 2, &cmd) < 0)
                return usage_error("out of memory");
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
        json_decref(j);
        free(text);
        return r;
}

static int cmd_ps(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        json_t *j, *p;
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
        json_decref(j);
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
        json_t *j;
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
        json_decref(j);
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
                        return usage_error("usage: cella kill NAME --all [--signal SIG]");
                r = cella_process_kill_all(c, a->pos[1], a->signal, &killed);
                if (r < 0)
                        return api_fail(c, r);
                printf("%d\n", killed);
                return 0;
        }
        if (a->npos != 3)
                return usage_error("usage: cella kill NAME ID [--signal SIG] | --all");
        r = cella_process_kill(c, a->pos[1], a->pos[2], a->signal, &text);
        if (r < 0)
                return api_fail(c, r);
        if (a->json) {
                print_json(text);
        } else {
                json_t *j = json_loads(text, 0, NULL);

                printf("%s %s\n", str(j, "id"), str(j, "status"));
                json_decref(j);
        }
        free(text);
        return 0;
}

static int cmd_wait(cella_client *c, struct cli_args *a)
{
        const char *sb = a->pos[1], *id = a->pos[2];
        char *text = NULL;
        json_t *j;
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
        json_decref(j);
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
        json_t *j;
        int r;

        if (a->npos != 4 || strcmp(a->pos[1], "clone") != 0)
                return usage_error("usage: cella git clone NAME URL [--branch B] [--depth N] "
                                   "[--dir D] [--timeout MS] [--json]");
        r = cella_git_checkout(c, a->pos[2], a->pos[3], &o, &text);
        if (r < 0) {
                api_fail(c, r);
                return strcmp(cella_client_error_code(c), "COMMAND_TIMEOUT") == 0 ? 124 : 1;
        }
        if (a->json) {
                print_json(text);
        } else {
                j = json_loads(text, 0, NULL);
                printf("cloned %s (%s) into %s\n", str(j, "repoUrl"), str(j, "branch"),
                       str(j, "targetDir"));
                json_decref(j);
        }
        free(text);
        return 0;
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
        json_t *j, *p;
        size_t i;
        int port = a->npos >= 3 ? parse_port_arg(a->pos[2]) : 0;
        int r;

        if (strcmp(cmd, "expose") == 0) {
                if (a->npos != 3 || port < 0)
                        return usage_error("usage: cella expose NAME PORT [--name N] [--token T]");
                r = cella_port_expose(c, a->pos[1], port, a->port_name, a->port_token, &text);
                if (r < 0)
                        return api_fail(c, r);
                if (a->json) {
                        print_json(text);
                } else {
                        j = json_loads(text, 0, NULL);
                        printf("%s\n", str(j, "url"));
                        json_decref(j);
                }
                free(text);
                return 0;
        }
        if (strcmp(cmd, "unexpose") == 0) {
                if (a->npos != 3 || port < 0)
                        return usage_error("usage: cella unexpose NAME PORT");
                r = cella_port_unexpose(c, a->pos[1], port);
                return r < 0 ? api_fail(c, r) : 0;
        }
        if (a->npos != 2)
                return usage_error("usage: cella ports NAME [--json]");
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
        json_decref(j);
        free(text);
        return 0;
}

static int need(struct cli_args *a, int n, const char *usage)
{
        if (a->npos != n) {
                fprintf(stderr, "cella: usage: %s\n", usage);
                return -1;
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
        if (argc == 2 && strcmp(argv[1], "--version") == 0) {
                printf("cella %s\n", CELLA_VERSION);
                return 0;
        }
        if (cli_parse(argc, argv, &a) < 0)
                return usage_error(a.error);
        if (a.help || a.npos == 0) {
                fputs(usage_text, a.help ? stdout : stderr);
                return a.help ? 0 : 2;
        }
        if (cella_client_new(a.url, a.token, &c) < 0) {
                fprintf(stderr, "cella: cannot initialise the client\n");
                return 1;
        }
        cmd = a.pos[0];
        if (strcmp(cmd, "exec") == 0) {
                rc = cmd_exec(c, &a, argc, argv);
        } else if (strcmp(cmd, "write") == 0) {
                if (need(&a, 3, "cella write NAME PATH < data") < 0)
                        rc = 2;
                else if ((r = cella_file_write_fd(c, a.pos[1], a.pos[2], 0)) < 0)
                        rc = api_fail(c, r);
        } else if (strcmp(cmd, "read") == 0) {
                if (need(&a, 3, "cella read NAME PATH > data") < 0)
                        rc = 2;
                else if ((r = cella_file_read_fd(c, a.pos[1], a.pos[2], 1)) < 0)
                        rc = api_fail(c, r);
        } else if (strcmp(cmd, "ls") == 0) {
                if (a.npos != 2 && need(&a, 3, "cella ls NAME [PATH] [-r] [-a] [--json]") < 0)
                        rc = 2;
                else
                        rc = cmd_ls(c, &a);
        } else if (strcmp(cmd, "rm") == 0) {
                if (need(&a, 3, "cella rm NAME PATH [-r]") < 0)
                        rc = 2;
                else if ((r = cella_file_delete(c, a.pos[1], a.pos[2], a.recursive)) < 0)
                        rc = api_fail(c, r);
        } else if (strcmp(cmd, "mkdir") == 0) {
                if (need(&a, 3, "cella mkdir NAME PATH [-p]") < 0)
                        rc = 2;
                else if ((r = cella_file_mkdir(c, a.pos[1], a.pos[2], a.recursive)) < 0)
                        rc = api_fail(c, r);
        } else if (strcmp(cmd, "mv") == 0) {
                if (need(&a, 4, "cella mv NAME FROM TO") < 0)
                        rc = 2;
                else if ((r = cella_file_move(c, a.pos[1], a.pos[2], a.pos[3])) < 0)
                        rc = api_fail(c, r);
        } else if (strcmp(cmd, "create") == 0) {
                struct cella_sandbox_options o = {.image = a.image,
                                                  .instance_type = a.instance_type,
                                                  .env = a.nenv ? a.env : NULL,
                                                  .labels = a.nlabels ? a.labels : NULL,
                                                  .sleep_after = a.sleep_after,
                                                  .keep_alive = a.keep_alive,
                                                  .no_default_session = a.no_default_session,
                                                  .network = a.network,
                                                  .network_allow = a.nallow ? a.allow : NULL};
                if (need(&a, 2,
                         "cella create NAME [--image I] [--instance-type T] "
                         "[--sleep-after D] [--keep-alive] [--no-default-session] "
                         "[--network none|outbound] [--allow CIDR[:PORT]]... [--env K=V]... "
                         "[--label K=V]...") < 0)
                        rc = 2;
                else if ((r = cella_sandbox_create(c, a.pos[1], &o, &text)) < 0)
                        rc = api_fail(c, r);
                else
                        print_info(text, a.json);
        } else if (strcmp(cmd, "info") == 0) {
                if (need(&a, 2, "cella info NAME [--json]") < 0)
                        rc = 2;
                else if ((r = cella_sandbox_info(c, a.pos[1], &text)) < 0)
                        rc = api_fail(c, r);
                else
                        print_info(text, a.json);
        } else if (strcmp(cmd, "list") == 0) {
                rc = need(&a, 1, "cella list [--json]") < 0 ? 2 : cmd_list(c, &a);
        } else if (strcmp(cmd, "destroy") == 0) {
                bool existed = false;
                if (need(&a, 2, "cella destroy NAME") < 0)
                        rc = 2;
                else if ((r = cella_sandbox_destroy(c, a.pos[1], &existed)) < 0)
                        rc = api_fail(c, r);
                else if (!existed)
                        fprintf(stderr, "cella: sandbox '%s' did not exist\n", a.pos[1]);
        } else if (strcmp(cmd, "env") == 0) {
                if (a.npos < 4 || strcmp(a.pos[1], "set") != 0) {
                        fprintf(stderr,
                                "cella: usage: cella env set NAME K=V|K... [--session S]\n");
                        rc = 2;
                } else if ((r = a.session ? cella_session_set_env(c, a.pos[2], a.session, a.pos + 3)
                                          : cella_sandbox_set_env(c, a.pos[2], a.pos + 3)) < 0) {
                        rc = api_fail(c, r);
                }
        } else if (strcmp(cmd, "session") == 0) {
                rc = cmd_session(c, &a);
        } else if (strcmp(cmd, "start") == 0) {
                rc = cmd_start(c, &a);
        } else if (strcmp(cmd, "ps") == 0) {
                rc = need(&a, 2, "cella ps NAME [--json]") < 0 ? 2 : cmd_ps(c, &a);
        } else if (strcmp(cmd, "logs") == 0) {
                rc = need(&a, 3, "cella logs NAME ID [-f]") < 0 ? 2 : cmd_logs(c, &a);
        } else if (strcmp(cmd, "code") == 0) {
                rc = need(&a, 3,
                          "cella code NAME [--lang L] [--context ID] [--timeout MS] "
                          "[--out-dir DIR] [--json] CODE|-") < 0
                             ? 2
                             : cmd_code(c, &a);
        } else if (strcmp(cmd, "context") == 0) {
                rc = cmd_context(c, &a);
        } else if (strcmp(cmd, "watch") == 0) {
                rc = need(&a, 3,
                          "cella watch NAME PATH [--include G]... [--exclude G]... "
                          "[--no-recursive] [--json]") < 0
                             ? 2
                             : cmd_watch(c, &a);
        } else if (strcmp(cmd, "shell") == 0) {
                rc = need(&a, 2, "cella shell NAME [--session S]") < 0
                             ? 2
                             : cli_shell(c, a.pos[1], a.session);
        } else if (strcmp(cmd, "kill") == 0) {
                rc = cmd_kill(c, &a);
        } else if (strcmp(cmd, "wait") == 0) {
                rc = need(&a, 3,
                          "cella wait NAME ID --log PATTERN [--regex] | --port N [--http PATH] | "
                          "--exit [--timeout MS]") < 0
                             ? 2
                             : cmd_wait(c, &a);
        } else if (strcmp(cmd, "git") == 0) {
                rc = cmd_git(c, &a);
        } else if (strcmp(cmd, "image") == 0) {
                rc = cmd_image(c, &a);
        } else if (strcmp(cmd, "expose") == 0 || strcmp(cmd, "ports") == 0 ||
                   strcmp(cmd, "unexpose") == 0) {
                rc = cmd_ports(c, &a, cmd);
        } else if (strcmp(cmd, "health") == 0) {
                if ((r = cella_health(c, &text)) < 0)
                        rc = api_fail(c, r);
                else
                        print_json(text);
        } else {
                fprintf(stderr, "cella: unknown command '%s'\n(see cella --help)\n", cmd);
                rc = 2;
        }
        free(text);
        cella_client_free(c);
        return rc;
}
