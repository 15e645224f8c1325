/* The connection to cellad, shared by the two sides of it: the dispatcher (agent.c) accepts
 * it, reads and decodes its frames; the services (service.c) write to it and keep its
 * streams. Handlers see struct conn only as an opaque pointer (service.h). */
#ifndef CELLA_AGENT_CONN_H
#define CELLA_AGENT_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <uv.h>

#include "common/buf.h"
#include "common/proto.h"

struct agent;
struct stream;

struct conn {
        struct agent *a;
        uv_pipe_t pipe;
        struct frame_reader in;
        bool closing;
        size_t queued; /* bytes handed to uv_write and not yet written */
        bool congested;
        bool held; /* a bulk reader waits for the queue to drain (stream_busy) */
        struct stream *streams;
        unsigned nstreams;
};

/* uv_close callback of c->pipe: frees c. */
void conn_on_closed(uv_handle_t *h);

#endif
