/* Resources: the files of the running sandboxes as cella://SANDBOX/PATH (PATH absolute,
 * without its leading '/', percent-encoded where a URI needs it). list walks /workspace of
 * each running sandbox (sleeping ones are not woken), read answers text or a base64
 * blob, subscribe watches the file's directory (the file watch, docs/api.md) and sends
 * notifications/resources/updated when the file changes. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/pct.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp-internal.h"

int mcp_uri_parse(const char *uri, char *sandbox, size_t slen, char *path, size_t plen)
{
        const char *p, *slash;
        size_t n, o = 0;
        char norm[CELLA_NAME_MAX + 1];
        struct cella_error err = {0};

        if (strncmp(uri, "cella://", 8) != 0)
                return -EINVAL;
        p = uri + 8;
        slash = strchr(p, '/');
        if (!slash || (n = (size_t)(slash - p)) == 0 || n >= slen ||
            sandbox_name_check(p, n, false, norm, &err) < 0)
                return -EINVAL;
        memcpy(sandbox, p, n);
        sandbox[n] = '\0';
        /* the path: decoded, without a query or a fragment, more than "/" */
        if (pct_decode(slash, strlen(slash), false, path, plen, &o) < 0 || o < 2 ||
            memchr(path, '?', o) || memchr(path, '#', o))
                return -EINVAL;
        return 0;
}

/* cella://SANDBOX/PATH for an absolute path: unreserved characters and '/' as they are,
 * the rest percent-encoded. */
static char *uri_of(const char *sandbox, const char *path)
{
        _cleanup_(buf_freep) struct buf b = {0};

        if (buf_printf(&b, "cella://%s", sandbox) < 0)
                return NULL;
        for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
                if (pct_unreserved((char)*p) || *p == '/') {
                        if (buf_append(&b, p, 1) < 0)
                                return NULL;
                } else if (buf_printf(&b, "%%%02X", *p) < 0) {
                        return NULL;
                }
        }
        return buf_steal(&b);
}

static json_t *api_fault(struct mcp_call *call, int rc, int *ret_code, char *errmsg, size_t errlen)
{
        const char *code = cella_client_error_code(call->client);

        *ret_code = strcmp(code, "FILE_NOT_FOUND") == 0 || strcmp(code, "SANDBOX_NOT_FOUND") == 0
                            ? MCP_RESOURCE_NOT_FOUND
                            : JSONRPC_INTERNAL_ERROR;
        if (rc == CELLA_ERR_API)
                snprintf(errmsg, errlen, "%s: %s", code, cella_client_error_message(call->client));
        else
                snprintf(errmsg, errlen, "cellad did not answer");
        return NULL;
}

json_t *mcp_resources_list(struct mcp_call *call, int *ret_code, char *errmsg, size_t errlen)
{
        _cleanup_free_ char *text = NULL;
        _cleanup_json_ json_t *list = NULL;
        json_t *out = json_array(), *sb, *f;
        size_t i, j;
        int rc;

        if (!out)
                return NULL;
        rc = cella_sandbox_list(call->client, &text);
        if (rc != CELLA_OK) {
                json_decref(out);
                return api_fault(call, rc, ret_code, errmsg, errlen);
        }
        list = json_loads(text, 0, NULL);
        json_array_foreach(json_object_get(list, "sandboxes"), i, sb)
        {
                const char *name = json_string_value(json_object_get(sb, "id"));
                _cleanup_free_ char *files = NULL;
                _cleanup_json_ json_t *fj = NULL;

                if (!name || !json_is_string(json_object_get(sb, "state")) ||
                    strcmp(json_string_value(json_object_get(sb, "state")), "running") != 0)
                        continue;
                if (cella_file_list(call->client, name, "/workspace", true, false, &files) !=
                    CELLA_OK)
                        continue;
                fj = json_loads(files, 0, NULL);
                json_array_foreach(json_object_get(fj, "files"), j, f)
                {
                        const char *path = json_string_value(json_object_get(f, "absolutePath"));
                        const char *type = json_string_value(json_object_get(f, "type"));
                        _cleanup_free_ char *uri = NULL;

                        if (json_array_size(out) >= CELLA_MCP_MAX_RESOURCES)
                                break;
                        if (!path || !type || strcmp(type, "file") != 0 ||
                            !(uri = uri_of(name, path)))
                                continue;
                        json_array_append_new(
                                out,
                                json_pack("{sssssssssO}", "uri", uri, "name",
                                          json_string_value(json_object_get(f, "name")) ?: path,
                                          "title", path, "description", name, "size",
                                          json_object_get(f, "size") ?: json_integer(0)));
                }
        }
        return json_pack("{so}", "resources", out);
}

json_t *mcp_resources_templates(void)
{
        return json_pack("{s[{ssssssss}]}", "resourceTemplates", "uriTemplate",
                         "cella://{sandbox}/{+path}", "name", "sandbox-file", "title",
                         "A file of a sandbox", "description",
                         "The file at /PATH (absolute, without the leading slash) of SANDBOX: "
                         "cella://box/workspace/main.py");
}

json_t *mcp_resources_read(struct mcp_call *call, int *ret_code, char *errmsg, size_t errlen)
{
        const char *uri = json_string_value(json_object_get(call->params, "uri"));
        char sandbox[CELLA_NAME_MAX + 1], path[4096], rpath[CELLA_NAME_MAX + 32];
        _cleanup_json_ json_t *req = NULL, *ans = NULL;
        _cleanup_free_ char *body = NULL, *text = NULL;
        const char *enc, *mime;
        int rc;

        if (mcp_uri_parse(uri, sandbox, sizeof(sandbox), path, sizeof(path)) < 0) {
                *ret_code = JSONRPC_INVALID_PARAMS;
                snprintf(errmsg, errlen, "not a cella://SANDBOX/PATH resource: %.200s", uri);
                return NULL;
        }
        snprintf(rpath, sizeof(rpath), "/v1/sandboxes/%s/files/read", sandbox);
        req = json_pack("{ss}", "path", path);
        if (!req || !(body = json_dumps(req, JSON_COMPACT)))
                return NULL;
        rc = cella_request(call->client, "POST", rpath, body, &text);
        if (rc != CELLA_OK)
                return api_fault(call, rc, ret_code, errmsg, errlen);
        if (!(ans = json_loads(text, 0, NULL)))
                return NULL;
        enc = json_string_value(json_object_get(ans, "encoding"));
        mime = json_string_value(json_object_get(ans, "mimeType"));
        return json_pack("{s[{sssssO}]}", "contents", "uri", uri, "mimeType",
                         mime ? mime : "application/octet-stream",
                         enc && strcmp(enc, "base64") == 0 ? "blob" : "text",
                         json_object_get(ans, "content") ?: json_string(""));
}

/* ---- subscriptions ---- */

/* One watched resource. Invariant: the watch thread owns it; active is cleared by
 * unsubscribe, which also interrupts client (under subs_lock: the thread frees the client
 * only once the sub is out of the list), so the watch's stream ends at once. */
struct sub {
        struct mcp_server *srv;
        cella_client *client;
        char uri[4200];
        char sandbox[CELLA_NAME_MAX + 1];
        char path[4096];
        atomic_bool active;
        struct sub *next;
};

static pthread_mutex_t subs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sub *subs;

static int on_watch(const char *json, size_t len, void *ud)
{
        struct sub *sub = ud;
        _cleanup_json_ json_t *ev = json_loadb(json, len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *path = json_string_value(json_object_get(ev, "path"));

        if (!atomic_load(&sub->active) || mcp_server_is_closed(sub->srv))
                return 1;
        if (type && (strcmp(type, "overflow") == 0 ||
                     (strcmp(type, "event") == 0 && path && strcmp(path, sub->path) == 0)))
                mcp_server_notify(sub->srv, "notifications/resources/updated",
                                  json_pack("{ss}", "uri", sub->uri));
        return 0;
}

/* Out of the list first (unsubscribe interrupts the client of a listed subscription, under
 * subs_lock), then its client freed, its server's reference returned, itself freed. */
static void sub_drop(struct sub *sub)
{
        pthread_mutex_lock(&subs_lock);
        for (struct sub **p = &subs; *p; p = &(*p)->next)
                if (*p == sub) {
                        *p = sub->next;
                        break;
                }
        pthread_mutex_unlock(&subs_lock);
        cella_client_free(sub->client);
        mcp_server_unref(sub->srv);
        free(sub);
}

static void *watch_main(void *arg)
{
        struct sub *sub = arg;
        cella_client *c = sub->client;
        char dir[4096];
        char *slash;
        const char *const none[] = {NULL};
        struct cella_watch_options o = {.no_recursive = true, .exclude = none};

        snprintf(dir, sizeof(dir), "%s", sub->path);
        slash = strrchr(dir, '/');
        if (slash == dir)
                slash[1] = '\0';
        else if (slash)
                *slash = '\0';
        cella_watch(c, sub->sandbox, dir, &o, on_watch, sub);
        sub_drop(sub);
        return NULL;
}

void mcp_resources_close(struct mcp_server *srv)
{
        pthread_mutex_lock(&subs_lock);
        for (struct sub *s = subs; s; s = s->next)
                if (s->srv == srv) {
                        atomic_store(&s->active, false);
                        cella_client_interrupt(s->client);
                }
        pthread_mutex_unlock(&subs_lock);
}

json_t *mcp_resources_subscribe(struct mcp_call *call, bool on, int *ret_code, char *errmsg,
                                size_t errlen)
{
        const char *uri = json_string_value(json_object_get(call->params, "uri"));
        struct sub *sub;
        pthread_attr_t attr;
        pthread_t th;
        unsigned n = 0;
        bool exists = false;
        int rc;

        if (!uri || strlen(uri) >= sizeof(sub->uri) || !(sub = calloc(1, sizeof(*sub)))) {
                *ret_code = JSONRPC_INVALID_PARAMS;
                snprintf(errmsg, errlen, "params.uri: too long");
                return NULL;
        }
        if (mcp_uri_parse(uri, sub->sandbox, sizeof(sub->sandbox), sub->path, sizeof(sub->path)) <
            0) {
                free(sub);
                *ret_code = JSONRPC_INVALID_PARAMS;
                snprintf(errmsg, errlen, "not a cella://SANDBOX/PATH resource: %.200s", uri);
                return NULL;
        }
        pthread_mutex_lock(&subs_lock);
        for (struct sub *s = subs; s; s = s->next) {
                if (s->srv != call->srv || !atomic_load(&s->active))
                        continue;
                n++;
                if (strcmp(s->uri, uri) == 0) {
                        exists = true;
                        if (!on) {
                                atomic_store(&s->active, false);
                                cella_client_interrupt(s->client);
                        }
                }
        }
        pthread_mutex_unlock(&subs_lock);
        if (!on || exists) {
                free(sub);
                return json_object();
        }
        if (n >= CELLA_MCP_MAX_SUBSCRIPTIONS) {
                free(sub);
                *ret_code = JSONRPC_INVALID_REQUEST;
                snprintf(errmsg, errlen, "too many subscriptions (at most %d)",
                         CELLA_MCP_MAX_SUBSCRIPTIONS);
                return NULL;
        }
        /* the file must exist now: a clear error rather than a watch on nothing */
        rc = cella_file_exists(call->client, sub->sandbox, sub->path, &exists);
        if (rc != CELLA_OK || !exists) {
                free(sub);
                if (rc != CELLA_OK)
                        return api_fault(call, rc, ret_code, errmsg, errlen);
                *ret_code = MCP_RESOURCE_NOT_FOUND;
                snprintf(errmsg, errlen, "no such resource: %.200s", uri);
                return NULL;
        }
        snprintf(sub->uri, sizeof(sub->uri), "%s", uri);
        if (!(sub->client = mcp_server_client(call->srv))) {
                free(sub);
                return NULL;
        }
        sub->srv = call->srv;
        atomic_init(&sub->active, true);
        mcp_server_ref(sub->srv);
        pthread_mutex_lock(&subs_lock);
        sub->next = subs;
        subs = sub;
        pthread_mutex_unlock(&subs_lock);
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        rc = pthread_create(&th, &attr, watch_main, sub);
        pthread_attr_destroy(&attr);
        if (rc != 0) {
                sub_drop(sub);
                return NULL;
        }
        return json_object();
}
