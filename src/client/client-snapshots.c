/* libcella: filesystem snapshots and fork (docs/api.md "Snapshots and fork"). */
#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/buf.h"

static char *snapshot_url(cella_client *c, const char *id)
{
        struct buf url = BUF_INIT;
        char *en = id ? curl_easy_escape(c->curl, id, 0) : NULL;

        if ((id && !en) ||
            buf_printf(&url, "%s/v1/snapshots%s%s", c->base, id ? "/" : "", id ? en : "") < 0) {
                curl_free(en);
                buf_free(&url);
                return NULL;
        }
        curl_free(en);
        return buf_steal(&url);
}

int cella_snapshot_create(cella_client *c, const char *sandbox, const char *name, char **ret_json)
{
        json_t *b = name ? json_pack("{s:s}", "name", name) : json_object();

        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "POST", client_sandbox_url(c, sandbox, "/snapshots", NULL), b,
                                   ret_json);
}

int cella_snapshot_list(cella_client *c, const char *sandbox, char **ret_json)
{
        char *url = sandbox ? client_sandbox_url(c, sandbox, "/snapshots", NULL)
                            : snapshot_url(c, NULL);
        return client_request_url(c, "GET", url, NULL, ret_json);
}

int cella_snapshot_get(cella_client *c, const char *id, char **ret_json)
{
        return client_request_url(c, "GET", snapshot_url(c, id), NULL, ret_json);
}

int cella_snapshot_delete(cella_client *c, const char *id, char **ret_json)
{
        return client_request_url(c, "DELETE", snapshot_url(c, id), NULL, ret_json);
}

int cella_sandbox_from_snapshot(cella_client *c, const char *name, const char *snapshot,
                                char **ret_json)
{
        json_t *b = json_pack("{s:s}", "fromSnapshot", snapshot);

        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "PUT", client_sandbox_url(c, name, NULL, NULL), b, ret_json);
}

int cella_fork(cella_client *c, const char *sandbox, const char *name, char **ret_json)
{
        json_t *b = json_pack("{s:s}", "name", name);

        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "POST", client_sandbox_url(c, sandbox, "/fork", NULL), b,
                                   ret_json);
}

int cella_fork_memory(cella_client *c, const char *sandbox, const char *name, char **ret_json)
{
        json_t *b = json_pack("{s:s, s:b}", "name", name, "memory", 1);

        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "POST", client_sandbox_url(c, sandbox, "/fork", NULL), b,
                                   ret_json);
}
