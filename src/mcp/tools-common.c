/* What the MCP tools share (tools-internal.h): reading arguments, checking the sandbox
 * name, the answer of a libcella call, output kept for a result. */
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

const char *tool_str(json_t *args, const char *key)
{
        return json_string_value(json_object_get(args, key));
}

bool tool_flag(json_t *args, const char *key)
{
        return json_is_true(json_object_get(args, key));
}

long tool_num(json_t *args, const char *key)
{
        return (long)json_integer_value(json_object_get(args, key));
}

/* The sandbox the arguments name (sandbox, or name for sandbox_create, sandbox_destroy
 * and sandbox_sleep) checked as cellad checks it, so a bad name is a clear tool error and
 * never reaches a URL; NULL when it is good or the tool names none (sandbox_list). */
json_t *tool_bad_name(const char *name)
{
        char norm[CELLA_NAME_MAX + 1];
        struct cella_error err = {0};

        if (name && sandbox_name_check(name, strlen(name), false, norm, &err) < 0)
                return mcp_result_error("INVALID_SANDBOX_NAME", "%s", err.msg);
        return NULL;
}

json_t *tool_bad_sandbox(json_t *args)
{
        const char *name = tool_str(args, "sandbox");

        return tool_bad_name(name ? name : tool_str(args, "name"));
}

/* env {K: V} as "K=V" strings, NULL-terminated, in one allocation; NULL when absent. */
char **tool_env_list(json_t *env)
{
        size_t n = json_object_size(env), size = (n + 1) * sizeof(char *), i = 0;
        const char *k;
        json_t *v;
        char **list, *p;

        if (!json_is_object(env) || n == 0)
                return NULL;
        json_object_foreach(env, k, v) size += strlen(k) + json_string_length(v) + 2;
        if (!(list = calloc(1, size)))
                return NULL;
        p = (char *)(list + n + 1);
        json_object_foreach(env, k, v)
        {
                size_t kl = strlen(k), vl = json_string_length(v);

                list[i++] = p;
                memcpy(p, k, kl);
                p[kl] = '=';
                memcpy(p + kl + 1, json_string_value(v), vl);
                p += kl + vl + 2; /* calloc'd: the NUL is there */
        }
        return list;
}

/* The answer *text of a call that returned rc, as the structured result; *text is freed.
 * A pointer, so that the call may be an argument: C leaves the order of arguments open. */
json_t *tool_answer(struct mcp_call *call, int rc, char **text)
{
        _cleanup_free_ char *t = TAKE_PTR(*text);
        json_t *j;

        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        if (!t)
                return mcp_result_structured(json_pack("{sb}", "success", 1));
        if (!(j = json_loads(t, 0, NULL)) || !json_is_object(j)) {
                json_decref(j);
                return mcp_result_client_error(call, CELLA_ERR_INVALID);
        }
        json_object_del(j, "timestamp");
        return mcp_result_structured(j);
}

char *tool_sandbox_path(const char *sandbox, const char *rest)
{
        char *p = NULL;

        return asprintf(&p, "/v1/sandboxes/%s%s", sandbox, rest) < 0 ? NULL : p;
}

static int keep(struct tool_capture *cap, struct buf *b, const void *d, size_t n)
{
        size_t room = CELLA_MCP_MAX_OUTPUT - MIN(b->len, (size_t)CELLA_MCP_MAX_OUTPUT);

        if (n > room)
                cap->truncated = true;
        if (buf_append(b, d, MIN(n, room)) < 0)
                return -1;
        mcp_call_progress(cap->call, (double)n, d, n);
        return mcp_call_is_cancelled(cap->call) ? 1 : 0;
}

int tool_on_out(const void *d, size_t n, void *ud)
{
        struct tool_capture *cap = ud;
        return keep(cap, &cap->out, d, n);
}

int tool_on_err(const void *d, size_t n, void *ud)
{
        struct tool_capture *cap = ud;
        return keep(cap, &cap->err, d, n);
}

/* Bytes as a JSON string: UTF-8 as is, anything else made valid (U+FFFD). */
json_t *tool_text_of(const struct buf *b)
{
        _cleanup_(buf_freep) struct buf s = {0};

        if (utf8_sanitize(&s, b->data ? b->data : "", b->len) < 0)
                return NULL;
        return json_stringn(s.data ? s.data : "", s.len);
}
