/* What one cellad instance holds on its host: the address range of its sandboxes and the
 * block of host uids they run as (docs/decisions/0033-instance-claims.md).
 *
 * Two daemons on one host (two data directories) must never hand out the same sandbox
 * addresses (their NAT and routes break each other) nor the same host uids (one tenant's
 * processes could signal or ptrace another's). Each instance therefore claims both:
 *
 *  - a claim file CLAIM_DIR/<name> (name = the instance's cgroup parent and nft table),
 *    locked (flock) by the running daemon for its life. Another instance's claim counts
 *    while its daemon holds the lock, or while the data directory it names still exists
 *    (a stopped daemon comes back to the same range and uids: its sandboxes' files are
 *    owned by them); one whose data directory is gone is stale and removed;
 *  - the record <data-dir>/instance of what this data directory uses, so that a restart
 *    keeps them (running sandboxes are reattached with their addresses and uids).
 *
 * The choice, under one lock (CLAIM_DIR/.lock) so that daemons starting together do not
 * take the same one: what the flags give (--network-range, --uid-base), else the record,
 * else the first free candidate (HOST_CLAIM_POOL below; uids: HOST_CLAIM_UID_BLOCK-aligned
 * blocks from CELLA_UID_BASE). A range must overlap no other instance's range and no
 * address or route of the host (a default route excepted) outside the daemon's own
 * interfaces; a uid block no other instance's block and no running process outside the
 * daemon's own cgroups (sandboxes of a daemon that makes no claim). An explicit or
 * recorded value that overlaps is refused, naming what it overlaps.
 *
 * The pure part (text of a claim, the choice from a list of uses) has no I/O, for unit
 * tests and fuzzers; host_claim_take() gathers the uses and applies it. */
#ifndef CELLA_RUNTIME_HOST_CLAIM_H
#define CELLA_RUNTIME_HOST_CLAIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/error.h"
#include "common/limits.h"
#include "runtime/net.h"

#define HOST_CLAIM_DIR "/run/cella/instances"
#define HOST_CLAIM_RECORD "instance" /* in the data dir */
/* Host uids of one block: CELLA_UID_SLOTS slots' ranges. An instance holds one block, or
 * as many as its --max-sandboxes needs (host_claim_blocks). */
#define HOST_CLAIM_UID_BLOCK ((uint32_t)CELLA_UID_SLOTS * CELLA_UID_RANGE)
/* The highest base a block may start at (its last uid below (uid_t)-1). */
#define HOST_CLAIM_UID_BASE_MAX (0xffffffffu - HOST_CLAIM_UID_BLOCK)

/* One instance's claim, as written in its claim file and (name, range, uid base only) its
 * data directory's record. */
struct host_claim_text {
        char name[64];
        struct net_cidr range;
        uint32_t uid_base;
        bool has_range, has_uid_base;
        uint32_t uid_slots; /* 0: CELLA_UID_SLOTS (one block) */
        pid_t pid;          /* 0: none (a record) */
        char data_dir[CELLA_PATH_MAX];
        uint64_t data_dev, data_ino; /* identity of data_dir; 0, 0: none */
};

/* "key value" lines: name, network-range, uid-base, uid-slots (1 to CELLA_UID_SLOTS_MAX;
 * written only beyond CELLA_UID_SLOTS), pid, data-dir, data-dir-id ("DEV:INO"); unknown keys are skipped, a known key twice or a bad value is -EINVAL.
 * len bytes of text, no NUL needed. 0 or -EINVAL. */
int host_claim_parse(const char *text, size_t len, struct host_claim_text *ret);
/* The text of c (the fields it has). Returns the length, -ENOSPC, or -EINVAL for a name or
 * data dir holding a newline. */
int host_claim_format(const struct host_claim_text *c, char *buf, size_t size);

/* A uid base a daemon may be given: a multiple of CELLA_UID_RANGE from CELLA_UID_BASE to
 * HOST_CLAIM_UID_BASE_MAX. */
bool host_claim_uid_base_ok(uint64_t base);
/* The uid slots of an instance that holds max sandboxes: CELLA_UID_SLOTS, or the multiple of
 * it that holds max (at most CELLA_UID_SLOTS_MAX). */
uint32_t host_claim_slots(unsigned max);
/* The host uids of slots slots (a multiple of HOST_CLAIM_UID_BLOCK). */
uint64_t host_claim_uid_span(uint32_t slots);

/* Something on the host a choice must not overlap. */
struct host_claim_use {
        bool has_range, has_uids;
        struct net_cidr range;
        uint32_t uid_first, uid_last; /* inclusive */
        char desc[CELLA_PATH_MAX +
                  512]; /* "cella instance 'cella-1a2b3c4d' (pid 12, data dir /x)" */
};

struct host_claim_uses {
        struct host_claim_use *v;
        size_t n, cap;
};

int host_claim_uses_add(struct host_claim_uses *u, const struct host_claim_use *use);
void host_claim_uses_done(struct host_claim_uses *u);

/* The automatic range candidates, in order. */
size_t host_claim_pool_size(void);
void host_claim_pool_range(size_t i, struct net_cidr *ret);

/* want: the range asked for (NULL: the first free candidate of the pool). 0 with *ret set;
 * -EADDRINUSE when want overlaps a use (*ret_conflict is it); -ENOSPC when every
 * candidate does (*ret_conflict: what took the first one). */
int host_claim_pick_range(const struct net_cidr *want, const struct host_claim_uses *u,
                          struct net_cidr *ret, const struct host_claim_use **ret_conflict);
/* The same for a uid block (want: its base, or NULL). */
int host_claim_pick_uids(const uint32_t *want, const struct host_claim_uses *u, uint32_t *ret,
                         const struct host_claim_use **ret_conflict);
/* The same for the uids of slots slots (host_claim_slots): want's block must end below
 * (uid_t)-1 (else -EINVAL). */
int host_claim_pick_uid_slots(const uint32_t *want, uint32_t slots, const struct host_claim_uses *u,
                              uint32_t *ret, const struct host_claim_use **ret_conflict);

/* ---- applying it ---- */

struct host_claim;

struct host_claim_config {
        const char *name;     /* the instance name (cgroup parent, nft table) */
        const char *ifprefix; /* its interfaces (net_ifprefix of name) */
        const char *data_dir;
        const char *network_range; /* --network-range, or NULL */
        const uint32_t *uid_base;  /* --uid-base, or NULL */
        uint32_t uid_slots;        /* host_claim_slots(--max-sandboxes); 0: CELLA_UID_SLOTS */
        /* The data dir has sandboxes from before records were kept: they run as
         * CELLA_UID_BASE + slot * CELLA_UID_RANGE, so that block it is. */
        bool legacy_uids;
        bool probe_only;       /* cellad --check: choose and say, claim and write nothing */
        const char *claim_dir; /* NULL: HOST_CLAIM_DIR (unit tests) */
};

/* Choose and claim (see above). On success *ret holds the claim file's lock until
 * host_claim_free. Errors: a bad --network-range, a conflict, no free candidate, a claim
 * directory or record that cannot be written. Returns 0 or -errno with *err set. */
int host_claim_take(const struct host_claim_config *cfg, struct host_claim **ret,
                    struct cella_error *err);
void host_claim_free(struct host_claim *c);
const struct net_cidr *host_claim_range(const struct host_claim *c);
uint32_t host_claim_uid_base(const struct host_claim *c);
/* Its uid slots (host_claim_slots of --max-sandboxes, or the data dir's, if more). */
uint32_t host_claim_uid_slots(const struct host_claim *c);
/* One line for the log and cellad --check: what was chosen and why. */
const char *host_claim_describe(const struct host_claim *c);

#endif
