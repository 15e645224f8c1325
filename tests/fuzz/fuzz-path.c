/* Fuzz the lexical normalization of sandbox paths (src/common/path.h), and the decoding
 * of a query string's path (sandbox_path_decode) as text and as base64.
 *
 * Invariants: on success the result is absolute, NUL-terminated at the returned length,
 * within CELLA_PATH_MAX, has no empty, '.' or '..' component and no trailing '/' (except
 * "/" itself), and is a fixed point of normalization. A relative input lands under
 * /workspace unless '..' climbs out of it. Failures set VALIDATION_FAILED or
 * NAME_TOO_LONG. A small output buffer fails cleanly instead of overflowing.
 * Decoding as text is normalization for UTF-8 input and VALIDATION_FAILED otherwise; as
 * base64 it yields a normalized path or VALIDATION_FAILED/NAME_TOO_LONG; any normalized
 * path, base64-encoded, decodes back to itself. */
#include <string.h>

#include "common/base64.h"
#include "common/limits.h"
#include "common/path.h"
#include "common/utf8.h"
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
                FUZZ_CHECK(n == cella_code_errno(err.code));
                FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED ||
                           err.code == CELLA_E_NAME_TOO_LONG);
                FUZZ_CHECK(err.msg[0] != '\0');
        }

        /* As a query string's path: text, then base64. */
        {
                static char dec[CELLA_PATH_MAX + 1];
                struct cella_error e = {0};
                int d = sandbox_path_decode((const char *)data, size, false, dec, sizeof(dec), &e);

                if (utf8_is_valid((const char *)data, size)) {
                        FUZZ_CHECK(d == n);
                        if (n >= 0)
                                FUZZ_CHECK(strcmp(dec, out) == 0);
                } else {
                        FUZZ_CHECK(d == -EINVAL && e.code == CELLA_E_VALIDATION_FAILED);
                }
                memset(&e, 0, sizeof(e));
                d = sandbox_path_decode((const char *)data, size, true, dec, sizeof(dec), &e);
                if (d >= 0) {
                        check_result(dec, d);
                } else {
                        FUZZ_CHECK(d == cella_code_errno(e.code));
                        FUZZ_CHECK(e.code == CELLA_E_VALIDATION_FAILED ||
                                   e.code == CELLA_E_NAME_TOO_LONG ||
                                   e.code == CELLA_E_INTERNAL_ERROR);
                        FUZZ_CHECK(utf8_is_valid(e.msg, strlen(e.msg)));
                }
                if (n >= 0) {
                        struct buf b = BUF_INIT;

                        if (base64_encode(&b, out, (size_t)n) == 0) {
                                memset(&e, 0, sizeof(e));
                                d = sandbox_path_decode(b.data, b.len, true, dec, sizeof(dec), &e);
                                FUZZ_CHECK(d == n && strcmp(dec, out) == 0);
                        }
                        buf_free(&b);
                }
        }

        /* The same input into a buffer that is too small for most results. */
        memset(small, 0x5a, sizeof(small));
        s = sandbox_path_normalize((const char *)data, size, small, sizeof(small) - 1, &err2);
        FUZZ_CHECK(small[sizeof(small) - 1] == 0x5a);
        if (s >= 0) {
                FUZZ_CHECK(n == s && strcmp(small, out) == 0);
        } else {
                FUZZ_CHECK(s == cella_code_errno(err2.code) && cella_error_is_set(&err2));
        }
        return 0;
}
