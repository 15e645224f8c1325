/* Sandboxes themselves: create, list, info, env set, destroy, sleep, health. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "cli/duration.h"
#include "common/timeutil.h"

/* "2m13s ago" for an API timestamp (whole seconds; "just now" under one), "-" when it does
 * not parse. */
static const char *fmt_ago(const char *iso, char out[48])
{
        int64_t t, d;
        char dur[32];

        if (cli_time_parse(iso, strlen(iso), &t) < 0)
                return "-";
        d = time_now_ms() - t;
        if (d < 1000)
                return "just now";
        if (d > CLI_DURATION_MAX_MS)
                d = CLI_DURATION_MAX_MS;
        cli_duration_format(d / 1000 * 1000, dur, sizeof(dur));
        snprintf(out, 48, "%s ago", dur);
        return out;
}

/* A sandbox's sleepAfter for display: "10m", or "never" with keepAlive. */
static const char *fmt_sleep_after(json_t *sb, char out[32])
{
        json_int_t s = json_integer_value(json_object_get(sb, "sleepAfter"));

        if (json_is_true(json_object_get(sb, "keepAlive")))
                return "never";
        if (s <= 0 || cli_duration_format((int64_t)s * 1000, out, 32) < 0)
                return "-";
        return out;
}

static void print_list(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *s;
        size_t i;

        printf("%-32s %-9s %-11s %-14s %-12s %s\n", "NAME", "STATE", "SLEEP AFTER", "LAST ACTIVE",
               "IMAGE", "TYPE");
        json_array_foreach(json_object_get(j, "sandboxes"), i, s)
        {
                char sl[32], ago[48];

                printf("%-32s %-9s %-11s %-14s %-12s %s\n", cli_str(s, "id"), cli_str(s, "state"),
                       fmt_sleep_after(s, sl), fmt_ago(cli_str(s, "lastActiveAt"), ago),
                       cli_str(s, "image"), cli_str(s, "instanceType"));
        }
}

/* list, and ls or ps without a NAME */
int cmd_list(cella_client *c, struct cli_args *a)
{
        char *text = NULL;

        if (!cli_has_args(a, 1))
                return cli_bad_args(a);
        return cli_answer(c, a, cella_sandbox_list(c, &text), &text, print_list);
}

/* state, and what sleeping means for what runs in it */
static void print_state(json_t *j)
{
        const char *state = cli_str(j, "state");
        json_int_t sleep_s = json_integer_value(json_object_get(j, "sleepAfter"));
        char sl[32], left[32];
        int64_t t;

        if (strcmp(state, "sleeping") == 0 &&
            json_is_integer(json_object_get(j, "memorySnapshotBytes")))
                printf("state:         sleeping with its memory (idle for its sleep-after "
                       "time: its processes,\n"
                       "               sessions and code contexts kept on disk, %.1f MiB; the "
                       "next command restores them)\n",
                       (double)json_integer_value(json_object_get(j, "memorySnapshotBytes")) /
                               (1 << 20));
        else if (strcmp(state, "sleeping") == 0)
                printf("state:         sleeping (idle for its sleep-after time: its processes, "
                       "sessions and code\n"
                       "               contexts were stopped, its files kept; the next command "
                       "wakes it)\n");
        else if (strcmp(state, "stopped") == 0)
                printf("state:         stopped (starts again, with its files, on the next "
                       "command)\n");
        else
                printf("state:         %s\n", state);
        if (json_is_true(json_object_get(j, "keepAlive"))) {
                printf("sleep after:   never (keep alive)\n");
        } else {
                printf("sleep after:   %s without activity", fmt_sleep_after(j, sl));
                if (strcmp(state, "running") == 0 &&
                    cli_time_parse(cli_str(j, "lastActiveAt"), strlen(cli_str(j, "lastActiveAt")),
                                   &t) == 0) {
                        int64_t rest = t + (int64_t)sleep_s * 1000 - time_now_ms();

                        rest = rest < 0 ? 0 : rest / 1000 * 1000;
                        if (rest > CLI_DURATION_MAX_MS)
                                rest = CLI_DURATION_MAX_MS;
                        cli_duration_format(rest, left, sizeof(left));
                        printf(" (then background processes, sessions and code contexts stop;\n"
                               "               in %s unless there is activity: requests, a "
                               "running command,\n"
                               "               an open stream or wait)",
                               left);
                }
                putchar('\n');
        }
        printf("keep alive:    %s\n", json_is_true(json_object_get(j, "keepAlive")) ? "yes" : "no");
        /* what a sleep keeps, and why not memory where it was asked for (decision 0050) */
        if (json_is_string(json_object_get(j, "sleepModeFallback")))
                printf("sleep mode:    files (memory asked for; not on this host: %s)\n",
                       cli_str(j, "sleepModeFallback"));
        else if (json_is_string(json_object_get(j, "sleepMode")))
                printf("sleep mode:    %s\n", cli_str(j, "sleepMode"));
        if (json_is_string(json_object_get(j, "memorySleepError")))
                printf("memory sleep:  %s\n", cli_str(j, "memorySleepError"));
}

static void print_info(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *v;
        const char *k;
        char ago[48];

        printf("name:          %s\n", cli_str(j, "id"));
        print_state(j);
        printf("last active:   %s (%s)\n", cli_str(j, "lastActiveAt"),
               fmt_ago(cli_str(j, "lastActiveAt"), ago));
        printf("image:         %s\ninstance type: %s\ncreated:       %s\n", cli_str(j, "image"),
               cli_str(j, "instanceType"), cli_str(j, "createdAt"));
        if (json_object_get(j, "network"))
                printf("network:       %s%s%s\n", cli_str(j, "network"),
                       json_object_get(j, "networkAddress") ? " " : "",
                       json_object_get(j, "networkAddress") ? cli_str(j, "networkAddress") : "");
        {
                size_t i;
                json_array_foreach(json_object_get(j, "networkAllow"), i, v)
                        printf("network allow: %s\n", json_string_value(v));
        }
        v = json_object_get(j, "disk");
        if (json_is_object(v))
                printf("disk:          %.1f of %.1f MiB used\n",
                       (double)json_integer_value(json_object_get(v, "usedBytes")) / 1048576.0,
                       (double)json_integer_value(json_object_get(v, "limitBytes")) / 1048576.0);
        json_object_foreach(json_object_get(j, "labels"), k, v)
                printf("label:         %s=%s\n", k, json_string_value(v));
        json_object_foreach(json_object_get(j, "env"), k, v)
                printf("env:           %s=%s\n", k, json_string_value(v));
}

int cmd_info(cella_client *c, struct cli_args *a)
{
        char *text = NULL;

        if (!cli_has_args(a, 2))
                return cli_bad_args(a);
        return cli_answer(c, a, cella_sandbox_info(c, a->pos[1], &text), &text, print_info);
}

int cmd_create(cella_client *c, struct cli_args *a)
{
        char sleep_after[32];
        struct cella_sandbox_options o = {.image = a->image,
                                          .instance_type = a->instance_type,
                                          .env = a->nenv ? a->env : NULL,
                                          .labels = a->nlabels ? a->labels : NULL,
                                          .keep_alive = a->keep_alive,
                                          .no_default_session = a->no_default_session,
                                          .network = a->network,
                                          .network_allow = a->nallow ? a->allow : NULL,
                                          .sleep_mode = a->sleep_mode};
        char *text = NULL;
        int r;

        if (!cli_has_args(a, 2))
                return cli_bad_args(a);
        if (a->sleep_after_s > 0) {
                snprintf(sleep_after, sizeof(sleep_after), "%lds", a->sleep_after_s);
                o.sleep_after = sleep_after;
        }
        r = cella_sandbox_create(c, a->pos[1], &o, &text);
        if (r >= 0)
                cli_confirm(a, "%s sandbox '%s'",
                            cella_client_http_status(c) == 201 ? "created" : "updated", a->pos[1]);
        return cli_answer(c, a, r, &text, NULL);
}

int cmd_destroy(cella_client *c, struct cli_args *a)
{
        bool existed = false;
        int r;

        if (!cli_has_args(a, 2))
                return cli_bad_args(a);
        r = cella_sandbox_destroy(c, a->pos[1], &existed);
        if (r < 0)
                return cli_api_fail(c, r);
        if (existed)
                cli_confirm(a, "destroyed sandbox '%s'", a->pos[1]);
        else
                cli_confirm(a, "sandbox '%s' did not exist", a->pos[1]);
        return 0;
}

/* "sandbox 'NAME' is sleeping" and what the sleep kept (0050, 0063). */
static void print_slept(cella_client *c, json_t *j, const struct cli_args *a)
{
        json_t *bytes = json_object_get(j, "memorySnapshotBytes");
        const char *why = json_string_value(json_object_get(j, "memorySleepError"));

        (void)c;
        if (json_is_integer(bytes))
                cli_confirm(a, "sandbox '%s' is sleeping with its memory (%.1f MiB)", a->pos[1],
                            (double)json_integer_value(bytes) / (1 << 20));
        else if (why)
                cli_confirm(a, "sandbox '%s' is sleeping with its files (%s)", a->pos[1], why);
        else
                cli_confirm(a, "sandbox '%s' is sleeping", a->pos[1]);
}

/* sleep NAME: asleep now (POST /sleep) */
int cmd_sleep(cella_client *c, struct cli_args *a)
{
        char *text = NULL;

        if (!cli_has_args(a, 2))
                return cli_bad_args(a);
        return cli_answer(c, a, cella_sandbox_sleep(c, a->pos[1], &text), &text, print_slept);
}

/* env set NAME K=V|K... [--session S] */
int cmd_env(cella_client *c, struct cli_args *a)
{
        int r, set = 0, unset = 0;

        if (a->npos < 4 || strcmp(a->pos[1], "set") != 0)
                return cli_bad_args(a);
        r = a->session ? cella_session_set_env(c, a->pos[2], a->session, a->pos + 3)
                       : cella_sandbox_set_env(c, a->pos[2], a->pos + 3);
        if (r < 0)
                return cli_api_fail(c, r);
        for (int i = 3; i < a->npos; i++) {
                if (strchr(a->pos[i], '='))
                        set++;
                else
                        unset++;
        }
        if (a->session)
                cli_confirm(a, "set %d and unset %d variables of session %s", set, unset,
                            a->session);
        else
                cli_confirm(a, "set %d and unset %d variables of sandbox '%s'", set, unset,
                            a->pos[2]);
        return 0;
}

/* The daemon's health answer, always as JSON. */
int cmd_health(cella_client *c, struct cli_args *a)
{
        char *text = NULL;
        int r;

        if (!cli_has_args(a, 1))
                return cli_bad_args(a);
        r = cella_health(c, &text);
        if (r < 0)
                return cli_api_fail(c, r);
        cli_print_json(text);
        free(text);
        return 0;
}
