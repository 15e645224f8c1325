/* The cella CLI's commands (cli/cmd-*.c) and what they print the same way (cli/output.c).
 * Every cmd_* takes the client and the parsed command line and returns the exit status:
 * the command's own for exec (and the process's for wait --exit), 0 on success, 1 for an
 * API or transport error, 2 for a usage error, 124 for a timeout. */
#ifndef CELLA_CLI_CLI_H
#define CELLA_CLI_CLI_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cella/cella.h"
#include "cli/args.h"
#include "common/macros.h"

/* ---- output ---- */

/* A usage error: "cella: MESSAGE", then the command's usage lines (or the command list) on
 * stderr; returns 2. */
int cli_usage_error(const struct cli_args *a, const char *fmt, ...) _printf_(2, 3);
/* A wrong number of words for the command: cli_usage_error's 2. */
int cli_bad_args(const struct cli_args *a);
/* Exactly n words (command word included)? */
bool cli_has_args(const struct cli_args *a, int n);
/* The one line a mutating command prints on success; none with --quiet or --json. */
void cli_confirm(const struct cli_args *a, const char *fmt, ...) _printf_(2, 3);
/* The client's error ("cella: CODE: message") on stderr; returns 1. */
int cli_api_fail(cella_client *c, int r);
/* The answer *text of a call that returned r (a pointer, so that the call may be an
 * argument: C leaves the order of arguments open): cli_api_fail's 1 when r < 0; else 0
 * after printing it indented with --json, or through human (when not NULL) from its
 * parsed JSON otherwise. *text is freed and set to NULL. */
int cli_answer(cella_client *c, const struct cli_args *a, int r, char **text,
               void (*human)(cella_client *c, json_t *j, const struct cli_args *a));
/* JSON text indented by two (as is when it does not parse), and a newline. */
void cli_print_json(const char *text);
/* o's string member k, or "" (never NULL). */
const char *cli_str(json_t *o, const char *k);
/* All of n bytes to fd (EINTR retried): 0 or -1. */
int cli_write_all(int fd, const void *p, size_t n);
/* Stream callbacks to our stdout and stderr. */
int cli_on_stdout(const void *d, size_t n, void *ud);
int cli_on_stderr(const void *d, size_t n, void *ud);

/* ---- commands ---- */

/* cmd-sandbox.c */
int cmd_create(cella_client *c, struct cli_args *a);
int cmd_list(cella_client *c, struct cli_args *a);
int cmd_info(cella_client *c, struct cli_args *a);
int cmd_destroy(cella_client *c, struct cli_args *a);
int cmd_sleep(cella_client *c, struct cli_args *a);
int cmd_env(cella_client *c, struct cli_args *a);
int cmd_health(cella_client *c, struct cli_args *a);
/* cmd-mcp.c */
int cmd_mcp(cella_client *c, struct cli_args *a);
/* cmd-proc.c */
int cmd_exec(cella_client *c, struct cli_args *a);
int cmd_start(cella_client *c, struct cli_args *a);
int cmd_ps(cella_client *c, struct cli_args *a);
int cmd_logs(cella_client *c, struct cli_args *a);
int cmd_kill(cella_client *c, struct cli_args *a);
int cmd_wait(cella_client *c, struct cli_args *a);
/* cmd-files.c */
int cmd_ls(cella_client *c, struct cli_args *a);
int cmd_file(cella_client *c, struct cli_args *a);
int cmd_watch(cella_client *c, struct cli_args *a);
int cmd_git(cella_client *c, struct cli_args *a);
/* cmd-session.c */
int cmd_session(cella_client *c, struct cli_args *a);
int cmd_context(cella_client *c, struct cli_args *a);
/* cmd-code.c */
int cmd_code(cella_client *c, struct cli_args *a);
/* cmd-image.c */
int cmd_image(cella_client *c, struct cli_args *a);
int cmd_snapshot(cella_client *c, struct cli_args *a);
int cmd_key(cella_client *c, struct cli_args *a);
int cmd_fork(cella_client *c, struct cli_args *a);
int cmd_backup(cella_client *c, struct cli_args *a);
int cmd_ports(cella_client *c, struct cli_args *a); /* expose, unexpose, ports */
/* cmd-top.c */
int cmd_top(cella_client *c, struct cli_args *a);

#endif
