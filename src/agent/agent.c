/* The dispatcher: accept on the listening socket, frame decoding, the frame table that
 * routes each frame to its handler, the SIGCHLD reaper and the agent's lifetime. It imports
 * the handlers' entry points; the handlers answer through the services beneath
 * (service.h) and never include agent.h or dispatch.h (docs/decisions/0038). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "agent/code.h"
#include "agent/conn.h"
#include "agent/dispatch.h"
#include "agent/exec.h"
#include "agent/files.h"
#include "agent/proc.h"
#include "agent/pty.h"
#include "agent/service.h"
#include "agent/session.h"
#include "agent/watch.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/proto.h"

#ifndef CGROUP2_SUPER_MAGIC
#define CGROUP2_SUPER_MAGIC 0x63677270
#endif

/* ---- the frame table ---- */

static void on_ping(struct conn *c, const struct frame *f)
{
        conn_send(c, FRAME_PONG, 0, f->payload, f->len);
}

/* A checkpoint follows (docs/decisions/0050): the agent is made dumpable, which is what
 * lets the host's CRIU read a restored agent (its memory's user namespace is then the
 * host's, where only a dumpable task's namespaces can be opened from the sandbox's); it is
 * not dumpable again once cellad connects (on_connection). */
static void on_checkpoint(struct conn *c, const struct frame *f)
{
        (void)c;
        (void)f;
        if (prctl(PR_SET_DUMPABLE, 1, 0, 0, 0) < 0)
                log_warn("a checkpoint follows, but the agent stays undumpable: %s",
                         strerror(errno));
        else
                log_info("a checkpoint follows: dumpable until cellad connects again");
}

static void on_pong(struct conn *c, const struct frame *f)
{
        (void)c;
        (void)f;
}

/* EXEC: a command of a session, or one of its own. */
static void open_exec(struct agent *a, struct conn *c, struct agent_request *req)
{
        if (req->session)
                session_exec(a, c, req);
        else
                exec_start(a, c, req);
}

static void route_window(struct conn *c, struct stream *s, const struct agent_request *req, int r,
                         const struct cella_error *err)
{
        (void)c;
        (void)r;
        (void)err;
        stream_add_send_credit(s, req->credit);
        if (s->ops->on_window)
                s->ops->on_window(s);
}

static void route_cancel(struct conn *c, struct stream *s, const struct agent_request *req, int r,
                         const struct cella_error *err)
{
        (void)c;
        (void)req;
        (void)r;
        (void)err;
        if (s->ops->on_cancel)
                s->ops->on_cancel(s, false);
}

static void route_data(struct conn *c, struct stream *s, const struct agent_request *req, int r,
                       const struct cella_error *err)
{
        (void)r;
        (void)err;
        if (!s->ops->on_data) {
                conn_fail(c, "DATA on a stream that is not an upload");
                return;
        }
        if (!stream_take_recv_credit(s, req->len)) {
                conn_fail(c, "cellad overran an upload window");
                return;
        }
        s->ops->on_data(s, req->data, req->len);
}

static void route_end(struct conn *c, struct stream *s, const struct agent_request *req, int r,
                      const struct cella_error *err)
{
        (void)req;
        (void)r;
        (void)err;
        if (!s->ops->on_end) {
                conn_fail(c, "END on a stream that is not an upload");
                return;
        }
        s->ops->on_end(s);
}

/* PTY on an open stream: a resize of that terminal. */
static void route_resize(struct conn *c, struct stream *s, const struct agent_request *req, int r,
                         const struct cella_error *err)
{
        if (!s->ops->on_resize)
                conn_fail(c, "PTY on a stream that is not a terminal");
        else if (r < 0)
                log_warn("bad resize ignored: %s", err->msg);
        else
                s->ops->on_resize(s, req->cols, req->rows);
}

static const struct frame_route frame_table[_FRAME_TYPE_MAX] = {
        [FRAME_PING] = {.control = on_ping},
        [FRAME_PONG] = {.control = on_pong},
        [FRAME_CHECKPOINT] = {.control = on_checkpoint},
        [FRAME_EXEC] = {.open = open_exec},
        [FRAME_FILE_READ] = {.open = file_read_start},
        [FRAME_FILE_WRITE] = {.open = file_write_start},
        [FRAME_FILE_OP] = {.open = file_op_run},
        [FRAME_SESSION] = {.open = session_request},
        [FRAME_PROC] = {.open = proc_request},
        [FRAME_CODE] = {.open = code_request},
        [FRAME_WATCH] = {.open = watch_start},
        [FRAME_PTY] = {.open = pty_open, .on_stream = route_resize},
        [FRAME_WINDOW] = {.on_stream = route_window},
        [FRAME_CANCEL] = {.on_stream = route_cancel},
        [FRAME_DATA] = {.on_stream = route_data},
        [FRAME_END] = {.on_stream = route_end},
};

const struct frame_route *agent_frame_route(uint8_t type)
{
        const struct frame_route *route;

        if (type >= _FRAME_TYPE_MAX)
                return NULL;
        route = &frame_table[type];
        if (!route->control && !route->open && !route->on_stream)
                return NULL;
        return route;
}

/* ---- dispatch ---- */

/* PTY both opens a stream, naming its session, and resizes an open one (cols and rows
 * only). A resize for a stream that is not open crossed that stream's end (the shell exited
 * while cellad passed a client's resize on): a late frame, dropped like the others. Taken
 * for an open, it attached a stream cellad no longer knows to the default session's
 * terminal (starting a shell there) and, never acknowledged, that stream's window ran out
 * and stalled the terminal's output. */
static bool is_late_resize(const struct agent_request *req, int r)
{
        return req->type == FRAME_PTY && r == 0 && !req->session_given;
}

/* A frame opening stream f->stream (s: the open stream with that id, if any). */
static void open_stream(struct conn *c, const struct frame_route *route, struct stream *s,
                        struct agent_request *req, int r, const struct cella_error *err)
{
        if (s) {
                log_warn("stream %u opened twice", req->stream);
                conn_fail(c, "stream id reused");
        } else if (conn_stream_count(c) >= CELLA_AGENT_MAX_STREAMS) {
                conn_reply_error(c, req->stream, CELLA_E_SANDBOX_UNAVAILABLE,
                                 "too many concurrent operations (%d)", CELLA_AGENT_MAX_STREAMS);
        } else if (r < 0) {
                conn_send_error(c, req->stream, err);
        } else {
                route->open(c->a, c, req);
        }
}

static void dispatch(struct conn *c, const struct frame *f)
{
        const struct frame_route *route;
        struct agent_request req;
        struct cella_error err = {0};
        struct stream *s;
        int r;

        r = agent_request_decode(f, &req, &err);
        if (r == -EPROTO) {
                log_warn("protocol error: %s", err.msg);
                agent_request_done(&req);
                conn_fail(c, "protocol error");
                return;
        }
        route = agent_frame_route(f->type);
        if (!route) {
                conn_fail(c, "unexpected frame");
        } else if (route->control) {
                route->control(c, f);
        } else {
                s = conn_find_stream(c, f->stream);
                if (s && route->on_stream)
                        route->on_stream(c, s, &req, r, &err);
                else if (route->open && !(route->on_stream && is_late_resize(&req, r)))
                        open_stream(c, route, s, &req, r, &err);
                else /* Late frames for a stream that already ended are dropped. */
                        log_debug("%s for unknown stream %u dropped", frame_type_name(f->type),
                                  f->stream);
        }
        agent_request_done(&req);
}

/* ---- reading ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct conn *c = h->data;
        char *p;
        int room = frame_reader_space(&c->in, 64 * 1024, &p);

        (void)suggested;
        *ret = room < 0 ? uv_buf_init(NULL, 0) : uv_buf_init(p, (unsigned)room);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct conn *c = st->data;
        struct frame f;
        int r = 0;

        (void)b;
        if (n < 0) {
                conn_fail(c, n == UV_EOF ? "cellad closed the connection" : uv_strerror((int)n));
                return;
        }
        frame_reader_commit(&c->in, (size_t)n);
        while (!c->closing && (r = frame_reader_next(&c->in, &f)) > 0)
                dispatch(c, &f);
        if (r < 0) {
                log_warn("malformed frame header from cellad");
                conn_fail(c, "malformed frame");
        }
        if (!c->closing)
                frame_reader_compact(&c->in);
}

/* Is the peer of an accepted connection cellad? In a sandbox (we are PID 1 of its pid
 * namespace) the socket is at /run/.cella/agent.sock, which the sandbox's root can reach:
 * cellad connects from outside our pid namespace, so the kernel gives its pid as 0 here,
 * and a peer with a pid of ours is a process of the sandbox, refused (it would otherwise
 * replace cellad's connection). Outside a sandbox (the agent's own tests) anyone with
 * access to the socket may connect. */
/* The connection's send buffer as large as a stream's window (the kernel caps it at
 * net.core.wmem_max): a download's frames wait in the socket rather than be copied behind
 * a write request each time a 208 KiB default fills (decision 0061). */
static void socket_buffer_window(uv_pipe_t *p)
{
        int size = CELLA_STREAM_WINDOW;
        uv_os_fd_t fd;

        if (uv_fileno((uv_handle_t *)p, &fd) == 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
}

static bool peer_is_cellad(uv_pipe_t *pipe)
{
        struct ucred cred;
        socklen_t len = sizeof(cred);
        uv_os_fd_t fd;

        if (getpid() != 1)
                return true;
        if (uv_fileno((uv_handle_t *)pipe, &fd) < 0 ||
            getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
                log_warn("accept: no peer credentials: %s", strerror(errno));
                return false;
        }
        if (cred.pid != 0) {
                log_warn("refused a connection from pid %d of the sandbox", (int)cred.pid);
                return false;
        }
        return true;
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
                uv_close((uv_handle_t *)&c->pipe, conn_on_closed);
                return;
        }
        if (!peer_is_cellad(&c->pipe)) {
                c->closing = true;
                uv_close((uv_handle_t *)&c->pipe, conn_on_closed);
                return;
        }
        socket_buffer_window(&c->pipe);
        if (a->conn)
                conn_fail(a->conn, "replaced by a new connection");
        a->conn = c;
        /* not dumpable (main) whatever a checkpoint before made it */
        prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
        log_info("cellad connected");
        hello = json_pack("{s:i, s:i}", "version", 1, "pid", (int)getpid());
        conn_send_json(c, FRAME_HELLO, 0, hello);
        r = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
        if (r < 0)
                conn_fail(c, uv_strerror(r));
}

/* ---- children ---- */

/* A reaped child: its watch (if any) fires and is removed; otherwise the command list. */
static void on_sigchld(uv_signal_t *h, int signum)
{
        struct agent *a = h->data;
        int status;
        pid_t pid;

        (void)signum;
        while ((pid = waitpid(-1, &status, WNOHANG)) > 0)
                if (!agent_child_exited(a, pid, status))
                        exec_on_child(a, pid, status);
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
        /* a deleted session takes its background processes and its terminal with it */
        agent_on_session_end(a, proc_kill_session);
        agent_on_session_end(a, pty_kill_session);

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
        agent_unwatch_all(a);
        free(a->dead_cgroups);
        free(a);
}
