/* The lifecycle of a sandbox (sandbox-internal.h): create (or claim from the pool),
 * start, sleep, wake, update, destroy, and the one teardown every stop goes through. A
 * sandbox's cgroups and data directory are named by its uid slot, "s<slot>", never by its
 * name (decision 0015). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/instance-type.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"
#include "daemon/sandbox-options.h"
#include "daemon/store.h"

static void stop_exit_watch(struct sandbox *s)
{
        if (!s->exit_watch)
                return;
        uv_poll_stop(s->exit_watch);
        uv_close((uv_handle_t *)s->exit_watch, on_handle_closed);
        s->exit_watch = NULL;
}

static void close_agent(struct sandbox *s)
{
        struct agent_conn *c = s->agent;

        s->agent = NULL;
        if (c)
                agent_conn_close(c);
}

void sandbox_unlink(struct sandbox *s)
{
        close_agent(s);
        stop_exit_watch(s);
        if (s->ct.pidfd >= 0)
                close(s->ct.pidfd);
        s->ct.pidfd = -EBADF;
}

int sandbox_teardown(struct sandbox *s, enum sandbox_state next, struct cella_error *err)
{
        close_agent(s);
        stop_exit_watch(s);
        /* With a pidfd (-EBADF once reaped, asleep or never started) PID 1 is killed and
         * reaped; the cgroups go from the id alone. */
        int r = runtime_container_destroy(s->table->rt, s->id, &s->ct, err);
        s->state = next;
        return r;
}

static void on_agent_lost(struct agent_conn *c, int err, void *userdata)
{
        struct sandbox *s = userdata;
        if (s->agent == c)
                s->agent = NULL;
        log_info("sandbox '%s': agent connection closed (%s)", s->name,
                 err ? strerror(-err) : "ok");
}

/* PID 1 of the sandbox exited (the agent crashed or was killed): reap it, mark the sandbox
 * stopped. Its files stay; the next operation starts it again. */
static void on_container_exit(uv_poll_t *w, int status, int events)
{
        struct sandbox *s = w->data;
        int wstatus = 0;
        int r = runtime_container_reap(&s->ct, &wstatus);

        if (r == 0)
                return; /* spurious */
        if (r < 0) {
                /* Not our child (reattached after a daemon restart): the readable pidfd
                 * says it exited; its parent reaps it. */
                if (s->ct.pidfd >= 0)
                        close(s->ct.pidfd);
                s->ct.pidfd = -EBADF;
        }
        log_warn("sandbox '%s': PID 1 exited (status 0x%x)", s->name, (unsigned)wstatus);
        if (s->pooled) {
                pool_discard(s);
                return;
        }
        /* Sweeps what may be left in its cgroups. */
        sandbox_teardown(s, SANDBOX_STOPPED, NULL);
}

/* Watch the pidfd of PID 1: readable once it has exited. */
int watch_exit(struct sandbox *s)
{
        s->exit_watch = malloc(sizeof(*s->exit_watch));
        if (!s->exit_watch || uv_poll_init(s->table->loop, s->exit_watch, s->ct.pidfd) < 0) {
                free(s->exit_watch);
                s->exit_watch = NULL;
                return -ENOMEM;
        }
        s->exit_watch->data = s;
        uv_poll_start(s->exit_watch, UV_READABLE, on_container_exit);
        return 0;
}

int connect_agent(struct sandbox *s, struct cella_error *err)
{
        char dir[CELLA_PATH_MAX], sock[CELLA_PATH_MAX + 16];

        if (sandbox_dir(s, dir, sizeof(dir)) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
        return agent_conn_new(s->table->loop, sock, on_agent_lost, s, &s->agent, err);
}

/* The container spec of s (paths into dir and rootfs, CELLA_PATH_MAX each; the allowlist
 * into allow) after checking that its image is built. */
static int start_spec(struct sandbox *s, char *dir, char *rootfs, struct net_allow *allow,
                      struct container_spec *ret, struct cella_error *err)
{
        struct sandbox_table *t = s->table;
        const struct instance_type *it = instance_type_find(s->instance_type);
        char marker[CELLA_PATH_MAX + 16];
        struct stat st;
        int r;

        if (!it)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "unknown instance type '%s' (known: %s)", s->instance_type,
                                       instance_type_names());
        if (sandbox_dir(s, dir, CELLA_PATH_MAX) < 0 ||
            snprintf(rootfs, CELLA_PATH_MAX, "%s/%s/rootfs", t->images_dir, s->image) >=
                    CELLA_PATH_MAX)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        snprintf(marker, sizeof(marker), "%s/%s/.complete", t->images_dir, s->image);
        if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode) || access(marker, F_OK) < 0)
                return cella_error_set(err, CELLA_E_IMAGE_NOT_FOUND,
                                       "image '%s' is not built (run: cella image build %s)",
                                       s->image, s->image);
        r = fs_mkdir_p(dir, 0700);
        if (r < 0)
                return cella_error_errno(err, r, "create sandbox directory %s", dir);
        *ret = (struct container_spec){
                .id = s->id,
                .hostname = s->name,
                .rootfs = rootfs,
                .dir = dir,
                .uid_base = t->uid_base + s->slot * CELLA_UID_RANGE,
                .uid_count = CELLA_UID_RANGE,
                .limits =
                        {
                                .memory_bytes = it->memory_bytes,
                                .cpu_millis = it->cpu_millis,
                                .pids_max = CELLA_DEFAULT_PIDS_MAX,
                        },
                .disk_bytes = t->disk_limit_override ? t->disk_limit_override : it->disk_bytes,
                .network = s->network,
                .slot = s->slot,
                .net_allow = allow,
                .net_allow_n = network_allow_list(s, allow),
        };
        return 0;
}

/* Build and start the container of s (its upper layer is reused if present). */
int sandbox_start(struct sandbox *s, struct cella_error *err)
{
        struct sandbox_table *t = s->table;
        char dir[CELLA_PATH_MAX], rootfs[CELLA_PATH_MAX];
        struct net_allow allow[CELLA_NETWORK_ALLOW_MAX];
        struct container_spec spec;

        enum sandbox_state prev = s->state;

        if (start_spec(s, dir, rootfs, allow, &spec, err) < 0)
                return -1;
        s->state = SANDBOX_STARTING;
        /* Leftovers of an earlier run (a daemon that died, a crashed agent) go first. */
        uint64_t t0 = time_mono_us();
        runtime_container_destroy(t->rt, s->id, NULL, NULL);
        uint64_t t1 = time_mono_us();
        if (runtime_container_start(t->rt, &spec, &s->ct, err) < 0) {
                s->state = prev;
                return -1;
        }
        s->disk_promise = -1; /* its disk image may be new */
        uint64_t t2 = time_mono_us();

        if (watch_exit(s) < 0) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "watch sandbox process");
                goto undo_container;
        }
        s->pid_start = proc_start_time(s->ct.pid);
        if (connect_agent(s, err) < 0)
                goto undo_container;
        s->state = SANDBOX_RUNNING;
        log_info("sandbox '%s' started (slot %u, pid %d, image %s, %s, network %s) in %.2f ms "
                 "(sweep %.2f ms, container %.2f ms)",
                 s->name, s->slot, (int)s->ct.pid, s->image, s->instance_type,
                 s->network ? "outbound" : "none", (double)(time_mono_us() - t0) / 1000.0,
                 (double)(t1 - t0) / 1000.0, (double)(t2 - t1) / 1000.0);
        /* The record (with the pid, so that a restarted daemon finds it) is written here
         * once per start; a sandbox the registry does not know must not run (a pool
         * sandbox has no record: a restarted daemon removes it). */
        if (!s->pooled && sandbox_persist(s, err) < 0)
                goto undo_container;
        return 0;

undo_container:
        sandbox_teardown(s, prev, NULL);
        return -1;
}

/* Make sure s runs and has an agent connection. */
static int sandbox_ensure_running(struct sandbox *s, struct cella_error *err)
{
        if (s->state == SANDBOX_RUNNING && runtime_container_is_alive(&s->ct)) {
                if (!s->agent)
                        return connect_agent(s, err);
                return 0;
        }
        if (s->state == SANDBOX_RUNNING) {
                /* Died and not yet noticed by the exit watch. */
                runtime_container_reap(&s->ct, NULL);
                sandbox_teardown(s, SANDBOX_STOPPED, NULL);
        }
        close_agent(s);
        return sandbox_start(s, err);
}

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

static int sandbox_create(struct sandbox_table *t, const char *name,
                          const struct sandbox_options *opts, struct sandbox **ret,
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
        json_t *allow =
                opts && opts->network_allow ? json_deep_copy(opts->network_allow) : json_array();
        if (!allow)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        /* Pool sandboxes have the default network and no allowlist: anything else is a
         * build (network work happens only there, never at a claim). */
        if (strcmp(image, t->default_image) == 0 && strcmp(itype, INSTANCE_TYPE_DEFAULT) == 0 &&
            network == network_default(t) && json_array_size(allow) == 0) {
                struct cella_error ce = {0};
                s = pool_take(t);
                if (s && pool_claim(s, name, opts, &ce) == 0) {
                        json_decref(allow);
                        *ret = s;
                        return 0;
                }
                if (s)
                        log_warn("sandbox '%s': claim failed (%s); building it", name, ce.msg);
        }
        if (disk_admit(t, new_disk_bytes(t, itype), err) < 0) {
                json_decref(allow);
                return -1;
        }
        if (alloc_slot(t, &slot) < 0) {
                json_decref(allow);
                return cella_error_set(err, CELLA_E_SANDBOX_LIMIT_REACHED,
                                       "no free uid range for a new sandbox");
        }

        s = sandbox_alloc(t, name, slot);
        if (!s) {
                json_decref(allow);
                release_slot(t, slot);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        s->network = network;
        s->network_allow = allow;
        s->image = strdup(image);
        s->instance_type = strdup(itype);
        s->env = opts && opts->env ? json_deep_copy(opts->env) : json_object();
        if (s->env)
                image_env_under(t, image, s->env);
        s->labels = opts && opts->labels ? json_deep_copy(opts->labels) : json_object();
        s->created_ms = s->last_active_ms = time_now_ms();
        s->sleep_after_ms = opts && opts->sleep_after_ms > 0 ? opts->sleep_after_ms
                                                             : CELLA_DEFAULT_SLEEP_AFTER_MS;
        s->keep_alive = opts && opts->has_keep_alive && opts->keep_alive;
        s->default_session = !(opts && opts->has_default_session && !opts->default_session);
        if (!s->image || !s->instance_type || !s->env || !s->labels) {
                release_slot(t, slot);
                sandbox_free(s);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        table_insert(t, s);
        if (sandbox_start(s, err) < 0) {
                bool existed;
                /* Undo everything, files included: the sandbox never existed. */
                sandbox_table_destroy(t, name, &existed, NULL);
                return -1;
        }
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS); /* one user sandbox more: trim */
        *ret = s;
        return 0;
}

/* Put an idle sandbox to sleep: every process stops and its memory is freed; its files
 * (the upper layer, /workspace included) stay on disk. The next operation wakes it. */
static void sandbox_sleep(struct sandbox *s)
{
        struct cella_error e = {0};

        if (sandbox_teardown(s, SANDBOX_SLEEPING, &e) < 0)
                log_warn("sandbox '%s': sleep: %s", s->name, e.msg);
        memset(&e, 0, sizeof(e));
        if (sandbox_persist(s, &e) < 0)
                log_warn("sandbox '%s': %s", s->name, e.msg);
        log_info("sandbox '%s' sleeping after %lld s idle", s->name,
                 (long long)(s->sleep_after_ms / 1000));
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
                                        sandbox_sleep(s);
                        }
                        s = next;
                }
        }
}

int sandbox_table_get(struct sandbox_table *t, const char *name, bool create,
                      const struct sandbox_options *opts, struct sandbox **ret, bool *ret_created,
                      struct cella_error *err)
{
        struct sandbox *s = table_find(t, name);

        if (s) {
                /* Looking a sandbox up (create = false) neither wakes nor touches it. */
                if (create) {
                        if (sandbox_ensure_running(s, err) < 0)
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
        if (sandbox_create(t, name, opts, ret, err) < 0)
                return -1;
        if (ret_created)
                *ret_created = true;
        return 0;
}

static int sandbox_update(struct sandbox_table *t, struct sandbox *s,
                          const struct sandbox_options *opts, struct cella_error *err);

int sandbox_table_put(struct sandbox_table *t, const char *name, const struct sandbox_options *opts,
                      struct sandbox **ret, bool *ret_created, struct cella_error *err)
{
        struct sandbox *s = table_find(t, name);

        if (!s)
                return sandbox_table_get(t, name, true, opts, ret, ret_created, err);
        /* Kept to undo the update when it fails, e.g. when the registry refuses it (a full
         * data directory): what answered an error did not happen. (A new networkAllow is
         * applied as it is validated, and stays.) */
        json_t *old_env = json_deep_copy(s->env), *old_labels = json_incref(s->labels);
        int64_t old_sleep = s->sleep_after_ms;
        bool old_keep = s->keep_alive, old_default = s->default_session;

        if (!old_env) {
                json_decref(old_labels);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        int r = sandbox_update(t, s, opts, err);
        if (r < 0) {
                json_decref(s->env);
                s->env = TAKE_PTR(old_env);
                json_decref(s->labels);
                s->labels = TAKE_PTR(old_labels);
                s->sleep_after_ms = old_sleep;
                s->keep_alive = old_keep;
                s->default_session = old_default;
        }
        json_decref(old_env);
        json_decref(old_labels);
        if (r < 0)
                return -1;
        if (ret_created)
                *ret_created = false;
        *ret = s;
        return 0;
}

/* The update of an existing sandbox by PUT, then its record written. */
static int sandbox_update(struct sandbox_table *t, struct sandbox *s,
                          const struct sandbox_options *opts, struct cella_error *err)
{
        const char *name = s->name;

        if (opts) {
                if (sandbox_options_check_update(opts, name, s->image, s->instance_type, err) < 0)
                        return -1;
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
                        json_t *allow = json_deep_copy(opts->network_allow);
                        if (!allow)
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "out of memory");
                        if (!json_equal(allow, s->network_allow)) {
                                struct net_allow list[CELLA_NETWORK_ALLOW_MAX];
                                json_decref(s->network_allow);
                                s->network_allow = allow;
                                allow = NULL;
                                /* Its chain is rewritten now (a stopped one's too: it
                                 * exists iff the allowlist is not empty). */
                                if (s->network &&
                                    net_sandbox_allow(runtime_net(t->rt), s->slot, list,
                                                      network_allow_list(s, list), err) < 0)
                                        return -1;
                        }
                        json_decref(allow);
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
                if (opts->has_keep_alive)
                        s->keep_alive = opts->keep_alive;
                if (opts->has_default_session)
                        s->default_session = opts->default_session;
        }
        if (sandbox_ensure_running(s, err) < 0)
                return -1;
        sandbox_touch(s);
        return sandbox_persist(s, err);
}

int sandbox_table_destroy(struct sandbox_table *t, const char *name, bool *ret_existed,
                          struct cella_error *err)
{
        struct sandbox *s = table_find(t, name);
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
                r = rm_rf(dir);
                if (r < 0)
                        log_warn("sandbox '%s': remove %s: %s", s->name, dir, strerror(-r));
        }
        store_port_delete(t->store, s->name, -1, NULL);
        if (s->network && json_array_size(s->network_allow) > 0)
                net_sandbox_forget(runtime_net(t->rt), s->slot);
        store_sandbox_delete(t->store, s->name, NULL);
        table_remove(t, s);
        release_slot(t, s->slot);
        s->state = SANDBOX_DESTROYED;
        log_info("sandbox '%s' destroyed (slot %u)", s->name, s->slot);
        sandbox_unref(s);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
        return 0;
}
