/* The terminal's replay ring (src/agent/pty-ring.h): order kept across wraps, oldest bytes
 * dropped, writes larger than the ring. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "agent/pty-ring.h"

/* The ring's contents in one buffer. */
static size_t flat(const struct pty_ring *r, uint8_t *out)
{
        const uint8_t *a, *b;
        size_t alen, blen;

        pty_ring_spans(r, &a, &alen, &b, &blen);
        memcpy(out, a, alen);
        memcpy(out + alen, b, blen);
        return alen + blen;
}

static void test_ring(void **state)
{
        struct pty_ring *r = calloc(1, sizeof(*r));
        uint8_t *model = malloc(4 * CELLA_PTY_RING), *got = malloc(CELLA_PTY_RING);
        size_t mlen = 0, n;
        uint32_t seed = 1;

        (void)state;
        assert_non_null(r);
        assert_int_equal(flat(r, got), 0);
        pty_ring_append(r, (const uint8_t *)"hello", 5);
        assert_int_equal(flat(r, got), 5);
        assert_memory_equal(got, "hello", 5);
        memcpy(model, "hello", 5);
        mlen = 5;
        /* random pieces (some larger than the ring) against a model: the last bytes */
        for (int i = 0; i < 2000; i++) {
                uint8_t piece[CELLA_PTY_RING + 100];
                size_t len;

                seed = seed * 1103515245u + 12345u;
                len = (seed >> 8) % (i % 50 == 0 ? sizeof(piece) : 3000);
                for (size_t k = 0; k < len; k++)
                        piece[k] = (uint8_t)(i * 31 + k);
                pty_ring_append(r, piece, len);
                if (mlen + len > 4 * CELLA_PTY_RING) {
                        memmove(model, model + mlen - CELLA_PTY_RING, CELLA_PTY_RING);
                        mlen = CELLA_PTY_RING;
                }
                memcpy(model + mlen, piece, len);
                mlen += len;
                n = flat(r, got);
                assert_int_equal(n, mlen < CELLA_PTY_RING ? mlen : CELLA_PTY_RING);
                assert_memory_equal(got, model + mlen - n, n);
                assert_true(r->start < CELLA_PTY_RING);
        }
        free(model);
        free(got);
        free(r);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_ring),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
