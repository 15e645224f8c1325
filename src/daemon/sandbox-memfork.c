/* A memory fork (docs/decisions/0050, "memory fork"): the parent's processes dumped with
 * the tree left running (sandbox_memfork_dump_async), then the files snapshot of the same
 * instant (sandbox_table_snapshot_create, while the cgroup is still frozen: it thaws it).
 * The child is made by the caller from both (sandbox_options.memory_images). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>

#include "common/log.h"
#include "common/macros.h"
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox.h"
#include "runtime/container.h"

struct memfork {
        struct sandbox_table *t;
        char parent[CELLA_NAME_MAX + 1];
        char id[16]; /* the parent's slot id: its cgroup */
        char images[CELLA_PATH_MAX];
        sandbox_memfork_cb cb;
        void *ud;
};

/* The parent thawed (a capture that failed before its own thaw leaves it frozen; thawing
 * a thawed cgroup does nothing). */
static void thaw(struct memfork *m)
{
        struct cella_error e = {0};
        struct sandbox *s = table_find(m->t, m->parent);

        if (s && s->state == SANDBOX_RUNNING &&
            runtime_container_freeze(m->t->rt, m->id, false, &e) < 0)
                log_error("sandbox '%s': thaw after a memory fork: %s", m->parent, e.msg);
}

static void fail(struct memfork *m, const struct cella_error *err)
{
        int r = rm_rf(m->images);

        if (r < 0 && r != -ENOENT)
                log_warn("memory fork of '%s': remove %s: %s", m->parent, m->images, strerror(-r));
        m->cb(NULL, NULL, err, m->ud);
        free(m);
}

static void snapshot_taken(json_t *snap, const struct cella_error *err, void *ud)
{
        struct memfork *m = ud;

        thaw(m);
        if (!snap) {
                fail(m, err);
                return;
        }
        m->cb(snap, m->images, NULL, m->ud);
        free(m);
}

static void dumped(struct sandbox *s, const struct cella_error *err, void *ud)
{
        struct memfork *m = ud;
        struct cella_error e = {0};

        if (err) {
                fail(m, err);
                return;
        }
        /* named by its id, as a files fork's; the cgroup is still frozen */
        if (sandbox_table_snapshot_create(m->t, s->name, NULL, snapshot_taken, m, &e) < 0) {
                thaw(m);
                fail(m, &e);
        }
}

int sandbox_table_memory_fork(struct sandbox_table *t, const char *name_of, sandbox_memfork_cb cb,
                              void *userdata, struct cella_error *err)
{
        struct sandbox *s = table_find(t, name_of);
        uint8_t rnd[8];
        char name[32];

        if (!s)
                return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND, "no sandbox '%s'", name_of);
        if (s->state != SANDBOX_RUNNING)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "sandbox '%s' is not running: a fork with memory takes "
                                       "the processes of a running sandbox (wake it first)",
                                       name_of);
        struct memfork *m = calloc(1, sizeof(*m));
        if (!m)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
                free(m);
                return cella_error_errno(err, errno, "random id");
        }
        snprintf(name, sizeof(name), "memfork-%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        /* in the parent's dir: cellad's, 0700, on the data dir (as its sleep's images) */
        if (sandbox_path(s, name, m->images, sizeof(m->images)) < 0) {
                free(m);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        }
        if (mkdir(m->images, 0700) < 0) {
                int e = errno;
                free(m);
                return cella_error_errno(err, e, "mkdir %s", name);
        }
        m->t = t;
        m->cb = cb;
        m->ud = userdata;
        snprintf(m->parent, sizeof(m->parent), "%s", s->name);
        snprintf(m->id, sizeof(m->id), "%s", s->id);
        if (sandbox_memfork_dump_async(s, m->images, dumped, m, err) < 0) {
                rm_rf(m->images);
                free(m);
                return -1;
        }
        return 0;
}

int sandbox_memfork_images_remove(const char *images)
{
        struct stat st;

        if (lstat(images, &st) < 0)
                return -errno;
        return rm_rf(images);
}
