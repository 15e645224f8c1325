#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/utf8.h"

#include "common/limits.h"
#include "common/path.h"

int sandbox_path_normalize(const char *path, size_t len, char *out, size_t outsz,
                           struct cella_error *err)
{
        size_t o = 0, i = 0;

        if (!path || len == 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path is empty");
        if (memchr(path, '\0', len))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path contains a NUL byte");
        if (len > CELLA_PATH_MAX)
                return cella_error_set(err, CELLA_E_NAME_TOO_LONG, "path is longer than %d bytes",
                                       CELLA_PATH_MAX);
        if (outsz < 2)
                return cella_error_set(err, CELLA_E_NAME_TOO_LONG, "path buffer too small");

        if (path[0] != '/') {
                size_t wl = strlen(CELLA_WORKSPACE);
                if (wl + 1 > outsz)
                        return cella_error_set(err, CELLA_E_NAME_TOO_LONG, "path too long");
                memcpy(out, CELLA_WORKSPACE, wl);
                o = wl;
        }
        while (i < len) {
                size_t start, clen;
                while (i < len && path[i] == '/')
                        i++;
                start = i;
                while (i < len && path[i] != '/')
                        i++;
                clen = i - start;
                if (clen == 0 || (clen == 1 && path[start] == '.'))
                        continue;
                if (clen == 2 && path[start] == '.' && path[start + 1] == '.') {
                        while (o > 0 && out[o - 1] != '/')
                                o--;
                        if (o > 0)
                                o--; /* drop the slash too */
                        continue;
                }
                if (clen > 255)
                        return cella_error_set(err, CELLA_E_NAME_TOO_LONG,
                                               "path component longer than 255 bytes");
                if (o + 1 + clen + 1 > outsz || o + 1 + clen > CELLA_PATH_MAX)
                        return cella_error_set(err, CELLA_E_NAME_TOO_LONG, "path too long");
                out[o++] = '/';
                memcpy(out + o, path + start, clen);
                o += clen;
        }
        if (o == 0)
                out[o++] = '/';
        out[o] = '\0';
        return (int)o;
}

int sandbox_path_decode(const char *s, size_t len, bool base64, char *out, size_t outsz,
                        struct cella_error *err)
{
        _cleanup_buf_ struct buf raw = BUF_INIT;
        char b64[((CELLA_PATH_MAX + 2) / 3) * 4 + 4];
        size_t n = 0;

        if (!base64) {
                if (!utf8_is_valid(s, len))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "path is not valid UTF-8 (send its bytes in "
                                               "base64 with pathEncoding=base64)");
                return sandbox_path_normalize(s, len, out, outsz, err);
        }
        if (len > sizeof(b64) - 4)
                return cella_error_set(err, CELLA_E_NAME_TOO_LONG, "path is longer than %d bytes",
                                       CELLA_PATH_MAX);
        for (size_t i = 0; i < len; i++) {
                char c = s[i];

                if (c == '=')
                        break; /* padding: added back below */
                b64[n++] = c == ' ' || c == '-' ? '+' : c == '_' ? '/' : c;
        }
        for (size_t i = n; i < len; i++)
                if (s[i] != '=')
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "path is not valid base64");
        if (n == 0)
                return sandbox_path_normalize("", 0, out, outsz, err); /* "path is empty" */
        while (n % 4 != 0)
                b64[n++] = '=';
        switch (base64_decode(&raw, b64, n)) {
        case 0:
                break;
        case -ENOMEM:
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        default:
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "path is not valid base64");
        }
        return sandbox_path_normalize(raw.data, raw.len, out, outsz, err);
}
