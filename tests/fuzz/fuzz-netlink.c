/* Fuzz net_host_prefix_parse (src/runtime/net.h): one message of the host's address and
 * route dumps, read to choose a sandbox range that overlaps none of them.
 *
 * The input is one netlink message whose nlmsg_len is clamped to the bytes given.
 * Invariants: it returns 1, 0 or -EINVAL; a prefix it returns has no host bits and a
 * length of 1 to 32 for a route (a default route is never returned), 0 to 32 for an
 * address, and contains the address it came from. */
#include <errno.h>
#include <linux/netlink.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/net.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static union {
                struct nlmsghdr h;
                char buf[65536];
        } m;
        struct net_host_prefix p;

        if (size < sizeof(struct nlmsghdr) || size > sizeof(m.buf))
                return 0;
        memcpy(m.buf, data, size);
        if (m.h.nlmsg_len > size)
                m.h.nlmsg_len = (uint32_t)size;
        int r = net_host_prefix_parse(&m.h, &p);
        FUZZ_CHECK(r == 1 || r == 0 || r == -EINVAL);
        if (r != 1)
                return 0;
        FUZZ_CHECK(p.cidr.prefix <= 32);
        FUZZ_CHECK(!p.is_route || p.cidr.prefix > 0);
        uint32_t mask = p.cidr.prefix ? ~0u << (32 - p.cidr.prefix) : 0;
        FUZZ_CHECK((p.cidr.addr & ~mask) == 0);
        FUZZ_CHECK((p.addr & mask) == p.cidr.addr);
        return 0;
}
