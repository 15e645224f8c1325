/* Fuzz the API's route matcher (src/daemon/api-routes.h) over the real route table. The
 * input is "METHOD PATH": up to the first space the method, the rest the (decoded) path,
 * cut at a NUL as http_request_path never holds one.
 *
 * Invariants: the status is 200, 404 or 405, with a route exactly when it is not 404; a
 * 200 route takes the method, a 405 has no route of that path that does; on 200 and 405
 * the route's pattern with its captures put back is the path, byte for byte; captures lie
 * inside the path in order, a one-segment one holds no '/', at most API_ROUTE_MAX_PARAMS;
 * matching is deterministic. */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "daemon/api-routes.h"
#include "fuzz.h"

static bool takes(const char *methods, const char *m)
{
        size_t ml = strlen(m);

        for (const char *s = methods; *s;) {
                size_t n = strcspn(s, " ");

                if (n == ml && memcmp(s, m, n) == 0)
                        return true;
                s += n + (s[n] == ' ');
        }
        return false;
}

/* The route's pattern with m's captures in place of its parameters. */
static void rebuild(const struct api_match *m, char *out, size_t size)
{
        const char *p = m->route->pattern;
        size_t o = 0, k = 0;

        while (*p && o + 1 < size) {
                if (*p == '{') {
                        const char *close = strchr(p, '}');

                        FUZZ_CHECK(close && k < m->n);
                        FUZZ_CHECK(m->cap[k].name == p + 1);
                        o += (size_t)snprintf(out + o, size - o, "%.*s", (int)m->cap[k].len,
                                              m->cap[k].value);
                        k++;
                        p = close + 1;
                } else {
                        out[o++] = *p++;
                }
        }
        out[o < size ? o : size - 1] = '\0';
        FUZZ_CHECK(k == m->n);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static char buf[8192], again[8192];
        struct api_match m, m2;
        const char *method, *path, *sp;
        const char *prev_end;

        if (size >= sizeof(buf))
                size = sizeof(buf) - 1;
        memcpy(buf, data, size);
        buf[size] = '\0';
        sp = strchr(buf, ' ');
        if (sp) {
                buf[sp - buf] = '\0';
                method = buf;
                path = sp + 1;
        } else {
                method = "GET";
                path = buf;
        }

        api_route_match(api_routes, api_routes_count, method, path, &m);
        FUZZ_CHECK(m.status == 200 || m.status == 404 || m.status == 405);
        FUZZ_CHECK((m.route != NULL) == (m.status != 404));
        FUZZ_CHECK(m.n <= API_ROUTE_MAX_PARAMS);
        prev_end = path;
        for (size_t i = 0; i < m.n; i++) {
                const struct api_capture *c = &m.cap[i];
                bool rest = c->name[c->name_len] == '*';

                FUZZ_CHECK(c->value >= prev_end && c->value + c->len <= path + strlen(path));
                FUZZ_CHECK(rest ? c->value[c->len] == '\0' : !memchr(c->value, '/', c->len));
                FUZZ_CHECK(api_match_param(&m, "") == NULL);
                prev_end = c->value + c->len;
        }
        if (m.route) {
                FUZZ_CHECK(takes(m.route->methods, method) == (m.status == 200));
                rebuild(&m, again, sizeof(again));
                FUZZ_CHECK(strcmp(again, path) == 0);
        }
        if (m.status == 405)
                for (size_t i = 0; i < api_routes_count; i++)
                        if (strcmp(api_routes[i].pattern, m.route->pattern) == 0)
                                FUZZ_CHECK(!takes(api_routes[i].methods, method));

        api_route_match(api_routes, api_routes_count, method, path, &m2);
        FUZZ_CHECK(m2.status == m.status && m2.route == m.route && m2.n == m.n);
        for (size_t i = 0; i < m.n; i++)
                FUZZ_CHECK(m2.cap[i].value == m.cap[i].value && m2.cap[i].len == m.cap[i].len);
        return 0;
}
