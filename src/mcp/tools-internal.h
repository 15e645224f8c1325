/* What the MCP tools' modules share (tools.c: the table; tools-common.c: the helpers;
 * tools-sandboxes.c, tools-commands.c, tools-files.c, tools-code.c: the handlers by group).
 * Internal to src/mcp. */
#ifndef CELLA_MCP_TOOLS_INTERNAL_H
#define CELLA_MCP_TOOLS_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "mcp/mcp-internal.h"

/* An argument: a string (NULL when absent), a flag (false when absent), a number (0). */
const char *tool_str(json_t *args, const char *key);
bool tool_flag(json_t *args, const char *key);
long tool_num(json_t *args, const char *key);
/* The sandbox the arguments name (sandbox, or name for sandbox_create, sandbox_destroy
 * and sandbox_sleep) checked as cellad checks it, so a bad name is a clear tool error and
 * never reaches a URL; NULL when it is good or the tool names none (sandbox_list). */
json_t *tool_bad_name(const char *name);
json_t *tool_bad_sandbox(json_t *args);
/* env {K: V} as "K=V" strings, NULL-terminated, in one allocation; NULL when absent. */
char **tool_env_list(json_t *env);
/* The answer *text of a call that returned rc, as the structured result; *text is freed.
 * A pointer, so that the call may be an argument: C leaves the order of arguments open. */
json_t *tool_answer(struct mcp_call *call, int rc, char **text);
/* "/v1/sandboxes/<sandbox><rest>" (malloc'd), or NULL. */
char *tool_sandbox_path(const char *sandbox, const char *rest);

/* Output bytes kept for a result: the first CELLA_MCP_MAX_OUTPUT bytes of a stream. */
struct tool_capture {
        struct buf out, err;
        bool truncated;
        struct mcp_call *call;
};
/* libcella's output callbacks into a struct tool_capture (ud). */
int tool_on_out(const void *d, size_t n, void *ud);
int tool_on_err(const void *d, size_t n, void *ud);
/* Bytes as a JSON string: UTF-8 as is, anything else made valid (U+FFFD). */
json_t *tool_text_of(const struct buf *b);

/* The handlers of the table (mcp_tools[]). */
json_t *mcp_tool_exec(struct mcp_call *call, json_t *args);
json_t *mcp_tool_expose_port(struct mcp_call *call, json_t *args);
json_t *mcp_tool_file_delete(struct mcp_call *call, json_t *args);
json_t *mcp_tool_file_list(struct mcp_call *call, json_t *args);
json_t *mcp_tool_file_read(struct mcp_call *call, json_t *args);
json_t *mcp_tool_file_write(struct mcp_call *call, json_t *args);
json_t *mcp_tool_git_checkout(struct mcp_call *call, json_t *args);
json_t *mcp_tool_process_kill(struct mcp_call *call, json_t *args);
json_t *mcp_tool_process_list(struct mcp_call *call, json_t *args);
json_t *mcp_tool_process_logs(struct mcp_call *call, json_t *args);
json_t *mcp_tool_process_start(struct mcp_call *call, json_t *args);
json_t *mcp_tool_run_code(struct mcp_call *call, json_t *args);
json_t *mcp_tool_sandbox_create(struct mcp_call *call, json_t *args);
json_t *mcp_tool_sandbox_destroy(struct mcp_call *call, json_t *args);
json_t *mcp_tool_sandbox_sleep(struct mcp_call *call, json_t *args);
json_t *mcp_tool_sandbox_fork(struct mcp_call *call, json_t *args);
json_t *mcp_tool_sandbox_list(struct mcp_call *call, json_t *args);
json_t *mcp_tool_snapshot_create(struct mcp_call *call, json_t *args);
json_t *mcp_tool_snapshot_delete(struct mcp_call *call, json_t *args);
json_t *mcp_tool_snapshot_list(struct mcp_call *call, json_t *args);
json_t *mcp_tool_wait_for_port(struct mcp_call *call, json_t *args);

#endif
