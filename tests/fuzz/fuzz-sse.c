/* Fuzz the client's Server-Sent Events parser (src/client/sse.h).
 *
 * The input is parsed twice: in one chunk, and split into small chunks (1 to 8 bytes,
 * sizes taken from the input itself, so splits land inside CRLFs, field names and UTF-8).
 * Invariants: the parser is chunking-agnostic (the same events in the same order and the
 * same result), results are 0 or -E2BIG, every event's data is NUL-terminated at its length
 * and bounded by the limits the header promises. Each event's data, and the whole input,
 * read by sse_plain_output: when it takes one, jansson reads the same object with the same
 * type and the same text. */
#include <errno.h>
#include <jansson.h>
#include <string.h>

#include "client/sse.h"
#include "common/buf.h"
#include "fuzz.h"

#define MAX_LINE 256

static void check_plain(const char *data, size_t len)
{
        const char *text = NULL;
        size_t tlen = 0;
        int which = sse_plain_output(data, len, &text, &tlen);
        json_t *j, *d;

        if (which < 0)
                return;
        FUZZ_CHECK(which <= 1 && text >= data && text + tlen <= data + len);
        j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
        FUZZ_CHECK(json_is_object(j));
        FUZZ_CHECK(strcmp(json_string_value(json_object_get(j, "type")),
                          which ? "stderr" : "stdout") == 0);
        d = json_object_get(j, "data");
        FUZZ_CHECK(json_is_string(d) && json_string_length(d) == tlen);
        FUZZ_CHECK(tlen == 0 || memcmp(json_string_value(d), text, tlen) == 0);
        FUZZ_CHECK(json_object_get(j, "encoding") == NULL);
        json_decref(j);
}

static int collect(const char *event, const char *data, size_t len, void *userdata)
{
        struct buf *out = userdata;

        FUZZ_CHECK(data[len] == '\0');
        FUZZ_CHECK(len <= (size_t)MAX_LINE * 16);
        FUZZ_CHECK(event == NULL || strlen(event) < 64);
        FUZZ_CHECK(buf_printf(out, "[%s]%zu:", event ? event : "", len) == 0);
        FUZZ_CHECK(buf_append(out, data, len) == 0);
        check_plain(data, len);
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct buf whole = BUF_INIT, split = BUF_INIT;
        struct sse_parser p;
        const char *in = (const char *)data;
        size_t off = 0, i = 0;
        int r1, r2 = 0;

        check_plain(in, size);
        sse_parser_init(&p, MAX_LINE);
        r1 = sse_parser_feed(&p, in, size, collect, &whole);
        sse_parser_free(&p);
        FUZZ_CHECK(r1 == 0 || r1 == -E2BIG);

        sse_parser_init(&p, MAX_LINE);
        while (off < size && r2 == 0) {
                size_t n = 1 + (data[i++ % size] & 7);
                if (n > size - off)
                        n = size - off;
                r2 = sse_parser_feed(&p, in + off, n, collect, &split);
                off += n;
        }
        sse_parser_free(&p);

        FUZZ_CHECK(r1 == r2);
        FUZZ_CHECK(whole.len == split.len);
        FUZZ_CHECK(whole.len == 0 || memcmp(whole.data, split.data, whole.len) == 0);
        buf_free(&whole);
        buf_free(&split);
        return 0;
}
