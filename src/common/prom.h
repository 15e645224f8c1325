/* The Prometheus text exposition format, version 0.0.4: the encoder GET /metrics writes
 * with (docs/metrics.md) and a parser of one line, for clients of that route (`cella top`).
 *
 * The encoder appends to a struct buf; every function returns 0 or -ENOMEM (the buffer
 * then holds a cut text: the caller drops it). Names are the caller's constants and are not
 * checked; label values and HELP texts are escaped here (a label value: '\' -> "\\",
 * '"' -> "\"", newline -> "\n"; a HELP text: the same but '"'), so any byte string may be
 * one. Integer values are written exactly, durations as seconds with microsecond digits.
 *
 * The parser takes one line (without its '\n') and gives the sample on it, its label values
 * unescaped; comment and blank lines are no sample. Pure functions, fuzzed (fuzz/prom). */
#ifndef CELLA_COMMON_PROM_H
#define CELLA_COMMON_PROM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"

#define PROM_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

/* What the parser keeps of a sample (longer names, values or more labels are -E2BIG). */
#define PROM_NAME_MAX 128
#define PROM_LABEL_VALUE_MAX 256
#define PROM_LABELS_MAX 8

struct prom_label {
        const char *name;
        const char *value;
};

/* "# HELP name help" and "# TYPE name type" (type: counter, gauge, histogram, ...). */
int prom_family(struct buf *b, const char *name, const char *type, const char *help);
/* name{l[0].name="l[0].value",...} value (n may be 0: no braces). */
int prom_sample_u64(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                    uint64_t value);
int prom_sample_double(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                       double value);
/* A duration of us microseconds as seconds, exactly ("0.000647", "12.5"). */
int prom_sample_seconds(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                        uint64_t us);
/* A family with its one unlabelled sample. */
int prom_family_u64(struct buf *b, const char *name, const char *type, const char *help,
                    uint64_t v);
/* A family with a sample for each value of one label (values[i]: v[i]); zero samples are
 * left out unless zeros. */
int prom_family_by_label(struct buf *b, const char *name, const char *type, const char *help,
                         const char *label, const char *const *values, const uint64_t *v, size_t n,
                         bool zeros);
/* v escaped as a label value (without the quotes). */
int prom_label_escape(struct buf *b, const char *v);

/* A histogram of durations in microseconds: upper bounds bound_us[0..nbounds) ascending,
 * counts[i] the observations in (bound[i-1], bound[i]] and counts[nbounds] those above the
 * last bound (not cumulative: the encoder sums them), sum_us their sum. */
struct prom_histogram {
        const uint64_t *bound_us;
        size_t nbounds;
        const uint64_t *counts;
        uint64_t sum_us;
};
/* Count one observation of us microseconds into counts and sum_us (no allocation). */
void prom_histogram_observe(const uint64_t *bound_us, size_t nbounds, uint64_t *counts,
                            uint64_t *sum_us, uint64_t us);
/* name_bucket{...,le="<seconds>"} cumulative, the last le="+Inf"; name_sum (seconds),
 * name_count. The family's HELP/TYPE are the caller's (prom_family, "histogram"). */
int prom_histogram_write(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                         const struct prom_histogram *h);

/* ---- parsing ---- */

struct prom_parsed {
        char name[PROM_NAME_MAX + 1];
        size_t nlabels;
        struct {
                char name[PROM_NAME_MAX + 1];
                char value[PROM_LABEL_VALUE_MAX + 1]; /* unescaped (may hold a NUL: a
                                                         value is compared as a C string) */
        } labels[PROM_LABELS_MAX];
        double value;
        bool has_timestamp;
        int64_t timestamp_ms;
};

/* One line of the text format (len bytes, no '\n'; a '\r' only inside a label value). 1: a sample,
 * into *s; 0: a comment, a HELP/TYPE line or a blank line (*s untouched); -EINVAL: not a
 * valid line; -E2BIG: valid but beyond the limits above. */
int prom_parse_line(const char *line, size_t len, struct prom_parsed *s);
/* The value of label name in s, or NULL. */
const char *prom_parsed_label(const struct prom_parsed *s, const char *name);

#endif
