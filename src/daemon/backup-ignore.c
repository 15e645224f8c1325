/* gitignore patterns for backups (backup-ignore.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/backup-ignore.h"

#define NONE ((size_t)-1)

/* The bracket expression at glob[*i] ('[' there) against ch: 1 match, 0 no match, -1
 * malformed (no closing ']'). *i is left after the ']'. */
static int bracket(const char *g, size_t glen, size_t *i, unsigned char ch)
{
        static const struct {
                const char *name;
                int (*fn)(int);
        } classes[] = {{"alnum", isalnum}, {"alpha", isalpha}, {"blank", isblank},
                       {"cntrl", iscntrl}, {"digit", isdigit}, {"graph", isgraph},
                       {"lower", islower}, {"print", isprint}, {"punct", ispunct},
                       {"space", isspace}, {"upper", isupper}, {"xdigit", isxdigit}};
        size_t p = *i + 1;
        bool neg = false, hit = false, first = true;

        if (p < glen && (g[p] == '!' || g[p] == '^')) {
                neg = true;
                p++;
        }
        for (;; first = false) {
                unsigned char lo, hi;

                if (p >= glen)
                        return -1;
                if (g[p] == ']' && !first)
                        break;
                if (g[p] == '[' && p + 1 < glen && g[p + 1] == ':') {
                        const char *end = memchr(g + p + 2, ':', glen - p - 2);
                        size_t k, nl;

                        if (!end || (size_t)(end - g) + 1 >= glen || end[1] != ']')
                                return -1;
                        nl = (size_t)(end - (g + p + 2));
                        for (k = 0; k < sizeof(classes) / sizeof(classes[0]); k++)
                                if (strlen(classes[k].name) == nl &&
                                    memcmp(classes[k].name, g + p + 2, nl) == 0)
                                        break;
                        if (k == sizeof(classes) / sizeof(classes[0]))
                                return -1;
                        if (classes[k].fn(ch))
                                hit = true;
                        p = (size_t)(end - g) + 2;
                        continue;
                }
                if (g[p] == '\\' && p + 1 < glen)
                        p++;
                lo = (unsigned char)g[p++];
                hi = lo;
                if (p + 1 < glen && g[p] == '-' && g[p + 1] != ']') {
                        p++;
                        if (g[p] == '\\' && p + 1 < glen)
                                p++;
                        hi = (unsigned char)g[p++];
                }
                if (ch >= lo && ch <= hi)
                        hit = true;
        }
        *i = p + 1;
        return (hit != neg) && ch != '/';
}

bool ignore_glob_match(const char *g, size_t glen, const char *s, size_t slen)
{
        size_t pi = 0, si = 0, star_p = NONE, star_s = 0;

        /* Left to right; a mismatch after a '*' resumes one character further from that
         * star (the single-star backtrack: what follows the last star never needs an
         * earlier star to take more, since every other token matches one character). */
        while (si < slen) {
                if (pi < glen && g[pi] == '*') {
                        while (pi < glen && g[pi] == '*')
                                pi++;
                        star_p = pi;
                        star_s = si;
                        continue;
                }
                if (pi < glen && s[si] != '/') {
                        size_t next = pi;
                        int m;

                        if (g[pi] == '?') {
                                m = 1;
                                next = pi + 1;
                        } else if (g[pi] == '[') {
                                m = bracket(g, glen, &next, (unsigned char)s[si]);
                                if (m < 0)
                                        return false;
                        } else {
                                if (g[pi] == '\\' && pi + 1 < glen)
                                        next++;
                                m = g[next] == s[si];
                                next++;
                        }
                        if (m) {
                                pi = next;
                                si++;
                                continue;
                        }
                }
                if (star_p == NONE || s[star_s] == '/')
                        return false;
                pi = star_p;
                si = ++star_s;
        }
        while (pi < glen && g[pi] == '*')
                pi++;
        return pi == glen;
}

/* The segment of p (length n) starting at *off: its length, *off moved past its '/'. */
static size_t next_seg(const char *p, size_t n, size_t *off, const char **ret)
{
        const char *s = p + *off;
        const char *e = memchr(s, '/', n - *off);
        size_t len = e ? (size_t)(e - s) : n - *off;

        *ret = s;
        *off += len + (e ? 1 : 0);
        return len;
}

static bool is_dstar(const char *s, size_t n)
{
        return n == 2 && s[0] == '*' && s[1] == '*';
}

/* An anchored glob (segments separated by '/', "**" a segment matching any number of
 * path segments) against path. The same single backtrack as ignore_glob_match, one level
 * up: a "**" is to segments what '*' is to characters. */
static bool path_match(const char *g, size_t glen, const char *path, size_t plen)
{
        size_t gp = 0, sp = 0, star_g = NONE, star_s = 0;
        const char *gs, *ss;
        size_t go, gl, so, sl;

        while (sp < plen) {
                if (gp < glen) {
                        go = gp;
                        gl = next_seg(g, glen, &go, &gs);
                        if (is_dstar(gs, gl)) {
                                gp = go;
                                star_g = gp;
                                star_s = sp;
                                continue;
                        }
                        so = sp;
                        sl = next_seg(path, plen, &so, &ss);
                        if (ignore_glob_match(gs, gl, ss, sl)) {
                                gp = go;
                                sp = so;
                                continue;
                        }
                }
                if (star_g == NONE)
                        return false;
                /* the last "**" takes one more segment */
                gp = star_g;
                next_seg(path, plen, &star_s, &ss);
                sp = star_s;
        }
        while (gp < glen) {
                go = gp;
                gl = next_seg(g, glen, &go, &gs);
                if (!is_dstar(gs, gl))
                        return false;
                gp = go;
        }
        return true;
}

int ignore_pattern_check(const char *pat, size_t len, struct cella_error *err)
{
        int show = len < 100 ? (int)len : 100; /* pat is not NUL-terminated */
        size_t i = 0;

        if (len == 0)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "an exclude pattern is empty");
        if (len > CELLA_BACKUP_PATTERN_MAX)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "exclude pattern '%.*s...' is longer than %d bytes", 40, pat,
                                       CELLA_BACKUP_PATTERN_MAX);
        for (size_t k = 0; k < len; k++)
                if ((unsigned char)pat[k] < 0x20 || pat[k] == 0x7f)
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "exclude pattern '%.*s' has a control "
                                               "character",
                                               show, pat);
        if (pat[0] == '!')
                i = 1;
        while (i < len && pat[i] == '/')
                i++;
        while (len > i && pat[len - 1] == '/')
                len--;
        if (i >= len)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "exclude pattern '%.*s' names no file", show, pat);
        for (; i < len; i++) {
                if (pat[i] == '\\') {
                        if (i + 1 >= len)
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "exclude pattern '%.*s' ends with '\\'",
                                                       show, pat);
                        i++;
                } else if (pat[i] == '[') {
                        size_t j = i;
                        if (bracket(pat, len, &j, 'a') < 0)
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "exclude pattern '%.*s' has a '[' "
                                                       "without its ']' (or an unknown "
                                                       "[:class:])",
                                                       show, pat);
                        i = j - 1;
                } else if (pat[i] == '/' && i + 1 < len && pat[i + 1] == '/') {
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "exclude pattern '%.*s' has an empty "
                                               "component ('//')",
                                               show, pat);
                }
        }
        return 0;
}

int ignore_list_init(struct ignore_list *l, const char *base, size_t base_len)
{
        memset(l, 0, sizeof(*l));
        l->base = malloc(base_len + 1);
        if (!l->base)
                return -ENOMEM;
        memcpy(l->base, base, base_len);
        l->base[base_len] = '\0';
        l->base_len = base_len;
        return 0;
}

void ignore_list_free(struct ignore_list *l)
{
        for (size_t i = 0; i < l->n; i++)
                free(l->v[i].glob);
        free(l->v);
        free(l->base);
        memset(l, 0, sizeof(*l));
}

int ignore_list_add(struct ignore_list *l, const char *pat, size_t len, struct cella_error *err)
{
        struct ignore_pattern p = {0};
        size_t i = 0;

        if (ignore_pattern_check(pat, len, err) < 0)
                return -EINVAL;
        if (pat[0] == '!') {
                p.negate = true;
                i = 1;
        }
        if (len > i + 1 && pat[len - 1] == '/') {
                p.dir_only = true;
                while (len > i + 1 && pat[len - 1] == '/')
                        len--;
        }
        if (pat[i] == '/') {
                p.anchored = true;
                while (i < len && pat[i] == '/')
                        i++;
        }
        if (memchr(pat + i, '/', len - i))
                p.anchored = true;
        /* "**" followed by '/' at the start is "at any depth": the same as a pattern
         * without a slash when nothing else of it has one */
        while (p.anchored && len - i > 3 && memcmp(pat + i, "**/", 3) == 0 &&
               !memchr(pat + i + 3, '/', len - i - 3)) {
                i += 3;
                p.anchored = false;
        }
        if (l->n == l->cap) {
                size_t cap = l->cap ? l->cap * 2 : 8;
                void *v = realloc(l->v, cap * sizeof(*l->v));
                if (!v)
                        return -ENOMEM;
                l->v = v;
                l->cap = cap;
        }
        p.len = len - i;
        /* A trailing "**" is what is inside its directory, not the directory itself:
         * a "*" segment is added after it, one segment at least. */
        bool trail = p.anchored && ((p.len == 2 && memcmp(pat + i, "**", 2) == 0) ||
                                    (p.len > 2 && memcmp(pat + len - 3, "/**", 3) == 0));
        p.glob = malloc(p.len + 3);
        if (!p.glob)
                return -ENOMEM;
        memcpy(p.glob, pat + i, p.len);
        if (trail) {
                memcpy(p.glob + p.len, "/*", 2);
                p.len += 2;
        }
        p.glob[p.len] = '\0';
        l->v[l->n++] = p;
        return 0;
}

int ignore_list_parse(struct ignore_list *l, const char *text, size_t len)
{
        size_t pos = 0;
        int added = 0;

        while (pos < len) {
                const char *line = text + pos;
                const char *nl = memchr(line, '\n', len - pos);
                size_t n = nl ? (size_t)(nl - line) : len - pos;
                char buf[CELLA_BACKUP_PATTERN_MAX + 1];
                size_t o = 0;

                pos += n + (nl ? 1 : 0);
                if (n > 0 && line[n - 1] == '\r')
                        n--;
                /* trailing spaces go unless escaped */
                while (n > 0 && line[n - 1] == ' ' && !(n > 1 && line[n - 2] == '\\'))
                        n--;
                if (n == 0 || line[0] == '#')
                        continue;
                if (n > CELLA_BACKUP_PATTERN_MAX)
                        return -E2BIG;
                /* "\#x", "\!x" and a final "\ " stay as they are: the glob's escapes */
                memcpy(buf + o, line, n);
                o += n;
                if (memchr(buf, '\0', o))
                        continue;
                struct cella_error e = {0};
                int r = ignore_list_add(l, buf, o, &e);
                if (r == -ENOMEM)
                        return r;
                if (r == 0)
                        added++;
        }
        return added;
}

int ignore_list_match(const struct ignore_list *l, const char *path, size_t len, bool is_dir)
{
        const char *rel = path, *base;
        size_t rl = len, bl;

        if (l->base_len) {
                if (len <= l->base_len || memcmp(path, l->base, l->base_len) != 0 ||
                    path[l->base_len] != '/')
                        return -1;
                rel = path + l->base_len + 1;
                rl = len - l->base_len - 1;
        }
        base = memrchr(rel, '/', rl);
        base = base ? base + 1 : rel;
        bl = rl - (size_t)(base - rel);
        for (size_t i = l->n; i-- > 0;) {
                const struct ignore_pattern *p = &l->v[i];

                if (p->dir_only && !is_dir)
                        continue;
                if (p->anchored ? path_match(p->glob, p->len, rel, rl)
                                : ignore_glob_match(p->glob, p->len, base, bl))
                        return p->negate ? 0 : 1;
        }
        return -1;
}
