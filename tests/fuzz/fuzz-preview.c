/* Fuzz the preview Host parser (src/daemon/preview.h), under the default domain and a
 * longer one, the same bytes as an X-Forwarded-Host value, and the request head built from
 * a fuzzed header list (with the Host its X-Forwarded-Host names, as the daemon does).
 *
 * Invariants: an accepted host gives a port in 1..65535, a valid sandbox name and a valid
 * token, and the URL label rebuilt from them parses back to the same target; a host that
 * is not preview-shaped is 0, a malformed one -EINVAL, nothing else. An X-Forwarded-Host
 * value gives what its first host, trimmed, gives, and that host. A request head never
 * holds a bare CR or LF except as line ends, so a header cannot be smuggled into it; it
 * never holds Authorization nor X-Cella-Cluster; with the Host from X-Forwarded-Host it
 * holds exactly one Host and one X-Forwarded-Host, both that host. */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/name.h"
#include "daemon/preview.h"
#include "fuzz.h"

static void check_host(const char *host, const char *domain)
{
        struct preview_target t, again;
        struct cella_error e = {0};
        char id[CELLA_NAME_MAX + 1], label[512];
        int r = preview_host_parse(host, domain, &t);

        FUZZ_CHECK(r == 0 || r == 1 || r == -EINVAL);
        if (r != 1)
                return;
        FUZZ_CHECK(t.port >= 1 && t.port <= 65535);
        FUZZ_CHECK(preview_token_valid(t.token));
        FUZZ_CHECK(sandbox_name_check(t.id, strlen(t.id), false, id, &e) == 0);
        snprintf(label, sizeof(label), "%d-%s-%s.%s", t.port, t.id, t.token, domain);
        FUZZ_CHECK(preview_host_parse(label, domain, &again) == 1);
        FUZZ_CHECK(again.port == t.port && strcmp(again.id, t.id) == 0 &&
                   strcmp(again.token, t.token) == 0);
}

static void check_forwarded(const char *value, const char *domain)
{
        struct preview_target t, again;
        char first[600], *host = NULL;
        size_t len;
        int r = preview_forwarded_host_parse(value, domain, &t, &host);

        FUZZ_CHECK(r == 0 || r == 1 || r == -EINVAL);
        FUZZ_CHECK((r == 1) == (host != NULL));
        value += strspn(value, " \t");
        len = strcspn(value, ",");
        while (len > 0 && (value[len - 1] == ' ' || value[len - 1] == '\t'))
                len--;
        memcpy(first, value, len);
        first[len] = '\0';
        FUZZ_CHECK(preview_host_parse(first, domain, &again) == r);
        if (r == 1) {
                FUZZ_CHECK(strcmp(host, first) == 0);
                FUZZ_CHECK(again.port == t.port && strcmp(again.id, t.id) == 0 &&
                           strcmp(again.token, t.token) == 0);
        }
        free(host);
}

/* How many lines of head are a "name: value" header, and is each such value want? */
static size_t count_header(const struct buf *b, const char *name, const char *want)
{
        size_t nl = strlen(name), n = 0;
        const char *p = b->data, *end = b->data + b->len;

        while (p < end) {
                const char *eol = memchr(p, '\n', (size_t)(end - p));
                size_t len = eol ? (size_t)(eol - p + 1) : (size_t)(end - p);

                if (len > nl && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
                        n++;
                        if (want) {
                                size_t wl = strlen(want);

                                FUZZ_CHECK(len == nl + 2 + wl + 2 && p[nl + 1] == ' ' &&
                                           memcmp(p + nl + 2, want, wl) == 0);
                        }
                }
                p += len;
        }
        return n;
}

static void check_head(const char *s, size_t len)
{
        const char *names[8], *values[8];
        char copy[1024];
        size_t n = 0, i = 0;
        struct buf b = BUF_INIT;
        enum preview_body body;

        if (len >= sizeof(copy))
                len = sizeof(copy) - 1;
        memcpy(copy, s, len);
        copy[len] = '\0';
        /* split at NUL-free '|' into name, value pairs */
        char *p = copy;
        while (p && n < 8) {
                char *bar = strchr(p, '|');

                if (bar)
                        *bar = '\0';
                if (i++ % 2 == 0)
                        names[n] = p;
                else
                        values[n++] = p;
                p = bar ? bar + 1 : NULL;
        }
        struct preview_headers h = {n, names, values};
        /* the daemon's X-Forwarded-Host form: its first header of that name */
        const char *xfh = NULL;
        char *fwd = NULL;
        struct preview_target t;
        bool tokens = true; /* names without ':', as the HTTP parser gives them */

        for (size_t k = 0; k < n; k++) {
                if (!xfh && strcasecmp(names[k], "X-Forwarded-Host") == 0)
                        xfh = values[k];
                if (strchr(names[k], ':'))
                        tokens = false;
        }
        if (preview_forwarded_host_parse(xfh, "localhost", &t, &fwd) != 1)
                FUZZ_CHECK(fwd == NULL);
        for (int pass = 0; pass < 2; pass++) {
                const char *over = pass ? fwd : NULL;

                if (pass && !fwd)
                        break;
                buf_reset(&b);
                if (preview_request_head(&b, "GET", "/", &h, "127.0.0.1", n ? values[0] : NULL,
                                         over, &body) != 0)
                        continue;
                for (size_t k = 0; k < b.len; k++)
                        if (b.data[k] == '\r')
                                FUZZ_CHECK(k + 1 < b.len && b.data[k + 1] == '\n');
                        else if (b.data[k] == '\n')
                                FUZZ_CHECK(k > 0 && b.data[k - 1] == '\r');
                if (!tokens)
                        continue;
                FUZZ_CHECK(count_header(&b, "Authorization", NULL) == 0);
                FUZZ_CHECK(count_header(&b, "X-Cella-Cluster", NULL) == 0);
                FUZZ_CHECK(count_header(&b, "X-Forwarded-Host", over) <= 1);
                if (over) {
                        FUZZ_CHECK(count_header(&b, "Host", over) == 1);
                        FUZZ_CHECK(count_header(&b, "X-Forwarded-Host", over) == 1);
                }
        }
        free(fwd);
        buf_reset(&b);
        if (preview_response_headers(&b, &h, len % 2) == 0)
                for (size_t k = 0; k < b.len; k++)
                        if (b.data[k] == '\n')
                                FUZZ_CHECK(k > 0 && b.data[k - 1] == '\r');
        buf_free(&b);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char host[600];

        if (size >= sizeof(host))
                size = sizeof(host) - 1;
        memcpy(host, data, size);
        host[size] = '\0';
        check_host(host, "localhost");
        check_host(host, "preview.example.com");
        check_forwarded(host, "localhost");
        check_forwarded(host, "preview.example.com");
        check_head((const char *)data, size);
        return 0;
}
