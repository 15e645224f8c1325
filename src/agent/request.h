/* Decoding of the frames cellad sends to the agent into typed requests (docs/protocol.md).
 *
 * Pure: no I/O, no global state; everything a request owns is released by
 * agent_request_done(), also after a failed decode. This is the agent's parser of hostile
 * input and has a fuzz target (tests/fuzz/fuzz-agent.c). */
#ifndef CELLA_AGENT_REQUEST_H
#define CELLA_AGENT_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "common/error.h"
#include "common/proto.h"
#include "common/wire.h"

enum agent_file_op { /* the wire's (common/wire.h) */
                     AGENT_OP_STAT = WIRE_FILE_STAT,
                     AGENT_OP_EXISTS = WIRE_FILE_EXISTS,
                     AGENT_OP_DELETE = WIRE_FILE_DELETE,
                     AGENT_OP_MKDIR = WIRE_FILE_MKDIR,
                     AGENT_OP_MOVE = WIRE_FILE_MOVE,
                     AGENT_OP_LIST = WIRE_FILE_LIST,
};

/* One decoded frame. type is the frame type; which fields are meaningful depends on it:
 *   EXEC        command, cwd (default /workspace), env ("K=V" strings), timeout_ms
 *   FILE_READ   path
 *   FILE_WRITE  path, mode (-1: keep / default)
 *   EXEC        also session (NULL: sessionless) and base_env ("K=V", the sandbox's env)
 *   FILE_OP     op, path, to (move; from is in path), recursive, include_hidden
 *   WATCH       path, recursive (default true), include, exclude (globs)
 *   PTY         session (sessionId, default "default"), session_given, cols, rows, base_env
 *   SESSION, PROC  body: the payload object, validated further by the module's own decoder
 *               (session_request_decode, proc_request_decode)
 *   WINDOW      credit
 *   DATA, PING  data/len (borrowed from the frame)
 *   END, CANCEL, PONG  nothing
 * Strings are owned (NUL-free, NUL-terminated); paths are absolute and normalised. */
struct agent_request {
        uint8_t type;
        uint32_t stream;
        char *command;
        char *cwd;
        bool cwd_given; /* EXEC: cwd was in the request (not the /workspace default) */
        char **env;     /* n_env "KEY=value" strings */
        size_t n_env;
        char *session;
        char **base_env; /* n_base_env "KEY=value" strings */
        size_t n_base_env;
        json_t *body; /* SESSION, PROC: owned reference */
        int64_t timeout_ms;
        char *path;
        char *to;
        int mode;
        enum agent_file_op op;
        bool recursive;
        bool include_hidden;
        char **include; /* WATCH: n_include globs */
        size_t n_include;
        char **exclude; /* WATCH: n_exclude globs (NULL with exclude_given false: defaults) */
        size_t n_exclude;
        bool exclude_given;
        unsigned cols, rows; /* PTY: 1..CELLA_PTY_MAX_DIM */
        bool session_given;  /* PTY: sessionId was in the frame (an opening PTY names it) */
        uint32_t credit;
        const uint8_t *data;
        size_t len;
};

/* Decode f into *ret (which is always initialised, so agent_request_done() on it is
 * always valid). Returns 0 on success; -EPROTO for a frame that breaks the protocol (a
 * type the daemon never sends, a stream-0 frame on a stream or the reverse, a bad WINDOW
 * length): the connection must be closed; -EINVAL for a well-formed frame whose request is
 * invalid (bad JSON, wrong types, relative path, limits exceeded): the stream ends with
 * ERROR. Both set err (VALIDATION_FAILED, or NAME_TOO_LONG for long paths). */
int agent_request_decode(const struct frame *f, struct agent_request *ret, struct cella_error *err);
void agent_request_done(struct agent_request *r);

/* Shared field decoders for the modules' own request decoders (session.c, proc.c). Each
 * returns 0 or -EINVAL with err set (VALIDATION_FAILED, NAME_TOO_LONG for long paths).
 * agent_decode_env: an object of identifier keys and string values (NULL or null: none)
 * into a new array of "K=V" strings; agent_env_free releases it. */
int agent_decode_string(json_t *v, const char *field, size_t max, bool nonempty, char **ret,
                        struct cella_error *err);
int agent_decode_path(json_t *v, const char *field, char **ret, struct cella_error *err);
int agent_decode_env(json_t *env, const char *field, char ***ret, size_t *ret_n,
                     struct cella_error *err);
void agent_env_free(char **env, size_t n);
/* An identifier for sessions and processes: 1..CELLA_ID_MAX of [A-Za-z0-9_.-], not "."
 * or "..". */
bool agent_id_is_valid(const char *s);
/* A string that is such an id, copied into *ret. */
int agent_decode_id(json_t *v, const char *field, char **ret, struct cella_error *err);

/* True for the frames that open a stream (EXEC, FILE_READ, FILE_WRITE, FILE_OP, SESSION,
 * PROC, WATCH, PTY; a PTY on an open stream is a resize). */
bool agent_request_opens_stream(uint8_t type);

#endif
