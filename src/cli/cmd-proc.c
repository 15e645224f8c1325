/* Commands and processes: exec, start, ps, logs, kill, wait. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "common/buf.h"

int cmd_exec(cella_client *c, struct cli_args *a)
{
        struct cella_exec_options o = {
                .cwd = a->cwd, .timeout_ms = a->timeout_ms, .session_id = a->session};
        struct cella_exec_callbacks cb = {.on_stdout = cli_on_stdout, .on_stderr = cli_on_stderr};
        struct buf cmd = BUF_INIT;
        int code = 0, r;

        if (a->npos < 3)
                return cli_bad_args(a);
        if (a->nenv)
                o.env = a->env;
        if (cli_join((char **)a->pos + 2, a->npos - 2, &cmd) < 0)
                return cli_api_fail(c, CELLA_ERR_NOMEM);
        /* Output to a file or a pipe: the raw form, stdout passed on as it arrives and
         * stderr after it (its first 64 KiB); to a terminal, events, so that stderr comes
         * in its place between the lines of stdout. */
        if (isatty(STDOUT_FILENO))
                r = cella_exec_stream(c, a->pos[1], cmd.data, &o, &cb, &code);
        else
                r = cella_exec_raw(c, a->pos[1], cmd.data, &o, &cb, &code);
        buf_free(&cmd);
        if (r < 0) {
                /* `exit 3` ended the session's shell: that is the command's exit status, as
                 * it would be for a shell of one's own. */
                if (strcmp(cella_client_error_code(c), "SESSION_TERMINATED") == 0)
                        return code;
                cli_api_fail(c, r);
                return strcmp(cella_client_error_code(c), "COMMAND_TIMEOUT") == 0 ? 124 : 1;
        }
        return code;
}

int cmd_start(cella_client *c, struct cli_args *a)
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
                return cli_bad_args(a);
        if (cli_join((char **)a->pos + 2, a->npos - 2, &cmd) < 0)
                return cli_api_fail(c, CELLA_ERR_NOMEM);
        r = cella_process_start(c, a->pos[1], cmd.data, &o, &text);
        buf_free(&cmd);
        if (r < 0)
                return cli_api_fail(c, r);
        j = json_loads(text, 0, NULL);
        if (a->json)
                cli_print_json(text);
        else
                printf("%s\n", cli_str(j, "id"));
        if (strcmp(cli_str(j, "status"), "error") == 0)
                fprintf(stderr, "cella: the process could not start: %s\n", cli_str(j, "error"));
        r = strcmp(cli_str(j, "status"), "error") == 0 ? 1 : 0;
        json_decref(j);
        free(text);
        return r;
}

static void print_processes(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *p;
        size_t i;

        printf("%-20s %7s %-10s %4s %-24s %s\n", "ID", "PID", "STATUS", "EXIT", "STARTED",
               "COMMAND");
        json_array_foreach(json_object_get(j, "processes"), i, p)
        {
                json_t *code = json_object_get(p, "exitCode");
                char exit[16] = "-";

                if (code)
                        snprintf(exit, sizeof(exit), "%lld", (long long)json_integer_value(code));
                printf("%-20s %7lld %-10s %4s %-24s %s\n", cli_str(p, "id"),
                       (long long)json_integer_value(json_object_get(p, "pid")),
                       cli_str(p, "status"), exit, cli_str(p, "startTime"), cli_str(p, "command"));
        }
}

/* ps NAME; without a NAME, the sandboxes (cmd_list) */
int cmd_ps(cella_client *c, struct cli_args *a)
{
        char *text = NULL;

        if (a->npos == 1)
                return cmd_list(c, a);
        if (!cli_has_args(a, 2))
                return cli_bad_args(a);
        return cli_answer(c, a, cella_process_list(c, a->pos[1], &text), &text, print_processes);
}

int cmd_logs(cella_client *c, struct cli_args *a)
{
        struct cella_exec_callbacks cb = {.on_stdout = cli_on_stdout, .on_stderr = cli_on_stderr};
        cella_exec_result *res = NULL;
        const void *p;
        size_t n;
        int r;

        if (!cli_has_args(a, 3))
                return cli_bad_args(a);
        if (a->follow) {
                r = cella_process_stream(c, a->pos[1], a->pos[2], &cb, NULL);
                return r < 0 ? cli_api_fail(c, r) : 0;
        }
        r = cella_process_logs(c, a->pos[1], a->pos[2], &res);
        if (r < 0)
                return cli_api_fail(c, r);
        p = cella_exec_result_stdout(res, &n);
        cli_write_all(1, p, n);
        p = cella_exec_result_stderr(res, &n);
        cli_write_all(2, p, n);
        cella_exec_result_free(res);
        return 0;
}

static void print_killed(cella_client *c, json_t *j, const struct cli_args *a)
{
        cli_confirm(a, "%s %s", cli_str(j, "id"), cli_str(j, "status"));
}

int cmd_kill(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r, killed = 0;

        if (a->all) {
                if (a->npos != 2)
                        return cli_bad_args(a);
                r = cella_process_kill_all(c, a->pos[1], a->signal, &killed);
                if (r < 0)
                        return cli_api_fail(c, r);
                if (a->json)
                        printf("{\"killed\": %d}\n", killed);
                else
                        cli_confirm(a, "%d", killed);
                return 0;
        }
        if (a->npos != 3)
                return cli_bad_args(a);
        r = cella_process_kill(c, a->pos[1], a->pos[2], a->signal, &text);
        return cli_answer(c, a, r, &text, print_killed);
}

int cmd_wait(cella_client *c, struct cli_args *a)
{
        const char *sb = a->pos[1], *id = a->pos[2];
        char *text = NULL;
        json_t *j;
        int r;

        if (!cli_has_args(a, 3))
                return cli_bad_args(a);
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
                cli_api_fail(c, r);
                return strcmp(cella_client_error_code(c), "PROCESS_READY_TIMEOUT") == 0 ? 124 : 1;
        }
        j = json_loads(text, 0, NULL);
        if (a->json)
                cli_print_json(text);
        else if (a->log)
                printf("%s\n", cli_str(j, "line"));
        r = a->exit ? (int)json_integer_value(json_object_get(j, "exitCode")) : 0;
        json_decref(j);
        free(text);
        return r;
}
