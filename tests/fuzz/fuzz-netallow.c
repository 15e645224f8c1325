/* Fuzz the network parsers (src/runtime/net.h): net_cidr_parse (--network-range, the
 * allowlist's CIDR) and net_allow_parse (networkAllow entries).
 *
 * Invariants: each returns 0 or -EINVAL; an accepted CIDR has no bits beyond its prefix and
 * a prefix of at most 32; an accepted entry's port is 0 (none) or 1-65535; its canonical
 * text parses back to the same entry; the answer depends only on the len bytes given. */
#include <errno.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        struct net_cidr c;
        struct net_allow a, b;
        char text[64], copy[80];

        int r = net_cidr_parse(s, size, &c);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r == 0) {
                FUZZ_CHECK(c.prefix <= 32);
                FUZZ_CHECK(c.prefix == 32 || (c.addr & (0xffffffffu >> c.prefix)) == 0);
        }
        r = net_allow_parse(s, size, &a);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r != 0)
                return 0;
        FUZZ_CHECK(a.cidr.prefix <= 32);
        net_allow_format(&a, text, sizeof(text));
        FUZZ_CHECK(net_allow_parse(text, strlen(text), &b) == 0);
        FUZZ_CHECK(b.cidr.addr == a.cidr.addr && b.cidr.prefix == a.cidr.prefix &&
                   b.port == a.port);
        if (size < sizeof(copy) - 1) {
                memcpy(copy, data, size);
                copy[size] = '9';
                FUZZ_CHECK(net_allow_parse(copy, size, &b) == 0 && b.port == a.port);
        }
        return 0;
}
