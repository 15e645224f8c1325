/* cellad's client side of the agent protocol (docs/protocol.md).
 *
 * Streams live in a fixed table of CELLA_AGENT_MAX_STREAMS slots; a stream id is
 * slot + 1 + generation * CELLA_AGENT_MAX_STREAMS, so ids are not reused while a late frame
 * for an old stream could still arrive. A cancelled stream keeps its slot (with no user
 * callbacks) until the agent ends it, so its id cannot be handed out again meanwhile. */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/frame-uv.h"
#include "common/limits.h"
#include "common/log.h"
#include "daemon/agent-conn.h"

enum stream_state {
        STREAM_OPEN,
        STREAM_CANCELLED, /* user told (on_close), waiting for the agent to end it */
};

struct agent_stream {
        struct agent_conn *conn;
        uint32_t id;
        enum stream_state state;
        const struct agent_stream_ops *ops;
        void *userdata;
        uint64_t send_credit;  /* DATA bytes we may still send */
        uint64_t recv_unacked; /* data bytes received and not yet acknowledged */
        uint64_t ack_held;     /* of those, taken by the user, in the next WINDOW */
        bool end_sent;
};

struct agent_conn {
        uv_loop_t *loop;
        uv_pipe_t pipe;
        uv_connect_t connect_req;
        bool closing; /* agent_conn_close called or connection lost */
        bool lost_reported;
        unsigned in_dispatch; /* > 0 while callbacks run from the read path */
        unsigned pending_writes;
        struct frame_reader in;
        void (*on_lost)(struct agent_conn *c, int err, void *userdata);
        void *userdata;
        uint32_t generation;
        unsigned nstreams;
        struct agent_stream *streams[CELLA_AGENT_MAX_STREAMS];
};

static void conn_fail(struct agent_conn *c, int err);

static struct agent_stream *stream_lookup(struct agent_conn *c, uint32_t id)
{
        struct agent_stream *s;
        if (id == 0)
                return NULL;
        s = c->streams[(id - 1) % CELLA_AGENT_MAX_STREAMS];
        return (s && s->id == id) ? s : NULL;
}

static void stream_free(struct agent_stream *s)
{
        struct agent_conn *c = s->conn;
        c->streams[(s->id - 1) % CELLA_AGENT_MAX_STREAMS] = NULL;
        c->nstreams--;
        free(s);
}

/* Deliver on_close once (if the user still holds the stream) and free it. */
static void stream_finish(struct agent_stream *s, int err)
{
        if (s->state == STREAM_OPEN && s->ops->on_close) {
                s->state = STREAM_CANCELLED; /* no more callbacks */
                s->ops->on_close(s, err, s->userdata);
        }
        stream_free(s);
}

static void on_write_done(uv_write_t *req, int status)
{
        struct frame_write *w = (struct frame_write *)req;
        struct agent_conn *c = w->conn;
        c->pending_writes--;
        free(w);
        if (status < 0 && status != UV_ECANCELED)
                conn_fail(c, status);
}

/* Queue one frame. The bytes are copied; the caller's buffers are free on return. */
static int conn_send(struct agent_conn *c, uint8_t type, uint32_t stream, const void *payload,
                     size_t len)
{
        int n;

        if (c->closing)
                return -EPIPE;
        n = frame_uv_write((uv_stream_t *)&c->pipe, c, type, stream, payload, len, on_write_done);
        if (n < 0)
                return n;
        if (n > 0)
                c->pending_writes++; /* else the socket took it whole: no completion */
        return 0;
}

static void dispatch_conn_frame(struct agent_conn *c, const struct frame *f)
{
        switch (f->type) {
        case FRAME_HELLO:
                /* The agent greets every connection; what was sent before the greeting
                 * waited in the socket, so there is nothing to wait for here. */
                break;
        case FRAME_PING:
                conn_send(c, FRAME_PONG, 0, f->payload, f->len);
                break;
        case FRAME_PONG:
                break;
        default:
                log_warn("agent sent %s on stream 0", frame_type_name(f->type));
                conn_fail(c, -EPROTO);
        }
}

static bool is_terminal(uint8_t type)
{
        return type == FRAME_EXIT || type == FRAME_RESULT || type == FRAME_ERROR;
}

static void dispatch_frame(struct agent_conn *c, const struct frame *f)
{
        struct agent_stream *s;
        uint32_t credit;

        if (f->stream == 0) {
                dispatch_conn_frame(c, f);
                return;
        }
        s = stream_lookup(c, f->stream);
        if (!s) {
                /* Late frames for a stream we no longer know are dropped. */
                log_debug("agent frame %s for unknown stream %u", frame_type_name(f->type),
                          f->stream);
                return;
        }
        switch (f->type) {
        case FRAME_WINDOW:
                if (frame_window_unpack(f, &credit) < 0) {
                        conn_fail(c, -EPROTO);
                        return;
                }
                s->send_credit += credit;
                if (s->state == STREAM_OPEN && s->ops->on_writable && credit > 0)
                        s->ops->on_writable(s, s->userdata);
                return;
        case FRAME_STDOUT:
        case FRAME_STDERR:
        case FRAME_DATA:
                s->recv_unacked += f->len;
                if (s->recv_unacked > CELLA_STREAM_WINDOW) {
                        log_warn("agent overran the window of stream %u", s->id);
                        conn_fail(c, -EPROTO);
                        return;
                }
                if (s->state != STREAM_OPEN) {
                        /* Nobody reads it: acknowledge so the agent is not stalled. */
                        agent_stream_ack(s, f->len);
                        return;
                }
                break;
        case FRAME_STARTED:
        case FRAME_EXIT:
        case FRAME_ERROR:
        case FRAME_RESULT:
        case FRAME_FILE_INFO:
                break;
        default:
                log_warn("agent sent unexpected %s", frame_type_name(f->type));
                conn_fail(c, -EPROTO);
                return;
        }
        if (s->state == STREAM_OPEN && s->ops->on_frame)
                s->ops->on_frame(s, f, s->userdata);
        /* on_frame may have cancelled or closed everything; look the stream up again. */
        if (is_terminal(f->type) && !c->closing) {
                s = stream_lookup(c, f->stream);
                if (s)
                        stream_finish(s, 0);
        }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct agent_conn *c = h->data;
        char *p;
        int room = frame_reader_space(&c->in, CELLA_FRAME_HEADER + CELLA_PUMP_READ, &p);

        (void)suggested;
        *ret = room < 0 ? uv_buf_init(NULL, 0) : uv_buf_init(p, (unsigned)room);
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct agent_conn *c = st->data;
        struct frame f;
        int r = 0;

        (void)b;
        if (n < 0) {
                conn_fail(c, n == UV_EOF ? -ECONNRESET : (int)n);
                return;
        }
        if (n == 0)
                return;
        frame_reader_commit(&c->in, (size_t)n);
        c->in_dispatch++;
        while (!c->closing && (r = frame_reader_next(&c->in, &f)) > 0)
                dispatch_frame(c, &f);
        if (r < 0) {
                log_warn("malformed frame from agent");
                conn_fail(c, -EPROTO);
        }
        c->in_dispatch--;
        if (!c->closing)
                frame_reader_compact(&c->in);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct agent_conn *c = h->data;
        frame_reader_free(&c->in);
        free(c);
}

/* Tear the connection down: every stream is told, then the user (once), then the handle
 * is closed and the memory freed from its close callback. */
static void conn_fail(struct agent_conn *c, int err)
{
        if (c->closing)
                return;
        c->closing = true;
        for (unsigned i = 0; i < CELLA_AGENT_MAX_STREAMS && c->nstreams > 0; i++)
                if (c->streams[i])
                        stream_finish(c->streams[i], err);
        if (!c->lost_reported && c->on_lost) {
                c->lost_reported = true;
                c->on_lost(c, err, c->userdata);
        }
        uv_close((uv_handle_t *)&c->pipe, on_handle_closed);
}

static void on_connect(uv_connect_t *req, int status)
{
        struct agent_conn *c = req->data;
        int size = CELLA_STREAM_WINDOW;
        uv_os_fd_t fd;
        int r;
        if (c->closing)
                return;
        if (status < 0) {
                log_warn("connect to agent: %s", uv_strerror(status));
                conn_fail(c, status);
                return;
        }
        /* a send buffer of a stream's window: an upload's frames wait in the socket, not
         * copied behind a write request each time the 208 KiB default fills (0061) */
        if (uv_fileno((uv_handle_t *)&c->pipe, &fd) == 0 &&
            setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &size, sizeof(size)) < 0)
                (void)setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size));
        r = uv_read_start((uv_stream_t *)&c->pipe, on_alloc, on_read);
        if (r < 0)
                conn_fail(c, r);
}

int agent_conn_new(uv_loop_t *loop, const char *path,
                   void (*on_lost)(struct agent_conn *c, int err, void *userdata), void *userdata,
                   struct agent_conn **ret, struct cella_error *err)
{
        struct agent_conn *c;
        int r;

        c = calloc(1, sizeof(*c));
        if (!c)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        c->loop = loop;
        c->on_lost = on_lost;
        c->userdata = userdata;
        r = uv_pipe_init(loop, &c->pipe, 0);
        if (r < 0) {
                free(c);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "agent socket: %s",
                                       uv_strerror(r));
        }
        c->pipe.data = c;
        c->connect_req.data = c;
        uv_pipe_connect(&c->connect_req, &c->pipe, path, on_connect);
        *ret = c;
        return 0;
}

int agent_conn_control(struct agent_conn *c, uint8_t type)
{
        return c ? conn_send(c, type, 0, NULL, 0) : -ENOTCONN;
}

void agent_conn_close(struct agent_conn *c)
{
        if (!c)
                return;
        c->on_lost = NULL; /* the owner is closing it: no on_lost */
        conn_fail(c, -ECONNRESET);
}

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

int agent_conn_peer_pidfd(const struct agent_conn *c)
{
        socklen_t len = sizeof(int);
        uv_os_fd_t fd;
        int pidfd = -1;

        if (!c || uv_fileno((const uv_handle_t *)&c->pipe, &fd) < 0)
                return -ENOTCONN;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
                return -errno;
        return pidfd;
}

bool agent_conn_peer_gone(const struct agent_conn *c)
{
        uv_os_fd_t fd;

        if (!c || c->closing || uv_fileno((const uv_handle_t *)&c->pipe, &fd) < 0)
                return true;
        struct pollfd p = {.fd = fd, .events = POLLRDHUP};
        return poll(&p, 1, 0) > 0 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR | POLLNVAL));
}

unsigned agent_conn_stream_count(const struct agent_conn *c)
{
        return c ? c->nstreams : 0;
}

int agent_conn_open(struct agent_conn *c, uint8_t type, json_t *payload,
                    const struct agent_stream_ops *ops, void *userdata, struct agent_stream **ret,
                    struct cella_error *err)
{
        _cleanup_free_ char *text = NULL;
        struct agent_stream *s;
        unsigned slot;
        int r;

        if (c->closing)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "the sandbox's agent is not connected");
        if (c->nstreams >= CELLA_AGENT_MAX_STREAMS)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "too many concurrent operations on this sandbox (%d)",
                                       CELLA_AGENT_MAX_STREAMS);
        text = json_dumps(payload, JSON_COMPACT);
        if (!text)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (strlen(text) > CELLA_FRAME_MAX)
                return cella_error_set(err, CELLA_E_PAYLOAD_TOO_LARGE,
                                       "request is larger than %d bytes", CELLA_FRAME_MAX);
        /* Find a free slot, starting after the last one handed out. */
        for (slot = 0; slot < CELLA_AGENT_MAX_STREAMS; slot++) {
                unsigned i = (c->generation + slot) % CELLA_AGENT_MAX_STREAMS;
                if (!c->streams[i]) {
                        slot = i;
                        break;
                }
        }
        s = calloc(1, sizeof(*s));
        if (!s)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        c->generation++;
        s->conn = c;
        s->id = slot + 1 +
                (c->generation / CELLA_AGENT_MAX_STREAMS % 1000000u) * CELLA_AGENT_MAX_STREAMS;
        s->ops = ops;
        s->userdata = userdata;
        s->send_credit = CELLA_STREAM_WINDOW;
        r = conn_send(c, type, s->id, text, strlen(text));
        if (r < 0) {
                free(s);
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "send to the sandbox's agent: %s", strerror(-r));
        }
        c->streams[slot] = s;
        c->nstreams++;
        if (ret)
                *ret = s;
        return 0;
}

uint32_t agent_stream_id(const struct agent_stream *s)
{
        return s->id;
}

int agent_stream_send_data(struct agent_stream *s, const void *data, size_t len)
{
        const char *p = data;
        int r;

        if (s->state != STREAM_OPEN || s->end_sent || s->conn->closing)
                return -EPIPE;
        if (len > s->send_credit)
                return -EAGAIN;
        while (len > 0) {
                size_t n = MIN(len, (size_t)CELLA_FRAME_DATA_CHUNK);
                r = conn_send(s->conn, FRAME_DATA, s->id, p, n);
                if (r < 0)
                        return r;
                s->send_credit -= n;
                p += n;
                len -= n;
        }
        return 0;
}

size_t agent_stream_send_credit(const struct agent_stream *s)
{
        if (s->state != STREAM_OPEN || s->end_sent)
                return 0;
        return (size_t)s->send_credit;
}

int agent_stream_send_end(struct agent_stream *s)
{
        int r;
        if (s->state != STREAM_OPEN || s->end_sent)
                return -EPIPE;
        r = conn_send(s->conn, FRAME_END, s->id, NULL, 0);
        if (r == 0)
                s->end_sent = true;
        return r;
}

/* Credit goes back in WINDOW frames of CELLA_STREAM_ACK_BATCH at least (a quarter of the
 * window, so an agent that waits for credit always gets it), or at once when forced: one
 * WINDOW per frame was a write in cellad and a wakeup in the agent per frame. */
static void stream_ack(struct agent_stream *s, size_t bytes, bool force)
{
        uint8_t w[4];
        uint64_t n;

        if (s->conn->closing)
                return;
        s->ack_held = MIN(s->ack_held + bytes, s->recv_unacked);
        if (s->ack_held == 0 || (!force && s->ack_held < CELLA_STREAM_ACK_BATCH))
                return;
        n = s->ack_held;
        s->recv_unacked -= n;
        s->ack_held = 0;
        frame_window_pack(w, (uint32_t)n);
        conn_send(s->conn, FRAME_WINDOW, s->id, w, sizeof(w));
}

void agent_stream_ack(struct agent_stream *s, size_t bytes)
{
        if (bytes)
                stream_ack(s, bytes, false);
}

int agent_stream_send_json(struct agent_stream *s, uint8_t type, json_t *payload)
{
        _cleanup_free_ char *text = NULL;

        if (s->state != STREAM_OPEN || s->end_sent || s->conn->closing)
                return -EPIPE;
        text = json_dumps(payload, JSON_COMPACT);
        if (!text)
                return -ENOMEM;
        return conn_send(s->conn, type, s->id, text, strlen(text));
}

void agent_stream_cancel(struct agent_stream *s)
{
        if (s->state != STREAM_OPEN)
                return;
        conn_send(s->conn, FRAME_CANCEL, s->id, NULL, 0);
        /* The user is told now; the slot is held until the agent ends the stream. Pending
         * data credit is returned so the agent can finish. */
        if (s->ops->on_close) {
                s->state = STREAM_CANCELLED;
                s->ops->on_close(s, -ECANCELED, s->userdata);
        }
        s->state = STREAM_CANCELLED;
        if (s->recv_unacked)
                stream_ack(s, (size_t)s->recv_unacked, true);
}
