/* The table of sandboxes by name (sandbox.h, parts in sandbox-internal.h): the hash,
 * lookup, list and info, the accessors handlers use, references, and the registry record of
 * a sandbox (store.c) with its identity file (rebuild.h). */
#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>

#include "common/fsutil.h"
#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"
#include "daemon/tenant.h"
#include "daemon/store.h"
#include "runtime/disk.h"

static unsigned hash_name(const char *s)
{
        unsigned h = 5381;
        while (*s)
                h = h * 33 + (unsigned char)*s++;
        return h % TABLE_BUCKETS;
}

struct sandbox *table_find(struct sandbox_table *t, const char *name)
{
        for (struct sandbox *s = t->buckets[hash_name(name)]; s; s = s->next)
                if (strcmp(s->name, name) == 0)
                        return s;
        return NULL;
}

void table_insert(struct sandbox_table *t, struct sandbox *s)
{
        unsigned h = hash_name(s->name);
        s->next = t->buckets[h];
        t->buckets[h] = s;
        t->count++;
}

void table_remove(struct sandbox_table *t, struct sandbox *s)
{
        for (struct sandbox **pp = &t->buckets[hash_name(s->name)]; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        s->next = NULL;
                        t->count--;
                        return;
                }
}

/* <data-dir>/sandboxes/s<slot>: named by slot, like the cgroups, so that nothing on disk
 * is renamed when a pool sandbox gets its name. */
int sandbox_dir(const struct sandbox *s, char *out, size_t outsz)
{
        int n = snprintf(out, outsz, "%s/sandboxes/%s", s->table->data_dir, s->id);
        return (n < 0 || (size_t)n >= outsz) ? -ENAMETOOLONG : 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
        if (remove(path) < 0 && errno != ENOENT)
                log_warn("remove %s: %s", path, strerror(errno));
        return 0;
}

int rm_rf(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
                return -errno;
        return 0;
}

void sandbox_free(struct sandbox *s)
{
        free(s->image);
        free(s->snapshot);
        free(s->instance_type);
        json_decref(s->env);
        json_decref(s->labels);
        json_decref(s->network_allow);
        json_decref(s->restored_from);
        free(s->identity);
        free(s);
}

void sandbox_ref(struct sandbox *s)
{
        s->refs++;
}

void sandbox_unref(struct sandbox *s)
{
        if (s && --s->refs == 0)
                sandbox_free(s);
}

void on_handle_closed(uv_handle_t *h)
{
        free(h);
}

static char *json_text(json_t *j)
{
        return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* Write the identity file of s (rebuild.h) from rec, its record, when it differs from
 * what was last written. */
int identity_sync(struct sandbox *s, const struct store_sandbox *rec, struct cella_error *err)
{
        char *text = identity_format(rec);
        char dir[CELLA_PATH_MAX];

        if (!text)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (s->identity && strcmp(s->identity, text) == 0) {
                free(text);
                return 0;
        }
        if (sandbox_dir(s, dir, sizeof(dir)) < 0) {
                free(text);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        }
        if (!s->identity && identity_is(dir, text)) {
                s->identity = text;
                return 0;
        }
        if (identity_write(dir, text, err) < 0) {
                free(text);
                return -1;
        }
        free(s->identity);
        s->identity = text;
        return 0;
}

int sandbox_persist(struct sandbox *s, struct cella_error *err)
{
        _cleanup_free_ char *env = json_text(s->env);
        _cleanup_free_ char *labels = json_text(s->labels);
        _cleanup_free_ char *allow = json_text(s->network_allow);
        struct store_sandbox rec = {
                .name = s->name,
                .slot = s->slot,
                .image = s->image,
                .instance_type = s->instance_type,
                .env_json = env,
                .labels_json = labels,
                .created_ms = s->created_ms,
                .last_active_ms = s->last_active_ms,
                .pid = s->state == SANDBOX_RUNNING ? s->ct.pid : 0,
                .pid_start = s->state == SANDBOX_RUNNING ? s->pid_start : 0,
                .sleep_after_ms = s->sleep_after_ms,
                .keep_alive = s->keep_alive,
                .default_session = s->default_session,
                .network = s->network ? "outbound" : "none",
                .network_allow_json = allow,
                .snapshot = s->snapshot,
                .sleep_mode = s->sleep_memory ? "memory" : "files",
        };
        if (identity_sync(s, &rec, err) < 0)
                return -1;
        s->persisted_active_ms = s->last_active_ms;
        return store_sandbox_save(s->table->store, &rec, err);
}

struct sandbox *sandbox_alloc(struct sandbox_table *t, const char *name, unsigned slot)
{
        struct sandbox *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        s->refs = 1; /* the table's */
        s->table = t;
        s->slot = slot;
        slot_id_format(slot, s->id, sizeof(s->id));
        snprintf(s->name, sizeof(s->name), "%s", name);
        s->ct.pid = -1;
        s->ct.pidfd = -EBADF;
        s->default_session = true;
        s->disk_promise = -1;
        s->ckpt_bytes = -1;
        return s;
}

bool sandbox_table_image_in_use(struct sandbox_table *t, const char *image)
{
        if (strcmp(image, t->default_image) == 0)
                return true; /* the warm pool's, and what a sandbox gets by default */
        for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                for (struct sandbox *s = t->buckets[i]; s; s = s->next)
                        if (s->image && strcmp(s->image, image) == 0)
                                return true;
        for (struct sandbox *s = t->pool; s; s = s->pool_next)
                if (s->image && strcmp(s->image, image) == 0)
                        return true;
        return false;
}

bool sandbox_table_snapshot_in_use(struct sandbox_table *t, const char *id)
{
        for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                for (struct sandbox *s = t->buckets[i]; s; s = s->next)
                        if (s->snapshot && strcmp(s->snapshot, id) == 0)
                                return true;
        return false;
}

/* The state as SandboxInfo names it (docs/api.md): a start in progress is not visible
 * there, the sandbox is still "stopped" until it runs. */
static const char *sandbox_state_name(enum sandbox_state st)
{
        switch (st) {
        case SANDBOX_RUNNING:
                return "running";
        case SANDBOX_SLEEPING:
                return "sleeping";
        case SANDBOX_DESTROYED:
                return "destroyed";
        case SANDBOX_NEW:
        case SANDBOX_STARTING:
        case SANDBOX_STOPPED:
                break;
        }
        return "stopped";
}

const char *sandbox_table_memory_sleep_fallback(const struct sandbox_table *t)
{
        return t->memsleep_reason;
}

/* sleepModeRequested (what PUT asked), sleepMode (what a sleep does here) and, when they
 * differ, sleepModeFallback: why this host sleeps it as "files" (docs/decisions/0050). */
static void sleep_mode_info(const struct sandbox *s, json_t *info)
{
        const char *reason = s->table->memsleep_reason;
        bool memory = s->sleep_memory && !reason[0];

        json_object_set_new(info, "sleepModeRequested",
                            json_string(s->sleep_memory ? "memory" : "files"));
        json_object_set_new(info, "sleepMode", json_string(memory ? "memory" : "files"));
        if (s->sleep_memory && !memory)
                json_object_set_new(info, "sleepModeFallback", json_string(reason));
        /* asleep with its memory: the checkpoint's size (a cache of the dir's; const
         * otherwise) */
        if (s->state == SANDBOX_SLEEPING) {
                uint64_t b = sandbox_checkpoint_bytes((struct sandbox *)s);
                if (b)
                        json_object_set_new(info, "memorySnapshotBytes",
                                            json_integer((json_int_t)b));
        }
        if (s->memsleep_note[0])
                json_object_set_new(info, "memorySleepError", json_string(s->memsleep_note));
}

bool sandbox_memory_asleep(struct sandbox *s)
{
        return s->checkpointing ||
               (s->state == SANDBOX_SLEEPING && sandbox_checkpoint_bytes(s) > 0);
}

json_t *sandbox_info(const struct sandbox *s)
{
        char created[32], active[32], dir[CELLA_PATH_MAX];
        uint64_t limit, used;
        json_t *info;
        time_format_iso(s->created_ms, created, sizeof(created));
        time_format_iso(s->last_active_ms, active, sizeof(active));
        /* a memory sleep's checkpoint in progress: asleep as far as anyone can tell */
        const char *state = s->checkpointing ? "sleeping" : sandbox_state_name(s->state);
        info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:O, s:I, s:b, s:b}", "id", s->name,
                         "state", state, "image", s->image, "instanceType", s->instance_type,
                         "createdAt", created, "lastActiveAt", active, "labels", s->labels, "env",
                         s->env, "sleepAfter", (json_int_t)(s->sleep_after_ms / 1000), "keepAlive",
                         s->keep_alive, "enableDefaultSession", s->default_session);
        if (info) {
                json_object_set_new(info, "network", json_string(s->network ? "outbound" : "none"));
                json_object_set(info, "networkAllow", s->network_allow);
                if (s->snapshot)
                        json_object_set_new(info, "snapshot", json_string(s->snapshot));
                if (s->restored_from)
                        json_object_set(info, "restoredFrom", s->restored_from);
                sleep_mode_info(s, info);
        }
        if (info && s->network) {
                char addr[16];
                net_sandbox_address(runtime_net(s->table->rt), s->slot, addr, sizeof(addr));
                json_object_set_new(info, "networkAddress", json_string(addr));
        }
        /* The kernel-enforced disk limit, when the sandbox has a disk image. */
        if (info && s->state != SANDBOX_DESTROYED && sandbox_dir(s, dir, sizeof(dir)) == 0 &&
            disk_usage(dir, &limit, &used) == 0)
                json_object_set_new(info, "disk",
                                    json_pack("{s:I, s:I}", "limitBytes", (json_int_t)limit,
                                              "usedBytes", (json_int_t)used));
        if (info)
                tenant_info_view(info); /* a tenant's: its own name, and tenant */
        return info;
}

json_t *sandbox_table_list(struct sandbox_table *t)
{
        json_t *a = json_array();
        if (!a)
                return NULL;
        for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                for (struct sandbox *s = t->buckets[i]; s; s = s->next)
                        json_array_append_new(a, sandbox_info(s));
        return a;
}

unsigned sandbox_table_count(const struct sandbox_table *t)
{
        return t->count;
}

const char *sandbox_name(const struct sandbox *s)
{
        return s->name;
}

bool sandbox_default_session(const struct sandbox *s)
{
        return s->default_session;
}

json_t *sandbox_env(const struct sandbox *s)
{
        return s->env;
}

int sandbox_set_env(struct sandbox *s, json_t *vars, struct cella_error *err)
{
        _cleanup_json_ json_t *env = json_deep_copy(s->env);
        const char *k;
        json_t *v;

        if (!env)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        json_object_foreach(vars, k, v)
        {
                if (json_is_null(v))
                        json_object_del(env, k);
                else
                        json_object_set(env, k, v);
        }
        if (json_object_size(env) > CELLA_EXEC_MAX_ENV)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "a sandbox has at most %d environment variables",
                                       CELLA_EXEC_MAX_ENV);
        /* What the registry refused (a full data directory) did not happen. */
        json_t *old = s->env;
        s->env = env;
        if (sandbox_persist(s, err) < 0) {
                s->env = old;
                return -1; /* env dropped */
        }
        env = NULL; /* s->env's now */
        json_decref(old);
        return 0;
}

void sandbox_touch(struct sandbox *s)
{
        s->last_active_ms = time_now_ms();
        /* Persist at most every few seconds: the registry is not a hot path. */
        if (s->state != SANDBOX_DESTROYED && s->last_active_ms - s->persisted_active_ms > 5000) {
                s->persisted_active_ms = s->last_active_ms;
                store_sandbox_touch(s->table->store, s->name, s->last_active_ms);
        }
}

bool sandbox_running(const struct sandbox *s)
{
        return s->state == SANDBOX_RUNNING;
}

int64_t sandbox_instance(const struct sandbox *s)
{
        return sandbox_running(s) ? s->pid_start : 0;
}

int sandbox_socket(struct sandbox *s)
{
        if (!sandbox_running(s) || sandbox_pidfd_hold(s) < 0)
                return -ESRCH;
        int fd = runtime_container_socket(s->table->rt, &s->ct);
        sandbox_pidfd_release(s);
        return fd;
}

int sandbox_open_file(struct sandbox *s, const char *path, struct stat *ret_st, int *ret_pidfd)
{
        uid_t id;
        int fd, pidfd;

        if (!sandbox_running(s) || !s->agent || sandbox_pidfd_hold(s) < 0)
                return -ESRCH;
        id = s->table->uid_base + s->slot * CELLA_UID_RANGE; /* its root's, as it started */
        fd = runtime_container_open_file(&s->ct, id, id, path, ret_st);
        pidfd = fd < 0 ? -1 : fcntl(s->ct.pidfd, F_DUPFD_CLOEXEC, 3);
        if (fd >= 0 && pidfd < 0) {
                int e = -errno;

                close(fd);
                fd = e;
        }
        sandbox_pidfd_release(s);
        if (fd >= 0)
                *ret_pidfd = pidfd;
        return fd;
}

int sandbox_pidfd_dup(struct sandbox *s)
{
        int fd;

        if (!sandbox_running(s) || sandbox_pidfd_hold(s) < 0)
                return -ESRCH;
        fd = fcntl(s->ct.pidfd, F_DUPFD_CLOEXEC, 3);
        fd = fd < 0 ? -errno : fd;
        sandbox_pidfd_release(s);
        return fd;
}

struct store *sandbox_table_store(struct sandbox_table *t)
{
        return t->store;
}

struct agent_conn *sandbox_agent(struct sandbox *s)
{
        return s->state == SANDBOX_RUNNING ? s->agent : NULL;
}
