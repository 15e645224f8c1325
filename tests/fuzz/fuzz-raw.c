/* Fuzz the raw exec form's header and trailer lines (src/client/raw.h): the input is cut
 * into lines at '\n' and each is read as a libcella answer's header line.
 *
 * Invariants: never crashes or reads past a line; the error code and message stay
 * NUL-terminated within their arrays; the joined Cella-Stderr stays within what the daemon
 * sends at most (cut beyond); a pid or exit code is set only from a whole decimal number. */
#include <string.h>

#include "client/raw.h"
#include "common/limits.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct raw_end e = {.err = BUF_INIT};
        const char *p = (const char *)data, *end = p + size;

        while (p < end) {
                const char *nl = memchr(p, '\n', (size_t)(end - p));
                size_t n = nl ? (size_t)(nl - p) + 1 : (size_t)(end - p);

                raw_end_line(&e, p, n);
                p += n;
        }
        FUZZ_CHECK(memchr(e.code, '\0', sizeof(e.code)) != NULL);
        FUZZ_CHECK(memchr(e.message, '\0', sizeof(e.message)) != NULL);
        FUZZ_CHECK(e.err.len <= (size_t)CELLA_EXEC_RAW_STDERR / 3 * 4 + 4);
        if (e.has_error)
                FUZZ_CHECK(strchr(e.code, '\n') == NULL);
        raw_end_free(&e);
        return 0;
}
