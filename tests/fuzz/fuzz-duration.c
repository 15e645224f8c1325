/* Fuzz the CLI's duration and timestamp parsers (src/cli/duration.h: --timeout,
 * --sleep-after, the times `cella info` and `cella list` show).
 *
 * Invariants: cli_duration_parse returns 0, -EINVAL or -ERANGE; an accepted duration is in
 * 0..CLI_DURATION_MAX_MS, does not depend on bytes past len, and cli_duration_format writes
 * it back in a form that parses to the same value; a bare number scales with the unit.
 * cli_time_parse returns 0 or -EINVAL, accepts only the 24-byte API shape, and formatting
 * its result gives the same text back. */
#include <errno.h>
#include <string.h>

#include "cli/duration.h"
#include "common/timeutil.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        int64_t ms = -1, again = -1, t;
        char copy[64], text[64];
        int r = cli_duration_parse(s, size, 1, &ms);

        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ERANGE);
        if (r == 0) {
                FUZZ_CHECK(ms >= 0 && ms <= CLI_DURATION_MAX_MS);
                if (size < sizeof(copy) - 1) {
                        memcpy(copy, data, size);
                        copy[size] = '7';
                        FUZZ_CHECK(cli_duration_parse(copy, size, 1, &again) == 0 && again == ms);
                }
                FUZZ_CHECK(cli_duration_format(ms, text, sizeof(text)) == 0);
                FUZZ_CHECK(cli_duration_parse(text, strlen(text), 1000, &again) == 0 &&
                           again == ms);
                /* a bare number is counted in the unit given */
                size_t digits = 0;

                while (digits < size && data[digits] >= '0' && data[digits] <= '9')
                        digits++;
                if (digits == size) {
                        r = cli_duration_parse(s, size, 1000, &again);
                        FUZZ_CHECK(r == -ERANGE || (r == 0 && again == ms * 1000));
                }
        }
        r = cli_time_parse(s, size, &t);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r == 0) {
                FUZZ_CHECK(size == 24);
                time_format_iso(t, text, sizeof(text));
                FUZZ_CHECK(strlen(text) == 24 && memcmp(text, data, 24) == 0);
        }
        return 0;
}
