/* The handlers of the API's routes, one function per route of docs/api.md: what the
 * dispatcher's route table (api-routes.c) points at. Each is an api_handler
 * (api-service.h): it is called once the route, the method and the path's parameters are
 * checked, and answers the request. Handlers under /v1/sandboxes/{id}/ validate the rest
 * of the request first and only then reach the sandbox (api_req_find_sandbox() or
 * api_sandbox_for(), which call back once it runs), so a malformed request creates
 * nothing. Each handler file includes this for its own
 * prototypes and api-service.h for what it uses; none includes the dispatcher. */
#ifndef CELLA_DAEMON_API_HANDLERS_H
#define CELLA_DAEMON_API_HANDLERS_H

#include "daemon/api-service.h"

#define API_HANDLER(fn) void fn(struct api *a, struct http_request *req, const struct api_args *p)

/* api-sandboxes.c: /v1/health, /v1/sandboxes, /v1/sandboxes/{id} */
API_HANDLER(api_health);
API_HANDLER(api_sandboxes_list);
API_HANDLER(api_sandbox_put); /* p->raw: checked with the body's normalizeId */
API_HANDLER(api_sandbox_get);
API_HANDLER(api_sandbox_delete);
API_HANDLER(api_sandbox_sleep); /* POST /sleep: asleep now (0063) */

/* console.c: the web console's files (GET /, /console/{file*}: docs/console.md) */
API_HANDLER(api_console_root);
API_HANDLER(api_console);

/* api-metrics.c: GET /metrics (the Prometheus text format) */
API_HANDLER(api_metrics);
API_HANDLER(api_cluster_nodes);
API_HANDLER(api_cluster_drain);

/* api-snapshots.c: POST/GET /snapshots, POST /fork, /v1/snapshots[/{snap}] (0048) */
API_HANDLER(api_snapshot_create);
API_HANDLER(api_sandbox_snapshots);
API_HANDLER(api_fork);
API_HANDLER(api_snapshots_list);
API_HANDLER(api_snapshot_get);
API_HANDLER(api_snapshot_delete);
API_HANDLER(api_keys_create);
API_HANDLER(api_keys_list);
API_HANDLER(api_keys_delete);

/* api-backups.c: POST /backups, POST /backups/{bid}/restore, /v1/backups[/{bid}] (0049) */
API_HANDLER(api_backup_create);
API_HANDLER(api_backup_restore);
API_HANDLER(api_backups_list);
API_HANDLER(api_backup_get);
API_HANDLER(api_backup_delete);

/* api-exec.c: POST /exec */
API_HANDLER(api_exec);
/* api-sessions.c: POST /env (setEnvVars), /sessions, /sessions/{sid}, /sessions/{sid}/env */
API_HANDLER(api_env);
API_HANDLER(api_sessions_create);
API_HANDLER(api_sessions_list);
API_HANDLER(api_session_get);
API_HANDLER(api_session_delete);
API_HANDLER(api_session_env);

/* api-files.c: /files (raw GET/HEAD/PUT/DELETE) and /files/{read,write,mkdir,move,list,
 * exists} */
API_HANDLER(api_files_raw);
API_HANDLER(api_files_read);
API_HANDLER(api_files_write);
API_HANDLER(api_files_mkdir);
API_HANDLER(api_files_move);
API_HANDLER(api_files_list);
API_HANDLER(api_files_exists);
/* api-watch.c: POST /files/watch (SSE) */
API_HANDLER(api_watch);

/* api-processes.c: /processes, /processes/{pid}, /processes/{pid}/{logs,stream,waitForLog,
 * waitForPort,waitForExit} */
API_HANDLER(api_process_start);
API_HANDLER(api_process_list);
API_HANDLER(api_process_kill_all);
API_HANDLER(api_process_get);
API_HANDLER(api_process_kill);
API_HANDLER(api_process_logs);
API_HANDLER(api_process_stream);
API_HANDLER(api_process_wait_log);
API_HANDLER(api_process_wait_port);
API_HANDLER(api_process_wait_exit);

/* api-code.c: /contexts, /contexts/{cid} and POST /code */
API_HANDLER(api_contexts_list);
API_HANDLER(api_contexts_create);
API_HANDLER(api_context_delete);
API_HANDLER(api_code);

/* api-pty.c: GET /pty (WebSocket terminal) */
API_HANDLER(api_pty);
/* api-git.c: POST /git/checkout (a clone inside the sandbox) */
API_HANDLER(api_git_checkout);

/* api-ports.c: /ports, /ports/{port}, and GET /ws/{port}[/path] (p->tail) */
API_HANDLER(api_ports_expose);
API_HANDLER(api_ports_list);
API_HANDLER(api_port_unexpose);
API_HANDLER(api_ws);

/* api-mcp.c: GET POST DELETE /mcp (MCP's Streamable HTTP transport) */
API_HANDLER(api_mcp);

/* api-images.c: /v1/images, /v1/images/{image}, /v1/images/{image}/{build,import}
 * (p->name: the image's name) */
API_HANDLER(api_images_list);
API_HANDLER(api_images_delete);
API_HANDLER(api_images_build);
API_HANDLER(api_images_import);

#undef API_HANDLER

#endif
