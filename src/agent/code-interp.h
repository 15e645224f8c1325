/* The code interpreter's runners, beneath the CODE handler (code.c): the structures both
 * share, a runner's life (started, fed requests on fd 3, its events read from fd 4 and its
 * output from stdout/stderr by pumps, pump.h, interrupted, killed), a context's queue of
 * jobs and what a run sends on its stream. code.c's head comment has the model; code.c
 * keeps the table, the contexts' names and the operations. Nothing here calls up into
 * code.c. */
#ifndef CELLA_AGENT_CODE_INTERP_H
#define CELLA_AGENT_CODE_INTERP_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

#include "agent/code-request.h"
#include "agent/pump.h"
#include "agent/service.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/limits.h"
#include "common/macros.h"

enum runner_kind { RUNNER_PYTHON, RUNNER_NODE, _RUNNER_MAX };

struct code_job;

struct interp {
        struct interp *prev, *next; /* in t->contexts while it is a context */
        struct code_table *t;
        enum runner_kind kind;
        bool in_table; /* a context in the list, or a spare */
        char id[CELLA_ID_MAX + 1];
        enum code_lang lang;
        char *cwd;
        bool is_default;
        pid_t pid;
        bool reaped;
        char *cgroup;
        struct pump out[2], ev; /* stdout, stderr; the events of fd 4 */
        uv_pipe_t req;
        bool req_open;
        bool draining;    /* drain_output: output is held for the run that is ending */
        uv_timer_t timer; /* ready timeout, then a run's timeout */
        uv_timer_t grace; /* interrupt grace, event-pipe EOF grace */
        unsigned handles;
        bool ready;
        bool set_up; /* setup_ok seen */
        bool dead;
        char reason[160];
        bool interrupting;
        uint64_t interrupt_at; /* loop time of the first SIGINT */
        struct buf line;       /* incomplete event line from fd 4 */
        struct code_job *head, *tail;
        unsigned queued;
        struct code_job *active;
        int64_t run_seq;
};

struct code_table {
        struct agent *a;
        struct interp *contexts;
        unsigned n_contexts;
        struct interp *spare[_RUNNER_MAX];
        bool used[_RUNNER_MAX];
        char **base_env; /* the latest create's or run's, for spares */
        size_t n_base_env;
        uint64_t seq;
        unsigned objects; /* interps not yet freed */
        bool shutdown;    /* the agent is going: the last interp freed frees the table */
};

struct code_job {
        struct stream s; /* first: the agent casts stream pointers; s.conn NULL: no stream */
        struct interp *it;
        struct code_job *next;
        bool is_setup;
        char *code;
        int64_t timeout_ms;
        char **env; /* setup */
        size_t n_env;
        int64_t run_id;
        bool timed_out;
        bool done_seen;
        int64_t execution_count;
        bool error_seen;
        struct buf pend[3]; /* stdout, stderr, events waiting for credit */
};

/* The runner kind that runs language l. */
enum runner_kind code_runner_kind(enum code_lang l);

/* ---- runners ---- */

/* Start a runner of kind: a new interp (not yet in the table), or NULL with err set. */
struct interp *interp_start(struct code_table *t, enum runner_kind kind, struct cella_error *err);
/* The runner is gone or unusable: kill it, end every job with CONTEXT_DEAD (formatted
 * reason). */
void interp_die(struct interp *it, const char *fmt, ...) _printf_(2, 3);
/* Start the next job if the runner is ready and idle. */
void interp_next(struct interp *it);
/* Free it once it is out of the table, reaped and its handles are closed. */
void interp_maybe_free(struct interp *it);
/* Out of the table's list (or its spare slot). */
void code_table_unlink(struct interp *it);
/* Remove a context: its runner is killed, its jobs end with CONTEXT_DEAD. */
void context_remove(struct interp *it);
/* A context as the API shows it (id, language, cwd): a new reference. */
json_t *context_json(const struct interp *it);

/* ---- jobs ---- */

extern const struct stream_ops code_job_ops;
/* Queue j on it's context (it runs once the jobs before it are done). */
void code_enqueue(struct interp *it, struct code_job *j);
/* End j with an error on its stream (if any) and free it. */
void code_job_fail(struct code_job *j, int code, const char *msg);
void code_job_free(struct code_job *j);

#endif
