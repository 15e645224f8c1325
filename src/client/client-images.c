/* libcella: images (list, build with its log stream, import, delete). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/limits.h"

int cella_image_list(cella_client *c, char **ret_json)
{
        return cella_request(c, "GET", "/v1/images", NULL, ret_json);
}

struct build_stream {
        cella_client *c;
        void (*on_line)(const char *line, size_t len, void *userdata);
        void *ud;
        bool completed, failed;
};

static int on_build_event(const char *event, const char *data, size_t len, void *ud)
{
        struct build_stream *b = ud;
        json_t *j = json_loadb(data, len, 0, NULL);
        const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;

        if (type && strcmp(type, "log") == 0) {
                json_t *d = json_object_get(j, "data");
                if (json_is_string(d) && b->on_line)
                        b->on_line(json_string_value(d), json_string_length(d), b->ud);
        } else if (type && strcmp(type, "complete") == 0) {
                json_t *code = json_object_get(j, "exitCode");
                if (code && json_integer_value(code) != 0) {
                        client_errorf(b->c, "IMAGE_BUILD_FAILED", "image build exited with %d",
                                      (int)json_integer_value(code));
                        b->failed = true;
                } else {
                        b->completed = true;
                }
        } else if (type && strcmp(type, "error") == 0) {
                const char *code = json_string_value(json_object_get(j, "code"));
                const char *msg = json_string_value(json_object_get(j, "error"));
                client_errorf(b->c, code ? code : "IMAGE_BUILD_FAILED", "%s", msg ? msg : "");
                b->failed = true;
        }
        json_decref(j);
        return 0;
}

/* /v1/images/NAME[suffix] (NAME escaped); NULL when out of memory. */
static char *image_url(cella_client *c, const char *name, const char *suffix)
{
        char *en = curl_easy_escape(c->curl, name, 0);
        struct buf url = BUF_INIT;

        if (!en || buf_printf(&url, "%s/v1/images/%s%s", c->base, en, suffix) < 0) {
                curl_free(en);
                buf_free(&url);
                return NULL;
        }
        curl_free(en);
        return buf_steal(&url);
}

int cella_image_build(cella_client *c, const char *name,
                      void (*on_line)(const char *line, size_t len, void *userdata), void *userdata)
{
        return cella_image_build_packages(c, name, NULL, 0, on_line, userdata);
}

int cella_image_build_packages(cella_client *c, const char *name, const char *const *packages,
                               size_t npackages,
                               void (*on_line)(const char *line, size_t len, void *userdata),
                               void *userdata)
{
        struct build_stream b = {.c = c, .on_line = on_line, .ud = userdata};
        json_t *pk = json_array(), *body;
        int r;

        for (size_t i = 0; pk && i < npackages; i++)
                json_array_append_new(pk, json_string(packages[i]));
        body = pk ? json_pack("{s:o}", "packages", pk) : NULL;
        if (!body)
                return CELLA_ERR_NOMEM;
        r = client_event_stream(c, "POST", image_url(c, name, "/build"), body,
                                CELLA_CLIENT_SSE_BUILD_LINE_MAX, on_build_event, &b);
        if (r < 0)
                return r;
        if (b.failed)
                return CELLA_ERR_API;
        if (!b.completed) {
                client_errorf(c, "INCOMPLETE", "the build stream ended early");
                return CELLA_ERR_TRANSPORT;
        }
        return CELLA_OK;
}

int cella_image_import(cella_client *c, const char *name, int fd, bool replace, char **ret_json)
{
        struct upload up = {.fd = fd};
        struct sink s = {.body = BUF_INIT};
        char *url = image_url(c, name, replace ? "/import?replace=true" : "/import");
        int r;

        if (!url)
                return CELLA_ERR_NOMEM;
        r = client_perform(c, "POST", url, NULL, &up, NULL, &s);
        free(url);
        return client_finish_json(&s, r, ret_json);
}

int cella_image_delete(cella_client *c, const char *name, char **ret_json)
{
        return client_request_url(c, "DELETE", image_url(c, name, ""), NULL, ret_json);
}
