/* The services beneath cella-init's frame handlers (docs/architecture.md, "The agent";
 * docs/decisions/0038).
 *
 * The dispatcher (agent.c) decodes frames and hands each to a handler (exec.c, files.c,
 * session.c, proc.c, pty.c, code.c, watch.c); the handlers answer through this module and
 * never through the dispatcher: sending frames and errors on a stream, send and receive
 * window bookkeeping, stream registration and lookup (service.c), the children registry
 * the SIGCHLD reaper consults (service.c), starting commands and cgroups (spawn.c) and
 * ending process trees (kill.c).
 *
 * A connection owns the streams opened on it; when it goes away (peer closed, protocol
 * error, replaced by a new connection) every stream is cancelled: command trees are killed,
 * partial uploads are removed. Commands whose tree is still dying stay in the agent's exec
 * list, detached from any connection, until they are reaped.
 *
 * Streams are kept in a list per connection (at most CELLA_AGENT_MAX_STREAMS). A stream's
 * object starts with struct stream; its ops are the owning handler's. */
#ifndef CELLA_AGENT_SERVICE_H
#define CELLA_AGENT_SERVICE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "agent/request.h"
#include "common/error.h"
#include "common/macros.h"

struct agent;
struct conn;
struct exec;
struct session;
struct term;

struct stream;

/* What a stream's owner does with the frames and events the connection routes to it.
 * Every member may be NULL where it does not apply. */
struct stream_ops {
        /* Credit arrived (WINDOW) or the connection's write queue drained: produce more. */
        void (*on_window)(struct stream *s);
        /* CANCEL from cellad (detach false: the stream is still linked and must be ended
         * by the owner) or the connection is gone (detach true: already unlinked, nothing
         * may be sent; the owner frees or keeps the object as its lifetime rules say). */
        void (*on_cancel)(struct stream *s, bool detach);
        /* DATA and END of an upload; a stream without on_data refuses DATA and END as
         * protocol errors. on_data is called after the receive window was checked. */
        void (*on_data)(struct stream *s, const uint8_t *data, size_t len);
        void (*on_end)(struct stream *s);
        /* A valid PTY frame on the open stream (a terminal's resize to cols x rows); a
         * stream without on_resize refuses PTY as a protocol error. */
        void (*on_resize)(struct stream *s, unsigned cols, unsigned rows);
};

struct stream {
        struct stream *prev, *next; /* in conn->streams */
        struct conn *conn;          /* NULL once ended or detached */
        uint32_t id;
        const struct stream_ops *ops;
        uint64_t send_credit; /* data bytes we may still send (STDOUT/STDERR/DATA) */
        int64_t recv_credit;  /* data bytes the daemon may still send us (uploads) */
        bool wait_drain;      /* on_window once the connection's write queue is empty */
};

/* The agent's state. One per process; the dispatcher creates it (agent_new, agent.h) and
 * the handlers keep their tables in it. */
#define AGENT_SESSION_END_HOOKS 4

struct agent {
        uv_loop_t *loop;
        uv_pipe_t listener;
        uv_signal_t sigchld;
        struct conn *conn;
        bool use_cgroup;             /* /sys/fs/cgroup is a writable cgroup2 mount */
        struct exec *execs;          /* every command not yet reaped and cleaned up */
        struct child_watch *watches; /* see agent_watch_child */
        char run_dir[128];           /* agent_options.run_dir */
        struct session *sessions;    /* session.c */
        unsigned session_seq;
        char **dead_cgroups; /* cmd cgroups left to remove once their processes die */
        size_t n_dead_cgroups;
        uint64_t seq;
        struct proc_table *procs; /* proc.c; NULL until the first PROC frame */
        const char *proc_log_dir; /* borrowed from the options */
        struct code_table *code;  /* code.c; NULL until the first CODE frame */
        struct term *terms;       /* pty.c: live terminals */
        /* What goes with a deleted session besides its shell (background processes,
         * its terminal): the dispatcher registers the handlers' functions at agent_new, so
         * session.c calls them without including the handlers above it. */
        void (*on_session_end[AGENT_SESSION_END_HOOKS])(struct agent *a, const char *sid);
};

/* ---- sessions ending (service.c) ---- */

/* Register fn to be called with a session's id when it is deleted. 0, or -ENOSPC beyond
 * AGENT_SESSION_END_HOOKS. */
int agent_on_session_end(struct agent *a, void (*fn)(struct agent *a, const char *sid));
/* Call every registered function for session sid, in the order they were registered. */
void agent_session_ended(struct agent *a, const char *sid);

/* ---- answering (service.c) ---- */

/* Send one frame on the stream's connection (copied). -EPIPE if the stream has none. */
int stream_send(struct stream *s, uint8_t type, const void *payload, size_t len);
/* Send a JSON frame (j is consumed). */
int stream_send_json(struct stream *s, uint8_t type, json_t *j);
/* End the stream: send the final frame (EXIT, RESULT or ERROR) and unlink it from its
 * connection. The owner frees the object when it is done with it. */
void stream_end_json(struct stream *s, uint8_t type, json_t *j);
void stream_end_error(struct stream *s, int code, const char *fmt, ...) _printf_(3, 4);
/* True while the connection's write queue is above its high-water mark: producers pause
 * and are resumed (their on_window) once it drains. */
bool stream_congested(const struct stream *s);
/* Send a frame whose payload is len bytes of the regular file fd at off. When nothing is
 * queued on the connection, the header goes to the socket and the payload follows it by
 * sendfile (no copy through the agent); what the socket does not take is read into a
 * queued write. 0 (the frame is sent or queued), -ENODATA if the file no longer holds
 * off + len bytes (nothing sent), -EPIPE, -EINVAL beyond CELLA_FRAME_MAX, -ENOMEM or a
 * read error. A file cut between the check and the copy fails the connection: a frame whose
 * header is out must carry all its bytes, and padding would hand cellad bytes the file
 * never held; -ECONNABORTED says so, and every stream of the connection, s included, has
 * been cancelled (detached) by then. */
int stream_send_file(struct stream *s, uint8_t type, int fd, uint64_t off, size_t len);
/* True while something is queued on the stream's connection (the socket did not take all
 * it was offered). With s->wait_drain set, s's on_window is called once the queue is
 * empty again. */
bool stream_queued(const struct stream *s);
/* Whether the socket refused part of what was written last (some of it waits in the
 * queue): a bulk reader reads again once the queue drained, when the streams' on_window
 * runs (see pump_credit_bulk). */
bool stream_busy(const struct stream *s);
/* Send an ERROR on a stream id that has no object (request rejected up front). */
void conn_send_error(struct conn *c, uint32_t id, const struct cella_error *err);
/* The same with a code and a formatted message. */
void conn_reply_error(struct conn *c, uint32_t id, int code, const char *fmt, ...) _printf_(4, 5);
/* Send a JSON frame on stream id (j is consumed; nothing is sent for a NULL j). */
void conn_send_json(struct conn *c, uint8_t type, uint32_t id, json_t *j);
/* Send one frame (copied). 0, -EPIPE once the connection is closing, -EINVAL beyond
 * CELLA_FRAME_MAX, -ENOMEM. */
int conn_send(struct conn *c, uint8_t type, uint32_t id, const void *payload, size_t len);

/* ---- streams: registration, lookup, windows (service.c) ---- */

/* Register a new stream on c. -EEXIST if the id is in use, -EMFILE beyond
 * CELLA_AGENT_MAX_STREAMS. */
int conn_add_stream(struct conn *c, struct stream *s, uint32_t id, const struct stream_ops *ops);
/* The open stream id of c, or NULL. */
struct stream *conn_find_stream(struct conn *c, uint32_t id);
/* How many streams c has open. */
unsigned conn_stream_count(const struct conn *c);
/* WINDOW: credit more bytes to send (capped at 2^40). */
void stream_add_send_credit(struct stream *s, uint32_t credit);
/* DATA: count len received bytes against the receive window; false if cellad overran it. */
bool stream_take_recv_credit(struct stream *s, size_t len);
/* Cancel every stream of c (detached: nothing more is sent) and close it. */
void conn_fail(struct conn *c, const char *why);

/* ---- children (service.c) ---- */

/* Children that are not EXEC commands (session shells, background processes) are watched
 * through this registry: cb runs once, from the SIGCHLD reaper, with the wait status,
 * after which the watch is gone. Returns 0 or -ENOMEM. */
int agent_watch_child(struct agent *a, pid_t pid, void (*cb)(void *ud, pid_t pid, int status),
                      void *ud);
/* Forget a watch (its owner is being freed before the child was reaped). */
void agent_unwatch_child(struct agent *a, pid_t pid);
/* The reaper's lookup: run and remove pid's watch. False if pid has none. */
bool agent_child_exited(struct agent *a, pid_t pid, int status);
/* Drop every watch without running it (agent shutdown). */
void agent_unwatch_all(struct agent *a);

/* ---- spawn.c: starting `bash -c command` (see the file's head comment) and cgroups ---- */

struct spawn_request {
        const char *command;
        const char *cwd;
        char *const *base_env; /* "K=V" over the defaults (PATH, HOME, HOSTNAME, LANG, PWD) */
        size_t n_base_env;
        char *const *env; /* "K=V" over base_env */
        size_t n_env;
        const char *cgroup; /* the child starts in it; NULL: none */
        /* A session's shell instead of `bash -c command`: `bash --noprofile --norc -O
         * expand_aliases` (command unused) reading its stdin from a pipe whose write end
         * is returned, stderr /dev/null, stdout the pipe returned as out. */
        bool session_shell;
        /* An interpreter runner (code.c) instead of a shell: execve exe with argv (the
         * command unused), and two more pipes: fd 3 reads what the agent writes to ret->in,
         * fd 4 writes what the agent reads from ret->ev (docs/decisions/0021). */
        const char *exe;
        char *const *argv;
        /* Its stdin instead of /dev/null: this text, from a memfd of its own (a runner's
         * source, so that it appears in no argv). */
        const char *stdin_text;
        /* A terminal's interactive shell instead: `bash -i` (`sh -i`) with tty_fd (a pty's
         * slave) as stdin, stdout, stderr and controlling terminal (command unused; out,
         * err and in are -EBADF). */
        bool terminal;
        int tty_fd;
};
struct spawn_result {
        pid_t pid;        /* also set (and already reaped) when failed_step */
        bool failed_step; /* the child failed before exec (bad cwd, exec error) */
        bool is_bash;     /* bash ran (else /bin/sh: there is no bash) */
        int out, err;     /* read ends of stdout and stderr (close-on-exec, blocking); err
                           * is -EBADF for a session shell */
        int in;           /* session shell: write end of its stdin; runner: of its fd 3;
                           * else -EBADF */
        int ev;           /* runner: read end of its fd 4; else -EBADF */
};
/* Start the command. 0 with *ret filled, or -errno with err set (for a bad cwd the code
 * comes from errno: FILE_NOT_FOUND, NOT_DIRECTORY, ...). */
int agent_spawn(const struct spawn_request *sr, struct spawn_result *ret, struct cella_error *err);
/* Make the cgroup /sys/fs/cgroup/<name> (or <name>-<seq> if that one still has processes):
 * its path (owned), or NULL. */
char *agent_cgroup_make(struct agent *a, const char *name);
/* Send sig (not SIGKILL: agent_kill_tree ends trees) to every process in the cgroup.
 * Returns how many were signalled. */
int agent_cgroup_signal(const char *cgroup, int sig);
bool agent_cgroup_is_empty(const char *cgroup);
/* rmdir now, or later from the reaper once its last process died. */
void agent_cgroup_remove(struct agent *a, const char *path);
/* The reaper's second half: remove the dead cgroups that have become empty. */
void exec_reap_cgroups(struct agent *a);
void agent_add_dead_cgroup(struct agent *a, const char *path);

/* ---- kill.c: ending process trees (docs/decisions/0031) ---- */

struct proc_ident {
        pid_t pid;
        unsigned long long start; /* /proc/PID/stat starttime: tells a reused pid apart */
};
/* What to SIGKILL: the processes of cgroup (and its sub-cgroups), of process group pgid
 * and root with its descendants (root's only with nothing spared), except spare (whose
 * descendants are targets) and the keep[] processes with their descendants. */
struct kill_target {
        const char *cgroup; /* NULL: none */
        pid_t pgid;         /* 0: none (only used when nothing is spared) */
        pid_t root;         /* 0: none; the tree through /proc, for no cgroup */
        pid_t spare;        /* 0: none */
        const struct proc_ident *keep;
        size_t n_keep;
};
/* Kill the target with a bounded cost whatever it does (forks, ignores signals, sits in D
 * state): cgroup.kill for a whole cgroup, else freeze, kill in rounds, thaw. Returns how
 * many processes were signalled (1 for cgroup.kill). */
int agent_kill_tree(const struct kill_target *t);
/* The processes of cgroup and below and root's descendants, except `except`, with their
 * start times: *ret (n, allocated; free it). 0 or -ENOMEM. */
int agent_tree_snapshot(const char *cgroup, pid_t root, pid_t except, struct proc_ident **ret,
                        size_t *ret_n);
/* ppid and start time of pid (/proc/PID/stat). 0 or -errno. */
int agent_proc_stat(pid_t pid, pid_t *ret_ppid, unsigned long long *ret_start);

#endif
