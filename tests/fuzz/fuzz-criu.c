/* Fuzz the readers of CRIU's output (src/runtime/criu.h: memory sleep's host check): the
 * input is what `criu --version` or `criu check` printed.
 *
 * Invariants: criu_version_parse returns 0 or -EINVAL, and a version it accepts is 1-31
 * bytes of [0-9A-Za-z.+~-], found in the input; criu_check_reason always ends its text
 * within the buffer, returns its length, writes no control byte, and gives the same text
 * for the same input whatever the buffer beyond it held. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/criu.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        char ver[32], a[CRIU_REASON_MAX], b[CRIU_REASON_MAX], small[16];
        int r = criu_version_parse(s, size, ver, sizeof(ver));

        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r == 0) {
                size_t n = strlen(ver);
                FUZZ_CHECK(n >= 1 && n <= 31);
                for (size_t i = 0; i < n; i++)
                        FUZZ_CHECK(strchr("0123456789.+~-", ver[i]) ||
                                   (ver[i] >= 'a' && ver[i] <= 'z') ||
                                   (ver[i] >= 'A' && ver[i] <= 'Z'));
                FUZZ_CHECK(memmem(data, size, ver, n) != NULL);
        }
        for (int vclock = 0; vclock < 2; vclock++) {
                memset(a, 'x', sizeof(a));
                memset(b, 'y', sizeof(b));
                size_t na = criu_check_reason(s, size, vclock, a, sizeof(a));
                size_t nb = criu_check_reason(s, size, vclock, b, sizeof(b));
                FUZZ_CHECK(na < sizeof(a) && a[na] == '\0' && strlen(a) == na);
                FUZZ_CHECK(na == nb && memcmp(a, b, na) == 0);
                for (size_t i = 0; i < na; i++)
                        FUZZ_CHECK((unsigned char)a[i] >= 0x20 && a[i] != 0x7f);
                size_t ns = criu_check_reason(s, size, vclock, small, sizeof(small));
                FUZZ_CHECK(ns < sizeof(small) && small[ns] == '\0');
                FUZZ_CHECK(memcmp(small, a, ns) == 0);
        }
        return 0;
}
