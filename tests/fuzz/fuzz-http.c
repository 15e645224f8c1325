/* Fuzz cellad's HTTP request parsing: http_parse_fuzz() runs the bytes through the same
 * parser and limit checks (431/414/413, header counts, chunked bodies, pipelining) as a
 * connection, without a socket. Crashes, leaks and sanitizer reports are the findings;
 * the count of parsed requests must be sane. */
#include "daemon/http.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        int n = http_parse_fuzz(data, size);

        /* Every request, even one answered with an error, takes at least one byte. */
        FUZZ_CHECK(n >= 0);
        FUZZ_CHECK((size_t)n <= size);
        return 0;
}
