#include <errno.h>
#include <string.h>

#include "client/sse.h"

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

static int process_line(struct sse_parser *p, sse_event_fn fn, void *userdata)
{
        const char *l = p->line.data ? p->line.data : "";
        size_t n = p->line.len, flen;
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

int sse_parser_feed(struct sse_parser *p, const char *chunk, size_t len, sse_event_fn fn,
                    void *userdata)
{
        for (size_t i = 0; i < len;) {
                char c = chunk[i];
                if (c == '\n' || c == '\r') {
                        bool skip = c == '\n' && p->after_cr;
                        p->after_cr = c == '\r';
                        i++;
                        if (skip)
                                continue;
                        int r = process_line(p, fn, userdata);
                        buf_reset(&p->line);
                        if (r < 0)
                                return r;
                        continue;
                }
                p->after_cr = false;
                /* Take the run up to the next line end in one append. */
                size_t j = i;
                while (j < len && chunk[j] != '\n' && chunk[j] != '\r')
                        j++;
                if (p->line.len + (j - i) > p->max_line)
                        return -E2BIG;
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
        const char *text, *q, *end = d + len;
        int which;

        if (len < 32 || memcmp(d, heads[0], 8) != 0)
                return -1;
        which = memcmp(d, heads[0], strlen(heads[0])) == 0   ? 0
                : memcmp(d, heads[1], strlen(heads[1])) == 0 ? 1
                                                             : -1;
        if (which < 0)
                return -1;
        text = d + strlen(heads[which]);
        q = memchr(text, '"', (size_t)(end - text));
        /* an escape (or a raw control character) anywhere: the JSON parser decides */
        if (!q || memchr(text, '\\', (size_t)(q - text)) || (size_t)(end - q) < sizeof(tail) + 2 ||
            memcmp(q, tail, sizeof(tail) - 1) != 0 || end[-1] != '}' || end[-2] != '"' ||
            memchr(q + sizeof(tail) - 1, '"', (size_t)(end - 2 - (q + sizeof(tail) - 1))) ||
            !utf8_is_valid(text, (size_t)(q - text)))
                return -1;
        for (const char *c = text; c < q; c++)
                if ((unsigned char)*c < 0x20)
                        return -1;
        *ret_text = text;
        *ret_len = (size_t)(q - text);
        return which;
}
