/* The sandbox's seccomp filter: a deny list (EPERM) over a default-allow policy, other
 * architectures killed. Built once with libseccomp when the daemon starts and exported as
 * a BPF program, which each container's child installs with seccomp(2) without
 * allocating. */
#ifndef CELLA_RUNTIME_FILTER_H
#define CELLA_RUNTIME_FILTER_H

#include <linux/filter.h>
#include <stddef.h>

enum filter_match {
        FILTER_ALWAYS,      /* every call */
        FILTER_A0_HAS_FLAG, /* when (arg0 & flag) == flag */
        FILTER_PERSONALITY, /* personality() other than 0 and the 0xffffffff query */
};

struct filter_rule {
        const char *syscall;
        int err; /* errno returned */
        enum filter_match match;
        unsigned long flag;
};

/* The rule table (static data). */
const struct filter_rule *filter_rules(size_t *ret_n);

struct filter_prog {
        struct sock_filter *insns; /* owned */
        unsigned short len;
};

/* Build the filter for the native architecture. Syscalls unknown to this libseccomp or
 * architecture are skipped (*ret_skipped counts them). Returns 0 or -errno. */
int filter_build(struct filter_prog *ret, size_t *ret_skipped);
void filter_prog_done(struct filter_prog *p);

#endif
