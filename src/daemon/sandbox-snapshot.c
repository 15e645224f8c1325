/* Filesystem snapshots of the table's sandboxes (docs/decisions/0048-snapshots-and-fork.md):
 * the capture (runtime_container_snapshot) into <data-dir>/snapshots/<id>/layer, the
 * registry's records, and what a sandbox made from one needs. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include <uv.h>

#include "common/fsutil.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox.h"
#include "daemon/store.h"
#include "runtime/container.h"
#include "runtime/layer.h"

static json_t *snapshot_json(const struct store_snapshot *sn)
{
        char ts[32];

        time_format_iso(sn->created_ms, ts, sizeof(ts));
        return json_pack("{s:s, s:s, s:s, s:s, s:I, s:s, s:s}", "snapshotId", sn->id, "name",
                         sn->name, "sandbox", sn->sandbox, "image", sn->image, "sizeBytes",
                         (json_int_t)sn->size_bytes, "createdAt", ts, "method",
                         sn->method && strcmp(sn->method, "clone") == 0 ? "clone" : "copy");
}

struct find {
        const char *id;      /* match the id or the name; NULL: any */
        const char *sandbox; /* only this sandbox's; NULL: any */
        json_t *arr;         /* collect */
        json_t *one;         /* the match */
        char image[CELLA_NAME_MAX + 1];
        char parent[CELLA_NAME_MAX + 1];
        bool clone;      /* the match's layer is a disk clone (0051) */
        int64_t id_base; /* and its owners' base */
        uint64_t bytes;
        bool has_child; /* a snapshot whose parent is id */
};

static int find_one(const struct store_snapshot *sn, void *ud)
{
        struct find *f = ud;

        if (f->id && sn->parent && strcmp(sn->parent, f->id) == 0)
                f->has_child = true;
        if (f->sandbox && strcmp(sn->sandbox, f->sandbox) != 0)
                return 0;
        f->bytes += (uint64_t)sn->size_bytes;
        if (f->id && strcmp(sn->id, f->id) != 0 && strcmp(sn->name, f->id) != 0)
                return 0;
        json_t *j = snapshot_json(sn);
        if (!j)
                return -ENOMEM;
        if (f->arr)
                return json_array_append_new(f->arr, j) < 0 ? -ENOMEM : 0;
        json_decref(f->one);
        f->one = j;
        snprintf(f->image, sizeof(f->image), "%s", sn->image);
        snprintf(f->parent, sizeof(f->parent), "%s", sn->parent ? sn->parent : "");
        f->clone = sn->method && strcmp(sn->method, "clone") == 0;
        f->id_base = sn->id_base;
        return 0;
}

json_t *sandbox_table_snapshots(struct sandbox_table *t, const char *sandbox,
                                struct cella_error *err)
{
        struct find f = {.sandbox = sandbox, .arr = json_array()};

        if (!f.arr)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory"), NULL;
        if (store_snapshot_foreach(t->store, find_one, &f, err) < 0) {
                json_decref(f.arr);
                return NULL;
        }
        return f.arr;
}

json_t *sandbox_table_snapshot_get(struct sandbox_table *t, const char *id, char *image,
                                   size_t image_sz, struct cella_error *err)
{
        struct find f = {.id = id};

        if (store_snapshot_foreach(t->store, find_one, &f, err) < 0) {
                json_decref(f.one);
                return NULL;
        }
        if (!f.one)
                return cella_error_set(err, CELLA_E_SNAPSHOT_NOT_FOUND, "no snapshot '%s'", id),
                       NULL;
        if (image)
                snprintf(image, image_sz, "%s", f.image);
        return f.one;
}

uint64_t sandbox_table_snapshot_bytes(struct sandbox_table *t)
{
        struct find f = {.id = "", .sandbox = NULL};
        struct cella_error err = {0};

        /* every record counted, none matched ("" is no id) */
        if (store_snapshot_foreach(t->store, find_one, &f, &err) < 0)
                return 0;
        json_decref(f.one);
        return f.bytes;
}

int sandbox_table_snapshot_layers(struct sandbox_table *t, const char *id,
                                  char (*paths)[CELLA_PATH_MAX], size_t max, size_t *ret_n,
                                  struct cella_error *err)
{
        return sandbox_table_snapshot_chain(t, id, paths, NULL, max, ret_n, err);
}

int sandbox_table_snapshot_chain(struct sandbox_table *t, const char *id,
                                 char (*paths)[CELLA_PATH_MAX], struct container_layer *info,
                                 size_t max, size_t *ret_n, struct cella_error *err)
{
        char cur[CELLA_NAME_MAX + 1];
        size_t n = 0;

        snprintf(cur, sizeof(cur), "%s", id);
        while (cur[0]) {
                struct find f = {.id = cur};
                if (n >= max)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "more than %zu snapshots stacked", max);
                if (store_snapshot_foreach(t->store, find_one, &f, err) < 0)
                        return -1;
                json_decref(f.one);
                if (!f.one)
                        return cella_error_set(err, CELLA_E_SNAPSHOT_NOT_FOUND, "no snapshot '%s'",
                                               cur);
                if (snprintf(paths[n], CELLA_PATH_MAX, "%s/snapshots/%s/layer", t->data_dir, cur) >=
                    CELLA_PATH_MAX)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
                if (info)
                        info[n] = (struct container_layer){.disk = f.clone,
                                                           .id_base = (uid_t)f.id_base};
                n++;
                snprintf(cur, sizeof(cur), "%s", f.parent);
        }
        *ret_n = n;
        return 0;
}

static int snapshots_dir(struct sandbox_table *t, char *out, size_t size)
{
        if (snprintf(out, size, "%s/snapshots", t->data_dir) >= (int)size)
                return -ENAMETOOLONG;
        return fs_mkdir_p(out, 0700);
}

/* A capture in progress: prepared on the loop, copied on the thread pool, recorded on the
 * loop. The sandbox is referenced; what the copy needs is copied into the job. */
struct snap_job {
        uv_work_t work;
        struct sandbox_table *t;
        struct sandbox *s;
        char id[32], partial[48];
        char name[CELLA_NAME_MAX + 1];
        char slot_id[16];
        char dir[CELLA_PATH_MAX];
        uid_t uid_base;
        int top_fd, snap_fd;
        struct layer_copy_stats st;
        struct cella_error err;
        int r;
        int64_t t0;
        sandbox_snapshot_cb cb;
        void *ud;
        struct snap_job *next; /* the capture of the same sandbox that waits for this one */
        /* another capture (a consistent backup): started by run(run_ud) on the loop when its
         * turn comes, ended by sandbox_capture_done */
        void (*run)(void *ud);
        void *run_ud;
};

/* name in dir_fd: text, 0600, synced (the record of the files beside them). */
static int write_file_at(int dir_fd, const char *name, const char *text)
{
        _cleanup_close_ int fd =
                openat(dir_fd, name, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t len = strlen(text);

        if (fd < 0)
                return -errno;
        if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0)
                return -EIO;
        return 0;
}

static void snap_run(struct snap_job *j);

static void on_snap_work(uv_work_t *w)
{
        struct snap_job *j = w->data;

        j->r = runtime_container_snapshot(j->t->rt, j->slot_id, j->dir, j->uid_base,
                                          CELLA_UID_RANGE, j->snap_fd, "layer", &j->t->rt_lock,
                                          &j->st, &j->err);
        if (j->r < 0)
                layer_remove(j->top_fd, j->partial);
}

static void on_snap_done(uv_work_t *w, int status)
{
        struct snap_job *j = w->data;
        struct sandbox_table *t = j->t;
        struct sandbox *s = j->s;
        json_t *out = NULL;

        if (status < 0 && j->r >= 0) {
                j->r = cella_error_errno(&j->err, -status, "snapshot");
                layer_remove(j->top_fd, j->partial);
        }
        if (j->r >= 0) {
                struct store_snapshot rec = {
                        .id = j->id,
                        .name = j->name,
                        .sandbox = s->name,
                        .image = s->image,
                        .size_bytes = (int64_t)j->st.bytes,
                        .created_ms = time_now_ms(),
                        .parent = s->snapshot,
                        .method = j->st.disk_cloned ? "clone" : "copy",
                        .id_base = j->st.disk_cloned ? (int64_t)j->uid_base : 0,
                };
                _cleanup_free_ char *text = snapshot_identity_format(&rec);
                if (!text || write_file_at(j->snap_fd, SNAPSHOT_IDENTITY_FILE, text) < 0 ||
                    renameat(j->top_fd, j->partial, j->top_fd, j->id) < 0) {
                        int e = errno;
                        layer_remove(j->top_fd, j->partial);
                        cella_error_errno(&j->err, e ? e : EIO, "snapshot directory");
                } else if (store_snapshot_save(t->store, &rec, &j->err) < 0) {
                        layer_remove(j->top_fd, j->id);
                } else {
                        log_info("snapshot '%s' (%s) of sandbox '%s' (%s): %llu bytes, %llu "
                                 "files (%llu cloned, %llu copied) in %lld ms",
                                 j->name, j->id, s->name,
                                 j->st.disk_cloned ? "its disk cloned" : "its layer copied",
                                 (unsigned long long)j->st.bytes, (unsigned long long)j->st.files,
                                 (unsigned long long)j->st.cloned, (unsigned long long)j->st.copied,
                                 (long long)(time_now_ms() - j->t0));
                        out = snapshot_json(&rec);
                        if (!out)
                                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                }
        }
        j->cb(out, out ? NULL : &j->err, j->ud);
        json_decref(out);
        close(j->snap_fd);
        close(j->top_fd);
        /* the next capture of s, which waited for this one's thaw */
        struct snap_job *next = j->next;
        s->snaps = next;
        free(j);
        if (next)
                snap_run(next);
        sandbox_unref(s);
}

/* Run j (the first of its sandbox's captures) on the loop's thread pool. */
static void snap_run(struct snap_job *j)
{
        if (j->run) {
                j->run(j->run_ud);
                return;
        }
        int r = uv_queue_work(j->t->loop, &j->work, on_snap_work, on_snap_done);
        if (r < 0) {
                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "queue snapshot: %s",
                                uv_strerror(r));
                j->r = -1;
                layer_remove(j->top_fd, j->partial);
                on_snap_done(&j->work, 0);
        }
}

int sandbox_table_snapshot_create(struct sandbox_table *t, const char *name_of,
                                  const char *snap_name, sandbox_snapshot_cb cb, void *ud,
                                  struct cella_error *err)
{
        char top[CELLA_PATH_MAX];
        struct sandbox *s = table_find(t, name_of);
        uint8_t rnd[8];
        int r;

        if (!s)
                return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND, "no sandbox '%s'", name_of);
        if (s->snapshot) {
                /* its layers and this one's must fit under a sandbox */
                char(*chain)[CELLA_PATH_MAX] = malloc(CELLA_SNAPSHOT_MAX_LAYERS * sizeof(*chain));
                size_t n = 0;
                r = chain ? sandbox_table_snapshot_layers(t, s->snapshot, chain,
                                                          CELLA_SNAPSHOT_MAX_LAYERS - 1, &n, err)
                          : cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                free(chain);
                if (r < 0)
                        return -1;
        }
        if (s->job || s->state == SANDBOX_STARTING)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "sandbox '%s' is starting; try again", name_of);
        struct snap_job *j = calloc(1, sizeof(*j));
        if (!j)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        j->top_fd = j->snap_fd = -EBADF;
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                free(j);
                return cella_error_errno(err, errno, "random id");
        }
        snprintf(j->id, sizeof(j->id), "snap-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        snprintf(j->name, sizeof(j->name), "%s", snap_name ? snap_name : j->id);
        {
                struct find f = {.id = j->name};
                struct cella_error e = {0};
                if (store_snapshot_foreach(t->store, find_one, &f, &e) == 0 && f.one) {
                        json_decref(f.one);
                        free(j);
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "a snapshot named '%s' exists", snap_name);
                }
        }
        r = snapshots_dir(t, top, sizeof(top));
        if (r < 0) {
                free(j);
                return cella_error_errno(err, -r, "snapshots directory");
        }
        if (sandbox_dir(s, j->dir, sizeof(j->dir)) < 0) {
                free(j);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        }
        j->top_fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (j->top_fd < 0) {
                r = -errno;
                free(j);
                return cella_error_errno(err, -r, "open %s", top);
        }
        /* <id>/ is made under a .partial- name and renamed when whole. */
        snprintf(j->partial, sizeof(j->partial), ".partial-%s", j->id);
        if (mkdirat(j->top_fd, j->partial, 0700) < 0 ||
            (j->snap_fd = openat(j->top_fd, j->partial, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
                r = -errno;
                unlinkat(j->top_fd, j->partial, AT_REMOVEDIR);
                close(j->top_fd);
                free(j);
                return cella_error_errno(err, -r, "snapshot directory");
        }
        snprintf(j->slot_id, sizeof(j->slot_id), "%s", s->id);
        j->uid_base = t->uid_base + s->slot * CELLA_UID_RANGE;
        j->t = t;
        j->s = s;
        j->cb = cb;
        j->ud = ud;
        j->t0 = time_now_ms();
        j->work.data = j;
        sandbox_ref(s);
        /* Captures of one sandbox run one after the other: each freezes and thaws its
         * cgroup, and one must not thaw another's freeze. */
        if (s->snaps) {
                struct snap_job *last = s->snaps;
                while (last->next)
                        last = last->next;
                last->next = j;
                return 0;
        }
        s->snaps = j;
        snap_run(j);
        return 0;
}

/* Append j to s's captures; run it when it is the first. */
static void capture_enqueue(struct sandbox *s, struct snap_job *j)
{
        if (s->snaps) {
                struct snap_job *last = s->snaps;
                while (last->next)
                        last = last->next;
                last->next = j;
                return;
        }
        s->snaps = j;
        snap_run(j);
}

int sandbox_capture_queue(struct sandbox *s, void (*run)(void *ud), void *ud)
{
        struct snap_job *j = calloc(1, sizeof(*j));

        if (!j)
                return -ENOMEM;
        j->s = s;
        j->run = run;
        j->run_ud = ud;
        sandbox_ref(s);
        capture_enqueue(s, j);
        return 0;
}

void sandbox_capture_done(struct sandbox *s)
{
        struct snap_job *j = s->snaps;
        struct snap_job *next;

        if (!j || !j->run)
                return; /* not a capture of sandbox_capture_queue: nothing of ours */
        next = j->next;
        s->snaps = next;
        free(j);
        if (next)
                snap_run(next);
        sandbox_unref(s);
}

int sandbox_table_snapshot_delete(struct sandbox_table *t, const char *id_or_name,
                                  struct cella_error *err)
{
        char top[CELLA_PATH_MAX];
        json_t *j = sandbox_table_snapshot_get(t, id_or_name, NULL, 0, err);
        int r;

        if (!j)
                return -1;
        char id[64];
        snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(j, "snapshotId")));
        json_decref(j);
        struct find users = {.id = id};
        if (store_snapshot_foreach(t->store, find_one, &users, err) < 0)
                return -1;
        json_decref(users.one);
        if (users.has_child)
                return cella_error_set(err, CELLA_E_SNAPSHOT_IN_USE,
                                       "snapshot '%s' is under a snapshot of a sandbox made from "
                                       "it; delete that one first",
                                       id_or_name);
        if (sandbox_table_snapshot_in_use(t, id))
                return cella_error_set(err, CELLA_E_SNAPSHOT_IN_USE,
                                       "snapshot '%s' is used by a sandbox; destroy the sandboxes "
                                       "made from it first",
                                       id_or_name);
        if (store_snapshot_delete(t->store, id, err) < 0)
                return -1;
        r = snapshots_dir(t, top, sizeof(top));
        _cleanup_close_ int top_fd = r < 0 ? -EBADF : open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top_fd >= 0) {
                _cleanup_close_ int snap_fd =
                        openat(top_fd, id, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                (void)snap_fd;
                r = layer_remove(top_fd, id);
                if (r < 0 && r != -ENOENT)
                        log_warn("snapshot '%s': remove files: %s", id, strerror(-r));
        }
        log_info("snapshot '%s' deleted", id);
        return 0;
}

void sandbox_table_snapshot_sweep(struct sandbox_table *t)
{
        char top[CELLA_PATH_MAX];
        struct dirent *de;

        if (snprintf(top, sizeof(top), "%s/snapshots", t->data_dir) >= (int)sizeof(top))
                return;
        _cleanup_close_ int top_fd = open(top, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (top_fd < 0)
                return;
        int dup_fd = fcntl(top_fd, F_DUPFD_CLOEXEC, 3);
        _cleanup_closedir_ DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        if (!d) {
                if (dup_fd >= 0)
                        close(dup_fd);
                return;
        }
        while ((de = readdir(d))) {
                if (strncmp(de->d_name, ".partial-", 9) != 0)
                        continue;
                int r = layer_remove(top_fd, de->d_name);
                if (r < 0)
                        log_warn("snapshots: remove %s/%s: %s", top, de->d_name, strerror(-r));
                else
                        log_info("snapshots: %s/%s, a capture a stop cut short, removed", top,
                                 de->d_name);
        }
}
