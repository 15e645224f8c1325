/* The MCP tools of files and git (tools-internal.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/utf8.h"
#include "mcp/mcp-internal.h"
#include "mcp/tools-internal.h"

/* ---- files ---- */

/* POST req (taken) to the sandbox's /files/<op>, the answer as the result. */
static json_t *files_post(struct mcp_call *call, json_t *args, const char *op, json_t *take)
{
        _cleanup_free_ char *path = tool_sandbox_path(tool_str(args, "sandbox"), op);
        _cleanup_json_ json_t *req = take;
        _cleanup_free_ char *body = NULL;
        char *out = NULL;

        if (!path || !req || !(body = json_dumps(req, JSON_COMPACT)))
                return NULL;
        return tool_answer(call, cella_request(call->client, "POST", path, body, &out), &out);
}

static const char *encoding(json_t *args)
{
        return tool_str(args, "encoding") ? tool_str(args, "encoding") : "utf-8";
}

json_t *mcp_tool_file_read(struct mcp_call *call, json_t *args)
{
        return files_post(
                call, args, "/files/read",
                json_pack("{ssss}", "path", tool_str(args, "path"), "encoding", encoding(args)));
}

json_t *mcp_tool_file_write(struct mcp_call *call, json_t *args)
{
        return files_post(call, args, "/files/write",
                          json_pack("{sOsOss}", "path", json_object_get(args, "path"), "content",
                                    json_object_get(args, "content"), "encoding", encoding(args)));
}

json_t *mcp_tool_file_list(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return tool_answer(
                call,
                cella_file_list(call->client, tool_str(args, "sandbox"),
                                tool_str(args, "path") ? tool_str(args, "path") : "/workspace",
                                tool_flag(args, "recursive"), tool_flag(args, "includeHidden"),
                                &out),
                &out);
}

json_t *mcp_tool_file_delete(struct mcp_call *call, json_t *args)
{
        int rc;

        rc = cella_file_delete(call->client, tool_str(args, "sandbox"), tool_str(args, "path"),
                               tool_flag(args, "recursive"));
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        return mcp_result_structured(
                json_pack("{sssb}", "path", tool_str(args, "path"), "deleted", 1));
}

/* ---- git ---- */

json_t *mcp_tool_git_checkout(struct mcp_call *call, json_t *args)
{
        struct cella_git_options o = {
                .branch = tool_str(args, "branch"),
                .target_dir = tool_str(args, "targetDir"),
                .depth = tool_num(args, "depth"),
        };
        char *out = NULL;

        return tool_answer(call,
                           cella_git_checkout(call->client, tool_str(args, "sandbox"),
                                              tool_str(args, "repoUrl"), &o, &out),
                           &out);
}
