/* Pure decoding of the JSON request bodies of the API into typed structs.
 *
 * Each api_decode_X() parses body[0..len) (not NUL-terminated) strictly: a JSON object,
 * no duplicate keys, no unknown keys, the documented types, every string NUL-free where it
 * names something (paths, commands, env), every quantity within common/limits.h. Paths are
 * normalised with sandbox_path_normalize(). On success *ret is filled and must be released
 * with api_X_done(); on failure *ret is left zeroed (api_X_done() on it is a no-op), err
 * says why (VALIDATION_FAILED, NAME_TOO_LONG, ...), and -EINVAL (or -ENOMEM) is returned.
 * Nothing here touches the loop or the sandbox table, so the fuzzer calls them all. */
#ifndef CELLA_DAEMON_API_DECODE_H
#define CELLA_DAEMON_API_DECODE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/error.h"
#include "common/limits.h"

/* PUT /v1/sandboxes/{id}: {image?, instanceType?, env?, labels?, normalizeId?} */
struct api_put_sandbox {
        char *image;         /* NULL: default */
        char *instance_type; /* NULL: default */
        json_t *env;         /* object of strings or NULL (owned) */
        json_t *labels;      /* object of strings or NULL (owned) */
        bool normalize_id;
        int64_t sleep_after_ms; /* 0: not given */
        bool has_keep_alive;
        bool keep_alive;
};

/* A sleepAfter value: a number of seconds, or a string "90", "30s", "10m", "2h", "1d".
 * 1 s to 30 days. Returns 0 with *ret_ms, or -1 with err (VALIDATION_FAILED). */
int api_parse_duration(json_t *v, int64_t *ret_ms, struct cella_error *err);
int api_decode_put_sandbox(const char *body, size_t len, struct api_put_sandbox *ret,
                           struct cella_error *err);
void api_put_sandbox_done(struct api_put_sandbox *p);

/* POST .../env (setEnvVars): {vars: {NAME: "value" | null}}; names are identifiers
 * ([A-Za-z_][A-Za-z0-9_]*, at most 255 bytes), null unsets. */
struct api_env {
        json_t *vars; /* owned */
};
int api_decode_env(const char *body, size_t len, struct api_env *ret, struct cella_error *err);
void api_env_done(struct api_env *p);

/* POST .../exec: {command, timeout?, env?, cwd?, sessionId?} */
struct api_exec {
        char *command;
        int64_t timeout_ms; /* 0: none */
        json_t *env;        /* object of strings or NULL (owned) */
        char *cwd;          /* normalised, or NULL */
        char *session_id;   /* or NULL */
};
int api_decode_exec(const char *body, size_t len, struct api_exec *ret, struct cella_error *err);
void api_exec_done(struct api_exec *p);

/* POST .../files/read: {path, encoding?: "utf-8"|"utf8"|"base64"} */
struct api_file_read {
        char path[CELLA_PATH_MAX + 1];
        bool base64; /* the client asked for base64 */
};
int api_decode_file_read(const char *body, size_t len, struct api_file_read *ret,
                         struct cella_error *err);
void api_file_read_done(struct api_file_read *p);

/* POST .../files/write: {path, content, encoding?} -> the bytes to write */
struct api_file_write {
        char path[CELLA_PATH_MAX + 1];
        struct buf content;
};
int api_decode_file_write(const char *body, size_t len, struct api_file_write *ret,
                          struct cella_error *err);
void api_file_write_done(struct api_file_write *p);

/* POST .../files/mkdir: {path, recursive?} */
struct api_mkdir {
        char path[CELLA_PATH_MAX + 1];
        bool recursive;
};
int api_decode_mkdir(const char *body, size_t len, struct api_mkdir *ret, struct cella_error *err);
void api_mkdir_done(struct api_mkdir *p);

/* POST .../files/move: {from, to} */
struct api_move {
        char from[CELLA_PATH_MAX + 1];
        char to[CELLA_PATH_MAX + 1];
};
int api_decode_move(const char *body, size_t len, struct api_move *ret, struct cella_error *err);
void api_move_done(struct api_move *p);

/* Background processes: each call's body into the PROC frame body the agent takes
 * (docs/protocol.md), without the process id (from the path) and baseEnv (the sandbox's).
 *   START      {command, processId?, sessionId?, env?, cwd?}
 *   KILL       {signal?} or ?signal= (query_signal), body may be empty
 *   WAIT_LOG   {pattern, regex?, timeout?}
 *   WAIT_PORT  {port, mode?: "tcp"|"http", path?, status?: n | {min?, max?}, interval?,
 *              timeout?}
 *   WAIT_EXIT  {timeout?}, body may be empty
 * *ret is a new object on success, NULL on failure. */
enum api_proc_call {
        API_PROC_START,
        API_PROC_KILL,
        API_PROC_WAIT_LOG,
        API_PROC_WAIT_PORT,
        API_PROC_WAIT_EXIT,
};
int api_decode_process(enum api_proc_call call, const char *body, size_t len,
                       const char *query_signal, json_t **ret, struct cella_error *err);

/* Shared checks, also used for query parameters. */
/* An object of NUL-free strings with non-empty keys without '=', at most max entries. */
int api_check_string_object(json_t *o, const char *what, size_t max, struct cella_error *err);
/* "true"/"1" -> true, "false"/"0" -> false, NULL -> dflt; anything else -1. */
int api_parse_bool(const char *s, bool dflt, bool *ret);

#endif
