/* The HTTP API of cellad (docs/api.md): routing, auth, and the handlers of every route.
 *
 * api_handle() is the http_server's on_request; api_log_request() its on_done (one log
 * line per request: method, path, status, duration). The api borrows the sandbox table
 * and the loop; it must outlive the server. */
#ifndef CELLA_DAEMON_API_H
#define CELLA_DAEMON_API_H

#include <uv.h>

#include "daemon/http.h"
#include "daemon/sandbox.h"

struct api_config {
        uv_loop_t *loop;
        struct sandbox_table *table;
        const char *token;          /* bearer token, or NULL/empty: no auth */
        const char *images_dir;     /* --images */
        const char *image_builder;  /* scripts/build-image.sh */
        const char *preview_domain; /* preview URLs' domain; NULL: "localhost" */
        int preview_url_port;       /* the port in preview URLs (0: none) */
        int64_t image_import_max;   /* an import's tarball (0: CELLA_IMAGE_IMPORT_MAX) */
        struct mem_budget *budget;  /* buffered exec output is counted here (may be NULL) */
};

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
void api_log_request(struct http_request *req, void *userdata);

/* Constant-time comparison of a presented token with the configured one. */
bool api_token_equal(const char *given, const char *want);

#endif
