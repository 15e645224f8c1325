/* GET /v1/images and POST /v1/images/{name}/build (SSE of the build log). */
#include <dirent.h>
#include <errno.h>
#include <string.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/timeutil.h"
#include "daemon/api-internal.h"

void api_images_list(struct api *a, struct http_request *req)
{
        _cleanup_closedir_ DIR *d = opendir(a->cfg.images_dir);
        json_t *arr = json_array();
        json_t *j;
        struct dirent *de;

        while (d && arr && (de = readdir(d))) {
                char p[4096], ts[32];
                struct stat st;

                if (de->d_name[0] == '.' || !api_image_name_ok(de->d_name))
                        continue;
                if (snprintf(p, sizeof(p), "%s/%s/.complete", a->cfg.images_dir, de->d_name) >=
                    (int)sizeof(p))
                        continue;
                if (stat(p, &st) < 0)
                        continue;
                time_format_iso((int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000,
                                ts, sizeof(ts));
                json_array_append_new(arr,
                                      json_pack("{s:s, s:s}", "name", de->d_name, "createdAt", ts));
        }
        j = json_pack("{s:o}", "images", arr ? arr : json_array());
        http_respond_json(req, 200, j);
        json_decref(j);
}

struct build {
        struct http_request *req; /* referenced while the response is open */
        uv_process_t proc;
        uv_pipe_t out, err;
        struct buf line[2];
        int open_handles;
        bool exited;
        int64_t status;
        int term_signal;
        bool ended;
};

static void build_event(struct build *b, json_t *ev)
{
        char ts[32];

        if (!ev)
                return;
        api_timestamp(ts);
        json_object_set_new(ev, "timestamp", json_string(ts));
        if (b->req && !b->ended)
                http_sse_send(b->req, ev, NULL, NULL);
        json_decref(ev);
}

static void build_line(struct build *b, const char *s, size_t n)
{
        build_event(b, json_pack("{s:s, s:s%}", "type", "log", "data", s, n));
}

static void build_finish(struct build *b)
{
        if (b->open_handles > 0)
                return;
        for (int i = 0; i < 2; i++) {
                if (b->line[i].len)
                        build_line(b, b->line[i].data, b->line[i].len);
                buf_free(&b->line[i]);
        }
        if (b->exited && b->status == 0 && b->term_signal == 0)
                build_event(b, json_pack("{s:s}", "type", "complete"));
        else
                build_event(b, json_pack("{s:s, s:s, s:I}", "type", "error", "error",
                                         "image build failed", "exitCode", (json_int_t)b->status));
        if (b->req) {
                if (!b->ended)
                        http_response_end(b->req);
                http_request_on_abort(b->req, NULL, NULL);
                http_request_unref(b->req);
        }
        free(b);
}

static void handle_closed(uv_handle_t *h)
{
        struct build *b = h->data;

        b->open_handles--;
        build_finish(b);
}

static void on_exit_cb(uv_process_t *p, int64_t status, int sig)
{
        struct build *b = p->data;

        b->exited = true;
        b->status = status;
        b->term_signal = sig;
        uv_close((uv_handle_t *)p, handle_closed);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *out)
{
        static char chunk[16384];

        (void)h;
        (void)suggested;
        *out = uv_buf_init(chunk, sizeof(chunk));
}

static void read_cb(uv_stream_t *s, ssize_t n, const uv_buf_t *bufp)
{
        struct build *b = s->data;
        int which = s == (uv_stream_t *)&b->err;
        struct buf *l = &b->line[which];

        if (n < 0) {
                uv_close((uv_handle_t *)s, handle_closed);
                return;
        }
        for (ssize_t i = 0; i < n; i++) {
                char ch = bufp->base[i];

                if (ch == '\n' || l->len >= 8192) {
                        build_line(b, l->data ? l->data : "", l->len);
                        buf_reset(l);
                        if (ch == '\n')
                                continue;
                }
                buf_append(l, &ch, 1);
        }
}

static void build_abort(struct http_request *req, void *ud)
{
        struct build *b = ud;

        (void)req;
        b->ended = true;
        if (!b->exited)
                uv_process_kill(&b->proc, SIGTERM);
}

void api_images_build(struct api *a, struct http_request *req, const char *name)
{
        struct build *b;
        uv_process_options_t o = {0};
        uv_stdio_container_t io[3];
        char *args[5];
        int r;

        if (!api_image_name_ok(name)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "image name must be 1-63 of [a-z0-9._-]");
                return;
        }
        b = calloc(1, sizeof(*b));
        if (!b) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        uv_pipe_init(a->cfg.loop, &b->out, 0);
        uv_pipe_init(a->cfg.loop, &b->err, 0);
        b->out.data = b->err.data = b->proc.data = b;
        io[0].flags = UV_IGNORE;
        io[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        io[1].data.stream = (uv_stream_t *)&b->out;
        io[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
        io[2].data.stream = (uv_stream_t *)&b->err;
        args[0] = (char *)a->cfg.image_builder;
        args[1] = (char *)a->cfg.images_dir;
        args[2] = (char *)name;
        args[3] = "--force";
        args[4] = NULL;
        o.file = a->cfg.image_builder;
        o.args = args;
        o.exit_cb = on_exit_cb;
        o.stdio = io;
        o.stdio_count = 3;
        r = uv_spawn(a->cfg.loop, &b->proc, &o);
        if (r < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot run %s: %s",
                                  a->cfg.image_builder, uv_strerror(r));
                b->open_handles = 3;
                uv_close((uv_handle_t *)&b->out, handle_closed);
                uv_close((uv_handle_t *)&b->err, handle_closed);
                uv_close((uv_handle_t *)&b->proc, handle_closed);
                b->ended = true;
                return;
        }
        log_info("building image %s with %s", name, a->cfg.image_builder);
        b->open_handles = 3;
        b->req = req;
        http_request_ref(req);
        http_request_on_abort(req, build_abort, b);
        http_response_begin_sse(req);
        uv_read_start((uv_stream_t *)&b->out, alloc_cb, read_cb);
        uv_read_start((uv_stream_t *)&b->err, alloc_cb, read_cb);
}
