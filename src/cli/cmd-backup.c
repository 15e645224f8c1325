/* Backups: backup create|restore|ls|rm (docs/api.md "Backups"). */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static void print_backup(cella_client *c, json_t *j, const struct cli_args *a)
{
        (void)c;
        cli_confirm(a, "backup %s of '%s':%s: %lld bytes, expires %s", cli_str(j, "id"),
                    cli_str(j, "sandbox"), cli_str(j, "dir"),
                    (long long)json_integer_value(json_object_get(j, "sizeBytes")),
                    cli_str(j, "expiresAt"));
}

static void print_restored(cella_client *c, json_t *j, const struct cli_args *a)
{
        (void)c;
        cli_confirm(a, "restored backup %s into '%s':%s", cli_str(j, "id"), cli_str(j, "sandbox"),
                    cli_str(j, "dir"));
}

static void print_backups(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *b;
        size_t i;

        (void)c;
        (void)a;
        printf("%-36s %-20s %-24s %-24s %-12s %s\n", "ID", "NAME", "SANDBOX", "DIR", "BYTES",
               "EXPIRES");
        json_array_foreach(json_object_get(j, "backups"), i, b)
        {
                printf("%-36s %-20s %-24s %-24s %-12lld %s\n", cli_str(b, "id"), cli_str(b, "name"),
                       cli_str(b, "sandbox"), cli_str(b, "dir"),
                       (long long)json_integer_value(json_object_get(b, "sizeBytes")),
                       cli_str(b, "expiresAt"));
        }
}

int cmd_backup(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;

        if (a->npos < 2)
                return cli_bad_args(a);
        if (strcmp(a->pos[1], "create") == 0) {
                long long ttl = 0;
                if (a->npos != 4)
                        return cli_bad_args(a);
                if (a->ttl) {
                        char *end;
                        errno = 0;
                        ttl = strtoll(a->ttl, &end, 10);
                        if (errno || end == a->ttl || *end || ttl < 1) {
                                fprintf(stderr, "cella: --ttl must be a number of seconds\n");
                                return 2;
                        }
                }
                struct cella_backup_options o = {
                        .name = a->port_name,
                        .ttl_s = (int64_t)ttl,
                        .gitignore = a->gitignore,
                        .excludes = a->exclude,
                        .nexcludes = (size_t)a->nexclude,
                        .consistent = a->consistent,
                        .no_multipart = a->no_multipart,
                };
                return cli_answer(c, a,
                                  cella_backup_create_with(c, a->pos[2], a->pos[3], &o, &text),
                                  &text, print_backup);
        }
        if (strcmp(a->pos[1], "restore") == 0) {
                if (a->npos != 4)
                        return cli_bad_args(a);
                return cli_answer(c, a,
                                  cella_backup_restore(c, a->pos[2], a->pos[3], a->dir, &text),
                                  &text, print_restored);
        }
        if (strcmp(a->pos[1], "ls") == 0) {
                if (a->npos != 2)
                        return cli_bad_args(a);
                return cli_answer(c, a, cella_backup_list(c, &text), &text, print_backups);
        }
        if (strcmp(a->pos[1], "rm") == 0) {
                if (a->npos != 3)
                        return cli_bad_args(a);
                r = cella_backup_delete(c, a->pos[2], &text);
                if (r >= 0)
                        cli_confirm(a, "deleted backup '%s'", a->pos[2]);
                return cli_answer(c, a, r, &text, NULL);
        }
        return cli_bad_args(a);
}
