/* A session's shell and its commands (see session-shell.h; the model is in session.c's
 * head comment). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/session-shell.h"
#include "common/fsutil.h"
#include "common/log.h"

#define OUTPUT_GRACE_MS 100      /* output still held open after the status came */
#define KILL_SHELL_GRACE_MS 2000 /* after a timeout's kill, wait this long for the status */
#define KILL_REPEAT_MS 50        /* and repeat the interrupt this often meanwhile */
/* Sent to a session's shell to stop the command it runs: its trap (SHELL_INIT) returns
 * from the sourced script. */
#define INTERRUPT_SIGNAL SIGUSR2
#define SHELL_INIT "trap 'return 124 2>/dev/null' USR2\n"

static void queue_run(struct session *sess);
static void job_check_done(struct job *j);

static int write_all(int fd, const char *p, size_t n)
{
        while (n > 0) {
                ssize_t w = write(fd, p, n);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return -errno;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

void session_shell_send_env(struct session *sess)
{
        while (sess->pid > 0 && sess->in_fd >= 0 && sess->env_lines.len > 0) {
                ssize_t w = write(sess->in_fd, sess->env_lines.data, sess->env_lines.len);

                if (w < 0 && errno == EINTR)
                        continue;
                if (w <= 0)
                        return; /* full (EAGAIN) or going (EPIPE): the next command's turn */
                buf_consume(&sess->env_lines, (size_t)w);
        }
}

/* ---- files ---- */

void session_rm_dir(const char *path)
{
        DIR *d = opendir(path);
        struct dirent *de;

        if (d) {
                while ((de = readdir(d))) {
                        char p[CELLA_PATH_MAX];

                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
                        if (unlink(p) < 0 && errno == EISDIR)
                                session_rm_dir(p);
                }
                closedir(d);
        }
        rmdir(path);
}

/* ---- killing (agent_kill_tree, docs/decisions/0031) ---- */

/* Stop what command j started: every process of the session that is not the shell and was
 * not there when j started (j->keep), nor descends from one that was, is SIGKILLed; the
 * shell goes too with with_shell. So what earlier commands left running in the background
 * lives on. j NULL: nothing is kept. */
static void kill_command(struct session *sess, struct job *j, bool with_shell)
{
        struct kill_target t = {
                .cgroup = sess->cgroup,
                .root = sess->cgroup ? 0 : sess->pid,
                .spare = with_shell ? 0 : sess->pid,
                .keep = j ? j->keep : NULL,
                .n_keep = j ? j->n_keep : 0,
        };

        if (sess->pid > 0 || sess->cgroup)
                agent_kill_tree(&t);
        if (with_shell && sess->pid > 0)
                kill(sess->pid, SIGKILL);
}

/* Everything of the session: the shell, its cgroup, its process group (delete). */
void session_kill(struct session *sess)
{
        struct kill_target t = {
                .cgroup = sess->cgroup,
                .pgid = sess->pid > 0 ? sess->pid : 0,
                .root = sess->cgroup ? 0 : sess->pid,
        };

        if (sess->pid > 0 || sess->cgroup)
                agent_kill_tree(&t);
        if (sess->pid > 0)
                kill(sess->pid, SIGKILL);
}

/* ---- the shell ---- */

static void on_ctl_closed(uv_handle_t *h)
{
        struct session *sess = h->data;

        sess->ctl_closing = false;
        sess->ctl_open = false;
        if (sess->deleted && sess->pid < 0) {
                buf_free(&sess->ctl_buf);
                free(sess);
        }
}

static void close_ctl(struct session *sess)
{
        if (sess->ctl_open && !sess->ctl_closing) {
                sess->ctl_closing = true;
                uv_close((uv_handle_t *)&sess->ctl, on_ctl_closed);
        }
}

static void prep_close(struct session *sess)
{
        for (int i = 0; i < 2; i++) {
                if (sess->prep.ready && sess->prep.rd[i] >= 0)
                        close(sess->prep.rd[i]);
                if (sess->prep.ready && sess->prep.hold[i] >= 0)
                        close(sess->prep.hold[i]);
        }
        sess->prep.ready = false;
}

void session_release(struct session *sess)
{
        prep_close(sess);
        if (sess->cgroup) {
                agent_cgroup_remove(sess->a, sess->cgroup);
                free(sess->cgroup);
                sess->cgroup = NULL;
        }
        free(sess->cwd);
        sess->cwd = NULL;
        agent_env_free(sess->env, sess->n_env);
        sess->env = NULL;
        sess->n_env = 0;
        buf_free(&sess->env_lines);
        session_rm_dir(sess->dir);
        if (!sess->ctl_open) {
                buf_free(&sess->ctl_buf);
                free(sess);
        }
}

void session_on_shell_exit(void *ud, pid_t pid, int status)
{
        struct session *sess = ud;
        struct job *j = sess->running;

        (void)pid;
        log_debug("session %s: shell %d ended (status 0x%x)", sess->id, (int)pid, status);
        sess->pid = -1;
        if (sess->in_fd >= 0)
                close(sess->in_fd);
        sess->in_fd = -EBADF;
        close_ctl(sess);
        buf_reset(&sess->ctl_buf);
        if (sess->cgroup && (rmdir(sess->cgroup) == 0 || errno == ENOENT)) {
                free(sess->cgroup);
                sess->cgroup = NULL;
        }
        /* else what commands left in the background runs on in the session's cgroup, and
         * the next shell joins it; deleting the session ends them */
        if (j && !j->got_status) {
                j->shell_exited = true;
                j->shell_status = status;
                job_check_done(j);
        }
        if (sess->deleted) {
                session_release(sess);
                return;
        }
        queue_run(sess);
}

static void on_ctl_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct session *sess = h->data;

        (void)suggested;
        if (buf_reserve(&sess->ctl_buf, 256) < 0) {
                *ret = uv_buf_init(NULL, 0);
                return;
        }
        *ret = uv_buf_init(sess->ctl_buf.data + sess->ctl_buf.len,
                           (unsigned)(sess->ctl_buf.cap - sess->ctl_buf.len - 1));
}

static void on_status_line(struct session *sess, const char *line)
{
        struct job *j = sess->running;
        size_t nl = strlen(sess->nonce);
        unsigned long seq;
        char *end;
        long rc;

        if (strncmp(line, sess->nonce, nl) != 0 || line[nl] != ':')
                return;
        seq = strtoul(line + nl + 1, &end, 10);
        if (*end != ' ')
                return;
        rc = strtol(end + 1, &end, 10);
        if (*end != '\0' || !j || j->seq != seq || j->got_status)
                return;
        j->got_status = true;
        j->status = (int)rc;
        job_check_done(j);
}

static void on_ctl_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct session *sess = st->data;
        char *nl;

        (void)b;
        if (n < 0) {
                /* The shell closed its stdout: it is exiting; SIGCHLD finishes the job. */
                close_ctl(sess);
                return;
        }
        sess->ctl_buf.len += (size_t)n;
        sess->ctl_buf.data[sess->ctl_buf.len] = '\0';
        while ((nl = memchr(sess->ctl_buf.data, '\n', sess->ctl_buf.len))) {
                *nl = '\0';
                on_status_line(sess, sess->ctl_buf.data);
                buf_consume(&sess->ctl_buf, (size_t)(nl - sess->ctl_buf.data) + 1);
        }
        if (sess->ctl_buf.len > 4096)
                buf_reset(&sess->ctl_buf); /* no status line is this long */
}

static int prep_fifos(struct session *sess, struct cella_error *err);

/* Start the session's shell (agent_spawn, in the session's own cgroup), and make its first
 * command's FIFOs (a warm pool's default session is started ahead: its first command, the
 * claimer's, then finds them made). 0, or -1 with err set. */
int session_shell_spawn(struct session *sess, struct cella_error *err)
{
        struct agent *a = sess->a;
        struct spawn_result res;
        struct spawn_request sr = {
                .cwd = sess->cwd,
                .base_env = sess->env,
                .n_base_env = sess->n_env,
                .session_shell = true,
        };
        char name[32];

        if (a->use_cgroup && !sess->cgroup) {
                snprintf(name, sizeof(name), "sess-%u", sess->n);
                sess->cgroup = agent_cgroup_make(a, name);
        }
        sr.cgroup = sess->cgroup;
        if (agent_spawn(&sr, &res, err) < 0)
                return -1;
        if (agent_watch_child(a, res.pid, session_on_shell_exit, sess) < 0) {
                kill(res.pid, SIGKILL);
                while (waitpid(res.pid, NULL, 0) < 0 && errno == EINTR)
                        ;
                close(res.in);
                close(res.out);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        sess->pid = res.pid;
        sess->is_bash = res.is_bash;
        sess->in_fd = res.in;
        fcntl(sess->in_fd, F_SETFL, O_NONBLOCK);
        uv_pipe_init(a->loop, &sess->ctl, 0);
        sess->ctl.data = sess;
        sess->ctl_open = true;
        if (uv_pipe_open(&sess->ctl, res.out) == 0)
                uv_read_start((uv_stream_t *)&sess->ctl, on_ctl_alloc, on_ctl_read);
        else {
                close(res.out);
                close_ctl(sess);
        }
        if (write_all(sess->in_fd, SHELL_INIT, sizeof(SHELL_INIT) - 1) < 0)
                log_warn("session %s: cannot set up the shell", sess->id);
        log_debug("session %s: shell %d started", sess->id, (int)sess->pid);
        {
                struct cella_error ignored = {0};

                (void)prep_fifos(sess, &ignored); /* else made by the first command */
        }
        return 0;
}

/* ---- jobs ---- */

void session_job_free(struct job *j)
{
        free(j->keep);
        free(j->script);
        free(j);
}

void session_job_maybe_free(struct job *j)
{
        if (j->finished && j->open_handles == 0 && !j->s.conn)
                session_job_free(j);
}

/* One of j's handles (timers, pumps) is closed. */
static void job_handle_gone(struct job *j)
{
        j->open_handles--;
        session_job_maybe_free(j);
}

static void on_job_handle_closed(uv_handle_t *h)
{
        job_handle_gone(h->data);
}

static void job_close_handle(struct job *j, uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, on_job_handle_closed);
}

static void job_drop_holds(struct job *j)
{
        for (int i = 0; i < 2; i++)
                if (j->hold[i] >= 0) {
                        close(j->hold[i]);
                        j->hold[i] = -EBADF;
                }
}

static void job_unlink_files(struct job *j)
{
        static const char kinds[] = {'c', 'o', 'e'};
        char path[224];

        if (!j->sess)
                return;
        for (size_t i = 0; i < ARRAY_SIZE(kinds); i++) {
                snprintf(path, sizeof(path), "%s/%c%u", j->sess->dir, kinds[i],
                         kinds[i] == 'c' ? j->seq : j->fifo_id);
                if (kinds[i] != 'c' && !j->streamed)
                        continue;
                unlink(path);
        }
}

/* Send the final frame and let go of everything; the session moves on. */
void session_job_finish(struct job *j)
{
        struct session *sess = j->sess;

        if (j->finished)
                return;
        j->finished = true;
        if (j->s.conn) {
                if (j->destroyed) {
                        stream_end_error(&j->s, CELLA_E_SESSION_DESTROYED,
                                         "session '%s' was deleted while the command ran",
                                         sess ? sess->id : "?");
                } else if (j->got_status || j->timed_out) {
                        int code = j->got_status ? j->status : 128 + SIGKILL;

                        stream_end_json(&j->s, FRAME_EXIT,
                                        json_pack("{s:i, s:b, s:I}", "exitCode", code, "timedOut",
                                                  j->timed_out, "timeoutMs",
                                                  (json_int_t)j->timeout_ms));
                } else {
                        int st = j->shell_status;
                        int code = WIFEXITED(st)     ? WEXITSTATUS(st)
                                   : WIFSIGNALED(st) ? 128 + WTERMSIG(st)
                                                     : -1;
                        char msg[160];

                        snprintf(msg, sizeof(msg),
                                 "the session's shell exited with code %d; the next command "
                                 "starts a new shell",
                                 code);
                        stream_end_json(&j->s, FRAME_ERROR,
                                        json_pack("{s:s, s:s, s:i}", "code",
                                                  cella_code_name(CELLA_E_SESSION_TERMINATED),
                                                  "message", msg, "exitCode", code));
                }
        }
        job_drop_holds(j);
        job_unlink_files(j);
        if (j->started) {
                pump_close_all(j->out, 2);
                job_close_handle(j, (uv_handle_t *)&j->timer);
                job_close_handle(j, (uv_handle_t *)&j->grace);
        }
        if (sess && sess->running == j) {
                sess->running = NULL;
                j->sess = NULL;
                if (!sess->deleted)
                        queue_run(sess);
        }
        session_job_maybe_free(j);
}

/* The grace is for writers that outlive the command (`server &` holds the FIFO open):
 * what the command itself wrote before its status is still read whole, however long the
 * client takes it (the pumps wait for credit meanwhile). */
static void on_output_grace(uv_timer_t *t)
{
        struct job *j = t->data;

        if (j->finished)
                return;
        if (j->owed[0] || j->owed[1]) {
                uv_timer_start(&j->grace, on_output_grace, OUTPUT_GRACE_MS, 0);
                return;
        }
        session_job_finish(j);
}

/* What each FIFO holds now: owed to the client before the job may end. */
static void note_owed(struct job *j)
{
        for (int i = 0; i < 2; i++) {
                int n = 0;

                j->owed[i] = pump_is_live(&j->out[i]) && j->out[i].fd >= 0 &&
                                             ioctl(j->out[i].fd, FIONREAD, &n) == 0 && n > 0
                                     ? (size_t)n
                                     : 0;
        }
}

static void job_check_done(struct job *j)
{
        if (j->finished)
                return;
        if (!j->got_status && !j->shell_exited)
                return;
        /* The command is over: our write ends go, so EOF means its writers are done. */
        job_drop_holds(j);
        uv_timer_stop(&j->timer);
        if (!j->streamed || pump_all_done(j->out, 2)) {
                session_job_finish(j);
                return;
        }
        if (!uv_is_active((uv_handle_t *)&j->grace)) {
                note_owed(j);
                uv_timer_start(&j->grace, on_output_grace, OUTPUT_GRACE_MS, 0);
        }
}

/* The pumps' sink: STDOUT/STDERR frames within the window; a detached job's output is
 * drained and discarded. */
static size_t job_allowance(struct pump *p)
{
        struct job *j = p->owner;
        size_t n;

        if (j->finished)
                return 0;
        if (!j->s.conn)
                return CELLA_FRAME_DATA_CHUNK;
        /* the filter rewrites into fbuf: a chunk at most */
        n = j->filtering && p->index == 1 ? pump_credit(&j->s) : pump_credit_bulk(&j->s);
        if (j->filtering && p->index == 1) {
                /* what the filter holds goes out with the next read: credit for both */
                size_t held = name_filter_held(&j->nf);

                n = n > held ? n - held : 0;
        }
        return n;
}

/* Send output of stream i (1: stderr through the name filter, if any). */
static void job_send(struct job *j, int i, const char *data, size_t n)
{
        if (i == 1 && j->filtering) {
                n = name_filter_feed(&j->nf, data, n, j->fbuf);
                data = j->fbuf;
        }
        if (n == 0 || !j->s.conn)
                return;
        pump_emit(&j->s, i == 0 ? FRAME_STDOUT : FRAME_STDERR, data, n);
}

static void job_out_data(struct pump *p, const char *data, size_t n)
{
        struct job *j = p->owner;

        j->owed[p->index] -= MIN(n, j->owed[p->index]);
        job_send(j, p->index, data, n);
}

static void job_out_eof(struct pump *p)
{
        struct job *j = p->owner;
        int i = p->index;

        j->owed[i] = 0;
        if (i == 1 && j->filtering && j->s.conn) {
                size_t k = name_filter_flush(&j->nf, j->fbuf);

                if (k > 0)
                        pump_emit(&j->s, FRAME_STDERR, j->fbuf, k);
        }
        pump_close(&j->out[i]);
        if ((j->got_status || j->shell_exited) && pump_all_done(j->out, 2))
                session_job_finish(j);
}

static void job_out_closed(struct pump *p)
{
        job_handle_gone(p->owner);
}

static const struct pump_ops job_out_ops = {
        .allowance = job_allowance,
        .on_data = job_out_data,
        .on_eof = job_out_eof,
        .on_closed = job_out_closed,
};

static void on_job_timer(uv_timer_t *t)
{
        struct job *j = t->data;
        struct session *sess = j->sess;

        if (j->finished || !sess)
                return;
        if (!j->kill_phase2) {
                if (!j->cancelled)
                        j->timed_out = true;
                log_info("session %s: command %u %s; stopping it", sess->id, j->seq,
                         j->cancelled ? "cancelled" : "timed out");
                j->kill_phase2 = true;
                j->kill_since = uv_now(sess->a->loop);
                uv_timer_start(&j->timer, on_job_timer, KILL_REPEAT_MS, KILL_REPEAT_MS);
        }
        if (uv_now(sess->a->loop) - j->kill_since < KILL_SHELL_GRACE_MS) {
                /* The shell's INTERRUPT_SIGNAL trap makes it return from the command's
                 * script as soon as it runs again, and what the command started is killed
                 * (which lets the shell run again); the shell stays and reports the status.
                 * Repeated until the status comes: the shell may not have read the command
                 * yet (a CANCEL right after STARTED), or a child may be forking. */
                if (sess->pid > 0)
                        kill(sess->pid, INTERRUPT_SIGNAL);
                kill_command(sess, j, false);
                return;
        }
        uv_timer_stop(&j->timer);
        /* No status: the shell itself is busy (a builtin loop). It goes with what the
         * command started; the session starts a new shell for its next command. */
        log_info("session %s: shell does not answer after the kill; restarting it", sess->id);
        kill_command(sess, j, true);
}

static void job_stream_window(struct stream *s)
{
        struct job *j = (struct job *)s;

        if (j->started)
                pump_resume_all(j->out, 2);
}

static void job_remove_from_queue(struct job *j)
{
        struct session *sess = j->sess;
        struct job *prev = NULL;

        if (!sess)
                return;
        for (struct job *q = sess->queue; q; prev = q, q = q->next)
                if (q == j) {
                        if (prev)
                                prev->next = q->next;
                        else
                                sess->queue = q->next;
                        if (sess->queue_tail == q)
                                sess->queue_tail = prev;
                        break;
                }
        j->next = NULL;
        j->sess = NULL;
}

static void job_stream_cancel(struct stream *s, bool detach)
{
        struct job *j = (struct job *)s;

        if (!j->started) {
                job_remove_from_queue(j);
                if (!detach)
                        stream_end_error(s, CELLA_E_INTERNAL_ERROR, "cancelled");
                s->conn = NULL;
                j->finished = true;
                session_job_maybe_free(j);
                return;
        }
        if (detach)
                s->conn = NULL; /* already unlinked: output is drained and discarded */
        if (!j->finished && j->sess && !j->kill_phase2 && !j->got_status) {
                j->cancelled = true;
                uv_timer_stop(&j->timer);
                on_job_timer(&j->timer); /* kill what it started, then wait for the status */
        }
        session_job_maybe_free(j);
}

const struct stream_ops session_job_ops = {
        .on_window = job_stream_window,
        .on_cancel = job_stream_cancel,
};

/* Make the FIFO pair of the session's next command: o<id>, e<id>, their read ends and
 * the agent's write ends. */
static int prep_fifos(struct session *sess, struct cella_error *err)
{
        unsigned id;

        if (sess->prep.ready)
                return 0;
        id = ++sess->fifo_seq;
        sess->prep.rd[0] = sess->prep.rd[1] = sess->prep.hold[0] = sess->prep.hold[1] = -EBADF;
        sess->prep.id = id;
        sess->prep.ready = true; /* from here on prep_close() releases what is open */
        for (int i = 0; i < 2; i++) {
                char path[224];

                snprintf(path, sizeof(path), "%s/%c%u", sess->dir, i == 0 ? 'o' : 'e', id);
                unlink(path);
                if (mkfifo(path, 0600) < 0 && errno == ENOENT) {
                        /* the directory went (a command removed it): make it again */
                        if (fs_mkdir_p(sess->dir, 0700) == 0)
                                (void)mkfifo(path, 0600);
                }
                sess->prep.rd[i] = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
                if (sess->prep.rd[i] < 0)
                        goto fail;
                sess->prep.hold[i] = open(path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
                if (sess->prep.hold[i] < 0)
                        goto fail;
        }
        return 0;
fail:
        cella_error_errno(err, errno, "session '%s': fifo", sess->id);
        prep_close(sess);
        return -1;
}

/* Give j the prepared FIFO pair (made now if there is none). */
static int job_open_fifos(struct job *j, struct cella_error *err)
{
        struct session *sess = j->sess;

        if (prep_fifos(sess, err) < 0)
                return -1;
        j->fifo_id = sess->prep.id;
        for (int i = 0; i < 2; i++) {
                j->hold[i] = sess->prep.hold[i];
                sess->prep.hold[i] = -EBADF;
                int fd = sess->prep.rd[i];

                sess->prep.rd[i] = -EBADF; /* the pump's from here on, also on failure */
                j->open_handles++;
                if (pump_open_pipe(&j->out[i], sess->a->loop, fd, &job_out_ops, j, i) < 0) {
                        pump_close(&j->out[i]);
                        prep_close(sess);
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                               "session '%s': watch fifo", sess->id);
                }
        }
        sess->prep.ready = false;
        return 0;
}

/* Run j in its session's shell (starting the shell if needed). */
static void job_start(struct job *j)
{
        struct session *sess = j->sess;
        struct agent *a = sess->a;
        struct cella_error err = {0};
        _cleanup_buf_ struct buf line = BUF_INIT;
        char path[224];
        int fd, r;

        j->started = true;
        sess->running = j;
        uv_timer_init(a->loop, &j->timer);
        uv_timer_init(a->loop, &j->grace);
        j->timer.data = j->grace.data = j;
        j->open_handles = 2;

        if (sess->pid < 0) {
                if (session_shell_spawn(sess, &err) < 0)
                        goto fail;
                buf_reset(&sess->env_lines); /* the new shell started with them */
        }
        if (j->streamed && job_open_fifos(j, &err) < 0)
                goto fail;
        if (j->streamed) {
                /* bash names the sourced file in its messages: "bash" instead */
                char prefix[224];

                snprintf(prefix, sizeof(prefix), "%s/c", sess->dir);
                j->filtering = name_filter_init(&j->nf, prefix, sess->is_bash ? "bash" : "sh") == 0;
        }
        snprintf(path, sizeof(path), "%s/c%u", sess->dir, j->seq);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0 && errno == ENOENT && fs_mkdir_p(sess->dir, 0700) == 0)
                fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0) {
                cella_error_errno(&err, errno, "session '%s': write the command", sess->id);
                goto fail;
        }
        r = write_all(fd, j->script, strlen(j->script));
        close(fd);
        if (r < 0) {
                cella_error_errno(&err, -r, "session '%s': write the command", sess->id);
                goto fail;
        }
        if (j->streamed)
                r = buf_printf(&line, "%s . %s/c%u %s </dev/null >%s/o%u 2>%s/e%u; ",
                               j->subshell ? "(" : "{", sess->dir, j->seq,
                               j->subshell ? ")" : "; }", sess->dir, j->fifo_id, sess->dir,
                               j->fifo_id);
        else
                r = buf_printf(&line, "{ . %s/c%u; } </dev/null >/dev/null 2>&1; ", sess->dir,
                               j->seq);
        if (r < 0 || buf_printf(&line, "%sprintf '%%s\\n' \"%s:%u $?\"\n",
                                sess->is_bash ? "builtin " : "", sess->nonce, j->seq) < 0) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto fail;
        }
        /* What runs in the session now is not this command's: a timeout spares it. */
        if (agent_tree_snapshot(sess->cgroup, sess->cgroup ? 0 : sess->pid, sess->pid, &j->keep,
                                &j->n_keep) < 0) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto fail;
        }
        r = sess->env_lines.len ? write_all(sess->in_fd, sess->env_lines.data, sess->env_lines.len)
                                : 0;
        buf_reset(&sess->env_lines);
        if (r >= 0)
                r = write_all(sess->in_fd, line.data, line.len);
        if (r < 0) {
                /* The shell is gone or wedged: it is replaced and this command fails. */
                kill_command(sess, j, true);
                cella_error_errno(&err, -r, "session '%s': the shell did not take the command",
                                  sess->id);
                goto fail;
        }
        if (j->s.conn)
                stream_send_json(&j->s, FRAME_STARTED, json_pack("{s:i}", "pid", (int)sess->pid));
        if (j->timeout_ms > 0)
                uv_timer_start(&j->timer, on_job_timer, (uint64_t)j->timeout_ms, 0);
        if (j->streamed)
                pump_resume_all(j->out, 2);
        {
                /* The next command's FIFOs, made while this one runs. */
                struct cella_error ignored = {0};

                (void)prep_fifos(sess, &ignored);
        }
        return;
fail:
        log_info("%s", err.msg);
        if (j->s.conn)
                stream_end_error(&j->s, err.code, "%s", err.msg);
        j->got_status = true; /* nothing runs; finish without a frame */
        j->s.conn = NULL;
        session_job_finish(j);
}

static void queue_run(struct session *sess)
{
        struct job *j;

        while (!sess->running && sess->queue && !sess->deleted) {
                j = sess->queue;
                sess->queue = j->next;
                if (!sess->queue)
                        sess->queue_tail = NULL;
                j->next = NULL;
                job_start(j);
        }
}

void session_enqueue(struct session *sess, struct job *j)
{
        j->sess = sess;
        j->seq = ++sess->seq;
        j->hold[0] = j->hold[1] = -EBADF;
        if (sess->queue_tail)
                sess->queue_tail->next = j;
        else
                sess->queue = j;
        sess->queue_tail = j;
        queue_run(sess);
}

/* ---- a new command ---- */

struct job *session_job_new(const char *script_head, const char *command)
{
        struct job *j = calloc(1, sizeof(*j));
        size_t hl = script_head ? strlen(script_head) : 0, cl = strlen(command);

        if (!j)
                return NULL;
        j->hold[0] = j->hold[1] = -EBADF;
        j->script = malloc(hl + cl + 2);
        if (!j->script) {
                free(j);
                return NULL;
        }
        if (hl)
                memcpy(j->script, script_head, hl);
        memcpy(j->script + hl, command, cl);
        /* a final newline so that a trailing comment or heredoc ends inside the file */
        j->script[hl + cl] = '\n';
        j->script[hl + cl + 1] = '\0';
        return j;
}
