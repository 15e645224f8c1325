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

/* buf[0..len) as the start of an answer, read by http-parser: 1 with *h when it holds
 * the whole head (its blank line ends it), 0 when more is needed, -EBADMSG when it is not
 * an answer's head as http-parser reads one (a bad status line or header line, a
 * Content-Length that is not a number or two that differ, a Content-Length beside a
 * Transfer-Encoding). */
int client_head_parse(const char *buf, size_t len, struct client_head *h);

#endif
