/* The file routes under /v1/sandboxes/{id}/files (docs/api.md): raw streamed GET and PUT,
 * DELETE, and the JSON read/write/mkdir/move/list/exists, each one agent stream.
 *
 * struct file_op is a struct api_req (api-req.h) with the route's paths and what it
 * gathers; a raw GET writes its body through the request's writer (agent credit returned
 * when the client took the bytes). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/json-cleanup.h"
#include "common/json-path.h"
#include "common/limits.h"
#include "common/path.h"
#include "common/utf8.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"
#include "daemon/metrics.h"

enum fkind { F_GET, F_PUT, F_DELETE, F_READ, F_WRITE, F_MKDIR, F_MOVE, F_LIST, F_EXISTS };

struct file_op {
        struct api_req base; /* first; a raw GET is its RAW mode */
        enum fkind kind;
        char path[CELLA_PATH_MAX + 1];
        char to[CELLA_PATH_MAX + 1];
        bool recursive;
        bool include_hidden;
        bool base64;
        long mode;       /* -1: keep */
        struct buf data; /* JSON read: file bytes; JSON write: bytes to send */
        size_t sent;     /* JSON write: bytes sent to the agent; raw GET: body bytes written */
        bool end_sent;
        uint64_t size;
        json_t *files;
        size_t info_bytes;
        /* raw GET from the host (0061): the file, and a watch of the PID 1 that closes it */
        int fd;
        uv_poll_t *exit_watch;
        int64_t instance; /* the sandbox's run it was opened in */
};

static const struct {
        const char *ext;
        const char *type;
} mime_types[] = {
        {"txt", "text/plain; charset=utf-8"},
        {"md", "text/markdown; charset=utf-8"},
        {"html", "text/html; charset=utf-8"},
        {"htm", "text/html; charset=utf-8"},
        {"css", "text/css; charset=utf-8"},
        {"csv", "text/csv; charset=utf-8"},
        {"js", "text/javascript; charset=utf-8"},
        {"mjs", "text/javascript; charset=utf-8"},
        {"ts", "text/plain; charset=utf-8"},
        {"py", "text/x-python; charset=utf-8"},
        {"sh", "text/x-shellscript; charset=utf-8"},
        {"c", "text/x-c; charset=utf-8"},
        {"h", "text/x-c; charset=utf-8"},
        {"json", "application/json"},
        {"xml", "application/xml"},
        {"yaml", "application/yaml"},
        {"yml", "application/yaml"},
        {"pdf", "application/pdf"},
        {"zip", "application/zip"},
        {"gz", "application/gzip"},
        {"tar", "application/x-tar"},
        {"wasm", "application/wasm"},
        {"png", "image/png"},
        {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},
        {"gif", "image/gif"},
        {"svg", "image/svg+xml"},
        {"webp", "image/webp"},
        {"ico", "image/x-icon"},
        {"mp3", "audio/mpeg"},
        {"wav", "audio/wav"},
        {"mp4", "video/mp4"},
        {"webm", "video/webm"},
};

/* Content-Type from the file name's extension; application/octet-stream by default. */
static const char *mime_type(const char *path)
{
        const char *slash = strrchr(path, '/');
        const char *dot = strrchr(slash ? slash : path, '.');

        if (dot && dot[1])
                for (size_t i = 0; i < ARRAY_SIZE(mime_types); i++)
                        if (strcasecmp(dot + 1, mime_types[i].ext) == 0)
                                return mime_types[i].type;
        return "application/octet-stream";
}

static void respond(struct file_op *op, json_t *j)
{
        char ts[32];

        if (j) {
                api_timestamp(ts);
                json_object_set_new(j, "success", json_true());
                json_object_set_new(j, "timestamp", json_string(ts));
        }
        api_req_respond_json(&op->base, 200, j);
        json_decref(j);
        api_req_finish(&op->base);
}

static void fail_code(struct file_op *op, int code, const char *msg)
{
        struct cella_error e = {0};

        cella_error_set(&e, code, "%s", msg);
        api_req_fail(&op->base, &e, NULL);
        api_req_finish(&op->base);
        if (op->base.stream)
                agent_stream_cancel(op->base.stream);
}

/* ---- raw GET: DATA frames become the body ---- */

/* The size in a FILE_INFO frame of a file about to be read. A directory is IS_DIRECTORY, a
 * missing size an agent fault; both fail the operation and return -1. */
static int file_info_size(struct file_op *op, const struct frame *f, json_int_t *ret_size)
{
        _cleanup_json_ json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        json_int_t size = -1;
        const char *type = NULL;
        bool dir;

        if (j)
                json_unpack(j, "{s?I, s?s}", "size", &size, "type", &type);
        dir = type && strcmp(type, "directory") == 0;
        if (dir) {
                fail_code(op, CELLA_E_IS_DIRECTORY, "path is a directory");
                return -1;
        }
        if (size < 0) {
                fail_code(op, CELLA_E_INTERNAL_ERROR, "agent sent no file size");
                return -1;
        }
        *ret_size = size;
        return 0;
}

static void get_frame(struct file_op *op, const struct frame *f)
{
        struct api_req *r = &op->base;

        switch (f->type) {
        case FRAME_FILE_INFO: {
                json_int_t size;

                if (file_info_size(op, f, &size) < 0)
                        return;
                op->size = (uint64_t)size;
                if (http_response_begin(r->http, 200, mime_type(op->path), size, NULL) < 0) {
                        api_req_finish(r);
                        agent_stream_cancel(r->stream);
                        return;
                }
                if (http_request_is_head(r->http)) {
                        http_response_end(r->http);
                        api_req_finish(r);
                        agent_stream_cancel(r->stream);
                }
                return;
        }
        case FRAME_DATA:
                if (op->sent + f->len > op->size) {
                        /* more bytes than the Content-Length we promised (the file grew):
                         * a short, closed response is honest, a longer one corrupts the
                         * connection */
                        agent_stream_ack(r->stream, f->len);
                        if (r->http)
                                http_request_close(r->http);
                        api_req_finish(r);
                        agent_stream_cancel(r->stream);
                        return;
                }
                op->sent += f->len;
                metrics_bytes(METRICS_BYTES_DOWNLOAD, f->len);
                api_req_write(r, f->payload, f->len);
                return;
        case FRAME_RESULT:
                if (r->http && op->sent == op->size)
                        http_response_end(r->http);
                else if (r->http)
                        http_request_close(r->http); /* the file shrank: short body */
                api_req_finish(r);
                return;
        default:
                return;
        }
}

/* ---- raw GET from the host (decision 0061) ----
 *
 * For a running sandbox, cellad opens the file itself (sandbox_open_file: resolved in the
 * sandbox's root, no mount crossed, as its root could) and sends it by sendfile; anything
 * else (missing, not a regular file, a mount on the way, no right) takes the agent's path,
 * whose answer is the reference. The file is closed as soon as the PID 1 exits, so that
 * the sandbox's filesystem is never held past its run. */

static void exit_watch_closed(uv_handle_t *h)
{
        free(h);
}

static void host_close(struct file_op *op)
{
        if (op->exit_watch) {
                int pidfd = -1;

                uv_fileno((uv_handle_t *)op->exit_watch, &pidfd);
                uv_close((uv_handle_t *)op->exit_watch, exit_watch_closed);
                op->exit_watch = NULL;
                if (pidfd >= 0)
                        close(pidfd);
        }
        if (op->fd >= 0) {
                close(op->fd);
                op->fd = -1;
        }
}

/* The download stops short: the client must not take a short file for a whole one. */
static void host_cut(struct file_op *op)
{
        if (op->base.http)
                http_request_close(op->base.http);
        api_req_finish(&op->base);
        host_close(op);
}

static void host_pump(struct file_op *op);

static void host_sent(struct http_request *req, int status, size_t len, void *ud)
{
        struct file_op *op = ud;

        (void)req;
        (void)len;
        if (status < 0)
                host_cut(op);
        else
                host_pump(op);
        api_req_unref(&op->base); /* the write's */
}

static void host_pump(struct file_op *op)
{
        struct api_req *r = &op->base;
        int64_t rc;

        if (r->finished || !r->http || op->fd < 0) {
                host_close(op);
                return;
        }
        if (op->sent == op->size) {
                http_response_end(r->http);
                api_req_finish(r);
                host_close(op);
                return;
        }
        if (sandbox_instance(r->sb) != op->instance) {
                host_cut(op); /* it stopped or slept: its files are not read past its run */
                return;
        }
        sandbox_touch(r->sb); /* a download in progress keeps it awake, as its frames did */
        api_req_ref(r);       /* the write's */
        rc = http_response_sendfile(
                r->http, op->fd, op->sent,
                (size_t)MIN(op->size - op->sent, (uint64_t)CELLA_FILES_SENDFILE_CHUNK), host_sent,
                op);
        if (rc <= 0) {
                host_cut(op); /* the file shrank (as the agent's ERROR), or the client left */
                api_req_unref(r);
                return;
        }
        op->sent += (uint64_t)rc;
        metrics_bytes(METRICS_BYTES_DOWNLOAD, (size_t)rc);
}

static void host_exit(uv_poll_t *h, int status, int events)
{
        (void)status;
        (void)events;
        host_cut(h->data);
}

/* The raw GET from the host: true when it took the request (answered or streaming). */
static bool host_get(struct file_op *op)
{
        struct api_req *r = &op->base;
        struct stat st;
        int pidfd = -1;

        op->fd = sandbox_open_file(r->sb, op->path, &st, &pidfd);
        if (op->fd < 0)
                return false;
        op->instance = sandbox_instance(r->sb);
        op->exit_watch = malloc(sizeof(*op->exit_watch));
        if (!op->exit_watch ||
            uv_poll_init(http_request_loop(r->http), op->exit_watch, pidfd) < 0) {
                free(op->exit_watch);
                op->exit_watch = NULL;
                close(pidfd);
                host_close(op);
                return false;
        }
        op->exit_watch->data = op;
        uv_poll_start(op->exit_watch, UV_READABLE, host_exit);
        op->size = (uint64_t)st.st_size;
        if (http_response_begin(r->http, 200, mime_type(op->path), (int64_t)op->size, NULL) < 0) {
                api_req_finish(r);
                host_close(op);
                return true;
        }
        if (http_request_is_head(r->http))
                op->sent = op->size; /* nothing is sent: the head says it all */
        host_pump(op);
        return true;
}

/* ---- frames ---- */

static void on_frame(struct api_req *r, const struct frame *f)
{
        struct file_op *op = (struct file_op *)r;
        struct agent_stream *s = r->stream;
        json_t *res;

        if (r->finished) {
                if (frame_type_is_data(f->type))
                        agent_stream_ack(s, f->len);
                return;
        }
        if (f->type == FRAME_ERROR) {
                /* mid-body, the connection closes: the client must not take a short file
                 * for a whole one */
                api_req_fail_frame(r, f);
                return;
        }
        if (op->kind == F_GET) {
                get_frame(op, f);
                return;
        }
        switch (f->type) {
        case FRAME_DATA: /* JSON read */
                if (op->data.len + f->len > CELLA_FILES_JSON_MAX) {
                        agent_stream_ack(s, f->len);
                        fail_code(op, CELLA_E_FILE_TOO_LARGE,
                                  "file too large for the JSON read; use GET /files");
                        return;
                }
                if (buf_append(&op->data, f->payload, f->len) < 0) {
                        agent_stream_ack(s, f->len);
                        fail_code(op, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
                agent_stream_ack(s, f->len);
                return;
        case FRAME_FILE_INFO:
                if (op->kind == F_LIST) {
                        _cleanup_json_ json_t *j =
                                json_loadb((const char *)f->payload, f->len, 0, NULL);

                        op->info_bytes += f->len;
                        if (op->info_bytes > CELLA_FILES_JSON_MAX) {
                                fail_code(op, CELLA_E_FILE_TOO_LARGE,
                                          "listing too large; list a smaller directory");
                                return;
                        }
                        if (json_is_object(j))
                                json_array_append(op->files, j);
                } else if (op->kind == F_READ) {
                        json_int_t size;

                        if (file_info_size(op, f, &size) < 0)
                                return;
                        if (size > CELLA_FILES_JSON_MAX) {
                                fail_code(op, CELLA_E_FILE_TOO_LARGE,
                                          "file too large for the JSON read; use GET /files");
                                return;
                        }
                }
                return;
        case FRAME_RESULT:
                break;
        default:
                return;
        }

        /* RESULT */
        {
                _cleanup_json_ json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
                json_int_t size = 0;

                if (j)
                        json_unpack(j, "{s?I}", "size", &size);
                switch (op->kind) {
                case F_PUT:
                        res = json_set_path(
                                json_pack("{s:s, s:I}", "path", "", "size",
                                          (json_int_t)(size ? (uint64_t)size : op->size)),
                                "path", op->path);
                        break;
                case F_WRITE:
                        res = json_set_path(json_pack("{s:s, s:I}", "path", "", "size",
                                                      (json_int_t)op->data.len),
                                            "path", op->path);
                        break;
                case F_DELETE:
                        res = json_set_path(json_object(), "path", op->path);
                        break;
                case F_MKDIR:
                        res = json_set_path(
                                json_pack("{s:s, s:b}", "path", "", "recursive", op->recursive),
                                "path", op->path);
                        break;
                case F_MOVE:
                        res = json_set_path(json_set_path(json_object(), "from", op->path), "to",
                                            op->to);
                        break;
                case F_EXISTS: {
                        json_t *e = j ? json_object_get(j, "exists") : NULL;

                        res = json_set_path(
                                json_pack("{s:s, s:b}", "path", "", "exists", json_is_true(e)),
                                "path", op->path);
                        break;
                }
                case F_LIST:
                        res = json_set_path(json_pack("{s:s, s:O, s:I}", "path", "", "files",
                                                      op->files, "count",
                                                      (json_int_t)json_array_size(op->files)),
                                            "path", op->path);
                        break;
                case F_READ: {
                        const char *d = op->data.data ? op->data.data : "";
                        bool text = utf8_is_valid(d, op->data.len);
                        json_t *content;

                        if (text && !op->base64) {
                                content = json_stringn(d, op->data.len);
                        } else {
                                _cleanup_buf_ struct buf e = BUF_INIT;

                                content = base64_encode(&e, d, op->data.len) < 0
                                                  ? NULL
                                                  : json_stringn(e.data ? e.data : "", e.len);
                        }
                        res = content ? json_set_path(
                                                json_pack("{s:s, s:o, s:s, s:b, s:s, s:I}", "path",
                                                          "", "content", content, "encoding",
                                                          text && !op->base64 ? "utf-8" : "base64",
                                                          "isBinary", !text, "mimeType",
                                                          mime_type(op->path), "size",
                                                          (json_int_t)op->data.len),
                                                "path", op->path)
                                      : NULL;
                        break;
                }
                default:
                        res = NULL;
                        break;
                }
                respond(op, res);
        }
}

/* JSON write: send the decoded content as the agent's credit allows. */
static void pump(struct file_op *op)
{
        struct agent_stream *s = op->base.stream;

        while (s && op->sent < op->data.len) {
                size_t n = MIN(op->data.len - op->sent, agent_stream_send_credit(s));

                n = MIN(n, (size_t)CELLA_FRAME_DATA_CHUNK);
                if (n == 0 || agent_stream_send_data(s, op->data.data + op->sent, n) < 0)
                        return;
                op->sent += n;
        }
        if (s && !op->end_sent) {
                op->end_sent = true;
                agent_stream_send_end(s);
        }
}

static void on_writable(struct api_req *r)
{
        struct file_op *op = (struct file_op *)r;

        if (op->kind == F_WRITE)
                pump(op);
        else if (op->kind == F_PUT && r->http)
                http_request_resume_body(r->http);
}

/* ---- raw PUT body ---- */

static size_t put_data(struct http_request *req, const char *data, size_t len, void *ud)
{
        struct file_op *op = ud;
        struct agent_stream *s = op->base.stream;
        size_t n;

        (void)req;
        if (!s || op->base.finished)
                return len; /* answered already: the rest is discarded */
        n = MIN(len, agent_stream_send_credit(s));
        n = MIN(n, (size_t)CELLA_FRAME_MAX);
        if (n == 0 || agent_stream_send_data(s, data, n) < 0)
                return 0; /* paused until on_writable */
        op->size += n;
        metrics_bytes(METRICS_BYTES_UPLOAD, n);
        return n;
}

static void put_end(struct http_request *req, void *ud)
{
        struct file_op *op = ud;

        (void)req;
        if (op->base.stream && !op->end_sent) {
                op->end_sent = true;
                agent_stream_send_end(op->base.stream);
        }
}

static const struct http_body_ops put_body_ops = {put_data, put_end};

/* Open the agent stream of type with payload (consumed) for op; on failure the request is
 * answered. */
static int start(struct file_op *op, uint8_t type, json_t *payload)
{
        int r = api_req_open(&op->base, type, payload);

        json_decref(payload);
        return r;
}

static void json_body(struct api_req *r, const char *body, size_t len)
{
        struct file_op *op = (struct file_op *)r;
        struct cella_error err = {0};
        json_t *payload;

        switch (op->kind) {
        case F_READ: {
                struct api_file_read p;

                if (api_decode_file_read(body, len, &p, &err) < 0)
                        break;
                snprintf(op->path, sizeof(op->path), "%s", p.path);
                op->base64 = p.base64;
                start(op, FRAME_FILE_READ,
                      wire_file_encode(FRAME_FILE_READ, &(struct wire_file){.path = op->path}));
                api_file_read_done(&p);
                return;
        }
        case F_WRITE: {
                struct api_file_write p;

                if (api_decode_file_write(body, len, &p, &err) < 0)
                        break;
                snprintf(op->path, sizeof(op->path), "%s", p.path);
                buf_free(&op->data); /* a second call, once the sandbox runs */
                op->data = p.content;
                p.content = (struct buf)BUF_INIT;
                api_file_write_done(&p);
                if (start(op, FRAME_FILE_WRITE,
                          wire_file_encode(FRAME_FILE_WRITE,
                                           &(struct wire_file){.path = op->path, .mode = -1})) == 0)
                        pump(op);
                return;
        }
        case F_MKDIR: {
                struct api_mkdir p;

                if (api_decode_mkdir(body, len, &p, &err) < 0)
                        break;
                snprintf(op->path, sizeof(op->path), "%s", p.path);
                op->recursive = p.recursive;
                payload = wire_file_encode(FRAME_FILE_OP, &(struct wire_file){
                                                                  .op = WIRE_FILE_MKDIR,
                                                                  .path = op->path,
                                                                  .recursive = op->recursive,
                                                          });
                start(op, FRAME_FILE_OP, payload);
                return;
        }
        case F_MOVE: {
                struct api_move p;

                if (api_decode_move(body, len, &p, &err) < 0)
                        break;
                snprintf(op->path, sizeof(op->path), "%s", p.from);
                snprintf(op->to, sizeof(op->to), "%s", p.to);
                payload = wire_file_encode(
                        FRAME_FILE_OP,
                        &(struct wire_file){.op = WIRE_FILE_MOVE, .path = op->path, .to = op->to});
                start(op, FRAME_FILE_OP, payload);
                return;
        }
        default:
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "bad file route");
                break;
        }
        api_req_fail(r, &err, NULL);
}

/* path (and the booleans) from the query string; answers and returns -1 on error. */
static int query_path(struct http_request *req, struct file_op *op, bool dflt_workspace)
{
        struct cella_error err = {0};
        const char *p = http_request_query(req, "path");
        const char *enc = http_request_query(req, "pathEncoding");
        bool base64 = enc && strcmp(enc, "base64") == 0;

        if (enc && !base64 && strcmp(enc, "utf-8") != 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "pathEncoding is utf-8 or base64");
                return -1;
        }
        if (!p && dflt_workspace) {
                p = CELLA_WORKSPACE;
                base64 = false;
        }
        if (!p) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "query parameter path is "
                                  "required");
                return -1;
        }
        if (sandbox_path_decode(p, strlen(p), base64, op->path, sizeof(op->path), &err) < 0) {
                http_respond_error(req, &err, NULL);
                return -1;
        }
        if (api_parse_bool(http_request_query(req, "recursive"), false, &op->recursive) < 0 ||
            api_parse_bool(http_request_query(req, "includeHidden"), false, &op->include_hidden) <
                    0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "booleans in the query are true, false, 1 or 0");
                return -1;
        }
        return 0;
}

static void file_free(struct api_req *r)
{
        struct file_op *op = (struct file_op *)r;

        host_close(op);
        buf_free(&op->data);
        json_decref(op->files);
}

static const struct api_req_ops file_ops = {
        .frame = on_frame, .writable = on_writable, .free = file_free};

/* The routes without a JSON body: checks, then the agent stream (run again once the
 * sandbox runs, if it had to start). */
static void files_step(struct api_req *r)
{
        struct file_op *op = (struct file_op *)r;
        struct http_request *req = r->http;

        switch (op->kind) {
        case F_LIST:
                if (query_path(req, op, true) < 0)
                        break;
                if (!op->files) /* a second call keeps the first's */
                        op->files = json_array();
                start(op, FRAME_FILE_OP,
                      wire_file_encode(FRAME_FILE_OP, &(struct wire_file){
                                                              .op = WIRE_FILE_LIST,
                                                              .path = op->path,
                                                              .recursive = op->recursive,
                                                              .include_hidden = op->include_hidden,
                                                      }));
                break;
        case F_EXISTS:
                if (query_path(req, op, false) < 0)
                        break;
                start(op, FRAME_FILE_OP,
                      wire_file_encode(FRAME_FILE_OP, &(struct wire_file){.op = WIRE_FILE_EXISTS,
                                                                          .path = op->path}));
                break;
        case F_DELETE:
                if (query_path(req, op, false) < 0)
                        break;
                start(op, FRAME_FILE_OP,
                      wire_file_encode(FRAME_FILE_OP, &(struct wire_file){
                                                              .op = WIRE_FILE_DELETE,
                                                              .path = op->path,
                                                              .recursive = op->recursive,
                                                      }));
                break;
        case F_GET:
                if (query_path(req, op, false) < 0)
                        break;
                /* running (a sleeping one wakes: this runs again then) */
                if (!api_req_find_sandbox(r))
                        break;
                if (host_get(op))
                        break;
                start(op, FRAME_FILE_READ,
                      wire_file_encode(FRAME_FILE_READ, &(struct wire_file){.path = op->path}));
                break;
        case F_PUT: {
                const char *mode = http_request_query(req, "mode");
                json_t *payload;

                if (query_path(req, op, false) < 0)
                        break;
                if (mode) {
                        char *end;

                        errno = 0;
                        op->mode = strtol(mode, &end, 8);
                        if (errno || end == mode || *end || op->mode < 0 || op->mode > 07777) {
                                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                                  "mode must be octal, 0 to 7777");
                                break;
                        }
                }
                payload = wire_file_encode(FRAME_FILE_WRITE, &(struct wire_file){
                                                                     .path = op->path,
                                                                     .mode = (int)op->mode,
                                                             });
                if (start(op, FRAME_FILE_WRITE, payload) < 0)
                        break;
                if (http_request_stream_body(req, &put_body_ops, op) < 0) {
                        fail_code(op, CELLA_E_INTERNAL_ERROR, "cannot read the body");
                        break;
                }
                break;
        }
        default:
                break;
        }
}

static void files(struct api *a, struct http_request *req, const char *name, const char *sub)
{
        struct file_op *op =
                (struct file_op *)api_req_new(a, req, name, sizeof(struct file_op), &file_ops);
        const char *m = http_request_method(req);

        if (!op)
                return;
        op->mode = -1;
        op->fd = -1;

        if (*sub) {
                static const struct {
                        const char *name;
                        enum fkind kind;
                } subs[] = {{"read", F_READ}, {"write", F_WRITE}, {"mkdir", F_MKDIR},
                            {"move", F_MOVE}, {"list", F_LIST},   {"exists", F_EXISTS}};

                for (size_t i = 0; i < ARRAY_SIZE(subs); i++)
                        if (strcmp(sub, subs[i].name) == 0)
                                op->kind = subs[i].kind;
        } else if (strcmp(m, "GET") == 0 || strcmp(m, "HEAD") == 0) {
                op->kind = F_GET;
                op->base.mode = API_REQ_RAW;
        } else if (strcmp(m, "PUT") == 0) {
                op->kind = F_PUT;
        } else {
                op->kind = F_DELETE;
        }

        switch (op->kind) {
        case F_READ:
        case F_WRITE:
        case F_MKDIR:
        case F_MOVE:
                api_req_read_body(&op->base,
                                  op->kind == F_WRITE ? CELLA_FILES_JSON_MAX
                                                      : CELLA_HTTP_MAX_JSON_BODY,
                                  json_body);
                return; /* the body read holds the handler's reference */
        default:
                break;
        }
        api_req_run(&op->base, files_step);
        api_req_unref(&op->base);
}

/* One handler per route of the table, the sub-route as files() knows it. */
#define FILES_ROUTE(fn, sub)                                                       \
        void fn(struct api *a, struct http_request *req, const struct api_args *p) \
        {                                                                          \
                files(a, req, p->name, sub);                                       \
        }
FILES_ROUTE(api_files_raw, "")
FILES_ROUTE(api_files_read, "read")
FILES_ROUTE(api_files_write, "write")
FILES_ROUTE(api_files_mkdir, "mkdir")
FILES_ROUTE(api_files_move, "move")
FILES_ROUTE(api_files_list, "list")
FILES_ROUTE(api_files_exists, "exists")
