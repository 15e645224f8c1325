/* Strict decoding of the API's JSON request bodies; see api-decode.h. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include "common/base64.h"
#include "common/git-url.h"
#include "common/json-cleanup.h"
#include "common/name.h"
#include "common/path.h"
#include "common/signal.h"
#include "common/validate.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-field.h"
#include "daemon/instance-type.h"
#include "daemon/sandbox-options.h"

int api_check_string_object(json_t *o, const char *what, size_t max, struct cella_error *err)
{
        const char *k;
        json_t *v;

        if (!json_is_object(o))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "%s must be an object",
                                       what),
                       -EINVAL;
        if (json_object_size(o) > max)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "%s has more than %zu entries", what, max),
                       -EINVAL;
        json_object_foreach(o, k, v)
        {
                if (k[0] == '\0' || strchr(k, '='))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "%s: invalid key '%.64s'", what, k),
                               -EINVAL;
                if (!json_is_string(v))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "%s: value of '%.64s' must be a string", what, k),
                               -EINVAL;
                if (field_has_nul(v))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "%s: value of '%.64s' contains a NUL byte", what, k),
                               -EINVAL;
        }
        /* keys: jansson keys are NUL-terminated; a \u0000 inside one makes it shorter than
         * its JSON text, which json_object_foreach cannot see; JSON_ALLOW_NUL does not
         * apply to keys (jansson refuses them), so nothing more to check. */
        return 0;
}

int api_parse_bool(const char *s, bool dflt, bool *ret)
{
        if (!s) {
                *ret = dflt;
                return 0;
        }
        if (strcmp(s, "true") == 0 || strcmp(s, "1") == 0) {
                *ret = true;
                return 0;
        }
        if (strcmp(s, "false") == 0 || strcmp(s, "0") == 0) {
                *ret = false;
                return 0;
        }
        return -1;
}

void api_put_sandbox_done(struct api_put_sandbox *p)
{
        free(p->image);
        free(p->instance_type);
        json_decref(p->env);
        json_decref(p->labels);
        free(p->network);
        free(p->sleep_mode);
        json_decref(p->network_allow);
        free(p->from_snapshot);
        memset(p, 0, sizeof(*p));
}

int api_parse_duration(json_t *v, int64_t *ret_ms, struct cella_error *err)
{
        static const int64_t max_ms = 30LL * 24 * 3600 * 1000;
        int64_t ms = -1;

        if (json_is_integer(v)) {
                json_int_t n = json_integer_value(v);
                if (n >= 1 && n <= max_ms / 1000)
                        ms = (int64_t)n * 1000;
        } else if (json_is_string(v)) {
                const char *s = json_string_value(v);
                size_t len = json_string_length(v), i = 0;
                int64_t n = 0, unit = 1000;

                while (i < len && s[i] >= '0' && s[i] <= '9' && n <= max_ms) {
                        n = n * 10 + (s[i] - '0');
                        i++;
                }
                if (i > 0 && i + 1 >= len) {
                        char u = i < len ? s[i] : 's';
                        unit = u == 's'   ? 1000
                               : u == 'm' ? 60000
                               : u == 'h' ? 3600000
                               : u == 'd' ? 86400000
                                          : 0;
                        if (unit && n >= 1 && n <= max_ms / unit)
                                ms = n * unit;
                }
        }
        if (ms < 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "sleepAfter must be seconds (a number) or a duration "
                                       "like \"30s\", \"10m\", \"2h\", from 1s to 30d");
        *ret_ms = ms;
        return 0;
}

/* An object of at most hi NUL-free strings (api_check_string_object); with msg, its keys
 * are environment variable names (msg: the key). */
static int chk_string_object(const struct field *f, json_t *v, json_t *body, void *dst,
                             struct cella_error *err)
{
        const char *k;
        json_t *x;

        (void)body;
        if (api_check_string_object(v, f->name, (size_t)f->hi, err) < 0)
                return -EINVAL;
        json_object_foreach(v, k, x)
        {
                if (f->msg && !env_name_is_valid(k))
                        return field_fail(f, err, k);
        }
        return field_put_json(f, dst, v);
}

/* ---- the checks of one field each ---- */

static int chk_image(const struct field *f, json_t *v, json_t *body, void *dst,
                     struct cella_error *err)
{
        (void)body;
        if (!json_is_string(v) || field_has_nul(v) || !image_name_is_valid(json_string_value(v)))
                return field_fail(f, err, CELLA_NAME_MAX);
        return field_put_string(f, dst, json_string_value(v));
}

static int chk_instance_type(const struct field *f, json_t *v, json_t *body, void *dst,
                             struct cella_error *err)
{
        (void)body;
        if (!json_is_string(v) || !instance_type_find(json_string_value(v)))
                return field_fail(f, err, instance_type_names());
        return field_put_string(f, dst, json_string_value(v));
}

static int chk_duration(const struct field *f, json_t *v, json_t *body, void *dst,
                        struct cella_error *err)
{
        (void)body;
        return api_parse_duration(v, FIELD_AT(dst, f, int64_t), err) < 0 ? -EINVAL : 0;
}

/* networkAllow: an array of at most CELLA_NETWORK_ALLOW_MAX "CIDR[:port]" strings, stored
 * in canonical form (sandbox-options.h). */
static int chk_network_allow(const struct field *f, json_t *v, json_t *body, void *dst,
                             struct cella_error *err)
{
        _cleanup_json_ json_t *canon = sandbox_options_network_allow(v, err);

        (void)body;
        if (!canon)
                return -EINVAL;
        return field_put_json(f, dst, canon);
}

/* The env route's vars: names to NUL-free strings (set) or null (unset). */
static int chk_vars(const struct field *f, json_t *v, json_t *body, void *dst,
                    struct cella_error *err)
{
        const char *k;
        json_t *x;

        (void)body;
        if (!json_is_object(v))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "vars must be an object"),
                       -EINVAL;
        if (json_object_size(v) > CELLA_EXEC_MAX_ENV)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "vars has more than %d entries", CELLA_EXEC_MAX_ENV),
                       -EINVAL;
        json_object_foreach(v, k, x)
        {
                if (!env_name_is_valid(k))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "vars: '%.64s' is not a valid variable name", k),
                               -EINVAL;
                if (!json_is_null(x) && (!json_is_string(x) || field_has_nul(x)))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "vars: '%.64s' must be a string (NUL-free) or null",
                                               k),
                               -EINVAL;
        }
        return field_put_json(f, dst, v);
}

/* A clone's targetDir: given (a string: msg), or the repository's name below /workspace;
 * never /. Runs after repoUrl's check (F_ALWAYS). */
static int chk_target_dir(const struct field *f, json_t *v, json_t *body, void *dst,
                          struct cella_error *err)
{
        struct api_git_checkout *p = dst;
        char name[CELLA_PATH_MAX + 1];
        struct cella_error e = {0};
        int n;

        if (v && field_chk_path(f, v, body, dst, err) < 0)
                return -EINVAL;
        if (!v) {
                n = git_url_repo_name(p->repo_url, name, sizeof(name));
                if (n < 0)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "repoUrl names no repository directory; give "
                                               "targetDir"),
                               -EINVAL;
                /* relative: below /workspace, within the path limits like any path */
                if (sandbox_path_normalize(name, (size_t)n, p->target_dir, sizeof(p->target_dir),
                                           &e) < 0)
                        return cella_error_set(err, e.code, "targetDir from repoUrl: %s", e.msg),
                               -EINVAL;
        }
        if (strcmp(p->target_dir, "/") == 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "targetDir must not be /"),
                       -EINVAL;
        return 0;
}

/* "utf-8" (also "utf8") or "base64" (*ret_base64); absent or null: utf-8. */
static int parse_encoding(json_t *enc, bool *ret_base64, struct cella_error *err)
{
        const char *s;

        *ret_base64 = false;
        if (!enc || json_is_null(enc))
                return 0;
        s = json_is_string(enc) ? json_string_value(enc) : "";
        if (strcmp(s, "utf-8") == 0 || strcmp(s, "utf8") == 0)
                return 0;
        if (strcmp(s, "base64") == 0) {
                *ret_base64 = true;
                return 0;
        }
        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                               "encoding must be \"utf-8\" or \"base64\""),
               -EINVAL;
}

static int chk_encoding(const struct field *f, json_t *v, json_t *body, void *dst,
                        struct cella_error *err)
{
        (void)body;
        return parse_encoding(v, FIELD_AT(dst, f, bool), err) < 0 ? -EINVAL : 0;
}

/* A file's content (a string: checked with the path), in the body's encoding, into the
 * struct buf at off. */
static int chk_content(const struct field *f, json_t *v, json_t *body, void *dst,
                       struct cella_error *err)
{
        struct buf *b = FIELD_AT(dst, f, struct buf);
        bool b64;
        int r;

        if (parse_encoding(json_object_get(body, "encoding"), &b64, err) < 0)
                return -EINVAL;
        if (!b64)
                return buf_append(b, json_string_value(v), json_string_length(v));
        r = base64_decode(b, json_string_value(v), json_string_length(v));
        if (r == -EINVAL)
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "content is not valid base64");
        return r < 0 ? r : 0;
}

static int chk_signal(const struct field *f, json_t *v, json_t *body, void *dst,
                      struct cella_error *err)
{
        int sig = -1;

        (void)body;
        if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64)
                sig = (int)json_integer_value(v);
        else if (json_is_string(v) && !field_has_nul(v))
                sig = cella_signal_parse(json_string_value(v));
        if (sig < 1)
                return field_fail(f, err);
        *FIELD_AT(dst, f, int) = sig;
        return 0;
}

/* waitPort's HTTP path (http_path_is_valid). msg: the limit. */
static int chk_http_path(const struct field *f, json_t *v, json_t *body, void *dst,
                         struct cella_error *err)
{
        (void)body;
        if (!json_is_string(v) || !http_path_is_valid(json_string_value(v), json_string_length(v)))
                return field_fail(f, err, CELLA_PROC_MAX_HTTP_PATH);
        return field_put_string(f, dst, json_string_value(v));
}

/* One of f->one_of, exactly, stored as its index (an int); f->has: a bool set. msg: none. */
static int chk_choice(const struct field *f, json_t *v, json_t *body, void *dst,
                      struct cella_error *err)
{
        (void)body;
        for (size_t i = 0; json_is_string(v) && f->one_of[i]; i++)
                if (strlen(f->one_of[i]) == json_string_length(v) &&
                    strcmp(f->one_of[i], json_string_value(v)) == 0) {
                        *FIELD_AT(dst, f, int) = (int)i;
                        if (f->has)
                                *(bool *)((char *)dst + f->has - 1) = true;
                        return 0;
                }
        return field_fail(f, err);
}

/* waitPort's status: a number or {min, max}, within lo..hi (dst: struct api_process). */
static int chk_status(const struct field *f, json_t *v, json_t *body, void *dst,
                      struct cella_error *err)
{
        json_int_t smin = 200, smax = 399;
        json_error_t je;

        (void)body;
        if (json_is_integer(v)) {
                smin = smax = json_integer_value(v);
        } else if (!json_is_object(v) || json_unpack_ex(v, &je, JSON_STRICT, "{s?I, s?I}", "min",
                                                        &smin, "max", &smax) < 0) {
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "status must be a number or {min, max}"),
                       -EINVAL;
        }
        if (smin < f->lo || smax > f->hi || smin > smax)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "status range must be within 100..599, min <= max"),
                       -EINVAL;
        ((struct api_process *)dst)->status_min = smin;
        ((struct api_process *)dst)->status_max = smax;
        return 0;
}

/* An array of at most CELLA_WATCH_MAX_PATTERNS non-empty NUL-free globs. */
static int chk_globs(const struct field *f, json_t *v, json_t *body, void *dst,
                     struct cella_error *err)
{
        size_t i;
        json_t *g;

        (void)body;
        if (!json_is_array(v))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "%s must be an array of strings", f->name),
                       -EINVAL;
        if (json_array_size(v) > CELLA_WATCH_MAX_PATTERNS)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "%s has more than %d patterns", f->name,
                                       CELLA_WATCH_MAX_PATTERNS),
                       -EINVAL;
        json_array_foreach(v, i, g)
        {
                if (!json_is_string(g) || field_has_nul(g) || json_string_length(g) == 0 ||
                    json_string_length(g) > CELLA_WATCH_PATTERN_MAX)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "%s[%zu] must be a glob of 1..%d bytes", f->name, i,
                                               CELLA_WATCH_PATTERN_MAX),
                               -EINVAL;
        }
        return field_put_json(f, dst, v);
}

static int chk_code(const struct field *f, json_t *v, json_t *body, void *dst,
                    struct cella_error *err)
{
        (void)body;
        if (!json_is_string(v) || field_has_nul(v))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "code must be a string without NUL characters"),
                       -EINVAL;
        if (json_string_length(v) > CELLA_CODE_MAX_CODE)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "code is longer than %d bytes", CELLA_CODE_MAX_CODE),
                       -EINVAL;
        return field_put_string(f, dst, json_string_value(v));
}

/* ---- the requests ---- */

#define ID_MSG "%s must be 1-%d characters of [A-Za-z0-9_.-]"
#define MS_MSG "%s must be milliseconds between %lld and %lld"
#define STRING_MSG "%s must be a string"
#define ENV_NAME_MSG "env key '%.64s' is not an identifier"
#define TIMEOUT(type)                                                              \
        {                                                                          \
                "timeout", "?o", field_chk_number, F_NULL_ABSENT | F_REAL_TRUNC,   \
                        .off = offsetof(type, timeout_ms), .msg = MS_MSG, .lo = 0, \
                        .hi = CELLA_EXEC_MAX_TIMEOUT_MS                            \
        }

static const char *const networks[] = {"none", "outbound", NULL};
static const char *const sleep_modes[] = {"files", "memory", NULL};
static const char *const port_modes[] = {"tcp", "http", NULL};

#define O(m) .off = offsetof(struct api_put_sandbox, m)
static const struct field put_sandbox_fields[] = {
        {"image", "?o", chk_image, 0, O(image),
         .msg = "image must be a name of [a-z0-9._-], 1-%d characters"},
        {"instanceType", "?o", chk_instance_type, 0, O(instance_type),
         .msg = "instanceType must be one of: %s"},
        {"env", "?o", chk_string_object, 0, O(env), .hi = CELLA_EXEC_MAX_ENV},
        {"labels", "?o", chk_string_object, 0, O(labels), .hi = CELLA_LABELS_MAX},
        {"normalizeId", "?b", field_chk_bool, 0, O(normalize_id)},
        {"sleepAfter", "?o", chk_duration, 0, O(sleep_after_ms)},
        {"sleepMode", "?o", field_chk_enum, 0, O(sleep_mode), .one_of = sleep_modes,
         .msg = "sleepMode must be \"files\" or \"memory\""},
        {"keepAlive", "?b", field_chk_bool, 0, O(keep_alive),
         .has = offsetof(struct api_put_sandbox, has_keep_alive) + 1},
        {"enableDefaultSession", "?b", field_chk_bool, 0, O(default_session),
         .has = offsetof(struct api_put_sandbox, has_default_session) + 1},
        {"network", "?o", field_chk_enum, 0, O(network), .one_of = networks,
         .msg = "network must be \"none\" or \"outbound\""},
        {"networkAllow", "?o", chk_network_allow, 0, O(network_allow)},
        {"fromSnapshot", "?o", chk_image, 0, O(from_snapshot),
         .msg = "fromSnapshot must be a snapshot id or name of [a-z0-9._-], 1-%d characters"},
};
#undef O

int api_decode_put_sandbox(const char *body, size_t len, struct api_put_sandbox *ret,
                           struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        if (len == 0)
                return 0; /* an empty body is all defaults */
        r = field_decode(body, len, put_sandbox_fields, ARRAY_SIZE(put_sandbox_fields), ret, err);
        if (r < 0)
                api_put_sandbox_done(ret);
        return r;
}

void api_env_done(struct api_env *p)
{
        json_decref(p->vars);
        free(p->session_id);
        memset(p, 0, sizeof(*p));
}

static const struct field env_fields[] = {
        {"sessionId", "?o", field_chk_id, F_NULL_ABSENT,
         .off = offsetof(struct api_env, session_id), .msg = ID_MSG},
        {"vars", ":o", chk_vars, 0, .off = offsetof(struct api_env, vars)},
};

int api_decode_env(const char *body, size_t len, struct api_env *ret, struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, env_fields, ARRAY_SIZE(env_fields), ret, err);
        if (r < 0)
                api_env_done(ret);
        return r;
}

int api_decode_sleep(const char *body, size_t len, struct cella_error *err)
{
        if (len == 0)
                return 0;
        _cleanup_json_ json_t *j = field_load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_object_size(j) > 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "'%.64s': POST /sleep takes no field (no body, or {})",
                                       json_object_iter_key(json_object_iter(j)));
        return 0;
}

void api_session_done(struct api_session *p)
{
        free(p->id);
        json_decref(p->env);
        free(p->cwd);
        memset(p, 0, sizeof(*p));
}

#define O(m) .off = offsetof(struct api_session, m)
static const struct field session_fields[] = {
        {"id", "?o", field_chk_id, F_NULL_ABSENT, O(id), .msg = ID_MSG},
        {"env", "?o", chk_string_object, F_NULL_ABSENT, O(env),
         .msg = "env: '%.64s' is not a valid variable name", .hi = CELLA_EXEC_MAX_ENV},
        {"cwd", "?o", field_chk_path, F_NULL_ABSENT, O(cwd)}, /* a non-string: "path is empty" */
        {"commandTimeoutMs", "?o", field_chk_number, F_NULL_ABSENT, O(timeout_ms),
         .msg = "%s must be an integer in %lld..%lld", .lo = 0, .hi = CELLA_EXEC_MAX_TIMEOUT_MS},
};
#undef O

int api_decode_session(const char *body, size_t len, struct api_session *ret,
                       struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        if (len == 0)
                return 0; /* all defaults */
        r = field_decode(body, len, session_fields, ARRAY_SIZE(session_fields), ret, err);
        if (r < 0)
                api_session_done(ret);
        return r;
}

void api_exec_done(struct api_exec *p)
{
        free(p->command);
        json_decref(p->env);
        free(p->cwd);
        free(p->session_id);
        memset(p, 0, sizeof(*p));
}

#define O(m) .off = offsetof(struct api_exec, m)
static const struct field exec_fields[] = {
        {"command", ":o", field_chk_command, 0, O(command),
         .msg = "command must be a non-empty string"},
        {"timeout", "?o", field_chk_number, F_NULL_ABSENT | F_REAL_TRUNC, O(timeout_ms),
         .msg = MS_MSG, .lo = 0, .hi = CELLA_EXEC_MAX_TIMEOUT_MS},
        {"env", "?o", chk_string_object, F_NULL_ABSENT, O(env), .msg = ENV_NAME_MSG,
         .hi = CELLA_EXEC_MAX_ENV},
        {"cwd", "?o", field_chk_path, F_NULL_ABSENT | F_STRING, O(cwd), .msg = STRING_MSG},
        {"sessionId", "?o", field_chk_id, F_NULL_ABSENT, O(session_id), .msg = ID_MSG},
};
#undef O

int api_decode_exec(const char *body, size_t len, struct api_exec *ret, struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, exec_fields, ARRAY_SIZE(exec_fields), ret, err);
        if (r < 0)
                api_exec_done(ret);
        return r;
}

void api_git_checkout_done(struct api_git_checkout *p)
{
        free(p->repo_url);
        free(p->branch);
        memset(p, 0, sizeof(*p));
}

#define O(m) .off = offsetof(struct api_git_checkout, m)
static const struct field git_checkout_fields[] = {
        {"repoUrl", ":o", field_chk_git, 0, O(repo_url), .msg = "repoUrl must be a string",
         .code = CELLA_E_INVALID_GIT_URL, .hi = CELLA_GIT_MAX_URL, .valid = git_url_check},
        {"branch", "?o", field_chk_git, F_NULL_ABSENT, O(branch), .msg = "branch must be a string",
         .hi = CELLA_GIT_MAX_BRANCH, .valid = git_branch_check},
        {"targetDir", "?o", chk_target_dir, F_NULL_ABSENT | F_ALWAYS | F_STRING | F_INLINE,
         O(target_dir), .msg = STRING_MSG},
        {"depth", "?o", field_chk_number, F_NULL_ABSENT | F_REAL_WHOLE, O(depth),
         .msg = "%s must be an integer from %lld to %lld", .lo = 0, .hi = CELLA_GIT_MAX_DEPTH},
        {"timeout", "?o", field_chk_number, F_NULL_ABSENT | F_REAL_WHOLE, O(timeout_ms),
         .msg = "%s must be an integer from %lld to %lld", .lo = 0,
         .hi = CELLA_EXEC_MAX_TIMEOUT_MS},
};
#undef O

int api_decode_git_checkout(const char *body, size_t len, struct api_git_checkout *ret,
                            struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->timeout_ms = CELLA_GIT_DEFAULT_TIMEOUT_MS;
        r = field_decode(body, len, git_checkout_fields, ARRAY_SIZE(git_checkout_fields), ret, err);
        if (r < 0)
                api_git_checkout_done(ret);
        return r;
}

/* ---- files ---- */

void api_file_read_done(struct api_file_read *p)
{
        memset(p, 0, sizeof(*p));
}

static const struct field file_read_fields[] = {
        {"path", ":o", field_chk_path, F_STRING | F_INLINE,
         .off = offsetof(struct api_file_read, path), .msg = STRING_MSG},
        {"encoding", "?o", chk_encoding, F_NULL_ABSENT,
         .off = offsetof(struct api_file_read, base64)},
};

int api_decode_file_read(const char *body, size_t len, struct api_file_read *ret,
                         struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, file_read_fields, ARRAY_SIZE(file_read_fields), ret, err);
        if (r < 0)
                api_file_read_done(ret);
        return r;
}

void api_file_write_done(struct api_file_write *p)
{
        buf_free(&p->content);
        memset(p, 0, sizeof(*p));
}

static const struct field file_write_fields[] = {
        {"path", ":o", field_chk_path, F_STRING | F_INLINE,
         .off = offsetof(struct api_file_write, path), .with = "content",
         .msg = "path and content must be strings"},
        {"content", ":o", chk_content, 0, .off = offsetof(struct api_file_write, content)},
        {"encoding", "?o", .check = NULL}, /* read by content's check */
};

int api_decode_file_write(const char *body, size_t len, struct api_file_write *ret,
                          struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, file_write_fields, ARRAY_SIZE(file_write_fields), ret, err);
        if (r < 0)
                api_file_write_done(ret);
        return r;
}

void api_mkdir_done(struct api_mkdir *p)
{
        memset(p, 0, sizeof(*p));
}

static const struct field mkdir_fields[] = {
        {"path", ":o", field_chk_path, F_STRING | F_INLINE, .off = offsetof(struct api_mkdir, path),
         .msg = STRING_MSG},
        {"recursive", "?b", field_chk_bool, 0, .off = offsetof(struct api_mkdir, recursive)},
};

int api_decode_mkdir(const char *body, size_t len, struct api_mkdir *ret, struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, mkdir_fields, ARRAY_SIZE(mkdir_fields), ret, err);
        if (r < 0)
                api_mkdir_done(ret);
        return r;
}

void api_move_done(struct api_move *p)
{
        memset(p, 0, sizeof(*p));
}

static const struct field move_fields[] = {
        {"from", ":o", field_chk_path, F_STRING | F_INLINE, .off = offsetof(struct api_move, from),
         .with = "to", .msg = "from and to must be strings"},
        {"to", ":o", field_chk_path, F_INLINE, .off = offsetof(struct api_move, to)},
};

int api_decode_move(const char *body, size_t len, struct api_move *ret, struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, move_fields, ARRAY_SIZE(move_fields), ret, err);
        if (r < 0)
                api_move_done(ret);
        return r;
}

/* ---- background processes ---- */

void api_process_done(struct api_process *p)
{
        free(p->command);
        free(p->process_id);
        free(p->session_id);
        json_decref(p->env);
        free(p->cwd);
        free(p->pattern);
        free(p->path);
        memset(p, 0, sizeof(*p));
}

#define O(m) .off = offsetof(struct api_process, m)
static const struct field proc_start_fields[] = {
        {"command", ":o", field_chk_command, F_ONE_MSG, O(command),
         .msg = "command must be a non-empty string without NUL bytes, at most %d bytes"},
        {"processId", "?o", field_chk_id, F_NULL_ABSENT | F_NOT_DIGITS, O(process_id),
         .msg = "%s must be 1..%d of [A-Za-z0-9_.-], not only digits"},
        {"sessionId", "?o", field_chk_id, F_NULL_ABSENT, O(session_id),
         .msg = "%s must be 1..%d of [A-Za-z0-9_.-]"},
        {"env", "?o", chk_string_object, F_NULL_ABSENT, O(env),
         .msg = "env: '%.64s' is not an identifier", .hi = CELLA_EXEC_MAX_ENV},
        {"cwd", "?o", field_chk_path, F_NULL_ABSENT | F_STRING, O(cwd), .msg = STRING_MSG},
};

static const struct field proc_kill_fields[] = {
        {"signal", "?o", chk_signal, F_NULL_ABSENT, O(signal),
         .msg = "signal must be a signal name (SIGTERM, TERM) or a number in 1..64"},
};

static const struct field proc_wait_log_fields[] = {
        {"pattern", ":o", field_chk_text, 0, O(pattern), .hi = CELLA_PROC_MAX_PATTERN,
         .msg = "pattern must be a non-empty string without NUL bytes, at most %d bytes"},
        {"regex", "?o", field_chk_bool, F_NULL_ABSENT, O(regex), .msg = "regex must be a boolean"},
        TIMEOUT(struct api_process),
};

static const struct field proc_wait_port_fields[] = {
        {"port", ":o", field_chk_number, 0, O(port), .lo = 1, .hi = 65535,
         .msg = "%s must be an integer in %lld..%lld", .code = CELLA_E_INVALID_PORT},
        {"mode", "?o", chk_choice, F_NULL_ABSENT, O(mode), .one_of = port_modes,
         .msg = "mode must be \"tcp\" or \"http\""},
        {"path", "?o", chk_http_path, F_NULL_ABSENT, O(path),
         .msg = "path must start with '/' and be printable ASCII without spaces (at most %d "
                "bytes)"},
        {"status", "?o", chk_status, F_NULL_ABSENT, .lo = 100, .hi = 599},
        {"interval", "?o", field_chk_number, F_NULL_ABSENT | F_REAL_TRUNC, O(interval_ms),
         .msg = MS_MSG, .lo = CELLA_PROC_MIN_INTERVAL_MS, .hi = CELLA_PROC_MAX_INTERVAL_MS},
        TIMEOUT(struct api_process),
};

static const struct field proc_wait_exit_fields[] = {
        TIMEOUT(struct api_process),
};
#undef O

int api_decode_process(enum api_proc_call call, const char *body, size_t len,
                       const char *query_signal, struct api_process *ret, struct cella_error *err)
{
        static const struct {
                const struct field *fields;
                size_t n;
        } calls[] = {
                [API_PROC_START] = {proc_start_fields, ARRAY_SIZE(proc_start_fields)},
                [API_PROC_KILL] = {proc_kill_fields, ARRAY_SIZE(proc_kill_fields)},
                [API_PROC_WAIT_LOG] = {proc_wait_log_fields, ARRAY_SIZE(proc_wait_log_fields)},
                [API_PROC_WAIT_PORT] = {proc_wait_port_fields, ARRAY_SIZE(proc_wait_port_fields)},
                [API_PROC_WAIT_EXIT] = {proc_wait_exit_fields, ARRAY_SIZE(proc_wait_exit_fields)},
        };
        static const struct field signal_unchecked[] = {{"signal", "?o", .check = NULL}};
        _cleanup_json_ json_t *j = NULL;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        if ((unsigned)call >= ARRAY_SIZE(calls))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "bad call"), -EINVAL;
        /* kill and waitForExit may come without a body */
        if (len == 0 && (call == API_PROC_KILL || call == API_PROC_WAIT_EXIT))
                j = json_object();
        else
                j = field_load_object(body, len, err);
        if (j && call == API_PROC_KILL && query_signal) {
                /* the signal from the query; the body may not name one too */
                r = field_walk(j, signal_unchecked, 1, ret, err);
                if (r == 0 && json_object_get(j, "signal"))
                        r = (cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                             "signal given in the query and the body"),
                             -EINVAL);
                else if (r == 0 && cella_signal_parse(query_signal) < 1)
                        r = field_fail(&proc_kill_fields[0], err);
                else if (r == 0)
                        ret->signal = cella_signal_parse(query_signal);
        } else if (j) {
                r = field_walk(j, calls[call].fields, calls[call].n, ret, err);
        }
        if (r == -ENOMEM || (r < 0 && !cella_error_is_set(err)))
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (r < 0)
                api_process_done(ret);
        return r;
}

/* ---- file watches ---- */

void api_watch_done(struct api_watch *p)
{
        json_decref(p->include);
        json_decref(p->exclude);
        memset(p, 0, sizeof(*p));
}

static const struct field watch_fields[] = {
        {"path", ":o", field_chk_path, F_STRING | F_INLINE, .off = offsetof(struct api_watch, path),
         .msg = STRING_MSG},
        {"recursive", "?b", field_chk_bool, F_ALWAYS, .off = offsetof(struct api_watch, recursive),
         .lo = 1},
        {"include", "?o", chk_globs, 0, .off = offsetof(struct api_watch, include)},
        {"exclude", "?o", chk_globs, 0, .off = offsetof(struct api_watch, exclude)},
};

int api_decode_watch(const char *body, size_t len, struct api_watch *ret, struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, watch_fields, ARRAY_SIZE(watch_fields), ret, err);
        if (r == -ENOMEM)
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (r == 0 && json_array_size(ret->include) + json_array_size(ret->exclude) >
                              CELLA_WATCH_MAX_PATTERNS) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "more than %d include and exclude patterns",
                                CELLA_WATCH_MAX_PATTERNS);
                r = -EINVAL;
        }
        if (r < 0)
                api_watch_done(ret);
        return r;
}

/* ---- code interpreter ---- */

#define LANGUAGE_MSG "language must be python, javascript or typescript"

void api_context_create_done(struct api_context_create *p)
{
        free(p->cwd);
        json_decref(p->env);
        memset(p, 0, sizeof(*p));
}

static const struct field context_create_fields[] = {
        {"language", "?o", chk_choice, F_NULL_ABSENT,
         .off = offsetof(struct api_context_create, language), .one_of = wire_code_langs,
         .msg = LANGUAGE_MSG},
        {"cwd", "?o", field_chk_path, F_NULL_ABSENT | F_STRING,
         .off = offsetof(struct api_context_create, cwd), .msg = STRING_MSG},
        {"env", "?o", chk_string_object, F_NULL_ABSENT,
         .off = offsetof(struct api_context_create, env), .msg = ENV_NAME_MSG,
         .hi = CELLA_EXEC_MAX_ENV},
};

int api_decode_context_create(const char *body, size_t len, struct api_context_create *ret,
                              struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        ret->language = WIRE_CODE_PYTHON;
        r = field_decode(body, len, context_create_fields, ARRAY_SIZE(context_create_fields), ret,
                         err);
        if (r == -ENOMEM)
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (r < 0)
                api_context_create_done(ret);
        return r;
}

void api_code_run_done(struct api_code_run *p)
{
        free(p->code);
        free(p->context_id);
        memset(p, 0, sizeof(*p));
}

static const struct field code_run_fields[] = {
        {"code", ":o", chk_code, 0, .off = offsetof(struct api_code_run, code)},
        {"contextId", "?o", field_chk_id, F_NULL_ABSENT,
         .off = offsetof(struct api_code_run, context_id), .msg = ID_MSG},
        {"language", "?o", chk_choice, F_NULL_ABSENT,
         .off = offsetof(struct api_code_run, language),
         .has = offsetof(struct api_code_run, language_given) + 1, .one_of = wire_code_langs,
         .msg = LANGUAGE_MSG},
        TIMEOUT(struct api_code_run),
};

int api_decode_code_run(const char *body, size_t len, struct api_code_run *ret,
                        struct cella_error *err)
{
        int r;

        memset(ret, 0, sizeof(*ret));
        r = field_decode(body, len, code_run_fields, ARRAY_SIZE(code_run_fields), ret, err);
        if (r == -ENOMEM)
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (r < 0)
                api_code_run_done(ret);
        return r;
}

static int invalid(struct cella_error *err, const char *fmt, ...) _printf_(2, 3);
static int invalid(struct cella_error *err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(err, CELLA_E_VALIDATION_FAILED, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

int api_decode_pty_control(const char *body, size_t len, struct api_pty_control *ret,
                           struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        const char *type = NULL;
        json_int_t cols = 0, rows = 0;
        json_error_t je;

        memset(ret, 0, sizeof(*ret));
        j = field_load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, 0, "{s:s}", "type", &type) < 0)
                return field_unpack_fail(&je, err);
        if (strcmp(type, "resize") != 0)
                return invalid(err, "unknown control message type '%.32s' (expected resize)", type);
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:s, s:I, s:I}", "type", &type, "cols", &cols,
                           "rows", &rows) < 0)
                return field_unpack_fail(&je, err);
        if (cols < 1 || cols > CELLA_PTY_MAX_DIM || rows < 1 || rows > CELLA_PTY_MAX_DIM)
                return invalid(err, "cols and rows must be from 1 to %d", CELLA_PTY_MAX_DIM);
        ret->cols = (unsigned)cols;
        ret->rows = (unsigned)rows;
        return 0;
}

int api_parse_pty_dim(const char *s, const char *field, unsigned def, unsigned *ret,
                      struct cella_error *err)
{
        unsigned v = 0;
        size_t i;

        if (!s) {
                *ret = def;
                return 0;
        }
        for (i = 0; s[i] >= '0' && s[i] <= '9' && i < 5; i++)
                v = v * 10 + (unsigned)(s[i] - '0');
        if (i == 0 || s[i] || v < 1 || v > CELLA_PTY_MAX_DIM) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "%s must be from 1 to %d", field,
                                CELLA_PTY_MAX_DIM);
                return -EINVAL;
        }
        *ret = v;
        return 0;
}
