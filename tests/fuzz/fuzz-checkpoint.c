/* Fuzz the readers of a memory checkpoint's files (src/runtime/checkpoint.h, decision
 * 0050): the input is a CHECKPOINT_EXTERNALS file (what cellad named external at the dump,
 * read back before a restore) or a CRIU log (the reason of a failed dump or restore).
 *
 * Invariants: checkpoint_externals_parse returns 0 or -EINVAL, and what it accepts has a
 * log key of hex digits and one ':', mount points of the allowed kinds (the agent's
 * executable, the cgroup, under /dev/ or /proc/) and relative cgroup paths, none holding
 * ".." or a character outside [A-Za-z0-9_./-]; checkpoint_log_reason ends its text within
 * the buffer, returns its length, writes no control byte and gives the same text for the
 * same input whatever the buffer held. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz.h"
#include "runtime/checkpoint.h"
#include "runtime/criu.h"

static void check_chars(const char *p)
{
        for (; *p; p++)
                FUZZ_CHECK((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                           (*p >= '0' && *p <= '9') || strchr("_./-", *p));
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
        return 0;
}
