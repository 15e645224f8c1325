/* Filesystem snapshots and fork: snapshot create|ls|rm, fork. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"

static void print_snapshot(cella_client *c, json_t *j, const struct cli_args *a)
{
        (void)c;
        cli_confirm(a, "snapshot %s (%s) of '%s': %lld bytes", cli_str(j, "snapshotId"),
                    cli_str(j, "name"), cli_str(j, "sandbox"),
                    (long long)json_integer_value(json_object_get(j, "sizeBytes")));
}

static void print_snapshots(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *s;
        size_t i;

        (void)c;
        (void)a;
        printf("%-22s %-24s %-24s %-12s %s\n", "ID", "NAME", "SANDBOX", "BYTES", "CREATED");
        json_array_foreach(json_object_get(j, "snapshots"), i, s)
        {
                printf("%-22s %-24s %-24s %-12lld %s\n", cli_str(s, "snapshotId"),
                       cli_str(s, "name"), cli_str(s, "sandbox"),
                       (long long)json_integer_value(json_object_get(s, "sizeBytes")),
                       cli_str(s, "createdAt"));
        }
}

int cmd_snapshot(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;

        if (a->npos < 2)
                return cli_bad_args(a);
        if (strcmp(a->pos[1], "create") == 0) {
                if (a->npos != 3)
                        return cli_bad_args(a);
                return cli_answer(c, a, cella_snapshot_create(c, a->pos[2], a->port_name, &text),
                                  &text, print_snapshot);
        }
        if (strcmp(a->pos[1], "ls") == 0) {
                if (a->npos > 3)
                        return cli_bad_args(a);
                return cli_answer(c, a,
                                  cella_snapshot_list(c, a->npos == 3 ? a->pos[2] : NULL, &text),
                                  &text, print_snapshots);
        }
        if (strcmp(a->pos[1], "rm") == 0) {
                if (a->npos != 3)
                        return cli_bad_args(a);
                r = cella_snapshot_delete(c, a->pos[2], &text);
                if (r >= 0)
                        cli_confirm(a, "deleted snapshot '%s'", a->pos[2]);
                return cli_answer(c, a, r, &text, NULL);
        }
        return cli_bad_args(a);
}

static void print_forked(cella_client *c, json_t *j, const struct cli_args *a)
{
        (void)c;
        cli_confirm(a, "forked '%s' into '%s' (snapshot %s)", a->pos[1], cli_str(j, "id"),
                    cli_str(j, "snapshot"));
}

int cmd_fork(cella_client *c, struct cli_args *a)
{
        char *text = NULL;

        if (!cli_has_args(a, 3))
                return cli_bad_args(a);
        return cli_answer(c, a,
                          a->memory ? cella_fork_memory(c, a->pos[1], a->pos[2], &text)
                                    : cella_fork(c, a->pos[1], a->pos[2], &text),
                          &text, print_forked);
}
