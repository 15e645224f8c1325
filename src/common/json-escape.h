/* JSON string content written straight from bytes that are valid UTF-8, for output events
 * built without a json_t (api-sse.c): the escapes jansson's dump makes with its default
 * flags (\" \\ \b \f \n \r \t, \u00XX for the other control characters; '/' and
 * non-ASCII characters as they are), so an event reads the same either way. Pure. */
#ifndef CELLA_JSON_ESCAPE_H
#define CELLA_JSON_ESCAPE_H

#include <stddef.h>

struct buf;

/* Append s[0..len) (valid UTF-8: utf8_is_valid) to out as JSON string content, without
 * the quotes. Runs of bytes that need no escape are copied whole. 0 or -ENOMEM. */
int json_escape_append(struct buf *out, const char *s, size_t len);

/* The length of the longest prefix of s[0..len) that needs no escape (no control
 * character, '"' or '\\'): sixteen bytes tested at a time. Pure. */
size_t json_escape_safe_span(const char *s, size_t len);

#endif
