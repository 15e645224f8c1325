/* libcella's reading of an HTTP/1.1 answer's head, for the download it makes itself
 * (cella_file_read_fd's spliced form, client-files.c; decision 0061). */
#ifndef CELLA_CLIENT_HEAD_H
#define CELLA_CLIENT_HEAD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct client_head {
        size_t end;      /* the head's length, its blank line included */
        int status;      /* 100 to 999 */
        bool has_length; /* a Content-Length was given */
        uint64_t length;
        bool encoded; /* a Transfer-Encoding was given: the body is not length bytes */
};

/* buf[0..len) as the start of an answer: 1 with *h when it holds the whole head (the
 * first CRLF CRLF ends it), 0 when more is needed, -EBADMSG when it is not an answer's
 * head (a status line other than "HTTP/1.x NNN ...", a header line without a colon, a
 * Content-Length that is not one decimal number below 2^63, two that differ). */
int client_head_parse(const char *buf, size_t len, struct client_head *h);

#endif
