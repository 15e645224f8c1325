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

int cella_error_setv(struct cella_error *err, int code, const char *fmt, va_list ap)
{
        if (!err || err->code != CELLA_E_OK)
                return -1;
        err->code = code;
        vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
        /* A message quotes paths and names the sandbox chose (and may be cut inside a
         * character): it travels as JSON text, so it must be UTF-8. */
        utf8_scrub(err->msg);
        return -1;
}

int cella_error_set(struct cella_error *err, int code, const char *fmt, ...)
{
        va_list ap;
        va_start(ap, fmt);
        cella_error_setv(err, code, fmt, ap);
        va_end(ap);
        return -1;
}

int cella_error_errno(struct cella_error *err, int errnum, const char *fmt, ...)
{
        char buf[192];
        va_list ap;
        if (errnum < 0)
                errnum = -errnum;
        va_start(ap, fmt);
        vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        return cella_error_set(err, cella_code_from_errno(errnum), "%s: %s", buf, strerror(errnum));
}
