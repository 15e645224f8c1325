/* The sandbox table (sandbox.h): names to sandboxes, lazy creation, restart of a stopped
 * sandbox with its files in place, destroy, and the warm pool of sandboxes built ahead. The
 * registry (store.c) holds what must survive a daemon restart, the name-to-slot mapping
 * included; the runtime (runtime/container.h) builds the containers. A sandbox's cgroups
 * and data directory are named by its uid slot, "s<slot>", never by its name (see
 * docs/decisions/0015-warm-pool.md). */
#include <errno.h>
#include <fcntl.h>
#include <dirent.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>

#include "common/fsutil.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/instance-type.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox.h"
#include "daemon/store.h"
#include "runtime/container.h"
#include "runtime/disk.h"
#include "runtime/host-claim.h"

#define TABLE_BUCKETS 1024

struct sandbox {
        int refs;
        struct sandbox_table *table;
        struct sandbox *next; /* hash chain */
        char name[CELLA_NAME_MAX + 1];
        unsigned slot;
        char id[16];  /* "s<slot>": cgroup and data directory name, fixed for life */
        bool pooled;  /* a warm-pool sandbox: not in the table, no registry record */
        bool claimed; /* taken from the pool by this daemon */
        struct sandbox *pool_next;
        char *image;
        char *instance_type;
        json_t *env;
        json_t *labels;
        int64_t created_ms;
        int64_t last_active_ms;
        int64_t persisted_active_ms;
        int64_t sleep_after_ms;
        bool keep_alive;
        bool default_session;
        bool network;          /* "outbound" (else "none": loopback only) */
        json_t *network_allow; /* array of canonical "CIDR[:port]" strings */
        bool running;          /* container started and not seen exiting */
        bool sleeping;         /* stopped for idleness; wakes on the next operation */
        bool destroyed;        /* removed from the table; memory lives while referenced */
        struct container ct;
        int64_t pid_start;     /* start time of ct.pid (/proc/PID/stat), to recognise it later */
        uv_poll_t *exit_watch; /* readable when PID 1 exits; heap: closed asynchronously */
        struct agent_conn *agent;
        /* Bytes of disk promised to it: its disk image's size (0: it has none); -1: not
         * looked at since its last start (sandbox_disk_promise() reads it then). */
        int64_t disk_promise;
        char *identity; /* the text of its identity file as last written (rebuild.h) */
};

struct sandbox_table {
        uv_loop_t *loop;
        char *data_dir;
        char *images_dir;
        char *default_image;
        unsigned max_sandboxes;
        uint64_t disk_limit_override; /* every sandbox's disk limit, 0: the instance type's */
        double disk_overcommit;       /* promised disk / the data dir's size that is allowed */
        bool disk_overcommit_refuse;  /* past it, refuse new disks (else only warn) */
        bool disk_overcommitted;      /* past it now (logged once per crossing) */
        struct runtime *rt;
        struct store *store;
        int lock_fd;              /* <data-dir>/cellad.lock, flock()ed for the daemon's life */
        struct host_claim *claim; /* network range and host uids of this instance */
        uint32_t uid_base;        /* host uid of slot 0's root: slot N's is + N * RANGE */
        unsigned count;
        uv_timer_t *idle_timer; /* heap: closed asynchronously */
        struct sandbox *buckets[TABLE_BUCKETS];
        unsigned next_slot; /* slots are handed out round robin from here */
        uint8_t slot_used[CELLA_UID_SLOTS];
        /* The warm pool: running sandboxes of the default image and instance type, built
         * ahead by pool_timer (one per callback), taken by sandbox_create. At most
         * pool_target() of them; pool_len counts the list. */
        unsigned pool_size;
        unsigned pool_len;
        struct sandbox *pool;
        uv_timer_t *pool_timer; /* heap: closed asynchronously */
        uint64_t pool_claims;
        uint64_t pool_builds;
        int64_t pool_last_claim_ms;
        uint64_t pool_retry_ms; /* back-off after failed builds; 0 after a success */
        unsigned reattached;    /* sandboxes of an earlier daemon taken over at start-up */
};

static size_t network_allow_list(const struct sandbox *s, struct net_allow *out);

static unsigned hash_name(const char *s)
{
        unsigned h = 5381;
        while (*s)
                h = h * 33 + (unsigned char)*s++;
        return h % TABLE_BUCKETS;
}

static struct sandbox *table_find(struct sandbox_table *t, const char *name)
{
        for (struct sandbox *s = t->buckets[hash_name(name)]; s; s = s->next)
                if (strcmp(s->name, name) == 0)
                        return s;
        return NULL;
}

static void table_insert(struct sandbox_table *t, struct sandbox *s)
{
        unsigned h = hash_name(s->name);
        s->next = t->buckets[h];
        t->buckets[h] = s;
        t->count++;
}

static void table_remove(struct sandbox_table *t, struct sandbox *s)
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
static int sandbox_dir(const struct sandbox *s, char *out, size_t outsz)
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

/* Remove a directory tree without following symlinks or crossing mounts. */
static int rm_rf(const char *path)
{
        struct stat st;
        if (lstat(path, &st) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (nftw(path, rm_entry, 32, FTW_DEPTH | FTW_PHYS | FTW_MOUNT) < 0)
                return -errno;
        return 0;
}

static void sandbox_free(struct sandbox *s)
{
        free(s->image);
        free(s->instance_type);
        json_decref(s->env);
        json_decref(s->labels);
        json_decref(s->network_allow);
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

static void on_watch_closed(uv_handle_t *h)
{
        free(h);
}

static void stop_exit_watch(struct sandbox *s)
{
        if (!s->exit_watch)
                return;
        uv_poll_stop(s->exit_watch);
        uv_close((uv_handle_t *)s->exit_watch, on_watch_closed);
        s->exit_watch = NULL;
}

static void on_agent_lost(struct agent_conn *c, int err, void *userdata)
{
        struct sandbox *s = userdata;
        if (s->agent == c)
                s->agent = NULL;
        log_info("sandbox '%s': agent connection closed (%s)", s->name,
                 err ? strerror(-err) : "ok");
}

static void pool_discard(struct sandbox *s);
static void on_pool_timer(uv_timer_t *timer);

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
        stop_exit_watch(s);
        s->running = false;
        if (s->agent) {
                struct agent_conn *c = s->agent;
                s->agent = NULL;
                agent_conn_close(c);
        }
        /* Sweep what may be left in its cgroups. */
        runtime_container_destroy(s->table->rt, s->id, NULL, NULL);
}

static int sandbox_persist(struct sandbox *s, struct cella_error *err);

/* Watch the pidfd of PID 1: readable once it has exited. */
static int watch_exit(struct sandbox *s)
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

static int connect_agent(struct sandbox *s, struct cella_error *err)
{
        char dir[CELLA_PATH_MAX], sock[CELLA_PATH_MAX + 16];

        if (sandbox_dir(s, dir, sizeof(dir)) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        snprintf(sock, sizeof(sock), "%s/agent.sock", dir);
        return agent_conn_new(s->table->loop, sock, on_agent_lost, s, &s->agent, err);
}

/* Build and start the container of s (its upper layer is reused if present). */
static int sandbox_start(struct sandbox *s, struct cella_error *err)
{
        struct sandbox_table *t = s->table;
        const struct instance_type *it = instance_type_find(s->instance_type);
        char dir[CELLA_PATH_MAX], rootfs[CELLA_PATH_MAX], marker[CELLA_PATH_MAX + 16];
        struct net_allow allow[CELLA_NETWORK_ALLOW_MAX];
        struct container_spec spec;
        struct stat st;
        int r;

        if (!it)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "unknown instance type '%s' (known: %s)", s->instance_type,
                                       instance_type_names());
        if (sandbox_dir(s, dir, sizeof(dir)) < 0 ||
            snprintf(rootfs, sizeof(rootfs), "%s/%s/rootfs", t->images_dir, s->image) >=
                    (int)sizeof(rootfs))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        snprintf(marker, sizeof(marker), "%s/%s/.complete", t->images_dir, s->image);
        if (stat(rootfs, &st) < 0 || !S_ISDIR(st.st_mode) || access(marker, F_OK) < 0)
                return cella_error_set(err, CELLA_E_IMAGE_NOT_FOUND,
                                       "image '%s' is not built (run: cella image build %s)",
                                       s->image, s->image);
        r = fs_mkdir_p(dir, 0700);
        if (r < 0)
                return cella_error_errno(err, r, "create sandbox directory %s", dir);

        spec = (struct container_spec){
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
        /* Leftovers of an earlier run (a daemon that died, a crashed agent) go first. */
        uint64_t t0 = time_mono_us();
        runtime_container_destroy(t->rt, s->id, NULL, NULL);
        uint64_t t1 = time_mono_us();
        if (runtime_container_start(t->rt, &spec, &s->ct, err) < 0)
                return -1;
        s->disk_promise = -1; /* its disk image may be new */
        uint64_t t2 = time_mono_us();

        if (watch_exit(s) < 0) {
                runtime_container_destroy(t->rt, s->id, &s->ct, NULL);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "watch sandbox process");
        }
        s->running = true;
        s->sleeping = false;
        s->pid_start = proc_start_time(s->ct.pid);

        if (connect_agent(s, err) < 0) {
                stop_exit_watch(s);
                runtime_container_destroy(t->rt, s->id, &s->ct, NULL);
                s->running = false;
                return -1;
        }
        log_info("sandbox '%s' started (slot %u, pid %d, image %s, %s, network %s) in %.2f ms "
                 "(sweep %.2f ms, container %.2f ms)",
                 s->name, s->slot, (int)s->ct.pid, s->image, s->instance_type,
                 s->network ? "outbound" : "none", (double)(time_mono_us() - t0) / 1000.0,
                 (double)(t1 - t0) / 1000.0, (double)(t2 - t1) / 1000.0);
        /* The record (with the pid, so that a restarted daemon finds it) is written here
         * once per start; a sandbox the registry does not know must not run (a pool
         * sandbox has no record: a restarted daemon removes it). */
        if (!s->pooled && sandbox_persist(s, err) < 0) {
                struct agent_conn *c = s->agent;
                s->agent = NULL;
                agent_conn_close(c);
                stop_exit_watch(s);
                runtime_container_destroy(t->rt, s->id, &s->ct, NULL);
                s->running = false;
                return -1;
        }
        return 0;
}

/* Make sure s runs and has an agent connection. */
static int sandbox_ensure_running(struct sandbox *s, struct cella_error *err)
{
        if (s->running && runtime_container_is_alive(&s->ct)) {
                if (!s->agent)
                        return connect_agent(s, err);
                return 0;
        }
        if (s->running) {
                /* Died and not yet noticed by the exit watch. */
                stop_exit_watch(s);
                runtime_container_reap(&s->ct, NULL);
                s->running = false;
        }
        if (s->agent) {
                struct agent_conn *c = s->agent;
                s->agent = NULL;
                agent_conn_close(c);
        }
        return sandbox_start(s, err);
}

static char *json_text(json_t *j)
{
        return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

/* Write the identity file of s (rebuild.h) from rec, its record, when it differs from
 * what was last written. */
static int identity_sync(struct sandbox *s, const struct store_sandbox *rec,
                         struct cella_error *err)
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

static int sandbox_persist(struct sandbox *s, struct cella_error *err)
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
                .pid = s->running ? s->ct.pid : 0,
                .pid_start = s->running ? s->pid_start : 0,
                .sleep_after_ms = s->sleep_after_ms,
                .keep_alive = s->keep_alive,
                .default_session = s->default_session,
                .network = s->network ? "outbound" : "none",
                .network_allow_json = allow,
        };
        if (identity_sync(s, &rec, err) < 0)
                return -1;
        s->persisted_active_ms = s->last_active_ms;
        return store_sandbox_save(s->table->store, &rec, err);
}

/* Take a free slot, round robin: a slot just released (its cgroups and files just
 * removed) is the last to be handed out again. */
static int alloc_slot(struct sandbox_table *t, unsigned *ret)
{
        for (unsigned n = 0; n < CELLA_UID_SLOTS; n++) {
                unsigned i = (t->next_slot + n) % CELLA_UID_SLOTS;
                if (!t->slot_used[i]) {
                        t->slot_used[i] = 1;
                        t->next_slot = (i + 1) % CELLA_UID_SLOTS;
                        *ret = i;
                        return 0;
                }
        }
        return -ENOSPC;
}

static void release_slot(struct sandbox_table *t, unsigned slot)
{
        t->slot_used[slot] = 0;
}

static struct sandbox *sandbox_alloc(struct sandbox_table *t, const char *name, unsigned slot)
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
        return s;
}

/* ---- disk promised to sandboxes (docs/decisions/0036-disk-overcommit.md) ----
 *
 * Disk images are sparse: each promises its full size and takes only what is written.
 * The promise of the daemon is the sum of the images' sizes (sleeping sandboxes and the
 * warm pool included), set against the size of the filesystem of the data dir. */

static uint64_t sandbox_disk_promise(struct sandbox *s)
{
        char dir[CELLA_PATH_MAX];
        uint64_t limit = 0, used;

        if (s->disk_promise < 0) {
                if (s->destroyed || sandbox_dir(s, dir, sizeof(dir)) < 0 ||
                    disk_usage(dir, &limit, &used) < 0)
                        limit = 0;
                s->disk_promise = (int64_t)limit;
        }
        return (uint64_t)s->disk_promise;
}

static uint64_t disk_promised(struct sandbox_table *t)
{
        uint64_t sum = 0;

        for (unsigned i = 0; i < TABLE_BUCKETS; i++)
                for (struct sandbox *s = t->buckets[i]; s; s = s->next)
                        sum += sandbox_disk_promise(s);
        for (struct sandbox *s = t->pool; s; s = s->pool_next)
                sum += sandbox_disk_promise(s);
        return sum;
}

/* The size of the data dir's filesystem, and what of it is free (for unprivileged
 * writers); -errno when it cannot be read. */
static int data_dir_space(const struct sandbox_table *t, uint64_t *ret_size, uint64_t *ret_free)
{
        struct statvfs v;

        if (statvfs(t->data_dir, &v) < 0)
                return -errno;
        *ret_size = (uint64_t)v.f_blocks * v.f_frsize;
        *ret_free = (uint64_t)v.f_bavail * v.f_frsize;
        return 0;
}

/* The disk limit a new sandbox of instance type itype gets (0: no disk image). */
static uint64_t new_disk_bytes(const struct sandbox_table *t, const char *itype)
{
        const struct instance_type *it = instance_type_find(itype);

        if (!runtime_disk_enforced(t->rt))
                return 0;
        if (t->disk_limit_override)
                return t->disk_limit_override;
        return it ? it->disk_bytes : 0;
}

/* May a sandbox with a new disk of `more` bytes be made? Past the overcommit ratio it is
 * refused under the refuse policy (INSUFFICIENT_STORAGE: the host's storage runs short,
 * not a sandbox's own disk); under warn, and for what is already promised, the crossing
 * is logged once. */
static int disk_admit(struct sandbox_table *t, uint64_t more, struct cella_error *err)
{
        uint64_t size = 0, avail = 0, promised = disk_promised(t);
        double limit;

        if (data_dir_space(t, &size, &avail) < 0 || size == 0)
                return 0; /* nothing to compare against: the kernel's ENOSPC still holds */
        limit = t->disk_overcommit * (double)size;
        if ((double)(promised + more) <= limit) {
                if (t->disk_overcommitted && (double)promised <= limit) {
                        log_info("disk: %.1f GiB promised to sandboxes, within %.2f x the data "
                                 "dir's %.1f GiB again",
                                 (double)promised / (1 << 30), t->disk_overcommit,
                                 (double)size / (1 << 30));
                        t->disk_overcommitted = false;
                }
                return 0;
        }
        if (more && t->disk_overcommit_refuse)
                return cella_error_set(err, CELLA_E_INSUFFICIENT_STORAGE,
                                       "disk overcommit: sandboxes hold %.1f GiB of disk and a new "
                                       "one needs %.1f GiB; more than %.2f x the data dir's %.1f "
                                       "GiB (--disk-overcommit, --disk-overcommit-policy)",
                                       (double)promised / (1 << 30), (double)more / (1 << 30),
                                       t->disk_overcommit, (double)size / (1 << 30));
        if (!t->disk_overcommitted)
                log_warn("disk: %.1f GiB promised to sandboxes, more than %.2f x the data dir's "
                         "%.1f GiB (%.1f GiB free): a sandbox may find its disk full before its "
                         "limit (--disk-overcommit)",
                         (double)(promised + more) / (1 << 30), t->disk_overcommit,
                         (double)size / (1 << 30), (double)avail / (1 << 30));
        t->disk_overcommitted = true;
        return 0;
}

json_t *sandbox_table_disk_info(struct sandbox_table *t)
{
        uint64_t size = 0, avail = 0, promised = disk_promised(t);

        data_dir_space(t, &size, &avail);
        return json_pack("{s:I, s:I, s:I, s:f, s:f, s:s, s:b}", "capacityBytes", (json_int_t)size,
                         "freeBytes", (json_int_t)avail, "promisedBytes", (json_int_t)promised,
                         "overcommit", size ? (double)promised / (double)size : 0.0,
                         "overcommitLimit", t->disk_overcommit, "overcommitPolicy",
                         t->disk_overcommit_refuse ? "refuse" : "warn", "overcommitted",
                         size && (double)promised > t->disk_overcommit * (double)size);
}

/* The network a new sandbox gets when the request names none: outbound where the host can
 * do it, else none (decision 0017). */
static bool network_default(const struct sandbox_table *t)
{
        return net_available(runtime_net(t->rt));
}

/* opts->network as a mode; -1 with *err set for an outbound the host cannot give. */
static int network_wanted(const struct sandbox_table *t, const struct sandbox_options *opts,
                          bool *ret, struct cella_error *err)
{
        if (!opts || !opts->network) {
                *ret = network_default(t);
                return 0;
        }
        if (strcmp(opts->network, "none") == 0) {
                *ret = false;
                return 0;
        }
        if (strcmp(opts->network, "outbound") != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "network must be \"none\" or \"outbound\"");
        if (!net_available(runtime_net(t->rt)))
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "network \"outbound\" is not available on this host: %s",
                                       net_state(runtime_net(t->rt)));
        *ret = true;
        return 0;
}

/* A validated networkAllow array in canonical form (new reference), or NULL with *err. */
static json_t *network_allow_canon(json_t *a, struct cella_error *err)
{
        json_t *out = json_array(), *v;
        size_t i;

        if (!out) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        if (!a)
                return out;
        if (!json_is_array(a) || json_array_size(a) > CELLA_NETWORK_ALLOW_MAX) {
                json_decref(out);
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "networkAllow must be an array of at most %d \"CIDR[:port]\"",
                                CELLA_NETWORK_ALLOW_MAX);
                return NULL;
        }
        json_array_foreach(a, i, v)
        {
                struct net_allow na;
                char text[64];
                if (!json_is_string(v) ||
                    net_allow_parse(json_string_value(v), json_string_length(v), &na) < 0) {
                        json_decref(out);
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "networkAllow[%zu]: want an IPv4 \"CIDR[:port]\" such as "
                                        "\"203.0.113.0/24:443\"",
                                        i);
                        return NULL;
                }
                net_allow_format(&na, text, sizeof(text));
                json_array_append_new(out, json_string(text));
        }
        return out;
}

/* The parsed allowlist of s into out (CELLA_NETWORK_ALLOW_MAX entries); returns the count. */
static size_t network_allow_list(const struct sandbox *s, struct net_allow *out)
{
        size_t i, n = 0;
        json_t *v;

        json_array_foreach(s->network_allow, i, v)
        {
                if (n < CELLA_NETWORK_ALLOW_MAX && json_is_string(v) &&
                    net_allow_parse(json_string_value(v), json_string_length(v), &out[n]) == 0)
                        n++;
        }
        return n;
}

static int validate_string_object(json_t *o, const char *what, struct cella_error *err)
{
        const char *k;
        json_t *v;
        if (!o)
                return 0;
        if (!json_is_object(o))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "%s must be an object",
                                       what);
        json_object_foreach(o, k, v)
        {
                if (!json_is_string(v))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "%s.%s must be a string", what, k);
        }
        return 0;
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
static void image_env_under(const struct sandbox_table *t, const char *image, json_t *env)
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

/* ---- the warm pool ----
 *
 * A pool sandbox is a struct sandbox with pooled set, named "pool-<slot>" (a reserved
 * name), running, its agent connected, outside the table and without a registry record.
 * A claim gives it its name and options, its hostname and /etc files, and then writes
 * its record: that write is the commit point. A daemon that dies before it leaves a pool
 * sandbox that the next daemon removes (see sweep_leftovers); after it, a sandbox like any
 * other, reattached by its record. */

/* How many pool sandboxes to keep: the pool size, but never more than the user sandboxes
 * still allowed, so that user and pool sandboxes together stay within --max-sandboxes. */
static unsigned pool_target(const struct sandbox_table *t)
{
        unsigned room = t->max_sandboxes > t->count ? t->max_sandboxes - t->count : 0;
        return t->pool_size < room ? t->pool_size : room;
}

static void pool_schedule(struct sandbox_table *t, uint64_t delay_ms)
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
                        return;
                }
}

/* Kill a pool sandbox (or one whose claim failed) and remove everything of it: cgroups,
 * files, slot. s is not in the table. */
static void pool_discard(struct sandbox *s)
{
        struct sandbox_table *t = s->table;
        struct cella_error e = {0};
        char dir[CELLA_PATH_MAX];

        pool_unlink(s);
        if (s->agent) {
                struct agent_conn *c = s->agent;
                s->agent = NULL;
                agent_conn_close(c);
        }
        stop_exit_watch(s);
        if (runtime_container_destroy(t->rt, s->id, s->running ? &s->ct : NULL, &e) < 0)
                log_warn("pool: %s", e.msg);
        s->running = false;
        if (sandbox_dir(s, dir, sizeof(dir)) == 0 && rm_rf(dir) < 0)
                log_warn("pool: remove %s failed", dir);
        release_slot(t, s->slot);
        s->destroyed = true;
        sandbox_unref(s);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
}

/* Build one pool sandbox and add it to the pool. */
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
        if (sandbox_start(s, err) < 0) {
                pool_discard(s);
                return -1;
        }
        /* Its default session's shell starts now, so a claim's first command is a builtin
         * in a running shell, not a shell start. */
        session_oneway(s,
                       json_pack("{s:s, s:s, s:{}}", "op", "create", "id", "default", "baseEnv"));
        s->pool_next = t->pool;
        t->pool = s;
        t->pool_len++;
        t->pool_builds++;
        return 0;
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

/* Refill (or trim) the pool by one sandbox per callback, so that the event loop serves
 * requests between two builds. A build (a few ms of synchronous work on the loop) waits
 * until the requests that claimed are answered: claims push it back by
 * CELLA_POOL_REFILL_DELAY_MS, and so does a claimed sandbox's first command still
 * running, so that a burst of new names is served before the pool builds again. */
static void on_pool_timer(uv_timer_t *timer)
{
        struct sandbox_table *t = timer->data;
        struct cella_error e = {0};
        unsigned target = pool_target(t);

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
        if (pool_build(t, &e) < 0) {
                /* E.g. the default image is not built yet: try again, less and less often. */
                t->pool_retry_ms = t->pool_retry_ms ? t->pool_retry_ms * 2 : CELLA_POOL_RETRY_MS;
                if (t->pool_retry_ms > CELLA_POOL_RETRY_MAX_MS)
                        t->pool_retry_ms = CELLA_POOL_RETRY_MAX_MS;
                log_warn("pool: build: %s (next try in %u s)", e.msg,
                         (unsigned)(t->pool_retry_ms / 1000));
                pool_schedule(t, t->pool_retry_ms);
                return;
        }
        t->pool_retry_ms = 0;
        if (t->pool_len < target)
                pool_schedule(t, 0);
        else
                log_debug("pool: %u ready", t->pool_len);
}

/* Take a live pool sandbox with its agent connected out of the pool, or NULL when there is
 * none; the dead ones found on the way are discarded. */
static struct sandbox *pool_take(struct sandbox_table *t)
{
        while (t->pool) {
                struct sandbox *s = t->pool;
                if (s->running && s->agent && runtime_container_is_alive(&s->ct)) {
                        pool_unlink(s);
                        return s;
                }
                pool_discard(s);
        }
        return NULL;
}

/* Give pool sandbox s (taken out of the pool) the name and options of a new sandbox;
 * opts are validated. On failure s is discarded. */
static int pool_claim(struct sandbox *s, const char *name, const struct sandbox_options *opts,
                      struct cella_error *err)
{
        struct sandbox_table *t = s->table;
        uint64_t t0 = time_mono_us();
        char dir[CELLA_PATH_MAX];
        json_t *env = opts && opts->env ? json_deep_copy(opts->env) : json_object();
        json_t *labels = opts && opts->labels ? json_deep_copy(opts->labels) : json_object();

        if (!env || !labels) {
                json_decref(env);
                json_decref(labels);
                pool_discard(s);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        image_env_under(t, s->image, env);
        json_decref(s->env);
        json_decref(s->labels);
        s->env = env;
        s->labels = labels;
        snprintf(s->name, sizeof(s->name), "%s", name);
        /* The sandbox, as its user sees it, is made now. */
        s->created_ms = s->last_active_ms = time_now_ms();
        s->sleep_after_ms = opts && opts->sleep_after_ms > 0 ? opts->sleep_after_ms
                                                             : CELLA_DEFAULT_SLEEP_AFTER_MS;
        s->keep_alive = opts && opts->has_keep_alive && opts->keep_alive;
        s->default_session = !(opts && opts->has_default_session && !opts->default_session);
        if (sandbox_dir(s, dir, sizeof(dir)) < 0 ||
            runtime_container_rename(t->rt, &s->ct, dir, name, err) < 0) {
                pool_discard(s);
                return -1;
        }
        uint64_t t1 = time_mono_us();
        s->pooled = false;
        s->claimed = true;
        table_insert(t, s);
        /* The commit point: from here on a restarted daemon reattaches it by this record. */
        if (sandbox_persist(s, err) < 0) {
                table_remove(t, s);
                pool_discard(s);
                return -1;
        }
        /* The default session started before the name and env were known. */
        if (!s->default_session) {
                session_oneway(s, json_pack("{s:s, s:s}", "op", "delete", "id", "default"));
        } else {
                json_t *vars = json_deep_copy(s->env);

                if (vars)
                        json_object_set_new(vars, "HOSTNAME", json_string(s->name));
                session_oneway(s, vars ? json_pack("{s:s, s:s, s:o}", "op", "setenv", "id",
                                                   "default", "env", vars)
                                       : NULL);
        }
        t->pool_claims++;
        t->pool_last_claim_ms = s->created_ms;
        log_info("sandbox '%s' claimed from the pool (slot %u, pid %d) in %.2f ms (name %.2f "
                 "ms, registry %.2f ms)",
                 s->name, s->slot, (int)s->ct.pid, (double)(time_mono_us() - t0) / 1000.0,
                 (double)(t1 - t0) / 1000.0, (double)(time_mono_us() - t1) / 1000.0);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
        return 0;
}

json_t *sandbox_table_pool_info(const struct sandbox_table *t)
{
        return json_pack("{s:I, s:I, s:I, s:I}", "size", (json_int_t)t->pool_size, "ready",
                         (json_int_t)t->pool_len, "claims", (json_int_t)t->pool_claims, "builds",
                         (json_int_t)t->pool_builds);
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
        if (!instance_type_find(itype))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "unknown instanceType '%s' (known: %s)", itype,
                                       instance_type_names());
        if (!image_name_is_valid(image))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "invalid image name '%.64s' (1-%d of [a-z0-9._-], not "
                                       "starting with '.' or '-')",
                                       image, CELLA_NAME_MAX);
        if (!image_ready(t, image))
                return cella_error_set(err, CELLA_E_IMAGE_NOT_FOUND,
                                       "no image '%s' (cella image ls; build or import it)", image);
        if (opts && (validate_string_object(opts->env, "env", err) < 0 ||
                     validate_string_object(opts->labels, "labels", err) < 0))
                return -1;
        if (network_wanted(t, opts, &network, err) < 0)
                return -1;
        json_t *allow = network_allow_canon(opts ? opts->network_allow : NULL, err);
        if (!allow)
                return -1;
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

        if (s->agent) {
                struct agent_conn *c = s->agent;
                s->agent = NULL;
                agent_conn_close(c);
        }
        stop_exit_watch(s);
        if (runtime_container_destroy(s->table->rt, s->id, &s->ct, &e) < 0)
                log_warn("sandbox '%s': sleep: %s", s->name, e.msg);
        s->running = false;
        s->sleeping = true;
        memset(&e, 0, sizeof(e));
        if (sandbox_persist(s, &e) < 0)
                log_warn("sandbox '%s': %s", s->name, e.msg);
        log_info("sandbox '%s' sleeping after %lld s idle", s->name,
                 (long long)(s->sleep_after_ms / 1000));
}

/* Idleness: no request for sleep_after_ms and no open stream (a running exec, a file
 * transfer, an SSE client) in that time. An open stream counts as activity now. */
static void on_idle_check(uv_timer_t *timer)
{
        struct sandbox_table *t = timer->data;
        int64_t now = time_now_ms();

        for (unsigned i = 0; i < TABLE_BUCKETS; i++) {
                struct sandbox *s = t->buckets[i];
                while (s) {
                        struct sandbox *next = s->next;
                        if (s->running && !s->keep_alive) {
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
                if (validate_string_object(opts->env, "env", err) < 0 ||
                    validate_string_object(opts->labels, "labels", err) < 0)
                        return -1;
                if (opts->image && strcmp(opts->image, s->image) != 0)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "sandbox '%s' exists with image '%s'; destroy "
                                               "it to change the image",
                                               name, s->image);
                if (opts->instance_type && strcmp(opts->instance_type, s->instance_type) != 0)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "sandbox '%s' exists with instanceType '%s'; "
                                               "destroy it to change the instance type",
                                               name, s->instance_type);
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
                        json_t *allow = network_allow_canon(opts->network_allow, err);
                        if (!allow)
                                return -1;
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
        if (s->agent) {
                struct agent_conn *c = s->agent;
                s->agent = NULL;
                agent_conn_close(c);
        }
        stop_exit_watch(s);
        r = runtime_container_destroy(t->rt, s->id, s->running ? &s->ct : NULL, err);
        if (r < 0)
                return r;
        s->running = false;
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
        s->destroyed = true;
        log_info("sandbox '%s' destroyed (slot %u)", s->name, s->slot);
        sandbox_unref(s);
        pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS);
        return 0;
}

json_t *sandbox_info(const struct sandbox *s)
{
        char created[32], active[32], dir[CELLA_PATH_MAX];
        uint64_t limit, used;
        json_t *info;
        time_format_iso(s->created_ms, created, sizeof(created));
        time_format_iso(s->last_active_ms, active, sizeof(active));
        const char *state = s->destroyed  ? "destroyed"
                            : s->running  ? "running"
                            : s->sleeping ? "sleeping"
                                          : "stopped";
        info = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:O, s:O, s:I, s:b, s:b}", "id", s->name,
                         "state", state, "image", s->image, "instanceType", s->instance_type,
                         "createdAt", created, "lastActiveAt", active, "labels", s->labels, "env",
                         s->env, "sleepAfter", (json_int_t)(s->sleep_after_ms / 1000), "keepAlive",
                         s->keep_alive, "enableDefaultSession", s->default_session);
        if (info) {
                json_object_set_new(info, "network", json_string(s->network ? "outbound" : "none"));
                json_object_set(info, "networkAllow", s->network_allow);
        }
        if (info && s->network) {
                char addr[16];
                net_sandbox_address(runtime_net(s->table->rt), s->slot, addr, sizeof(addr));
                json_object_set_new(info, "networkAddress", json_string(addr));
        }
        /* The kernel-enforced disk limit, when the sandbox has a disk image. */
        if (info && !s->destroyed && sandbox_dir(s, dir, sizeof(dir)) == 0 &&
            disk_usage(dir, &limit, &used) == 0)
                json_object_set_new(info, "disk",
                                    json_pack("{s:I, s:I}", "limitBytes", (json_int_t)limit,
                                              "usedBytes", (json_int_t)used));
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
        json_t *env = json_deep_copy(s->env), *v;
        const char *k;

        if (!env)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        json_object_foreach(vars, k, v)
        {
                if (json_is_null(v))
                        json_object_del(env, k);
                else
                        json_object_set(env, k, v);
        }
        if (json_object_size(env) > CELLA_EXEC_MAX_ENV) {
                json_decref(env);
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "a sandbox has at most %d environment variables",
                                       CELLA_EXEC_MAX_ENV);
        }
        /* What the registry refused (a full data directory) did not happen. */
        json_t *old = s->env;
        s->env = env;
        if (sandbox_persist(s, err) < 0) {
                s->env = old;
                json_decref(env);
                return -1;
        }
        json_decref(old);
        return 0;
}

void sandbox_touch(struct sandbox *s)
{
        s->last_active_ms = time_now_ms();
        /* Persist at most every few seconds: the registry is not a hot path. */
        if (!s->destroyed && s->last_active_ms - s->persisted_active_ms > 5000) {
                s->persisted_active_ms = s->last_active_ms;
                store_sandbox_touch(s->table->store, s->name, s->last_active_ms);
        }
}

bool sandbox_running(const struct sandbox *s)
{
        return s->running && !s->destroyed;
}

int64_t sandbox_instance(const struct sandbox *s)
{
        return sandbox_running(s) ? s->pid_start : 0;
}

int sandbox_socket(struct sandbox *s)
{
        if (!sandbox_running(s))
                return -ESRCH;
        return runtime_container_socket(s->table->rt, &s->ct);
}

struct store *sandbox_table_store(struct sandbox_table *t)
{
        return t->store;
}

struct agent_conn *sandbox_agent(struct sandbox *s)
{
        return s->running ? s->agent : NULL;
}

/* A sandbox of an earlier daemon whose PID 1 still runs (the same process: pid and start
 * time match) is taken over: its pidfd watched, its agent connected. Returns 0 when it
 * is running again under this daemon, -1 when it has to be started afresh. */
static int reattach(struct sandbox *s)
{
        struct cella_error e = {0};
        int fd;

        if (s->ct.pid <= 0 || s->pid_start <= 0 || proc_start_time(s->ct.pid) != s->pid_start)
                return -1;
        fd = (int)syscall(SYS_pidfd_open, s->ct.pid, 0);
        if (fd < 0)
                return -1;
        fcntl(fd, F_SETFD, FD_CLOEXEC);
        /* The pid could have been reused between the check and pidfd_open: check again. */
        if (proc_start_time(s->ct.pid) != s->pid_start) {
                close(fd);
                return -1;
        }
        s->ct.pidfd = fd;
        if (watch_exit(s) < 0 || connect_agent(s, &e) < 0) {
                stop_exit_watch(s);
                close(fd);
                s->ct.pidfd = -EBADF;
                return -1;
        }
        s->running = true;
        log_info("sandbox '%s' reattached (slot %u, pid %d)", s->name, s->slot, (int)s->ct.pid);
        return 0;
}

/* Registry records of an earlier daemon: running sandboxes are reattached; the others
 * come back as stopped, keep their files, and start on their next use. */
static int load_record(const struct store_sandbox *rec, void *userdata)
{
        struct sandbox_table *t = userdata;
        struct cella_error e = {0};
        char name[CELLA_NAME_MAX + 1];
        struct sandbox *s;

        if (rec->slot < 0 || rec->slot >= CELLA_UID_SLOTS || t->slot_used[rec->slot] ||
            sandbox_name_check(rec->name, strlen(rec->name), false, name, NULL) < 0 ||
            table_find(t, rec->name)) {
                log_warn("registry: skipping invalid record '%s'", rec->name);
                return 0;
        }
        s = sandbox_alloc(t, rec->name, (unsigned)rec->slot);
        if (!s)
                return -ENOMEM;
        s->image = strdup(rec->image);
        s->instance_type = strdup(rec->instance_type);
        s->env = json_loads(rec->env_json, 0, NULL);
        s->labels = json_loads(rec->labels_json, 0, NULL);
        if (!json_is_object(s->env)) {
                json_decref(s->env);
                s->env = json_object();
        }
        if (!json_is_object(s->labels)) {
                json_decref(s->labels);
                s->labels = json_object();
        }
        s->created_ms = rec->created_ms;
        s->last_active_ms = s->persisted_active_ms = rec->last_active_ms;
        s->ct.pid = (pid_t)rec->pid;
        s->pid_start = rec->pid_start;
        s->sleep_after_ms =
                rec->sleep_after_ms > 0 ? rec->sleep_after_ms : CELLA_DEFAULT_SLEEP_AFTER_MS;
        s->keep_alive = rec->keep_alive != 0;
        s->default_session = rec->default_session != 0;
        s->network = rec->network && strcmp(rec->network, "outbound") == 0;
        s->network_allow =
                json_loads(rec->network_allow_json ? rec->network_allow_json : "[]", 0, NULL);
        if (!json_is_array(s->network_allow)) {
                json_decref(s->network_allow);
                s->network_allow = json_array();
        }
        if (!s->image || !s->instance_type || !s->env || !s->labels || !s->network_allow) {
                sandbox_free(s);
                return -ENOMEM;
        }
        table_insert(t, s);
        t->slot_used[s->slot] = 1;
        /* Sandboxes made before identity files get theirs now (with the values as
         * loaded: an old record's sleep_after_ms may be 0). */
        struct store_sandbox id = *rec;
        id.sleep_after_ms = s->sleep_after_ms;
        id.network = s->network ? "outbound" : "none";
        if (identity_sync(s, &id, &e) < 0)
                log_warn("sandbox '%s': %s", s->name, e.msg);
        memset(&e, 0, sizeof(e));
        if (reattach(s) == 0) {
                t->reattached++;
                return 0;
        }
        /* Whatever is left of it is stopped; it restarts cleanly on next use. */
        runtime_container_destroy(t->rt, s->id, NULL, &e);
        log_info("sandbox '%s' stopped (slot %u)", s->name, s->slot);
        return 0;
}

/* ---- start-up: layout migration and leftovers ---- */

struct migrate_ctx {
        struct sandbox_table *t;
        int pass;
        int err;
};

/* Registries written before slot naming had sandboxes/<name>/ and cgroups named by the
 * sandbox's name. Pass 1 stops each such sandbox (its cgroups are named by the old scheme)
 * and moves its directory aside to sandboxes/.m-<slot>; pass 2 moves those to s<slot>. Two
 * passes, because an old name may itself look like a slot id. Its files are kept; it
 * starts again on its next use. Re-running after a crash in between is safe. */
static int migrate_record(const struct store_sandbox *rec, void *userdata)
{
        struct migrate_ctx *m = userdata;
        struct sandbox_table *t = m->t;
        char name[CELLA_NAME_MAX + 1], from[CELLA_PATH_MAX], to[CELLA_PATH_MAX + 16];
        struct cella_error e = {0};
        struct stat st;

        if (rec->slot < 0 || rec->slot >= CELLA_UID_SLOTS ||
            sandbox_name_check(rec->name, strlen(rec->name), false, name, NULL) < 0)
                return 0; /* load_record skips it */
        if (m->pass == 1) {
                runtime_container_destroy(t->rt, rec->name, NULL, &e);
                snprintf(from, sizeof(from), "%s/sandboxes/%s", t->data_dir, rec->name);
                snprintf(to, sizeof(to), "%s/sandboxes/.m-%lld", t->data_dir, (long long)rec->slot);
        } else {
                snprintf(from, sizeof(from), "%s/sandboxes/.m-%lld", t->data_dir,
                         (long long)rec->slot);
                snprintf(to, sizeof(to), "%s/sandboxes/s%lld", t->data_dir, (long long)rec->slot);
                if (lstat(from, &st) == 0)
                        rm_rf(to); /* no record owns it: every old directory is in .m-* now */
        }
        if (lstat(from, &st) < 0)
                return 0;
        if (rename(from, to) < 0) {
                m->err = -errno;
                log_error("registry: move %s to %s: %s", from, to, strerror(errno));
                return m->err;
        }
        return 0;
}

static int migrate_layout(struct sandbox_table *t, struct cella_error *err)
{
        struct migrate_ctx m = {.t = t};
        char layout[32] = "";

        if (store_meta_get(t->store, "layout", layout, sizeof(layout)) == 0 &&
            strcmp(layout, "slot") == 0)
                return 0;
        for (m.pass = 1; m.pass <= 2; m.pass++)
                if (store_sandbox_foreach(t->store, migrate_record, &m, err) < 0)
                        return m.err ? cella_error_errno(err, -m.err,
                                                         "registry: move sandbox directories")
                                     : -1;
        log_info("registry: sandboxes are named by slot from now on");
        return store_meta_set(t->store, "layout", "slot", err);
}

static bool is_owned_slot_id(const struct sandbox_table *t, const char *id)
{
        unsigned slot;
        return slot_id_parse(id, strlen(id), CELLA_UID_SLOTS, &slot) == 0 && t->slot_used[slot];
}

static int sweep_cgroup(const char *id, void *userdata)
{
        struct sandbox_table *t = userdata;
        struct cella_error e = {0};

        if (is_owned_slot_id(t, id))
                return 0;
        log_info("removing leftover sandbox '%s' (no registry record)", id);
        if (runtime_container_destroy(t->rt, id, NULL, &e) < 0)
                log_warn("%s", e.msg);
        return 0;
}

/* What no registry record owns goes: pool sandboxes of an earlier daemon (never claimed,
 * or claimed but not committed) and anything else below our cgroup parent and in
 * sandboxes/. Runs after the records are loaded and after the layout migration. */
static void sweep_leftovers(struct sandbox_table *t)
{
        char path[CELLA_PATH_MAX], entry[CELLA_PATH_MAX + 256];
        struct dirent *de;
        DIR *d;

        runtime_foreach_id(t->rt, sweep_cgroup, t);
        snprintf(path, sizeof(path), "%s/sandboxes", t->data_dir);
        d = opendir(path);
        if (!d)
                return;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
                    is_owned_slot_id(t, de->d_name))
                        continue;
                snprintf(entry, sizeof(entry), "%s/%s", path, de->d_name);
                log_info("removing leftover %s (no registry record)", entry);
                if (rm_rf(entry) < 0)
                        log_warn("remove %s failed", entry);
        }
        closedir(d);
}

/* "cella" for the default data directory, "cella-<hash>" for any other. */
void sandbox_instance_name(const char *data_dir, char *out, size_t outsz)
{
        char real[PATH_MAX];
        uint64_t h = 1469598103934665603ull; /* FNV-1a */
        const char *p = realpath(data_dir, real) ? real : data_dir;

        if (strcmp(p, "/var/lib/cella") == 0) {
                snprintf(out, outsz, "cella");
                return;
        }
        for (; *p; p++)
                h = (h ^ (unsigned char)*p) * 1099511628211ull;
        snprintf(out, outsz, "cella-%08x", (unsigned)(h ^ (h >> 32)));
}

/* Sandboxes in the data dir (their directories), from before it had a record of its
 * uids: they were all made with CELLA_UID_BASE. */
static bool has_sandbox_dirs(const char *data_dir)
{
        char path[CELLA_PATH_MAX];
        struct dirent *de;
        bool any = false;

        snprintf(path, sizeof(path), "%s/sandboxes", data_dir);
        _cleanup_closedir_ DIR *d = opendir(path);
        while (d && !any && (de = readdir(d)))
                any = strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0;
        return any;
}

int sandbox_instance_claim(const char *data_dir, const char *network_range,
                           const uint32_t *uid_base, bool probe_only, struct host_claim **ret,
                           struct cella_error *err)
{
        char name[32], ifprefix[16];

        sandbox_instance_name(data_dir, name, sizeof(name));
        net_ifprefix(name, ifprefix, sizeof(ifprefix));
        struct host_claim_config cfg = {
                .name = name,
                .ifprefix = ifprefix,
                .data_dir = data_dir,
                .network_range = network_range,
                .uid_base = uid_base,
                .legacy_uids = has_sandbox_dirs(data_dir),
                .probe_only = probe_only,
        };
        return host_claim_take(&cfg, ret, err);
}

/* The data directory holds the registry (env values, preview tokens) and every sandbox's
 * files: it is cellad's alone, 0700. One made by an older cellad (or by hand) with wider
 * permissions is narrowed, and the log says so. */
static int private_data_dir(const char *dir, struct cella_error *err)
{
        struct stat st;
        int r = fs_mkdir_p(dir, 0700);

        if (r < 0)
                return cella_error_errno(err, r, "create %s", dir);
        if (stat(dir, &st) < 0)
                return cella_error_errno(err, errno, "stat %s", dir);
        if ((st.st_mode & 07777) != 0700) {
                if (chmod(dir, 0700) < 0)
                        return cella_error_errno(err, errno, "chmod 0700 %s", dir);
                log_warn("data directory %s was mode %04o; now 0700 (it holds secrets)", dir,
                         (unsigned)(st.st_mode & 07777));
        }
        return 0;
}

int sandbox_table_new(uv_loop_t *loop, const struct sandbox_table_config *cfg,
                      struct sandbox_table **ret, struct cella_error *err)
{
        struct runtime_config rcfg = {.agent_path = cfg->agent_path, .disk_mode = cfg->disk_mode};
        char path[CELLA_PATH_MAX], cgname[32], templates[CELLA_PATH_MAX], range[24], ip[16];
        struct sandbox_table *t;
        int r;

        t = calloc(1, sizeof(*t));
        if (!t)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        t->loop = loop;
        t->lock_fd = -EBADF;
        t->data_dir = strdup(cfg->data_dir);
        t->images_dir = strdup(cfg->images_dir);
        t->default_image = strdup(cfg->default_image ? cfg->default_image : "default");
        t->max_sandboxes = cfg->max_sandboxes ? cfg->max_sandboxes : CELLA_DEFAULT_MAX_SANDBOXES;
        t->disk_limit_override = cfg->disk_limit_override;
        t->disk_overcommit =
                cfg->disk_overcommit > 0 ? cfg->disk_overcommit : CELLA_DISK_OVERCOMMIT_DEFAULT;
        t->disk_overcommit_refuse = cfg->disk_overcommit_refuse;
        if (t->max_sandboxes > CELLA_UID_SLOTS)
                t->max_sandboxes = CELLA_UID_SLOTS;
        if (!t->data_dir || !t->images_dir || !t->default_image) {
                sandbox_table_free(t);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        r = private_data_dir(t->data_dir, err);
        if (r < 0) {
                sandbox_table_free(t);
                return -1;
        }
        snprintf(path, sizeof(path), "%s/sandboxes", t->data_dir);
        r = fs_mkdir_p(path, 0700);
        if (r < 0) {
                cella_error_errno(err, r, "create %s", path);
                sandbox_table_free(t);
                return -1;
        }
        /* One daemon per data directory: a second one would take the first one's sandboxes
         * for leftovers (pool sandboxes have no record) and remove them. The lock goes
         * with the process, however it ends. */
        snprintf(path, sizeof(path), "%s/cellad.lock", t->data_dir);
        t->lock_fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (t->lock_fd < 0 || flock(t->lock_fd, LOCK_EX | LOCK_NB) < 0) {
                if (errno == EWOULDBLOCK)
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                        "another cellad uses the data directory %s", t->data_dir);
                else
                        cella_error_errno(err, errno, "lock %s", path);
                sandbox_table_free(t);
                return -1;
        }
        /* Each data directory owns its own cgroup parent, so that two daemons on one host
         * (tests, CI) never reach each other's sandboxes by name. */
        sandbox_instance_name(t->data_dir, cgname, sizeof(cgname));
        rcfg.cgroup_name = cgname;
        /* Its sandboxes' addresses and host uids, no other instance's on this host. */
        if (sandbox_instance_claim(t->data_dir, cfg->network_range, cfg->uid_base, false, &t->claim,
                                   err) < 0) {
                sandbox_table_free(t);
                return -1;
        }
        log_info("%s", host_claim_describe(t->claim));
        t->uid_base = host_claim_uid_base(t->claim);
        net_addr_format(host_claim_range(t->claim)->addr, ip, sizeof(ip));
        snprintf(range, sizeof(range), "%s/%u", ip, host_claim_range(t->claim)->prefix);
        rcfg.network_range = range;
        snprintf(templates, sizeof(templates), "%s/disk-templates", t->data_dir);
        rcfg.disk_template_dir = templates;
        if (runtime_new(&rcfg, &t->rt, err) < 0) {
                sandbox_table_free(t);
                return -1;
        }
        log_info("%s", runtime_disk_state(t->rt));
        log_info("%s", net_state(runtime_net(t->rt)));
        snprintf(path, sizeof(path), "%s/cella.db", t->data_dir);
        if (store_open(path, &t->store, err) < 0) {
                sandbox_table_free(t);
                return -1;
        }
        if (store_is_fresh(t->store)) {
                struct rebuild_result rb;

                if (rebuild_registry(t->store, t->data_dir, cgname, &rb, err) < 0) {
                        sandbox_table_free(t);
                        return -1;
                }
                if (rb.found || rb.skipped)
                        log_warn("registry: rebuilt from %u identity files (%u sandboxes "
                                 "running, %u directories without one) in %.1f ms; lost with "
                                 "the old registry: env, labels, exposed ports, lastActiveAt",
                                 rb.found, rb.running, rb.skipped, rb.duration_ms);
        }
        uint64_t t0 = time_mono_us();
        if (migrate_layout(t, err) < 0 ||
            store_sandbox_foreach(t->store, load_record, t, err) < 0) {
                sandbox_table_free(t);
                return -1;
        }
        log_info("registry: %u sandboxes, %u reattached, in %.1f ms", t->count, t->reattached,
                 (double)(time_mono_us() - t0) / 1000.0);
        sweep_leftovers(t);
        t->idle_timer = malloc(sizeof(*t->idle_timer));
        if (!t->idle_timer || uv_timer_init(loop, t->idle_timer) < 0) {
                free(t->idle_timer);
                t->idle_timer = NULL;
                sandbox_table_free(t);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "idle timer");
        }
        t->idle_timer->data = t;
        uv_timer_start(t->idle_timer, on_idle_check, CELLA_IDLE_CHECK_MS, CELLA_IDLE_CHECK_MS);
        uv_unref((uv_handle_t *)t->idle_timer);
        t->pool_size = cfg->pool_size;
        if (t->pool_size) {
                t->pool_timer = malloc(sizeof(*t->pool_timer));
                if (!t->pool_timer || uv_timer_init(loop, t->pool_timer) < 0) {
                        free(t->pool_timer);
                        t->pool_timer = NULL;
                        sandbox_table_free(t);
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "pool timer");
                }
                t->pool_timer->data = t;
                uv_unref((uv_handle_t *)t->pool_timer);
                pool_schedule(t, 0);
        }
        log_info("sandbox cgroups under '%s'; warm pool of %u", cgname, t->pool_size);
        *ret = t;
        return 0;
}

void sandbox_table_free(struct sandbox_table *t)
{
        if (!t)
                return;
        if (t->idle_timer) {
                uv_timer_stop(t->idle_timer);
                uv_close((uv_handle_t *)t->idle_timer, on_watch_closed);
        }
        if (t->pool_timer) {
                uv_timer_stop(t->pool_timer);
                uv_close((uv_handle_t *)t->pool_timer, on_watch_closed);
                t->pool_timer = NULL;
        }
        /* Pool sandboxes are the daemon's own: they go with it (a restarted daemon would
         * remove them anyway). */
        while (t->pool)
                pool_discard(t->pool);
        /* Sandboxes keep running without the daemon; only our links to them go. */
        for (unsigned i = 0; i < TABLE_BUCKETS; i++) {
                struct sandbox *s = t->buckets[i];
                while (s) {
                        struct sandbox *next = s->next;
                        if (s->agent) {
                                struct agent_conn *c = s->agent;
                                s->agent = NULL;
                                agent_conn_close(c);
                        }
                        stop_exit_watch(s);
                        if (s->ct.pidfd >= 0)
                                close(s->ct.pidfd);
                        s->destroyed = true;
                        sandbox_unref(s);
                        s = next;
                }
                t->buckets[i] = NULL;
        }
        store_close(t->store);
        runtime_free(t->rt);
        host_claim_free(t->claim);
        if (t->lock_fd >= 0)
                close(t->lock_fd);
        free(t->data_dir);
        free(t->images_dir);
        free(t->default_image);
        free(t);
}
