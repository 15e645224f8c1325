/* The output pump (see pump.h; docs/decisions/0040). */
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "agent/pump.h"
#include "agent/service.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/utf8.h"

#define CARRY_MAX 3 /* the most bytes of an incomplete UTF-8 character */

/* Every pump reads into this one buffer (one loop thread; on_data consumes or copies the
 * bytes before the next read). The first CARRY_MAX bytes take the carried bytes in front
 * of a read, so a held character is joined without a copy of the read. */
static char pump_buf[CARRY_MAX + CELLA_PUMP_READ];

static void pump_update_poll(struct pump *p);

static size_t pump_allowance(struct pump *p)
{
        size_t n = CELLA_FRAME_DATA_CHUNK;

        if (p->eof || p->closing)
                return 0;
        if (p->ops->allowance)
                n = MIN(p->ops->allowance(p), (size_t)CELLA_PUMP_READ);
        /* held bytes go out with the next read: they count against the allowance */
        return n > p->ncarry ? n - p->ncarry : 0;
}

/* Hand the n bytes read at pump_buf + CARRY_MAX to the owner (joined with what was held). */
static void deliver(struct pump *p, size_t n)
{
        char *d = pump_buf + CARRY_MAX;
        size_t len = n, cut;

        if (!p->utf8) {
                p->ops->on_data(p, d, len);
                return;
        }
        d -= p->ncarry;
        memcpy(d, p->carry, p->ncarry);
        len += p->ncarry;
        cut = utf8_complete_prefix(d, len);
        p->ncarry = (uint8_t)(len - cut);
        memcpy(p->carry, d + cut, p->ncarry);
        if (cut > 0)
                p->ops->on_data(p, d, cut);
}

/* End of output: what is held goes out (incomplete: the reader decides), then on_eof. */
static void reach_eof(struct pump *p)
{
        if (p->eof)
                return;
        p->eof = true;
        if (p->reading) {
                uv_read_stop((uv_stream_t *)&p->h.pipe);
                p->reading = false;
        }
        if (p->ncarry > 0 && !p->closing) {
                memcpy(pump_buf, p->carry, p->ncarry);
                p->ops->on_data(p, pump_buf, p->ncarry);
                p->ncarry = 0;
        }
        if (!p->closing && p->ops->on_eof)
                p->ops->on_eof(p);
        if (p->is_poll && !p->closing)
                pump_update_poll(p);
}

/* ---- pipe mode ---- */

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        struct pump *p = h->data;

        (void)suggested;
        /* 0 bytes: libuv answers UV_ENOBUFS and reading pauses */
        *ret = uv_buf_init(pump_buf + CARRY_MAX, (unsigned)pump_allowance(p));
}

static void on_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct pump *p = st->data;

        (void)b;
        if (n == UV_ENOBUFS) {
                pump_pause(p);
                return;
        }
        if (n < 0) {
                if (n != UV_EOF)
                        log_debug("read child output: %s", uv_strerror((int)n));
                reach_eof(p);
                return;
        }
        if (n == 0 || p->closing)
                return;
        if (!p->grown && (size_t)n >= CELLA_FRAME_DATA_CHUNK && p->fd >= 0) {
                /* a full chunk: the command writes in bulk, a larger pipe takes more per
                 * read (refused beyond the user's pipe quota: it stays as it is) */
                p->grown = true;
                (void)fcntl(p->fd, F_SETPIPE_SZ, CELLA_PUMP_PIPE_SIZE);
        }
        deliver(p, (size_t)n);
        if (p->reading && pump_allowance(p) == 0)
                pump_pause(p);
}

/* ---- poll mode ---- */

static void poll_read(struct pump *p)
{
        size_t allow;
        ssize_t n;

        while ((allow = pump_allowance(p)) > 0) {
                n = read(p->fd, pump_buf + CARRY_MAX, allow);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0 && errno == EAGAIN)
                        return;
                if (n <= 0) {
                        /* EOF, or EIO: no slave descriptor of a pty is open any more */
                        reach_eof(p);
                        return;
                }
                deliver(p, (size_t)n);
        }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
        struct pump *p = h->data;

        if (status < 0)
                p->poll_events = 0; /* libuv stopped the handle */
        if (status < 0 || (events & UV_READABLE))
                poll_read(p);
        if (!p->closing && (events & UV_WRITABLE) && p->ops->on_writable)
                p->ops->on_writable(p);
        if (!p->closing)
                pump_update_poll(p);
}

static void pump_update_poll(struct pump *p)
{
        int ev = 0;

        if (!p->inited || p->closing || p->fd < 0)
                return;
        if (pump_allowance(p) > 0)
                ev |= UV_READABLE;
        if (p->ops->wants_write && p->ops->wants_write(p))
                ev |= UV_WRITABLE;
        if (ev == p->poll_events)
                return;
        p->poll_events = ev;
        if (ev)
                uv_poll_start(&p->h.poll, ev, on_poll);
        else
                uv_poll_stop(&p->h.poll);
}

/* ---- the interface ---- */

static void pump_init(struct pump *p, int fd, const struct pump_ops *ops, void *owner, int index)
{
        memset(p, 0, sizeof(*p));
        p->ops = ops;
        p->owner = owner;
        p->index = index;
        p->fd = fd;
}

int pump_open_pipe(struct pump *p, uv_loop_t *loop, int fd, const struct pump_ops *ops, void *owner,
                   int index)
{
        int r;

        pump_init(p, fd, ops, owner, index);
        uv_pipe_init(loop, &p->h.pipe, 0);
        p->h.handle.data = p;
        p->inited = true;
        r = uv_pipe_open(&p->h.pipe, fd);
        if (r < 0) {
                close(fd);
                p->fd = -EBADF;
                p->eof = true;
        }
        return r;
}

int pump_open_poll(struct pump *p, uv_loop_t *loop, int fd, const struct pump_ops *ops, void *owner,
                   int index)
{
        int r;

        pump_init(p, fd, ops, owner, index);
        p->is_poll = true;
        r = uv_poll_init(loop, &p->h.poll, fd);
        if (r < 0) {
                close(fd);
                p->fd = -EBADF;
                p->eof = true;
                return r;
        }
        p->h.handle.data = p; /* uv_poll_init cleared it */
        p->inited = true;
        return 0;
}

void pump_resume(struct pump *p)
{
        if (!p->inited || p->closing)
                return;
        if (p->is_poll) {
                pump_update_poll(p);
                return;
        }
        if (p->eof)
                return;
        if (pump_allowance(p) == 0) {
                pump_pause(p);
                return;
        }
        if (p->reading)
                return;
        if (uv_read_start((uv_stream_t *)&p->h.pipe, on_alloc, on_read) < 0) {
                reach_eof(p);
                return;
        }
        p->reading = true;
}

void pump_read(struct pump *p)
{
        if (!p->inited || p->closing || p->eof)
                return;
        if (p->is_poll) {
                poll_read(p);
                if (!p->closing)
                        pump_update_poll(p);
                return;
        }
        pump_resume(p);
}

void pump_pause(struct pump *p)
{
        if (!p->inited || p->closing)
                return;
        if (p->is_poll) {
                pump_update_poll(p);
                return;
        }
        if (p->reading) {
                uv_read_stop((uv_stream_t *)&p->h.pipe);
                p->reading = false;
        }
}

void pump_drain(struct pump *p)
{
        ssize_t n;

        if (!pump_is_live(p))
                return;
        for (;;) {
                n = read(p->fd, pump_buf + CARRY_MAX, CELLA_FRAME_DATA_CHUNK);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0 || p->closing)
                        return;
                deliver(p, (size_t)n);
        }
}

static void on_close(uv_handle_t *h)
{
        struct pump *p = h->data;

        if (p->ops->on_closed)
                p->ops->on_closed(p);
}

void pump_close(struct pump *p)
{
        if (!p->inited || p->closing)
                return;
        p->closing = true;
        p->reading = false;
        p->ncarry = 0;
        if (p->is_poll) {
                uv_poll_stop(&p->h.poll);
                p->poll_events = 0;
                if (p->fd >= 0)
                        close(p->fd);
        }
        /* a uv_pipe_t closes its descriptor itself */
        p->fd = -EBADF;
        uv_close(&p->h.handle, on_close);
}

void pump_resume_all(struct pump *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                pump_resume(&p[i]);
}

void pump_close_all(struct pump *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                pump_close(&p[i]);
}

bool pump_all_done(const struct pump *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (pump_is_live(&p[i]))
                        return false;
        return true;
}

/* ---- streamed sinks ---- */

size_t pump_credit(const struct stream *s)
{
        if (stream_congested(s))
                return 0;
        return s->send_credit < CELLA_FRAME_DATA_CHUNK ? (size_t)s->send_credit
                                                       : CELLA_FRAME_DATA_CHUNK;
}

size_t pump_credit_bulk(const struct stream *s)
{
        /* While the socket holds back part of the last frame, what the command writes
         * waits in its pipe (grown to CELLA_PUMP_PIPE_SIZE) rather than in small frames
         * copied behind it: once the queue drained, one read takes it whole. It would go
         * out no sooner either way, so interactive output waits for nothing. */
        if (stream_congested(s) || stream_busy(s))
                return 0;
        return s->send_credit < CELLA_PUMP_READ ? (size_t)s->send_credit : CELLA_PUMP_READ;
}

int pump_emit(struct stream *s, uint8_t type, const void *data, size_t n)
{
        int r = stream_send(s, type, data, n);

        if (r < 0)
                return r;
        s->send_credit -= n < s->send_credit ? (uint64_t)n : s->send_credit;
        return 0;
}
