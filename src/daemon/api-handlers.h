/* The handlers of the API's routes, one function (or a few) per route of docs/api.md:
 * what the dispatcher's route table (api.c) points at. Each handler file includes this
 * for its own prototypes and api-service.h for what it uses; none includes the
 * dispatcher. */
#ifndef CELLA_DAEMON_API_HANDLERS_H
#define CELLA_DAEMON_API_HANDLERS_H

#include "daemon/api-service.h"

/* Routes under /v1/sandboxes/{name}/ (name already validated). They validate the request
 * first and only then reach the sandbox with api_sandbox_for(), so a malformed request
 * creates nothing. */
void api_exec(struct api *a, struct http_request *req, const char *name);
/* sub: "" (raw /files), "read", "write", "mkdir", "move", "list", "exists" */
void api_files(struct api *a, struct http_request *req, const char *name, const char *sub);
void api_images_list(struct api *a, struct http_request *req);
/* /sessions, /sessions/{sid}, /sessions/{sid}/env (rest starts with "/sessions"). */
void api_sessions(struct api *a, struct http_request *req, const char *name, const char *rest);
/* POST /env: setEnvVars for the sandbox or (sessionId) one session. */
void api_env(struct api *a, struct http_request *req, const char *name);

/* POST /git/checkout: a clone inside the sandbox (api-git.c). */
void api_git_checkout(struct api *a, struct http_request *req, const char *name);
void api_images_build(struct api *a, struct http_request *req, const char *name);
void api_images_import(struct api *a, struct http_request *req, const char *name);
void api_images_delete(struct api *a, struct http_request *req, const char *name);

void api_processes(struct api *a, struct http_request *req, const char *name, const char *rest);
/* api-code.c: /contexts, /contexts/{cid} (rest starts with "/contexts") and POST /code. */
void api_contexts(struct api *a, struct http_request *req, const char *name, const char *rest);
void api_code(struct api *a, struct http_request *req, const char *name);
/* api-pty.c: GET /v1/sandboxes/{id}/pty (WebSocket terminal). */
void api_pty(struct api *a, struct http_request *req, const char *name);
/* api-watch.c: POST /v1/sandboxes/{id}/files/watch (SSE). */
void api_watch(struct api *a, struct http_request *req, const char *name);

/* api-ports.c: /ports, /ports/{port} (rest starts with "/ports"), and /ws/{port}[/path]
 * (ps: what follows "/ws/"). */
void api_ports(struct api *a, struct http_request *req, const char *name, const char *rest);
void api_ws(struct api *a, struct http_request *req, const char *name, const char *ps);

#endif
