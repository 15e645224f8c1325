/* Sessions: persistent shells inside the sandbox (docs/protocol.md, "Sessions";
 * docs/decisions/0012).
 *
 * A session is one long-lived bash (sh where there is no bash) started by the agent in its
 * own cgroup. Commands of a session are queued and run one at a time: each is written to a
 * file that the shell sources, with its stdout and stderr on FIFOs of its own, so `cd`,
 * `export`, functions and aliases persist, output stays byte-exact and never mixes with
 * another command's, and the exit status comes back on the shell's stdout tagged with a
 * per-session nonce. Different sessions are different shells and run in parallel.
 *
 * The SESSION frame's payload is decoded by session_request_decode (pure; fuzzed through
 * tests/fuzz/fuzz-agent.c). */
#ifndef CELLA_AGENT_SESSION_H
#define CELLA_AGENT_SESSION_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/context-spec.h"
#include "common/error.h"
#include "common/wire.h"

struct agent;
struct conn;
struct agent_request;

enum session_op { /* the wire's (common/wire.h) */
                  SESSION_OP_CREATE = WIRE_SESSION_CREATE,
                  SESSION_OP_DELETE = WIRE_SESSION_DELETE,
                  SESSION_OP_LIST = WIRE_SESSION_LIST,
                  SESSION_OP_SETENV = WIRE_SESSION_SETENV,
};

/* One decoded SESSION payload. Strings are owned, NUL-free and NUL-terminated.
 *   create  id (NULL: generated), cwd (NULL: /workspace), env + base_env ("K=V"),
 *           timeout_ms (commandTimeoutMs, 0: none)
 *   delete  id
 *   list    nothing
 *   setenv  id (NULL: every live session), set ("K=V") and unset ("K") */
struct session_request {
        enum session_op op;
        struct context_spec ctx; /* id, and for create cwd, env, base_env */
        int64_t timeout_ms;
        char **set;
        size_t n_set;
        char **unset;
        size_t n_unset;
};

/* Decode body (a JSON object) into *ret, which is always initialised. 0, or -EINVAL with
 * err set (VALIDATION_FAILED). */
int session_request_decode(json_t *body, struct session_request *ret, struct cella_error *err);
void session_request_done(struct session_request *r);

/* A SESSION frame: run the op and answer on the request's stream. */
void session_request(struct agent *a, struct conn *c, struct agent_request *req);
/* An EXEC frame with a session id: queue the command in that session (the session
 * `default` is created on first use). */
void session_exec(struct agent *a, struct conn *c, struct agent_request *req);
/* Where and with what a background process started "in" session sid runs: the shell's
 * current directory (its initial cwd when no shell runs) and the session's environment as
 * the agent knows it (the sandbox's base env, the session's own, setEnvVars changes; not
 * variables a command exported inside the shell). *ret_cwd and *ret_env (n "K=V"
 * strings) are new copies (free / agent_env_free). -ENOENT if there is no such session
 * (the session "default" is created on first use with base_env), -ENOMEM. */
int session_spawn_context(struct agent *a, const char *sid, char **base_env, size_t n_base,
                          char **ret_cwd, char ***ret_env, size_t *ret_n, struct cella_error *err);
/* Remove what earlier agents of this sandbox left in the sessions directory. */
void session_init(struct agent *a);
/* Kill every session's shell (agent shutdown). */
void session_free_all(struct agent *a);

#endif
