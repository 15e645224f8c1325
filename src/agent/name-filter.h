/* Rewriting the session scripts' paths in a command's stderr (session.c).
 *
 * A session's shell sources each command from a file of the agent (RUN_DIR/sessions/s<n>/
 * c<k>), and bash names that file in every message it writes about the script: "DIR/c9:
 * line 1: 55 Killed  sleep 10", "DIR/c9: line 2: syntax error: ...". A name filter
 * rewrites each "<prefix><digits>" of a byte stream as a plain shell name, so those read
 * "bash: line 1: ..." as they would from `bash -c`, and no path of the agent's reaches the
 * user. Pure and streaming (a match may span chunks: its start is held back until it is
 * decided), unit-tested in tests/unit/test-agent-name-filter.c.
 *
 * Invariants: held[0..n_held) is prefix[0..n_held) while n_held <= plen, then the prefix
 * followed by 1..NAME_FILTER_MAX_DIGITS digits; the output of a feed is never longer than
 * what was held plus what was fed (the name is shorter than any match). */
#ifndef CELLA_AGENT_NAME_FILTER_H
#define CELLA_AGENT_NAME_FILTER_H

#include <stddef.h>

#define NAME_FILTER_MAX_PREFIX 240
#define NAME_FILTER_MAX_DIGITS 10

struct name_filter {
        char prefix[NAME_FILTER_MAX_PREFIX];
        size_t plen;
        unsigned char fail[NAME_FILTER_MAX_PREFIX]; /* KMP failure function of prefix */
        char name[8];
        size_t nlen;
        char held[NAME_FILTER_MAX_PREFIX + NAME_FILTER_MAX_DIGITS];
        size_t n_held;
};

/* prefix: 8..NAME_FILTER_MAX_PREFIX-1 bytes; name: at most 7 bytes. -EINVAL otherwise. */
int name_filter_init(struct name_filter *f, const char *prefix, const char *name);
/* Filter in[0..n) into out, which has room for name_filter_held(f) + n bytes. Returns the
 * bytes written; a possible match at the end stays held. */
size_t name_filter_feed(struct name_filter *f, const char *in, size_t n, char *out);
/* End of the stream: what is held, rewritten if it is a complete match. */
size_t name_filter_flush(struct name_filter *f, char *out);

static inline size_t name_filter_held(const struct name_filter *f)
{
        return f->n_held;
}

#endif
