/* See name-filter.h. */
#include <errno.h>
#include <stdbool.h>
#include <string.h>

#include "agent/name-filter.h"

int name_filter_init(struct name_filter *f, const char *prefix, const char *name)
{
        size_t plen = strlen(prefix), nlen = strlen(name), k = 0;

        memset(f, 0, sizeof(*f));
        if (plen < 8 || plen >= NAME_FILTER_MAX_PREFIX || nlen >= sizeof(f->name) || nlen > plen)
                return -EINVAL;
        memcpy(f->prefix, prefix, plen);
        f->plen = plen;
        memcpy(f->name, name, nlen);
        f->nlen = nlen;
        f->fail[0] = 0;
        for (size_t i = 1; i < plen; i++) {
                while (k > 0 && prefix[i] != prefix[k])
                        k = f->fail[k - 1];
                if (prefix[i] == prefix[k])
                        k++;
                f->fail[i] = (unsigned char)k;
        }
        return 0;
}

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* A partial match of k prefix bytes failed on c: fall back along the failure function,
 * writing out the bytes that no longer belong to a match, until c extends one (or none is
 * left). */
static size_t mismatch(struct name_filter *f, char c, char *out)
{
        size_t k = f->n_held, w = 0;

        while (k > 0 && (k == f->plen || c != f->prefix[k])) {
                size_t k2 = f->fail[k - 1];

                /* held[0..k-k2) leaves the match; held[k-k2..k) == prefix[0..k2) */
                memcpy(out + w, f->held, k - k2);
                w += k - k2;
                k = k2;
        }
        memcpy(f->held, f->prefix, k);
        if (c == f->prefix[k]) {
                f->held[k++] = c;
        } else {
                out[w++] = c;
        }
        f->n_held = k;
        return w;
}

size_t name_filter_feed(struct name_filter *f, const char *in, size_t n, char *out)
{
        size_t w = 0;

        for (size_t i = 0; i < n; i++) {
                char c = in[i];

                if (f->n_held == 0) {
                        /* the common case: copy up to the next possible start */
                        const char *p = memchr(in + i, f->prefix[0], n - i);
                        size_t run = p ? (size_t)(p - (in + i)) : n - i;

                        memcpy(out + w, in + i, run);
                        w += run;
                        i += run;
                        if (i == n)
                                break;
                        f->held[f->n_held++] = in[i];
                        continue;
                }
                if (f->n_held < f->plen) {
                        if (c == f->prefix[f->n_held])
                                f->held[f->n_held++] = c;
                        else
                                w += mismatch(f, c, out + w);
                        continue;
                }
                /* the whole prefix is held, then the digits so far */
                if (is_digit(c) && f->n_held < f->plen + NAME_FILTER_MAX_DIGITS) {
                        f->held[f->n_held++] = c;
                        continue;
                }
                if (f->n_held > f->plen) {
                        memcpy(out + w, f->name, f->nlen);
                        w += f->nlen;
                        f->n_held = 0;
                        i--; /* c starts afresh */
                        continue;
                }
                /* the prefix without a digit after it: not a script's path */
                f->n_held = f->plen;
                w += mismatch(f, c, out + w);
        }
        return w;
}

size_t name_filter_flush(struct name_filter *f, char *out)
{
        size_t w;

        if (f->n_held > f->plen) {
                memcpy(out, f->name, f->nlen);
                w = f->nlen;
        } else {
                memcpy(out, f->held, f->n_held);
                w = f->n_held;
        }
        f->n_held = 0;
        return w;
}
