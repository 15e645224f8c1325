#include <errno.h>
#include <string.h>

#include "client/sse.h"

#include "common/json-escape.h"
#include "common/utf8.h"

void sse_parser_init(struct sse_parser *p, size_t max_line)
{
        memset(p, 0, sizeof(*p));
        p->max_line = max_line ? max_line : 1024 * 1024;
}

void sse_parser_free(struct sse_parser *p)
{
        buf_free(&p->line);
        buf_free(&p->data);
}

static int dispatch(struct sse_parser *p, sse_event_fn fn, void *userdata)
{
        int r = 0;
        if (p->has_data) {
                if (buf_reserve(&p->data, 0) < 0)
                        return -ENOMEM;
                r = fn(p->event[0] ? p->event : "message", p->data.data, p->data.len, userdata);
        }
        buf_reset(&p->data);
        p->has_data = false;
        p->event[0] = '\0';
        return r < 0 ? r : 0;
}

/* One line, without its end: l[0..n) (in the parser's line buffer, or in the chunk fed
 * when the whole line lies there). */
static int process_line(struct sse_parser *p, const char *l, size_t n, sse_event_fn fn,
                        void *userdata)
{
        size_t flen;
        const char *colon, *value;
        size_t vlen;

        if (n == 0)
                return dispatch(p, fn, userdata);
        if (l[0] == ':')
                return 0; /* comment */
        colon = memchr(l, ':', n);
        flen = colon ? (size_t)(colon - l) : n;
        value = colon ? colon + 1 : l + n;
        vlen = colon ? n - flen - 1 : 0;
        if (vlen > 0 && value[0] == ' ') {
                value++;
                vlen--;
        }
        if (flen == 4 && memcmp(l, "data", 4) == 0) {
                if (p->data.len + vlen + 1 > p->max_line * 16)
                        return -E2BIG;
                if (p->has_data && buf_append(&p->data, "\n", 1) < 0)
                        return -ENOMEM;
                if (buf_append(&p->data, value, vlen) < 0)
                        return -ENOMEM;
                p->has_data = true;
        } else if (flen == 5 && memcmp(l, "event", 5) == 0) {
                size_t k = vlen < sizeof(p->event) - 1 ? vlen : sizeof(p->event) - 1;
                memcpy(p->event, value, k);
                p->event[k] = '\0';
        }
        /* id, retry and unknown fields are ignored. */
        return 0;
}

/* The first line end ('\n' or '\r') in s[i..len), or len: two memchr, not a loop per byte. */
static size_t line_end(const char *s, size_t i, size_t len)
{
        const char *nl = memchr(s + i, '\n', len - i);
        size_t j = nl ? (size_t)(nl - s) : len;
        const char *cr = memchr(s + i, '\r', j - i);

        return cr ? (size_t)(cr - s) : j;
}

int sse_parser_feed(struct sse_parser *p, const char *chunk, size_t len, sse_event_fn fn,
                    void *userdata)
{
        for (size_t i = 0; i < len;) {
                char c = chunk[i];
                size_t j;
                int r;

                if (c == '\n' || c == '\r') {
                        bool skip = c == '\n' && p->after_cr;
                        p->after_cr = c == '\r';
                        i++;
                        if (skip)
                                continue;
                        r = process_line(p, p->line.data ? p->line.data : "", p->line.len, fn,
                                         userdata);
                        buf_reset(&p->line);
                        if (r < 0)
                                return r;
                        continue;
                }
                p->after_cr = false;
                j = line_end(chunk, i, len);
                if (p->line.len + (j - i) > p->max_line)
                        return -E2BIG;
                if (j < len && p->line.len == 0) {
                        /* the whole line is in this chunk: read where it lies, not copied */
                        p->after_cr = chunk[j] == '\r';
                        r = process_line(p, chunk + i, j - i, fn, userdata);
                        if (r < 0)
                                return r;
                        i = j + 1;
                        continue;
                }
                /* Take the run up to the next line end in one append. */
                if (buf_append(&p->line, chunk + i, j - i) < 0)
                        return -ENOMEM;
                i = j;
        }
        return 0;
}

/* The common output event, {"type":"stdout"|"stderr","data":"<text without escapes>",
 * "timestamp":"..."} as cellad writes it: its text in place (no parse, no copy), in
 * *ret_text; 0 (stdout) or 1 (stderr), or -1 for anything else (parsed as JSON). */
int sse_plain_output(const char *d, size_t len, const char **ret_text, size_t *ret_len)
{
        static const char *const heads[2] = {"{\"type\":\"stdout\",\"data\":\"",
                                             "{\"type\":\"stderr\",\"data\":\""};
        static const char tail[] = "\",\"timestamp\":\"";
        const char *text, *q, *ts, *end = d + len;
        size_t tslen;
        int which;

        if (len < 32 || memcmp(d, heads[0], 8) != 0)
                return -1;
        which = memcmp(d, heads[0], strlen(heads[0])) == 0   ? 0
                : memcmp(d, heads[1], strlen(heads[1])) == 0 ? 1
                                                             : -1;
        if (which < 0)
                return -1;
        text = d + strlen(heads[which]);
        /* the first byte that would need an escape must be the closing quote: an escape
         * (or a raw control character) anywhere, and the JSON parser decides */
        q = text + json_escape_safe_span(text, (size_t)(end - text));
        if (q >= end || *q != '"' || (size_t)(end - q) < sizeof(tail) + 2 ||
            memcmp(q, tail, sizeof(tail) - 1) != 0 || end[-1] != '}' || end[-2] != '"' ||
            !utf8_is_valid(text, (size_t)(q - text)))
                return -1;
        /* the timestamp: a JSON string without escapes too (no quote, backslash or control
         * character, valid UTF-8), or the event is not what cellad writes */
        ts = q + sizeof(tail) - 1;
        tslen = (size_t)(end - 2 - ts);
        if (json_escape_safe_span(ts, tslen) != tslen || !utf8_is_valid(ts, tslen))
                return -1;
        *ret_text = text;
        *ret_len = (size_t)(q - text);
        return which;
}
