/* Percent-encoding (RFC 3986): URLs' query values, s3:// parameters, cella:// resource
 * URIs. */
#ifndef CELLA_PCT_H
#define CELLA_PCT_H

#include <stdbool.h>
#include <stddef.h>

/* RFC 3986's unreserved characters: A-Z a-z 0-9 - . _ ~ (never percent-encoded). */
bool pct_unreserved(char c);
/* Decode s[0..n) into out (outsz bytes, the terminating NUL included); plus_space: '+'
 * is a space (application/x-www-form-urlencoded). *ret_len (may be NULL): the decoded
 * length. 0, or -EINVAL for a '%' not followed by two hex digits, a NUL (escaped or not)
 * or a result that does not fit; out is then unspecified. */
int pct_decode(const char *s, size_t n, bool plus_space, char *out, size_t outsz, size_t *ret_len);

#endif
