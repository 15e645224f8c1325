/* File watch streams (WATCH, docs/protocol.md, decision 0020).
 *
 * One inotify descriptor per stream, polled on the agent's loop. Every directory under the
 * watched one (recursive, the default) has a watch descriptor, at most CELLA_WATCH_MAX_DIRS;
 * directories that appear later are added as their create/move_to event is read. Each
 * event that passes the filters is one JSON object in one DATA frame, charged against the
 * stream's send credit. When the client is slow, events wait in a queue of at most
 * CELLA_WATCH_QUEUE_MAX (an event equal to the last queued one is coalesced); beyond that
 * they are dropped and an {"type":"overflow"} event is sent once the queue drained. The
 * stream ends on CANCEL (or when the connection goes), which closes the descriptor, or when
 * the watched directory itself is deleted or moved away: its delete (move_from) event is
 * the last one, then RESULT {"reason":"deleted"|"moved"}. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/service.h"
#include "agent/watch.h"
#include "common/json-path.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"

#define WATCH_MASK                                                                          \
        (IN_CREATE | IN_MODIFY | IN_DELETE | IN_MOVED_FROM | IN_MOVED_TO | IN_DONT_FOLLOW | \
         IN_EXCL_UNLINK | IN_ONLYDIR)

struct wdir {
        int wd;
        char *rel; /* relative to the root, "" for the root itself */
};

struct watch {
        struct stream s;
        uv_poll_t poll;
        int ifd;
        char *root;
        bool recursive;
        struct watch_filter filter;
        struct wdir *dirs;
        size_t ndirs;
        char **queue; /* serialised events not yet sent, oldest first */
        size_t nqueue;
        bool overflow;         /* events were dropped since the last overflow event */
        const char *root_gone; /* "deleted" or "moved": end once the queue is sent */
        bool closing;
};

static const char *const default_excludes[] = {".git", "node_modules"};

/* ---- filters (pure, unit tested) ---- */

/* A pattern without '/' is matched against each component of the path (so ".git" excludes
 * a/.git and everything under it); one with '/' against the path and each of its leading
 * directory prefixes. */
static bool glob_hits(const char *pattern, const char *rel, bool any_component)
{
        char tmp[CELLA_PATH_MAX + 1];
        size_t n = strlen(rel);

        if (n > CELLA_PATH_MAX)
                return false;
        memcpy(tmp, rel, n + 1);
        if (!strchr(pattern, '/')) {
                char *save = NULL;

                if (!any_component) {
                        const char *b = strrchr(rel, '/');

                        return fnmatch(pattern, b ? b + 1 : rel, 0) == 0;
                }
                for (char *t = strtok_r(tmp, "/", &save); t; t = strtok_r(NULL, "/", &save))
                        if (fnmatch(pattern, t, 0) == 0)
                                return true;
                return false;
        }
        if (fnmatch(pattern, tmp, FNM_PATHNAME) == 0)
                return true;
        if (!any_component)
                return false;
        for (size_t i = n; i > 0; i--) {
                if (tmp[i] != '/')
                        continue;
                tmp[i] = '\0';
                if (fnmatch(pattern, tmp, FNM_PATHNAME) == 0)
                        return true;
        }
        return false;
}

bool watch_filter_excludes(const struct watch_filter *f, const char *rel)
{
        if (!f->exclude_given) {
                for (size_t i = 0; i < ARRAY_SIZE(default_excludes); i++)
                        if (glob_hits(default_excludes[i], rel, true))
                                return true;
                return false;
        }
        for (size_t i = 0; i < f->n_exclude; i++)
                if (glob_hits(f->exclude[i], rel, true))
                        return true;
        return false;
}

bool watch_filter_matches(const struct watch_filter *f, const char *rel)
{
        if (watch_filter_excludes(f, rel))
                return false;
        if (f->n_include == 0)
                return true;
        for (size_t i = 0; i < f->n_include; i++)
                if (glob_hits(f->include[i], rel, false))
                        return true;
        return false;
}

/* ---- the stream ---- */

static void watch_closed(uv_handle_t *h)
{
        struct watch *w = h->data;

        if (w->ifd >= 0)
                close(w->ifd);
        for (size_t i = 0; i < w->ndirs; i++)
                free(w->dirs[i].rel);
        free(w->dirs);
        for (size_t i = 0; i < w->nqueue; i++)
                free(w->queue[i]);
        free(w->queue);
        agent_env_free(w->filter.include, w->filter.n_include);
        agent_env_free(w->filter.exclude, w->filter.n_exclude);
        free(w->root);
        free(w);
}

static void watch_free(struct watch *w)
{
        if (w->closing)
                return;
        w->closing = true;
        if (w->poll.loop) {
                uv_close((uv_handle_t *)&w->poll, watch_closed);
                return;
        }
        watch_closed((uv_handle_t *)&w->poll);
}

static struct wdir *dir_find(struct watch *w, int wd)
{
        for (size_t i = 0; i < w->ndirs; i++)
                if (w->dirs[i].wd == wd)
                        return &w->dirs[i];
        return NULL;
}

static void queue_event(struct watch *w, json_t *ev);

/* Watch rel (and, recursively, its subdirectories). Returns 0 or -errno. */
static int add_dir(struct watch *w, const char *rel, int depth)
{
        char path[CELLA_PATH_MAX + 1];
        struct wdir *nd;
        DIR *d;
        struct dirent *de;
        int wd;

        if (snprintf(path, sizeof(path), "%s%s%s", w->root, *rel ? "/" : "", rel) >=
            (int)sizeof(path))
                return -ENAMETOOLONG;
        if (w->ndirs >= CELLA_WATCH_MAX_DIRS) {
                if (!w->overflow)
                        log_warn("watch of %s: more than %d directories", w->root,
                                 CELLA_WATCH_MAX_DIRS);
                w->overflow = true;
                return -ENOSPC;
        }
        /* only the root reports its own end: a subdirectory's is its parent's delete event */
        wd = inotify_add_watch(w->ifd, path,
                               WATCH_MASK | (*rel ? 0 : IN_DELETE_SELF | IN_MOVE_SELF));
        if (wd < 0)
                return -errno;
        if (!dir_find(w, wd)) {
                nd = realloc(w->dirs, (w->ndirs + 1) * sizeof(*nd));
                if (!nd)
                        return -ENOMEM;
                w->dirs = nd;
                w->dirs[w->ndirs].wd = wd;
                w->dirs[w->ndirs].rel = strdup(rel);
                if (!w->dirs[w->ndirs].rel)
                        return -ENOMEM;
                w->ndirs++;
        }
        if (!w->recursive || depth > 64)
                return 0;
        d = opendir(path);
        if (!d)
                return 0;
        while ((de = readdir(d))) {
                char sub[CELLA_PATH_MAX + 1];

                if (de->d_type != DT_DIR || !strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
                        continue;
                if (snprintf(sub, sizeof(sub), "%s%s%s", rel, *rel ? "/" : "", de->d_name) >=
                    (int)sizeof(sub))
                        continue;
                if (watch_filter_excludes(&w->filter, sub))
                        continue;
                if (add_dir(w, sub, depth + 1) == -ENOMEM) {
                        closedir(d);
                        return -ENOMEM;
                }
        }
        closedir(d);
        return 0;
}

static void pump(struct watch *w)
{
        if (w->closing)
                return;
        while (w->s.conn && w->nqueue > 0 && !stream_congested(&w->s)) {
                size_t len = strlen(w->queue[0]);

                if (w->s.send_credit < len)
                        return;
                stream_send(&w->s, FRAME_DATA, w->queue[0], len);
                w->s.send_credit -= len;
                free(w->queue[0]);
                memmove(w->queue, w->queue + 1, (w->nqueue - 1) * sizeof(char *));
                w->nqueue--;
        }
        if (w->s.conn && w->nqueue == 0 && w->overflow) {
                w->overflow = false;
                queue_event(w, json_pack("{s:s}", "type", "overflow"));
        }
        if (w->s.conn && w->nqueue == 0 && w->root_gone && !w->closing) {
                stream_end_json(&w->s, FRAME_RESULT, json_pack("{s:s}", "reason", w->root_gone));
                watch_free(w);
        }
}

static void queue_event(struct watch *w, json_t *ev)
{
        char *text;

        if (!ev)
                return;
        text = json_dumps(ev, JSON_COMPACT);
        json_decref(ev);
        if (!text)
                return;
        if (w->nqueue > 0 && !strcmp(w->queue[w->nqueue - 1], text)) {
                free(text); /* coalesced with the identical event still waiting */
                return;
        }
        if (w->nqueue >= CELLA_WATCH_QUEUE_MAX) {
                free(text);
                w->overflow = true;
                return;
        }
        w->queue[w->nqueue++] = text;
        pump(w);
}

static const char *event_type(uint32_t mask)
{
        if (mask & IN_CREATE)
                return "create";
        if (mask & IN_MODIFY)
                return "modify";
        if (mask & IN_DELETE)
                return "delete";
        if (mask & IN_MOVED_FROM)
                return "move_from";
        if (mask & IN_MOVED_TO)
                return "move_to";
        return NULL;
}

static void handle_event(struct watch *w, const struct inotify_event *ev)
{
        char rel[CELLA_PATH_MAX + 1], abs[CELLA_PATH_MAX + 1];
        struct wdir *d;
        const char *type;
        bool is_dir = ev->mask & IN_ISDIR;

        if (ev->mask & IN_Q_OVERFLOW) {
                w->overflow = true;
                return;
        }
        d = dir_find(w, ev->wd);
        if (!d || w->root_gone)
                return;
        if ((ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF)) && !*d->rel) {
                bool moved = ev->mask & IN_MOVE_SELF;

                w->root_gone = moved ? "moved" : "deleted";
                queue_event(w, json_set_path(json_pack("{s:s, s:s, s:s, s:b}", "type", "event",
                                                       "eventType", moved ? "move_from" : "delete",
                                                       "path", "", "isDirectory", true),
                                             "path", w->root));
                return;
        }
        if (ev->mask & IN_IGNORED) {
                free(d->rel);
                *d = w->dirs[--w->ndirs];
                return;
        }
        type = event_type(ev->mask);
        if (!type || !ev->len || !ev->name[0])
                return;
        if (snprintf(rel, sizeof(rel), "%s%s%s", d->rel, *d->rel ? "/" : "", ev->name) >=
            (int)sizeof(rel))
                return;
        if (snprintf(abs, sizeof(abs), "%s%s%s", strcmp(w->root, "/") ? w->root : "", "/", rel) >=
            (int)sizeof(abs))
                return;
        if (is_dir && w->recursive && (ev->mask & (IN_CREATE | IN_MOVED_TO)) &&
            !watch_filter_excludes(&w->filter, rel))
                add_dir(w, rel, 0);
        if (!watch_filter_matches(&w->filter, rel))
                return;
        /* a name that is not UTF-8 is reported too, with its bytes in pathBase64 ("path"
         * is packed first to keep its place) */
        queue_event(w, json_set_path(json_pack("{s:s, s:s, s:s, s:b}", "type", "event", "eventType",
                                               type, "path", "", "isDirectory", is_dir),
                                     "path", abs));
}

static void on_inotify(uv_poll_t *h, int status, int events)
{
        struct watch *w = h->data;
        char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));

        (void)events;
        if (status < 0 || w->closing)
                return;
        for (;;) {
                ssize_t n;

                if (w->closing)
                        return;
                n = read(w->ifd, buf, sizeof(buf));
                if (n <= 0)
                        break;
                for (char *p = buf; p < buf + n && !w->closing;) {
                        const struct inotify_event *ev = (const struct inotify_event *)p;

                        handle_event(w, ev);
                        p += sizeof(*ev) + ev->len;
                }
        }
        pump(w);
}

static void watch_on_window(struct stream *s)
{
        pump((struct watch *)s);
}

static void watch_on_cancel(struct stream *s, bool detach)
{
        struct watch *w = (struct watch *)s;

        if (!detach)
                stream_end_json(s, FRAME_RESULT, json_object());
        watch_free(w);
}

static const struct stream_ops watch_ops = {
        .on_window = watch_on_window,
        .on_cancel = watch_on_cancel,
};

void watch_start(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct watch *w = calloc(1, sizeof(*w));
        struct stat st;
        int r;

        if (!w) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        w->ifd = -1;
        w->poll.data = w;
        w->recursive = req->recursive;
        w->root = TAKE_PTR(req->path);
        w->filter.include = TAKE_PTR(req->include);
        w->filter.n_include = req->n_include;
        req->n_include = 0;
        w->filter.exclude = TAKE_PTR(req->exclude);
        w->filter.n_exclude = req->n_exclude;
        req->n_exclude = 0;
        w->filter.exclude_given = req->exclude_given;
        w->queue = calloc(CELLA_WATCH_QUEUE_MAX, sizeof(char *));
        if (!w->queue) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                watch_free(w);
                return;
        }
        if (stat(w->root, &st) < 0) {
                conn_reply_error(c, req->stream, cella_code_from_errno(errno), "'%s': %s", w->root,
                                 strerror(errno));
                watch_free(w);
                return;
        }
        if (!S_ISDIR(st.st_mode)) {
                conn_reply_error(c, req->stream, cella_code_from_errno(ENOTDIR),
                                 "'%s' is not a directory", w->root);
                watch_free(w);
                return;
        }
        w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
        if (w->ifd < 0) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "inotify: %s",
                                 strerror(errno));
                watch_free(w);
                return;
        }
        r = add_dir(w, "", 0);
        if (r < 0 && r != -ENOSPC) {
                conn_reply_error(c, req->stream, cella_code_from_errno(-r), "watch '%s': %s",
                                 w->root, strerror(-r));
                watch_free(w);
                return;
        }
        if (uv_poll_init(a->loop, &w->poll, w->ifd) < 0) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "cannot poll inotify");
                watch_free(w);
                return;
        }
        w->poll.data = w; /* uv_poll_init cleared it */
        if (conn_add_stream(c, &w->s, req->stream, &watch_ops) < 0) {
                watch_free(w);
                return;
        }
        uv_poll_start(&w->poll, UV_READABLE, on_inotify);
        queue_event(w, json_set_path(json_pack("{s:s, s:s}", "type", "watching", "path", ""),
                                     "path", w->root));
}
