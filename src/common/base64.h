/* Standard base64 (RFC 4648, with padding) for the JSON file API. */
#ifndef CELLA_BASE64_H
#define CELLA_BASE64_H

#include <stddef.h>

#include "common/buf.h"

int base64_encode(struct buf *out, const void *data, size_t len); /* 0 or -ENOMEM */
/* Decode; whitespace is not accepted. Returns 0, -EINVAL on bad input, -ENOMEM. */
int base64_decode(struct buf *out, const char *s, size_t len);

#endif
