/* Timing probes (probe.h): the per-thread record, in probe builds only. */
#include "common/probe.h"

#ifdef CELLA_PROBES
__thread struct probe probe_tls;
#else
/* ISO C wants a translation unit to declare something. */
typedef int probe_unused;
#endif
