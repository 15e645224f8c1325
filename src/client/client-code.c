/* libcella: the code interpreter's contexts and runs. */
#include <jansson.h>
#include <stdlib.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/limits.h"

int cella_context_create(cella_client *c, const char *sandbox,
                         const struct cella_context_options *o, char **ret_json)
{
        json_t *b = json_pack("{s:s}", "language", o && o->language ? o->language : "python");

        if (b && o && o->cwd)
                json_object_set_new(b, "cwd", json_string(o->cwd));
        return client_create_member(c, sandbox, "/contexts", b, o ? o->env : NULL, ret_json);
}

int cella_context_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return client_request_url(c, "GET", client_url(c, sandbox, "/contexts", NULL, NULL, NULL),
                                  NULL, ret_json);
}

int cella_context_delete(cella_client *c, const char *sandbox, const char *id)
{
        return client_delete_member(c, sandbox, "contexts", id);
}

int cella_code_run(cella_client *c, const char *sandbox, const char *code,
                   const struct cella_code_options *o,
                   int (*on_event)(const char *json, size_t len, void *userdata), void *userdata,
                   char **ret_json)
{
        json_t *b = json_pack("{s:s}", "code", code ? code : "");
        char *url;

        if (b && o && o->language)
                json_object_set_new(b, "language", json_string(o->language));
        if (b && o && o->context_id)
                json_object_set_new(b, "contextId", json_string(o->context_id));
        if (b && o && o->timeout_ms > 0)
                json_object_set_new(b, "timeout", json_integer(o->timeout_ms));
        url = client_url(c, sandbox, "/code", NULL, NULL, NULL);
        if (!b) {
                free(url);
                return CELLA_ERR_NOMEM;
        }
        if (!on_event)
                return client_request_json(c, "POST", url, b, ret_json);
        /* events carry rich results (a PNG is a base64 line) */
        return client_json_events(c, url, b, CELLA_CLIENT_SSE_CODE_LINE_MAX, true, on_event,
                                  userdata);
}
