/* The dispatcher's frame table (agent.c): for each frame type cellad sends, where it goes.
 * Exposed for its unit test (tests/unit/test-agent-dispatch.c); the handlers never include
 * this header (docs/decisions/0038). */
#ifndef CELLA_AGENT_DISPATCH_H
#define CELLA_AGENT_DISPATCH_H

#include <stdint.h>

#include "agent/request.h"
#include "common/error.h"
#include "common/proto.h"

struct agent;
struct conn;
struct stream;

typedef void agent_open_fn(struct agent *a, struct conn *c, struct agent_request *req);

/* How one frame type is handled; members that do not apply are NULL. */
struct frame_route {
        /* A stream-0 frame (PING, PONG). */
        void (*control)(struct conn *c, const struct frame *f);
        /* A frame that opens a stream: the handler's entry point, called once the id was
         * found unused, the stream count is below CELLA_AGENT_MAX_STREAMS and the request
         * decoded (otherwise the dispatcher answers: docs/protocol.md). */
        agent_open_fn *open;
        /* A frame on an open stream, routed to the stream's ops (struct stream_ops). r is
         * the decode result: 0, or -EINVAL with err set. A frame for a stream that is not
         * open is dropped (a late frame for a stream that already ended); so is a PTY
         * without sessionId, the resize form of the one type that has both routes. */
        void (*on_stream)(struct conn *c, struct stream *s, const struct agent_request *req, int r,
                          const struct cella_error *err);
};

/* The route of type, or NULL for a type cellad never sends (agent_request_decode refuses
 * it as a protocol error before any route is looked up). */
const struct frame_route *agent_frame_route(uint8_t type);

#endif
