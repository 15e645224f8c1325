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
 * has ended or been detached, and its libuv handles are closed.
 *
 * This file holds the sessions and the SESSION and EXEC requests; the shell, the queue of
 * commands and their output are in session-shell.c beneath it. */
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

#include "agent/service.h"
#include "agent/session-shell.h"
#include "agent/session.h"
#include "common/fsutil.h"
#include "common/buf.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/path.h"
#include "common/timeutil.h"

#define DEFAULT_SESSION "default"

/* ---- small helpers ---- */

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
        if (session_shell_spawn(sess, err) < 0)
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
                session_job_maybe_free(j);
        }
        sess->queue_tail = NULL;
        if (sess->running) {
                sess->running->destroyed = true;
                sess->running->shell_exited = true;
                session_job_finish(sess->running);
        }
        /* background processes and the terminal started in it go with it */
        agent_session_ended(a, sess->id);
        session_kill(sess);
        if (sess->pid > 0)
                return; /* released when the shell is reaped */
        session_release(sess);
}

/* ---- requests ---- */

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
        j = session_job_new(head.data, req->command);
        if (!j) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        j->streamed = true;
        j->subshell = subshell;
        j->timeout_ms = req->timeout_ms > 0 ? req->timeout_ms : sess->timeout_ms;
        if (conn_add_stream(c, &j->s, req->stream, &session_job_ops) < 0) {
                session_job_free(j);
                conn_reply_error(c, req->stream, CELLA_E_SANDBOX_UNAVAILABLE,
                                 "too many operations");
                return;
        }
        session_enqueue(sess, j);
}

/* setenv: the sessions' stored env changes (a new shell gets it) and a live shell runs
 * the matching export/unset lines in order with its commands: they are written to its
 * stdin now, behind the line it runs (if any) and ahead of its next command's line, so a
 * setenv costs its next command no round trip of its own, and the shell's wakeup to run
 * them is not on that command's path (the env a pool sandbox gets at its claim, decision
 * 0059). What the pipe does not take at once waits in sess->env_lines, written just
 * ahead of the next command's line. */
static int session_setenv(struct session *sess, const struct session_request *r)
{
        _cleanup_buf_ struct buf script = BUF_INIT;

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
        if (buf_append(&sess->env_lines, script.data, script.len) < 0)
                return -ENOMEM;
        session_shell_send_env(sess);
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
                if (!r.ctx.id) {
                        uint32_t rnd = 0;

                        if (getrandom(&rnd, sizeof(rnd), GRND_NONBLOCK) != sizeof(rnd))
                                rnd = (uint32_t)time_mono_us();
                        snprintf(gen, sizeof(gen), "session-%08x", rnd);
                }
                if (session_find(a, r.ctx.id ? r.ctx.id : gen)) {
                        conn_reply_error(c, req->stream, CELLA_E_SESSION_ALREADY_EXISTS,
                                         "session '%s' already exists", r.ctx.id ? r.ctx.id : gen);
                        break;
                }
                sess = session_create(a, r.ctx.id ? r.ctx.id : gen, r.ctx.cwd, r.ctx.base_env,
                                      r.ctx.n_base_env, r.ctx.env, r.ctx.n_env, r.timeout_ms, &err);
                if (!sess)
                        conn_send_error(c, req->stream, &err);
                else
                        conn_send_json(c, FRAME_RESULT, req->stream, session_info(sess));
                break;
        case SESSION_OP_DELETE:
                sess = session_find(a, r.ctx.id);
                if (!sess) {
                        conn_reply_error(c, req->stream, CELLA_E_SESSION_NOT_FOUND,
                                         "no session '%s'", r.ctx.id);
                        break;
                }
                session_delete(sess);
                conn_send_json(c, FRAME_RESULT, req->stream, json_pack("{s:s}", "id", r.ctx.id));
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

                if (r.ctx.id) {
                        sess = session_find(a, r.ctx.id);
                        if (!sess) {
                                conn_reply_error(c, req->stream, CELLA_E_SESSION_NOT_FOUND,
                                                 "no session '%s'", r.ctx.id);
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
        session_rm_dir(dir);
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
                        session_on_shell_exit(sess, pid, st);
                }
        }
}
