/* The API handlers (api.c, api-exec.c, api-files.c) end to end over HTTP, against a
 * scripted agent speaking the real protocol on a unix socket (a forked child), with a
 * one-sandbox stand-in for the sandbox table (the real one needs the runtime; the
 * integration tests cover it). Checks: routing and 404/405, auth, ExecResult, SSE events
 * with a UTF-8 character split across frames and with non-UTF-8 bytes, timeout -> 408
 * with context, agent ERROR -> API error, 3 MiB of output through the credit window,
 * raw file GET (Content-Length, Content-Type) and PUT (streamed), JSON read/write, list,
 * exists, mkdir, move, delete. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/un.h>
#include <sys/wait.h>

#include <cmocka.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/limits.h"
#include "daemon/api-req.h"
#include "daemon/api.h"
#include "daemon/ratelimit.h"
#include "daemon/sandbox-directory.h"

/* three windows of output: more than the agent may send before the client takes some */
#define BIG (3 * CELLA_STREAM_WINDOW)

/* ---- the stand-in sandbox table (loop thread) ---- */

struct sandbox {
        char name[CELLA_NAME_MAX + 1];
        bool exists;
        bool asleep; /* POST /sleep put it to sleep (its agent link closed) */
        struct agent_conn *conn;
        json_t *env;
};

static struct sandbox the_sandbox;
static uv_loop_t loop;
static char sock_path[100];

static void on_lost(struct agent_conn *c, int err, void *ud)
{
        (void)c;
        (void)err;
        (void)ud;
        the_sandbox.conn = NULL;
}

static json_t *info(const struct sandbox *s)
{
        return json_pack("{s:s, s:s}", "id", s->name, "state", s->asleep ? "sleeping" : "running");
}

int sandbox_table_get(struct sandbox_table *t, const char *name, bool create,
                      const struct sandbox_options *opts, struct sandbox **ret, bool *ret_created,
                      struct cella_error *err)
{
        (void)t;
        (void)opts;
        if (!the_sandbox.exists || strcmp(the_sandbox.name, name) != 0) {
                if (!create)
                        return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND, "no sandbox '%s'",
                                               name);
                if (the_sandbox.conn)
                        agent_conn_close(the_sandbox.conn);
                the_sandbox.conn = NULL;
                snprintf(the_sandbox.name, sizeof(the_sandbox.name), "%s", name);
                the_sandbox.exists = true;
                if (ret_created)
                        *ret_created = true;
        } else if (ret_created) {
                *ret_created = false;
        }
        if (create)
                the_sandbox.asleep = false; /* an operation wakes it */
        if (!the_sandbox.conn &&
            agent_conn_new(&loop, sock_path, on_lost, NULL, &the_sandbox.conn, err) < 0)
                return -1;
        *ret = &the_sandbox;
        return 0;
}

/* POST /sleep (sandbox-life.c): asleep at once here; integration/sleep covers the real
 * sleep (files and memory, stopped, busy). */
int sandbox_table_sleep(struct sandbox_table *t, const char *name, sandbox_sleep_cb cb, void *ud,
                        struct cella_error *err)
{
        (void)t;
        if (!the_sandbox.exists || strcmp(the_sandbox.name, name) != 0)
                return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND, "no sandbox '%s'", name);
        if (the_sandbox.conn)
                agent_conn_close(the_sandbox.conn);
        the_sandbox.conn = NULL;
        the_sandbox.asleep = true;
        cb(&the_sandbox, NULL, ud);
        return 0;
}

int sandbox_table_put(struct sandbox_table *t, const char *name, const struct sandbox_options *opts,
                      struct sandbox **ret, bool *ret_created, struct cella_error *err)
{
        return sandbox_table_get(t, name, true, opts, ret, ret_created, err);
}

int sandbox_table_destroy(struct sandbox_table *t, const char *name, bool *ret_existed,
                          struct cella_error *err)
{
        (void)t;
        (void)err;
        *ret_existed = the_sandbox.exists && strcmp(the_sandbox.name, name) == 0;
        if (*ret_existed) {
                the_sandbox.exists = false;
                if (the_sandbox.conn)
                        agent_conn_close(the_sandbox.conn);
                the_sandbox.conn = NULL;
        }
        return 0;
}

json_t *sandbox_table_list(struct sandbox_table *t)
{
        json_t *a = json_array();

        (void)t;
        if (the_sandbox.exists)
                json_array_append_new(a, info(&the_sandbox));
        return a;
}

unsigned sandbox_table_count(const struct sandbox_table *t)
{
        (void)t;
        return the_sandbox.exists;
}

/* Memory sleep (decision 0050): unavailable here; integration/memsleep covers it. */
const char *sandbox_table_memory_sleep_fallback(const struct sandbox_table *t)
{
        (void)t;
        return "no CRIU in this test";
}

/* Snapshots (sandbox-snapshot.c): none here; integration/snapshots covers them. */
int sandbox_table_snapshot_create(struct sandbox_table *t, const char *name_of,
                                  const char *snap_name, sandbox_snapshot_cb cb, void *ud,
                                  struct cella_error *err)
{
        (void)t;
        (void)snap_name;
        (void)cb;
        (void)ud;
        return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND, "no sandbox '%s'", name_of);
}

json_t *sandbox_table_snapshots(struct sandbox_table *t, const char *sandbox,
                                struct cella_error *err)
{
        (void)t;
        (void)sandbox;
        (void)err;
        return json_array();
}

json_t *sandbox_table_snapshot_get(struct sandbox_table *t, const char *id, char *image,
                                   size_t image_sz, struct cella_error *err)
{
        (void)t;
        (void)image;
        (void)image_sz;
        return cella_error_set(err, CELLA_E_SNAPSHOT_NOT_FOUND, "no snapshot '%s'", id), NULL;
}

int sandbox_table_memory_fork(struct sandbox_table *t, const char *name_of, sandbox_memfork_cb cb,
                              void *ud, struct cella_error *err)
{
        (void)t;
        (void)cb;
        (void)ud;
        return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND, "no sandbox '%s'", name_of);
}

int sandbox_memfork_images_remove(const char *images)
{
        (void)images;
        return -ENOENT;
}

int sandbox_table_snapshot_delete(struct sandbox_table *t, const char *id, struct cella_error *err)
{
        (void)t;
        return cella_error_set(err, CELLA_E_SNAPSHOT_NOT_FOUND, "no snapshot '%s'", id);
}

/* (sandbox-snapshot.c's queue of captures, which a consistent backup joins) */
int sandbox_capture_queue(struct sandbox *s, void (*run)(void *ud), void *ud)
{
        (void)s;
        run(ud);
        return 0;
}

void sandbox_capture_done(struct sandbox *s)
{
        (void)s;
}

bool sandbox_table_image_in_use(struct sandbox_table *t, const char *image)
{
        (void)t;
        return strcmp(image, "default") == 0;
}

json_t *sandbox_table_pool_info(const struct sandbox_table *t)
{
        (void)t;
        return json_pack("{s:i, s:i, s:i, s:i}", "size", 0, "ready", 0, "claims", 0, "builds", 0);
}

/* The fake table claims nothing from a pool: there is no record to commit. */
void sandbox_table_commit(struct sandbox_table *t)
{
        (void)t;
}

json_t *sandbox_table_disk_info(struct sandbox_table *t)
{
        (void)t;
        return json_pack("{s:i, s:i, s:i}", "capacityBytes", 0, "freeBytes", 0, "promisedBytes", 0);
}

json_t *sandbox_info(const struct sandbox *s)
{
        return info(s);
}

const char *sandbox_name(const struct sandbox *s)
{
        return s->name;
}

json_t *sandbox_env(const struct sandbox *s)
{
        return s->env;
}

void sandbox_touch(struct sandbox *s)
{
        (void)s;
}

/* setEnvVars against the stand-in: the same set/unset rules as sandbox.c. */
int sandbox_set_env(struct sandbox *s, json_t *vars, struct cella_error *err)
{
        const char *k;
        json_t *v;

        (void)err;
        json_object_foreach(vars, k, v)
        {
                if (json_is_null(v))
                        json_object_del(s->env, k);
                else
                        json_object_set(s->env, k, v);
        }
        return 0;
}

/* The scripted agent speaks sessionless EXEC; sessions are covered by the integration
 * tests against a real agent. */
bool sandbox_default_session(const struct sandbox *s)
{
        (void)s;
        return false;
}

struct agent_conn *sandbox_agent(struct sandbox *s)
{
        return s->conn;
}

/* The preview proxy's view of a sandbox: no ports in these tests. */
bool sandbox_running(const struct sandbox *s)
{
        (void)s;
        return false;
}

bool sandbox_memory_asleep(struct sandbox *s)
{
        (void)s;
        return false;
}

int64_t sandbox_instance(const struct sandbox *s)
{
        (void)s;
        return 0;
}

int sandbox_socket(struct sandbox *s)
{
        (void)s;
        return -ESRCH;
}

int sandbox_pidfd_dup(struct sandbox *s)
{
        (void)s;
        return -ESRCH;
}

/* No container here: every raw GET takes the agent's path, which these tests drive. */
int sandbox_open_file(struct sandbox *s, const char *path, struct stat *ret_st, int *ret_pidfd)
{
        (void)s;
        (void)path;
        (void)ret_st;
        (void)ret_pidfd;
        return -ESRCH;
}

struct store *sandbox_table_store(struct sandbox_table *t)
{
        (void)t;
        return NULL;
}

void sandbox_ref(struct sandbox *s)
{
        (void)s;
}

void sandbox_unref(struct sandbox *s)
{
        (void)s;
}

/* The handlers reach the fake table through the directory's operations table. */
static int fake_get_now(struct sandbox_directory *d, const char *name, struct sandbox **ret,
                        struct cella_error *err)
{
        (void)d;
        return sandbox_table_get(NULL, name, false, NULL, ret, NULL, err);
}

static void fake_put(struct sandbox_directory *d, const char *name,
                     const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct cella_error err = {0};
        struct sandbox *s = NULL;
        bool created = false;

        (void)d;
        if (sandbox_table_put(NULL, name, opts, &s, &created, &err) < 0)
                cb(NULL, false, &err, userdata);
        else
                cb(s, created, NULL, userdata);
}

static struct store *fake_store(struct sandbox_directory *d)
{
        (void)d;
        return NULL;
}

/* gets: how many the handlers made. With hold_gets set (by the test thread), a get is
 * kept as a start in progress would be, and answered when the test sends release_async. */
static unsigned gets, hold_gets;
static struct {
        char name[64];
        sandbox_get_cb cb;
        void *ud;
} held;
static uv_async_t release_async;

static void fake_get(struct sandbox_directory *d, const char *name, bool create,
                     const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct cella_error err = {0};
        struct sandbox *s = NULL;
        bool created = false;

        (void)d;
        __atomic_add_fetch(&gets, 1, __ATOMIC_RELAXED);
        if (create && __atomic_load_n(&hold_gets, __ATOMIC_RELAXED) && !held.cb) {
                snprintf(held.name, sizeof(held.name), "%s", name);
                held.cb = cb;
                held.ud = userdata;
                return;
        }
        if (sandbox_table_get(NULL, name, create, opts, &s, &created, &err) < 0)
                cb(NULL, false, &err, userdata);
        else
                cb(s, created, NULL, userdata);
}

static void on_release(uv_async_t *a)
{
        sandbox_get_cb cb = held.cb;

        (void)a;
        if (!cb)
                return;
        held.cb = (sandbox_get_cb)1; /* not held again */
        fake_get(NULL, held.name, true, NULL, cb, held.ud);
        __atomic_store_n(&held.cb, NULL, __ATOMIC_RELEASE);
}

static int fake_destroy(struct sandbox_directory *d, const char *name, bool *ret_existed,
                        struct cella_error *err)
{
        (void)d;
        return sandbox_table_destroy(NULL, name, ret_existed, err);
}

static const struct sandbox_directory_ops fake_ops = {.get = fake_get,
                                                      .get_now = fake_get_now,
                                                      .put = fake_put,
                                                      .destroy = fake_destroy,
                                                      .store = fake_store};
static struct sandbox_directory fake_directory = {&fake_ops};

struct sandbox_directory *sandbox_table_directory(struct sandbox_table *t)
{
        (void)t;
        return &fake_directory;
}

/* ---- the scripted agent (child process) ---- */

static int read_full(int fd, void *p, size_t n)
{
        size_t got = 0;

        while (got < n) {
                ssize_t r = read(fd, (char *)p + got, n - got);

                if (r <= 0)
                        return -1;
                got += (size_t)r;
        }
        return 0;
}

static void send_frame(int fd, uint8_t type, uint32_t stream, const void *p, size_t len)
{
        struct buf b = BUF_INIT;

        if (frame_append(&b, type, stream, p, (uint32_t)len) == 0 &&
            write(fd, b.data, b.len) != (ssize_t)b.len)
                _exit(3);
        buf_free(&b);
}

static void send_json(int fd, uint8_t type, uint32_t stream, const char *s)
{
        send_frame(fd, type, stream, s, strlen(s));
}

static int recv_frame(int fd, struct frame *f)
{
        static uint8_t in[CELLA_FRAME_HEADER + CELLA_FRAME_MAX];
        uint32_t len;

        if (read_full(fd, in, CELLA_FRAME_HEADER) < 0)
                return -1;
        len = (uint32_t)in[0] << 24 | (uint32_t)in[1] << 16 | (uint32_t)in[2] << 8 | in[3];
        if (len > CELLA_FRAME_MAX || read_full(fd, in + CELLA_FRAME_HEADER, len) < 0)
                return -1;
        return frame_decode(in, CELLA_FRAME_HEADER + len, f) > 0 ? 0 : -1;
}

static bool payload_has(const struct frame *f, const char *s)
{
        return memmem(f->payload, f->len, s, strlen(s)) != NULL;
}

/* Big output on one stream, sent as the credit allows (type STDOUT or DATA). */
struct big {
        uint32_t stream;
        uint8_t type;
        uint64_t credit, sent;
        const char *end_type_json; /* EXIT or RESULT payload */
};

static void big_pump(int fd, struct big *b)
{
        static char chunk[64 * 1024];

        memset(chunk, 'z', sizeof(chunk));
        while (b->stream && b->sent < BIG && b->credit >= sizeof(chunk)) {
                send_frame(fd, b->type, b->stream, chunk, sizeof(chunk));
                b->credit -= sizeof(chunk);
                b->sent += sizeof(chunk);
        }
        if (b->stream && b->sent == BIG) {
                send_json(fd, b->type == FRAME_DATA ? FRAME_RESULT : FRAME_EXIT, b->stream,
                          b->end_type_json);
                b->stream = 0;
        }
}

static void agent_conn_loop(int fd)
{
        struct frame f;
        struct big big = {0};
        uint32_t write_stream = 0;
        uint64_t received = 0;
        struct buf written = BUF_INIT;
        char msg[256];
        static int cancels;

        send_json(fd, FRAME_HELLO, 0, "{\"version\":1,\"pid\":1}");
        while (recv_frame(fd, &f) == 0) {
                uint32_t s = f.stream;

                switch (f.type) {
                case FRAME_EXEC:
                        send_json(fd, FRAME_STARTED, s, "{\"pid\":42}");
                        if (payload_has(&f, "\"command\":\"echo\"")) {
                                if (!payload_has(&f, "\"MYVAR\":\"v1\"") ||
                                    !payload_has(&f, "\"cwd\":\"/workspace/sub\""))
                                        send_json(fd, FRAME_STDERR, s, "bad env or cwd");
                                send_json(fd, FRAME_STDOUT, s, "hello\n");
                                send_frame(fd, FRAME_STDERR, s, "w\0rn", 4);
                                send_json(fd, FRAME_EXIT, s, "{\"exitCode\":0,\"timedOut\":false}");
                        } else if (payload_has(&f, "\"command\":\"split\"")) {
                                send_frame(fd, FRAME_STDOUT, s, "caf\xc3", 4);
                                send_frame(fd, FRAME_STDOUT, s, "\xa9!", 2);
                                send_frame(fd, FRAME_STDOUT, s, "\xff\xfe", 2);
                                send_json(fd, FRAME_EXIT, s, "{\"exitCode\":3,\"timedOut\":false}");
                        } else if (payload_has(&f, "\"command\":\"mixed\"")) {
                                send_frame(fd, FRAME_STDOUT, s, "ok\n\xff", 4);
                                send_json(fd, FRAME_EXIT, s, "{\"exitCode\":0,\"timedOut\":false}");
                        } else if (payload_has(&f, "\"command\":\"binary\"")) {
                                send_frame(fd, FRAME_STDOUT, s, "\xff\x00\x01", 3);
                                send_json(fd, FRAME_EXIT, s, "{\"exitCode\":0,\"timedOut\":false}");
                        } else if (payload_has(&f, "\"command\":\"slow\"")) {
                                if (!payload_has(&f, "\"timeoutMs\":50"))
                                        send_json(fd, FRAME_STDERR, s, "no timeout passed");
                                send_json(fd, FRAME_STDOUT, s, "partial");
                                send_json(fd, FRAME_EXIT, s,
                                          "{\"exitCode\":137,\"signal\":9,\"timedOut\":true}");
                        } else if (payload_has(&f, "\"command\":\"cancels\"")) {
                                snprintf(msg, sizeof(msg), "%d", cancels);
                                send_json(fd, FRAME_STDOUT, s, msg);
                                send_json(fd, FRAME_EXIT, s, "{\"exitCode\":0,\"timedOut\":false}");
                        } else if (payload_has(&f, "\"command\":\"die\"")) {
                                /* the agent goes away in the middle of a command */
                                send_json(fd, FRAME_STDOUT, s, "partial");
                                buf_free(&written);
                                return;
                        } else if (payload_has(&f, "\"command\":\"big\"")) {
                                big = (struct big){s, FRAME_STDOUT, CELLA_STREAM_WINDOW, 0,
                                                   "{\"exitCode\":0,\"timedOut\":false}"};
                        } else {
                                send_json(fd, FRAME_ERROR, s,
                                          "{\"code\":\"NOT_DIRECTORY\",\"message\":\"cwd is not "
                                          "a directory\"}");
                        }
                        break;
                case FRAME_SESSION:
                        if (payload_has(&f, "\"id\":\"die\"")) {
                                buf_free(&written);
                                return;
                        }
                        send_json(fd, FRAME_RESULT, s, "{\"sessions\":[{\"id\":\"s1\"}]}");
                        break;
                case FRAME_CANCEL:
                        if (s == big.stream) {
                                cancels++;
                                send_json(fd, FRAME_EXIT, s,
                                          "{\"exitCode\":137,\"signal\":9,\"timedOut\":false}");
                                big.stream = 0;
                        }
                        break;
                case FRAME_WINDOW:
                        if (s == big.stream) {
                                uint32_t c;

                                frame_window_unpack(&f, &c);
                                big.credit += c;
                        }
                        break;
                case FRAME_FILE_READ:
                        if (payload_has(&f, "\"/workspace/a.txt\"")) {
                                send_json(fd, FRAME_FILE_INFO, s,
                                          "{\"size\":5,\"type\":\"file\",\"name\":\"a.txt\"}");
                                send_json(fd, FRAME_DATA, s, "hello");
                                send_json(fd, FRAME_RESULT, s, "{\"size\":5}");
                        } else if (payload_has(&f, "\"/workspace/bin.dat\"")) {
                                send_json(fd, FRAME_FILE_INFO, s, "{\"size\":3,\"type\":\"file\"}");
                                send_frame(fd, FRAME_DATA, s, "\x00\xff\x01", 3);
                                send_json(fd, FRAME_RESULT, s, "{\"size\":3}");
                        } else if (payload_has(&f, "\"/workspace/big.bin\"")) {
                                snprintf(msg, sizeof(msg), "{\"size\":%d,\"type\":\"file\"}", BIG);
                                send_json(fd, FRAME_FILE_INFO, s, msg);
                                big = (struct big){s, FRAME_DATA, CELLA_STREAM_WINDOW, 0,
                                                   "{\"size\":3145728}"};
                        } else {
                                send_json(fd, FRAME_ERROR, s,
                                          "{\"code\":\"FILE_NOT_FOUND\",\"message\":\"no such "
                                          "file\"}");
                        }
                        break;
                case FRAME_FILE_WRITE:
                        write_stream = s;
                        received = 0;
                        buf_reset(&written);
                        break;
                case FRAME_DATA:
                        if (s == write_stream) {
                                uint8_t w[4];

                                received += f.len;
                                if (written.len < 64)
                                        buf_append(&written, f.payload, MIN(f.len, 64));
                                frame_window_pack(w, f.len);
                                send_frame(fd, FRAME_WINDOW, s, w, 4);
                        }
                        break;
                case FRAME_END:
                        if (s == write_stream) {
                                snprintf(msg, sizeof(msg), "{\"size\":%llu}",
                                         (unsigned long long)received);
                                send_json(fd, FRAME_RESULT, s, msg);
                                write_stream = 0;
                        }
                        break;
                case FRAME_FILE_OP:
                        if (payload_has(&f, "\"op\":\"list\"")) {
                                send_json(fd, FRAME_FILE_INFO, s,
                                          "{\"name\":\"a\",\"type\":\"file\",\"size\":1}");
                                send_json(fd, FRAME_FILE_INFO, s,
                                          "{\"name\":\"d\",\"type\":\"directory\",\"size\":0}");
                                send_json(fd, FRAME_RESULT, s, "{\"count\":2}");
                        } else if (payload_has(&f, "\"op\":\"exists\"")) {
                                send_json(fd, FRAME_RESULT, s,
                                          payload_has(&f, "/workspace/a.txt")
                                                  ? "{\"exists\":true,\"type\":\"file\"}"
                                                  : "{\"exists\":false}");
                        } else if (payload_has(&f, "\"op\":\"delete\"") &&
                                   !payload_has(&f, "\"recursive\":true")) {
                                send_json(fd, FRAME_ERROR, s,
                                          "{\"code\":\"IS_DIRECTORY\",\"message\":\"is a "
                                          "directory\"}");
                        } else {
                                send_json(fd, FRAME_RESULT, s, "{}");
                        }
                        break;
                default:
                        break;
                }
                big_pump(fd, &big);
        }
        buf_free(&written);
}

static void fake_agent(int lfd)
{
        for (;;) {
                int fd = accept(lfd, NULL, NULL);

                if (fd < 0)
                        _exit(0);
                agent_conn_loop(fd);
                close(fd);
        }
}

/* ---- server (loop thread) ---- */

static struct http_server *server, *server_open; /* with a token; without one */
static struct api *api, *api_open;
static int port_open;
static uv_async_t stop_async;
static int port;
static pthread_t thread;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static pid_t agent_pid;
static char tmpdir[] = "/tmp/cella-api-XXXXXX";
static char console_dir[128]; /* tmpdir/console: the web console's files (test_console) */

static void on_stop(uv_async_t *a)
{
        (void)a;
        http_server_free(server);
        http_server_free(server_open);
        if (the_sandbox.conn)
                agent_conn_close(the_sandbox.conn);
        the_sandbox.conn = NULL;
        uv_close((uv_handle_t *)&stop_async, NULL);
        uv_close((uv_handle_t *)&release_async, NULL);
}

static void *loop_thread(void *arg)
{
        struct api_config acfg = {&loop, NULL, "s3cret", tmpdir, "/bin/false", NULL,       0,
                                  0,     NULL, NULL,     NULL,   NULL,         console_dir};
        struct http_server_config cfg = {.host = "127.0.0.1", .on_request = api_handle};
        struct cella_error err = {0};

        (void)arg;
        uv_loop_init(&loop);
        uv_async_init(&loop, &stop_async, on_stop);
        uv_async_init(&loop, &release_async, on_release);
        if (api_new(&acfg, &api) < 0)
                abort();
        cfg.userdata = api;
        if (http_server_new(&loop, &cfg, &server, &err) < 0)
                abort();
        acfg.token = NULL;
        if (api_new(&acfg, &api_open) < 0)
                abort();
        cfg.userdata = api_open;
        if (http_server_new(&loop, &cfg, &server_open, &err) < 0)
                abort();
        port_open = http_server_port(server_open);
        pthread_mutex_lock(&mu);
        port = http_server_port(server);
        pthread_cond_signal(&cv);
        pthread_mutex_unlock(&mu);
        uv_run(&loop, UV_RUN_DEFAULT);
        uv_loop_close(&loop);
        api_free(api);
        api_free(api_open);
        return NULL;
}

static int write_file(const char *path, const char *text)
{
        FILE *f = fopen(path, "w");

        if (!f)
                return -1;
        fputs(text, f);
        return fclose(f);
}

/* The console's files: index.html, a hashed asset, a directory, a hidden file and a
 * symlink out of the directory. */
static int console_files(void)
{
        char p[256];

        snprintf(console_dir, sizeof(console_dir), "%s/console", tmpdir);
        if (mkdir(console_dir, 0755) < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/assets", console_dir);
        if (mkdir(p, 0755) < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/index.html", console_dir);
        if (write_file(p, "<!doctype html><title>cella</title>\n") < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/assets/index-AbC12_-.js", console_dir);
        if (write_file(p, "console.log(1)\n") < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/.secret", console_dir);
        if (write_file(p, "hidden\n") < 0)
                return -1;
        snprintf(p, sizeof(p), "%s/passwd.txt", console_dir);
        return symlink("/etc/passwd", p);
}

static void console_files_remove(void)
{
        static const char *const names[] = {
                "index.html", "assets/index-AbC12_-.js", ".secret", "passwd.txt", "assets", ""};
        char p[256];

        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
                snprintf(p, sizeof(p), "%s/%s", console_dir, names[i]);
                if (unlink(p) < 0)
                        rmdir(p);
        }
}

static int setup(void **state)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int lfd;

        (void)state;
        signal(SIGPIPE, SIG_IGN); /* as cellad does: a gone client is an EPIPE */
        if (!mkdtemp(tmpdir))
                return -1;
        snprintf(sock_path, sizeof(sock_path), "%s/agent.sock", tmpdir);
        if (console_files() < 0)
                return -1;
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
        lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 4) < 0)
                return -1;
        the_sandbox.env = json_pack("{s:s}", "MYVAR", "v0");
        agent_pid = fork();
        if (agent_pid == 0)
                fake_agent(lfd);
        close(lfd);
        pthread_create(&thread, NULL, loop_thread, NULL);
        pthread_mutex_lock(&mu);
        while (!port)
                pthread_cond_wait(&cv, &mu);
        pthread_mutex_unlock(&mu);
        return 0;
}

static int teardown(void **state)
{
        char p[256];

        (void)state;
        uv_async_send(&stop_async);
        pthread_join(thread, NULL);
        kill(agent_pid, SIGKILL);
        waitpid(agent_pid, NULL, 0);
        json_decref(the_sandbox.env);
        snprintf(p, sizeof(p), "%s/agent.sock", tmpdir);
        unlink(p);
        console_files_remove();
        rmdir(tmpdir);
        return 0;
}

/* ---- client ---- */

static char *exchange_port(int p, const char *head, const void *body, size_t blen)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)p)};
        struct timeval tv = {.tv_sec = 60}; /* hang guard only */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        struct buf b = BUF_INIT;
        char tmp[65536];
        ssize_t n;

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
        /* A socket with SO_RCVTIMEO is never restarted after a signal (signal(7)): the
         * SIGCHLD of a builder the server runs may interrupt this thread's calls. */
        for (size_t off = 0; off < blen;) {
                n = send(fd, (const char *)body + off, blen - off, MSG_NOSIGNAL);
                if (n < 0 && errno == EINTR)
                        continue;
                assert_true(n > 0);
                off += (size_t)n;
        }
        while ((n = recv(fd, tmp, sizeof(tmp), 0)) != 0) {
                if (n < 0 && errno == EINTR)
                        continue;
                assert_true(n > 0);
                buf_append(&b, tmp, (size_t)n);
        }
        close(fd);
        buf_append(&b, "", 0);
        return buf_steal(&b);
}

static char *exchange_bytes(const char *head, const void *body, size_t blen)
{
        return exchange_port(port, head, body, blen);
}

/* method path body -> whole response text (authorized, Connection: close). */
static char *call(const char *method, const char *path, const char *extra, const char *body)
{
        char head[2048];

        snprintf(head, sizeof(head),
                 "%s %s HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer s3cret\r\n%s"
                 "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                 method, path, extra ? extra : "", body ? strlen(body) : 0);
        return exchange_bytes(head, body, body ? strlen(body) : 0);
}

/* The body of a response: as is, or joined from its chunks (Transfer-Encoding: chunked,
 * as streamed answers are). */
static json_t *body_json(const char *r)
{
        const char *b = strstr(r, "\r\n\r\n");
        const char *te = strstr(r, "Transfer-Encoding: chunked\r\n");
        struct buf whole = BUF_INIT;
        json_t *j;

        assert_non_null(b);
        b += 4;
        if (te && te < b) {
                for (;;) {
                        char *end;
                        unsigned long n = strtoul(b, &end, 16);

                        assert_true(end != b && strncmp(end, "\r\n", 2) == 0);
                        if (n == 0)
                                break;
                        buf_append(&whole, end + 2, n);
                        b = end + 2 + n;
                        assert_true(strncmp(b, "\r\n", 2) == 0);
                        b += 2;
                }
                buf_append(&whole, "", 0);
                b = whole.data;
        }
        j = json_loadb(b, strlen(b), JSON_ALLOW_NUL, NULL);
        if (!j)
                fail_msg("not JSON: %s", b);
        buf_free(&whole);
        return j;
}

static const char *jstr(json_t *j, const char *k)
{
        return json_string_value(json_object_get(j, k));
}

static void test_routing_and_auth(void **state)
{
        char *r;
        json_t *j;

        (void)state;
        r = exchange_bytes("GET /v1/health HTTP/1.1\r\nConnection: close\r\n\r\n", NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "\"status\":\"ok\""));
        free(r);
        r = exchange_bytes("GET /v1/sandboxes HTTP/1.1\r\nConnection: close\r\n\r\n", NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 401"));
        assert_non_null(strstr(r, "UNAUTHORIZED"));
        free(r);
        r = exchange_bytes("GET /v1/sandboxes HTTP/1.1\r\nAuthorization: Bearer s3creT\r\n"
                           "Connection: close\r\n\r\n",
                           NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 401"));
        free(r);
        r = call("GET", "/v1/nope", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 404"));
        free(r);
        r = call("DELETE", "/v1/sandboxes/box1/exec", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 405"));
        assert_non_null(strstr(r, "METHOD_NOT_ALLOWED"));
        free(r);
        r = call("GET", "/v1/sandboxes/Bad_Name/files/list", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "INVALID_SANDBOX_NAME"));
        free(r);
        r = call("GET", "/v1/sandboxes/ghost", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 404"));
        assert_non_null(strstr(r, "SANDBOX_NOT_FOUND"));
        free(r);
        r = call("PUT", "/v1/sandboxes/BOX1", NULL,
                 "{\"normalizeId\":true,\"labels\":{\"a\":\"b\"}}");
        assert_non_null(strstr(r, "HTTP/1.1 201"));
        j = body_json(r);
        assert_string_equal(jstr(j, "id"), "box1");
        json_decref(j);
        free(r);
        r = call("PUT", "/v1/sandboxes/box1", NULL, "{\"instanceType\":\"enormous\"}");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);
        r = call("GET", "/v1/sandboxes", NULL, NULL);
        assert_non_null(strstr(r, "\"sandboxes\":[{"));
        free(r);
        /* POST /sleep: a body other than {} is refused before anything sleeps */
        r = call("POST", "/v1/sandboxes/box1/sleep", NULL, "{\"force\":true}");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "VALIDATION_FAILED"));
        free(r);
        r = call("POST", "/v1/sandboxes/box1/sleep", NULL, "[]");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);
        assert_false(the_sandbox.asleep);
        r = call("POST", "/v1/sandboxes/ghost/sleep", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 404"));
        assert_non_null(strstr(r, "SANDBOX_NOT_FOUND"));
        free(r);
        assert_false(the_sandbox.asleep);
        r = call("POST", "/v1/sandboxes/box1/sleep", NULL, "{}");
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        j = body_json(r);
        assert_string_equal(jstr(j, "id"), "box1");
        assert_string_equal(jstr(j, "state"), "sleeping");
        json_decref(j);
        free(r);
        assert_true(the_sandbox.asleep);
        r = call("POST", "/v1/sandboxes/box1/sleep", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "\"state\":\"sleeping\""));
        free(r);
        r = call("GET", "/v1/sandboxes/box1/sleep", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 405"));
        free(r);
}

static void test_images_routes(void **state)
{
        char *r;

        (void)state;
        r = call("GET", "/v1/images", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "{\"images\":[]}"));
        free(r);
        r = call("GET", "/v1/images/x", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 405"));
        free(r);
        r = call("GET", "/v1/images/x/import", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 405"));
        free(r);
        r = call("DELETE", "/v1/images/nosuch", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 404"));
        assert_non_null(strstr(r, "IMAGE_NOT_FOUND"));
        free(r);
        r = call("POST", "/v1/images/..x/import", NULL, "x");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "VALIDATION_FAILED"));
        free(r);
        r = call("POST", "/v1/images/x/import?replace=maybe", NULL, "x");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);
        /* not a tar: 400, and nothing is left in the images dir (teardown's rmdir) */
        r = call("POST", "/v1/images/junk/import", NULL, "this is not a tar archive at all");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "INVALID_IMAGE"));
        free(r);
        {
                DIR *d = opendir(tmpdir);
                struct dirent *de;

                assert_non_null(d);
                while ((de = readdir(d)))
                        assert_true(strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                                    de->d_name[0] != '.');
                closedir(d);
        }
        /* declared over the limit: refused before the body */
        r = exchange_bytes("POST /v1/images/big/import HTTP/1.1\r\nHost: t\r\n"
                           "Authorization: Bearer s3cret\r\nContent-Length: 99999999999\r\n"
                           "Connection: close\r\n\r\n",
                           NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 413"));
        assert_non_null(strstr(r, "PAYLOAD_TOO_LARGE"));
        free(r);
        r = call("POST", "/v1/images/x/build", NULL, "{\"packages\":[\"-rf\"]}");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "VALIDATION_FAILED"));
        free(r);
        /* the builder here is /bin/false: the stream ends with an error event */
        r = call("POST", "/v1/images/x/build", NULL, "{\"packages\":[\"busybox-static\"]}");
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "\"type\":\"start\""));
        assert_non_null(strstr(r, "\"type\":\"error\""));
        free(r);
}

static void test_exec_buffered(void **state)
{
        char *r;
        json_t *j;

        (void)state;
        r = call("POST", "/v1/sandboxes/box1/exec", NULL,
                 "{\"command\":\"echo\",\"env\":{\"MYVAR\":\"v1\"},\"cwd\":\"sub\"}");
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        j = body_json(r);
        assert_true(json_is_true(json_object_get(j, "success")));
        assert_int_equal(json_integer_value(json_object_get(j, "exitCode")), 0);
        assert_string_equal(jstr(j, "stdout"), "hello\n");
        assert_int_equal(json_string_length(json_object_get(j, "stderr")), 4); /* "w\0rn" */
        assert_memory_equal(jstr(j, "stderr"), "w\0rn", 4);
        assert_string_equal(jstr(j, "command"), "echo");
        assert_null(json_object_get(j, "stdoutEncoding"));
        json_decref(j);
        free(r);

        r = call("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"binary\"}");
        j = body_json(r);
        assert_string_equal(jstr(j, "stdoutEncoding"), "base64");
        assert_string_equal(jstr(j, "stdout"), "/wAB");
        json_decref(j);
        free(r);

        r = call("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"slow\",\"timeout\":50}");
        assert_non_null(strstr(r, "HTTP/1.1 408"));
        j = body_json(r);
        assert_string_equal(jstr(j, "code"), "COMMAND_TIMEOUT");
        assert_string_equal(jstr(json_object_get(j, "context"), "stdout"), "partial");
        assert_int_equal(
                json_integer_value(json_object_get(json_object_get(j, "context"), "timeout")), 50);
        json_decref(j);
        free(r);

        r = call("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"nodir\"}");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "\"code\":\"NOT_DIRECTORY\""));
        free(r);

        /* an invalid request creates nothing */
        r = call("POST", "/v1/sandboxes/fresh1/exec", NULL, "{\"command\":1}");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);
        r = call("GET", "/v1/sandboxes/fresh1/files/list?recursive=maybe", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);
        r = call("GET", "/v1/sandboxes/fresh1", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 404"));
        free(r);

        r = call("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        assert_non_null(strstr(r, "VALIDATION_FAILED"));
        free(r);

        r = call("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"big\"}");
        j = body_json(r);
        assert_int_equal(json_string_length(json_object_get(j, "stdout")), BIG);
        json_decref(j);
        free(r);
}

static void test_exec_sse(void **state)
{
        char *r;

        (void)state;
        r = call("POST", "/v1/sandboxes/box1/exec", "Accept: text/event-stream\r\n",
                 "{\"command\":\"split\"}");
        assert_non_null(strstr(r, "Content-Type: text/event-stream"));
        assert_non_null(strstr(r, "data: {\"type\":\"start\",\"command\":\"split\",\"pid\":42"));
        /* the é split across two frames arrives whole, never split */
        assert_non_null(strstr(r, "\"data\":\"caf\""));
        assert_non_null(strstr(r, "\"data\":\"\xc3\xa9!\""));
        /* invalid bytes as base64: ff fe -> "//4=" */
        assert_non_null(strstr(r, "\"data\":\"//4=\",\"encoding\":\"base64\""));
        assert_non_null(strstr(r, "data: {\"type\":\"complete\",\"exitCode\":3"));
        free(r);

        /* text then an invalid byte in one frame: the text stays text */
        r = call("POST", "/v1/sandboxes/box1/exec", "Accept: text/event-stream\r\n",
                 "{\"command\":\"mixed\"}");
        assert_non_null(strstr(r, "\"type\":\"stdout\",\"data\":\"ok\\n\""));
        assert_non_null(strstr(r, "\"data\":\"/w==\",\"encoding\":\"base64\""));
        free(r);

        r = call("POST", "/v1/sandboxes/box1/exec", "Accept: text/event-stream\r\n",
                 "{\"command\":\"slow\",\"timeout\":50}");
        assert_non_null(strstr(r, "\"type\":\"error\""));
        assert_non_null(strstr(r, "\"code\":\"COMMAND_TIMEOUT\""));
        free(r);

        /* 3 MiB through the window: credit only comes back as the socket takes events */
        r = call("POST", "/v1/sandboxes/box1/exec", "Accept: text/event-stream\r\n",
                 "{\"command\":\"big\"}");
        assert_non_null(strstr(r, "\"type\":\"complete\",\"exitCode\":0"));
        free(r);
}

static void test_files_raw(void **state)
{
        char *r;
        struct buf up = BUF_INIT;
        char head[512];
        char want[64];
        json_t *j;

        (void)state;
        r = call("GET", "/v1/sandboxes/box1/files?path=a.txt", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "Content-Type: text/plain"));
        assert_non_null(strstr(r, "Content-Length: 5\r\n"));
        assert_non_null(strstr(r, "\r\n\r\nhello"));
        free(r);
        r = call("HEAD", "/v1/sandboxes/box1/files?path=a.txt", NULL, NULL);
        assert_non_null(strstr(r, "Content-Length: 5\r\n"));
        assert_null(strstr(r, "hello"));
        free(r);
        r = call("GET", "/v1/sandboxes/box1/files?path=missing", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 404"));
        assert_non_null(strstr(r, "FILE_NOT_FOUND"));
        free(r);
        r = call("GET", "/v1/sandboxes/box1/files?path=big.bin", NULL, NULL);
        snprintf(want, sizeof(want), "Content-Length: %d\r\n", BIG);
        assert_non_null(strstr(r, want));
        assert_non_null(strstr(r, "application/octet-stream"));
        assert_int_equal(strlen(strstr(r, "\r\n\r\n") + 4), BIG);
        free(r);
        r = call("GET", "/v1/sandboxes/box1/files", NULL, NULL);
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);

        /* raw upload, 2 MiB: more than one window */
        for (int i = 0; i < 2 * 1024 * 1024; i++)
                buf_append(&up, "q", 1);
        snprintf(head, sizeof(head),
                 "PUT /v1/sandboxes/box1/files?path=up.bin&mode=0755 HTTP/1.1\r\n"
                 "Authorization: Bearer s3cret\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                 up.len);
        r = exchange_bytes(head, up.data, up.len);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        j = body_json(r);
        assert_int_equal(json_integer_value(json_object_get(j, "size")), 2 * 1024 * 1024);
        assert_string_equal(jstr(j, "path"), "/workspace/up.bin");
        json_decref(j);
        free(r);
        buf_free(&up);
        r = call("PUT", "/v1/sandboxes/box1/files?path=x&mode=999", NULL, "");
        assert_non_null(strstr(r, "HTTP/1.1 400"));
        free(r);
        r = call("DELETE", "/v1/sandboxes/box1/files?path=dir", NULL, NULL);
        assert_non_null(strstr(r, "IS_DIRECTORY"));
        free(r);
        r = call("DELETE", "/v1/sandboxes/box1/files?path=dir&recursive=true", NULL, NULL);
        assert_non_null(strstr(r, "\"success\":true"));
        free(r);
}

static void test_files_json(void **state)
{
        char *r;
        json_t *j;

        (void)state;
        r = call("POST", "/v1/sandboxes/box1/files/read", NULL, "{\"path\":\"a.txt\"}");
        j = body_json(r);
        assert_string_equal(jstr(j, "content"), "hello");
        assert_string_equal(jstr(j, "encoding"), "utf-8");
        assert_true(json_is_false(json_object_get(j, "isBinary")));
        json_decref(j);
        free(r);
        r = call("POST", "/v1/sandboxes/box1/files/read", NULL, "{\"path\":\"bin.dat\"}");
        j = body_json(r);
        assert_string_equal(jstr(j, "content"), "AP8B");
        assert_string_equal(jstr(j, "encoding"), "base64");
        assert_true(json_is_true(json_object_get(j, "isBinary")));
        json_decref(j);
        free(r);
        r = call("POST", "/v1/sandboxes/box1/files/write", NULL,
                 "{\"path\":\"w.bin\",\"content\":\"AAEC/w==\",\"encoding\":\"base64\"}");
        j = body_json(r);
        assert_int_equal(json_integer_value(json_object_get(j, "size")), 4);
        json_decref(j);
        free(r);
        r = call("POST", "/v1/sandboxes/box1/files/mkdir", NULL,
                 "{\"path\":\"d/e\",\"recursive\":true}");
        assert_non_null(strstr(r, "\"recursive\":true"));
        free(r);
        r = call("POST", "/v1/sandboxes/box1/files/move", NULL, "{\"from\":\"a\",\"to\":\"b\"}");
        assert_non_null(strstr(r, "\"from\":\"/workspace/a\""));
        free(r);
        r = call("GET", "/v1/sandboxes/box1/files/list?path=%2Fworkspace", NULL, NULL);
        j = body_json(r);
        assert_int_equal(json_integer_value(json_object_get(j, "count")), 2);
        assert_string_equal(jstr(json_array_get(json_object_get(j, "files"), 1), "name"), "d");
        json_decref(j);
        free(r);
        r = call("GET", "/v1/sandboxes/box1/files/exists?path=a.txt", NULL, NULL);
        assert_non_null(strstr(r, "\"exists\":true"));
        free(r);
        r = call("GET", "/v1/sandboxes/box1/files/exists?path=zzz", NULL, NULL);
        assert_non_null(strstr(r, "\"exists\":false"));
        free(r);
        r = call("DELETE", "/v1/sandboxes/box1", NULL, NULL);
        assert_non_null(strstr(r, "\"destroyed\":true"));
        free(r);
        r = call("DELETE", "/v1/sandboxes/box1", NULL, NULL);
        assert_non_null(strstr(r, "\"destroyed\":false"));
        free(r);
}

/* A client that leaves in the middle of a streamed command cancels it. */
static void test_disconnect_cancels(void **state)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        static const char req[] = "POST /v1/sandboxes/box1/exec HTTP/1.1\r\nAuthorization: "
                                  "Bearer s3cret\r\nAccept: text/event-stream\r\n"
                                  "Content-Length: 17\r\n\r\n{\"command\":\"big\"}";
        char tmp[4096];
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        bool cancelled = false;

        (void)state;
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(send(fd, req, sizeof(req) - 1, MSG_NOSIGNAL), sizeof(req) - 1);
        /* take a little of the output, then leave without reading the rest */
        assert_true(recv(fd, tmp, sizeof(tmp), MSG_WAITALL) > 0);
        close(fd);
        /* the agent sees CANCEL: poll its count (bounded; no timing is asserted) */
        for (int i = 0; i < 600 && !cancelled; i++) {
                char *r =
                        call("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"cancels\"}");

                json_t *j = body_json(r);

                cancelled = jstr(j, "stdout") && strcmp(jstr(j, "stdout"), "1") == 0;
                json_decref(j);
                free(r);
                if (!cancelled)
                        usleep(100 * 1000);
        }
        assert_true(cancelled);
}

/* ---- the request object (api-req.c): every way a request ends frees it ---- */

/* Wait (bounded; no timing is asserted) until no request object and no writer is left. */
static void assert_all_freed(void)
{
        for (int i = 0; i < 600 && (api_req_live() || api_sse_live()); i++)
                usleep(10 * 1000);
        assert_int_equal(api_req_live(), 0);
        assert_int_equal(api_sse_live(), 0);
}

/* Open a connection and send head (a whole request) on it; the caller reads or closes. */
static int send_only(const char *head)
{
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        struct timeval tv = {.tv_sec = 60}; /* hang guard only */
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
        assert_int_equal(send(fd, head, strlen(head), MSG_NOSIGNAL), (ssize_t)strlen(head));
        return fd;
}

/* Send head and body on a new connection, read at least `want` bytes (0: none), close. */
static void send_and_leave(const char *head, size_t want)
{
        int fd = send_only(head);
        char tmp[4096];
        size_t got = 0;

        while (got < want) {
                ssize_t n = recv(fd, tmp, sizeof(tmp), 0);

                if (n < 0 && errno == EINTR)
                        continue; /* see exchange_port */
                assert_true(n > 0);
                got += (size_t)n;
        }
        close(fd);
}

/* Call, check that each of the NULL-terminated strings after body is in the response. */
static void expect(const char *method, const char *path, const char *extra, const char *body, ...)
{
        char *r = call(method, path, extra, body);
        const char *want;
        va_list ap;

        va_start(ap, body);
        while ((want = va_arg(ap, const char *)))
                if (!strstr(r, want))
                        fail_msg("%s %s: no '%s' in %s", method, path, want, r);
        va_end(ap);
        free(r);
}

/* A client leaving mid-stream (SSE, a buffered answer, the request body) frees the request,
 * its writer and what it collected; the agent is told (CANCEL). */
static void test_req_disconnect_frees(void **state)
{
#define EXEC_HEAD "POST /v1/sandboxes/box1/exec HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n"
        static const struct {
                const char *head;
                size_t read; /* bytes taken before leaving */
        } cases[] = {
                /* mid-SSE: output still coming, writes in flight */
                {EXEC_HEAD "Accept: text/event-stream\r\nContent-Length: 17\r\n\r\n"
                           "{\"command\":\"big\"}",
                 8192},
                /* buffered: the output being collected */
                {EXEC_HEAD "Content-Length: 17\r\n\r\n{\"command\":\"big\"}", 0},
                /* in the middle of the request body */
                {EXEC_HEAD "Content-Length: 40\r\n\r\n{\"command\":", 0},
                /* mid raw body (GET /files of 3 MiB) */
                {"GET /v1/sandboxes/box1/files?path=/workspace/big.bin HTTP/1.1\r\n"
                 "Authorization: Bearer s3cret\r\n\r\n",
                 8192},
        };

        (void)state;
        assert_all_freed();
        for (size_t i = 0; i < ARRAY_SIZE(cases); i++) {
                send_and_leave(cases[i].head, cases[i].read);
                assert_all_freed();
        }
        /* the daemon still answers */
        expect("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"binary\"}", "HTTP/1.1 200",
               NULL);
        assert_all_freed();
#undef EXEC_HEAD
}

/* Wait (bounded) until a get is held: the request waits for its sandbox's start. */
static void wait_held(void)
{
        for (int i = 0; i < 600 && !__atomic_load_n(&held.cb, __ATOMIC_ACQUIRE); i++)
                usleep(10 * 1000);
        assert_non_null(__atomic_load_n(&held.cb, __ATOMIC_ACQUIRE));
}

/* A handler whose sandbox must start waits for the directory's get without holding the
 * loop: other requests are answered meanwhile, and the request goes on (the same body)
 * once the sandbox runs. A client that leaves while it waits loses nothing and frees
 * everything once the start ends. A bad body is answered before any get. */
static void test_req_waits_for_start(void **state)
{
#define EXEC_REQ(body)                                                              \
        "POST /v1/sandboxes/box1/exec HTTP/1.1\r\nAuthorization: Bearer s3cret\r\n" \
        "Content-Length: " #body "\r\n\r\n"
        char buf[8192];
        size_t got = 0;
        unsigned before;
        int fd;

        (void)state;
        assert_all_freed();
        __atomic_store_n(&hold_gets, 1, __ATOMIC_RELAXED);

        /* answered after the start, other requests answered during it */
        fd = send_only(EXEC_REQ(20) "{\"command\":\"binary\"}");
        wait_held();
        assert_int_equal(api_req_live(), 1);
        expect("GET", "/v1/health", NULL, NULL, "HTTP/1.1 200", NULL);
        expect("GET", "/v1/sandboxes", NULL, NULL, "HTTP/1.1 200", NULL);
        uv_async_send(&release_async);
        while (got < sizeof(buf) - 1) {
                ssize_t n = recv(fd, buf + got, sizeof(buf) - 1 - got, 0);

                assert_true(n > 0);
                got += (size_t)n;
                buf[got] = '\0';
                if (strstr(buf, "exitCode"))
                        break;
        }
        close(fd);
        assert_non_null(strstr(buf, "HTTP/1.1 200"));
        assert_all_freed();

        /* the client leaves while its sandbox starts */
        fd = send_only(EXEC_REQ(20) "{\"command\":\"binary\"}");
        wait_held();
        close(fd);
        expect("GET", "/v1/health", NULL, NULL, "HTTP/1.1 200", NULL);
        uv_async_send(&release_async);
        assert_all_freed();

        /* a bad body: 400, no get */
        before = __atomic_load_n(&gets, __ATOMIC_RELAXED);
        expect("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":", "HTTP/1.1 400", NULL);
        assert_int_equal(__atomic_load_n(&gets, __ATOMIC_RELAXED), before);

        __atomic_store_n(&hold_gets, 0, __ATOMIC_RELAXED);
        expect("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"binary\"}", "HTTP/1.1 200",
               NULL);
        assert_all_freed();
#undef EXEC_REQ
}

#define SSE "Accept: text/event-stream\r\n"
#define LOST "the sandbox's agent went away ("

/* The agent going away answers SANDBOX_UNAVAILABLE (503): an error response before the
 * answer began, an error event in an SSE stream; an agent call the same. A command's time
 * limit (the agent's timedOut) ends the request like any answer. */
static void test_req_agent_lost(void **state)
{
        (void)state;
        expect("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"die\"}", "HTTP/1.1 503",
               "\"code\":\"SANDBOX_UNAVAILABLE\"", "\"message\":\"" LOST, NULL);
        assert_all_freed();
        expect("POST", "/v1/sandboxes/box1/exec", SSE, "{\"command\":\"die\"}", "HTTP/1.1 200",
               "data: {\"type\":\"start\"", "{\"type\":\"stdout\",\"data\":\"partial\"",
               "{\"type\":\"error\",\"error\":\"" LOST, "\"code\":\"SANDBOX_UNAVAILABLE\"", NULL);
        assert_all_freed();
        /* an agent call (a session route): its answer, then the agent lost */
        expect("GET", "/v1/sandboxes/box1/sessions/s1", NULL, NULL, "HTTP/1.1 200",
               "{\"id\":\"s1\"}", NULL);
        expect("GET", "/v1/sandboxes/box1/sessions/s2", NULL, NULL, "HTTP/1.1 404",
               "\"code\":\"SESSION_NOT_FOUND\"", NULL);
        expect("DELETE", "/v1/sandboxes/box1/sessions/die", NULL, NULL, "HTTP/1.1 503",
               "\"code\":\"SANDBOX_UNAVAILABLE\"", "\"message\":\"" LOST, NULL);
        assert_all_freed();
        expect("POST", "/v1/sandboxes/box1/exec", NULL, "{\"command\":\"slow\",\"timeout\":50}",
               "HTTP/1.1 408", NULL);
        expect("POST", "/v1/sandboxes/box1/exec", SSE, "{\"command\":\"slow\",\"timeout\":50}",
               "{\"type\":\"stdout\",\"data\":\"partial\"", "\"code\":\"COMMAND_TIMEOUT\"", NULL);
        assert_all_freed();
}

/* Browser pages cannot drive the API: cross-origin requests and foreign Host names (DNS
 * rebinding) are refused. */
static void test_origin_and_host(void **state)
{
        char *r;

        (void)state;
        r = exchange_bytes(
                "GET /v1/sandboxes HTTP/1.1\r\nHost: t\r\nOrigin: http://evil.example\r\n"
                "Authorization: Bearer s3cret\r\nConnection: close\r\n\r\n",
                NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 403"));
        free(r);
        r = exchange_bytes("GET /v1/sandboxes HTTP/1.1\r\nHost: t\r\nOrigin: http://t\r\n"
                           "Authorization: Bearer s3cret\r\nConnection: close\r\n\r\n",
                           NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        free(r);
        /* no token: loopback Host names only */
        static const char *const ok[] = {"127.0.0.1:7070", "localhost", "LOCALHOST:1", "[::1]:7070",
                                         "app.localhost:7070"};
        static const char *const bad[] = {"evil.example", "127.0.0.1.evil.example",
                                          "localhost.evil.example", "[::2]:1", "10.0.0.1"};
        char head[256];

        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
                snprintf(head, sizeof(head),
                         "GET /v1/sandboxes HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                         ok[i]);
                r = exchange_port(port_open, head, NULL, 0);
                if (!strstr(r, "HTTP/1.1 200"))
                        fail_msg("Host %s refused", ok[i]);
                free(r);
        }
        /* preview hosts go to the proxy, never to the API: a page served there cannot
         * reach the API as its own origin, with or without a token */
        static const char *const preview[] = {"8080-nosuch-tok.localhost:7070",
                                              "8080-no-such-tok.LOCALHOST",
                                              "99999-box-tok.localhost:7070", "8080-box.localhost"};
        for (size_t i = 0; i < sizeof(preview) / sizeof(preview[0]); i++) {
                snprintf(head, sizeof(head),
                         "GET /v1/sandboxes HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                         preview[i]);
                r = exchange_port(port_open, head, NULL, 0);
                if (!strstr(r, "HTTP/1.1 404") || !strstr(r, "INVALID_TOKEN"))
                        fail_msg("Host %s not routed to the preview proxy: %s", preview[i], r);
                free(r);
        }
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                snprintf(head, sizeof(head),
                         "GET /v1/sandboxes HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n",
                         bad[i]);
                r = exchange_port(port_open, head, NULL, 0);
                if (!strstr(r, "HTTP/1.1 403"))
                        fail_msg("Host %s accepted", bad[i]);
                free(r);
        }
}

/* GET / and /console redirect to /console/; /console/ is index.html with the console's
 * headers; a hashed asset is cached for good; no token is needed; HEAD has the headers
 * and no body; names that leave the directory, hidden files, directories, symlinks and
 * other methods are refused. */
static void test_console(void **state)
{
        static const char *const refused[] = {
                "/console/../index.html",  "/console/%2e%2e/%2e%2e/etc/passwd",
                "/console/assets/../../x", "/console/.secret",
                "/console/assets",         "/console/passwd.txt",
                "/console//etc/passwd",    "/console/nosuch.js",
                "/console/a%00b",          "/console/a b"};
        char head[512], *r;

        (void)state;
        r = exchange_bytes("GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 302"));
        assert_non_null(strstr(r, "\r\nLocation: /console/\r\n"));
        free(r);
        r = exchange_bytes("GET /console HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", NULL,
                           0);
        assert_non_null(strstr(r, "HTTP/1.1 302"));
        free(r);
        r = exchange_bytes("GET /console/ HTTP/1.1\r\nHost: t:7070\r\nConnection: close\r\n\r\n",
                           NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "Content-Type: text/html; charset=utf-8\r\n"));
        assert_non_null(
                strstr(r, "Content-Security-Policy: default-src 'self'; script-src 'self';"));
        assert_non_null(strstr(r, "connect-src 'self' ws://t:7070 wss://t:7070;"));
        assert_non_null(strstr(r, "frame-ancestors 'none'"));
        assert_non_null(strstr(r, "X-Content-Type-Options: nosniff\r\n"));
        assert_non_null(strstr(r, "Referrer-Policy: no-referrer\r\n"));
        assert_non_null(strstr(r, "Cache-Control: no-cache\r\n"));
        assert_non_null(strstr(r, "<title>cella</title>"));
        free(r);
        r = exchange_bytes("HEAD /console/assets/index-AbC12_-.js HTTP/1.1\r\nHost: t\r\n"
                           "Connection: close\r\n\r\n",
                           NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 200"));
        assert_non_null(strstr(r, "Content-Type: text/javascript; charset=utf-8\r\n"));
        assert_non_null(strstr(r, "Content-Length: 15\r\n"));
        assert_non_null(strstr(r, "Cache-Control: public, max-age=31536000, immutable\r\n"));
        assert_null(strstr(r, "console.log"));
        free(r);
        for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
                snprintf(head, sizeof(head),
                         "GET %s HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n", refused[i]);
                r = exchange_bytes(head, NULL, 0);
                if (!strstr(r, "HTTP/1.1 404") && !strstr(r, "HTTP/1.1 400"))
                        fail_msg("%s served: %.200s", refused[i], r);
                assert_null(strstr(r, "root:"));
                assert_null(strstr(r, "hidden"));
                free(r);
        }
        r = call("POST", "/console/index.html", NULL, "{}");
        assert_non_null(strstr(r, "HTTP/1.1 405"));
        free(r);
}

/* A pty upgrade may carry its bearer token in Sec-WebSocket-Protocol (what a browser can
 * send); a wrong one is 401 like a wrong Authorization; other routes do not take it. */
static void test_ws_bearer(void **state)
{
        static const char up[] = "Connection: Upgrade\r\nUpgrade: websocket\r\n"
                                 "Sec-WebSocket-Version: 13\r\n"
                                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n";
        char head[1024], *r;

        (void)state;
        /* base64url("wrong") and base64url("s3cret"), unpadded */
        snprintf(head, sizeof(head),
                 "GET /v1/sandboxes/box/pty HTTP/1.1\r\nHost: t\r\n%s"
                 "Sec-WebSocket-Protocol: cella, cella.bearer.d3Jvbmc\r\n"
                 "Connection: close\r\n\r\n",
                 up);
        r = exchange_bytes(head, NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 401"));
        free(r);
        snprintf(head, sizeof(head),
                 "GET /v1/sandboxes/box/pty HTTP/1.1\r\nHost: t\r\n%s"
                 "Sec-WebSocket-Protocol: cella, cella.bearer.***\r\n"
                 "Connection: close\r\n\r\n",
                 up);
        r = exchange_bytes(head, NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 401"));
        free(r);
        snprintf(head, sizeof(head),
                 "GET /v1/sandboxes/Bad..Name/pty HTTP/1.1\r\nHost: t\r\nOrigin: http://t\r\n%s"
                 "Sec-WebSocket-Protocol: cella, cella.bearer.czNjcmV0\r\n"
                 "Connection: close\r\n\r\n",
                 up);
        r = exchange_bytes(head, NULL, 0); /* authenticated: the name is what is refused */
        if (!strstr(r, "HTTP/1.1 400") || !strstr(r, "INVALID_SANDBOX_NAME"))
                fail_msg("a right token in the subprotocol refused: %.300s", r);
        free(r);
        /* another origin is refused whatever it carries */
        snprintf(head, sizeof(head),
                 "GET /v1/sandboxes/box/pty HTTP/1.1\r\nHost: t\r\n"
                 "Origin: http://evil.example\r\n%s"
                 "Sec-WebSocket-Protocol: cella, cella.bearer.czNjcmV0\r\n"
                 "Connection: close\r\n\r\n",
                 up);
        r = exchange_bytes(head, NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 403"));
        free(r);
        /* only the pty takes it: a plain GET with it is unauthenticated */
        r = exchange_bytes("GET /v1/sandboxes HTTP/1.1\r\nHost: t\r\nUpgrade: websocket\r\n"
                           "Sec-WebSocket-Protocol: cella, cella.bearer.czNjcmV0\r\n"
                           "Connection: close\r\n\r\n",
                           NULL, 0);
        assert_non_null(strstr(r, "HTTP/1.1 401"));
        free(r);
}

static void test_token_compare(void **state)
{
        (void)state;
        assert_true(auth_token_equal("abc", "abc"));
        assert_false(auth_token_equal("abd", "abc"));
        assert_false(auth_token_equal("ab", "abc"));
        assert_false(auth_token_equal("abcd", "abc"));
        assert_false(auth_token_equal("", ""));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_token_compare),
                cmocka_unit_test(test_routing_and_auth),
                cmocka_unit_test(test_images_routes),
                cmocka_unit_test(test_exec_buffered),
                cmocka_unit_test(test_exec_sse),
                cmocka_unit_test(test_files_raw),
                cmocka_unit_test(test_files_json),
                cmocka_unit_test(test_disconnect_cancels),
                cmocka_unit_test(test_origin_and_host),
                cmocka_unit_test(test_console),
                cmocka_unit_test(test_ws_bearer),
                cmocka_unit_test(test_req_disconnect_frees),
                cmocka_unit_test(test_req_waits_for_start),
                cmocka_unit_test(test_req_agent_lost),
        };

        return cmocka_run_group_tests(tests, setup, teardown);
}
