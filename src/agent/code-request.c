/* Decoders for the code interpreter; see code-request.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/code-request.h"
#include "agent/request.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/utf8.h"

const char *code_lang_name(enum code_lang l)
{
        for (size_t i = 0; wire_code_langs[i]; i++)
                if (i == (size_t)l)
                        return wire_code_langs[i];
        return "?";
}

int code_lang_parse(const char *s, enum code_lang *ret)
{
        for (size_t i = 0; wire_code_langs[i]; i++)
                if (strcmp(s, wire_code_langs[i]) == 0) {
                        *ret = (enum code_lang)i;
                        return 0;
                }
        return -EINVAL;
}

void code_request_done(struct code_request *r)
{
        context_spec_done(&r->ctx);
        free(r->code);
        memset(r, 0, sizeof(*r));
}

/* The body's members come from wire_code_decode (common/wire.c), which checks their types
 * and bounds; here they become the request's own strings: a create's place (the cwd
 * normalised, the env's names checked as they are converted) by context_spec, as a
 * session's. */
int code_request_decode(json_t *body, struct code_request *r, struct cella_error *err)
{
        struct wire_code x;
        int k;

        memset(r, 0, sizeof(*r));
        if (!json_is_object(body)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "CODE payload must be an object");
                return -EINVAL;
        }
        k = wire_code_decode(body, &x, err);
        if (k < 0)
                return k;
        r->op = (enum code_op)x.op;
        r->language = (enum code_lang)x.language;
        r->language_given = x.language_given;
        r->timeout_ms = x.timeout_ms;
        if ((x.id && !(r->ctx.id = strdup(x.id))) || (x.code && !(r->code = strdup(x.code)))) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -ENOMEM;
        }
        if (r->op == CODE_OP_CREATE)
                return context_spec_decode_place(body, &r->ctx, err);
        if (r->op == CODE_OP_RUN)
                return agent_decode_env(x.base_env, "baseEnv", &r->ctx.base_env, &r->ctx.n_base_env,
                                        err);
        return 0;
}

/* ---- runner events ---- */

void code_event_done(struct code_event *ev)
{
        json_decref(ev->result);
        json_decref(ev->traceback);
        free(ev->name);
        free(ev->message);
        memset(ev, 0, sizeof(*ev));
}

/* A string field cut to max bytes at a character boundary; "" when absent. */
static int text_field(json_t *o, const char *key, size_t max, char **ret, struct cella_error *err)
{
        json_t *v = json_object_get(o, key);
        const char *s = "";
        size_t n = 0;

        if (v && !json_is_string(v)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "event field '%s' is not a string",
                                key);
                return -EINVAL;
        }
        if (v) {
                s = json_string_value(v);
                n = json_string_length(v);
        }
        if (n > max)
                n = utf8_complete_prefix(s, max);
        *ret = strndup(s, n);
        if (!*ret) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        return 0;
}

static bool is_base64(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                char c = s[i];

                if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '+' || c == '/' || c == '=' || c == '\n'))
                        return false;
        }
        return true;
}

static int decode_result(json_t *ev, struct code_event *ret, struct cella_error *err)
{
        static const char *const text_keys[] = {"text",  "html", "markdown",
                                                "latex", "svg",  "javascript"};
        static const char *const b64_keys[] = {"png", "jpeg"};
        json_t *in = json_object_get(ev, "result"), *v;

        if (!json_is_object(in)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "result event without a result");
                return -EINVAL;
        }
        ret->result = json_object();
        if (!ret->result) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        for (size_t i = 0; i < ARRAY_SIZE(text_keys); i++) {
                v = json_object_get(in, text_keys[i]);
                if (json_is_string(v) && strlen(json_string_value(v)) == json_string_length(v))
                        json_object_set(ret->result, text_keys[i], v);
        }
        for (size_t i = 0; i < ARRAY_SIZE(b64_keys); i++) {
                v = json_object_get(in, b64_keys[i]);
                if (json_is_string(v) && is_base64(json_string_value(v), json_string_length(v)))
                        json_object_set(ret->result, b64_keys[i], v);
        }
        v = json_object_get(in, "json");
        if (v)
                json_object_set(ret->result, "json", v);
        v = json_object_get(in, "isMainResult");
        if (json_is_boolean(v))
                json_object_set(ret->result, "isMainResult", v);
        return 0;
}

static int decode_error(json_t *ev, struct code_event *ret, struct cella_error *err)
{
        json_t *tb = json_object_get(ev, "traceback"), *line;
        size_t i;

        if (text_field(ev, "name", CELLA_CODE_MAX_TEXT, &ret->name, err) < 0 ||
            text_field(ev, "message", CELLA_CODE_MAX_LINE, &ret->message, err) < 0)
                return -EINVAL;
        ret->traceback = json_array();
        if (!ret->traceback) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        if (tb && !json_is_array(tb)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "traceback is not an array");
                return -EINVAL;
        }
        json_array_foreach(tb, i, line)
        {
                if (i >= CELLA_CODE_MAX_TRACEBACK)
                        break;
                if (!json_is_string(line)) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "traceback line %zu is not a string", i);
                        return -EINVAL;
                }
                json_array_append(ret->traceback, line);
        }
        return 0;
}

static int get_int(json_t *ev, const char *key, int64_t *ret, struct cella_error *err)
{
        json_t *v = json_object_get(ev, key);

        if (!json_is_integer(v) || json_integer_value(v) < 0) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "event field '%s' must be a non-negative integer", key);
                return -EINVAL;
        }
        *ret = json_integer_value(v);
        return 0;
}

int code_event_decode(const char *line, size_t len, struct code_event *ret, struct cella_error *err)
{
        _cleanup_json_ json_t *ev = NULL;
        const char *type;

        memset(ret, 0, sizeof(*ret));
        ev = json_loadb(line, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(ev) || !json_is_string(json_object_get(ev, "type"))) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "not an event object");
                return -EINVAL;
        }
        type = json_string_value(json_object_get(ev, "type"));
        if (strcmp(type, "ready") == 0) {
                ret->type = CODE_EV_READY;
                return 0;
        }
        if (strcmp(type, "setup_ok") == 0) {
                ret->type = CODE_EV_SETUP_OK;
                return 0;
        }
        if (strcmp(type, "setup_error") == 0) {
                ret->type = CODE_EV_SETUP_ERROR;
                return text_field(ev, "message", CELLA_CODE_MAX_TEXT, &ret->message, err);
        }
        if (strcmp(type, "result") == 0) {
                ret->type = CODE_EV_RESULT;
                if (get_int(ev, "id", &ret->id, err) < 0)
                        return -EINVAL;
                return decode_result(ev, ret, err);
        }
        if (strcmp(type, "error") == 0) {
                ret->type = CODE_EV_ERROR;
                if (get_int(ev, "id", &ret->id, err) < 0)
                        return -EINVAL;
                return decode_error(ev, ret, err);
        }
        if (strcmp(type, "done") == 0) {
                ret->type = CODE_EV_DONE;
                if (get_int(ev, "id", &ret->id, err) < 0)
                        return -EINVAL;
                if (json_object_get(ev, "executionCount"))
                        return get_int(ev, "executionCount", &ret->execution_count, err);
                return 0;
        }
        ret->type = CODE_EV_UNKNOWN;
        return 0;
}
