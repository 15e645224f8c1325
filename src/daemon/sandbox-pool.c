/* The warm pool (sandbox-internal.h, decision 0015): sandboxes of the default image and
 * instance type built ahead, one per timer callback, and claimed by a create. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "common/wire.h"
#include "daemon/instance-type.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"

/* ---- the warm pool ----
 *
 * A pool sandbox is a struct sandbox with pooled set, named "pool-<slot>" (a reserved
 * name), running, its agent connected, outside the table and without a registry record.
 * A claim gives it its name and options, its hostname and /etc files, and queues its
 * record; the record's write is the commit point. Records queued in one loop turn are
 * written in one transaction at its end, and before any HTTP answer is queued (decision
 * 0059), so no answer leaves before the commit of the claim it may tell of. A daemon that
 * dies before it leaves a pool sandbox that the next daemon removes (see sweep_leftovers);
 * after it, a sandbox like any other, reattached by its record. */

/* How many pool sandboxes to keep: the pool size, but never more than the user sandboxes
 * still allowed, so that user and pool sandboxes together stay within --max-sandboxes. */
static unsigned pool_target(const struct sandbox_table *t)
{
        unsigned room = t->max_sandboxes > t->count ? t->max_sandboxes - t->count : 0;
        return t->pool_size < room ? t->pool_size : room;
}

void pool_schedule(struct sandbox_table *t, uint64_t delay_ms)
{
        if (t->pool_timer)
                uv_timer_start(t->pool_timer, on_pool_timer, delay_ms, 0);
}

static void pool_unlink(struct sandbox *s)
{
        struct sandbox_table *t = s->table;
        for (struct sandbox **pp = &t->pool; *pp; pp = &(*pp)->pool_next)
                if (*pp == s) {
                        *pp = s->pool_next;
                        s->pool_next = NULL;
                        t->pool_len--;
                        if (s->pool_ready)
                                t->pool_ready--;
                        s->pool_ready = false;
                        return;
                }
}

/* Kill a pool sandbox (or one whose claim failed) and remove everything of it: cgroups,
 * files, slot. s is not in the table. */
void pool_discard(struct sandbox *s)
{
        struct sandbox_table *t = s->table;
        struct cella_error e = {0};
        char dir[CELLA_PATH_MAX];

        pool_unlink(s);
        if (sandbox_teardown(s, SANDBOX_STOPPED, &e) < 0)
                log_warn("pool: %s", e.msg);
        if (sandbox_dir(s, dir, sizeof(dir)) == 0 && rm_rf(dir) < 0)
                log_warn("pool: remove %s failed", dir);
        release_slot(t, s->slot);
        s->state = SANDBOX_DESTROYED;
        sandbox_unref(s);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
}

/* A SESSION request whose answer nobody waits for (the warm pool's default session). The
 * agent handles the frames of one connection in order, so a later request sees its
 * effect. Failures only cost the head start: the first exec makes the session itself. */
static const struct agent_stream_ops oneway_ops = {NULL, NULL, NULL};

static void session_oneway(struct sandbox *s, json_t *payload)
{
        struct cella_error e = {0};

        if (payload && s->agent &&
            agent_conn_open(s->agent, FRAME_SESSION, payload, &oneway_ops, NULL, NULL, &e) < 0)
                log_debug("sandbox '%s': session request: %s", s->name, e.msg);
        json_decref(payload);
}

/* A pool sandbox is ready once its default session's shell has run a first command: the
 * shell has started and read its first script, and the agent and the shell have been
 * through a command's whole path once (their first command pays for the pages and
 * allocations that path touches). A claim takes a ready one first (pool_take). */
static void pool_mark_ready(struct sandbox *s)
{
        struct sandbox_table *t = s->table;

        /* pooled and running: in the pool (a claim clears pooled, a discard the state) */
        if (!s->pooled || s->pool_ready || s->state != SANDBOX_RUNNING)
                return; /* claimed (or discarded) meanwhile */
        s->pool_ready = true;
        t->pool_ready++;
        log_debug("pool: %s ready (%u of %u)", s->name, t->pool_ready, t->pool_len);
}

static void on_warmup_close(struct agent_stream *st, int err, void *userdata)
{
        struct sandbox *s = userdata;

        (void)st;
        if (err)
                log_debug("sandbox '%s': the default session's first command: %s", s->name,
                          strerror(-err));
        /* ready either way: a failure only costs the claim the head start */
        pool_mark_ready(s);
        sandbox_unref(s);
}

static const struct agent_stream_ops warmup_ops = {NULL, NULL, on_warmup_close};

/* Start pool sandbox s's default session and run `true` in it (the claim's first command
 * then finds a shell that has run one already); s becomes ready when it is over. */
static void pool_warm_up(struct sandbox *s)
{
        struct cella_error e = {0};

        session_oneway(s, json_pack("{s:s, s:s, s:O}", "op", "create", "id", "default", "baseEnv",
                                    s->env));
        _cleanup_json_ json_t *payload = wire_exec_encode(&(struct wire_exec){
                .command = "true",
                .base_env = s->env,
                .session = "default",
        });
        sandbox_ref(s);
        if (!payload || !s->agent ||
            agent_conn_open(s->agent, FRAME_EXEC, payload, &warmup_ops, s, NULL, &e) < 0) {
                log_debug("sandbox '%s': the default session's first command: %s", s->name,
                          payload ? e.msg : "out of memory");
                pool_mark_ready(s);
                sandbox_unref(s);
        }
}

/* Build one pool sandbox and add it to the pool. */
static int pool_build(struct sandbox_table *t, struct cella_error *err)
{
        char name[CELLA_NAME_MAX + 1];
        struct sandbox *s;
        unsigned slot;

        if (alloc_slot(t, &slot) < 0)
                return cella_error_set(err, CELLA_E_SANDBOX_LIMIT_REACHED, "no free uid range");
        snprintf(name, sizeof(name), "pool-%u", slot);
        s = sandbox_alloc(t, name, slot);
        if (!s) {
                release_slot(t, slot);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        s->pooled = true;
        s->image = strdup(t->default_image);
        s->instance_type = strdup(INSTANCE_TYPE_DEFAULT);
        s->env = json_object();
        s->labels = json_object();
        s->sleep_after_ms = CELLA_DEFAULT_SLEEP_AFTER_MS;
        s->network = network_default(t);
        s->network_allow = json_array();
        s->created_ms = s->last_active_ms = time_now_ms();
        if (!s->image || !s->instance_type || !s->env || !s->labels || !s->network_allow) {
                pool_discard(s);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        /* The image's env, read now: a claim puts it under the env it is given. */
        image_env_under(t, s->image, s->env);
        /* Off the loop: requests are served while it builds; pool_built() takes it on. */
        if (sandbox_start_async(s, err) < 0) {
                pool_discard(s);
                return -1;
        }
        /* Its claim's identity file is then a rename, not a new inode (its directory is
         * made by now); without it the claim makes the file itself. */
        char dir[CELLA_PATH_MAX];
        if (sandbox_dir(s, dir, sizeof(dir)) == 0 && identity_prepare(dir) < 0)
                log_debug("pool: %s: identity file not prepared", dir);
        t->pool_building++;
        return 0;
}

/* A build failed (e.g. the default image is not built yet): try again, less and less
 * often. */
static void pool_retry(struct sandbox_table *t, const char *why)
{
        t->pool_retry_ms = t->pool_retry_ms ? t->pool_retry_ms * 2 : CELLA_POOL_RETRY_MS;
        if (t->pool_retry_ms > CELLA_POOL_RETRY_MAX_MS)
                t->pool_retry_ms = CELLA_POOL_RETRY_MAX_MS;
        log_warn("pool: build: %s (next try in %u s)", why, (unsigned)(t->pool_retry_ms / 1000));
        pool_schedule(t, t->pool_retry_ms);
}

void pool_built(struct sandbox *s, const struct cella_error *err)
{
        struct sandbox_table *t = s->table;

        t->pool_building--;
        if (err) {
                pool_discard(s);
                pool_retry(t, err->msg);
                return;
        }
        /* Appended: a claim takes the oldest ready one, whose shell has long started (the
         * newest, taken at once, made its claim's first command wait for that start). */
        struct sandbox **tail = &t->pool;
        while (*tail)
                tail = &(*tail)->pool_next;
        s->pool_next = NULL;
        s->pool_ready = false;
        *tail = s;
        t->pool_len++;
        /* Its default session's shell starts now and runs a first command, so a claim's
         * first command is a builtin in a running shell, not a shell start; it is ready
         * when that command is over. */
        pool_warm_up(s);
        t->pool_builds++;
        t->pool_retry_ms = 0;
        if (t->pool_len < pool_target(t))
                pool_schedule(t, 0);
        else if (t->pool_len > pool_target(t))
                pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS); /* sandboxes made meanwhile */
        else
                log_debug("pool: %u built", t->pool_len);
}

/* Is a request that claimed a sandbox still being served? (a sandbox claimed in the last
 * CELLA_POOL_QUIET_MS with an open agent stream: the exec that came with the name) */
static bool pool_claim_in_flight(const struct sandbox_table *t)
{
        int64_t since = time_now_ms() - CELLA_POOL_QUIET_MS;

        if (t->pool_last_claim_ms < since)
                return false;
        for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                for (const struct sandbox *s = t->buckets[i]; s; s = s->next)
                        if (s->claimed && s->created_ms >= since &&
                            agent_conn_stream_count(s->agent) > 0)
                                return true;
        return false;
}

/* Refill (or trim) the pool by one sandbox at a time. A build's container start runs off
 * the loop (sandbox_start_async); what is left on the loop (the spec, the exit watch, the
 * agent link, about a tenth of it) and the build's CPU still wait until the requests that
 * claimed are answered: claims push it back by
 * CELLA_POOL_REFILL_DELAY_MS, and so does a claimed sandbox's first command still
 * running, so that a burst of new names is served before the pool builds again. */
void on_pool_timer(uv_timer_t *timer)
{
        struct sandbox_table *t = timer->data;
        struct cella_error e = {0};
        unsigned target = pool_target(t);

        if (t->pool_building)
                return; /* one build at a time: pool_built() schedules the next */
        if (t->pool_len < target && pool_claim_in_flight(t)) {
                pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
                return;
        }
        if (t->pool_len > target) {
                pool_discard(t->pool); /* reschedules */
                return;
        }
        if (t->pool_len == target)
                return;
        /* Pool sandboxes have disks too: none is built past the overcommit limit. */
        if (disk_admit(t, new_disk_bytes(t, INSTANCE_TYPE_DEFAULT), &e) < 0) {
                log_debug("pool: not built: %s", e.msg);
                pool_schedule(t, CELLA_POOL_RETRY_MAX_MS);
                return;
        }
        if (pool_build(t, &e) < 0)
                pool_retry(t, e.msg);
}

/* Take a live pool sandbox with its agent connected out of the pool, or NULL when there is
 * none; the dead ones found on the way are discarded. The oldest ready one (pool_mark_ready)
 * first, else the oldest. */
struct sandbox *pool_take(struct sandbox_table *t)
{
        while (t->pool) {
                struct sandbox *s = t->pool;

                if (t->pool_ready)
                        for (struct sandbox *p = t->pool; p; p = p->pool_next)
                                if (p->pool_ready) {
                                        s = p;
                                        break;
                                }
                if (s->state == SANDBOX_RUNNING && s->agent && sandbox_alive(s)) {
                        pool_unlink(s);
                        return s;
                }
                pool_discard(s);
        }
        return NULL;
}

/* ---- the commit queue ---- */

static void on_commit_check(uv_check_t *h)
{
        sandbox_table_commit(h->data);
}

/* Queue the record of claimed s (in the table) for the next commit. */
static int commit_queue_add(struct sandbox *s, struct cella_error *err)
{
        struct sandbox_table *t = s->table;

        if (!t->commit_check) {
                t->commit_check = malloc(sizeof(*t->commit_check));
                if (!t->commit_check || uv_check_init(t->loop, t->commit_check) < 0) {
                        free(t->commit_check);
                        t->commit_check = NULL;
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "commit check");
                }
                t->commit_check->data = t;
                uv_unref((uv_handle_t *)t->commit_check);
        }
        if (!t->commit_queue) {
                t->commit_tail = &t->commit_queue;
                uv_check_start(t->commit_check, on_commit_check);
        }
        sandbox_ref(s);
        s->commit_queued = true;
        s->commit_next = NULL;
        *t->commit_tail = s;
        t->commit_tail = &s->commit_next;
        return 0;
}

/* Take s out of the commit queue (it is destroyed before its record was written: there
 * is nothing to write). */
void pool_commit_cancel(struct sandbox *s)
{
        struct sandbox_table *t = s->table;

        if (!s->commit_queued)
                return;
        for (struct sandbox **pp = &t->commit_queue; *pp; pp = &(*pp)->commit_next)
                if (*pp == s) {
                        *pp = s->commit_next;
                        if (t->commit_tail == &s->commit_next)
                                t->commit_tail = pp;
                        break;
                }
        s->commit_queued = false;
        s->commit_next = NULL;
        if (!t->commit_queue && t->commit_check)
                uv_check_stop(t->commit_check);
        sandbox_unref(s);
}

/* A claim whose record could not be written must not run: it is removed, and the
 * requests that use it fail with the agent's connection. */
static void commit_failed(struct sandbox *s, const struct cella_error *e)
{
        log_error("sandbox '%s': claim undone, its record was not written: %s", s->name, e->msg);
        if (s->state == SANDBOX_DESTROYED)
                return;
        table_remove(s->table, s);
        pool_discard(s);
}

void sandbox_table_commit(struct sandbox_table *t)
{
        struct sandbox *batch = t->commit_queue;
        struct cella_error e = {0};
        unsigned n = 0;
        uint64_t t0;
        bool ok;

        if (!batch)
                return;
        t0 = time_mono_us();
        t->commit_queue = NULL;
        t->commit_tail = &t->commit_queue;
        if (t->commit_check)
                uv_check_stop(t->commit_check);
        for (struct sandbox *s = batch; s; s = s->commit_next)
                s->commit_queued = false;
        /* One transaction for the batch; if any write of it fails, none is kept and each
         * record is tried on its own, so that only the claims that cannot be written are
         * undone. */
        ok = store_begin(t->store, &e) == 0;
        for (struct sandbox *s = batch; ok && s; s = s->commit_next, n++)
                ok = sandbox_persist(s, &e) == 0;
        if (ok)
                ok = store_commit(t->store, &e) == 0;
        if (!ok) {
                store_rollback(t->store);
                log_warn("registry: a batch of claims: %s; their records one by one", e.msg);
        }
        while (batch) {
                struct sandbox *s = batch;

                batch = s->commit_next;
                s->commit_next = NULL;
                memset(&e, 0, sizeof(e));
                if (!ok && sandbox_persist(s, &e) < 0)
                        commit_failed(s, &e);
                sandbox_unref(s); /* the queue's */
        }
        log_debug("registry: %u claims committed in %.2f ms", n,
                  (double)(time_mono_us() - t0) / 1000.0);
}

/* Give pool sandbox s (taken out of the pool) the name and options of a new sandbox;
 * opts are validated. On failure s is discarded. */
int pool_claim(struct sandbox *s, const char *name, const struct sandbox_options *opts,
               struct cella_error *err)
{
        struct sandbox_table *t = s->table;
        uint64_t t0 = time_mono_us();
        char dir[CELLA_PATH_MAX];
        _cleanup_json_ json_t *env = opts && opts->env ? json_deep_copy(opts->env) : json_object();
        _cleanup_json_ json_t *labels =
                opts && opts->labels ? json_deep_copy(opts->labels) : json_object();

        if (!env || !labels) {
                pool_discard(s);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        {
                const char *k;
                json_t *v;

                json_object_foreach(s->env, k, v)
                {
                        if (!json_object_get(env, k) &&
                            json_object_set(env, k, v) < 0) { /* what it is given wins */
                                pool_discard(s);
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "out of memory");
                        }
                }
        }
        /* What its default session's shell lacks: the variables whose value differs from
         * the image's env it started with (pool_warm_up), and its name. */
        _cleanup_json_ json_t *vars = json_object();
        {
                const char *k;
                json_t *v;

                json_object_foreach(env, k, v)
                {
                        if (!vars || (!json_equal(v, json_object_get(s->env, k)) &&
                                      json_object_set(vars, k, v) < 0)) {
                                pool_discard(s);
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "out of memory");
                        }
                }
        }
        /* The default session started before the name and env were known. What it lacks
         * is sent first, before the name step: its agent and its shell wake up and take
         * it while this thread writes the name (on an idle machine a wakeup of each costs
         * more than the SETENV itself), and the command that follows finds them awake. No
         * command runs in between: the claim's first one is sent after the name step, so
         * the name is in place before it runs. A claim that fails from here on discards
         * the sandbox with what it was sent. */
        s->default_session = !(opts && opts->has_default_session && !opts->default_session);
        if (!s->default_session) {
                session_oneway(s, json_pack("{s:s, s:s}", "op", "delete", "id", "default"));
        } else {
                json_object_set_new(vars, "HOSTNAME", json_string(name));
                session_oneway(s, json_pack("{s:s, s:s, s:O}", "op", "setenv", "id", "default",
                                            "env", vars));
        }
        uint64_t t_env = time_mono_us();
        json_decref(s->env);
        json_decref(s->labels);
        s->env = TAKE_PTR(env);
        s->labels = TAKE_PTR(labels);
        snprintf(s->name, sizeof(s->name), "%s", name);
        /* The sandbox, as its user sees it, is made now; its queued record carries this
         * activity (no touch of a record not written yet). */
        s->created_ms = s->last_active_ms = s->persisted_active_ms = time_now_ms();
        s->sleep_after_ms = opts && opts->sleep_after_ms > 0 ? opts->sleep_after_ms
                                                             : CELLA_DEFAULT_SLEEP_AFTER_MS;
        s->sleep_memory = opts && opts->sleep_mode && strcmp(opts->sleep_mode, "memory") == 0;
        s->keep_alive = opts && opts->has_keep_alive && opts->keep_alive;
        sandbox_pidfd_hold(s);
        int rr = sandbox_dir(s, dir, sizeof(dir)) < 0
                         ? -1
                         : runtime_container_rename(t->rt, &s->ct, dir, name, err);
        sandbox_pidfd_release(s);
        if (rr < 0) {
                pool_discard(s);
                return -1;
        }
        uint64_t t1 = time_mono_us();
        s->pooled = false;
        s->claimed = true;
        table_insert(t, s);
        /* The commit point, at the end of this loop turn or before any answer is queued:
         * from there on a restarted daemon reattaches it by its record. */
        if (commit_queue_add(s, err) < 0) {
                table_remove(t, s);
                pool_discard(s);
                return -1;
        }
        t->pool_claims++;
        t->pool_last_claim_ms = s->created_ms;
        log_info("sandbox '%s' claimed from the pool (slot %u, pid %d) in %.2f ms (env %.2f ms, "
                 "name %.2f ms, the rest %.2f ms; its record at the end of the loop turn)",
                 s->name, s->slot, (int)s->ct.pid, (double)(time_mono_us() - t0) / 1000.0,
                 (double)(t_env - t0) / 1000.0, (double)(t1 - t_env) / 1000.0,
                 (double)(time_mono_us() - t1) / 1000.0);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
        return 0;
}

json_t *sandbox_table_pool_info(const struct sandbox_table *t)
{
        return json_pack("{s:I, s:I, s:I, s:I}", "size", (json_int_t)t->pool_size, "ready",
                         (json_int_t)t->pool_ready, "claims", (json_int_t)t->pool_claims, "builds",
                         (json_int_t)t->pool_builds);
}
