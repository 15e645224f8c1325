/* libcella: tenants' API keys (docs/api.md "Tenants and keys") and the cluster's nodes
 * ("Cluster"): the admin's routes. */
#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/buf.h"

static char *key_url(cella_client *c, const char *id)
{
        struct buf url = BUF_INIT;
        char *en = id ? curl_easy_escape(c->curl, id, 0) : NULL;

        if ((id && !en) ||
            buf_printf(&url, "%s/v1/keys%s%s", c->base, id ? "/" : "", id ? en : "") < 0) {
                curl_free(en);
                buf_free(&url);
                return NULL;
        }
        curl_free(en);
        return buf_steal(&url);
}

int cella_key_create(cella_client *c, const char *tenant, long long max_sandboxes,
                     long long max_memory, char **ret_json)
{
        json_t *b = json_pack("{s:s, s:I, s:I}", "tenant", tenant, "maxSandboxes",
                              (json_int_t)max_sandboxes, "maxMemory", (json_int_t)max_memory);

        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "POST", key_url(c, NULL), b, ret_json);
}

int cella_key_list(cella_client *c, char **ret_json)
{
        return client_request_url(c, "GET", key_url(c, NULL), NULL, ret_json);
}

int cella_key_delete(cella_client *c, const char *id, char **ret_json)
{
        return client_request_url(c, "DELETE", key_url(c, id), NULL, ret_json);
}

int cella_cluster_nodes(cella_client *c, char **ret_json)
{
        return cella_request(c, "GET", "/v1/cluster/nodes", NULL, ret_json);
}
