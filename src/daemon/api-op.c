/* The lifetime of a request answered from one agent stream (exec, file watch, code runs):
 * see struct api_op in api-service.h. */
#include <stdlib.h>

#include "common/limits.h"
#include "daemon/api-service.h"

void api_op_unref(struct api_op *op)
{
        if (--op->refs > 0)
                return;
        if (op->io.req) {
                http_request_on_abort(op->io.req, NULL, NULL);
                http_request_unref(op->io.req);
        }
        sandbox_unref(op->sb);
        api_sse_done(&op->io);
        if (op->free)
                op->free(op);
        free(op);
}

static void op_hold(void *owner)
{
        ((struct api_op *)owner)->refs++;
}

static void op_release(void *owner)
{
        api_op_unref(owner);
}

void api_op_finish(struct api_op *op)
{
        op->finished = true;
        if (op->io.req) {
                http_request_on_abort(op->io.req, NULL, NULL);
                http_request_unref(op->io.req);
                op->io.req = NULL;
        }
}

void api_op_on_close(struct agent_stream *s, int err, void *userdata)
{
        struct api_op *op = userdata;

        (void)s;
        op->io.stream = NULL;
        if (!op->finished)
                api_sse_agent_lost(&op->io, op->sse_begun, err);
        api_op_finish(op);
        api_op_unref(op);
}

/* The client went away: cancel the agent stream (the agent stops what it does for it). */
static void on_abort(struct http_request *req, void *ud)
{
        struct api_op *op = ud;

        (void)req;
        api_op_finish(op);
        if (op->io.stream)
                agent_stream_cancel(op->io.stream);
}

bool api_op_find_sandbox(struct api_op *op, struct http_request *req)
{
        op->sb = api_sandbox_for(op->api, req, op->name);
        if (op->sb)
                sandbox_ref(op->sb);
        return op->sb != NULL;
}

json_t *api_op_base_env(const struct api_op *op)
{
        json_t *env = sandbox_env(op->sb);

        return env ? json_deep_copy(env) : json_object();
}

int api_op_open(struct api_op *op, struct http_request *req, uint8_t type, json_t *payload,
                const struct agent_stream_ops *ops)
{
        struct cella_error err = {0};

        op->refs++; /* the stream's */
        if (agent_conn_open(sandbox_agent(op->sb), type, payload, ops, op, &op->io.stream, &err) <
            0) {
                op->refs--;
                http_respond_error(req, &err, NULL);
                return -1;
        }
        op->io.req = req;
        http_request_ref(req);
        http_request_on_abort(req, on_abort, op);
        return 0;
}

static void body_abort(struct http_request *req, void *ud)
{
        (void)req;
        api_op_unref(ud);
}

struct api_op *api_op_new(struct api *a, const char *name, size_t size,
                          void (*free_fn)(struct api_op *op))
{
        struct api_op *op = calloc(1, size);

        if (!op)
                return NULL;
        op->refs = 1;
        op->api = a;
        op->free = free_fn;
        op->io.hold = op_hold;
        op->io.release = op_release;
        op->io.owner = op;
        snprintf(op->name, sizeof(op->name), "%s", name);
        return op;
}

void api_op_read_body(struct api_op *op, struct http_request *req, http_body_cb body)
{
        if (!op) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        http_request_on_abort(req, body_abort, op);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, body, op) < 0) {
                http_request_on_abort(req, NULL, NULL);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                api_op_unref(op);
        }
}
