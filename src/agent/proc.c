/* Background processes (PROC frames; decision 0012, docs/protocol.md).
 *
 * The agent owns them: status, exit code, output and every wait live here, so a cellad that
 * restarts (or is killed) finds them as they were. Losing the connection drops only the
 * followers and waits that were on it; the processes keep running.
 *
 * A struct proc is one process: `bash -c command` in its own session and, where
 * /sys/fs/cgroup is a writable cgroup2 mount, its own cgroup proc-<n>, so that a kill
 * reaches every descendant, also those that daemonized or lost their parent. Its stdout and
 * stderr are read continuously into its log (never paused for a follower):
 *
 *   <log dir>/<id>.log    records of [u8 stream (1 stdout, 2 stderr)][u32 length BE][bytes]
 *
 * which keeps the interleaving of the two streams. The log stops growing at
 * CELLA_PROC_MAX_LOG (a last stderr record says so and ProcessInfo has logTruncated). When
 * the log cannot be created, the output goes to two in-memory rings instead
 * (CELLA_PROC_RING bytes per stream, the oldest bytes dropped; a finished process keeps
 * CELLA_PROC_RING_TAIL of each).
 *
 * The table keeps at most CELLA_PROC_MAX processes; starting one more forgets the oldest
 * finished one (and removes its log), so memory is flat however many processes run. The
 * pipes and timers of a process (struct proc_io) are freed once it has finished.
 *
 * A struct follower is one stream that reads a process's output or waits for it: logs,
 * stream, waitLog, waitPort, waitExit and kill (which answers once the tree is gone). It
 * reads the log with its own descriptor from its own offset, so a slow client slows only
 * its own follower. A follower is freed when its stream has ended (or its connection is
 * gone) and its handles are closed; a process is freed when it was forgotten (or the agent
 * shuts down), has no follower left and its io is gone. */
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/proc-request.h"
#include "agent/proc.h"
#include "agent/service.h"
#include "agent/session.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "common/utf8.h"

#define DEFAULT_LOG_DIR "/var/log/cella/processes"
#define SETTLE_MS 100       /* after the shell exits, output still held open ends followers then */
#define KILL_POLL_MS 50     /* a kill answers once the tree is gone; checked this often */
#define ATTEMPT_MIN_MS 1000 /* a waitPort attempt may take at least this long */
#define REC_HEADER 5
#define TRUNCATED_NOTE "\n[cella: output beyond the log limit was not kept]\n"

enum proc_status { P_RUNNING, P_COMPLETED, P_FAILED, P_KILLED, P_ERROR };
static const char *const status_names[] = {"running", "completed", "failed", "killed", "error"};

struct proc;

struct proc_io {
        uv_pipe_t out[2];
        bool open[2]; /* pipe not yet at EOF */
        uv_timer_t settle;
        uv_timer_t kill;
        unsigned handles; /* not yet closed */
        bool closing;
};

struct proc {
        struct proc *prev, *next; /* table list, oldest first; unlinked once forgotten */
        struct proc_table *t;
        char id[CELLA_ID_MAX + 1];
        char *command;
        char *session;
        char *error;
        pid_t pid;
        enum proc_status status;
        int exit_code;
        int term_signal;
        int64_t start_ms, end_ms;
        bool reaped;
        bool settled; /* reaped, and output at EOF or SETTLE_MS passed */
        bool kill_requested;
        bool forgotten;
        struct proc_io *io;
        char *cgroup;         /* kept after release: a kill still reaches what is left */
        bool cgroup_released; /* handed to agent_cgroup_remove */
        char *log_path;       /* NULL: rings */
        int log_fd;           /* open while output can still come */
        uint64_t log_size;
        bool log_truncated;
        struct buf ring[2];
        uint64_t total[2]; /* bytes produced per stream */
        struct follower *followers;
};

struct proc_table {
        struct agent *a;
        struct proc *head, *tail;
        unsigned count;   /* in the list */
        unsigned objects; /* allocated: in the list, or forgotten and still in use */
        uint64_t seq;
        char *log_dir;
        bool log_dir_ready;
        bool shutdown;
};

enum follower_kind { F_LOGS, F_STREAM, F_WAIT_LOG, F_WAIT_PORT, F_WAIT_EXIT, F_KILL };

struct follower {
        struct stream s; /* first: the agent casts stream pointers */
        struct follower *prev, *next;
        struct proc *p;
        enum follower_kind kind;
        bool done;
        unsigned handles;
        uv_timer_t timer; /* the wait's timeout; kill: the poll */
        /* reading the output */
        int fd; /* the log (own descriptor), or -EBADF for the rings */
        uint64_t pos, end;
        uint32_t rec_left;
        int rec_stream;
        uint64_t ring_pos[2], ring_end[2];
        int next_ring;
        /* waitLog */
        bool has_re;
        regex_t re;
        char *pattern;
        struct buf line[2];
        /* waitPort */
        int port;
        bool http;
        char *path;
        int smin, smax;
        uint64_t interval;
        uv_timer_t poll;
        uv_tcp_t tcp;
        bool tcp_open, attempting;
        uint64_t attempt_start;
        uv_connect_t connect;
        uv_write_t wreq;
        struct buf req_text;
        struct buf resp;
        /* kill */
        uint64_t kill_deadline;
};

/* Followers read and send output synchronously within one callback, so one buffer serves
 * them all; the pipes have their own (a pipe's bytes are handed to the followers). */
static char iobuf[CELLA_FRAME_DATA_CHUNK];
static char pipebuf[CELLA_FRAME_DATA_CHUNK];

static void follower_pump(struct follower *f);
static void proc_maybe_free(struct proc *p);

/* ---- table ---- */

static struct proc_table *table_get(struct agent *a)
{
        if (!a->procs) {
                struct proc_table *t = calloc(1, sizeof(*t));
                struct rlimit rl;

                if (!t)
                        return NULL;
                t->a = a;
                t->log_dir = strdup(a->proc_log_dir ? a->proc_log_dir : DEFAULT_LOG_DIR);
                if (!t->log_dir) {
                        free(t);
                        return NULL;
                }
                /* Three descriptors per running process: use what the hard limit allows. */
                if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
                        rl.rlim_cur = rl.rlim_max;
                        setrlimit(RLIMIT_NOFILE, &rl);
                }
                a->procs = t;
        }
        return a->procs;
}

static bool is_digits(const char *s)
{
        return *s && strspn(s, "0123456789") == strlen(s);
}

/* By id, or by pid (newest first) when id is a number. */
static struct proc *proc_find(struct proc_table *t, const char *id)
{
        for (struct proc *p = t->head; p; p = p->next)
                if (strcmp(p->id, id) == 0)
                        return p;
        if (is_digits(id)) {
                long pid = strtol(id, NULL, 10);

                for (struct proc *p = t->tail; p; p = p->prev)
                        if (p->pid == pid)
                                return p;
        }
        return NULL;
}

static void table_unlink(struct proc *p)
{
        struct proc_table *t = p->t;

        if (p->prev)
                p->prev->next = p->next;
        else
                t->head = p->next;
        if (p->next)
                p->next->prev = p->prev;
        else
                t->tail = p->prev;
        p->prev = p->next = NULL;
        t->count--;
}

/* Prepare the log directory once per agent: created 0700, logs of an earlier agent (a
 * sandbox that slept) removed. */
static bool log_dir_ready(struct proc_table *t)
{
        char path[CELLA_PATH_MAX];

        if (t->log_dir_ready)
                return true;
        snprintf(path, sizeof(path), "%s", t->log_dir);
        for (char *s = path + 1; *s; s++)
                if (*s == '/') {
                        *s = '\0';
                        mkdir(path, 0755);
                        *s = '/';
                }
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
                log_warn("mkdir %s: %s; process output is kept in memory", path, strerror(errno));
                return false;
        }
        {
                _cleanup_closedir_ DIR *d = opendir(path);
                struct dirent *de;

                while (d && (de = readdir(d)))
                        if (de->d_name[0] != '.' && strstr(de->d_name, ".log"))
                                unlinkat(dirfd(d), de->d_name, 0);
        }
        t->log_dir_ready = true;
        return true;
}

/* ---- ProcessInfo ---- */

static json_t *proc_info(const struct proc *p)
{
        char ts[32];
        json_t *j;

        time_format_iso(p->start_ms, ts, sizeof(ts));
        j = json_pack("{s:s, s:i, s:s, s:s, s:s}", "id", p->id, "pid", (int)p->pid, "command",
                      p->command, "status", status_names[p->status], "startTime", ts);
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
        proc_maybe_free(p);
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

static void follower_error(struct follower *f, int code, const char *msg)
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

static struct follower *follower_new(struct conn *c, uint32_t id, struct proc *p,
                                     enum follower_kind kind)
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

static bool follower_reads(const struct follower *f)
{
        return follower_sends(f) || f->kind == F_WAIT_LOG;
}

/* Open the log (or take the rings) and set where reading stops for `logs`. */
static int follower_open_output(struct follower *f)
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
                        if (f->s.send_credit == 0 || stream_congested(&f->s))
                                return;
                        max = (size_t)MIN((uint64_t)max, f->s.send_credit);
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
                        stream_send(&f->s, which ? FRAME_STDERR : FRAME_STDOUT, iobuf, (size_t)n);
                        f->s.send_credit -= (uint64_t)n;
                } else {
                        feed_lines(f, which, iobuf, (size_t)n);
                }
        }
        follower_check(f);
}

/* Something happened to p (output, exit, settled): wake its followers. */
static void proc_notify(struct proc *p)
{
        struct follower *f, *next;

        for (f = p->followers; f; f = next) {
                next = f->next;
                follower_pump(f);
        }
}

/* ---- the process's output ---- */

static void log_write(struct proc *p, int which, const void *data, size_t n)
{
        uint8_t h[REC_HEADER] = {(uint8_t)(which + 1), (uint8_t)(n >> 24), (uint8_t)(n >> 16),
                                 (uint8_t)(n >> 8), (uint8_t)n};
        struct iovec iov[2] = {{h, sizeof(h)}, {(void *)data, n}};
        size_t want = sizeof(h) + n, done = 0;

        while (done < want) {
                ssize_t r = writev(p->log_fd, iov, 2);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        /* A short log is still a valid prefix only up to the last record. */
                        log_warn("process %s: writing its log: %s", p->id, strerror(errno));
                        if (ftruncate(p->log_fd, (off_t)p->log_size) < 0) {
                                /* the followers stop at log_size anyway */
                        }
                        p->log_truncated = true;
                        return;
                }
                done += (size_t)r;
                for (int i = 0; i < 2 && r > 0; i++) {
                        size_t k = MIN((size_t)r, iov[i].iov_len);

                        iov[i].iov_base = (char *)iov[i].iov_base + k;
                        iov[i].iov_len -= k;
                        r -= (ssize_t)k;
                }
        }
        p->log_size += want;
}

static void ring_append(struct buf *r, const char *data, size_t n)
{
        if (n >= CELLA_PROC_RING) {
                data += n - CELLA_PROC_RING;
                n = CELLA_PROC_RING;
        }
        if (r->len + n > CELLA_PROC_RING)
                buf_consume(r, r->len + n - CELLA_PROC_RING);
        buf_append(r, data, n);
}

static void proc_output(struct proc *p, int which, const char *data, size_t n)
{
        p->total[which] += n;
        if (p->log_path) {
                if (p->log_truncated)
                        return;
                if (p->log_size + 2 * REC_HEADER + n + sizeof(TRUNCATED_NOTE) >
                    CELLA_PROC_MAX_LOG) {
                        log_write(p, 1, TRUNCATED_NOTE, sizeof(TRUNCATED_NOTE) - 1);
                        p->log_truncated = true;
                } else {
                        log_write(p, which, data, n);
                }
        } else {
                ring_append(&p->ring[which], data, n);
        }
        proc_notify(p);
}

static void ring_shrink(struct buf *r)
{
        struct buf tail = BUF_INIT;

        if (r->len <= CELLA_PROC_RING_TAIL && r->cap <= CELLA_PROC_RING_TAIL * 2)
                return;
        if (buf_append(&tail, r->data + (r->len - MIN(r->len, CELLA_PROC_RING_TAIL)),
                       MIN(r->len, CELLA_PROC_RING_TAIL)) < 0)
                return;
        buf_free(r);
        *r = tail;
}

static void io_handle_closed(uv_handle_t *h)
{
        struct proc *p = h->data;

        if (--p->io->handles == 0) {
                free(p->io);
                p->io = NULL;
                proc_maybe_free(p);
        }
}

static void io_close(struct proc *p)
{
        struct proc_io *io = p->io;

        if (!io || io->closing)
                return;
        io->closing = true;
        for (int i = 0; i < 2; i++)
                if (!uv_is_closing((uv_handle_t *)&io->out[i]))
                        uv_close((uv_handle_t *)&io->out[i], io_handle_closed);
        uv_close((uv_handle_t *)&io->settle, io_handle_closed);
        uv_close((uv_handle_t *)&io->kill, io_handle_closed);
}

/* Output is complete: close the log for writing, keep only a tail of the rings. */
static void proc_output_done(struct proc *p)
{
        if (p->log_fd >= 0) {
                close(p->log_fd);
                p->log_fd = -EBADF;
        }
        for (int i = 0; i < 2; i++)
                ring_shrink(&p->ring[i]);
}

/* The io is not needed any more once the process was reaped, its output is complete and
 * no kill is waiting to escalate. */
static void io_maybe_close(struct proc *p)
{
        struct proc_io *io = p->io;

        if (io && p->settled && !io->open[0] && !io->open[1] &&
            !uv_is_active((uv_handle_t *)&io->kill))
                io_close(p);
}

/* The process has ended: its cgroup goes now, or once the last process in it died. */
static void cgroup_release(struct proc *p)
{
        if (p->cgroup && !p->cgroup_released && !p->t->shutdown) {
                p->cgroup_released = true;
                agent_cgroup_remove(p->t->a, p->cgroup);
        }
}

static void proc_settle(struct proc *p)
{
        if (p->settled)
                return;
        p->settled = true;
        cgroup_release(p);
        io_maybe_close(p);
        proc_notify(p);
}

static void on_settle(uv_timer_t *t)
{
        proc_settle(t->data);
}

static void pipe_eof(struct proc *p, int i)
{
        struct proc_io *io = p->io;

        if (!io->open[i])
                return;
        io->open[i] = false;
        uv_read_stop((uv_stream_t *)&io->out[i]);
        if (io->open[0] || io->open[1])
                return;
        proc_output_done(p);
        if (p->reaped && !p->settled)
                proc_settle(p);
        else
                io_maybe_close(p);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        (void)h;
        (void)suggested;
        *ret = uv_buf_init(iobuf, sizeof(iobuf));
}

static void on_pipe_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *ret)
{
        (void)h;
        (void)suggested;
        *ret = uv_buf_init(pipebuf, sizeof(pipebuf));
}

static void on_output(uv_stream_t *st, ssize_t n, const uv_buf_t *b)
{
        struct proc *p = st->data;
        int i = st == (uv_stream_t *)&p->io->out[0] ? 0 : 1;

        if (n < 0) {
                if (n != UV_EOF)
                        log_debug("process %s: read output: %s", p->id, uv_strerror((int)n));
                pipe_eof(p, i);
                return;
        }
        if (n > 0)
                proc_output(p, i, b->base, (size_t)n);
}

/* ---- exit and kill ---- */

static void proc_end(struct proc *p, int status)
{
        p->reaped = true;
        p->end_ms = time_now_ms();
        if (WIFEXITED(status)) {
                p->exit_code = WEXITSTATUS(status);
        } else if (WIFSIGNALED(status)) {
                p->term_signal = WTERMSIG(status);
                p->exit_code = 128 + p->term_signal;
        }
        if (p->kill_requested)
                p->status = P_KILLED;
        else
                p->status = p->exit_code == 0 ? P_COMPLETED : P_FAILED;
}

static void on_child(void *ud, pid_t pid, int status)
{
        struct proc *p = ud;

        (void)pid;
        proc_end(p, status);
        log_debug("process %s (pid %d): %s, exit code %d", p->id, (int)p->pid,
                  status_names[p->status], p->exit_code);
        if (p->io && (p->io->open[0] || p->io->open[1]))
                uv_timer_start(&p->io->settle, on_settle, SETTLE_MS, 0);
        else
                proc_settle(p);
        proc_notify(p);
}

static void signal_tree(struct proc *p, int sig)
{
        if (sig == SIGKILL) {
                /* After the reap the pid may be reused: only the cgroup is safe then, or the
                 * process group (a pid is not handed out while a group of that id lives). */
                struct kill_target t = {
                        .cgroup = p->cgroup,
                        .pgid = p->pid > 0 && (!p->reaped || !p->cgroup) ? p->pid : 0,
                        .root = p->pid > 0 && !p->reaped && !p->cgroup ? p->pid : 0,
                };

                agent_kill_tree(&t);
                if (p->pid > 0 && !p->reaped)
                        kill(p->pid, SIGKILL);
                return;
        }
        if (p->cgroup)
                agent_cgroup_signal(p->cgroup, sig);
        /* After the reap the pid may be reused: only the cgroup is safe then, or the
         * process group (a pid is not handed out while a group of that id lives). */
        if (p->pid > 0 && (!p->reaped || !p->cgroup))
                kill(-p->pid, sig);
        if (p->pid > 0 && !p->reaped)
                kill(p->pid, sig);
}

static void on_kill_grace(uv_timer_t *t)
{
        struct proc *p = t->data;

        if (!p->reaped || (p->cgroup && !agent_cgroup_is_empty(p->cgroup))) {
                log_info("process %s: still running %d ms after SIGTERM; SIGKILL", p->id,
                         CELLA_PROC_KILL_GRACE_MS);
                signal_tree(p, SIGKILL);
        }
        io_maybe_close(p);
}

/* Signal p's whole tree; sig 0 is SIGTERM with SIGKILL after the grace period (at once
 * for what is left of a process that has finished and whose io is gone). */
static void proc_kill(struct proc *p, int sig)
{
        if (p->status == P_ERROR)
                return;
        if (!p->reaped)
                p->kill_requested = true;
        if (!sig && (!p->io || p->io->closing)) {
                signal_tree(p, SIGKILL);
                return;
        }
        signal_tree(p, sig ? sig : SIGTERM);
        if (!sig)
                uv_timer_start(&p->io->kill, on_kill_grace, CELLA_PROC_KILL_GRACE_MS, 0);
}

void proc_kill_session(struct agent *a, const char *sid)
{
        if (!a->procs)
                return;
        for (struct proc *p = a->procs->head; p; p = p->next)
                if (p->session && strcmp(p->session, sid) == 0 && !p->reaped)
                        proc_kill(p, SIGKILL);
}

/* ---- process lifetime ---- */

static void proc_maybe_free(struct proc *p)
{
        struct proc_table *t = p->t;

        if (!(p->forgotten || t->shutdown) || p->followers || p->io)
                return;
        if (!p->forgotten)
                table_unlink(p);
        if (!p->reaped && !t->shutdown)
                agent_unwatch_child(t->a, p->pid);
        if (p->log_fd >= 0)
                close(p->log_fd);
        cgroup_release(p);
        free(p->cgroup);
        for (int i = 0; i < 2; i++)
                buf_free(&p->ring[i]);
        free(p->log_path);
        free(p->command);
        free(p->session);
        free(p->error);
        free(p);
        if (--t->objects == 0 && t->shutdown) {
                free(t->log_dir);
                free(t);
        }
}

/* Forget p: out of the table, its log removed; freed once nothing uses it. */
static void proc_forget(struct proc *p)
{
        p->forgotten = true;
        table_unlink(p);
        if (p->log_path)
                unlink(p->log_path);
        io_close(p);
        proc_maybe_free(p);
}

/* Room for one more: forget the oldest finished process if the table is full. */
static bool make_room(struct proc_table *t)
{
        if (t->count < CELLA_PROC_MAX)
                return true;
        for (struct proc *p = t->head; p; p = p->next)
                if (p->reaped) {
                        proc_forget(p);
                        return true;
                }
        return false;
}

void proc_shutdown(struct agent *a)
{
        struct proc_table *t = a->procs;
        struct proc *p, *next;

        if (!t)
                return;
        a->procs = NULL;
        t->shutdown = true;
        if (t->objects == 0) {
                free(t->log_dir);
                free(t);
                return;
        }
        /* Freeing the last object frees the table: then next is NULL (forgotten ones are
         * not in the list and go when their followers do). */
        for (p = t->head; p; p = next) {
                next = p->next;
                if (!p->reaped)
                        signal_tree(p, SIGKILL);
                if (p->io)
                        io_close(p);
                else
                        proc_maybe_free(p);
        }
}

/* ---- operations ---- */

static void op_start_spawn(struct proc_table *t, struct conn *c, uint32_t sid,
                           struct proc_request *r, struct spawn_request *spawn);

static void op_start(struct proc_table *t, struct conn *c, uint32_t sid, struct proc_request *r)
{
        struct agent *a = t->a;
        struct spawn_request sr = {
                .command = r->command,
                .cwd = r->cwd,
                .base_env = r->base_env,
                .n_base_env = r->n_base_env,
                .env = r->env,
                .n_env = r->n_env,
        };
        struct cella_error err = {0};
        _cleanup_free_ char *sess_cwd = NULL;
        char **sess_env = NULL;
        size_t n_sess_env = 0;

        if (r->session) {
                /* Started "in" a session: its current directory (unless the request names
                 * one) and its environment, under the request's own env. */
                if (session_spawn_context(a, r->session, r->base_env, r->n_base_env, &sess_cwd,
                                          &sess_env, &n_sess_env, &err) < 0) {
                        conn_send_error(c, sid, &err);
                        return;
                }
                if (!r->cwd_given)
                        sr.cwd = sess_cwd;
                sr.base_env = sess_env;
                sr.n_base_env = n_sess_env;
        }
        op_start_spawn(t, c, sid, r, &sr);
        agent_env_free(sess_env, n_sess_env);
}

static void op_start_spawn(struct proc_table *t, struct conn *c, uint32_t sid,
                           struct proc_request *r, struct spawn_request *spawn)
{
        struct agent *a = t->a;
        struct spawn_request sr = *spawn;
        struct cella_error err = {0};
        struct spawn_result res;
        struct proc *p;
        char name[CELLA_ID_MAX + 16];

        if (r->id && proc_find(t, r->id)) { /* never digits only: an id, not a pid */
                conn_reply_error(c, sid, CELLA_E_PROCESS_ALREADY_EXISTS,
                                 "process '%s' already exists", r->id);
                return;
        }
        if (!make_room(t)) {
                conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED,
                                 "%d processes are running; kill some first", CELLA_PROC_MAX);
                return;
        }
        p = calloc(1, sizeof(*p));
        if (!p) {
                conn_reply_error(c, sid, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        p->t = t;
        t->objects++;
        p->log_fd = -EBADF;
        p->pid = -1;
        t->seq++;
        if (r->id) {
                snprintf(p->id, sizeof(p->id), "%s", r->id);
        } else {
                do
                        snprintf(p->id, sizeof(p->id), "proc-%llu", (unsigned long long)t->seq);
                while (proc_find(t, p->id) && ++t->seq);
        }
        p->command = TAKE_PTR(r->command);
        p->session = TAKE_PTR(r->session);
        p->start_ms = time_now_ms();
        /* linked first, so that every exit below goes through the table */
        p->prev = t->tail;
        if (t->tail)
                t->tail->next = p;
        else
                t->head = p;
        t->tail = p;
        t->count++;

        if (log_dir_ready(t)) {
                char path[CELLA_PATH_MAX];

                snprintf(path, sizeof(path), "%s/%s.log", t->log_dir, p->id);
                p->log_fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0600);
                if (p->log_fd >= 0 && !(p->log_path = strdup(path))) {
                        close(p->log_fd);
                        p->log_fd = -EBADF;
                }
                if (p->log_fd < 0)
                        log_warn("process %s: no log (%s); output kept in memory", p->id,
                                 strerror(errno));
        }
        if (a->use_cgroup) {
                snprintf(name, sizeof(name), "proc-%llu", (unsigned long long)t->seq);
                p->cgroup = agent_cgroup_make(a, name);
        }
        sr.cgroup = p->cgroup;
        if (agent_spawn(&sr, &res, &err) < 0) {
                /* Could not start: kept with status error and the reason in its log. */
                p->pid = res.pid;
                p->status = P_ERROR;
                p->reaped = p->settled = true;
                p->end_ms = time_now_ms();
                p->error = strdup(err.msg);
                proc_output(p, 1, err.msg, strlen(err.msg));
                proc_output(p, 1, "\n", 1);
                proc_output_done(p);
                if (p->cgroup) {
                        agent_cgroup_remove(a, p->cgroup);
                        free(p->cgroup);
                        p->cgroup = NULL;
                }
                conn_send_json(c, FRAME_RESULT, sid, proc_info(p));
                return;
        }
        p->pid = res.pid;
        p->io = calloc(1, sizeof(*p->io));
        if (!p->io || agent_watch_child(a, p->pid, on_child, p) < 0) {
                /* Cannot track it: stop it. Reaped by the SIGCHLD handler as an orphan. */
                free(p->io);
                p->io = NULL;
                signal_tree(p, SIGKILL);
                close(res.out);
                close(res.err);
                p->status = P_ERROR;
                p->reaped = p->settled = true;
                p->end_ms = time_now_ms();
                proc_output_done(p);
                conn_reply_error(c, sid, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        uv_timer_init(a->loop, &p->io->settle);
        uv_timer_init(a->loop, &p->io->kill);
        p->io->settle.data = p->io->kill.data = p;
        p->io->handles = 4;
        for (int i = 0; i < 2; i++) {
                int fd = i == 0 ? res.out : res.err;

                uv_pipe_init(a->loop, &p->io->out[i], 0);
                p->io->out[i].data = p;
                p->io->open[i] = true;
                if (uv_pipe_open(&p->io->out[i], fd) < 0 ||
                    uv_read_start((uv_stream_t *)&p->io->out[i], on_pipe_alloc, on_output) < 0) {
                        if (!uv_is_active((uv_handle_t *)&p->io->out[i]))
                                close(fd);
                        p->io->open[i] = false;
                }
        }
        log_debug("process %s: started pid %d", p->id, (int)p->pid);
        conn_send_json(c, FRAME_RESULT, sid, proc_info(p));
}

static void op_list(struct proc_table *t, struct conn *c, uint32_t sid)
{
        json_t *arr = json_array();

        for (struct proc *p = t->head; p && arr; p = p->next)
                json_array_append_new(arr, proc_info(p));
        conn_send_json(c, FRAME_RESULT, sid, arr ? json_pack("{s:o}", "processes", arr) : NULL);
}

static void op_killall(struct proc_table *t, struct conn *c, uint32_t sid, int sig)
{
        int n = 0;

        for (struct proc *p = t->head; p; p = p->next)
                if (!p->reaped) {
                        proc_kill(p, sig);
                        n++;
                }
        conn_send_json(c, FRAME_RESULT, sid, json_pack("{s:i}", "killed", n));
}

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

/* ---- dispatch ---- */

static void op_follow(struct proc_table *t, struct conn *c, uint32_t sid, struct proc_request *r)
{
        static const enum follower_kind kinds[] = {
                [PROC_KILL] = F_KILL,           [PROC_LOGS] = F_LOGS,
                [PROC_STREAM] = F_STREAM,       [PROC_WAIT_LOG] = F_WAIT_LOG,
                [PROC_WAIT_PORT] = F_WAIT_PORT, [PROC_WAIT_EXIT] = F_WAIT_EXIT,
        };
        struct proc *p = proc_find(t, r->id);
        struct follower *f;
        int k;

        if (!p) {
                conn_reply_error(c, sid, CELLA_E_PROCESS_NOT_FOUND, "process '%s' not found",
                                 r->id);
                return;
        }
        if (r->op == PROC_WAIT_LOG && r->regex) {
                regex_t re;

                k = regcomp(&re, r->pattern, REG_EXTENDED | REG_NOSUB);
                if (k != 0) {
                        char msg[128];

                        regerror(k, &re, msg, sizeof(msg));
                        conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED, "invalid regex: %s",
                                         msg);
                        return;
                }
                regfree(&re);
        }
        f = follower_new(c, sid, p, kinds[r->op]);
        if (!f) {
                conn_reply_error(c, sid, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        if (follower_reads(f) && follower_open_output(f) < 0) {
                follower_error(f, CELLA_E_INTERNAL_ERROR, "the process's log is unreadable");
                return;
        }
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
                uv_timer_init(t->a->loop, &f->poll);
                f->poll.data = f;
                f->handles++;
                uv_timer_start(&f->poll, on_port_poll, f->interval, f->interval);
                port_attempt(f);
                break;
        case F_KILL:
                proc_kill(p, r->signal);
                f->kill_deadline = uv_now(t->a->loop) + CELLA_PROC_KILL_GRACE_MS + 1000;
                uv_timer_start(&f->timer, on_kill_poll, KILL_POLL_MS, KILL_POLL_MS);
                break;
        default:
                break;
        }
        if (r->timeout_ms > 0 && f->kind != F_KILL)
                uv_timer_start(&f->timer, on_wait_timeout, (uint64_t)r->timeout_ms, 0);
        follower_pump(f);
}

void proc_request(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct proc_request r;
        struct cella_error err = {0};
        struct proc_table *t;
        struct proc *p;

        if (proc_request_decode(req->body, &r, &err) < 0) {
                conn_send_error(c, req->stream, &err);
                proc_request_done(&r);
                return;
        }
        t = table_get(a);
        if (!t) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                proc_request_done(&r);
                return;
        }
        switch (r.op) {
        case PROC_START:
                op_start(t, c, req->stream, &r);
                break;
        case PROC_LIST:
                op_list(t, c, req->stream);
                break;
        case PROC_GET:
                p = proc_find(t, r.id);
                if (p)
                        conn_send_json(c, FRAME_RESULT, req->stream, proc_info(p));
                else
                        conn_reply_error(c, req->stream, CELLA_E_PROCESS_NOT_FOUND,
                                         "process '%s' not found", r.id);
                break;
        case PROC_KILLALL:
                op_killall(t, c, req->stream, r.signal);
                break;
        default:
                op_follow(t, c, req->stream, &r);
                break;
        }
        proc_request_done(&r);
}
