/* The terminal's replay ring (pty.c): the last CELLA_PTY_RING bytes of output, oldest
 * dropped first. Pure, unit-tested (tests/unit/test-agent-pty-ring.c).
 * Invariant: len <= CELLA_PTY_RING, start < CELLA_PTY_RING; the contents are
 * data[start..] followed by the wrapped part from data[0]. */
#ifndef CELLA_AGENT_PTY_RING_H
#define CELLA_AGENT_PTY_RING_H

#include <stddef.h>
#include <stdint.h>

#include "common/limits.h"

struct pty_ring {
        uint8_t data[CELLA_PTY_RING];
        size_t start, len;
};

void pty_ring_append(struct pty_ring *r, const uint8_t *p, size_t n);
/* The contents, oldest first, as two spans (the second may be empty). */
void pty_ring_spans(const struct pty_ring *r, const uint8_t **a, size_t *alen, const uint8_t **b,
                    size_t *blen);

#endif
