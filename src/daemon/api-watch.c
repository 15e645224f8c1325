/* POST /v1/sandboxes/{id}/files/watch: one WATCH agent stream per request, answered as SSE
 * events while the agent reports file changes (decision 0020). SSE begins with the agent's
 * first event (watching); an error before it (no such directory) is an ordinary error
 * response. Each agent DATA frame is
 * one JSON event ({type: watching|event|overflow, ...}) passed on with a timestamp; its
 * credit goes back to the agent once the client took it, so a slow client makes the agent
 * queue, coalesce and finally drop events (overflow) rather than the daemon buffer them.
 * The client leaving cancels the stream, which closes the agent's inotify descriptor.
 *
 * struct watch_op is refcounted like exec_op (api-exec.c): one reference for the agent
 * stream, one per SSE write in flight, one while the request body is read. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/api-decode.h"
#include "daemon/api-internal.h"

struct watch_op {
        unsigned refs;
        struct api *api;
        char name[CELLA_NAME_MAX + 1];
        struct api_sse io;
        struct sandbox *sb;
        bool started; /* SSE begun (with the agent's first event) */
        bool finished;
};

static void op_unref(struct watch_op *op)
{
        if (--op->refs > 0)
                return;
        if (op->io.req) {
                http_request_on_abort(op->io.req, NULL, NULL);
                http_request_unref(op->io.req);
        }
        sandbox_unref(op->sb);
        api_sse_done(&op->io);
        free(op);
}

static void op_hold(void *owner)
{
        ((struct watch_op *)owner)->refs++;
}

static void op_release(void *owner)
{
        op_unref(owner);
}

static void finish(struct watch_op *op)
{
        op->finished = true;
        if (op->io.req) {
                http_request_on_abort(op->io.req, NULL, NULL);
                http_request_unref(op->io.req);
                op->io.req = NULL;
        }
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct watch_op *op = userdata;

        switch (f->type) {
        case FRAME_DATA: {
                json_t *ev;

                if (op->finished) {
                        agent_stream_ack(s, f->len);
                        break;
                }
                ev = json_loadb((const char *)f->payload, f->len, 0, NULL);
                if (!json_is_object(ev)) {
                        json_decref(ev);
                        agent_stream_ack(s, f->len);
                        break;
                }
                if (!op->started && op->io.req) {
                        /* the watch is set up: from now on errors are events */
                        op->started = true;
                        http_response_begin_sse(op->io.req);
                }
                api_sse_event(&op->io, ev, f->len);
                break;
        }
        case FRAME_ERROR:
                if (!op->finished) {
                        struct cella_error e = {0};

                        api_agent_error(f, &e);
                        api_sse_fail(&op->io, op->started, &e);
                }
                finish(op);
                break;
        case FRAME_RESULT:
                if (!op->finished && op->io.req)
                        http_response_end(op->io.req);
                finish(op);
                break;
        default:
                break;
        }
}

static void on_close(struct agent_stream *s, int err, void *userdata)
{
        struct watch_op *op = userdata;

        (void)s;
        op->io.stream = NULL;
        if (!op->finished)
                api_sse_agent_lost(&op->io, op->started, err);
        finish(op);
        op_unref(op);
}

static const struct agent_stream_ops watch_ops = {on_frame, NULL, on_close};

/* The client went away: cancel the watch (the agent frees its inotify descriptor). */
static void on_abort(struct http_request *req, void *ud)
{
        struct watch_op *op = ud;

        (void)req;
        finish(op);
        if (op->io.stream)
                agent_stream_cancel(op->io.stream);
}

static void watch_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct watch_op *op = ud;
        struct cella_error err = {0};
        struct api_watch in = {0};

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_watch(body, len, &in, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        op->sb = api_sandbox_for(op->api, req, op->name);
        if (!op->sb)
                goto out;
        sandbox_ref(op->sb);
        op->refs++; /* the stream's */
        if (agent_conn_open(sandbox_agent(op->sb), FRAME_WATCH, in.payload, &watch_ops, op,
                            &op->io.stream, &err) < 0) {
                op->refs--;
                http_respond_error(req, &err, NULL);
                goto out;
        }
        op->io.req = req;
        http_request_ref(req);
        http_request_on_abort(req, on_abort, op);
out:
        api_watch_done(&in);
        op_unref(op); /* the body read's */
}

static void body_abort(struct http_request *req, void *ud)
{
        (void)req;
        op_unref(ud);
}

void api_watch(struct api *a, struct http_request *req, const char *name)
{
        struct watch_op *op = calloc(1, sizeof(*op));

        if (!op) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        op->refs = 1;
        op->api = a;
        op->io.hold = op_hold;
        op->io.release = op_release;
        op->io.owner = op;
        snprintf(op->name, sizeof(op->name), "%s", name);
        http_request_on_abort(req, body_abort, op);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, watch_body, op) < 0) {
                http_request_on_abort(req, NULL, NULL);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                op_unref(op);
        }
}
