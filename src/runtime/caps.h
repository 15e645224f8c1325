/* Capabilities of a sandbox's PID 1: the usual container default set. Computed once in
 * the parent with libcap; applied in the child between clone and exec without allocating
 * (cap_drop_bound, cap_set_proc on the precomputed cap_t, ambient reset). */
#ifndef CELLA_RUNTIME_CAPS_H
#define CELLA_RUNTIME_CAPS_H

#include <stdint.h>
#include <sys/capability.h>

struct caps {
        cap_t set;         /* effective = permitted = inheritable = the default set */
        uint64_t keep;     /* bit per capability kept in the bounding set */
        unsigned last_cap; /* highest capability the kernel knows */
};

/* The default set as a bit mask (pure; for tests). */
uint64_t caps_default_mask(void);
int caps_init(struct caps *c);
void caps_done(struct caps *c);
/* In the child: drop the bounding set to the kept caps, set the process caps, clear the
 * ambient set. Async-signal-safe. Returns 0 or -errno. */
int caps_apply(const struct caps *c);

#endif
