/* EXEC streams: a command run as `bash -c` in its own session (process group) and, where
 * /sys/fs/cgroup is a writable cgroup2 mount, its own cgroup cmd-<stream>, so that a timeout
 * or CANCEL kills the whole tree.
 *
 * Lifetime of a struct exec: created by exec_start, in the agent's exec list until it is
 * freed. It ends its stream with EXIT once the shell has been reaped and both output pipes
 * are at EOF. A shell that exits while a background process it started still holds the
 * pipes gets EXIT after a grace period (EXIT_GRACE_MS of reading, not counting time spent
 * waiting for window credit); our pipe ends are then closed and the leftover process gets
 * EPIPE/SIGPIPE when it writes. The object is freed when the shell is reaped, its stream
 * has ended (or the connection is gone) and all its libuv handles are closed; its cgroup is
 * removed then, or later from the reaper once the last process in it has died. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/exec.h"
#include "agent/pump.h"
#include "agent/service.h"
#include "common/limits.h"
#include "common/log.h"

#define EXIT_GRACE_MS 100

struct exec {
        struct stream s; /* first: the agent casts stream pointers */
        struct agent *a;
        struct exec *prev_all, *next_all;
        pid_t pid;
        bool reaped;
        int status;
        bool timed_out;
        bool finished;              /* EXIT sent, or detached: nothing more to send */
        bool grace_expired_waiting; /* grace ran out while paused for credit */
        struct pump out[2];         /* stdout, stderr; closed at EOF */
        uv_timer_t timeout;
        uv_timer_t grace;
        unsigned open_handles;
        char *cgroup; /* path of the command's cgroup, or NULL */
};

/* Kill the command's whole tree: its cgroup and its process group (agent_kill_tree). */
static void kill_tree(struct exec *e)
{
        struct kill_target t = {
                .cgroup = e->cgroup,
                .pgid = e->pid > 0 ? e->pid : 0,
                .root = e->pid > 0 && !e->reaped && !e->cgroup ? e->pid : 0,
        };

        agent_kill_tree(&t);
        if (e->pid > 0 && !e->reaped)
                kill(e->pid, SIGKILL);
}

/* ---- lifetime ---- */

static void exec_free(struct exec *e)
{
        struct agent *a = e->a;

        if (e->prev_all)
                e->prev_all->next_all = e->next_all;
        else
                a->execs = e->next_all;
        if (e->next_all)
                e->next_all->prev_all = e->prev_all;
        if (e->cgroup) {
                agent_cgroup_remove(a, e->cgroup);
                free(e->cgroup);
        }
        free(e);
}

static void exec_maybe_free(struct exec *e)
{
        if (e->reaped && e->finished && e->open_handles == 0 && !e->s.conn)
                exec_free(e);
}

/* One of e's handles (timers, pumps) is closed. */
static void exec_handle_gone(struct exec *e)
{
        e->open_handles--;
        exec_maybe_free(e);
}

static void on_handle_closed(uv_handle_t *h)
{
        exec_handle_gone(h->data);
}

static void close_handle(struct exec *e, uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, on_handle_closed);
}

/* Nothing more will be sent: close every handle. */
static void exec_done(struct exec *e)
{
        e->finished = true;
        pump_close_all(e->out, 2);
        close_handle(e, (uv_handle_t *)&e->timeout);
        close_handle(e, (uv_handle_t *)&e->grace);
}

static void send_exit(struct exec *e)
{
        json_t *j;
        int code = 0, sig = 0;

        if (WIFEXITED(e->status)) {
                code = WEXITSTATUS(e->status);
        } else if (WIFSIGNALED(e->status)) {
                sig = WTERMSIG(e->status);
                code = 128 + sig;
        }
        j = json_pack("{s:i, s:b}", "exitCode", code, "timedOut", e->timed_out);
        if (j && sig)
                json_object_set_new(j, "signal", json_integer(sig));
        stream_end_json(&e->s, FRAME_EXIT, j);
        exec_done(e);
}

static void check_finished(struct exec *e)
{
        if (e->finished || !e->reaped)
                return;
        if (pump_all_done(e->out, 2))
                send_exit(e);
}

/* ---- output ---- */

static bool may_read(struct exec *e)
{
        return !e->finished && e->s.send_credit > 0 && !stream_congested(&e->s) &&
               !stream_busy(&e->s);
}

/* The pumps' sink: STDOUT/STDERR frames within the stream's window. */
static size_t out_allowance(struct pump *p)
{
        struct exec *e = p->owner;

        return may_read(e) ? pump_credit_bulk(&e->s) : 0;
}

static void out_data(struct pump *p, const char *data, size_t n)
{
        struct exec *e = p->owner;

        pump_emit(&e->s, p->index == 0 ? FRAME_STDOUT : FRAME_STDERR, data, n);
}

static void out_eof(struct pump *p)
{
        struct exec *e = p->owner;

        pump_close(p);
        check_finished(e);
}

static void out_closed(struct pump *p)
{
        exec_handle_gone(p->owner);
}

static const struct pump_ops out_ops = {
        .allowance = out_allowance,
        .on_data = out_data,
        .on_eof = out_eof,
        .on_closed = out_closed,
};

static void on_grace(uv_timer_t *t)
{
        struct exec *e = t->data;

        if (e->finished)
                return;
        if (!may_read(e)) {
                /* Output is waiting for credit: the grace restarts once it flows again. */
                e->grace_expired_waiting = true;
                return;
        }
        log_debug("stream %u: shell exited, output still held open; ending", e->s.id);
        send_exit(e);
}

static void exec_on_window(struct exec *e)
{
        if (!may_read(e))
                return;
        pump_resume_all(e->out, 2);
        if (e->grace_expired_waiting) {
                e->grace_expired_waiting = false;
                uv_timer_start(&e->grace, on_grace, EXIT_GRACE_MS, 0);
        }
        check_finished(e);
}

static void on_timeout(uv_timer_t *t)
{
        struct exec *e = t->data;

        if (e->finished)
                return;
        log_info("stream %u: timed out, killing the command", e->s.id);
        e->timed_out = true;
        kill_tree(e);
}

static void exec_cancel(struct exec *e, bool detach)
{
        kill_tree(e);
        if (detach) {
                /* The connection is gone (already unlinked): nobody reads the output. */
                e->s.conn = NULL;
                if (!e->finished)
                        exec_done(e);
                exec_maybe_free(e);
        }
}

void exec_on_child(struct agent *a, pid_t pid, int status)
{
        struct exec *e;

        for (e = a->execs; e; e = e->next_all)
                if (e->pid == pid && !e->reaped)
                        break;
        if (!e)
                return; /* an orphan */
        e->reaped = true;
        e->status = status;
        if (!e->finished) {
                check_finished(e);
                if (!e->finished)
                        uv_timer_start(&e->grace, on_grace, EXIT_GRACE_MS, 0);
        }
        exec_maybe_free(e);
}

static void exec_stream_window(struct stream *s)
{
        exec_on_window((struct exec *)s);
}

static void exec_stream_cancel(struct stream *s, bool detach)
{
        exec_cancel((struct exec *)s, detach);
}

static const struct stream_ops exec_ops = {
        .on_window = exec_stream_window,
        .on_cancel = exec_stream_cancel,
};

/* ---- starting ---- */

void exec_start(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct spawn_request sr = {
                .command = req->command,
                .cwd = req->cwd,
                .base_env = req->base_env,
                .n_base_env = req->n_base_env,
                .env = req->env,
                .n_env = req->n_env,
        };
        struct spawn_result res;
        struct cella_error err = {0};
        struct exec *e;
        int fds[2];

        e = calloc(1, sizeof(*e));
        if (!e) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                conn_send_error(c, req->stream, &err);
                return;
        }
        e->a = a;
        e->pid = -1;
        if (a->use_cgroup) {
                char name[32];

                snprintf(name, sizeof(name), "cmd-%u", req->stream);
                e->cgroup = agent_cgroup_make(a, name);
        }
        sr.cgroup = e->cgroup;
        if (agent_spawn(&sr, &res, &err) < 0) {
                conn_send_error(c, req->stream, &err);
                if (e->cgroup) {
                        rmdir(e->cgroup);
                        free(e->cgroup);
                }
                free(e);
                return;
        }

        /* Running. From here on the exec object owns everything. */
        e->pid = res.pid;
        conn_add_stream(c, &e->s, req->stream, &exec_ops);
        e->next_all = a->execs;
        if (a->execs)
                a->execs->prev_all = e;
        a->execs = e;
        stream_send_json(&e->s, FRAME_STARTED, json_pack("{s:i}", "pid", (int)res.pid));

        uv_timer_init(a->loop, &e->timeout);
        uv_timer_init(a->loop, &e->grace);
        e->timeout.data = e->grace.data = e;
        e->open_handles = 2;
        fds[0] = res.out;
        fds[1] = res.err;
        for (int i = 0; i < 2; i++) {
                e->open_handles++;
                if (pump_open_pipe(&e->out[i], a->loop, fds[i], &out_ops, e, i) < 0)
                        pump_close(&e->out[i]);
        }
        if (req->timeout_ms > 0)
                uv_timer_start(&e->timeout, on_timeout, (uint64_t)req->timeout_ms, 0);
        pump_resume_all(e->out, 2);
        log_debug("stream %u: started pid %d", req->stream, (int)res.pid);
}
