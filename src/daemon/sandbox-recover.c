/* Start-up of the sandbox table (sandbox-internal.h): the instance claim (network range,
 * host uids), the registry (store.c) loaded or rebuilt and migrated to slot naming, the
 * sandboxes of an earlier daemon reattached, leftovers swept, and the table's end. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/log.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"
#include "daemon/store.h"
#include "daemon/tenant.h"
#include "runtime/host-claim.h"

/* An outbound sandbox whose veth is gone gets it again as a start makes it (the slot's
 * addresses and route, its allowlist): a sandbox restored from a checkpoint has a network
 * namespace of CRIU's making with only lo, since a veth cannot cross a restore (decision
 * 0050); the preview proxy reaches it either way (it connects inside the namespace).
 * Returns 0 or -errno with *err set. */
static int reattach_network(struct sandbox *s, struct cella_error *err)
{
        struct net *n = runtime_net(s->table->rt);
        struct net_allow allow[CELLA_NETWORK_ALLOW_MAX];

        if (!s->network || !n || !net_available(n) || net_sandbox_plugged(n, s->slot))
                return 0;
        log_info("sandbox '%s': its network namespace has no veth (a restored checkpoint); "
                 "made again",
                 s->name);
        return net_sandbox_setup(n, s->slot, s->ct.pid, allow, network_allow_list(s, allow), err);
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
        if (watch_exit(s) < 0 || connect_agent(s, &e) < 0 || reattach_network(s, &e) < 0) {
                log_warn("sandbox '%s' not reattached: %s", s->name,
                         e.msg[0] ? e.msg : "cannot watch its process");
                sandbox_unlink(s);
                return -1;
        }
        s->state = SANDBOX_RUNNING;
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

        if (rec->slot < 0 || (unsigned)rec->slot >= t->uid_slots || t->slot_used[rec->slot] ||
            tenant_internal_name_check(rec->name, name) < 0 || /* a tenant's too (0053) */
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
        s->sleep_memory = rec->sleep_mode && strcmp(rec->sleep_mode, "memory") == 0;
        s->default_session = rec->default_session != 0;
        s->network = rec->network && strcmp(rec->network, "outbound") == 0;
        s->snapshot = rec->snapshot && rec->snapshot[0] ? strdup(rec->snapshot) : NULL;
        s->network_allow =
                json_loads(rec->network_allow_json ? rec->network_allow_json : "[]", 0, NULL);
        if (!json_is_array(s->network_allow)) {
                json_decref(s->network_allow);
                s->network_allow = json_array();
        }
        if (!s->image || !s->instance_type || !s->env || !s->labels || !s->network_allow ||
            (rec->snapshot && rec->snapshot[0] && !s->snapshot)) {
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
        /* Whatever is left of it is stopped; it restarts cleanly on next use. One that
         * sleeps with its memory (a checkpoint in its dir, 0050) still does: its next use
         * restores it. */
        sandbox_teardown(s, SANDBOX_STOPPED, &e);
        if (sandbox_checkpoint_bytes(s) > 0) {
                s->state = SANDBOX_SLEEPING;
                log_info("sandbox '%s' sleeping with its memory (slot %u)", s->name, s->slot);
                return 0;
        }
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

        if (rec->slot < 0 || (unsigned)rec->slot >= t->uid_slots ||
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
        return slot_id_parse(id, strlen(id), CELLA_UID_SLOTS_MAX, &slot) == 0 && t->slot_used[slot];
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
                           const uint32_t *uid_base, unsigned max_sandboxes, bool probe_only,
                           struct host_claim **ret, struct cella_error *err)
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
                .uid_slots = host_claim_slots(max_sandboxes),
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
        t->dir.ops = &sandbox_local_ops;
        t->loop = loop;
        t->lock_fd = -EBADF;
        pthread_mutex_init(&t->rt_lock, NULL);
        t->data_dir = strdup(cfg->data_dir);
        t->images_dir = strdup(cfg->images_dir);
        t->default_image = strdup(cfg->default_image ? cfg->default_image : "default");
        t->max_sandboxes = cfg->max_sandboxes ? cfg->max_sandboxes : CELLA_DEFAULT_MAX_SANDBOXES;
        t->disk_limit_override = cfg->disk_limit_override;
        t->disk_overcommit =
                cfg->disk_overcommit > 0 ? cfg->disk_overcommit : CELLA_DISK_OVERCOMMIT_DEFAULT;
        t->disk_overcommit_refuse = cfg->disk_overcommit_refuse;
        /* "" where the host check passed: sleepMode "memory" checkpoints (0050). */
        snprintf(t->memsleep_reason, sizeof(t->memsleep_reason), "%s",
                 cfg->memory_sleep_unavailable ? cfg->memory_sleep_unavailable : "");
        if (t->max_sandboxes > CELLA_UID_SLOTS_MAX)
                t->max_sandboxes = CELLA_UID_SLOTS_MAX;
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
        if (sandbox_instance_claim(t->data_dir, cfg->network_range, cfg->uid_base, t->max_sandboxes,
                                   false, &t->claim, err) < 0) {
                sandbox_table_free(t);
                return -1;
        }
        log_info("%s", host_claim_describe(t->claim));
        t->uid_base = host_claim_uid_base(t->claim);
        t->uid_slots = host_claim_uid_slots(t->claim);
        net_addr_format(host_claim_range(t->claim)->addr, ip, sizeof(ip));
        snprintf(range, sizeof(range), "%s/%u", ip, host_claim_range(t->claim)->prefix);
        rcfg.network_range = range;
        snprintf(templates, sizeof(templates), "%s/disk-templates", t->data_dir);
        rcfg.disk_template_dir = templates;
        rcfg.data_dir = t->data_dir;
        if (runtime_new(&rcfg, &t->rt, err) < 0) {
                sandbox_table_free(t);
                return -1;
        }
        log_info("%s", runtime_disk_state(t->rt));
        log_info("%s", runtime_reflink_state(t->rt));
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
                unsigned snaps = 0;
                if (rebuild_snapshots(t->store, t->data_dir, &snaps, err) < 0) {
                        sandbox_table_free(t);
                        return -1;
                }
                if (snaps)
                        log_warn("registry: %u snapshots rebuilt from their files", snaps);
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
        sandbox_table_snapshot_sweep(t);
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
        /* Starts in progress end first (a pool build's sandbox then joins the pool). */
        sandbox_join_all(t);
        /* Claims not yet committed are written before the daemon lets go of them. */
        sandbox_table_commit(t);
        if (t->commit_check) {
                uv_check_stop(t->commit_check);
                uv_close((uv_handle_t *)t->commit_check, on_handle_closed);
                t->commit_check = NULL;
        }
        if (t->idle_timer) {
                uv_timer_stop(t->idle_timer);
                uv_close((uv_handle_t *)t->idle_timer, on_handle_closed);
        }
        if (t->pool_timer) {
                uv_timer_stop(t->pool_timer);
                uv_close((uv_handle_t *)t->pool_timer, on_handle_closed);
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
                        sandbox_unlink(s);
                        s->state = SANDBOX_DESTROYED;
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
        pthread_mutex_destroy(&t->rt_lock);
        free(t);
}
