/* The MCP tools of ports and code runs (tools-internal.h). */
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

/* ---- ports ---- */

json_t *mcp_tool_wait_for_port(struct mcp_call *call, json_t *args)
{
        struct cella_wait_port_options o = {
                .http_path = tool_str(args, "httpPath"),
                .timeout_ms =
                        json_object_get(args, "timeoutMs") ? tool_num(args, "timeoutMs") : 60000,
        };
        char *out = NULL;

        return tool_answer(call,
                           cella_process_wait_port(call->client, tool_str(args, "sandbox"),
                                                   tool_str(args, "processId"),
                                                   (int)tool_num(args, "port"), &o, &out),
                           &out);
}

json_t *mcp_tool_expose_port(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return tool_answer(call,
                           cella_port_expose(call->client, tool_str(args, "sandbox"),
                                             (int)tool_num(args, "port"), tool_str(args, "name"),
                                             NULL, &out),
                           &out);
}

/* ---- code ---- */

/* run_code's events gathered: logs, rich results (MCP content), the error. */
struct code_run {
        struct mcp_call *call;
        json_t *content; /* the CallToolResult's content, images among them */
        json_t *results; /* structured: each result's formats, and its text */
        struct buf out, err;
        json_t *error;
        json_int_t count;
        bool timed_out;
};

static void add_result(struct code_run *r, json_t *ev)
{
        static const char *const images[][2] = {{"png", "image/png"}, {"jpeg", "image/jpeg"}};
        static const char *const texts[] = {"text",  "html", "markdown",  "svg",
                                            "latex", "json", "javascript"};
        json_t *formats = json_array(), *item = json_object(), *v;

        for (size_t i = 0; i < ARRAY_SIZE(images); i++)
                if (json_is_string(v = json_object_get(ev, images[i][0]))) {
                        json_array_append_new(formats, json_string(images[i][0]));
                        json_array_append_new(r->content,
                                              json_pack("{sssOss}", "type", "image", "data", v,
                                                        "mimeType", images[i][1]));
                }
        for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
                _cleanup_free_ char *dumped = NULL;
                const char *text;

                if (!(v = json_object_get(ev, texts[i])))
                        continue;
                json_array_append_new(formats, json_string(texts[i]));
                text = json_string_value(v);
                if (!text && (dumped = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)))
                        text = dumped;
                if (!text)
                        continue;
                if (strcmp(texts[i], "text") == 0)
                        json_object_set_new(item, "text", json_string(text));
                /* text/plain, and the richer forms a model reads as text (HTML tables) */
                if (strcmp(texts[i], "text") == 0 || strcmp(texts[i], "html") == 0 ||
                    strcmp(texts[i], "markdown") == 0 || strcmp(texts[i], "json") == 0)
                        json_array_append_new(r->content,
                                              json_pack("{ssss}", "type", "text", "text", text));
        }
        json_object_set_new(item, "formats", formats);
        json_array_append_new(r->results, item);
}

static int on_code_event(const char *text, size_t len, void *ud)
{
        struct code_run *r = ud;
        _cleanup_json_ json_t *ev = json_loadb(text, len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *s;

        if (!type)
                return 0;
        if ((strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) &&
            (s = json_string_value(json_object_get(ev, "text")))) {
                buf_append(type[3] == 'o' ? &r->out : &r->err, s, strlen(s));
                mcp_call_progress(r->call, (double)strlen(s), s, strlen(s));
        } else if (strcmp(type, "result") == 0) {
                add_result(r, ev);
        } else if (strcmp(type, "error") == 0) {
                json_decref(r->error);
                r->error = json_pack("{sOsOsO}", "name", json_object_get(ev, "name"), "message",
                                     json_object_get(ev, "message"), "traceback",
                                     json_object_get(ev, "traceback"));
                if (!r->error)
                        r->error = json_pack("{ss}", "name", "Error");
        } else if (strcmp(type, "execution_complete") == 0) {
                r->count = json_integer_value(json_object_get(ev, "executionCount"));
                r->timed_out = json_is_true(json_object_get(ev, "timedOut"));
        }
        return mcp_call_is_cancelled(r->call) ? 1 : 0;
}

json_t *mcp_tool_run_code(struct mcp_call *call, json_t *args)
{
        struct cella_code_options o = {
                .language = tool_str(args, "language"),
                .context_id = tool_str(args, "contextId"),
                .timeout_ms = tool_num(args, "timeoutMs"),
        };
        struct code_run r = {.call = call, .content = json_array(), .results = json_array()};
        _cleanup_json_ json_t *structured = NULL;
        _cleanup_free_ char *dumped = NULL;
        json_t *res = NULL;
        int rc;

        if (!r.content || !r.results)
                goto out;
        rc = cella_code_run(call->client, tool_str(args, "sandbox"), tool_str(args, "code"), &o,
                            on_code_event, &r, NULL);
        if (rc != CELLA_OK) {
                res = mcp_result_client_error(call, rc);
                goto out;
        }
        structured = json_pack("{sosososI}", "stdout", tool_text_of(&r.out), "stderr",
                               tool_text_of(&r.err), "results", json_incref(r.results),
                               "executionCount", (json_int_t)r.count);
        if (!structured)
                goto out;
        if (r.error)
                json_object_set(structured, "error", r.error);
        if (r.timed_out)
                json_object_set_new(structured, "timedOut", json_true());
        if (!(dumped = json_dumps(structured, JSON_COMPACT)))
                goto out;
        /* the summary first (logs, error), then each result as the content it is */
        json_array_insert_new(r.content, 0, json_pack("{ssss}", "type", "text", "text", dumped));
        res = json_pack("{sOsO}", "content", r.content, "structuredContent", structured);
        if (res && r.error)
                json_object_set_new(res, "isError", json_true());
out:
        json_decref(r.content);
        json_decref(r.results);
        json_decref(r.error);
        buf_free(&r.out);
        buf_free(&r.err);
        return res;
}
