/* The code interpreter's runners and their jobs (see code-interp.h; the model is in
 * code.c's head comment). */
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

#include "agent/code-interp.h"
#include "agent/runners.h"
#include "common/log.h"

static void interp_update_reading(struct interp *it);
static void spare_refill(struct code_table *t, enum runner_kind kind);

enum runner_kind code_runner_kind(enum code_lang l)
{
        return l == CODE_PYTHON ? RUNNER_PYTHON : RUNNER_NODE;
}

/* ---- jobs ---- */

void code_job_free(struct code_job *j)
{
        for (int i = 0; i < 3; i++)
                buf_free(&j->pend[i]);
        free(j->code);
        agent_env_free(j->env, j->n_env);
        free(j);
}

/* End the job's stream (if it still has one) with ERROR and free the job. */
void code_job_fail(struct code_job *j, int code, const char *msg)
{
        if (j->s.conn)
                stream_end_error(&j->s, code, "%s", msg);
        code_job_free(j);
}

static void job_on_window(struct stream *s);
static void job_on_cancel(struct stream *s, bool detach);

const struct stream_ops code_job_ops = {
        .on_window = job_on_window,
        .on_cancel = job_on_cancel,
};

void code_enqueue(struct interp *it, struct code_job *j)
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

json_t *context_json(const struct interp *it)
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
                code_job_free(j);
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
        while (j->s.conn) {
                int i = j->pend[0].len ? 0 : j->pend[1].len ? 1 : j->pend[2].len ? 2 : -1;
                size_t n = pump_credit(&j->s);

                if (i < 0 || n == 0)
                        break;
                n = MIN(j->pend[i].len, n);
                if (pump_emit(&j->s, types[i], j->pend[i].data, n) < 0)
                        break;
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
                        code_job_free(j);
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

/* The output pumps' sink: the active run's held output (what waits for credit), read
 * only while below CELLA_CODE_OUT_PENDING; discarded without a run to go to. */
static size_t out_allowance(struct pump *p)
{
        struct interp *it = p->owner;

        if (it->dead)
                return 0;
        if (discarding(it) || it->interrupting ||
            it->active->pend[p->index].len < CELLA_CODE_OUT_PENDING)
                return CELLA_FRAME_DATA_CHUNK;
        return 0;
}

static void out_data(struct pump *p, const char *data, size_t n)
{
        struct interp *it = p->owner;
        int i = p->index;

        if (discarding(it))
                return;
        if (it->draining) {
                buf_append(&it->active->pend[i], data, n);
                return;
        }
        /* an interrupted run's output beyond what waits already is dropped, so that a
         * runner blocked writing to a slow client can still reach done */
        if (it->interrupting && it->active->pend[i].len >= CELLA_CODE_OUT_PENDING)
                return;
        buf_append(&it->active->pend[i], data, n);
        job_flush(it->active);
}

/* What the runner left in its stdout/stderr pipes before writing done: held for j. */
static void drain_output(struct interp *it)
{
        it->draining = true;
        pump_drain(&it->out[0]);
        pump_drain(&it->out[1]);
        it->draining = false;
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
                        code_job_fail(j, CELLA_E_VALIDATION_FAILED, ev.message);
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
                        drain_output(it);
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

/* The event pump's sink: lines of fd 4, read while no event waits for credit. */
static size_t ev_allowance(struct pump *p)
{
        struct interp *it = p->owner;

        if (it->dead)
                return 0;
        return discarding(it) || !it->active->pend[2].len ? CELLA_FRAME_DATA_CHUNK : 0;
}

static void ev_eof(struct pump *p)
{
        struct interp *it = p->owner;

        /* the exit status (reaped soon) says more than the EOF */
        if (!it->dead)
                uv_timer_start(&it->grace, on_eof_grace, 500, 0);
}

static void ev_data(struct pump *p, const char *data, size_t n)
{
        struct interp *it = p->owner;
        size_t off = 0;

        if (buf_append(&it->line, data, n) < 0) {
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

static void pump_closed(struct pump *p)
{
        struct interp *it = p->owner;

        it->handles--;
        interp_maybe_free(it);
}

static const struct pump_ops out_ops = {
        .allowance = out_allowance,
        .on_data = out_data,
        .on_closed = pump_closed,
};

static const struct pump_ops ev_ops = {
        .allowance = ev_allowance,
        .on_data = ev_data,
        .on_eof = ev_eof,
        .on_closed = pump_closed,
};

/* Read a pipe only while what was read can go somewhere. */
static void interp_update_reading(struct interp *it)
{
        if (it->dead)
                return;
        pump_resume(&it->out[0]);
        pump_resume(&it->out[1]);
        pump_resume(&it->ev);
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

void interp_next(struct interp *it)
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

void interp_maybe_free(struct interp *it)
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
        uv_handle_t *hs[] = {(uv_handle_t *)&it->req, (uv_handle_t *)&it->timer,
                             (uv_handle_t *)&it->grace};

        pump_close(&it->out[0]);
        pump_close(&it->out[1]);
        pump_close(&it->ev);
        for (size_t i = 0; i < ARRAY_SIZE(hs); i++)
                if (hs[i]->loop && !uv_is_closing(hs[i]))
                        uv_close(hs[i], on_handle_closed);
        it->req_open = false;
}

void interp_die(struct interp *it, const char *fmt, ...)
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
                code_job_fail(j, CELLA_E_CONTEXT_DEAD, msg);
        while ((j = it->head)) {
                it->head = j->next;
                code_job_fail(j, CELLA_E_CONTEXT_DEAD, msg);
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
                code_table_unlink(it);
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

void code_table_unlink(struct interp *it)
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
void context_remove(struct interp *it)
{
        code_table_unlink(it);
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
struct interp *interp_start(struct code_table *t, enum runner_kind kind, struct cella_error *err)
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
        it->handles += 3;
        pump_open_pipe(&it->out[0], t->a->loop, res.out, &out_ops, it, 0);
        pump_open_pipe(&it->out[1], t->a->loop, res.err, &out_ops, it, 1);
        pump_open_pipe(&it->ev, t->a->loop, res.ev, &ev_ops, it, 2);
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
