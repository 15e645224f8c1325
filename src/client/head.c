/* An HTTP/1.1 answer's head, read by libcella's spliced download (head.h), with
 * http-parser: the parser is paused when the head is complete, so that the body is left
 * to the caller's splice. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include <http_parser.h>

#include "client/head.h"

static int on_headers_complete(http_parser *p)
{
        http_parser_pause(p, 1);
        return 0;
}

int client_head_parse(const char *buf, size_t len, struct client_head *h)
{
        static const http_parser_settings settings = {.on_headers_complete = on_headers_complete};
        http_parser p;
        size_t n;

        http_parser_init(&p, HTTP_RESPONSE);
        n = http_parser_execute(&p, &settings, buf, len);
        if (HTTP_PARSER_ERRNO(&p) == HPE_OK && n == len)
                return 0;
        /* paused on the head's last byte (the blank line's LF), which it has read */
        if (HTTP_PARSER_ERRNO(&p) != HPE_PAUSED || n >= len || p.status_code < 100 ||
            p.status_code > 999)
                return -EBADMSG;
        /* a length the caller's off_t holds */
        if ((p.flags & F_CONTENTLENGTH) && p.content_length > (uint64_t)INT64_MAX)
                return -EBADMSG;
        memset(h, 0, sizeof(*h));
        h->end = n + 1;
        h->status = p.status_code;
        h->has_length = (p.flags & F_CONTENTLENGTH) != 0;
        h->length = h->has_length ? p.content_length : 0;
        h->encoded = p.uses_transfer_encoding != 0;
        return 1;
}
