/* Background processes' followers and ProcessInfo (see proc-follow.h). */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agent/proc-follow.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "common/utf8.h"

#define KILL_POLL_MS 50     /* a kill answers once the tree is gone; checked this often */
#define ATTEMPT_MIN_MS 1000 /* a waitPort attempt may take at least this long */

/* Followers read and send output synchronously within one callback, so one buffer serves
 * them all; the pipes are read by their pumps (pump.h) into the pumps' buffer. */
static char iobuf[CELLA_FRAME_DATA_CHUNK];

static void follower_pump(struct follower *f);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        (void)h;
        (void)suggested;
        *ret = uv_buf_init(iobuf, sizeof(iobuf));
}

/* ---- ProcessInfo ---- */

const char *proc_status_name(enum proc_status s)
{
        static const char *const names[] = {"running", "completed", "failed", "killed", "error"};

        return names[s];
}

json_t *proc_info(const struct proc *p)
{
        char ts[32];
        json_t *j;

        time_format_iso(p->start_ms, ts, sizeof(ts));
        j = json_pack("{s:s, s:i, s:s, s:s, s:s}", "id", p->id, "pid", (int)p->pid, "command",
                      p->command, "status", proc_status_name(p->status), "startTime", ts);
        if (!j)
                return NULL;
        if (p->status != P_RUNNING) {
                time_format_iso(p->end_ms, ts, sizeof(ts));
                json_object_set_new(j, "endTime", json_string(ts));
                if (p->status != P_ERROR)
                        json_object_set_new(j, "exitCode", json_integer(p->exit_code));
                if (p->term_signal)
                        json_object_set_new(j, "signal", json_integer(p->term_signal));
        }
        if (p->session)
                json_object_set_new(j, "sessionId", json_string(p->session));
        if (p->error)
                json_object_set_new(j, "error", json_string(p->error));
        if (p->log_truncated)
                json_object_set_new(j, "logTruncated", json_true());
        return j;
}

/* ---- followers: lifetime ---- */

static void follower_free(struct follower *f)
{
        struct proc *p = f->p;

        if (f->fd >= 0)
                close(f->fd);
        if (f->has_re)
                regfree(&f->re);
        free(f->pattern);
        free(f->path);
        for (int i = 0; i < 2; i++)
                buf_free(&f->line[i]);
        buf_free(&f->req_text);
        buf_free(&f->resp);
        free(f);
        p->t->release(p);
}

static void follower_handle_closed(uv_handle_t *h)
{
        struct follower *f = h->data;

        if (h == (uv_handle_t *)&f->tcp)
                f->tcp_open = false;
        if (--f->handles == 0 && f->done)
                follower_free(f);
}

static void follower_close(struct follower *f, uv_handle_t *h)
{
        if (!uv_is_closing(h))
                uv_close(h, follower_handle_closed);
}

/* The stream has ended or is detached: unlink from the process and release. */
static void follower_finish(struct follower *f)
{
        struct proc *p = f->p;

        if (f->done)
                return;
        f->done = true;
        if (f->prev)
                f->prev->next = f->next;
        else
                p->followers = f->next;
        if (f->next)
                f->next->prev = f->prev;
        f->prev = f->next = NULL;
        follower_close(f, (uv_handle_t *)&f->timer);
        if (f->kind == F_WAIT_PORT) {
                follower_close(f, (uv_handle_t *)&f->poll);
                if (f->tcp_open)
                        follower_close(f, (uv_handle_t *)&f->tcp);
        }
        /* freed by the last close callback */
}

static void follower_result(struct follower *f, json_t *j)
{
        stream_end_json(&f->s, FRAME_RESULT, j);
        follower_finish(f);
}

void follower_error(struct follower *f, int code, const char *msg)
{
        stream_end_error(&f->s, code, "%s", msg);
        follower_finish(f);
}

static void follower_on_window(struct stream *s)
{
        follower_pump((struct follower *)s);
}

static void follower_on_cancel(struct stream *s, bool detach)
{
        struct follower *f = (struct follower *)s;

        if (!detach)
                stream_end_error(s, CELLA_E_BAD_REQUEST, "cancelled");
        follower_finish(f);
}

static const struct stream_ops follower_ops = {
        .on_window = follower_on_window,
        .on_cancel = follower_on_cancel,
};

struct follower *follower_new(struct conn *c, uint32_t id, struct proc *p, enum follower_kind kind)
{
        struct follower *f = calloc(1, sizeof(*f));
        struct agent *a = p->t->a;

        if (!f)
                return NULL;
        f->fd = -EBADF;
        f->p = p;
        f->kind = kind;
        if (conn_add_stream(c, &f->s, id, &follower_ops) < 0) {
                free(f);
                return NULL;
        }
        uv_timer_init(a->loop, &f->timer);
        f->timer.data = f;
        f->handles = 1;
        f->next = p->followers;
        if (p->followers)
                p->followers->prev = f;
        p->followers = f;
        return f;
}

/* ---- followers: reading the output ---- */

static bool follower_sends(const struct follower *f)
{
        return f->kind == F_LOGS || f->kind == F_STREAM;
}

bool follower_reads(const struct follower *f)
{
        return follower_sends(f) || f->kind == F_WAIT_LOG;
}

/* Open the log (or take the rings) and set where reading stops for `logs`. */
int follower_open_output(struct follower *f)
{
        struct proc *p = f->p;

        if (p->log_path) {
                f->fd = open(p->log_path, O_RDONLY | O_CLOEXEC);
                if (f->fd < 0)
                        return -errno;
        }
        f->end = p->log_size;
        for (int i = 0; i < 2; i++) {
                f->ring_pos[i] = p->total[i] - p->ring[i].len;
                f->ring_end[i] = p->total[i];
        }
        return 0;
}

static int pread_full(int fd, void *buf, size_t n, uint64_t off)
{
        size_t got = 0;

        while (got < n) {
                ssize_t r = pread(fd, (char *)buf + got, n - got, (off_t)(off + got));

                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0)
                        return r < 0 ? -errno : -EIO;
                got += (size_t)r;
        }
        return 0;
}

/* Next piece of output for f, up to max bytes, into iobuf: its length (0: nothing now,
 * < 0: the log cannot be read) and stream (0 stdout, 1 stderr). */
static ssize_t follower_next(struct follower *f, size_t max, int *ret_stream)
{
        struct proc *p = f->p;

        if (f->fd >= 0) {
                uint64_t limit = f->kind == F_LOGS ? f->end : p->log_size;

                while (f->pos < limit) {
                        size_t n;

                        if (f->rec_left == 0) {
                                uint8_t h[REC_HEADER];

                                if (pread_full(f->fd, h, sizeof(h), f->pos) < 0)
                                        return -EIO;
                                f->pos += sizeof(h);
                                f->rec_stream = h[0] == 2 ? 1 : 0;
                                f->rec_left = (uint32_t)h[1] << 24 | (uint32_t)h[2] << 16 |
                                              (uint32_t)h[3] << 8 | h[4];
                                continue;
                        }
                        n = MIN((size_t)f->rec_left, max);
                        if (pread_full(f->fd, iobuf, n, f->pos) < 0)
                                return -EIO;
                        f->pos += n;
                        f->rec_left -= (uint32_t)n;
                        *ret_stream = f->rec_stream;
                        return (ssize_t)n;
                }
                return 0;
        }
        for (int k = 0; k < 2; k++) {
                int i = (f->next_ring + k) % 2;
                uint64_t start = p->total[i] - p->ring[i].len;
                uint64_t limit = f->kind == F_LOGS ? f->ring_end[i] : p->total[i];
                size_t n;

                if (f->ring_pos[i] < start)
                        f->ring_pos[i] = start; /* dropped from the ring meanwhile */
                if (f->ring_pos[i] >= limit)
                        continue;
                n = (size_t)MIN((uint64_t)max, limit - f->ring_pos[i]);
                memcpy(iobuf, p->ring[i].data + (f->ring_pos[i] - start), n);
                f->ring_pos[i] += n;
                f->next_ring = (i + 1) % 2;
                *ret_stream = i;
                return (ssize_t)n;
        }
        return 0;
}

static bool follower_caught_up(const struct follower *f)
{
        const struct proc *p = f->p;

        if (f->fd >= 0)
                return f->rec_left == 0 && f->pos >= (f->kind == F_LOGS ? f->end : p->log_size);
        for (int i = 0; i < 2; i++)
                if (f->ring_pos[i] < (f->kind == F_LOGS ? f->ring_end[i] : p->total[i]))
                        return false;
        return true;
}

/* A line as JSON text: invalid UTF-8 bytes become U+FFFD. New reference. */
static json_t *line_json(const char *s, size_t n)
{
        _cleanup_buf_ struct buf b = BUF_INIT;

        while (n > 0) {
                size_t v = utf8_valid_prefix(s, n);

                if (buf_append(&b, s, v) < 0)
                        return NULL;
                s += v;
                n -= v;
                if (n > 0) {
                        if (buf_append(&b, "\xef\xbf\xbd", 3) < 0)
                                return NULL;
                        s++;
                        n--;
                }
        }
        return json_stringn(b.data ? b.data : "", b.len);
}

/* waitLog: test one complete line of stream i; ends f on a match. */
static void match_line(struct follower *f, int i)
{
        struct buf *l = &f->line[i];
        bool hit;

        if (l->len && l->data[l->len - 1] == '\r')
                l->len--;
        if (f->has_re)
                hit = buf_append(l, "", 1) == 0 && regexec(&f->re, l->data, 0, NULL, 0) == 0;
        else
                hit = memmem(l->data ? l->data : "", l->len, f->pattern, strlen(f->pattern));
        if (hit) {
                json_t *line = line_json(l->data ? l->data : "", l->len - (f->has_re ? 1 : 0));

                follower_result(f, json_pack("{s:o, s:s}", "line", line ? line : json_string(""),
                                             "stream", i ? "stderr" : "stdout"));
                return;
        }
        buf_reset(l);
}

static void feed_lines(struct follower *f, int i, const char *d, size_t n)
{
        while (n > 0 && !f->done) {
                const char *nl = memchr(d, '\n', n);
                size_t k = nl ? (size_t)(nl - d) : n;
                size_t room = CELLA_PROC_MAX_LINE - f->line[i].len;

                if (k > room) /* a line too long: matched in pieces */
                        k = room;
                if (buf_append(&f->line[i], d, k) < 0) {
                        follower_error(f, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
                d += k;
                n -= k;
                if (n > 0 && *d == '\n') {
                        d++;
                        n--;
                        match_line(f, i);
                } else if (f->line[i].len >= CELLA_PROC_MAX_LINE) {
                        match_line(f, i);
                }
        }
}

/* End the follower if what it waits for has happened. */
static void follower_check(struct follower *f)
{
        struct proc *p = f->p;

        if (f->done)
                return;
        switch (f->kind) {
        case F_LOGS:
                if (follower_caught_up(f))
                        follower_result(f, proc_info(p));
                break;
        case F_STREAM:
                if (p->settled && follower_caught_up(f))
                        follower_result(f, proc_info(p));
                break;
        case F_WAIT_LOG:
                if (p->settled && follower_caught_up(f)) {
                        for (int i = 0; i < 2 && !f->done; i++)
                                if (f->line[i].len)
                                        match_line(f, i);
                        if (!f->done)
                                follower_error(f, CELLA_E_PROCESS_EXITED_BEFORE_READY,
                                               "the process exited before the pattern appeared");
                }
                break;
        case F_WAIT_PORT:
                if (p->reaped)
                        follower_error(f, CELLA_E_PROCESS_EXITED_BEFORE_READY,
                                       "the process exited before the port was ready");
                break;
        case F_WAIT_EXIT:
                if (p->reaped)
                        follower_result(f, proc_info(p));
                break;
        case F_KILL:
                if (p->reaped && (!p->cgroup || agent_cgroup_is_empty(p->cgroup)))
                        follower_result(f, proc_info(p));
                else if (uv_now(p->t->a->loop) >= f->kill_deadline)
                        follower_result(f, proc_info(p)); /* a custom signal it survives */
                break;
        }
}

static void follower_pump(struct follower *f)
{
        while (!f->done && follower_reads(f)) {
                size_t max = sizeof(iobuf);
                ssize_t n;
                int which = 0;

                if (follower_sends(f)) {
                        max = pump_credit(&f->s); /* at most a chunk: sizeof(iobuf) */
                        if (max == 0)
                                return;
                }
                n = follower_next(f, max, &which);
                if (n < 0) {
                        follower_error(f, CELLA_E_INTERNAL_ERROR,
                                       "the process's log is unreadable");
                        return;
                }
                if (n == 0)
                        break;
                if (follower_sends(f)) {
                        pump_emit(&f->s, which ? FRAME_STDERR : FRAME_STDOUT, iobuf, (size_t)n);
                } else {
                        feed_lines(f, which, iobuf, (size_t)n);
                }
        }
        follower_check(f);
}

void proc_notify(struct proc *p)
{
        struct follower *f, *next;

        for (f = p->followers; f; f = next) {
                next = f->next;
                follower_pump(f);
        }
}

/* ---- waits ---- */

static void on_wait_timeout(uv_timer_t *t)
{
        struct follower *f = t->data;

        if (!f->done)
                follower_error(f, CELLA_E_PROCESS_READY_TIMEOUT,
                               f->kind == F_WAIT_EXIT ? "the process did not exit in time"
                                                      : "the process was not ready in time");
}

static void on_kill_poll(uv_timer_t *t)
{
        follower_check(t->data);
}

/* ---- waitPort ---- */

static void port_attempt(struct follower *f);

static void port_attempt_done(struct follower *f, bool ok)
{
        if (!f->attempting)
                return;
        f->attempting = false;
        if (f->tcp_open)
                follower_close(f, (uv_handle_t *)&f->tcp);
        if (ok && !f->done)
                follower_result(f, json_pack("{s:i}", "port", f->port));
}

static int status_code(const char *s)
{
        if (s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9')
                return 0;
        return (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
}

static void on_http_read(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct follower *f = st->data;
        const char *eol;

        if (!f->attempting)
                return;
        if (n < 0) {
                port_attempt_done(f, false);
                return;
        }
        if (n > 0 && f->resp.len < 1024)
                buf_append(&f->resp, b->base, (size_t)n);
        eol = f->resp.data ? memchr(f->resp.data, '\n', f->resp.len) : NULL;
        if (eol || f->resp.len >= 1024) {
                int code = 0;

                if (f->resp.len > 12 && strncmp(f->resp.data, "HTTP/1.", 7) == 0 &&
                    f->resp.data[8] == ' ')
                        code = status_code(f->resp.data + 9);
                port_attempt_done(f, code >= f->smin && code <= f->smax);
        }
}

static void on_http_written(uv_write_t *w, int status)
{
        struct follower *f = w->data;

        if (status < 0)
                port_attempt_done(f, false);
}

static void on_connected(uv_connect_t *req, int status)
{
        struct follower *f = req->data;
        uv_buf_t b;

        if (!f->attempting)
                return;
        if (status < 0 || f->done) {
                port_attempt_done(f, false);
                return;
        }
        if (!f->http) {
                port_attempt_done(f, true);
                return;
        }
        buf_reset(&f->req_text);
        buf_reset(&f->resp);
        if (buf_printf(&f->req_text,
                       "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nUser-Agent: cella-init\r\n"
                       "Connection: close\r\n\r\n",
                       f->path, f->port) < 0) {
                port_attempt_done(f, false);
                return;
        }
        b = uv_buf_init(f->req_text.data, (unsigned)f->req_text.len);
        f->wreq.data = f;
        if (uv_write(&f->wreq, (uv_stream_t *)&f->tcp, &b, 1, on_http_written) < 0 ||
            uv_read_start((uv_stream_t *)&f->tcp, on_alloc, on_http_read) < 0)
                port_attempt_done(f, false);
}

static void port_attempt(struct follower *f)
{
        struct agent *a = f->p->t->a;
        struct sockaddr_in sa;

        if (f->done || f->attempting || f->tcp_open)
                return;
        if (uv_tcp_init(a->loop, &f->tcp) < 0)
                return;
        f->tcp.data = f;
        f->tcp_open = true;
        f->handles++;
        f->attempting = true;
        f->attempt_start = uv_now(a->loop);
        f->connect.data = f;
        uv_ip4_addr("127.0.0.1", f->port, &sa);
        if (uv_tcp_connect(&f->connect, &f->tcp, (const struct sockaddr *)&sa, on_connected) < 0)
                port_attempt_done(f, false);
}

static void on_port_poll(uv_timer_t *t)
{
        struct follower *f = t->data;
        uint64_t now = uv_now(f->p->t->a->loop);

        follower_check(f);
        if (f->done)
                return;
        if (f->attempting && now - f->attempt_start >= MAX(f->interval, ATTEMPT_MIN_MS))
                port_attempt_done(f, false); /* a server that accepts and never answers */
        else
                port_attempt(f);
}

/* ---- starting ---- */

void follower_start(struct follower *f, struct proc_request *r)
{
        struct proc *p = f->p;
        uv_loop_t *loop = p->t->a->loop;

        switch (f->kind) {
        case F_STREAM:
                /* the process exists: cellad can answer 200 and begin its event stream */
                stream_send_json(&f->s, FRAME_STARTED, proc_info(p));
                break;
        case F_WAIT_LOG:
                f->pattern = TAKE_PTR(r->pattern);
                if (r->regex) {
                        regcomp(&f->re, f->pattern, REG_EXTENDED | REG_NOSUB);
                        f->has_re = true;
                }
                break;
        case F_WAIT_PORT:
                f->port = r->port;
                f->http = r->http;
                f->path = TAKE_PTR(r->path);
                f->smin = r->status_min;
                f->smax = r->status_max;
                f->interval = (uint64_t)r->interval_ms;
                uv_timer_init(loop, &f->poll);
                f->poll.data = f;
                f->handles++;
                uv_timer_start(&f->poll, on_port_poll, f->interval, f->interval);
                port_attempt(f);
                break;
        case F_KILL:
                f->kill_deadline = uv_now(loop) + CELLA_PROC_KILL_GRACE_MS + 1000;
                uv_timer_start(&f->timer, on_kill_poll, KILL_POLL_MS, KILL_POLL_MS);
                break;
        default:
                break;
        }
        if (r->timeout_ms > 0 && f->kind != F_KILL)
                uv_timer_start(&f->timer, on_wait_timeout, (uint64_t)r->timeout_ms, 0);
        follower_pump(f);
}
