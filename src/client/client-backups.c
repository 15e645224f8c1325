/* libcella: backups (docs/api.md "Backups"). */
#include <curl/curl.h>
#include <jansson.h>
#include <stdlib.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/buf.h"

static char *backup_url(cella_client *c, const char *id)
{
        struct buf url = BUF_INIT;
        char *en = id ? curl_easy_escape(c->curl, id, 0) : NULL;

        if ((id && !en) ||
            buf_printf(&url, "%s/v1/backups%s%s", c->base, id ? "/" : "", id ? en : "") < 0) {
                curl_free(en);
                buf_free(&url);
                return NULL;
        }
        curl_free(en);
        return buf_steal(&url);
}

int cella_backup_create(cella_client *c, const char *sandbox, const char *dir, const char *name,
                        int64_t ttl_s, char **ret_json)
{
        json_t *b = json_pack("{s:s}", "dir", dir ? dir : "");

        if (!b || (name && json_object_set_new(b, "name", json_string(name)) < 0) ||
            (ttl_s > 0 && json_object_set_new(b, "ttl", json_integer(ttl_s)) < 0)) {
                json_decref(b);
                return CELLA_ERR_NOMEM;
        }
        return client_request_json(c, "POST", client_sandbox_url(c, sandbox, "/backups", NULL), b,
                                   ret_json);
}

int cella_backup_restore(cella_client *c, const char *sandbox, const char *id, const char *dir,
                         char **ret_json)
{
        json_t *b = dir ? json_pack("{s:s}", "dir", dir) : json_object();
        char *en = curl_easy_escape(c->curl, id ? id : "", 0);
        struct buf path = BUF_INIT;
        char *url = NULL;

        if (b && en && buf_printf(&path, "/backups/%s/restore", en) >= 0)
                url = client_sandbox_url(c, sandbox, path.data, NULL);
        curl_free(en);
        buf_free(&path);
        if (!b || !url) {
                json_decref(b);
                free(url);
                return CELLA_ERR_NOMEM;
        }
        return client_request_json(c, "POST", url, b, ret_json);
}

int cella_backup_list(cella_client *c, char **ret_json)
{
        return client_request_url(c, "GET", backup_url(c, NULL), NULL, ret_json);
}

int cella_backup_get(cella_client *c, const char *id, char **ret_json)
{
        return client_request_url(c, "GET", backup_url(c, id), NULL, ret_json);
}

int cella_backup_delete(cella_client *c, const char *id, char **ret_json)
{
        return client_request_url(c, "DELETE", backup_url(c, id), NULL, ret_json);
}
