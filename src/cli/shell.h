/* cella shell: an interactive terminal in a sandbox's session (like docker exec -it). */
#ifndef CELLA_CLI_SHELL_H
#define CELLA_CLI_SHELL_H

#include "cella/cella.h"

/* Attach stdin/stdout to the session's terminal until its shell exits. Returns the
 * shell's exit status, or 1 (connection or API error: message on stderr), or 128+signal
 * when cella itself was told to stop (SIGINT, SIGTERM, SIGHUP, SIGQUIT from outside). */
int cli_shell(cella_client *c, const char *sandbox, const char *session);

#endif
