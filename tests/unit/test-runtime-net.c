/* The network plan's pure parts (src/runtime/net.h): CIDR and allowlist parsing, addresses
 * by uid slot, the nft ruleset text, resolv.conf, and the netlink messages' attributes. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>

#include "runtime/net.h"

#define S(x) x, strlen(x)

static void test_cidr_parse(void **state)
{
        struct net_cidr c;

        assert_int_equal(net_cidr_parse(S("10.213.0.0/16"), &c), 0);
        assert_int_equal(c.addr, 0x0ad50000u);
        assert_int_equal(c.prefix, 16);
        assert_int_equal(net_cidr_parse(S("192.0.2.7"), &c), 0);
        assert_int_equal(c.prefix, 32);
        assert_int_equal(net_cidr_parse(S("0.0.0.0/0"), &c), 0);
        assert_int_equal(c.prefix, 0);
        const char *bad[] = {"",           "10.0.0.1/8",      "10.0.0.0/33", "256.0.0.0/8",
                             "1.2.3",      "1.2.3.4.5",       "01.2.3.4",    "1.2.3.4/08",
                             "1.2.3.4/",   " 1.2.3.4",        "1.2.3.4 ",    "1.2.3.4:80",
                             "::1",        "fc00::/7",        "1..2.3",      "-1.2.3.4",
                             "1.2.3.4/-1", "4294967296.0.0.0"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(net_cidr_parse(S(bad[i]), &c), -EINVAL);
        /* len bytes only */
        assert_int_equal(net_cidr_parse("10.0.0.0/8xyz", 10, &c), 0);
        assert_int_equal(c.prefix, 8);
}

static void test_allow_parse(void **state)
{
        struct net_allow a;
        char buf[64];

        assert_int_equal(net_allow_parse(S("203.0.113.0/24:443"), &a), 0);
        assert_int_equal(a.port, 443);
        net_allow_format(&a, buf, sizeof(buf));
        assert_string_equal(buf, "203.0.113.0/24:443");
        assert_int_equal(net_allow_parse(S("10.1.2.3"), &a), 0);
        assert_int_equal(a.port, 0);
        net_allow_format(&a, buf, sizeof(buf));
        assert_string_equal(buf, "10.1.2.3/32");
        assert_int_equal(net_allow_parse(S("10.1.2.3:65535"), &a), 0);
        const char *bad[] = {"10.1.2.3:0",  "10.1.2.3:65536", "10.1.2.3:",  "10.1.2.3:080",
                             "10.1.2.3::1", "10.1.2.3:80:1",  "10.1.2.3/8", ":80",
                             "10.1.2.3:a"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(net_allow_parse(S(bad[i]), &a), -EINVAL);
}

static void test_plan(void **state)
{
        struct net_cidr r;
        struct net_plan p;
        char ifp[16], ip[16];

        net_ifprefix("cella", ifp, sizeof(ifp));
        assert_int_equal(strlen(ifp), 8);
        assert_memory_equal(ifp, "cn", 2);
        assert_int_equal(net_cidr_parse(S("10.213.0.0/16"), &r), 0);
        assert_int_equal(net_plan_make(&r, ifp, 0, &p), 0);
        net_addr_format(p.host_addr, ip, sizeof(ip));
        assert_string_equal(ip, "10.213.0.1");
        net_addr_format(p.sandbox_addr, ip, sizeof(ip));
        assert_string_equal(ip, "10.213.0.2");
        assert_int_equal(p.prefix, 30);
        assert_int_equal(net_plan_make(&r, ifp, 4095, &p), 0);
        net_addr_format(p.sandbox_addr, ip, sizeof(ip));
        assert_string_equal(ip, "10.213.63.254");
        assert_true(strlen(p.host_ifname) < IFNAMSIZ);
        assert_memory_equal(p.host_ifname, ifp, 8);
        assert_string_equal(p.host_ifname + 8, "4095");
        /* A /24 holds 64 slots. */
        assert_int_equal(net_cidr_parse(S("10.9.9.0/24"), &r), 0);
        assert_int_equal(net_plan_make(&r, ifp, 63, &p), 0);
        assert_int_equal(net_plan_make(&r, ifp, 64, &p), -ERANGE);
        assert_int_equal(net_cidr_parse(S("10.9.9.0/31"), &r), 0);
        assert_int_equal(net_plan_make(&r, ifp, 0, &p), -ERANGE);
}

static void test_ruleset(void **state)
{
        struct net_cidr r;
        char buf[8192];
        uint32_t dns[] = {0x0affff35u};

        assert_int_equal(net_cidr_parse(S("10.213.0.0/16"), &r), 0);
        int n = net_ruleset_text("cella-x", "cn123456", &r, dns, 1, buf, sizeof(buf));
        assert_true(n > 0 && (size_t)n == strlen(buf));
        /* Only its own table, and what must be in it. */
        for (const char *p = buf; (p = strstr(p, "inet ")); p += 5) {
                assert_memory_equal(p, "inet cella-x", 12);
                assert_true(p[12] == ' ' || p[12] == '\n');
        }
        assert_non_null(strstr(buf, "masquerade"));
        assert_non_null(strstr(buf, "ip saddr 10.213.0.0/16 oifname != \"cn123456*\""));
        assert_non_null(strstr(buf, "10.0.0.0/8"));
        assert_non_null(strstr(buf, "172.16.0.0/12"));
        assert_non_null(strstr(buf, "192.168.0.0/16"));
        assert_non_null(strstr(buf, "100.64.0.0/10"));
        assert_non_null(strstr(buf, "169.254.0.0/16"));
        assert_non_null(strstr(buf, "ip daddr 10.213.0.0/16 reject"));
        assert_non_null(strstr(buf, "ip daddr { 10.255.255.53 } meta l4proto { tcp, udp } th dport "
                                    "53 accept"));
        assert_non_null(strstr(buf, "input iifname \"cn123456*\" reject"));
        assert_non_null(strstr(buf, "meta nfproto ipv6 drop"));
        assert_null(strstr(buf, "delete"));
        /* Spoofed sources stop first; then the allowlist comes before the refusals: the
         * vmap is in from-sandbox, which then goes to egress, where the refusals are. */
        assert_non_null(strstr(buf, "from-sandbox fib saddr . iif oif missing drop\n"));
        assert_true(strstr(buf, "fib saddr") < strstr(buf, "iifname vmap @allow"));
        assert_true(strstr(buf, "iifname vmap @allow\n") <
                    strstr(buf, "from-sandbox goto egress\n"));
        assert_true(strstr(buf, "from-sandbox goto egress") <
                    strstr(buf, "egress ip daddr { 0.0.0.0/8"));
        /* Too small a buffer says so. */
        assert_int_equal(net_ruleset_text("cella-x", "cn123456", &r, dns, 1, buf, 100), -ENOSPC);
        /* No nameserver: no DNS rule. */
        net_ruleset_text("cella-x", "cn123456", &r, NULL, 0, buf, sizeof(buf));
        assert_null(strstr(buf, "dport 53"));
}

static void test_sandbox_rules(void **state)
{
        struct net_allow a[2];
        char buf[4096], ifp[16];

        assert_int_equal(net_allow_parse(S("198.51.100.0/24:8080"), &a[0]), 0);
        assert_int_equal(net_allow_parse(S("172.30.0.1"), &a[1]), 0);
        int n = net_sandbox_rules_text("cella", 7, a, 2, buf, sizeof(buf));
        assert_true(n > 0);
        net_ifprefix("cella", ifp, sizeof(ifp));
        assert_non_null(strstr(buf, "flush chain inet cella s7\n"));
        assert_non_null(strstr(buf, "add rule inet cella s7 ip daddr 198.51.100.0/24 meta l4proto "
                                    "{ tcp, udp } th dport 8080 accept\n"));
        assert_non_null(strstr(buf, "add rule inet cella s7 ip daddr 172.30.0.1/32 accept\n"));
        char elem[128];
        snprintf(elem, sizeof(elem), "add element inet cella allow { \"%s7\" : jump s7 }\n", ifp);
        assert_non_null(strstr(buf, elem));
        /* The element comes after the chain's rules: a packet never sees half a chain. */
        assert_true(strstr(buf, elem) > strstr(buf, "172.30.0.1/32 accept"));
        assert_int_equal(net_sandbox_rules_text("cella", 7, a, 2, buf, 64), -ENOSPC);
}

static void test_resolv(void **state)
{
        uint32_t dns[3];
        char buf[512];

        assert_int_equal(net_resolv_parse("nameserver 127.0.0.53\noptions edns0\n", dns, 3), 0);
        assert_int_equal(net_resolv_parse("# x\nnameserver 10.255.255.53\nnameserver  192.0.2.1 "
                                          "\nnameserver 10.255.255.53\nnameserver ::1\n"
                                          "nameserver 0.0.0.0\nnameservers 1.1.1.1\n",
                                          dns, 3),
                         2);
        assert_int_equal(dns[0], 0x0affff35u);
        assert_int_equal(dns[1], 0xc0000201u);
        net_resolv_text(dns, 2, buf, sizeof(buf));
        assert_non_null(strstr(buf, "nameserver 10.255.255.53\nnameserver 192.0.2.1\n"));
        net_resolv_text(dns, 0, buf, sizeof(buf));
        assert_null(strstr(buf, "\nnameserver"));
}

/* Find attribute type in the attributes [start, start+len). */
static const struct nlattr *find_attr(const void *start, size_t len, uint16_t type)
{
        const struct nlattr *a = start;
        while (mnl_attr_ok(a, (int)len)) {
                if (mnl_attr_get_type(a) == type)
                        return a;
                size_t step = MNL_ALIGN(a->nla_len);
                len -= step;
                a = (const struct nlattr *)((const char *)a + step);
        }
        return NULL;
}

static void test_msg_veth(void **state)
{
        char buf[1024];
        struct net_plan p = {.host_addr = 1, .sandbox_addr = 2, .prefix = 30};

        snprintf(p.host_ifname, sizeof(p.host_ifname), "cn0000017");
        int n = net_msg_veth(buf, sizeof(buf), &p, 42, 9);
        assert_true(n > 0);
        const struct nlmsghdr *nlh = (const void *)buf;
        assert_int_equal(nlh->nlmsg_len, n);
        assert_int_equal(nlh->nlmsg_type, RTM_NEWLINK);
        assert_true(nlh->nlmsg_flags & NLM_F_CREATE);
        assert_true(nlh->nlmsg_flags & NLM_F_EXCL);
        assert_int_equal(nlh->nlmsg_seq, 9);
        const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
        assert_true(ifm->ifi_flags & IFF_UP);
        const void *attrs = (const char *)ifm + MNL_ALIGN(sizeof(*ifm));
        size_t alen = (size_t)n - ((const char *)attrs - buf);
        const struct nlattr *a = find_attr(attrs, alen, IFLA_IFNAME);
        assert_non_null(a);
        assert_string_equal(mnl_attr_get_str(a), "cn0000017");
        const struct nlattr *li = find_attr(attrs, alen, IFLA_LINKINFO);
        assert_non_null(li);
        const struct nlattr *kind =
                find_attr(mnl_attr_get_payload(li), mnl_attr_get_payload_len(li), IFLA_INFO_KIND);
        assert_string_equal(mnl_attr_get_str(kind), "veth");
        const struct nlattr *data =
                find_attr(mnl_attr_get_payload(li), mnl_attr_get_payload_len(li), IFLA_INFO_DATA);
        assert_non_null(data);
        const struct nlattr *peer = find_attr(mnl_attr_get_payload(data),
                                              mnl_attr_get_payload_len(data), VETH_INFO_PEER);
        assert_non_null(peer);
        /* The peer: its ifinfomsg, its name and the namespace it is born in. */
        const char *pp = mnl_attr_get_payload(peer);
        size_t plen = mnl_attr_get_payload_len(peer) - MNL_ALIGN(sizeof(struct ifinfomsg));
        const struct nlattr *pname =
                find_attr(pp + MNL_ALIGN(sizeof(struct ifinfomsg)), plen, IFLA_IFNAME);
        assert_non_null(pname);
        assert_string_equal(mnl_attr_get_str(pname), "eth0");
        const struct nlattr *pns =
                find_attr(pp + MNL_ALIGN(sizeof(struct ifinfomsg)), plen, IFLA_NET_NS_FD);
        assert_non_null(pns);
        assert_int_equal(mnl_attr_get_u32(pns), 42);
        assert_int_equal(net_msg_veth(buf, 64, &p, 42, 9), -ENOSPC);
}

static void test_msg_addr_route(void **state)
{
        char buf[512];
        int n = net_msg_addr(buf, sizeof(buf), 3, 0x0ad50002u, 30, 1);
        assert_true(n > 0);
        const struct nlmsghdr *nlh = (const void *)buf;
        assert_int_equal(nlh->nlmsg_type, RTM_NEWADDR);
        const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
        assert_int_equal(ifa->ifa_index, 3);
        assert_int_equal(ifa->ifa_prefixlen, 30);
        const struct nlattr *a =
                find_attr((const char *)ifa + MNL_ALIGN(sizeof(*ifa)),
                          (size_t)n - NLMSG_HDRLEN - MNL_ALIGN(sizeof(*ifa)), IFA_LOCAL);
        assert_non_null(a);
        const uint8_t *ip = mnl_attr_get_payload(a);
        assert_int_equal(ip[0], 10);
        assert_int_equal(ip[3], 2);

        n = net_msg_default_route(buf, sizeof(buf), 0x0ad50001u, 2);
        assert_true(n > 0);
        assert_int_equal(nlh->nlmsg_type, RTM_NEWROUTE);
        const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
        assert_int_equal(rtm->rtm_dst_len, 0);
        a = find_attr((const char *)rtm + MNL_ALIGN(sizeof(*rtm)),
                      (size_t)n - NLMSG_HDRLEN - MNL_ALIGN(sizeof(*rtm)), RTA_GATEWAY);
        assert_non_null(a);
        ip = mnl_attr_get_payload(a);
        assert_int_equal(ip[3], 1);

        n = net_msg_link_up(buf, sizeof(buf), 5, 3);
        assert_true(n > 0);
        const struct ifinfomsg *ifm = mnl_nlmsg_get_payload(nlh);
        assert_int_equal(ifm->ifi_index, 5);
        assert_true(ifm->ifi_flags & IFF_UP);
        assert_false(nlh->nlmsg_flags & NLM_F_CREATE);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_cidr_parse),    cmocka_unit_test(test_allow_parse),
                cmocka_unit_test(test_plan),          cmocka_unit_test(test_ruleset),
                cmocka_unit_test(test_sandbox_rules), cmocka_unit_test(test_resolv),
                cmocka_unit_test(test_msg_veth),      cmocka_unit_test(test_msg_addr_route),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
