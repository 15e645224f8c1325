#include <string.h>

#include "common/macros.h"
#include "daemon/instance-type.h"

#define MiB (1024ull * 1024)
#define GiB (1024ull * MiB)
#define GB (1000ull * 1000 * 1000)

static const struct instance_type types[] = {
        {"lite", 62, 256 * MiB, 2 * GB},        {"basic", 250, 1 * GiB, 4 * GB},
        {"standard-1", 500, 4 * GiB, 8 * GB},   {"standard-2", 1000, 6 * GiB, 12 * GB},
        {"standard-3", 2000, 8 * GiB, 16 * GB}, {"standard-4", 4000, 12 * GiB, 20 * GB},
};

const struct instance_type *instance_type_find(const char *name)
{
        if (!name)
                return NULL;
        for (size_t i = 0; i < ARRAY_SIZE(types); i++)
                if (strcmp(types[i].name, name) == 0)
                        return &types[i];
        return NULL;
}

const char *instance_type_names(void)
{
        return "lite, basic, standard-1, standard-2, standard-3, standard-4";
}
