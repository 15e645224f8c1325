/* Frame -> typed request for the agent; see request.h. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "agent/request.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/name.h"
#include "common/path.h"
#include "common/validate.h"
#include "common/wire.h"

bool agent_request_opens_stream(uint8_t type)
{
        return type == FRAME_EXEC || type == FRAME_FILE_READ || type == FRAME_FILE_WRITE ||
               type == FRAME_FILE_OP || type == FRAME_SESSION || type == FRAME_PROC ||
               type == FRAME_WATCH || type == FRAME_CODE || type == FRAME_PTY;
}

void agent_request_done(struct agent_request *r)
{
        if (!r)
                return;
        free(r->command);
        free(r->cwd);
        agent_env_free(r->env, r->n_env);
        agent_env_free(r->base_env, r->n_base_env);
        agent_env_free(r->include, r->n_include);
        agent_env_free(r->exclude, r->n_exclude);
        free(r->path);
        free(r->to);
        free(r->session);
        json_decref(r->body);
        r->command = r->cwd = r->path = r->to = r->session = NULL;
        r->env = r->base_env = NULL;
        r->n_env = r->n_base_env = 0;
        r->include = r->exclude = NULL;
        r->n_include = r->n_exclude = 0;
        r->body = NULL;
}

void agent_env_free(char **env, size_t n)
{
        for (size_t i = 0; i < n; i++)
                free(env[i]);
        free(env);
}

bool agent_id_is_valid(const char *s)
{
        return cella_id_is_valid(s);
}

int agent_decode_id(json_t *v, const char *field, char **ret, struct cella_error *err)
{
        int k = agent_decode_string(v, field, CELLA_ID_MAX, true, ret, err);

        if (k < 0)
                return k;
        if (!agent_id_is_valid(*ret)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "'%s' must be 1..%d of [A-Za-z0-9_.-]", field, CELLA_ID_MAX);
                return -EINVAL;
        }
        return 0;
}

/* A JSON string without NUL bytes, at most max bytes, copied into *ret. */
int agent_decode_string(json_t *v, const char *field, size_t max, bool nonempty, char **ret,
                        struct cella_error *err)
{
        const char *s;
        size_t n;

        if (!json_is_string(v)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' must be a string", field);
                return -EINVAL;
        }
        s = json_string_value(v);
        n = json_string_length(v);
        if (strlen(s) != n) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' contains a NUL byte", field);
                return -EINVAL;
        }
        if (nonempty && n == 0) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' must not be empty", field);
                return -EINVAL;
        }
        if (n > max) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' is longer than %zu bytes",
                                field, max);
                return -EINVAL;
        }
        *ret = strndup(s, n);
        if (!*ret) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        return 0;
}

/* An absolute path, normalised (common/path.h). */
int agent_decode_path(json_t *v, const char *field, char **ret, struct cella_error *err)
{
        char out[CELLA_PATH_MAX + 1];
        const char *s;
        size_t n;
        int r;

        if (!json_is_string(v)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' must be a string", field);
                return -EINVAL;
        }
        s = json_string_value(v);
        n = json_string_length(v);
        if (n == 0 || s[0] != '/') {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' must be an absolute path",
                                field);
                return -EINVAL;
        }
        r = sandbox_path_normalize(s, n, out, sizeof(out), err);
        if (r < 0)
                return -EINVAL;
        *ret = strndup(out, (size_t)r);
        if (!*ret) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        return 0;
}

int agent_decode_env(json_t *env, const char *field, char ***ret, size_t *ret_n,
                     struct cella_error *err)
{
        const char *key;
        json_t *val;
        char **out;
        size_t n, count = 0;

        *ret = NULL;
        *ret_n = 0;
        if (!env || json_is_null(env))
                return 0;
        if (!json_is_object(env)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' must be an object", field);
                return -EINVAL;
        }
        n = json_object_size(env);
        if (n > CELLA_EXEC_MAX_ENV) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'%s' has more than %d variables",
                                field, CELLA_EXEC_MAX_ENV);
                return -EINVAL;
        }
        if (n == 0)
                return 0;
        out = calloc(n, sizeof(char *));
        if (!out) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        json_object_foreach(env, key, val)
        {
                const char *s;
                size_t klen = strlen(key), vlen;
                char *kv;

                if (!env_name_is_valid(key)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "%s key '%.64s' is not an identifier", field, key);
                        goto fail;
                }
                if (!json_is_string(val)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "%s value of '%.64s' must be a string", field, key);
                        goto fail;
                }
                s = json_string_value(val);
                vlen = json_string_length(val);
                if (strlen(s) != vlen) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "%s value of '%.64s' contains a NUL byte", field, key);
                        goto fail;
                }
                kv = malloc(klen + 1 + vlen + 1);
                if (!kv) {
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                        goto fail;
                }
                memcpy(kv, key, klen);
                kv[klen] = '=';
                memcpy(kv + klen + 1, s, vlen + 1);
                out[count++] = kv;
        }
        *ret = out;
        *ret_n = count;
        return 0;
fail:
        agent_env_free(out, count);
        return -EINVAL;
}

/* A string the wire decoder bounded, copied. */
static int dup_string(const char *s, char **ret, struct cella_error *err)
{
        *ret = strdup(s);
        if (!*ret) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        return 0;
}

/* EXEC (common/wire.h): cellad validated it; here it is bounded and converted. */
static int decode_exec(json_t *j, struct agent_request *r, struct cella_error *err)
{
        struct wire_exec x;
        int k;

        k = wire_exec_decode(j, &x, err);
        if (k < 0)
                return k;
        k = dup_string(x.command, &r->command, err);
        if (k < 0)
                return k;
        r->cwd_given = x.cwd != NULL;
        if (x.cwd)
                k = agent_decode_path(json_object_get(j, "cwd"), "cwd", &r->cwd, err);
        else
                k = dup_string(CELLA_WORKSPACE, &r->cwd, err);
        if (k < 0)
                return k;
        k = agent_decode_env(x.env, "env", &r->env, &r->n_env, err);
        if (k < 0)
                return k;
        k = agent_decode_env(x.base_env, "baseEnv", &r->base_env, &r->n_base_env, err);
        if (k < 0)
                return k;
        if (x.session) {
                k = dup_string(x.session, &r->session, err);
                if (k < 0)
                        return k;
        }
        r->timeout_ms = x.timeout_ms;
        return 0;
}

/* FILE_READ, FILE_WRITE, FILE_OP (common/wire.h), the paths copied. */
static int decode_file(uint8_t type, json_t *j, struct agent_request *r, struct cella_error *err)
{
        char path[CELLA_PATH_MAX + 1], to[CELLA_PATH_MAX + 1];
        struct wire_file x;
        int k;

        k = wire_file_decode(type, j, &x, path, to, err);
        if (k < 0)
                return k;
        r->op = (enum agent_file_op)x.op;
        r->mode = x.mode;
        r->recursive = x.recursive;
        r->include_hidden = x.include_hidden;
        k = dup_string(x.path, &r->path, err);
        if (k == 0 && x.to)
                k = dup_string(x.to, &r->to, err);
        return k;
}

/* The globs of v (an array wire_watch_decode checked, or NULL: none) copied. */
static int copy_globs(json_t *v, const char *field, char ***ret, size_t *ret_n,
                      struct cella_error *err)
{
        size_t i, n = json_array_size(v);

        if (!v)
                return 0;
        *ret = calloc(n + 1, sizeof(char *));
        if (!*ret) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        for (i = 0; i < n; i++) {
                int k = agent_decode_string(json_array_get(v, i), field, CELLA_WATCH_PATTERN_MAX,
                                            true, &(*ret)[i], err);

                if (k < 0)
                        return k;
                (*ret_n)++;
        }
        return 0;
}

/* WATCH (common/wire.h), the path normalised and the globs copied. */
static int decode_watch(json_t *j, struct agent_request *r, struct cella_error *err)
{
        struct wire_watch x;
        int k;

        k = wire_watch_decode(j, &x, err);
        if (k < 0)
                return k;
        k = agent_decode_path(json_object_get(j, "path"), "path", &r->path, err);
        if (k < 0)
                return k;
        r->recursive = x.recursive;
        k = copy_globs(x.include, "include", &r->include, &r->n_include, err);
        if (k < 0)
                return k;
        r->exclude_given = x.exclude != NULL;
        return copy_globs(x.exclude, "exclude", &r->exclude, &r->n_exclude, err);
}

/* PTY (common/wire.h); the same frame on an open stream is a resize, of which only cols
 * and rows count. */
static int decode_pty(json_t *j, struct agent_request *r, struct cella_error *err)
{
        struct wire_pty x;
        int k;

        k = wire_pty_decode(j, &x, err);
        if (k < 0)
                return k;
        r->cols = x.cols;
        r->rows = x.rows;
        r->session_given = x.session != NULL;
        k = dup_string(x.session ? x.session : "default", &r->session, err);
        if (k < 0)
                return k;
        return agent_decode_env(x.base_env, "baseEnv", &r->base_env, &r->n_base_env, err);
}

static int decode_json(const struct frame *f, struct agent_request *r, struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_error_t je;

        j = json_loadb((const char *)f->payload, f->len, JSON_REJECT_DUPLICATES, &je);
        if (!j) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "malformed JSON in %s: %s",
                                frame_type_name(f->type), je.text);
                return -EINVAL;
        }
        if (!json_is_object(j)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "%s payload must be an object",
                                frame_type_name(f->type));
                return -EINVAL;
        }
        switch (f->type) {
        case FRAME_EXEC:
                return decode_exec(j, r, err);
        case FRAME_FILE_READ:
        case FRAME_FILE_WRITE:
        case FRAME_FILE_OP:
                return decode_file(f->type, j, r, err);
        case FRAME_SESSION:
        case FRAME_PROC:
        case FRAME_CODE:
                r->body = TAKE_PTR(j);
                return 0;
        case FRAME_WATCH:
                return decode_watch(j, r, err);
        default: /* PTY, the last of the types that agent_request_decode sends here */
                return decode_pty(j, r, err);
        }
}

int agent_request_decode(const struct frame *f, struct agent_request *ret, struct cella_error *err)
{
        memset(ret, 0, sizeof(*ret));
        ret->type = f->type;
        ret->stream = f->stream;
        ret->mode = -1;

        switch (f->type) {
        case FRAME_PING:
        case FRAME_PONG:
        case FRAME_CHECKPOINT:
                if (f->stream != 0)
                        goto proto;
                ret->data = f->payload;
                ret->len = f->len;
                return 0;
        case FRAME_EXEC:
        case FRAME_FILE_READ:
        case FRAME_FILE_WRITE:
        case FRAME_FILE_OP:
        case FRAME_SESSION:
        case FRAME_PROC:
        case FRAME_WATCH:
        case FRAME_CODE:
        case FRAME_PTY:
                if (f->stream == 0)
                        goto proto;
                return decode_json(f, ret, err);
        case FRAME_WINDOW:
                if (f->stream == 0 || frame_window_unpack(f, &ret->credit) < 0)
                        goto proto;
                return 0;
        case FRAME_DATA:
                if (f->stream == 0)
                        goto proto;
                ret->data = f->payload;
                ret->len = f->len;
                return 0;
        case FRAME_END:
        case FRAME_CANCEL:
                if (f->stream == 0 || f->len != 0)
                        goto proto;
                return 0;
        default:
                break;
        }
proto:
        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "unexpected %s frame on stream %u",
                        frame_type_name(f->type), f->stream);
        return -EPROTO;
}
