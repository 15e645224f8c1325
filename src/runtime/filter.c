/* Seccomp deny list (see filter.h). */
#include "runtime/filter.h"

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <seccomp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/macros.h"

#define DENY(name)                            \
        {                                     \
                name, EPERM, FILTER_ALWAYS, 0 \
        }

static const struct filter_rule rules[] = {
        DENY("kexec_load"),
        DENY("kexec_file_load"),
        DENY("init_module"),
        DENY("finit_module"),
        DENY("delete_module"),
        DENY("bpf"),
        DENY("keyctl"),
        DENY("add_key"),
        DENY("request_key"),
        DENY("mount"),
        DENY("umount2"),
        DENY("pivot_root"),
        DENY("move_mount"),
        DENY("open_tree"),
        DENY("fsopen"),
        DENY("fsmount"),
        DENY("fsconfig"),
        DENY("fspick"),
        DENY("mount_setattr"),
        DENY("setns"),
        {"unshare", EPERM, FILTER_A0_HAS_FLAG, CLONE_NEWUSER},
        /* x86_64, arm64...: flags are clone's first argument. */
        {"clone", EPERM, FILTER_A0_HAS_FLAG, CLONE_NEWUSER},
        /* clone3's flags live in memory where seccomp cannot look: ENOSYS makes libc fall
         * back to clone, which is filtered above. */
        {"clone3", ENOSYS, FILTER_ALWAYS, 0},
        DENY("swapon"),
        DENY("swapoff"),
        DENY("reboot"),
        DENY("acct"),
        DENY("quotactl"),
        DENY("quotactl_fd"),
        DENY("perf_event_open"),
        DENY("userfaultfd"),
        DENY("open_by_handle_at"),
        DENY("syslog"),
        DENY("lookup_dcookie"),
        DENY("iopl"),
        DENY("ioperm"),
        DENY("vhangup"),
        DENY("uselib"),
        {"personality", EPERM, FILTER_PERSONALITY, 0},
        DENY("settimeofday"),
        DENY("clock_settime"),
        DENY("clock_adjtime"),
        DENY("adjtimex"),
        DENY("io_uring_setup"),
        DENY("io_uring_enter"),
        DENY("io_uring_register"),
        DENY("nfsservctl"),
};

const struct filter_rule *filter_rules(size_t *ret_n)
{
        *ret_n = ARRAY_SIZE(rules);
        return rules;
}

static void ctx_releasep(scmp_filter_ctx *c)
{
        if (*c)
                seccomp_release(*c);
}

static int add_rule(scmp_filter_ctx ctx, const struct filter_rule *r, int nr)
{
        uint32_t act = SCMP_ACT_ERRNO((uint32_t)r->err);
        switch (r->match) {
        case FILTER_ALWAYS:
                return seccomp_rule_add(ctx, act, nr, 0);
        case FILTER_A0_HAS_FLAG:
                return seccomp_rule_add(ctx, act, nr, 1,
                                        SCMP_A0(SCMP_CMP_MASKED_EQ, r->flag, r->flag));
        case FILTER_PERSONALITY:
                /* The kernel reads a 32-bit value. It is neither 0 nor 0xffffffff exactly
                 * when, going round its bits, some set bit i is followed by a clear bit
                 * i+1 (mod 32): one masked comparison per i (libseccomp allows a single
                 * comparison per argument in a rule). */
                for (unsigned i = 0; i < 32; i++) {
                        uint64_t bi = 1ull << i, bj = 1ull << ((i + 1) % 32);
                        int e = seccomp_rule_add(ctx, act, nr, 1,
                                                 SCMP_A0(SCMP_CMP_MASKED_EQ, bi | bj, bi));
                        if (e < 0)
                                return e;
                }
                return 0;
        }
        return -EINVAL;
}

int filter_build(struct filter_prog *ret, size_t *ret_skipped)
{
        _cleanup_(ctx_releasep) scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        size_t skipped = 0;
        int r;

        if (!ctx)
                return -ENOMEM;
        r = seccomp_attr_set(ctx, SCMP_FLTATR_ACT_BADARCH, SCMP_ACT_KILL_PROCESS);
        if (r < 0)
                return r;
        /* The child sets no_new_privs itself, before seccomp(2). */
        r = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_NNP, 0);
        if (r < 0)
                return r;
        for (size_t i = 0; i < ARRAY_SIZE(rules); i++) {
                int nr = seccomp_syscall_resolve_name(rules[i].syscall);
                if (nr == __NR_SCMP_ERROR || nr < 0) {
                        skipped++;
                        continue;
                }
                r = add_rule(ctx, &rules[i], nr);
                if (r < 0)
                        return r;
        }

        _cleanup_close_ int fd = memfd_create("cella-seccomp", MFD_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = seccomp_export_bpf(ctx, fd);
        if (r < 0)
                return r;
        struct stat st;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (st.st_size <= 0 || st.st_size % sizeof(struct sock_filter) != 0 ||
            st.st_size / sizeof(struct sock_filter) > BPF_MAXINSNS)
                return -EINVAL;
        _cleanup_free_ struct sock_filter *insns = malloc((size_t)st.st_size);
        if (!insns)
                return -ENOMEM;
        ssize_t n = pread(fd, insns, (size_t)st.st_size, 0);
        if (n != st.st_size)
                return n < 0 ? -errno : -EIO;
        ret->insns = TAKE_PTR(insns);
        ret->len = (unsigned short)(st.st_size / sizeof(struct sock_filter));
        if (ret_skipped)
                *ret_skipped = skipped;
        return 0;
}

void filter_prog_done(struct filter_prog *p)
{
        free(p->insns);
        p->insns = NULL;
        p->len = 0;
}
