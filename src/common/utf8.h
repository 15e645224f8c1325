/* UTF-8 validation (RFC 3629: no overlong forms, no surrogates, nothing above U+10FFFF),
 * used to decide whether bytes from a sandbox can travel as JSON text. Pure. */
#ifndef CELLA_UTF8_H
#define CELLA_UTF8_H

#include <stdbool.h>
#include <stddef.h>

/* Is s[0..len) entirely valid UTF-8? NUL bytes are valid (U+0000). */
bool utf8_is_valid(const char *s, size_t len);

/* Length of the sequence that starts at s[0..len): > 0 for a complete valid character,
 * 0 when s is a valid but incomplete start (more bytes needed), -1 when invalid. */
int utf8_char_len(const unsigned char *s, size_t len);

/* Length of the longest prefix of s[0..len) that is valid UTF-8 (an incomplete sequence
 * at the end counts as invalid). */
size_t utf8_valid_prefix(const char *s, size_t len);

/* Length of the longest prefix of s[0..len) that does not end inside a character: a
 * trailing incomplete (but so far valid) sequence of 1-3 bytes is left out, so a stream
 * can be cut into pieces without splitting a character. Invalid bytes are not looked at
 * beyond that: the caller decides with utf8_is_valid(). */
size_t utf8_complete_prefix(const char *s, size_t len);

/* Append s[0..len) to out as valid UTF-8 for display: every byte that does not start a
 * valid, complete character becomes U+FFFD. 0 or -ENOMEM. */
struct buf;
int utf8_sanitize(struct buf *out, const char *s, size_t len);
/* Replace, in place, every byte of the NUL-terminated s that does not belong to a valid,
 * complete character with '?' (for messages in fixed buffers; never allocates). */
void utf8_scrub(char *s);

#endif
