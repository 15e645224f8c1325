/* Fuzz the lexical normalization of sandbox paths (src/common/path.h).
 *
 * Invariants: on success the result is absolute, NUL-terminated at the returned length,
 * within CELLA_PATH_MAX, has no empty, '.' or '..' component and no trailing '/' (except
 * "/" itself), and is a fixed point of normalization. A relative input lands under
 * /workspace unless '..' climbs out of it. Failures set VALIDATION_FAILED or
 * NAME_TOO_LONG. A small output buffer fails cleanly instead of overflowing. */
#include <string.h>

#include "common/limits.h"
#include "common/path.h"
#include "fuzz.h"

static void check_result(const char *out, int n)
{
        char again[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        int m;

        FUZZ_CHECK(n >= 1 && n <= CELLA_PATH_MAX);
        FUZZ_CHECK(strlen(out) == (size_t)n);
        FUZZ_CHECK(out[0] == '/');
        FUZZ_CHECK(n == 1 || out[n - 1] != '/');
        FUZZ_CHECK(strstr(out, "//") == NULL);
        FUZZ_CHECK(strstr(out, "/./") == NULL && strstr(out, "/../") == NULL);
        FUZZ_CHECK(!(n >= 2 && strcmp(out + n - 2, "/.") == 0));
        FUZZ_CHECK(!(n >= 3 && strcmp(out + n - 3, "/..") == 0));

        m = sandbox_path_normalize(out, (size_t)n, again, sizeof(again), &err);
        FUZZ_CHECK(m == n && strcmp(again, out) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char out[CELLA_PATH_MAX + 1];
        char small[16];
        struct cella_error err = {0}, err2 = {0};
        int n, s;

        n = sandbox_path_normalize((const char *)data, size, out, sizeof(out), &err);
        if (n >= 0) {
                FUZZ_CHECK(!cella_error_is_set(&err));
                check_result(out, n);
                if (size > 0 && data[0] != '/' && memchr(data, '.', size) == NULL)
                        FUZZ_CHECK(strncmp(out, CELLA_WORKSPACE "/", strlen(CELLA_WORKSPACE) + 1) ==
                                           0 ||
                                   strcmp(out, CELLA_WORKSPACE) == 0);
        } else {
                FUZZ_CHECK(n == -1);
                FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED ||
                           err.code == CELLA_E_NAME_TOO_LONG);
                FUZZ_CHECK(err.msg[0] != '\0');
        }

        /* The same input into a buffer that is too small for most results. */
        memset(small, 0x5a, sizeof(small));
        s = sandbox_path_normalize((const char *)data, size, small, sizeof(small) - 1, &err2);
        FUZZ_CHECK(small[sizeof(small) - 1] == 0x5a);
        if (s >= 0) {
                FUZZ_CHECK(n == s && strcmp(small, out) == 0);
        } else {
                FUZZ_CHECK(s == -1 && cella_error_is_set(&err2));
        }
        return 0;
}
