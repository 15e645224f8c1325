/* The services beneath the frame handlers (see service.h): the connection's write queue
 * with its high-water mark, answering on streams, stream registration, lookup and windows,
 * and the children registry the reaper consults. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/conn.h"
#include "agent/service.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/frame-uv.h"
#include "common/proto.h"

/* Above this many queued output bytes the producers pause; below LOW they resume. */
#define WRITE_HIGH_WATER (4u * 1024 * 1024)
#define WRITE_LOW_WATER (1u * 1024 * 1024)

/* ---- writing ---- */

static void resume_streams(struct conn *c)
{
        struct stream *s, *next;

        for (s = c->streams; s && !c->closing && !c->congested; s = next) {
                next = s->next;
                if (s->ops->on_window)
                        s->ops->on_window(s);
        }
}

/* The streams that wait for an empty write queue (stream_queued, wait_drain). */
static void resume_drain_waiters(struct conn *c)
{
        struct stream *s, *next;

        for (s = c->streams; s && !c->closing && c->queued == 0; s = next) {
                next = s->next;
                if (s->wait_drain) {
                        s->wait_drain = false;
                        if (s->ops->on_window)
                                s->ops->on_window(s);
                }
        }
}

static void on_write_done(uv_write_t *req, int status)
{
        struct frame_write *w = (struct frame_write *)req;
        struct conn *c = w->conn;

        c->queued -= w->len;
        free(w);
        if (c->closing)
                return;
        if (status < 0) {
                log_info("write to cellad: %s", uv_strerror(status));
                conn_fail(c, "write failed");
                return;
        }
        if (c->congested && c->queued < WRITE_LOW_WATER) {
                c->congested = false;
                c->held = false;
                resume_streams(c);
        } else if (c->held && c->queued == 0) {
                c->held = false;
                resume_streams(c);
        } else if (c->queued == 0) {
                resume_drain_waiters(c);
        }
}

int conn_send(struct conn *c, uint8_t type, uint32_t id, const void *payload, size_t len)
{
        int n;

        if (c->closing)
                return -EPIPE;
        n = frame_uv_write((uv_stream_t *)&c->pipe, c, type, id, payload, len, on_write_done);
        if (n < 0)
                return n;
        c->queued += (size_t)n;
        if (c->queued > WRITE_HIGH_WATER)
                c->congested = true;
        return 0;
}

void conn_send_json(struct conn *c, uint8_t type, uint32_t id, json_t *j)
{
        char *text;

        if (!j) {
                log_error("out of memory building %s", frame_type_name(type));
                return;
        }
        text = json_dumps(j, JSON_COMPACT);
        json_decref(j);
        if (!text) {
                log_error("out of memory serialising %s", frame_type_name(type));
                return;
        }
        if (conn_send(c, type, id, text, strlen(text)) < 0)
                log_debug("dropped %s for stream %u", frame_type_name(type), id);
        free(text);
}

void conn_send_error(struct conn *c, uint32_t id, const struct cella_error *err)
{
        int code = err && err->code != CELLA_E_OK ? err->code : CELLA_E_INTERNAL_ERROR;

        conn_send_json(c, FRAME_ERROR, id,
                       json_pack("{s:s, s:s}", "code", cella_code_name(code), "message",
                                 err ? err->msg : ""));
}

void conn_reply_error(struct conn *c, uint32_t id, int code, const char *fmt, ...)
{
        struct cella_error err = {0};
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(&err, code, fmt, ap);
        va_end(ap);
        conn_send_error(c, id, &err);
}

int stream_send(struct stream *s, uint8_t type, const void *payload, size_t len)
{
        if (!s->conn)
                return -EPIPE;
        return conn_send(s->conn, type, s->id, payload, len);
}

/* Read len bytes of fd at off into buf; -ENODATA at an early end of file. */
static int pread_all(int fd, char *buf, size_t len, uint64_t off)
{
        size_t done = 0;

        while (done < len) {
                ssize_t n = pread(fd, buf + done, len - done, (off_t)(off + done));

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        return -ENODATA;
                done += (size_t)n;
        }
        return 0;
}

int stream_send_file(struct stream *s, uint8_t type, int fd, uint64_t off, size_t len)
{
        struct conn *c = s->conn;
        uint8_t head[CELLA_FRAME_HEADER];
        struct frame_write *w;
        size_t taken = 0, rest, hrest;
        uv_os_fd_t sock;
        struct stat st;
        uv_buf_t b;
        int r;

        if (!c || c->closing)
                return -EPIPE;
        if (len > CELLA_FRAME_MAX)
                return -EINVAL;
        if (fstat(fd, &st) < 0)
                return -errno;
        if ((uint64_t)st.st_size < off + len)
                return -ENODATA;
        frame_header_pack(head, type, s->id, (uint32_t)len);
        if (c->queued == 0 && uv_stream_get_write_queue_size((uv_stream_t *)&c->pipe) == 0 &&
            uv_fileno((uv_handle_t *)&c->pipe, &sock) == 0) {
                ssize_t n;

                do
                        n = send(sock, head, sizeof(head), MSG_DONTWAIT | MSG_NOSIGNAL | MSG_MORE);
                while (n < 0 && errno == EINTR);
                if (n > 0)
                        taken = (size_t)n;
                while (taken >= sizeof(head) && taken < sizeof(head) + len) {
                        off_t o = (off_t)(off + (taken - sizeof(head)));

                        n = sendfile(sock, fd, &o, sizeof(head) + len - taken);
                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n <= 0)
                                break; /* full (or the file was cut): the rest is read */
                        taken += (size_t)n;
                }
        }
        rest = sizeof(head) + len - taken;
        if (rest == 0)
                return 0;
        hrest = taken < sizeof(head) ? sizeof(head) - taken : 0;
        w = malloc(offsetof(struct frame_write, data) + rest + 1);
        if (!w) {
                r = -ENOMEM;
                goto cut;
        }
        if (hrest)
                memcpy(w->data, head + taken, hrest);
        r = pread_all(fd, w->data + hrest, rest - hrest, off + (len - (rest - hrest)));
        if (r < 0) {
                free(w);
                goto cut;
        }
        w->conn = c;
        w->len = rest;
        b = uv_buf_init(w->data, (unsigned)rest);
        r = uv_write(&w->req, (uv_stream_t *)&c->pipe, &b, 1, on_write_done);
        if (r < 0) {
                free(w);
                goto cut;
        }
        c->queued += rest;
        if (c->queued > WRITE_HIGH_WATER)
                c->congested = true;
        return 0;
cut:
        if (taken == 0)
                return r;
        /* part of the frame is out: the link cannot go on */
        conn_fail(c, "a file frame could not be completed");
        return -ECONNABORTED;
}

bool stream_queued(const struct stream *s)
{
        return s->conn && s->conn->queued > 0;
}

int stream_send_json(struct stream *s, uint8_t type, json_t *j)
{
        if (!s->conn) {
                json_decref(j);
                return -EPIPE;
        }
        conn_send_json(s->conn, type, s->id, j);
        return 0;
}

bool stream_congested(const struct stream *s)
{
        return s->conn && s->conn->congested;
}

bool stream_busy(const struct stream *s)
{
        if (!s->conn || s->conn->queued == 0)
                return false;
        s->conn->held = true;
        return true;
}

static void stream_unlink(struct stream *s)
{
        struct conn *c = s->conn;

        if (!c)
                return;
        if (s->prev)
                s->prev->next = s->next;
        else
                c->streams = s->next;
        if (s->next)
                s->next->prev = s->prev;
        s->prev = s->next = NULL;
        s->conn = NULL;
        c->nstreams--;
}

void stream_end_json(struct stream *s, uint8_t type, json_t *j)
{
        stream_send_json(s, type, j);
        stream_unlink(s);
}

void stream_end_error(struct stream *s, int code, const char *fmt, ...)
{
        struct cella_error err = {0};
        va_list ap;

        va_start(ap, fmt);
        cella_error_setv(&err, code, fmt, ap);
        va_end(ap);
        if (s->conn)
                conn_send_error(s->conn, s->id, &err);
        stream_unlink(s);
}

struct stream *conn_find_stream(struct conn *c, uint32_t id)
{
        for (struct stream *s = c->streams; s; s = s->next)
                if (s->id == id)
                        return s;
        return NULL;
}

int conn_add_stream(struct conn *c, struct stream *s, uint32_t id, const struct stream_ops *ops)
{
        if (conn_find_stream(c, id))
                return -EEXIST;
        if (c->nstreams >= CELLA_AGENT_MAX_STREAMS)
                return -EMFILE;
        s->id = id;
        s->ops = ops;
        s->send_credit = CELLA_STREAM_WINDOW;
        s->recv_credit = CELLA_STREAM_WINDOW;
        s->conn = c;
        s->prev = NULL;
        s->next = c->streams;
        if (c->streams)
                c->streams->prev = s;
        c->streams = s;
        c->nstreams++;
        return 0;
}

/* ---- connection lifetime ---- */

void conn_on_closed(uv_handle_t *h)
{
        struct conn *c = h->data;

        frame_reader_free(&c->in);
        free(c);
}

void conn_fail(struct conn *c, const char *why)
{
        if (c->closing)
                return;
        log_info("closing connection: %s", why);
        c->closing = true;
        while (c->streams) {
                struct stream *s = c->streams;

                stream_unlink(s);
                if (s->ops->on_cancel)
                        s->ops->on_cancel(s, true);
        }
        if (c->a->conn == c)
                c->a->conn = NULL;
        uv_close((uv_handle_t *)&c->pipe, conn_on_closed);
}

/* ---- windows ---- */

void stream_add_send_credit(struct stream *s, uint32_t credit)
{
        s->send_credit += credit;
        if (s->send_credit > (uint64_t)1 << 40)
                s->send_credit = (uint64_t)1 << 40;
}

bool stream_take_recv_credit(struct stream *s, size_t len)
{
        s->recv_credit -= (int64_t)len;
        return s->recv_credit >= 0;
}

unsigned conn_stream_count(const struct conn *c)
{
        return c->nstreams;
}

/* ---- children ---- */

struct child_watch {
        struct child_watch *next;
        pid_t pid;
        void (*cb)(void *ud, pid_t pid, int status);
        void *ud;
};

int agent_watch_child(struct agent *a, pid_t pid, void (*cb)(void *ud, pid_t pid, int status),
                      void *ud)
{
        struct child_watch *w = calloc(1, sizeof(*w));

        if (!w)
                return -ENOMEM;
        w->pid = pid;
        w->cb = cb;
        w->ud = ud;
        w->next = a->watches;
        a->watches = w;
        return 0;
}

void agent_unwatch_child(struct agent *a, pid_t pid)
{
        for (struct child_watch **p = &a->watches; *p; p = &(*p)->next)
                if ((*p)->pid == pid) {
                        struct child_watch *w = *p;

                        *p = w->next;
                        free(w);
                        return;
                }
}

bool agent_child_exited(struct agent *a, pid_t pid, int status)
{
        for (struct child_watch **p = &a->watches; *p; p = &(*p)->next)
                if ((*p)->pid == pid) {
                        struct child_watch *w = *p;

                        *p = w->next;
                        w->cb(w->ud, pid, status);
                        free(w);
                        return true;
                }
        return false;
}

void agent_unwatch_all(struct agent *a)
{
        while (a->watches) {
                struct child_watch *w = a->watches;

                a->watches = w->next;
                free(w);
        }
}

int agent_on_session_end(struct agent *a, void (*fn)(struct agent *a, const char *sid))
{
        for (size_t i = 0; i < AGENT_SESSION_END_HOOKS; i++)
                if (!a->on_session_end[i]) {
                        a->on_session_end[i] = fn;
                        return 0;
                }
        return -ENOSPC;
}

void agent_session_ended(struct agent *a, const char *sid)
{
        for (size_t i = 0; i < AGENT_SESSION_END_HOOKS && a->on_session_end[i]; i++)
                a->on_session_end[i](a, sid);
}
