/* JSON-RPC 2.0 messages of MCP: a strict, bounded decoder and the encoders of answers.
 *
 * A message is one JSON object (MCP sends no batches): a request {jsonrpc, id, method,
 * params?}, a notification {jsonrpc, method, params?} or a response {jsonrpc, id, result}
 * / {jsonrpc, id, error}. Ids are strings or integers (MCP forbids null); params, when
 * present, is an object. Anything else is a protocol fault with the code JSON-RPC gives it:
 * -32700 for text that is not JSON, -32600 for JSON that is not a message. */
#ifndef CELLA_MCP_JSONRPC_H
#define CELLA_MCP_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

enum {
        JSONRPC_PARSE_ERROR = -32700,
        JSONRPC_INVALID_REQUEST = -32600,
        JSONRPC_METHOD_NOT_FOUND = -32601,
        JSONRPC_INVALID_PARAMS = -32602,
        JSONRPC_INTERNAL_ERROR = -32603,
        MCP_RESOURCE_NOT_FOUND = -32002,
};

enum jsonrpc_kind {
        JSONRPC_REQUEST,
        JSONRPC_NOTIFICATION,
        JSONRPC_RESPONSE,
};

/* A decoded message. Invariants: root owns everything; id is NULL only for a
 * notification (and for a fault whose id could not be read); method is NULL only for a
 * response; params is an object or NULL. */
struct jsonrpc_msg {
        enum jsonrpc_kind kind;
        json_t *root;
        json_t *id;         /* borrowed from root: a string or an integer */
        const char *method; /* borrowed from root */
        json_t *params;     /* borrowed from root */
        json_t *result;     /* response: result or error object, borrowed */
        int is_error;       /* response: an error response */
};

/* Decode len bytes (at most CELLA_MCP_MAX_MESSAGE, UTF-8, no NUL). 0 and *ret filled (the
 * caller calls jsonrpc_msg_clear), or a JSON-RPC error code (< 0) with a message in errmsg
 * and, when the id could be read, a new reference to it in *ret_id (else NULL). */
int jsonrpc_decode(const char *text, size_t len, struct jsonrpc_msg *ret, json_t **ret_id,
                   char *errmsg, size_t errlen);
void jsonrpc_msg_clear(struct jsonrpc_msg *m);

/* Encoders: new JSON objects (NULL without memory). id is borrowed and may be NULL (then
 * null, for a fault about a message without a readable id); result and data are taken. */
json_t *jsonrpc_result(json_t *id, json_t *take_result);
json_t *jsonrpc_error(json_t *id, int code, const char *message, json_t *take_data);
json_t *jsonrpc_notification(const char *method, json_t *take_params);

/* The compact one-line text of a message (no newline inside: jansson escapes control
 * characters), malloc'd, or NULL. */
char *jsonrpc_dump(const json_t *msg);

#endif
