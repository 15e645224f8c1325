/* Sandbox networking (see docs/decisions/0017-network-modes.md).
 *
 * A sandbox with network "outbound" gets a veth pair made by ONE netlink message in the
 * host's namespace whose peer ("eth0") is created directly inside the sandbox's network
 * namespace (IFLA_NET_NS_FD), the host end up. Its addresses are a /30 of the daemon's range
 * chosen by the sandbox's uid slot (no allocator state): host end .1, sandbox end .2. The
 * sandbox side gets its address and a default route by netlink through a socket opened
 * inside the sandbox's namespace (setns on the calling thread and back). Nothing here ever
 * deletes or moves a device on the normal path: the sandbox end dies with its namespace and
 * takes the host end with it.
 *
 * Filtering and NAT live in one nftables table of the daemon's own ("inet <name>", named
 * like the cgroup parent), written through libnftables: masquerade to the uplink, and
 * refusal of the host's own addresses, other sandboxes, private, shared and link-local
 * ranges, with a per-sandbox allowlist chain evaluated first. IPv4 only: sandboxes get no
 * IPv6 address and their IPv6 traffic is dropped.
 *
 * The pure part (parsers, the plan, the ruleset text, the netlink messages) has no I/O so
 * that unit tests and fuzzers reach it; struct net applies it. */
#ifndef CELLA_RUNTIME_NET_H
#define CELLA_RUNTIME_NET_H

#include <net/if.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"

/* The range of a net_config without one, and the first a daemon chooses for itself when
 * no other instance, address or route of the host overlaps it (host-claim.h). */
#define NET_DEFAULT_RANGE "10.213.0.0/16"
#define NET_SANDBOX_IFNAME "eth0"
#define NET_SLOT_PREFIX 30 /* a /30 per sandbox */
#define NET_MAX_DNS 3

/* An IPv4 prefix; addr in host byte order with no bits set beyond prefix. */
struct net_cidr {
        uint32_t addr;
        uint8_t prefix; /* 0-32 */
};

/* An allowlist entry: destinations in cidr, on port (TCP and UDP) or any port (0). */
struct net_allow {
        struct net_cidr cidr;
        uint16_t port;
};

/* "a.b.c.d/n" or "a.b.c.d" (a /32): decimal octets without leading zeros, no bits set
 * beyond the prefix, nothing else (len bytes of s, no NUL needed). 0 or -EINVAL. */
int net_cidr_parse(const char *s, size_t len, struct net_cidr *ret);
/* "CIDR" or "CIDR:port" (port 1-65535, no leading zeros). 0 or -EINVAL. */
int net_allow_parse(const char *s, size_t len, struct net_allow *ret);
/* The canonical text of an entry ("10.1.0.0/16:5432", "192.0.2.7/32"). */
void net_allow_format(const struct net_allow *a, char *buf, size_t size);
/* Dotted quad of a host-order address. */
void net_addr_format(uint32_t addr, char *buf, size_t size);

/* Do two prefixes share an address? */
bool net_cidr_overlaps(const struct net_cidr *a, const struct net_cidr *b);

/* What one sandbox gets. */
struct net_plan {
        uint32_t host_addr;    /* host end of the veth, the sandbox's gateway */
        uint32_t sandbox_addr; /* eth0 inside the sandbox */
        uint8_t prefix;        /* NET_SLOT_PREFIX */
        char host_ifname[IFNAMSIZ];
};

/* The interface name prefix of a table ("cn" + 6 hex digits of its name's hash): every
 * host end of this daemon is named <prefix><slot>. out has at least 9 bytes. */
void net_ifprefix(const char *table, char *out, size_t size);
/* The plan of slot in range. -ERANGE when the range has no /30 for this slot. */
int net_plan_make(const struct net_cidr *range, const char *ifprefix, unsigned slot,
                  struct net_plan *ret);

/* The daemon's table: everything but the per-sandbox allow chains, which survive a
 * rewrite (a restarted daemon writes this again over a live table). dns are the
 * nameservers sandboxes may reach on port 53 even in refused ranges. Returns the length,
 * or -ENOSPC. */
int net_ruleset_text(const char *table, const char *ifprefix, const struct net_cidr *range,
                     const uint32_t *dns, size_t n_dns, char *buf, size_t size);
/* The allow chain of one sandbox (made, emptied, filled) and its map element. */
int net_sandbox_rules_text(const char *table, unsigned slot, const struct net_allow *allow,
                           size_t n_allow, char *buf, size_t size);

/* The IPv4 nameservers of a resolv.conf text that a sandbox can use (not loopback, not
 * 0.0.0.0), at most max. Returns how many. */
size_t net_resolv_parse(const char *text, uint32_t *dns, size_t max);
/* A sandbox's /etc/resolv.conf for those nameservers. */
void net_resolv_text(const uint32_t *dns, size_t n_dns, char *buf, size_t size);

/* Netlink messages (built with libmnl into buf; return the length or -ENOSPC). */
/* RTM_NEWLINK: veth host_ifname (up) with peer eth0 created in netns_fd. */
int net_msg_veth(void *buf, size_t size, const struct net_plan *p, int netns_fd, uint32_t seq);
/* RTM_NEWLINK: ifindex up. */
int net_msg_link_up(void *buf, size_t size, int ifindex, uint32_t seq);
/* RTM_NEWADDR: addr/prefix on ifindex. */
int net_msg_addr(void *buf, size_t size, int ifindex, uint32_t addr, uint8_t prefix, uint32_t seq);
/* RTM_NEWROUTE: default route via gw. */
int net_msg_default_route(void *buf, size_t size, uint32_t gw, uint32_t seq);

/* An IPv4 address or route of the host, from a netlink dump. */
struct net_host_prefix {
        struct net_cidr cidr; /* the prefix it covers (host bits cleared) */
        uint32_t addr;        /* the address, or the route's destination */
        bool is_route;
        int ifindex; /* its interface; 0: none named (e.g. a multipath route) */
};

struct nlmsghdr;
/* One message of an RTM_GETADDR or RTM_GETROUTE dump: 1 with *ret set for an IPv4 address,
 * or a route a sandbox range must not overlap; 0 for anything else (another family or
 * message type, a default route, a local, broadcast, anycast or multicast route);
 * -EINVAL when it is malformed. nlh->nlmsg_len bytes must be readable. */
int net_host_prefix_parse(const struct nlmsghdr *nlh, struct net_host_prefix *ret);
/* Every IPv4 address and route of the calling thread's network namespace except those of
 * interfaces whose name begins with skip_ifprefix (a daemon's own sandboxes; NULL or "":
 * none): fn(prefix, "address 10.1.2.3/24 on eth0" or "route 10.0.0.0/8 dev tun0", ud).
 * Stops at, and returns, fn's first negative return; -errno when netlink fails. */
int net_host_prefixes(const char *skip_ifprefix,
                      int (*fn)(const struct net_cidr *c, const char *desc, void *ud), void *ud);

/* ---- applying it ---- */

struct net;

struct net_config {
        const char *table;  /* nft table and name base, e.g. "cella" or "cella-1a2b3c4d" */
        const char *range;  /* CIDR (NULL: NET_DEFAULT_RANGE) */
        const char *resolv; /* host resolv.conf path (NULL: /etc/resolv.conf) */
        bool probe_only;    /* cellad --check: see what works, change nothing */
};

/* Set up the daemon's networking: IP forwarding on and the table written. A host where
 * that cannot work is not an error: net_available() is then false and net_state() says
 * why. Errors are for bad configuration (-EINVAL, e.g. a range that is not a CIDR). */
int net_new(const struct net_config *cfg, struct net **ret, struct cella_error *err);
void net_free(struct net *n);
bool net_available(const struct net *n);
const char *net_state(const struct net *n);
/* The sandbox address of slot ("" when none). */
void net_sandbox_address(const struct net *n, unsigned slot, char *buf, size_t size);
/* The resolv.conf text sandboxes get. */
const char *net_resolv_conf(const struct net *n);
/* Give the sandbox whose PID 1 is pid its veth, addresses, route and (with an allowlist)
 * its allow chain; without one, no nftables work at all. A host
 * end left by an earlier sandbox on this slot whose namespace the kernel has not freed yet
 * is removed first. Returns 0 or -errno with *err set. */
int net_sandbox_setup(struct net *n, unsigned slot, pid_t pid, const struct net_allow *allow,
                      size_t n_allow, struct cella_error *err);
/* Does slot's veth exist (its host end)? A restored checkpoint's network namespace has
 * none until net_sandbox_setup() gives it one again (docs/decisions/0050). */
bool net_sandbox_plugged(const struct net *n, unsigned slot);
/* Remove slot's veth (its host end, and with it the sandbox's eth0), before a checkpoint:
 * the address stays the slot's, the allow chain stays. 0 (also when there is none) or
 * -errno. */
int net_sandbox_unplug(struct net *n, unsigned slot);
/* Rewrite the allow chain of slot (none: chain and map element removed). 0 or -errno with
 * *err set. */
int net_sandbox_allow(struct net *n, unsigned slot, const struct net_allow *allow, size_t n_allow,
                      struct cella_error *err);
/* Remove the allow chain of slot and its map element, if any (destroy). */
void net_sandbox_forget(struct net *n, unsigned slot);
/* Remove the daemon's table (a clean stop with no sandbox networking left). */
int net_remove_table(struct net *n);

#endif
