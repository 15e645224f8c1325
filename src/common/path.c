#include <string.h>

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
