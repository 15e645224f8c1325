/* Terminals: one interactive shell on a pty per session, shared by every PTY stream
 * attached to it (docs/protocol.md "Terminals", docs/decisions/0022-terminal.md).
 *
 * A struct term is in the agent's list from the first PTY frame of its session until its
 * shell has exited (or the session was deleted) and every attached stream was ended. It
 * owns the pty's master (non-blocking, read and watched by a pump in poll mode, pump.h),
 * the ring of the last CELLA_PTY_RING bytes of output (replayed to a stream that
 * attaches), the shell's pid and its cgroup `term-<n>`. Its own cgroup, not the session's: a session command's
 * timeout or cancel SIGKILLs the members of the session's cgroup born after the command
 * started, and a terminal opened meanwhile would be one.
 *
 * Output: the master is read only while every attached stream has window credit and the
 * connection is not congested, at most as many bytes as the stream with the least credit
 * may take, so a slow client slows the terminal (as a slow tty would) and nothing is
 * buffered beyond the ring. A terminal without streams keeps running and reading; its
 * output only fills the ring.
 *
 * Input: DATA frames are written to the master; bytes the master does not take at once
 * wait in the stream's own buffer (bounded by the stream's receive window) and credit is
 * returned as they are written.
 *
 * The end: when the shell is reaped, output is read until the master reports EIO (every
 * slave descriptor closed) or for EXIT_GRACE_MS more, then every stream gets EXIT
 * {"exitCode":n} (128+signal when killed), the cgroup is killed and removed, and the next
 * PTY frame for the session starts a new shell. A stream's CANCEL (its WebSocket closed)
 * only detaches it, with RESULT {}. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/wait.h>
#include <termios.h>
#include <unistd.h>

#include "agent/pty.h"
#include "agent/service.h"
#include "agent/pty-ring.h"
#include "agent/pump.h"
#include "agent/session.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"

#define EXIT_GRACE_MS 200 /* output still read after the shell was reaped */

struct term_stream;

struct term {
        struct term *next;
        struct agent *a;
        char sid[CELLA_ID_MAX + 1];
        unsigned n;
        pid_t pid;  /* -1 once reaped */
        int master; /* owned by out once it is open; -EBADF once finished */
        char *cgroup;
        struct pump out; /* reads the master (at EOF once it reported EIO) */
        uv_timer_t grace;
        unsigned open_handles;
        bool exited;   /* shell reaped */
        bool finished; /* streams ended, handles closing */
        int exit_code;
        struct winsize ws;
        struct pty_ring ring;
        struct term_stream *streams;
};

/* One attached PTY stream. */
struct term_stream {
        struct stream s; /* first: the agent casts stream pointers */
        struct term_stream *next;
        struct term *t;
        struct buf pending; /* input the master did not take yet */
};

static unsigned term_seq;

static void term_update_poll(struct term *t);
static void term_finish(struct term *t);

/* ---- the ring ---- */

/* Send the ring to a stream that just attached (its credit is the full window, which
 * is larger than the ring). */
static void ring_replay(struct term *t, struct term_stream *ts)
{
        const uint8_t *a, *b;
        size_t alen, blen;

        pty_ring_spans(&t->ring, &a, &alen, &b, &blen);
        if (alen)
                pump_emit(&ts->s, FRAME_STDOUT, a, alen);
        if (blen)
                pump_emit(&ts->s, FRAME_STDOUT, b, blen);
}

/* ---- streams ---- */

static void ts_free(struct term_stream *ts)
{
        buf_free(&ts->pending);
        free(ts);
}

static void ts_unlink(struct term_stream *ts)
{
        struct term *t = ts->t;

        if (!t)
                return;
        for (struct term_stream **p = &t->streams; *p; p = &(*p)->next)
                if (*p == ts) {
                        *p = ts->next;
                        break;
                }
        ts->t = NULL;
        ts->next = NULL;
        term_update_poll(t);
}

/* Return credit for n input bytes written to the master. */
static void ts_credit(struct term_stream *ts, size_t n)
{
        uint8_t w[4];

        if (!n)
                return;
        ts->s.recv_credit += (int64_t)n;
        frame_window_pack(w, (uint32_t)n);
        stream_send(&ts->s, FRAME_WINDOW, w, sizeof(w));
}

/* Write what the stream has pending to the master. False when the master is full. */
static bool ts_flush(struct term_stream *ts)
{
        struct term *t = ts->t;

        while (t && ts->pending.len > 0) {
                ssize_t n = write(t->master, ts->pending.data, ts->pending.len);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return false;
                if (n <= 0) {
                        /* the terminal is going away: drop the input */
                        n = (ssize_t)ts->pending.len;
                }
                buf_consume(&ts->pending, (size_t)n);
                ts_credit(ts, (size_t)n);
        }
        return true;
}

static void ts_on_data(struct stream *s, const uint8_t *data, size_t len)
{
        struct term_stream *ts = (struct term_stream *)s;

        if (!ts->t || ts->t->exited) {
                ts_credit(ts, len);
                return;
        }
        if (buf_append(&ts->pending, data, len) < 0) {
                ts_credit(ts, len);
                return;
        }
        if (!ts_flush(ts))
                term_update_poll(ts->t);
}

static void ts_on_window(struct stream *s)
{
        struct term_stream *ts = (struct term_stream *)s;

        if (ts->t)
                term_update_poll(ts->t);
}

static void ts_on_cancel(struct stream *s, bool detach)
{
        struct term_stream *ts = (struct term_stream *)s;

        ts_unlink(ts);
        if (!detach)
                stream_end_json(s, FRAME_RESULT, json_object());
        ts_free(ts);
}

static void ts_on_resize(struct stream *s, unsigned cols, unsigned rows);

static const struct stream_ops term_stream_ops = {
        .on_window = ts_on_window,
        .on_cancel = ts_on_cancel,
        .on_data = ts_on_data,
        .on_resize = ts_on_resize,
};

/* ---- output ---- */

/* The pump's sink. How many bytes may be read now: the least credit of the attached
 * streams (none attached: a chunk), 0 while the connection is congested. */
static size_t term_read_allowance(struct pump *p)
{
        struct term *t = p->owner;
        size_t allow = CELLA_FRAME_DATA_CHUNK;

        if (t->finished)
                return 0;
        for (struct term_stream *ts = t->streams; ts; ts = ts->next) {
                size_t c = pump_credit(&ts->s);

                if (c < allow)
                        allow = c;
        }
        return allow;
}

static void term_out_data(struct pump *p, const char *data, size_t n)
{
        struct term *t = p->owner;

        pty_ring_append(&t->ring, (const uint8_t *)data, n);
        for (struct term_stream *ts = t->streams; ts; ts = ts->next)
                pump_emit(&ts->s, FRAME_STDOUT, data, n);
}

/* EIO: no slave descriptor is open any more. */
static void term_out_eof(struct pump *p)
{
        struct term *t = p->owner;

        if (t->exited)
                term_finish(t);
}

static bool term_wants_write(struct pump *p)
{
        struct term *t = p->owner;

        if (t->exited)
                return false;
        for (struct term_stream *ts = t->streams; ts; ts = ts->next)
                if (ts->pending.len > 0)
                        return true;
        return false;
}

static void term_writable(struct pump *p)
{
        struct term *t = p->owner;

        for (struct term_stream *ts = t->streams; ts; ts = ts->next)
                if (!ts_flush(ts))
                        break;
}

static void term_free(struct term *t);

static void term_out_closed(struct pump *p)
{
        struct term *t = p->owner;

        if (--t->open_handles == 0)
                term_free(t);
}

static const struct pump_ops term_out_ops = {
        .allowance = term_read_allowance,
        .on_data = term_out_data,
        .on_eof = term_out_eof,
        .on_closed = term_out_closed,
        .wants_write = term_wants_write,
        .on_writable = term_writable,
};

static void term_update_poll(struct term *t)
{
        if (!t->finished)
                pump_resume(&t->out);
}

/* ---- lifetime ---- */

static void term_free(struct term *t)
{
        if (t->cgroup) {
                agent_cgroup_remove(t->a, t->cgroup);
                free(t->cgroup);
        }
        free(t);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct term *t = h->data;

        if (--t->open_handles == 0)
                term_free(t);
}

/* Every stream gets EXIT, the terminal leaves the list; what the shell left in its cgroup
 * is killed, and the memory goes once libuv released the handles. */
static void term_finish(struct term *t)
{
        struct agent *a = t->a;

        if (t->finished)
                return;
        t->finished = true;
        for (struct term **p = &a->terms; *p; p = &(*p)->next)
                if (*p == t) {
                        *p = t->next;
                        break;
                }
        while (t->streams) {
                struct term_stream *ts = t->streams;

                t->streams = ts->next;
                ts->t = NULL;
                ts->next = NULL;
                stream_end_json(&ts->s, FRAME_EXIT, json_pack("{s:i}", "exitCode", t->exit_code));
                ts_free(ts);
        }
        {
                struct kill_target kt = {
                        .cgroup = t->cgroup,
                        .pgid = t->pid > 0 ? t->pid : 0,
                        .root = t->pid > 0 && !t->cgroup ? t->pid : 0,
                };

                agent_kill_tree(&kt);
        }
        if (t->pid > 0) {
                /* not reaped yet (session deleted): the reaper finds no watch, which is
                 * fine, and the shell goes now */
                agent_unwatch_child(a, t->pid);
                kill(t->pid, SIGKILL);
        }
        log_debug("terminal of session %s ended (exit %d)", t->sid, t->exit_code);
        pump_close(&t->out); /* and the master */
        t->master = -EBADF;
        uv_close((uv_handle_t *)&t->grace, on_handle_closed);
}

static void on_grace(uv_timer_t *h)
{
        term_finish(h->data);
}

static void on_shell_exit(void *ud, pid_t pid, int status)
{
        struct term *t = ud;

        (void)pid;
        t->pid = -1;
        t->exited = true;
        t->exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        uv_timer_start(&t->grace, on_grace, EXIT_GRACE_MS, 0);
        if (t->out.eof) {
                /* the master reported EIO already: done once output may go on */
                if (term_read_allowance(&t->out) > 0)
                        term_finish(t);
        } else {
                pump_read(&t->out);
        }
}

static struct term *term_find(struct agent *a, const char *sid)
{
        for (struct term *t = a->terms; t; t = t->next)
                if (strcmp(t->sid, sid) == 0 && !t->exited)
                        return t;
        return NULL;
}

/* Open a pty: the master (non-blocking) and its slave, both close-on-exec. */
static int pty_pair(int *ret_master, int *ret_slave, const struct winsize *ws)
{
        char name[64];
        int m, s;

        m = posix_openpt(O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (m < 0)
                return -errno;
        if (grantpt(m) < 0 || unlockpt(m) < 0 || ptsname_r(m, name, sizeof(name)) != 0)
                goto fail;
        s = open(name, O_RDWR | O_NOCTTY | O_CLOEXEC);
        if (s < 0)
                goto fail;
        if (ioctl(m, TIOCSWINSZ, ws) < 0 || fcntl(m, F_SETFL, O_NONBLOCK) < 0) {
                int e = errno;

                close(s);
                errno = e;
                goto fail;
        }
        *ret_master = m;
        *ret_slave = s;
        return 0;
fail : {
        int e = errno;

        close(m);
        return -e;
}
}

/* Start session sid's terminal. NULL with err set. */
static struct term *term_start(struct agent *a, const struct agent_request *req,
                               struct cella_error *err)
{
        static char term_env[] = "TERM=xterm-256color";
        char *extra[] = {term_env};
        char *cwd = NULL, **env = NULL;
        size_t n_env = 0;
        struct spawn_request sr = {0};
        struct spawn_result res;
        struct term *t;
        int slave = -EBADF, r;
        char name[32];

        if (session_spawn_context(a, req->session, req->base_env, req->n_base_env, &cwd, &env,
                                  &n_env, err) < 0)
                return NULL;
        t = calloc(1, sizeof(*t));
        if (!t) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        t->a = a;
        t->n = ++term_seq;
        t->pid = -1;
        t->master = -EBADF;
        snprintf(t->sid, sizeof(t->sid), "%s", req->session);
        t->ws.ws_col = (unsigned short)req->cols;
        t->ws.ws_row = (unsigned short)req->rows;
        r = pty_pair(&t->master, &slave, &t->ws);
        if (r < 0) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "open a pty: %s", strerror(-r));
                goto fail;
        }
        if (a->use_cgroup) {
                snprintf(name, sizeof(name), "term-%u", t->n);
                t->cgroup = agent_cgroup_make(a, name);
        }
        sr.cwd = cwd;
        sr.base_env = env;
        sr.n_base_env = n_env;
        sr.env = extra;
        sr.n_env = ARRAY_SIZE(extra);
        sr.cgroup = t->cgroup;
        sr.terminal = true;
        sr.tty_fd = slave;
        if (agent_spawn(&sr, &res, err) < 0)
                goto fail;
        close(slave);
        slave = -EBADF;
        t->pid = res.pid;
        if (agent_watch_child(a, t->pid, on_shell_exit, t) < 0) {
                struct kill_target kt = {.cgroup = t->cgroup, .pgid = t->pid};

                agent_kill_tree(&kt);
                kill(t->pid, SIGKILL);
                while (waitpid(t->pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto fail;
        }
        uv_timer_init(a->loop, &t->grace);
        t->grace.data = t;
        t->open_handles = 1;
        if (pump_open_poll(&t->out, a->loop, t->master, &term_out_ops, t, 0) == 0)
                t->open_handles++;
        else
                t->master = -EBADF; /* closed: the shell sees a hangup */
        t->next = a->terms;
        a->terms = t;
        term_update_poll(t);
        log_debug("terminal of session %s: shell %d", t->sid, (int)t->pid);
        goto out;
fail:
        if (slave >= 0)
                close(slave);
        if (t) {
                if (t->master >= 0)
                        close(t->master);
                if (t->cgroup) {
                        agent_cgroup_remove(a, t->cgroup);
                        free(t->cgroup);
                }
                free(t);
                t = NULL;
        }
out:
        free(cwd);
        agent_env_free(env, n_env);
        return t;
}

static void term_resize(struct term *t, unsigned cols, unsigned rows)
{
        t->ws.ws_col = (unsigned short)cols;
        t->ws.ws_row = (unsigned short)rows;
        /* the kernel sends SIGWINCH to the foreground process group */
        if (ioctl(t->master, TIOCSWINSZ, &t->ws) < 0)
                log_debug("resize terminal of %s: %s", t->sid, strerror(errno));
}

void pty_open(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct cella_error err = {0};
        struct term_stream *ts;
        struct term *t = term_find(a, req->session);
        bool fresh = !t;

        if (!t) {
                t = term_start(a, req, &err);
                if (!t) {
                        conn_send_error(c, req->stream, &err);
                        return;
                }
        }
        ts = calloc(1, sizeof(*ts));
        if (!ts || conn_add_stream(c, &ts->s, req->stream, &term_stream_ops) < 0) {
                free(ts);
                conn_reply_error(c, req->stream, CELLA_E_SANDBOX_UNAVAILABLE,
                                 "cannot attach to the terminal");
                return;
        }
        if (!fresh)
                term_resize(t, req->cols, req->rows);
        ring_replay(t, ts);
        ts->t = t;
        ts->next = t->streams;
        t->streams = ts;
        stream_send_json(&ts->s, FRAME_STARTED,
                         json_pack("{s:i, s:i, s:i}", "pid", (int)t->pid, "cols", (int)t->ws.ws_col,
                                   "rows", (int)t->ws.ws_row));
        term_update_poll(t);
}

/* A PTY frame on the open stream: resize its terminal. */
static void ts_on_resize(struct stream *s, unsigned cols, unsigned rows)
{
        struct term_stream *ts = (struct term_stream *)s;

        if (ts->t && !ts->t->finished)
                term_resize(ts->t, cols, rows);
}

void pty_kill_session(struct agent *a, const char *sid)
{
        struct term *t = term_find(a, sid);

        if (!t)
                return;
        if (!t->exited)
                t->exit_code = 128 + SIGKILL;
        term_finish(t);
}

void pty_shutdown(struct agent *a)
{
        while (a->terms)
                term_finish(a->terms);
}
