/* A sandbox's memory sleep with CRIU: see checkpoint.h and docs/decisions/0050. */
#include "runtime/checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/sched.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/probe.h"
#include "common/timeutil.h"
#include "runtime/criu.h"
#include "runtime/runtime-internal.h"

extern char **environ;

/* The CHECKPOINT_EXTERNALS file at most. */
#define CHECKPOINT_TEXT_MAX 65536

/* ---- the pure parts ---- */

static bool mount_point_ok(const char *mp, size_t n)
{
        if (n == 0 || n >= sizeof(((struct checkpoint_externals *)0)->mounts[0]) || mp[0] != '/')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = mp[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '/' || c == '-'))
                        return false;
                if (c == '.' && i + 1 < n && mp[i + 1] == '.')
                        return false;
        }
        return (n == strlen("/" MOUNTS_AGENT_EXE) && memcmp(mp, "/" MOUNTS_AGENT_EXE, n) == 0) ||
               (n == 14 && memcmp(mp, "/sys/fs/cgroup", 14) == 0) ||
               (n > 5 && memcmp(mp, "/dev/", 5) == 0) || (n > 6 && memcmp(mp, "/proc/", 6) == 0);
}

static bool cgroup_rel_ok(const char *p, size_t n)
{
        if (n == 0 || n >= sizeof(((struct checkpoint_externals *)0)->cgroups[0]) || p[0] == '/' ||
            p[n - 1] == '/')
                return false;
        for (size_t i = 0; i < n; i++) {
                char c = p[i];
                if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                      c == '_' || c == '.' || c == '/' || c == '-'))
                        return false;
                if (c == '.' && (i == 0 || p[i - 1] == '/') &&
                    (i + 1 == n || p[i + 1] == '/' || p[i + 1] == '.'))
                        return false;
                if (c == '/' && i + 1 < n && p[i + 1] == '/')
                        return false;
        }
        return true;
}

int checkpoint_externals_parse(const char *text, size_t len, struct checkpoint_externals *ret)
{
        memset(ret, 0, sizeof(*ret));
        for (size_t b = 0; b < len;) {
                size_t e = b;
                while (e < len && text[e] != '\n')
                        e++;
                const char *l = text + b;
                size_t n = e - b;
                if (n > 4 && memcmp(l, "mnt ", 4) == 0) {
                        if (ret->n >= CELLA_CRIU_EXTERNALS_MAX || !mount_point_ok(l + 4, n - 4))
                                return -EINVAL;
                        memcpy(ret->mounts[ret->n], l + 4, n - 4);
                        ret->mounts[ret->n++][n - 4] = '\0';
                } else if (n > 3 && memcmp(l, "cg ", 3) == 0) {
                        if (ret->n_cgroups >= CELLA_CRIU_CGROUPS_MAX ||
                            !cgroup_rel_ok(l + 3, n - 3))
                                return -EINVAL;
                        memcpy(ret->cgroups[ret->n_cgroups], l + 3, n - 3);
                        ret->cgroups[ret->n_cgroups++][n - 3] = '\0';
                } else if (n > 4 && memcmp(l, "log ", 4) == 0 && !ret->log[0]) {
                        size_t colons = 0;
                        if (n - 4 >= sizeof(ret->log))
                                return -EINVAL;
                        for (size_t i = 4; i < n; i++) {
                                char c = l[i];
                                if (c == ':')
                                        colons++;
                                else if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                                        return -EINVAL;
                        }
                        if (colons != 1 || l[4] == ':' || l[n - 1] == ':')
                                return -EINVAL;
                        memcpy(ret->log, l + 4, n - 4);
                        ret->log[n - 4] = '\0';
                } else if (n > 0) {
                        return -EINVAL;
                }
                b = e + 1;
        }
        return ret->log[0] ? 0 : -EINVAL;
}

static bool contains(const char *s, size_t n, const char *what)
{
        size_t w = strlen(what);
        for (size_t i = 0; i + w <= n; i++)
                if (memcmp(s + i, what, w) == 0)
                        return true;
        return false;
}

size_t checkpoint_log_reason(const char *text, size_t len, char *out, size_t sz)
{
        static const char *const harmless[] = {"RLIMIT_NOFILE", "iptables", "already assigned",
                                               "exited, status="};
        static const char key[] = "Error (";

        out[0] = '\0';
        for (size_t b = 0; b < len;) {
                size_t e = b;
                while (e < len && text[e] != '\n')
                        e++;
                bool skip = false;
                for (size_t i = 0; i < ARRAY_SIZE(harmless); i++)
                        skip = skip || contains(text + b, e - b, harmless[i]);
                for (size_t i = b; !skip && i + sizeof(key) - 1 <= e; i++) {
                        if (memcmp(text + i, key, sizeof(key) - 1) != 0)
                                continue;
                        size_t m = i + sizeof(key) - 1;
                        while (m + 1 < e && !(text[m] == ')' && text[m + 1] == ':'))
                                m++;
                        m = m + 1 < e ? m + 2 : e;
                        while (m < e && text[m] == ' ')
                                m++;
                        size_t n = 0;
                        for (; m < e && n + 1 < sz; m++)
                                out[n++] = (unsigned char)text[m] < 0x20 || text[m] == 0x7f
                                                   ? '?'
                                                   : text[m];
                        while (n > 0 && (out[n - 1] == ' ' || out[n - 1] == '?'))
                                n--;
                        out[n] = '\0';
                        if (n > 0)
                                return n;
                        break;
                }
                b = e + 1;
        }
        return 0;
}

/* ---- a userns image (memory fork) ---- */

#define USERNS_IMG_COMMON_MAGIC 0x54564319u /* CRIU's IMG_COMMON_MAGIC */
#define USERNS_IMG_MAGIC 0x55474906u        /* CRIU's USERNS_MAGIC */

struct userns_extent {
        uint32_t first, lower, count;
};

struct userns_maps {
        struct userns_extent e[2][CELLA_CRIU_USERNS_EXTENTS]; /* uid_map, gid_map */
        size_t n[2];
};

static uint32_t get_le32(const uint8_t *p)
{
        return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_le32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)v;
        p[1] = (uint8_t)(v >> 8);
        p[2] = (uint8_t)(v >> 16);
        p[3] = (uint8_t)(v >> 24);
}

/* A varint of at most 32 bits at *off of p[0..len): 0 or -EINVAL. */
static int varint32(const uint8_t *p, size_t len, size_t *off, uint32_t *ret)
{
        uint64_t v = 0;

        for (unsigned shift = 0; shift < 35; shift += 7) {
                if (*off >= len)
                        return -EINVAL;
                uint8_t b = p[(*off)++];
                v |= (uint64_t)(b & 0x7f) << shift;
                if (!(b & 0x80)) {
                        if (v > UINT32_MAX)
                                return -EINVAL;
                        *ret = (uint32_t)v;
                        return 0;
                }
        }
        return -EINVAL;
}

/* One uid_gid_extent message p[0..len): its three required fields, once each. */
static int parse_extent(const uint8_t *p, size_t len, struct userns_extent *ret)
{
        unsigned seen = 0;
        uint32_t *f[3] = {&ret->first, &ret->lower, &ret->count};

        for (size_t off = 0; off < len;) {
                uint32_t key, v;
                if (varint32(p, len, &off, &key) < 0 || (key & 7) != 0 || key >> 3 < 1 ||
                    key >> 3 > 3 || (seen & (1u << (key >> 3))) || varint32(p, len, &off, &v) < 0)
                        return -EINVAL;
                seen |= 1u << (key >> 3);
                *f[(key >> 3) - 1] = v;
        }
        return seen == 0xe ? 0 : -EINVAL;
}

/* The image in[0..len) into m: 0 or -EINVAL. */
static int userns_parse(const uint8_t *in, size_t len, struct userns_maps *m)
{
        memset(m, 0, sizeof(*m));
        if (len < 12 || len > CELLA_CRIU_USERNS_MAX || get_le32(in) != USERNS_IMG_COMMON_MAGIC ||
            get_le32(in + 4) != USERNS_IMG_MAGIC)
                return -EINVAL;
        uint32_t size = get_le32(in + 8);
        if (size != len - 12)
                return -EINVAL;
        const uint8_t *p = in + 12;
        for (size_t off = 0; off < size;) {
                uint32_t key, n;
                if (varint32(p, size, &off, &key) < 0 || (key & 7) != 2 ||
                    (key >> 3 != 1 && key >> 3 != 2) || varint32(p, size, &off, &n) < 0 ||
                    n > size - off)
                        return -EINVAL;
                size_t which = (key >> 3) - 1;
                if (m->n[which] >= CELLA_CRIU_USERNS_EXTENTS ||
                    parse_extent(p + off, n, &m->e[which][m->n[which]]) < 0)
                        return -EINVAL;
                m->n[which]++;
                off += n;
        }
        return 0;
}

static size_t put_varint(uint8_t *p, uint32_t v)
{
        size_t n = 0;
        while (v >= 0x80) {
                p[n++] = (uint8_t)(v | 0x80);
                v >>= 7;
        }
        p[n++] = (uint8_t)v;
        return n;
}

int checkpoint_userns_base(const uint8_t *in, size_t len, uint32_t *ret_base)
{
        struct userns_maps m;

        if (userns_parse(in, len, &m) < 0)
                return -EINVAL;
        for (size_t i = 0; i < m.n[0]; i++)
                if (m.e[0][i].first == 0) {
                        *ret_base = m.e[0][i].lower;
                        return 0;
                }
        return -EINVAL;
}

int checkpoint_userns_remap(const uint8_t *in, size_t len, uint32_t from, uint32_t to,
                            uint32_t count, uint8_t *out, size_t outsz, size_t *ret_len)
{
        struct userns_maps m;
        uint8_t body[2 * CELLA_CRIU_USERNS_EXTENTS * 24];
        size_t n = 0;

        *ret_len = 0;
        if (userns_parse(in, len, &m) < 0 || (uint64_t)from + count > (uint64_t)UINT32_MAX + 1 ||
            (uint64_t)to + count > (uint64_t)UINT32_MAX + 1)
                return -EINVAL;
        for (size_t w = 0; w < 2; w++)
                for (size_t i = 0; i < m.n[w]; i++) {
                        struct userns_extent *e = &m.e[w][i];
                        uint8_t ext[18];
                        size_t k = 0;
                        /* wholly inside the parent's range, moved to the child's */
                        if (e->lower < from || e->count > count ||
                            (uint64_t)e->lower + e->count > (uint64_t)from + count)
                                return -EINVAL;
                        e->lower = e->lower - from + to;
                        ext[k++] = 0x08;
                        k += put_varint(ext + k, e->first);
                        ext[k++] = 0x10;
                        k += put_varint(ext + k, e->lower);
                        ext[k++] = 0x18;
                        k += put_varint(ext + k, e->count);
                        body[n++] = w == 0 ? 0x0a : 0x12;
                        body[n++] = (uint8_t)k; /* k <= 18: one byte */
                        memcpy(body + n, ext, k);
                        n += k;
                }
        if (outsz < 12 + n)
                return -ENOSPC;
        put_le32(out, USERNS_IMG_COMMON_MAGIC);
        put_le32(out + 4, USERNS_IMG_MAGIC);
        put_le32(out + 8, (uint32_t)n);
        memcpy(out + 12, body, n);
        *ret_len = 12 + n;
        return 0;
}

/* ---- helpers ---- */

/* iproute2's magic at the head of `ip route save` (ipv4 and ipv6 alike), in host order */
#define IP_ROUTE_DUMP_MAGIC 0x45311224u

static bool image_number_name(const char *name, const char *prefix)
{
        size_t n = strlen(prefix), digits = 0;

        if (strncmp(name, prefix, n) != 0)
                return false;
        for (name += n; *name >= '0' && *name <= '9'; name++)
                digits++;
        return digits > 0 && digits <= 10 && strcmp(name, ".img") == 0;
}

bool checkpoint_ip_image_empty(const char *name, const uint8_t *data, size_t len)
{
        uint32_t magic;

        if (!image_number_name(name, "route-") && !image_number_name(name, "route6-"))
                return false;
        if (len != sizeof(magic))
                return false;
        memcpy(&magic, data, sizeof(magic));
        return magic == IP_ROUTE_DUMP_MAGIC;
}

static uint16_t get_le16(const uint8_t *p)
{
        return (uint16_t)(p[0] | p[1] << 8);
}

#define NLMSG_HDR 16
#define IFADDRMSG_LEN 8
#define RTM_NEWADDR_TYPE 20
#define IFA_CACHEINFO_TYPE 6

/* The attributes of two messages' payloads p and q (n bytes each), from off: the same but
 * for IFA_CACHEINFO's contents. */
static bool attrs_same(const uint8_t *p, const uint8_t *q, size_t off, size_t n)
{
        while (off < n) {
                if (n - off < 4)
                        return false;
                uint16_t len = get_le16(p + off), type = get_le16(p + off + 2);
                if (len < 4 || len > n - off || memcmp(p + off, q + off, 4) != 0)
                        return false;
                if ((type & 0x3fff) != IFA_CACHEINFO_TYPE &&
                    memcmp(p + off + 4, q + off + 4, len - 4u) != 0)
                        return false;
                off += ((size_t)len + 3) & ~(size_t)3;
        }
        return off == n;
}

bool checkpoint_ip_images_same(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
        size_t off = 4, n = 0;

        if (alen != blen || alen < 4 || memcmp(a, b, 4) != 0)
                return false;
        while (off < alen) {
                if (alen - off < NLMSG_HDR || ++n > CHECKPOINT_IP_MESSAGES_MAX)
                        return false;
                uint32_t len = get_le32(a + off);
                /* length, type and flags; not the sequence number and port id */
                if (len < NLMSG_HDR || len > alen - off || memcmp(a + off, b + off, 8) != 0)
                        return false;
                const uint8_t *p = a + off + NLMSG_HDR, *q = b + off + NLMSG_HDR;
                size_t plen = len - NLMSG_HDR;
                if (get_le16(a + off + 4) == RTM_NEWADDR_TYPE) {
                        if (plen < IFADDRMSG_LEN || memcmp(p, q, IFADDRMSG_LEN) != 0 ||
                            !attrs_same(p, q, IFADDRMSG_LEN, plen))
                                return false;
                } else if (memcmp(p, q, plen) != 0) {
                        return false;
                }
                off += ((size_t)len + 3) & ~(size_t)3;
        }
        return off == alen;
}

/* The next line of text[*off..len) into line (NUL-terminated, at most sz - 1 bytes; a
 * longer one is cut): false at the end. */
static bool next_line(const char *text, size_t len, size_t *off, char *line, size_t sz)
{
        if (*off >= len)
                return false;
        const char *p = text + *off, *nl = memchr(p, '\n', len - *off);
        size_t n = nl ? (size_t)(nl - p) : len - *off;
        *off += n + (nl != NULL);
        if (n >= sz)
                n = sz - 1;
        memcpy(line, p, n);
        line[n] = '\0';
        return true;
}

/* Is every comma-separated word of want one of the comma-separated words of have? */
static bool words_in(const char *want, const char *have)
{
        for (const char *w = want; *w;) {
                size_t n = strcspn(w, ","), hn;
                bool found = false;
                for (const char *h = have; *h && !found; h += hn + (h[hn] == ',')) {
                        hn = strcspn(h, ",");
                        found = hn == n && memcmp(h, w, n) == 0;
                }
                if (!found)
                        return false;
                w += n + (w[n] == ',');
        }
        return true;
}

/* Does mountinfo have the root of a hierarchy at mp: fstype, and (v1) ctl's words among its
 * super options? */
static bool yard_mounted(const char *mountinfo, size_t mlen, const char *mp, bool v2,
                         const char *ctl)
{
        char line[1024];
        size_t off = 0;

        while (next_line(mountinfo, mlen, &off, line, sizeof(line))) {
                char *f[6], *save = NULL, *sep = strstr(line, " - ");
                size_t k = 0;
                if (!sep)
                        continue;
                *sep = '\0';
                for (char *t = strtok_r(line, " ", &save); t && k < ARRAY_SIZE(f);
                     t = strtok_r(NULL, " ", &save))
                        f[k++] = t;
                /* id parent dev root mountpoint options */
                if (k < 5 || strcmp(f[3], "/") != 0 || strcmp(f[4], mp) != 0)
                        continue;
                char *g[3];
                k = 0;
                save = NULL;
                for (char *t = strtok_r(sep + 3, " ", &save); t && k < ARRAY_SIZE(g);
                     t = strtok_r(NULL, " ", &save))
                        g[k++] = t;
                /* fstype source superopts */
                if (k < 3)
                        continue;
                if (v2 ? strcmp(g[0], "cgroup2") == 0
                       : strcmp(g[0], "cgroup") == 0 && words_in(ctl, g[2]))
                        return true;
        }
        return false;
}

int checkpoint_yard_plan(const char *cgroup, size_t clen, const char *mountinfo, size_t mlen,
                         const char *root, struct checkpoint_yard *ret)
{
        char line[512], mp[CELLA_PATH_MAX + CHECKPOINT_YARD_NAME_MAX];
        size_t off = 0, seen = 0;

        memset(ret, 0, sizeof(*ret));
        while (next_line(cgroup, clen, &off, line, sizeof(line))) {
                char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
                char name[CHECKPOINT_YARD_NAME_MAX];
                size_t n = 0;
                if (!line[0])
                        continue;
                if (!c2 || c1 == line)
                        return -EINVAL;
                *c2 = '\0';
                const char *ctl = c1 + 1;
                if (++seen > CHECKPOINT_YARD_MAX)
                        return -EINVAL;
                if (!*ctl) {
                        snprintf(name, sizeof(name), "unified");
                } else {
                        for (const char *w = ctl; *w;) {
                                size_t wn = strcspn(w, ",");
                                const char *v = w;
                                if (wn > 5 && strncmp(w, "name=", 5) == 0) {
                                        v += 5;
                                        wn -= 5;
                                }
                                if (wn == 0 || n + wn + 1 >= sizeof(name))
                                        return -EINVAL;
                                if (n)
                                        name[n++] = ',';
                                for (size_t i = 0; i < wn; i++) {
                                        char ch = v[i];
                                        if (!((ch >= 'a' && ch <= 'z') ||
                                              (ch >= 'A' && ch <= 'Z') ||
                                              (ch >= '0' && ch <= '9') || strchr("_.=-", ch)))
                                                return -EINVAL;
                                        name[n++] = ch;
                                }
                                w = v + wn;
                                if (*w == ',') {
                                        w++;
                                        if (!*w)
                                                return -EINVAL;
                                }
                        }
                        name[n] = '\0';
                        if (strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                                return -EINVAL;
                }
                snprintf(mp, sizeof(mp), "%s/%s", root, name);
                if (yard_mounted(mountinfo, mlen, mp, !*ctl, ctl))
                        snprintf(ret->names[ret->n++], sizeof(ret->names[0]), "%s", name);
        }
        return 0;
}

int checkpoint_sockets(pid_t pid)
{
        char path[64], link[64];
        int n = 0;

        snprintf(path, sizeof(path), "/proc/%d/fd", (int)pid);
        DIR *d = opendir(path);
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir(d));) {
                if (de->d_name[0] == '.')
                        continue;
                ssize_t k = readlinkat(dirfd(d), de->d_name, link, sizeof(link) - 1);
                if (k > 7 && memcmp(link, "socket:", 7) == 0)
                        n++;
        }
        closedir(d);
        return n;
}

/* The reason in the CRIU log path (or what is known without it). */
static void log_reason(const char *path, char *out, size_t sz)
{
        _cleanup_free_ char *buf = malloc(CELLA_CRIU_OUTPUT_MAX);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        ssize_t n = 0, k;

        out[0] = '\0';
        if (!buf || fd < 0)
                return;
        while (n < CELLA_CRIU_OUTPUT_MAX &&
               (k = read(fd, buf + n, (size_t)(CELLA_CRIU_OUTPUT_MAX - n))) > 0)
                n += k;
        checkpoint_log_reason(buf, (size_t)n, out, sz);
}

/* Wait for the child pid (pidfd pfd) within ms, killing it past that: its wait status,
 * or -ETIMEDOUT / -errno. */
static int wait_child(pid_t pid, int pfd, int ms)
{
        int64_t deadline = (int64_t)(time_mono_us() / 1000) + ms;
        int status = 0, r = 0;

        for (;;) {
                int64_t left = deadline - (int64_t)(time_mono_us() / 1000);
                struct pollfd p = {.fd = pfd, .events = POLLIN};
                if (left <= 0) {
                        kill(pid, SIGKILL);
                        r = -ETIMEDOUT;
                        break;
                }
                int pr = poll(&p, 1, (int)left);
                if (pr < 0 && errno != EINTR) {
                        kill(pid, SIGKILL);
                        r = -errno;
                        break;
                }
                if (pr > 0)
                        break;
        }
        while (waitpid(pid, &status, 0) < 0)
                if (errno != EINTR)
                        return -errno;
        return r < 0 ? r : status;
}

/* "m" and the mount point with '/' as '_': the key CRIU files an external mount under. */
static void mount_key(const char *mp, char *out, size_t sz)
{
        size_t n = 0;
        out[n++] = 'm';
        for (; *mp && n + 1 < sz; mp++)
                out[n++] = *mp == '/' ? '_' : *mp;
        out[n] = '\0';
}

/* The mounts of pid's mount namespace that cellad binds from the host (devtmpfs: the
 * devices and the /dev/null over /proc files; cgroup2; the agent's executable), and the
 * agent's log as CRIU names a file: into x and as text for CHECKPOINT_EXTERNALS. */
static int find_externals(pid_t pid, struct checkpoint_externals *x, char *text, size_t textsz)
{
        char path[64], line[1024];
        struct stat st;
        size_t off = 0;
        int r = 0;

        memset(x, 0, sizeof(*x));
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f)) {
                char *fld[12] = {0}, *save = NULL, *p = line;
                size_t nf = 0, dash = 0;
                for (char *t; nf < ARRAY_SIZE(fld) && (t = strtok_r(p, " \n", &save)); p = NULL) {
                        fld[nf] = t;
                        if (!dash && strcmp(t, "-") == 0)
                                dash = nf;
                        nf++;
                }
                if (nf < 7 || !dash || dash + 1 >= nf)
                        continue;
                const char *mp = fld[4], *fstype = fld[dash + 1];
                if (strcmp(fstype, "devtmpfs") != 0 && strcmp(fstype, "cgroup2") != 0 &&
                    strcmp(mp, "/" MOUNTS_AGENT_EXE) != 0)
                        continue;
                if (x->n >= CELLA_CRIU_EXTERNALS_MAX || !mount_point_ok(mp, strlen(mp))) {
                        r = -E2BIG;
                        break;
                }
                snprintf(x->mounts[x->n++], sizeof(x->mounts[0]), "%s", mp);
                off += (size_t)snprintf(text + off, textsz - off, "mnt %s\n", mp);
                if (off >= textsz) {
                        r = -E2BIG;
                        break;
                }
        }
        fclose(f);
        if (r < 0)
                return r;
        /* fd 1 of the agent: its log */
        unsigned long mnt_id = 0;
        snprintf(path, sizeof(path), "/proc/%d/fdinfo/1", (int)pid);
        f = fopen(path, "re");
        if (!f)
                return -errno;
        while (fgets(line, sizeof(line), f))
                if (sscanf(line, "mnt_id: %lu", &mnt_id) == 1)
                        break;
        fclose(f);
        snprintf(path, sizeof(path), "/proc/%d/fd/1", (int)pid);
        if (mnt_id == 0 || stat(path, &st) < 0)
                return -ENOENT;
        snprintf(x->log, sizeof(x->log), "%lx:%lx", mnt_id, (unsigned long)st.st_ino);
        off += (size_t)snprintf(text + off, textsz - off, "log %s\n", x->log);
        return off >= textsz ? -E2BIG : 0;
}

/* The directories under v2 (relative, parents first) into x and text at *off. */
static int find_cgroups(const char *v2, const char *rel, struct checkpoint_externals *x, char *text,
                        size_t textsz, size_t *off)
{
        char path[CELLA_PATH_MAX + 128];
        snprintf(path, sizeof(path), "%s%s%s", v2, rel[0] ? "/" : "", rel);
        DIR *d = opendir(path);
        int r = 0;

        if (!d)
                return errno == ENOENT ? 0 : -errno;
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                char sub[128];
                if (de->d_type != DT_DIR || de->d_name[0] == '.')
                        continue;
                int n = snprintf(sub, sizeof(sub), "%s%s%s", rel, rel[0] ? "/" : "", de->d_name);
                if (n < 0 || !cgroup_rel_ok(sub, (size_t)n) ||
                    x->n_cgroups >= CELLA_CRIU_CGROUPS_MAX) {
                        r = -E2BIG;
                        break;
                }
                memcpy(x->cgroups[x->n_cgroups++], sub, (size_t)n + 1); /* n < 64: checked */
                *off += (size_t)snprintf(text + *off, textsz - *off, "cg %s\n", sub);
                if (*off >= textsz)
                        r = -E2BIG;
                else
                        r = find_cgroups(v2, sub, x, text, textsz, off);
        }
        closedir(d);
        return r;
}

/* The userns images of images moved to the host range [to, to + count) (a memory fork's
 * child; a wake's own images already are there: left as they are). */
static int remap_userns_images(const char *images, uint32_t to, uint32_t count,
                               struct cella_error *err)
{
        _cleanup_close_ int dfd = open(images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        uint8_t in[CELLA_CRIU_USERNS_MAX], out[CELLA_CRIU_USERNS_MAX];
        int r = 0;

        if (dfd < 0)
                return cella_error_errno(err, errno, "open %s", images);
        int dup_fd = fcntl(dfd, F_DUPFD_CLOEXEC, 3);
        DIR *d = dup_fd >= 0 ? fdopendir(dup_fd) : NULL;
        if (!d) {
                if (dup_fd >= 0)
                        close(dup_fd);
                return cella_error_errno(err, errno, "open %s", images);
        }
        for (struct dirent *de; r >= 0 && (de = readdir(d));) {
                size_t nl = strlen(de->d_name);
                if (nl < 11 || strncmp(de->d_name, "userns-", 7) != 0 ||
                    strcmp(de->d_name + nl - 4, ".img") != 0)
                        continue;
                struct stat st;
                _cleanup_close_ int fd = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                ssize_t n = -1;
                if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) &&
                    st.st_size <= CELLA_CRIU_USERNS_MAX)
                        n = read(fd, in, sizeof(in));
                uint32_t from = 0;
                size_t len = 0;
                if (n < 0 || checkpoint_userns_base(in, (size_t)n, &from) < 0 ||
                    (from != to && checkpoint_userns_remap(in, (size_t)n, from, to, count, out,
                                                           sizeof(out), &len) < 0)) {
                        r = cella_error_set(err, CELLA_E_MEMORY_FORK_FAILED,
                                            "%s/%s is not a user namespace image cellad can "
                                            "map to the sandbox's uids",
                                            images, de->d_name);
                        break;
                }
                if (from == to)
                        continue;
                /* written whole beside it, then renamed over it */
                _cleanup_close_ int w = openat(
                        dfd, ".userns.tmp", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                        st.st_mode & 0644);
                if (w < 0 || write(w, out, len) != (ssize_t)len || fsync(w) < 0 ||
                    renameat(dfd, ".userns.tmp", dfd, de->d_name) < 0) {
                        r = cella_error_errno(err, errno ? errno : EIO, "rewrite %s/%s", images,
                                              de->d_name);
                        unlinkat(dfd, ".userns.tmp", 0);
                }
        }
        closedir(d);
        return r < 0 ? -1 : 0;
}

/* ---- dump ---- */

/* A memory fork's dump: the tree runs on, its veth given back with this allowlist. */
struct dump_running {
        const struct net_allow *allow;
        size_t n_allow;
};

static int dump_tree(struct runtime *rt, const char *id, const struct container *c, bool network,
                     unsigned slot, int sockets_before, const char *images,
                     const struct dump_running *running, struct cella_error *err);

int runtime_checkpoint_dump(struct runtime *rt, const char *id, const struct container *c,
                            bool network, unsigned slot, int sockets_before, const char *images,
                            struct cella_error *err)
{
        return dump_tree(rt, id, c, network, slot, sockets_before, images, NULL, err);
}

int runtime_checkpoint_dump_running(struct runtime *rt, const char *id, const struct container *c,
                                    bool network, unsigned slot, const struct net_allow *allow,
                                    size_t n_allow, int sockets_before, const char *images,
                                    struct cella_error *err)
{
        const struct dump_running running = {.allow = allow, .n_allow = n_allow};
        struct cella_error e = {0};
        int r = dump_tree(rt, id, c, network, slot, sockets_before, images, &running, err);

        /* the parent's veth back whatever the dump did (its address is the slot's) */
        if (network && !net_sandbox_plugged(rt->net, slot) &&
            net_sandbox_setup(rt->net, slot, c->pid, allow, n_allow, &e) < 0) {
                if (r == 0) {
                        *err = e;
                        r = -1;
                }
                log_error("sandbox %s: its veth after a memory fork's dump: %s", id, e.msg);
        }
        if (r < 0 && runtime_container_freeze(rt, id, false, &e) < 0)
                log_error("sandbox %s: thaw after a failed memory fork's dump: %s", id, e.msg);
        return r;
}

/* What `ip addr save` and `ip rule save` say in a new network namespace with lo up: what
 * a sandbox's namespace says when its tenant changed nothing there (its lo is brought up
 * by the agent). Made once per cellad, at its first good dump, by a child in a new network
 * namespace running the `ip` CRIU runs (the first of PATH); ok false when that failed
 * (then no ifaddr or rule image is dropped). Under fresh_lock. */
#define IP_FRESH_MAX 4096
static struct {
        bool tried, ok;
        uint8_t addr[IP_FRESH_MAX], rule[IP_FRESH_MAX];
        size_t addr_len, rule_len;
} ip_fresh;
static pthread_mutex_t fresh_lock = PTHREAD_MUTEX_INITIALIZER;

_Noreturn static void ip_fresh_child(const char *ip, int nul, int addr_fd, int rule_fd)
{
        char *const up[] = {"ip", "link", "set", "lo", "up", NULL};
        char *const addr[] = {"ip", "addr", "save", NULL};
        char *const rule[] = {"ip", "rule", "save", NULL};
        char *const *argv[] = {up, addr, rule};
        const int out[] = {nul, addr_fd, rule_fd};

        if (unshare(CLONE_NEWNET) < 0)
                _exit(1);
        for (size_t i = 0; i < ARRAY_SIZE(argv); i++) {
                int st = 0;
                pid_t p = fork();
                if (p == 0) {
                        if (dup2(nul, 0) < 0 || dup2(out[i], 1) < 0 || dup2(nul, 2) < 0)
                                _exit(126);
                        execve(ip, argv[i], environ);
                        _exit(127);
                }
                if (p < 0)
                        _exit(1);
                while (waitpid(p, &st, 0) < 0)
                        if (errno != EINTR)
                                _exit(1);
                if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
                        _exit(1);
        }
        _exit(0);
}

/* The first executable "ip" of PATH into out (CRIU's execvp finds the same). */
static bool find_ip(char *out, size_t sz)
{
        const char *path = getenv("PATH");
        if (!path || !*path)
                path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
        while (*path) {
                size_t n = strcspn(path, ":");
                if (n > 0 && snprintf(out, sz, "%.*s/ip", (int)n, path) < (int)sz &&
                    access(out, X_OK) == 0)
                        return true;
                path += n + (path[n] == ':');
        }
        return false;
}

static size_t read_all(int fd, uint8_t *buf, size_t sz)
{
        size_t n = 0;
        ssize_t k;

        while (n < sz && (k = pread(fd, buf + n, sz - n, (off_t)n)) > 0)
                n += (size_t)k;
        return n;
}

static void ip_fresh_make(void)
{
        char ip[CELLA_PATH_MAX];

        ip_fresh.tried = true;
        if (!find_ip(ip, sizeof(ip)))
                return;
        _cleanup_close_ int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        _cleanup_close_ int a = memfd_create("cella-ip-addr", MFD_CLOEXEC);
        _cleanup_close_ int r = memfd_create("cella-ip-rule", MFD_CLOEXEC);
        if (nul < 0 || a < 0 || r < 0)
                return;
        pid_t pid = fork();
        if (pid == 0)
                ip_fresh_child(ip, nul, a, r);
        if (pid < 0)
                return;
        _cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0) {
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                return;
        }
        if (wait_child(pid, pfd, CELLA_CRIU_DUMP_TIMEOUT_MS) != 0)
                return;
        ip_fresh.addr_len = read_all(a, ip_fresh.addr, sizeof(ip_fresh.addr));
        ip_fresh.rule_len = read_all(r, ip_fresh.rule, sizeof(ip_fresh.rule));
        ip_fresh.ok = ip_fresh.addr_len >= 4 && ip_fresh.addr_len < sizeof(ip_fresh.addr) &&
                      ip_fresh.rule_len >= 4 && ip_fresh.rule_len < sizeof(ip_fresh.rule);
}

/* The ip images of a good dump that restore nothing (0050, "the memory wake's time")
 * removed from the images dir dfd, each an exec of `ip` (or three) the restore no longer
 * runs: a route image of `ip route save`'s magic alone (checkpoint_ip_image_empty), an
 * ifaddr or rule image that says what a new namespace with lo up says
 * (checkpoint_ip_images_same with ip_fresh). Best effort: an image left is restored as
 * before. */
static void drop_empty_ip_images(int dfd)
{
        int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
        _cleanup_free_ uint8_t *buf = malloc(IP_FRESH_MAX);

        if (!d || !buf) {
                if (d)
                        closedir(d);
                else if (fd >= 0)
                        close(fd);
                return;
        }
        pthread_mutex_lock(&fresh_lock);
        if (!ip_fresh.tried)
                ip_fresh_make();
        for (struct dirent *de; (de = readdir(d));) {
                bool drop = false;
                if (de->d_type != DT_REG)
                        continue;
                bool route = strncmp(de->d_name, "route", 5) == 0;
                bool addr = image_number_name(de->d_name, "ifaddr-");
                bool rule = image_number_name(de->d_name, "rule-");
                if (!route && !(ip_fresh.ok && (addr || rule)))
                        continue;
                _cleanup_close_ int f = openat(dfd, de->d_name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                size_t n = f >= 0 ? read_all(f, buf, IP_FRESH_MAX) : 0;
                if (f < 0 || n >= IP_FRESH_MAX)
                        continue;
                if (route)
                        drop = checkpoint_ip_image_empty(de->d_name, buf, n);
                else if (addr)
                        drop = checkpoint_ip_images_same(buf, n, ip_fresh.addr, ip_fresh.addr_len);
                else
                        drop = checkpoint_ip_images_same(buf, n, ip_fresh.rule, ip_fresh.rule_len);
                if (drop)
                        unlinkat(dfd, de->d_name, 0);
        }
        pthread_mutex_unlock(&fresh_lock);
        closedir(d);
}

static int dump_tree(struct runtime *rt, const char *id, const struct container *c, bool network,
                     unsigned slot, int sockets_before, const char *images,
                     const struct dump_running *running, struct cella_error *err)
{
        _cleanup_free_ struct checkpoint_externals *xp = calloc(1, sizeof(*xp));
        _cleanup_free_ char *text = malloc(CHECKPOINT_TEXT_MAX);
        char path[CELLA_PATH_MAX + 32], v2[CELLA_PATH_MAX];
        char pidbuf[16], reason[CRIU_REASON_MAX];
        char ext[CELLA_CRIU_EXTERNALS_MAX + 1][200];
        char *argv[24 + 2 * (CELLA_CRIU_EXTERNALS_MAX + 1)];
        const char *bin = criu_binary(getenv("CELLA_CRIU"), access(CRIU_BUILT_PATH, X_OK) == 0);
        size_t a = 0;
        int r;

        if (!c || c->pid <= 0)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "not running");
        /* cellad's link gone from the agent's side too: its end would be a socket of
         * cellad's network namespace, which CRIU cannot take */
        for (int64_t end = (int64_t)(time_mono_us() / 1000) + CELLA_CRIU_PEER_CLOSE_MS;;) {
                int n = checkpoint_sockets(c->pid);
                if (n < 0)
                        return cella_error_errno(err, -n, "the agent's descriptors");
                if (n < sockets_before)
                        break;
                if ((int64_t)(time_mono_us() / 1000) > end)
                        return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                               "the agent kept cellad's connection open");
                usleep(5000);
        }
        if (!xp || !text)
                return cella_error_errno(err, ENOMEM, "checkpoint");
        struct checkpoint_externals *x = xp;
        r = find_externals(c->pid, x, text, CHECKPOINT_TEXT_MAX);
        if (r < 0)
                return cella_error_errno(err, -r, "the sandbox's mounts");
        size_t off = strlen(text);
        r = cgroup_v2_dir(&rt->cg, rt->cgroup_name, id, v2, sizeof(v2));
        if (r >= 0)
                r = find_cgroups(v2, "", x, text, CHECKPOINT_TEXT_MAX, &off);
        if (r < 0)
                return cella_error_errno(err, -r, "the sandbox's cgroups");
        _cleanup_close_ int dfd = open(images, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd < 0)
                return cella_error_errno(err, errno, "open %s", images);
        {
                _cleanup_close_ int fd = openat(dfd, CHECKPOINT_EXTERNALS,
                                                O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
                if (fd < 0 || write(fd, text, strlen(text)) != (ssize_t)strlen(text))
                        return cella_error_errno(err, errno ? errno : EIO, "write %s",
                                                 CHECKPOINT_EXTERNALS);
        }
        /* the veth: a restored tree cannot rejoin it (0050, experiments 9 and 12) */
        if (network && (r = net_sandbox_unplug(rt->net, slot)) < 0)
                return cella_error_errno(err, -r, "remove the sandbox's veth");

        snprintf(pidbuf, sizeof(pidbuf), "%d", (int)c->pid);
        argv[a++] = (char *)bin;
        argv[a++] = "dump";
        argv[a++] = "-t";
        argv[a++] = pidbuf;
        argv[a++] = "-D";
        argv[a++] = (char *)images;
        argv[a++] = "-o";
        argv[a++] = "dump.log";
        /* No network lock: the veth is gone (above) and every process of the namespace is
         * in the tree CRIU seizes, so nothing can reach a socket while it is dumped; an
         * nftables lock would be dumped with the namespace and cost each restore its
         * unlock (libnftables in CRIU, 10 to 15 ms: docs/decisions/0050, "Fewer
         * superblocks"). Images of a dump that locked are unlocked as before. */
        argv[a++] = "--network-lock";
        argv[a++] = "skip";
        if (running) {
                /* the cgroup frozen first (the caller's files snapshot is of this instant);
                 * CRIU seizes the tree in it and leaves it frozen, as it found it */
                if (runtime_container_freeze(rt, id, true, err) < 0)
                        return -1;
                argv[a++] = "--leave-running";
                argv[a++] = "--freeze-cgroup";
                argv[a++] = v2;
                argv[a++] = "--tcp-established";
        }
        for (size_t i = 0; i < x->n; i++) {
                char key[140];
                mount_key(x->mounts[i], key, sizeof(key));
                snprintf(ext[i], sizeof(ext[i]), "mnt[%s]:%s", x->mounts[i], key);
                argv[a++] = "--external";
                argv[a++] = ext[i];
        }
        snprintf(ext[x->n], sizeof(ext[x->n]), "file[%s]", x->log);
        argv[a++] = "--external";
        argv[a++] = ext[x->n];
        argv[a] = NULL;

        posix_spawn_file_actions_t fa;
        pid_t pid;
        if (posix_spawn_file_actions_init(&fa) != 0)
                return cella_error_errno(err, ENOMEM, "criu dump");
        posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
        posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
        posix_spawn_file_actions_adddup2(&fa, 1, 2);
        r = strchr(bin, '/') ? posix_spawn(&pid, bin, &fa, NULL, argv, environ)
                             : posix_spawnp(&pid, bin, &fa, NULL, argv, environ);
        posix_spawn_file_actions_destroy(&fa);
        if (r != 0)
                return cella_error_errno(err, r, "run %s", bin);
        _cleanup_close_ int pfd = (int)syscall(SYS_pidfd_open, pid, 0);
        if (pfd < 0) {
                r = -errno;
                kill(pid, SIGKILL);
                waitpid(pid, NULL, 0);
                return cella_error_errno(err, -r, "criu dump");
        }
        r = wait_child(pid, pfd, CELLA_CRIU_DUMP_TIMEOUT_MS);
        if (r == 0) {
                drop_empty_ip_images(dfd);
                return 0;
        }
        snprintf(path, sizeof(path), "%s/dump.log", images);
        log_reason(path, reason, sizeof(reason));
        if (r == -ETIMEDOUT)
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "criu dump took more than %d ms",
                                       CELLA_CRIU_DUMP_TIMEOUT_MS);
        return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "criu dump failed: %s",
                               reason[0] ? reason : "no reason in its log");
}

/* ---- restore ---- */

/* Everything the restore's child uses, computed before the fork (it may run on a worker
 * thread of cellad: the child makes system calls only, on this memory). */
struct restore_args {
        const char *dir;
        int disk_fd;
        int lower[CELLA_SNAPSHOT_MAX_LAYERS + 1]; /* the image's last */
        size_t n_lower;
        char lower_path[CELLA_SNAPSHOT_MAX_LAYERS + 1][64];
        int agent_mnt;
        int run_mnt; /* CRIU's /run (criu_run_clone) */
        int log_fd;
        int out_fd; /* CRIU's stdout and stderr: <images>/restore.out */
        /* the "tasks" files of the sandbox's v1 cgroups (cgroup_plan_open_v1_tasks): the
         * child joins them itself (it is born in the v2 one: CLONE_INTO_CGROUP) */
        int v1_tasks[_CGROUP_V1_MAX];
        size_t n_v1_tasks;
        /* the host's hierarchies bound into CRIU's cgroup yard (checkpoint_yard_plan) */
        size_t n_yard;
        char yard_src[CHECKPOINT_YARD_MAX][96];
        char yard_dst[CHECKPOINT_YARD_MAX][96];
        const char *bin;
        char *const *argv;
};

#define RESTORE_LOG_FD 7
/* CRIU's cgroup yard, in the restore's own tmpfs */
#define CHECKPOINT_YARD CHECKPOINT_RESTORE_BASE "/cg"

_Noreturn static void restore_child(const struct restore_args *a)
{
        /* in every cgroup of the sandbox before anything else (0059's start child does
         * the same): born in the v2 one, and one thread moving itself into the v1 ones
         * takes no global lock, so no RCU grace period; what it and CRIU allocate from
         * here is the sandbox's */
        for (size_t i = 0; i < a->n_v1_tasks; i++)
                if (write(a->v1_tasks[i], "0", 1) != 1)
                        _exit(120);
        for (size_t i = 0; i < a->n_v1_tasks; i++)
                close(a->v1_tasks[i]);
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                _exit(121);
        /* CRIU's /run: where it finds the kernel's features it probed at an earlier restore
         * (criu_run_clone); the mount point of the root and the agent goes inside it */
        if (move_mount(a->run_mnt, "", AT_FDCWD, "/run", MOVE_MOUNT_F_EMPTY_PATH) < 0 ||
            (mkdir(CHECKPOINT_RESTORE_BASE, 0755) < 0 && errno != EEXIST))
                _exit(133);
        if (mount("tmpfs", CHECKPOINT_RESTORE_BASE, "tmpfs", MS_NOSUID | MS_NODEV,
                  "mode=0755,size=1m") < 0)
                _exit(122);
        if (mkdir(CHECKPOINT_RESTORE_BASE "/root", 0755) < 0)
                _exit(123);
        /* CRIU's cgroup yard: the host's hierarchies bound, not mounted anew (CRIU mounts
         * any left out there itself) */
        if (mkdir(CHECKPOINT_YARD, 0700) < 0)
                _exit(123);
        for (size_t i = 0; i < a->n_yard; i++)
                if (mkdir(a->yard_dst[i], 0700) < 0 ||
                    mount(a->yard_src[i], a->yard_dst[i], NULL, MS_BIND, NULL) < 0)
                        _exit(134);
        int f = open(CHECKPOINT_RESTORE_BASE "/cella-init", O_WRONLY | O_CREAT | O_CLOEXEC, 0555);
        if (f < 0)
                _exit(123);
        close(f);
        if (move_mount(a->agent_mnt, "", AT_FDCWD, CHECKPOINT_RESTORE_BASE "/cella-init",
                       MOVE_MOUNT_F_EMPTY_PATH) < 0)
                _exit(124);
        /* the disk beside the root, not over the sandbox dir: the images are there */
        if (a->disk_fd >= 0 &&
            (mkdir(CHECKPOINT_RESTORE_BASE "/disk", 0700) < 0 ||
             move_mount(a->disk_fd, "", AT_FDCWD, CHECKPOINT_RESTORE_BASE "/disk",
                        MOVE_MOUNT_F_EMPTY_PATH) < 0))
                _exit(125);
        int dir_fd = open(a->disk_fd >= 0 ? CHECKPOINT_RESTORE_BASE "/disk" : a->dir,
                          O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir_fd < 0)
                _exit(126);
        int upper = openat(dir_fd, "upper", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        int work = openat(dir_fd, "work", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (upper < 0 || work < 0)
                _exit(126);
        int ofs = fsopen("overlay", FSOPEN_CLOEXEC);
        if (ofs < 0)
                _exit(127);
        for (size_t i = 0; i < a->n_lower; i++) {
                if (mkdir(a->lower_path[i], 0755) < 0 ||
                    move_mount(a->lower[i], "", AT_FDCWD, a->lower_path[i],
                               MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        _exit(128);
                int l = open(a->lower_path[i], O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (l < 0 || fsconfig(ofs, FSCONFIG_SET_FD, "lowerdir+", NULL, l) < 0)
                        _exit(128);
        }
        if (fsconfig(ofs, FSCONFIG_SET_FD, "upperdir", NULL, upper) < 0 ||
            fsconfig(ofs, FSCONFIG_SET_FD, "workdir", NULL, work) < 0 ||
            fsconfig(ofs, FSCONFIG_SET_FLAG, "userxattr", NULL, 0) < 0 ||
            fsconfig(ofs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                _exit(129);
        int root = fsmount(ofs, FSMOUNT_CLOEXEC, 0);
        if (root < 0 || move_mount(root, "", AT_FDCWD, CHECKPOINT_RESTORE_BASE "/root",
                                   MOVE_MOUNT_F_EMPTY_PATH) < 0)
                _exit(130);
        int nul = open("/dev/null", O_RDWR | O_CLOEXEC);
        if (nul < 0 || dup2(nul, 0) < 0 || dup2(a->out_fd, 1) < 0 || dup2(a->out_fd, 2) < 0 ||
            dup2(a->log_fd, RESTORE_LOG_FD) < 0)
                _exit(131);
        close_range(3, RESTORE_LOG_FD - 1, CLOSE_RANGE_CLOEXEC);
        close_range(RESTORE_LOG_FD + 1, ~0U, CLOSE_RANGE_CLOEXEC);
        execve(a->bin, a->argv, environ);
        _exit(132);
}

static const char *const restore_steps[] = {
        "join the sandbox's v1 cgroups",
        "private mount namespace",
        "tmpfs for the root and the agent",
        "its directories",
        "bind the agent",
        "attach the disk",
        "open the sandbox dir",
        "overlay",
        "attach a lower layer",
        "mount overlay",
        "attach the root",
        "descriptors",
        "exec criu",
        "CRIU's /run",
        "bind a cgroup hierarchy into CRIU's yard",
};

/* A cgroup directory and its files given to owner, as if it had made it. */
static int chown_cgroup(const char *path, uid_t owner)
{
        DIR *d = opendir(path);
        int r = 0;

        if (!d)
                return -errno;
        if (fchown(dirfd(d), owner, owner) < 0)
                r = -errno;
        for (struct dirent *de; r >= 0 && (de = readdir(d));)
                if (de->d_type == DT_REG &&
                    fchownat(dirfd(d), de->d_name, owner, owner, AT_SYMLINK_NOFOLLOW) < 0)
                        r = -errno;
        closedir(d);
        return r;
}

/* CRIU's /run in a restore's mount namespace: a clone of a detached tmpfs of cellad's
 * (made at the first restore, kept while cellad runs, reachable by no path of the host or of
 * a sandbox). CRIU probes the kernel's features at each start (namespaces made, mounts,
 * sockets, the vDSO parsed: a third of a sandbox's restore) unless it finds the result of an
 * earlier run in /run/criu.kdat, and it keeps that file only on a tmpfs, which this host's
 * /run is not. With this one, the first restore of a cellad probes and saves the file, and
 * each later one reads it: the cache CRIU keeps on a host whose /run is a tmpfs, with CRIU's
 * own checks of it (its magics and size), for the life of one cellad (a kernel does not
 * change under it). */
static int criu_run_clone(struct runtime *rt)
{
        if (rt->criu_run_mnt < 0) {
                _cleanup_close_ int fs = fsopen("tmpfs", FSOPEN_CLOEXEC);
                if (fs < 0)
                        return -errno;
                if (fsconfig(fs, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0 ||
                    fsconfig(fs, FSCONFIG_SET_STRING, "size", "1m", 0) < 0 ||
                    fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                        return -errno;
                int m = fsmount(fs, FSMOUNT_CLOEXEC,
                                MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC);
                if (m < 0)
                        return -errno;
                rt->criu_run_mnt = m;
        }
        int fd = open_tree(rt->criu_run_mnt, "",
                           OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        return fd < 0 ? -errno : fd;
}

/* The hierarchies a restore's yard binds (checkpoint_yard_plan on cellad's own
 * /proc/self/cgroup and mountinfo), found once per cellad: the host's cgroup mounts do not
 * change under it. None when they cannot be read (CRIU then mounts them all). */
static struct checkpoint_yard yard;
static bool yard_tried;
static pthread_mutex_t yard_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t read_file(const char *path, char *buf, size_t sz)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        size_t n = 0;
        ssize_t k;

        while (fd >= 0 && n < sz && (k = read(fd, buf + n, sz - n)) > 0)
                n += (size_t)k;
        return n;
}

static void yard_find(struct checkpoint_yard *ret)
{
        pthread_mutex_lock(&yard_lock);
        if (!yard_tried) {
                _cleanup_free_ char *cg = malloc(4096), *mi = malloc(CHECKPOINT_TEXT_MAX);
                yard_tried = true;
                if (cg && mi) {
                        size_t cn = read_file("/proc/self/cgroup", cg, 4096);
                        size_t mn = read_file("/proc/self/mountinfo", mi, CHECKPOINT_TEXT_MAX);
                        if (cn < 4096 && mn < CHECKPOINT_TEXT_MAX &&
                            checkpoint_yard_plan(cg, cn, mi, mn, "/sys/fs/cgroup", &yard) < 0)
                                memset(&yard, 0, sizeof(yard));
                }
        }
        *ret = yard;
        pthread_mutex_unlock(&yard_lock);
}

/* The restore once its layers are made: cgroups, the child, CRIU, the PID 1 and its
 * network. */
static int restore_exec(struct runtime *rt, const struct container_spec *spec, const char *images,
                        const struct checkpoint_externals *xp, struct restore_args *rap,
                        struct container *ret, struct cella_error *err)
{
        const struct checkpoint_externals *x = xp;
        struct restore_args ra = *rap;
        char path[CELLA_PATH_MAX + 64], v2cg[CELLA_PATH_MAX], reason[CRIU_REASON_MAX];
        char ext[CELLA_CRIU_EXTERNALS_MAX][CELLA_PATH_MAX + 160], inherit[80];
        char pidfile[CELLA_PATH_MAX + 32], cgroot[4][160];
        char *argv[34 + 2 * CELLA_CRIU_EXTERNALS_MAX];
        const char *bin = ra.bin;
        size_t a = 0;
        int r;

        /* cgroups as a start makes them */
        _cleanup_free_ struct cgroup_plan *plan = calloc(1, sizeof(*plan));
        if (!plan) {
                r = cella_error_errno(err, ENOMEM, "cgroup plan");
                return r;
        }
        struct cgroup_limits lim = {.memory_bytes = spec->limits.memory_bytes,
                                    .cpu_millis = spec->limits.cpu_millis,
                                    .pids_max = spec->limits.pids_max};
        size_t failed = 0;
        r = cgroup_plan_make(&rt->cg, rt->cgroup_name, spec->id, &lim, spec->uid_base, plan);
        if (r < 0 || (r = cgroup_plan_apply(plan, &failed)) < 0) {
                cella_error_errno(err, -r, "cgroups");
                return r;
        }
        snprintf(v2cg, sizeof(v2cg), "%s", plan->v2_dir);
        PROBE("cgroup mkdir and limits");
        /* the agent's cgroups below, as it made them (its own: the sandbox root's) */
        for (size_t i = 0; i < x->n_cgroups; i++) {
                snprintf(path, sizeof(path), "%s/%s", v2cg, x->cgroups[i]);
                if (mkdir(path, 0755) < 0 && errno != EEXIST)
                        return cella_error_errno(err, errno, "cgroup %s", x->cgroups[i]);
                r = chown_cgroup(path, spec->uid_base);
                if (r < 0)
                        return cella_error_errno(err, -r, "cgroup %s", x->cgroups[i]);
        }

        /* criu restore's command */
        snprintf(pidfile, sizeof(pidfile), "%s/restore.pid", images);
        unlink(pidfile);
        argv[a++] = (char *)bin;
        argv[a++] = "restore";
        argv[a++] = "-D";
        argv[a++] = (char *)images;
        argv[a++] = "-o";
        argv[a++] = "restore.log";
        argv[a++] = "--restore-detached";
        argv[a++] = "--root";
        argv[a++] = CHECKPOINT_RESTORE_BASE "/root";
        argv[a++] = "--manage-cgroups=none";
        argv[a++] = "--cgroup-yard";
        argv[a++] = CHECKPOINT_YARD;
        argv[a++] = "--tcp-close"; /* a memory fork's: the parent's connections stay its own */
        /* the images name the cgroups of the sandbox dumped (a memory fork's: the
         * parent's): rebased on this sandbox's, in every hierarchy */
        {
                /* v2 (CRIU's controller ""), then the v1 controllers cellad uses; the
                 * others stay where the tree was (the hierarchies' roots) */
                static const char *const ctl[] = {"", "memory", "pids", "cpu"};
                for (size_t i = 0; i < ARRAY_SIZE(ctl); i++) {
                        if (i > 0 && !plan->v1_dir[i - 1][0])
                                continue;
                        snprintf(cgroot[i], sizeof(cgroot[i]), "%s:/%s/%s", ctl[i], rt->cgroup_name,
                                 spec->id);
                        argv[a++] = "--cgroup-root";
                        argv[a++] = cgroot[i];
                }
        }
        argv[a++] = "--pidfile";
        argv[a++] = pidfile;
        for (size_t i = 0; i < x->n; i++) {
                char key[140];
                const char *to = x->mounts[i];
                mount_key(x->mounts[i], key, sizeof(key));
                if (strcmp(to, "/" MOUNTS_AGENT_EXE) == 0)
                        to = CHECKPOINT_RESTORE_BASE "/cella-init";
                else if (strcmp(to, "/sys/fs/cgroup") == 0)
                        to = v2cg;
                else if (strncmp(to, "/proc/", 6) == 0)
                        to = "/dev/null";
                snprintf(ext[i], sizeof(ext[i]), "mnt[%s]:%s", key, to);
                argv[a++] = "--external";
                argv[a++] = ext[i];
        }
        snprintf(inherit, sizeof(inherit), "fd[%d]:file[%s]", RESTORE_LOG_FD, x->log);
        argv[a++] = "--inherit-fd";
        argv[a++] = inherit;
        argv[a] = NULL;
        ra.bin = bin;
        ra.argv = argv;

        snprintf(path, sizeof(path), "%s/restore.out", images);
        _cleanup_close_ int out_fd =
                open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (out_fd < 0)
                return cella_error_errno(err, errno, "open %s", path);
        ra.out_fd = out_fd;
        {
                struct checkpoint_yard y;
                yard_find(&y);
                for (size_t i = 0; i < y.n; i++) {
                        snprintf(ra.yard_src[i], sizeof(ra.yard_src[i]), "/sys/fs/cgroup/%s",
                                 y.names[i]);
                        snprintf(ra.yard_dst[i], sizeof(ra.yard_dst[i]), "%s/%s", CHECKPOINT_YARD,
                                 y.names[i]);
                }
                ra.n_yard = y.n;
        }
        _cleanup_close_ int cg = open(v2cg, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (cg < 0)
                return cella_error_errno(err, errno, "open %s", v2cg);
        r = cgroup_plan_open_v1_tasks(plan, ra.v1_tasks, &ra.n_v1_tasks);
        if (r < 0)
                return cella_error_errno(err, -r, "open the sandbox's v1 cgroups");
        /* the child (and so CRIU and the tree it restores) born in the sandbox's v2
         * cgroup, joining the v1 ones itself */
        int pfd = -EBADF;
        struct clone_args ca;
        memset(&ca, 0, sizeof(ca));
        ca.flags = CLONE_PIDFD | CLONE_INTO_CGROUP;
        ca.pidfd = (uint64_t)(uintptr_t)&pfd;
        ca.exit_signal = SIGCHLD;
        ca.cgroup = (uint64_t)cg;
        pid_t pid = (pid_t)syscall(SYS_clone3, &ca, sizeof(ca));
        if (pid == 0)
                restore_child(&ra);
        int clone_errno = errno;
        for (size_t i = 0; i < ra.n_v1_tasks; i++)
                close(ra.v1_tasks[i]);
        if (pid < 0)
                return cella_error_errno(err, clone_errno, "clone3 into the sandbox's cgroup");
        PROBE("clone3 into the cgroups");
        int status = wait_child(pid, pfd, CELLA_CRIU_RESTORE_TIMEOUT_MS);
        close(pfd);
        PROBE("mounts and criu restore");
        if (status != 0) {
                snprintf(path, sizeof(path), "%s/restore.log", images);
                log_reason(path, reason, sizeof(reason));
                if (!reason[0]) {
                        snprintf(path, sizeof(path), "%s/restore.out", images);
                        log_reason(path, reason, sizeof(reason));
                }
                if (status == -ETIMEDOUT)
                        r = cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                            "criu restore took more than %d ms",
                                            CELLA_CRIU_RESTORE_TIMEOUT_MS);
                else if (WIFEXITED(status) && WEXITSTATUS(status) >= 120 &&
                         WEXITSTATUS(status) < 120 + (int)ARRAY_SIZE(restore_steps))
                        r = cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "restore: %s failed",
                                            restore_steps[WEXITSTATUS(status) - 120]);
                else
                        r = cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                            "criu restore failed: %s",
                                            reason[0] ? reason : "no reason in its log");
                return r;
        }
        /* its PID 1, as CRIU wrote it (cellad's dir), checked to be in the sandbox's
         * cgroup */
        {
                char buf[32] = {0};
                _cleanup_close_ int fd = open(pidfile, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                long v = n > 0 ? strtol(buf, NULL, 10) : 0;
                if (v <= 1) {
                        r = cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                            "criu restore wrote no pid");
                        return r;
                }
                ret->pid = (pid_t)v;
        }
        ret->pidfd = (int)syscall(SYS_pidfd_open, ret->pid, 0);
        if (ret->pidfd < 0) {
                r = cella_error_errno(err, errno, "the restored PID 1");
                return r;
        }
        fcntl(ret->pidfd, F_SETFD, FD_CLOEXEC);
        {
                char procs[64 + CELLA_PATH_MAX], buf[4096];
                snprintf(procs, sizeof(procs), "/proc/%d/cgroup", (int)ret->pid);
                _cleanup_close_ int fd = open(procs, O_RDONLY | O_CLOEXEC);
                ssize_t n = fd >= 0 ? read(fd, buf, sizeof(buf) - 1) : -1;
                snprintf(procs, sizeof(procs), "/%s/%s\n", rt->cgroup_name, spec->id);
                buf[n > 0 ? n : 0] = '\0';
                if (n <= 0 || !strstr(buf, procs)) {
                        r = cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                            "the restored PID 1 is not in the sandbox's cgroup");
                        goto out_pid;
                }
        }
        PROBE("pid, pidfd, cgroup check");
        if (spec->network && (r = net_sandbox_setup(rt->net, spec->slot, ret->pid, spec->net_allow,
                                                    spec->net_allow_n, err)) < 0)
                goto out_pid;
        PROBE("veth");
        return 0;
out_pid:
        syscall(SYS_pidfd_send_signal, ret->pidfd, SIGKILL, NULL, 0);
        close(ret->pidfd);
        ret->pidfd = -EBADF;
        ret->pid = -1;
        return -1;
}

int runtime_checkpoint_restore(struct runtime *rt, const struct container_spec *spec,
                               const char *images, struct container *ret, struct cella_error *err)
{
        _cleanup_free_ struct checkpoint_externals *x = calloc(1, sizeof(*x));
        char path[CELLA_PATH_MAX + 64];
        struct restore_args ra = {.dir = spec->dir, .disk_fd = -EBADF};
        const char *bin = criu_binary(getenv("CELLA_CRIU"), access(CRIU_BUILT_PATH, X_OK) == 0);
        int r;

        PROBE_BEGIN();
        ra.bin = bin;
        ret->pid = -1;
        ret->pidfd = -EBADF;
        if (!strchr(bin, '/'))
                return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                       "criu restore: %s is not a path", bin);
        /* what the dump named external: written by cellad, checked all the same */
        {
                _cleanup_free_ char *text = malloc(CHECKPOINT_TEXT_MAX);
                snprintf(path, sizeof(path), "%s/%s", images, CHECKPOINT_EXTERNALS);
                _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                ssize_t n = 0, k;
                if (fd < 0 || !text || !x)
                        return cella_error_errno(err, fd < 0 ? errno : ENOMEM, "read %s", path);
                while (n < CHECKPOINT_TEXT_MAX &&
                       (k = read(fd, text + n, (size_t)(CHECKPOINT_TEXT_MAX - n))) > 0)
                        n += k;
                if (checkpoint_externals_parse(text, (size_t)n, x) < 0)
                        return cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE,
                                               "%s is not what cellad writes", path);
        }
        PROBE("externals");
        /* the sandbox's own uids: a memory fork's child has the parent's in its images */
        if (remap_userns_images(images, (uint32_t)spec->uid_base, spec->uid_count, err) < 0)
                return -1;
        /* CRIU reads the images from inside the sandbox's user namespace as well: the
         * dir searchable (0711: no listing, the files CRIU's 0644), under the sandbox dir,
         * which stays cellad's 0700, so no path reaches it from outside cellad */
        if (chmod(images, 0711) < 0)
                return cella_error_errno(err, errno, "chmod %s", images);
        r = mkdir(CHECKPOINT_RESTORE_BASE, 0755);
        if (r < 0 && errno != EEXIST)
                return cella_error_errno(err, errno, "mkdir %s", CHECKPOINT_RESTORE_BASE);

        _cleanup_close_ int dir_fd = open(spec->dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (dir_fd < 0)
                return cella_error_errno(err, errno, "open %s", spec->dir);
        _cleanup_close_ int disk_fd = -EBADF;
        r = container_open_disk(rt, spec, dir_fd, &disk_fd, err);
        if (r < 0)
                return r;
        /* a memory fork's child: its own writable layer is new (the parent's files are
         * its snapshot's layer), made as a start makes it, with its own name */
        {
                struct stat st;
                int root_fd = disk_fd >= 0 ? disk_fd : dir_fd;
                if (fstatat(root_fd, "upper", &st, AT_SYMLINK_NOFOLLOW) < 0 &&
                    (r = container_prepare_upper(rt, spec, root_fd, err)) < 0)
                        return r;
        }
        ra.disk_fd = disk_fd;
        _cleanup_close_ int log_fd = container_open_agent_log(dir_fd, spec->uid_base);
        if (log_fd < 0)
                return cella_error_errno(err, -log_fd, "open %s/agent.log", spec->dir);
        ra.log_fd = log_fd;
        _cleanup_close_ int agent_mnt = container_agent_bind(rt);
        if (agent_mnt < 0)
                return cella_error_errno(err, -agent_mnt, "bind the agent's executable");
        ra.agent_mnt = agent_mnt;
        _cleanup_close_ int run_mnt = criu_run_clone(rt);
        if (run_mnt < 0)
                return cella_error_errno(err, -run_mnt, "a tmpfs for CRIU's /run");
        ra.run_mnt = run_mnt;
        PROBE("disk, agent log and bind, CRIU's /run");

        /* the image and the snapshots' layers seen with the sandbox's map (its own user
         * namespace is one CRIU makes from the images) */
        _cleanup_close_ int userns =
                container_mapped_userns(0, (uint32_t)spec->uid_base, spec->uid_count);
        if (userns < 0)
                return cella_error_errno(err, -userns, "a user namespace of the sandbox's map");
        PROBE("user namespace of the map");
        for (size_t i = 0; i < ARRAY_SIZE(ra.lower); i++)
                ra.lower[i] = -EBADF;
        r = 0;
        for (size_t i = 0; r >= 0 && i < spec->n_layers; i++) {
                const struct container_layer *li = spec->layer_info ? &spec->layer_info[i] : NULL;
                ra.lower[i] = li && li->disk ? container_lower_disk(spec->layers[i], li->id_base,
                                                                    spec, userns)
                                             : container_lower(spec->layers[i], userns);
                r = ra.lower[i];
        }
        if (r >= 0) {
                ra.lower[spec->n_layers] = container_lower(spec->rootfs, userns);
                r = ra.lower[spec->n_layers];
        }
        ra.n_lower = spec->n_layers + 1;
        for (size_t i = 0; i < ra.n_lower; i++)
                snprintf(ra.lower_path[i], sizeof(ra.lower_path[i]), "%s/l%zu",
                         CHECKPOINT_RESTORE_BASE, i);
        PROBE("idmapped layers");
        if (r < 0)
                cella_error_errno(err, -r, "idmapped mount of the image");
        else
                r = restore_exec(rt, spec, images, x, &ra, ret, err);
        for (size_t i = 0; i < ARRAY_SIZE(ra.lower); i++)
                if (ra.lower[i] >= 0)
                        close(ra.lower[i]);
        PROBE_END("memory wake (runtime)");
        return r < 0 ? (r == -1 ? -EIO : r) : 0;
}
