/* An instance's claim on its host: sandbox address range and host uid block (see
 * host-claim.h). */
#include "runtime/host-claim.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/log.h"
#include "common/macros.h"

#define CLAIM_TEXT_MAX 8192

/* ---- text ---- */

/* A decimal number of at most max: digits only, no leading zero. */
static int parse_u64(const char *s, size_t len, uint64_t max, uint64_t *ret)
{
        uint64_t v = 0;

        if (len == 0 || (len > 1 && s[0] == '0'))
                return -EINVAL;
        for (size_t i = 0; i < len; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                unsigned d = (unsigned)(s[i] - '0');
                if (v > (max - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        *ret = v;
        return 0;
}

static bool is_name(const char *s, size_t len)
{
        if (len == 0 || len >= sizeof(((struct host_claim_text *)0)->name))
                return false;
        for (size_t i = 0; i < len; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

bool host_claim_uid_base_ok(uint64_t base)
{
        return base >= CELLA_UID_BASE && base <= HOST_CLAIM_UID_BASE_MAX &&
               base % CELLA_UID_RANGE == 0;
}

uint32_t host_claim_slots(unsigned max)
{
        uint32_t blocks = (max + CELLA_UID_SLOTS - 1) / CELLA_UID_SLOTS;

        if (blocks < 1)
                blocks = 1;
        if (blocks > CELLA_UID_SLOTS_MAX / CELLA_UID_SLOTS)
                blocks = CELLA_UID_SLOTS_MAX / CELLA_UID_SLOTS;
        return blocks * CELLA_UID_SLOTS;
}

uint64_t host_claim_uid_span(uint32_t slots)
{
        return (uint64_t)host_claim_slots(slots ? slots : CELLA_UID_SLOTS) * CELLA_UID_RANGE;
}

enum { K_NAME, K_RANGE, K_UID, K_SLOTS, K_PID, K_DIR, K_DIR_ID, _K_MAX };
static const char *const keys[_K_MAX] = {"name", "network-range", "uid-base",   "uid-slots",
                                         "pid",  "data-dir",      "data-dir-id"};

static int parse_value(int k, const char *v, size_t vlen, struct host_claim_text *c)
{
        uint64_t n;

        switch (k) {
        case K_NAME:
                if (!is_name(v, vlen))
                        return -EINVAL;
                memcpy(c->name, v, vlen);
                c->name[vlen] = '\0';
                return 0;
        case K_RANGE:
                if (net_cidr_parse(v, vlen, &c->range) < 0)
                        return -EINVAL;
                c->has_range = true;
                return 0;
        case K_UID:
                if (parse_u64(v, vlen, UINT32_MAX, &n) < 0 || !host_claim_uid_base_ok(n))
                        return -EINVAL;
                c->uid_base = (uint32_t)n;
                c->has_uid_base = true;
                return 0;
        case K_SLOTS:
                if (parse_u64(v, vlen, CELLA_UID_SLOTS_MAX, &n) < 0 || n == 0)
                        return -EINVAL;
                c->uid_slots = (uint32_t)n;
                return 0;
        case K_PID:
                if (parse_u64(v, vlen, INT_MAX, &n) < 0 || n == 0)
                        return -EINVAL;
                c->pid = (pid_t)n;
                return 0;
        case K_DIR:
                if (vlen == 0 || v[0] != '/' || vlen >= sizeof(c->data_dir) ||
                    memchr(v, '\0', vlen))
                        return -EINVAL;
                memcpy(c->data_dir, v, vlen);
                c->data_dir[vlen] = '\0';
                return 0;
        case K_DIR_ID: {
                const char *colon = memchr(v, ':', vlen);
                if (!colon || parse_u64(v, (size_t)(colon - v), UINT64_MAX, &c->data_dev) < 0 ||
                    parse_u64(colon + 1, vlen - (size_t)(colon + 1 - v), UINT64_MAX, &c->data_ino) <
                            0)
                        return -EINVAL;
                return 0;
        }
        }
        return -EINVAL;
}

int host_claim_parse(const char *text, size_t len, struct host_claim_text *ret)
{
        struct host_claim_text c;
        bool seen[_K_MAX] = {false};
        size_t i = 0;

        memset(&c, 0, sizeof(c));
        while (i < len) {
                const char *line = text + i;
                const char *nl = memchr(line, '\n', len - i);
                size_t llen = nl ? (size_t)(nl - line) : len - i;
                i += llen + (nl ? 1 : 0);
                if (llen == 0)
                        continue;
                const char *sp = memchr(line, ' ', llen);
                if (!sp)
                        return -EINVAL;
                size_t klen = (size_t)(sp - line), vlen = llen - klen - 1;
                int k;
                for (k = 0; k < _K_MAX; k++)
                        if (strlen(keys[k]) == klen && memcmp(keys[k], line, klen) == 0)
                                break;
                if (k == _K_MAX)
                        continue; /* a key of a later version */
                if (seen[k] || parse_value(k, sp + 1, vlen, &c) < 0)
                        return -EINVAL;
                seen[k] = true;
        }
        *ret = c;
        return 0;
}

int host_claim_format(const struct host_claim_text *c, char *buf, size_t size)
{
        char net[16];
        size_t len = 0;
        int n;

        if (strchr(c->name, '\n') || strchr(c->data_dir, '\n'))
                return -EINVAL;
#define PUT(...)                                                                   \
        do {                                                                       \
                n = snprintf(buf + len, size > len ? size - len : 0, __VA_ARGS__); \
                if (n < 0 || (size_t)n >= (size > len ? size - len : 0))           \
                        return -ENOSPC;                                            \
                len += (size_t)n;                                                  \
        } while (0)
        if (size)
                buf[0] = '\0';
        if (c->name[0])
                PUT("name %s\n", c->name);
        if (c->has_range) {
                net_addr_format(c->range.addr, net, sizeof(net));
                PUT("network-range %s/%u\n", net, c->range.prefix);
        }
        if (c->has_uid_base)
                PUT("uid-base %u\n", c->uid_base);
        if (c->uid_slots && c->uid_slots != CELLA_UID_SLOTS)
                PUT("uid-slots %u\n", c->uid_slots);
        if (c->pid > 0)
                PUT("pid %d\n", (int)c->pid);
        if (c->data_dir[0])
                PUT("data-dir %s\n", c->data_dir);
        if (c->data_dev || c->data_ino)
                PUT("data-dir-id %llu:%llu\n", (unsigned long long)c->data_dev,
                    (unsigned long long)c->data_ino);
#undef PUT
        return (int)len;
}

/* ---- the choice ---- */

int host_claim_uses_add(struct host_claim_uses *u, const struct host_claim_use *use)
{
        if (u->n == u->cap) {
                size_t cap = u->cap ? u->cap * 2 : 16;
                struct host_claim_use *v = realloc(u->v, cap * sizeof(*v));
                if (!v)
                        return -ENOMEM;
                u->v = v;
                u->cap = cap;
        }
        u->v[u->n++] = *use;
        return 0;
}

void host_claim_uses_done(struct host_claim_uses *u)
{
        free(u->v);
        *u = (struct host_claim_uses){0};
}

/* NET_DEFAULT_RANGE, 10.213.0.0/16 (the range every daemon used before claims), then the /16s of
 * 10.64.0.0/10. The integration tests give each run a /18 of 10.128.0.0/9, never
 * 10.213.0.0/16. */
#define POOL_FIRST_OCTET 64
#define POOL_N 64

size_t host_claim_pool_size(void)
{
        return 1 + POOL_N;
}

void host_claim_pool_range(size_t i, struct net_cidr *ret)
{
        unsigned second = i == 0 ? 213 : POOL_FIRST_OCTET + (unsigned)(i - 1);

        ret->addr = 10u << 24 | second << 16;
        ret->prefix = 16;
}

static const struct host_claim_use *range_user(const struct net_cidr *c,
                                               const struct host_claim_uses *u)
{
        for (size_t i = 0; i < u->n; i++)
                if (u->v[i].has_range && net_cidr_overlaps(c, &u->v[i].range))
                        return &u->v[i];
        return NULL;
}

int host_claim_pick_range(const struct net_cidr *want, const struct host_claim_uses *u,
                          struct net_cidr *ret, const struct host_claim_use **ret_conflict)
{
        const struct host_claim_use *first = NULL, *by;
        struct net_cidr c;

        if (want) {
                by = range_user(want, u);
                if (by) {
                        *ret_conflict = by;
                        return -EADDRINUSE;
                }
                *ret = *want;
                return 0;
        }
        for (size_t i = 0; i < host_claim_pool_size(); i++) {
                host_claim_pool_range(i, &c);
                by = range_user(&c, u);
                if (!by) {
                        *ret = c;
                        return 0;
                }
                if (!first)
                        first = by;
        }
        *ret_conflict = first;
        return -ENOSPC;
}

static const struct host_claim_use *uid_user(uint32_t base, uint64_t span,
                                             const struct host_claim_uses *u)
{
        uint32_t last = (uint32_t)(base + (span - 1));

        for (size_t i = 0; i < u->n; i++)
                if (u->v[i].has_uids && u->v[i].uid_first <= last && base <= u->v[i].uid_last)
                        return &u->v[i];
        return NULL;
}

int host_claim_pick_uids(const uint32_t *want, const struct host_claim_uses *u, uint32_t *ret,
                         const struct host_claim_use **ret_conflict)
{
        return host_claim_pick_uid_slots(want, CELLA_UID_SLOTS, u, ret, ret_conflict);
}

int host_claim_pick_uid_slots(const uint32_t *want, uint32_t slots, const struct host_claim_uses *u,
                              uint32_t *ret, const struct host_claim_use **ret_conflict)
{
        const struct host_claim_use *first = NULL, *by;
        uint64_t span = host_claim_uid_span(slots);

        if (want) {
                if (!host_claim_uid_base_ok(*want) || *want + span > UINT32_MAX)
                        return -EINVAL;
                by = uid_user(*want, span, u);
                if (by) {
                        *ret_conflict = by;
                        return -EADDRINUSE;
                }
                *ret = *want;
                return 0;
        }
        for (uint64_t b = CELLA_UID_BASE; b + span <= UINT32_MAX; b += HOST_CLAIM_UID_BLOCK) {
                by = uid_user((uint32_t)b, span, u);
                if (!by) {
                        *ret = (uint32_t)b;
                        return 0;
                }
                if (!first)
                        first = by;
        }
        *ret_conflict = first;
        return -ENOSPC;
}

/* ---- applying it ---- */

struct host_claim {
        int fd; /* our claim file, locked; -EBADF: none (probe) */
        struct net_cidr range;
        uint32_t uid_base, uid_slots;
        char description[CELLA_PATH_MAX + 512];
};

/* Read a small file at dirfd/name into buf (NUL-terminated). Returns its length or -errno. */
static ssize_t read_small(int fd, char *buf, size_t size)
{
        ssize_t n = pread(fd, buf, size - 1, 0);
        if (n < 0)
                return -errno;
        buf[n] = '\0';
        return n;
}

/* Does dir still exist as the same directory? */
static bool same_dir(const struct host_claim_text *c)
{
        struct stat st;

        if (!c->data_dir[0] || stat(c->data_dir, &st) < 0 || !S_ISDIR(st.st_mode))
                return false;
        return (uint64_t)st.st_dev == c->data_dev && (uint64_t)st.st_ino == c->data_ino;
}

/* Other instances' claims in dir: live ones become uses, stale ones are removed (not when
 * probing). */
static int gather_claims(const struct host_claim_config *cfg, const char *dir,
                         struct host_claim_uses *u)
{
        _cleanup_closedir_ DIR *d = opendir(dir);
        _cleanup_free_ char *text = malloc(CLAIM_TEXT_MAX);
        struct dirent *de;

        if (!d)
                return errno == ENOENT ? 0 : -errno;
        if (!text)
                return -ENOMEM;
        while ((de = readdir(d))) {
                struct host_claim_text c;
                struct host_claim_use use = {0};
                bool running;

                if (de->d_name[0] == '.' || strcmp(de->d_name, cfg->name) == 0)
                        continue;
                _cleanup_close_ int fd =
                        openat(dirfd(d), de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read_small(fd, text, CLAIM_TEXT_MAX);
                if (n < 0 || host_claim_parse(text, (size_t)n, &c) < 0 || !c.has_range ||
                    !c.has_uid_base) {
                        log_warn("instance claim %s/%s: not a claim; ignored", dir, de->d_name);
                        continue;
                }
                running = flock(fd, LOCK_SH | LOCK_NB) < 0 && errno == EWOULDBLOCK;
                if (!running && !same_dir(&c)) {
                        /* Its daemon is gone and so is its data directory. */
                        if (!cfg->probe_only)
                                unlinkat(dirfd(d), de->d_name, 0);
                        continue;
                }
                use.has_range = use.has_uids = true;
                use.range = c.range;
                use.uid_first = c.uid_base;
                use.uid_last =
                        (uint32_t)MIN((uint64_t)c.uid_base + host_claim_uid_span(c.uid_slots) - 1,
                                      (uint64_t)UINT32_MAX);
                if (running)
                        snprintf(use.desc, sizeof(use.desc),
                                 "cella instance '%s' (pid %d, data dir %s)", de->d_name,
                                 (int)c.pid, c.data_dir);
                else
                        snprintf(use.desc, sizeof(use.desc),
                                 "cella instance '%s' (not running; data dir %s)", de->d_name,
                                 c.data_dir);
                if (host_claim_uses_add(u, &use) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int on_host_prefix(const struct net_cidr *c, const char *desc, void *ud)
{
        struct host_claim_use use = {.has_range = true, .range = *c};

        snprintf(use.desc, sizeof(use.desc), "%s", desc);
        return host_claim_uses_add(ud, &use);
}

/* Processes running as a sandbox-range host uid that are not in this instance's cgroups:
 * sandboxes of a daemon that makes no claim. One use per uid slot. */
static int gather_processes(const struct host_claim_config *cfg, struct host_claim_uses *u)
{
        _cleanup_closedir_ DIR *d = opendir("/proc");
        char path[300], buf[4096], mine[80];
        uint32_t last_slot = 0;
        struct dirent *de;

        if (!d)
                return -errno;
        snprintf(mine, sizeof(mine), "/%s/", cfg->name);
        while ((de = readdir(d))) {
                if (de->d_name[0] < '1' || de->d_name[0] > '9')
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/status", de->d_name);
                _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0)
                        continue;
                ssize_t n = read_small(fd, buf, sizeof(buf));
                const char *p = n > 0 ? strstr(buf, "\nUid:\t") : NULL;
                if (!p)
                        continue;
                unsigned long uid = strtoul(p + 6, NULL, 10);
                if (uid < CELLA_UID_BASE || uid > UINT32_MAX)
                        continue;
                uint32_t slot = (uint32_t)uid & ~(CELLA_UID_RANGE - 1);
                if (slot == last_slot)
                        continue;
                snprintf(path, sizeof(path), "/proc/%s/cgroup", de->d_name);
                _cleanup_close_ int cfd = open(path, O_RDONLY | O_CLOEXEC);
                n = cfd >= 0 ? read_small(cfd, buf, sizeof(buf)) : -1;
                if (n > 0 && strstr(buf, mine))
                        continue;
                struct host_claim_use use = {.has_uids = true,
                                             .uid_first = slot,
                                             .uid_last = slot + (CELLA_UID_RANGE - 1)};
                snprintf(use.desc, sizeof(use.desc),
                         "process %s running as host uid %lu (a sandbox of no cella instance "
                         "that claims its uids)",
                         de->d_name, uid);
                if (host_claim_uses_add(u, &use) < 0)
                        return -ENOMEM;
                last_slot = slot;
        }
        return 0;
}

static void range_text(const struct net_cidr *c, char *buf, size_t size)
{
        char ip[16];

        net_addr_format(c->addr, ip, sizeof(ip));
        snprintf(buf, size, "%s/%u", ip, c->prefix);
}

/* Write the data dir's record (a new file renamed over the old), 0600 like everything in
 * the data dir. A record that already says the same is left as it is (its mode narrowed if
 * it is wider), so a start with the data dir full needs no space for it. */
static int write_record(const char *data_dir, const char *text)
{
        char path[CELLA_PATH_MAX], tmp[CELLA_PATH_MAX + 16], old[CLAIM_TEXT_MAX];
        size_t len = strlen(text);
        ssize_t n;

        snprintf(path, sizeof(path), "%s/%s", data_dir, HOST_CLAIM_RECORD);
        {
                _cleanup_close_ int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                struct stat st;

                if (in >= 0 && fstat(in, &st) == 0 && S_ISREG(st.st_mode) &&
                    (size_t)st.st_size == len && (n = read(in, old, sizeof(old))) >= 0 &&
                    (size_t)n == len && memcmp(old, text, len) == 0) {
                        if ((st.st_mode & 07777) != 0600 && fchmod(in, 0600) < 0)
                                return -errno;
                        return 0;
                }
        }
        snprintf(tmp, sizeof(tmp), "%s.tmp", path);
        _cleanup_close_ int fd =
                open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        errno = 0; /* a short write sets none */
        if (fchmod(fd, 0600) < 0 || write(fd, text, len) != (ssize_t)len || fsync(fd) < 0 ||
            rename(tmp, path) < 0) {
                int r = errno ? -errno : -EIO;
                unlink(tmp);
                return r;
        }
        return 0;
}

/* Create the claim directory and hold its .lock: one instance chooses at a time. Returns
 * the lock's descriptor, or -errno with *err set (without the "instance claims" context). */
static int claims_lock(const char *dir, struct cella_error *err)
{
        char path[CELLA_PATH_MAX + 64];
        int r = fs_mkdir_p(dir, 0755);

        if (r < 0)
                return cella_error_errno(err, -r, "create %s", dir);
        snprintf(path, sizeof(path), "%s/.lock", dir);
        _cleanup_close_ int lock = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (lock < 0)
                return cella_error_errno(err, errno, "open %s", path);
        while (flock(lock, LOCK_EX) < 0)
                if (errno != EINTR)
                        return cella_error_errno(err, errno, "lock %s", path);
        return TAKE_FD(lock);
}

/* Write this instance's claim text to dir/name and hold the file's lock for as long as it
 * lives. Returns the claim's descriptor, or -errno with *err set (without the context). */
static int claim_write(const char *dir, const char *name, const char *text, struct cella_error *err)
{
        char path[CELLA_PATH_MAX + 64];
        size_t len = strlen(text);

        snprintf(path, sizeof(path), "%s/%s", dir, name);
        _cleanup_close_ int fd = open(path, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd < 0)
                return cella_error_errno(err, errno, "open %s", path);
        if (flock(fd, LOCK_EX | LOCK_NB) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "%s is held by another cellad (an instance of the same "
                                       "name)",
                                       path);
        errno = EIO; /* a short write sets none */
        if (ftruncate(fd, 0) < 0 || pwrite(fd, text, len, 0) != (ssize_t)len)
                return cella_error_errno(err, errno, "write %s", path);
        return TAKE_FD(fd);
}

int host_claim_take(const struct host_claim_config *cfg, struct host_claim **ret,
                    struct cella_error *err)
{
        const char *dir = cfg->claim_dir ? cfg->claim_dir : HOST_CLAIM_DIR;
        const struct host_claim_use *by = NULL;
        struct host_claim_uses uses = {0};
        struct host_claim_text rec, mine;
        struct net_cidr given, range;
        const char *range_how, *uid_how;
        char path[CELLA_PATH_MAX + 64], real[PATH_MAX], rtext[64], first[64], last[64];
        _cleanup_free_ char *text = malloc(CLAIM_TEXT_MAX);
        _cleanup_close_ int lock = -EBADF;
        _cleanup_close_ int fd = -EBADF;
        uint32_t uid_base, legacy = CELLA_UID_BASE;
        const uint32_t *want_uids;
        char why[CELLA_PATH_MAX + 640] = "";
        bool has_rec = false;
        int r;

        memset(&rec, 0, sizeof(rec));
        if (!text)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (cfg->network_range &&
            (net_cidr_parse(cfg->network_range, strlen(cfg->network_range), &given) < 0 ||
             given.prefix > NET_SLOT_PREFIX || given.prefix < 8))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "--network-range '%s': want an IPv4 CIDR from /8 to /30 "
                                       "with no host bits, e.g. %s",
                                       cfg->network_range, NET_DEFAULT_RANGE);
        if (cfg->uid_base && !host_claim_uid_base_ok(*cfg->uid_base))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "--uid-base %u: want a multiple of %u from %u to %u",
                                       *cfg->uid_base, CELLA_UID_RANGE, CELLA_UID_BASE,
                                       HOST_CLAIM_UID_BASE_MAX & ~(CELLA_UID_RANGE - 1));

        /* This data dir's record. */
        snprintf(path, sizeof(path), "%s/%s", cfg->data_dir, HOST_CLAIM_RECORD);
        {
                _cleanup_close_ int rfd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (rfd >= 0) {
                        ssize_t n = read_small(rfd, text, CLAIM_TEXT_MAX);
                        if (n < 0 || host_claim_parse(text, (size_t)n, &rec) < 0 ||
                            !rec.has_range || !rec.has_uid_base)
                                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                                       "%s: not a record of this daemon's "
                                                       "(remove it to choose again)",
                                                       path);
                        has_rec = true;
                } else if (errno != ENOENT) {
                        return cella_error_errno(err, errno, "open %s", path);
                }
        }

        /* One instance chooses at a time. */
        if (!cfg->probe_only) {
                r = claims_lock(dir, err);
                if (r < 0) {
                        cella_error_prefix(err, "instance claims");
                        return r;
                }
                lock = r;
        }

        r = gather_claims(cfg, dir, &uses);
        if (r < 0) {
                host_claim_uses_done(&uses);
                return cella_error_errno(err, -r, "instance claims: read %s", dir);
        }
        r = net_host_prefixes(cfg->ifprefix, on_host_prefix, &uses);
        if (r < 0)
                log_warn("instance claims: cannot read the host's addresses and routes: %s",
                         strerror(-r));
        r = gather_processes(cfg, &uses);
        if (r < 0)
                log_warn("instance claims: cannot read the host's processes: %s", strerror(-r));

        /* The range. */
        if (cfg->network_range)
                range_how = "--network-range";
        else if (has_rec)
                range_how = "recorded in the data directory";
        else
                range_how = "chosen";
        r = host_claim_pick_range(cfg->network_range ? &given
                                  : has_rec          ? &rec.range
                                                     : NULL,
                                  &uses, &range, &by);
        if (r < 0) {
                range_text(cfg->network_range ? &given : &rec.range, rtext, sizeof(rtext));
                if (cfg->network_range)
                        r = cella_error_set(
                                err, CELLA_E_VALIDATION_FAILED,
                                "--network-range %s overlaps %s: give --network-range a "
                                "range that no other cella instance, address or route "
                                "of this host uses",
                                rtext, by->desc);
                else if (has_rec)
                        r = cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                            "network range %s of this data directory (%s/%s) "
                                            "overlaps %s: give --network-range",
                                            rtext, cfg->data_dir, HOST_CLAIM_RECORD, by->desc);
                else
                        r = cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                            "no free network range among the automatic ones "
                                            "(10.213.0.0/16, then 10.64.0.0/16 to 10.127.0.0/16; "
                                            "the first overlaps %s): give --network-range",
                                            by->desc);
                host_claim_uses_done(&uses);
                return r;
        }
        if (!cfg->network_range && !has_rec) {
                /* Say why the first candidate was not it. */
                struct net_cidr c0;
                host_claim_pool_range(0, &c0);
                const struct host_claim_use *b0 = range_user(&c0, &uses);
                if (b0) {
                        range_text(&c0, rtext, sizeof(rtext));
                        snprintf(why, sizeof(why), "; %s overlaps %s", rtext, b0->desc);
                }
        }

        /* The uids. */
        if (cfg->uid_base) {
                want_uids = cfg->uid_base;
                uid_how = "--uid-base";
        } else if (has_rec) {
                want_uids = &rec.uid_base;
                uid_how = "recorded in the data directory";
        } else if (cfg->legacy_uids) {
                want_uids = &legacy;
                uid_how = "of the sandboxes made before instance records";
        } else {
                want_uids = NULL;
                uid_how = "chosen";
        }
        uint32_t slots = host_claim_slots(cfg->uid_slots ? cfg->uid_slots : CELLA_UID_SLOTS);
        /* A data dir's block never shrinks: its sandboxes may be in any slot of it. */
        if (has_rec && !cfg->uid_base && rec.uid_slots > slots)
                slots = host_claim_slots(rec.uid_slots);
        uint64_t span = host_claim_uid_span(slots);
        r = host_claim_pick_uid_slots(want_uids, slots, &uses, &uid_base, &by);
        if (r == -EINVAL) {
                /* a base that holds one block but not slots slots */
                r = cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                    "host uids from %#x (%s): %u uid slots (--max-sandboxes) "
                                    "would pass %#x: give a lower --uid-base or fewer "
                                    "--max-sandboxes",
                                    *want_uids, uid_how, slots, UINT32_MAX);
                host_claim_uses_done(&uses);
                return r;
        }
        if (r < 0) {
                uint32_t b = want_uids ? *want_uids : 0;
                if (cfg->uid_base)
                        r = cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                            "--uid-base %u: host uids %#x-%#x overlap %s: give "
                                            "another --uid-base",
                                            b, b, (uint32_t)(b + (span - 1)), by->desc);
                else if (want_uids)
                        r = cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                            "host uids %#x-%#x (%s) overlap %s; the sandboxes of "
                                            "this data directory own files as those uids, so "
                                            "they cannot change: stop that one first",
                                            b, (uint32_t)(b + (span - 1)), uid_how, by->desc);
                else
                        r = cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                            "no free block of host uids (the first overlaps %s): "
                                            "give --uid-base",
                                            by->desc);
                host_claim_uses_done(&uses);
                return r;
        }
        host_claim_uses_done(&uses);

        /* Claim them. */
        memset(&mine, 0, sizeof(mine));
        snprintf(mine.name, sizeof(mine.name), "%s", cfg->name);
        mine.range = range;
        mine.has_range = mine.has_uid_base = true;
        mine.uid_base = uid_base;
        mine.uid_slots = slots;
        if (!cfg->probe_only) {
                struct stat st;
                const char *dd = realpath(cfg->data_dir, real) ? real : cfg->data_dir;
                if (stat(dd, &st) < 0)
                        return cella_error_errno(err, errno, "instance claims: %s", dd);
                /* The record: what this data directory uses from now on. */
                r = host_claim_format(&mine, text, CLAIM_TEXT_MAX);
                if (r >= 0)
                        r = write_record(cfg->data_dir, text);
                if (r < 0)
                        return cella_error_errno(err, -r, "write %s/%s", cfg->data_dir,
                                                 HOST_CLAIM_RECORD);
                mine.pid = getpid();
                snprintf(mine.data_dir, sizeof(mine.data_dir), "%s", dd);
                mine.data_dev = (uint64_t)st.st_dev;
                mine.data_ino = (uint64_t)st.st_ino;
                r = host_claim_format(&mine, text, CLAIM_TEXT_MAX);
                if (r < 0)
                        return cella_error_errno(err, -r, "instance claim of %s", dd);
                r = claim_write(dir, cfg->name, text, err);
                if (r < 0) {
                        cella_error_prefix(err, "instance claims");
                        return r;
                }
                fd = r;
        }

        struct host_claim *c = calloc(1, sizeof(*c));
        if (!c)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        c->fd = TAKE_FD(fd);
        c->range = range;
        c->uid_base = uid_base;
        c->uid_slots = slots;
        range_text(&range, rtext, sizeof(rtext));
        snprintf(first, sizeof(first), "%#x", uid_base);
        snprintf(last, sizeof(last), "%#x", (uint32_t)(uid_base + (span - 1)));
        snprintf(c->description, sizeof(c->description),
                 "instance '%s': sandbox network range %s (%s%s), sandbox host uids %s-%s (%s)",
                 cfg->name, rtext, range_how, why, first, last, uid_how);
        *ret = c;
        return 0;
}

void host_claim_free(struct host_claim *c)
{
        if (!c)
                return;
        /* The claim file stays while the data directory does: a stopped daemon comes back
         * to the same range and uids. Closing releases the lock. */
        if (c->fd >= 0)
                close(c->fd);
        free(c);
}

const struct net_cidr *host_claim_range(const struct host_claim *c)
{
        return &c->range;
}

uint32_t host_claim_uid_base(const struct host_claim *c)
{
        return c->uid_base;
}

uint32_t host_claim_uid_slots(const struct host_claim *c)
{
        return c->uid_slots;
}

const char *host_claim_describe(const struct host_claim *c)
{
        return c->description;
}
