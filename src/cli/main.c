/* cella: the command-line tool, on libcella. Exit status: the command's own for exec (and
 * the process's for wait --exit), 0 on success, 1 for an API or transport error, 2 for a
 * usage error, 124 for an exec timeout or a wait that timed out. The commands live in
 * cli/cmd-*.c; here the command line is parsed, answered locally when it can be, and
 * dispatched. */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cella/cella.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "cli/help.h"
#include "cli/shell.h"
#include "common/macros.h"
#include "common/startup.h"
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
                        return cli_bad_args(a);
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
                        return cli_bad_args(a);
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

static int cmd_shell(cella_client *c, struct cli_args *a)
{
        return cli_has_args(a, 2) ? cli_shell(c, a->pos[1], a->session) : cli_bad_args(a);
}

/* Every command that talks to a daemon; help and version are answered locally. */
static const struct {
        const char *name;
        int (*run)(cella_client *c, struct cli_args *a);
} commands[] = {
        {"exec", cmd_exec},       {"write", cmd_file},      {"read", cmd_file},
        {"rm", cmd_file},         {"mkdir", cmd_file},      {"mv", cmd_file},
        {"ls", cmd_ls},           {"create", cmd_create},   {"info", cmd_info},
        {"list", cmd_list},       {"destroy", cmd_destroy}, {"env", cmd_env},
        {"session", cmd_session}, {"start", cmd_start},     {"ps", cmd_ps},
        {"logs", cmd_logs},       {"code", cmd_code},       {"context", cmd_context},
        {"watch", cmd_watch},     {"shell", cmd_shell},     {"kill", cmd_kill},
        {"wait", cmd_wait},       {"git", cmd_git},         {"image", cmd_image},
        {"expose", cmd_ports},    {"ports", cmd_ports},     {"unexpose", cmd_ports},
        {"health", cmd_health},   {"mcp", cmd_mcp},         {"snapshot", cmd_snapshot},
        {"fork", cmd_fork},       {"top", cmd_top},         {"backup", cmd_backup},
        {"key", cmd_key},         {"sleep", cmd_sleep},
};

static int dispatch(cella_client *c, struct cli_args *a)
{
        for (size_t i = 0; i < ARRAY_SIZE(commands); i++)
                if (strcmp(a->pos[0], commands[i].name) == 0)
                        return commands[i].run(c, a);
        /* in the help table but not dispatched here: a bug */
        fprintf(stderr, "cella: command '%s' is not implemented\n", a->pos[0]);
        return 1;
}

int main(int argc, char **argv)
{
        static const int ignored[] = {SIGPIPE};
        struct cli_args a;
        cella_client *c = NULL;
        int rc;

        startup_ignore_signals(ignored, ARRAY_SIZE(ignored));
        if (cli_parse(argc, argv, &a) < 0)
                return cli_usage_error(&a, "%s", a.error);
        if ((rc = answer_locally(&a)) >= 0)
                return rc;
        if ((rc = check_name(&a)) != 0)
                return rc;
        if (cella_client_new(a.url, a.token, &c) < 0) {
                fprintf(stderr, "cella: cannot initialise the client\n");
                return 1;
        }
        rc = dispatch(c, &a);
        cella_client_free(c);
        return rc;
}
