/* Capabilities (see caps.h). */
#include "runtime/caps.h"

#include <errno.h>
#include <sys/prctl.h>

#include "common/macros.h"

static const cap_value_t default_caps[] = {
        CAP_CHOWN,   CAP_DAC_OVERRIDE, CAP_FSETID,           CAP_FOWNER,
        CAP_MKNOD,   CAP_NET_RAW,      CAP_SETGID,           CAP_SETUID,
        CAP_SETFCAP, CAP_SETPCAP,      CAP_NET_BIND_SERVICE, CAP_SYS_CHROOT,
        CAP_KILL,    CAP_AUDIT_WRITE,
};

uint64_t caps_default_mask(void)
{
        uint64_t m = 0;
        for (size_t i = 0; i < ARRAY_SIZE(default_caps); i++)
                m |= 1ull << default_caps[i];
        return m;
}

int caps_init(struct caps *c)
{
        c->keep = caps_default_mask();
        c->last_cap = (unsigned)cap_max_bits() - 1;
        if (c->last_cap > 63)
                c->last_cap = 63;
        c->set = cap_init();
        if (!c->set)
                return -errno;
        int n = (int)ARRAY_SIZE(default_caps);
        if (cap_set_flag(c->set, CAP_EFFECTIVE, n, default_caps, CAP_SET) < 0 ||
            cap_set_flag(c->set, CAP_PERMITTED, n, default_caps, CAP_SET) < 0 ||
            cap_set_flag(c->set, CAP_INHERITABLE, n, default_caps, CAP_SET) < 0) {
                int e = -errno;
                cap_free(c->set);
                c->set = NULL;
                return e;
        }
        return 0;
}

void caps_done(struct caps *c)
{
        if (c->set)
                cap_free(c->set);
        c->set = NULL;
}

int caps_apply(const struct caps *c)
{
        /* Dropping from the bounding set needs CAP_SETPCAP, which we still hold. */
        for (unsigned i = 0; i <= c->last_cap; i++) {
                if (c->keep & (1ull << i))
                        continue;
                if (cap_drop_bound((cap_value_t)i) < 0 && errno != EINVAL)
                        return -errno;
        }
        if (cap_set_proc(c->set) < 0)
                return -errno;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        return 0;
}
