/* The daemon-wide memory budget (see budget.h). */
#include <malloc.h>

#include "common/log.h"
#include "daemon/budget.h"

#define BUDGET_TRIM_AFTER (16 * 1024 * 1024)

bool mem_budget_take(struct mem_budget *b, size_t n)
{
        if (!b)
                return true;
        if (b->limit && (b->used > b->limit || n > b->limit - b->used)) {
                b->refused++;
                return false;
        }
        mem_budget_force(b, n);
        return true;
}

void mem_budget_force(struct mem_budget *b, size_t n)
{
        if (!b)
                return;
        b->used += n;
        if (b->used > b->peak)
                b->peak = b->used;
}

void mem_budget_give(struct mem_budget *b, size_t n)
{
        if (!b)
                return;
        if (n > b->used) {
                log_warn("memory budget: %zu bytes given back, %zu held", n, b->used);
                n = b->used;
        }
        b->used -= n;
        b->released += n;
        /* After a burst (many MiB held, now let go) freed heap pages go back to the
         * kernel, so that the burst does not stay in the daemon's RSS. */
        if (b->released >= BUDGET_TRIM_AFTER && b->used < b->released / 4) {
                b->released = 0;
                malloc_trim(0);
        }
}
