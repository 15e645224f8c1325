/* An instance's claim on its host (src/runtime/host-claim.h): the claim text, the choice of
 * range and uid block from a list of uses, the host's addresses and routes from netlink
 * messages, and host_claim_take against a claim directory of the test's own (two instances,
 * the record, explicit conflicts, stale claims, --check). */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <arpa/inet.h>
#include <libmnl/libmnl.h>
#include <linux/rtnetlink.h>

#include "runtime/host-claim.h"

#define S(x) x, strlen(x)

static struct net_cidr cidr(const char *s)
{
        struct net_cidr c;
        assert_int_equal(net_cidr_parse(S(s), &c), 0);
        return c;
}

static void test_overlaps(void **state)
{
        struct net_cidr a = cidr("10.213.0.0/16"), b = cidr("10.213.64.0/18"),
                        c = cidr("10.214.0.0/16"), d = cidr("10.0.0.0/8"), e = cidr("0.0.0.0/0");

        assert_true(net_cidr_overlaps(&a, &b));
        assert_true(net_cidr_overlaps(&b, &a));
        assert_false(net_cidr_overlaps(&a, &c));
        assert_true(net_cidr_overlaps(&a, &d));
        assert_true(net_cidr_overlaps(&c, &e));
        struct net_cidr x = cidr("10.213.0.4/30"), y = cidr("10.213.0.8/30");
        assert_false(net_cidr_overlaps(&x, &y));
        assert_true(net_cidr_overlaps(&x, &x));
}

static void test_text(void **state)
{
        struct host_claim_text c, d;
        char buf[512];
        const char *t = "name cella-1a2b3c4d\nnetwork-range 10.64.0.0/16\nuid-base 536870912\n"
                        "pid 42\ndata-dir /tmp/x y/data\ndata-dir-id 2049:123456\n";

        assert_int_equal(host_claim_parse(S(t), &c), 0);
        assert_string_equal(c.name, "cella-1a2b3c4d");
        assert_true(c.has_range && c.has_uid_base);
        assert_int_equal(c.range.addr, 0x0a400000u);
        assert_int_equal(c.range.prefix, 16);
        assert_int_equal(c.uid_base, 0x20000000u);
        assert_int_equal(c.pid, 42);
        assert_string_equal(c.data_dir, "/tmp/x y/data");
        assert_int_equal(c.data_dev, 2049);
        assert_int_equal(c.data_ino, 123456);
        assert_int_equal(host_claim_format(&c, buf, sizeof(buf)), (int)strlen(t));
        assert_string_equal(buf, t);
        assert_int_equal(host_claim_parse(S(buf), &d), 0);
        assert_memory_equal(&c, &d, sizeof(c));
        /* A record: three keys; unknown keys of later versions, blank lines, no final
         * newline. */
        assert_int_equal(host_claim_parse(S("name cella\n\nfuture 1 2\nnetwork-range "
                                            "10.213.0.0/16\nuid-base 268435456"),
                                          &c),
                         0);
        assert_int_equal(c.pid, 0);
        assert_string_equal(c.data_dir, "");
        assert_int_equal(host_claim_parse("", 0, &c), 0);
        assert_false(c.has_range);
        const char *bad[] = {
                "name",                       /* no value */
                "name \n",                    /* empty */
                "name Cella\n",               /* not [a-z0-9-] */
                "name a\nname b\n",           /* twice */
                "network-range 10.0.0.1/8\n", /* host bits */
                "network-range 10.0.0.0/8 \n",
                "uid-base 268435457\n",  /* not a slot boundary */
                "uid-base 65536\n",      /* below CELLA_UID_BASE */
                "uid-base 4026531840\n", /* 0xf0000000: the block would reach (uid_t)-1 */
                "uid-base 0268435456\n", /* leading zero */
                "uid-base 99999999999999999999999\n",
                "pid 0\n",
                "pid -1\n",
                "data-dir relative\n",
                "data-dir-id 1\n",
                "data-dir-id 1:x\n",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(host_claim_parse(S(bad[i]), &c), -EINVAL);
        /* Format refuses what would not read back. */
        memset(&c, 0, sizeof(c));
        snprintf(c.data_dir, sizeof(c.data_dir), "/a\nb");
        assert_int_equal(host_claim_format(&c, buf, sizeof(buf)), -EINVAL);
        snprintf(c.data_dir, sizeof(c.data_dir), "/a");
        c.has_uid_base = true;
        c.uid_base = 0x10000000;
        assert_int_equal(host_claim_format(&c, buf, 8), -ENOSPC);
}

static void test_uid_base_ok(void **state)
{
        assert_true(host_claim_uid_base_ok(0x10000000));
        assert_true(host_claim_uid_base_ok(0x10010000));
        assert_true(host_claim_uid_base_ok(0xefff0000));
        assert_false(host_claim_uid_base_ok(0xf0000000));
        assert_false(host_claim_uid_base_ok(0x0fff0000));
        assert_false(host_claim_uid_base_ok(0x10000001));
        assert_false(host_claim_uid_base_ok(0x100000000ull));
        /* the last slot's last uid of the highest block is below (uid_t)-1 */
        assert_true((uint64_t)0xefff0000 + HOST_CLAIM_UID_BLOCK - 1 < 0xffffffffull);
}

static void add(struct host_claim_uses *u, const char *range, uint32_t uid0, uint32_t uid1,
                const char *desc)
{
        struct host_claim_use use = {0};
        if (range) {
                use.has_range = true;
                use.range = cidr(range);
        }
        if (uid1) {
                use.has_uids = true;
                use.uid_first = uid0;
                use.uid_last = uid1;
        }
        snprintf(use.desc, sizeof(use.desc), "%s", desc);
        assert_int_equal(host_claim_uses_add(u, &use), 0);
}

static void test_pick_range(void **state)
{
        struct host_claim_uses u = {0};
        const struct host_claim_use *by = NULL;
        struct net_cidr r, want;

        /* the pool: 10.213.0.0/16, then 10.64.0.0/16 .. 10.127.0.0/16 */
        assert_int_equal(host_claim_pool_size(), 65);
        host_claim_pool_range(0, &r);
        assert_int_equal(r.addr, 0x0ad50000u);
        host_claim_pool_range(1, &r);
        assert_int_equal(r.addr, 0x0a400000u);
        host_claim_pool_range(64, &r);
        assert_int_equal(r.addr, 0x0a7f0000u);

        assert_int_equal(host_claim_pick_range(NULL, &u, &r, &by), 0);
        assert_int_equal(r.addr, 0x0ad50000u);
        assert_int_equal(r.prefix, 16);
        /* another instance's range, an address, a route: skipped in order */
        add(&u, "10.213.0.0/16", 0, 0, "instance A");
        add(&u, "10.64.7.1/32", 0, 0, "address 10.64.7.1/32 on eth1");
        add(&u, "10.65.0.0/17", 0, 0, "route 10.65.0.0/17 dev tun0");
        add(&u, NULL, 0x10000000, 0x1fffffff, "uids only");
        assert_int_equal(host_claim_pick_range(NULL, &u, &r, &by), 0);
        assert_int_equal(r.addr, 0x0a420000u); /* 10.66.0.0/16 */
        /* an explicit range: given back, or refused with what it overlaps */
        want = cidr("10.128.0.0/18");
        assert_int_equal(host_claim_pick_range(&want, &u, &r, &by), 0);
        assert_int_equal(r.addr, want.addr);
        want = cidr("10.213.128.0/30");
        assert_int_equal(host_claim_pick_range(&want, &u, &r, &by), -EADDRINUSE);
        assert_string_equal(by->desc, "instance A");
        want = cidr("10.64.0.0/16");
        assert_int_equal(host_claim_pick_range(&want, &u, &r, &by), -EADDRINUSE);
        assert_string_equal(by->desc, "address 10.64.7.1/32 on eth1");
        /* nothing left: the first candidate's user is named */
        add(&u, "10.0.0.0/8", 0, 0, "route 10.0.0.0/8 dev vpn");
        assert_int_equal(host_claim_pick_range(NULL, &u, &r, &by), -ENOSPC);
        assert_string_equal(by->desc, "instance A");
        host_claim_uses_done(&u);
}

static void test_pick_uids(void **state)
{
        struct host_claim_uses u = {0};
        const struct host_claim_use *by = NULL;
        uint32_t b, want;

        assert_int_equal(host_claim_pick_uids(NULL, &u, &b, &by), 0);
        assert_int_equal(b, 0x10000000u);
        add(&u, "10.213.0.0/16", 0x10000000, 0x1fffffff, "instance A");
        add(&u, NULL, 0x20050000, 0x2005ffff, "process 7");
        add(&u, "10.1.0.0/16", 0, 0, "range only");
        assert_int_equal(host_claim_pick_uids(NULL, &u, &b, &by), 0);
        assert_int_equal(b, 0x30000000u);
        want = 0x1fff0000; /* straddles A's last slot */
        assert_int_equal(host_claim_pick_uids(&want, &u, &b, &by), -EADDRINUSE);
        assert_string_equal(by->desc, "instance A");
        want = 0x20060000;
        assert_int_equal(host_claim_pick_uids(&want, &u, &b, &by), 0);
        assert_int_equal(b, want);
        want = 0x20060001;
        assert_int_equal(host_claim_pick_uids(&want, &u, &b, &by), -EINVAL);
        add(&u, NULL, 0x30000000, 0xffffffff, "everything above");
        assert_int_equal(host_claim_pick_uids(NULL, &u, &b, &by), -ENOSPC);
        assert_string_equal(by->desc, "instance A");
        host_claim_uses_done(&u);
}

/* A daemon with more than CELLA_UID_SLOTS sandboxes holds several blocks in a row. */
static void test_uid_slots(void **state)
{
        struct host_claim_uses u = {0};
        const struct host_claim_use *by = NULL;
        struct host_claim_text c, d;
        char buf[512];
        uint32_t b, want;

        assert_int_equal(host_claim_slots(0), CELLA_UID_SLOTS);
        assert_int_equal(host_claim_slots(1), CELLA_UID_SLOTS);
        assert_int_equal(host_claim_slots(4096), 4096);
        assert_int_equal(host_claim_slots(4097), 8192);
        assert_int_equal(host_claim_slots(10000), 12288);
        assert_int_equal(host_claim_slots(CELLA_UID_SLOTS_MAX), CELLA_UID_SLOTS_MAX);
        assert_int_equal(host_claim_slots(CELLA_UID_SLOTS_MAX + 1), CELLA_UID_SLOTS_MAX);
        assert_true(host_claim_uid_span(0) == HOST_CLAIM_UID_BLOCK);
        assert_true(host_claim_uid_span(12288) == 3ull * HOST_CLAIM_UID_BLOCK);

        /* three blocks: the first free run of three */
        add(&u, NULL, 0x20000000, 0x2fffffff, "instance A");
        assert_int_equal(host_claim_pick_uid_slots(NULL, 12288, &u, &b, &by), 0);
        assert_int_equal(b, 0x30000000u);
        assert_int_equal(host_claim_pick_uid_slots(NULL, 4096, &u, &b, &by), 0);
        assert_int_equal(b, 0x10000000u);
        want = 0x10000000; /* its second block is A's */
        assert_int_equal(host_claim_pick_uid_slots(&want, 8192, &u, &b, &by), -EADDRINUSE);
        assert_string_equal(by->desc, "instance A");
        want = 0xe0000000; /* one block fits below (uid_t)-1, two do not */
        assert_int_equal(host_claim_pick_uid_slots(&want, 4096, &u, &b, &by), 0);
        assert_int_equal(host_claim_pick_uid_slots(&want, 8192, &u, &b, &by), -EINVAL);
        add(&u, NULL, 0x60000000, 0x6fffffff, "instance B");
        add(&u, NULL, 0xa0000000, 0xafffffff, "instance C");
        add(&u, NULL, 0xd0000000, 0xdfffffff, "instance D");
        /* free runs: 0x30-0x5f, 0x70-0x9f, 0xb0-0xcf, 0xe0-0xef: four blocks fit nowhere */
        assert_int_equal(host_claim_pick_uid_slots(NULL, 16384, &u, &b, &by), -ENOSPC);
        assert_string_equal(by->desc, "instance A");
        host_claim_uses_done(&u);

        /* the text: uid-slots only beyond one block, read back */
        memset(&c, 0, sizeof(c));
        c.has_uid_base = true;
        c.uid_base = 0x10000000;
        c.uid_slots = CELLA_UID_SLOTS;
        assert_true(host_claim_format(&c, buf, sizeof(buf)) > 0);
        assert_null(strstr(buf, "uid-slots"));
        c.uid_slots = 12288;
        assert_true(host_claim_format(&c, buf, sizeof(buf)) > 0);
        assert_non_null(strstr(buf, "uid-slots 12288\n"));
        assert_int_equal(host_claim_parse(S(buf), &d), 0);
        assert_int_equal(d.uid_slots, 12288);
        assert_int_equal(host_claim_parse(S("uid-slots 0\n"), &d), -EINVAL);
        assert_int_equal(host_claim_parse(S("uid-slots 16385\n"), &d), -EINVAL);
        assert_int_equal(host_claim_parse(S("uid-slots 16384\n"), &d), 0);
}

/* ---- netlink messages of a dump ---- */

static struct nlmsghdr *msg(char *buf, uint16_t type)
{
        memset(buf, 0, 512);
        struct nlmsghdr *nlh = mnl_nlmsg_put_header(buf);
        nlh->nlmsg_type = type;
        return nlh;
}

static void test_prefix_parse(void **state)
{
        char buf[512];
        struct net_host_prefix p;
        uint32_t be;

        /* an address: its subnet */
        struct nlmsghdr *nlh = msg(buf, RTM_NEWADDR);
        struct ifaddrmsg *ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        ifa->ifa_prefixlen = 24;
        ifa->ifa_index = 4;
        be = htonl(0xc0000202); /* 192.0.2.2 */
        mnl_attr_put(nlh, IFA_ADDRESS, sizeof(be), &be);
        mnl_attr_put(nlh, IFA_LOCAL, sizeof(be), &be);
        assert_int_equal(net_host_prefix_parse(nlh, &p), 1);
        assert_int_equal(p.cidr.addr, 0xc0000200u);
        assert_int_equal(p.cidr.prefix, 24);
        assert_int_equal(p.addr, 0xc0000202u);
        assert_int_equal(p.ifindex, 4);
        assert_false(p.is_route);
        /* IPv6: not ours */
        ifa->ifa_family = AF_INET6;
        assert_int_equal(net_host_prefix_parse(nlh, &p), 0);
        /* an attribute of the wrong size */
        nlh = msg(buf, RTM_NEWADDR);
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        mnl_attr_put_u16(nlh, IFA_LOCAL, 7);
        assert_int_equal(net_host_prefix_parse(nlh, &p), -EINVAL);
        /* no address at all */
        nlh = msg(buf, RTM_NEWADDR);
        ifa = mnl_nlmsg_put_extra_header(nlh, sizeof(*ifa));
        ifa->ifa_family = AF_INET;
        assert_int_equal(net_host_prefix_parse(nlh, &p), -EINVAL);

        /* a route */
        nlh = msg(buf, RTM_NEWROUTE);
        struct rtmsg *rtm = mnl_nlmsg_put_extra_header(nlh, sizeof(*rtm));
        rtm->rtm_family = AF_INET;
        rtm->rtm_dst_len = 8;
        rtm->rtm_type = RTN_UNICAST;
        be = htonl(0x0a000000);
        mnl_attr_put(nlh, RTA_DST, sizeof(be), &be);
        mnl_attr_put_u32(nlh, RTA_OIF, 9);
        assert_int_equal(net_host_prefix_parse(nlh, &p), 1);
        assert_true(p.is_route);
        assert_int_equal(p.cidr.addr, 0x0a000000u);
        assert_int_equal(p.cidr.prefix, 8);
        assert_int_equal(p.ifindex, 9);
        /* local, broadcast: the host's own addresses, not routes to avoid */
        rtm->rtm_type = RTN_LOCAL;
        assert_int_equal(net_host_prefix_parse(nlh, &p), 0);
        rtm->rtm_type = RTN_BROADCAST;
        assert_int_equal(net_host_prefix_parse(nlh, &p), 0);
        rtm->rtm_type = RTN_BLACKHOLE;
        assert_int_equal(net_host_prefix_parse(nlh, &p), 1);
        /* the default route */
        rtm->rtm_dst_len = 0;
        rtm->rtm_type = RTN_UNICAST;
        assert_int_equal(net_host_prefix_parse(nlh, &p), 0);
        /* a prefix beyond 32, a message too short for its header, another type */
        rtm->rtm_dst_len = 33;
        assert_int_equal(net_host_prefix_parse(nlh, &p), -EINVAL);
        nlh = msg(buf, RTM_NEWROUTE);
        assert_int_equal(net_host_prefix_parse(nlh, &p), -EINVAL);
        nlh = msg(buf, RTM_NEWLINK);
        assert_int_equal(net_host_prefix_parse(nlh, &p), 0);
}

/* ---- host_claim_take against a claim directory of the test's own ---- */

struct dirs {
        char root[64], claims[96], a[96], b[96];
};

static int setup_dirs(void **state)
{
        struct dirs *d = calloc(1, sizeof(*d));
        snprintf(d->root, sizeof(d->root), "/tmp/cella-claim.XXXXXX");
        assert_non_null(mkdtemp(d->root));
        snprintf(d->claims, sizeof(d->claims), "%s/claims", d->root);
        snprintf(d->a, sizeof(d->a), "%s/a", d->root);
        snprintf(d->b, sizeof(d->b), "%s/b", d->root);
        assert_int_equal(mkdir(d->a, 0700), 0);
        assert_int_equal(mkdir(d->b, 0700), 0);
        *state = d;
        return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        (void)st;
        (void)flag;
        (void)ftw;
        remove(path);
        return 0;
}

static void rm_rf(const char *path)
{
        nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

static int teardown_dirs(void **state)
{
        struct dirs *d = *state;
        rm_rf(d->root);
        free(d);
        return 0;
}

static struct host_claim_config config(struct dirs *d, const char *name, const char *dir)
{
        return (struct host_claim_config){
                .name = name,
                .ifprefix = "cnzzzzzz",
                .data_dir = dir,
                .claim_dir = d->claims,
        };
}

static bool read_file(const char *path, char *buf, size_t size)
{
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        ssize_t n = read(fd, buf, size - 1);
        close(fd);
        if (n < 0)
                return false;
        buf[n] = '\0';
        return true;
}

static void test_take(void **state)
{
        struct dirs *d = *state;
        struct host_claim *a = NULL, *b = NULL, *c = NULL;
        struct cella_error err = {0};
        struct host_claim_config ca = config(d, "cella-aaaa", d->a);
        struct host_claim_config cb = config(d, "cella-bbbb", d->b);
        char path[256], text[1024], range[32], ip[16];

        err = (struct cella_error){0};

        assert_int_equal(host_claim_take(&ca, &a, &err), 0);
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cb, &b, &err), 0);
        /* different ranges and uid blocks */
        assert_false(net_cidr_overlaps(host_claim_range(a), host_claim_range(b)));
        assert_int_not_equal(host_claim_uid_base(a), host_claim_uid_base(b));
        assert_true(host_claim_uid_base_ok(host_claim_uid_base(a)));
        assert_non_null(strstr(host_claim_describe(a), "(chosen"));
        /* a's claim file and record */
        snprintf(path, sizeof(path), "%s/cella-aaaa", d->claims);
        assert_true(read_file(path, text, sizeof(text)));
        assert_non_null(strstr(text, "pid "));
        assert_non_null(strstr(text, "data-dir /tmp/cella-claim."));
        snprintf(path, sizeof(path), "%s/instance", d->a);
        assert_true(read_file(path, text, sizeof(text)));
        assert_null(strstr(text, "pid "));

        /* an explicit range or uid base of a's is refused, naming a */
        net_addr_format(host_claim_range(a)->addr, ip, sizeof(ip));
        snprintf(range, sizeof(range), "%s/%u", ip, host_claim_range(a)->prefix);
        struct host_claim_config cc = config(d, "cella-cccc", d->root);
        cc.network_range = range;
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cc, &c, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "--network-range"));
        assert_non_null(strstr(err.msg, "cella instance 'cella-aaaa'"));
        cc.network_range = NULL;
        uint32_t ub = host_claim_uid_base(a);
        cc.uid_base = &ub;
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cc, &c, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "--uid-base"));
        assert_non_null(strstr(err.msg, "cella instance 'cella-aaaa'"));
        cc.uid_base = NULL;
        cc.network_range = "10.0.0.1/8";
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cc, &c, &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        /* probing: the same choice would be made, nothing written */
        cc.network_range = NULL;
        cc.probe_only = true;
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cc, &c, &err), 0);
        assert_false(net_cidr_overlaps(host_claim_range(c), host_claim_range(a)));
        assert_false(net_cidr_overlaps(host_claim_range(c), host_claim_range(b)));
        snprintf(path, sizeof(path), "%s/cella-cccc", d->claims);
        assert_int_equal(access(path, F_OK), -1);
        snprintf(path, sizeof(path), "%s/instance", d->root);
        assert_int_equal(access(path, F_OK), -1);
        host_claim_free(c);

        /* a stopped daemon keeps its claim while its data dir exists; a restart takes
         * the recorded range and uids */
        struct net_cidr ra = *host_claim_range(a);
        uint32_t ua = host_claim_uid_base(a);
        host_claim_free(a);
        cc.probe_only = false;
        cc.network_range = range;
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cc, &c, &err), -EINVAL);
        assert_non_null(strstr(err.msg, "not running"));
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&ca, &a, &err), 0);
        assert_int_equal(host_claim_range(a)->addr, ra.addr);
        assert_int_equal(host_claim_uid_base(a), ua);
        assert_non_null(strstr(host_claim_describe(a), "recorded"));
        host_claim_free(a);

        /* once its data dir is gone, its claim is stale: removed, range free again */
        rm_rf(d->a);
        assert_int_equal(access(d->a, F_OK), -1);
        cc.network_range = range;
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cc, &c, &err), 0);
        assert_int_equal(host_claim_range(c)->addr, ra.addr);
        snprintf(path, sizeof(path), "%s/cella-aaaa", d->claims);
        assert_int_equal(access(path, F_OK), -1);
        host_claim_free(c);
        host_claim_free(b);
}

static void test_legacy_and_bad_record(void **state)
{
        struct dirs *d = *state;
        struct host_claim *a = NULL;
        struct cella_error err = {0};
        struct host_claim_config ca = config(d, "cella-aaaa", d->a);
        char path[256];

        /* sandboxes from before records: CELLA_UID_BASE, unless someone else has it */
        ca.legacy_uids = true;
        err = (struct cella_error){0};
        int r = host_claim_take(&ca, &a, &err);
        if (r == 0) {
                assert_int_equal(host_claim_uid_base(a), CELLA_UID_BASE);
                assert_non_null(strstr(host_claim_describe(a), "before instance records"));
                host_claim_free(a);
        } else {
                /* this host runs sandboxes there (a daemon that makes no claim) */
                assert_non_null(strstr(err.msg, "0x10000000"));
        }
        /* a record that is not one */
        snprintf(path, sizeof(path), "%s/instance", d->b);
        FILE *f = fopen(path, "w");
        assert_non_null(f);
        fputs("uid-base 12\n", f);
        fclose(f);
        struct host_claim_config cb = config(d, "cella-bbbb", d->b);
        err = (struct cella_error){0};
        assert_int_equal(host_claim_take(&cb, &a, &err), -EIO);
        assert_non_null(strstr(err.msg, "not a record"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_overlaps),
                cmocka_unit_test(test_text),
                cmocka_unit_test(test_uid_base_ok),
                cmocka_unit_test(test_pick_range),
                cmocka_unit_test(test_pick_uids),
                cmocka_unit_test(test_uid_slots),
                cmocka_unit_test(test_prefix_parse),
                cmocka_unit_test_setup_teardown(test_take, setup_dirs, teardown_dirs),
                cmocka_unit_test_setup_teardown(test_legacy_and_bad_record, setup_dirs,
                                                teardown_dirs),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
