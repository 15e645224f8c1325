/* Durations and times on the command line: one parser for every option that takes a time
 * (--timeout, --sleep-after), and its inverse for display.
 *
 * A duration is a bare number, meaning that many of the option's unit (its unit_ms), or one
 * to five NUMBER UNIT groups with units d, h, m, s, ms from the largest to the smallest,
 * each at most once: "500ms", "30s", "10m", "1h30m", "2d", "1m30s500ms". Numbers are
 * decimal digits (no sign, no fraction, no spaces); units are lower case. */
#ifndef CELLA_CLI_DURATION_H
#define CELLA_CLI_DURATION_H

#include <stddef.h>
#include <stdint.h>

/* The largest duration parsed at all; each option has its own, smaller range. */
#define CLI_DURATION_MAX_MS (366LL * 24 * 3600 * 1000)

/* Parse the len bytes at s (not NUL-terminated; a NUL byte is invalid). Returns 0 with
 * *ret_ms, -EINVAL for text that is not a duration, -ERANGE above CLI_DURATION_MAX_MS;
 * *ret_ms is written only on success. unit_ms (> 0) is the unit of a bare number. */
int cli_duration_parse(const char *s, size_t len, int64_t unit_ms, int64_t *ret_ms);

/* Write ms (0..CLI_DURATION_MAX_MS) in the shortest form the parser reads back as the same
 * value, with units: "0s", "250ms", "45s", "1m30s", "2h", "1d2h3m4s5ms". Returns 0, or
 * -ERANGE for a value out of range, -ENOBUFS when size is too small. */
int cli_duration_format(int64_t ms, char *buf, size_t size);

/* An API timestamp "2026-11-23T01:02:03.456Z" (the len bytes at s, exactly that shape:
 * UTC, milliseconds) to milliseconds since the epoch. Returns 0 with *ret_ms, or -EINVAL. */
int cli_time_parse(const char *s, size_t len, int64_t *ret_ms);

#endif
