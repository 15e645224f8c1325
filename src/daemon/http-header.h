/* Header lines as http-parser hands them over, for both of cellad's HTTP parsers: the
 * server's (a client's request head, http-parse.c) and the preview proxy's (a sandbox's
 * response head, preview-proxy.c).
 *
 * http-parser delivers a header's name and value in pieces (split across reads); each
 * parser gathers them in two buffers and adds the pair here once it is whole. A list is an
 * array of pairs, each name and value a NUL-terminated copy owned by the list; what limits
 * apply (count, bytes, NUL bytes) is the caller's to check before adding. */
#ifndef CELLA_DAEMON_HTTP_HEADER_H
#define CELLA_DAEMON_HTTP_HEADER_H

#include <stddef.h>

#include "common/buf.h"

struct http_header {
        char *name;
        char *value;
};

/* Append copies of name and value to the *n pairs of *v. 0, or -ENOMEM with *v and *n
 * unchanged. */
int http_headers_add(struct http_header **v, size_t *n, const struct buf *name,
                     const struct buf *value);
/* Free n pairs and the array (v may be NULL). */
void http_headers_free(struct http_header *v, size_t n);

#endif
