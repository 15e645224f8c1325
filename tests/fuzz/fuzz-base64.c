/* Fuzz base64 (src/common/base64.h) both ways.
 *
 * Invariants: any bytes encode to canonical base64 of the expected length that decodes
 * back to the same bytes; any text that decodes, decodes to at most 3/4 of its length, and
 * its decoding survives another encode/decode round trip unchanged; decoding appends to
 * a buffer without touching what it already holds. */
#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct buf enc = BUF_INIT, dec = BUF_INIT, enc2 = BUF_INIT, dec2 = BUF_INIT;
        int r;

        /* bytes -> text -> bytes */
        FUZZ_CHECK(base64_encode(&enc, data, size) == 0);
        FUZZ_CHECK(enc.len == (size + 2) / 3 * 4);
        FUZZ_CHECK(size == 0 || strlen(enc.data) == enc.len);
        FUZZ_CHECK(base64_decode(&dec, enc.data, enc.len) == 0);
        FUZZ_CHECK(dec.len == size && (size == 0 || memcmp(dec.data, data, size) == 0));

        /* text -> bytes, appended after a prefix that must survive */
        buf_reset(&dec);
        FUZZ_CHECK(buf_append(&dec, "prefix", 6) == 0);
        r = base64_decode(&dec, (const char *)data, size);
        FUZZ_CHECK(r == 0 || r == -EINVAL);
        FUZZ_CHECK(dec.len >= 6 && memcmp(dec.data, "prefix", 6) == 0);
        if (r == 0) {
                size_t n = dec.len - 6;
                FUZZ_CHECK(size % 4 == 0);
                FUZZ_CHECK(n <= size / 4 * 3);
                FUZZ_CHECK(base64_encode(&enc2, dec.data + 6, n) == 0);
                FUZZ_CHECK(enc2.len == size);
                FUZZ_CHECK(base64_decode(&dec2, enc2.data, enc2.len) == 0);
                FUZZ_CHECK(dec2.len == n && (n == 0 || memcmp(dec2.data, dec.data + 6, n) == 0));
        }

        buf_free(&enc);
        buf_free(&dec);
        buf_free(&enc2);
        buf_free(&dec2);
        return 0;
}
