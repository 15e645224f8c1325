/* Files of a sandbox: ls, write, read, rm, mkdir, mv, watch, and git clone into it. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void print_files(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *f;
        size_t i;

        json_array_foreach(json_object_get(j, "files"), i, f)
        {
                const char *type = cli_str(f, "type");
                printf("%c%s %12lld %s %s%s\n",
                       type[0] == 'd'   ? 'd'
                       : type[0] == 's' ? 'l'
                                        : '-',
                       cli_str(f, "mode"),
                       (long long)json_integer_value(json_object_get(f, "size")),
                       cli_str(f, "modifiedAt"), cli_str(f, "relativePath"),
                       type[0] == 'd' ? "/" : "");
        }
}

/* ls NAME [PATH]; without a NAME, the sandboxes (cmd_list) */
int cmd_ls(cella_client *c, struct cli_args *a)
{
        const char *path = a->npos >= 3 ? a->pos[2] : "/workspace";
        char *text = NULL;

        if (a->npos == 1)
                return cmd_list(c, a);
        if (a->npos > 3)
                return cli_bad_args(a);
        return cli_answer(c, a, cella_file_list(c, a->pos[1], path, a->recursive, a->all, &text),
                          &text, print_files);
}

/* write, read, rm, mkdir, mv */
int cmd_file(cella_client *c, struct cli_args *a)
{
        const char *cmd = a->pos[0];
        int r;

        if (strcmp(cmd, "mv") == 0) {
                if (!cli_has_args(a, 4))
                        return cli_bad_args(a);
                if ((r = cella_file_move(c, a->pos[1], a->pos[2], a->pos[3])) < 0)
                        return cli_api_fail(c, r);
                cli_confirm(a, "moved %s to %s", a->pos[2], a->pos[3]);
                return 0;
        }
        if (!cli_has_args(a, 3))
                return cli_bad_args(a);
        if (strcmp(cmd, "write") == 0) {
                if ((r = cella_file_write_fd(c, a->pos[1], a->pos[2], 0)) < 0)
                        return cli_api_fail(c, r);
                cli_confirm(a, "wrote %s", a->pos[2]);
        } else if (strcmp(cmd, "read") == 0) {
                if ((r = cella_file_read_fd(c, a->pos[1], a->pos[2], 1)) < 0)
                        return cli_api_fail(c, r);
        } else if (strcmp(cmd, "rm") == 0) {
                if ((r = cella_file_delete(c, a->pos[1], a->pos[2], a->recursive)) < 0)
                        return cli_api_fail(c, r);
                cli_confirm(a, "removed %s", a->pos[2]);
        } else {
                if ((r = cella_file_mkdir(c, a->pos[1], a->pos[2], a->recursive)) < 0)
                        return cli_api_fail(c, r);
                cli_confirm(a, "created directory %s", a->pos[2]);
        }
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
                cli_write_all(1, json, len);
                cli_write_all(1, "\n", 1);
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

int cmd_watch(cella_client *c, struct cli_args *a)
{
        struct cella_watch_options o = {
                .no_recursive = a->no_recursive,
                .include = a->ninclude ? a->include : NULL,
                .exclude = a->nexclude ? a->exclude : NULL,
        };
        int r;

        if (!cli_has_args(a, 3))
                return cli_bad_args(a);
        r = cella_watch(c, a->pos[1], a->pos[2], &o, on_watch_event, a);
        return r < 0 ? cli_api_fail(c, r) : 0;
}

static void print_cloned(cella_client *c, json_t *j, const struct cli_args *a)
{
        cli_confirm(a, "cloned %s (%s) into %s", cli_str(j, "repoUrl"), cli_str(j, "branch"),
                    cli_str(j, "targetDir"));
}

/* git clone NAME URL [--branch B] [--depth N] [--dir D] [--timeout MS] [--json]: prints
 * the directory (or the answer with --json); 124 on a timeout. */
int cmd_git(cella_client *c, struct cli_args *a)
{
        struct cella_git_options o = {.branch = a->branch,
                                      .target_dir = a->dir,
                                      .depth = a->depth,
                                      .timeout_ms = a->timeout_ms};
        char *text = NULL;
        int r;

        if (a->npos != 4 || strcmp(a->pos[1], "clone") != 0)
                return cli_bad_args(a);
        r = cella_git_checkout(c, a->pos[2], a->pos[3], &o, &text);
        if (r < 0) {
                cli_api_fail(c, r);
                return strcmp(cella_client_error_code(c), "COMMAND_TIMEOUT") == 0 ? 124 : 1;
        }
        return cli_answer(c, a, r, &text, print_cloned);
}
