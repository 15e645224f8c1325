/* Starting commands and managing their cgroups, shared by EXEC commands (exec.c),
 * background processes (proc.c) and session shells (session.c).
 *
 * agent_spawn clones with every signal blocked, the child born in the given cgroup
 * (clone3 CLONE_INTO_CGROUP: joining one later through cgroup.procs waits for an RCU grace
 * period, milliseconds on a quiet host; fork and that write where clone3 is missing); the
 * child resets all dispositions and the mask, starts a new session (its own process
 * group), takes /dev/null as stdin and the two pipes as stdout/stderr, changes directory
 * and execs `bash -c command` (or `sh -c` where bash is missing), a session's shell, a
 * terminal's `bash -i` on a pty that it makes its controlling terminal, or an interpreter
 * runner that reads its source from stdin (a memfd). Between fork and exec it does only
 * async-signal-safe work and reports a failure as a {step, errno} record on a close-on-exec
 * pipe, which the parent reads: EOF there means the exec happened. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sched.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/service.h"
#include "common/fsutil.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/path.h"

#define CGROUP_ROOT "/sys/fs/cgroup"

enum child_step { STEP_CHDIR = 1, STEP_EXEC = 2, STEP_SETUP = 3 };

/* What the child reports on the error pipe before exec (async-signal-safe to write). */
struct child_failure {
        int step;
        int err;
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

/* rmdir path after its sub-cgroups (a command may make its own): 0 or -errno. */
static int cgroup_rmdir_tree(const char *path, int depth)
{
        DIR *d;
        struct dirent *de;

        if (rmdir(path) == 0 || errno == ENOENT)
                return 0;
        if (errno != EBUSY || depth >= 8 || !(d = opendir(path)))
                return -errno;
        while ((de = readdir(d))) {
                char sub[CELLA_PATH_MAX];

                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                snprintf(sub, sizeof(sub), "%s/%s", path, de->d_name);
                (void)cgroup_rmdir_tree(sub, depth + 1);
        }
        closedir(d);
        return rmdir(path) == 0 || errno == ENOENT ? 0 : -errno;
}

void exec_reap_cgroups(struct agent *a)
{
        size_t i = 0;

        while (i < a->n_dead_cgroups) {
                if (cgroup_rmdir_tree(a->dead_cgroups[i], 0) == 0) {
                        free(a->dead_cgroups[i]);
                        a->dead_cgroups[i] = a->dead_cgroups[--a->n_dead_cgroups];
                } else {
                        i++;
                }
        }
}

void agent_cgroup_remove(struct agent *a, const char *path)
{
        if (cgroup_rmdir_tree(path, 0) < 0)
                agent_add_dead_cgroup(a, path);
}

char *agent_cgroup_make(struct agent *a, const char *name)
{
        char path[128];

        snprintf(path, sizeof(path), CGROUP_ROOT "/%s", name);
        if (mkdir(path, 0755) == 0)
                return strdup(path);
        if (errno == EEXIST && rmdir(path) == 0 && mkdir(path, 0755) == 0)
                return strdup(path);
        /* An earlier user of this name still has processes in its cgroup. */
        snprintf(path, sizeof(path), CGROUP_ROOT "/%s-%llu", name, (unsigned long long)++a->seq);
        if (mkdir(path, 0755) == 0)
                return strdup(path);
        log_warn("mkdir %s: %s", path, strerror(errno));
        return NULL;
}

int agent_cgroup_signal(const char *cgroup, int sig)
{
        char path[160], line[32];
        int n = 0;
        FILE *f;

        /* Every pid in it. A process forking while we read may escape; callers that must
         * end the tree escalate to agent_kill_tree. */
        snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
        f = fopen(path, "re");
        if (!f)
                return 0;
        while (fgets(line, sizeof(line), f)) {
                char *end;
                long pid = strtol(line, &end, 10);

                if (pid > 1 && (*end == '\n' || *end == '\0') && kill((pid_t)pid, sig) == 0)
                        n++;
        }
        fclose(f);
        return n;
}

bool agent_cgroup_is_empty(const char *cgroup)
{
        char path[160], buf[64];

        /* no file (the cgroup is gone) or nothing in it */
        snprintf(path, sizeof(path), "%s/cgroup.procs", cgroup);
        return fs_read_small(path, buf, sizeof(buf)) <= 0;
}

/* ---- environment ---- */

/* Overlay "K=V" strings onto env[0..*n) (replacing an equal key). */
static void env_overlay(char **env, size_t *n, char *const *kvs, size_t nkv)
{
        for (size_t i = 0; i < nkv; i++) {
                const char *kv = kvs[i];
                size_t klen = (size_t)(strchr(kv, '=') - kv);
                size_t j;

                for (j = 0; j < *n; j++)
                        if (strncmp(env[j], kv, klen + 1) == 0)
                                break;
                env[j] = kvs[i];
                if (j == *n)
                        (*n)++;
        }
}

/* ---- the command ---- */

/* Commands longer than one execve argument may be (MAX_ARG_STRLEN, 128 KiB) are written
 * to a memfd that the child gets as SCRIPT_FD and bash sources. bash reads a sourced file
 * completely before running it, so the script's first line closes the descriptor and the
 * command's processes do not inherit it. */
#define MAX_ARG_BYTES (120 * 1024)
#define SCRIPT_FD 9
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* A memfd holding head then text, its offset at 0 (close-on-exec). */
static int text_memfd(const char *name, const char *head, const char *text)
{
        size_t hlen = strlen(head), len = strlen(text), off = 0;
        int fd = memfd_create(name, MFD_CLOEXEC), err;

        if (fd < 0)
                return -errno;
        if (hlen && write(fd, head, hlen) != (ssize_t)hlen)
                goto fail;
        while (off < len) {
                ssize_t n = write(fd, text + off, len - off);

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

static int command_memfd(const char *command)
{
        return text_memfd("cella-command", "exec " STRINGIFY(SCRIPT_FD) "<&-\n", command);
}

/* The child between fork and exec: async-signal-safe calls only. */
_Noreturn static void run_child(int errfd, int infd, int outfd, int errout, int procsfd,
                                int scriptfd, const int runner[2], bool tty, const char *cwd,
                                const char *shell, char *const argv[], char *const envp[])
{
        int hi[2] = {-1, -1};
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
        if (dup2(infd, 0) < 0 || dup2(outfd, 1) < 0 || dup2(errout, 2) < 0 ||
            (scriptfd >= 0 && scriptfd != SCRIPT_FD && dup2(scriptfd, SCRIPT_FD) < 0) ||
            (scriptfd == SCRIPT_FD && fcntl(SCRIPT_FD, F_SETFD, 0) < 0))
                goto fail;
        /* A runner's request and event pipes become fds 3 and 4: moved above them first so
         * that neither dup2 overwrites the other's source. */
        if (runner[0] >= 0) {
                hi[0] = fcntl(runner[0], F_DUPFD_CLOEXEC, 10);
                hi[1] = fcntl(runner[1], F_DUPFD_CLOEXEC, 10);
                if (hi[0] < 0 || hi[1] < 0 || dup2(hi[0], 3) < 0 || dup2(hi[1], 4) < 0)
                        goto fail;
        }
        /* A terminal's shell: the pty (now 0, 1 and 2) becomes the new session's
         * controlling terminal, and the shell its foreground process group. */
        if (tty && ioctl(0, TIOCSCTTY, 0) < 0)
                goto fail;
        if (chdir(cwd) < 0) {
                /* /workspace is the sandbox's, so it may be gone, a file or a symlink to
                 * nowhere: a command that did not ask for another directory then starts in
                 * / and says so, and the tenant can repair it (decision 0032). */
                static const char msg1[] = "cella: cannot enter " CELLA_WORKSPACE ": ";
                static const char msg2[] = "; running in /\n";
                const char *why = errno == ENOENT    ? "it does not exist"
                                  : errno == ENOTDIR ? "it is not a directory"
                                  : errno == EACCES  ? "permission denied"
                                  : errno == ELOOP   ? "too many symlinks"
                                                     : "it cannot be entered";

                if (strcmp(cwd, CELLA_WORKSPACE) != 0 || chdir("/") < 0) {
                        f.step = STEP_CHDIR;
                        goto fail;
                }
                if (write(2, msg1, sizeof(msg1) - 1) < 0 || write(2, why, strlen(why)) < 0 ||
                    write(2, msg2, sizeof(msg2) - 1) < 0) {
                        /* stderr may be /dev/null or closed: nothing to do */
                }
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

static void close_fd(int *fd)
{
        if (*fd >= 0)
                close(*fd);
        *fd = -EBADF;
}

int agent_spawn(const struct spawn_request *sr, struct spawn_result *ret, struct cella_error *err)
{
        int outp[2] = {-EBADF, -EBADF}, errp[2] = {-EBADF, -EBADF};
        int failp[2] = {-EBADF, -EBADF}, inp[2] = {-EBADF, -EBADF};
        int evp[2] = {-EBADF, -EBADF}, runner[2] = {-1, -1};
        _cleanup_close_ int nullfd = -EBADF, procsfd = -EBADF, scriptfd = -EBADF, cgfd = -EBADF;
        _cleanup_close_ int stdinfd = -EBADF;
        char hostname[256] = "localhost";
        char *base[5] = {NULL};
        char **envp = NULL;
        const char *shell = "/bin/bash";
        char *argv[6];
        struct child_failure f;
        sigset_t all, saved;
        size_t nenv = 0, cap = ARRAY_SIZE(base) + sr->n_base_env + sr->n_env + 1;
        ssize_t n;
        pid_t pid;
        bool oom = false;
        int r = -EIO;

        ret->pid = -1;
        ret->failed_step = false;
        ret->out = ret->err = ret->in = ret->ev = -EBADF;
        if (sr->exe)
                shell = sr->exe;
        else if (access(shell, X_OK) < 0)
                shell = "/bin/sh";
        ret->is_bash = strcmp(shell, "/bin/bash") == 0;
        argv[0] = (char *)(ret->is_bash ? "bash" : "sh");
        argv[1] = (char *)"-c";
        argv[2] = (char *)sr->command;
        argv[3] = NULL;
        if (sr->exe) {
                ret->is_bash = false;
        } else if (sr->terminal) {
                argv[1] = (char *)"-i";
                argv[2] = NULL;
        } else if (sr->session_shell && ret->is_bash) {
                argv[1] = (char *)"--noprofile";
                argv[2] = (char *)"--norc";
                argv[3] = (char *)"-O";
                argv[4] = (char *)"expand_aliases";
                argv[5] = NULL;
        } else if (sr->session_shell) {
                argv[1] = NULL;
        } else if (strlen(sr->command) > MAX_ARG_BYTES && ret->is_bash) {
                /* Too long for one execve argument: bash sources it from a memfd. */
                scriptfd = command_memfd(sr->command);
                if (scriptfd < 0) {
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "pass the command: %s",
                                        strerror(-scriptfd));
                        r = scriptfd;
                        goto out;
                }
                argv[2] = (char *)". /dev/fd/" STRINGIFY(SCRIPT_FD);
        }
        if (gethostname(hostname, sizeof(hostname) - 1) < 0)
                snprintf(hostname, sizeof(hostname), "localhost");
        base[0] = strdup("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
        base[1] = strdup("HOME=/root");
        base[2] = malloc(strlen(hostname) + 10);
        base[3] = strdup("LANG=C.UTF-8");
        base[4] = malloc(strlen(sr->cwd) + 5);
        if (base[2])
                snprintf(base[2], strlen(hostname) + 10, "HOSTNAME=%s", hostname);
        if (base[4])
                snprintf(base[4], strlen(sr->cwd) + 5, "PWD=%s", sr->cwd);
        envp = calloc(cap, sizeof(char *));
        for (size_t i = 0; i < ARRAY_SIZE(base); i++)
                if (!base[i])
                        oom = true;
        if (!envp || oom) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                r = -ENOMEM;
                goto out;
        }
        env_overlay(envp, &nenv, base, ARRAY_SIZE(base));
        env_overlay(envp, &nenv, sr->base_env, sr->n_base_env);
        env_overlay(envp, &nenv, sr->env, sr->n_env);
        envp[nenv] = NULL;

        if (sr->stdin_text) {
                stdinfd = text_memfd("cella-stdin", "", sr->stdin_text);
                if (stdinfd < 0) {
                        r = stdinfd;
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "stdin: %s", strerror(-r));
                        goto out;
                }
        }
        nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nullfd < 0 || (!sr->terminal && pipe2(outp, O_CLOEXEC) < 0) ||
            (!sr->session_shell && !sr->terminal && pipe2(errp, O_CLOEXEC) < 0) ||
            ((sr->session_shell || sr->exe) && pipe2(inp, O_CLOEXEC) < 0) ||
            (sr->exe && pipe2(evp, O_CLOEXEC) < 0) || pipe2(failp, O_CLOEXEC) < 0) {
                r = -errno;
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "pipes: %s", strerror(errno));
                goto out;
        }
        if (sr->cgroup) {
                char path[160];

                cgfd = open(sr->cgroup, O_PATH | O_DIRECTORY | O_CLOEXEC);
                snprintf(path, sizeof(path), "%s/cgroup.procs", sr->cgroup);
                procsfd = open(path, O_WRONLY | O_CLOEXEC);
        }

        /* No signal handler of ours may run in the child before it resets them. */
        sigfillset(&all);
        sigprocmask(SIG_SETMASK, &all, &saved);
        pid = -1;
        if (cgfd >= 0) {
                struct clone_args ca;

                memset(&ca, 0, sizeof(ca));
                ca.flags = CLONE_INTO_CGROUP;
                ca.exit_signal = SIGCHLD;
                ca.cgroup = (uint64_t)cgfd;
                pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
                if (pid == 0)
                        procsfd = -EBADF; /* born there (closed on exec) */
        }
        if (pid < 0)
                pid = fork();
        if (pid != 0)
                sigprocmask(SIG_SETMASK, &saved, NULL);
        if (pid < 0) {
                r = -errno;
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "fork: %s", strerror(errno));
                goto out;
        }
        if (pid == 0 && sr->terminal)
                run_child(failp[1], sr->tty_fd, sr->tty_fd, sr->tty_fd, procsfd, scriptfd, runner,
                          true, sr->cwd, shell, argv, envp);
        if (pid == 0) {
                if (sr->exe) {
                        runner[0] = inp[0];
                        runner[1] = evp[1];
                }
                run_child(failp[1],
                          sr->session_shell ? inp[0]
                          : stdinfd >= 0    ? stdinfd
                                            : nullfd,
                          outp[1], sr->session_shell ? nullfd : errp[1], procsfd, scriptfd, runner,
                          false, sr->cwd, shell, sr->exe ? sr->argv : argv, envp);
        }
        close_fd(&failp[1]);
        close_fd(&outp[1]);
        close_fd(&errp[1]);
        close_fd(&inp[0]);
        close_fd(&evp[1]);
        /* Blocks for the fork-to-exec time only: the pipe closes on exec. */
        do
                n = read(failp[0], &f, sizeof(f));
        while (n < 0 && errno == EINTR);
        if (n == (ssize_t)sizeof(f)) {
                int status;

                while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                        ;
                ret->pid = pid;
                ret->failed_step = true;
                if (f.step == STEP_CHDIR)
                        cella_error_set(err, cella_code_from_errno(f.err), "cwd '%s': %s", sr->cwd,
                                        strerror(f.err));
                else
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "%s %s: %s",
                                        f.step == STEP_EXEC ? "exec" : "set up", shell,
                                        strerror(f.err));
                r = -f.err ? -f.err : -EIO;
                goto out;
        }
        ret->pid = pid;
        ret->out = outp[0];
        ret->err = errp[0];
        ret->in = inp[1];
        ret->ev = evp[0];
        outp[0] = errp[0] = inp[1] = evp[0] = -EBADF;
        r = 0;
out:
        close_fd(&evp[0]);
        close_fd(&evp[1]);
        close_fd(&inp[0]);
        close_fd(&inp[1]);
        close_fd(&outp[0]);
        close_fd(&outp[1]);
        close_fd(&errp[0]);
        close_fd(&errp[1]);
        close_fd(&failp[0]);
        close_fd(&failp[1]);
        free(envp);
        for (size_t i = 0; i < ARRAY_SIZE(base); i++)
                free(base[i]);
        return r;
}
