/* Fuzz the output path's text checks (src/common/json-escape.h, src/common/utf8.h): the
 * word-at-a-time UTF-8 validation and the JSON escaper that writes SSE output events.
 *
 * Invariants: utf8_is_valid agrees with a byte-at-a-time walk of utf8_char_len and with
 * utf8_valid_prefix; for the valid prefix, json_escape_append writes exactly what
 * jansson's dump of the same string holds between its quotes. */
#include <jansson.h>
#include <string.h>

#include "common/buf.h"
#include "common/json-escape.h"
#include "common/utf8.h"
#include "fuzz.h"

static bool slow_valid(const unsigned char *p, size_t len)
{
        for (size_t i = 0; i < len;) {
                int n = utf8_char_len(p + i, len - i);

                if (n <= 0)
                        return false;
                i += (size_t)n;
        }
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        const char *s = (const char *)data;
        size_t v = utf8_valid_prefix(s, size);
        struct buf b = BUF_INIT;
        json_t *j;
        char *want;

        FUZZ_CHECK(utf8_is_valid(s, size) == slow_valid(data, size));
        FUZZ_CHECK(utf8_is_valid(s, size) == (v == size));
        FUZZ_CHECK(slow_valid(data, v));
        FUZZ_CHECK(json_escape_append(&b, s, v) == 0);
        j = json_stringn(s, v);
        want = j ? json_dumps(j, JSON_ENCODE_ANY) : NULL;
        FUZZ_CHECK(want != NULL);
        FUZZ_CHECK(b.len == strlen(want) - 2);
        FUZZ_CHECK(b.len == 0 || memcmp(b.data, want + 1, b.len) == 0);
        free(want);
        json_decref(j);
        buf_free(&b);
        return 0;
}
