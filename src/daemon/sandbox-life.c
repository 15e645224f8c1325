/* The lifecycle of a sandbox (sandbox-internal.h): create (or claim from the pool),
 * start, sleep, wake, update, destroy, and the one teardown every stop goes through. A
 * sandbox's cgroups and data directory are named by its uid slot, "s<slot>", never by its
 * name (decision 0015). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/instance-type.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox-options.h"
#include "daemon/store.h"

/* IMAGES_DIR/NAME is complete (its rootfs and .complete are there). */
static bool image_ready(const struct sandbox_table *t, const char *image)
{
        char p[CELLA_PATH_MAX];
        struct stat st;

        return snprintf(p, sizeof(p), "%s/%s/.complete", t->images_dir, image) < (int)sizeof(p) &&
               stat(p, &st) == 0;
}

/* An imported image's Env ("K=V" strings in IMAGES_DIR/NAME/image.json) under env: what
 * env already sets wins. Names that are not shell identifiers are skipped. */
void image_env_under(const struct sandbox_table *t, const char *image, json_t *env)
{
        char p[CELLA_PATH_MAX];
        json_t *meta, *v;
        size_t i;

        if (snprintf(p, sizeof(p), "%s/%s/image.json", t->images_dir, image) >= (int)sizeof(p))
                return;
        meta = json_load_file(p, 0, NULL);
        json_array_foreach(json_object_get(meta, "env"), i, v)
        {
                const char *kv = json_string_value(v), *eq = kv ? strchr(kv, '=') : NULL;
                char key[256];
                bool ok = eq && eq > kv && (size_t)(eq - kv) < sizeof(key) &&
                          strlen(eq + 1) < CELLA_PATH_MAX && !(kv[0] >= '0' && kv[0] <= '9');

                for (const char *c = kv; ok && c < eq; c++)
                        ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                             (*c >= '0' && *c <= '9') || *c == '_';
                if (!ok || i >= 256)
                        continue;
                snprintf(key, sizeof(key), "%.*s", (int)(eq - kv), kv);
                if (!json_object_get(env, key))
                        json_object_set_new(env, key, json_string(eq + 1));
        }
        json_decref(meta);
}

/* A new sandbox named name: claimed from the pool (running when this returns), or built:
 * started here, or with async queued (s->job set; s->fresh: a failed start destroys it). */
static int sandbox_create(struct sandbox_table *t, const char *name,
                          const struct sandbox_options *opts, bool async, struct sandbox **ret,
                          struct cella_error *err)
{
        const char *image = opts && opts->image ? opts->image : t->default_image;
        const char *itype =
                opts && opts->instance_type ? opts->instance_type : INSTANCE_TYPE_DEFAULT;
        struct sandbox *s;
        unsigned slot;
        bool network;

        if (t->count >= t->max_sandboxes)
                return cella_error_set(err, CELLA_E_SANDBOX_LIMIT_REACHED,
                                       "this daemon runs at most %u sandboxes", t->max_sandboxes);
        /* opts were checked as they were decoded (sandbox-options.h); what is left to
         * check is what the host has: the image, the network mode, the disk. */
        if (!image_ready(t, image))
                return cella_error_set(err, CELLA_E_IMAGE_NOT_FOUND,
                                       "no image '%s' (cella image ls; build or import it)", image);
        if (network_wanted(t, opts, &network, err) < 0)
                return -1;
        _cleanup_json_ json_t *allow =
                opts && opts->network_allow ? json_deep_copy(opts->network_allow) : json_array();
        if (!allow)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        /* Pool sandboxes have the default network and no allowlist: anything else is a
         * build (network work happens only there, never at a claim). */
        if (!(opts && opts->snapshot) && strcmp(image, t->default_image) == 0 &&
            strcmp(itype, INSTANCE_TYPE_DEFAULT) == 0 && network == network_default(t) &&
            json_array_size(allow) == 0) {
                struct cella_error ce = {0};
                s = pool_take(t);
                if (s && pool_claim(s, name, opts, &ce) == 0) {
                        *ret = s;
                        return 0;
                }
                if (s)
                        log_warn("sandbox '%s': claim failed (%s); building it", name, ce.msg);
        }
        if (disk_admit(t, new_disk_bytes(t, itype), err) < 0)
                return -1;
        if (alloc_slot(t, &slot) < 0)
                return cella_error_set(err, CELLA_E_SANDBOX_LIMIT_REACHED,
                                       "no free uid range for a new sandbox");

        s = sandbox_alloc(t, name, slot);
        if (!s) {
                release_slot(t, slot);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        s->network = network;
        s->network_allow = TAKE_PTR(allow);
        s->image = strdup(image);
        s->instance_type = strdup(itype);
        s->env = opts && opts->env ? json_deep_copy(opts->env) : json_object();
        if (s->env)
                image_env_under(t, image, s->env);
        s->labels = opts && opts->labels ? json_deep_copy(opts->labels) : json_object();
        s->snapshot = opts && opts->snapshot ? strdup(opts->snapshot) : NULL;
        s->created_ms = s->last_active_ms = time_now_ms();
        s->sleep_after_ms = opts && opts->sleep_after_ms > 0 ? opts->sleep_after_ms
                                                             : CELLA_DEFAULT_SLEEP_AFTER_MS;
        s->sleep_memory = opts && opts->sleep_mode && strcmp(opts->sleep_mode, "memory") == 0;
        s->keep_alive = opts && opts->has_keep_alive && opts->keep_alive;
        s->default_session = !(opts && opts->has_default_session && !opts->default_session);
        if (!s->image || !s->instance_type || !s->env || !s->labels ||
            (opts && opts->snapshot && !s->snapshot)) {
                release_slot(t, slot);
                sandbox_free(s);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        /* a memory fork's child: the parent's images become its checkpoint, which its
         * first start restores (or fails: 0050) */
        if (opts && opts->memory_images) {
                char dir[CELLA_PATH_MAX], ck[CELLA_PATH_MAX];
                int r = sandbox_dir(s, dir, sizeof(dir));
                if (r >= 0)
                        r = fs_mkdir_p(dir, 0700);
                if (r >= 0)
                        r = sandbox_path(s, "checkpoint", ck, sizeof(ck));
                if (r >= 0 && rename(opts->memory_images, ck) < 0)
                        r = -errno;
                if (r < 0) {
                        if (sandbox_dir(s, dir, sizeof(dir)) >= 0)
                                rm_rf(dir);
                        release_slot(t, slot);
                        sandbox_free(s);
                        cella_error_errno(err, -r, "fork with memory: the images");
                        if (err)
                                err->code = CELLA_E_MEMORY_FORK_FAILED;
                        return -1;
                }
                s->memory_fork = true;
        }
        table_insert(t, s);
        s->fresh = async;
        if ((async ? sandbox_start_async(s, err) : sandbox_start(s, err)) < 0) {
                bool existed;
                /* Undo everything, files included: the sandbox never existed. */
                sandbox_table_destroy(t, name, &existed, NULL);
                return -1;
        }
        if (!async)
                pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS); /* one user sandbox more: trim */
        *ret = s;
        return 0;
}

/* Put a running sandbox to sleep (idle, or asked by POST /sleep: why): every process
 * stops and its memory is freed; its files (the upper layer, /workspace included) stay on
 * disk. The next operation wakes it. With sleepMode "memory" where the host can (0050),
 * its processes are checkpointed first and the next operation restores them; a checkpoint
 * that fails leaves a sleep with the files only, which memorySleepError explains. 1: the
 * checkpoint is queued (asleep when it is over: checkpoint_finish); 0: asleep now. */
static int sandbox_sleep(struct sandbox *s, const char *why)
{
        struct cella_error e = {0};

        if (s->sleep_memory && !s->table->memsleep_reason[0]) {
                if (sandbox_checkpoint_async(s, &e) == 0)
                        return 1; /* asleep when the checkpoint is over */
                snprintf(s->memsleep_note, sizeof(s->memsleep_note),
                         "its memory was not checkpointed (%s); it slept with its files", e.msg);
                log_warn("sandbox '%s': %s", s->name, s->memsleep_note);
                memset(&e, 0, sizeof(e));
        }
        if (sandbox_teardown(s, SANDBOX_SLEEPING, &e) < 0)
                log_warn("sandbox '%s': sleep: %s", s->name, e.msg);
        memset(&e, 0, sizeof(e));
        if (sandbox_persist(s, &e) < 0)
                log_warn("sandbox '%s': %s", s->name, e.msg);
        if (why)
                log_info("sandbox '%s' sleeping %s", s->name, why);
        else
                log_info("sandbox '%s' sleeping after %lld s idle", s->name,
                         (long long)(s->sleep_after_ms / 1000));
        return 0;
}

void sandbox_sleepers_flush(struct sandbox *s, const struct cella_error *err)
{
        struct sleep_waiter *w = s->sleepers;

        s->sleepers = NULL;
        sandbox_ref(s);
        while (w) {
                struct sleep_waiter *next = w->next;
                w->cb(err ? NULL : s, err, w->ud);
                free(w);
                w = next;
        }
        sandbox_unref(s);
}

/* cb waits for the checkpoint in progress of s (s->checkpointing). */
static int sleeper_add(struct sandbox *s, sandbox_sleep_cb cb, void *ud, struct cella_error *err)
{
        struct sleep_waiter *w = calloc(1, sizeof(*w)), **tail = &s->sleepers;

        if (!w)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        w->cb = cb;
        w->ud = ud;
        while (*tail)
                tail = &(*tail)->next;
        *tail = w;
        return 0;
}

/* The sleep of s now that nothing starts it (POST /sleep, plan-then-apply: every refusal
 * before anything is done). */
static int sleep_settled(struct sandbox *s, sandbox_sleep_cb cb, void *ud, struct cella_error *err)
{
        switch (s->state) {
        case SANDBOX_SLEEPING:
                cb(s, NULL, ud);
                return 0;
        case SANDBOX_RUNNING:
                break;
        case SANDBOX_STARTING: /* a checkpoint: its sleep is this one */
                if (s->checkpointing)
                        return sleeper_add(s, cb, ud, err);
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "sandbox '%s' is starting; try again", s->name);
        default:
                return cella_error_set(err, CELLA_E_SANDBOX_STOPPED,
                                       "sandbox '%s' is stopped (its PID 1 exited): it is not "
                                       "running, so it cannot sleep; any other request starts it",
                                       s->name);
        }
        if (s->snaps)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "sandbox '%s' is being captured (a snapshot or a fork); "
                                       "try again",
                                       s->name);
        if (sandbox_sleep(s, "on request (POST /sleep)") == 1)
                return sleeper_add(s, cb, ud, err); /* the checkpoint is queued: it will call */
        cb(s, NULL, ud);
        return 0;
}

struct sleep_after_start {
        sandbox_sleep_cb cb;
        void *ud;
};

/* The start (a wake, a memory fork's dump) that a POST /sleep waited for is over. */
static void sleep_after_start(struct sandbox *s, bool created, const struct cella_error *err,
                              void *userdata)
{
        struct sleep_after_start *w = userdata;
        struct cella_error e = {0};

        (void)created;
        if (!err && sleep_settled(s, w->cb, w->ud, &e) < 0)
                err = &e;
        if (err)
                w->cb(NULL, err, w->ud);
        free(w);
}

int sandbox_table_sleep(struct sandbox_table *t, const char *name, sandbox_sleep_cb cb, void *ud,
                        struct cella_error *err)
{
        struct sandbox *s = table_find(t, name);

        if (!s)
                return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND,
                                       "sandbox '%s' does not exist", name);
        if (s->job && !s->checkpointing) {
                /* a wake or a dump in progress: the sleep comes after it */
                struct sleep_after_start *w = calloc(1, sizeof(*w));

                if (!w)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                w->cb = cb;
                w->ud = ud;
                if (sandbox_wait(s, false, sleep_after_start, w, err) < 0) {
                        free(w);
                        return -1;
                }
                return 0;
        }
        return sleep_settled(s, cb, ud, err);
}

/* Idleness: no request for sleep_after_ms and no open stream (a running exec, a file
 * transfer, an SSE client) in that time. An open stream counts as activity now. */
void on_idle_check(uv_timer_t *timer)
{
        struct sandbox_table *t = timer->data;
        int64_t now = time_now_ms();

        for (unsigned i = 0; i < TABLE_BUCKETS; i++) {
                struct sandbox *s = t->buckets[i];
                while (s) {
                        struct sandbox *next = s->next;
                        if (s->state == SANDBOX_RUNNING && !s->keep_alive) {
                                if (agent_conn_stream_count(s->agent) > 0)
                                        s->last_active_ms = now;
                                else if (now - s->last_active_ms >= s->sleep_after_ms)
                                        sandbox_sleep(s, NULL);
                        }
                        s = next;
                }
        }
}

/* The sandbox named name, after its start in progress (if any) is over: NULL when there
 * is none (or its first start failed). */
static struct sandbox *find_settled(struct sandbox_table *t, const char *name)
{
        struct sandbox *s = table_find(t, name);

        if (s && s->job) {
                sandbox_join(s);
                s = table_find(t, name);
        }
        return s;
}

int sandbox_table_get(struct sandbox_table *t, const char *name, bool create,
                      const struct sandbox_options *opts, struct sandbox **ret, bool *ret_created,
                      struct cella_error *err)
{
        /* A lookup does not wait for a start in progress: it sees the sandbox STARTING. */
        struct sandbox *s = create ? find_settled(t, name) : table_find(t, name);

        if (s) {
                /* Looking a sandbox up (create = false) neither wakes nor touches it. */
                if (create) {
                        if (sandbox_ensure_running(s, false, err) < 0)
                                return -1;
                        sandbox_touch(s);
                }
                if (ret_created)
                        *ret_created = false;
                *ret = s;
                return 0;
        }
        if (!create)
                return cella_error_set(err, CELLA_E_SANDBOX_NOT_FOUND,
                                       "sandbox '%s' does not exist", name);
        if (sandbox_create(t, name, opts, false, ret, err) < 0)
                return -1;
        if (ret_created)
                *ret_created = true;
        return 0;
}

/* sandbox_directory_ops.get of the local table: a start (a new sandbox's, or a wake) runs
 * off the loop and the callback comes when it is over; a sandbox already running, a
 * lookup, a pool claim and an error are answered before this returns. */
static void local_get(struct sandbox_directory *d, const char *name, bool create,
                      const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct sandbox_table *t = (struct sandbox_table *)d;
        struct sandbox *s = table_find(t, name);
        struct cella_error e = {0};
        bool created = false;

        if (!s && !create) {
                cella_error_set(&e, CELLA_E_SANDBOX_NOT_FOUND, "sandbox '%s' does not exist", name);
                cb(NULL, false, &e, userdata);
                return;
        }
        if (!create) {
                cb(s, false, NULL, userdata);
                return;
        }
        if (!s) {
                if (sandbox_create(t, name, opts, true, &s, &e) < 0)
                        goto fail;
                created = true;
        } else if (!s->job && sandbox_ensure_running(s, true, &e) < 0) {
                goto fail;
        }
        if (s->job) {
                /* Started once: every get of the name meanwhile waits for this start. */
                if (sandbox_wait(s, created, cb, userdata, &e) < 0)
                        goto fail;
                return;
        }
        sandbox_touch(s);
        cb(s, created, NULL, userdata);
        return;
fail:
        cb(NULL, false, &e, userdata);
}

static int sandbox_update(struct sandbox_table *t, struct sandbox *s,
                          const struct sandbox_options *opts, struct cella_error *err);

int sandbox_table_put(struct sandbox_table *t, const char *name, const struct sandbox_options *opts,
                      struct sandbox **ret, bool *ret_created, struct cella_error *err)
{
        struct sandbox *s = find_settled(t, name);

        if (!s)
                return sandbox_table_get(t, name, true, opts, ret, ret_created, err);
        /* Kept to undo the update when it fails, e.g. when the registry refuses it (a full
         * data directory): what answered an error did not happen. (A new networkAllow is
         * applied as it is validated, and stays.) */
        _cleanup_json_ json_t *old_env = json_deep_copy(s->env);
        _cleanup_json_ json_t *old_labels = json_incref(s->labels);
        int64_t old_sleep = s->sleep_after_ms;
        bool old_keep = s->keep_alive, old_default = s->default_session;
        bool old_memory = s->sleep_memory;

        if (!old_env)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        int r = sandbox_update(t, s, opts, err);
        if (r < 0) {
                json_decref(s->env);
                s->env = TAKE_PTR(old_env);
                json_decref(s->labels);
                s->labels = TAKE_PTR(old_labels);
                s->sleep_after_ms = old_sleep;
                s->keep_alive = old_keep;
                s->default_session = old_default;
                s->sleep_memory = old_memory;
                return -1;
        }
        if (ret_created)
                *ret_created = false;
        *ret = s;
        return 0;
}

/* The nft chain of the allowlist of s, rewritten (list: CELLA_NETWORK_ALLOW_MAX entries). */
static int allow_rewrite(struct sandbox_table *t, struct sandbox *s, struct net_allow *list,
                         struct cella_error *err)
{
        pthread_mutex_lock(&t->rt_lock);
        int r = net_sandbox_allow(runtime_net(t->rt), s->slot, list, network_allow_list(s, list),
                                  err);
        pthread_mutex_unlock(&t->rt_lock);
        return r;
}

/* The update of an existing sandbox by PUT, then its record written. */
static int sandbox_update(struct sandbox_table *t, struct sandbox *s,
                          const struct sandbox_options *opts, struct cella_error *err)
{
        const char *name = s->name;

        if (opts) {
                if (sandbox_options_check_update(opts, name, s->image, s->instance_type, err) < 0)
                        return -1;
                if (opts->snapshot && !(s->snapshot && strcmp(s->snapshot, opts->snapshot) == 0))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "sandbox '%s' exists; its files do not come from "
                                               "snapshot '%s' (destroy it first)",
                                               name, opts->snapshot);
                if (opts->network) {
                        bool network;
                        if (network_wanted(t, opts, &network, err) < 0)
                                return -1;
                        if (network != s->network)
                                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                       "sandbox '%s' exists with network '%s'; "
                                                       "destroy it to change the network",
                                                       name, s->network ? "outbound" : "none");
                }
                if (opts->network_allow) {
                        _cleanup_json_ json_t *allow = json_deep_copy(opts->network_allow);
                        if (!allow)
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "out of memory");
                        if (!json_equal(allow, s->network_allow)) {
                                struct net_allow list[CELLA_NETWORK_ALLOW_MAX];
                                json_decref(s->network_allow);
                                s->network_allow = TAKE_PTR(allow);
                                /* Its chain is rewritten now (a stopped one's too: it
                                 * exists iff the allowlist is not empty). */
                                if (s->network && allow_rewrite(t, s, list, err) < 0)
                                        return -1;
                        }
                }
                if (opts->env)
                        json_object_update(s->env, opts->env);
                /* env adds to what is set (setEnvVars); labels are the set given */
                if (opts->labels) {
                        json_t *labels = json_deep_copy(opts->labels);

                        if (!labels)
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "out of memory");
                        json_decref(s->labels);
                        s->labels = labels;
                }
                if (opts->sleep_after_ms > 0)
                        s->sleep_after_ms = opts->sleep_after_ms;
                if (opts->sleep_mode)
                        s->sleep_memory = strcmp(opts->sleep_mode, "memory") == 0;
                if (opts->has_keep_alive)
                        s->keep_alive = opts->keep_alive;
                if (opts->has_default_session)
                        s->default_session = opts->default_session;
        }
        if (sandbox_ensure_running(s, false, err) < 0)
                return -1;
        sandbox_touch(s);
        return sandbox_persist(s, err);
}

struct dir_removal {
        uv_work_t work;
        char path[CELLA_PATH_MAX + 64];
};

static void on_dir_removal(uv_work_t *w)
{
        struct dir_removal *r = w->data;
        int e = rm_rf(r->path);

        if (e < 0)
                log_warn("remove %s: %s", r->path, strerror(-e));
}

static void on_dir_removed(uv_work_t *w, int status)
{
        (void)status;
        free(w->data);
}

/* A destroyed sandbox's directory goes on the thread pool: the unlink of its disk image (a
 * sparse file of its disk limit) took 100-150 ms on a loaded host, all of it on the loop
 * (decision 0060). It is first renamed aside, out of its slot's name (a new sandbox may take
 * the slot at once); one a stop leaves there is swept as a leftover at the next start. */
static int remove_dir_aside(struct sandbox_table *t, const char *dir)
{
        static unsigned long seq;
        struct dir_removal *r = calloc(1, sizeof(*r));
        const char *base = strrchr(dir, '/');

        if (!r || !base ||
            snprintf(r->path, sizeof(r->path), "%.*s/.destroyed-%s-%lu", (int)(base - dir), dir,
                     base + 1, ++seq) >= (int)sizeof(r->path) ||
            rename(dir, r->path) < 0) {
                free(r);
                return rm_rf(dir);
        }
        r->work.data = r;
        if (uv_queue_work(t->loop, &r->work, on_dir_removal, on_dir_removed) < 0) {
                int e = rm_rf(r->path);
                free(r);
                return e;
        }
        return 0;
}

int sandbox_table_destroy(struct sandbox_table *t, const char *name, bool *ret_existed,
                          struct cella_error *err)
{
        struct sandbox *s = find_settled(t, name);
        char dir[CELLA_PATH_MAX];
        int r;

        if (ret_existed)
                *ret_existed = s != NULL;
        if (!s)
                return 0;
        enum sandbox_state prev = s->state;
        r = sandbox_teardown(s, SANDBOX_STOPPED, err);
        if (r < 0) {
                if (prev == SANDBOX_SLEEPING)
                        s->state = prev; /* still asleep: nothing of it ran */
                return r;
        }
        if (sandbox_dir(s, dir, sizeof(dir)) == 0) {
                r = remove_dir_aside(t, dir);
                if (r < 0)
                        log_warn("sandbox '%s': remove %s: %s", s->name, dir, strerror(-r));
        }
        store_port_delete(t->store, s->name, -1, NULL);
        if (s->network && json_array_size(s->network_allow) > 0) {
                pthread_mutex_lock(&t->rt_lock);
                net_sandbox_forget(runtime_net(t->rt), s->slot);
                pthread_mutex_unlock(&t->rt_lock);
        }
        pool_commit_cancel(s);
        store_sandbox_delete(t->store, s->name, NULL);
        table_remove(t, s);
        release_slot(t, s->slot);
        s->state = SANDBOX_DESTROYED;
        log_info("sandbox '%s' destroyed (slot %u)", s->name, s->slot);
        sandbox_unref(s);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
        return 0;
}

/* ---- the local table as a directory (sandbox-directory.h) ---- */

static int local_get_now(struct sandbox_directory *d, const char *name, struct sandbox **ret,
                         struct cella_error *err)
{
        return sandbox_table_get((struct sandbox_table *)d, name, false, NULL, ret, NULL, err);
}

/* A new name is made as get makes it (its start off the loop); an existing one is updated
 * here (a start in progress is joined first). */
static void local_put(struct sandbox_directory *d, const char *name,
                      const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata)
{
        struct sandbox_table *t = (struct sandbox_table *)d;
        struct cella_error e = {0};
        struct sandbox *s = NULL;
        bool created = false;

        if (!table_find(t, name)) {
                local_get(d, name, true, opts, cb, userdata);
                return;
        }
        if (sandbox_table_put(t, name, opts, &s, &created, &e) < 0)
                cb(NULL, false, &e, userdata);
        else
                cb(s, created, NULL, userdata);
}

static int local_destroy(struct sandbox_directory *d, const char *name, bool *ret_existed,
                         struct cella_error *err)
{
        return sandbox_table_destroy((struct sandbox_table *)d, name, ret_existed, err);
}

static json_t *local_list(struct sandbox_directory *d)
{
        return sandbox_table_list((struct sandbox_table *)d);
}

static unsigned local_count(struct sandbox_directory *d)
{
        return sandbox_table_count((struct sandbox_table *)d);
}

static bool local_image_in_use(struct sandbox_directory *d, const char *image)
{
        return sandbox_table_image_in_use((struct sandbox_table *)d, image);
}

static struct store *local_store(struct sandbox_directory *d)
{
        return sandbox_table_store((struct sandbox_table *)d);
}

/* struct sandbox_table starts with its struct sandbox_directory: the casts above. */
const struct sandbox_directory_ops sandbox_local_ops = {
        .get = local_get,
        .get_now = local_get_now,
        .put = local_put,
        .destroy = local_destroy,
        .list = local_list,
        .count = local_count,
        .image_in_use = local_image_in_use,
        .store = local_store,
};

struct sandbox_directory *sandbox_table_directory(struct sandbox_table *t)
{
        return &t->dir;
}
