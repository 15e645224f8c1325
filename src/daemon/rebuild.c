/* Identity files and the registry rebuilt from them (rebuild.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/timeutil.h"
#include "daemon/instance-type.h"
#include "daemon/rebuild.h"
#include "daemon/tenant.h"

char *identity_format(const struct store_sandbox *rec)
{
        json_t *allow =
                json_loads(rec->network_allow_json ? rec->network_allow_json : "[]", 0, NULL);
        _cleanup_json_ json_t *o = NULL;

        if (!json_is_array(allow)) {
                json_decref(allow);
                allow = json_array();
        }
        o = json_pack("{s:s, s:s, s:s, s:I, s:s, s:o, s:I, s:b, s:b}", "name", rec->name, "image",
                      rec->image, "instanceType", rec->instance_type, "createdMs",
                      (json_int_t)rec->created_ms, "network", rec->network ? rec->network : "none",
                      "networkAllow", allow, "sleepAfterMs", (json_int_t)rec->sleep_after_ms,
                      "keepAlive", rec->keep_alive != 0, "enableDefaultSession",
                      rec->default_session != 0);
        /* only when there is one: the files of other sandboxes stay as they were */
        if (o && rec->snapshot && rec->snapshot[0] &&
            json_object_set_new(o, "snapshot", json_string(rec->snapshot)) < 0)
                return NULL;
        /* likewise sleepMode, only when it is not the default "files" (0050) */
        if (o && rec->sleep_mode && strcmp(rec->sleep_mode, "memory") == 0 &&
            json_object_set_new(o, "sleepMode", json_string("memory")) < 0)
                return NULL;
        if (!o)
                return NULL;
        return json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
}

static bool is_image_name(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n >= 64 || s[0] == '.')
                return false;
        for (; *s; s++)
                if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '-' ||
                      *s == '_' || *s == '.'))
                        return false;
        return true;
}

int identity_parse(const char *text, size_t len, struct identity *ret)
{
        struct identity id = {0};
        const char *name = NULL, *image = NULL, *itype = NULL, *network = NULL, *snap = NULL;
        const char *sleep_mode = NULL;
        json_int_t created = 0, sleep_after = 0;
        int keep_alive = 0, default_session = 1;
        _cleanup_json_ json_t *o = NULL;
        json_t *allow = NULL, *v;
        char *allow_text = NULL;
        int r = -EINVAL;
        size_t i;

        if (len > IDENTITY_MAX)
                return -EINVAL;
        o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        if (!o || json_unpack(o, "{s:s, s:s, s:s, s:I, s:s, s:o, s:I, s:b, s:b, s?s, s?s}", "name",
                              &name, "image", &image, "instanceType", &itype, "createdMs", &created,
                              "network", &network, "networkAllow", &allow, "sleepAfterMs",
                              &sleep_after, "keepAlive", &keep_alive, "enableDefaultSession",
                              &default_session, "snapshot", &snap, "sleepMode", &sleep_mode) < 0)
                goto out;
        if (tenant_internal_name_check(name, id.name) < 0 || /* a tenant's too: decision 0053 */
            sandbox_name_is_reserved(name) || !is_image_name(image) || !instance_type_find(itype) ||
            (strcmp(network, "none") != 0 && strcmp(network, "outbound") != 0) ||
            !json_is_array(allow) || json_array_size(allow) > CELLA_NETWORK_ALLOW_MAX ||
            created < 0 || sleep_after <= 0 || (snap && !image_name_is_valid(snap)) ||
            (sleep_mode && strcmp(sleep_mode, "files") != 0 && strcmp(sleep_mode, "memory") != 0))
                goto out;
        json_array_foreach(allow, i, v)
        {
                if (!json_is_string(v))
                        goto out;
        }
        allow_text = json_dumps(allow, JSON_COMPACT);
        if (!allow_text || strlen(allow_text) >= sizeof(id.network_allow) ||
            strlen(itype) >= sizeof(id.instance_type))
                goto out;
        snprintf(id.image, sizeof(id.image), "%s", image);
        snprintf(id.instance_type, sizeof(id.instance_type), "%s", itype);
        snprintf(id.network, sizeof(id.network), "%s", network);
        snprintf(id.network_allow, sizeof(id.network_allow), "%s", allow_text);
        snprintf(id.snapshot, sizeof(id.snapshot), "%s", snap ? snap : "");
        snprintf(id.sleep_mode, sizeof(id.sleep_mode), "%s", sleep_mode ? sleep_mode : "files");
        *ret = id;
        ret->rec = (struct store_sandbox){
                .name = ret->name,
                .image = ret->image,
                .instance_type = ret->instance_type,
                .env_json = "{}",
                .labels_json = "{}",
                .created_ms = created,
                .sleep_after_ms = sleep_after,
                .keep_alive = keep_alive != 0,
                .default_session = default_session != 0,
                .network = ret->network,
                .network_allow_json = ret->network_allow,
                .snapshot = ret->snapshot,
                .sleep_mode = ret->sleep_mode,
        };
        r = 0;
out:
        free(allow_text);
        return r;
}

int identity_write(const char *dir, const char *text, struct cella_error *err)
{
        char tmp[CELLA_PATH_MAX + 32], path[CELLA_PATH_MAX + 32];
        size_t len = strlen(text), off = 0;
        int fd, r = 0;

        if (snprintf(path, sizeof(path), "%s/" IDENTITY_FILE, dir) >= (int)sizeof(path) ||
            snprintf(tmp, sizeof(tmp), "%s/." IDENTITY_FILE ".tmp", dir) >= (int)sizeof(tmp))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        /* Written over and cut to its length rather than opened with O_TRUNC: ext4 flushes
         * on close a file truncated to nothing (auto_da_alloc), a synchronous write-out per
         * claim in the loop's commit (decision 0059). The text is never empty. */
        fd = open(tmp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                r = -errno;
        while (r == 0 && off < len) {
                ssize_t n = pwrite(fd, text + off, len - off, (off_t)off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        r = -errno;
                else
                        off += (size_t)n;
        }
        if (r == 0 && ftruncate(fd, (off_t)len) < 0)
                r = -errno;
        if (fd >= 0 && close(fd) < 0 && r == 0)
                r = -errno;
        if (r == 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                unlink(tmp);
                if (r == -ENOSPC || r == -EDQUOT)
                        return cella_error_set(err, CELLA_E_INSUFFICIENT_STORAGE,
                                               "the data directory is full: write %s: %s", path,
                                               strerror(-r));
                return cella_error_errno(err, r, "write %s", path);
        }
        return 0;
}

int identity_prepare(const char *dir)
{
        char tmp[CELLA_PATH_MAX + 32];
        int fd;

        if (snprintf(tmp, sizeof(tmp), "%s/." IDENTITY_FILE ".tmp", dir) >= (int)sizeof(tmp))
                return -ENAMETOOLONG;
        fd = open(tmp, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd < 0)
                return -errno;
        close(fd);
        return 0;
}

int64_t proc_start_time(pid_t pid)
{
        char path[64], buf[1024];
        const char *p;
        ssize_t n;
        int fd;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -1;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n <= 0)
                return -1;
        buf[n] = '\0';
        p = strrchr(buf, ')'); /* the command name may hold spaces and parentheses */
        if (!p)
                return -1;
        for (int field = 2; field < 22 && p; field++)
                p = strchr(p + 1, ' ');
        return p ? strtoll(p + 1, NULL, 10) : -1;
}

/* Read a small file into buf (NUL-terminated); returns its length or -errno. */
static ssize_t read_small(const char *path, char *buf, size_t size)
{
        _cleanup_close_ int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        size_t off = 0;

        if (fd < 0)
                return -errno;
        while (off < size - 1) {
                ssize_t n = read(fd, buf + off, size - 1 - off);
                if (n < 0 && errno == EINTR)
                        continue;
                if (n < 0)
                        return -errno;
                if (n == 0)
                        break;
                off += (size_t)n;
        }
        buf[off] = '\0';
        return (ssize_t)off;
}

bool identity_is(const char *dir, const char *text)
{
        char path[CELLA_PATH_MAX + 32], buf[IDENTITY_MAX + 1];

        if (snprintf(path, sizeof(path), "%s/" IDENTITY_FILE, dir) >= (int)sizeof(path))
                return false;
        return read_small(path, buf, sizeof(buf)) >= 0 && strcmp(buf, text) == 0;
}

/* The slot of the cgroup path (the v2 line "0::PATH" of /proc/PID/cgroup) when it is
 * <anything>/<cgname>/s<slot>[/...], else -1. */
static int cgroup_slot(const char *line, const char *cgname)
{
        size_t cl = strlen(cgname);
        unsigned slot;

        for (const char *p = strchr(line, '/'); p; p = strchr(p + 1, '/')) {
                const char *id = p + 1 + cl + 1, *end;

                if (strncmp(p + 1, cgname, cl) != 0 || p[1 + cl] != '/')
                        continue;
                end = strchr(id, '/');
                if (!end)
                        end = id + strlen(id);
                if (slot_id_parse(id, (size_t)(end - id), CELLA_UID_SLOTS_MAX, &slot) == 0)
                        return (int)slot;
        }
        return -1;
}

/* Is pid the first process of a pid namespace one level below ours ("NSpid: N 1")? A
 * sandbox's own nested namespaces have three or more levels. */
static bool is_ns_init(pid_t pid)
{
        char path[64], buf[4096], *p, *end;
        int fields = 0;
        long last = 0;

        snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
        if (read_small(path, buf, sizeof(buf)) < 0)
                return false;
        p = strstr(buf, "\nNSpid:");
        if (!p)
                return false;
        p += 7;
        for (;;) {
                long v = strtol(p, &end, 10);
                if (end == p)
                        break;
                fields++;
                last = v;
                p = end;
        }
        return fields == 2 && last == 1;
}

/* pids[slot] = the host pid of the PID 1 in cgroup <cgname>/s<slot>, for every slot. */
static void find_pid1s(const char *cgname, pid_t *pids)
{
        char path[64], buf[4096];
        struct dirent *de;
        DIR *d = opendir("/proc");

        if (!d)
                return;
        while ((de = readdir(d))) {
                char *end, *line;
                long pid = strtol(de->d_name, &end, 10);
                int slot;

                if (end == de->d_name || *end || pid <= 1)
                        continue;
                snprintf(path, sizeof(path), "/proc/%ld/cgroup", pid);
                if (read_small(path, buf, sizeof(buf)) < 0)
                        continue;
                line = strstr(buf, "0::");
                while (line && line != buf && line[-1] != '\n')
                        line = strstr(line + 1, "0::");
                if (!line)
                        continue;
                end = strchr(line, '\n');
                if (end)
                        *end = '\0';
                slot = cgroup_slot(line + 3, cgname);
                if (slot >= 0 && !pids[slot] && is_ns_init((pid_t)pid))
                        pids[slot] = (pid_t)pid;
        }
        closedir(d);
}

int rebuild_registry(struct store *st, const char *data_dir, const char *cgroup_name,
                     struct rebuild_result *ret, struct cella_error *err)
{
        uint64_t t0 = time_mono_us();
        struct rebuild_result res = {0};
        char path[CELLA_PATH_MAX], file[CELLA_PATH_MAX + 300];
        _cleanup_free_ pid_t *pids = NULL;
        _cleanup_free_ char *names = NULL; /* names[slot * (CELLA_NAME_MAX + 1)] */
        _cleanup_free_ struct identity *id = NULL;
        struct dirent *de;
        DIR *d;
        int r = 0;

        if (store_meta_set(st, "layout", "slot", err) < 0)
                return -1;
        pids = calloc(CELLA_UID_SLOTS_MAX, sizeof(*pids));
        names = calloc(CELLA_UID_SLOTS_MAX, CELLA_NAME_MAX + 1);
        id = malloc(sizeof(*id));
        if (!pids || !names || !id)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        snprintf(path, sizeof(path), "%s/sandboxes", data_dir);
        d = opendir(path);
        if (!d) {
                *ret = res;
                return 0;
        }
        find_pid1s(cgroup_name, pids);
        while (r == 0 && (de = readdir(d))) {
                char text[IDENTITY_MAX + 1];
                unsigned slot;
                ssize_t n;
                bool dup = false;

                if (slot_id_parse(de->d_name, strlen(de->d_name), CELLA_UID_SLOTS_MAX, &slot) < 0)
                        continue;
                snprintf(file, sizeof(file), "%s/%s/" IDENTITY_FILE, path, de->d_name);
                n = read_small(file, text, sizeof(text));
                if (n < 0 || identity_parse(text, (size_t)n, id) < 0) {
                        log_info("registry: %s/%s has no valid identity file (%s): a warm-pool "
                                 "sandbox or unknown, left to the sweep",
                                 path, de->d_name, n < 0 ? strerror((int)-n) : "invalid");
                        res.skipped++;
                        continue;
                }
                for (unsigned i = 0; i < CELLA_UID_SLOTS_MAX && !dup; i++)
                        dup = strcmp(names + (size_t)i * (CELLA_NAME_MAX + 1), id->name) == 0;
                if (dup) {
                        log_error("registry: %s/%s names sandbox '%s' again: skipped", path,
                                  de->d_name, id->name);
                        res.skipped++;
                        continue;
                }
                snprintf(names + (size_t)slot * (CELLA_NAME_MAX + 1), CELLA_NAME_MAX + 1, "%s",
                         id->name);
                id->rec.slot = slot;
                id->rec.last_active_ms = time_now_ms();
                if (pids[slot]) {
                        id->rec.pid = pids[slot];
                        id->rec.pid_start = proc_start_time(pids[slot]);
                        if (id->rec.pid_start > 0)
                                res.running++;
                }
                log_info("registry: sandbox '%s' rebuilt from %s/%s (%s)", id->name, path,
                         de->d_name, id->rec.pid_start > 0 ? "running" : "not running");
                r = store_sandbox_save(st, &id->rec, err);
                if (r == 0)
                        res.found++;
        }
        closedir(d);
        res.duration_ms = (double)(time_mono_us() - t0) / 1000.0;
        *ret = res;
        return r;
}

char *snapshot_identity_format(const struct store_snapshot *rec)
{
        _cleanup_json_ json_t *o = json_pack(
                "{s:s, s:s, s:s, s:s, s:I, s:I, s:s}", "id", rec->id, "name", rec->name, "sandbox",
                rec->sandbox, "image", rec->image, "sizeBytes", (json_int_t)rec->size_bytes,
                "createdMs", (json_int_t)rec->created_ms, "parent", rec->parent ? rec->parent : "");
        /* A clone's (0051) only: the records of copies stay as they were. */
        if (o && rec->method && strcmp(rec->method, "clone") == 0 &&
            (json_object_set_new(o, "method", json_string("clone")) < 0 ||
             json_object_set_new(o, "idBase", json_integer((json_int_t)rec->id_base)) < 0))
                return NULL;
        return o ? json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

int snapshot_identity_parse(const char *text, size_t len, struct snapshot_identity *ret)
{
        struct snapshot_identity s = {0};
        const char *id = NULL, *name = NULL, *sandbox = NULL, *image = NULL, *parent = NULL;
        const char *method = "copy";
        json_int_t size = 0, created = 0, id_base = 0;
        _cleanup_json_ json_t *o = NULL;
        char sname[CELLA_NAME_MAX + 1];

        if (len > IDENTITY_MAX)
                return -EINVAL;
        o = json_loadb(text, len, JSON_REJECT_DUPLICATES, NULL);
        if (!o || json_unpack(o, "{s:s, s:s, s:s, s:s, s:I, s:I, s:s, s?s, s?I}", "id", &id, "name",
                              &name, "sandbox", &sandbox, "image", &image, "sizeBytes", &size,
                              "createdMs", &created, "parent", &parent, "method", &method, "idBase",
                              &id_base) < 0)
                return -EINVAL;
        /* A clone's owners are a sandbox's host range: never 0 (host root's) nor past 2^32. */
        if (strcmp(method, "copy") == 0
                    ? id_base != 0
                    : strcmp(method, "clone") != 0 || id_base <= 0 ||
                              id_base > (json_int_t)UINT32_MAX - CELLA_UID_RANGE)
                return -EINVAL;
        if (!image_name_is_valid(id) || !tenant_snapshot_name_is_valid(name) ||
            !is_image_name(image) || (parent[0] && !image_name_is_valid(parent)) || size < 0 ||
            created < 0 || tenant_internal_name_check(sandbox, sname) < 0)
                return -EINVAL;
        snprintf(s.id, sizeof(s.id), "%s", id);
        snprintf(s.name, sizeof(s.name), "%s", name);
        snprintf(s.sandbox, sizeof(s.sandbox), "%s", sname);
        snprintf(s.image, sizeof(s.image), "%s", image);
        snprintf(s.parent, sizeof(s.parent), "%s", parent);
        snprintf(s.method, sizeof(s.method), "%s", method);
        *ret = s;
        ret->rec = (struct store_snapshot){
                .id = ret->id,
                .name = ret->name,
                .sandbox = ret->sandbox,
                .image = ret->image,
                .size_bytes = size,
                .created_ms = created,
                .parent = ret->parent,
                .method = ret->method,
                .id_base = id_base,
        };
        return 0;
}

int rebuild_snapshots(struct store *st, const char *data_dir, unsigned *ret_found,
                      struct cella_error *err)
{
        char path[CELLA_PATH_MAX], file[CELLA_PATH_MAX + 300], text[IDENTITY_MAX + 1];
        _cleanup_free_ struct snapshot_identity *id = malloc(sizeof(*id));
        struct dirent *de;
        DIR *d;
        int r = 0;

        *ret_found = 0;
        if (!id)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        snprintf(path, sizeof(path), "%s/snapshots", data_dir);
        d = opendir(path);
        if (!d)
                return 0;
        while (r == 0 && (de = readdir(d))) {
                ssize_t n;

                if (de->d_name[0] == '.')
                        continue;
                snprintf(file, sizeof(file), "%s/%s/" SNAPSHOT_IDENTITY_FILE, path, de->d_name);
                n = read_small(file, text, sizeof(text));
                if (n < 0 || snapshot_identity_parse(text, (size_t)n, id) < 0 ||
                    strcmp(id->id, de->d_name) != 0) {
                        log_warn("registry: %s/%s has no valid %s: not a snapshot", path,
                                 de->d_name, SNAPSHOT_IDENTITY_FILE);
                        continue;
                }
                r = store_snapshot_save(st, &id->rec, err);
                if (r == 0) {
                        log_info("registry: snapshot '%s' rebuilt from %s/%s", id->name, path,
                                 de->d_name);
                        (*ret_found)++;
                }
        }
        closedir(d);
        return r;
}
