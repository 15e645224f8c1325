/* Background processes, below their dispatch (proc.c): the table's data, ProcessInfo and
 * the followers (docs/decisions/0012; proc.c's head comment has the model).
 *
 * A follower is one stream that reads a process's output or waits for it: logs, stream,
 * waitLog, waitPort, waitExit and kill (which answers once the tree is gone). It reads the
 * log with its own descriptor from its own offset (or the rings), so a slow client slows
 * only its own follower. proc.c creates followers (op_follow) and wakes them when
 * something happens to their process (proc_notify); a follower never calls up into proc.c
 * but through proc_table.release. */
#ifndef CELLA_AGENT_PROC_FOLLOW_H
#define CELLA_AGENT_PROC_FOLLOW_H

#include <jansson.h>
#include <regex.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "agent/proc-request.h"
#include "agent/pump.h"
#include "agent/service.h"
#include "common/buf.h"
#include "common/limits.h"

#define REC_HEADER 5 /* a log record: [u8 stream (1 stdout, 2 stderr)][u32 length BE] */

enum proc_status { P_RUNNING, P_COMPLETED, P_FAILED, P_KILLED, P_ERROR };

struct proc;

struct proc_io {
        struct pump out[2]; /* stdout, stderr: read whatever the followers do */
        uv_timer_t settle;
        uv_timer_t kill;
        unsigned handles; /* not yet closed */
        bool closing;
};

struct proc {
        struct proc *prev, *next; /* table list, oldest first; unlinked once forgotten */
        struct proc_table *t;
        char id[CELLA_ID_MAX + 1];
        char *command;
        char *session;
        char *error;
        pid_t pid;
        enum proc_status status;
        int exit_code;
        int term_signal;
        int64_t start_ms, end_ms;
        bool reaped;
        bool settled; /* reaped, and output at EOF or SETTLE_MS passed */
        bool kill_requested;
        bool forgotten;
        struct proc_io *io;
        char *cgroup;         /* kept after release: a kill still reaches what is left */
        bool cgroup_released; /* handed to agent_cgroup_remove */
        char *log_path;       /* NULL: rings */
        int log_fd;           /* open while output can still come */
        uint64_t log_size;
        bool log_truncated;
        struct buf ring[2];
        uint64_t total[2]; /* bytes produced per stream */
        struct follower *followers;
};

struct proc_table {
        struct agent *a;
        struct proc *head, *tail;
        unsigned count;   /* in the list */
        unsigned objects; /* allocated: in the list, or forgotten and still in use */
        uint64_t seq;
        char *log_dir;
        bool log_dir_ready;
        bool shutdown;
        /* proc.c's: free p if nothing uses it any more (a follower has gone) */
        void (*release)(struct proc *p);
};

enum follower_kind { F_LOGS, F_STREAM, F_WAIT_LOG, F_WAIT_PORT, F_WAIT_EXIT, F_KILL };

struct follower {
        struct stream s; /* first: the agent casts stream pointers */
        struct follower *prev, *next;
        struct proc *p;
        enum follower_kind kind;
        bool done;
        unsigned handles;
        uv_timer_t timer; /* the wait's timeout; kill: the poll */
        /* reading the output */
        int fd; /* the log (own descriptor), or -EBADF for the rings */
        uint64_t pos, end;
        uint32_t rec_left;
        int rec_stream;
        uint64_t ring_pos[2], ring_end[2];
        int next_ring;
        /* waitLog */
        bool has_re;
        regex_t re;
        char *pattern;
        struct buf line[2];
        /* waitPort */
        int port;
        bool http;
        char *path;
        int smin, smax;
        uint64_t interval;
        uv_timer_t poll;
        uv_tcp_t tcp;
        bool tcp_open, attempting;
        uint64_t attempt_start;
        uv_connect_t connect;
        uv_write_t wreq;
        struct buf req_text;
        struct buf resp;
        /* kill */
        uint64_t kill_deadline;
};

/* ProcessInfo of p (docs/api.md): a new reference, or NULL. */
json_t *proc_info(const struct proc *p);
/* "running", "completed", ... */
const char *proc_status_name(enum proc_status s);

/* A follower of p on stream id of c, linked to p: NULL when out of memory or the stream
 * cannot be added. */
struct follower *follower_new(struct conn *c, uint32_t id, struct proc *p, enum follower_kind kind);
/* Whether f reads the output (logs, stream, waitLog); then follower_open_output opens the
 * log (or takes the rings) and sets where `logs` stops: 0 or -errno. */
bool follower_reads(const struct follower *f);
int follower_open_output(struct follower *f);
/* End f's stream with an error and release it. */
void follower_error(struct follower *f, int code, const char *msg);
/* Set f going with what r asks (a waitLog's pattern, a waitPort's target, a kill's poll,
 * the timeout), then pump it once. */
void follower_start(struct follower *f, struct proc_request *r);
/* Something happened to p (output, exit, settled): wake its followers. */
void proc_notify(struct proc *p);

#endif
