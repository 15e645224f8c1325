#include <stdio.h>
#include <string.h>

#include "mcp/schema.h"

static bool type_is(const char *type, const json_t *v)
{
        if (strcmp(type, "object") == 0)
                return json_is_object(v);
        if (strcmp(type, "string") == 0)
                return json_is_string(v);
        if (strcmp(type, "integer") == 0)
                return json_is_integer(v);
        if (strcmp(type, "number") == 0)
                return json_is_number(v);
        if (strcmp(type, "boolean") == 0)
                return json_is_boolean(v);
        if (strcmp(type, "array") == 0)
                return json_is_array(v);
        if (strcmp(type, "null") == 0)
                return json_is_null(v);
        return true;
}

static bool fail(char *errmsg, size_t errlen, const char *where, const char *what)
{
        snprintf(errmsg, errlen, "%s: %s", where, what);
        return false;
}

bool schema_check(const json_t *schema, const json_t *value, const char *where, char *errmsg,
                  size_t errlen)
{
        const json_t *t = json_object_get(schema, "type"), *e, *p, *item;
        const char *key;
        json_t *v;
        char sub[256], what[320];
        size_t i;

        if (json_is_string(t) && !type_is(json_string_value(t), value)) {
                snprintf(what, sizeof(what), "must be %s %s",
                         strchr("aeiou", json_string_value(t)[0]) ? "an" : "a",
                         json_string_value(t));
                return fail(errmsg, errlen, where, what);
        }
        e = json_object_get(schema, "enum");
        if (json_is_array(e)) {
                bool found = false;

                json_array_foreach(e, i, item) found = found || json_equal(item, value);
                if (!found) {
                        char *list = json_dumps(e, JSON_COMPACT);

                        snprintf(what, sizeof(what), "must be one of %s", list ? list : "[]");
                        free(list);
                        return fail(errmsg, errlen, where, what);
                }
        }
        if (json_is_number(value)) {
                const json_t *min = json_object_get(schema, "minimum"),
                             *max = json_object_get(schema, "maximum");

                if (json_is_number(min) && json_number_value(value) < json_number_value(min)) {
                        snprintf(what, sizeof(what), "must be at least %g", json_number_value(min));
                        return fail(errmsg, errlen, where, what);
                }
                if (json_is_number(max) && json_number_value(value) > json_number_value(max)) {
                        snprintf(what, sizeof(what), "must be at most %g", json_number_value(max));
                        return fail(errmsg, errlen, where, what);
                }
        }
        if (json_is_string(value)) {
                const json_t *min = json_object_get(schema, "minLength"),
                             *max = json_object_get(schema, "maxLength");
                size_t n = json_string_length(value);

                if (json_is_integer(min) && (json_int_t)n < json_integer_value(min)) {
                        snprintf(what, sizeof(what), "must be at least %lld characters",
                                 (long long)json_integer_value(min));
                        return fail(errmsg, errlen, where, what);
                }
                if (json_is_integer(max) && (json_int_t)n > json_integer_value(max)) {
                        snprintf(what, sizeof(what), "must be at most %lld characters",
                                 (long long)json_integer_value(max));
                        return fail(errmsg, errlen, where, what);
                }
        }
        if (json_is_array(value)) {
                item = json_object_get(schema, "items");
                if (json_is_object(item))
                        json_array_foreach(value, i, v)
                        {
                                snprintf(sub, sizeof(sub), "%.200s[%zu]", where, i);
                                if (!schema_check(item, v, sub, errmsg, errlen))
                                        return false;
                        }
        }
        if (json_is_object(value)) {
                p = json_object_get(schema, "required");
                if (json_is_array(p))
                        json_array_foreach(p, i, item)
                        {
                                if (json_is_string(item) &&
                                    !json_object_get(value, json_string_value(item))) {
                                        snprintf(what, sizeof(what),
                                                 "missing required property \"%.64s\"",
                                                 json_string_value(item));
                                        return fail(errmsg, errlen, where, what);
                                }
                        }
                p = json_object_get(schema, "properties");
                json_object_foreach((json_t *)value, key, v)
                {
                        const json_t *ps = json_is_object(p) ? json_object_get(p, key) : NULL;

                        snprintf(sub, sizeof(sub), "%.160s.%.64s", where, key);
                        if (!ps) {
                                if (json_is_false(
                                            json_object_get(schema, "additionalProperties"))) {
                                        snprintf(what, sizeof(what), "unknown property \"%.64s\"",
                                                 key);
                                        return fail(errmsg, errlen, where, what);
                                }
                                continue;
                        }
                        if (!schema_check(ps, v, sub, errmsg, errlen))
                                return false;
                }
        }
        return true;
}
