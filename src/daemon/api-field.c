/* The field walker and the shared checks; see api-field.h. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/name.h"
#include "common/path.h"
#include "common/validate.h"
#include "daemon/api-field.h"

/* Parse body as a JSON object. JSON_ALLOW_NUL keeps \u0000 in file contents; every string
 * that names something is checked for NULs separately. */
json_t *field_load_object(const char *body, size_t len, struct cella_error *err)
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

int field_unpack_fail(const json_error_t *je, struct cella_error *err)
{
        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "invalid request: %s", je->text);
        return -EINVAL;
}

bool field_has_nul(json_t *s)
{
        return strlen(json_string_value(s)) != json_string_length(s);
}

int field_str(json_t *s, const char *what, size_t max, char **ret, struct cella_error *err)
{
        if (!s) {
                *ret = NULL;
                return 0;
        }
        if (field_has_nul(s))
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

int field_path(json_t *s, const char *what, char out[CELLA_PATH_MAX + 1], struct cella_error *err)
{
        struct cella_error e = {0};

        if (sandbox_path_normalize(json_string_value(s), json_string_length(s), out,
                                   CELLA_PATH_MAX + 1, &e) < 0)
                return cella_error_set(err, e.code, "%s: %s", what, e.msg), -EINVAL;
        return 0;
}

/* The error of field f: its message formatted with the arguments each check documents.
 * The formats are the tables' literals in this file, never input. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
int field_fail(const struct field *f, struct cella_error *err, ...)
{
        va_list ap;

        va_start(ap, err);
        cella_error_setv(err, f->code ? f->code : CELLA_E_VALIDATION_FAILED, f->msg, ap);
        va_end(ap);
        return -EINVAL;
}
#pragma GCC diagnostic pop

int field_put_json(const struct field *f, void *dst, json_t *v)
{
        *FIELD_AT(dst, f, json_t *) = json_incref(v);
        return 0;
}

int field_put_string(const struct field *f, void *dst, const char *s)
{
        *FIELD_AT(dst, f, char *) = strdup(s);
        return *FIELD_AT(dst, f, char *) ? 0 : -ENOMEM;
}

int field_walk(json_t *j, const struct field *t, size_t n, void *dst, struct cella_error *err)
{
        union {
                json_t *o;
                int b;
        } v[FIELD_MAX];
        char fmt[2 + 3 * FIELD_MAX + 1];
        json_error_t je;
        size_t i, k = 0;

        if (n > FIELD_MAX)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "field table too long"),
                       -EINVAL;
        fmt[k++] = '{';
        for (i = 0; i < n; i++) {
                fmt[k++] = 's';
                fmt[k++] = t[i].unpack[0];
                fmt[k++] = t[i].unpack[1];
        }
        fmt[k++] = '}';
        fmt[k] = '\0';
        /* jansson takes as many (key, destination) pairs as the format names */
#define P(i) ((i) < n ? t[i].name : NULL), &v[i]
        if (json_unpack_ex(j, &je, JSON_STRICT, fmt, P(0), P(1), P(2), P(3), P(4), P(5), P(6), P(7),
                           P(8), P(9), P(10), P(11)) < 0)
                return field_unpack_fail(&je, err);
#undef P
        for (i = 0; i < n; i++) {
                json_t *x = json_object_get(j, t[i].name);
                int r;

                if (x && json_is_null(x) && (t[i].flags & F_NULL_ABSENT))
                        x = NULL;
                if (!t[i].check || (!x && !(t[i].flags & F_ALWAYS)))
                        continue;
                r = t[i].check(&t[i], x, j, dst, err);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Parse body and walk table t over it into dst. */
int field_decode(const char *body, size_t len, const struct field *t, size_t n, void *dst,
                 struct cella_error *err)
{
        _cleanup_json_ json_t *j = field_load_object(body, len, err);

        return j ? field_walk(j, t, n, dst, err) : -EINVAL;
}

/* ---- the checks (v is the field's value, present unless F_ALWAYS) ---- */

/* A boolean jansson already typed ("?b"); absent under F_ALWAYS: the default in lo. */
int field_chk_bool(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err)
{
        bool b = v ? json_is_true(v) : f->lo != 0;

        (void)body;
        if (v && !json_is_boolean(v))
                return field_fail(f, err); /* "?o" fields: msg without arguments */
        *FIELD_AT(dst, f, bool) = b;
        if (f->has)
                *(bool *)((char *)dst + f->has - 1) = true;
        return 0;
}

/* One of f->one_of, exactly. msg: no arguments. */
int field_chk_enum(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err)
{
        const char *const *o;

        (void)body;
        for (o = f->one_of; json_is_string(v) && *o; o++)
                if (strlen(*o) == json_string_length(v) && strcmp(*o, json_string_value(v)) == 0)
                        return field_put_string(f, dst, *o);
        return field_fail(f, err);
}

/* An integer in lo..hi (F_REAL_WHOLE: or a real with such an integral value; F_REAL_TRUNC:
 * or a real in lo..hi, truncated). msg: name, lo, hi. */
int field_chk_number(const struct field *f, json_t *v, json_t *body, void *dst,
                     struct cella_error *err)
{
        double d = json_is_real(v) ? json_real_value(v) : -1.0;
        int64_t n = f->lo - 1;

        (void)body;
        if (json_is_integer(v))
                n = json_integer_value(v);
        else if (json_is_real(v) && d >= (double)f->lo && d <= (double)f->hi &&
                 ((f->flags & F_REAL_TRUNC) ||
                  ((f->flags & F_REAL_WHOLE) && d == (double)(int64_t)d)))
                n = (int64_t)d;
        if (n < f->lo || n > f->hi)
                return field_fail(f, err, f->name, (long long)f->lo, (long long)f->hi);
        *FIELD_AT(dst, f, int64_t) = n;
        return 0;
}

/* An id (common/name.h). msg: name, CELLA_ID_MAX. */
int field_chk_id(const struct field *f, json_t *v, json_t *body, void *dst, struct cella_error *err)
{
        const char *s = json_string_value(v);

        (void)body;
        if (!s || field_has_nul(v) || !cella_id_is_valid(s) ||
            ((f->flags & F_NOT_DIGITS) && strspn(s, "0123456789") == json_string_length(v)))
                return field_fail(f, err, f->name, CELLA_ID_MAX);
        return field_put_string(f, dst, s);
}

/* A sandbox path, normalised; F_STRING: msg (name) if not a string (nor f->with). */
int field_chk_path(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err)
{
        char path[CELLA_PATH_MAX + 1];

        if ((f->flags & F_STRING) &&
            (!json_is_string(v) || (f->with && !json_is_string(json_object_get(body, f->with)))))
                return field_fail(f, err, f->name);
        if (field_path(v, f->name, path, err) < 0)
                return -EINVAL;
        if (f->flags & F_INLINE) {
                memcpy(FIELD_AT(dst, f, char), path, strlen(path) + 1);
                return 0;
        }
        return field_put_string(f, dst, path);
}

/* A non-empty NUL-free string of at most hi bytes, copied. msg: hi. */
int field_chk_text(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err)
{
        (void)body;
        if (!json_is_string(v) || json_string_length(v) == 0 || field_has_nul(v) ||
            json_string_length(v) > (size_t)f->hi)
                return field_fail(f, err, (int)f->hi);
        return field_put_string(f, dst, json_string_value(v));
}

/* A command for the shell (common/validate.h). F_ONE_MSG: msg (the limit) for every fault;
 * otherwise msg (no arguments) for a non-string or an empty one, then what is wrong. */
int field_chk_command(const struct field *f, json_t *v, json_t *body, void *dst,
                      struct cella_error *err)
{
        const char *s = json_string_value(v);
        size_t n = json_string_length(v);

        (void)body;
        if (command_is_valid(s, n))
                return field_put_string(f, dst, s);
        if (!s || n == 0 || (f->flags & F_ONE_MSG))
                return field_fail(f, err, CELLA_EXEC_MAX_COMMAND);
        if (field_has_nul(v))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "command contains a NUL byte"),
                       -EINVAL;
        return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "command is longer than %zu bytes",
                               (size_t)CELLA_EXEC_MAX_COMMAND),
               -EINVAL;
}

/* A git URL or branch: msg (no arguments) if not a string, then f->valid, then at most hi
 * bytes. */
int field_chk_git(const struct field *f, json_t *v, json_t *body, void *dst,
                  struct cella_error *err)
{
        (void)body;
        if (!json_is_string(v))
                return field_fail(f, err);
        if (f->valid(json_string_value(v), json_string_length(v), err) < 0)
                return -EINVAL;
        return field_str(v, f->name, (size_t)f->hi, FIELD_AT(dst, f, char *), err);
}
