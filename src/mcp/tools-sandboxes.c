/* The MCP tools of sandboxes, snapshots and forks (tools-internal.h). */
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

/* ---- sandboxes ---- */

/* sandbox_create with fromSnapshot: one PUT of the arguments as they are (their names are
 * the API's) but the name, so that the snapshot and the other settings make the sandbox
 * together (network, for one, cannot change once it exists). */
static json_t *create_from_snapshot(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char *path = tool_sandbox_path(tool_str(args, "name"), "");
        _cleanup_json_ json_t *req = json_deep_copy(args);
        _cleanup_free_ char *body = NULL;
        char *out = NULL;

        if (!path || !req)
                return NULL;
        json_object_del(req, "name");
        if (!(body = json_dumps(req, JSON_COMPACT)))
                return NULL;
        return tool_answer(call, cella_request(call->client, "PUT", path, body, &out), &out);
}

json_t *mcp_tool_sandbox_create(struct mcp_call *call, json_t *args)
{
        if (tool_str(args, "fromSnapshot"))
                return create_from_snapshot(call, args);

        _cleanup_free_ char **env = tool_env_list(json_object_get(args, "env"));
        struct cella_sandbox_options o = {
                .image = tool_str(args, "image"),
                .network = tool_str(args, "network"),
                .keep_alive = tool_flag(args, "keepAlive"),
                .sleep_after = tool_str(args, "sleepAfter"),
                .sleep_mode = tool_str(args, "sleepMode"),
                .env = (const char *const *)env,
        };
        char *info = NULL;

        return tool_answer(
                call, cella_sandbox_create(call->client, tool_str(args, "name"), &o, &info), &info);
}

json_t *mcp_tool_sandbox_list(struct mcp_call *call, json_t *args)
{
        char *list = NULL;

        return tool_answer(call, cella_sandbox_list(call->client, &list), &list);
}

json_t *mcp_tool_sandbox_destroy(struct mcp_call *call, json_t *args)
{
        bool existed = false;
        int rc;

        rc = cella_sandbox_destroy(call->client, tool_str(args, "name"), &existed);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        return mcp_result_structured(
                json_pack("{sssb}", "name", tool_str(args, "name"), "destroyed", existed));
}

/* POST /sleep (decision 0063): SandboxInfo once it sleeps */
json_t *mcp_tool_sandbox_sleep(struct mcp_call *call, json_t *args)
{
        char *info = NULL;

        return tool_answer(call, cella_sandbox_sleep(call->client, tool_str(args, "name"), &info),
                           &info);
}

/* ---- snapshots and fork ---- */

/* A snapshot named by id or name must stand as one path segment: "." and ".." would be
 * resolved away by the URL (the schema already asks for 1-63 characters). */
static json_t *bad_snapshot(const char *ref)
{
        if (strcmp(ref, ".") == 0 || strcmp(ref, "..") == 0)
                return mcp_result_error("VALIDATION_FAILED",
                                        "snapshot: '%s' names no snapshot (an id or a name)", ref);
        return NULL;
}

json_t *mcp_tool_snapshot_create(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return tool_answer(call,
                           cella_snapshot_create(call->client, tool_str(args, "sandbox"),
                                                 tool_str(args, "name"), &out),
                           &out);
}

/* Every snapshot, or those taken of sandbox: filtered here from the whole list, since
 * snapshots outlive their sandbox and the sandbox's own route answers 404 once it is
 * gone (docs/decisions/0052). */
json_t *mcp_tool_snapshot_list(struct mcp_call *call, json_t *args)
{
        const char *sandbox = tool_str(args, "sandbox");
        _cleanup_free_ char *out = NULL;
        _cleanup_json_ json_t *doc = NULL;
        json_t *all, *kept, *snap;
        size_t i;
        int rc;

        rc = cella_snapshot_list(call->client, NULL, &out);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        doc = out ? json_loads(out, 0, NULL) : NULL;
        if (!json_is_array(all = json_object_get(doc, "snapshots")))
                return mcp_result_client_error(call, CELLA_ERR_INVALID);
        if (!(kept = json_array()))
                return NULL;
        json_array_foreach(all, i, snap)
        {
                const char *of = json_string_value(json_object_get(snap, "sandbox"));

                if (!sandbox || (of && strcmp(of, sandbox) == 0))
                        json_array_append(kept, snap);
        }
        return mcp_result_structured(json_pack("{so}", "snapshots", kept));
}

json_t *mcp_tool_snapshot_delete(struct mcp_call *call, json_t *args)
{
        const char *ref = tool_str(args, "snapshot");
        json_t *bad = bad_snapshot(ref);
        char *out = NULL;

        if (bad)
                return bad;
        return tool_answer(call, cella_snapshot_delete(call->client, ref, &out), &out);
}

/* The new sandbox's name is checked as the one forked is (bad_sandbox checks that one). */
json_t *mcp_tool_sandbox_fork(struct mcp_call *call, json_t *args)
{
        json_t *bad = tool_bad_name(tool_str(args, "name"));
        char *out = NULL;

        if (bad)
                return bad;
        return tool_answer(
                call,
                cella_fork(call->client, tool_str(args, "sandbox"), tool_str(args, "name"), &out),
                &out);
}
