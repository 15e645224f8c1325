/* File streams and operations, executed by the agent itself in its own root (the sandbox's
 * root, so a path cannot leave the sandbox whatever it says).
 *
 * FILE_READ: FILE_INFO, then DATA within the send window, then RESULT {size}. Exactly the
 * size announced in FILE_INFO is sent (cellad uses it as Content-Length): a file that
 * shrinks meanwhile ends the stream with ERROR, bytes appended meanwhile are not sent.
 * FILE_WRITE: DATA goes to a temporary file in the target's directory, renamed over the
 * target on END; credit is returned as the bytes are written, CELLA_STREAM_ACK_BATCH at a
 * time. CANCEL or the connection
 * going away removes the temporary file.
 * FILE_OP: stat, exists, delete, mkdir, move, list: synchronous; never follow a symlink in
 * the last component of delete, move or list entries. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/fsutil.h"
#include "common/json-path.h"
#include "agent/files.h"
#include "agent/service.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/utf8.h"

#define LIST_MAX_DEPTH 256
#define LIST_MAX_BYTES CELLA_HTTP_MAX_JSON_BODY /* cellad refuses longer listings anyway */

struct file_read {
        struct stream s;
        int fd;
        uint64_t size;
        uint64_t sent;
};

struct file_write {
        struct stream s;
        int fd;
        char *path;
        char *tmp;
        int mode; /* final mode */
        bool chown;
        uid_t uid;
        gid_t gid;
        uint64_t size;
        uint32_t unacked; /* bytes written, not yet credited back to cellad */
};

static char io_buf[CELLA_FRAME_DATA_CHUNK]; /* one loop thread: shared by every stream */

/* ---- FileInfo ---- */

static const char *type_name(mode_t m)
{
        if (S_ISREG(m))
                return "file";
        if (S_ISDIR(m))
                return "directory";
        if (S_ISLNK(m))
                return "symlink";
        return "other";
}

/* name, absolutePath and relativePath into j. A name that is not UTF-8 (a file a command
 * made) cannot be JSON text, yet every file must be listed: the three fields then carry it
 * for display (invalid bytes as U+FFFD), "nameEncoding":"base64" says so and
 * nameBase64, absolutePathBase64 and relativePathBase64 hold the bytes (docs/api.md).
 * Returns j, or NULL (j released) when out of memory. */
static json_t *info_names(json_t *j, const char *name, const char *abs, const char *rel)
{
        const char *const keys[3] = {"name", "absolutePath", "relativePath"};
        const char *const vals[3] = {name, abs, rel};
        bool text = true;

        for (int i = 0; i < 3; i++)
                text = text && utf8_is_valid(vals[i], strlen(vals[i]));
        for (int i = 0; i < 3 && j; i++) {
                _cleanup_buf_ struct buf b64 = BUF_INIT;
                char bkey[32];

                j = json_set_path(j, keys[i], vals[i]);
                snprintf(bkey, sizeof(bkey), "%sBase64", keys[i]);
                /* all three carry their bytes, so that a client needs one rule */
                if (j && !text && !json_object_get(j, bkey) &&
                    (base64_encode(&b64, vals[i], strlen(vals[i])) < 0 ||
                     json_object_set_new(j, bkey, json_stringn(b64.data, b64.len)) < 0)) {
                        json_decref(j);
                        j = NULL;
                }
        }
        if (j && !text && json_object_set_new(j, "nameEncoding", json_string("base64")) < 0) {
                json_decref(j);
                j = NULL;
        }
        return j;
}

static json_t *file_info(const char *name, const char *abs, const char *rel, const struct stat *st)
{
        static const char rwx[] = "rwxrwxrwx";
        char mode[10], when[48];
        struct tm tm;
        json_t *j;

        for (int i = 0; i < 9; i++)
                mode[i] = (st->st_mode & (0400 >> i)) ? rwx[i] : '-';
        mode[9] = '\0';
        gmtime_r(&st->st_mtim.tv_sec, &tm);
        strftime(when, 32, "%Y-%m-%dT%H:%M:%S", &tm);
        snprintf(when + strlen(when), sizeof(when) - strlen(when), ".%03ldZ",
                 st->st_mtim.tv_nsec / 1000000);
        /* the names first, as before: info_names() sets them in place */
        j = json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s, s:{s:b, s:b, s:b}}", "name", "",
                      "absolutePath", "", "relativePath", "", "type", type_name(st->st_mode),
                      "size", (json_int_t)st->st_size, "modifiedAt", when, "mode", mode,
                      "permissions", "readable", (st->st_mode & S_IRUSR) != 0, "writable",
                      (st->st_mode & S_IWUSR) != 0, "executable", (st->st_mode & S_IXUSR) != 0);
        return j ? info_names(j, name, abs, rel) : NULL;
}

static const char *base_name(const char *path)
{
        const char *s = strrchr(path, '/');

        return s && s[1] ? s + 1 : path;
}

static void reply_errno(struct conn *c, uint32_t id, int err, const char *what, const char *path)
{
        struct cella_error e = {0};

        cella_error_errno(&e, err < 0 ? -err : err, "%s '%s'", what, path);
        conn_send_error(c, id, &e);
}

static void reply_code(struct conn *c, uint32_t id, int code, const char *msg, const char *path)
{
        struct cella_error e = {0};

        cella_error_set(&e, code, "%s: '%s'", msg, path);
        conn_send_error(c, id, &e);
}

/* ---- FILE_READ ---- */

static void file_read_free(struct file_read *r)
{
        if (r->fd >= 0)
                close(r->fd);
        free(r);
}

/* DATA frames from the file, each sent from the page cache by sendfile when the connection
 * has nothing queued (stream_send_file); while something is queued (the socket was full),
 * the pump waits for the queue to empty rather than copy the file behind it. */
static void file_read_pump(struct file_read *r)
{
        while (r->s.conn) {
                uint64_t left = r->size - r->sent;
                size_t n = CELLA_FRAME_DATA_CHUNK;
                int rc;

                if (left == 0) {
                        stream_end_json(&r->s, FRAME_RESULT,
                                        json_pack("{s:I}", "size", (json_int_t)r->size));
                        file_read_free(r);
                        return;
                }
                if (r->s.send_credit == 0 || stream_congested(&r->s))
                        return;
                if (stream_queued(&r->s)) {
                        r->s.wait_drain = true;
                        return;
                }
                if (n > left)
                        n = (size_t)left;
                if (n > r->s.send_credit)
                        n = (size_t)r->s.send_credit;
                rc = stream_send_file(&r->s, FRAME_DATA, r->fd, r->sent, n);
                if (rc == -ECONNABORTED)
                        return; /* the connection failed: r was cancelled and freed */
                if (rc < 0) {
                        if (rc == -ENODATA)
                                stream_end_error(&r->s, CELLA_E_INTERNAL_ERROR,
                                                 "file shrank while being read");
                        else
                                stream_end_error(&r->s, cella_code_from_errno(-rc), "read: %s",
                                                 strerror(-rc));
                        file_read_free(r);
                        return;
                }
                r->sent += (uint64_t)n;
                r->s.send_credit -= (uint64_t)n;
        }
}

static void file_read_on_window(struct stream *s)
{
        file_read_pump((struct file_read *)s);
}

static void file_read_on_cancel(struct stream *s, bool detach)
{
        if (!detach)
                stream_end_error(s, CELLA_E_INTERNAL_ERROR, "cancelled");
        file_read_free((struct file_read *)s);
}

static const struct stream_ops file_read_ops = {
        .on_window = file_read_on_window,
        .on_cancel = file_read_on_cancel,
};

void file_read_start(struct agent *a _unused_, struct conn *c, struct agent_request *req)
{
        struct file_read *r;
        struct stat st;
        int fd;

        fd = open(req->path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                reply_errno(c, req->stream, errno, "open", req->path);
                return;
        }
        if (fstat(fd, &st) < 0) {
                reply_errno(c, req->stream, errno, "stat", req->path);
                close(fd);
                return;
        }
        if (S_ISDIR(st.st_mode) || !S_ISREG(st.st_mode)) {
                reply_code(c, req->stream,
                           S_ISDIR(st.st_mode) ? CELLA_E_IS_DIRECTORY : CELLA_E_VALIDATION_FAILED,
                           S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file",
                           req->path);
                close(fd);
                return;
        }
        r = calloc(1, sizeof(*r));
        if (!r) {
                reply_code(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory", req->path);
                close(fd);
                return;
        }
        r->fd = fd;
        r->size = (uint64_t)st.st_size;
        if (conn_add_stream(c, &r->s, req->stream, &file_read_ops) < 0) {
                file_read_free(r);
                return;
        }
        stream_send_json(&r->s, FRAME_FILE_INFO,
                         file_info(base_name(req->path), req->path, base_name(req->path), &st));
        file_read_pump(r);
}

/* ---- FILE_WRITE ---- */

/* Close and remove the temporary file; done before the stream's final frame is sent, so
 * that cellad never sees the end of an upload while its temporary file still exists. */
static void file_write_discard(struct file_write *w)
{
        if (w->fd >= 0)
                close(w->fd);
        w->fd = -EBADF;
        if (w->tmp)
                unlink(w->tmp);
        free(w->tmp);
        w->tmp = NULL;
}

static void file_write_free(struct file_write *w)
{
        file_write_discard(w);
        free(w->path);
        free(w);
}

static void file_write_cancel(struct file_write *w, bool detach)
{
        file_write_discard(w);
        if (!detach)
                stream_end_error(&w->s, CELLA_E_INTERNAL_ERROR, "upload of '%s' cancelled",
                                 w->path);
        file_write_free(w);
}

static int file_write_data(struct file_write *w, const uint8_t *data, size_t len)
{
        size_t done = 0;
        uint8_t credit[4];

        while (done < len) {
                ssize_t n = write(w->fd, data + done, len - done);

                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0) {
                        int err = errno;

                        file_write_discard(w);
                        stream_end_error(&w->s, cella_code_from_errno(err), "write '%s': %s",
                                         w->path, strerror(err));
                        file_write_free(w);
                        return -err;
                }
                done += (size_t)n;
        }
        w->size += len;
        /* credit goes back in batches (a WINDOW per 64 KiB frame was a write here and a
         * wakeup in cellad each); the window is four batches, so cellad never waits for
         * bytes already written */
        w->unacked += (uint32_t)len;
        if (w->unacked >= CELLA_STREAM_ACK_BATCH) {
                w->s.recv_credit += (int64_t)w->unacked;
                frame_window_pack(credit, w->unacked);
                w->unacked = 0;
                stream_send(&w->s, FRAME_WINDOW, credit, sizeof(credit));
        }
        return 0;
}

static void file_write_end(struct file_write *w)
{
        int fd = w->fd;

        w->fd = -EBADF;
        if (fchmod(fd, (mode_t)w->mode) < 0 ||
            (w->chown && fchown(fd, w->uid, w->gid) < 0 && errno != EPERM && errno != EINVAL)) {
                /* mode errors are reported; an owner we cannot keep is not fatal */
                int err = errno;

                close(fd);
                file_write_discard(w);
                stream_end_error(&w->s, cella_code_from_errno(err), "chmod '%s': %s", w->path,
                                 strerror(err));
                file_write_free(w);
                return;
        }
        if (close(fd) < 0 || rename(w->tmp, w->path) < 0) {
                int err = errno;

                file_write_discard(w);
                stream_end_error(&w->s, cella_code_from_errno(err), "write '%s': %s", w->path,
                                 strerror(err));
                file_write_free(w);
                return;
        }
        free(w->tmp);
        w->tmp = NULL;
        stream_end_json(&w->s, FRAME_RESULT, json_pack("{s:I}", "size", (json_int_t)w->size));
        file_write_free(w);
}

static void file_write_on_cancel(struct stream *s, bool detach)
{
        file_write_cancel((struct file_write *)s, detach);
}

static void file_write_on_data(struct stream *s, const uint8_t *data, size_t len)
{
        file_write_data((struct file_write *)s, data, len);
}

static void file_write_on_end(struct stream *s)
{
        file_write_end((struct file_write *)s);
}

static const struct stream_ops file_write_ops = {
        .on_cancel = file_write_on_cancel,
        .on_data = file_write_on_data,
        .on_end = file_write_on_end,
};

void file_write_start(struct agent *a _unused_, struct conn *c, struct agent_request *req)
{
        char dir[CELLA_PATH_MAX + 1];
        struct file_write *w;
        struct stat st;
        char *slash;
        int r;

        if (strcmp(req->path, "/") == 0) {
                reply_code(c, req->stream, CELLA_E_IS_DIRECTORY, "is a directory", req->path);
                return;
        }
        w = calloc(1, sizeof(*w));
        if (!w) {
                reply_code(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory", req->path);
                return;
        }
        w->fd = -EBADF;
        w->mode = req->mode >= 0 ? req->mode : 0644;
        if (stat(req->path, &st) == 0) {
                if (S_ISDIR(st.st_mode)) {
                        reply_code(c, req->stream, CELLA_E_IS_DIRECTORY, "is a directory",
                                   req->path);
                        file_write_free(w);
                        return;
                }
                if (req->mode < 0)
                        w->mode = (int)(st.st_mode & 07777);
                w->chown = true;
                w->uid = st.st_uid;
                w->gid = st.st_gid;
        }
        snprintf(dir, sizeof(dir), "%s", req->path);
        slash = strrchr(dir, '/');
        if (slash == dir)
                slash[1] = '\0';
        else
                *slash = '\0';
        r = fs_mkdir_p(dir, 0755);
        if (r < 0) {
                reply_errno(c, req->stream, r, "create parent directories of", req->path);
                file_write_free(w);
                return;
        }
        w->path = strdup(req->path);
        if (asprintf(&w->tmp, "%s/.cella-upload-XXXXXX", strcmp(dir, "/") == 0 ? "" : dir) < 0)
                w->tmp = NULL;
        if (!w->path || !w->tmp) {
                reply_code(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory", req->path);
                file_write_free(w);
                return;
        }
        w->fd = mkostemp(w->tmp, O_CLOEXEC);
        if (w->fd < 0) {
                reply_errno(c, req->stream, errno, "create temporary file for", req->path);
                free(w->tmp);
                w->tmp = NULL;
                file_write_free(w);
                return;
        }
        if (conn_add_stream(c, &w->s, req->stream, &file_write_ops) < 0)
                file_write_free(w);
}

/* ---- FILE_OP ---- */

/* Remove name in dirfd, recursively for directories; never follows symlinks. */
static int remove_tree(int parent, const char *name, int depth)
{
        DIR *d;
        struct dirent *de;
        int fd, r = 0;

        if (unlinkat(parent, name, 0) == 0)
                return 0;
        if (errno != EISDIR && errno != EPERM)
                return -errno;
        if (depth > LIST_MAX_DEPTH)
                return -ELOOP;
        fd = openat(parent, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                close(fd);
                return -errno;
        }
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                r = remove_tree(dirfd(d), de->d_name, depth + 1);
                if (r < 0)
                        break;
        }
        closedir(d);
        if (r < 0)
                return r;
        if (unlinkat(parent, name, AT_REMOVEDIR) < 0)
                return -errno;
        return 0;
}

/* Copy name in sdir to name in ddir (for a move across filesystems). */
static int copy_tree(int sdir, const char *sname, int ddir, const char *dname, int depth)
{
        struct stat st;
        int r = 0;

        if (depth > LIST_MAX_DEPTH)
                return -ELOOP;
        if (fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (S_ISLNK(st.st_mode)) {
                char target[CELLA_PATH_MAX + 1];
                ssize_t n = readlinkat(sdir, sname, target, sizeof(target) - 1);

                if (n < 0)
                        return -errno;
                target[n] = '\0';
                return symlinkat(target, ddir, dname) < 0 ? -errno : 0;
        }
        if (S_ISREG(st.st_mode)) {
                _cleanup_close_ int in = -EBADF, out = -EBADF;

                in = openat(sdir, sname, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (in < 0)
                        return -errno;
                out = openat(ddir, dname, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                             st.st_mode & 07777);
                if (out < 0)
                        return -errno;
                for (;;) {
                        ssize_t n = read(in, io_buf, sizeof(io_buf)), w = 0;

                        if (n < 0 && errno == EINTR)
                                continue;
                        if (n < 0)
                                return -errno;
                        if (n == 0)
                                break;
                        while (w < n) {
                                ssize_t k = write(out, io_buf + w, (size_t)(n - w));

                                if (k < 0 && errno == EINTR)
                                        continue;
                                if (k < 0)
                                        return -errno;
                                w += k;
                        }
                }
                return 0;
        }
        if (S_ISDIR(st.st_mode)) {
                _cleanup_close_ int dfd = -EBADF;
                struct dirent *de;
                DIR *d;
                int sfd;

                if (mkdirat(ddir, dname, st.st_mode & 07777) < 0)
                        return -errno;
                dfd = openat(ddir, dname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (dfd < 0)
                        return -errno;
                sfd = openat(sdir, sname, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sfd < 0)
                        return -errno;
                d = fdopendir(sfd);
                if (!d) {
                        close(sfd);
                        return -errno;
                }
                while ((de = readdir(d))) {
                        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                                continue;
                        r = copy_tree(dirfd(d), de->d_name, dfd, de->d_name, depth + 1);
                        if (r < 0)
                                break;
                }
                closedir(d);
                return r;
        }
        return -EINVAL; /* devices, fifos, sockets are not moved across filesystems */
}

static void op_move(struct conn *c, struct agent_request *req)
{
        int r;

        if (rename(req->path, req->to) == 0) {
                conn_send_json(c, FRAME_RESULT, req->stream, json_object());
                return;
        }
        if (errno != EXDEV) {
                reply_errno(c, req->stream, errno, "move", req->path);
                return;
        }
        {
                struct stat st;

                /* rename replaces a file; do the same before copying. */
                if (lstat(req->to, &st) == 0 && !S_ISDIR(st.st_mode) && unlink(req->to) < 0) {
                        reply_errno(c, req->stream, errno, "move over", req->to);
                        return;
                }
        }
        r = copy_tree(AT_FDCWD, req->path, AT_FDCWD, req->to, 0);
        if (r < 0) {
                remove_tree(AT_FDCWD, req->to, 0);
                reply_errno(c, req->stream, r, "move (copy) to", req->to);
                return;
        }
        r = remove_tree(AT_FDCWD, req->path, 0);
        if (r < 0) {
                reply_errno(c, req->stream, r, "move (remove source)", req->path);
                return;
        }
        conn_send_json(c, FRAME_RESULT, req->stream, json_object());
}

struct lister {
        struct conn *c;
        uint32_t id;
        const char *root;
        bool recursive;
        bool hidden;
        size_t count;
        size_t bytes;
        char rel[CELLA_PATH_MAX + 1];
};

/* List the directory dfd (consumed), whose path relative to the root is l->rel[0..rlen). */
static int list_dir(struct lister *l, int dfd, size_t rlen, int depth)
{
        char abs[2 * CELLA_PATH_MAX + 2];
        struct dirent *de;
        DIR *d;
        int r = 0;

        d = fdopendir(dfd);
        if (!d) {
                r = -errno;
                close(dfd);
                return r;
        }
        while ((de = readdir(d))) {
                struct stat st;
                size_t nlen = strlen(de->d_name), len;

                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                if (de->d_name[0] == '.' && !l->hidden)
                        continue;
                len = rlen + (rlen ? 1 : 0) + nlen;
                if (len > CELLA_PATH_MAX)
                        continue;
                if (rlen)
                        l->rel[rlen] = '/';
                memcpy(l->rel + rlen + (rlen ? 1 : 0), de->d_name, nlen + 1);
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue; /* removed meanwhile */
                snprintf(abs, sizeof(abs), "%s/%s", strcmp(l->root, "/") == 0 ? "" : l->root,
                         l->rel);
                conn_send_json(l->c, FRAME_FILE_INFO, l->id,
                               file_info(de->d_name, abs, l->rel, &st));
                l->count++;
                l->bytes += 200 + 2 * strlen(abs);
                if (l->bytes > LIST_MAX_BYTES) {
                        r = -EFBIG;
                        break;
                }
                if (l->recursive && S_ISDIR(st.st_mode) && depth < LIST_MAX_DEPTH) {
                        int fd = openat(dirfd(d), de->d_name,
                                        O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

                        if (fd >= 0) {
                                r = list_dir(l, fd, len, depth + 1);
                                if (r == -EFBIG)
                                        break;
                                r = 0;
                        }
                }
        }
        closedir(d);
        l->rel[rlen] = '\0';
        return r;
}

static void op_list(struct conn *c, struct agent_request *req)
{
        struct lister *l;
        int fd, r;

        fd = open(req->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0) {
                reply_errno(c, req->stream, errno, "list", req->path);
                return;
        }
        l = calloc(1, sizeof(*l));
        if (!l) {
                close(fd);
                reply_code(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory", req->path);
                return;
        }
        l->c = c;
        l->id = req->stream;
        l->root = req->path;
        l->recursive = req->recursive;
        l->hidden = req->include_hidden;
        r = list_dir(l, fd, 0, 0);
        if (r == -EFBIG)
                reply_code(c, req->stream, CELLA_E_FILE_TOO_LARGE,
                           "listing too large; list a smaller directory", req->path);
        else if (r < 0)
                reply_errno(c, req->stream, r, "list", req->path);
        else
                conn_send_json(c, FRAME_RESULT, req->stream,
                               json_pack("{s:I}", "count", (json_int_t)l->count));
        free(l);
}

void file_op_run(struct agent *a _unused_, struct conn *c, struct agent_request *req)
{
        struct stat st;
        int r;

        switch (req->op) {
        case AGENT_OP_STAT:
                if (lstat(req->path, &st) < 0) {
                        reply_errno(c, req->stream, errno, "stat", req->path);
                        return;
                }
                conn_send_json(
                        c, FRAME_RESULT, req->stream,
                        file_info(base_name(req->path), req->path, base_name(req->path), &st));
                return;
        case AGENT_OP_EXISTS:
                if (lstat(req->path, &st) < 0) {
                        if (errno == ENOENT || errno == ENOTDIR)
                                conn_send_json(c, FRAME_RESULT, req->stream,
                                               json_pack("{s:b}", "exists", 0));
                        else
                                reply_errno(c, req->stream, errno, "stat", req->path);
                        return;
                }
                conn_send_json(c, FRAME_RESULT, req->stream,
                               json_pack("{s:b, s:s}", "exists", 1, "type", type_name(st.st_mode)));
                return;
        case AGENT_OP_DELETE:
                if (strcmp(req->path, "/") == 0) {
                        reply_code(c, req->stream, CELLA_E_VALIDATION_FAILED,
                                   "refusing to delete the root directory", req->path);
                        return;
                }
                if (lstat(req->path, &st) < 0) {
                        reply_errno(c, req->stream, errno, "delete", req->path);
                        return;
                }
                if (S_ISDIR(st.st_mode) && !req->recursive) {
                        reply_code(c, req->stream, CELLA_E_IS_DIRECTORY,
                                   "is a directory (use recursive)", req->path);
                        return;
                }
                r = S_ISDIR(st.st_mode) ? remove_tree(AT_FDCWD, req->path, 0)
                                        : (unlink(req->path) < 0 ? -errno : 0);
                if (r < 0)
                        reply_errno(c, req->stream, r, "delete", req->path);
                else
                        conn_send_json(c, FRAME_RESULT, req->stream, json_object());
                return;
        case AGENT_OP_MKDIR:
                r = req->recursive ? fs_mkdir_p(req->path, 0755)
                                   : (mkdir(req->path, 0755) < 0 ? -errno : 0);
                if (r == -ENOTDIR && req->recursive && stat(req->path, &st) == 0)
                        r = -EEXIST; /* the path itself exists and is not a directory */
                if (r < 0)
                        reply_errno(c, req->stream, r, "mkdir", req->path);
                else
                        conn_send_json(c, FRAME_RESULT, req->stream, json_object());
                return;
        case AGENT_OP_MOVE:
                op_move(c, req);
                return;
        case AGENT_OP_LIST:
                op_list(c, req);
                return;
        }
}
