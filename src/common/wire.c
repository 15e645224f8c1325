/* One encoder and one decoder per agent request body; see wire.h. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"
#include "common/validate.h"
#include "common/wire.h"

static int invalid(struct cella_error *err, const char *field, const char *what)
{
        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' %s", field, what);
        return -EINVAL;
}

/* An optional member: absent and null are the same. */
static json_t *member(json_t *j, const char *field)
{
        json_t *v = json_object_get(j, field);

        return json_is_null(v) ? NULL : v;
}

static int opt_object(json_t *j, const char *field, json_t **ret, struct cella_error *err)
{
        json_t *v = member(j, field);

        if (v && !json_is_object(v))
                return invalid(err, field, "must be an object");
        *ret = v;
        return 0;
}

static int opt_id(json_t *j, const char *field, const char **ret, struct cella_error *err)
{
        json_t *v = member(j, field);

        if (v && (!json_is_string(v) || strlen(json_string_value(v)) != json_string_length(v) ||
                  !cella_id_is_valid(json_string_value(v)))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'%s' must be 1..%d of [A-Za-z0-9_.-]", field, CELLA_ID_MAX);
                return -EINVAL;
        }
        *ret = v ? json_string_value(v) : NULL;
        return 0;
}

/* An integer in lo..hi (required: an absent one is an error too). */
static int integer(json_t *j, const char *field, bool required, int64_t lo, int64_t hi,
                   int64_t *ret, struct cella_error *err)
{
        json_t *v = member(j, field);

        if (!v && !required)
                return 0;
        if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'%s' must be an integer from %lld to %lld", field, (long long)lo,
                                (long long)hi);
                return -EINVAL;
        }
        *ret = json_integer_value(v);
        return 0;
}

/* Set j[field] to v (taken) if the field is given, else drop v; -1 when out of memory. */
static int put(json_t *j, const char *field, json_t *v, bool given)
{
        if (!given) {
                json_decref(v);
                return 0;
        }
        return v ? json_object_set_new(j, field, v) : -1;
}

json_t *wire_exec_encode(const struct wire_exec *x)
{
        json_t *j = json_object();

        if (!j || put(j, "command", json_string(x->command), true) < 0 ||
            put(j, "cwd", json_string(x->cwd ? x->cwd : ""), x->cwd) < 0 ||
            put(j, "env", json_incref(x->env), x->env) < 0 ||
            put(j, "baseEnv", json_incref(x->base_env), x->base_env) < 0 ||
            put(j, "session", json_string(x->session ? x->session : ""), x->session) < 0 ||
            put(j, "timeoutMs", json_integer(x->timeout_ms), true) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int wire_exec_decode(json_t *j, struct wire_exec *ret, struct cella_error *err)
{
        json_t *v = json_object_get(j, "command");
        int r;

        memset(ret, 0, sizeof(*ret));
        if (!json_is_string(v) || !command_is_valid(json_string_value(v), json_string_length(v))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'command' must be a string of 1..%d bytes without NUL",
                                CELLA_EXEC_MAX_COMMAND);
                return -EINVAL;
        }
        ret->command = json_string_value(v);
        v = member(j, "cwd");
        if (v && !json_is_string(v))
                return invalid(err, "cwd", "must be a string");
        ret->cwd = json_string_value(v);
        r = opt_object(j, "env", &ret->env, err);
        if (r == 0)
                r = opt_object(j, "baseEnv", &ret->base_env, err);
        if (r == 0)
                r = opt_id(j, "session", &ret->session, err);
        if (r == 0)
                r = integer(j, "timeoutMs", false, 0, CELLA_EXEC_MAX_TIMEOUT_MS, &ret->timeout_ms,
                            err);
        return r;
}

json_t *wire_pty_encode(const struct wire_pty *x)
{
        json_t *j = json_object();

        if (!j || put(j, "sessionId", json_string(x->session ? x->session : ""), x->session) < 0 ||
            put(j, "cols", json_integer(x->cols), true) < 0 ||
            put(j, "rows", json_integer(x->rows), true) < 0 ||
            put(j, "baseEnv", json_incref(x->base_env), x->base_env) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

int wire_pty_decode(json_t *j, struct wire_pty *ret, struct cella_error *err)
{
        int64_t cols = 0, rows = 0;
        int r;

        memset(ret, 0, sizeof(*ret));
        r = integer(j, "cols", true, 1, CELLA_PTY_MAX_DIM, &cols, err);
        if (r == 0)
                r = integer(j, "rows", true, 1, CELLA_PTY_MAX_DIM, &rows, err);
        if (r == 0)
                r = opt_id(j, "sessionId", &ret->session, err);
        if (r == 0)
                r = opt_object(j, "baseEnv", &ret->base_env, err);
        ret->cols = (unsigned)cols;
        ret->rows = (unsigned)rows;
        return r;
}
