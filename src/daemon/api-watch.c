/* POST /v1/sandboxes/{id}/files/watch: one WATCH agent stream per request, answered as SSE
 * events while the agent reports file changes (decision 0020). SSE begins with the agent's
 * first event (watching); an error before it (no such directory) is an ordinary error
 * response. Each agent DATA frame is
 * one JSON event ({type: watching|event|overflow, ...}) passed on with a timestamp; its
 * credit goes back to the agent once the client took it, so a slow client makes the agent
 * queue, coalesce and finally drop events (overflow) rather than the daemon buffer them.
 * The client leaving cancels the stream, which closes the agent's inotify descriptor.
 *
 * The request's lifetime is a plain struct api_op (api-op.c); its sse_begun is set with
 * the agent's first event. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct api_op *op = userdata;

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
                if (!op->sse_begun && op->io.req) {
                        /* the watch is set up: from now on errors are events */
                        op->sse_begun = true;
                        http_response_begin_sse(op->io.req);
                }
                api_sse_event(&op->io, ev, f->len);
                break;
        }
        case FRAME_ERROR:
                if (!op->finished) {
                        struct cella_error e = {0};

                        api_agent_error(f, &e);
                        api_sse_fail(&op->io, op->sse_begun, &e);
                }
                api_op_finish(op);
                break;
        case FRAME_RESULT:
                if (!op->finished && op->io.req)
                        http_response_end(op->io.req);
                api_op_finish(op);
                break;
        default:
                break;
        }
}

static const struct agent_stream_ops watch_ops = {on_frame, NULL, api_op_on_close};

static void watch_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct api_op *op = ud;
        struct cella_error err = {0};
        struct api_watch in = {0};

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_watch(body, len, &in, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (api_op_find_sandbox(op, req))
                api_op_open(op, req, FRAME_WATCH, in.payload, &watch_ops);
out:
        api_watch_done(&in);
        api_op_unref(op); /* the body read's */
}

void api_watch(struct api *a, struct http_request *req, const struct api_args *p)
{
        api_op_read_body(api_op_new(a, p->name, sizeof(struct api_op), NULL), req, watch_body);
}
