/* Fuzz the incremental frame reader (common/proto.h: frame_reader_*) as both ends of the
 * agent socket use it: the first input byte picks a read size (1..64), the rest is the byte
 * stream, fed in reads of that size with frame_reader_compact after each, as libuv delivers
 * it.
 *
 * Invariants: the reader yields exactly the frames frame_decode finds walking the whole
 * stream at once (same type, stream, length and payload bytes, in order), stops with
 * -EPROTO exactly where that walk meets a malformed header, never asks for room it does not
 * give, and every yielded frame re-encodes (frame_encode) to the bytes it came from. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/proto.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct frame_reader r = FRAME_READER_INIT;
        size_t chunk, walk = 0, pos = 0;
        int ref = 0, got = 0;

        if (size < 1)
                return 0;
        chunk = (size_t)(data[0] % 64) + 1;
        data++;
        size--;

        while (pos < size && got >= 0) {
                size_t n = MIN(chunk, size - pos);
                struct frame f;
                char *p;
                int room = frame_reader_space(&r, n, &p);

                FUZZ_CHECK(room >= (int)n);
                memcpy(p, data + pos, n);
                frame_reader_commit(&r, n);
                pos += n;
                while ((got = frame_reader_next(&r, &f)) == 1) {
                        struct frame g;
                        uint8_t *enc;

                        /* the same frame the one-shot walk finds next */
                        ref = frame_decode(data + walk, size - walk, &g);
                        FUZZ_CHECK(ref > 0);
                        FUZZ_CHECK(g.type == f.type && g.stream == f.stream && g.len == f.len);
                        FUZZ_CHECK(f.len == 0 || memcmp(g.payload, f.payload, f.len) == 0);
                        walk += (size_t)ref;
                        FUZZ_CHECK(walk <= pos);

                        enc = malloc(frame_size(f.len));
                        FUZZ_CHECK(enc != NULL);
                        FUZZ_CHECK(frame_encode(enc, f.type, f.stream, f.payload, f.len) == ref);
                        FUZZ_CHECK(memcmp(enc, data + walk - (size_t)ref, (size_t)ref) == 0);
                        free(enc);
                }
                FUZZ_CHECK(got == 0 || got == -EPROTO);
                if (got == 0)
                        frame_reader_compact(&r);
        }
        /* where the reader stopped, the one-shot walk stops the same way */
        ref = walk < size ? frame_decode(data + walk, size - walk, &(struct frame){0}) : 0;
        FUZZ_CHECK(got == -EPROTO ? ref == -EPROTO : ref == 0);
        frame_reader_free(&r);
        return 0;
}
