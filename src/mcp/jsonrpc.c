#include <string.h>

#include "common/limits.h"
#include "common/utf8.h"
#include "mcp/jsonrpc.h"

static int fault(int code, char *errmsg, size_t errlen, const char *msg)
{
        snprintf(errmsg, errlen, "%s", msg);
        return code;
}

static bool is_id(const json_t *id)
{
        return json_is_string(id) || json_is_integer(id);
}

int jsonrpc_decode(const char *text, size_t len, struct jsonrpc_msg *ret, json_t **ret_id,
                   char *errmsg, size_t errlen)
{
        json_error_t jerr;
        json_t *root, *v, *id, *method, *params, *result, *error;
        const char *key;

        *ret_id = NULL;
        if (len > CELLA_MCP_MAX_MESSAGE)
                return fault(JSONRPC_PARSE_ERROR, errmsg, errlen, "message too large");
        if (memchr(text, '\0', len) || !utf8_is_valid(text, len))
                return fault(JSONRPC_PARSE_ERROR, errmsg, errlen, "message is not UTF-8 text");
        root = json_loadb(text, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &jerr);
        if (!root) {
                snprintf(errmsg, errlen, "parse error: %s (offset %d)", jerr.text, jerr.position);
                return JSONRPC_PARSE_ERROR;
        }
        if (json_is_array(root)) {
                json_decref(root);
                return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                             "batches are not part of MCP: send one message at a time");
        }
        if (!json_is_object(root)) {
                json_decref(root);
                return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen, "a message is a JSON object");
        }
        id = json_object_get(root, "id");
        if (id && is_id(id))
                *ret_id = json_incref(id);
        v = json_object_get(root, "jsonrpc");
        if (!json_is_string(v) || strcmp(json_string_value(v), "2.0") != 0) {
                json_decref(root);
                return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                             "\"jsonrpc\" must be \"2.0\"");
        }
        json_object_foreach(root, key, v)
        {
                if (strcmp(key, "jsonrpc") && strcmp(key, "id") && strcmp(key, "method") &&
                    strcmp(key, "params") && strcmp(key, "result") && strcmp(key, "error")) {
                        snprintf(errmsg, errlen, "unknown member \"%.64s\"", key);
                        json_decref(root);
                        return JSONRPC_INVALID_REQUEST;
                }
        }
        if (id && !is_id(id)) {
                json_decref(root);
                return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                             "\"id\" must be a string or an integer");
        }
        method = json_object_get(root, "method");
        params = json_object_get(root, "params");
        result = json_object_get(root, "result");
        error = json_object_get(root, "error");
        memset(ret, 0, sizeof(*ret));
        if (method) {
                if (!json_is_string(method) || json_string_length(method) == 0) {
                        json_decref(root);
                        return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                                     "\"method\" must be a non-empty string");
                }
                if (result || error) {
                        json_decref(root);
                        return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                                     "a request has no \"result\" or \"error\"");
                }
                if (params && !json_is_object(params)) {
                        json_decref(root);
                        return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                                     "\"params\" must be an object");
                }
                ret->kind = id ? JSONRPC_REQUEST : JSONRPC_NOTIFICATION;
                ret->method = json_string_value(method);
                ret->params = params;
        } else {
                if (!id || params || (!result == !error) || (error && !json_is_object(error))) {
                        json_decref(root);
                        return fault(JSONRPC_INVALID_REQUEST, errmsg, errlen,
                                     "neither a request nor a response");
                }
                ret->kind = JSONRPC_RESPONSE;
                ret->result = result ? result : error;
                ret->is_error = error != NULL;
        }
        ret->root = root;
        ret->id = id;
        if (*ret_id) {
                json_decref(*ret_id);
                *ret_id = NULL;
        }
        return 0;
}

void jsonrpc_msg_clear(struct jsonrpc_msg *m)
{
        json_decref(m->root);
        memset(m, 0, sizeof(*m));
}

json_t *jsonrpc_result(json_t *id, json_t *take_result)
{
        json_t *m = json_object();

        if (!m || !take_result) {
                json_decref(m);
                json_decref(take_result);
                return NULL;
        }
        json_object_set_new(m, "jsonrpc", json_string("2.0"));
        json_object_set(m, "id", id ? id : json_null());
        json_object_set_new(m, "result", take_result);
        return m;
}

json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *take_data)
{
        json_t *m = json_object(), *e = json_object();

        if (!m || !e) {
                json_decref(m);
                json_decref(e);
                json_decref(take_data);
                return NULL;
        }
        json_object_set_new(e, "code", json_integer(code));
        json_object_set_new(e, "message", json_string(message));
        if (take_data)
                json_object_set_new(e, "data", take_data);
        json_object_set_new(m, "jsonrpc", json_string("2.0"));
        json_object_set(m, "id", id ? id : json_null());
        json_object_set_new(m, "error", e);
        return m;
}

json_t *jsonrpc_notification(const char *method, json_t *take_params)
{
        json_t *m = json_object();

        if (!m) {
                json_decref(take_params);
                return NULL;
        }
        json_object_set_new(m, "jsonrpc", json_string("2.0"));
        json_object_set_new(m, "method", json_string(method));
        if (take_params)
                json_object_set_new(m, "params", take_params);
        return m;
}

char *jsonrpc_dump(const json_t *msg)
{
        return json_dumps(msg, JSON_COMPACT | JSON_ENSURE_ASCII);
}
