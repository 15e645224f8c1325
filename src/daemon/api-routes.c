/* The API's route table (docs/api.md) and the matcher that walks it (api-routes.h). */
#include <string.h>

#include "daemon/api-handlers.h"
#include "daemon/api-routes.h"

#define SBX "/v1/sandboxes/{id}"

/* Every route of the API. Several routes may share a pattern (one per method); the order
 * matters only there: a 405 names the first route of its path. */
const struct api_route api_routes[] = {
        {"GET HEAD", "/v1/health", api_health, API_ROUTE_PUBLIC},
        /* the web console: static files, no token needed to load its login form */
        {"GET HEAD", "/", api_console_root, API_ROUTE_PUBLIC},
        {"GET HEAD", "/console", api_console, API_ROUTE_PUBLIC},
        {"GET HEAD", "/console/{file*}", api_console, API_ROUTE_PUBLIC},

        {"GET POST DELETE", "/mcp", api_mcp, 0},
        {"GET HEAD", "/metrics", api_metrics, API_ROUTE_ADMIN},
        {"GET HEAD", "/v1/cluster/nodes", api_cluster_nodes, API_ROUTE_ADMIN},
        {"POST", "/v1/cluster/drain", api_cluster_drain, API_ROUTE_ADMIN},

        {"POST", "/v1/keys", api_keys_create, API_ROUTE_ADMIN},
        {"GET HEAD", "/v1/keys", api_keys_list, API_ROUTE_ADMIN},
        {"DELETE", "/v1/keys/{key}", api_keys_delete, API_ROUTE_ADMIN},

        {"GET HEAD", "/v1/sandboxes", api_sandboxes_list, 0},
        {"PUT", SBX, api_sandbox_put, API_ROUTE_RAW_ID},
        {"GET HEAD", SBX, api_sandbox_get, 0},
        {"DELETE", SBX, api_sandbox_delete, 0},
        {"POST", SBX "/sleep", api_sandbox_sleep, 0},

        {"POST", SBX "/snapshots", api_snapshot_create, 0},
        {"GET HEAD", SBX "/snapshots", api_sandbox_snapshots, 0},
        {"POST", SBX "/fork", api_fork, 0},

        /* Backups are the admin's until they are kept per tenant (decision 0053): a
         * tenant's key could otherwise list and restore another tenant's. */
        {"POST", SBX "/backups", api_backup_create, 0},
        {"POST", SBX "/backups/{bid}/restore", api_backup_restore, 0},

        {"POST", SBX "/exec", api_exec, 0},
        {"POST", SBX "/env", api_env, 0},

        {"POST", SBX "/sessions", api_sessions_create, 0},
        {"GET HEAD", SBX "/sessions", api_sessions_list, 0},
        {"GET HEAD", SBX "/sessions/{sid}", api_session_get, 0},
        {"DELETE", SBX "/sessions/{sid}", api_session_delete, 0},
        {"POST", SBX "/sessions/{sid}/env", api_session_env, 0},

        {"GET HEAD PUT DELETE", SBX "/files", api_files_raw, 0},
        {"POST", SBX "/files/read", api_files_read, 0},
        {"POST", SBX "/files/write", api_files_write, 0},
        {"POST", SBX "/files/mkdir", api_files_mkdir, 0},
        {"POST", SBX "/files/move", api_files_move, 0},
        {"GET HEAD", SBX "/files/list", api_files_list, 0},
        {"GET HEAD", SBX "/files/exists", api_files_exists, 0},
        {"POST", SBX "/files/watch", api_watch, 0},

        {"POST", SBX "/processes", api_process_start, 0},
        {"GET HEAD", SBX "/processes", api_process_list, 0},
        {"DELETE", SBX "/processes", api_process_kill_all, 0},
        {"GET HEAD", SBX "/processes/{pid}", api_process_get, 0},
        {"DELETE", SBX "/processes/{pid}", api_process_kill, 0},
        {"GET HEAD", SBX "/processes/{pid}/logs", api_process_logs, 0},
        {"GET HEAD", SBX "/processes/{pid}/stream", api_process_stream, 0},
        {"POST", SBX "/processes/{pid}/waitForLog", api_process_wait_log, 0},
        {"POST", SBX "/processes/{pid}/waitForPort", api_process_wait_port, 0},
        {"POST", SBX "/processes/{pid}/waitForExit", api_process_wait_exit, 0},

        {"GET", SBX "/contexts", api_contexts_list, 0},
        {"POST", SBX "/contexts", api_contexts_create, 0},
        {"DELETE", SBX "/contexts/{cid*}", api_context_delete, 0},
        {"POST", SBX "/code", api_code, 0},

        {"GET", SBX "/pty", api_pty, API_ROUTE_WS_BEARER},
        {"POST", SBX "/git/checkout", api_git_checkout, 0},

        {"POST", SBX "/ports", api_ports_expose, 0},
        {"GET HEAD", SBX "/ports", api_ports_list, 0},
        {"DELETE", SBX "/ports/{port*}", api_port_unexpose, 0},
        {"GET", SBX "/ws/{wsport*}", api_ws, 0},

        {"GET HEAD", "/v1/images", api_images_list, 0},
        {"DELETE", "/v1/images/{image}", api_images_delete, API_ROUTE_ADMIN},
        {"POST", "/v1/images/{image}/build", api_images_build, API_ROUTE_ADMIN},
        {"POST", "/v1/images/{image}/import", api_images_import, API_ROUTE_ADMIN},

        {"GET HEAD", "/v1/snapshots", api_snapshots_list, 0},
        {"GET HEAD", "/v1/snapshots/{snap}", api_snapshot_get, 0},
        {"DELETE", "/v1/snapshots/{snap}", api_snapshot_delete, 0},

        {"GET HEAD", "/v1/backups", api_backups_list, 0},
        {"GET HEAD", "/v1/backups/{bid}", api_backup_get, 0},
        {"DELETE", "/v1/backups/{bid}", api_backup_delete, 0},
};
const size_t api_routes_count = sizeof(api_routes) / sizeof(api_routes[0]);

static bool method_in(const char *methods, const char *m)
{
        size_t ml = strlen(m);

        for (const char *s = methods; *s;) {
                size_t n = strcspn(s, " ");

                if (n == ml && memcmp(s, m, n) == 0)
                        return true;
                s += n;
                while (*s == ' ')
                        s++;
        }
        return false;
}

/* Walk pattern along path (both start with '/'). Returns whether the whole path matched;
 * *depth: segments matched; captures into c (*nc). */
static bool walk(const char *pattern, const char *path, size_t *depth, struct api_capture *c,
                 size_t *nc)
{
        const char *p = pattern, *s = path;

        *depth = 0;
        *nc = 0;
        while (*p == '/' && *s == '/') {
                size_t pl, sl;

                p++;
                s++;
                pl = strcspn(p, "/");
                sl = strcspn(s, "/");
                if (pl >= 2 && p[0] == '{' && p[pl - 1] == '}') {
                        bool rest = pl >= 3 && p[pl - 2] == '*';

                        if (*nc >= API_ROUTE_MAX_PARAMS)
                                return false;
                        c[*nc].name = p + 1;
                        c[*nc].name_len = pl - 2 - rest;
                        c[*nc].value = s;
                        c[*nc].len = rest ? strlen(s) : sl;
                        (*nc)++;
                        (*depth)++;
                        if (rest)
                                return true;
                } else {
                        if (pl != sl || memcmp(p, s, pl) != 0)
                                return false;
                        (*depth)++;
                }
                p += pl;
                s += sl;
        }
        return *p == '\0' && *s == '\0';
}

void api_route_match(const struct api_route *table, size_t n, const char *method, const char *path,
                     struct api_match *m)
{
        size_t best = 0;

        memset(m, 0, sizeof(*m));
        m->status = 404;
        for (size_t i = 0; i < n; i++) {
                struct api_capture c[API_ROUTE_MAX_PARAMS];
                size_t depth, nc;
                bool whole = walk(table[i].pattern, path, &depth, c, &nc);

                if (whole && method_in(table[i].methods, method)) {
                        m->status = 200;
                        m->route = &table[i];
                } else if (whole && m->status == 404) {
                        m->status = 405;
                        m->route = &table[i];
                } else if (whole || m->status != 404 || depth <= best) {
                        continue;
                } else {
                        best = depth; /* the deepest partial match so far (404) */
                }
                memcpy(m->cap, c, sizeof(c[0]) * nc);
                m->n = nc;
                if (m->status == 200)
                        return;
        }
}

const struct api_capture *api_match_param(const struct api_match *m, const char *name)
{
        size_t l = strlen(name);

        for (size_t i = 0; i < m->n; i++)
                if (m->cap[i].name_len == l && memcmp(m->cap[i].name, name, l) == 0)
                        return &m->cap[i];
        return NULL;
}
