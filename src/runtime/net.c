/* Sandbox networking: plan (pure) and apply (netlink, nftables). See net.h. */
#include "runtime/net.h"

#include <errno.h>
#include <fcntl.h>
#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <linux/veth.h>
#include <nftables/libnftables.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/log.h"
#include "common/macros.h"
#include "common/timeutil.h"

/* ---- parsers ---- */

/* A decimal number of at most max, no sign, no leading zero; advances *i. */
static int parse_dec(const char *s, size_t len, size_t *i, unsigned max, unsigned *ret)
{
        size_t start = *i;
        unsigned v = 0;

        while (*i < len && s[*i] >= '0' && s[*i] <= '9') {
                v = v * 10 + (unsigned)(s[*i] - '0');
                if (v > max)
                        return -EINVAL;
                (*i)++;
        }
        if (*i == start || (*i - start > 1 && s[start] == '0'))
                return -EINVAL;
        *ret = v;
        return 0;
}

/* "a.b.c.d/n" or "a.b.c.d" at s[*i], stopping at ':' or the end. */
static int parse_cidr_at(const char *s, size_t len, size_t *i, struct net_cidr *ret)
{
        uint32_t addr = 0;
        unsigned v, prefix = 32;

        for (int k = 0; k < 4; k++) {
                if (k > 0) {
                        if (*i >= len || s[*i] != '.')
                                return -EINVAL;
                        (*i)++;
                }
                if (parse_dec(s, len, i, 255, &v) < 0)
                        return -EINVAL;
                addr = addr << 8 | v;
        }
        if (*i < len && s[*i] == '/') {
                (*i)++;
                if (parse_dec(s, len, i, 32, &prefix) < 0)
                        return -EINVAL;
        }
        uint32_t mask = prefix ? ~0u << (32 - prefix) : 0;
        if (addr & ~mask)
                return -EINVAL;
        ret->addr = addr;
        ret->prefix = (uint8_t)prefix;
        return 0;
}

int net_cidr_parse(const char *s, size_t len, struct net_cidr *ret)
{
        struct net_cidr c;
        size_t i = 0;

        if (parse_cidr_at(s, len, &i, &c) < 0 || i != len)
                return -EINVAL;
        *ret = c;
        return 0;
}

int net_allow_parse(const char *s, size_t len, struct net_allow *ret)
{
        struct net_allow a = {0};
        size_t i = 0;
        unsigned port;

        if (parse_cidr_at(s, len, &i, &a.cidr) < 0)
                return -EINVAL;
        if (i < len) {
                if (s[i] != ':')
                        return -EINVAL;
                i++;
                if (parse_dec(s, len, &i, 65535, &port) < 0 || port == 0 || i != len)
                        return -EINVAL;
                a.port = (uint16_t)port;
        }
        *ret = a;
        return 0;
}

void net_addr_format(uint32_t addr, char *buf, size_t size)
{
        snprintf(buf, size, "%u.%u.%u.%u", addr >> 24, (addr >> 16) & 255, (addr >> 8) & 255,
                 addr & 255);
}

void net_allow_format(const struct net_allow *a, char *buf, size_t size)
{
        char ip[16];

        net_addr_format(a->cidr.addr, ip, sizeof(ip));
        if (a->port)
                snprintf(buf, size, "%s/%u:%u", ip, a->cidr.prefix, a->port);
        else
                snprintf(buf, size, "%s/%u", ip, a->cidr.prefix);
}

bool net_cidr_overlaps(const struct net_cidr *a, const struct net_cidr *b)
{
        unsigned p = a->prefix < b->prefix ? a->prefix : b->prefix;
        uint32_t mask = p ? ~0u << (32 - p) : 0;

        return (a->addr & mask) == (b->addr & mask);
}

/* ---- the plan ---- */

void net_ifprefix(const char *table, char *out, size_t size)
{
        uint32_t h = 2166136261u; /* FNV-1a */

        for (const char *p = table; *p; p++)
                h = (h ^ (unsigned char)*p) * 16777619u;
        snprintf(out, size, "cn%06x", h & 0xffffff);
}

int net_plan_make(const struct net_cidr *range, const char *ifprefix, unsigned slot,
                  struct net_plan *ret)
{
        struct net_plan p = {0};

        if (range->prefix > NET_SLOT_PREFIX)
                return -ERANGE;
        uint64_t slots = 1ull << (NET_SLOT_PREFIX - range->prefix);
        if (slot >= slots)
                return -ERANGE;
        uint32_t base = range->addr + (slot << (32 - NET_SLOT_PREFIX));
        p.host_addr = base + 1;
        p.sandbox_addr = base + 2;
        p.prefix = NET_SLOT_PREFIX;
        int n = snprintf(p.host_ifname, sizeof(p.host_ifname), "%s%u", ifprefix, slot);
        if (n < 0 || (size_t)n >= sizeof(p.host_ifname))
                return -ENAMETOOLONG;
        *ret = p;
        return 0;
}

/* ---- nftables text ---- */

struct text {
        char *buf;
        size_t size, len;
        bool full;
};

__attribute__((format(printf, 2, 3))) static void put(struct text *t, const char *fmt, ...)
{
        va_list ap;

        if (t->full)
                return;
        va_start(ap, fmt);
        int n = vsnprintf(t->buf + t->len, t->size - t->len, fmt, ap);
        va_end(ap);
        if (n < 0 || (size_t)n >= t->size - t->len)
                t->full = true;
        else
                t->len += (size_t)n;
}

/* Destinations no sandbox reaches unless its allowlist says so: this network, private
 * (RFC 1918), shared (100.64/10, carrier NAT), loopback, link-local (cloud metadata at
 * 169.254.169.254), multicast, reserved and broadcast. */
static const char refused_v4[] = "0.0.0.0/8, 10.0.0.0/8, 100.64.0.0/10, 127.0.0.0/8, "
                                 "169.254.0.0/16, 172.16.0.0/12, 192.168.0.0/16, 224.0.0.0/3";

int net_ruleset_text(const char *table, const char *ifprefix, const struct net_cidr *range,
                     const uint32_t *dns, size_t n_dns, char *buf, size_t size)
{
        struct text t = {buf, size, 0, false};
        char net[16];
        const char *T = table;

        if (size)
                buf[0] = '\0';
        net_addr_format(range->addr, net, sizeof(net));
        put(&t, "add table inet %s\n", T);
        /* host end of a sandbox with an allowlist -> its allow chain (sandboxes without
         * one have no element: their start does no nftables work). */
        put(&t, "add map inet %s allow { type ifname : verdict; }\n", T);
        put(&t, "add chain inet %s egress\n", T);
        put(&t, "add chain inet %s from-sandbox\n", T);
        put(&t,
            "add chain inet %s input { type filter hook input priority filter; policy accept; }\n",
            T);
        put(&t,
            "add chain inet %s forward { type filter hook forward priority filter; policy "
            "accept; }\n",
            T);
        put(&t,
            "add chain inet %s postrouting { type nat hook postrouting priority srcnat; policy "
            "accept; }\n",
            T);
        /* Rewritten whole on every start: the map and the allow chains stay. */
        put(&t, "flush chain inet %s input\n", T);
        put(&t, "flush chain inet %s forward\n", T);
        put(&t, "flush chain inet %s postrouting\n", T);
        put(&t, "flush chain inet %s from-sandbox\n", T);
        put(&t, "flush chain inet %s egress\n", T);
        /* The host itself (every address it has, the loopback services behind them,
         * cellad included): only answers to connections the host opened. */
        put(&t, "add rule inet %s input iifname \"%s*\" ct state established,related accept\n", T,
            ifprefix);
        put(&t, "add rule inet %s input iifname \"%s*\" reject with icmpx type admin-prohibited\n",
            T, ifprefix);
        /* Nothing opens a connection into a sandbox through the forward path: not the
         * outside, not another sandbox. */
        put(&t, "add rule inet %s forward oifname \"%s*\" ct state established,related accept\n", T,
            ifprefix);
        put(&t,
            "add rule inet %s forward oifname \"%s*\" reject with icmpx type admin-prohibited\n", T,
            ifprefix);
        put(&t, "add rule inet %s forward iifname \"%s*\" goto from-sandbox\n", T, ifprefix);
        put(&t, "add rule inet %s from-sandbox meta nfproto ipv6 drop\n", T);
        /* A source address that does not route back through the interface it came in
         * on (a sandbox that changed its own address, to pass for another or to escape
         * NAT) goes no further. */
        put(&t, "add rule inet %s from-sandbox fib saddr . iif oif missing drop\n", T);
        put(&t, "add rule inet %s from-sandbox iifname vmap @allow\n", T);
        put(&t, "add rule inet %s from-sandbox goto egress\n", T);
        /* After a sandbox's allow chain. */
        if (n_dns > 0) {
                put(&t, "add rule inet %s egress ip daddr { ", T);
                for (size_t i = 0; i < n_dns; i++) {
                        char ip[16];
                        net_addr_format(dns[i], ip, sizeof(ip));
                        put(&t, "%s%s", i ? ", " : "", ip);
                }
                put(&t, " } meta l4proto { tcp, udp } th dport 53 accept\n");
        }
        put(&t, "add rule inet %s egress ip daddr { %s } reject with icmpx type admin-prohibited\n",
            T, refused_v4);
        put(&t, "add rule inet %s egress ip daddr %s/%u reject with icmpx type admin-prohibited\n",
            T, net, range->prefix);
        put(&t, "add rule inet %s egress accept\n", T);
        put(&t, "add rule inet %s postrouting ip saddr %s/%u oifname != \"%s*\" masquerade\n", T,
            net, range->prefix, ifprefix);
        return t.full ? -ENOSPC : (int)t.len;
}

int net_sandbox_rules_text(const char *table, unsigned slot, const struct net_allow *allow,
                           size_t n_allow, char *buf, size_t size)
{
        struct text t = {buf, size, 0, false};
        const char *T = table;
        char ip[16], ifp[16];

        if (size)
                buf[0] = '\0';
        net_ifprefix(table, ifp, sizeof(ifp));
        put(&t, "add chain inet %s s%u\n", T, slot);
        put(&t, "flush chain inet %s s%u\n", T, slot);
        for (size_t i = 0; i < n_allow; i++) {
                net_addr_format(allow[i].cidr.addr, ip, sizeof(ip));
                if (allow[i].port)
                        put(&t,
                            "add rule inet %s s%u ip daddr %s/%u meta l4proto { tcp, udp } th "
                            "dport %u accept\n",
                            T, slot, ip, allow[i].cidr.prefix, allow[i].port);
                else
                        put(&t, "add rule inet %s s%u ip daddr %s/%u accept\n", T, slot, ip,
                            allow[i].cidr.prefix);
        }
        put(&t, "add element inet %s allow { \"%s%u\" : jump s%u }\n", T, ifp, slot, slot);
        return t.full ? -ENOSPC : (int)t.len;
}

/* ---- resolv.conf ---- */

size_t net_resolv_parse(const char *text, uint32_t *dns, size_t max)
{
        size_t n = 0;
        const char *line = text;

        while (line && *line && n < max) {
                const char *end = strchr(line, '\n');
                size_t len = end ? (size_t)(end - line) : strlen(line);
                static const char kw[] = "nameserver";
                size_t i = sizeof(kw) - 1;

                if (len > i && strncmp(line, kw, i) == 0 && (line[i] == ' ' || line[i] == '\t')) {
                        while (i < len && (line[i] == ' ' || line[i] == '\t'))
                                i++;
                        size_t j = i;
                        while (j < len && line[j] != ' ' && line[j] != '\t' && line[j] != '\r')
                                j++;
                        struct net_cidr c;
                        size_t used = 0, k;
                        /* the whole token is one address, not loopback, not 0/8 */
                        if (parse_cidr_at(line + i, j - i, &used, &c) == 0 && used == j - i &&
                            c.prefix == 32 && (c.addr >> 24) != 127 && (c.addr >> 24) != 0) {
                                for (k = 0; k < n && dns[k] != c.addr; k++)
                                        ;
                                if (k == n)
                                        dns[n++] = c.addr;
                        }
                }
                line = end ? end + 1 : NULL;
        }
        return n;
}

void net_resolv_text(const uint32_t *dns, size_t n_dns, char *buf, size_t size)
{
        struct text t = {buf, size, 0, false};
        char ip[16];

        if (size)
                buf[0] = '\0';
        put(&t, "# written by cella for this sandbox\n");
        if (n_dns == 0)
                put(&t, "# the host has no nameserver a sandbox can reach\n");
        for (size_t i = 0; i < n_dns; i++) {
                net_addr_format(dns[i], ip, sizeof(ip));
                put(&t, "nameserver %s\n", ip);
        }
}

/* ---- netlink messages ---- */

static struct nlmsghdr *msg_start(void *buf, size_t size, uint16_t type, uint16_t flags,
                                  uint32_t seq)
{
        if (size < 128)
                return NULL;
        memset(buf, 0, size);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_ACK | flags;
        nlh->nlmsg_seq = seq;
        return nlh;
}

int net_msg_veth(void *buf, size_t size, const struct net_plan *p, int netns_fd, uint32_t seq)
{
        struct nlmsghdr *nlh = msg_start(buf, size, RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL, seq);
        if (!nlh)
                return -ENOSPC;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_flags = IFF_UP;
        ifm->ifi_change = IFF_UP;
        if (!mnl_attr_put_strz_check(nlh, size, IFLA_IFNAME, p->host_ifname))
                return -ENOSPC;
        struct nlattr *linkinfo = mnl_attr_nest_start_check(nlh, size, IFLA_LINKINFO);
        if (!linkinfo || !mnl_attr_put_strz_check(nlh, size, IFLA_INFO_KIND, "veth"))
                return -ENOSPC;
        struct nlattr *data = mnl_attr_nest_start_check(nlh, size, IFLA_INFO_DATA);
        struct nlattr *peer = data ? mnl_attr_nest_start_check(nlh, size, VETH_INFO_PEER) : NULL;
        if (!peer || nlh->nlmsg_len + MNL_ALIGN(sizeof(struct ifinfomsg)) > size)
                return -ENOSPC;
        /* The peer's attributes start with its own ifinfomsg. Not IFF_UP: the kernel
         * configures the peer before the pair is joined, and a lone veth end refuses to go
         * up (ENOTCONN); net_msg_link_up does it inside the namespace. */
        struct ifinfomsg *pifm = (struct ifinfomsg *)((char *)nlh + nlh->nlmsg_len);
        memset(pifm, 0, sizeof(*pifm));
        pifm->ifi_family = AF_UNSPEC;
        nlh->nlmsg_len += MNL_ALIGN(sizeof(*pifm));
        if (!mnl_attr_put_strz_check(nlh, size, IFLA_IFNAME, NET_SANDBOX_IFNAME) ||
            !mnl_attr_put_u32_check(nlh, size, IFLA_NET_NS_FD, (uint32_t)netns_fd))
                return -ENOSPC;
        mnl_attr_nest_end(nlh, peer);
        mnl_attr_nest_end(nlh, data);
        mnl_attr_nest_end(nlh, linkinfo);
        return (int)nlh->nlmsg_len;
}

int net_msg_link_up(void *buf, size_t size, int ifindex, uint32_t seq)
{
        struct nlmsghdr *nlh = msg_start(buf, size, RTM_NEWLINK, 0, seq);
        if (!nlh)
                return -ENOSPC;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
        ifm->ifi_family = AF_UNSPEC;
        ifm->ifi_index = ifindex;
        ifm->ifi_flags = IFF_UP;
        ifm->ifi_change = IFF_UP;
        return (int)nlh->nlmsg_len;
}

int net_msg_addr(void *buf, size_t size, int ifindex, uint32_t addr, uint8_t prefix, uint32_t seq)
{
        struct nlmsghdr *nlh = msg_start(buf, size, RTM_NEWADDR, NLM_F_CREATE | NLM_F_REPLACE, seq);
        if (!nlh)
                return -ENOSPC;
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = prefix;
        ifa->ifa_scope = RT_SCOPE_UNIVERSE;
        ifa->ifa_index = (uint32_t)ifindex;
        uint32_t be = htonl(addr);
        if (!mnl_attr_put_check(nlh, size, IFA_LOCAL, sizeof(be), &be) ||
            !mnl_attr_put_check(nlh, size, IFA_ADDRESS, sizeof(be), &be))
                return -ENOSPC;
        return (int)nlh->nlmsg_len;
}

int net_msg_default_route(void *buf, size_t size, uint32_t gw, uint32_t seq)
{
        struct nlmsghdr *nlh =
                msg_start(buf, size, RTM_NEWROUTE, NLM_F_CREATE | NLM_F_REPLACE, seq);
        if (!nlh)
                return -ENOSPC;
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET;
        rtm->rtm_dst_len = 0;
        rtm->rtm_table = RT_TABLE_MAIN;
        rtm->rtm_protocol = RTPROT_BOOT;
        rtm->rtm_scope = RT_SCOPE_UNIVERSE;
        rtm->rtm_type = RTN_UNICAST;
        uint32_t be = htonl(gw);
        if (!mnl_attr_put_check(nlh, size, RTA_GATEWAY, sizeof(be), &be))
                return -ENOSPC;
        return (int)nlh->nlmsg_len;
}

static int net_msg_dellink(void *buf, size_t size, const char *ifname, uint32_t seq)
{
        struct nlmsghdr *nlh = msg_start(buf, size, RTM_DELLINK, 0, seq);
        if (!nlh)
                return -ENOSPC;
        struct ifinfomsg *ifm = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifm));
        ifm->ifi_family = AF_UNSPEC;
        if (!mnl_attr_put_strz_check(nlh, size, IFLA_IFNAME, ifname))
                return -ENOSPC;
        return (int)nlh->nlmsg_len;
}

/* ---- the host's own addresses and routes ---- */

static int attr_cb(const struct nlattr *attr, void *data)
{
        const struct nlattr **tb = data;
        uint16_t type = mnl_attr_get_type(attr);

        /* Only the attributes read below, each checked for its length. */
        switch (type) {
        case 1: /* IFA_ADDRESS, RTA_DST */
        case 2: /* IFA_LOCAL, RTA_SRC */
        case 4: /* RTA_OIF */
                if (mnl_attr_validate(attr, MNL_TYPE_U32) < 0)
                        return MNL_CB_ERROR;
                tb[type] = attr;
                break;
        default:
                break;
        }
        return MNL_CB_OK;
}

int net_host_prefix_parse(const struct nlmsghdr *nlh, struct net_host_prefix *ret)
{
        const struct nlattr *tb[8] = {0};
        struct net_host_prefix p = {0};
        uint32_t be = 0;

        if (nlh->nlmsg_len < sizeof(*nlh))
                return -EINVAL;
        if (nlh->nlmsg_type == RTM_NEWADDR) {
                if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct ifaddrmsg)))
                        return -EINVAL;
                const struct ifaddrmsg *ifa = mnl_nlmsg_get_payload(nlh);
                if (ifa->ifa_family != AF_INET)
                        return 0;
                if (ifa->ifa_prefixlen > 32)
                        return -EINVAL;
                if (mnl_attr_parse(nlh, sizeof(*ifa), attr_cb, tb) < 0)
                        return -EINVAL;
                const struct nlattr *a = tb[IFA_LOCAL] ? tb[IFA_LOCAL] : tb[IFA_ADDRESS];
                if (!a)
                        return -EINVAL;
                be = mnl_attr_get_u32(a);
                p.addr = ntohl(be);
                p.cidr.prefix = ifa->ifa_prefixlen;
                p.ifindex = (int)ifa->ifa_index;
        } else if (nlh->nlmsg_type == RTM_NEWROUTE) {
                if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct rtmsg)))
                        return -EINVAL;
                const struct rtmsg *rtm = mnl_nlmsg_get_payload(nlh);
                if (rtm->rtm_family != AF_INET)
                        return 0;
                if (rtm->rtm_dst_len > 32)
                        return -EINVAL;
                /* A default route overlaps everything and takes nothing from a range
                 * (more specific routes win); local and broadcast routes are the host's
                 * own addresses, seen as addresses. */
                if (rtm->rtm_dst_len == 0 || rtm->rtm_type == RTN_LOCAL ||
                    rtm->rtm_type == RTN_BROADCAST || rtm->rtm_type == RTN_ANYCAST ||
                    rtm->rtm_type == RTN_MULTICAST)
                        return 0;
                if (mnl_attr_parse(nlh, sizeof(*rtm), attr_cb, tb) < 0 || !tb[RTA_DST])
                        return -EINVAL;
                be = mnl_attr_get_u32(tb[RTA_DST]);
                p.addr = ntohl(be);
                p.cidr.prefix = rtm->rtm_dst_len;
                p.is_route = true;
                p.ifindex = tb[RTA_OIF] ? (int)mnl_attr_get_u32(tb[RTA_OIF]) : 0;
        } else {
                return 0;
        }
        p.cidr.addr = p.cidr.prefix ? p.addr & (~0u << (32 - p.cidr.prefix)) : 0;
        *ret = p;
        return 1;
}

struct dump_ctx {
        const char *skip;
        int (*fn)(const struct net_cidr *c, const char *desc, void *ud);
        void *ud;
        int r;
};

static int dump_cb(const struct nlmsghdr *nlh, void *data)
{
        struct dump_ctx *d = data;
        struct net_host_prefix p;
        char ifname[IF_NAMESIZE] = "", ip[16], desc[96];

        int r = net_host_prefix_parse(nlh, &p);
        if (r <= 0)
                return MNL_CB_OK; /* not one of ours, or nothing we can read */
        /* An interface gone since the dump (a sandbox's veth whose namespace just went
         * away) holds no address or route any more: nothing to overlap, and its name can
         * no longer tell whether it was ours. */
        if (p.ifindex > 0 && !if_indextoname((unsigned)p.ifindex, ifname))
                return MNL_CB_OK;
        if (d->skip[0] && strncmp(ifname, d->skip, strlen(d->skip)) == 0)
                return MNL_CB_OK;
        net_addr_format(p.addr, ip, sizeof(ip));
        snprintf(desc, sizeof(desc), "%s %s/%u%s%s", p.is_route ? "route" : "address", ip,
                 p.cidr.prefix, ifname[0] ? (p.is_route ? " dev " : " on ") : "", ifname);
        d->r = d->fn(&p.cidr, desc, d->ud);
        return d->r < 0 ? MNL_CB_STOP : MNL_CB_OK;
}

static int dump(struct mnl_socket *nl, uint16_t type, struct dump_ctx *d)
{
        static char buf[32768]; /* the daemon's thread at start, or --check: one at a time */
        uint32_t seq = (uint32_t)time_mono_us(), portid = mnl_socket_get_portid(nl);

        memset(buf, 0, 64);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        nlh->nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
        nlh->nlmsg_seq = seq;
        /* ifaddrmsg and rtmsg both start with their family. */
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(struct rtmsg));
        rtm->rtm_family = AF_INET;
        if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0)
                return -errno;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                int r = mnl_cb_run(buf, (size_t)n, seq, portid, dump_cb, d);
                if (d->r < 0)
                        return d->r;
                if (r < 0)
                        return -errno;
                if (r == MNL_CB_STOP)
                        return 0;
        }
}

int net_host_prefixes(const char *skip_ifprefix,
                      int (*fn)(const struct net_cidr *c, const char *desc, void *ud), void *ud)
{
        struct dump_ctx d = {skip_ifprefix ? skip_ifprefix : "", fn, ud, 0};
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        int r;

        if (!nl)
                return -errno;
        if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                r = -errno;
        else
                r = dump(nl, RTM_GETADDR, &d);
        if (r >= 0)
                r = dump(nl, RTM_GETROUTE, &d);
        mnl_socket_close(nl);
        return r;
}

/* ---- applying ---- */

struct net {
        char table[64];
        char ifprefix[16];
        struct net_cidr range;
        uint32_t dns[NET_MAX_DNS];
        size_t n_dns;
        bool available;
        bool probe_only;
        struct nft_ctx *nft;
        struct mnl_socket *nl; /* NETLINK_ROUTE in the host's namespace */
        int self_netns;        /* our own network namespace, to come back to */
        uint32_t seq;
        char resolv[512];
        char state[512];
};

/* Send one message and wait for its ack: 0 or -errno. */
static int nl_talk(struct mnl_socket *nl, void *msg, size_t len)
{
        char buf[8192];
        const struct nlmsghdr *nlh = msg;
        uint32_t seq = nlh->nlmsg_seq, portid = mnl_socket_get_portid(nl);

        if (mnl_socket_sendto(nl, msg, len) < 0)
                return -errno;
        for (;;) {
                ssize_t n = mnl_socket_recvfrom(nl, buf, sizeof(buf));
                if (n < 0)
                        return errno == EINTR ? -EINTR : -errno;
                int r = mnl_cb_run(buf, (size_t)n, seq, portid, NULL, NULL);
                if (r < 0)
                        return -errno;
                if (r == MNL_CB_STOP || r == MNL_CB_OK)
                        return 0;
        }
}

static int nft_run(struct net *n, const char *text, char *why, size_t whysz)
{
        int r = nft_run_cmd_from_buffer(n->nft, text);
        if (r != 0) {
                const char *e = nft_ctx_get_error_buffer(n->nft);
                snprintf(why, whysz, "%s", e && *e ? e : "nft failed");
                /* one line for the log */
                for (char *p = why; *p; p++)
                        if (*p == '\n')
                                *p = ' ';
                return -EIO;
        }
        nft_ctx_get_error_buffer(n->nft); /* drain */
        nft_ctx_get_output_buffer(n->nft);
        return 0;
}

static void read_resolv(struct net *n, const char *path)
{
        const char *paths[] = {path ? path : "/etc/resolv.conf",
                               /* systemd-resolved's upstream servers, when the host's own
                                * file names only its loopback stub */
                               "/run/systemd/resolve/resolv.conf"};
        char text[4096];

        for (size_t p = 0; p < 2 && n->n_dns == 0; p++) {
                _cleanup_close_ int fd = open(paths[p], O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t len = read(fd, text, sizeof(text) - 1);
                if (len < 0)
                        continue;
                text[len] = '\0';
                n->n_dns = net_resolv_parse(text, n->dns, NET_MAX_DNS);
        }
        net_resolv_text(n->dns, n->n_dns, n->resolv, sizeof(n->resolv));
}

static void unavailable(struct net *n, const char *fmt, ...)
{
        va_list ap;
        int k = snprintf(n->state, sizeof(n->state), "network: outbound unavailable (");
        va_start(ap, fmt);
        vsnprintf(n->state + k, sizeof(n->state) - (size_t)k, fmt, ap);
        va_end(ap);
        size_t len = strlen(n->state);
        snprintf(n->state + len, sizeof(n->state) - len, "); sandboxes default to none");
        n->available = false;
}

static int enable_forwarding(bool probe_only, char *why, size_t whysz)
{
        const char *path = "/proc/sys/net/ipv4/ip_forward";
        char v = '0';
        _cleanup_close_ int fd = open(path, (probe_only ? O_RDONLY : O_RDWR) | O_CLOEXEC);

        if (fd < 0 || read(fd, &v, 1) != 1) {
                snprintf(why, whysz, "%s: %s", path, strerror(errno));
                return -errno;
        }
        if (v == '1' || probe_only) {
                if (probe_only && access(path, W_OK) < 0) {
                        snprintf(why, whysz, "%s not writable", path);
                        return -EACCES;
                }
                return 0;
        }
        if (pwrite(fd, "1", 1, 0) != 1) {
                snprintf(why, whysz, "enable IP forwarding: %s", strerror(errno));
                return -errno;
        }
        return 0;
}

int net_new(const struct net_config *cfg, struct net **ret, struct cella_error *err)
{
        const char *range = cfg->range ? cfg->range : NET_DEFAULT_RANGE;
        char why[512] = "";
        struct net *n = calloc(1, sizeof(*n));

        if (!n)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        n->self_netns = -EBADF;
        n->probe_only = cfg->probe_only;
        snprintf(n->table, sizeof(n->table), "%s", cfg->table);
        net_ifprefix(n->table, n->ifprefix, sizeof(n->ifprefix));
        if (net_cidr_parse(range, strlen(range), &n->range) < 0 ||
            n->range.prefix > NET_SLOT_PREFIX || n->range.prefix < 8) {
                free(n);
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "--network-range '%s': want an IPv4 CIDR from /8 to /30 "
                                       "with no host bits, e.g. %s",
                                       range, NET_DEFAULT_RANGE);
        }
        read_resolv(n, cfg->resolv);
        *ret = n;

        n->nft = nft_ctx_new(NFT_CTX_DEFAULT);
        if (!n->nft) {
                unavailable(n, "libnftables: no context");
                return 0;
        }
        nft_ctx_buffer_output(n->nft);
        nft_ctx_buffer_error(n->nft);
        if (n->probe_only)
                nft_ctx_set_dry_run(n->nft, true);
        n->self_netns = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
        n->nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        if (n->self_netns < 0 || !n->nl || mnl_socket_bind(n->nl, 0, MNL_SOCKET_AUTOPID) < 0) {
                unavailable(n, "netlink: %s", strerror(errno));
                return 0;
        }
        _cleanup_free_ char *text = malloc(8192);
        if (!text ||
            net_ruleset_text(n->table, n->ifprefix, &n->range, n->dns, n->n_dns, text, 8192) < 0) {
                unavailable(n, "ruleset too long");
                return 0;
        }
        if (nft_run(n, text, why, sizeof(why)) < 0) {
                unavailable(n, "nftables: %s", why);
                return 0;
        }
        if (enable_forwarding(n->probe_only, why, sizeof(why)) < 0) {
                unavailable(n, "%s", why);
                return 0;
        }
        n->available = true;
        char net[16];
        net_addr_format(n->range.addr, net, sizeof(net));
        snprintf(n->state, sizeof(n->state),
                 "network: outbound available (range %s/%u, nft table inet %s, interfaces %s*, "
                 "%zu nameserver%s for sandboxes)",
                 net, n->range.prefix, n->table, n->ifprefix, n->n_dns, n->n_dns == 1 ? "" : "s");
        return 0;
}

void net_free(struct net *n)
{
        if (!n)
                return;
        if (n->nft)
                nft_ctx_free(n->nft);
        if (n->nl)
                mnl_socket_close(n->nl);
        if (n->self_netns >= 0)
                close(n->self_netns);
        free(n);
}

bool net_available(const struct net *n)
{
        return n && n->available;
}

const char *net_state(const struct net *n)
{
        return n ? n->state : "network: none";
}

const char *net_resolv_conf(const struct net *n)
{
        return n->resolv;
}

void net_sandbox_address(const struct net *n, unsigned slot, char *buf, size_t size)
{
        struct net_plan p;

        if (size)
                buf[0] = '\0';
        if (n && net_plan_make(&n->range, n->ifprefix, slot, &p) == 0)
                net_addr_format(p.sandbox_addr, buf, size);
}

/* A NETLINK_ROUTE socket in the network namespace of pid, and the index of its eth0: this
 * thread enters the namespace, opens the socket and comes back (namespaces are per
 * thread; a socket stays in the namespace it was made in). */
static int open_in_netns(struct net *n, int netns_fd, struct mnl_socket **ret, int *ret_ifindex)
{
        if (setns(netns_fd, CLONE_NEWNET) < 0)
                return -errno;
        struct mnl_socket *nl = mnl_socket_open2(NETLINK_ROUTE, SOCK_CLOEXEC);
        int r = nl ? 0 : -errno;
        if (nl && mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0)
                r = -errno;
        int ifindex = (int)if_nametoindex(NET_SANDBOX_IFNAME);
        if (r == 0 && ifindex == 0)
                r = -ENODEV;
        if (setns(n->self_netns, CLONE_NEWNET) < 0) {
                /* This thread would stay in the sandbox's namespace: nothing may go on. */
                log_error("network: cannot return to the daemon's network namespace: %s",
                          strerror(errno));
                abort();
        }
        if (r < 0) {
                if (nl)
                        mnl_socket_close(nl);
                return r;
        }
        *ret = nl;
        *ret_ifindex = ifindex;
        return 0;
}

int net_sandbox_setup(struct net *n, unsigned slot, pid_t pid, const struct net_allow *allow,
                      size_t n_allow, struct cella_error *err)
{
        char buf[1024], path[64];
        struct net_plan p;
        const char *what = "plan";
        int r;

        if (!net_available(n))
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "%s", net_state(n));
        r = net_plan_make(&n->range, n->ifprefix, slot, &p);
        if (r < 0)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "network: the range has no address for uid slot %u "
                                       "(use a larger --network-range)",
                                       slot);
        snprintf(path, sizeof(path), "/proc/%d/ns/net", (int)pid);
        _cleanup_close_ int netns = open(path, O_RDONLY | O_CLOEXEC);
        if (netns < 0)
                return cella_error_errno(err, errno, "network: open %s", path);

        uint64_t t0 = time_mono_us();
        /* 1. The pair, peer born in the sandbox, in one message. */
        what = "create veth";
        int len = net_msg_veth(buf, sizeof(buf), &p, netns, ++n->seq);
        r = len < 0 ? len : nl_talk(n->nl, buf, (size_t)len);
        if (r == -EEXIST) {
                /* The host end of this slot's previous sandbox, whose namespace the kernel
                 * has not freed yet (teardown is asynchronous): rare, and only then is a
                 * device deleted here. */
                len = net_msg_dellink(buf, sizeof(buf), p.host_ifname, ++n->seq);
                if (len > 0)
                        nl_talk(n->nl, buf, (size_t)len);
                len = net_msg_veth(buf, sizeof(buf), &p, netns, ++n->seq);
                r = len < 0 ? len : nl_talk(n->nl, buf, (size_t)len);
        }
        /* 2. The host end's address (and with it the route to the sandbox). */
        if (r >= 0) {
                what = "host address";
                int ifindex = (int)if_nametoindex(p.host_ifname);
                len = ifindex ? net_msg_addr(buf, sizeof(buf), ifindex, p.host_addr, p.prefix,
                                             ++n->seq)
                              : -ENODEV;
                r = len < 0 ? len : nl_talk(n->nl, buf, (size_t)len);
        }
        /* 3. Inside: eth0's address and the default route through the host end. */
        if (r >= 0) {
                struct mnl_socket *inl = NULL;
                int ifindex = 0;
                what = "enter the sandbox's network namespace";
                r = open_in_netns(n, netns, &inl, &ifindex);
                if (r >= 0) {
                        what = "bring up " NET_SANDBOX_IFNAME;
                        len = net_msg_link_up(buf, sizeof(buf), ifindex, ++n->seq);
                        r = len < 0 ? len : nl_talk(inl, buf, (size_t)len);
                }
                if (r >= 0) {
                        what = "sandbox address";
                        len = net_msg_addr(buf, sizeof(buf), ifindex, p.sandbox_addr, p.prefix,
                                           ++n->seq);
                        r = len < 0 ? len : nl_talk(inl, buf, (size_t)len);
                }
                if (r >= 0) {
                        what = "default route";
                        len = net_msg_default_route(buf, sizeof(buf), p.host_addr, ++n->seq);
                        r = len < 0 ? len : nl_talk(inl, buf, (size_t)len);
                }
                if (inl)
                        mnl_socket_close(inl);
        }
        if (r < 0)
                return cella_error_errno(err, -r, "network: %s (%s)", what, p.host_ifname);
        /* 4. Its allow chain and map element, when it has an allowlist. */
        uint64_t t1 = time_mono_us();
        r = n_allow ? net_sandbox_allow(n, slot, allow, n_allow, err) : 0;
        log_debug("network of slot %u: devices, addresses, route %.2f ms, nft %.2f ms", slot,
                  (double)(t1 - t0) / 1000.0, (double)(time_mono_us() - t1) / 1000.0);
        return r;
}

bool net_sandbox_plugged(const struct net *n, unsigned slot)
{
        struct net_plan p;

        if (!net_available(n) || net_plan_make(&n->range, n->ifprefix, slot, &p) < 0)
                return false;
        return if_nametoindex(p.host_ifname) != 0;
}

int net_sandbox_unplug(struct net *n, unsigned slot)
{
        char buf[256];
        struct net_plan p;

        if (!net_available(n) || net_plan_make(&n->range, n->ifprefix, slot, &p) < 0)
                return 0;
        if (if_nametoindex(p.host_ifname) == 0)
                return 0;
        int len = net_msg_dellink(buf, sizeof(buf), p.host_ifname, ++n->seq);
        int r = len < 0 ? len : nl_talk(n->nl, buf, (size_t)len);
        return r == -ENODEV ? 0 : r;
}

int net_sandbox_allow(struct net *n, unsigned slot, const struct net_allow *allow, size_t n_allow,
                      struct cella_error *err)
{
        _cleanup_free_ char *rules = malloc(16384);
        char why[512];
        struct net_plan p;

        if (!net_available(n) || net_plan_make(&n->range, n->ifprefix, slot, &p) < 0)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "%s", net_state(n));
        if (n_allow == 0) {
                net_sandbox_forget(n, slot);
                return 0;
        }
        if (!rules)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (net_sandbox_rules_text(n->table, slot, allow, n_allow, rules, 16384) < 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "network: allowlist too long");
        if (nft_run(n, rules, why, sizeof(why)) < 0)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "network: nftables: %s",
                                       why);
        return 0;
}

void net_sandbox_forget(struct net *n, unsigned slot)
{
        char text[256], why[256];

        if (!net_available(n))
                return;
        /* Two commands, two transactions: a slot that never had a chain has neither, and
         * one failing command would undo the other. */
        snprintf(text, sizeof(text), "delete element inet %s allow { \"%s%u\" }\n", n->table,
                 n->ifprefix, slot);
        nft_run(n, text, why, sizeof(why));
        snprintf(text, sizeof(text), "delete chain inet %s s%u\n", n->table, slot);
        nft_run(n, text, why, sizeof(why));
}

int net_remove_table(struct net *n)
{
        char text[128], why[256];

        if (!n || !n->nft || n->probe_only)
                return 0;
        snprintf(text, sizeof(text), "delete table inet %s\n", n->table);
        return nft_run(n, text, why, sizeof(why));
}
