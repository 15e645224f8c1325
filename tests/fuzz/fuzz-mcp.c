/* Fuzz the MCP engine's decoders (src/mcp): the JSON-RPC message decoder, the argument
 * check of every tool's input schema, and the cella:// resource URI parser.
 *
 * Invariants: a decoded message has the shape jsonrpc.h promises (a request has an id and
 * a method, a notification a method and no id, a response an id and a result or error
 * object; params is an object or absent; ids are strings or integers); a fault has one of
 * the JSON-RPC codes and a message, and an id only when it is a string or an integer; the
 * schema check says yes or no with a message; a parsed URI names a valid sandbox and an
 * absolute path without NUL. The input is also a Last-Event-ID of /mcp: one that parses is
 * digits with at most one dash and a non-zero stream after it, and is written back the
 * same (but for leading zeros). */
#include <string.h>

#include "common/name.h"
#include "fuzz.h"
#include "mcp/event-id.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp-internal.h"
#include "mcp/schema.h"

static void check_uri(const char *uri)
{
        char sandbox[CELLA_NAME_MAX + 1], path[4096], norm[CELLA_NAME_MAX + 1];
        struct cella_error err = {0};

        if (mcp_uri_parse(uri, sandbox, sizeof(sandbox), path, sizeof(path)) < 0)
                return;
        FUZZ_CHECK(sandbox_name_check(sandbox, strlen(sandbox), false, norm, &err) == 0);
        FUZZ_CHECK(path[0] == '/' && strlen(path) >= 2);
}

static void check_event_id(const uint8_t *data, size_t size)
{
        char text[64], again[MCP_EVENT_ID_MAX];
        uint64_t ev, st, ev2, st2;

        if (size >= sizeof(text))
                return;
        memcpy(text, data, size);
        text[size] = '\0';
        if (mcp_event_id_parse(text, &ev, &st) < 0)
                return;
        FUZZ_CHECK(strlen(text) == size && strspn(text, "0123456789-") == size);
        FUZZ_CHECK(strchr(text, '-') == strrchr(text, '-'));
        FUZZ_CHECK(!strchr(text, '-') == (st == 0));
        mcp_event_id_format(again, sizeof(again), ev, st);
        FUZZ_CHECK(mcp_event_id_parse(again, &ev2, &st2) == 0 && ev2 == ev && st2 == st);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct jsonrpc_msg m;
        json_t *id = NULL, *args;
        char errmsg[256];
        int r;

        check_event_id(data, size);
        r = jsonrpc_decode((const char *)data, size, &m, &id, errmsg, sizeof(errmsg));
        if (r < 0) {
                FUZZ_CHECK(r == JSONRPC_PARSE_ERROR || r == JSONRPC_INVALID_REQUEST);
                FUZZ_CHECK(errmsg[0] != '\0');
                FUZZ_CHECK(!id || json_is_string(id) || json_is_integer(id));
                json_decref(id);
                return 0;
        }
        FUZZ_CHECK(!id);
        FUZZ_CHECK(json_is_object(m.root));
        FUZZ_CHECK(!m.params || json_is_object(m.params));
        FUZZ_CHECK(!m.id || json_is_string(m.id) || json_is_integer(m.id));
        switch (m.kind) {
        case JSONRPC_REQUEST:
                FUZZ_CHECK(m.id && m.method && m.method[0]);
                break;
        case JSONRPC_NOTIFICATION:
                FUZZ_CHECK(!m.id && m.method && m.method[0]);
                break;
        case JSONRPC_RESPONSE:
                FUZZ_CHECK(m.id && !m.method && m.result);
                FUZZ_CHECK(!m.is_error || json_is_object(m.result));
                break;
        }
        /* the arguments of a call against every tool's schema */
        args = json_object_get(m.params, "arguments");
        for (size_t i = 0; args && i < mcp_ntools; i++) {
                json_t *schema = json_loads(mcp_tools[i].input_schema, 0, NULL);

                FUZZ_CHECK(schema);
                errmsg[0] = '\0';
                if (!schema_check(schema, args, "arguments", errmsg, sizeof(errmsg)))
                        FUZZ_CHECK(strncmp(errmsg, "arguments", 9) == 0);
                json_decref(schema);
        }
        if (json_is_string(json_object_get(m.params, "uri")))
                check_uri(json_string_value(json_object_get(m.params, "uri")));
        jsonrpc_msg_clear(&m);
        return 0;
}
