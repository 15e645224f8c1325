#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/utf8.h"

static const struct {
        const char *name;
        int status;
} table[] = {
#define X(n, s) [CELLA_E_##n] = {#n, s},
        CELLA_ERROR_CODES(X)
#undef X
};

const char *cella_code_name(int code)
{
        if (code < 0 || code >= _CELLA_E_MAX)
                return "INTERNAL_ERROR";
        return table[code].name;
}

int cella_code_status(int code)
{
        if (code < 0 || code >= _CELLA_E_MAX)
                return 500;
        return table[code].status;
}

int cella_code_from_name(const char *s)
{
        if (!s)
                return -1;
        for (int i = 0; i < _CELLA_E_MAX; i++)
                if (strcmp(table[i].name, s) == 0)
                        return i;
        return -1;
}

/* The errno each code stands for, returned (negated) by the setters so that a function
 * which sets *err returns -errno like every other fallible function (STYLE.md). Codes
 * without an obvious errno are EIO; a test checks that every code has one. */
static const int code_errno[_CELLA_E_MAX] = {
        [CELLA_E_OK] = EIO,
        [CELLA_E_FILE_NOT_FOUND] = ENOENT,
        [CELLA_E_PERMISSION_DENIED] = EACCES,
        [CELLA_E_FILE_EXISTS] = EEXIST,
        [CELLA_E_IS_DIRECTORY] = EISDIR,
        [CELLA_E_NOT_DIRECTORY] = ENOTDIR,
        [CELLA_E_DIRECTORY_NOT_EMPTY] = ENOTEMPTY,
        [CELLA_E_FILE_TOO_LARGE] = EFBIG,
        [CELLA_E_NO_SPACE] = ENOSPC,
        [CELLA_E_INSUFFICIENT_STORAGE] = ENOSPC,
        [CELLA_E_NAME_TOO_LONG] = ENAMETOOLONG,
        [CELLA_E_READ_ONLY] = EROFS,
        [CELLA_E_COMMAND_NOT_FOUND] = ENOENT,
        [CELLA_E_INVALID_COMMAND] = EINVAL,
        [CELLA_E_COMMAND_TIMEOUT] = ETIMEDOUT,
        [CELLA_E_PROCESS_NOT_FOUND] = ESRCH,
        [CELLA_E_PROCESS_ALREADY_EXISTS] = EEXIST,
        [CELLA_E_SESSION_NOT_FOUND] = ENOENT,
        [CELLA_E_SESSION_ALREADY_EXISTS] = EEXIST,
        [CELLA_E_SESSION_DESTROYED] = ESHUTDOWN,
        [CELLA_E_SESSION_TERMINATED] = ESHUTDOWN,
        [CELLA_E_PORT_ALREADY_EXPOSED] = EADDRINUSE,
        [CELLA_E_PORT_NOT_EXPOSED] = ENOENT,
        [CELLA_E_INVALID_PORT] = EINVAL,
        [CELLA_E_INVALID_TOKEN] = ENOENT,
        [CELLA_E_STALE_PREVIEW_URL] = ESHUTDOWN,
        [CELLA_E_BAD_GATEWAY] = ECONNREFUSED,
        [CELLA_E_CONTEXT_NOT_FOUND] = ENOENT,
        [CELLA_E_CONTEXT_DEAD] = ESHUTDOWN,
        [CELLA_E_INTERPRETER_NOT_FOUND] = ENOENT,
        [CELLA_E_PROCESS_READY_TIMEOUT] = ETIMEDOUT,
        [CELLA_E_PROCESS_EXITED_BEFORE_READY] = ECHILD,
        [CELLA_E_VALIDATION_FAILED] = EINVAL,
        [CELLA_E_INVALID_SANDBOX_NAME] = EINVAL,
        [CELLA_E_SANDBOX_NOT_FOUND] = ENOENT,
        [CELLA_E_SANDBOX_LIMIT_REACHED] = EAGAIN,
        [CELLA_E_IMAGE_NOT_FOUND] = ENOENT,
        [CELLA_E_IMAGE_IN_USE] = EBUSY,
        [CELLA_E_IMAGE_EXISTS] = EEXIST,
        [CELLA_E_IMAGE_BUSY] = EBUSY,
        [CELLA_E_INVALID_IMAGE] = EINVAL,
        [CELLA_E_SNAPSHOT_NOT_FOUND] = ENOENT,
        [CELLA_E_SNAPSHOT_IN_USE] = EBUSY,
        [CELLA_E_MEMORY_SNAPSHOT_UNAVAILABLE] = EOPNOTSUPP,
        [CELLA_E_MEMORY_FORK_FAILED] = EIO,
        [CELLA_E_KEY_NOT_FOUND] = ENOENT,
        [CELLA_E_QUOTA_EXCEEDED] = EACCES,
        [CELLA_E_BACKUP_NOT_FOUND] = ENOENT,
        [CELLA_E_BACKUP_EXPIRED] = ETIME,
        [CELLA_E_INVALID_BACKUP_CONFIG] = EINVAL,
        [CELLA_E_BACKUP_CREATE_FAILED] = EIO,
        [CELLA_E_BACKUP_RESTORE_FAILED] = EIO,
        [CELLA_E_UNAUTHORIZED] = EACCES,
        [CELLA_E_NOT_FOUND] = ENOENT,
        [CELLA_E_METHOD_NOT_ALLOWED] = EOPNOTSUPP,
        [CELLA_E_UNSUPPORTED_MEDIA_TYPE] = EMEDIUMTYPE,
        [CELLA_E_PAYLOAD_TOO_LARGE] = E2BIG,
        [CELLA_E_URI_TOO_LONG] = E2BIG,
        [CELLA_E_HEADERS_TOO_LARGE] = E2BIG,
        [CELLA_E_BAD_REQUEST] = EINVAL,
        [CELLA_E_SANDBOX_UNAVAILABLE] = EAGAIN,
        [CELLA_E_SANDBOX_STOPPED] = ESRCH,
        [CELLA_E_SERVER_BUSY] = EBUSY,
        [CELLA_E_CLUSTER_UNAVAILABLE] = EAGAIN,
        [CELLA_E_SANDBOX_ON_OTHER_NODE] = EREMOTE,
        [CELLA_E_REQUEST_TIMEOUT] = ETIMEDOUT,
        [CELLA_E_TOO_MANY_REQUESTS] = EAGAIN,
        [CELLA_E_INVALID_GIT_URL] = EINVAL,
        [CELLA_E_GIT_REPOSITORY_NOT_FOUND] = ENOENT,
        [CELLA_E_GIT_BRANCH_NOT_FOUND] = ENOENT,
        [CELLA_E_GIT_AUTH_FAILED] = EACCES,
        [CELLA_E_GIT_NETWORK_ERROR] = ENETUNREACH,
        [CELLA_E_GIT_CLONE_FAILED] = EIO,
        [CELLA_E_INTERNAL_ERROR] = EIO,
};

int cella_code_errno(int code)
{
        if (code < 0 || code >= _CELLA_E_MAX || code_errno[code] == 0)
                return -EIO;
        return -code_errno[code];
}

int cella_code_from_errno(int e)
{
        if (e < 0)
                e = -e;
        switch (e) {
        case ENOENT:
                return CELLA_E_FILE_NOT_FOUND;
        case EACCES:
        case EPERM:
                return CELLA_E_PERMISSION_DENIED;
        case EEXIST:
                return CELLA_E_FILE_EXISTS;
        case EISDIR:
                return CELLA_E_IS_DIRECTORY;
        case ENOTDIR:
                return CELLA_E_NOT_DIRECTORY;
        case ENOTEMPTY:
                return CELLA_E_DIRECTORY_NOT_EMPTY;
        case ENOSPC:
        case EDQUOT:
                return CELLA_E_NO_SPACE;
        case ENAMETOOLONG:
                return CELLA_E_NAME_TOO_LONG;
        case EFBIG:
                return CELLA_E_FILE_TOO_LARGE;
        case EROFS:
                return CELLA_E_READ_ONLY;
        case EINVAL:
        case ELOOP:
                return CELLA_E_VALIDATION_FAILED;
        default:
                return CELLA_E_INTERNAL_ERROR;
        }
}

/* The value a setter returns: the errno of the code the error holds (the first one set
 * wins, so a second setter returns the first failure's errno), or of `code` when *err
 * cannot hold it. */
static int setter_result(const struct cella_error *err, int code)
{
        return cella_code_errno(err && err->code != CELLA_E_OK ? err->code : code);
}

int cella_error_setv(struct cella_error *err, int code, const char *fmt, va_list ap)
{
        if (!err || err->code != CELLA_E_OK)
                return setter_result(err, code);
        err->code = code;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        /* A message quotes paths and names the sandbox chose (and may be cut inside a
         * character): it travels as JSON text, so it must be UTF-8. */
        utf8_scrub(err->msg);
        return cella_code_errno(code);
}

int cella_error_set(struct cella_error *err, int code, const char *fmt, ...)
{
        va_list ap;
        int r;
        va_start(ap, fmt);
        r = cella_error_setv(err, code, fmt, ap);
        va_end(ap);
        return r;
}

int cella_error_errno(struct cella_error *err, int errnum, const char *fmt, ...)
{
        char buf[192];
        va_list ap;
        if (errnum < 0)
                errnum = -errnum;
        if (errnum == 0)
                errnum = EIO;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        cella_error_set(err, cella_code_from_errno(errnum), "%s: %s", buf, strerror(errnum));
        return -errnum;
}

int cella_error_prefixv(struct cella_error *err, const char *fmt, va_list ap)
{
        char head[sizeof(err->msg)];
        size_t hlen, mlen, keep;

        if (!cella_error_is_set(err))
                return -EIO;
        vsnprintf(head, sizeof(head), fmt, ap);
        hlen = strlen(head);
        if (hlen > sizeof(err->msg) - 3)
                hlen = sizeof(err->msg) - 3;
        /* "head: msg", cut at the end to fit; the message moves right in place. */
        mlen = strnlen(err->msg, sizeof(err->msg) - 1);
        keep = MIN(mlen, sizeof(err->msg) - 1 - hlen - 2);
        memmove(err->msg + hlen + 2, err->msg, keep);
        err->msg[hlen + 2 + keep] = '\0';
        memcpy(err->msg, head, hlen);
        err->msg[hlen] = ':';
        err->msg[hlen + 1] = ' ';
        utf8_scrub(err->msg);
        return cella_code_errno(err->code);
}

int cella_error_prefix(struct cella_error *err, const char *fmt, ...)
{
        va_list ap;
        int r;
        va_start(ap, fmt);
        r = cella_error_prefixv(err, fmt, ap);
        va_end(ap);
        return r;
}
