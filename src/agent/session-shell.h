/* A session's shell and the commands it runs, beneath the SESSION and EXEC handlers
 * (session.c): the structures both share, the shell (started, fed, reaped), the queue of
 * commands (struct job: one runs at a time, its output read from its FIFOs by two pumps,
 * pump.h) and the kills (kill.c). session.c's head comment has the model and the
 * lifetimes. Nothing here calls up into session.c. */
#ifndef CELLA_AGENT_SESSION_SHELL_H
#define CELLA_AGENT_SESSION_SHELL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "agent/name-filter.h"
#include "agent/pump.h"
#include "agent/service.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/limits.h"

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
        struct pump out[2];  /* the FIFOs' read ends; closed at EOF */
        int hold[2];         /* the agent's own write ends of the FIFOs */
        uv_timer_t timer;    /* timeout, then the grace before the shell is killed */
        uv_timer_t grace;    /* output after the status */
        size_t owed[2];      /* bytes in each FIFO when the status came, not yet read */
        unsigned open_handles;
        /* stderr through the filter that names the script "bash" (name-filter.h) */
        bool filtering;
        struct name_filter nf;
        /* the session's processes other than the shell when it started (kill_command) */
        struct proc_ident *keep;
        size_t n_keep;
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
        /* The export and unset lines of setenv requests that the live shell's stdin has
         * not taken yet (session_shell_send_env): written to it just ahead of its next
         * command's line (same order as a job of their own, without its round trip); a
         * shell started anew has them in its env. */
        struct buf env_lines;
        /* commands */
        struct job *queue, *queue_tail;
        struct job *running;
};

/* ---- the shell ---- */

/* Start the session's shell (agent_spawn, in the session's own cgroup). 0, or -1 with
 * err set. */
int session_shell_spawn(struct session *sess, struct cella_error *err);
/* Offer sess->env_lines to the live shell's stdin now, without blocking: what it takes
 * is dropped from them, the rest goes ahead of the next command's line. */
void session_shell_send_env(struct session *sess);
/* The shell was reaped (an agent_watch_child callback; ud is the session). */
void session_on_shell_exit(void *ud, pid_t pid, int status);
/* Everything of the session: the shell, its cgroup, its process group (delete). */
void session_kill(struct session *sess);
/* Free what the session holds, and the session itself once deleted. */
void session_release(struct session *sess);

/* Remove the directory path with its files and subdirectories (rm -r). */
void session_rm_dir(const char *path);

/* ---- commands ---- */

/* A command whose script is script_head (may be NULL) then command: NULL when out of
 * memory. Internal (output discarded) until the caller sets streamed and adds its stream
 * with session_job_ops. */
struct job *session_job_new(const char *script_head, const char *command);
extern const struct stream_ops session_job_ops;
/* Queue j in sess; it runs once the commands before it are done. */
void session_enqueue(struct session *sess, struct job *j);
/* Send j's final frame (if it has a stream) and let go of everything; its session moves
 * on to the next command. */
void session_job_finish(struct job *j);
/* Free j if it is finished, its stream gone and its handles closed. */
void session_job_maybe_free(struct job *j);
void session_job_free(struct job *j);

#endif
