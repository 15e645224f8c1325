/* Backups of a sandbox's directories (backup.h, docs/decisions/0049-backups.md). */
#include <errno.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/timeutil.h"
#include "daemon/backup-archive.h"
#include "daemon/backup-store.h"
#include "daemon/backup.h"
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox.h"
#include "daemon/tenant.h"

extern char **environ;

struct backups {
        uv_loop_t *loop;
        struct backup_store *store;
        char archiver[CELLA_PATH_MAX];
        uv_timer_t sweep_timer;
        bool sweeping;
        /* Jobs that read or write a sandbox: it is kept from sleeping while they run (a
         * sleep would stop it under the archiver). */
        struct job *holding;
        uv_timer_t hold_timer;
        backup_created_hook created_hook; /* backups_on_created */
        void *created_ud;
};

enum job_kind { JOB_CREATE, JOB_RESTORE, JOB_LIST, JOB_GET, JOB_DELETE, JOB_SWEEP };

/* One operation: filled on the loop, worked on the thread pool, answered on the loop. */
struct job {
        uv_work_t work;
        struct backups *b;
        enum job_kind kind;
        struct sandbox *s; /* referenced (create, restore) */
        int pidfd;         /* a duplicate of its PID 1's pidfd */
        struct backup_record rec;
        char dir[CELLA_BACKUP_DIR_MAX + 1];
        int64_t ttl_s;
        struct api_backup_create *opts; /* create: the request's options (owned) */
        const char *how;                /* create: how it was stored, for the log */
        unsigned parts;                 /* create: the parts of its multipart upload */
        bool captured; /* create with consistent: its place in s's capture queue is held */
        bool frozen;   /* its sandbox is frozen (by work_create, until the archive is read) */
        uint64_t t0_us, archived_us, synced_us, done_us; /* time_mono_us() of its steps */
        json_t *result;
        struct cella_error err;
        backup_cb cb;
        void *ud;
        struct job *hold_next; /* in b->holding while s is set */
        /* The tenant whose backups the job sees (those of its sandboxes: the record's
         * internal sandbox name says whose); any: every tenant's (the admin). */
        bool any_owner;
        char owner[CELLA_TENANT_MAX + 1];
};

/* Is the record one the job may see? Another tenant's is answered as an absent one. */
static bool visible(const struct job *j, const struct backup_record *rec)
{
        return j->any_owner || tenant_owns(j->owner, rec->sandbox);
}

/* The record of the job's id, when the job may see it. 0, or -1 with err. */
static int owned_record(struct job *j)
{
        if (backup_store_record(j->b->store, j->rec.id, &j->rec, &j->err) < 0)
                return -1;
        if (visible(j, &j->rec))
                return 0;
        return cella_error_set(&j->err, CELLA_E_BACKUP_NOT_FOUND, "no backup '%s'", j->rec.id);
}

const char *backups_store_describe(const struct backups *b)
{
        return backup_store_describe(b->store);
}

/* ---- cella-archive ---- */

/* A pipe of CELLA_BACKUP_PIPE_BYTES (the default 64 KiB would wake each side every few
 * blocks); close-on-exec. */
static int big_pipe(int p[2])
{
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        (void)fcntl(p[0], F_SETPIPE_SZ, CELLA_BACKUP_PIPE_BYTES); /* best effort */
        return 0;
}

/* Start the archiver with argv; its stdin/stdout are in_fd/out_fd (-1: /dev/null), its
 * stderr err_fd, its fd 3 the pidfd. */
static int spawn_archiver(struct job *j, char *const argv[], int in_fd, int out_fd, int err_fd,
                          pid_t *ret)
{
        posix_spawn_file_actions_t fa;
        posix_spawnattr_t at;
        sigset_t none, def;
        int r;

        posix_spawn_file_actions_init(&fa);
        posix_spawnattr_init(&at);
        sigemptyset(&none);
        sigemptyset(&def);
        sigaddset(&def, SIGPIPE);
        posix_spawnattr_setsigmask(&at, &none);
        posix_spawnattr_setsigdefault(&at, &def);
        posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
        if (in_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, in_fd, 0);
        else
                posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        if (out_fd >= 0)
                posix_spawn_file_actions_adddup2(&fa, out_fd, 1);
        else
                posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, err_fd, 2);
        posix_spawn_file_actions_adddup2(&fa, j->pidfd, 3);
        r = posix_spawn(ret, j->b->archiver, &fa, &at, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        posix_spawnattr_destroy(&at);
        return -r;
}

/* The archiver's end: its exit status and what it said ("CODE message" on failure). 0, or
 * -1 with err set (code from its message when it names one of allowed, else fallback). */
static int archiver_end(pid_t pid, int err_fd, int fallback, struct cella_error *err)
{
        char msg[1024];
        size_t len = 0;
        ssize_t n;
        int status = 0;

        while ((n = read(err_fd, msg + len, sizeof(msg) - 1 - len)) > 0 ||
               (n < 0 && errno == EINTR))
                if (n > 0)
                        len += (size_t)n;
        msg[len] = '\0';
        while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
                ;
        if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
                return 0;
        /* the last line that names a code */
        char *line = msg, *nl;
        while ((nl = strchr(line, '\n')) && nl[1])
                line = nl + 1;
        if ((nl = strchr(line, '\n')))
                *nl = '\0';
        char *sp = strchr(line, ' ');
        if (sp) {
                *sp = '\0';
                int code = cella_code_from_name(line);
                if (code == CELLA_E_INVALID_BACKUP_CONFIG || code == CELLA_E_BACKUP_CREATE_FAILED ||
                    code == CELLA_E_BACKUP_RESTORE_FAILED)
                        return cella_error_set(err, code, "%.*s", CELLA_BACKUP_ERROR_MAX, sp + 1);
                *sp = ' ';
        }
        if (WIFSIGNALED(status))
                return cella_error_set(err, fallback, "archiver killed by signal %d",
                                       WTERMSIG(status));
        return cella_error_set(err, fallback, "archiver failed: %.*s", CELLA_BACKUP_ERROR_MAX,
                               line[0] ? line : "no message");
}

/* The sandbox of a consistent backup thawed, if work_create froze it. */
static void thaw(struct job *j)
{
        struct cella_error e = {0};

        if (!j->frozen)
                return;
        j->frozen = false;
        if (runtime_container_freeze(j->s->table->rt, j->s->id, false, &e) < 0)
                log_error("backup '%s': thaw sandbox '%s': %s", j->rec.id, j->s->name, e.msg);
}

static void work_create(struct job *j)
{
        struct backups *b = j->b;
        char path[CELLA_PATH_MAX + 64];
        char *argv[4 + 2 * CELLA_BACKUP_EXCLUDES_MAX + 1] = {"cella-archive", "create", j->dir};
        int argc = 3;
        int outp[2] = {-1, -1}, errp[2] = {-1, -1};
        EVP_MD_CTX *md = NULL;
        char *buf = NULL;
        pid_t pid;
        int fd = -1, r;
        uint64_t bytes = 0;
        bool begun = false;
        int werr = 0;
        /* to a bucket with multipart: streamed there, no local copy */
        bool streamed = j->opts->multipart && backup_store_is_s3(b->store);
        struct backup_upload *up = NULL;
        struct cella_error uerr = {0};
        ssize_t n;
        unsigned char digest[32];
        unsigned int dl = 0;

        if (j->opts->gitignore)
                argv[argc++] = "--gitignore";
        for (unsigned i = 0, off = 0; i < j->opts->nexcludes; i++) {
                argv[argc++] = "--exclude";
                argv[argc++] = j->opts->excludes + off;
                off += (unsigned)strlen(j->opts->excludes + off) + 1;
        }
        argv[argc] = NULL;
        if (streamed) {
                if (backup_store_upload_begin(b->store, j->rec.id, &up, &j->err) < 0)
                        goto out;
        } else {
                if (backup_store_begin(b->store, j->rec.id, path, sizeof(path), &j->err) < 0)
                        goto out;
                begun = true;
                fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
        }
        md = EVP_MD_CTX_new();
        buf = malloc(256 * 1024);
        if ((!streamed && fd < 0) || !md || !buf ||
            EVP_DigestInit_ex(md, EVP_sha256(), NULL) != 1) {
                cella_error_errno(&j->err, !streamed && fd < 0 ? errno : ENOMEM, "backup archive");
                goto out;
        }
        if (big_pipe(outp) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
                cella_error_errno(&j->err, errno, "pipe");
                goto out;
        }
        /* consistent: the sandbox frozen from before the archiver reads the first file to
         * after it read the last (its tasks stopped: the tree does not change meanwhile) */
        if (j->opts->consistent) {
                if (runtime_container_freeze(j->s->table->rt, j->s->id, true, &j->err) < 0) {
                        cella_error_prefix(&j->err, "consistent backup");
                        j->err.code = CELLA_E_BACKUP_CREATE_FAILED;
                        goto out;
                }
                j->frozen = true;
        }
        r = spawn_archiver(j, argv, -1, outp[1], errp[1], &pid);
        close(outp[1]);
        close(errp[1]);
        outp[1] = errp[1] = -1;
        if (r < 0) {
                cella_error_errno(&j->err, -r, "start %s", b->archiver);
                goto out;
        }
        /* Streamed: each block read is hashed and written to the archive's file, or to
         * the bucket's upload. An upload that fails stops the archiver (its pipe closed:
         * SIGPIPE), and says why. */
        while ((n = read(outp[0], buf, 256 * 1024)) > 0 || (n < 0 && errno == EINTR)) {
                if (n <= 0 || werr)
                        continue;
                EVP_DigestUpdate(md, buf, (size_t)n);
                bytes += (uint64_t)n;
                if (streamed) {
                        if (backup_store_upload_write(up, buf, (size_t)n, &uerr) < 0)
                                break;
                        continue;
                }
                for (ssize_t off = 0; off < n;) {
                        ssize_t w = write(fd, buf + off, (size_t)(n - off));
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0) {
                                werr = errno;
                                break;
                        }
                        off += w;
                }
        }
        thaw(j);
        if (cella_error_is_set(&uerr)) {
                close(outp[0]);
                outp[0] = -1;
                archiver_end(pid, errp[0], CELLA_E_BACKUP_CREATE_FAILED, &j->err);
                cella_error_set(&j->err, CELLA_E_BACKUP_CREATE_FAILED, "store: %s", uerr.msg);
                goto out;
        }
        if (archiver_end(pid, errp[0], CELLA_E_BACKUP_CREATE_FAILED, &j->err) < 0)
                goto out;
        j->archived_us = time_mono_us();
        if (!streamed && (werr || fsync(fd) < 0)) {
                cella_error_errno(&j->err, werr ? werr : errno, "write backup archive");
                if (j->err.code != CELLA_E_NO_SPACE)
                        j->err.code = CELLA_E_BACKUP_CREATE_FAILED;
                goto out;
        }
        EVP_DigestFinal_ex(md, digest, &dl);
        for (int i = 0; i < 32; i++)
                snprintf(j->rec.sha256 + 2 * i, 3, "%02x", digest[i]);
        j->rec.size_bytes = (int64_t)bytes;
        j->rec.created_ms = time_now_ms();
        j->rec.expires_ms = j->rec.created_ms + j->ttl_s * 1000;
        if (fd >= 0)
                close(fd);
        fd = -1;
        j->synced_us = time_mono_us();
        j->how = streamed ? "streamed" : backup_store_is_s3(b->store) ? "spooled" : "local";
        if (streamed ? backup_store_upload_finish(up, &j->rec, &j->err) < 0
                     : backup_store_commit(b->store, &j->rec, &j->err) < 0) {
                cella_error_prefix(&j->err, "store");
                j->err.code = CELLA_E_BACKUP_CREATE_FAILED;
                goto out;
        }
        begun = false;
        j->result = backup_record_json(&j->rec);
        if (!j->result)
                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
out:
        thaw(j);
        if (fd >= 0)
                close(fd);
        if (begun)
                backup_store_abort(b->store, j->rec.id);
        if (up)
                j->parts = backup_store_upload_parts(up);
        backup_store_upload_free(up); /* aborted unless finished */
        for (int i = 0; i < 2; i++) {
                if (outp[i] >= 0)
                        close(outp[i]);
                if (errp[i] >= 0)
                        close(errp[i]);
        }
        EVP_MD_CTX_free(md);
        free(buf);
}

static void work_restore(struct job *j)
{
        struct backups *b = j->b;
        char size[32];
        char *argv[] = {"cella-archive", "restore", j->dir, j->rec.sha256, size, NULL};
        int inp[2] = {-1, -1}, errp[2] = {-1, -1};
        struct cella_error ferr = {0};
        pid_t pid;
        int r;

        if (owned_record(j) < 0)
                return;
        if (j->rec.expires_ms <= time_now_ms()) {
                char ts[32];
                time_format_iso(j->rec.expires_ms, ts, sizeof(ts));
                cella_error_set(&j->err, CELLA_E_BACKUP_EXPIRED, "backup '%s' expired at %s",
                                j->rec.id, ts);
                return;
        }
        if (!j->dir[0])
                snprintf(j->dir, sizeof(j->dir), "%s", j->rec.dir);
        snprintf(size, sizeof(size), "%lld", (long long)j->rec.size_bytes);
        if (big_pipe(inp) < 0 || pipe2(errp, O_CLOEXEC) < 0) {
                cella_error_errno(&j->err, errno, "pipe");
                goto out;
        }
        r = spawn_archiver(j, argv, inp[0], -1, errp[1], &pid);
        close(inp[0]);
        close(errp[1]);
        inp[0] = errp[1] = -1;
        if (r < 0) {
                cella_error_errno(&j->err, -r, "start %s", b->archiver);
                goto out;
        }
        /* Streamed from the store into the archiver; it checks the whole (size, SHA-256)
         * before the directory is touched. A write it refused (it stopped reading) ends
         * the fetch; its own message says why. */
        backup_store_fetch(b->store, j->rec.id, inp[1], &ferr);
        close(inp[1]);
        inp[1] = -1;
        if (archiver_end(pid, errp[0], CELLA_E_BACKUP_RESTORE_FAILED, &j->err) < 0)
                goto out;
        if (cella_error_is_set(&ferr)) {
                cella_error_set(&j->err, CELLA_E_BACKUP_RESTORE_FAILED, "%s", ferr.msg);
                goto out;
        }
        j->result = json_pack("{s:b, s:s, s:s, s:s}", "success", 1, "id", j->rec.id, "dir", j->dir,
                              "sandbox", sandbox_name(j->s));
        if (!j->result)
                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
out:
        for (int i = 0; i < 2; i++) {
                if (inp[i] >= 0)
                        close(inp[i]);
                if (errp[i] >= 0)
                        close(errp[i]);
        }
}

struct collecting {
        const struct job *job;
        json_t *arr;
};

static int collect(const struct backup_record *rec, void *ud)
{
        struct collecting *c = ud;
        json_t *arr = c->arr;
        json_t *j;

        if (!visible(c->job, rec))
                return 0;
        if (!(j = backup_record_json(rec)))
                return -ENOMEM;
        json_object_set_new(j, "_created", json_integer(rec->created_ms));
        return json_array_append_new(arr, j) < 0 ? -ENOMEM : 0;
}

static int newest_first(const void *a, const void *b)
{
        json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "_created"));
        json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "_created"));

        return x < y ? 1 : x > y ? -1 : 0;
}

static void work_list(struct job *j)
{
        _cleanup_json_ json_t *arr = json_array();
        size_t n, i;

        if (!arr) {
                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        struct collecting c = {.job = j, .arr = arr};

        if (backup_store_list(j->b->store, collect, &c, &j->err) < 0)
                return;
        n = json_array_size(arr);
        json_t **v = calloc(n ? n : 1, sizeof(*v));
        json_t *sorted = json_array();
        if (!v || !sorted) {
                free(v);
                json_decref(sorted);
                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        for (i = 0; i < n; i++)
                v[i] = json_array_get(arr, i);
        qsort(v, n, sizeof(*v), newest_first);
        for (i = 0; i < n; i++) {
                json_object_del(v[i], "_created");
                json_array_append(sorted, v[i]);
        }
        free(v);
        j->result = json_pack("{s:o}", "backups", sorted);
}

struct expired {
        char (*ids)[BACKUP_ID_LEN + 1];
        size_t n, cap;
        int64_t now;
};

static int find_expired(const struct backup_record *rec, void *ud)
{
        struct expired *x = ud;

        if (rec->expires_ms > x->now)
                return 0;
        if (x->n == x->cap) {
                size_t cap = x->cap ? x->cap * 2 : 16;
                void *p = realloc(x->ids, cap * sizeof(*x->ids));
                if (!p)
                        return -ENOMEM;
                x->ids = p;
                x->cap = cap;
        }
        memcpy(x->ids[x->n++], rec->id, BACKUP_ID_LEN + 1);
        return 0;
}

/* Every expired backup removed (any cellad sharing the store may do it: a removal of what
 * is already gone is no error). */
static void work_sweep(struct job *j)
{
        struct expired x = {.now = time_now_ms()};

        if (backup_store_list(j->b->store, find_expired, &x, &j->err) < 0) {
                free(x.ids);
                return;
        }
        for (size_t i = 0; i < x.n; i++) {
                struct cella_error e = {0};
                if (backup_store_delete(j->b->store, x.ids[i], &e) < 0) {
                        if (e.code != CELLA_E_BACKUP_NOT_FOUND)
                                log_warn("backup '%s' expired: remove: %s", x.ids[i], e.msg);
                } else {
                        log_info("backup '%s' expired: removed", x.ids[i]);
                }
        }
        free(x.ids);
}

static void on_work(uv_work_t *w)
{
        struct job *j = w->data;

        j->t0_us = time_mono_us();

        switch (j->kind) {
        case JOB_CREATE:
                work_create(j);
                break;
        case JOB_RESTORE:
                work_restore(j);
                break;
        case JOB_LIST:
                work_list(j);
                break;
        case JOB_GET:
                if (owned_record(j) == 0 && !(j->result = backup_record_json(&j->rec)))
                        cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                break;
        case JOB_DELETE:
                if (owned_record(j) == 0 &&
                    backup_store_delete(j->b->store, j->rec.id, &j->err) == 0 &&
                    !(j->result = json_pack("{s:s, s:b}", "id", j->rec.id, "deleted", 1)))
                        cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                break;
        case JOB_SWEEP:
                work_sweep(j);
                break;
        }
        j->done_us = time_mono_us();
}

static void hold_remove(struct job *j)
{
        for (struct job **p = &j->b->holding; *p; p = &(*p)->hold_next)
                if (*p == j) {
                        *p = j->hold_next;
                        break;
                }
}

/* Every sandbox a job reads or writes counts as active (the idle check would otherwise
 * put it to sleep under a long backup or restore). */
static void on_hold_timer(uv_timer_t *t)
{
        struct backups *b = t->data;

        for (struct job *j = b->holding; j; j = j->hold_next)
                sandbox_touch(j->s);
}

static void on_done(uv_work_t *w, int status)
{
        struct job *j = w->data;

        if (status < 0 && !j->result && !cella_error_is_set(&j->err))
                cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "cancelled");
        if (j->kind == JOB_SWEEP) {
                j->b->sweeping = false;
        } else {
                if (!j->result && !cella_error_is_set(&j->err))
                        cella_error_set(&j->err, CELLA_E_INTERNAL_ERROR, "no result");
                if (j->kind == JOB_CREATE && j->result)
                        log_info("backup '%s' of %s:%s: %lld bytes in %.1f ms (archived in "
                                 "%.1f, synced in %.1f, stored in %.1f; %s, %u parts)",
                                 j->rec.id, j->rec.sandbox, j->rec.dir,
                                 (long long)j->rec.size_bytes, (j->done_us - j->t0_us) / 1e3,
                                 (j->archived_us - j->t0_us) / 1e3,
                                 (j->synced_us - j->archived_us) / 1e3,
                                 (j->done_us - j->synced_us) / 1e3, j->how ? j->how : "", j->parts);
                else if (j->kind == JOB_RESTORE && j->result)
                        log_info("backup '%s' restored into %s:%s in %.1f ms", j->rec.id,
                                 sandbox_name(j->s), j->dir, (j->done_us - j->t0_us) / 1e3);
                if (j->kind == JOB_CREATE && j->result && j->b->created_hook)
                        j->b->created_hook(j->result, j->b->created_ud);
                j->cb(j->result, j->result ? NULL : &j->err, j->ud);
        }
        json_decref(j->result);
        free(j->opts);
        if (j->pidfd >= 0)
                close(j->pidfd);
        if (j->captured)
                sandbox_capture_done(j->s); /* thawed by now: the next capture may run */
        if (j->s) {
                hold_remove(j);
                sandbox_touch(j->s);
                sandbox_unref(j->s);
        }
        free(j);
}

static struct job *job_new(struct backups *b, enum job_kind kind, const char *owner, backup_cb cb,
                           void *ud, struct cella_error *err)
{
        struct job *j = calloc(1, sizeof(*j));

        if (!j) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        j->b = b;
        j->kind = kind;
        j->cb = cb;
        j->ud = ud;
        j->pidfd = -EBADF;
        j->work.data = j;
        j->any_owner = !owner;
        snprintf(j->owner, sizeof(j->owner), "%s", owner ? owner : "");
        return j;
}

static int job_queue(struct job *j, struct cella_error *err)
{
        int r = uv_queue_work(j->b->loop, &j->work, on_work, on_done);

        if (r < 0) {
                if (j->pidfd >= 0)
                        close(j->pidfd);
                if (j->s)
                        sandbox_unref(j->s);
                free(j->opts);
                free(j);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "queue: %s", uv_strerror(r));
        }
        if (j->s) {
                j->hold_next = j->b->holding;
                j->b->holding = j;
        }
        return 0;
}

/* A consistent backup's turn in its sandbox's capture queue (on the loop): queued on the
 * thread pool; one that cannot be is answered and gives its turn up. */
static void capture_turn(void *ud)
{
        struct job *j = ud;
        struct sandbox *s = j->s;
        backup_cb cb = j->cb;
        void *cb_ud = j->ud;
        struct cella_error err = {0};

        if (job_queue(j, &err) < 0) {
                cb(NULL, &err, cb_ud);
                sandbox_capture_done(s); /* s is the queue's reference until then */
        }
}

/* The job takes s (referenced) and a duplicate of its PID 1's pidfd. */
static int job_sandbox(struct job *j, struct sandbox *s, struct cella_error *err)
{
        j->pidfd = s->state == SANDBOX_RUNNING ? sandbox_pidfd_dup(s) : -ESRCH;
        if (j->pidfd == -ESRCH)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "sandbox '%s' is not running; try again", s->name);
        if (j->pidfd < 0)
                return cella_error_errno(err, -j->pidfd, "pidfd");
        j->s = s;
        sandbox_ref(s);
        return 0;
}

int backups_create(struct backups *b, struct sandbox *s, const char *dir, const char *name,
                   int64_t ttl, backup_cb cb, void *ud, struct cella_error *err)
{
        _cleanup_free_ struct api_backup_create *o = calloc(1, sizeof(*o));

        if (!o)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (!dir || strlen(dir) > CELLA_BACKUP_DIR_MAX)
                return backup_dir_check(dir, err);
        snprintf(o->dir, sizeof(o->dir), "%s", dir);
        if (name && strlen(name) > CELLA_BACKUP_NAME_MAX)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "name is longer than %d bytes", CELLA_BACKUP_NAME_MAX);
        o->has_name = name != NULL;
        snprintf(o->name, sizeof(o->name), "%s", name ? name : "");
        o->ttl_s = ttl;
        o->multipart = true;
        return backups_create_with(b, s, o, cb, ud, err);
}

int backups_create_with(struct backups *b, struct sandbox *s, const struct api_backup_create *o,
                        backup_cb cb, void *ud, struct cella_error *err)
{
        const char *dir = o->dir, *name = o->has_name ? o->name : NULL;
        int64_t ttl = o->ttl_s;
        struct job *j;

        if (backup_dir_check(dir, err) < 0)
                return -1;
        if (name && strlen(name) > CELLA_BACKUP_NAME_MAX)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "name is longer than %d bytes", CELLA_BACKUP_NAME_MAX);
        if (ttl < 1 || ttl > CELLA_BACKUP_TTL_MAX)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "ttl must be 1 to %lld seconds", CELLA_BACKUP_TTL_MAX);
        if (!(j = job_new(b, JOB_CREATE, NULL, cb, ud, err)))
                return -1;
        j->opts = malloc(sizeof(*j->opts));
        if (!j->opts) {
                free(j);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        memcpy(j->opts, o, sizeof(*o));
        if (backup_id_new(j->rec.id) < 0) {
                free(j->opts);
                free(j);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "random id");
        }
        if (job_sandbox(j, s, err) < 0) {
                free(j->opts);
                free(j);
                return -1;
        }
        snprintf(j->rec.name, sizeof(j->rec.name), "%s", name ? name : "");
        snprintf(j->rec.sandbox, sizeof(j->rec.sandbox), "%s", s->name);
        snprintf(j->rec.dir, sizeof(j->rec.dir), "%s", dir);
        snprintf(j->dir, sizeof(j->dir), "%s", dir);
        j->ttl_s = ttl;
        if (!o->consistent)
                return job_queue(j, err);
        /* its turn among the sandbox's captures: no snapshot thaws it under the archiver,
         * and it thaws none */
        if (sandbox_capture_queue(s, capture_turn, j) < 0) {
                close(j->pidfd);
                sandbox_unref(j->s);
                free(j->opts);
                free(j);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        j->captured = true;
        return 0;
}

int backups_restore(struct backups *b, struct sandbox *s, const char *id, const char *dir,
                    const char *owner, backup_cb cb, void *ud, struct cella_error *err)
{
        struct job *j;

        if (!backup_id_is_valid(id))
                return cella_error_set(err, CELLA_E_BACKUP_NOT_FOUND, "no backup '%.64s'", id);
        if (dir && backup_dir_check(dir, err) < 0)
                return -1;
        if (!(j = job_new(b, JOB_RESTORE, owner, cb, ud, err)))
                return -1;
        if (job_sandbox(j, s, err) < 0) {
                free(j);
                return -1;
        }
        snprintf(j->rec.id, sizeof(j->rec.id), "%s", id);
        snprintf(j->dir, sizeof(j->dir), "%s", dir ? dir : "");
        return job_queue(j, err);
}

int backups_list(struct backups *b, const char *owner, backup_cb cb, void *ud,
                 struct cella_error *err)
{
        struct job *j = job_new(b, JOB_LIST, owner, cb, ud, err);

        return j ? job_queue(j, err) : -1;
}

static int by_id(struct backups *b, enum job_kind kind, const char *id, const char *owner,
                 backup_cb cb, void *ud, struct cella_error *err)
{
        struct job *j;

        if (!backup_id_is_valid(id))
                return cella_error_set(err, CELLA_E_BACKUP_NOT_FOUND, "no backup '%.64s'", id);
        if (!(j = job_new(b, kind, owner, cb, ud, err)))
                return -1;
        snprintf(j->rec.id, sizeof(j->rec.id), "%s", id);
        return job_queue(j, err);
}

int backups_get(struct backups *b, const char *id, const char *owner, backup_cb cb, void *ud,
                struct cella_error *err)
{
        return by_id(b, JOB_GET, id, owner, cb, ud, err);
}

int backups_delete(struct backups *b, const char *id, const char *owner, backup_cb cb, void *ud,
                   struct cella_error *err)
{
        return by_id(b, JOB_DELETE, id, owner, cb, ud, err);
}

static void on_sweep_timer(uv_timer_t *t)
{
        struct backups *b = t->data;
        struct cella_error err = {0};
        struct job *j;

        if (b->sweeping)
                return;
        j = job_new(b, JOB_SWEEP, NULL, NULL, NULL, &err);
        if (!j)
                return;
        b->sweeping = true;
        if (job_queue(j, &err) < 0)
                b->sweeping = false;
}

int backups_new(uv_loop_t *loop, const char *store_spec, const char *data_dir, const char *archiver,
                struct backups **ret, struct cella_error *err)
{
        struct backups *b = calloc(1, sizeof(*b));

        if (!b)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        b->loop = loop;
        snprintf(b->archiver, sizeof(b->archiver), "%s", archiver);
        if (backup_store_new(store_spec, data_dir, &b->store, err) < 0) {
                free(b);
                return -1;
        }
        backup_store_sweep_partials(b->store);
        uv_timer_init(loop, &b->sweep_timer);
        b->sweep_timer.data = b;
        uv_timer_start(&b->sweep_timer, on_sweep_timer, CELLA_BACKUP_SWEEP_MS,
                       CELLA_BACKUP_SWEEP_MS);
        uv_unref((uv_handle_t *)&b->sweep_timer);
        uv_timer_init(loop, &b->hold_timer);
        b->hold_timer.data = b;
        uv_timer_start(&b->hold_timer, on_hold_timer, 500, 500);
        uv_unref((uv_handle_t *)&b->hold_timer);
        *ret = b;
        return 0;
}

void backups_on_created(struct backups *b, backup_created_hook fn, void *ud)
{
        b->created_hook = fn;
        b->created_ud = ud;
}

void backups_free(struct backups *b)
{
        if (!b)
                return;
        backup_store_free(b->store);
        free(b);
}
