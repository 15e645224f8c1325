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

struct principal;

struct api {
        struct api_config cfg;
        struct preview_config preview;
        json_t *images_busy;             /* names being built or imported (api-images.c) */
        struct auth_limiter *auth_fails; /* failed authentications per client address */
        char self_url[96]; /* the API's own listener as cellad reaches it ("": not listening) */
        struct quota_hold *quota_holds; /* starts a tenant's quotas hold (api_quota_reserve) */
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
        /* Whom the route acts for (daemon/tenant.h): the request's principal, or for the
         * admin the tenant its ?tenant= names. name is already that tenant's internal
         * name. Never NULL. */
        const struct principal *principal;
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
struct quota_hold;
struct api_sandbox_wait {
        struct http_request *req;
        api_sandbox_cb cb;
        void *ud;
        struct api *a;
        struct quota_hold *hold; /* what the start holds of a tenant's quotas until cb */
};
void api_sandbox_for(struct api *a, struct http_request *req, const char *name,
                     struct api_sandbox_wait *w, api_sandbox_cb cb, void *ud);

/* A tenant's quotas (its key's maxSandboxes, maxMemory; decision 0053) before a start:
 * creating name (of instance_type, NULL: the default) or waking it (creating false).
 * maxSandboxes counts the tenant's sandboxes in any state, maxMemory the instance types'
 * memory of those that run (not sleeping). 0, or -1 with err QUOTA_EXCEEDED. The admin
 * has none. */
int api_quota_check(struct api *a, const struct principal *p, const char *name, bool creating,
                    const char *instance_type, struct cella_error *err);
/* api_quota_check and, when it passes, the start held against the tenant's quotas in the
 * same step on the loop thread, until api_quota_release (the start's end, made or
 * failed): a start in progress counts as its sandbox would (one more sandbox, its
 * instance type's memory), so two starts racing for a last slot cannot both pass. *ret:
 * the hold, or NULL when nothing is held (the admin, a key without quotas). */
int api_quota_reserve(struct api *a, const struct principal *p, const char *name, bool creating,
                      const char *instance_type, struct quota_hold **ret, struct cella_error *err);
/* The hold released (NULL: nothing). */
void api_quota_release(struct api *a, struct quota_hold *h);
/* A cluster's claim of a new name (cluster_quota_fn, userdata the api): the quotas its
 * start holds, when a hold of a tenant's key with quotas is creating it. */
struct cluster_quota;
bool api_quota_cluster(const char *name, struct cluster_quota *out, void *userdata);

/* The snapshot id_or_name as principal p may reach it: its own tenant's name first, then
 * an id; another tenant's is SNAPSHOT_NOT_FOUND like an absent one (the admin reaches
 * any by id). New reference (the registry's view: internal names), or NULL with err;
 * image as sandbox_table_snapshot_get. */
json_t *api_snapshot_find(struct api *a, const struct principal *p, const char *id_or_name,
                          char *image, size_t image_sz, struct cella_error *err);

/* Where sandboxes are found by name: the cluster's directory on a cluster node, else the
 * local table's (sandbox-directory.h). */
struct sandbox_directory *api_directory(struct api *a);

/* Helpers */
/* An asynchronous JSON answer's callback (userdata: the request, referenced by the caller):
 * j (taken) as 200, or err. */
void api_answer_json(json_t *j, const struct cella_error *err, void *userdata);

void api_timestamp(char out[32]);
/* Fill err from an agent ERROR frame payload. */
void api_agent_error(const struct frame *f, struct cella_error *err);
bool api_wants_sse(const struct http_request *req);
/* The client asks for raw bytes (Accept: application/octet-stream, without
 * text/event-stream): an exec's stdout as the body (api-exec.c). */
bool api_wants_raw(const struct http_request *req);

#endif
