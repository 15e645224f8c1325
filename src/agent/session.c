/* Sessions: persistent shells (see session.h for the model).
 *
 * Files of session n live in RUN_DIR/sessions/s<n>/ (cella-init --run-dir, default
 * /run/cella): per command k the script c<k> the shell sources and the FIFOs o<k> and e<k>
 * its output goes to. The agent opens each FIFO's read end and also a write end of its own
 * before the shell gets the command, so that the read end does not see EOF before the shell
 * has opened it; the agent's write ends are closed when the command's status arrives, and
 * EOF then means every writer is done. A command's stderr goes through a name filter
 * (name-filter.h): bash names the script file in its messages, and the user sees "bash"
 * there instead of the agent's path.
 *
 * The line written to the shell's stdin for command k of a session with nonce N is
 *     { . DIR/ck; } </dev/null >DIR/ok 2>DIR/ek; builtin printf '%s\n' "N:k $?"
 * (for a command with its own cwd or env, `( . DIR/ck )` so that nothing persists), and the
 * shell's stdout is the agent's status pipe. A status line with another nonce or sequence
 * number is ignored, so output a command forces onto the shell's saved descriptors cannot
 * desynchronise the session. A shell that exits before the status (`exit 3`) ends the
 * command with SESSION_TERMINATED and the next command starts a fresh shell.
 *
 * Lifetimes: a struct session is in the agent's list until deleted; a deleted one whose
 * shell still runs stays allocated (off the list) until the shell is reaped. A struct job
 * is in its session's queue until it runs; it is freed once it has finished, its stream
 * has ended or been detached, and its libuv handles are closed. */
#include <dirent.h>
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

#include "common/fsutil.h"
#include "agent/service.h"
#include "agent/name-filter.h"
#include "agent/session.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/path.h"
#include "common/timeutil.h"

#define OUTPUT_GRACE_MS 100      /* output still held open after the status came */
#define KILL_SHELL_GRACE_MS 2000 /* after a timeout's kill, wait this long for the status */
#define KILL_REPEAT_MS 50        /* and repeat the interrupt this often meanwhile */
#define DEFAULT_SESSION "default"
/* Sent to a session's shell to stop the command it runs: its trap (SHELL_INIT) returns
 * from the sourced script. */
#define INTERRUPT_SIGNAL SIGUSR2
#define SHELL_INIT "trap 'return 124 2>/dev/null' USR2\n"

struct session;

struct job {
        struct stream s; /* first: the agent casts stream pointers */
        struct job *next;
        struct session *sess; /* NULL once its session is gone */
        bool streamed;        /* an EXEC; otherwise internal (setenv): output discarded */
        char *script;
        bool subshell;
        int64_t timeout_ms;
        unsigned seq;
        bool started;
        bool got_status;
        int status; /* from the status line */
        bool shell_exited;
        int shell_status; /* wait status of a shell that ended during the command */
        bool timed_out;
        bool cancelled; /* CANCEL, or the connection went away */
        bool destroyed; /* its session was deleted */
        bool finished;  /* final frame sent (or nobody to send it to) */
        bool kill_phase2;
        uint64_t kill_since; /* loop time of the first interrupt */
        unsigned fifo_id;    /* its FIFOs are o<fifo_id> and e<fifo_id> */
        uv_pipe_t out[2];
        bool out_eof[2];
        bool reading[2];
        int hold[2];      /* the agent's own write ends of the FIFOs */
        uv_timer_t timer; /* timeout, then the grace before the shell is killed */
        uv_timer_t grace; /* output after the status */
        unsigned open_handles;
        /* stderr through the filter that names the script "bash" (name-filter.h) */
        bool filtering;
        struct name_filter nf;
        /* the session's processes other than the shell when it started (kill_command) */
        struct proc_ident *keep;
        size_t n_keep;
        char rbuf[CELLA_FRAME_DATA_CHUNK];
        char fbuf[CELLA_FRAME_DATA_CHUNK + sizeof(((struct name_filter *)0)->held)];
};

struct session {
        struct session *next;
        struct agent *a;
        char id[CELLA_ID_MAX + 1];
        unsigned n;
        char dir[192];
        char *cwd;
        char **env; /* "K=V": the sandbox's base env, then the session's own */
        size_t n_env;
        int64_t timeout_ms;
        int64_t created_ms;
        char nonce[17];
        unsigned seq;
        bool deleted;
        /* the shell */
        pid_t pid; /* -1: none */
        bool is_bash;
        int in_fd;
        uv_pipe_t ctl;
        bool ctl_open;
        bool ctl_closing;
        struct buf ctl_buf;
        char *cgroup;
        /* The FIFOs of the next command, made while the previous one runs (off the
         * request path): read ends and the agent's write ends, or ready false. */
        struct {
                bool ready;
                unsigned id;
                int rd[2];
                int hold[2];
        } prep;
        unsigned fifo_seq;
        /* commands */
        struct job *queue, *queue_tail;
        struct job *running;
};

static void pump(struct session *sess);
static void job_check_done(struct job *j);

/* ---- small helpers ---- */

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

/* 'text' quoted for the shell: single quotes, each ' as '\''. */
static int sh_quote(struct buf *b, const char *text)
{
        if (buf_append_str(b, "'") < 0)
                return -ENOMEM;
        for (const char *p = text; *p; p++) {
                if (*p == '\'') {
                        if (buf_append_str(b, "'\\''") < 0)
                                return -ENOMEM;
                } else if (buf_append(b, p, 1) < 0) {
                        return -ENOMEM;
                }
        }
        return buf_append_str(b, "'");
}

/* Set K=V in an env array (replacing K), or with value NULL remove K. */
static int env_apply(char ***env, size_t *n, const char *kv_or_key, bool unset)
{
        size_t klen = unset ? strlen(kv_or_key) : (size_t)(strchr(kv_or_key, '=') - kv_or_key);
        char *copy = NULL;
        size_t i;

        for (i = 0; i < *n; i++)
                if (strncmp((*env)[i], kv_or_key, klen) == 0 && (*env)[i][klen] == '=')
                        break;
        if (unset) {
                if (i < *n) {
                        free((*env)[i]);
                        (*env)[i] = (*env)[--*n];
                }
                return 0;
        }
        copy = strdup(kv_or_key);
        if (!copy)
                return -ENOMEM;
        if (i < *n) {
                free((*env)[i]);
                (*env)[i] = copy;
                return 0;
        }
        {
                char **grown = realloc(*env, (*n + 1) * sizeof(char *));

                if (!grown) {
                        free(copy);
                        return -ENOMEM;
                }
                *env = grown;
                (*env)[(*n)++] = copy;
        }
        return 0;
}

static void rm_tree(const char *path)
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
                                rm_tree(p);
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
static void kill_session(struct session *sess)
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

static void session_release(struct session *sess)
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
        rm_tree(sess->dir);
        if (!sess->ctl_open) {
                buf_free(&sess->ctl_buf);
                free(sess);
        }
}

static void on_shell_exit(void *ud, pid_t pid, int status)
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
        pump(sess);
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

/* Start the session's shell (agent_spawn, in the session's own cgroup). 0, or -1 with
 * err set. */
static int shell_spawn(struct session *sess, struct cella_error *err)
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
        if (agent_watch_child(a, res.pid, on_shell_exit, sess) < 0) {
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
        return 0;
}

/* ---- jobs ---- */

static void job_free(struct job *j)
{
        free(j->keep);
        free(j->script);
        free(j);
}

static void job_maybe_free(struct job *j)
{
        if (j->finished && j->open_handles == 0 && !j->s.conn)
                job_free(j);
}

static void on_job_handle_closed(uv_handle_t *h)
{
        struct job *j = h->data;

        j->open_handles--;
        job_maybe_free(j);
}

static void job_close_handle(struct job *j, uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, on_job_handle_closed);
}

static void job_close_pipe(struct job *j, int i)
{
        if (j->out_eof[i])
                return;
        j->out_eof[i] = true;
        j->reading[i] = false;
        job_close_handle(j, (uv_handle_t *)&j->out[i]);
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
static void job_finish(struct job *j)
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
                job_close_pipe(j, 0);
                job_close_pipe(j, 1);
                job_close_handle(j, (uv_handle_t *)&j->timer);
                job_close_handle(j, (uv_handle_t *)&j->grace);
        }
        if (sess && sess->running == j) {
                sess->running = NULL;
                j->sess = NULL;
                if (!sess->deleted)
                        pump(sess);
        }
        job_maybe_free(j);
}

static void on_output_grace(uv_timer_t *t)
{
        struct job *j = t->data;

        if (!j->finished)
                job_finish(j);
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
        if (!j->streamed || (j->out_eof[0] && j->out_eof[1])) {
                job_finish(j);
                return;
        }
        if (!uv_is_active((uv_handle_t *)&j->grace))
                uv_timer_start(&j->grace, on_output_grace, OUTPUT_GRACE_MS, 0);
}

static bool job_may_read(struct job *j)
{
        if (j->finished)
                return false;
        if (!j->s.conn)
                return true; /* detached: drain and discard */
        return j->s.send_credit > 0 && !stream_congested(&j->s);
}

static void job_pause(struct job *j)
{
        for (int i = 0; i < 2; i++)
                if (j->reading[i]) {
                        uv_read_stop((uv_stream_t *)&j->out[i]);
                        j->reading[i] = false;
                }
}

static void on_out_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct job *j = h->data;
        size_t n = sizeof(j->rbuf);

        (void)suggested;
        if (j->s.conn && j->s.send_credit < n)
                n = (size_t)j->s.send_credit;
        if (j->s.conn && j->filtering && h == (uv_handle_t *)&j->out[1]) {
                /* what the filter holds goes out with the next read: credit for both */
                size_t held = name_filter_held(&j->nf);

                n = n > held ? n - held : 0;
        }
        *ret = uv_buf_init(j->rbuf, (unsigned)n);
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
        stream_send(&j->s, i == 0 ? FRAME_STDOUT : FRAME_STDERR, data, n);
        j->s.send_credit -= n < j->s.send_credit ? (uint64_t)n : j->s.send_credit;
}

static void on_out_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct job *j = st->data;
        int i = st == (uv_stream_t *)&j->out[0] ? 0 : 1;

        if (n == UV_ENOBUFS) {
                job_pause(j);
                return;
        }
        if (n < 0) {
                if (i == 1 && j->filtering && j->s.conn) {
                        size_t k = name_filter_flush(&j->nf, j->fbuf);

                        if (k > 0) {
                                stream_send(&j->s, FRAME_STDERR, j->fbuf, k);
                                j->s.send_credit -=
                                        k < j->s.send_credit ? (uint64_t)k : j->s.send_credit;
                        }
                }
                job_close_pipe(j, i);
                if ((j->got_status || j->shell_exited) && j->out_eof[0] && j->out_eof[1])
                        job_finish(j);
                return;
        }
        if (n == 0)
                return;
        job_send(j, i, b->base, (size_t)n);
        if (!job_may_read(j))
                job_pause(j);
}

static void job_start_reading(struct job *j)
{
        for (int i = 0; i < 2; i++) {
                if (j->out_eof[i] || j->reading[i])
                        continue;
                if (uv_read_start((uv_stream_t *)&j->out[i], on_out_alloc, on_out_read) < 0) {
                        job_close_pipe(j, i);
                        continue;
                }
                j->reading[i] = true;
        }
}

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

        if (j->started && job_may_read(j))
                job_start_reading(j);
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
                job_maybe_free(j);
                return;
        }
        if (detach)
                s->conn = NULL; /* already unlinked: output is drained and discarded */
        if (!j->finished && j->sess && !j->kill_phase2 && !j->got_status) {
                j->cancelled = true;
                uv_timer_stop(&j->timer);
                on_job_timer(&j->timer); /* kill what it started, then wait for the status */
        }
        job_maybe_free(j);
}

static const struct stream_ops job_ops = {
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
                uv_pipe_init(sess->a->loop, &j->out[i], 0);
                j->out[i].data = j;
                j->open_handles++;
                j->out_eof[i] = false;
                if (uv_pipe_open(&j->out[i], sess->prep.rd[i]) < 0) {
                        job_close_pipe(j, i);
                        prep_close(sess);
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                               "session '%s': watch fifo", sess->id);
                }
                sess->prep.rd[i] = -EBADF;
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
        /* set back to false as each FIFO's handle is made (job_open_fifos) */
        j->out_eof[0] = j->out_eof[1] = true;

        if (sess->pid < 0 && shell_spawn(sess, &err) < 0)
                goto fail;
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
                job_start_reading(j);
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
        job_finish(j);
}

static void pump(struct session *sess)
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

static void enqueue(struct session *sess, struct job *j)
{
        j->sess = sess;
        j->seq = ++sess->seq;
        j->hold[0] = j->hold[1] = -EBADF;
        if (sess->queue_tail)
                sess->queue_tail->next = j;
        else
                sess->queue = j;
        sess->queue_tail = j;
        pump(sess);
}

/* ---- sessions ---- */

static struct session *session_find(struct agent *a, const char *id)
{
        for (struct session *s = a->sessions; s; s = s->next)
                if (strcmp(s->id, id) == 0)
                        return s;
        return NULL;
}

static unsigned session_count(struct agent *a)
{
        unsigned n = 0;

        for (struct session *s = a->sessions; s; s = s->next)
                n++;
        return n;
}

/* Make a session (its shell starts now, so a bad cwd is reported here). */
static struct session *session_create(struct agent *a, const char *id, const char *cwd,
                                      char **base_env, size_t n_base, char **env, size_t n_env,
                                      int64_t timeout_ms, struct cella_error *err)
{
        struct session *sess;
        uint64_t nonce = 0;

        if (session_count(a) >= CELLA_AGENT_MAX_SESSIONS) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "a sandbox has at most %d sessions",
                                CELLA_AGENT_MAX_SESSIONS);
                return NULL;
        }
        sess = calloc(1, sizeof(*sess));
        if (!sess) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        sess->a = a;
        sess->pid = -1;
        sess->in_fd = -EBADF;
        sess->n = ++a->session_seq;
        snprintf(sess->id, sizeof(sess->id), "%s", id);
        snprintf(sess->dir, sizeof(sess->dir), "%s/sessions/s%u", a->run_dir, sess->n);
        if (getrandom(&nonce, sizeof(nonce), GRND_NONBLOCK) != sizeof(nonce))
                nonce = time_mono_us() ^ ((uint64_t)sess->n << 32);
        snprintf(sess->nonce, sizeof(sess->nonce), "%016llx", (unsigned long long)nonce);
        sess->cwd = strdup(cwd ? cwd : CELLA_WORKSPACE);
        sess->timeout_ms = timeout_ms;
        sess->created_ms = time_now_ms();
        if (!sess->cwd)
                goto oom;
        for (size_t i = 0; i < n_base; i++)
                if (env_apply(&sess->env, &sess->n_env, base_env[i], false) < 0)
                        goto oom;
        for (size_t i = 0; i < n_env; i++)
                if (env_apply(&sess->env, &sess->n_env, env[i], false) < 0)
                        goto oom;
        if (fs_mkdir_p(sess->dir, 0700) < 0) {
                cella_error_errno(err, errno, "session '%s': directory", id);
                goto fail;
        }
        if (shell_spawn(sess, err) < 0)
                goto fail;
        sess->next = a->sessions;
        a->sessions = sess;
        return sess;
oom:
        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
fail:
        sess->deleted = true;
        session_release(sess);
        return NULL;
}

static json_t *session_info(struct session *sess)
{
        char ts[32], link[64], cwd[CELLA_PATH_MAX];
        ssize_t n = -1;
        json_t *j;

        time_format_iso(sess->created_ms, ts, sizeof(ts));
        if (sess->pid > 0) {
                snprintf(link, sizeof(link), "/proc/%d/cwd", (int)sess->pid);
                n = readlink(link, cwd, sizeof(cwd) - 1);
        }
        if (n > 0)
                cwd[n] = '\0';
        j = json_pack("{s:s, s:s, s:s, s:b, s:b}", "id", sess->id, "cwd", n > 0 ? cwd : sess->cwd,
                      "createdAt", ts, "running", sess->pid > 0, "busy", sess->running != NULL);
        if (j && sess->timeout_ms > 0)
                json_object_set_new(j, "commandTimeoutMs", json_integer(sess->timeout_ms));
        return j;
}

/* Delete: the shell and everything in its cgroup are killed, waiting and running commands
 * end with SESSION_DESTROYED. */
static void session_delete(struct session *sess)
{
        struct agent *a = sess->a;

        for (struct session **p = &a->sessions; *p; p = &(*p)->next)
                if (*p == sess) {
                        *p = sess->next;
                        break;
                }
        sess->deleted = true;
        while (sess->queue) {
                struct job *j = sess->queue;

                sess->queue = j->next;
                j->next = NULL;
                j->sess = NULL;
                j->destroyed = true;
                j->finished = true;
                if (j->s.conn)
                        stream_end_error(&j->s, CELLA_E_SESSION_DESTROYED,
                                         "session '%s' was deleted", sess->id);
                job_maybe_free(j);
        }
        sess->queue_tail = NULL;
        if (sess->running) {
                sess->running->destroyed = true;
                sess->running->shell_exited = true;
                job_finish(sess->running);
        }
        /* background processes and the terminal started in it go with it */
        agent_session_ended(a, sess->id);
        kill_session(sess);
        if (sess->pid > 0)
                return; /* released when the shell is reaped */
        session_release(sess);
}

/* ---- requests ---- */

static struct job *job_new(const char *script_head, const char *command)
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

void session_exec(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct cella_error err = {0};
        _cleanup_buf_ struct buf head = BUF_INIT;
        struct session *sess = session_find(a, req->session);
        struct job *j;
        struct stat st;
        bool subshell = req->cwd_given || req->n_env > 0;

        if (!sess && strcmp(req->session, DEFAULT_SESSION) != 0) {
                conn_reply_error(c, req->stream, CELLA_E_SESSION_NOT_FOUND, "no session '%s'",
                                 req->session);
                return;
        }
        if (req->cwd_given) {
                /* checked here, like a sessionless command's cwd, for a clear error */
                if (stat(req->cwd, &st) < 0) {
                        conn_reply_error(c, req->stream, cella_code_from_errno(errno),
                                         "cwd '%s': %s", req->cwd, strerror(errno));
                        return;
                }
                if (!S_ISDIR(st.st_mode)) {
                        conn_reply_error(c, req->stream, CELLA_E_NOT_DIRECTORY,
                                         "cwd '%s': Not a directory", req->cwd);
                        return;
                }
        }
        if (!sess) {
                sess = session_create(a, DEFAULT_SESSION, NULL, req->base_env, req->n_base_env,
                                      NULL, 0, 0, &err);
                if (!sess) {
                        conn_send_error(c, req->stream, &err);
                        return;
                }
        }
        if (subshell) {
                if ((req->cwd_given &&
                     (buf_append_str(&head, "cd -- ") < 0 || sh_quote(&head, req->cwd) < 0 ||
                      buf_append_str(&head, " || exit\n") < 0))) {
                        conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
                for (size_t i = 0; i < req->n_env; i++) {
                        const char *eq = strchr(req->env[i], '=');

                        if (buf_append_str(&head, "export ") < 0 ||
                            buf_append(&head, req->env[i], (size_t)(eq - req->env[i])) < 0 ||
                            buf_append_str(&head, "=") < 0 || sh_quote(&head, eq + 1) < 0 ||
                            buf_append_str(&head, "\n") < 0) {
                                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR,
                                                 "out of memory");
                                return;
                        }
                }
        }
        j = job_new(head.data, req->command);
        if (!j) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        j->streamed = true;
        j->subshell = subshell;
        j->timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : sess->timeout_ms;
        if (conn_add_stream(c, &j->s, req->stream, &job_ops) < 0) {
                job_free(j);
                conn_reply_error(c, req->stream, CELLA_E_SANDBOX_UNAVAILABLE,
                                 "too many operations");
                return;
        }
        enqueue(sess, j);
}

/* setenv: the sessions' stored env changes (a new shell gets it) and a live shell runs
 * the matching export/unset lines in order with its commands. */
static int session_setenv(struct session *sess, const struct session_request *r)
{
        _cleanup_buf_ struct buf script = BUF_INIT;
        struct job *j;

        for (size_t i = 0; i < r->n_set; i++) {
                const char *eq = strchr(r->set[i], '=');

                if (env_apply(&sess->env, &sess->n_env, r->set[i], false) < 0 ||
                    buf_append_str(&script, "export ") < 0 ||
                    buf_append(&script, r->set[i], (size_t)(eq - r->set[i])) < 0 ||
                    buf_append_str(&script, "=") < 0 || sh_quote(&script, eq + 1) < 0 ||
                    buf_append_str(&script, "\n") < 0)
                        return -ENOMEM;
        }
        for (size_t i = 0; i < r->n_unset; i++)
                if (env_apply(&sess->env, &sess->n_env, r->unset[i], true) < 0 ||
                    buf_printf(&script, "unset %s\n", r->unset[i]) < 0)
                        return -ENOMEM;
        if (sess->pid < 0 || !script.data)
                return 0;
        j = job_new(NULL, script.data);
        if (!j)
                return -ENOMEM;
        enqueue(sess, j);
        return 0;
}

void session_request(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct session_request r;
        struct cella_error err = {0};
        struct session *sess;
        char gen[CELLA_ID_MAX + 1];

        if (session_request_decode(req->body, &r, &err) < 0) {
                conn_send_error(c, req->stream, &err);
                session_request_done(&r);
                return;
        }
        switch (r.op) {
        case SESSION_OP_CREATE:
                if (!r.id) {
                        uint32_t rnd = 0;

                        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
                                rnd = (uint32_t)time_mono_us();
                        snprintf(gen, sizeof(gen), "session-%08x", rnd);
                }
                if (session_find(a, r.id ? r.id : gen)) {
                        conn_reply_error(c, req->stream, CELLA_E_SESSION_ALREADY_EXISTS,
                                         "session '%s' already exists", r.id ? r.id : gen);
                        break;
                }
                sess = session_create(a, r.id ? r.id : gen, r.cwd, r.base_env, r.n_base_env, r.env,
                                      r.n_env, r.timeout_ms, &err);
                if (!sess)
                        conn_send_error(c, req->stream, &err);
                else
                        conn_send_json(c, FRAME_RESULT, req->stream, session_info(sess));
                break;
        case SESSION_OP_DELETE:
                sess = session_find(a, r.id);
                if (!sess) {
                        conn_reply_error(c, req->stream, CELLA_E_SESSION_NOT_FOUND,
                                         "no session '%s'", r.id);
                        break;
                }
                session_delete(sess);
                conn_send_json(c, FRAME_RESULT, req->stream, json_pack("{s:s}", "id", r.id));
                break;
        case SESSION_OP_LIST: {
                json_t *list = json_array();

                for (sess = a->sessions; sess && list; sess = sess->next)
                        json_array_append_new(list, session_info(sess));
                conn_send_json(c, FRAME_RESULT, req->stream,
                               list ? json_pack("{s:o}", "sessions", list) : NULL);
                break;
        }
        case SESSION_OP_SETENV: {
                int k = 0;

                if (r.id) {
                        sess = session_find(a, r.id);
                        if (!sess) {
                                conn_reply_error(c, req->stream, CELLA_E_SESSION_NOT_FOUND,
                                                 "no session '%s'", r.id);
                                break;
                        }
                        k = session_setenv(sess, &r);
                } else {
                        for (sess = a->sessions; sess && k == 0; sess = sess->next)
                                k = session_setenv(sess, &r);
                }
                if (k < 0)
                        conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                else
                        conn_send_json(c, FRAME_RESULT, req->stream, json_object());
                break;
        }
        }
        session_request_done(&r);
}

int session_spawn_context(struct agent *a, const char *sid, char **base_env, size_t n_base,
                          char **ret_cwd, char ***ret_env, size_t *ret_n, struct cella_error *err)
{
        struct session *sess = session_find(a, sid);
        char link[64], cwd[CELLA_PATH_MAX];
        ssize_t n = -1;
        char **env = NULL;
        size_t count = 0;

        if (!sess && strcmp(sid, DEFAULT_SESSION) == 0)
                sess = session_create(a, DEFAULT_SESSION, NULL, base_env, n_base, NULL, 0, 0, err);
        if (!sess) {
                if (!cella_error_is_set(err))
                        cella_error_set(err, CELLA_E_SESSION_NOT_FOUND, "no session '%s'", sid);
                return -ENOENT;
        }
        if (sess->pid > 0) {
                snprintf(link, sizeof(link), "/proc/%d/cwd", (int)sess->pid);
                n = readlink(link, cwd, sizeof(cwd) - 1);
        }
        if (n > 0)
                cwd[n] = '\0';
        for (size_t i = 0; i < sess->n_env; i++)
                if (env_apply(&env, &count, sess->env[i], false) < 0)
                        goto oom;
        *ret_cwd = strdup(n > 0 ? cwd : sess->cwd);
        if (!*ret_cwd)
                goto oom;
        *ret_env = env;
        *ret_n = count;
        return 0;
oom:
        agent_env_free(env, count);
        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        return -ENOMEM;
}

void session_init(struct agent *a)
{
        char dir[192];

        snprintf(dir, sizeof(dir), "%s/sessions", a->run_dir);
        rm_tree(dir);
        if (fs_mkdir_p(dir, 0700) < 0)
                log_warn("mkdir %s: %s", dir, strerror(errno));
}

void session_free_all(struct agent *a)
{
        while (a->sessions) {
                struct session *sess = a->sessions;
                pid_t pid = sess->pid;

                session_delete(sess);
                if (pid > 0) {
                        /* Shutting down: no SIGCHLD will come; reap it here. */
                        int st;

                        while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
                                ;
                        agent_unwatch_child(a, pid);
                        on_shell_exit(sess, pid, st);
                }
        }
}
