/* Background processes (PROC frames; decision 0012, docs/protocol.md).
 *
 * The agent owns them: status, exit code, output and every wait live here, so a cellad that
 * restarts (or is killed) finds them as they were. Losing the connection drops only the
 * followers and waits that were on it; the processes keep running.
 *
 * A struct proc is one process: `bash -c command` in its own session and, where
 * /sys/fs/cgroup is a writable cgroup2 mount, its own cgroup proc-<n>, so that a kill
 * reaches every descendant, also those that daemonized or lost their parent. Its stdout and
 * stderr are read continuously into its log (never paused for a follower):
 *
 *   <log dir>/<id>.log    records of [u8 stream (1 stdout, 2 stderr)][u32 length BE][bytes]
 *
 * which keeps the interleaving of the two streams. The log stops growing at
 * CELLA_PROC_MAX_LOG (a last stderr record says so and ProcessInfo has logTruncated). When
 * the log cannot be created, the output goes to two in-memory rings instead
 * (CELLA_PROC_RING bytes per stream, the oldest bytes dropped; a finished process keeps
 * CELLA_PROC_RING_TAIL of each).
 *
 * The table keeps at most CELLA_PROC_MAX processes; starting one more forgets the oldest
 * finished one (and removes its log), so memory is flat however many processes run. The
 * pipes and timers of a process (struct proc_io) are freed once it has finished.
 *
 * A struct follower is one stream that reads a process's output or waits for it: logs,
 * stream, waitLog, waitPort, waitExit and kill (which answers once the tree is gone): they
 * live in proc-follow.c, with the structures this file shares with it. It reads the log
 * with its own descriptor from its own offset, so a slow client slows only its own
 * follower. A follower is freed when its stream has ended (or its connection is
 * gone) and its handles are closed; a process is freed when it was forgotten (or the agent
 * shuts down), has no follower left and its io is gone. */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/proc-follow.h"
#include "agent/proc-request.h"
#include "agent/proc.h"
#include "agent/pump.h"
#include "agent/service.h"
#include "agent/session.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeutil.h"

#define DEFAULT_LOG_DIR "/var/log/cella/processes"
#define SETTLE_MS 100 /* after the shell exits, output still held open ends followers then */
#define TRUNCATED_NOTE "\n[cella: output beyond the log limit was not kept]\n"

static void proc_maybe_free(struct proc *p);

/* ---- table ---- */

static struct proc_table *table_get(struct agent *a)
{
        if (!a->procs) {
                struct proc_table *t = calloc(1, sizeof(*t));
                struct rlimit rl;

                if (!t)
                        return NULL;
                t->a = a;
                t->release = proc_maybe_free;
                t->log_dir = strdup(a->proc_log_dir ? a->proc_log_dir : DEFAULT_LOG_DIR);
                if (!t->log_dir) {
                        free(t);
                        return NULL;
                }
                /* Three descriptors per running process: use what the hard limit allows. */
                if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                        rl.rlim_cur = rl.rlim_max;
                        setrlimit(RLIMIT_NOFILE, &rl);
                }
                a->procs = t;
        }
        return a->procs;
}

static bool is_digits(const char *s)
{
        return *s && strspn(s, "0123456789") == strlen(s);
}

/* By id, or by pid (newest first) when id is a number. */
static struct proc *proc_find(struct proc_table *t, const char *id)
{
        for (struct proc *p = t->head; p; p = p->next)
                if (strcmp(p->id, id) == 0)
                        return p;
        if (is_digits(id)) {
                long pid = strtol(id, NULL, 10);

                for (struct proc *p = t->tail; p; p = p->prev)
                        if (p->pid == pid)
                                return p;
        }
        return NULL;
}

static void table_unlink(struct proc *p)
{
        struct proc_table *t = p->t;

        if (p->prev)
                p->prev->next = p->next;
        else
                t->head = p->next;
        if (p->next)
                p->next->prev = p->prev;
        else
                t->tail = p->prev;
        p->prev = p->next = NULL;
        t->count--;
}

/* Prepare the log directory once per agent: created 0700, logs of an earlier agent (a
 * sandbox that slept) removed. */
static bool log_dir_ready(struct proc_table *t)
{
        char path[CELLA_PATH_MAX];

        if (t->log_dir_ready)
                return true;
        snprintf(path, sizeof(path), "%s", t->log_dir);
        for (char *s = path + 1; *s; s++)
                if (*s == '/') {
                        *s = '\0';
                        mkdir(path, 0755);
                        *s = '/';
                }
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                log_warn("mkdir %s: %s; process output is kept in memory", path, strerror(errno));
                return false;
        }
        {
                _cleanup_closedir_ DIR *d = opendir(path);
                struct dirent *de;

                while (d && (de = readdir(d)))
                        if (de->d_name[0] != '.' && strstr(de->d_name, ".log"))
                                unlinkat(dirfd(d), de->d_name, 0);
        }
        t->log_dir_ready = true;
        return true;
}

/* ---- the process's output ---- */

static void log_write(struct proc *p, int which, const void *data, size_t n)
{
        uint8_t h[REC_HEADER] = {(uint8_t)(which + 1), (uint8_t)(n >> 24), (uint8_t)(n >> 16),
                                 (uint8_t)(n >> 8), (uint8_t)n};
        struct iovec iov[2] = {{h, sizeof(h)}, {(void *)data, n}};
        size_t want = sizeof(h) + n, done = 0;

        while (done < want) {
                ssize_t r = writev(p->log_fd, iov, 2);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        /* A short log is still a valid prefix only up to the last record. */
                        log_warn("process %s: writing its log: %s", p->id, strerror(errno));
                        if (ftruncate(p->log_fd, (off_t)p->log_size) < 0) {
                                /* the followers stop at log_size anyway */
                        }
                        p->log_truncated = true;
                        return;
                }
                done += (size_t)r;
                for (int i = 0; i < 2 && r > 0; i++) {
                        size_t k = MIN((size_t)r, iov[i].iov_len);

                        iov[i].iov_base = (char *)iov[i].iov_base + k;
                        iov[i].iov_len -= k;
                        r -= (ssize_t)k;
                }
        }
        p->log_size += want;
}

static void ring_append(struct buf *r, const char *data, size_t n)
{
        if (n >= CELLA_PROC_RING) {
                data += n - CELLA_PROC_RING;
                n = CELLA_PROC_RING;
        }
        if (r->len + n > CELLA_PROC_RING)
                buf_consume(r, r->len + n - CELLA_PROC_RING);
        buf_append(r, data, n);
}

static void proc_output(struct proc *p, int which, const char *data, size_t n)
{
        p->total[which] += n;
        if (p->log_path) {
                if (p->log_truncated)
                        return;
                if (p->log_size + 2 * REC_HEADER + n + sizeof(TRUNCATED_NOTE) >
                    CELLA_PROC_MAX_LOG) {
                        log_write(p, 1, TRUNCATED_NOTE, sizeof(TRUNCATED_NOTE) - 1);
                        p->log_truncated = true;
                } else {
                        log_write(p, which, data, n);
                }
        } else {
                ring_append(&p->ring[which], data, n);
        }
        proc_notify(p);
}

static void ring_shrink(struct buf *r)
{
        struct buf tail = BUF_INIT;

        if (r->len <= CELLA_PROC_RING_TAIL && r->cap <= CELLA_PROC_RING_TAIL * 2)
                return;
        if (buf_append(&tail, r->data + (r->len - MIN(r->len, CELLA_PROC_RING_TAIL)),
                       MIN(r->len, CELLA_PROC_RING_TAIL)) < 0)
                return;
        buf_free(r);
        *r = tail;
}

static void io_gone(struct proc *p)
{
        if (--p->io->handles == 0) {
                free(p->io);
                p->io = NULL;
                proc_maybe_free(p);
        }
}

static void io_handle_closed(uv_handle_t *h)
{
        io_gone(h->data);
}

/* stdout or stderr still to be read to its EOF */
static bool io_reading(const struct proc_io *io)
{
        return !pump_all_done(io->out, 2);
}

static void io_close(struct proc *p)
{
        struct proc_io *io = p->io;

        if (!io || io->closing)
                return;
        io->closing = true;
        pump_close_all(io->out, 2);
        uv_close((uv_handle_t *)&io->settle, io_handle_closed);
        uv_close((uv_handle_t *)&io->kill, io_handle_closed);
}

/* Output is complete: close the log for writing, keep only a tail of the rings. */
static void proc_output_done(struct proc *p)
{
        if (p->log_fd >= 0) {
                close(p->log_fd);
                p->log_fd = -EBADF;
        }
        for (int i = 0; i < 2; i++)
                ring_shrink(&p->ring[i]);
}

/* The io is not needed any more once the process was reaped, its output is complete and
 * no kill is waiting to escalate. */
static void io_maybe_close(struct proc *p)
{
        struct proc_io *io = p->io;

        if (io && p->settled && !io_reading(io) && !uv_is_active((uv_handle_t *)&io->kill))
                io_close(p);
}

/* The process has ended: its cgroup goes now, or once the last process in it died. */
static void cgroup_release(struct proc *p)
{
        if (p->cgroup && !p->cgroup_released && !p->t->shutdown) {
                p->cgroup_released = true;
                agent_cgroup_remove(p->t->a, p->cgroup);
        }
}

static void proc_settle(struct proc *p)
{
        if (p->settled)
                return;
        p->settled = true;
        cgroup_release(p);
        io_maybe_close(p);
        proc_notify(p);
}

static void on_settle(uv_timer_t *t)
{
        proc_settle(t->data);
}

/* The pumps' sink: the log or the rings, never paused. */
static void out_data(struct pump *pu, const char *data, size_t n)
{
        proc_output(pu->owner, pu->index, data, n);
}

static void out_eof(struct pump *pu)
{
        struct proc *p = pu->owner;

        if (io_reading(p->io))
                return;
        proc_output_done(p);
        if (p->reaped && !p->settled)
                proc_settle(p);
        else
                io_maybe_close(p);
}

static void out_closed(struct pump *pu)
{
        io_gone(pu->owner);
}

static const struct pump_ops out_ops = {
        .on_data = out_data,
        .on_eof = out_eof,
        .on_closed = out_closed,
};

/* ---- exit and kill ---- */

static void proc_end(struct proc *p, int status)
{
        p->reaped = true;
        p->end_ms = time_now_ms();
        if (WIFEXITED(status)) {
                p->exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
                p->term_signal = WTERMSIG(status);
                p->exit_code = 128 + p->term_signal;
        }
        if (p->kill_requested)
                p->status = P_KILLED;
        else
                p->status = p->exit_code == 0 ? P_COMPLETED : P_FAILED;
}

static void on_child(void *ud, pid_t pid, int status)
{
        struct proc *p = ud;

        (void)pid;
        proc_end(p, status);
        log_debug("process %s (pid %d): %s, exit code %d", p->id, (int)p->pid,
                  proc_status_name(p->status), p->exit_code);
        if (p->io && io_reading(p->io))
                uv_timer_start(&p->io->settle, on_settle, SETTLE_MS, 0);
        else
                proc_settle(p);
        proc_notify(p);
}

static void signal_tree(struct proc *p, int sig)
{
        if (sig == SIGKILL) {
                /* After the reap the pid may be reused: only the cgroup is safe then, or the
                 * process group (a pid is not handed out while a group of that id lives). */
                struct kill_target t = {
                        .cgroup = p->cgroup,
                        .pgid = p->pid > 0 && (!p->reaped || !p->cgroup) ? p->pid : 0,
                        .root = p->pid > 0 && !p->reaped && !p->cgroup ? p->pid : 0,
                };

                agent_kill_tree(&t);
                if (p->pid > 0 && !p->reaped)
                        kill(p->pid, SIGKILL);
                return;
        }
        if (p->cgroup)
                agent_cgroup_signal(p->cgroup, sig);
        /* After the reap the pid may be reused: only the cgroup is safe then, or the
         * process group (a pid is not handed out while a group of that id lives). */
        if (p->pid > 0 && (!p->reaped || !p->cgroup))
                kill(-p->pid, sig);
        if (p->pid > 0 && !p->reaped)
                kill(p->pid, sig);
}

static void on_kill_grace(uv_timer_t *t)
{
        struct proc *p = t->data;

        if (!p->reaped || (p->cgroup && !agent_cgroup_is_empty(p->cgroup))) {
                log_info("process %s: still running %d ms after SIGTERM; SIGKILL", p->id,
                         CELLA_PROC_KILL_GRACE_MS);
                signal_tree(p, SIGKILL);
        }
        io_maybe_close(p);
}

/* Signal p's whole tree; sig 0 is SIGTERM with SIGKILL after the grace period (at once
 * for what is left of a process that has finished and whose io is gone). */
static void proc_kill(struct proc *p, int sig)
{
        if (p->status == P_ERROR)
                return;
        if (!p->reaped)
                p->kill_requested = true;
        if (!sig && (!p->io || p->io->closing)) {
                signal_tree(p, SIGKILL);
                return;
        }
        signal_tree(p, sig ? sig : SIGTERM);
        if (!sig)
                uv_timer_start(&p->io->kill, on_kill_grace, CELLA_PROC_KILL_GRACE_MS, 0);
}

void proc_kill_session(struct agent *a, const char *sid)
{
        if (!a->procs)
                return;
        for (struct proc *p = a->procs->head; p; p = p->next)
                if (p->session && strcmp(p->session, sid) == 0 && !p->reaped)
                        proc_kill(p, SIGKILL);
}

/* ---- process lifetime ---- */

static void proc_maybe_free(struct proc *p)
{
        struct proc_table *t = p->t;

        if (!(p->forgotten || t->shutdown) || p->followers || p->io)
                return;
        if (!p->forgotten)
                table_unlink(p);
        if (!p->reaped && !t->shutdown)
                agent_unwatch_child(t->a, p->pid);
        if (p->log_fd >= 0)
                close(p->log_fd);
        cgroup_release(p);
        free(p->cgroup);
        for (int i = 0; i < 2; i++)
                buf_free(&p->ring[i]);
        free(p->log_path);
        free(p->command);
        free(p->session);
        free(p->error);
        free(p);
        if (--t->objects == 0 && t->shutdown) {
                free(t->log_dir);
                free(t);
        }
}

/* Forget p: out of the table, its log removed; freed once nothing uses it. */
static void proc_forget(struct proc *p)
{
        p->forgotten = true;
        table_unlink(p);
        if (p->log_path)
                unlink(p->log_path);
        io_close(p);
        proc_maybe_free(p);
}

/* Room for one more: forget the oldest finished process if the table is full. */
static bool make_room(struct proc_table *t)
{
        if (t->count < CELLA_PROC_MAX)
                return true;
        for (struct proc *p = t->head; p; p = p->next)
                if (p->reaped) {
                        proc_forget(p);
                        return true;
                }
        return false;
}

void proc_shutdown(struct agent *a)
{
        struct proc_table *t = a->procs;
        struct proc *p, *next;

        if (!t)
                return;
        a->procs = NULL;
        t->shutdown = true;
        if (t->objects == 0) {
                free(t->log_dir);
                free(t);
                return;
        }
        /* Freeing the last object frees the table: then next is NULL (forgotten ones are
         * not in the list and go when their followers do). */
        for (p = t->head; p; p = next) {
                next = p->next;
                if (!p->reaped)
                        signal_tree(p, SIGKILL);
                if (p->io)
                        io_close(p);
                else
                        proc_maybe_free(p);
        }
}

/* ---- operations ---- */

static void op_start_spawn(struct proc_table *t, struct conn *c, uint32_t sid,
                           struct proc_request *r, struct spawn_request *spawn);

static void op_start(struct proc_table *t, struct conn *c, uint32_t sid, struct proc_request *r)
{
        struct agent *a = t->a;
        struct spawn_request sr = {
                .command = r->command,
                .cwd = r->cwd,
                .base_env = r->base_env,
                .n_base_env = r->n_base_env,
                .env = r->env,
                .n_env = r->n_env,
        };
        struct cella_error err = {0};
        _cleanup_free_ char *sess_cwd = NULL;
        char **sess_env = NULL;
        size_t n_sess_env = 0;

        if (r->session) {
                /* Started "in" a session: its current directory (unless the request names
                 * one) and its environment, under the request's own env. */
                if (session_spawn_context(a, r->session, r->base_env, r->n_base_env, &sess_cwd,
                                          &sess_env, &n_sess_env, &err) < 0) {
                        conn_send_error(c, sid, &err);
                        return;
                }
                if (!r->cwd_given)
                        sr.cwd = sess_cwd;
                sr.base_env = sess_env;
                sr.n_base_env = n_sess_env;
        }
        op_start_spawn(t, c, sid, r, &sr);
        agent_env_free(sess_env, n_sess_env);
}

static void op_start_spawn(struct proc_table *t, struct conn *c, uint32_t sid,
                           struct proc_request *r, struct spawn_request *spawn)
{
        struct agent *a = t->a;
        struct spawn_request sr = *spawn;
        struct cella_error err = {0};
        struct spawn_result res;
        struct proc *p;
        char name[CELLA_ID_MAX + 16];

        if (r->id && proc_find(t, r->id)) { /* never digits only: an id, not a pid */
                conn_reply_error(c, sid, CELLA_E_PROCESS_ALREADY_EXISTS,
                                 "process '%s' already exists", r->id);
                return;
        }
        if (!make_room(t)) {
                conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED,
                                 "%d processes are running; kill some first", CELLA_PROC_MAX);
                return;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                conn_reply_error(c, sid, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        p->t = t;
        t->objects++;
        p->log_fd = -EBADF;
        p->pid = -1;
        t->seq++;
        if (r->id) {
                snprintf(p->id, sizeof(p->id), "%s", r->id);
        } else {
                do
                        snprintf(p->id, sizeof(p->id), "proc-%llu", (unsigned long long)t->seq);
                while (proc_find(t, p->id) && ++t->seq);
        }
        p->command = TAKE_PTR(r->command);
        p->session = TAKE_PTR(r->session);
        p->start_ms = time_now_ms();
        /* linked first, so that every exit below goes through the table */
        p->prev = t->tail;
        if (t->tail)
                t->tail->next = p;
        else
                t->head = p;
        t->tail = p;
        t->count++;

        if (log_dir_ready(t)) {
                char path[CELLA_PATH_MAX];

                snprintf(path, sizeof(path), "%s/%s.log", t->log_dir, p->id);
                p->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
                if (p->log_fd >= 0 && !(p->log_path = strdup(path))) {
                        close(p->log_fd);
                        p->log_fd = -EBADF;
                }
                if (p->log_fd < 0)
                        log_warn("process %s: no log (%s); output kept in memory", p->id,
                                 strerror(errno));
        }
        if (a->use_cgroup) {
                snprintf(name, sizeof(name), "proc-%llu", (unsigned long long)t->seq);
                p->cgroup = agent_cgroup_make(a, name);
        }
        sr.cgroup = p->cgroup;
        if (agent_spawn(&sr, &res, &err) < 0) {
                /* Could not start: kept with status error and the reason in its log. */
                p->pid = res.pid;
                p->status = P_ERROR;
                p->reaped = p->settled = true;
                p->end_ms = time_now_ms();
                p->error = strdup(err.msg);
                proc_output(p, 1, err.msg, strlen(err.msg));
                proc_output(p, 1, "\n", 1);
                proc_output_done(p);
                if (p->cgroup) {
                        agent_cgroup_remove(a, p->cgroup);
                        free(p->cgroup);
                        p->cgroup = NULL;
                }
                conn_send_json(c, FRAME_RESULT, sid, proc_info(p));
                return;
        }
        p->pid = res.pid;
        p->io = calloc(1, sizeof(*p->io));
        if (!p->io || agent_watch_child(a, p->pid, on_child, p) < 0) {
                /* Cannot track it: stop it. Reaped by the SIGCHLD handler as an orphan. */
                free(p->io);
                p->io = NULL;
                signal_tree(p, SIGKILL);
                close(res.out);
                close(res.err);
                p->status = P_ERROR;
                p->reaped = p->settled = true;
                p->end_ms = time_now_ms();
                proc_output_done(p);
                conn_reply_error(c, sid, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        uv_timer_init(a->loop, &p->io->settle);
        uv_timer_init(a->loop, &p->io->kill);
        p->io->settle.data = p->io->kill.data = p;
        p->io->handles = 4;
        for (int i = 0; i < 2; i++) {
                int fd = i == 0 ? res.out : res.err;

                if (pump_open_pipe(&p->io->out[i], a->loop, fd, &out_ops, p, i) == 0)
                        pump_resume(&p->io->out[i]);
        }
        log_debug("process %s: started pid %d", p->id, (int)p->pid);
        conn_send_json(c, FRAME_RESULT, sid, proc_info(p));
}

static void op_list(struct proc_table *t, struct conn *c, uint32_t sid)
{
        json_t *arr = json_array();

        for (struct proc *p = t->head; p && arr; p = p->next)
                json_array_append_new(arr, proc_info(p));
        conn_send_json(c, FRAME_RESULT, sid, arr ? json_pack("{s:o}", "processes", arr) : NULL);
}

static void op_killall(struct proc_table *t, struct conn *c, uint32_t sid, int sig)
{
        int n = 0;

        for (struct proc *p = t->head; p; p = p->next)
                if (!p->reaped) {
                        proc_kill(p, sig);
                        n++;
                }
        conn_send_json(c, FRAME_RESULT, sid, json_pack("{s:i}", "killed", n));
}

/* ---- dispatch ---- */

static void op_follow(struct proc_table *t, struct conn *c, uint32_t sid, struct proc_request *r)
{
        static const enum follower_kind kinds[] = {
                [PROC_KILL] = F_KILL,           [PROC_LOGS] = F_LOGS,
                [PROC_STREAM] = F_STREAM,       [PROC_WAIT_LOG] = F_WAIT_LOG,
                [PROC_WAIT_PORT] = F_WAIT_PORT, [PROC_WAIT_EXIT] = F_WAIT_EXIT,
        };
        struct proc *p = proc_find(t, r->id);
        struct follower *f;
        int k;

        if (!p) {
                conn_reply_error(c, sid, CELLA_E_PROCESS_NOT_FOUND, "process '%s' not found",
                                 r->id);
                return;
        }
        if (r->op == PROC_WAIT_LOG && r->regex) {
                regex_t re;

                k = regcomp(&re, r->pattern, REG_EXTENDED | REG_NOSUB);
                if (k != 0) {
                        char msg[128];

                        regerror(k, &re, msg, sizeof(msg));
                        conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED, "invalid regex: %s",
                                         msg);
                        return;
                }
                regfree(&re);
        }
        f = follower_new(c, sid, p, kinds[r->op]);
        if (!f) {
                conn_reply_error(c, sid, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        if (follower_reads(f) && follower_open_output(f) < 0) {
                follower_error(f, CELLA_E_INTERNAL_ERROR, "the process's log is unreadable");
                return;
        }
        if (f->kind == F_KILL)
                proc_kill(p, r->signal);
        follower_start(f, r);
}

void proc_request(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct proc_request r;
        struct cella_error err = {0};
        struct proc_table *t;
        struct proc *p;

        if (proc_request_decode(req->body, &r, &err) < 0) {
                conn_send_error(c, req->stream, &err);
                proc_request_done(&r);
                return;
        }
        t = table_get(a);
        if (!t) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                proc_request_done(&r);
                return;
        }
        switch (r.op) {
        case PROC_START:
                op_start(t, c, req->stream, &r);
                break;
        case PROC_LIST:
                op_list(t, c, req->stream);
                break;
        case PROC_GET:
                p = proc_find(t, r.id);
                if (p)
                        conn_send_json(c, FRAME_RESULT, req->stream, proc_info(p));
                else
                        conn_reply_error(c, req->stream, CELLA_E_PROCESS_NOT_FOUND,
                                         "process '%s' not found", r.id);
                break;
        case PROC_KILLALL:
                op_killall(t, c, req->stream, r.signal);
                break;
        default:
                op_follow(t, c, req->stream, &r);
                break;
        }
        proc_request_done(&r);
}
