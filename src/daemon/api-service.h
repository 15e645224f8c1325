/* The services beneath the API's handlers (docs/architecture.md, "The daemon's API"):
 * struct api as handlers see it, finding a request's sandbox, reading an agent ERROR
 * (api-service.c). A request that talks to the agent is a struct api_req (api-req.h, above
 * this). Handlers (api-exec.c, api-files.c, ... api-ports.c) include api-req.h or this,
 * and api-handlers.h; never api.h or the route table, which sit above them. */
#ifndef CELLA_DAEMON_API_SERVICE_H
#define CELLA_DAEMON_API_SERVICE_H

#include "common/limits.h"
#include "daemon/api-config.h"
#include "daemon/http.h"
#include "daemon/preview.h"
#include "daemon/sandbox.h"

struct api {
        struct api_config cfg;
        struct preview_config preview;
        json_t *images_busy;             /* names being built or imported (api-images.c) */
        struct auth_limiter *auth_fails; /* failed authentications per client address */
        char self_url[96]; /* the API's own listener as cellad reaches it ("": not listening) */
};

/* What the route table (api-routes.c) captured and the dispatcher checked, for a handler:
 * pointers into the request's path or the dispatcher's buffers, valid during the call. */
struct api_args {
        const char *name; /* {id}: the sandbox's name, checked (normalizeId applied); {image}:
                             the image's name (at most CELLA_NAME_MAX) */
        const char *raw;  /* {id} as sent (raw_len bytes, not NUL-terminated): PUT
                             /v1/sandboxes/{id} checks it after the body */
        size_t raw_len;
        bool normalize;    /* ?normalizeId= */
        const char *param; /* {pid}, {sid}, {cid}: a valid id (cella_id_is_valid) */
        int port;          /* {port}: 1..CELLA_PORT_MAX */
        const char *tail;  /* /ws/{port}...: what follows the port ("" or "/...") */
};

/* A route's handler: the method and parameters are checked, the request is its to answer. */
typedef void (*api_handler)(struct api *a, struct http_request *req, const struct api_args *p);

/* Finding a request's sandbox, without blocking the loop: the sandbox named name, created
 * if needed (only an explicit write or a WebSocket upgrade creates; a GET or HEAD wakes one
 * that exists), running, with an agent link, marked active. cb gets it borrowed
 * (sandbox_ref() to keep it), or NULL after req was answered with the error (or when the
 * client left: then nothing is answered). A running sandbox is given before
 * api_sandbox_for returns; one that starts or wakes is given once its start, on libuv's
 * thread pool, finished (decision 0041). The wait holds a reference to req; w is the
 * caller's and must live until cb. */
typedef void (*api_sandbox_cb)(struct http_request *req, struct sandbox *sb, void *ud);
struct api_sandbox_wait {
        struct http_request *req;
        api_sandbox_cb cb;
        void *ud;
};
void api_sandbox_for(struct api *a, struct http_request *req, const char *name,
                     struct api_sandbox_wait *w, api_sandbox_cb cb, void *ud);

/* Helpers */
void api_timestamp(char out[32]);
/* Fill err from an agent ERROR frame payload. */
void api_agent_error(const struct frame *f, struct cella_error *err);
bool api_wants_sse(const struct http_request *req);

#endif
