/* The agent's connection handling: accept on the listening socket, frame decoding and
 * dispatch, the write queue with its high-water mark, stream bookkeeping and the SIGCHLD
 * reaper. See agent.h. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/session.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/proto.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* Above this many queued output bytes the producers pause; below LOW they resume. */
#define WRITE_HIGH_WATER (4u * 1024 * 1024)
#define WRITE_LOW_WATER (1u * 1024 * 1024)

struct conn {
        struct agent *a;
        uv_pipe_t pipe;
        struct buf in;
        bool closing;
        size_t queued; /* bytes handed to uv_write and not yet written */
        bool congested;
        struct stream *streams;
        unsigned nstreams;
};

struct write_req {
        uv_write_t req;
        struct conn *conn;
        size_t len;
        char data[];
};

static void conn_fail(struct conn *c, const char *why);

/* ---- writing ---- */

static void resume_streams(struct conn *c)
{
        struct stream *s, *next;

        for (s = c->streams; s && !c->closing && !c->congested; s = next) {
                next = s->next;
                if (s->ops->on_window)
                        s->ops->on_window(s);
        }
}

static void on_write_done(uv_write_t *req, int status)
{
        struct write_req *w = (struct write_req *)req;
        struct conn *c = w->conn;

        c->queued -= w->len;
        free(w);
        if (c->closing)
                return;
        if (status < 0) {
                log_info("write to cellad: %s", uv_strerror(status));
                conn_fail(c, "write failed");
                return;
        }
        if (c->congested && c->queued < WRITE_LOW_WATER) {
                c->congested = false;
                resume_streams(c);
        }
}

static int conn_send(struct conn *c, uint8_t type, uint32_t id, const void *payload, size_t len)
{
        struct write_req *w;
        uv_buf_t b;
        int r;

        if (c->closing)
                return -EPIPE;
        if (len > CELLA_FRAME_MAX)
                return -EINVAL;
        w = malloc(sizeof(*w) + CELLA_FRAME_HEADER + len);
        if (!w)
                return -ENOMEM;
        w->conn = c;
        w->len = CELLA_FRAME_HEADER + len;
        frame_header_pack((uint8_t *)w->data, type, id, (uint32_t)len);
        if (len)
                memcpy(w->data + CELLA_FRAME_HEADER, payload, len);
        b = uv_buf_init(w->data, (unsigned)w->len);
        r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_write_done);
        if (r < 0) {
                free(w);
                return r;
        }
        c->queued += w->len;
        if (c->queued > WRITE_HIGH_WATER)
                c->congested = true;
        return 0;
}

void conn_send_json(struct conn *c, uint8_t type, uint32_t id, json_t *j)
{
        char *text;

        if (!j) {
                log_error("out of memory building %s", frame_type_name(type));
                return;
        }
        text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text) {
                log_error("out of memory serialising %s", frame_type_name(type));
                return;
        }
        if (conn_send(c, type, id, text, strlen(text)) < 0)
                log_debug("dropped %s for stream %u", frame_type_name(type), id);
        free(text);
}

void conn_send_error(struct conn *c, uint32_t id, const struct cella_error *err)
{
        int code = err && err->code != CELLA_E_OK ? err->code : CELLA_E_INTERNAL_ERROR;

        conn_send_json(c, FRAME_ERROR, id,
                       json_pack("{s:s, s:s}", "code", cella_code_name(code), "message",
                                 err ? err->msg : ""));
}

void conn_reply_error(struct conn *c, uint32_t id, int code, const char *fmt, ...)
{
        struct cella_error err = {0};
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(&err, code, fmt, ap);
        va_end(ap);
        conn_send_error(c, id, &err);
}

int stream_send(struct stream *s, uint8_t type, const void *payload, size_t len)
{
        if (!s->conn)
                return -EPIPE;
        return conn_send(s->conn, type, s->id, payload, len);
}

int stream_send_json(struct stream *s, uint8_t type, json_t *j)
{
        if (!s->conn) {
                json_decref(j);
                return -EPIPE;
        }
        conn_send_json(s->conn, type, s->id, j);
        return 0;
}

bool stream_congested(const struct stream *s)
{
        return s->conn && s->conn->congested;
}

static void stream_unlink(struct stream *s)
{
        struct conn *c = s->conn;

        if (!c)
                return;
        if (s->prev)
                s->prev->next = s->next;
        else
                c->streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        s->prev = s->next = NULL;
        s->conn = NULL;
        c->nstreams--;
}

void stream_end_json(struct stream *s, uint8_t type, json_t *j)
{
        stream_send_json(s, type, j);
        stream_unlink(s);
}

void stream_end_error(struct stream *s, int code, const char *fmt, ...)
{
        struct cella_error err = {0};
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(&err, code, fmt, ap);
        va_end(ap);
        if (s->conn)
                conn_send_error(s->conn, s->id, &err);
        stream_unlink(s);
}

static struct stream *conn_find(struct conn *c, uint32_t id)
{
        for (struct stream *s = c->streams; s; s = s->next)
                if (s->id == id)
                        return s;
        return NULL;
}

int conn_add_stream(struct conn *c, struct stream *s, uint32_t id, const struct stream_ops *ops)
{
        if (conn_find(c, id))
                return -EEXIST;
        if (c->nstreams >= CELLA_AGENT_MAX_STREAMS)
                return -EMFILE;
        s->id = id;
        s->ops = ops;
        s->send_credit = CELLA_STREAM_WINDOW;
        s->recv_credit = CELLA_STREAM_WINDOW;
        s->conn = c;
        s->prev = NULL;
        s->next = c->streams;
        if (c->streams)
                c->streams->prev = s;
        c->streams = s;
        c->nstreams++;
        return 0;
}

/* ---- connection lifetime ---- */

static void on_conn_closed(uv_handle_t *h)
{
        struct conn *c = h->data;

        buf_free(&c->in);
        free(c);
}

/* Cancel every stream of c (detached: nothing more is sent) and close it. */
static void conn_fail(struct conn *c, const char *why)
{
        if (c->closing)
                return;
        log_info("closing connection: %s", why);
        c->closing = true;
        while (c->streams) {
                struct stream *s = c->streams;

                stream_unlink(s);
                if (s->ops->on_cancel)
                        s->ops->on_cancel(s, true);
        }
        if (c->a->conn == c)
                c->a->conn = NULL;
        uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
}

/* ---- reading and dispatch ---- */

static void dispatch_stream_frame(struct conn *c, struct agent_request *req)
{
        struct stream *s = conn_find(c, req->stream);

        if (!s) {
                /* Late frames for a stream that already ended are dropped. */
                log_debug("%s for unknown stream %u dropped", frame_type_name(req->type),
                          req->stream);
                return;
        }
        switch (req->type) {
        case FRAME_WINDOW:
                s->send_credit += req->credit;
                if (s->send_credit > (uint64_t)1 << 40)
                        s->send_credit = (uint64_t)1 << 40;
                if (s->ops->on_window)
                        s->ops->on_window(s);
                return;
        case FRAME_CANCEL:
                if (s->ops->on_cancel)
                        s->ops->on_cancel(s, false);
                return;
        case FRAME_DATA:
                if (!s->ops->on_data) {
                        conn_fail(c, "DATA on a stream that is not an upload");
                        return;
                }
                s->recv_credit -= (int64_t)req->len;
                if (s->recv_credit < 0) {
                        conn_fail(c, "cellad overran an upload window");
                        return;
                }
                s->ops->on_data(s, req->data, req->len);
                return;
        case FRAME_END:
                if (!s->ops->on_end) {
                        conn_fail(c, "END on a stream that is not an upload");
                        return;
                }
                s->ops->on_end(s);
                return;
        default:
                conn_fail(c, "unexpected frame");
                return;
        }
}

static void dispatch(struct conn *c, const struct frame *f)
{
        struct agent_request req;
        struct cella_error err = {0};
        int r;

        r = agent_request_decode(f, &req, &err);
        if (r == -EPROTO) {
                log_warn("protocol error: %s", err.msg);
                agent_request_done(&req);
                conn_fail(c, "protocol error");
                return;
        }
        if (f->type == FRAME_PING) {
                conn_send(c, FRAME_PONG, 0, f->payload, f->len);
        } else if (f->type == FRAME_PONG) {
                /* nothing */
        } else if (f->type == FRAME_PTY && conn_find(c, f->stream)) {
                /* a resize of an open terminal stream */
                struct stream *s = conn_find(c, f->stream);

                if (!stream_is_pty(s))
                        conn_fail(c, "PTY on a stream that is not a terminal");
                else if (r < 0)
                        log_warn("bad resize ignored: %s", err.msg);
                else
                        pty_resize(s, &req);
        } else if (agent_request_opens_stream(f->type)) {
                if (conn_find(c, f->stream)) {
                        log_warn("stream %u opened twice", f->stream);
                        conn_fail(c, "stream id reused");
                } else if (c->nstreams >= CELLA_AGENT_MAX_STREAMS) {
                        cella_error_set(&err, CELLA_E_SANDBOX_UNAVAILABLE,
                                        "too many concurrent operations (%d)",
                                        CELLA_AGENT_MAX_STREAMS);
                        conn_send_error(c, f->stream, &err);
                } else if (r < 0) {
                        conn_send_error(c, f->stream, &err);
                } else if (f->type == FRAME_EXEC && req.session) {
                        session_exec(c->a, c, &req);
                } else if (f->type == FRAME_EXEC) {
                        exec_start(c->a, c, &req);
                } else if (f->type == FRAME_FILE_READ) {
                        file_read_start(c, &req);
                } else if (f->type == FRAME_FILE_WRITE) {
                        file_write_start(c, &req);
                } else if (f->type == FRAME_PROC) {
                        proc_request(c->a, c, &req);
                } else if (f->type == FRAME_SESSION) {
                        session_request(c->a, c, &req);
                } else if (f->type == FRAME_CODE) {
                        code_request(c->a, c, &req);
                } else if (f->type == FRAME_WATCH) {
                        watch_start(c->a, c, &req);
                } else if (f->type == FRAME_PTY) {
                        pty_open(c->a, c, &req);
                } else {
                        file_op_run(c, &req);
                }
        } else {
                dispatch_stream_frame(c, &req);
        }
        agent_request_done(&req);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct conn *c = h->data;

        (void)suggested;
        if (buf_reserve(&c->in, 64 * 1024) < 0) {
                *ret = uv_buf_init(NULL, 0);
                return;
        }
        *ret = uv_buf_init(c->in.data + c->in.len, (unsigned)(c->in.cap - c->in.len - 1));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct conn *c = st->data;
        size_t off = 0;

        (void)b;
        if (n < 0) {
                conn_fail(c, n == UV_EOF ? "cellad closed the connection" : uv_strerror((int)n));
                return;
        }
        c->in.len += (size_t)n;
        while (!c->closing) {
                struct frame f;
                int r = frame_decode((const uint8_t *)c->in.data + off, c->in.len - off, &f);

                if (r == 0)
                        break;
                if (r < 0) {
                        log_warn("malformed frame header from cellad");
                        conn_fail(c, "malformed frame");
                        break;
                }
                off += (size_t)r;
                dispatch(c, &f);
        }
        if (!c->closing)
                buf_consume(&c->in, off);
}

static void on_connection(uv_stream_t *server, int status)
{
        struct agent *a = server->data;
        struct conn *c;
        json_t *hello;
        int r;

        if (status < 0) {
                log_warn("accept: %s", uv_strerror(status));
                return;
        }
        c = calloc(1, sizeof(*c));
        if (!c) {
                log_error("accept: out of memory");
                return;
        }
        c->a = a;
        r = uv_pipe_init(a->loop, &c->pipe, 0);
        if (r < 0) {
                free(c);
                return;
        }
        c->pipe.data = c;
        r = uv_accept(server, (uv_stream_t *)&c->pipe);
        if (r < 0) {
                log_warn("accept: %s", uv_strerror(r));
                c->closing = true;
                uv_close((uv_handle_t *)&c->pipe, on_conn_closed);
                return;
        }
        if (a->conn)
                conn_fail(a->conn, "replaced by a new connection");
        a->conn = c;
        log_info("cellad connected");
        hello = json_pack("{s:i, s:i}", "version", 1, "pid", (int)getpid());
        conn_send_json(c, FRAME_HELLO, 0, hello);
        r = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
        if (r < 0)
                conn_fail(c, uv_strerror(r));
}

/* ---- children ---- */

struct child_watch {
        struct child_watch *next;
        pid_t pid;
        void (*cb)(void *ud, pid_t pid, int status);
        void *ud;
};

int agent_watch_child(struct agent *a, pid_t pid, void (*cb)(void *ud, pid_t pid, int status),
                      void *ud)
{
        struct child_watch *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->pid = pid;
        w->cb = cb;
        w->ud = ud;
        w->next = a->watches;
        a->watches = w;
        return 0;
}

void agent_unwatch_child(struct agent *a, pid_t pid)
{
        for (struct child_watch **p = &a->watches; *p; p = &(*p)->next)
                if ((*p)->pid == pid) {
                        struct child_watch *w = *p;

                        *p = w->next;
                        free(w);
                        return;
                }
}

/* A reaped child: its watch (if any) fires and is removed; otherwise the command list. */
static void child_exited(struct agent *a, pid_t pid, int status)
{
        for (struct child_watch **p = &a->watches; *p; p = &(*p)->next)
                if ((*p)->pid == pid) {
                        struct child_watch *w = *p;

                        *p = w->next;
                        w->cb(w->ud, pid, status);
                        free(w);
                        return;
                }
        exec_on_child(a, pid, status);
}

static void on_sigchld(uv_signal_t *h, int signum)
{
        struct agent *a = h->data;
        int status;
        pid_t pid;

        (void)signum;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                child_exited(a, pid, status);
        exec_reap_cgroups(a);
}

static bool cgroup_is_usable(void)
{
        struct statfs sf;

        if (statfs("/sys/fs/cgroup", &sf) < 0 || sf.f_type != CGROUP2_SUPER_MAGIC)
                return false;
        return access("/sys/fs/cgroup", W_OK) == 0;
}

int agent_new(uv_loop_t *loop, const struct agent_options *opts, struct agent **ret)
{
        struct agent *a;
        int r;

        a = calloc(1, sizeof(*a));
        if (!a)
                return -ENOMEM;
        a->loop = loop;
        if (snprintf(a->run_dir, sizeof(a->run_dir), "%s",
                     opts->run_dir ? opts->run_dir : "/run/cella") >= (int)sizeof(a->run_dir)) {
                free(a);
                return -ENAMETOOLONG;
        }
        a->use_cgroup = !opts->no_cgroup && cgroup_is_usable();
        a->proc_log_dir = opts->proc_log_dir;
        log_info("per-command cgroups: %s", a->use_cgroup ? "yes" : "no");
        session_init(a);

        r = uv_signal_init(loop, &a->sigchld);
        if (r < 0)
                goto free_agent;
        a->sigchld.data = a;
        r = uv_signal_start(&a->sigchld, on_sigchld, SIGCHLD);
        if (r < 0)
                goto close_signal;

        r = uv_pipe_init(loop, &a->listener, 0);
        if (r < 0)
                goto close_signal;
        a->listener.data = a;
        r = uv_pipe_open(&a->listener, opts->listen_fd);
        if (r < 0)
                goto close_listener;
        r = uv_listen((uv_stream_t *)&a->listener, 16, on_connection);
        if (r < 0)
                goto close_listener;
        *ret = a;
        return 0;

close_listener:
        uv_close((uv_handle_t *)&a->listener, NULL);
close_signal:
        uv_close((uv_handle_t *)&a->sigchld, NULL);
        uv_run(loop, UV_RUN_NOWAIT); /* finish the closes before the memory goes */
free_agent:
        free(a);
        return r;
}

void agent_free(struct agent *a)
{
        if (!a)
                return;
        if (a->conn)
                conn_fail(a->conn, "agent shutting down");
        pty_shutdown(a);
        session_free_all(a);
        proc_shutdown(a);
        code_shutdown(a);
        uv_close((uv_handle_t *)&a->listener, NULL);
        uv_close((uv_handle_t *)&a->sigchld, NULL);
        for (size_t i = 0; i < a->n_dead_cgroups; i++)
                free(a->dead_cgroups[i]);
        while (a->watches) {
                struct child_watch *w = a->watches;

                a->watches = w->next;
                free(w);
        }
        free(a->dead_cgroups);
        free(a);
}
