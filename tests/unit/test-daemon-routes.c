/* The API's route table and its matcher (src/daemon/api-routes.h): every route documented
 * in docs/api.md matches its own entry with the right captures and every entry is
 * documented; unknown paths are 404 (with the captures the dispatcher checks first) and
 * known paths with another method 405, as the API answered before it had a table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/api-handlers.h"
#include "daemon/api-routes.h"
#include "daemon/metrics.h"

static struct api_match match(const char *method, const char *path)
{
        struct api_match m;

        api_route_match(api_routes, api_routes_count, method, path, &m);
        return m;
}

/* The captures of m as "name=value,name=value". */
static const char *caps(const struct api_match *m)
{
        static char out[1024];
        size_t o = 0;

        out[0] = '\0';
        for (size_t i = 0; i < m->n; i++)
                o += (size_t)snprintf(out + o, sizeof(out) - o, "%s%.*s=%.*s", i ? "," : "",
                                      (int)m->cap[i].name_len, m->cap[i].name, (int)m->cap[i].len,
                                      m->cap[i].value);
        return out;
}

static void expect(const char *method, const char *path, int status, api_handler h,
                   const char *captures)
{
        struct api_match m = match(method, path);

        if (m.status != status || (h && (!m.route || m.route->handler != h)) ||
            strcmp(caps(&m), captures) != 0)
                fail_msg("%s %s: status %d, route %s, captures '%s'; want %d, '%s'", method, path,
                         m.status, m.route ? m.route->pattern : "(none)", caps(&m), status,
                         captures);
        if (status == 404)
                assert_null(m.route);
        else
                assert_non_null(m.route);
}

/* Every route, by hand: the handler and the captures. */
static void test_routes(void **state)
{
        (void)state;
        expect("GET", "/v1/health", 200, api_health, "");
        expect("HEAD", "/v1/health", 200, api_health, "");
        expect("GET", "/", 200, api_console_root, "");
        expect("HEAD", "/", 200, api_console_root, "");
        expect("GET", "/console", 200, api_console, "");
        expect("GET", "/console/", 200, api_console, "file=");
        expect("GET", "/console/assets/a.js", 200, api_console, "file=assets/a.js");
        expect("HEAD", "/console/index.html", 200, api_console, "file=index.html");
        expect("POST", "/console/index.html", 405, NULL, "file=index.html");
        expect("PUT", "/", 405, NULL, "");
        expect("GET", "/v1/sandboxes", 200, api_sandboxes_list, "");
        expect("PUT", "/v1/sandboxes/box", 200, api_sandbox_put, "id=box");
        expect("GET", "/v1/sandboxes/box", 200, api_sandbox_get, "id=box");
        expect("HEAD", "/v1/sandboxes/box", 200, api_sandbox_get, "id=box");
        expect("DELETE", "/v1/sandboxes/box", 200, api_sandbox_delete, "id=box");
        expect("POST", "/v1/sandboxes/box/sleep", 200, api_sandbox_sleep, "id=box");
        expect("GET", "/v1/sandboxes/box/sleep", 405, NULL, "id=box");
        expect("POST", "/v1/sandboxes/box/exec", 200, api_exec, "id=box");
        expect("POST", "/v1/sandboxes/box/env", 200, api_env, "id=box");
        expect("POST", "/v1/sandboxes/box/sessions", 200, api_sessions_create, "id=box");
        expect("GET", "/v1/sandboxes/box/sessions", 200, api_sessions_list, "id=box");
        expect("GET", "/v1/sandboxes/box/sessions/s1", 200, api_session_get, "id=box,sid=s1");
        expect("DELETE", "/v1/sandboxes/box/sessions/s1", 200, api_session_delete, "id=box,sid=s1");
        expect("POST", "/v1/sandboxes/box/sessions/s1/env", 200, api_session_env, "id=box,sid=s1");
        expect("GET", "/v1/sandboxes/box/files", 200, api_files_raw, "id=box");
        expect("HEAD", "/v1/sandboxes/box/files", 200, api_files_raw, "id=box");
        expect("PUT", "/v1/sandboxes/box/files", 200, api_files_raw, "id=box");
        expect("DELETE", "/v1/sandboxes/box/files", 200, api_files_raw, "id=box");
        expect("POST", "/v1/sandboxes/box/files/read", 200, api_files_read, "id=box");
        expect("POST", "/v1/sandboxes/box/files/write", 200, api_files_write, "id=box");
        expect("POST", "/v1/sandboxes/box/files/mkdir", 200, api_files_mkdir, "id=box");
        expect("POST", "/v1/sandboxes/box/files/move", 200, api_files_move, "id=box");
        expect("GET", "/v1/sandboxes/box/files/list", 200, api_files_list, "id=box");
        expect("HEAD", "/v1/sandboxes/box/files/exists", 200, api_files_exists, "id=box");
        expect("POST", "/v1/sandboxes/box/files/watch", 200, api_watch, "id=box");
        expect("POST", "/v1/sandboxes/box/processes", 200, api_process_start, "id=box");
        expect("GET", "/v1/sandboxes/box/processes", 200, api_process_list, "id=box");
        expect("DELETE", "/v1/sandboxes/box/processes", 200, api_process_kill_all, "id=box");
        expect("GET", "/v1/sandboxes/box/processes/p1", 200, api_process_get, "id=box,pid=p1");
        expect("DELETE", "/v1/sandboxes/box/processes/p1", 200, api_process_kill, "id=box,pid=p1");
        expect("GET", "/v1/sandboxes/box/processes/p1/logs", 200, api_process_logs,
               "id=box,pid=p1");
        expect("HEAD", "/v1/sandboxes/box/processes/p1/stream", 200, api_process_stream,
               "id=box,pid=p1");
        expect("POST", "/v1/sandboxes/box/processes/p1/waitForLog", 200, api_process_wait_log,
               "id=box,pid=p1");
        expect("POST", "/v1/sandboxes/box/processes/p1/waitForPort", 200, api_process_wait_port,
               "id=box,pid=p1");
        expect("POST", "/v1/sandboxes/box/processes/p1/waitForExit", 200, api_process_wait_exit,
               "id=box,pid=p1");
        expect("GET", "/v1/sandboxes/box/contexts", 200, api_contexts_list, "id=box");
        expect("POST", "/v1/sandboxes/box/contexts", 200, api_contexts_create, "id=box");
        expect("DELETE", "/v1/sandboxes/box/contexts/c1", 200, api_context_delete, "id=box,cid=c1");
        expect("POST", "/v1/sandboxes/box/code", 200, api_code, "id=box");
        expect("GET", "/v1/sandboxes/box/pty", 200, api_pty, "id=box");
        expect("POST", "/v1/sandboxes/box/git/checkout", 200, api_git_checkout, "id=box");
        expect("POST", "/v1/sandboxes/box/ports", 200, api_ports_expose, "id=box");
        expect("GET", "/v1/sandboxes/box/ports", 200, api_ports_list, "id=box");
        expect("DELETE", "/v1/sandboxes/box/ports/8080", 200, api_port_unexpose,
               "id=box,port=8080");
        expect("GET", "/v1/sandboxes/box/ws/8080", 200, api_ws, "id=box,wsport=8080");
        expect("GET", "/v1/sandboxes/box/ws/8080/a/b", 200, api_ws, "id=box,wsport=8080/a/b");
        expect("GET", "/v1/images", 200, api_images_list, "");
        expect("DELETE", "/v1/images/img", 200, api_images_delete, "image=img");
        expect("POST", "/v1/images/img/build", 200, api_images_build, "image=img");
        expect("POST", "/v1/images/img/import", 200, api_images_import, "image=img");
}

/* A route's own flags: only health is answered before auth, only PUT of a sandbox takes
 * its id as sent. */
static void test_flags(void **state)
{
        (void)state;
        for (size_t i = 0; i < api_routes_count; i++) {
                const struct api_route *r = &api_routes[i];

                assert_int_equal(!!(r->flags & API_ROUTE_PUBLIC),
                                 r->handler == api_health || r->handler == api_console_root ||
                                         r->handler == api_console);
                assert_int_equal(!!(r->flags & API_ROUTE_WS_BEARER), r->handler == api_pty);
                assert_int_equal(!!(r->flags & API_ROUTE_RAW_ID), r->handler == api_sandbox_put);
        }
}

/* Each route is reached by each of its methods (the same method and pattern twice would
 * leave one unreachable); its own pattern, braces and all, is a path it matches. */
static void test_reachable(void **state)
{
        (void)state;
        for (size_t i = 0; i < api_routes_count; i++) {
                char mi[64], *save = NULL;

                snprintf(mi, sizeof(mi), "%s", api_routes[i].methods);
                for (char *t = strtok_r(mi, " ", &save); t; t = strtok_r(NULL, " ", &save)) {
                        struct api_match m = match(t, api_routes[i].pattern);

                        if (m.route != &api_routes[i])
                                fail_msg("%s %s is not reachable", t, api_routes[i].pattern);
                }
        }
}

/* Unknown paths and methods: what the API answered before (the dispatcher checks the
 * captures first: a bad sandbox name, process or session id is answered as such). */
static void test_unknown(void **state)
{
        (void)state;
        expect("GET", "/x", 404, NULL, "");
        expect("GET", "/consolex", 404, NULL, "");
        expect("GET", "", 404, NULL, "");
        expect("GET", "*", 404, NULL, "");
        expect("GET", "v1/health", 404, NULL, "");
        expect("GET", "//v1/health", 404, NULL, "");
        expect("GET", "/v1", 404, NULL, "");
        expect("GET", "/v1/", 404, NULL, "");
        expect("GET", "/v1/healthz", 404, NULL, "");
        expect("GET", "/v1/health/", 404, NULL, "");
        expect("GET", "/v2/sandboxes", 404, NULL, "");
        expect("GET", "/v1/sandboxesx", 404, NULL, "");
        expect("GET", "/v1/sandboxes/box/nope", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/exec/x", 404, NULL, "id=box");
        expect("POST", "/v1/sandboxes/box/files/", 404, NULL, "id=box");
        expect("POST", "/v1/sandboxes/box/files/readx", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/processesx", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/processes/p1/", 404, NULL, "id=box,pid=p1");
        expect("GET", "/v1/sandboxes/box/processes/p1/nope", 404, NULL, "id=box,pid=p1");
        expect("GET", "/v1/sandboxes/box/processes/p1/logs/x", 404, NULL, "id=box,pid=p1");
        expect("GET", "/v1/sandboxes/box/sessionsx", 404, NULL, "id=box");
        expect("POST", "/v1/sandboxes/box/sessions/s1/x", 404, NULL, "id=box,sid=s1");
        expect("GET", "/v1/sandboxes/box/contextsx", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/ws", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/portsx", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/git", 404, NULL, "id=box");
        expect("GET", "/v1/images/img/x", 404, NULL, "image=img");
        expect("POST", "/v1/images/img/build/x", 404, NULL, "image=img");

        expect("POST", "/v1/health", 405, api_health, "");
        expect("POST", "/v1/sandboxes", 405, api_sandboxes_list, "");
        expect("POST", "/v1/sandboxes/box", 405, api_sandbox_put, "id=box");
        expect("GET", "/v1/sandboxes/box/exec", 405, api_exec, "id=box");
        expect("GET", "/v1/sandboxes/box/env", 405, api_env, "id=box");
        expect("PUT", "/v1/sandboxes/box/sessions", 405, api_sessions_create, "id=box");
        expect("GET", "/v1/sandboxes/box/sessions/s1/env", 405, api_session_env, "id=box,sid=s1");
        expect("POST", "/v1/sandboxes/box/files", 405, api_files_raw, "id=box");
        expect("GET", "/v1/sandboxes/box/files/read", 405, api_files_read, "id=box");
        expect("POST", "/v1/sandboxes/box/files/list", 405, api_files_list, "id=box");
        expect("GET", "/v1/sandboxes/box/files/watch", 405, api_watch, "id=box");
        expect("PUT", "/v1/sandboxes/box/processes/p1", 405, api_process_get, "id=box,pid=p1");
        expect("POST", "/v1/sandboxes/box/processes/p1/logs", 405, api_process_logs,
               "id=box,pid=p1");
        expect("GET", "/v1/sandboxes/box/processes/p1/waitForExit", 405, api_process_wait_exit,
               "id=box,pid=p1");
        /* HEAD is not GET everywhere: contexts, pty and ws take GET only, as before */
        expect("HEAD", "/v1/sandboxes/box/contexts", 405, api_contexts_list, "id=box");
        expect("GET", "/v1/sandboxes/box/contexts/c1", 405, api_context_delete, "id=box,cid=c1");
        expect("HEAD", "/v1/sandboxes/box/pty", 405, api_pty, "id=box");
        expect("POST", "/v1/sandboxes/box/ws/80", 405, api_ws, "id=box,wsport=80");
        expect("DELETE", "/v1/sandboxes/box/ports", 405, api_ports_expose, "id=box");
        expect("GET", "/v1/sandboxes/box/ports/80", 405, api_port_unexpose, "id=box,port=80");
        expect("GET", "/v1/sandboxes/box/git/checkout", 405, api_git_checkout, "id=box");
        expect("POST", "/v1/images", 405, api_images_list, "");
        expect("GET", "/v1/images/img", 405, api_images_delete, "image=img");
        expect("GET", "/v1/images/img/import", 405, api_images_import, "image=img");
        /* methods are case-sensitive */
        expect("get", "/v1/health", 405, api_health, "");
        expect("", "/v1/sandboxes", 405, api_sandboxes_list, "");
}

/* Empty segments, trailing slashes and what percent-decoding leaves: the matcher sees the
 * decoded path, so "a%2Fb" is two segments, as it was. Empty parameters are captured (the
 * dispatcher refuses them with the parameter's own error). */
static void test_edges(void **state)
{
        (void)state;
        expect("GET", "/v1/sandboxes/", 200, api_sandbox_get, "id=");
        expect("PUT", "/v1/sandboxes/", 200, api_sandbox_put, "id=");
        expect("POST", "/v1/sandboxes//exec", 200, api_exec, "id=");
        expect("GET", "/v1/sandboxes/box/", 404, NULL, "id=box");
        expect("POST", "/v1/sandboxes/box/exec/", 404, NULL, "id=box");
        expect("GET", "/v1/sandboxes/box/processes/", 200, api_process_get, "id=box,pid=");
        expect("GET", "/v1/sandboxes/box/sessions/", 200, api_session_get, "id=box,sid=");
        expect("DELETE", "/v1/sandboxes/box/contexts/", 200, api_context_delete, "id=box,cid=");
        expect("DELETE", "/v1/sandboxes/box/contexts/a/b", 200, api_context_delete,
               "id=box,cid=a/b");
        expect("DELETE", "/v1/sandboxes/box/ports/", 200, api_port_unexpose, "id=box,port=");
        expect("DELETE", "/v1/sandboxes/box/ports/80/x", 200, api_port_unexpose,
               "id=box,port=80/x");
        expect("GET", "/v1/sandboxes/box/ws/", 200, api_ws, "id=box,wsport=");
        expect("GET", "/v1/sandboxes/box/ws/80/", 200, api_ws, "id=box,wsport=80/");
        expect("DELETE", "/v1/images/", 200, api_images_delete, "image=");
        /* "/v1/sandboxes/a%2Fb/exec" decoded */
        expect("POST", "/v1/sandboxes/a/b/exec", 404, NULL, "id=a");
        /* a '%' that was not an escape stays in the name (the name check refuses it) */
        expect("POST", "/v1/sandboxes/a%zz/exec", 200, api_exec, "id=a%zz");
        expect("GET", "/v1/sandboxes/Box.Name/files/list", 200, api_files_list, "id=Box.Name");
}

/* Every row "| METHOD | /v1/... |" of docs/api.md's route table matches an entry with that
 * method, each parameter captured; every entry's methods but HEAD are documented. */
static void test_documented(void **state)
{
        char path[4096], line[4096];
        bool seen[128] = {false};
        FILE *f;
        int rows = 0;

        (void)state;
        assert_true(api_routes_count <= sizeof(seen) / sizeof(seen[0]));
        /* every route has counters of its own in GET /metrics */
        assert_true(api_routes_count <= METRICS_ROUTES_MAX);
        for (size_t i = 0; i < api_routes_count; i++) {
                const char *ms = api_routes[i].methods;
                size_t n = 1;

                for (const char *c = ms; *c; c++)
                        n += *c == ' ';
                assert_true(n <= METRICS_ROUTE_METHODS);
        }
        snprintf(path, sizeof(path), "%s/docs/api.md", CELLA_SOURCE_DIR);
        f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f)) {
                char method[16], pat[1024], req[1024];
                const char *sample;
                size_t o = 0;
                struct api_match m;

                if (sscanf(line, "| %15[A-Z] | %1023[^ |] |", method, pat) != 2 ||
                    (strncmp(pat, "/v1/", 4) != 0 && strcmp(pat, "/mcp") != 0 &&
                     strcmp(pat, "/metrics") != 0 && strcmp(pat, "/") != 0 &&
                     strncmp(pat, "/console", 8) != 0))
                        continue;
                /* the path without the query and optional parts; {x} become samples */
                pat[strcspn(pat, "?[")] = '\0';
                for (const char *p = pat; *p && o < sizeof(req) - 16;) {
                        if (*p != '{') {
                                req[o++] = *p++;
                                continue;
                        }
                        sample = strncmp(p, "{port}", 6) == 0 ? "8080" : "x1";
                        o += (size_t)snprintf(req + o, sizeof(req) - o, "%s", sample);
                        p = strchr(p, '}') + 1;
                }
                req[o] = '\0';
                m = match(method, req);
                if (m.status != 200)
                        fail_msg("documented %s %s (%s): %d", method, pat, req, m.status);
                for (size_t i = 0; i < m.n; i++)
                        assert_true(m.cap[i].len > 0);
                seen[m.route - api_routes] = true;
                rows++;
        }
        fclose(f);
        assert_true(rows >= 40);
        for (size_t i = 0; i < api_routes_count; i++)
                if (!seen[i] && strcmp(api_routes[i].methods, "HEAD") != 0)
                        fail_msg("%s %s is not in docs/api.md", api_routes[i].methods,
                                 api_routes[i].pattern);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_routes),    cmocka_unit_test(test_flags),
                cmocka_unit_test(test_reachable), cmocka_unit_test(test_unknown),
                cmocka_unit_test(test_edges),     cmocka_unit_test(test_documented),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
