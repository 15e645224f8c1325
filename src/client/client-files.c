/* libcella: files of a sandbox (write, read, list, exists, mkdir, move, delete) and file
 * watch. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/limits.h"

static int file_put(cella_client *c, const char *sandbox, const char *path, struct upload *up)
{
        struct sink s = {.body = BUF_INIT};
        char *url = client_url(c, sandbox, "/files", "path", path, NULL);
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = client_perform(c, "PUT", url, NULL, up, NULL, &s);
        free(url);
        return client_finish_json(&s, r, NULL);
}

int cella_file_write(cella_client *c, const char *sandbox, const char *path, const void *data,
                     size_t len)
{
        struct upload up = {.data = data, .len = len, .fd = -1};
        return file_put(c, sandbox, path, &up);
}

int cella_file_write_fd(cella_client *c, const char *sandbox, const char *path, int fd)
{
        struct upload up = {.fd = fd};
        return file_put(c, sandbox, path, &up);
}

static int write_fd_chunk(const char *p, size_t n, void *ud)
{
        int fd = *(int *)ud;
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return CELLA_ERR_IO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

int cella_file_read_fd(cella_client *c, const char *sandbox, const char *path, int fd)
{
        struct sink s = {.body = BUF_INIT,
                         .stream = write_fd_chunk,
                         .ud = &fd,
                         .read_size = CELLA_CLIENT_RAW_READ};
        char *url = client_url(c, sandbox, "/files", "path", path, NULL);
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = client_perform(c, "GET", url, NULL, NULL, NULL, &s);
        if (r == CELLA_ERR_IO)
                client_errorf(c, "IO_ERROR", "write: %s", strerror(errno));
        free(url);
        return client_finish_json(&s, r, NULL);
}

int cella_file_list(cella_client *c, const char *sandbox, const char *path, bool recursive,
                    bool include_hidden, char **ret_json)
{
        char q[64];
        snprintf(q, sizeof(q), "recursive=%s&includeHidden=%s", recursive ? "true" : "false",
                 include_hidden ? "true" : "false");
        return client_request_url(c, "GET", client_url(c, sandbox, "/files/list", "path", path, q),
                                  NULL, ret_json);
}

int cella_file_exists(cella_client *c, const char *sandbox, const char *path, bool *ret)
{
        char *body = NULL;
        int r = client_request_url(
                c, "GET", client_url(c, sandbox, "/files/exists", "path", path, NULL), NULL, &body);
        if (r == CELLA_OK) {
                json_t *j = json_loads(body, 0, NULL);
                *ret = json_is_true(json_object_get(j, "exists"));
                json_decref(j);
        }
        free(body);
        return r;
}

int cella_file_mkdir(cella_client *c, const char *sandbox, const char *path, bool recursive)
{
        return client_request_json(
                c, "POST", client_url(c, sandbox, "/files/mkdir", NULL, NULL, NULL),
                json_pack("{s:s, s:b}", "path", path, "recursive", recursive), NULL);
}

int cella_file_move(cella_client *c, const char *sandbox, const char *from, const char *to)
{
        return client_request_json(c, "POST",
                                   client_url(c, sandbox, "/files/move", NULL, NULL, NULL),
                                   json_pack("{s:s, s:s}", "from", from, "to", to), NULL);
}

int cella_file_delete(cella_client *c, const char *sandbox, const char *path, bool recursive)
{
        return client_request_url(
                c, "DELETE",
                client_url(c, sandbox, "/files", "path", path, recursive ? "recursive=true" : NULL),
                NULL, NULL);
}

static json_t *string_array(const char *const *v)
{
        json_t *a = json_array();

        for (size_t i = 0; a && v[i]; i++)
                if (json_array_append_new(a, json_string(v[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

int cella_watch(cella_client *c, const char *sandbox, const char *path,
                const struct cella_watch_options *o,
                int (*on_event)(const char *json, size_t len, void *userdata), void *userdata)
{
        json_t *b = json_pack("{s:s, s:b}", "path", path, "recursive", !(o && o->no_recursive));

        if (!b)
                return CELLA_ERR_NOMEM;
        if (o && o->include)
                json_object_set_new(b, "include", string_array(o->include));
        if (o && o->exclude)
                json_object_set_new(b, "exclude", string_array(o->exclude));
        return client_json_events(c, client_url(c, sandbox, "/files/watch", NULL, NULL, NULL), b,
                                  CELLA_CLIENT_SSE_LINE_MAX, false, on_event, userdata);
}
