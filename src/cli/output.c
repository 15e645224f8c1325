/* See cli.h: what every command prints the same way. */
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "cli/help.h"

/* A usage error: the message, then the command's usage lines (or the command list) on
 * stderr; exit status 2. */
int cli_usage_error(const struct cli_args *a, const char *fmt, ...)
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
int cli_bad_args(const struct cli_args *a)
{
        return cli_usage_error(a, "wrong arguments for '%s'", a->pos[0]);
}

/* The one line a mutating command prints on success; none with --quiet or --json. */
void cli_confirm(const struct cli_args *a, const char *fmt, ...)
{
        va_list ap;

        if (a->quiet || a->json)
                return;
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
}

int cli_api_fail(cella_client *c, int r)
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

int cli_write_all(int fd, const void *p, size_t n)
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

int cli_on_stdout(const void *d, size_t n, void *ud)
{
        return cli_write_all(1, d, n);
}

int cli_on_stderr(const void *d, size_t n, void *ud)
{
        return cli_write_all(2, d, n);
}

void cli_print_json(const char *text)
{
        json_t *j = json_loads(text, 0, NULL);
        char *s = j ? json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER) : NULL;
        printf("%s\n", s ? s : text);
        free(s);
        json_decref(j);
}

const char *cli_str(json_t *o, const char *k)
{
        const char *s = json_string_value(json_object_get(o, k));
        return s ? s : "";
}

/* Exactly n words (command word included)? */
bool cli_has_args(const struct cli_args *a, int n)
{
        return a->npos == n;
}

int cli_answer(cella_client *c, const struct cli_args *a, int r, char **text,
               void (*human)(cella_client *c, json_t *j, const struct cli_args *a))
{
        if (r < 0)
                return cli_api_fail(c, r);
        if (a->json) {
                cli_print_json(*text);
        } else if (human) {
                json_t *j = json_loads(*text, 0, NULL);

                human(c, j, a);
                json_decref(j);
        }
        free(*text);
        *text = NULL;
        return 0;
}
