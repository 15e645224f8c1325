/* What a sandbox holds of the host (sandbox-internal.h): its uid slot (which names its
 * cgroups, data directory, uid range and network address), its promise of disk against the
 * data dir's filesystem (decision 0036), and its network mode. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "common/log.h"
#include "daemon/instance-type.h"
#include "daemon/sandbox-internal.h"
#include "runtime/disk.h"

/* Take a free slot, round robin: a slot just released (its cgroups and files just
 * removed) is the last to be handed out again. */
int alloc_slot(struct sandbox_table *t, unsigned *ret)
{
        unsigned slots = t->uid_slots ? t->uid_slots : CELLA_UID_SLOTS;

        for (unsigned n = 0; n < slots; n++) {
                unsigned i = (t->next_slot + n) % slots;
                if (!t->slot_used[i]) {
                        t->slot_used[i] = 1;
                        t->next_slot = (i + 1) % slots;
                        *ret = i;
                        return 0;
                }
        }
        return -ENOSPC;
}

void release_slot(struct sandbox_table *t, unsigned slot)
{
        t->slot_used[slot] = 0;
}

/* ---- disk promised to sandboxes (docs/decisions/0036-disk-overcommit.md) ----
 *
 * Disk images are sparse: each promises its full size and takes only what is written.
 * The promise of the daemon is the sum of the images' sizes (sleeping sandboxes and the
 * warm pool included) and of the memory checkpoints of sandboxes asleep with their memory
 * (0050), set against the size of the filesystem of the data dir. */

uint64_t sandbox_disk_promise(struct sandbox *s)
{
        char dir[CELLA_PATH_MAX];
        uint64_t limit = 0, used;

        if (s->disk_promise < 0) {
                if (s->state == SANDBOX_DESTROYED || sandbox_dir(s, dir, sizeof(dir)) < 0 ||
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
                        sum += sandbox_disk_promise(s) + sandbox_checkpoint_bytes(s);
        for (struct sandbox *s = t->pool; s; s = s->pool_next)
                sum += sandbox_disk_promise(s);
        /* snapshots' files, each once however many sandboxes share it (0048) */
        return sum + sandbox_table_snapshot_bytes(t);
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
uint64_t new_disk_bytes(const struct sandbox_table *t, const char *itype)
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
int disk_admit(struct sandbox_table *t, uint64_t more, struct cella_error *err)
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
        uint64_t snaps = sandbox_table_snapshot_bytes(t);
        /* how a snapshot of a sandbox with a disk is taken here (0051) */
        bool clone = runtime_reflink(t->rt) && runtime_disk_enforced(t->rt);

        data_dir_space(t, &size, &avail);
        return json_pack("{s:I, s:I, s:I, s:I, s:f, s:f, s:s, s:b, s:b, s:s}", "capacityBytes",
                         (json_int_t)size, "freeBytes", (json_int_t)avail, "promisedBytes",
                         (json_int_t)promised, "snapshotBytes", (json_int_t)snaps, "overcommit",
                         size ? (double)promised / (double)size : 0.0, "overcommitLimit",
                         t->disk_overcommit, "overcommitPolicy",
                         t->disk_overcommit_refuse ? "refuse" : "warn", "overcommitted",
                         size && (double)promised > t->disk_overcommit * (double)size, "reflink",
                         runtime_reflink(t->rt), "snapshotMethod", clone ? "clone" : "copy");
}

/* The network a new sandbox gets when the request names none: outbound where the host can
 * do it, else none (decision 0017). */
bool network_default(const struct sandbox_table *t)
{
        return net_available(runtime_net(t->rt));
}

/* opts->network as a mode; -1 with *err set for an outbound the host cannot give. */
int network_wanted(const struct sandbox_table *t, const struct sandbox_options *opts, bool *ret,
                   struct cella_error *err)
{
        if (!opts || !opts->network) {
                *ret = network_default(t);
                return 0;
        }
        /* "none" or "outbound": checked as it was decoded (sandbox-options.h) */
        if (strcmp(opts->network, "outbound") != 0) {
                *ret = false;
                return 0;
        }
        if (!net_available(runtime_net(t->rt)))
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "network \"outbound\" is not available on this host: %s",
                                       net_state(runtime_net(t->rt)));
        *ret = true;
        return 0;
}

/* The parsed allowlist of s into out (CELLA_NETWORK_ALLOW_MAX entries); returns the count. */
size_t network_allow_list(const struct sandbox *s, struct net_allow *out)
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
