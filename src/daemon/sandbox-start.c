/* Starting, waiting for a start and stopping a sandbox (sandbox-internal.h): the start as
 * a job that runs on the loop or on its thread pool, the callers that wait for it, the
 * watch of PID 1, the agent link, and the one teardown every stop goes through. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/log.h"
#include "common/probe.h"
#include "common/timeutil.h"
#include "daemon/instance-type.h"
#include "daemon/metrics.h"
#include "daemon/rebuild.h"
#include "daemon/sandbox-internal.h"
#include "runtime/checkpoint.h"

static void stop_exit_watch(struct sandbox *s)
{
        if (!s->exit_watch)
                return;
        uv_poll_stop(s->exit_watch);
        uv_close((uv_handle_t *)s->exit_watch, on_handle_closed);
        s->exit_watch = NULL;
}

/* ---- PID 1's pidfd and the agent link (decision 0060) ----
 *
 * The agent link's other end is PID 1's: the agent listens on a socket PID 1 made and
 * listened on itself (runtime/container-child.c), accepted connections are close-on-exec
 * (libuv's accept4) and no process outside the sandbox's pid namespace gets the agent's
 * descriptors, so the link's end hangs up when PID 1 exits (the kernel kills the pid
 * namespace with it). While the link is up it watches the exit (on_agent_lost), and
 * cellad holds no pidfd: one descriptor per running sandbox. A use that needs the pidfd
 * takes it from the link (SO_PEERPIDFD: the pid the kernel recorded at PID 1's listen(),
 * no pid race) and lets it go after; when the link goes (lost, or closed for a checkpoint
 * or a memory fork's dump) the pidfd and its watch take over as before. A link whose
 * other end is not PID 1's (a kernel without SO_PEERPIDFD, an agent started by an
 * earlier build on the host) keeps the pidfd and its watch throughout. */

/* The pid behind pidfd fd (/proc/self/fdinfo: in our pid namespace), -1 if gone. */
static pid_t pidfd_pid(int fd)
{
        char p[64], line[128];
        pid_t pid = -1;
        int v;

        snprintf(p, sizeof(p), "/proc/self/fdinfo/%d", fd);
        FILE *f = fopen(p, "re");
        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "Pid:\t%d", &v) == 1) {
                        pid = (pid_t)v;
                        break;
                }
        fclose(f);
        return pid;
}

/* The link is connected: if its other end is PID 1's, the link watches the exit and the
 * pidfd with its watch is let go. */
static void pidfd_to_link(struct sandbox *s)
{
        int fd = agent_conn_peer_pidfd(s->agent);
        bool pid1 = fd >= 0 && s->ct.pid > 0 && pidfd_pid(fd) == s->ct.pid;

        if (fd >= 0)
                close(fd);
        s->pid_by_link = pid1;
        if (!pid1)
                return;
        stop_exit_watch(s);
        if (s->ct.pidfd >= 0)
                close(s->ct.pidfd);
        s->ct.pidfd = -EBADF;
}

int sandbox_pidfd_hold(struct sandbox *s)
{
        if (s->ct.pidfd >= 0)
                return 0;
        if (!s->pid_by_link || !s->agent)
                return -ESRCH;
        int fd = agent_conn_peer_pidfd(s->agent);
        if (fd < 0)
                return fd;
        s->ct.pidfd = fd;
        return 0;
}

void sandbox_pidfd_release(struct sandbox *s)
{
        if (s->pid_by_link && s->agent && !s->exit_watch && s->ct.pidfd >= 0) {
                close(s->ct.pidfd);
                s->ct.pidfd = -EBADF;
        }
}

bool sandbox_alive(struct sandbox *s)
{
        /* the link up: PID 1 lives; hung up: its pidfd says (kept: the link's loss takes
         * it over) */
        if (s->ct.pidfd < 0 && s->pid_by_link && s->agent && !agent_conn_peer_gone(s->agent))
                return true;
        sandbox_pidfd_hold(s);
        return runtime_container_is_alive(&s->ct);
}

static void container_exited(struct sandbox *s, int wstatus);

/* The link goes (s->agent still set): PID 1's pidfd and its watch take over. */
static void link_to_pidfd(struct sandbox *s)
{
        if (!s->pid_by_link)
                return;
        if (sandbox_pidfd_hold(s) < 0 && s->ct.pid > 0 && s->pid_start > 0 &&
            proc_start_time(s->ct.pid) == s->pid_start) {
                /* a kernel that gives no pidfd of an exited peer: by its pid, checked by
                 * its start time before and after */
                int fd = (int)syscall(SYS_pidfd_open, s->ct.pid, 0);
                if (fd >= 0 && proc_start_time(s->ct.pid) != s->pid_start) {
                        close(fd);
                        fd = -EBADF;
                }
                s->ct.pidfd = fd >= 0 ? fd : -EBADF;
        }
        s->pid_by_link = false;
        if (s->ct.pidfd >= 0 && !s->exit_watch && watch_exit(s) < 0)
                log_warn("sandbox '%s': cannot watch its PID 1", s->name);
}

static void close_agent(struct sandbox *s)
{
        struct agent_conn *c = s->agent;

        link_to_pidfd(s);
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
        bool exited = false;

        if (s->agent == c) {
                /* the link watched the exit: the pidfd does from here (readable at once
                 * when PID 1 has exited) */
                exited = s->pid_by_link;
                link_to_pidfd(s);
                exited = exited && s->ct.pidfd < 0;
                s->agent = NULL;
        }
        log_info("sandbox '%s': agent connection closed (%s)", s->name,
                 err ? strerror(-err) : "ok");
        if (exited) /* no pidfd of it to be had: gone */
                container_exited(s, 0);
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
        container_exited(s, wstatus);
}

static void container_exited(struct sandbox *s, int wstatus)
{
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

/* The agent listens inside the sandbox (/run/.cella/agent.sock): its socket is reached
 * through a descriptor resolved in the sandbox's root (runtime_container_agent_socket), so
 * a symlink the tenant puts there leads to nothing of the host's. libuv connects at once
 * (a unix socket's connect completes or fails in the call), so the descriptor is closed
 * right after. A sandbox started by a build that bound the socket in its dir on the host
 * (cellad's 0700 dir, never the tenant's) is reached there. */
int connect_agent(struct sandbox *s, struct cella_error *err)
{
        char dir[CELLA_PATH_MAX], sock[CELLA_PATH_MAX + 16];
        struct stat st;
        int r;

        _cleanup_close_ int fd = runtime_container_agent_socket(&s->ct);
        if (fd >= 0)
                snprintf(sock, sizeof(sock), "/proc/self/fd/%d", fd);
        else if (fd == -ENOENT && sandbox_dir(s, dir, sizeof(dir)) >= 0 &&
                 snprintf(sock, sizeof(sock), "%s/agent.sock", dir) < (int)sizeof(sock) &&
                 lstat(sock, &st) == 0 && S_ISSOCK(st.st_mode))
                log_info("sandbox '%s': its agent listens at %s (started by an earlier build)",
                         s->name, sock);
        else
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "the sandbox's agent socket: %s", strerror(-fd));
        r = agent_conn_new(s->table->loop, sock, on_agent_lost, s, &s->agent, err);
        if (r == 0)
                pidfd_to_link(s);
        return r;
}

/* The container spec of s (paths into dir and rootfs, CELLA_PATH_MAX each; the allowlist
 * into allow) after checking that its image is built. */
static int start_spec(struct sandbox *s, char *dir, char *rootfs, char (*layers)[CELLA_PATH_MAX],
                      const char **layer_ptrs, struct container_layer *layer_info,
                      struct net_allow *allow, struct container_spec *ret, struct cella_error *err)
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
        /* Its snapshot's layers (docs/decisions/0048) above the image's. */
        size_t n_layers = 0;
        if (s->snapshot) {
                if (sandbox_table_snapshot_chain(t, s->snapshot, layers, layer_info,
                                                 CELLA_SNAPSHOT_MAX_LAYERS, &n_layers, err) < 0)
                        return -1;
                for (size_t i = 0; i < n_layers; i++) {
                        layer_ptrs[i] = layers[i];
                        if (stat(layers[i], &st) < 0 || !S_ISDIR(st.st_mode))
                                return cella_error_set(err, CELLA_E_SNAPSHOT_NOT_FOUND,
                                                       "the files of snapshot '%s' are gone",
                                                       s->snapshot);
                }
        }
        r = fs_mkdir_p(dir, 0700);
        if (r < 0)
                return cella_error_errno(err, r, "create sandbox directory %s", dir);
        *ret = (struct container_spec){
                .id = s->id,
                .hostname = s->name,
                .rootfs = rootfs,
                .layers = layer_ptrs,
                .n_layers = n_layers,
                .layer_info = layer_info,
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

/* ---- starting ----
 *
 * A start is a job: start_spec() (on the loop: paths, limits, the image checked), then
 * start_run() (the runtime's work: the sweep of leftovers, the container's start, its disk
 * made and formatted, its network; under the table's runtime lock), then start_complete()
 * (on the loop: the exit watch, the agent link, the record). sandbox_start() runs the three
 * in a row; sandbox_start_async() runs start_run() on the loop's thread pool, and a start
 * in progress is waited for by sandbox_join() where a caller cannot wait otherwise.
 *
 * Off the loop, start_run() touches only the job, the runtime and the log; no uv handle and
 * no sandbox field. What of struct runtime a start shares with the loop's runtime calls is
 * its network (one netlink socket and nft table, net.c): those calls hold rt_lock, as a
 * start does. The rest a start changes belongs to its own id (cgroups, files, disk), and
 * runtime_container_destroy and _rename of other sandboxes read only what runtime_new set
 * (the cgroup layout, our own namespaces' fds), so they run beside a start unlocked. The runtime's child between clone3 and exec uses only what was computed
 * before the clone and async-signal-safe calls (runtime/container.c), so cloning from a
 * worker thread is safe; mkfs is spawned with every signal blocked (runtime/disk.c). */

struct start_job {
        uv_work_t work;
        struct sandbox *s; /* referenced until the job is freed */
        struct start_job *next;
        char dir[CELLA_PATH_MAX];
        char rootfs[CELLA_PATH_MAX];
        char layers[CELLA_SNAPSHOT_MAX_LAYERS][CELLA_PATH_MAX];
        const char *layer_ptrs[CELLA_SNAPSHOT_MAX_LAYERS];
        struct container_layer layer_info[CELLA_SNAPSHOT_MAX_LAYERS];
        struct net_allow allow[CELLA_NETWORK_ALLOW_MAX];
        struct container_spec spec;
        struct container ct;
        struct cella_error err;
        /* A wake from a memory checkpoint (<dir>/checkpoint, 0050): tried (restore),
         * done (restored), or why not (restore_err: the wake is then from the files). */
        char images[CELLA_PATH_MAX];
        bool restore, restored;
        /* Not a start: a memory sleep's checkpoint into images (checkpoint.partial) of
         * the container ct, id, network, slot; sockets: the agent's before its link
         * closed (runtime_checkpoint_dump). */
        bool checkpoint;
        char id[16];
        bool network;
        unsigned slot;
        int sockets;
        char restore_err[CRIU_REASON_MAX];
        int64_t old_instance; /* the exposures' instance when it was checkpointed */
        /* A memory fork: the parent's dump (fork_dump: checkpoint's fields, the tree left
         * running, its veth given back with allow; fork_cb on the loop), or the child's
         * first start (fork_child: a restore that fails fails the start). */
        bool fork_dump, fork_child;
        size_t n_allow;
        void (*fork_cb)(struct sandbox *s, const struct cella_error *err, void *ud);
        void *fork_ud;
        enum sandbox_state prev;
        int r;
        uint64_t t0, t1, t2;
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool ran;      /* start_run() is over (under lock) */
        bool finished; /* start_finish() has run (loop only) */
};

static void job_init(struct start_job *j, struct sandbox *s)
{
        memset(j, 0, sizeof(*j));
        j->s = s;
        j->ct.pid = -1;
        j->ct.pidfd = -EBADF;
        j->prev = s->state;
}

int sandbox_path(const struct sandbox *s, const char *name, char *out, size_t outsz)
{
        int n = snprintf(out, outsz, "%s/sandboxes/%s/%s", s->table->data_dir, s->id, name);
        return (n < 0 || (size_t)n >= outsz) ? -ENAMETOOLONG : 0;
}

/* The bytes of the files in dir (a checkpoint's images: one level). */
static uint64_t dir_bytes(const char *dir)
{
        uint64_t sum = 0;
        struct stat st;
        DIR *d = opendir(dir);

        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir(d));)
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                    S_ISREG(st.st_mode))
                        sum += (uint64_t)st.st_size;
        closedir(d);
        return sum;
}

uint64_t sandbox_checkpoint_bytes(struct sandbox *s)
{
        char p[CELLA_PATH_MAX];

        if (s->ckpt_bytes < 0)
                s->ckpt_bytes = s->state != SANDBOX_DESTROYED &&
                                                sandbox_path(s, "checkpoint", p, sizeof(p)) == 0
                                        ? (int64_t)dir_bytes(p)
                                        : 0;
        return (uint64_t)s->ckpt_bytes;
}

/* The instance the exposures had when images were taken (0 when unknown). */
static int64_t images_instance(const char *images)
{
        char p[CELLA_PATH_MAX + 32], buf[32] = {0};
        snprintf(p, sizeof(p), "%s/cella-instance", images);
        _cleanup_close_ int fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || read(fd, buf, sizeof(buf) - 1) <= 0)
                return 0;
        return strtoll(buf, NULL, 10);
}

/* A wake from the memory checkpoint at j->images, under rt_lock: restored (the images
 * removed), or the reason in j->restore_err with the images moved aside to
 * checkpoint.failed (never deleted before a good wake) and what the attempt left swept. */
static void restore_run(struct sandbox_table *t, struct start_job *j)
{
        char aside[CELLA_PATH_MAX + 16];

        if (t->memsleep_reason[0]) {
                snprintf(j->restore_err, sizeof(j->restore_err), "%s", t->memsleep_reason);
        } else {
                j->old_instance = images_instance(j->images);
                j->r = runtime_checkpoint_restore(t->rt, &j->spec, j->images, &j->ct, &j->err);
                if (j->r == 0 && j->fork_child &&
                    runtime_container_rename(t->rt, &j->ct, j->spec.dir, j->spec.hostname,
                                             &j->err) < 0) {
                        /* the parent's hostname is not the child's */
                        snprintf(j->restore_err, sizeof(j->restore_err), "%s", j->err.msg);
                        runtime_container_destroy(t->rt, j->spec.id, NULL, NULL);
                        j->r = cella_error_set(&j->err, CELLA_E_MEMORY_FORK_FAILED,
                                               "fork with memory: %s", j->restore_err);
                        return;
                }
                if (j->r == 0) {
                        /* removed off the wake's path (remove_restored) */
                        char done[CELLA_PATH_MAX + 16];
                        j->restored = true;
                        snprintf(done, sizeof(done), "%s.done", j->images);
                        rm_rf(done);
                        if (rename(j->images, done) < 0)
                                rm_rf(j->images);
                        return;
                }
                snprintf(j->restore_err, sizeof(j->restore_err), "%s", j->err.msg);
                memset(&j->err, 0, sizeof(j->err));
                runtime_container_destroy(t->rt, j->spec.id, NULL, NULL);
        }
        if (j->fork_child) {
                /* a child without the processes asked for is not made (the caller
                 * destroys it, its dir and these images with it) */
                j->r = cella_error_set(&j->err, CELLA_E_MEMORY_FORK_FAILED, "fork with memory: %s",
                                       j->restore_err);
                return;
        }
        snprintf(aside, sizeof(aside), "%s.failed", j->images);
        rm_rf(aside);
        if (rename(j->images, aside) < 0)
                rm_rf(j->images);
}

/* The runtime's part; any thread. */
static void start_run(struct sandbox_table *t, struct start_job *j)
{
        if (j->fork_dump) {
                pthread_mutex_lock(&t->rt_lock);
                j->t0 = time_mono_us();
                j->r = runtime_checkpoint_dump_running(t->rt, j->id, &j->ct, j->network, j->slot,
                                                       j->allow, j->n_allow, j->sockets, j->images,
                                                       &j->err);
                if (j->r < 0 && j->err.code != CELLA_E_MEMORY_FORK_FAILED) {
                        char why[sizeof(j->err.msg)];
                        snprintf(why, sizeof(why), "%s", j->err.msg);
                        cella_error_set(&j->err, CELLA_E_MEMORY_FORK_FAILED, "fork with memory: %s",
                                        why);
                }
                j->t2 = time_mono_us();
                pthread_mutex_unlock(&t->rt_lock);
                return;
        }
        if (j->checkpoint) {
                pthread_mutex_lock(&t->rt_lock);
                j->t0 = time_mono_us();
                j->r = runtime_checkpoint_dump(t->rt, j->id, &j->ct, j->network, j->slot,
                                               j->sockets, j->images, &j->err);
                j->t2 = time_mono_us();
                pthread_mutex_unlock(&t->rt_lock);
                return;
        }
        pthread_mutex_lock(&t->rt_lock);
        /* Leftovers of an earlier run (a daemon that died, a crashed agent) go first. */
        j->t0 = time_mono_us();
        runtime_container_destroy(t->rt, j->spec.id, NULL, NULL);
        j->t1 = time_mono_us();
        if (j->restore)
                restore_run(t, j);
        if (!j->restored && !(j->fork_child && j->r < 0))
                j->r = runtime_container_start(t->rt, &j->spec, &j->ct, &j->err);
        j->t2 = time_mono_us();
        pthread_mutex_unlock(&t->rt_lock);
}

struct remove_work {
        uv_work_t work;
        char path[CELLA_PATH_MAX + 16];
};

static void on_remove_work(uv_work_t *w)
{
        struct remove_work *r = w->data;
        int e = rm_rf(r->path);
        if (e < 0)
                log_warn("remove %s: %s", r->path, strerror(-e));
}

static void on_remove_done(uv_work_t *w, int status)
{
        (void)status;
        free(w->data);
}

/* The images of a good restore (<dir>/checkpoint.done) removed on the thread pool. */
static void remove_restored(struct sandbox *s)
{
        struct remove_work *r = calloc(1, sizeof(*r));

        if (!r || sandbox_path(s, "checkpoint.done", r->path, sizeof(r->path)) < 0) {
                free(r);
                return;
        }
        r->work.data = r;
        if (uv_queue_work(s->table->loop, &r->work, on_remove_work, on_remove_done) < 0) {
                rm_rf(r->path);
                free(r);
        }
}

/* Is there a memory checkpoint to wake s from? Then j restores it first. */
static void plan_restore(struct sandbox *s, struct start_job *j)
{
        struct stat st;

        j->restore = sandbox_path(s, "checkpoint", j->images, sizeof(j->images)) == 0 &&
                     lstat(j->images, &st) == 0 && S_ISDIR(st.st_mode);
        j->fork_child = j->restore && s->memory_fork;
}

struct port_move {
        struct store_port p[64];
        char names[64][CELLA_PREVIEW_PORT_NAME_MAX + 1];
        char tokens[64][CELLA_PREVIEW_TOKEN_MAX + 1];
        size_t n;
        int64_t from;
};

static int collect_port(const struct store_port *p, void *userdata)
{
        struct port_move *m = userdata;

        if (p->instance != m->from || m->n >= ARRAY_SIZE(m->p))
                return 0;
        snprintf(m->names[m->n], sizeof(m->names[0]), "%s", p->name ? p->name : "");
        snprintf(m->tokens[m->n], sizeof(m->tokens[0]), "%s", p->token);
        m->p[m->n] = (struct store_port){p->port, m->names[m->n], m->tokens[m->n], 0};
        m->n++;
        return 0;
}

/* The exposures of s's checkpointed run carried over to its restored PID 1 (its preview
 * URLs stay valid: the same processes answer behind them). */
static void move_exposures(struct sandbox *s, int64_t from)
{
        struct store *st = s->table->store;
        struct port_move *m = calloc(1, sizeof(*m));

        if (!m || from == 0) {
                free(m);
                return;
        }
        m->from = from;
        store_port_foreach(st, s->name, collect_port, m, NULL);
        for (size_t i = 0; i < m->n; i++) {
                struct cella_error e = {0};
                m->p[i].instance = s->pid_start;
                if (store_port_save(st, s->name, &m->p[i], &e) < 0)
                        log_warn("sandbox '%s': port %" PRId64 " after the restore: %s", s->name,
                                 m->p[i].port, e.msg);
        }
        free(m);
}

/* Queue start job j of s on the loop's thread pool; s is then STARTING with j as its job
 * (the caller sets what kind of job it is). -1 if it could not be queued: j's sync objects
 * are destroyed, j and s left as they were for the caller to undo. */
static void on_start_work(uv_work_t *w);
static void on_start_done(uv_work_t *w, int status);

static int job_queue(struct sandbox *s, struct start_job *j)
{
        struct sandbox_table *t = s->table;

        pthread_mutex_init(&j->lock, NULL);
        pthread_cond_init(&j->cond, NULL);
        j->work.data = j;
        if (uv_queue_work(t->loop, &j->work, on_start_work, on_start_done) < 0) {
                pthread_cond_destroy(&j->cond);
                pthread_mutex_destroy(&j->lock);
                return -1;
        }
        sandbox_ref(s);
        s->state = SANDBOX_STARTING;
        s->job = j;
        j->next = t->jobs;
        t->jobs = j;
        return 0;
}

int sandbox_checkpoint_async(struct sandbox *s, struct cella_error *err)
{
        char done[CELLA_PATH_MAX], p[CELLA_PATH_MAX + 32], num[32];
        int r;

        _cleanup_free_ struct start_job *j = malloc(sizeof(*j));
        if (!j)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        job_init(j, s);
        j->checkpoint = true;
        snprintf(j->id, sizeof(j->id), "%s", s->id);
        j->network = s->network;
        j->slot = s->slot;
        if (sandbox_path(s, "checkpoint.partial", j->images, sizeof(j->images)) < 0 ||
            sandbox_path(s, "checkpoint", done, sizeof(done)) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        rm_rf(j->images);
        rm_rf(done);
        if (sandbox_path(s, "checkpoint.done", p, sizeof(p)) == 0)
                rm_rf(p); /* a restore's, left by a stop of cellad before its removal */
        if (mkdir(j->images, 0700) < 0)
                return cella_error_errno(err, errno, "mkdir %s", j->images);
        snprintf(p, sizeof(p), "%s/cella-instance", j->images);
        snprintf(num, sizeof(num), "%" PRId64 "\n", s->pid_start);
        {
                _cleanup_close_ int fd =
                        open(p, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0 || write(fd, num, strlen(num)) != (ssize_t)strlen(num)) {
                        r = cella_error_errno(err, errno ? errno : EIO, "write %s", p);
                        rm_rf(j->images);
                        return r;
                }
        }
        /* The agent told and its link closed here, on the loop; the dump waits for the
         * agent to close its end. Requests meanwhile wait for the job as for a start. */
        j->sockets = checkpoint_sockets(s->ct.pid);
        if (s->agent)
                agent_conn_control(s->agent, FRAME_CHECKPOINT);
        close_agent(s);
        stop_exit_watch(s);
        j->ct = s->ct;
        if (job_queue(s, j) < 0) {
                rm_rf(j->images);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "queue the checkpoint");
        }
        s->checkpointing = true;
        TAKE_PTR(j);
        return 0;
}

/* The loop's part of a memory sleep's checkpoint (j done): asleep with its memory, or
 * with its files only when the dump failed (memorySleepError says why); then a start
 * (a restore) for the requests that came meanwhile. */
static void checkpoint_finish(struct sandbox *s, struct start_job *j)
{
        char done[CELLA_PATH_MAX], how[96] = "";
        struct cella_error e = j->err, te = {0};
        int r = j->r;

        s->checkpointing = false;
        if (r == 0 &&
            (sandbox_path(s, "checkpoint", done, sizeof(done)) < 0 || rename(j->images, done) < 0))
                r = cella_error_errno(&e, errno ? errno : ENAMETOOLONG, "rename %s", j->images);
        if (r < 0) {
                rm_rf(j->images);
                snprintf(s->memsleep_note, sizeof(s->memsleep_note),
                         "its memory was not checkpointed (%s); it slept with its files", e.msg);
                log_warn("sandbox '%s': %s", s->name, s->memsleep_note);
        } else {
                s->ckpt_bytes = (int64_t)dir_bytes(done);
                s->memsleep_note[0] = '\0';
                snprintf(how, sizeof(how), " with its memory (%.1f MiB, %.0f ms)",
                         (double)s->ckpt_bytes / (1 << 20), (double)(j->t2 - j->t0) / 1000.0);
        }
        if (sandbox_teardown(s, SANDBOX_SLEEPING, &te) < 0)
                log_warn("sandbox '%s': sleep: %s", s->name, te.msg);
        memset(&te, 0, sizeof(te));
        if (sandbox_persist(s, &te) < 0)
                log_warn("sandbox '%s': %s", s->name, te.msg);
        if (s->sleepers) /* POST /sleep: asleep now */
                log_info("sandbox '%s' sleeping on request (POST /sleep)%s", s->name, how);
        else
                log_info("sandbox '%s' sleeping after %lld s idle%s", s->name,
                         (long long)(s->sleep_after_ms / 1000), how);
        sandbox_sleepers_flush(s, NULL);
        if (s->waiters) {
                memset(&te, 0, sizeof(te));
                if (sandbox_start_async(s, &te) < 0)
                        sandbox_waiters_flush(s, &te);
        }
}

int sandbox_memfork_dump_async(struct sandbox *s, const char *images,
                               void (*cb)(struct sandbox *s, const struct cella_error *err,
                                          void *ud),
                               void *ud, struct cella_error *err)
{

        if (s->state != SANDBOX_RUNNING || s->job || s->snaps)
                return cella_error_set(
                        err, CELLA_E_SANDBOX_UNAVAILABLE, "sandbox '%s' is %s; try again", s->name,
                        s->state != SANDBOX_RUNNING ? "not running" : "being captured");
        _cleanup_free_ struct start_job *j = malloc(sizeof(*j));
        if (!j)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        job_init(j, s);
        j->fork_dump = true;
        j->fork_cb = cb;
        j->fork_ud = ud;
        snprintf(j->id, sizeof(j->id), "%s", s->id);
        snprintf(j->images, sizeof(j->images), "%s", images);
        j->network = s->network;
        j->slot = s->slot;
        j->n_allow = network_allow_list(s, j->allow);
        /* as a memory sleep: the agent told (dumpable) and its link closed here; the dump
         * waits for the agent to close its end. The exit watch stays: the tree runs on. */
        j->sockets = checkpoint_sockets(s->ct.pid);
        if (s->agent)
                agent_conn_control(s->agent, FRAME_CHECKPOINT);
        close_agent(s);
        j->ct = s->ct;
        if (job_queue(s, j) < 0) {
                struct cella_error e = {0};
                if (connect_agent(s, &e) < 0)
                        log_warn("sandbox '%s': %s", s->name, e.msg);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "queue the memory fork");
        }
        s->forking = true;
        TAKE_PTR(j);
        return 0;
}

/* The loop's part of a memory fork's dump (j done): the parent running again with its
 * agent connected (the connection makes it undumpable again), then the caller told. */
static void memfork_dump_finish(struct sandbox *s, struct start_job *j)
{
        struct cella_error e = {0};

        s->forking = false;
        s->state = SANDBOX_RUNNING;
        if (connect_agent(s, &e) < 0) {
                /* its agent unreachable: stopped, as a lost agent is (its files stay) */
                log_warn("sandbox '%s': after a memory fork's dump: %s", s->name, e.msg);
                if (j->r == 0) {
                        struct cella_error te = {0};
                        runtime_container_freeze(s->table->rt, s->id, false, &te);
                }
                sandbox_teardown(s, SANDBOX_STOPPED, NULL);
                if (j->r == 0)
                        j->r = cella_error_set(&j->err, CELLA_E_MEMORY_FORK_FAILED,
                                               "fork with memory: the parent's agent after the "
                                               "dump: %s",
                                               e.msg);
        }
        if (j->r == 0)
                log_info("sandbox '%s': memory fork's dump (%.1f MiB) in %.0f ms", s->name,
                         (double)dir_bytes(j->images) / (1 << 20),
                         (double)(j->t2 - j->t0) / 1000.0);
        else
                log_warn("sandbox '%s': %s", s->name, j->err.msg);
        j->fork_cb(s, j->r == 0 ? NULL : &j->err, j->fork_ud);
        sandbox_waiters_flush(s, s->state == SANDBOX_RUNNING ? NULL : &j->err);
}

/* The loop's part after start_run(): 0 with s RUNNING, or -1 with err and s back in the
 * state it was in, everything of the attempt undone. */
static int start_complete(struct sandbox *s, struct start_job *j, struct cella_error *err)
{
        if (j->r < 0) {
                metrics_start_failed();
                *err = j->err;
                s->state = j->prev;
                return -1;
        }
        PROBE_BEGIN();
        s->ct = j->ct;
        s->disk_promise = -1; /* its disk image may be new */
        s->pid_start = proc_start_time(s->ct.pid);
        PROBE("pid start time");
        if (connect_agent(s, err) < 0)
                goto undo_container;
        PROBE("agent connect");
        /* the pidfd watches the exit where the link cannot (pidfd_to_link) */
        if (s->ct.pidfd >= 0 && !s->exit_watch && watch_exit(s) < 0) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "watch sandbox process");
                goto undo_container;
        }
        PROBE("exit watch");
        s->state = SANDBOX_RUNNING;
        s->memory_fork = false; /* restored: later wakes are a memory sleep's */
        if (j->restore) {
                s->ckpt_bytes = 0; /* restored and removed, or moved aside */
                if (j->restored) {
                        remove_restored(s);
                        s->memsleep_note[0] = '\0';
                        move_exposures(s, j->old_instance);
                        log_info("sandbox '%s' woke from its memory checkpoint (pid %d) in "
                                 "%.2f ms",
                                 s->name, (int)s->ct.pid,
                                 (double)(time_mono_us() - j->t0) / 1000.0);
                } else {
                        snprintf(s->memsleep_note, sizeof(s->memsleep_note),
                                 "its memory checkpoint was not restored (%s); it woke with its "
                                 "files (the checkpoint is kept aside as checkpoint.failed)",
                                 j->restore_err);
                        log_warn("sandbox '%s': %s", s->name, s->memsleep_note);
                }
        }
        log_info("sandbox '%s' started (slot %u, pid %d, image %s, %s, network %s) in %.2f ms "
                 "(sweep %.2f ms, container %.2f ms)",
                 s->name, s->slot, (int)s->ct.pid, s->image, s->instance_type,
                 s->network ? "outbound" : "none", (double)(time_mono_us() - j->t0) / 1000.0,
                 (double)(j->t1 - j->t0) / 1000.0, (double)(j->t2 - j->t1) / 1000.0);
        /* The record (with the pid, so that a restarted daemon finds it) is written here
         * once per start; a sandbox the registry does not know must not run (a pool
         * sandbox has no record: a restarted daemon removes it). */
        if (!s->pooled && sandbox_persist(s, err) < 0)
                goto undo_container;
        PROBE("registry record");
        PROBE_END("start on the loop");
        metrics_start_done(time_mono_us() - j->t0);
        return 0;

undo_container:
        metrics_start_failed();
        sandbox_teardown(s, j->prev, NULL);
        return -1;
}

/* Build and start the container of s (its upper layer is reused if present). */
int sandbox_start(struct sandbox *s, struct cella_error *err)
{
        struct start_job j;

        job_init(&j, s);
        if (start_spec(s, j.dir, j.rootfs, j.layers, j.layer_ptrs, j.layer_info, j.allow, &j.spec,
                       err) < 0)
                return -1;
        plan_restore(s, &j);
        s->state = SANDBOX_STARTING;
        start_run(s->table, &j);
        return start_complete(s, &j, err);
}

static void on_start_work(uv_work_t *w)
{
        struct start_job *j = w->data;

        start_run(j->s->table, j);
        pthread_mutex_lock(&j->lock);
        j->ran = true;
        pthread_cond_broadcast(&j->cond);
        pthread_mutex_unlock(&j->lock);
}

/* Everything the loop does when a start job is over: its result to s, then to the pool or
 * the waiters. Runs once per job, from the after-work callback or from sandbox_join(). */
static void start_finish(struct start_job *j)
{
        struct sandbox *s = j->s;
        struct sandbox_table *t = s->table;
        struct cella_error err = {0};
        bool fresh = s->fresh;
        int r;

        j->finished = true;
        for (struct start_job **pp = &t->jobs; *pp; pp = &(*pp)->next)
                if (*pp == j) {
                        *pp = j->next;
                        break;
                }
        s->job = NULL;
        s->fresh = false;
        if (j->checkpoint) {
                checkpoint_finish(s, j);
                return;
        }
        if (j->fork_dump) {
                memfork_dump_finish(s, j);
                return;
        }
        r = start_complete(s, j, &err);
        if (s->pooled) {
                pool_built(s, r < 0 ? &err : NULL);
                return;
        }
        if (r < 0 && fresh) {
                bool existed;
                /* Undo everything, files included: the sandbox never existed. */
                sandbox_table_destroy(t, s->name, &existed, NULL);
        } else if (r == 0 && fresh) {
                pool_schedule(t, CELLA_POOL_REFILL_DELAY_MS); /* one user sandbox more: trim */
        }
        sandbox_waiters_flush(s, r < 0 ? &err : NULL);
}

static void on_start_done(uv_work_t *w, int status)
{
        struct start_job *j = w->data;
        struct sandbox *s = j->s;

        (void)status; /* UV_ECANCELED when sandbox_join() ran it: finished already */
        sandbox_ref(s);
        if (!j->finished)
                start_finish(j);
        pthread_cond_destroy(&j->cond);
        pthread_mutex_destroy(&j->lock);
        free(j);
        sandbox_unref(s); /* the job's */
        sandbox_unref(s);
}

int sandbox_start_async(struct sandbox *s, struct cella_error *err)
{
        struct start_job *j = malloc(sizeof(*j));

        if (!j)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        job_init(j, s);
        if (start_spec(s, j->dir, j->rootfs, j->layers, j->layer_ptrs, j->layer_info, j->allow,
                       &j->spec, err) < 0) {
                free(j);
                return -1;
        }
        plan_restore(s, j);
        if (job_queue(s, j) < 0) {
                free(j);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "queue the start");
        }
        return 0;
}

void sandbox_join(struct sandbox *s)
{
        struct start_job *j = s->job;

        if (!j)
                return;
        /* Still queued behind other work (an image import): run it here instead of
         * waiting for a thread. The cancelled request's after-work callback frees it. */
        if (uv_cancel((uv_req_t *)&j->work) == 0) {
                start_run(s->table, j);
                j->ran = true;
        }
        pthread_mutex_lock(&j->lock);
        while (!j->ran)
                pthread_cond_wait(&j->cond, &j->lock);
        pthread_mutex_unlock(&j->lock);
        sandbox_ref(s);
        start_finish(j);
        sandbox_unref(s);
}

void sandbox_join_all(struct sandbox_table *t)
{
        while (t->jobs)
                sandbox_join(t->jobs->s);
}

/* ---- waiting for a start ---- */

struct sandbox_waiter {
        sandbox_get_cb cb;
        void *userdata;
        bool created;
        struct sandbox_waiter *next;
};

int sandbox_wait(struct sandbox *s, bool created, sandbox_get_cb cb, void *userdata,
                 struct cella_error *err)
{
        struct sandbox_waiter *w = malloc(sizeof(*w)), **pp = &s->waiters;

        if (!w)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        *w = (struct sandbox_waiter){.cb = cb, .userdata = userdata, .created = created};
        while (*pp) /* in arrival order */
                pp = &(*pp)->next;
        *pp = w;
        return 0;
}

void sandbox_waiters_flush(struct sandbox *s, const struct cella_error *err)
{
        struct sandbox_waiter *w = s->waiters;

        s->waiters = NULL;
        sandbox_ref(s);
        if (!err)
                sandbox_touch(s);
        while (w) {
                struct sandbox_waiter *next = w->next;
                w->cb(err ? NULL : s, w->created, err, w->userdata);
                free(w);
                w = next;
        }
        sandbox_unref(s);
}

/* Make sure s runs and has an agent connection; with async, a start it needs is queued
 * (s->job set) instead of run here. s has no start in progress. */
int sandbox_ensure_running(struct sandbox *s, bool async, struct cella_error *err)
{
        if (s->state == SANDBOX_RUNNING && sandbox_alive(s)) {
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
        return async ? sandbox_start_async(s, err) : sandbox_start(s, err);
}
