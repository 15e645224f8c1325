/* API error codes, their HTTP statuses, and the caller-owned error record.
 *
 * Every failure that reaches a user is a (code, message) pair; the status comes from the
 * one table in error.c, never picked by hand. The error path never allocates. */
#ifndef CELLA_ERROR_H
#define CELLA_ERROR_H

#include <stdarg.h>
#include <stdbool.h>

#include "common/macros.h"

#define CELLA_ERROR_CODES(X)                \
        X(OK, 200)                          \
        X(FILE_NOT_FOUND, 404)              \
        X(PERMISSION_DENIED, 403)           \
        X(FILE_EXISTS, 409)                 \
        X(IS_DIRECTORY, 400)                \
        X(NOT_DIRECTORY, 400)               \
        X(DIRECTORY_NOT_EMPTY, 409)         \
        X(FILE_TOO_LARGE, 413)              \
        X(NO_SPACE, 507)                    \
        X(INSUFFICIENT_STORAGE, 507)        \
        X(NAME_TOO_LONG, 400)               \
        X(READ_ONLY, 403)                   \
        X(COMMAND_NOT_FOUND, 404)           \
        X(INVALID_COMMAND, 400)             \
        X(COMMAND_TIMEOUT, 408)             \
        X(PROCESS_NOT_FOUND, 404)           \
        X(PROCESS_ALREADY_EXISTS, 409)      \
        X(SESSION_NOT_FOUND, 404)           \
        X(SESSION_ALREADY_EXISTS, 409)      \
        X(SESSION_DESTROYED, 410)           \
        X(SESSION_TERMINATED, 410)          \
        X(PORT_ALREADY_EXPOSED, 409)        \
        X(PORT_NOT_EXPOSED, 404)            \
        X(INVALID_PORT, 400)                \
        X(INVALID_TOKEN, 404)               \
        X(STALE_PREVIEW_URL, 410)           \
        X(BAD_GATEWAY, 502)                 \
        X(CONTEXT_NOT_FOUND, 404)           \
        X(CONTEXT_DEAD, 410)                \
        X(INTERPRETER_NOT_FOUND, 501)       \
        X(PROCESS_READY_TIMEOUT, 408)       \
        X(PROCESS_EXITED_BEFORE_READY, 409) \
        X(VALIDATION_FAILED, 400)           \
        X(INVALID_SANDBOX_NAME, 400)        \
        X(SANDBOX_NOT_FOUND, 404)           \
        X(SANDBOX_LIMIT_REACHED, 429)       \
        X(SANDBOX_STOPPED, 409)             \
        X(IMAGE_NOT_FOUND, 404)             \
        X(IMAGE_IN_USE, 409)                \
        X(IMAGE_EXISTS, 409)                \
        X(IMAGE_BUSY, 409)                  \
        X(INVALID_IMAGE, 400)               \
        X(SNAPSHOT_NOT_FOUND, 404)          \
        X(SNAPSHOT_IN_USE, 409)             \
        X(MEMORY_SNAPSHOT_UNAVAILABLE, 501) \
        X(MEMORY_FORK_FAILED, 500)          \
        X(KEY_NOT_FOUND, 404)               \
        X(QUOTA_EXCEEDED, 403)              \
        X(BACKUP_NOT_FOUND, 404)            \
        X(BACKUP_EXPIRED, 400)              \
        X(INVALID_BACKUP_CONFIG, 400)       \
        X(BACKUP_CREATE_FAILED, 500)        \
        X(BACKUP_RESTORE_FAILED, 500)       \
        X(UNAUTHORIZED, 401)                \
        X(NOT_FOUND, 404)                   \
        X(METHOD_NOT_ALLOWED, 405)          \
        X(UNSUPPORTED_MEDIA_TYPE, 415)      \
        X(PAYLOAD_TOO_LARGE, 413)           \
        X(URI_TOO_LONG, 414)                \
        X(HEADERS_TOO_LARGE, 431)           \
        X(BAD_REQUEST, 400)                 \
        X(SANDBOX_UNAVAILABLE, 503)         \
        X(SERVER_BUSY, 503)                 \
        X(CLUSTER_UNAVAILABLE, 503)         \
        X(SANDBOX_ON_OTHER_NODE, 409)       \
        X(REQUEST_TIMEOUT, 408)             \
        X(TOO_MANY_REQUESTS, 429)           \
        X(INVALID_GIT_URL, 400)             \
        X(GIT_REPOSITORY_NOT_FOUND, 404)    \
        X(GIT_BRANCH_NOT_FOUND, 404)        \
        X(GIT_AUTH_FAILED, 401)             \
        X(GIT_NETWORK_ERROR, 502)           \
        X(GIT_CLONE_FAILED, 500)            \
        X(INTERNAL_ERROR, 500)

enum cella_code {
#define X(name, status) CELLA_E_##name,
        CELLA_ERROR_CODES(X)
#undef X
                _CELLA_E_MAX
};

/* Caller-owned; written once by the deepest function that knows the context. */
struct cella_error {
        int code; /* enum cella_code */
        char msg[256];
};

const char *cella_code_name(int code);   /* "FILE_NOT_FOUND"; "INTERNAL_ERROR" if unknown */
int cella_code_status(int code);         /* 404 */
int cella_code_from_name(const char *s); /* -1 if unknown */
/* Map an errno (positive or negative) from a file operation to a code. */
int cella_code_from_errno(int err);

/* The negative errno a code stands for (-ENOENT for FILE_NOT_FOUND, -EINVAL for
 * VALIDATION_FAILED, -EIO for INTERNAL_ERROR and unknown codes). */
int cella_code_errno(int code);

/* Set *err (if not NULL and not already set) to code and a formatted message. Returns the
 * code's negative errno (cella_code_errno; that of the code already held if *err was set
 * before) so that `return cella_error_set(...)` reads naturally where an int is returned. */
int cella_error_set(struct cella_error *err, int code, const char *fmt, ...) _printf_(3, 4);
int cella_error_setv(struct cella_error *err, int code, const char *fmt, va_list ap);
/* Like cella_error_set, with ": strerror(errnum)" appended; the code comes from errno.
 * Returns -errnum (errnum may be given positive or negative; 0 counts as EIO). */
int cella_error_errno(struct cella_error *err, int errnum, const char *fmt, ...) _printf_(3, 4);
/* Context on the way up: turn a set error's message into "<fmt...>: <message>", in place
 * (cut at the end to fit, never allocating). The code stays. Meant for the error a callee
 * just set in a record that was empty when it was called (the first error set wins, so an
 * older one would get the new context). Returns the code's negative errno, or -EIO when
 * err is NULL or not set (nothing to add context to). */
int cella_error_prefix(struct cella_error *err, const char *fmt, ...) _printf_(2, 3);
int cella_error_prefixv(struct cella_error *err, const char *fmt, va_list ap);
static inline bool cella_error_is_set(const struct cella_error *err)
{
        return err && err->code != CELLA_E_OK;
}

#endif
