/* PROC body -> struct proc_request; see proc-request.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proc-request.h"
#include "agent/request.h"
#include "common/limits.h"
#include "common/path.h"
#include "common/signal.h"

#define DEFAULT_INTERVAL_MS 500
#define MAX_HTTP_PATH 2048

static const char *const op_names[] = {
        [PROC_START] = "start",        [PROC_LIST] = "list",        [PROC_GET] = "get",
        [PROC_KILL] = "kill",          [PROC_KILLALL] = "killall",  [PROC_LOGS] = "logs",
        [PROC_STREAM] = "stream",      [PROC_WAIT_LOG] = "waitLog", [PROC_WAIT_PORT] = "waitPort",
        [PROC_WAIT_EXIT] = "waitExit",
};

const char *proc_op_name(enum proc_op op)
{
        return (unsigned)op < ARRAY_SIZE(op_names) ? op_names[op] : "?";
}

void proc_request_done(struct proc_request *r)
{
        if (!r)
                return;
        free(r->command);
        free(r->id);
        free(r->session);
        free(r->cwd);
        free(r->pattern);
        free(r->path);
        agent_env_free(r->env, r->n_env);
        agent_env_free(r->base_env, r->n_base_env);
        memset(r, 0, sizeof(*r));
}

static int fail(struct cella_error *err, const char *fmt, ...) _printf_(2, 3);
static int fail(struct cella_error *err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(err, CELLA_E_VALIDATION_FAILED, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* An optional integer in [lo, hi]; absent or null keeps *ret. */
static int get_int(json_t *body, const char *field, long long lo, long long hi, int64_t *ret,
                   struct cella_error *err)
{
        json_t *v = json_object_get(body, field);

        if (!v || json_is_null(v))
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
                return fail(err, "'%s' must be an integer in %lld..%lld", field, lo, hi);
        *ret = json_integer_value(v);
        return 0;
}

static int get_id(json_t *body, bool required, char **ret, struct cella_error *err)
{
        json_t *v = json_object_get(body, "id");
        char num[24];

        if (!v || json_is_null(v)) {
                if (!required)
                        return 0;
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'id' is required");
                return -EINVAL;
        }
        if (json_is_integer(v)) {
                if (json_integer_value(v) < 1 || json_integer_value(v) > 0x7fffffff)
                        return fail(err, "'id' as a pid must be in 1..%d", 0x7fffffff);
                snprintf(num, sizeof(num), "%lld", (long long)json_integer_value(v));
                *ret = strdup(num);
                if (!*ret) {
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return -EINVAL;
                }
                return 0;
        }
        return agent_decode_id(v, "id", ret, err);
}

static int get_signal(json_t *body, int *ret, struct cella_error *err)
{
        json_t *v = json_object_get(body, "signal");

        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64) {
                *ret = (int)json_integer_value(v);
                return 0;
        }
        if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v) &&
            cella_signal_parse(json_string_value(v)) > 0) {
                *ret = cella_signal_parse(json_string_value(v));
                return 0;
        }
        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                        "'signal' must be a signal name (SIGTERM, TERM) or a number in 1..64");
        return -EINVAL;
}

static int decode_start(json_t *body, struct proc_request *r, struct cella_error *err)
{
        json_t *v;
        int k;

        k = agent_decode_string(json_object_get(body, "command"), "command", CELLA_EXEC_MAX_COMMAND,
                                true, &r->command, err);
        if (k < 0)
                return k;
        k = get_id(body, false, &r->id, err);
        if (k < 0)
                return k;
        if (r->id && strspn(r->id, "0123456789") == strlen(r->id)) {
                /* A pid-like id could not be told from a pid in get/kill/... */
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'id' must not be only digits (those name pids)");
                return -EINVAL;
        }
        v = json_object_get(body, "session");
        if (v && !json_is_null(v)) {
                k = agent_decode_id(v, "session", &r->session, err);
                if (k < 0)
                        return k;
        }
        v = json_object_get(body, "cwd");
        if (v && !json_is_null(v)) {
                k = agent_decode_path(v, "cwd", &r->cwd, err);
                r->cwd_given = k >= 0;
        } else if (!(r->cwd = strdup(CELLA_WORKSPACE)))
                k = cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (k < 0)
                return -EINVAL;
        k = agent_decode_env(json_object_get(body, "env"), "env", &r->env, &r->n_env, err);
        if (k < 0)
                return k;
        return agent_decode_env(json_object_get(body, "baseEnv"), "baseEnv", &r->base_env,
                                &r->n_base_env, err);
}

static int decode_wait_port(json_t *body, struct proc_request *r, struct cella_error *err)
{
        json_t *v;
        int64_t smin = 200, smax = 399;
        int k;

        v = json_object_get(body, "port");
        if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > 65535)
                return fail(err, "'port' must be an integer in 1..65535");
        r->port = (int)json_integer_value(v);
        v = json_object_get(body, "mode");
        if (v && !json_is_null(v)) {
                if (!json_is_string(v) || (strcmp(json_string_value(v), "tcp") != 0 &&
                                           strcmp(json_string_value(v), "http") != 0)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "'mode' must be \"tcp\" or \"http\"");
                        return -EINVAL;
                }
                r->http = strcmp(json_string_value(v), "http") == 0;
        }
        v = json_object_get(body, "path");
        if (v && !json_is_null(v)) {
                k = agent_decode_string(v, "path", MAX_HTTP_PATH, true, &r->path, err);
                if (k < 0)
                        return k;
                if (r->path[0] != '/') {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "'path' must start with '/'");
                        return -EINVAL;
                }
                for (const char *p = r->path; *p; p++)
                        if ((unsigned char)*p <= ' ' || (unsigned char)*p >= 0x7f) {
                                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                "'path' must be printable ASCII without spaces");
                                return -EINVAL;
                        }
        } else if (!(r->path = strdup("/"))) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        if (get_int(body, "statusMin", 100, 599, &smin, err) < 0 ||
            get_int(body, "statusMax", 100, 599, &smax, err) < 0)
                return -EINVAL;
        if (smin > smax)
                return fail(err, "'statusMin' must not be above 'statusMax' (%lld > %lld)",
                            (long long)smin, (long long)smax);
        r->status_min = (int)smin;
        r->status_max = (int)smax;
        r->interval_ms = DEFAULT_INTERVAL_MS;
        return get_int(body, "intervalMs", CELLA_PROC_MIN_INTERVAL_MS, CELLA_PROC_MAX_INTERVAL_MS,
                       &r->interval_ms, err);
}

int proc_request_decode(json_t *body, struct proc_request *r, struct cella_error *err)
{
        json_t *op = json_object_get(body, "op");
        size_t i;
        int k;

        memset(r, 0, sizeof(*r));
        if (!json_is_object(body)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "PROC payload must be an object");
                return -EINVAL;
        }
        if (!json_is_string(op)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'op' must be a string");
                return -EINVAL;
        }
        for (i = 0; i < ARRAY_SIZE(op_names); i++)
                if (strcmp(json_string_value(op), op_names[i]) == 0)
                        break;
        if (i == ARRAY_SIZE(op_names)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "unknown process operation '%.32s'",
                                json_string_value(op));
                return -EINVAL;
        }
        r->op = (enum proc_op)i;
        switch (r->op) {
        case PROC_START:
                return decode_start(body, r, err);
        case PROC_LIST:
                return 0;
        case PROC_KILLALL:
                return get_signal(body, &r->signal, err);
        case PROC_KILL:
                k = get_id(body, true, &r->id, err);
                return k < 0 ? k : get_signal(body, &r->signal, err);
        case PROC_GET:
        case PROC_LOGS:
        case PROC_STREAM:
                return get_id(body, true, &r->id, err);
        default:
                break;
        }
        /* the waits */
        k = get_id(body, true, &r->id, err);
        if (k < 0)
                return k;
        if (get_int(body, "timeoutMs", 0, CELLA_EXEC_MAX_TIMEOUT_MS, &r->timeout_ms, err) < 0)
                return -EINVAL;
        if (r->op == PROC_WAIT_LOG) {
                json_t *v = json_object_get(body, "regex");

                k = agent_decode_string(json_object_get(body, "pattern"), "pattern",
                                        CELLA_PROC_MAX_PATTERN, true, &r->pattern, err);
                if (k < 0)
                        return k;
                if (v && !json_is_null(v)) {
                        if (!json_is_boolean(v)) {
                                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                "'regex' must be a boolean");
                                return -EINVAL;
                        }
                        r->regex = json_is_true(v);
                }
                return 0;
        }
        if (r->op == PROC_WAIT_PORT)
                return decode_wait_port(body, r, err);
        return 0;
}
