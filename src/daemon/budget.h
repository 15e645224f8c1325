/* A daemon-wide budget of memory held on behalf of clients: buffered exec output and JSON
 * request bodies being read (docs/decisions/0029-http-limits.md). Every holder takes bytes
 * before it keeps them and gives the same count back when it lets them go; a take that
 * would pass the limit is refused, and the holder then answers 503 SERVER_BUSY (a body) or
 * drops what does not fit (exec output, answered with "truncated":true). One loop thread:
 * no locking. */
#ifndef CELLA_DAEMON_BUDGET_H
#define CELLA_DAEMON_BUDGET_H

#include <stdbool.h>
#include <stddef.h>

struct mem_budget {
        size_t limit; /* bytes; 0: no limit */
        size_t used;
        size_t peak;           /* the most used at once (logs, tests) */
        unsigned long refused; /* takes refused */
        size_t released;       /* given back since heap pages were last returned */
};

/* Take n bytes: true when they fit under the limit (counted), false otherwise (nothing
 * counted). A NULL budget always fits. */
bool mem_budget_take(struct mem_budget *b, size_t n);
/* Count n bytes whether or not they fit: for the small reserve every request may hold
 * whatever the others use (so that an echo is never starved by bulk output). */
void mem_budget_force(struct mem_budget *b, size_t n);
/* Give back n bytes that were taken or forced. */
void mem_budget_give(struct mem_budget *b, size_t n);

#endif
