/* POST /v1/sandboxes/{id}/files/watch: one WATCH agent stream per request, answered as SSE
 * events while the agent reports file changes (decision 0020). SSE begins with the agent's
 * first event (watching); an error before it (no such directory) is an ordinary error
 * response. Each agent DATA frame is
 * one JSON event ({type: watching|event|overflow, ...}) passed on with a timestamp; its
 * credit goes back to the agent once the client took it, so a slow client makes the agent
 * queue, coalesce and finally drop events (overflow) rather than the daemon buffer them.
 * The client leaving cancels the stream, which closes the agent's inotify descriptor.
 *
 * The request is a plain struct api_req (api-req.h) in SSE mode, begun with the agent's
 * first event. */
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"

static void on_frame(struct api_req *r, const struct frame *f)
{
        switch (f->type) {
        case FRAME_DATA: {
                json_t *ev;

                if (r->finished) {
                        agent_stream_ack(r->stream, f->len);
                        break;
                }
                ev = json_loadb((const char *)f->payload, f->len, 0, NULL);
                if (!json_is_object(ev)) {
                        json_decref(ev);
                        agent_stream_ack(r->stream, f->len);
                        break;
                }
                /* the first event begins the stream: from now on errors are events */
                api_req_event(r, ev, f->len);
                break;
        }
        case FRAME_ERROR:
                api_req_fail_frame(r, f);
                break;
        case FRAME_RESULT:
                if (!r->finished && r->http)
                        http_response_end(r->http);
                api_req_finish(r);
                break;
        default:
                break;
        }
}

static void watch_body(struct api_req *r, const char *body, size_t len)
{
        struct cella_error err = {0};
        struct api_watch in;
        _cleanup_json_ json_t *payload = NULL;

        if (api_decode_watch(body, len, &in, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        payload = wire_watch_encode(&(struct wire_watch){.path = in.path,
                                                         .recursive = in.recursive,
                                                         .include = in.include,
                                                         .exclude = in.exclude});
        api_watch_done(&in);
        api_req_open(r, FRAME_WATCH, payload);
}

static const struct api_req_ops watch_ops = {.frame = on_frame};

void api_watch(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct api_req *r = api_req_new(a, req, p->name, sizeof(struct api_req), &watch_ops);

        if (!r)
                return;
        r->mode = API_REQ_SSE;
        r->frames_wake = false; /* a watch alone keeps no sandbox awake */
        api_req_read_body(r, CELLA_HTTP_MAX_JSON_BODY, watch_body);
}
