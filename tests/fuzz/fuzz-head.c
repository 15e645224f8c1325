/* Fuzz libcella's reading of an answer's head (src/client/head.h, on http-parser), used by
 * the spliced download. Invariants: a whole head ends inside the input, on a LF; its status
 * is 100 to 999; every prefix that stops before its end asks for more (0) or is refused
 * as a prefix of a bad head is (never 1); the head alone parses as the head with bytes
 * after it; a parse never reads past len (the input is copied to a buffer of exactly its
 * size for ASan). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/head.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *buf = malloc(size ? size : 1);
        struct client_head h, g;
        int r;

        if (!buf)
                return 0;
        memcpy(buf, data, size);
        r = client_head_parse(buf, size, &h);
        FUZZ_CHECK(r == 1 || r == 0 || r == -EBADMSG);
        if (r == 1) {
                FUZZ_CHECK(h.end >= 1 && h.end <= size);
                FUZZ_CHECK(buf[h.end - 1] == '\n');
                FUZZ_CHECK(h.status >= 100 && h.status <= 999);
                FUZZ_CHECK(client_head_parse(buf, h.end - 1, &g) == 0);
                FUZZ_CHECK(client_head_parse(buf, h.end, &g) == 1);
                FUZZ_CHECK(g.end == h.end && g.status == h.status && g.has_length == h.has_length &&
                           g.length == h.length && g.encoded == h.encoded);
        }
        free(buf);
        return 0;
}
