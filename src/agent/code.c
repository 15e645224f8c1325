/* The code interpreter (CODE frames; docs/decisions/0021-code-interpreter.md).
 *
 * A struct interp is one runner process (src/agent/runners/, protocol in the decision): a
 * python3 or node started with agent_spawn in a cgroup of its own (code-<n>), its stdout and
 * stderr on two pipes, requests to its fd 3 and events from its fd 4. An interp is either
 * a context's (linked in the table's list, with an id) or the spare of its runner kind
 * (t->spare[]): started in the background once the kind has been used, handed to the next
 * context created so that it does not wait for the interpreter's start.
 *
 * A context serializes its work in a FIFO of jobs: first the setup (from a create, or made
 * implicitly for a default context), then runs. A job is a stream (a create's or a run's;
 * the implicit setup has none). The head job runs once the runner said ready. A run's
 * output goes out as STDOUT/STDERR frames and its events as DATA (one JSON object per line,
 * re-serialised from the validated event), all within the stream's credit: what waits for
 * credit is held per job (CELLA_CODE_OUT_PENDING per output stream, one event), and the
 * runner's pipes are not read meanwhile, so a chatty run blocks in its own write. The run
 * ends with RESULT {executionCount, timedOut} once the runner's done arrived and everything
 * before it was sent.
 *
 * Interrupts: a timeout or a cancelled run sends SIGINT, again every
 * CELLA_CODE_INTERRUPT_REPEAT_MS until done; no done within
 * CELLA_CODE_INTERRUPT_GRACE_MS kills the runner's cgroup. A runner that exits (or is
 * killed) makes its context dead: every job in it ends with CONTEXT_DEAD, later runs too;
 * a dead default context is replaced on the next run that needs it. An interp is freed
 * once it is out of the table, reaped and its handles are closed. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/code.h"
#include "agent/service.h"
#include "agent/code-request.h"
#include "agent/runners.h"
#include "common/limits.h"
#include "common/log.h"

enum runner_kind { RUNNER_PYTHON, RUNNER_NODE, _RUNNER_MAX };

struct code_job;

struct interp {
        struct interp *prev, *next; /* in t->contexts while it is a context */
        struct code_table *t;
        enum runner_kind kind;
        bool in_table; /* a context in the list, or a spare */
        char id[CELLA_ID_MAX + 1];
        enum code_lang lang;
        char *cwd;
        bool is_default;
        pid_t pid;
        bool reaped;
        char *cgroup;
        uv_pipe_t out[2], ev, req;
        bool out_open[2], ev_open, req_open;
        bool out_reading[2], ev_reading;
        uv_timer_t timer; /* ready timeout, then a run's timeout */
        uv_timer_t grace; /* interrupt grace, event-pipe EOF grace */
        unsigned handles;
        bool ready;
        bool set_up; /* setup_ok seen */
        bool dead;
        char reason[160];
        bool interrupting;
        uint64_t interrupt_at; /* loop time of the first SIGINT */
        struct buf line;       /* incomplete event line from fd 4 */
        struct code_job *head, *tail;
        unsigned queued;
        struct code_job *active;
        int64_t run_seq;
};

struct code_table {
        struct agent *a;
        struct interp *contexts;
        unsigned n_contexts;
        struct interp *spare[_RUNNER_MAX];
        bool used[_RUNNER_MAX];
        char **base_env; /* the latest create's or run's, for spares */
        size_t n_base_env;
        uint64_t seq;
        unsigned objects; /* interps not yet freed */
        bool shutdown;    /* the agent is going: the last interp freed frees the table */
};

struct code_job {
        struct stream s; /* first: the agent casts stream pointers; s.conn NULL: no stream */
        struct interp *it;
        struct code_job *next;
        bool is_setup;
        char *code;
        int64_t timeout_ms;
        char **env; /* setup */
        size_t n_env;
        int64_t run_id;
        bool timed_out;
        bool done_seen;
        int64_t execution_count;
        bool error_seen;
        struct buf pend[3]; /* stdout, stderr, events waiting for credit */
};

static char readbuf[CELLA_FRAME_DATA_CHUNK];

static void interp_die(struct interp *it, const char *fmt, ...) _printf_(2, 3);
static void interp_next(struct interp *it);
static void interp_update_reading(struct interp *it);
static void interp_maybe_free(struct interp *it);
static void table_unlink(struct interp *it);
static void spare_refill(struct code_table *t, enum runner_kind kind);

static enum runner_kind lang_kind(enum code_lang l)
{
        return l == CODE_PYTHON ? RUNNER_PYTHON : RUNNER_NODE;
}

/* ---- jobs ---- */

static void job_free(struct code_job *j)
{
        for (int i = 0; i < 3; i++)
                buf_free(&j->pend[i]);
        free(j->code);
        agent_env_free(j->env, j->n_env);
        free(j);
}

/* End the job's stream (if it still has one) with ERROR and free the job. */
static void job_fail(struct code_job *j, int code, const char *msg)
{
        if (j->s.conn)
                stream_end_error(&j->s, code, "%s", msg);
        job_free(j);
}

static void job_on_window(struct stream *s);
static void job_on_cancel(struct stream *s, bool detach);

static const struct stream_ops job_ops = {
        .on_window = job_on_window,
        .on_cancel = job_on_cancel,
};

static void enqueue(struct interp *it, struct code_job *j)
{
        j->it = it;
        j->next = NULL;
        if (it->tail)
                it->tail->next = j;
        else
                it->head = j;
        it->tail = j;
        it->queued++;
}

static bool dequeue(struct interp *it, struct code_job *j)
{
        for (struct code_job **p = &it->head; *p; p = &(*p)->next)
                if (*p == j) {
                        *p = j->next;
                        if (it->tail == j) {
                                it->tail = NULL;
                                for (struct code_job *k = it->head; k; k = k->next)
                                        it->tail = k;
                        }
                        it->queued--;
                        return true;
                }
        return false;
}

/* ---- the runner's input (fd 3) ---- */

struct req_write {
        uv_write_t w;
        char data[];
};

static void on_req_written(uv_write_t *w, int status)
{
        (void)status; /* a runner that stopped reading dies and is reported so */
        free(w);
}

/* Send one request line (j consumed). */
static void runner_send(struct interp *it, json_t *j)
{
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        struct req_write *w;
        size_t n;
        uv_buf_t b;

        json_decref(j);
        if (!text || !it->req_open) {
                free(text);
                if (!it->dead)
                        interp_die(it, "cannot send a request to the interpreter");
                return;
        }
        n = strlen(text);
        w = malloc(sizeof(*w) + n + 1);
        if (!w) {
                free(text);
                interp_die(it, "out of memory");
                return;
        }
        memcpy(w->data, text, n);
        w->data[n] = '\n';
        free(text);
        b = uv_buf_init(w->data, (unsigned)(n + 1));
        if (uv_write(&w->w, (uv_stream_t *)&it->req, &b, 1, on_req_written) < 0) {
                free(w);
                interp_die(it, "the interpreter stopped reading requests");
        }
}

/* ---- output to the stream ---- */

static json_t *context_json(const struct interp *it)
{
        const char *status = it->dead                              ? "dead"
                             : it->active && !it->active->is_setup ? "busy"
                             : it->set_up                          ? "ready"
                                                                   : "starting";

        return json_pack("{s:s, s:s, s:s, s:s}", "id", it->id, "language", code_lang_name(it->lang),
                         "cwd", it->cwd ? it->cwd : "/workspace", "status", status);
}

/* The active job is over: next one. */
static void job_complete(struct interp *it)
{
        struct code_job *j = it->active;

        it->active = NULL;
        it->interrupting = false;
        uv_timer_stop(&it->timer);
        uv_timer_stop(&it->grace);
        if (j)
                job_free(j);
        interp_next(it);
        interp_update_reading(it);
}

/* Send what credit allows; end the run once done came and nothing is held. */
static void job_flush(struct code_job *j)
{
        static const uint8_t types[3] = {FRAME_STDOUT, FRAME_STDERR, FRAME_DATA};
        struct interp *it = j->it;

        if (!j->s.conn) {
                for (int i = 0; i < 3; i++)
                        buf_free(&j->pend[i]);
        }
        while (j->s.conn && j->s.send_credit > 0 && !stream_congested(&j->s)) {
                int i = j->pend[0].len ? 0 : j->pend[1].len ? 1 : j->pend[2].len ? 2 : -1;
                size_t n;

                if (i < 0)
                        break;
                n = MIN(j->pend[i].len, (size_t)CELLA_FRAME_DATA_CHUNK);
                n = MIN(n, (size_t)j->s.send_credit);
                if (stream_send(&j->s, types[i], j->pend[i].data, n) < 0)
                        break;
                j->s.send_credit -= n;
                buf_consume(&j->pend[i], n);
        }
        if (j->done_seen && it->active == j && !j->pend[0].len && !j->pend[1].len &&
            !j->pend[2].len) {
                if (j->s.conn)
                        stream_end_json(&j->s, FRAME_RESULT,
                                        json_pack("{s:I, s:b}", "executionCount",
                                                  (json_int_t)j->execution_count, "timedOut",
                                                  j->timed_out));
                job_complete(it);
                return;
        }
        interp_update_reading(it);
}

static void job_on_window(struct stream *s)
{
        struct code_job *j = (struct code_job *)s;

        if (j->it->active == j)
                job_flush(j);
}

static void interp_interrupt(struct interp *it);

static void job_on_cancel(struct stream *s, bool detach)
{
        struct code_job *j = (struct code_job *)s;
        struct interp *it = j->it;

        if (!detach)
                stream_end_error(s, CELLA_E_BAD_REQUEST, "cancelled");
        /* s->conn is NULL now: nothing more is sent for this job */
        if (it->active != j) {
                /* a setup still has to happen (the context exists); a run is dropped */
                if (!j->is_setup && dequeue(it, j))
                        job_free(j);
                return;
        }
        for (int i = 0; i < 3; i++)
                buf_free(&j->pend[i]);
        if (!j->is_setup)
                interp_interrupt(it);
        interp_update_reading(it);
}

/* Append an event line for the active run. */
static void job_event(struct code_job *j, json_t *ev)
{
        char *text = ev ? json_dumps(ev, JSON_COMPACT) : NULL;

        json_decref(ev);
        if (text && j->s.conn) {
                buf_append(&j->pend[2], text, strlen(text));
                buf_append(&j->pend[2], "\n", 1);
        }
        free(text);
        job_flush(j);
}

/* ---- reading the runner ---- */

static bool discarding(const struct interp *it)
{
        return !it->active || !it->active->s.conn || it->active->is_setup;
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        (void)h;
        (void)suggested;
        *ret = uv_buf_init(readbuf, sizeof(readbuf));
}

static void on_out(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct interp *it = st->data;
        int i = st == (uv_stream_t *)&it->out[0] ? 0 : 1;

        if (n < 0) {
                it->out_open[i] = false;
                it->out_reading[i] = false;
                uv_read_stop(st);
                return;
        }
        if (n == 0 || discarding(it))
                return;
        /* an interrupted run's output beyond what waits already is dropped, so that a
         * runner blocked writing to a slow client can still reach done */
        if (it->interrupting && it->active->pend[i].len >= CELLA_CODE_OUT_PENDING)
                return;
        buf_append(&it->active->pend[i], b->base, (size_t)n);
        job_flush(it->active);
}

/* What the runner left in its stdout/stderr pipes before writing done. */
static void drain_output(struct interp *it, struct code_job *j)
{
        for (int i = 0; i < 2; i++) {
                uv_os_fd_t fd;
                ssize_t n;

                if (!it->out_open[i] || uv_fileno((uv_handle_t *)&it->out[i], &fd) < 0)
                        continue;
                while ((n = read(fd, readbuf, sizeof(readbuf))) > 0)
                        if (j->s.conn)
                                buf_append(&j->pend[i], readbuf, (size_t)n);
        }
}

static void handle_event(struct interp *it, const char *line, size_t len)
{
        struct cella_error err = {0};
        struct code_event ev;
        struct code_job *j = it->active;
        bool for_run;

        if (code_event_decode(line, len, &ev, &err) < 0) {
                log_debug("context %s: bad event from the runner: %s", it->id, err.msg);
                code_event_done(&ev);
                return;
        }
        for_run = j && !j->is_setup && ev.id == j->run_id;
        switch (ev.type) {
        case CODE_EV_READY:
                if (!it->ready) {
                        it->ready = true;
                        uv_timer_stop(&it->timer);
                        interp_next(it);
                }
                break;
        case CODE_EV_SETUP_OK:
                if (j && j->is_setup) {
                        it->set_up = true;
                        if (j->s.conn)
                                stream_end_json(&j->s, FRAME_RESULT, context_json(it));
                        job_complete(it);
                        spare_refill(it->t, it->kind);
                }
                break;
        case CODE_EV_SETUP_ERROR:
                if (j && j->is_setup) {
                        it->active = NULL;
                        job_fail(j, CELLA_E_VALIDATION_FAILED, ev.message);
                        interp_die(it, "set up: %s", ev.message);
                }
                break;
        case CODE_EV_RESULT:
                if (for_run && !j->done_seen) {
                        json_object_set_new(ev.result, "type", json_string("result"));
                        job_event(j, TAKE_PTR(ev.result));
                }
                break;
        case CODE_EV_ERROR:
                if (for_run && !j->done_seen && !j->error_seen) {
                        j->error_seen = true;
                        job_event(j, json_pack("{s:s, s:s, s:s, s:O}", "type", "error", "name",
                                               ev.name, "message", ev.message, "traceback",
                                               ev.traceback));
                }
                break;
        case CODE_EV_DONE:
                if (for_run && !j->done_seen) {
                        j->done_seen = true;
                        j->execution_count = ev.execution_count;
                        drain_output(it, j);
                        job_flush(j);
                }
                break;
        default:
                break;
        }
        code_event_done(&ev);
}

static void on_eof_grace(uv_timer_t *t)
{
        interp_die(t->data, "the interpreter closed its event pipe");
}

static void on_ev(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct interp *it = st->data;
        size_t off = 0;

        if (n < 0) {
                it->ev_open = false;
                it->ev_reading = false;
                uv_read_stop(st);
                /* the exit status (reaped soon) says more than the EOF */
                if (!it->dead)
                        uv_timer_start(&it->grace, on_eof_grace, 500, 0);
                return;
        }
        if (buf_append(&it->line, b->base, (size_t)n) < 0) {
                interp_die(it, "out of memory");
                return;
        }
        while (!it->dead) {
                char *nl = memchr(it->line.data + off, '\n', it->line.len - off);

                if (!nl)
                        break;
                handle_event(it, it->line.data + off, (size_t)(nl - (it->line.data + off)));
                off = (size_t)(nl - it->line.data) + 1;
        }
        if (it->dead)
                return;
        buf_consume(&it->line, off);
        if (it->line.len == 0 && it->line.cap > 4 * CELLA_FRAME_DATA_CHUNK)
                buf_free(&it->line); /* a large event's buffer is not kept */
        if (it->line.len > CELLA_CODE_MAX_LINE) {
                interp_die(it, "the interpreter wrote an event line over %d bytes",
                           CELLA_CODE_MAX_LINE);
                return;
        }
        interp_update_reading(it);
}

/* Read a pipe only while what was read can go somewhere. */
static void interp_update_reading(struct interp *it)
{
        struct code_job *j = it->active;

        if (it->dead)
                return;
        for (int i = 0; i < 2; i++) {
                bool want = it->out_open[i] && (discarding(it) || it->interrupting ||
                                                j->pend[i].len < CELLA_CODE_OUT_PENDING);

                if (want && !it->out_reading[i])
                        it->out_reading[i] =
                                uv_read_start((uv_stream_t *)&it->out[i], on_alloc, on_out) == 0;
                else if (!want && it->out_reading[i]) {
                        uv_read_stop((uv_stream_t *)&it->out[i]);
                        it->out_reading[i] = false;
                }
        }
        {
                bool want = it->ev_open && (discarding(it) || !j->pend[2].len);

                if (want && !it->ev_reading)
                        it->ev_reading =
                                uv_read_start((uv_stream_t *)&it->ev, on_alloc, on_ev) == 0;
                else if (!want && it->ev_reading) {
                        uv_read_stop((uv_stream_t *)&it->ev);
                        it->ev_reading = false;
                }
        }
}

/* ---- running jobs ---- */

/* SIGINT is repeated every CELLA_CODE_INTERRUPT_REPEAT_MS until done: an interpreter can
 * swallow one that lands at an unlucky instant (node while it finishes a run's synchronous
 * part); the runners ignore extra ones between runs. */
static void on_grace(uv_timer_t *t)
{
        struct interp *it = t->data;

        if (!it->interrupting || it->dead)
                return;
        if (uv_now(t->loop) - it->interrupt_at >= CELLA_CODE_INTERRUPT_GRACE_MS) {
                interp_die(it, "the interpreter did not stop within %d ms of an interrupt; killed",
                           CELLA_CODE_INTERRUPT_GRACE_MS);
                return;
        }
        kill(it->pid, SIGINT);
}

static void interp_interrupt(struct interp *it)
{
        if (it->interrupting || it->dead || it->pid <= 0)
                return;
        it->interrupting = true;
        it->interrupt_at = uv_now(it->grace.loop);
        kill(it->pid, SIGINT);
        uv_timer_start(&it->grace, on_grace, CELLA_CODE_INTERRUPT_REPEAT_MS,
                       CELLA_CODE_INTERRUPT_REPEAT_MS);
        interp_update_reading(it);
}

static void on_run_timeout(uv_timer_t *t)
{
        struct interp *it = t->data;

        if (!it->ready) {
                interp_die(it, "the interpreter did not start within %d ms",
                           CELLA_CODE_READY_TIMEOUT_MS);
                return;
        }
        if (it->active && !it->active->is_setup) {
                log_info("context %s: run timed out; interrupting", it->id);
                it->active->timed_out = true;
                interp_interrupt(it);
        }
}

static void interp_next(struct interp *it)
{
        struct code_job *j;

        if (it->dead || !it->ready || it->active || !it->head)
                return;
        j = it->head;
        it->head = j->next;
        if (!it->head)
                it->tail = NULL;
        it->queued--;
        j->next = NULL;
        it->active = j;
        if (j->is_setup) {
                json_t *env = json_object();

                for (size_t i = 0; env && i < j->n_env; i++) {
                        const char *eq = strchr(j->env[i], '=');
                        char key[256];

                        snprintf(key, sizeof(key), "%.*s", (int)(eq - j->env[i]), j->env[i]);
                        json_object_set_new(env, key, json_string(eq + 1));
                }
                runner_send(it, json_pack("{s:s, s:s, s:s, s:o}", "type", "setup", "language",
                                          code_lang_name(it->lang), "cwd",
                                          it->cwd ? it->cwd : "/workspace", "env",
                                          env ? env : json_object()));
                return;
        }
        j->run_id = ++it->run_seq;
        runner_send(it, json_pack("{s:s, s:I, s:s}", "type", "run", "id", (json_int_t)j->run_id,
                                  "code", j->code));
        if (j->timeout_ms > 0)
                uv_timer_start(&it->timer, on_run_timeout, (uint64_t)j->timeout_ms, 0);
        interp_update_reading(it);
}

/* ---- lifetime ---- */

static void on_handle_closed(uv_handle_t *h)
{
        struct interp *it = h->data;

        it->handles--;
        interp_maybe_free(it);
}

static void interp_maybe_free(struct interp *it)
{
        struct code_table *t = it->t;

        if (it->in_table || !it->reaped || it->handles > 0)
                return;
        if (it->cgroup && !t->shutdown)
                agent_cgroup_remove(t->a, it->cgroup);
        free(it->cgroup);
        buf_free(&it->line);
        free(it->cwd);
        free(it);
        if (--t->objects == 0 && t->shutdown) {
                agent_env_free(t->base_env, t->n_base_env);
                free(t);
        }
}

static void kill_runner(struct interp *it)
{
        bool alive = it->pid > 0 && !it->reaped;
        struct kill_target t = {
                .cgroup = it->cgroup,
                .pgid = alive ? it->pid : 0,
                .root = alive && !it->cgroup ? it->pid : 0,
        };

        agent_kill_tree(&t);
        if (alive)
                kill(it->pid, SIGKILL);
}

static void close_handles(struct interp *it)
{
        uv_handle_t *hs[] = {(uv_handle_t *)&it->out[0], (uv_handle_t *)&it->out[1],
                             (uv_handle_t *)&it->ev,     (uv_handle_t *)&it->req,
                             (uv_handle_t *)&it->timer,  (uv_handle_t *)&it->grace};

        for (size_t i = 0; i < ARRAY_SIZE(hs); i++)
                if (hs[i]->loop && !uv_is_closing(hs[i]))
                        uv_close(hs[i], on_handle_closed);
        it->out_open[0] = it->out_open[1] = it->ev_open = it->req_open = false;
}

static void interp_die(struct interp *it, const char *fmt, ...)
{
        struct code_job *j;
        char msg[300];
        va_list ap;

        if (it->dead)
                return;
        it->dead = true;
        va_start(ap, fmt);
        vsnprintf(it->reason, sizeof(it->reason), fmt, ap);
        va_end(ap);
        log_info("context %s (%s): dead: %s", it->id[0] ? it->id : "(spare)",
                 code_lang_name(it->lang), it->reason);
        kill_runner(it);
        close_handles(it);
        snprintf(msg, sizeof(msg), "the %s interpreter of context '%s' is gone: %s",
                 code_lang_name(it->lang), it->id, it->reason);
        if ((j = TAKE_PTR(it->active)))
                job_fail(j, CELLA_E_CONTEXT_DEAD, msg);
        while ((j = it->head)) {
                it->head = j->next;
                job_fail(j, CELLA_E_CONTEXT_DEAD, msg);
        }
        it->tail = NULL;
        it->queued = 0;
        for (int k = 0; k < _RUNNER_MAX; k++)
                if (it->t->spare[k] == it) {
                        it->t->spare[k] = NULL;
                        it->in_table = false;
                }
        /* a context that never got set up (its create failed) is not kept */
        if (!it->set_up && !it->is_default)
                table_unlink(it);
        interp_maybe_free(it);
}

static void on_child(void *ud, pid_t pid, int status)
{
        struct interp *it = ud;

        (void)pid;
        it->reaped = true;
        if (it->dead)
                interp_maybe_free(it);
        else if (WIFSIGNALED(status))
                interp_die(it, "the interpreter was killed by signal %d", WTERMSIG(status));
        else
                interp_die(it, "the interpreter exited with code %d", WEXITSTATUS(status));
}

static void table_unlink(struct interp *it)
{
        struct code_table *t = it->t;

        if (!it->in_table || !it->id[0])
                return;
        if (it->prev)
                it->prev->next = it->next;
        else
                t->contexts = it->next;
        if (it->next)
                it->next->prev = it->prev;
        it->prev = it->next = NULL;
        t->n_contexts--;
        it->in_table = false;
}

/* Remove a context: its runner is killed, its jobs end with CONTEXT_DEAD. */
static void context_remove(struct interp *it)
{
        table_unlink(it);
        if (!it->dead)
                interp_die(it, "context deleted");
        else
                interp_maybe_free(it);
}

/* ---- starting runners ---- */

/* The interpreter binary in PATH (of env, else the default): a new string, or NULL. */
static char *find_in_path(const char *name, char *const *env, size_t n_env)
{
        const char *path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

        for (size_t i = 0; i < n_env; i++)
                if (strncmp(env[i], "PATH=", 5) == 0)
                        path = env[i] + 5;
        while (*path) {
                const char *end = strchrnul(path, ':');
                char buf[CELLA_PATH_MAX];
                struct stat st;

                if (end > path && *path == '/' &&
                    snprintf(buf, sizeof(buf), "%.*s/%s", (int)(end - path), path, name) <
                            (int)sizeof(buf) &&
                    stat(buf, &st) == 0 && S_ISREG(st.st_mode) && access(buf, X_OK) == 0)
                        return strdup(buf);
                path = *end ? end + 1 : end;
        }
        return NULL;
}

static void open_pipe(struct interp *it, uv_pipe_t *p, int fd, bool *open)
{
        uv_pipe_init(it->t->a->loop, p, 0);
        p->data = it;
        it->handles++;
        *open = uv_pipe_open(p, fd) == 0;
        if (!*open)
                close(fd);
}

/* Start a runner of kind: a new interp (not yet in the table), or NULL with err set. */
static struct interp *interp_start(struct code_table *t, enum runner_kind kind,
                                   struct cella_error *err)
{
        static const char *const bins[] = {"python3", "node"};
        const char *src = kind == RUNNER_PYTHON ? cella_runner_python : cella_runner_node;
        _cleanup_free_ char *exe = NULL;
        char *argv[6];
        struct spawn_request sr = {0};
        struct spawn_result res;
        struct interp *it;
        char name[48];
        struct stat st;
        int n = 0;

        if (!src[0]) {
                cella_error_set(err, CELLA_E_INTERPRETER_NOT_FOUND,
                                "this build of cella-init has no %s runner", bins[kind]);
                return NULL;
        }
        exe = find_in_path(bins[kind], t->base_env, t->n_base_env);
        if (!exe) {
                cella_error_set(err, CELLA_E_INTERPRETER_NOT_FOUND,
                                "%s is not installed in the sandbox (no %s in PATH)",
                                kind == RUNNER_PYTHON ? "Python" : "Node.js", bins[kind]);
                return NULL;
        }
        /* The source arrives on stdin, which the interpreter reads to its end before it
         * runs it: no argv carries it, so `ps` shows `python3 -u -I -` and `node -`. */
        argv[n++] = (char *)bins[kind];
        if (kind == RUNNER_PYTHON) {
                argv[n++] = (char *)"-u";
                argv[n++] = (char *)"-I";
        }
        argv[n++] = (char *)"-";
        argv[n] = NULL;
        it = calloc(1, sizeof(*it));
        if (!it) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        it->t = t;
        t->objects++;
        it->kind = kind;
        it->lang = kind == RUNNER_PYTHON ? CODE_PYTHON : CODE_JAVASCRIPT;
        it->pid = -1;
        t->seq++;
        if (t->a->use_cgroup) {
                snprintf(name, sizeof(name), "code-%llu", (unsigned long long)t->seq);
                it->cgroup = agent_cgroup_make(t->a, name);
        }
        sr.command = "";
        sr.cwd = stat("/workspace", &st) == 0 && S_ISDIR(st.st_mode) ? "/workspace" : "/";
        sr.base_env = t->base_env;
        sr.n_base_env = t->n_base_env;
        sr.cgroup = it->cgroup;
        sr.exe = exe;
        sr.argv = argv;
        sr.stdin_text = src;
        if (agent_spawn(&sr, &res, err) < 0) {
                if (it->cgroup) {
                        agent_cgroup_remove(t->a, it->cgroup);
                        free(it->cgroup);
                }
                free(it);
                t->objects--;
                return NULL;
        }
        it->pid = res.pid;
        if (agent_watch_child(t->a, it->pid, on_child, it) < 0) {
                close(res.out);
                close(res.err);
                close(res.in);
                close(res.ev);
                kill_runner(it);
                it->reaped = true; /* reaped as an orphan */
                interp_maybe_free(it);
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        open_pipe(it, &it->out[0], res.out, &it->out_open[0]);
        open_pipe(it, &it->out[1], res.err, &it->out_open[1]);
        open_pipe(it, &it->ev, res.ev, &it->ev_open);
        open_pipe(it, &it->req, res.in, &it->req_open);
        uv_timer_init(t->a->loop, &it->timer);
        uv_timer_init(t->a->loop, &it->grace);
        it->timer.data = it->grace.data = it;
        it->handles += 2;
        uv_timer_start(&it->timer, on_run_timeout, CELLA_CODE_READY_TIMEOUT_MS, 0);
        interp_update_reading(it);
        log_debug("started a %s runner, pid %d", bins[kind], (int)it->pid);
        return it;
}

static void spare_refill(struct code_table *t, enum runner_kind kind)
{
        struct cella_error err = {0};

        if (t->spare[kind] || !t->used[kind])
                return;
        t->spare[kind] = interp_start(t, kind, &err);
        if (t->spare[kind])
                t->spare[kind]->in_table = true;
        else
                log_info("no spare interpreter: %s", err.msg);
}

/* ---- the table and the operations ---- */

static struct code_table *table_get(struct agent *a)
{
        if (!a->code) {
                a->code = calloc(1, sizeof(*a->code));
                if (a->code)
                        a->code->a = a;
        }
        return a->code;
}

static struct interp *context_find(struct code_table *t, const char *id)
{
        for (struct interp *it = t->contexts; it; it = it->next)
                if (strcmp(it->id, id) == 0)
                        return it;
        return NULL;
}

static void set_base_env(struct code_table *t, struct code_request *r)
{
        if (!r->base_env)
                return;
        agent_env_free(t->base_env, t->n_base_env);
        t->base_env = TAKE_PTR(r->base_env);
        t->n_base_env = r->n_base_env;
        r->n_base_env = 0;
}

static void random_id(char *out, size_t size)
{
        static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        uint8_t rnd[16];

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                for (size_t i = 0; i < sizeof(rnd); i++)
                        rnd[i] = (uint8_t)(rand() ^ (int)i);
        snprintf(out, size, "ctx-");
        for (size_t i = 0; i < sizeof(rnd) && 4 + i + 1 < size; i++) {
                out[4 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
                out[5 + i] = '\0';
        }
}

/* A new context of lang with the setup job (setup, with its stream or not) queued first;
 * NULL with err set. */
static struct interp *context_new(struct code_table *t, enum code_lang lang, const char *id,
                                  char **cwd_take, struct code_job *setup, struct cella_error *err)
{
        enum runner_kind kind = lang_kind(lang);
        struct interp *it;

        if (t->n_contexts >= CELLA_CODE_MAX_CONTEXTS) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "a sandbox has at most %d code contexts; delete some first",
                                CELLA_CODE_MAX_CONTEXTS);
                return NULL;
        }
        it = t->spare[kind];
        if (it) {
                t->spare[kind] = NULL;
        } else {
                it = interp_start(t, kind, err);
                if (!it)
                        return NULL;
        }
        t->used[kind] = true;
        it->lang = lang;
        it->is_default = id != NULL;
        if (cwd_take)
                it->cwd = TAKE_PTR(*cwd_take);
        if (id)
                snprintf(it->id, sizeof(it->id), "%s", id);
        else
                do
                        random_id(it->id, sizeof(it->id));
                while (context_find(t, it->id));
        it->in_table = true;
        it->next = t->contexts;
        if (t->contexts)
                t->contexts->prev = it;
        t->contexts = it;
        t->n_contexts++;
        setup->is_setup = true;
        enqueue(it, setup);
        interp_next(it);
        /* The next spare starts once this context's setup is done (CODE_EV_SETUP_OK), so that
         * its start (a fork and a second of CPU for the preloads) never delays the answer. */
        return it;
}

static struct code_job *job_new(struct conn *c, uint32_t sid, struct cella_error *err)
{
        struct code_job *j = calloc(1, sizeof(*j));

        if (!j) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        if (c && conn_add_stream(c, &j->s, sid, &job_ops) < 0) {
                free(j);
                cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "too many concurrent operations");
                return NULL;
        }
        return j;
}

static void op_create(struct code_table *t, struct conn *c, uint32_t sid, struct code_request *r)
{
        struct cella_error err = {0};
        struct code_job *j = job_new(c, sid, &err);
        struct interp *it;

        if (!j) {
                conn_send_error(c, sid, &err);
                return;
        }
        j->env = TAKE_PTR(r->env);
        j->n_env = r->n_env;
        r->n_env = 0;
        it = context_new(t, r->language, NULL, &r->cwd, j, &err);
        if (!it)
                job_fail(j, err.code, err.msg);
}

static void op_run(struct code_table *t, struct conn *c, uint32_t sid, struct code_request *r)
{
        struct cella_error err = {0};
        struct interp *it;
        struct code_job *j;
        char defid[32];

        if (r->id) {
                it = context_find(t, r->id);
                if (!it) {
                        conn_reply_error(c, sid, CELLA_E_CONTEXT_NOT_FOUND,
                                         "code context '%s' not found", r->id);
                        return;
                }
                if (r->language_given && r->language != it->lang) {
                        conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED,
                                         "context '%s' runs %s, not %s", r->id,
                                         code_lang_name(it->lang), code_lang_name(r->language));
                        return;
                }
        } else {
                snprintf(defid, sizeof(defid), "default-%s", code_lang_name(r->language));
                it = context_find(t, defid);
                if (it && it->dead) {
                        context_remove(it); /* replaced by a fresh one */
                        it = NULL;
                }
                if (!it) {
                        struct code_job *setup = job_new(NULL, 0, &err);

                        if (setup)
                                it = context_new(t, r->language, defid, NULL, setup, &err);
                        if (!it) {
                                if (setup)
                                        job_free(setup);
                                conn_send_error(c, sid, &err);
                                return;
                        }
                }
        }
        if (it->dead) {
                conn_reply_error(c, sid, CELLA_E_CONTEXT_DEAD,
                                 "the %s interpreter of context '%s' is gone (%s); delete the "
                                 "context and create a new one",
                                 code_lang_name(it->lang), it->id, it->reason);
                return;
        }
        if (it->queued >= CELLA_CODE_MAX_QUEUE) {
                conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED,
                                 "context '%s' has %d runs waiting", it->id, CELLA_CODE_MAX_QUEUE);
                return;
        }
        j = job_new(c, sid, &err);
        if (!j) {
                conn_send_error(c, sid, &err);
                return;
        }
        j->code = TAKE_PTR(r->code);
        j->timeout_ms = r->timeout_ms;
        enqueue(it, j);
        interp_next(it);
}

static void op_list(struct code_table *t, struct conn *c, uint32_t sid)
{
        json_t *arr = json_array();

        for (struct interp *it = t->contexts; arr && it; it = it->next)
                json_array_append_new(arr, context_json(it));
        conn_send_json(c, FRAME_RESULT, sid,
                       json_pack("{s:o}", "contexts", arr ? arr : json_array()));
}

void code_request(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct code_request r;
        struct cella_error err = {0};
        struct code_table *t;
        struct interp *it;

        if (code_request_decode(req->body, &r, &err) < 0) {
                conn_send_error(c, req->stream, &err);
                code_request_done(&r);
                return;
        }
        t = table_get(a);
        if (!t) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                code_request_done(&r);
                return;
        }
        set_base_env(t, &r);
        switch (r.op) {
        case CODE_OP_CREATE:
                op_create(t, c, req->stream, &r);
                break;
        case CODE_OP_RUN:
                op_run(t, c, req->stream, &r);
                break;
        case CODE_OP_LIST:
                op_list(t, c, req->stream);
                break;
        case CODE_OP_DELETE:
                it = context_find(t, r.id);
                if (!it) {
                        conn_reply_error(c, req->stream, CELLA_E_CONTEXT_NOT_FOUND,
                                         "code context '%s' not found", r.id);
                        break;
                }
                context_remove(it);
                conn_send_json(c, FRAME_RESULT, req->stream, json_pack("{s:s}", "id", r.id));
                break;
        }
        code_request_done(&r);
}

void code_shutdown(struct agent *a)
{
        struct code_table *t = a->code;

        if (!t)
                return;
        a->code = NULL;
        t->shutdown = true;
        t->objects++; /* held while the interps are let go */
        while (t->contexts) {
                struct interp *it = t->contexts;

                table_unlink(it);
                agent_unwatch_child(a, it->pid);
                it->reaped = true;
                if (!it->dead)
                        interp_die(it, "agent shutting down");
                else
                        interp_maybe_free(it);
        }
        for (int k = 0; k < _RUNNER_MAX; k++)
                if (t->spare[k]) {
                        struct interp *it = t->spare[k];

                        agent_unwatch_child(a, it->pid);
                        it->reaped = true;
                        interp_die(it, "agent shutting down");
                }
        if (--t->objects == 0) {
                agent_env_free(t->base_env, t->n_base_env);
                free(t);
        }
}
