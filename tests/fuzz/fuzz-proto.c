/* Fuzz the agent wire protocol's frame decoder over a byte stream, as cellad and the agent
 * see it: decode frames back to back until the input runs out or a header is malformed.
 *
 * Invariants: a decoded frame lies wholly inside the input, respects CELLA_FRAME_MAX, has a
 * known type and zero flags, and re-encodes with frame_append to exactly the bytes it was
 * decoded from. A WINDOW frame's credit unpacks iff its payload is 4 bytes. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/proto.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        size_t off = 0;

        while (off < size) {
                struct frame f;
                int n = frame_decode(data + off, size - off, &f);

                if (n == 0 || n == -EPROTO)
                        break;
                FUZZ_CHECK(n > 0);
                FUZZ_CHECK((size_t)n <= size - off);
                FUZZ_CHECK((size_t)n == CELLA_FRAME_HEADER + f.len);
                FUZZ_CHECK(f.len <= CELLA_FRAME_MAX);
                FUZZ_CHECK(f.type > 0 && f.type < _FRAME_TYPE_MAX);
                FUZZ_CHECK(f.flags == 0);
                FUZZ_CHECK(frame_type_name(f.type) != NULL);
                FUZZ_CHECK(f.len == 0 || f.payload == data + off + CELLA_FRAME_HEADER);

                if (f.type == FRAME_WINDOW) {
                        uint32_t credit = 0;
                        int r = frame_window_unpack(&f, &credit);
                        FUZZ_CHECK((r == 0) == (f.len == 4));
                        if (r == 0) {
                                uint8_t packed[4];
                                frame_window_pack(packed, credit);
                                FUZZ_CHECK(memcmp(packed, f.payload, 4) == 0);
                        }
                }

                struct buf b = BUF_INIT;
                FUZZ_CHECK(frame_append(&b, f.type, f.stream, f.payload, f.len) == 0);
                FUZZ_CHECK(b.len == (size_t)n);
                FUZZ_CHECK(memcmp(b.data, data + off, (size_t)n) == 0);
                buf_free(&b);

                off += (size_t)n;
        }
        return 0;
}
