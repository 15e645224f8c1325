/* Fuzz the instance claim text (src/runtime/host-claim.h): host_claim_parse reads the
 * claim files of other daemons in /run/cella/instances and a data dir's record.
 *
 * Invariants: it returns 0 or -EINVAL; an accepted claim has a name of [a-z0-9-] (or
 * none), a range with no host bits, a uid base a daemon may have, an absolute data dir;
 * its text (host_claim_format) parses back to the same claim; the answer depends only on
 * the len bytes given. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/host-claim.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct host_claim_text c, d;
        static char text[CELLA_PATH_MAX + 512];

        int r = host_claim_parse((const char *)data, size, &c);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r != 0)
                return 0;
        for (const char *p = c.name; *p; p++)
                FUZZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-');
        if (c.has_range)
                FUZZ_CHECK(c.range.prefix <= 32 &&
                           (c.range.prefix == 32 ||
                            (c.range.addr & (0xffffffffu >> c.range.prefix)) == 0));
        if (c.has_uid_base)
                FUZZ_CHECK(host_claim_uid_base_ok(c.uid_base));
        FUZZ_CHECK(c.pid >= 0);
        FUZZ_CHECK(c.data_dir[0] == '\0' || c.data_dir[0] == '/');
        int n = host_claim_format(&c, text, sizeof(text));
        if (n == -EINVAL) {
                /* only a data dir with a newline does not read back */
                FUZZ_CHECK(strchr(c.data_dir, '\n'));
                return 0;
        }
        FUZZ_CHECK(n >= 0 && (size_t)n == strlen(text));
        FUZZ_CHECK(host_claim_parse(text, (size_t)n, &d) == 0);
        /* field by field: padding (struct net_cidr's, after the bools) carries no meaning */
        FUZZ_CHECK(strcmp(c.name, d.name) == 0 && strcmp(c.data_dir, d.data_dir) == 0);
        FUZZ_CHECK(c.has_range == d.has_range && c.has_uid_base == d.has_uid_base);
        FUZZ_CHECK(!c.has_range ||
                   (c.range.addr == d.range.addr && c.range.prefix == d.range.prefix));
        FUZZ_CHECK(!c.has_uid_base || c.uid_base == d.uid_base);
        FUZZ_CHECK(c.pid == d.pid && c.data_dev == d.data_dev && c.data_ino == d.data_ino);
        return 0;
}
