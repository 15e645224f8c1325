/* The output pump: the one place where cella-init reads what a child writes (a command's
 * stdout and stderr pipes, a session command's FIFOs, a background process's pipes, an
 * interpreter runner's pipes, a terminal's pty master) and moves it on (docs/decisions/0040).
 *
 * A struct pump owns the read side of one descriptor: a uv_pipe_t (pump_open_pipe) or, for a
 * pty master that is also written to, a uv_poll_t (pump_open_poll). Reading is driven by
 * the owner's ops:
 *   allowance   how many bytes the sink takes now (a stream's window credit, room in a
 *               bounded buffer; at most CELLA_PUMP_READ is read at once); 0 pauses reading
 *               until pump_resume. NULL: always a chunk (CELLA_FRAME_DATA_CHUNK: a log or a
 *               ring that never pushes back).
 *   on_data     bytes read, at most the allowance. They live in one buffer shared by every
 *               pump (one loop thread, CELLA_PUMP_READ bytes): valid during the call.
 *               A pipe whose read filled a chunk is grown to CELLA_PUMP_PIPE_SIZE.
 *   on_eof      end of output (EOF, a read error, EIO from a pty master): reading has
 *               stopped for good; the handle stays open until pump_close.
 *   on_closed   the handle is closed (after pump_close): the owner may free the memory.
 *   wants_write, on_writable  (poll mode) the owner writes to the same descriptor (terminal
 *               input): whether it has something to write, and the descriptor is writable.
 * With utf8 set, a character split across two reads is held back (up to 3 bytes) and
 * delivered with the next read or at EOF; the allowance counts the held bytes.
 *
 * For the streamed sinks, pump_credit and pump_emit are the window bookkeeping: what a
 * stream may take now, and sending one output frame that spends its credit.
 *
 * Invariants: after on_eof, no on_data; after pump_close, no callback but on_closed; the
 * pump never allocates. */
#ifndef CELLA_AGENT_PUMP_H
#define CELLA_AGENT_PUMP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

struct pump;
struct stream;

struct pump_ops {
        size_t (*allowance)(struct pump *p);
        void (*on_data)(struct pump *p, const char *data, size_t n);
        void (*on_eof)(struct pump *p);
        void (*on_closed)(struct pump *p);
        bool (*wants_write)(struct pump *p);
        void (*on_writable)(struct pump *p);
};

struct pump {
        union {
                uv_handle_t handle;
                uv_pipe_t pipe;
                uv_poll_t poll;
        } h;
        const struct pump_ops *ops;
        void *owner; /* the owner's object */
        int index;   /* the owner's tag (0 stdout, 1 stderr) */
        int fd;      /* the descriptor (owned; closed with the handle) */
        bool is_poll;
        bool inited;  /* the handle exists (and pump_close must run) */
        bool closing; /* pump_close ran */
        bool eof;     /* on_eof ran (or the descriptor could not be watched) */
        bool reading; /* pipe: uv_read_start is active */
        int poll_events;
        bool utf8;
        bool grown; /* pipe: F_SETPIPE_SZ was tried */
        uint8_t ncarry;
        char carry[4];
};

/* Watch fd (a pipe or FIFO; owned from here on, also on failure) with a uv_pipe_t. 0, or
 * -errno: the descriptor is closed and the pump at EOF, and pump_close still has to run.
 * Reading starts with pump_resume. */
int pump_open_pipe(struct pump *p, uv_loop_t *loop, int fd, const struct pump_ops *ops, void *owner,
                   int index);
/* The same with a uv_poll_t, for a descriptor that the owner also writes to (a pty master,
 * non-blocking). On failure nothing is left to close: on_closed will not come. */
int pump_open_poll(struct pump *p, uv_loop_t *loop, int fd, const struct pump_ops *ops, void *owner,
                   int index);
/* Look at the allowance (and, in poll mode, wants_write) again: read while it is > 0,
 * pause while it is 0. */
void pump_resume(struct pump *p);
/* Poll mode: read now, as much as the allowance permits, without waiting for the loop
 * (a terminal whose shell was just reaped); pipe mode: pump_resume. */
void pump_read(struct pump *p);
/* Stop reading until the next pump_resume. */
void pump_pause(struct pump *p);
/* Read what the descriptor holds now, whatever the allowance (a runner's output written
 * before its done event), until it would block; EOF is not reported. */
void pump_drain(struct pump *p);
/* Stop and close the handle and the descriptor; on_closed follows from the loop. Held
 * UTF-8 bytes are dropped. Idempotent; nothing for a pump never opened. */
void pump_close(struct pump *p);
/* Still reading or able to: opened, not at EOF, not closing. */
static inline bool pump_is_live(const struct pump *p)
{
        return p->inited && !p->eof && !p->closing;
}

/* ---- the pumps of one child together (its stdout and stderr) ---- */

/* pump_resume, pump_close on each of the n pumps at p. */
void pump_resume_all(struct pump *p, size_t n);
void pump_close_all(struct pump *p, size_t n);
/* None of the n pumps at p is live: all at EOF, closing or never opened. */
bool pump_all_done(const struct pump *p, size_t n);

/* ---- streamed sinks ---- */

/* Bytes stream s may take now: its window credit, at most a chunk, 0 while the
 * connection is congested. */
size_t pump_credit(const struct stream *s);
/* The same, at most CELLA_PUMP_READ: for a sink that sends what it is given as it is (its
 * own buffers are not involved); 0 also while the socket holds back part of the last
 * frame (stream_busy: the output waits in the pipe and goes out in one larger frame). */
size_t pump_credit_bulk(const struct stream *s);
/* Send n bytes as one frame of type (STDOUT, STDERR, DATA) on s and spend its credit (at
 * most what is left). 0, or stream_send's -errno (nothing spent). */
int pump_emit(struct stream *s, uint8_t type, const void *data, size_t n);

#endif
