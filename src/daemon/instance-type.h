/* Instance types: the hosted product's table of CPU, memory and disk per sandbox. */
#ifndef CELLA_DAEMON_INSTANCE_TYPE_H
#define CELLA_DAEMON_INSTANCE_TYPE_H

#include <stdint.h>

struct instance_type {
        const char *name;
        uint32_t cpu_millis; /* 1000 = one CPU */
        uint64_t memory_bytes;
        uint64_t disk_bytes; /* enforced once disk quotas land (see docs/decisions) */
};

#define INSTANCE_TYPE_DEFAULT "standard-1"

/* NULL if name is not a known type. */
const struct instance_type *instance_type_find(const char *name);
/* Comma-separated list of the known names, for error messages. */
const char *instance_type_names(void);

#endif
