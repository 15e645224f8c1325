/* cella session ..., cella context ...: sessions and code contexts of a sandbox, the same
 * three sub-commands (create, ls, rm) over two kinds of object. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

/* One kind of object a sandbox holds by id. */
struct kind {
        const char *name; /* "session": in "removed session ID" */
        int (*create)(cella_client *c, const struct cli_args *a, char **ret_text);
        int (*list)(cella_client *c, const char *sandbox, char **ret_text);
        int (*remove)(cella_client *c, const char *sandbox, const char *id);
        void (*print_list)(cella_client *c, json_t *j, const struct cli_args *a);
};

/* A column of a listing: its header, the member it shows (a flag as yes or no), its width
 * (the last column is not padded). */
struct column {
        const char *head, *key;
        int width;
        bool flag;
};

static void print_cell(const struct column *col, const char *v, bool last)
{
        if (last)
                printf("%s\n", v);
        else
                printf("%-*s ", col->width, v);
}

/* The header line, then one line per object of list. */
static void print_rows(json_t *list, const struct column *cols, size_t n)
{
        json_t *o;
        size_t i;

        for (size_t k = 0; k < n; k++)
                print_cell(&cols[k], cols[k].head, k + 1 == n);
        json_array_foreach(list, i, o)
        {
                for (size_t k = 0; k < n; k++) {
                        const char *v =
                                cols[k].flag
                                        ? (json_is_true(json_object_get(o, cols[k].key)) ? "yes"
                                                                                         : "no")
                                        : cli_str(o, cols[k].key);

                        print_cell(&cols[k], v, k + 1 == n);
                }
        }
}

static void print_id(cella_client *c, json_t *j, const struct cli_args *a)
{
        printf("%s\n", cli_str(j, "id"));
}

/* KIND create NAME | KIND ls NAME | KIND rm NAME ID */
static int cmd_kind(cella_client *c, struct cli_args *a, const struct kind *k)
{
        char *text = NULL;
        int r;

        if (a->npos < 3)
                return cli_bad_args(a);
        if (strcmp(a->pos[1], "create") == 0 && a->npos == 3)
                return cli_answer(c, a, k->create(c, a, &text), &text, print_id);
        if (strcmp(a->pos[1], "ls") == 0 && a->npos == 3)
                return cli_answer(c, a, k->list(c, a->pos[2], &text), &text, k->print_list);
        if (strcmp(a->pos[1], "rm") != 0 || a->npos != 4)
                return cli_bad_args(a);
        r = k->remove(c, a->pos[2], a->pos[3]);
        if (r < 0)
                return cli_api_fail(c, r);
        cli_confirm(a, "removed %s %s", k->name, a->pos[3]);
        return 0;
}

static int session_create(cella_client *c, const struct cli_args *a, char **ret_text)
{
        struct cella_session_options o = {.id = a->id,
                                          .cwd = a->cwd,
                                          .env = a->nenv ? a->env : NULL,
                                          .command_timeout_ms = a->timeout_ms};

        return cella_session_create(c, a->pos[2], &o, ret_text);
}

static void print_sessions(cella_client *c, json_t *j, const struct cli_args *a)
{
        static const struct column cols[] = {
                {"ID", "id", 24, false},
                {"BUSY", "busy", 5, true},
                {"CREATED", "createdAt", 24, false},
                {"CWD", "cwd", 0, false},
        };

        print_rows(json_object_get(j, "sessions"), cols, ARRAY_SIZE(cols));
}

int cmd_session(cella_client *c, struct cli_args *a)
{
        static const struct kind session = {"session", session_create, cella_session_list,
                                            cella_session_delete, print_sessions};

        return cmd_kind(c, a, &session);
}

static int context_create(cella_client *c, const struct cli_args *a, char **ret_text)
{
        struct cella_context_options o = {
                .language = a->lang, .cwd = a->cwd, .env = a->nenv ? a->env : NULL};

        return cella_context_create(c, a->pos[2], &o, ret_text);
}

static void print_contexts(cella_client *c, json_t *j, const struct cli_args *a)
{
        static const struct column cols[] = {
                {"ID", "id", 24, false},
                {"LANGUAGE", "language", 11, false},
                {"STATUS", "status", 9, false},
                {"CWD", "cwd", 0, false},
        };

        print_rows(json_object_get(j, "contexts"), cols, ARRAY_SIZE(cols));
}

int cmd_context(cella_client *c, struct cli_args *a)
{
        static const struct kind context = {"context", context_create, cella_context_list,
                                            cella_context_delete, print_contexts};

        return cmd_kind(c, a, &context);
}
