/* The cella CLI's commands as data: what `cella help CMD`, `cella CMD --help` and usage
 * errors print, and where each command takes its sandbox NAME (checked before any request). */
#ifndef CELLA_CLI_HELP_H
#define CELLA_CLI_HELP_H

#include <stddef.h>
#include <stdio.h>

struct cli_command {
        const char *name;    /* the command word */
        const char *summary; /* one line, for the command list */
        const char *usage;   /* "cella ..." lines, '\n' between them (no final '\n') */
        const char *detail;  /* what it does and prints; lines ending in '\n'; or NULL */
        const char *options; /* "  --opt V   meaning" lines ending in '\n'; or NULL */
        const char *example; /* lines ending in '\n' */
        int name_at;         /* pos[] index of the sandbox NAME: 1 or 2; 0: none */
};

extern const struct cli_command cli_commands[];
extern const size_t cli_ncommands;

/* The command whose word is name ("help" and "version" included), or NULL. */
const struct cli_command *cli_command_find(const char *name);

/* `cella --help`: global options and the command list. */
void cli_usage_print(FILE *f);
/* `cella help CMD`: usage, what it does, options, example. */
void cli_help_print(FILE *f, const struct cli_command *c);
/* A usage error's tail: the command's usage lines and where to read more. */
void cli_usage_lines_print(FILE *f, const struct cli_command *c);

#endif
