/* libcella: GET /metrics and reading its answer (docs/metrics.md); the lines are parsed
 * by common/prom.c. */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "common/prom.h"

int cella_metrics(cella_client *c, char **ret_text)
{
        return cella_request(c, "GET", "/metrics", NULL, ret_text);
}

/* Call fn on each sample of text; CELLA_ERR_INVALID at the first malformed line. Lines
 * beyond the parser's limits (prom.h) are skipped: they are no series a caller asks for. */
static int each_sample(const char *text, int (*fn)(const struct prom_parsed *s, void *ud), void *ud)
{
        struct prom_parsed *s = malloc(sizeof(*s));
        int r = CELLA_OK;

        if (!s)
                return CELLA_ERR_NOMEM;
        for (const char *p = text; *p && r == CELLA_OK;) {
                size_t n = strcspn(p, "\n");
                int k = prom_parse_line(p, n, s);

                if (k == -EINVAL)
                        r = CELLA_ERR_INVALID;
                else if (k == 1)
                        r = fn(s, ud);
                p += n + (p[n] == '\n');
        }
        free(s);
        return r;
}

/* Do s's labels include each "label=value" of match? */
static bool labels_match(const struct prom_parsed *s, const char *const *match)
{
        for (size_t i = 0; match && match[i]; i++) {
                const char *eq = strchr(match[i], '=');
                char name[PROM_NAME_MAX + 1];
                const char *v;

                if (!eq || (size_t)(eq - match[i]) > PROM_NAME_MAX)
                        return false;
                memcpy(name, match[i], (size_t)(eq - match[i]));
                name[eq - match[i]] = '\0';
                v = prom_parsed_label(s, name);
                if (!v || strcmp(v, eq + 1) != 0)
                        return false;
        }
        return true;
}

struct value_sum {
        const char *name;
        const char *const *match;
        double sum;
};

static int add_value(const struct prom_parsed *s, void *ud)
{
        struct value_sum *v = ud;

        if (strcmp(s->name, v->name) == 0 && labels_match(s, v->match))
                v->sum += s->value;
        return CELLA_OK;
}

int cella_metrics_value(const char *text, const char *name, const char *const *match, double *ret)
{
        struct value_sum v = {name, match, 0};
        int r;

        if (!text || !name || !ret)
                return CELLA_ERR_INVALID;
        r = each_sample(text, add_value, &v);
        if (r == CELLA_OK)
                *ret = v.sum;
        return r;
}

/* A histogram's buckets as read: upper bound and cumulative count, summed over its series. */
#define QUANTILE_BUCKETS 64

struct buckets {
        char name[PROM_NAME_MAX + 8];
        size_t n;
        double le[QUANTILE_BUCKETS];
        double count[QUANTILE_BUCKETS];
};

static int add_bucket(const struct prom_parsed *s, void *ud)
{
        struct buckets *b = ud;
        const char *le = prom_parsed_label(s, "le");
        double bound;
        size_t i;

        if (strcmp(s->name, b->name) != 0 || !le)
                return CELLA_OK;
        if (strcmp(le, "+Inf") == 0) {
                bound = INFINITY;
        } else {
                char *end;

                bound = strtod(le, &end);
                if (end == le || *end)
                        return CELLA_ERR_INVALID;
        }
        for (i = 0; i < b->n && b->le[i] != bound; i++)
                ;
        if (i == b->n) {
                if (b->n == QUANTILE_BUCKETS)
                        return CELLA_ERR_INVALID;
                b->le[b->n] = bound;
                b->count[b->n++] = 0;
        }
        b->count[i] += s->value;
        return CELLA_OK;
}

static int read_buckets(const char *text, const char *name, struct buckets *b)
{
        memset(b, 0, sizeof(*b));
        if (strlen(name) > PROM_NAME_MAX)
                return CELLA_ERR_INVALID;
        snprintf(b->name, sizeof(b->name), "%s_bucket", name);
        return each_sample(text, add_bucket, b);
}

/* Sort b by bound (a handful of entries: insertion sort). */
static void sort_buckets(struct buckets *b)
{
        for (size_t i = 1; i < b->n; i++)
                for (size_t j = i; j > 0 && b->le[j - 1] > b->le[j]; j--) {
                        double l = b->le[j], c = b->count[j];

                        b->le[j] = b->le[j - 1];
                        b->count[j] = b->count[j - 1];
                        b->le[j - 1] = l;
                        b->count[j - 1] = c;
                }
}

int cella_metrics_quantile(const char *text, const char *before_text, const char *name, double q,
                           double *ret)
{
        struct buckets now, before;
        double total, rank, lo = 0, below = 0;
        int r;

        if (!text || !name || !ret || !(q > 0 && q < 1))
                return CELLA_ERR_INVALID;
        if ((r = read_buckets(text, name, &now)) != CELLA_OK)
                return r;
        if (before_text) {
                if ((r = read_buckets(before_text, name, &before)) != CELLA_OK)
                        return r;
                for (size_t i = 0; i < now.n; i++)
                        for (size_t j = 0; j < before.n; j++)
                                if (before.le[j] == now.le[i])
                                        now.count[i] -= before.count[j];
        }
        sort_buckets(&now);
        total = now.n ? now.count[now.n - 1] : 0;
        if (now.n < 2 || !isinf(now.le[now.n - 1]) || total <= 0) {
                *ret = -1;
                return CELLA_OK;
        }
        rank = q * total;
        for (size_t i = 0; i < now.n; i++) {
                if (now.count[i] >= rank) {
                        if (isinf(now.le[i])) /* above the last bound: that bound */
                                *ret = now.le[i - 1];
                        else
                                *ret = lo +
                                       (now.le[i] - lo) * (rank - below) / (now.count[i] - below);
                        return CELLA_OK;
                }
                lo = now.le[i];
                below = now.count[i];
        }
        *ret = lo;
        return CELLA_OK;
}
