/* Fuzz the daemon's reading of the agent's end of a stream (src/daemon/api-req.h): an
 * EXIT payload through api_exit_parse() and an ERROR payload through api_error_parse(),
 * both as the request object meets them, from a sandbox that may be hostile.
 *
 * Invariants: an ERROR becomes a known, non-OK error code with a NUL-terminated message
 * (empty only when the agent sent an empty one), and the exit code is reported exactly
 * when the payload carries an integer exitCode (-1 otherwise); an EXIT leaves code and
 * timeoutMs at -1 unless the payload names them; both are deterministic. */
#include <string.h>

#include "daemon/api-req.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct frame f = {.type = FRAME_ERROR, .len = (uint32_t)size, .payload = data};
        struct cella_error e = {0}, again = {0};
        struct api_exit x, y;
        json_int_t code = 0, code2 = 0;
        bool has;

        if (size > CELLA_FRAME_MAX)
                return 0;
        has = api_error_parse(&f, &e, &code);
        FUZZ_CHECK(e.code > CELLA_E_OK && e.code < _CELLA_E_MAX);
        FUZZ_CHECK(memchr(e.msg, '\0', sizeof(e.msg)) != NULL);
        FUZZ_CHECK(has || code == -1);
        FUZZ_CHECK(api_error_parse(&f, &again, &code2) == has && code2 == code);
        FUZZ_CHECK(again.code == e.code && strcmp(again.msg, e.msg) == 0);
        FUZZ_CHECK(api_error_parse(&f, &again, NULL) == has);

        f.type = FRAME_EXIT;
        api_exit_parse(&f, &x);
        api_exit_parse(&f, &y);
        FUZZ_CHECK(x.code == y.code && x.timed_out == y.timed_out && x.timeout_ms == y.timeout_ms);
        if (!memmem(data, size, "exitCode", 8))
                FUZZ_CHECK(x.code == -1);
        if (!memmem(data, size, "timeoutMs", 9))
                FUZZ_CHECK(x.timeout_ms == -1);
        return 0;
}
