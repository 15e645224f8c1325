/* The Prometheus text format 0.0.4: encoder and line parser (prom.h). */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/prom.h"

/* s escaped: '\' and newline always, '"' when quote (label values). */
static int escape(struct buf *b, const char *s, bool quote)
{
        for (const char *p = s; *p;) {
                size_t n = strcspn(p, quote ? "\\\n\"" : "\\\n");
                const char *e;

                if (n && buf_append(b, p, n) < 0)
                        return -ENOMEM;
                p += n;
                if (!*p)
                        break;
                e = *p == '\\' ? "\\\\" : *p == '\n' ? "\\n" : "\\\"";
                if (buf_append(b, e, 2) < 0)
                        return -ENOMEM;
                p++;
        }
        return 0;
}

int prom_label_escape(struct buf *b, const char *v)
{
        return escape(b, v, true);
}

int prom_family(struct buf *b, const char *name, const char *type, const char *help)
{
        if (buf_printf(b, "# HELP %s ", name) < 0 || escape(b, help, false) < 0 ||
            buf_printf(b, "\n# TYPE %s %s\n", name, type) < 0)
                return -ENOMEM;
        return 0;
}

/* name{labels (and one more, extra, when not NULL)} and the space before the value. */
static int head(struct buf *b, const char *name, const char *suffix, const struct prom_label *l,
                size_t n, const struct prom_label *extra)
{
        size_t all = n + (extra != NULL);

        if (buf_append_str(b, name) < 0 || buf_append_str(b, suffix) < 0)
                return -ENOMEM;
        for (size_t i = 0; i < all; i++) {
                const struct prom_label *x = i < n ? &l[i] : extra;

                if (buf_printf(b, "%s%s=\"", i == 0 ? "{" : ",", x->name) < 0 ||
                    escape(b, x->value, true) < 0 || buf_append(b, "\"", 1) < 0)
                        return -ENOMEM;
        }
        if (all && buf_append(b, "}", 1) < 0)
                return -ENOMEM;
        return buf_append(b, " ", 1);
}

int prom_sample_u64(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                    uint64_t value)
{
        if (head(b, name, "", l, n, NULL) < 0 || buf_printf(b, "%" PRIu64 "\n", value) < 0)
                return -ENOMEM;
        return 0;
}

/* v in the fewest digits that read back as v ("0.1", not "0.10000000000000001"). */
static int write_double(struct buf *b, double v)
{
        char t[32];

        if (isnan(v))
                return buf_append_str(b, "NaN\n");
        if (isinf(v))
                return buf_append_str(b, v > 0 ? "+Inf\n" : "-Inf\n");
        for (int prec = 1; prec <= 17; prec++) {
                snprintf(t, sizeof(t), "%.*g", prec, v);
                if (strtod(t, NULL) == v)
                        break;
        }
        return buf_printf(b, "%s\n", t);
}

int prom_sample_double(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                       double value)
{
        if (head(b, name, "", l, n, NULL) < 0 || write_double(b, value) < 0)
                return -ENOMEM;
        return 0;
}

/* us microseconds as seconds, exactly ("0.0005", "2.5", "30"). */
static void seconds(uint64_t us, char out[32])
{
        uint64_t frac = us % 1000000;
        int len;

        len = snprintf(out, 32, "%" PRIu64, us / 1000000);
        if (frac) {
                snprintf(out + len, 32 - (size_t)len, ".%06" PRIu64, frac);
                for (len = (int)strlen(out); out[len - 1] == '0'; len--)
                        out[len - 1] = '\0';
        }
}

int prom_sample_seconds(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                        uint64_t us)
{
        char s[32];

        seconds(us, s);
        if (head(b, name, "", l, n, NULL) < 0 || buf_printf(b, "%s\n", s) < 0)
                return -ENOMEM;
        return 0;
}

void prom_histogram_observe(const uint64_t *bound_us, size_t nbounds, uint64_t *counts,
                            uint64_t *sum_us, uint64_t us)
{
        size_t i = 0;

        while (i < nbounds && us > bound_us[i])
                i++;
        counts[i]++;
        *sum_us += us;
}

int prom_histogram_write(struct buf *b, const char *name, const struct prom_label *l, size_t n,
                         const struct prom_histogram *h)
{
        uint64_t cum = 0;
        char le[32];

        for (size_t i = 0; i <= h->nbounds; i++) {
                struct prom_label x = {"le", le};

                if (i < h->nbounds)
                        seconds(h->bound_us[i], le);
                else
                        memcpy(le, "+Inf", 5);
                cum += h->counts[i];
                if (head(b, name, "_bucket", l, n, &x) < 0 ||
                    buf_printf(b, "%" PRIu64 "\n", cum) < 0)
                        return -ENOMEM;
        }
        seconds(h->sum_us, le);
        if (head(b, name, "_sum", l, n, NULL) < 0 || buf_printf(b, "%s\n", le) < 0 ||
            head(b, name, "_count", l, n, NULL) < 0 || buf_printf(b, "%" PRIu64 "\n", cum) < 0)
                return -ENOMEM;
        return 0;
}

/* ---- parsing ---- */

static bool is_name_start(char c, bool colon)
{
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (colon && c == ':');
}

static bool is_name_char(char c, bool colon)
{
        return is_name_start(c, colon) || (c >= '0' && c <= '9');
}

/* A name at line[*i] into out (PROM_NAME_MAX + 1 bytes); colon: ':' allowed (metric names,
 * not label names). */
static int parse_name(const char *line, size_t len, size_t *i, bool colon, char *out)
{
        size_t start = *i;

        if (*i >= len || !is_name_start(line[*i], colon))
                return -EINVAL;
        while (*i < len && is_name_char(line[*i], colon))
                (*i)++;
        if (*i - start > PROM_NAME_MAX)
                return -E2BIG;
        memcpy(out, line + start, *i - start);
        out[*i - start] = '\0';
        return 0;
}

static void skip_blanks(const char *line, size_t len, size_t *i)
{
        while (*i < len && (line[*i] == ' ' || line[*i] == '\t'))
                (*i)++;
}

/* A quoted label value at line[*i] ('"' included) into out, unescaped. */
static int parse_value(const char *line, size_t len, size_t *i, char *out)
{
        size_t o = 0;

        if (*i >= len || line[*i] != '"')
                return -EINVAL;
        for ((*i)++; *i < len && line[*i] != '"'; (*i)++) {
                char c = line[*i];

                if (c == '\\') {
                        if (++(*i) >= len)
                                return -EINVAL;
                        c = line[*i];
                        if (c == 'n')
                                c = '\n';
                        else if (c != '\\' && c != '"')
                                return -EINVAL;
                }
                if (o >= PROM_LABEL_VALUE_MAX)
                        return -E2BIG;
                out[o++] = c;
        }
        if (*i >= len)
                return -EINVAL;
        (*i)++;
        out[o] = '\0';
        return 0;
}

static int parse_labels(const char *line, size_t len, size_t *i, struct prom_parsed *s)
{
        (*i)++; /* '{' */
        for (;;) {
                int r;

                skip_blanks(line, len, i);
                if (*i < len && line[*i] == '}')
                        break;
                if (s->nlabels >= PROM_LABELS_MAX)
                        return -E2BIG;
                if ((r = parse_name(line, len, i, false, s->labels[s->nlabels].name)) < 0)
                        return r;
                skip_blanks(line, len, i);
                if (*i >= len || line[*i] != '=')
                        return -EINVAL;
                (*i)++;
                skip_blanks(line, len, i);
                if ((r = parse_value(line, len, i, s->labels[s->nlabels].value)) < 0)
                        return r;
                for (size_t k = 0; k < s->nlabels; k++)
                        if (strcmp(s->labels[k].name, s->labels[s->nlabels].name) == 0)
                                return -EINVAL; /* a label twice */
                s->nlabels++;
                skip_blanks(line, len, i);
                if (*i < len && line[*i] == ',') {
                        (*i)++;
                        continue;
                }
                if (*i < len && line[*i] == '}')
                        break;
                return -EINVAL;
        }
        (*i)++; /* '}' */
        return 0;
}

/* The token at line[*i] (up to a blank or the end) into out (size bytes). */
static int token(const char *line, size_t len, size_t *i, char *out, size_t size)
{
        size_t start = *i;

        while (*i < len && line[*i] != ' ' && line[*i] != '\t')
                (*i)++;
        if (*i == start || *i - start >= size)
                return -EINVAL;
        memcpy(out, line + start, *i - start);
        out[*i - start] = '\0';
        return 0;
}

/* A float as the format writes them: decimal, with an exponent, or [+-]Inf, NaN. */
static int parse_float(const char *t, double *v)
{
        char *end;

        if (strcmp(t, "+Inf") == 0 || strcmp(t, "Inf") == 0) {
                *v = INFINITY;
                return 0;
        }
        if (strcmp(t, "-Inf") == 0) {
                *v = -INFINITY;
                return 0;
        }
        if (strcmp(t, "NaN") == 0) {
                *v = NAN;
                return 0;
        }
        /* strtod would take hex, "inf", "nan(...)": only decimal digits go through */
        if (t[strspn(t, "0123456789+-.eE")] != '\0')
                return -EINVAL;
        errno = 0;
        *v = strtod(t, &end);
        if (end == t || *end || errno == ERANGE)
                return -EINVAL;
        return 0;
}

static int parse_timestamp(const char *t, int64_t *ms)
{
        char *end;
        long long v;

        if (t[t[0] == '-'] < '0' || t[t[0] == '-'] > '9')
                return -EINVAL;
        errno = 0;
        v = strtoll(t, &end, 10);
        if (*end || errno == ERANGE)
                return -EINVAL;
        *ms = v;
        return 0;
}

int prom_parse_line(const char *line, size_t len, struct prom_parsed *out)
{
        struct prom_parsed s;
        char tok[64];
        size_t i = 0, mark;
        int r;

        if (memchr(line, '\n', len))
                return -EINVAL;
        skip_blanks(line, len, &i);
        if (i == len || line[i] == '#')
                return 0;
        s.nlabels = 0;
        s.has_timestamp = false;
        s.timestamp_ms = 0;
        if ((r = parse_name(line, len, &i, true, s.name)) < 0)
                return r;
        mark = i;
        skip_blanks(line, len, &i);
        if (i < len && line[i] == '{') {
                if ((r = parse_labels(line, len, &i, &s)) < 0)
                        return r;
                mark = i;
                skip_blanks(line, len, &i);
        }
        if (i == mark) /* no blank before the value */
                return -EINVAL;
        if ((r = token(line, len, &i, tok, sizeof(tok))) < 0 ||
            (r = parse_float(tok, &s.value)) < 0)
                return r;
        skip_blanks(line, len, &i);
        if (i < len) {
                if ((r = token(line, len, &i, tok, sizeof(tok))) < 0 ||
                    (r = parse_timestamp(tok, &s.timestamp_ms)) < 0)
                        return r;
                s.has_timestamp = true;
                skip_blanks(line, len, &i);
                if (i < len)
                        return -EINVAL;
        }
        *out = s;
        return 1;
}

const char *prom_parsed_label(const struct prom_parsed *s, const char *name)
{
        for (size_t i = 0; i < s->nlabels; i++)
                if (strcmp(s->labels[i].name, name) == 0)
                        return s->labels[i].value;
        return NULL;
}

int prom_family_u64(struct buf *b, const char *name, const char *type, const char *help, uint64_t v)
{
        int r = prom_family(b, name, type, help);

        return r < 0 ? r : prom_sample_u64(b, name, NULL, 0, v);
}

int prom_family_by_label(struct buf *b, const char *name, const char *type, const char *help,
                         const char *label, const char *const *values, const uint64_t *v, size_t n,
                         bool zeros)
{
        int r = prom_family(b, name, type, help);

        for (size_t i = 0; r == 0 && i < n; i++) {
                struct prom_label l = {label, values[i]};

                if (zeros || v[i])
                        r = prom_sample_u64(b, name, &l, 1, v[i]);
        }
        return r;
}
