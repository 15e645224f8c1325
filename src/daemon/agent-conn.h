/* cellad's side of the agent protocol: one connection per sandbox to its cella-init over
 * <sandbox-dir>/agent.sock, multiplexing streams (see common/proto.h, docs/protocol.md).
 *
 * Ownership: the connection owns its streams. A stream is created by agent_conn_open(),
 * delivers frames to its ops until it ends (EXIT, RESULT or ERROR from the agent) or the
 * connection fails, then calls ops->on_close exactly once; after on_close the stream is
 * freed by the connection — the user must drop its pointer in on_close. The user may call
 * agent_stream_cancel() before that to abandon it (on_close still follows, with -ECANCELED).
 *
 * Flow control: the agent may send CELLA_STREAM_WINDOW bytes of STDOUT/STDERR/DATA per
 * stream before it needs credit. The user returns credit with agent_stream_ack(stream, n)
 * once it has passed n data bytes on (e.g. when an HTTP write of them completed): this is
 * how a slow HTTP client slows the command or file read down instead of filling memory.
 * The credit goes back in WINDOW frames of CELLA_STREAM_ACK_BATCH or more (a cancel
 * returns all of it at once).
 * Data the user sends (agent_stream_send_data) is limited the same way: it returns -EAGAIN
 * when the agent's credit is used up, and ops->on_writable is called when credit returns. */
#ifndef CELLA_DAEMON_AGENT_CONN_H
#define CELLA_DAEMON_AGENT_CONN_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

#include "common/error.h"
#include "common/proto.h"

struct agent_conn;
struct agent_stream;

struct agent_stream_ops {
        /* Every frame of the stream except WINDOW (handled inside). Payload is borrowed for
         * the call only. For EXIT/RESULT/ERROR on_close follows right after. */
        void (*on_frame)(struct agent_stream *s, const struct frame *f, void *userdata);
        /* Credit to send more DATA is available again (uploads). May be NULL. */
        void (*on_writable)(struct agent_stream *s, void *userdata);
        /* Exactly once. err: 0 when the stream ended normally, -ECANCELED after
         * agent_stream_cancel, -ECONNRESET (or another -errno) when the agent went away. */
        void (*on_close)(struct agent_stream *s, int err, void *userdata);
};

/* Connect (non-blocking) to the agent socket at path. on_lost is called once if the
 * connection fails later (every open stream gets on_close first). */
int agent_conn_new(uv_loop_t *loop, const char *path,
                   void (*on_lost)(struct agent_conn *c, int err, void *userdata), void *userdata,
                   struct agent_conn **ret, struct cella_error *err);
/* Close: all streams get on_close(-ECONNRESET), then the memory is freed after the loop
 * has released the handle. Safe to call from inside a callback. */
void agent_conn_close(struct agent_conn *c);
/* Send a control frame without payload on stream 0 (FRAME_CHECKPOINT); written at once
 * when nothing is queued before it. 0 or -errno. */
int agent_conn_control(struct agent_conn *c, uint8_t type);
unsigned agent_conn_stream_count(const struct agent_conn *c); /* streams not yet ended */
/* A pidfd (close-on-exec) of the process that listens at the connection's other end, as
 * the kernel recorded it at the agent's listen() (SO_PEERPIDFD, Linux 6.5+: no pid race,
 * and still given once that process has exited). -errno: not connected, or a kernel
 * without it. */
int agent_conn_peer_pidfd(const struct agent_conn *c);
/* Has the other end hung up (every descriptor of the agent's end closed)? */
bool agent_conn_peer_gone(const struct agent_conn *c);

/* Open a stream with a first frame of type (EXEC, FILE_READ, FILE_WRITE, FILE_OP, SESSION,
 * PROC) and a JSON payload (borrowed, serialised here). Frames sent before HELLO are
 * queued. ret may be NULL for a request whose answer is not awaited (ops all NULL). */
int agent_conn_open(struct agent_conn *c, uint8_t type, json_t *payload,
                    const struct agent_stream_ops *ops, void *userdata, struct agent_stream **ret,
                    struct cella_error *err);

uint32_t agent_stream_id(const struct agent_stream *s);
/* DATA bytes to the agent (file uploads). len <= CELLA_FRAME_MAX per call is split into
 * frames as needed. Returns 0, -EAGAIN if the agent's window is exhausted (nothing sent),
 * -EPIPE if the stream is closed. */
int agent_stream_send_data(struct agent_stream *s, const void *data, size_t len);
size_t agent_stream_send_credit(const struct agent_stream *s); /* bytes sendable now */
int agent_stream_send_end(struct agent_stream *s);             /* END frame */
void agent_stream_ack(struct agent_stream *s, size_t bytes);   /* return credit */
/* A JSON control frame of type on the open stream (a terminal's resize). 0, -EPIPE,
 * -ENOMEM. */
int agent_stream_send_json(struct agent_stream *s, uint8_t type, json_t *payload);
void agent_stream_cancel(struct agent_stream *s); /* CANCEL + on_close */

#endif
