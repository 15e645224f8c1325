/* Table-driven decoding of the API's JSON request bodies (docs/decisions/0039).
 *
 * Every request body is described by a table of its fields, one row each: the name, how
 * jansson unpacks it ("?o" optional, ":o" required, "?b" an optional boolean whose type
 * jansson checks), the check that validates the value and stores it, and that check's
 * parameters (message, bounds, destination). field_walk() unpacks the body strictly with
 * the format the table spells, so a missing field, a wrongly typed boolean and an unknown
 * field get jansson's own messages, then runs the checks in table order: the first error
 * wins.
 *
 * The checks here are the shapes that recur across requests; a check of one field of one
 * request lives with that request in api-decode.c. Each check takes the field's row, the
 * value (NULL only under F_ALWAYS), the whole body (for checks that look at a sibling) and
 * the destination, and returns 0, -EINVAL with err set, or -ENOMEM. */
#ifndef CELLA_DAEMON_API_FIELD_H
#define CELLA_DAEMON_API_FIELD_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/limits.h"

enum {
        F_NULL_ABSENT = 1 << 0, /* null is the same as absent */
        F_ALWAYS = 1 << 1,      /* check also when absent (v is NULL): defaults */
        F_INLINE = 1 << 2,      /* a path stored into char[CELLA_PATH_MAX + 1] at off */
        F_STRING = 1 << 3,      /* a path: msg (with the name) if not a string */
        F_REAL_WHOLE = 1 << 4,  /* a number: also a real with an integral value */
        F_REAL_TRUNC = 1 << 5,  /* a number: also a real in lo..hi, truncated */
        F_NOT_DIGITS = 1 << 6,  /* an id: not only digits */
        F_ONE_MSG = 1 << 7,     /* a command: msg for every fault (with the limit) */
};

struct field;
typedef int (*field_check)(const struct field *f, json_t *v, json_t *body, void *dst,
                           struct cella_error *err);

struct field {
        const char *name;
        const char *unpack;
        field_check check; /* NULL: the unpacking is the whole check */
        unsigned flags;
        size_t off;                /* destination in a struct dst */
        size_t has;                /* 1 + offset of a bool set when the field is given */
        const char *msg;           /* the error message (format: see each check) */
        int64_t lo, hi;            /* bounds (and the default of a boolean in lo) */
        const char *const *one_of; /* field_chk_enum: NULL-terminated */
        const char *with;          /* field_chk_path: a field that must be a string too */
        int code;                  /* the error code; 0: VALIDATION_FAILED */
        int (*valid)(const char *s, size_t len, struct cella_error *err); /* field_chk_git */
};

#define FIELD_MAX 12
#define FIELD_AT(dst, f, type) ((type *)((char *)(dst) + (f)->off))

/* The body as a JSON object (at most CELLA_FILES_JSON_MAX bytes); NULL with err set. */
json_t *field_load_object(const char *body, size_t len, struct cella_error *err);
/* jansson's unpack error as "invalid request: ..."; returns -EINVAL. */
int field_unpack_fail(const json_error_t *je, struct cella_error *err);
bool field_has_nul(json_t *s);
/* A NUL-free string of at most max bytes copied into *ret (NULL s: *ret = NULL). */
int field_str(json_t *s, const char *what, size_t max, char **ret, struct cella_error *err);
/* s (a string) as a normalised sandbox path into out; errors are prefixed with what. */
int field_path(json_t *s, const char *what, char out[CELLA_PATH_MAX + 1], struct cella_error *err);

/* Field f's error: f->msg formatted with the arguments its check documents; -EINVAL. */
int field_fail(const struct field *f, struct cella_error *err, ...);
/* Store a value at f->off: a json_t * reference / a strdup'ed string. */
int field_put_json(const struct field *f, void *dst, json_t *v);
int field_put_string(const struct field *f, void *dst, const char *s);

/* Unpack j strictly as table t says, then run its checks in order into dst. */
int field_walk(json_t *j, const struct field *t, size_t n, void *dst, struct cella_error *err);
/* field_load_object, then field_walk. */
int field_decode(const char *body, size_t len, const struct field *t, size_t n, void *dst,
                 struct cella_error *err);

/* The shared checks; what each takes from its row is at its definition. */
int field_chk_bool(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err);
int field_chk_enum(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err);
int field_chk_number(const struct field *f, json_t *v, json_t *body, void *dst,
                     struct cella_error *err);
int field_chk_id(const struct field *f, json_t *v, json_t *body, void *dst,
                 struct cella_error *err);
int field_chk_path(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err);
int field_chk_text(const struct field *f, json_t *v, json_t *body, void *dst,
                   struct cella_error *err);
int field_chk_command(const struct field *f, json_t *v, json_t *body, void *dst,
                      struct cella_error *err);
int field_chk_git(const struct field *f, json_t *v, json_t *body, void *dst,
                  struct cella_error *err);

#endif
