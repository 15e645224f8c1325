/* The HTTP API of cellad (docs/api.md), as the daemon sees it: the dispatcher (api.c:
 * preview hosts first, cross-origin and bearer-token checks, the route table) and its
 * lifetime. Only main.c and the dispatcher include this; the handlers beneath include
 * api-service.h.
 *
 * api_handle() is the http_server's on_request; api_log_request() its on_done (one log
 * line per request: method, path, status, duration). The api borrows the sandbox table
 * and the loop; it must outlive the server. */
#ifndef CELLA_DAEMON_API_H
#define CELLA_DAEMON_API_H

#include <uv.h>

#include "daemon/api-config.h"
#include "daemon/http.h"
#include "daemon/sandbox.h"

struct api;

int api_new(const struct api_config *cfg, struct api **ret);
void api_free(struct api *a);
void api_handle(struct http_request *req, void *userdata);
/* The on_request of a --preview-listen server: preview hosts only. */
void api_handle_preview(struct http_request *req, void *userdata);
/* Close the connections the preview proxy holds (before the sandbox table is freed). */
void api_shutdown(struct api *a);
/* The port printed in preview URLs (known once the listener is bound). */
void api_set_preview_port(struct api *a, int port);
/* The API listener's bound address (host as given to --listen, port as bound): what /mcp's
 * tools call. A wildcard host is reached on loopback. */
void api_set_self_address(struct api *a, const char *host, int port);
void api_log_request(struct http_request *req, void *userdata);

#endif
