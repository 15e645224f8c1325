/* Sending a frame on a libuv stream, the same way at both ends of the agent socket
 * (src/agent/service.c, src/daemon/agent-conn.c): the header and the payload go to the
 * socket in one writev from where they are, and only a part the socket did not take is
 * copied behind a write request and queued with uv_write.
 *
 * Header-only, so that cella-common (which libcella links) does not link libuv; only the
 * two programs that run a libuv loop include it. */
#ifndef CELLA_FRAME_UV_H
#define CELLA_FRAME_UV_H

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/proto.h"

/* One queued frame (or what the socket did not take of it at once). conn is the sender's
 * connection, len the bytes queued. */
struct frame_write {
        uv_write_t req;
        void *conn;
        size_t len;
        char data[];
};

/* Queue a frame on s. The header and the payload are offered to the socket together
 * (uv_try_write, a writev) when nothing is queued before them; only what it did not take
 * is copied behind a write request (decision 0058). done receives &w->req of a struct
 * frame_write, which it frees; it is called for a frame of which something was queued.
 * Returns the bytes queued (what the socket did not take; 0: it took the frame whole, no
 * request was made and done is not called), -EINVAL if len > CELLA_FRAME_MAX, -ENOMEM, or libuv's error (nothing is sent then). */
static inline int frame_uv_write(uv_stream_t *s, void *conn, uint8_t type, uint32_t stream,
                                 const void *payload, size_t len, uv_write_cb done)
{
        uint8_t head[CELLA_FRAME_HEADER];
        struct frame_write *w;
        uv_buf_t b[2];
        size_t taken = 0, rest;
        int r;

        if (len > CELLA_FRAME_MAX)
                return -EINVAL;
        frame_header_pack(head, type, stream, (uint32_t)len);
        b[0] = uv_buf_init((char *)head, sizeof(head));
        b[1] = uv_buf_init((char *)(payload ? payload : ""), (unsigned)len);
        if (uv_stream_get_write_queue_size(s) == 0) {
                r = uv_try_write(s, b, len ? 2 : 1);
                if (r > 0 && (size_t)r <= sizeof(head) + len)
                        taken = (size_t)r;
        }
        rest = sizeof(head) + len - taken;
        if (rest == 0)
                return 0; /* taken whole: no write request, done is not called */
        w = malloc(offsetof(struct frame_write, data) + rest + 1);
        if (!w)
                return -ENOMEM; /* a frame cut after its first bytes: the link fails */
        if (taken < sizeof(head)) {
                memcpy(w->data, head + taken, sizeof(head) - taken);
                if (len)
                        memcpy(w->data + sizeof(head) - taken, payload, len);
        } else if (rest && rest <= len) {
                memcpy(w->data, (const char *)payload + (len - rest), rest);
        }
        w->conn = conn;
        w->len = rest;
        b[0] = uv_buf_init(w->data, (unsigned)rest);
        r = uv_write(&w->req, s, b, 1, done);
        if (r < 0) {
                free(w);
                return r;
        }
        return (int)rest;
}

#endif
