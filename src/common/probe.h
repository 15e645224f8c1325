/* Timing probes: the time of each step of one operation on one thread, logged at its end
 * (decision 0059 profiles the start with them). Compiled in only with -DCELLA_PROBES=ON;
 * in any other build every macro is empty and nothing is measured or stored. */
#ifndef CELLA_PROBE_H
#define CELLA_PROBE_H

#ifdef CELLA_PROBES
#include <stdint.h>
#include <stdio.h>

#include "common/log.h"
#include "common/timeutil.h"

#define PROBE_MAX 32

struct probe {
        unsigned n;
        uint64_t t0;
        const char *what[PROBE_MAX];
        uint64_t t[PROBE_MAX];
};

extern __thread struct probe probe_tls;

/* Start measuring on this thread (what was measured before is dropped). */
static inline void probe_begin(void)
{
        probe_tls.n = 0;
        probe_tls.t0 = time_mono_us();
}

/* The step that ends now is what. */
static inline void probe_mark(const char *what)
{
        if (probe_tls.t0 && probe_tls.n < PROBE_MAX) {
                probe_tls.what[probe_tls.n] = what;
                probe_tls.t[probe_tls.n++] = time_mono_us();
        }
}

/* Log each step's time (µs) and the total, as "probe WHO: step=N ... total=N". */
static inline void probe_end(const char *who)
{
        char line[1024];
        size_t len = 0;
        uint64_t prev = probe_tls.t0;

        if (!probe_tls.t0)
                return;
        for (unsigned i = 0; i < probe_tls.n && len < sizeof(line); i++) {
                int k = snprintf(line + len, sizeof(line) - len, " %s=%llu", probe_tls.what[i],
                                 (unsigned long long)(probe_tls.t[i] - prev));
                if (k < 0)
                        break;
                len += (size_t)k;
                prev = probe_tls.t[i];
        }
        log_info("probe %s:%s total=%llu", who, len ? line : "",
                 (unsigned long long)(prev - probe_tls.t0));
        probe_tls.t0 = 0;
}
#define PROBE_BEGIN() probe_begin()
#define PROBE(what) probe_mark(what)
#define PROBE_END(who) probe_end(who)
#else
#define PROBE_BEGIN() ((void)0)
#define PROBE(what) ((void)0)
#define PROBE_END(who) ((void)0)
#endif

#endif
