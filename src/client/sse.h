/* A Server-Sent Events parser (the text/event-stream format of the WHATWG spec) fed with
 * byte chunks split anywhere. Lines end in LF, CRLF or CR; "data:" lines of one event are
 * joined with LF; "event:" names the event; lines starting with ':' are comments; an empty
 * line dispatches the event (if it has data). Pure: no I/O; memory bounded by max_line
 * (and, for one event's data, by max_line * 16). */
#ifndef CELLA_CLIENT_SSE_H
#define CELLA_CLIENT_SSE_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

/* Called per event; data is NUL-terminated (data[len] == 0) and borrowed. Return < 0 to
 * stop: sse_parser_feed then returns that value. */
typedef int (*sse_event_fn)(const char *event, const char *data, size_t len, void *userdata);

struct sse_parser {
        struct buf line;
        struct buf data;
        char event[64];
        bool has_data;
        bool after_cr; /* the last byte was CR: an LF right after it ends nothing */
        size_t max_line;
};

void sse_parser_init(struct sse_parser *p, size_t max_line);
/* 0, -E2BIG (a line or an event over the limit), -ENOMEM, or the callback's value. */
int sse_parser_feed(struct sse_parser *p, const char *chunk, size_t len, sse_event_fn fn,
                    void *userdata);
void sse_parser_free(struct sse_parser *p);

/* An exec output event's data (a dispatched event's) in the one shape cellad writes it:
 * {"type":"stdout"|"stderr","data":"<UTF-8 text without a backslash or a control
 * character>","timestamp":"<UTF-8 text without a quote, backslash or control character>"}. 0 (stdout) or 1 (stderr) with the text
 * in place in *ret_text, *ret_len; -1 for anything else (for a JSON parser to read). */
int sse_plain_output(const char *d, size_t len, const char **ret_text, size_t *ret_len);

#endif
