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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/agent.h"
#include "common/limits.h"
#include "common/log.h"

#define EXIT_GRACE_MS 100
#define CGROUP_ROOT "/sys/fs/cgroup"

enum child_step { STEP_CHDIR = 1, STEP_EXEC = 2, STEP_SETUP = 3 };

/* What the child reports on the error pipe before exec (async-signal-safe to write). */
struct child_failure {
        int step;
        int err;
};

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
        uv_pipe_t out[2];           /* stdout, stderr */
        bool out_eof[2];            /* at EOF and closed (or being closed) */
        bool reading[2];
        uv_timer_t timeout;
        uv_timer_t grace;
        unsigned open_handles;
        char *cgroup; /* path of the command's cgroup, or NULL */
        char rbuf[CELLA_FRAME_DATA_CHUNK];
};

/* ---- cgroups ---- */

void agent_add_dead_cgroup(struct agent *a, const char *path)
{
        char **n;
        char *copy;

        if (a->n_dead_cgroups >= CELLA_AGENT_MAX_STREAMS * 4) {
                log_warn("too many cgroups waiting for removal; leaving %s", path);
                return;
        }
        copy = strdup(path);
        n = realloc(a->dead_cgroups, (a->n_dead_cgroups + 1) * sizeof(char *));
        if (!copy || !n) {
                free(copy);
                if (n)
                        a->dead_cgroups = n;
                return;
        }
        a->dead_cgroups = n;
        a->dead_cgroups[a->n_dead_cgroups++] = copy;
}

void exec_reap_cgroups(struct agent *a)
{
        size_t i = 0;

        while (i < a->n_dead_cgroups) {
                if (rmdir(a->dead_cgroups[i]) == 0 || errno == ENOENT) {
                        free(a->dead_cgroups[i]);
                        a->dead_cgroups[i] = a->dead_cgroups[--a->n_dead_cgroups];
                } else {
                        i++;
                }
        }
}

static int write_file(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = write(fd, text, strlen(text));
        if (n < 0) {
                n = -errno;
                close(fd);
                return (int)n;
        }
        close(fd);
        return 0;
}

/* Make the command's cgroup; NULL (and no cgroup) if that is not possible. */
static char *cgroup_make(struct agent *a, uint32_t id)
{
        char path[128];

        snprintf(path, sizeof(path), CGROUP_ROOT "/cmd-%u", id);
        if (mkdir(path, 0755) == 0)
                return strdup(path);
        if (errno == EEXIST && rmdir(path) == 0 && mkdir(path, 0755) == 0)
                return strdup(path);
        /* An earlier command with this stream id still has processes in its cgroup. */
        snprintf(path, sizeof(path), CGROUP_ROOT "/cmd-%u-%llu", id, (unsigned long long)++a->seq);
        if (mkdir(path, 0755) == 0)
                return strdup(path);
        log_warn("mkdir %s: %s", path, strerror(errno));
        return NULL;
}

static void kill_cgroup_procs(const char *cgroup)
{
        char path[160], line[32];
        FILE *f;

        snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
        f = fopen(path, "re");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                char *end;
                long pid = strtol(line, &end, 10);

                if (pid > 1 && (*end == '\n' || *end == '\0'))
                        kill((pid_t)pid, SIGKILL);
        }
        fclose(f);
}

/* Kill the command's whole tree: its cgroup (cgroup.kill, or every pid in it on kernels
 * before 5.14) and its process group. */
static void kill_tree(struct exec *e)
{
        if (e->cgroup) {
                char path[160];

                snprintf(path, sizeof(path), "%s/cgroup.kill", e->cgroup);
                if (write_file(path, "1") < 0)
                        kill_cgroup_procs(e->cgroup);
        }
        if (e->pid > 0) {
                kill(-e->pid, SIGKILL);
                if (!e->reaped)
                        kill(e->pid, SIGKILL);
        }
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
                if (rmdir(e->cgroup) < 0 && errno != ENOENT)
                        agent_add_dead_cgroup(a, e->cgroup);
                free(e->cgroup);
        }
        free(e);
}

static void exec_maybe_free(struct exec *e)
{
        if (e->reaped && e->finished && e->open_handles == 0 && !e->s.conn)
                exec_free(e);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct exec *e = h->data;

        e->open_handles--;
        exec_maybe_free(e);
}

static void close_handle(struct exec *e, uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, on_handle_closed);
}

static void close_pipe(struct exec *e, int i)
{
        if (e->out_eof[i])
                return;
        e->out_eof[i] = true;
        e->reading[i] = false;
        close_handle(e, (uv_handle_t *)&e->out[i]);
}

/* Nothing more will be sent: close every handle. */
static void exec_done(struct exec *e)
{
        e->finished = true;
        close_pipe(e, 0);
        close_pipe(e, 1);
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
        if (e->out_eof[0] && e->out_eof[1])
                send_exit(e);
}

/* ---- output ---- */

static bool may_read(struct exec *e)
{
        return !e->finished && e->s.send_credit > 0 && !stream_congested(&e->s);
}

static void pause_reading(struct exec *e)
{
        for (int i = 0; i < 2; i++)
                if (e->reading[i]) {
                        uv_read_stop((uv_stream_t *)&e->out[i]);
                        e->reading[i] = false;
                }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct exec *e = h->data;
        size_t n = sizeof(e->rbuf);

        (void)suggested;
        if (e->s.send_credit < n)
                n = (size_t)e->s.send_credit;
        *ret = uv_buf_init(e->rbuf, (unsigned)n);
}

static void on_output(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct exec *e = st->data;
        int i = st == (uv_stream_t *)&e->out[0] ? 0 : 1;

        if (n == UV_ENOBUFS) {
                pause_reading(e);
                return;
        }
        if (n < 0) {
                if (n != UV_EOF)
                        log_debug("read command output: %s", uv_strerror((int)n));
                close_pipe(e, i);
                check_finished(e);
                return;
        }
        if (n == 0)
                return;
        stream_send(&e->s, i == 0 ? FRAME_STDOUT : FRAME_STDERR, b->base, (size_t)n);
        e->s.send_credit -= (uint64_t)n;
        if (!may_read(e))
                pause_reading(e);
}

static void start_reading(struct exec *e)
{
        for (int i = 0; i < 2; i++) {
                if (e->out_eof[i] || e->reading[i])
                        continue;
                if (uv_read_start((uv_stream_t *)&e->out[i], on_alloc, on_output) < 0) {
                        close_pipe(e, i);
                        continue;
                }
                e->reading[i] = true;
        }
}

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
        start_reading(e);
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

/* base environment overlaid by the request's "K=V" strings; the array borrows them. */
static char **build_env(const struct agent_request *req, char *base[], size_t nbase)
{
        char **env = calloc(nbase + req->n_env + 1, sizeof(char *));
        size_t n = 0;

        if (!env)
                return NULL;
        for (size_t i = 0; i < nbase; i++)
                env[n++] = base[i];
        for (size_t i = 0; i < req->n_env; i++) {
                const char *kv = req->env[i];
                size_t klen = (size_t)(strchr(kv, '=') - kv);
                size_t j;

                for (j = 0; j < n; j++)
                        if (strncmp(env[j], kv, klen + 1) == 0)
                                break;
                env[j] = req->env[i];
                if (j == n)
                        n++;
        }
        env[n] = NULL;
        return env;
}

/* Commands longer than one execve argument may be (MAX_ARG_STRLEN, 128 KiB) are written
 * to a memfd that the child gets as SCRIPT_FD and bash sources. bash reads a sourced file
 * completely before running it, so the script's first line closes the descriptor and the
 * command's processes do not inherit it. */
#define MAX_ARG_BYTES (120 * 1024)
#define SCRIPT_FD 9
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

static int command_memfd(const char *command)
{
        static const char head[] = "exec " STRINGIFY(SCRIPT_FD) "<&-\n";
        size_t len = strlen(command), off = 0;
        int fd = memfd_create("cella-command", MFD_CLOEXEC), err;

        if (fd < 0)
                return -errno;
        if (write(fd, head, sizeof(head) - 1) != (ssize_t)(sizeof(head) - 1))
                goto fail;
        while (off < len) {
                ssize_t n = write(fd, command + off, len - off);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        goto fail;
                off += (size_t)n;
        }
        if (lseek(fd, 0, SEEK_SET) < 0)
                goto fail;
        return fd;
fail:
        err = errno ? errno : EIO;
        close(fd);
        return -err;
}

/* The child between fork and exec: async-signal-safe calls only. */
_Noreturn static void run_child(int errfd, int nullfd, int outfd, int errout, int procsfd,
                                int scriptfd, const char *cwd, const char *shell,
                                char *const argv[], char *const envp[])
{
        struct child_failure f = {STEP_SETUP, 0};
        struct sigaction sa;
        sigset_t none;
        int fd;

        setsid();
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = SIG_DFL;
        for (int sig = 1; sig < NSIG; sig++)
                sigaction(sig, &sa, NULL);
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);

        fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) {
                if (write(fd, "0", 1) < 0) {
                        /* not fatal: the sandbox may not allow it */
                }
                close(fd);
        }
        if (procsfd >= 0 && write(procsfd, "0", 1) < 0) {
                /* not fatal: the process group still lets us kill the tree */
        }
        if (dup2(nullfd, 0) < 0 || dup2(outfd, 1) < 0 || dup2(errout, 2) < 0 ||
            (scriptfd >= 0 && scriptfd != SCRIPT_FD && dup2(scriptfd, SCRIPT_FD) < 0) ||
            (scriptfd == SCRIPT_FD && fcntl(SCRIPT_FD, F_SETFD, 0) < 0))
                goto fail;
        if (chdir(cwd) < 0) {
                f.step = STEP_CHDIR;
                goto fail;
        }
        execve(shell, argv, envp);
        f.step = STEP_EXEC;
fail:
        f.err = errno;
        if (write(errfd, &f, sizeof(f)) < 0) {
                /* nothing left to do */
        }
        _exit(127);
}

static void reply_error(struct conn *c, uint32_t id, int code, const char *fmt, ...) _printf_(4, 5);
static void reply_error(struct conn *c, uint32_t id, int code, const char *fmt, ...)
{
        struct cella_error err = {0};
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(&err, code, fmt, ap);
        va_end(ap);
        conn_send_error(c, id, &err);
}

static void close_fd(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

void exec_start(struct agent *a, struct conn *c, struct agent_request *req)
{
        int outp[2] = {-EBADF, -EBADF}, errp[2] = {-EBADF, -EBADF};
        int failp[2] = {-EBADF, -EBADF};
        _cleanup_close_ int nullfd = -EBADF, procsfd = -EBADF, scriptfd = -EBADF;
        char hostname[256] = "localhost";
        char *base[5] = {NULL};
        char **envp = NULL;
        const char *shell = "/bin/bash";
        char *argv[4];
        struct child_failure f;
        sigset_t all, saved;
        struct exec *e;
        ssize_t n;
        pid_t pid;

        e = calloc(1, sizeof(*e));
        if (!e) {
                reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        e->a = a;
        e->pid = -1;
        if (access(shell, X_OK) < 0)
                shell = "/bin/sh";
        argv[0] = (char *)(strcmp(shell, "/bin/sh") == 0 ? "sh" : "bash");
        argv[1] = (char *)"-c";
        argv[2] = req->command;
        if (strlen(req->command) > MAX_ARG_BYTES && strcmp(argv[0], "bash") == 0) {
                /* Too long for one execve argument: bash sources it from a memfd. */
                scriptfd = command_memfd(req->command);
                if (scriptfd < 0) {
                        reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "pass the command: %s",
                                    strerror(-scriptfd));
                        goto out;
                }
                argv[2] = (char *)". /dev/fd/" STRINGIFY(SCRIPT_FD);
        }
        argv[3] = NULL;
        if (gethostname(hostname, sizeof(hostname) - 1) < 0)
                snprintf(hostname, sizeof(hostname), "localhost");
        base[0] = strdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        base[1] = strdup("HOME=/root");
        base[2] = malloc(strlen(hostname) + 10);
        base[3] = strdup("LANG=C.UTF-8");
        base[4] = malloc(strlen(req->cwd) + 5);
        if (base[2])
                snprintf(base[2], strlen(hostname) + 10, "HOSTNAME=%s", hostname);
        if (base[4])
                snprintf(base[4], strlen(req->cwd) + 5, "PWD=%s", req->cwd);
        for (size_t i = 0; i < ARRAY_SIZE(base); i++)
                if (!base[i])
                        goto oom;
        envp = build_env(req, base, ARRAY_SIZE(base));
        if (!envp)
                goto oom;

        nullfd = open("/dev/null", O_RDONLY | O_CLOEXEC);
        if (nullfd < 0 || pipe2(outp, O_CLOEXEC) < 0 || pipe2(errp, O_CLOEXEC) < 0 ||
            pipe2(failp, O_CLOEXEC) < 0) {
                reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "pipes: %s", strerror(errno));
                goto out;
        }
        if (a->use_cgroup) {
                e->cgroup = cgroup_make(a, req->stream);
                if (e->cgroup) {
                        char path[160];

                        snprintf(path, sizeof(path), "%s/cgroup.procs", e->cgroup);
                        procsfd = open(path, O_WRONLY | O_CLOEXEC);
                }
        }

        /* No signal handler of ours may run in the child before it resets them. */
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &saved);
        pid = fork();
        if (pid != 0)
                sigprocmask(SIG_SETMASK, &saved, NULL);
        if (pid < 0) {
                reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "fork: %s", strerror(errno));
                goto out;
        }
        if (pid == 0)
                run_child(failp[1], nullfd, outp[1], errp[1], procsfd, scriptfd, req->cwd, shell,
                          argv, envp);
        close_fd(&failp[1]);
        close_fd(&outp[1]);
        close_fd(&errp[1]);
        /* Blocks for the fork-to-exec time only: the pipe closes on exec. */
        do
                n = read(failp[0], &f, sizeof(f));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(f)) {
                int status;

                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
                if (f.step == STEP_CHDIR)
                        reply_error(c, req->stream, cella_code_from_errno(f.err), "cwd '%s': %s",
                                    req->cwd, strerror(f.err));
                else
                        reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "%s %s: %s",
                                    f.step == STEP_EXEC ? "exec" : "set up", shell,
                                    strerror(f.err));
                goto out;
        }

        /* Running. From here on the exec object owns everything. */
        e->pid = pid;
        conn_add_stream(c, &e->s, req->stream, &exec_ops);
        e->next_all = a->execs;
        if (a->execs)
                a->execs->prev_all = e;
        a->execs = e;
        stream_send_json(&e->s, FRAME_STARTED, json_pack("{s:i}", "pid", (int)pid));

        uv_timer_init(a->loop, &e->timeout);
        uv_timer_init(a->loop, &e->grace);
        e->timeout.data = e->grace.data = e;
        e->open_handles = 2;
        for (int i = 0; i < 2; i++) {
                int *fd = i == 0 ? &outp[0] : &errp[0];

                uv_pipe_init(a->loop, &e->out[i], 0);
                e->out[i].data = e;
                e->open_handles++;
                if (uv_pipe_open(&e->out[i], *fd) < 0) {
                        close_pipe(e, i);
                        continue;
                }
                *fd = -EBADF; /* owned by the handle now */
        }
        if (req->timeout_ms > 0)
                uv_timer_start(&e->timeout, on_timeout, (uint64_t)req->timeout_ms, 0);
        start_reading(e);
        log_debug("stream %u: started pid %d", req->stream, (int)pid);
        e = NULL;

out:
        if (e) {
                if (e->cgroup) {
                        rmdir(e->cgroup);
                        free(e->cgroup);
                }
                free(e);
        }
        close_fd(&outp[0]);
        close_fd(&outp[1]);
        close_fd(&errp[0]);
        close_fd(&errp[1]);
        close_fd(&failp[0]);
        close_fd(&failp[1]);
        free(envp);
        for (size_t i = 0; i < ARRAY_SIZE(base); i++)
                free(base[i]);
        return;
oom:
        reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
        goto out;
}
