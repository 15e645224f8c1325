/* runtime/criu.h: what CRIU's output means (the version, why `criu check` failed), and
 * the host check run against stand-ins for the binary (a missing one, one that fails its
 * check, one that passes). The real binary on the real kernel is integration/memsleep's. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "runtime/checkpoint.h"
#include "runtime/criu.h"

/* `criu check` of Debian 12's criu 3.17.1 on Linux 6.18, as it printed it. */
static const char vdso_failure[] =
        "Error (criu/util.c:642): exited, status=1\n"
        "Error (criu/util.c:642): exited, status=1\n"
        "Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds\n"
        "Error (criu/vdso.c:613): vdso: Failed to fill self vdso symtable\n"
        "Error (criu/kerndat.c:1615): kerndat_vdso_fill_symtable failed when initializing "
        "kerndat.\n"
        "Error (criu/crtools.c:260): Could not initialize kernel features detection.\n";

static void test_version(void **state)
{
        char v[32];

        (void)state;
        assert_int_equal(criu_version_parse("Version: 3.17.1\n", 16, v, sizeof(v)), 0);
        assert_string_equal(v, "3.17.1");
        const char *two = "Version: 4.1\nGitID: v4.1-12-gabc\n";
        assert_int_equal(criu_version_parse(two, strlen(two), v, sizeof(v)), 0);
        assert_string_equal(v, "4.1");
        /* only at a line's start; not NUL-terminated input is read within len */
        assert_int_equal(criu_version_parse("xVersion: 1\n", 12, v, sizeof(v)), -EINVAL);
        assert_int_equal(criu_version_parse("Version: 3.17.1", 11, v, sizeof(v)), 0);
        assert_string_equal(v, "3.");
        assert_int_equal(criu_version_parse("Version: 3.17.1", 9, v, sizeof(v)), -EINVAL);
        assert_int_equal(criu_version_parse("Version: \n", 10, v, sizeof(v)), -EINVAL);
        assert_int_equal(criu_version_parse("", 0, v, sizeof(v)), -EINVAL);
        assert_int_equal(criu_version_parse("Version: 3.17;rm\n", 17, v, sizeof(v)), 0);
        assert_string_equal(v, "3.17");
}

static void test_reason(void **state)
{
        char r[CRIU_REASON_MAX];
        size_t n;

        (void)state;
        /* the first error that is not a probe's exit status */
        n = criu_check_reason(vdso_failure, strlen(vdso_failure), false, r, sizeof(r));
        assert_string_equal(r, "vdso: Unexpected rt vDSO area bounds");
        assert_int_equal(n, strlen(r));
        /* on a kernel with [vvar_vclock], what that means */
        n = criu_check_reason(vdso_failure, strlen(vdso_failure), true, r, sizeof(r));
        assert_non_null(strstr(r, "vdso: Unexpected rt vDSO area bounds ("));
        assert_non_null(strstr(r, "[vvar_vclock], Linux 6.13 and later"));
        assert_non_null(strstr(r, "4.1"));
        assert_int_equal(n, strlen(r));
        /* no Error line: the last line that says something */
        const char *plain = "Looks good.\nbut not here\n\n  \n";
        criu_check_reason(plain, strlen(plain), true, r, sizeof(r));
        assert_string_equal(r, "but not here");
        /* only exit statuses: the last of them, whole */
        const char *st = "Error (criu/util.c:642): exited, status=1\n";
        criu_check_reason(st, strlen(st), false, r, sizeof(r));
        assert_string_equal(r, "Error (criu/util.c:642): exited, status=1");
        criu_check_reason("", 0, false, r, sizeof(r));
        assert_string_equal(r, "");
        /* control bytes are not passed on; the text is cut to fit */
        const char *ctl = "Error (x.c:1): bad\033[31m thing\r\n";
        criu_check_reason(ctl, strlen(ctl), false, r, sizeof(r));
        assert_string_equal(r, "bad?[31m thing");
        char small[8];
        n = criu_check_reason(vdso_failure, strlen(vdso_failure), true, small, sizeof(small));
        assert_int_equal(n, 7);
        assert_string_equal(small, "vdso: U");
        n = criu_check_reason(vdso_failure, strlen(vdso_failure), true, small, 1);
        assert_int_equal(n, 0);
}

/* A stand-in for criu at dir/name printing version and check output, exiting with rc. */
static void stand_in(const char *path, const char *check_out, int rc)
{
        FILE *f = fopen(path, "w");

        assert_non_null(f);
        fprintf(f,
                "#!/bin/sh\n"
                "case \"$1\" in\n"
                "--version) echo 'Version: 3.17.1'; exit 0;;\n"
                "check) printf '%%s' '%s'; exit %d;;\n"
                "esac\nexit 2\n",
                check_out, rc);
        fclose(f);
        assert_int_equal(chmod(path, 0755), 0);
}

static void test_probe(void **state)
{
        char dir[] = "/tmp/cella-criu-XXXXXX", bin[128];
        struct criu_probe p;

        (void)state;
        assert_non_null(mkdtemp(dir));
        snprintf(bin, sizeof(bin), "%s/criu", dir);

        /* no binary */
        setenv("CELLA_CRIU", bin, 1);
        criu_probe_host(&p);
        assert_false(p.check_passed);
        assert_string_equal(p.binary, bin);
        assert_non_null(strstr(p.reason, "no CRIU"));
        assert_non_null(strstr(p.reason, "No such file or directory"));

        /* a check that fails says why */
        stand_in(bin, "Error (criu/vdso.c:381): vdso: Unexpected rt vDSO area bounds\n", 1);
        criu_probe_host(&p);
        assert_false(p.check_passed);
        assert_string_equal(p.version, "3.17.1");
        assert_non_null(strstr(p.reason, "criu 3.17.1 check fails on this kernel: vdso: "
                                         "Unexpected rt vDSO area bounds"));

        /* a silent failure is still a reason */
        stand_in(bin, "", 3);
        criu_probe_host(&p);
        assert_false(p.check_passed);
        assert_non_null(strstr(p.reason, "exit status 3 with no message"));

        /* a check that passes */
        stand_in(bin, "Looks good.\n", 0);
        criu_probe_host(&p);
        assert_true(p.check_passed);
        assert_string_equal(p.version, "3.17.1");
        assert_string_equal(p.reason, "");

        unsetenv("CELLA_CRIU");
        unlink(bin);
        assert_int_equal(rmdir(dir), 0);
}

static void test_binary(void **state)
{
        (void)state;
        /* CELLA_CRIU first, then the CRIU scripts/criu.sh built, then PATH's */
        assert_string_equal(criu_binary("/opt/criu", true), "/opt/criu");
        assert_string_equal(criu_binary("/opt/criu", false), "/opt/criu");
        assert_string_equal(criu_binary("", true), CRIU_BUILT_PATH);
        assert_string_equal(criu_binary(NULL, true), CRIU_BUILT_PATH);
        assert_string_equal(criu_binary(NULL, false), "criu");
        assert_string_equal(criu_binary("", false), "criu");
}

/* A CRIU that passes its check is used only when it is recent enough for the kernel. */
static void test_version_reason(void **state)
{
        char out[CRIU_REASON_MAX];
        (void)state;

        assert_int_equal(criu_version_reason_for("4.2.1", "6.18.0-1-amd64", out, sizeof(out)), 0);
        assert_string_equal(out, "");
        assert_int_equal(criu_version_reason_for("4.1.1", "6.12.9", out, sizeof(out)), 0);
        assert_true(criu_version_reason_for("4.1.1", "6.18.0", out, sizeof(out)) > 0);
        assert_string_equal(out, "criu 4.1.1 passes its check here, but a sandbox on Linux 6.18.0 "
                                 "needs CRIU 4.2 or later (docs/decisions/0050; scripts/criu.sh "
                                 "builds one)");
        assert_true(criu_version_reason_for("3.17.1", "6.1.0", out, sizeof(out)) > 0);
        assert_non_null(strstr(out, "needs CRIU 4.1 or later"));
        assert_true(criu_version_reason_for("", "6.1.0", out, sizeof(out)) > 0);
        assert_non_null(strstr(out, "(unknown version)"));
        assert_int_equal(criu_version_reason_for("5.0", "7.0", out, sizeof(out)), 0);
}

/* What cellad wrote beside a checkpoint's images, read back before a restore. */
static void test_externals(void **state)
{
        struct checkpoint_externals *x = malloc(sizeof(*x));
        static const char good[] = "mnt /dev/null\nmnt /proc/keys\nmnt /sys/fs/cgroup\n"
                                   "mnt /run/.cella/cella-init\ncg sess-1\ncg sess-1/a.b\n"
                                   "log 1b:a2f3\n";
        static const char *const bad[] = {
                "mnt /dev/null\n",            /* no log */
                "log 1b:a2f3\nlog 1:2\n",     /* two logs */
                "mnt /etc/passwd\nlog 1:2\n", /* not a mount cellad binds */
                "mnt /dev/../etc\nlog 1:2\n", /* .. */
                "mnt dev/null\nlog 1:2\n",    /* relative */
                "mnt /dev/a b\nlog 1:2\n",    /* a space */
                "cg ../up\nlog 1:2\n",        /* out of the sandbox's cgroup */
                "cg /abs\nlog 1:2\n",         /* absolute */
                "cg a//b\nlog 1:2\n",         /* empty component */
                "cg .\nlog 1:2\n",            /* itself */
                "log 1B:2\n",                 /* upper case hex */
                "log :2\n",                   /* no mount id */
                "log 1:2:3\n",                /* two colons */
                "log 1:2\nfile x\n",          /* an unknown line */
        };
        (void)state;

        assert_non_null(x);
        assert_int_equal(checkpoint_externals_parse(good, strlen(good), x), 0);
        assert_int_equal(x->n, 4);
        assert_string_equal(x->mounts[0], "/dev/null");
        assert_string_equal(x->mounts[3], "/run/.cella/cella-init");
        assert_int_equal(x->n_cgroups, 2);
        assert_string_equal(x->cgroups[1], "sess-1/a.b");
        assert_string_equal(x->log, "1b:a2f3");
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (checkpoint_externals_parse(bad[i], strlen(bad[i]), x) != -EINVAL)
                        fail_msg("accepted: %s", bad[i]);
        free(x);
}

/* The reason of a failed dump or restore: CRIU's first error that is not one every run
 * prints. */
static void test_log_reason(void **state)
{
        static const char log[] =
                "(00.000010) Error (criu/util.c:1534): rlimit: Can't setup RLIMIT_NOFILE for "
                "self: Operation not permitted\n"
                "(00.1) Error (criu/net.c:1): iptables-restore returned -1\n"
                "(00.2) Error (criu/cgroup.c:1854): cg: Cgroup dir x/sess-1 doesn't exist\n"
                "(00.3) Error (criu/cr-restore.c:2331): Restoring FAILED.\n";
        char out[CRIU_REASON_MAX], small[8];
        (void)state;

        assert_int_equal(checkpoint_log_reason(log, strlen(log), out, sizeof(out)),
                         strlen("cg: Cgroup dir x/sess-1 doesn't exist"));
        assert_string_equal(out, "cg: Cgroup dir x/sess-1 doesn't exist");
        assert_int_equal(checkpoint_log_reason("", 0, out, sizeof(out)), 0);
        assert_string_equal(out, "");
        assert_int_equal(checkpoint_log_reason("no error here\n", 14, out, sizeof(out)), 0);
        assert_int_equal(checkpoint_log_reason(log, strlen(log), small, sizeof(small)), 7);
        assert_string_equal(small, "cg: Cgr");
        assert_int_equal(checkpoint_log_reason("Error (a.c:1): x\x01y", 18, out, sizeof(out)), 3);
        assert_string_equal(out, "x?y");
}

/* A userns image as CRIU 4.2.1 wrote it here (uid and gid maps 0 -> 0xe0000000, 65536):
 * a memory fork's child gets its own base; anything else is refused. */
static void test_userns_remap(void **state)
{
        (void)state;
        static const uint8_t img[] = {0x19, 0x43, 0x56, 0x54, 0x06, 0x49, 0x47, 0x55, 0x1c, 0x00,
                                      0x00, 0x00, 0x0a, 0x0c, 0x08, 0x00, 0x10, 0x80, 0x80, 0x80,
                                      0x80, 0x0e, 0x18, 0x80, 0x80, 0x04, 0x12, 0x0c, 0x08, 0x00,
                                      0x10, 0x80, 0x80, 0x80, 0x80, 0x0e, 0x18, 0x80, 0x80, 0x04};
        uint8_t out[256], back[256];
        uint32_t base = 0;
        size_t len = 0, blen = 0;

        assert_int_equal(checkpoint_userns_base(img, sizeof(img), &base), 0);
        assert_int_equal(base, 0xe0000000u);
        assert_int_equal(checkpoint_userns_remap(img, sizeof(img), 0xe0000000u, 0x30010000u, 65536,
                                                 out, sizeof(out), &len),
                         0);
        assert_int_equal(checkpoint_userns_base(out, len, &base), 0);
        assert_int_equal(base, 0x30010000u);
        assert_int_equal(checkpoint_userns_remap(out, len, 0x30010000u, 0xe0000000u, 65536, back,
                                                 sizeof(back), &blen),
                         0);
        assert_int_equal(blen, sizeof(img));
        assert_memory_equal(back, img, sizeof(img));
        /* not the parent's range: refused */
        assert_int_equal(checkpoint_userns_remap(img, sizeof(img), 0x10000000u, 0x30010000u, 65536,
                                                 out, sizeof(out), &len),
                         -EINVAL);
        assert_int_equal(len, 0);
        /* a smaller range than the extent */
        assert_int_equal(checkpoint_userns_remap(img, sizeof(img), 0xe0000000u, 0x30010000u, 1000,
                                                 out, sizeof(out), &len),
                         -EINVAL);
        /* too small an output */
        assert_int_equal(checkpoint_userns_remap(img, sizeof(img), 0xe0000000u, 0x30010000u, 65536,
                                                 out, 20, &len),
                         -ENOSPC);
        /* a wrong magic, a truncated entry, a trailing byte */
        uint8_t bad[sizeof(img) + 1];
        memcpy(bad, img, sizeof(img));
        bad[4] ^= 1;
        assert_int_equal(checkpoint_userns_base(bad, sizeof(img), &base), -EINVAL);
        assert_int_equal(checkpoint_userns_base(img, sizeof(img) - 1, &base), -EINVAL);
        memcpy(bad, img, sizeof(img));
        bad[sizeof(img)] = 0;
        assert_int_equal(checkpoint_userns_base(bad, sizeof(bad), &base), -EINVAL);
        /* a field the message does not have (uid_gid_extent's field 4) */
        memcpy(bad, img, sizeof(img));
        bad[22] = 0x20;
        assert_int_equal(checkpoint_userns_base(bad, sizeof(img), &base), -EINVAL);
}

/* The ip images a dump drops: only a route table image that is `ip route save`'s magic
 * and nothing else; a route after it, another name, a short file or another magic stays. */
static void test_ip_image_empty(void **state)
{
        (void)state;
        const uint8_t magic[] = {0x24, 0x12, 0x31, 0x45};
        const uint8_t route[] = {0x24, 0x12, 0x31, 0x45, 0x34, 0x00, 0x00, 0x00};
        const uint8_t rule_magic[] = {0x86, 0x69, 0x70, 0x71};

        assert_true(checkpoint_ip_image_empty("route-10.img", magic, sizeof(magic)));
        assert_true(checkpoint_ip_image_empty("route6-10.img", magic, sizeof(magic)));
        assert_true(checkpoint_ip_image_empty("route-4026531840.img", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("route-10.img", route, sizeof(route)));
        assert_false(checkpoint_ip_image_empty("route-10.img", magic, 3));
        assert_false(checkpoint_ip_image_empty("route-10.img", magic, 0));
        assert_false(checkpoint_ip_image_empty("route-10.img", rule_magic, sizeof(rule_magic)));
        assert_false(checkpoint_ip_image_empty("rule-10.img", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("ifaddr-10.img", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("route-.img", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("route-10.img.x", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("route-1x.img", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("route-12345678901.img", magic, sizeof(magic)));
        assert_false(checkpoint_ip_image_empty("xroute-10.img", magic, sizeof(magic)));
}

/* One netlink message of an `ip ... save` image at p: its header (len, type, flags 2,
 * seq, pid), then body[0..n). Returns its aligned length. */
static size_t nlmsg(uint8_t *p, uint16_t type, uint32_t seq, uint32_t pid, const uint8_t *body,
                    size_t n)
{
        uint32_t len = (uint32_t)(16 + n);
        uint16_t flags = 2;
        memcpy(p, &len, 4);
        memcpy(p + 4, &type, 2);
        memcpy(p + 6, &flags, 2);
        memcpy(p + 8, &seq, 4);
        memcpy(p + 12, &pid, 4);
        memcpy(p + 16, body, n);
        return (len + 3) & ~3u;
}

/* Two ip images that differ only in when and by whom they were dumped are the same; any
 * other byte, a message more, a length past the end is not. */
static void test_ip_images_same(void **state)
{
        (void)state;
        /* RTM_NEWADDR 127.0.0.1/8 on lo: ifaddrmsg, IFA_ADDRESS, IFA_CACHEINFO */
        uint8_t addr[8 + 8 + 20] = {2, 8, 0x80, 0xfe, 1, 0, 0, 0, 8, 0, 1, 0, 127, 0,
                                    0, 1, 20,   0,    6, 0, 1, 2, 3, 4, 5, 6, 7,   8};
        /* RTM_NEWRULE: fib_rule_hdr, FRA_TABLE 255 */
        const uint8_t rule[12 + 8] = {2, 0, 0, 0, 255, 0, 0, 1, 0, 0, 0, 0, 8, 0, 15, 0, 255};
        uint8_t a[256], b[256];
        size_t na = 4, nb = 4;

        memcpy(a, "\x22\x12\x36\x47", 4);
        memcpy(b, a, 4);
        na += nlmsg(a + na, 20, 1000, 77, addr, sizeof(addr));
        na += nlmsg(a + na, 32, 1000, 77, rule, sizeof(rule));
        addr[20] = 9; /* the cache info's timestamps */
        nb += nlmsg(b + nb, 20, 2000, 99, addr, sizeof(addr));
        nb += nlmsg(b + nb, 32, 2000, 99, rule, sizeof(rule));
        assert_int_equal(na, nb);
        assert_true(checkpoint_ip_images_same(a, na, a, na));
        assert_true(checkpoint_ip_images_same(a, na, b, nb));
        assert_true(checkpoint_ip_images_same(b, nb, a, na));

        uint8_t c[256];
        memcpy(c, b, nb);
        c[4 + 16 + 8 + 7] = 2; /* 127.0.0.2 */
        assert_false(checkpoint_ip_images_same(a, na, c, nb));
        memcpy(c, b, nb);
        c[nb - 4] = 100; /* another table */
        assert_false(checkpoint_ip_images_same(a, na, c, nb));
        memcpy(c, b, nb);
        c[0] = 0x23; /* another magic */
        assert_false(checkpoint_ip_images_same(a, na, c, nb));
        memcpy(c, b, nb);
        c[4 + 6] = 0; /* other flags */
        assert_false(checkpoint_ip_images_same(a, na, c, nb));
        /* a message more, one less, a byte past the last */
        memcpy(c, b, nb);
        size_t nc = nb + nlmsg(c + nb, 32, 1, 1, rule, sizeof(rule));
        assert_false(checkpoint_ip_images_same(a, na, c, nc));
        assert_false(checkpoint_ip_images_same(a, na, b, nb - 36));
        assert_false(checkpoint_ip_images_same(a, na + 1, a, na + 1));
        /* a length past the end, shorter than a header, an attribute past its message */
        memcpy(c, a, na);
        c[4] = 200;
        assert_false(checkpoint_ip_images_same(c, na, c, na));
        c[4] = 8;
        assert_false(checkpoint_ip_images_same(c, na, c, na));
        memcpy(c, a, na);
        c[4 + 16 + 8] = 60;
        assert_false(checkpoint_ip_images_same(c, na, c, na));
        assert_false(checkpoint_ip_images_same(a, 3, a, 3));
        assert_true(checkpoint_ip_images_same(a, 4, b, 4));
}

/* The yard binds the hierarchies mounted at their CRIU names under the root, of the right
 * kind and controllers; leaves out the others; refuses lines it cannot name. */
static void test_yard_plan(void **state)
{
        (void)state;
        const char *cg = "9:name=systemd:/\n8:pids:/\n4:memory:/a/b\n2:cpu,cpuacct:/\n"
                         "3:cpuset:/\n5:devices:/\n0::/\n";
        const char *mi =
                "31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755\n"
                "32 31 0:29 / /sys/fs/cgroup/cpu,cpuacct rw,relatime - cgroup cgroup "
                "rw,cpu,cpuacct\n"
                "35 31 0:32 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory\n"
                "39 31 0:36 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
                "40 31 0:37 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup "
                "rw,xattr,name=systemd\n"
                "41 31 0:38 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
                /* a bind of a sub-directory, not the hierarchy's root */
                "42 31 0:39 /x /sys/fs/cgroup/cpuset rw - cgroup cgroup rw,cpuset\n"
                /* another hierarchy under the name */
                "43 31 0:40 / /sys/fs/cgroup/devices rw - cgroup cgroup rw,freezer\n";
        struct checkpoint_yard y;

        assert_int_equal(checkpoint_yard_plan(cg, strlen(cg), mi, strlen(mi), "/sys/fs/cgroup", &y),
                         0);
        assert_int_equal(y.n, 5);
        assert_string_equal(y.names[0], "systemd");
        assert_string_equal(y.names[1], "pids");
        assert_string_equal(y.names[2], "memory");
        assert_string_equal(y.names[3], "cpu,cpuacct");
        assert_string_equal(y.names[4], "unified");
        /* elsewhere: nothing bound */
        assert_int_equal(checkpoint_yard_plan(cg, strlen(cg), mi, strlen(mi), "/cgroup", &y), 0);
        assert_int_equal(y.n, 0);
        /* v2 mounted as v1, v1 as v2: left out */
        const char *swapped = "1 0 0:1 / /c/unified rw - cgroup cgroup rw,cpu\n"
                              "2 0 0:2 / /c/cpu rw - cgroup2 cgroup2 rw\n";
        const char *cg2 = "0::/\n1:cpu:/\n";
        assert_int_equal(checkpoint_yard_plan(cg2, strlen(cg2), swapped, strlen(swapped), "/c", &y),
                         0);
        assert_int_equal(y.n, 0);
        /* lines it cannot name */
        const char *bad[] = {"garbage\n", "1:cpu\n",    ":cpu:/\n", "1:cpu/x:/\n",
                             "1:..:/\n",  "1:cpu,:/\n", "1:a b:/\n"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                assert_int_equal(checkpoint_yard_plan(bad[i], strlen(bad[i]), mi, strlen(mi),
                                                      "/sys/fs/cgroup", &y),
                                 -EINVAL);
        char many[1024] = "";
        for (int i = 0; i <= CHECKPOINT_YARD_MAX; i++)
                snprintf(many + strlen(many), sizeof(many) - strlen(many), "%d:c%d:/\n", i + 1, i);
        assert_int_equal(
                checkpoint_yard_plan(many, strlen(many), mi, strlen(mi), "/sys/fs/cgroup", &y),
                -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_binary),         cmocka_unit_test(test_version),
                cmocka_unit_test(test_reason),         cmocka_unit_test(test_probe),
                cmocka_unit_test(test_version_reason), cmocka_unit_test(test_externals),
                cmocka_unit_test(test_log_reason),     cmocka_unit_test(test_userns_remap),
                cmocka_unit_test(test_ip_image_empty), cmocka_unit_test(test_ip_images_same),
                cmocka_unit_test(test_yard_plan),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
