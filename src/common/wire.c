/* One encoder and one decoder per agent request body; see wire.h. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/json-path.h"
#include "common/limits.h"
#include "common/name.h"
#include "common/path.h"
#include "common/proto.h"
#include "common/signal.h"
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

/* j, or NULL (j dropped) when building it failed. */
static json_t *built(json_t *j, bool failed)
{
        if (failed) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* The index of j's "op" among names[n] (compared on its whole length), or -EINVAL with err
 * set ("unknown <what> operation"). */
static int op_of(json_t *j, const char *const *names, size_t n, const char *what,
                 struct cella_error *err)
{
        json_t *v = json_object_get(j, "op");

        if (!json_is_string(v))
                return invalid(err, "op", "must be a string");
        for (size_t i = 0; i < n; i++)
                if (strlen(names[i]) == json_string_length(v) &&
                    strcmp(json_string_value(v), names[i]) == 0)
                        return (int)i;
        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "unknown %s operation '%.32s'", what,
                        json_string_value(v));
        return -EINVAL;
}

/* A string of min..max bytes without NUL; absent (or null) is NULL, or an error when
 * required. */
static int text(json_t *j, const char *field, bool required, size_t min, size_t max,
                const char **ret, struct cella_error *err)
{
        json_t *v = member(j, field);

        *ret = NULL;
        if (!v && !required)
                return 0;
        if (!json_is_string(v) || json_string_length(v) < min || json_string_length(v) > max ||
            strlen(json_string_value(v)) != json_string_length(v)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'%s' must be a string of %zu..%zu bytes without NUL", field, min,
                                max);
                return -EINVAL;
        }
        *ret = json_string_value(v);
        return 0;
}

/* An optional boolean (null: absent, false). */
static int opt_bool(json_t *j, const char *field, bool *ret, struct cella_error *err)
{
        json_t *v = member(j, field);

        if (v && !json_is_boolean(v))
                return invalid(err, field, "must be a boolean");
        *ret = json_is_true(v);
        return 0;
}

json_t *wire_exec_encode(const struct wire_exec *x)
{
        json_t *j = json_object();

        return built(j, !j || put(j, "command", json_string(x->command), true) < 0 ||
                                put(j, "cwd", json_string(x->cwd ? x->cwd : ""), x->cwd) < 0 ||
                                put(j, "env", json_incref(x->env), x->env) < 0 ||
                                put(j, "baseEnv", json_incref(x->base_env), x->base_env) < 0 ||
                                put(j, "session", json_string(x->session ? x->session : ""),
                                    x->session) < 0 ||
                                put(j, "timeoutMs", json_integer(x->timeout_ms), true) < 0);
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

        return built(j, !j ||
                                put(j, "sessionId", json_string(x->session ? x->session : ""),
                                    x->session) < 0 ||
                                put(j, "cols", json_integer(x->cols), true) < 0 ||
                                put(j, "rows", json_integer(x->rows), true) < 0 ||
                                put(j, "baseEnv", json_incref(x->base_env), x->base_env) < 0);
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

static const char *const file_ops[] = {
        [WIRE_FILE_STAT] = "stat",   [WIRE_FILE_EXISTS] = "exists", [WIRE_FILE_DELETE] = "delete",
        [WIRE_FILE_MKDIR] = "mkdir", [WIRE_FILE_MOVE] = "move",     [WIRE_FILE_LIST] = "list",
};

json_t *wire_file_encode(uint8_t type, const struct wire_file *x)
{
        bool move = type == FRAME_FILE_OP && x->op == WIRE_FILE_MOVE;
        bool rec = type == FRAME_FILE_OP && (x->op == WIRE_FILE_MKDIR ||
                                             x->op == WIRE_FILE_DELETE || x->op == WIRE_FILE_LIST);
        json_t *j = json_object();

        if (type == FRAME_FILE_OP && (unsigned)x->op >= ARRAY_SIZE(file_ops)) {
                json_decref(j);
                return NULL;
        }
        if (!j ||
            put(j, "op", json_string(type == FRAME_FILE_OP ? file_ops[x->op] : ""),
                type == FRAME_FILE_OP) < 0 ||
            put(j, "mode", json_integer(x->mode), type == FRAME_FILE_WRITE && x->mode >= 0) < 0 ||
            put(j, "recursive", json_boolean(x->recursive), rec) < 0 ||
            put(j, "includeHidden", json_boolean(x->include_hidden),
                type == FRAME_FILE_OP && x->op == WIRE_FILE_LIST) < 0)
                goto oom;
        j = json_set_path(j, move ? "from" : "path", x->path);
        if (j && move)
                j = json_set_path(j, "to", x->to);
        return j;
oom:
        json_decref(j);
        return NULL;
}

/* The path in j's field, or, when j has field + "Base64" instead, the path whose raw bytes
 * that is; absolute and normalised into out. */
static int get_path(json_t *j, const char *field, char out[CELLA_PATH_MAX + 1],
                    struct cella_error *err)
{
        char key[32];
        json_t *b, *v;

        snprintf(key, sizeof(key), "%sBase64", field);
        b = json_object_get(j, key);
        if (b) {
                if (!json_is_string(b))
                        return invalid(err, key, "must be a string");
                /* a relative one would land in /workspace: cellad sends absolute ones */
                return sandbox_path_decode(json_string_value(b), json_string_length(b), true, out,
                                           CELLA_PATH_MAX + 1, err) < 0
                               ? -EINVAL
                               : 0;
        }
        v = json_object_get(j, field);
        if (!json_is_string(v))
                return invalid(err, field, "must be a string");
        if (json_string_length(v) == 0 || json_string_value(v)[0] != '/')
                return invalid(err, field, "must be an absolute path");
        return sandbox_path_normalize(json_string_value(v), json_string_length(v), out,
                                      CELLA_PATH_MAX + 1, err) < 0
                       ? -EINVAL
                       : 0;
}

static int get_bool(json_t *j, const char *field, bool *ret, struct cella_error *err)
{
        json_t *v = json_object_get(j, field);

        if (v && !json_is_boolean(v))
                return invalid(err, field, "must be a boolean");
        *ret = json_is_true(v);
        return 0;
}

int wire_file_decode(uint8_t type, json_t *j, struct wire_file *ret, char path[CELLA_PATH_MAX + 1],
                     char to[CELLA_PATH_MAX + 1], struct cella_error *err)
{
        json_t *v;

        memset(ret, 0, sizeof(*ret));
        ret->mode = -1;
        if (type == FRAME_FILE_WRITE) {
                v = member(j, "mode");
                if (v && (!json_is_integer(v) || json_integer_value(v) < 0 ||
                          json_integer_value(v) > 07777)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "'mode' must be an integer in 0..07777");
                        return -EINVAL;
                }
                ret->mode = v ? (int)json_integer_value(v) : -1;
        }
        if (type == FRAME_FILE_OP) {
                int op = op_of(j, file_ops, ARRAY_SIZE(file_ops), "file", err);

                if (op < 0)
                        return op;
                ret->op = (enum wire_file_op)op;
                if (ret->op == WIRE_FILE_MOVE) {
                        if (get_path(j, "from", path, err) < 0 || get_path(j, "to", to, err) < 0)
                                return -EINVAL;
                        ret->path = path;
                        ret->to = to;
                        return 0;
                }
        }
        if (get_path(j, "path", path, err) < 0)
                return -EINVAL;
        ret->path = path;
        if (type == FRAME_FILE_OP && (get_bool(j, "recursive", &ret->recursive, err) < 0 ||
                                      get_bool(j, "includeHidden", &ret->include_hidden, err) < 0))
                return -EINVAL;
        return 0;
}

static const char *const session_ops[] = {
        [WIRE_SESSION_CREATE] = "create",
        [WIRE_SESSION_DELETE] = "delete",
        [WIRE_SESSION_LIST] = "list",
        [WIRE_SESSION_SETENV] = "setenv",
};

/* The members in the order cellad has always written them. */
json_t *wire_session_encode(const struct wire_session *x)
{
        bool create = x->op == WIRE_SESSION_CREATE;
        bool setenv = x->op == WIRE_SESSION_SETENV;
        json_t *j;

        if ((unsigned)x->op >= ARRAY_SIZE(session_ops) || (setenv && !x->env))
                return NULL;
        j = json_object();
        return built(
                j, !j || put(j, "op", json_string(session_ops[x->op]), true) < 0 ||
                           put(j, "baseEnv", x->base_env ? json_incref(x->base_env) : json_object(),
                               create) < 0 ||
                           put(j, "commandTimeoutMs", json_integer(x->timeout_ms), create) < 0 ||
                           put(j, "env", json_incref(x->env), setenv) < 0 ||
                           put(j, "id", json_string(x->id ? x->id : ""),
                               x->id && x->op != WIRE_SESSION_LIST) < 0 ||
                           put(j, "cwd", json_string(x->cwd ? x->cwd : ""), create && x->cwd) < 0 ||
                           put(j, "env", json_incref(x->env), create && x->env) < 0);
}

int wire_session_decode(json_t *j, struct wire_session *ret, struct cella_error *err)
{
        json_t *v;
        int r;

        memset(ret, 0, sizeof(*ret));
        r = op_of(j, session_ops, ARRAY_SIZE(session_ops), "session", err);
        if (r < 0)
                return r;
        ret->op = (enum wire_session_op)r;
        if (ret->op == WIRE_SESSION_LIST)
                return 0;
        r = opt_id(j, "id", &ret->id, err);
        if (r == 0 && ret->op == WIRE_SESSION_DELETE && !ret->id)
                return invalid(err, "id", "is required");
        if (r < 0 || ret->op == WIRE_SESSION_DELETE)
                return r;
        r = opt_object(j, "env", &ret->env, err);
        if (r == 0 && ret->op == WIRE_SESSION_SETENV && !ret->env)
                return invalid(err, "env", "must be an object");
        if (r < 0 || ret->op == WIRE_SESSION_SETENV)
                return r;
        v = member(j, "cwd");
        if (v && !json_is_string(v))
                return invalid(err, "cwd", "must be a string");
        ret->cwd = json_string_value(v);
        r = opt_object(j, "baseEnv", &ret->base_env, err);
        if (r == 0)
                r = integer(j, "commandTimeoutMs", false, 0, CELLA_EXEC_MAX_TIMEOUT_MS,
                            &ret->timeout_ms, err);
        return r;
}

json_t *wire_watch_encode(const struct wire_watch *x)
{
        json_t *j = json_object();

        return built(j, !j || put(j, "path", json_string(x->path), true) < 0 ||
                                put(j, "recursive", json_boolean(x->recursive), true) < 0 ||
                                put(j, "include", json_incref(x->include), x->include) < 0 ||
                                put(j, "exclude", json_incref(x->exclude), x->exclude) < 0);
}

/* An optional array of globs, each a string of 1..CELLA_WATCH_PATTERN_MAX bytes. */
static int opt_globs(json_t *j, const char *field, json_t **ret, struct cella_error *err)
{
        json_t *v = member(j, field), *g;
        size_t i;

        *ret = NULL;
        if (!v)
                return 0;
        if (!json_is_array(v))
                return invalid(err, field, "must be an array");
        if (json_array_size(v) > CELLA_WATCH_MAX_PATTERNS) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' has more than %d patterns",
                                field, CELLA_WATCH_MAX_PATTERNS);
                return -EINVAL;
        }
        json_array_foreach(v, i, g)
        {
                if (!json_is_string(g) || json_string_length(g) == 0 ||
                    json_string_length(g) > CELLA_WATCH_PATTERN_MAX ||
                    strlen(json_string_value(g)) != json_string_length(g)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "'%s' must hold strings of 1..%d bytes without NUL", field,
                                        CELLA_WATCH_PATTERN_MAX);
                        return -EINVAL;
                }
        }
        *ret = v;
        return 0;
}

int wire_watch_decode(json_t *j, struct wire_watch *ret, struct cella_error *err)
{
        json_t *v = json_object_get(j, "path");

        memset(ret, 0, sizeof(*ret));
        if (!json_is_string(v))
                return invalid(err, "path", "must be a string");
        ret->path = json_string_value(v);
        ret->recursive = true;
        v = member(j, "recursive");
        if (v && !json_is_boolean(v))
                return invalid(err, "recursive", "must be a boolean");
        if (v)
                ret->recursive = json_is_true(v);
        if (opt_globs(j, "include", &ret->include, err) < 0 ||
            opt_globs(j, "exclude", &ret->exclude, err) < 0)
                return -EINVAL;
        if (json_array_size(ret->include) + json_array_size(ret->exclude) >
            CELLA_WATCH_MAX_PATTERNS) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "more than %d include and exclude patterns",
                                CELLA_WATCH_MAX_PATTERNS);
                return -EINVAL;
        }
        return 0;
}

static const char *const proc_ops[] = {
        [WIRE_PROC_START] = "start",
        [WIRE_PROC_LIST] = "list",
        [WIRE_PROC_GET] = "get",
        [WIRE_PROC_KILL] = "kill",
        [WIRE_PROC_KILLALL] = "killall",
        [WIRE_PROC_LOGS] = "logs",
        [WIRE_PROC_STREAM] = "stream",
        [WIRE_PROC_WAIT_LOG] = "waitLog",
        [WIRE_PROC_WAIT_PORT] = "waitPort",
        [WIRE_PROC_WAIT_EXIT] = "waitExit",
};

static bool proc_is_wait(enum wire_proc_op op)
{
        return op == WIRE_PROC_WAIT_LOG || op == WIRE_PROC_WAIT_PORT || op == WIRE_PROC_WAIT_EXIT;
}

/* The members in the order cellad has always written them (a process id from the route's
 * path last, after the body's members); those at their defaults are left out. */
json_t *wire_proc_encode(const struct wire_proc *x)
{
        bool start = x->op == WIRE_PROC_START, port = x->op == WIRE_PROC_WAIT_PORT;
        bool named = x->id && !start && x->op != WIRE_PROC_LIST && x->op != WIRE_PROC_KILLALL;
        json_t *j;

        if ((unsigned)x->op >= ARRAY_SIZE(proc_ops) || (start && !x->command) ||
            (x->op == WIRE_PROC_WAIT_LOG && !x->pattern))
                return NULL;
        j = json_object();
        return built(
                j,
                !j || put(j, "op", json_string(proc_ops[x->op]), true) < 0 ||
                        put(j, "command", json_string(start ? x->command : ""), start) < 0 ||
                        put(j, "id", json_string(x->id ? x->id : ""), start && x->id) < 0 ||
                        put(j, "session", json_string(x->session ? x->session : ""),
                            start && x->session) < 0 ||
                        put(j, "env", json_incref(x->env), start && x->env) < 0 ||
                        put(j, "cwd", json_string(x->cwd ? x->cwd : ""), start && x->cwd) < 0 ||
                        put(j, "baseEnv", json_incref(x->base_env), start && x->base_env) < 0 ||
                        put(j, "signal", json_integer(x->signal),
                            (x->op == WIRE_PROC_KILL || x->op == WIRE_PROC_KILLALL) && x->signal) <
                                0 ||
                        put(j, "pattern", json_string(x->pattern ? x->pattern : ""),
                            x->op == WIRE_PROC_WAIT_LOG) < 0 ||
                        put(j, "regex", json_true(), x->op == WIRE_PROC_WAIT_LOG && x->regex) < 0 ||
                        put(j, "port", json_integer(x->port), port) < 0 ||
                        put(j, "mode", json_string("http"), port && x->http) < 0 ||
                        put(j, "path", json_string(x->path ? x->path : ""), port && x->path) < 0 ||
                        put(j, "statusMin", json_integer(x->status_min), port && x->status_min) <
                                0 ||
                        put(j, "statusMax", json_integer(x->status_max), port && x->status_max) <
                                0 ||
                        put(j, "intervalMs", json_integer(x->interval_ms), port && x->interval_ms) <
                                0 ||
                        put(j, "timeoutMs", json_integer(x->timeout_ms),
                            proc_is_wait(x->op) && x->timeout_ms) < 0 ||
                        put(j, "id", json_string(x->id ? x->id : ""), named) < 0);
}

/* The process a request names: an id, or a pid (a number, kept as its digits in x->pid,
 * or a string of digits); a started process's id is never only digits. */
static int proc_id(json_t *j, struct wire_proc *x, struct cella_error *err)
{
        bool start = x->op == WIRE_PROC_START;
        json_t *v = member(j, "id");
        int r;

        if (!v)
                return start ? 0 : invalid(err, "id", "is required");
        if (json_is_integer(v) && !start) {
                if (json_integer_value(v) < 1 || json_integer_value(v) > INT32_MAX) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "'id' as a pid must be in 1..%d", INT32_MAX);
                        return -EINVAL;
                }
                snprintf(x->pid, sizeof(x->pid), "%lld", (long long)json_integer_value(v));
                x->id = x->pid;
                return 0;
        }
        r = opt_id(j, "id", &x->id, err);
        if (r == 0 && start && strspn(x->id, "0123456789") == strlen(x->id))
                return invalid(err, "id", "must not be only digits (those name pids)");
        return r;
}

static int proc_signal(json_t *j, int *ret, struct cella_error *err)
{
        json_t *v = member(j, "signal");
        int sig = -1;

        if (!v)
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64)
                sig = (int)json_integer_value(v);
        else if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
                sig = cella_signal_parse(json_string_value(v));
        if (sig < 1)
                return invalid(err, "signal",
                               "must be a signal name (SIGTERM, TERM) or a number in 1..64");
        *ret = sig;
        return 0;
}

static int proc_start(json_t *j, struct wire_proc *x, struct cella_error *err)
{
        json_t *v = json_object_get(j, "command");

        if (!json_is_string(v) || !command_is_valid(json_string_value(v), json_string_length(v))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'command' must be a string of 1..%d bytes without NUL",
                                CELLA_EXEC_MAX_COMMAND);
                return -EINVAL;
        }
        x->command = json_string_value(v);
        v = member(j, "cwd");
        if (v && !json_is_string(v))
                return invalid(err, "cwd", "must be a string");
        x->cwd = json_string_value(v);
        if (opt_id(j, "session", &x->session, err) < 0 || opt_object(j, "env", &x->env, err) < 0 ||
            opt_object(j, "baseEnv", &x->base_env, err) < 0)
                return -EINVAL;
        return 0;
}

static int proc_wait_port(json_t *j, struct wire_proc *x, struct cella_error *err)
{
        int64_t port = 0, smin = 200, smax = 399;
        json_t *v;

        if (integer(j, "port", true, 1, 65535, &port, err) < 0)
                return -EINVAL;
        x->port = (int)port;
        v = member(j, "mode");
        if (v && (!json_is_string(v) ||
                  (strcmp(json_string_value(v), "tcp") != 0 &&
                   strcmp(json_string_value(v), "http") != 0) ||
                  strlen(json_string_value(v)) != json_string_length(v)))
                return invalid(err, "mode", "must be \"tcp\" or \"http\"");
        x->http = v && strcmp(json_string_value(v), "http") == 0;
        v = member(j, "path");
        if (v && (!json_is_string(v) ||
                  !http_path_is_valid(json_string_value(v), json_string_length(v)))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'path' must start with '/' and be printable ASCII without "
                                "spaces, at most %d bytes",
                                CELLA_PROC_MAX_HTTP_PATH);
                return -EINVAL;
        }
        x->path = json_string_value(v);
        if (integer(j, "statusMin", false, 100, 599, &smin, err) < 0 ||
            integer(j, "statusMax", false, 100, 599, &smax, err) < 0)
                return -EINVAL;
        if (smin > smax) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'statusMin' must not be above 'statusMax' (%lld > %lld)",
                                (long long)smin, (long long)smax);
                return -EINVAL;
        }
        x->status_min = (int)smin;
        x->status_max = (int)smax;
        x->interval_ms = CELLA_PROC_DEFAULT_INTERVAL_MS;
        return integer(j, "intervalMs", false, CELLA_PROC_MIN_INTERVAL_MS,
                       CELLA_PROC_MAX_INTERVAL_MS, &x->interval_ms, err);
}

int wire_proc_decode(json_t *j, struct wire_proc *ret, struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = op_of(j, proc_ops, ARRAY_SIZE(proc_ops), "process", err);
        if (r < 0)
                return r;
        ret->op = (enum wire_proc_op)r;
        if (ret->op == WIRE_PROC_LIST)
                return 0;
        if (ret->op == WIRE_PROC_KILLALL)
                return proc_signal(j, &ret->signal, err);
        r = proc_id(j, ret, err);
        if (r == 0 && ret->op == WIRE_PROC_START)
                r = proc_start(j, ret, err);
        if (r < 0 || ret->op == WIRE_PROC_START)
                return r;
        if (ret->op == WIRE_PROC_KILL)
                return proc_signal(j, &ret->signal, err);
        if (!proc_is_wait(ret->op))
                return 0;
        r = integer(j, "timeoutMs", false, 0, CELLA_EXEC_MAX_TIMEOUT_MS, &ret->timeout_ms, err);
        if (r == 0 && ret->op == WIRE_PROC_WAIT_LOG)
                r = text(j, "pattern", true, 1, CELLA_PROC_MAX_PATTERN, &ret->pattern, err);
        if (r == 0 && ret->op == WIRE_PROC_WAIT_LOG)
                r = opt_bool(j, "regex", &ret->regex, err);
        if (r == 0 && ret->op == WIRE_PROC_WAIT_PORT)
                r = proc_wait_port(j, ret, err);
        return r;
}

static const char *const code_ops[] = {
        [WIRE_CODE_CREATE] = "create",
        [WIRE_CODE_DELETE] = "delete",
        [WIRE_CODE_LIST] = "list",
        [WIRE_CODE_RUN] = "run",
};

const char *const wire_code_langs[] = {
        [WIRE_CODE_PYTHON] = "python",
        [WIRE_CODE_JAVASCRIPT] = "javascript",
        [WIRE_CODE_TYPESCRIPT] = "typescript",
        NULL,
};

/* The members in the order cellad has always written them; a create always names its
 * language, a run only the one it was given. */
json_t *wire_code_encode(const struct wire_code *x)
{
        bool create = x->op == WIRE_CODE_CREATE, run = x->op == WIRE_CODE_RUN;
        bool lang = create || (run && x->language_given);
        json_t *j;

        if ((unsigned)x->op >= ARRAY_SIZE(code_ops) ||
            (lang && (unsigned)x->language >= ARRAY_SIZE(wire_code_langs) - 1) ||
            (run && !x->code) || (x->op == WIRE_CODE_DELETE && !x->id))
                return NULL;
        j = json_object();
        return built(
                j, !j || put(j, "op", json_string(code_ops[x->op]), true) < 0 ||
                           put(j, "code", json_string(run ? x->code : ""), run) < 0 ||
                           put(j, "id", json_string(x->id ? x->id : ""),
                               (run || x->op == WIRE_CODE_DELETE) && x->id) < 0 ||
                           put(j, "language", json_string(wire_code_langs[lang ? x->language : 0]),
                               lang) < 0 ||
                           put(j, "cwd", json_string(x->cwd ? x->cwd : ""), create && x->cwd) < 0 ||
                           put(j, "env", json_incref(x->env), create && x->env) < 0 ||
                           put(j, "timeoutMs", json_integer(x->timeout_ms), run && x->timeout_ms) <
                                   0 ||
                           put(j, "baseEnv", json_incref(x->base_env),
                               (create || run) && x->base_env) < 0);
}

/* A language's name, compared on its whole length: 0 with *ret, or -EINVAL. */
static int code_lang(json_t *v, enum wire_code_lang *ret)
{
        for (size_t i = 0; json_is_string(v) && wire_code_langs[i]; i++)
                if (strlen(wire_code_langs[i]) == json_string_length(v) &&
                    strcmp(wire_code_langs[i], json_string_value(v)) == 0) {
                        *ret = (enum wire_code_lang)i;
                        return 0;
                }
        return -EINVAL;
}

int wire_code_decode(json_t *j, struct wire_code *ret, struct cella_error *err)
{
        json_t *v;
        int r;

        memset(ret, 0, sizeof(*ret));
        r = op_of(j, code_ops, ARRAY_SIZE(code_ops), "code", err);
        if (r < 0)
                return r;
        ret->op = (enum wire_code_op)r;
        if (ret->op == WIRE_CODE_LIST)
                return 0;
        if (ret->op != WIRE_CODE_CREATE && opt_id(j, "id", &ret->id, err) < 0)
                return -EINVAL;
        if (ret->op == WIRE_CODE_DELETE)
                return ret->id ? 0 : invalid(err, "id", "is required");
        v = member(j, "language");
        ret->language_given = v != NULL;
        if (v && code_lang(v, &ret->language) < 0)
                return invalid(err, "language", "must be python, javascript or typescript");
        if (opt_object(j, "baseEnv", &ret->base_env, err) < 0)
                return -EINVAL;
        if (ret->op == WIRE_CODE_CREATE) {
                v = member(j, "cwd");
                if (v && !json_is_string(v))
                        return invalid(err, "cwd", "must be a string");
                ret->cwd = json_string_value(v);
                return opt_object(j, "env", &ret->env, err);
        }
        if (text(j, "code", true, 0, CELLA_CODE_MAX_CODE, &ret->code, err) < 0)
                return -EINVAL;
        return integer(j, "timeoutMs", false, 0, CELLA_EXEC_MAX_TIMEOUT_MS, &ret->timeout_ms, err);
}
