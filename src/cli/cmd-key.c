/* Tenants' API keys: key create|ls|rm (the admin's). */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void print_created(cella_client *c, json_t *j, const struct cli_args *a)
{
        (void)c;
        (void)a;
        /* the secret is shown this once: printed whatever --quiet says */
        printf("%s\n", cli_str(j, "key"));
        fprintf(stderr, "key %s of tenant '%s': keep it now, it is not shown again\n",
                cli_str(j, "id"), cli_str(j, "tenant"));
}

static void print_keys(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *k;
        size_t i;

        (void)c;
        (void)a;
        printf("%-14s %-18s %-14s %-14s %s\n", "ID", "TENANT", "MAX-SANDBOXES", "MAX-MEMORY",
               "CREATED");
        json_array_foreach(json_object_get(j, "keys"), i, k)
        {
                printf("%-14s %-18s %-14lld %-14lld %s\n", cli_str(k, "id"), cli_str(k, "tenant"),
                       (long long)json_integer_value(json_object_get(k, "maxSandboxes")),
                       (long long)json_integer_value(json_object_get(k, "maxMemory")),
                       cli_str(k, "createdAt"));
        }
}

int cmd_key(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;

        if (a->npos < 2)
                return cli_bad_args(a);
        if (strcmp(a->pos[1], "create") == 0) {
                if (a->npos != 2)
                        return cli_bad_args(a);
                if (!a->tenant)
                        return cli_usage_error(a, "key create needs --tenant T");
                return cli_answer(
                        c, a,
                        cella_key_create(c, a->tenant, a->max_sandboxes, a->max_memory, &text),
                        &text, print_created);
        }
        if (strcmp(a->pos[1], "ls") == 0) {
                if (a->npos != 2)
                        return cli_bad_args(a);
                return cli_answer(c, a, cella_key_list(c, &text), &text, print_keys);
        }
        if (strcmp(a->pos[1], "rm") == 0) {
                if (a->npos != 3)
                        return cli_bad_args(a);
                r = cella_key_delete(c, a->pos[2], &text);
                if (r >= 0)
                        cli_confirm(a, "removed key '%s'", a->pos[2]);
                return cli_answer(c, a, r, &text, NULL);
        }
        return cli_bad_args(a);
}
