/* The image routes: GET /v1/images, POST /v1/images/{name}/build (SSE of the build log),
 * POST /v1/images/{name}/import (the tarball as the body), DELETE /v1/images/{name}.
 * Nothing here blocks the loop: builds are a child process, imports stream the body to a
 * temporary file with uv_fs writes and are unpacked in a libuv work thread, a deleted
 * image is renamed aside and removed in a work thread. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "common/json-cleanup.h"
#include "common/name.h"
#include "common/fsutil.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/image.h"

/* A name being built or imported: a second build/import/delete of it is 409. */
static bool busy_take(struct api *a, const char *name, struct http_request *req)
{
        if (!a->images_busy)
                a->images_busy = json_object();
        if (json_object_get(a->images_busy, name)) {
                http_respond_code(req, CELLA_E_IMAGE_BUSY, "image '%s' is being built or imported",
                                  name);
                return false;
        }
        json_object_set_new(a->images_busy, name, json_true());
        return true;
}

static void busy_release(struct api *a, const char *name)
{
        json_object_del(a->images_busy, name);
}

static bool image_complete(struct api *a, const char *name)
{
        char p[CELLA_PATH_MAX];
        struct stat st;

        return snprintf(p, sizeof(p), "%s/%s/.complete", a->cfg.images_dir, name) <
                       (int)sizeof(p) &&
               stat(p, &st) == 0;
}

/* image.json of an image (import or build), or NULL. */
static json_t *image_meta(const char *images_dir, const char *name)
{
        char p[CELLA_PATH_MAX];

        if (snprintf(p, sizeof(p), "%s/%s/image.json", images_dir, name) >= (int)sizeof(p))
                return NULL;
        return json_load_file(p, 0, NULL);
}

void api_images_list(struct api *a, struct http_request *req, const struct api_args *args)
{
        _cleanup_closedir_ DIR *d = opendir(a->cfg.images_dir);
        json_t *arr = json_array();
        json_t *j;
        struct dirent *de;

        while (d && arr && (de = readdir(d))) {
                char p[4096], ts[32];
                struct stat st;
                json_t *meta, *item;
                const char *src;

                if (de->d_name[0] == '.' || !image_name_is_valid(de->d_name))
                        continue;
                if (snprintf(p, sizeof(p), "%s/%s/.complete", a->cfg.images_dir, de->d_name) >=
                    (int)sizeof(p))
                        continue;
                if (stat(p, &st) < 0)
                        continue;
                time_format_iso((int64_t)st.st_mtim.tv_sec * 1000 + st.st_mtim.tv_nsec / 1000000,
                                ts, sizeof(ts));
                meta = image_meta(a->cfg.images_dir, de->d_name);
                src = json_string_value(json_object_get(meta, "source"));
                item = json_pack("{s:s, s:s, s:s}", "name", de->d_name, "createdAt", ts, "source",
                                 src && strcmp(src, "import") == 0 ? "import" : "build");
                if (item && json_is_integer(json_object_get(meta, "sizeBytes")))
                        json_object_set(item, "sizeBytes", json_object_get(meta, "sizeBytes"));
                if (item && json_is_array(json_object_get(meta, "packages")))
                        json_object_set(item, "packages", json_object_get(meta, "packages"));
                json_decref(meta);
                json_array_append_new(arr, item);
        }
        j = json_pack("{s:o}", "images", arr ? arr : json_array());
        http_respond_json(req, 200, j);
        json_decref(j);
}

struct build {
        struct api *a;
        char name[CELLA_NAME_MAX + 1];
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
                build_event(b, json_pack("{s:s, s:s}", "type", "complete", "name", b->name));
        else
                build_event(b, json_pack("{s:s, s:s, s:I}", "type", "error", "error",
                                         "image build failed", "exitCode", (json_int_t)b->status));
        if (b->req) {
                if (!b->ended)
                        http_response_end(b->req);
                http_request_on_abort(b->req, NULL, NULL);
                http_request_unref(b->req);
        }
        busy_release(b->a, b->name);
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

/* Validate name for a build, import or delete: 400 on a bad name. */
static bool name_check(struct http_request *req, const char *name)
{
        if (image_name_is_valid(name))
                return true;
        http_respond_code(req, CELLA_E_VALIDATION_FAILED, "image name must be 1-63 of [a-z0-9._-]");
        return false;
}

struct build_req {
        struct api *a;
        char name[CELLA_NAME_MAX + 1];
};

static void build_start(struct api *a, struct http_request *req, const char *name,
                        const char **pkgs, size_t npkgs)
{
        struct build *b;
        uv_process_options_t o = {0};
        uv_stdio_container_t io[3];
        char *args[5 + CELLA_IMAGE_MAX_PACKAGES];
        int r;

        b = calloc(1, sizeof(*b));
        if (!b) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                busy_release(a, name);
                return;
        }
        b->a = a;
        snprintf(b->name, sizeof(b->name), "%s", name);
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
        args[2] = b->name;
        args[3] = "--force";
        for (size_t i = 0; i < npkgs; i++)
                args[4 + i] = (char *)pkgs[i];
        args[4 + npkgs] = NULL;
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
                b->ended = true;
                uv_close((uv_handle_t *)&b->out, handle_closed);
                uv_close((uv_handle_t *)&b->err, handle_closed);
                uv_close((uv_handle_t *)&b->proc, handle_closed);
                return;
        }
        log_info("building image %s with %s (%zu extra packages)", name, a->cfg.image_builder,
                 npkgs);
        b->open_handles = 3;
        b->req = req;
        http_request_ref(req);
        http_request_on_abort(req, build_abort, b);
        http_response_begin_sse(req);
        build_event(b, json_pack("{s:s, s:s}", "type", "start", "name", b->name));
        uv_read_start((uv_stream_t *)&b->out, alloc_cb, read_cb);
        uv_read_start((uv_stream_t *)&b->err, alloc_cb, read_cb);
}

static void build_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct build_req *br = ud;
        const char *pkgs[CELLA_IMAGE_MAX_PACKAGES];
        struct cella_error err = {0};
        json_t *owner = NULL;
        size_t n = 0;

        http_request_set_userdata(req, NULL);
        if (image_decode_build(body, len, pkgs, &n, &owner, &err) < 0) {
                http_respond_error(req, &err, NULL);
                busy_release(br->a, br->name);
        } else {
                build_start(br->a, req, br->name, pkgs, n);
        }
        json_decref(owner);
        free(br);
}

static void build_req_abort(struct http_request *req, void *ud)
{
        struct build_req *br = http_request_get_userdata(req);

        (void)ud;
        if (br) {
                busy_release(br->a, br->name);
                free(br);
        }
        http_request_set_userdata(req, NULL);
}

void api_images_build(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct build_req *br;

        if (!name_check(req, name) || !busy_take(a, name, req))
                return;
        br = calloc(1, sizeof(*br));
        if (!br) {
                busy_release(a, name);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        br->a = a;
        snprintf(br->name, sizeof(br->name), "%s", name);
        http_request_set_userdata(req, br);
        http_request_on_abort(req, build_req_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, build_body, br) < 0) {
                http_request_set_userdata(req, NULL);
                busy_release(a, name);
                free(br);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}

/* ---- import ---- */

struct import_op {
        struct api *a;
        struct http_request *req; /* referenced; NULL once the client went away */
        char name[CELLA_NAME_MAX + 1];
        char tmp[CELLA_PATH_MAX]; /* the upload */
        bool replace;
        int fd;
        uv_fs_t fs;
        bool writing, ended, failed;
        bool run; /* set before the work is queued: the only flag the work thread reads */
        char *chunk;
        size_t chunk_len; /* bytes of the write in flight */
        int64_t received, limit;
        uv_work_t work;
        struct cella_error err;
        struct image_import_result res;
        int rc;
};

static void import_free(struct import_op *op)
{
        if (op->fd >= 0)
                close(op->fd); /* a regular file's close does not wait for the disk */
        busy_release(op->a, op->name);
        if (op->req) {
                http_request_on_abort(op->req, NULL, NULL);
                http_request_unref(op->req);
        }
        free(op->chunk);
        free(op);
}

static void import_work(uv_work_t *w)
{
        struct import_op *op = w->data;

        op->rc = !op->run ? -1
                          : image_import(op->a->cfg.images_dir, op->name, op->tmp, op->replace,
                                         &op->res, &op->err);
        unlink(op->tmp);
}

static void import_after(uv_work_t *w, int status)
{
        struct import_op *op = w->data;

        if (op->req && !op->failed) {
                if (status < 0 || op->rc < 0) {
                        if (status < 0)
                                cella_error_set(&op->err, CELLA_E_INTERNAL_ERROR,
                                                "import cancelled");
                        log_warn("image import '%s' failed: %s", op->name, op->err.msg);
                        http_respond_error(op->req, &op->err, NULL);
                } else {
                        _cleanup_json_ json_t *j = json_pack(
                                "{s:s, s:s, s:I, s:I, s:I, s:I}", "name", op->name, "source",
                                "import", "layers", (json_int_t)op->res.layers, "entries",
                                (json_int_t)op->res.entries, "sizeBytes", (json_int_t)op->res.bytes,
                                "skippedDevices", (json_int_t)op->res.skipped_devices);

                        log_info("image '%s' imported: %llu layers, %llu entries, %llu bytes",
                                 op->name, (unsigned long long)op->res.layers,
                                 (unsigned long long)op->res.entries,
                                 (unsigned long long)op->res.bytes);
                        http_respond_json(op->req, 201, j);
                }
        }
        import_free(op);
}

/* The upload is over (or failed, or the client left): unpack it, or only clean up, in a
 * work thread (the unlink too). */
static void import_finish(struct import_op *op)
{
        op->work.data = op;
        op->run = !op->failed;
        if (uv_queue_work(op->a->cfg.loop, &op->work, import_work, import_after) < 0) {
                unlink(op->tmp);
                if (op->req && !op->failed)
                        http_respond_code(op->req, CELLA_E_INTERNAL_ERROR, "cannot queue import");
                import_free(op);
        }
}

/* The upload failed and was answered: the server reads no more of the body for us (no
 * on_end comes), so the clean-up starts here, or once the write in flight is done. */
static void import_failed(struct import_op *op)
{
        op->failed = true;
        op->ended = true;
        if (!op->writing)
                import_finish(op);
}

static void import_written(uv_fs_t *f)
{
        struct import_op *op = f->data;
        ssize_t r = f->result;

        uv_fs_req_cleanup(f);
        op->writing = false;
        if (r >= 0 && (size_t)r < op->chunk_len)
                r = UV_ENOSPC; /* a short write to a regular file: the disk is full */
        if (r < 0 && !op->failed) {
                if (op->req)
                        http_respond_code(
                                op->req, r == UV_ENOSPC ? CELLA_E_NO_SPACE : CELLA_E_INTERNAL_ERROR,
                                "cannot store the upload: %s", uv_strerror((int)r));
                import_failed(op);
                return;
        }
        if (op->ended) {
                import_finish(op);
                return;
        }
        if (op->req)
                http_request_resume_body(op->req);
}

static size_t import_data(struct http_request *req, const char *data, size_t len, void *ud)
{
        struct import_op *op = ud;
        uv_buf_t b;
        int r;

        if (op->failed || op->ended)
                return len; /* answered already */
        if (op->writing)
                return 0; /* paused until the write is done */
        if (op->received + (int64_t)len > op->limit) {
                http_respond_code(req, CELLA_E_PAYLOAD_TOO_LARGE,
                                  "the image tarball is larger than %lld bytes",
                                  (long long)op->limit);
                import_failed(op);
                return len;
        }
        if (len > 1024 * 1024)
                len = 1024 * 1024;
        memcpy(op->chunk, data, len);
        op->chunk_len = len;
        b = uv_buf_init(op->chunk, (unsigned)len);
        op->fs.data = op;
        r = uv_fs_write(op->a->cfg.loop, &op->fs, op->fd, &b, 1, op->received, import_written);
        if (r < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot store the upload: %s",
                                  uv_strerror(r));
                import_failed(op);
                return len;
        }
        op->writing = true;
        op->received += (int64_t)len;
        return len;
}

static void import_end(struct http_request *req, void *ud)
{
        struct import_op *op = ud;

        (void)req;
        op->ended = true;
        if (!op->writing)
                import_finish(op);
}

static void import_abort(struct http_request *req, void *ud)
{
        struct import_op *op = ud;

        (void)req;
        /* the client left: nothing is answered; the work (if queued) still cleans up */
        op->failed = true;
        op->req = NULL;
        http_request_unref(req);
        if (!op->ended) {
                op->ended = true;
                if (!op->writing)
                        import_finish(op);
        }
}

static const struct http_body_ops import_ops = {.on_data = import_data, .on_end = import_end};

void api_images_import(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct import_op *op;
        const char *cl = http_request_header(req, "Content-Length");
        bool replace = false;

        if (!name_check(req, name))
                return;
        if (api_parse_bool(http_request_query(req, "replace"), false, &replace) < 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "replace must be true, false, 1 or 0");
                return;
        }
        if (cl && strtoll(cl, NULL, 10) > a->cfg.image_import_max) {
                http_respond_code(req, CELLA_E_PAYLOAD_TOO_LARGE,
                                  "the image tarball is larger than %lld bytes",
                                  (long long)a->cfg.image_import_max);
                return;
        }
        if (image_complete(a, name) && !replace) {
                http_respond_code(req, CELLA_E_IMAGE_EXISTS,
                                  "image '%s' exists (replace=true to replace it)", name);
                return;
        }
        if (replace && sandbox_table_image_in_use(a->cfg.table, name)) {
                http_respond_code(req, CELLA_E_IMAGE_IN_USE,
                                  "image '%s' is used by a sandbox; destroy it first", name);
                return;
        }
        if (!busy_take(a, name, req))
                return;
        op = calloc(1, sizeof(*op));
        if (op)
                op->chunk = malloc(1024 * 1024);
        if (!op || !op->chunk) {
                if (op)
                        free(op);
                busy_release(a, name);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        op->a = a;
        op->replace = replace;
        op->limit = a->cfg.image_import_max;
        snprintf(op->name, sizeof(op->name), "%s", name);
        snprintf(op->tmp, sizeof(op->tmp), "%s/.upload-%s.XXXXXX", a->cfg.images_dir, name);
        /* a fresh install may have no images dir yet (a quick mkdir, as the builder does) */
        op->fd = fs_mkdir_p(a->cfg.images_dir, 0755) < 0 ? -1 : mkostemp(op->tmp, O_CLOEXEC);
        if (op->fd < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot store the upload in %s: %s",
                                  a->cfg.images_dir, strerror(errno));
                busy_release(a, name);
                free(op->chunk);
                free(op);
                return;
        }
        op->req = req;
        http_request_ref(req);
        http_request_on_abort(req, import_abort, op);
        if (http_request_stream_body(req, &import_ops, op) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
                op->failed = true;
                op->ended = true;
                import_finish(op);
        }
}

/* ---- delete ---- */

static void remove_work(uv_work_t *w)
{
        char *path = w->data;
        char *slash = strrchr(path, '/');
        int dfd;

        *slash = '\0';
        dfd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dfd >= 0) {
                int r = image_remove_tree(dfd, slash + 1);

                if (r < 0)
                        log_warn("cannot remove %s/%s: %s", path, slash + 1, strerror(-r));
                close(dfd);
        }
}

static void remove_after(uv_work_t *w, int status)
{
        (void)status;
        free(w->data);
        free(w);
}

void api_images_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        char from[CELLA_PATH_MAX], *to;
        uv_work_t *w;
        json_t *j;

        if (!name_check(req, name))
                return;
        if (!image_complete(a, name)) {
                http_respond_code(req, CELLA_E_IMAGE_NOT_FOUND, "no image '%s'", name);
                return;
        }
        if (a->images_busy && json_object_get(a->images_busy, name)) {
                http_respond_code(req, CELLA_E_IMAGE_BUSY, "image '%s' is being built or imported",
                                  name);
                return;
        }
        if (sandbox_table_image_in_use(a->cfg.table, name)) {
                http_respond_code(req, CELLA_E_IMAGE_IN_USE,
                                  "image '%s' is used by a sandbox (or is the daemon's default "
                                  "image); destroy the sandbox first",
                                  name);
                return;
        }
        snprintf(from, sizeof(from), "%s/%s", a->cfg.images_dir, name);
        if (asprintf(&to, "%s/.delete-%s.%llx", a->cfg.images_dir, name,
                     (unsigned long long)time_mono_us()) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        /* the rename is the delete (the name is free at once); the tree goes in a thread */
        if (rename(from, to) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot remove image '%s': %s", name,
                                  strerror(errno));
                free(to);
                return;
        }
        log_info("image '%s' deleted", name);
        w = calloc(1, sizeof(*w));
        if (w) {
                w->data = to;
                if (uv_queue_work(a->cfg.loop, w, remove_work, remove_after) < 0) {
                        free(w);
                        free(to);
                }
        } else {
                free(to);
        }
        j = json_pack("{s:s, s:b}", "name", name, "deleted", 1);
        http_respond_json(req, 200, j);
        json_decref(j);
}
