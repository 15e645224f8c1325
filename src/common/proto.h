/* The agent wire protocol: framed, multiplexed streams over one unix stream socket
 * between cellad (the client) and cella-init (the server). Specified in docs/protocol.md.
 *
 * Frame = 12-byte header + payload:
 *   u32 length    payload bytes, big endian, <= CELLA_FRAME_MAX
 *   u8  type      enum frame_type
 *   u8  flags     0 (reserved; non-zero is a protocol error)
 *   u16 reserved  0
 *   u32 stream    big endian; 0 is the connection itself (HELLO, PING/PONG)
 *
 * Only cellad opens streams, with a new non-zero id, by sending EXEC, FILE_READ,
 * FILE_WRITE, FILE_OP, SESSION, PROC, WATCH or PTY. A stream ends when the agent sends EXIT, RESULT or ERROR.
 * Control payloads are JSON objects (jansson); data payloads (STDOUT, STDERR, DATA) are
 * raw bytes. Data frames are flow-controlled per stream and direction: a sender may have at
 * most CELLA_STREAM_WINDOW bytes unacknowledged; the receiver returns credit with WINDOW
 * frames (payload: u32 big endian increment) as it consumes the bytes. */
#ifndef CELLA_PROTO_H
#define CELLA_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/buf.h"
#include "common/limits.h"

enum frame_type {
        FRAME_HELLO = 1,       /* a->d, stream 0: {"version":1,"pid":N} on accept */
        FRAME_EXEC = 2,        /* d->a: {"command":s,"cwd"?:s,"env"?:{k:s},"timeoutMs"?:n} */
        FRAME_STARTED = 3,     /* a->d: {"pid":n} once the command runs */
        FRAME_STDOUT = 4,      /* a->d: raw bytes */
        FRAME_STDERR = 5,      /* a->d: raw bytes */
        FRAME_EXIT = 6,        /* a->d, ends: {"exitCode":n,"signal"?:n,"timedOut":b} */
        FRAME_ERROR = 7,       /* a->d, ends: {"code":"FILE_NOT_FOUND","message":s} */
        FRAME_CANCEL = 8,      /* d->a: abandon the stream (kill its command tree) */
        FRAME_WINDOW = 9,      /* both: u32 credit increment for the stream's data */
        FRAME_FILE_READ = 10,  /* d->a: {"path":s} -> FILE_INFO, DATA..., RESULT {"size":n} */
        FRAME_FILE_WRITE = 11, /* d->a: {"path":s,"mode"?:n} then DATA..., END -> RESULT */
        FRAME_FILE_OP = 12,    /* d->a: {"op":s,...} -> RESULT (see docs/protocol.md) */
        FRAME_DATA = 13,       /* both: raw file bytes */
        FRAME_END = 14,        /* d->a: end of an upload's DATA */
        FRAME_RESULT = 15,     /* a->d, ends: JSON object */
        FRAME_FILE_INFO = 16,  /* a->d: a FileInfo object (docs/protocol.md) */
        FRAME_PING = 17,       /* both, stream 0: payload echoed in PONG */
        FRAME_PONG = 18,
        FRAME_SESSION = 19, /* d->a: {"op":s,...} sessions (docs/protocol.md) -> RESULT */
        FRAME_PROC = 20,    /* d->a: {"op":s,...} background processes -> ... RESULT */
        FRAME_WATCH = 21,   /* d->a: {"path":s,"recursive"?:b,"include"?:[s],"exclude"?:[s]}
                             * -> DATA (one JSON event each) until CANCEL (docs/protocol.md) */
        FRAME_CODE = 22,    /* d->a: {"op":"create"|"delete"|"list"|"run",...} code interpreter
                             * contexts; a run streams STDOUT/STDERR and DATA (NDJSON events)
                             * -> RESULT (docs/protocol.md) */
        FRAME_PTY = 23,     /* d->a: {"sessionId"?:s,"cols":n,"rows":n,"baseEnv"?:{k:s}} attaches
                         * to the session's terminal -> STDOUT (replay, then live), STARTED
                         * (ready), EXIT when the shell ends; DATA is typed input; a further
                         * PTY on the open stream {"cols":n,"rows":n} resizes */
        /* d->a, stream 0, no payload: a checkpoint of the sandbox follows (docs/decisions/
         * 0050): the agent lets the host's CRIU read it until cellad connects again */
        FRAME_CHECKPOINT = 24,
        _FRAME_TYPE_MAX
};

struct frame {
        uint8_t type;
        uint8_t flags;
        uint32_t stream;
        uint32_t len;
        const uint8_t *payload; /* borrowed from the decode input */
};

const char *frame_type_name(uint8_t type);
bool frame_type_is_data(uint8_t type); /* STDOUT, STDERR, DATA: flow-controlled */

/* Decode one frame from the front of in[0..len). Returns the number of bytes consumed
 * (> 0) with *ret filled, 0 when more bytes are needed, or -EPROTO for a malformed header
 * (bad type, non-zero flags/reserved, length > CELLA_FRAME_MAX). Pure; never allocates. */
int frame_decode(const uint8_t *in, size_t len, struct frame *ret);

/* Write the 12-byte header for a frame into out. */
void frame_header_pack(uint8_t out[12], uint8_t type, uint32_t stream, uint32_t len);

/* Append a whole frame (header + payload) to b. -EINVAL if len > CELLA_FRAME_MAX. */
int frame_append(struct buf *b, uint8_t type, uint32_t stream, const void *payload, uint32_t len);

/* Bytes a frame with a len-byte payload takes on the wire. */
static inline size_t frame_size(size_t len)
{
        return CELLA_FRAME_HEADER + len;
}

/* Encode a whole frame (header + payload) into out, which holds frame_size(len) bytes.
 * Returns the bytes written, or -EINVAL if len > CELLA_FRAME_MAX (out untouched). */
int frame_encode(uint8_t *out, uint8_t type, uint32_t stream, const void *payload, size_t len);

/* One allocation of head bytes for the caller (its write request, of which the frame is the
 * tail) followed by the encoded frame: the way both ends queue a frame without a second
 * copy. *ret is the allocation (the caller frees it); the frame starts at head bytes in.
 * Returns the frame's size, -EINVAL if len > CELLA_FRAME_MAX, or -ENOMEM. */
int frame_encode_alloc(size_t head, uint8_t type, uint32_t stream, const void *payload, size_t len,
                       void **ret);

/* Incremental decoding from a byte stream, as both ends of the socket read it: the reader
 * owns one growable buffer; the transport asks for room (frame_reader_space), fills part of
 * it and says how much (frame_reader_commit); frame_reader_next then yields the frames the
 * bytes complete, each borrowing its payload from the buffer until frame_reader_compact,
 * which drops what was yielded and must come before the next frame_reader_space. No
 * allocation per frame: the buffer grows to the largest frame and is reused. */
struct frame_reader {
        struct buf in;
        size_t off; /* bytes of in already yielded as frames */
};

#define FRAME_READER_INIT   \
        {                   \
                BUF_INIT, 0 \
        }

/* Room for at least want more bytes at *ret; returns the room's size (> 0) or -ENOMEM. */
int frame_reader_space(struct frame_reader *r, size_t want, char **ret);
/* n bytes (at most the room given) were written at the space's start. */
void frame_reader_commit(struct frame_reader *r, size_t n);
/* 1 with *ret filled, 0 when the next frame is incomplete, -EPROTO for a malformed header
 * (the stream cannot be resynchronised: close it). */
int frame_reader_next(struct frame_reader *r, struct frame *ret);
void frame_reader_compact(struct frame_reader *r);
void frame_reader_free(struct frame_reader *r);

/* WINDOW payload helpers. */
void frame_window_pack(uint8_t out[4], uint32_t credit);
int frame_window_unpack(const struct frame *f, uint32_t *ret_credit); /* -EPROTO if len!=4 */

#endif
