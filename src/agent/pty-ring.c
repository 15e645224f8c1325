#include <string.h>

#include "agent/pty-ring.h"
#include "common/macros.h"

void pty_ring_append(struct pty_ring *r, const uint8_t *p, size_t n)
{
        size_t end, first;

        if (n >= CELLA_PTY_RING) {
                memcpy(r->data, p + n - CELLA_PTY_RING, CELLA_PTY_RING);
                r->start = 0;
                r->len = CELLA_PTY_RING;
                return;
        }
        /* copy at the end (wrapping), then drop the oldest bytes beyond the size */
        end = (r->start + r->len) % CELLA_PTY_RING;
        first = MIN(n, CELLA_PTY_RING - end);
        memcpy(r->data + end, p, first);
        memcpy(r->data, p + first, n - first);
        r->len += n;
        if (r->len > CELLA_PTY_RING) {
                r->start = (r->start + r->len - CELLA_PTY_RING) % CELLA_PTY_RING;
                r->len = CELLA_PTY_RING;
        }
}

void pty_ring_spans(const struct pty_ring *r, const uint8_t **a, size_t *alen, const uint8_t **b,
                    size_t *blen)
{
        size_t first = MIN(r->len, CELLA_PTY_RING - r->start);

        *a = r->data + r->start;
        *alen = first;
        *b = r->data;
        *blen = r->len - first;
}
