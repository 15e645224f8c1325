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

int cella_backup_create_with(cella_client *c, const char *sandbox, const char *dir,
                             const struct cella_backup_options *o, char **ret_json)
{
        json_t *b = json_pack("{s:s}", "dir", dir ? dir : "");
        json_t *ex = NULL;
        bool bad = !b;

        if (o && !bad) {
                bad = (o->name && json_object_set_new(b, "name", json_string(o->name)) < 0) ||
                      (o->ttl_s > 0 && json_object_set_new(b, "ttl", json_integer(o->ttl_s)) < 0) ||
                      (o->gitignore && json_object_set_new(b, "gitignore", json_true()) < 0) ||
                      (o->consistent && json_object_set_new(b, "consistent", json_true()) < 0) ||
                      (o->no_multipart && json_object_set_new(b, "multipart", json_false()) < 0);
                if (!bad && o->nexcludes > 0) {
                        ex = json_array();
                        for (size_t i = 0; ex && i < o->nexcludes; i++)
                                if (json_array_append_new(ex, json_string(o->excludes[i])) < 0)
                                        bad = true;
                        bad = bad || !ex || json_object_set_new(b, "excludes", ex) < 0;
                }
        }
        if (bad) {
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
