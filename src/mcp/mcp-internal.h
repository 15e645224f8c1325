/* What the MCP engine's modules share (server.c, tools*.c, resources.c); never included
 * outside src/mcp. */
#ifndef CELLA_MCP_INTERNAL_H
#define CELLA_MCP_INTERNAL_H

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cella/cella.h"
#include "common/limits.h"

/* A request running on a worker thread. Invariants: id and params are the call's own
 * references; client is the worker's (one libcella client per thread); kill_sandbox and
 * kill_process, once set under the server's lock, name the process a cancellation kills. */
struct mcp_call {
        struct mcp_server *srv;
        json_t *id;
        char *method;
        json_t *params;
        json_t *progress_token; /* NULL: the caller asked for no progress */
        double progress;
        cella_client *client;
        atomic_bool cancelled;
        char kill_sandbox[CELLA_NAME_MAX + 1];
        char kill_process[CELLA_ID_MAX + 1];
};

struct mcp_tool {
        const char *name;
        const char *title;
        const char *description;
        const char *input_schema;  /* JSON text */
        const char *output_schema; /* JSON text, or NULL */
        bool read_only, destructive, idempotent, open_world;
        /* The CallToolResult (new reference), or NULL without memory. */
        json_t *(*run)(struct mcp_call *call, json_t *args);
};

extern const struct mcp_tool mcp_tools[];
extern const size_t mcp_ntools;
const struct mcp_tool *mcp_tool_find(const char *name);
/* Run a tool on arguments its input schema accepted: the sandbox they name is checked
 * first (a bad name is a tool error), then the handler runs. */
json_t *mcp_tool_run(const struct mcp_tool *t, struct mcp_call *call, json_t *args);
/* The tools/list entry of a tool (new reference), or NULL. */
json_t *mcp_tool_describe(const struct mcp_tool *t);

/* Results of tools: structured (take) with its JSON text as the text content; an error
 * from libcella's last call (isError, cella's code, message and HTTP status); an error of
 * our own (isError, code and message). */
json_t *mcp_result_structured(json_t *take);
json_t *mcp_result_client_error(struct mcp_call *call, int rc);
json_t *mcp_result_error(const char *code, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

/* Progress of a call (nothing without a progress token): delta added to the count, msg
 * (len bytes, any bytes: made UTF-8 and cut) as the message. */
void mcp_call_progress(struct mcp_call *call, double delta, const char *msg, size_t len);
/* Name the process a cancellation of call kills; when the call is already cancelled,
 * kill it now. */
void mcp_call_set_kill(struct mcp_call *call, const char *sandbox, const char *process);
bool mcp_call_is_cancelled(struct mcp_call *call);
/* Send a notification that belongs to no request. */
void mcp_server_notify(struct mcp_server *s, const char *method, json_t *take_params);
void mcp_server_ref(struct mcp_server *s);
void mcp_server_unref(struct mcp_server *s);
bool mcp_server_is_closed(struct mcp_server *s);
/* A new libcella client for the server's daemon, or NULL. */
cella_client *mcp_server_client(struct mcp_server *s);

/* resources.c: each returns the result (new reference) or NULL with a JSON-RPC error
 * code in *ret_code and its message in errmsg. */
json_t *mcp_resources_list(struct mcp_call *call, int *ret_code, char *errmsg, size_t errlen);
json_t *mcp_resources_templates(void);
json_t *mcp_resources_read(struct mcp_call *call, int *ret_code, char *errmsg, size_t errlen);
json_t *mcp_resources_subscribe(struct mcp_call *call, bool on, int *ret_code, char *errmsg,
                                size_t errlen);
/* End the server's watches now (the session closes). */
void mcp_resources_close(struct mcp_server *srv);
/* Split cella://SANDBOX/PATH: 0 with sandbox and "/PATH" (percent-decoded), or -EINVAL. */
int mcp_uri_parse(const char *uri, char *sandbox, size_t slen, char *path, size_t plen);

#endif
