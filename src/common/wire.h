/* The bodies of the agent requests that cellad sends (docs/protocol.md), one encoder and
 * one decoder per frame type, shared by both ends: cellad encodes what its API decoders
 * (src/daemon/api-decode.c) validated, cella-init decodes it, so a field's name, type and
 * meaning are written once.
 *
 * The rule for what is valid is applied once, by cellad, to what a client sends. The
 * decoders here are the agent's bounds on what reaches it (the agent is behind cellad and
 * trusts the shape, but never lets a body crash it or overflow a buffer): types, lengths,
 * NULs and ids are checked, the rest (env names, paths) by the agent as it converts the
 * fields into what it runs. Unknown members are ignored: an older agent keeps working with
 * a newer cellad that adds one. Decoded strings and objects are borrowed from the JSON. */
#ifndef CELLA_WIRE_H
#define CELLA_WIRE_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "common/limits.h"

/* EXEC: {"command":s, "cwd"?:s, "env"?:{k:s}, "baseEnv"?:{k:s}, "session"?:s,
 *        "timeoutMs"?:n} */
struct wire_exec {
        const char *command; /* 1..CELLA_EXEC_MAX_COMMAND bytes without NUL */
        const char *cwd;     /* NULL: the workspace */
        json_t *env;         /* the command's own variables; NULL: none */
        json_t *base_env;    /* the sandbox's variables under a session's; NULL: none */
        const char *session; /* NULL: a fresh shell, no session */
        int64_t timeout_ms;  /* 0: none */
};

/* A new object, or NULL when out of memory. */
json_t *wire_exec_encode(const struct wire_exec *x);
/* 0 with *ret filled (borrowing from j), or -EINVAL with err set (VALIDATION_FAILED). */
int wire_exec_decode(json_t *j, struct wire_exec *ret, struct cella_error *err);

/* PTY: {"sessionId"?:s, "cols":n, "rows":n, "baseEnv"?:{k:s}}; on an open stream the same
 * frame is a resize, of which cols and rows count. */
struct wire_pty {
        const char *session; /* NULL: "default" */
        unsigned cols, rows; /* 1..CELLA_PTY_MAX_DIM */
        json_t *base_env;    /* NULL: none */
};

json_t *wire_pty_encode(const struct wire_pty *x);
int wire_pty_decode(json_t *j, struct wire_pty *ret, struct cella_error *err);

/* FILE_READ {"path"}, FILE_WRITE {"path", "mode"?}, FILE_OP {"op", "path" (MOVE: "from",
 * "to"), "recursive"? (MKDIR, DELETE, LIST), "includeHidden"? (LIST)}. Each path member is
 * written as common/json-path.h writes one: text, and for a name that is not UTF-8 also
 * "<member>Base64", which the decoder reads first. */
enum wire_file_op {
        WIRE_FILE_STAT,
        WIRE_FILE_EXISTS,
        WIRE_FILE_DELETE,
        WIRE_FILE_MKDIR,
        WIRE_FILE_MOVE,
        WIRE_FILE_LIST,
};

struct wire_file {
        enum wire_file_op op; /* FILE_OP */
        const char *path;     /* MOVE: from */
        const char *to;       /* MOVE */
        int mode;             /* FILE_WRITE: permission bits, -1: not given */
        bool recursive;
        bool include_hidden;
};

/* The body of a frame of type (FILE_READ, FILE_WRITE or FILE_OP); NULL: out of memory. */
json_t *wire_file_encode(uint8_t type, const struct wire_file *x);
/* Decode j as a body of type. The paths are decoded, made absolute and normalised into
 * path and to (ret->path and ret->to point there). 0, or -EINVAL with err set
 * (VALIDATION_FAILED, NAME_TOO_LONG for a long path). */
int wire_file_decode(uint8_t type, json_t *j, struct wire_file *ret, char path[CELLA_PATH_MAX + 1],
                     char to[CELLA_PATH_MAX + 1], struct cella_error *err);

/* SESSION: {"op":"create", "baseEnv":{k:s}, "commandTimeoutMs":n, "id"?:s, "cwd"?:s,
 * "env"?:{k:s}}, {"op":"delete", "id":s}, {"op":"list"}, {"op":"setenv", "env":{k:s|null},
 * "id"?:s} (without id: the sandbox's env, applied to every live session). */
enum wire_session_op {
        WIRE_SESSION_CREATE,
        WIRE_SESSION_DELETE,
        WIRE_SESSION_LIST,
        WIRE_SESSION_SETENV,
};

struct wire_session {
        enum wire_session_op op;
        const char *id;     /* NULL: none (create: generated; setenv: every session) */
        const char *cwd;    /* create; NULL: the workspace */
        json_t *env;        /* create: {k:s}, NULL: none; setenv: {k:s|null}, required */
        json_t *base_env;   /* create; NULL: none (encoded as {}) */
        int64_t timeout_ms; /* create: the session's commandTimeoutMs, 0: none */
};

json_t *wire_session_encode(const struct wire_session *x);
/* Types, the op, the id (required for delete), the timeout's range; an env's names and
 * values are left to the agent, which converts them. */
int wire_session_decode(json_t *j, struct wire_session *ret, struct cella_error *err);

/* WATCH: {"path":s, "recursive":b, "include"?:[s], "exclude"?:[s]}; recursive defaults to
 * true, an absent exclude means the agent's default excludes. */
struct wire_watch {
        const char *path; /* absolute (the agent normalises it) */
        bool recursive;
        json_t *include; /* array of 1..CELLA_WATCH_PATTERN_MAX byte globs; NULL: none */
        json_t *exclude; /* the same; NULL: the defaults */
};

json_t *wire_watch_encode(const struct wire_watch *x);
/* Types, and the globs' count (at most CELLA_WATCH_MAX_PATTERNS in all) and lengths. */
int wire_watch_decode(json_t *j, struct wire_watch *ret, struct cella_error *err);

/* PROC: {"op":..., ...}, background processes (docs/protocol.md); which members an op
 * takes:
 *   start     "command":s, "id"?:s (not only digits), "session"?:s, "cwd"?:s,
 *             "env"?:{k:s}, "baseEnv"?:{k:s}
 *   list      nothing
 *   get, logs, stream, waitExit  "id":s|n (a process id, or a pid as a number or digits)
 *   kill      "id", "signal"?:n|s (a number 1..64 or a name)
 *   killall   "signal"?
 *   waitLog   "id", "pattern":s, "regex"?:b
 *   waitPort  "id", "port":n, "mode"?:"tcp"|"http", "path"?:s, "statusMin"?:n,
 *             "statusMax"?:n, "intervalMs"?:n
 *   waits     "timeoutMs"?:n */
enum wire_proc_op {
        WIRE_PROC_START,
        WIRE_PROC_LIST,
        WIRE_PROC_GET,
        WIRE_PROC_KILL,
        WIRE_PROC_KILLALL,
        WIRE_PROC_LOGS,
        WIRE_PROC_STREAM,
        WIRE_PROC_WAIT_LOG,
        WIRE_PROC_WAIT_PORT,
        WIRE_PROC_WAIT_EXIT,
};

/* What the encoder leaves out and the decoder fills in is each member's default. */
struct wire_proc {
        enum wire_proc_op op;
        const char *id;      /* NULL: none (start: generated); else an id or a pid's digits */
        char pid[24];        /* decoded: the text of a pid given as a number (id points here) */
        const char *command; /* start: 1..CELLA_EXEC_MAX_COMMAND bytes without NUL */
        const char *session; /* start; NULL: none */
        const char *cwd;     /* start; NULL: the session's, or the workspace */
        json_t *env;         /* start; NULL: none */
        json_t *base_env;    /* start; NULL: none */
        int signal;          /* kill, killall: 1..64; 0: the default (SIGTERM, then SIGKILL) */
        const char *pattern; /* waitLog: 1..CELLA_PROC_MAX_PATTERN bytes without NUL */
        bool regex;          /* waitLog */
        int port;            /* waitPort: 1..65535 */
        bool http;           /* waitPort: mode "http" */
        const char *path;    /* waitPort: http_path_is_valid; NULL: "/" */
        int status_min;      /* waitPort: 100..599, at most status_max; 0: 200 */
        int status_max;      /* waitPort: 0: 399 */
        int64_t interval_ms; /* waitPort: CELLA_PROC_MIN/MAX_INTERVAL_MS; 0: the default */
        int64_t timeout_ms;  /* the waits: 0: none */
};

/* The op's members of *x in the order cellad always wrote them; NULL: out of memory. */
json_t *wire_proc_encode(const struct wire_proc *x);
/* The op, every member's type and bound, the defaults filled in (status 200..399, the
 * interval CELLA_PROC_DEFAULT_INTERVAL_MS); env names and the cwd's normalisation are the
 * agent's, which converts them. 0, or -EINVAL with err set (VALIDATION_FAILED). */
int wire_proc_decode(json_t *j, struct wire_proc *ret, struct cella_error *err);

/* CODE: {"op":"create", "language":s, "cwd"?:s, "env"?:{k:s}, "baseEnv"?:{k:s}},
 * {"op":"delete", "id":s}, {"op":"list"}, {"op":"run", "code":s, "id"?:s, "language"?:s,
 * "timeoutMs"?:n, "baseEnv"?:{k:s}} (without id: the language's default context). */
enum wire_code_op {
        WIRE_CODE_CREATE,
        WIRE_CODE_DELETE,
        WIRE_CODE_LIST,
        WIRE_CODE_RUN,
};

enum wire_code_lang {
        WIRE_CODE_PYTHON,
        WIRE_CODE_JAVASCRIPT,
        WIRE_CODE_TYPESCRIPT,
};

/* The languages' names by enum wire_code_lang, NULL-terminated. */
extern const char *const wire_code_langs[];

struct wire_code {
        enum wire_code_op op;
        const char *id;               /* delete; run: NULL the default context */
        enum wire_code_lang language; /* create; run (when language_given) */
        bool language_given;          /* run: a given language must be the context's */
        const char *cwd;              /* create; NULL: the workspace */
        json_t *env;                  /* create; NULL: none */
        json_t *base_env;             /* create, run; NULL: none */
        const char *code;             /* run: at most CELLA_CODE_MAX_CODE bytes without NUL */
        int64_t timeout_ms;           /* run: 0: none */
};

json_t *wire_code_encode(const struct wire_code *x);
/* The op, the members' types and bounds, ids; env names and the cwd are the agent's. */
int wire_code_decode(json_t *j, struct wire_code *ret, struct cella_error *err);

#endif
