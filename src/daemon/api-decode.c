/* Strict decoding of the API's JSON request bodies; see api-decode.h. */
#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "common/base64.h"
#include "common/git-url.h"
#include "common/name.h"
#include "common/path.h"
#include "common/signal.h"
#include "daemon/api-decode.h"
#include "daemon/instance-type.h"
#include "daemon/sandbox-options.h"
#include "runtime/net.h"

/* Parse body as a JSON object. JSON_ALLOW_NUL keeps \u0000 in file contents; every string
 * that names something is checked for NULs separately. */
static json_t *load_object(const char *body, size_t len, struct cella_error *err)
{
        json_error_t je;
        json_t *j;

        /* the largest body a route reads (each route's own limit is checked as it arrives) */
        if (len > CELLA_FILES_JSON_MAX) {
                cella_error_set(err, CELLA_E_PAYLOAD_TOO_LARGE, "body over %d bytes",
                                CELLA_FILES_JSON_MAX);
                return NULL;
        }
        j = json_loadb(body, len, JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
        if (!j) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "malformed JSON: %s", je.text);
                return NULL;
        }
        if (!json_is_object(j)) {
                json_decref(j);
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "body must be a JSON object");
                return NULL;
        }
        return j;
}

static int unpack_fail(const json_error_t *je, struct cella_error *err)
{
        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "invalid request: %s", je->text);
        return -EINVAL;
}

static bool has_nul(json_t *s)
{
        return strlen(json_string_value(s)) != json_string_length(s);
}

static int str_field(json_t *s, const char *what, size_t max, char **ret, struct cella_error *err)
{
        if (!s) {
                *ret = NULL;
                return 0;
        }
        if (has_nul(s))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "%s contains a NUL byte",
                                       what),
                       -EINVAL;
        if (json_string_length(s) > max)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "%s is longer than %zu bytes", what, max),
                       -EINVAL;
        *ret = strdup(json_string_value(s));
        return *ret ? 0 : -ENOMEM;
}

static int path_field(json_t *s, const char *what, char out[CELLA_PATH_MAX + 1],
                      struct cella_error *err)
{
        struct cella_error e = {0};

        if (sandbox_path_normalize(json_string_value(s), json_string_length(s), out,
                                   CELLA_PATH_MAX + 1, &e) < 0)
                return cella_error_set(err, e.code, "%s: %s", what, e.msg), -EINVAL;
        return 0;
}

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
                if (has_nul(v))
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
        json_decref(p->network_allow);
        memset(p, 0, sizeof(*p));
}

/* networkAllow: an array of at most CELLA_NETWORK_ALLOW_MAX "CIDR[:port]" strings. */
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

int api_decode_put_sandbox(const char *body, size_t len, struct api_put_sandbox *ret,
                           struct cella_error *err)
{
        struct api_put_sandbox p = {0};
        json_t *j, *image = NULL, *type = NULL, *env = NULL, *labels = NULL, *sleep = NULL;
        json_t *network = NULL, *allow = NULL;
        int norm = 0, keep = -1, defsess = -1;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        if (len == 0)
                return 0; /* an empty body is all defaults */
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT,
                           "{s?o, s?o, s?o, s?o, s?b, s?o, s?b, s?b, s?o, s?o}", "image", &image,
                           "instanceType", &type, "env", &env, "labels", &labels, "normalizeId",
                           &norm, "sleepAfter", &sleep, "keepAlive", &keep, "enableDefaultSession",
                           &defsess, "network", &network, "networkAllow", &allow) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (image && (!json_is_string(image) || has_nul(image) ||
                      !image_name_is_valid(json_string_value(image)))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "image must be a name of [a-z0-9._-], 1-%d characters",
                                CELLA_NAME_MAX);
                goto out;
        }
        if (type && (!json_is_string(type) || !instance_type_find(json_string_value(type)))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "instanceType must be one of: %s",
                                instance_type_names());
                goto out;
        }
        if (env && api_check_string_object(env, "env", CELLA_EXEC_MAX_ENV, err) < 0)
                goto out;
        if (labels && api_check_string_object(labels, "labels", CELLA_LABELS_MAX, err) < 0)
                goto out;
        if (sleep && api_parse_duration(sleep, &p.sleep_after_ms, err) < 0)
                goto out;
        if (network && (!json_is_string(network) ||
                        (strcmp(json_string_value(network), "none") != 0 &&
                         strcmp(json_string_value(network), "outbound") != 0) ||
                        has_nul(network))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "network must be \"none\" or \"outbound\"");
                goto out;
        }
        if (allow && !(p.network_allow = sandbox_options_network_allow(allow, err)))
                goto out;
        if (keep >= 0) {
                p.has_keep_alive = true;
                p.keep_alive = keep;
        }
        if (defsess >= 0) {
                p.has_default_session = true;
                p.default_session = defsess;
        }
        r = -ENOMEM;
        if (image && !(p.image = strdup(json_string_value(image))))
                goto out;
        if (type && !(p.instance_type = strdup(json_string_value(type))))
                goto out;
        p.env = json_incref(env);
        p.labels = json_incref(labels);
        if (network && !(p.network = strdup(json_string_value(network))))
                goto out;
        p.normalize_id = norm;
        *ret = p;
        memset(&p, 0, sizeof(p));
        r = 0;
out:
        api_put_sandbox_done(&p);
        json_decref(j);
        return r;
}

void api_env_done(struct api_env *p)
{
        json_decref(p->vars);
        free(p->session_id);
        memset(p, 0, sizeof(*p));
}

/* An optional session id (null or absent: none) into *ret. */
static int id_field(json_t *v, const char *what, char **ret, struct cella_error *err)
{
        if (!v || json_is_null(v))
                return 0;
        if (!json_is_string(v) || has_nul(v) || !cella_id_is_valid(json_string_value(v))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "%s must be 1-%d characters of [A-Za-z0-9_.-]", what, CELLA_ID_MAX);
                return -EINVAL;
        }
        *ret = strdup(json_string_value(v));
        return *ret ? 0 : -ENOMEM;
}

static bool is_identifier(const char *k)
{
        size_t n = 0;
        if (!((k[0] >= 'A' && k[0] <= 'Z') || (k[0] >= 'a' && k[0] <= 'z') || k[0] == '_'))
                return false;
        for (; k[n]; n++)
                if (!((k[n] >= 'A' && k[n] <= 'Z') || (k[n] >= 'a' && k[n] <= 'z') ||
                      (k[n] >= '0' && k[n] <= '9') || k[n] == '_'))
                        return false;
        return n <= 255;
}

int api_decode_env(const char *body, size_t len, struct api_env *ret, struct cella_error *err)
{
        json_t *j, *vars = NULL, *v, *sid = NULL;
        json_error_t je;
        const char *k;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o}", "vars", &vars, "sessionId", &sid) <
            0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (id_field(sid, "sessionId", &ret->session_id, err) < 0)
                goto out;
        if (!json_is_object(vars)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "vars must be an object");
                goto out;
        }
        if (json_object_size(vars) > CELLA_EXEC_MAX_ENV) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "vars has more than %d entries",
                                CELLA_EXEC_MAX_ENV);
                goto out;
        }
        json_object_foreach(vars, k, v)
        {
                if (!is_identifier(k)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "vars: '%.64s' is not a valid variable name", k);
                        goto out;
                }
                if (!json_is_null(v) && (!json_is_string(v) || has_nul(v))) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "vars: '%.64s' must be a string (NUL-free) or null", k);
                        goto out;
                }
        }
        ret->vars = json_incref(vars);
        r = 0;
out:
        if (r < 0)
                api_env_done(ret);
        json_decref(j);
        return r;
}

void api_session_done(struct api_session *p)
{
        free(p->id);
        json_decref(p->env);
        free(p->cwd);
        memset(p, 0, sizeof(*p));
}

int api_decode_session(const char *body, size_t len, struct api_session *ret,
                       struct cella_error *err)
{
        struct api_session p = {0};
        json_t *j, *id = NULL, *env = NULL, *cwd = NULL, *timeout = NULL, *v;
        char path[CELLA_PATH_MAX + 1];
        const char *k;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        if (len == 0)
                return 0; /* all defaults */
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s?o, s?o, s?o, s?o}", "id", &id, "env", &env,
                           "cwd", &cwd, "commandTimeoutMs", &timeout) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if ((r = id_field(id, "id", &p.id, err)) < 0)
                goto out;
        r = -EINVAL;
        if (env && !json_is_null(env)) {
                if (api_check_string_object(env, "env", CELLA_EXEC_MAX_ENV, err) < 0)
                        goto out;
                json_object_foreach(env, k, v)
                {
                        if (!is_identifier(k)) {
                                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                "env: '%.64s' is not a valid variable name", k);
                                goto out;
                        }
                }
                p.env = json_incref(env);
        }
        if (cwd && !json_is_null(cwd)) {
                if (path_field(cwd, "cwd", path, err) < 0)
                        goto out;
                r = -ENOMEM;
                if (!(p.cwd = strdup(path)))
                        goto out;
                r = -EINVAL;
        }
        if (timeout && !json_is_null(timeout)) {
                if (!json_is_integer(timeout) || json_integer_value(timeout) < 0 ||
                    json_integer_value(timeout) > CELLA_EXEC_MAX_TIMEOUT_MS) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "commandTimeoutMs must be an integer in 0..%lld",
                                        (long long)CELLA_EXEC_MAX_TIMEOUT_MS);
                        goto out;
                }
                p.timeout_ms = json_integer_value(timeout);
        }
        *ret = p;
        memset(&p, 0, sizeof(p));
        r = 0;
out:
        api_session_done(&p);
        json_decref(j);
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

void api_git_checkout_done(struct api_git_checkout *p)
{
        free(p->repo_url);
        free(p->branch);
        memset(p, 0, sizeof(*p));
}

/* An integer (or a real with an integral value) in lo..hi; -1 with err otherwise. */
static int int_in(json_t *v, const char *what, int64_t lo, int64_t hi, int64_t *ret,
                  struct cella_error *err)
{
        double d;

        if (json_is_integer(v) && json_integer_value(v) >= lo && json_integer_value(v) <= hi) {
                *ret = json_integer_value(v);
                return 0;
        }
        d = json_is_real(v) ? json_real_value(v) : -1.0;
        if (json_is_real(v) && d >= (double)lo && d <= (double)hi && d == (double)(int64_t)d) {
                *ret = (int64_t)d;
                return 0;
        }
        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                               "%s must be an integer from %lld to %lld", what, (long long)lo,
                               (long long)hi);
}

int api_decode_git_checkout(const char *body, size_t len, struct api_git_checkout *ret,
                            struct cella_error *err)
{
        struct api_git_checkout p = {0};
        json_t *j, *url = NULL, *branch = NULL, *dir = NULL, *depth = NULL, *timeout = NULL;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        p.timeout_ms = CELLA_GIT_DEFAULT_TIMEOUT_MS;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o, s?o, s?o, s?o}", "repoUrl", &url,
                           "branch", &branch, "targetDir", &dir, "depth", &depth, "timeout",
                           &timeout) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(url)) {
                cella_error_set(err, CELLA_E_INVALID_GIT_URL, "repoUrl must be a string");
                goto out;
        }
        if (git_url_check(json_string_value(url), json_string_length(url), err) < 0)
                goto out;
        if ((r = str_field(url, "repoUrl", CELLA_GIT_MAX_URL, &p.repo_url, err)) < 0)
                goto out;
        r = -EINVAL;
        if (branch && !json_is_null(branch)) {
                if (!json_is_string(branch)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "branch must be a string");
                        goto out;
                }
                if (git_branch_check(json_string_value(branch), json_string_length(branch), err) <
                    0)
                        goto out;
                if ((r = str_field(branch, "branch", CELLA_GIT_MAX_BRANCH, &p.branch, err)) < 0)
                        goto out;
                r = -EINVAL;
        }
        if (dir && !json_is_null(dir)) {
                if (!json_is_string(dir)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "targetDir must be a string");
                        goto out;
                }
                if (path_field(dir, "targetDir", p.target_dir, err) < 0)
                        goto out;
        } else {
                char name[CELLA_PATH_MAX + 1];
                struct cella_error e = {0};
                int n = git_url_repo_name(p.repo_url, name, sizeof(name));

                if (n < 0) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "repoUrl names no repository directory; give targetDir");
                        goto out;
                }
                /* relative: below /workspace, within the path limits like any path */
                if (sandbox_path_normalize(name, (size_t)n, p.target_dir, sizeof(p.target_dir),
                                           &e) < 0) {
                        cella_error_set(err, e.code, "targetDir from repoUrl: %s", e.msg);
                        goto out;
                }
        }
        if (strcmp(p.target_dir, "/") == 0) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "targetDir must not be /");
                goto out;
        }
        if (depth && !json_is_null(depth) &&
            int_in(depth, "depth", 0, CELLA_GIT_MAX_DEPTH, &p.depth, err) < 0)
                goto out;
        if (timeout && !json_is_null(timeout) &&
            int_in(timeout, "timeout", 0, CELLA_EXEC_MAX_TIMEOUT_MS, &p.timeout_ms, err) < 0)
                goto out;
        *ret = p;
        memset(&p, 0, sizeof(p));
        r = 0;
out:
        api_git_checkout_done(&p);
        json_decref(j);
        return r;
}

int api_decode_exec(const char *body, size_t len, struct api_exec *ret, struct cella_error *err)
{
        struct api_exec p = {0};
        json_t *j, *command = NULL, *timeout = NULL, *env = NULL, *cwd = NULL, *sid = NULL;
        char path[CELLA_PATH_MAX + 1];
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o, s?o, s?o, s?o}", "command", &command,
                           "timeout", &timeout, "env", &env, "cwd", &cwd, "sessionId", &sid) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(command) || json_string_length(command) == 0) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "command must be a non-empty string");
                goto out;
        }
        if ((r = str_field(command, "command", CELLA_EXEC_MAX_COMMAND, &p.command, err)) < 0)
                goto out;
        r = -EINVAL;
        if (timeout && !json_is_null(timeout)) {
                json_int_t t;

                if (json_is_integer(timeout))
                        t = json_integer_value(timeout);
                else if (json_is_real(timeout) && json_real_value(timeout) >= 0 &&
                         json_real_value(timeout) <= (double)CELLA_EXEC_MAX_TIMEOUT_MS)
                        t = (json_int_t)json_real_value(timeout);
                else
                        t = -1;
                if (t < 0 || t > CELLA_EXEC_MAX_TIMEOUT_MS) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "timeout must be milliseconds between 0 and %lld",
                                        (long long)CELLA_EXEC_MAX_TIMEOUT_MS);
                        goto out;
                }
                p.timeout_ms = t;
        }
        if (env && !json_is_null(env)) {
                if (api_check_string_object(env, "env", CELLA_EXEC_MAX_ENV, err) < 0)
                        goto out;
                p.env = json_incref(env);
        }
        if (cwd && !json_is_null(cwd)) {
                if (!json_is_string(cwd)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "cwd must be a string");
                        goto out;
                }
                if (path_field(cwd, "cwd", path, err) < 0)
                        goto out;
                r = -ENOMEM;
                if (!(p.cwd = strdup(path)))
                        goto out;
                r = -EINVAL;
        }
        if ((r = id_field(sid, "sessionId", &p.session_id, err)) < 0)
                goto out;
        *ret = p;
        memset(&p, 0, sizeof(p));
        r = 0;
out:
        api_exec_done(&p);
        json_decref(j);
        return r;
}

void api_file_read_done(struct api_file_read *p)
{
        memset(p, 0, sizeof(*p));
}

/* "utf-8" (also "utf8"), "base64"; NULL means utf-8. -1 if unknown. */
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
                               "encoding must be \"utf-8\" or \"base64\"");
}

int api_decode_file_read(const char *body, size_t len, struct api_file_read *ret,
                         struct cella_error *err)
{
        json_t *j, *path = NULL, *enc = NULL;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o}", "path", &path, "encoding", &enc) <
            0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(path)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path must be a string");
                goto out;
        }
        if (path_field(path, "path", ret->path, err) < 0 ||
            parse_encoding(enc, &ret->base64, err) < 0) {
                memset(ret, 0, sizeof(*ret));
                goto out;
        }
        r = 0;
out:
        json_decref(j);
        return r;
}

void api_file_write_done(struct api_file_write *p)
{
        buf_free(&p->content);
        memset(p, 0, sizeof(*p));
}

int api_decode_file_write(const char *body, size_t len, struct api_file_write *ret,
                          struct cella_error *err)
{
        json_t *j, *path = NULL, *content = NULL, *enc = NULL;
        json_error_t je;
        bool b64;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s:o, s?o}", "path", &path, "content",
                           &content, "encoding", &enc) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(path) || !json_is_string(content)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path and content must be strings");
                goto out;
        }
        if (path_field(path, "path", ret->path, err) < 0 || parse_encoding(enc, &b64, err) < 0)
                goto fail;
        if (b64) {
                r = base64_decode(&ret->content, json_string_value(content),
                                  json_string_length(content));
                if (r == -EINVAL)
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "content is not valid base64");
                if (r < 0)
                        goto fail;
        } else {
                r = buf_append(&ret->content, json_string_value(content),
                               json_string_length(content));
                if (r < 0)
                        goto fail;
        }
        r = 0;
        goto out;
fail:
        if (r >= 0)
                r = -EINVAL;
        api_file_write_done(ret);
out:
        json_decref(j);
        return r;
}

void api_mkdir_done(struct api_mkdir *p)
{
        memset(p, 0, sizeof(*p));
}

int api_decode_mkdir(const char *body, size_t len, struct api_mkdir *ret, struct cella_error *err)
{
        json_t *j, *path = NULL;
        int recursive = 0;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?b}", "path", &path, "recursive",
                           &recursive) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(path)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path must be a string");
                goto out;
        }
        if (path_field(path, "path", ret->path, err) < 0) {
                memset(ret, 0, sizeof(*ret));
                goto out;
        }
        ret->recursive = recursive;
        r = 0;
out:
        json_decref(j);
        return r;
}

void api_move_done(struct api_move *p)
{
        memset(p, 0, sizeof(*p));
}

int api_decode_move(const char *body, size_t len, struct api_move *ret, struct cella_error *err)
{
        json_t *j, *from = NULL, *to = NULL;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s:o}", "from", &from, "to", &to) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(from) || !json_is_string(to)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "from and to must be strings");
                goto out;
        }
        if (path_field(from, "from", ret->from, err) < 0 ||
            path_field(to, "to", ret->to, err) < 0) {
                memset(ret, 0, sizeof(*ret));
                goto out;
        }
        r = 0;
out:
        json_decref(j);
        return r;
}

/* ---- background processes ---- */

static int invalid(struct cella_error *err, const char *fmt, ...) _printf_(2, 3);
static int invalid(struct cella_error *err, const char *fmt, ...)
{
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(err, CELLA_E_VALIDATION_FAILED, fmt, ap);
        va_end(ap);
        return -EINVAL;
}

/* A timeout or interval in ms: an integer (or a whole non-negative real) in lo..hi. */
static int ms_field(json_t *v, const char *what, int64_t lo, int64_t hi, json_t *out,
                    const char *key, struct cella_error *err)
{
        json_int_t t = -1;

        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v))
                t = json_integer_value(v);
        else if (json_is_real(v) && json_real_value(v) >= (double)lo &&
                 json_real_value(v) <= (double)hi)
                t = (json_int_t)json_real_value(v);
        if (t < lo || t > hi)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "%s must be milliseconds between %lld and %lld", what,
                                       (long long)lo, (long long)hi),
                       -EINVAL;
        return json_object_set_new(out, key, json_integer(t)) < 0 ? -ENOMEM : 0;
}

static int signal_field(json_t *v, json_t *out, struct cella_error *err)
{
        int sig = -1;

        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v) && json_integer_value(v) >= 1 && json_integer_value(v) <= 64)
                sig = (int)json_integer_value(v);
        else if (json_is_string(v) && !has_nul(v))
                sig = cella_signal_parse(json_string_value(v));
        if (sig < 1)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "signal must be a signal name (SIGTERM, TERM) or a number "
                                       "in 1..64"),
                       -EINVAL;
        return json_object_set_new(out, "signal", json_integer(sig)) < 0 ? -ENOMEM : 0;
}

static int decode_process_start(json_t *j, json_t *out, struct cella_error *err)
{
        json_t *command = NULL, *pid = NULL, *sid = NULL, *env = NULL, *cwd = NULL;
        char path[CELLA_PATH_MAX + 1];
        json_error_t je;
        const char *k;
        json_t *v;

        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o, s?o, s?o, s?o}", "command", &command,
                           "processId", &pid, "sessionId", &sid, "env", &env, "cwd", &cwd) < 0)
                return unpack_fail(&je, err);
        if (!json_is_string(command) || json_string_length(command) == 0 || has_nul(command) ||
            json_string_length(command) > CELLA_EXEC_MAX_COMMAND)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "command must be a non-empty string without NUL bytes, "
                                       "at most %d bytes",
                                       CELLA_EXEC_MAX_COMMAND),
                       -EINVAL;
        json_object_set(out, "command", command);
        if (pid && !json_is_null(pid)) {
                if (!json_is_string(pid) || has_nul(pid) ||
                    !cella_id_is_valid(json_string_value(pid)) ||
                    strspn(json_string_value(pid), "0123456789") == json_string_length(pid))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "processId must be 1..%d of [A-Za-z0-9_.-], not "
                                               "only digits",
                                               CELLA_ID_MAX),
                               -EINVAL;
                json_object_set(out, "id", pid);
        }
        if (sid && !json_is_null(sid)) {
                if (!json_is_string(sid) || has_nul(sid) ||
                    !cella_id_is_valid(json_string_value(sid)))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "sessionId must be 1..%d of [A-Za-z0-9_.-]",
                                               CELLA_ID_MAX),
                               -EINVAL;
                json_object_set(out, "session", sid);
        }
        if (env && !json_is_null(env)) {
                if (api_check_string_object(env, "env", CELLA_EXEC_MAX_ENV, err) < 0)
                        return -EINVAL;
                json_object_foreach(env, k, v)
                {
                        if (!is_identifier(k))
                                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                       "env: '%.64s' is not an identifier", k),
                                       -EINVAL;
                }
                json_object_set(out, "env", env);
        }
        if (cwd && !json_is_null(cwd)) {
                if (!json_is_string(cwd))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "cwd must be a string"),
                               -EINVAL;
                if (path_field(cwd, "cwd", path, err) < 0)
                        return -EINVAL;
                json_object_set_new(out, "cwd", json_string(path));
        }
        return 0;
}

static int decode_wait_port(json_t *j, json_t *out, struct cella_error *err)
{
        json_t *port = NULL, *mode = NULL, *path = NULL, *status = NULL, *interval = NULL,
               *timeout = NULL;
        json_int_t smin = 200, smax = 399;
        json_error_t je;

        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o, s?o, s?o, s?o, s?o}", "port", &port,
                           "mode", &mode, "path", &path, "status", &status, "interval", &interval,
                           "timeout", &timeout) < 0)
                return unpack_fail(&je, err);
        if (!json_is_integer(port) || json_integer_value(port) < 1 ||
            json_integer_value(port) > 65535)
                return cella_error_set(err, CELLA_E_INVALID_PORT,
                                       "port must be an integer in 1..65535"),
                       -EINVAL;
        json_object_set(out, "port", port);
        if (mode && !json_is_null(mode)) {
                if (!json_is_string(mode) || (strcmp(json_string_value(mode), "tcp") != 0 &&
                                              strcmp(json_string_value(mode), "http") != 0))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "mode must be \"tcp\" or \"http\""),
                               -EINVAL;
                json_object_set(out, "mode", mode);
        }
        if (path && !json_is_null(path)) {
                const char *s = json_is_string(path) ? json_string_value(path) : NULL;
                bool ok = s && s[0] == '/' && !has_nul(path) && json_string_length(path) <= 2048;

                for (; ok && *s; s++)
                        if ((unsigned char)*s <= ' ' || (unsigned char)*s >= 0x7f)
                                ok = false;
                if (!ok)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "path must start with '/' and be printable ASCII "
                                               "without spaces (at most 2048 bytes)"),
                               -EINVAL;
                json_object_set(out, "path", path);
        }
        if (status && !json_is_null(status)) {
                if (json_is_integer(status)) {
                        smin = smax = json_integer_value(status);
                } else if (!json_is_object(status) ||
                           json_unpack_ex(status, &je, JSON_STRICT, "{s?I, s?I}", "min", &smin,
                                          "max", &smax) < 0) {
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "status must be a number or {min, max}"),
                               -EINVAL;
                }
                if (smin < 100 || smax > 599 || smin > smax)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "status range must be within 100..599, min <= max"),
                               -EINVAL;
                json_object_set_new(out, "statusMin", json_integer(smin));
                json_object_set_new(out, "statusMax", json_integer(smax));
        }
        if (ms_field(interval, "interval", CELLA_PROC_MIN_INTERVAL_MS, CELLA_PROC_MAX_INTERVAL_MS,
                     out, "intervalMs", err) < 0)
                return -EINVAL;
        return ms_field(timeout, "timeout", 0, CELLA_EXEC_MAX_TIMEOUT_MS, out, "timeoutMs", err);
}

int api_decode_process(enum api_proc_call call, const char *body, size_t len,
                       const char *query_signal, json_t **ret, struct cella_error *err)
{
        static const char *const ops[] = {
                [API_PROC_START] = "start",        [API_PROC_KILL] = "kill",
                [API_PROC_WAIT_LOG] = "waitLog",   [API_PROC_WAIT_PORT] = "waitPort",
                [API_PROC_WAIT_EXIT] = "waitExit",
        };
        json_t *j = NULL, *out = NULL, *a = NULL, *b = NULL, *c = NULL;
        json_error_t je;
        int r = -EINVAL;

        *ret = NULL;
        if ((unsigned)call >= ARRAY_SIZE(ops))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "bad call"), -EINVAL;
        /* kill and waitForExit may come without a body */
        if (len == 0 && (call == API_PROC_KILL || call == API_PROC_WAIT_EXIT))
                j = json_object();
        else
                j = load_object(body, len, err);
        out = json_pack("{s:s}", "op", ops[call]);
        if (!j || !out)
                goto out;
        switch (call) {
        case API_PROC_START:
                r = decode_process_start(j, out, err);
                break;
        case API_PROC_KILL:
                if (json_unpack_ex(j, &je, JSON_STRICT, "{s?o}", "signal", &a) < 0) {
                        r = unpack_fail(&je, err);
                        break;
                }
                if (query_signal) {
                        if (a)
                                r = invalid(err, "signal given in the query and the body");
                        else if (cella_signal_parse(query_signal) < 1)
                                r = invalid(err, "signal must be a signal name (SIGTERM, "
                                                 "TERM) or a number in 1..64");
                        else
                                r = json_object_set_new(
                                            out, "signal",
                                            json_integer(cella_signal_parse(query_signal))) < 0
                                            ? -ENOMEM
                                            : 0;
                        break;
                }
                r = signal_field(a, out, err);
                break;
        case API_PROC_WAIT_LOG:
                if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o, s?o}", "pattern", &a, "regex",
                                   &b, "timeout", &c) < 0) {
                        r = unpack_fail(&je, err);
                        break;
                }
                if (!json_is_string(a) || json_string_length(a) == 0 || has_nul(a) ||
                    json_string_length(a) > CELLA_PROC_MAX_PATTERN) {
                        r = invalid(err,
                                    "pattern must be a non-empty string without NUL "
                                    "bytes, at most %d bytes",
                                    CELLA_PROC_MAX_PATTERN);
                        break;
                }
                json_object_set(out, "pattern", a);
                if (b && !json_is_null(b)) {
                        if (!json_is_boolean(b)) {
                                r = invalid(err, "regex must be a boolean");
                                break;
                        }
                        json_object_set(out, "regex", b);
                }
                r = ms_field(c, "timeout", 0, CELLA_EXEC_MAX_TIMEOUT_MS, out, "timeoutMs", err);
                break;
        case API_PROC_WAIT_PORT:
                r = decode_wait_port(j, out, err);
                break;
        case API_PROC_WAIT_EXIT:
                if (json_unpack_ex(j, &je, JSON_STRICT, "{s?o}", "timeout", &c) < 0) {
                        r = unpack_fail(&je, err);
                        break;
                }
                r = ms_field(c, "timeout", 0, CELLA_EXEC_MAX_TIMEOUT_MS, out, "timeoutMs", err);
                break;
        }
        if (r == 0)
                *ret = TAKE_PTR(out);
out:
        if (r == -ENOMEM || (r < 0 && !cella_error_is_set(err)))
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        json_decref(out);
        json_decref(j);
        return r;
}

void api_watch_done(struct api_watch *p)
{
        json_decref(p->payload);
        memset(p, 0, sizeof(*p));
}

/* An array of at most CELLA_WATCH_MAX_PATTERNS non-empty NUL-free globs. */
static int glob_list(json_t *v, const char *what, struct cella_error *err)
{
        size_t i;
        json_t *g;

        if (!json_is_array(v))
                return invalid(err, "%s must be an array of strings", what);
        if (json_array_size(v) > CELLA_WATCH_MAX_PATTERNS)
                return invalid(err, "%s has more than %d patterns", what, CELLA_WATCH_MAX_PATTERNS);
        json_array_foreach(v, i, g)
        {
                if (!json_is_string(g) || has_nul(g) || json_string_length(g) == 0 ||
                    json_string_length(g) > CELLA_WATCH_PATTERN_MAX)
                        return invalid(err, "%s[%zu] must be a glob of 1..%d bytes", what, i,
                                       CELLA_WATCH_PATTERN_MAX);
        }
        return 0;
}

int api_decode_watch(const char *body, size_t len, struct api_watch *ret, struct cella_error *err)
{
        json_t *j, *path = NULL, *inc = NULL, *exc = NULL;
        char p[CELLA_PATH_MAX + 1];
        int recursive = 1;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?b, s?o, s?o}", "path", &path, "recursive",
                           &recursive, "include", &inc, "exclude", &exc) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(path)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path must be a string");
                goto out;
        }
        if (path_field(path, "path", p, err) < 0)
                goto out;
        if (inc && glob_list(inc, "include", err) < 0)
                goto out;
        if (exc && glob_list(exc, "exclude", err) < 0)
                goto out;
        if (json_array_size(inc) + json_array_size(exc) > CELLA_WATCH_MAX_PATTERNS) {
                invalid(err, "more than %d include and exclude patterns", CELLA_WATCH_MAX_PATTERNS);
                goto out;
        }
        ret->payload = json_pack("{s:s, s:b}", "path", p, "recursive", recursive);
        if (!ret->payload) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                r = -ENOMEM;
                goto out;
        }
        if (inc)
                json_object_set(ret->payload, "include", inc);
        if (exc)
                json_object_set(ret->payload, "exclude", exc);
        r = 0;
out:
        json_decref(j);
        return r;
}

/* ---- code interpreter ---- */

static int language_field(json_t *v, json_t *out, struct cella_error *err)
{
        const char *s;

        if (!v || json_is_null(v))
                return 0;
        s = json_is_string(v) ? json_string_value(v) : "";
        if (strcmp(s, "python") != 0 && strcmp(s, "javascript") != 0 &&
            strcmp(s, "typescript") != 0)
                return invalid(err, "language must be python, javascript or typescript");
        return json_object_set_new(out, "language", json_string(s)) < 0 ? -ENOMEM : 0;
}

int api_decode_context_create(const char *body, size_t len, json_t **ret, struct cella_error *err)
{
        json_t *j, *lang = NULL, *cwd = NULL, *env = NULL, *out = NULL;
        char path[CELLA_PATH_MAX + 1];
        json_error_t je;
        int r = -EINVAL;

        *ret = NULL;
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s?o, s?o, s?o}", "language", &lang, "cwd", &cwd,
                           "env", &env) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        out = json_pack("{s:s, s:s}", "op", "create", "language", "python");
        if (!out) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        if (language_field(lang, out, err) < 0)
                goto out;
        if (cwd && !json_is_null(cwd)) {
                if (!json_is_string(cwd)) {
                        invalid(err, "cwd must be a string");
                        goto out;
                }
                if (path_field(cwd, "cwd", path, err) < 0)
                        goto out;
                json_object_set_new(out, "cwd", json_string(path));
        }
        if (env && !json_is_null(env)) {
                if (api_check_string_object(env, "env", CELLA_EXEC_MAX_ENV, err) < 0)
                        goto out;
                json_object_set(out, "env", env);
        }
        *ret = TAKE_PTR(out);
        r = 0;
out:
        json_decref(out);
        json_decref(j);
        return r;
}

int api_decode_code_run(const char *body, size_t len, json_t **ret, struct cella_error *err)
{
        json_t *j, *code = NULL, *ctx = NULL, *lang = NULL, *timeout = NULL, *out = NULL;
        json_error_t je;
        int r = -EINVAL;

        *ret = NULL;
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:o, s?o, s?o, s?o}", "code", &code, "contextId",
                           &ctx, "language", &lang, "timeout", &timeout) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (!json_is_string(code) || has_nul(code)) {
                invalid(err, "code must be a string without NUL characters");
                goto out;
        }
        if (json_string_length(code) > CELLA_CODE_MAX_CODE) {
                invalid(err, "code is longer than %d bytes", CELLA_CODE_MAX_CODE);
                goto out;
        }
        out = json_pack("{s:s, s:O}", "op", "run", "code", code);
        if (!out) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        if (ctx && !json_is_null(ctx)) {
                if (!json_is_string(ctx) || has_nul(ctx) ||
                    !cella_id_is_valid(json_string_value(ctx))) {
                        invalid(err, "contextId must be 1-%d characters of [A-Za-z0-9_.-]",
                                CELLA_ID_MAX);
                        goto out;
                }
                json_object_set(out, "id", ctx);
        }
        if (language_field(lang, out, err) < 0 ||
            ms_field(timeout, "timeout", 0, CELLA_EXEC_MAX_TIMEOUT_MS, out, "timeoutMs", err) < 0)
                goto out;
        *ret = TAKE_PTR(out);
        r = 0;
out:
        json_decref(out);
        json_decref(j);
        return r;
}

int api_decode_pty_control(const char *body, size_t len, struct api_pty_control *ret,
                           struct cella_error *err)
{
        json_t *j;
        const char *type = NULL;
        json_int_t cols = 0, rows = 0;
        json_error_t je;
        int r = -EINVAL;

        memset(ret, 0, sizeof(*ret));
        j = load_object(body, len, err);
        if (!j)
                return -EINVAL;
        if (json_unpack_ex(j, &je, 0, "{s:s}", "type", &type) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (strcmp(type, "resize") != 0) {
                invalid(err, "unknown control message type '%.32s' (expected resize)", type);
                goto out;
        }
        if (json_unpack_ex(j, &je, JSON_STRICT, "{s:s, s:I, s:I}", "type", &type, "cols", &cols,
                           "rows", &rows) < 0) {
                unpack_fail(&je, err);
                goto out;
        }
        if (cols < 1 || cols > CELLA_PTY_MAX_DIM || rows < 1 || rows > CELLA_PTY_MAX_DIM) {
                invalid(err, "cols and rows must be from 1 to %d", CELLA_PTY_MAX_DIM);
                goto out;
        }
        ret->cols = (unsigned)cols;
        ret->rows = (unsigned)rows;
        r = 0;
out:
        json_decref(j);
        return r;
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
