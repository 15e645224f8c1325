/* Fuzz the readers of a memory checkpoint's files (src/runtime/checkpoint.h, decision
 * 0050): the input is a CHECKPOINT_EXTERNALS file (what cellad named external at the dump,
 * read back before a restore), a CRIU log (the reason of a failed dump or restore) or a
 * userns image (a memory fork's child gets its own uids written into it).
 *
 * Invariants: checkpoint_externals_parse returns 0 or -EINVAL, and what it accepts has a
 * log key of hex digits and one ':', mount points of the allowed kinds (the agent's
 * executable, the cgroup, under /dev/ or /proc/) and relative cgroup paths, none holding
 * ".." or a character outside [A-Za-z0-9_./-]; checkpoint_log_reason ends its text within
 * the buffer, returns its length, writes no control byte and gives the same text for the
 * same input whatever the buffer held; checkpoint_userns_remap returns 0, -EINVAL or
 * -ENOSPC, and what it writes is an image it reads again, whose base is the new one, and
 * which maps back to the same bytes; checkpoint_ip_image_empty is true only for a
 * route-<n>.img or route6-<n>.img holding `ip route save`'s 4-byte magic alone;
 * checkpoint_ip_images_same is symmetric and blind to the headers' sequence numbers and
 * port ids; checkpoint_yard_plan answers 0 or -EINVAL with at most CHECKPOINT_YARD_MAX
 * names of [A-Za-z0-9_.,=-], none "." or "..". */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/checkpoint.h"
#include "common/limits.h"
#include "runtime/criu.h"

static void check_chars(const char *p)
{
        for (; *p; p++)
                FUZZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                           (*p >= '0' && *p <= '9') || strchr("_./-", *p));
}

static void check_chars_yard(const char *p)
{
        for (; *p; p++)
                FUZZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                           (*p >= '0' && *p <= '9') || strchr("_.,=-", *p));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        struct checkpoint_externals *x = malloc(sizeof(*x));
        char a[CRIU_REASON_MAX], b[CRIU_REASON_MAX], small[8];

        if (!x)
                return 0;
        int r = checkpoint_externals_parse(s, size, x);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        if (r == 0) {
                size_t colons = 0;
                FUZZ_CHECK(x->log[0] != '\0');
                for (const char *p = x->log; *p; p++) {
                        FUZZ_CHECK((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f') ||
                                   *p == ':');
                        colons += *p == ':';
                }
                FUZZ_CHECK(colons == 1);
                FUZZ_CHECK(x->n <= CELLA_CRIU_EXTERNALS_MAX);
                for (size_t i = 0; i < x->n; i++) {
                        const char *m = x->mounts[i];
                        check_chars(m);
                        FUZZ_CHECK(!strstr(m, ".."));
                        FUZZ_CHECK(strcmp(m, "/run/.cella/cella-init") == 0 ||
                                   strcmp(m, "/sys/fs/cgroup") == 0 ||
                                   strncmp(m, "/dev/", 5) == 0 || strncmp(m, "/proc/", 6) == 0);
                }
                FUZZ_CHECK(x->n_cgroups <= CELLA_CRIU_CGROUPS_MAX);
                for (size_t i = 0; i < x->n_cgroups; i++) {
                        const char *c = x->cgroups[i];
                        check_chars(c);
                        FUZZ_CHECK(c[0] != '/' && c[0] != '\0' && !strstr(c, "..") &&
                                   !strstr(c, "//"));
                }
        }
        free(x);
        memset(a, 'x', sizeof(a));
        memset(b, 'y', sizeof(b));
        size_t na = checkpoint_log_reason(s, size, a, sizeof(a));
        size_t nb = checkpoint_log_reason(s, size, b, sizeof(b));
        FUZZ_CHECK(na < sizeof(a) && a[na] == '\0' && strlen(a) == na);
        FUZZ_CHECK(na == nb && memcmp(a, b, na) == 0);
        for (size_t i = 0; i < na; i++)
                FUZZ_CHECK((unsigned char)a[i] >= 0x20 && a[i] != 0x7f);
        size_t ns = checkpoint_log_reason(s, size, small, sizeof(small));
        FUZZ_CHECK(ns < sizeof(small) && small[ns] == '\0');

        uint8_t out[CELLA_CRIU_USERNS_MAX], back[CELLA_CRIU_USERNS_MAX],
                again[CELLA_CRIU_USERNS_MAX];
        uint32_t from = 0, base = 0;
        size_t len = 0, blen = 0, alen = 0;
        if (checkpoint_userns_base(data, size, &from) == 0) {
                const uint32_t to = 0x30010000u, count = 65536;
                r = checkpoint_userns_remap(data, size, from, to, count, out, sizeof(out), &len);
                FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOSPC);
                if (r == 0) {
                        FUZZ_CHECK(len >= 12 && len <= sizeof(out));
                        FUZZ_CHECK(checkpoint_userns_base(out, len, &base) == 0 && base == to);
                        FUZZ_CHECK(checkpoint_userns_remap(out, len, to, from, count, back,
                                                           sizeof(back), &blen) == 0);
                        FUZZ_CHECK(checkpoint_userns_remap(back, blen, from, to, count, again,
                                                           sizeof(again), &alen) == 0);
                        FUZZ_CHECK(alen == len && memcmp(again, out, len) == 0);
                }
        }
        /* an ip image is dropped only when it is the route dump's magic alone */
        {
                static const uint8_t magic[] = {0x24, 0x12, 0x31, 0x45};
                bool same = size == sizeof(magic) && memcmp(data, magic, sizeof(magic)) == 0;
                FUZZ_CHECK(checkpoint_ip_image_empty("route-10.img", data, size) == same);
                FUZZ_CHECK(checkpoint_ip_image_empty("route6-1.img", data, size) == same);
                FUZZ_CHECK(!checkpoint_ip_image_empty("rule-10.img", data, size));
                /* the input as a file name: only route-<digits>.img or route6-... */
                char name[64];
                size_t k = size < sizeof(name) - 1 ? size : sizeof(name) - 1;
                memcpy(name, data, k);
                name[k] = '\0';
                if (checkpoint_ip_image_empty(name, magic, sizeof(magic))) {
                        size_t n = strlen(name);
                        FUZZ_CHECK(strncmp(name, "route", 5) == 0 && n > 10 &&
                                   strcmp(name + n - 4, ".img") == 0 && !strchr(name, '/'));
                }
        }
        /* two ip images (the input's halves): the answer is symmetric, only for images of
         * one length, and an image said the same as another is the same as itself and
         * stays so whatever its first header's sequence number and port id */
        {
                size_t h = size / 2;
                bool same = checkpoint_ip_images_same(data, h, data + h, size - h);
                FUZZ_CHECK(same == checkpoint_ip_images_same(data + h, size - h, data, h));
                if (same) {
                        uint8_t *c = malloc(h);
                        FUZZ_CHECK(h == size - h);
                        FUZZ_CHECK(checkpoint_ip_images_same(data, h, data, h));
                        if (c && h >= 20) {
                                memcpy(c, data, h);
                                memset(c + 12, 0xa5, 8);
                                FUZZ_CHECK(checkpoint_ip_images_same(c, h, data + h, h));
                        }
                        free(c);
                }
        }
        /* the input as /proc/self/cgroup and as mountinfo: a clear answer, at most
         * CHECKPOINT_YARD_MAX names, each a name CRIU's yard may hold (no '/', not "..") */
        {
                struct checkpoint_yard *y = malloc(sizeof(*y));
                if (y) {
                        r = checkpoint_yard_plan(s, size, s, size, "/sys/fs/cgroup", y);
                        FUZZ_CHECK(r == 0 || r == -EINVAL);
                        if (r == 0) {
                                FUZZ_CHECK(y->n <= CHECKPOINT_YARD_MAX);
                                for (size_t i = 0; i < y->n; i++) {
                                        check_chars_yard(y->names[i]);
                                        FUZZ_CHECK(y->names[i][0] != '\0' &&
                                                   strcmp(y->names[i], "..") != 0 &&
                                                   strcmp(y->names[i], ".") != 0);
                                }
                        }
                        free(y);
                }
        }
        /* any bytes: never more than outsz written, a clear answer */
        r = checkpoint_userns_remap(data, size, 0x10000000u, 0x20000000u, 65536, out, 16, &len);
        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOSPC);
        FUZZ_CHECK(r == 0 ? len <= 16 : len == 0);
        return 0;
}
