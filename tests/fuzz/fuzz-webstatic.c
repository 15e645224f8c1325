/* Fuzz the web console's file names (src/common/webstatic.h) and the bearer token a
 * browser's WebSocket carries in Sec-WebSocket-Protocol (src/common/ws-key.h).
 *
 * Invariants: a name webstatic_path accepts is NUL-terminated at its length, is relative,
 * has no "." or ".." segment, no segment starting with '.', no empty segment, only
 * [A-Za-z0-9._~-/] bytes, and ends in "index.html" exactly when the input was empty or
 * ended in '/'; accepting it again gives itself. webstatic_type never answers NULL. A
 * token ws_protocol_bearer finds is NUL-terminated, non-empty, of bytes 0x21..0x7e but
 * 0x7f, and fits; a buffer too small is -ENAMETOOLONG, never an overflow. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/webstatic.h"
#include "common/ws-key.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        char out[WEBSTATIC_PATH_MAX + 1], again[WEBSTATIC_PATH_MAX + 1], tok[64];
        char *z = malloc(size + 1);
        int n, r;

        FUZZ_CHECK(z);
        n = webstatic_path(s, size, out, sizeof(out));
        FUZZ_CHECK(n == -EINVAL || n == -ENAMETOOLONG || n >= 0);
        if (n >= 0) {
                FUZZ_CHECK((size_t)n == strlen(out) && n > 0 && out[0] != '/');
                for (int i = 0; i < n; i++)
                        FUZZ_CHECK(strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                          "0123456789._~-/",
                                          out[i]) != NULL);
                for (int i = 0; i < n; i++)
                        if (i == 0 || out[i - 1] == '/')
                                FUZZ_CHECK(out[i] != '.' && out[i] != '/');
                FUZZ_CHECK(out[n - 1] != '/');
                if (size == 0 || s[size - 1] == '/')
                        FUZZ_CHECK(n >= 10 && strcmp(out + n - 10, "index.html") == 0);
                else
                        FUZZ_CHECK((size_t)n == size && memcmp(out, s, size) == 0);
                FUZZ_CHECK(webstatic_path(out, (size_t)n, again, sizeof(again)) == n &&
                           strcmp(again, out) == 0);
                FUZZ_CHECK(webstatic_type(out) != NULL);
        }
        memcpy(z, data, size);
        z[size] = '\0';
        r = ws_protocol_bearer(z, tok, sizeof(tok));
        FUZZ_CHECK(r == 0 || r == 1 || r == -EINVAL || r == -ENAMETOOLONG || r == -ENOMEM);
        if (r == 1) {
                size_t tl = strlen(tok);

                FUZZ_CHECK(tl > 0 && tl < sizeof(tok));
                for (size_t i = 0; i < tl; i++)
                        FUZZ_CHECK((unsigned char)tok[i] > 0x20 && (unsigned char)tok[i] != 0x7f);
        }
        FUZZ_CHECK(ws_protocol_bearer(z, tok, 1) <= 0);
        free(z);
        return 0;
}
