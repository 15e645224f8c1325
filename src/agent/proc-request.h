/* Decoding of a PROC frame's body (docs/protocol.md, decision 0012) into a typed request:
 * the body's schema is common/wire.c's (wire_proc_decode); this turns it into the
 * request's own strings.
 *
 * Pure: no I/O; everything a request owns is released by proc_request_done(), also after a
 * failed decode. Reached by the agent fuzz target (tests/fuzz/fuzz-agent.c). */
#ifndef CELLA_AGENT_PROC_REQUEST_H
#define CELLA_AGENT_PROC_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/wire.h"

/* The body's ops (common/wire.h) */
enum proc_op {
        PROC_START = WIRE_PROC_START,
        PROC_LIST = WIRE_PROC_LIST,
        PROC_GET = WIRE_PROC_GET,
        PROC_KILL = WIRE_PROC_KILL,
        PROC_KILLALL = WIRE_PROC_KILLALL,
        PROC_LOGS = WIRE_PROC_LOGS,
        PROC_STREAM = WIRE_PROC_STREAM,
        PROC_WAIT_LOG = WIRE_PROC_WAIT_LOG,
        PROC_WAIT_PORT = WIRE_PROC_WAIT_PORT,
        PROC_WAIT_EXIT = WIRE_PROC_WAIT_EXIT,
};

/* Which fields are meaningful depends on op:
 *   start     command, id (NULL: generated), session, cwd (default /workspace), env,
 *             base_env
 *   get, logs, stream, waitExit  id (a process id, or a pid in decimal)
 *   kill      id, signal (0: SIGTERM, then SIGKILL after CELLA_PROC_KILL_GRACE_MS)
 *   killall   signal
 *   waitLog   id, pattern (1..CELLA_PROC_MAX_PATTERN bytes, NUL-free), regex
 *   waitPort  id, port (1..65535), http, path (http: starts with '/', printable ASCII
 *             without spaces), status_min..status_max (100..599), interval_ms
 *   waits     timeout_ms (0: none; at most CELLA_EXEC_MAX_TIMEOUT_MS) */
struct proc_request {
        enum proc_op op;
        char *command;
        char *id;
        char *session;
        char *cwd;
        bool cwd_given; /* start: cwd was in the request (else the session's, or /workspace) */
        char **env;
        size_t n_env;
        char **base_env;
        size_t n_base_env;
        int signal;
        char *pattern;
        bool regex;
        int port;
        bool http;
        char *path;
        int status_min, status_max;
        int64_t interval_ms;
        int64_t timeout_ms;
};

/* Returns 0, or -EINVAL with err set (VALIDATION_FAILED; NAME_TOO_LONG for a long cwd), or
 * -ENOMEM (INTERNAL_ERROR). *ret is always initialised. */
int proc_request_decode(json_t *body, struct proc_request *ret, struct cella_error *err);
void proc_request_done(struct proc_request *r);

#endif
