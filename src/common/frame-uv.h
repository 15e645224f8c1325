/* Sending a frame on a libuv stream, the same way at both ends of the agent socket
 * (src/agent/service.c, src/daemon/agent-conn.c): the frame is encoded by
 * frame_encode_alloc (common/proto.h) behind the write request, one allocation and one copy
 * per frame, and queued with uv_write.
 *
 * Header-only, so that cella-common (which libcella links) does not link libuv; only the
 * two programs that run a libuv loop include it. */
#ifndef CELLA_FRAME_UV_H
#define CELLA_FRAME_UV_H

#include <stddef.h>
#include <stdlib.h>
#include <uv.h>

#include "common/proto.h"

/* One queued frame. conn is the sender's connection, len the bytes queued. */
struct frame_write {
        uv_write_t req;
        void *conn;
        size_t len;
        char data[];
};

/* Queue a frame on s. done receives &w->req of a struct frame_write, which it frees.
 * Returns the bytes queued (header + payload), -EINVAL if len > CELLA_FRAME_MAX, -ENOMEM,
 * or libuv's error (nothing is queued then). */
static inline int frame_uv_write(uv_stream_t *s, void *conn, uint8_t type, uint32_t stream,
                                 const void *payload, size_t len, uv_write_cb done)
{
        struct frame_write *w;
        uv_buf_t b;
        int n, r;

        n = frame_encode_alloc(offsetof(struct frame_write, data), type, stream, payload, len,
                               (void **)&w);
        if (n < 0)
                return n;
        w->conn = conn;
        w->len = (size_t)n;
        b = uv_buf_init(w->data, (unsigned)n);
        r = uv_write(&w->req, s, &b, 1, done);
        if (r < 0) {
                free(w);
                return r;
        }
        return n;
}

#endif
