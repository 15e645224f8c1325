/* A backup's archive: write and extract with libarchive (backup-archive.h). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <iconv.h>
#include <locale.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/limits.h"
#include "common/macros.h"
#include "daemon/backup-archive.h"
#include "daemon/backup-ignore.h"

#define BLOCK (256 * 1024)

static const char *const allowed_roots[] = {"/workspace", "/home", "/tmp", "/var/tmp", "/app"};

int backup_dir_check(const char *dir, struct cella_error *err)
{
        size_t len = dir ? strlen(dir) : 0;
        bool under = false;

        if (len == 0)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG, "dir is required");
        if (len > CELLA_BACKUP_DIR_MAX)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "dir is longer than %d bytes", CELLA_BACKUP_DIR_MAX);
        if (dir[0] != '/')
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "dir '%.200s' is not absolute", dir);
        for (const char *s = dir + 1;;) {
                size_t n = strcspn(s, "/");

                if (n == 0 || (n == 1 && s[0] == '.') || (n == 2 && s[0] == '.' && s[1] == '.'))
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "dir '%.200s' has an empty, '.' or '..' "
                                               "component",
                                               dir);
                for (size_t i = 0; i < n; i++)
                        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "dir has a control character");
                if (!s[n])
                        break;
                s += n + 1;
        }
        for (size_t i = 0; i < ARRAY_SIZE(allowed_roots); i++) {
                size_t rl = strlen(allowed_roots[i]);
                if (strncmp(dir, allowed_roots[i], rl) == 0 && (dir[rl] == '\0' || dir[rl] == '/'))
                        under = true;
        }
        if (!under)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "dir '%.200s' is not under /workspace, /home, /tmp, "
                                       "/var/tmp or /app",
                                       dir);
        return 0;
}

/* ---- what a backup leaves out ---- */

struct backup_filter {
        bool gitignore;
        struct ignore_list excludes;
        /* the .gitignore lists read so far, by their directory (libarchive's walk lists a
         * directory's entries before it enters the ones it found, so a path's ancestors'
         * lists are looked up, not kept on a stack): open addressing, at most half full */
        struct ignore_list **table;
        size_t cap, n;
        size_t loaded; /* patterns in the table */
};

int backup_filter_new(bool gitignore, struct backup_filter **ret)
{
        struct backup_filter *f = calloc(1, sizeof(*f));

        if (!f || ignore_list_init(&f->excludes, "", 0) < 0) {
                free(f);
                return -ENOMEM;
        }
        f->gitignore = gitignore;
        *ret = f;
        return 0;
}

void backup_filter_free(struct backup_filter *f)
{
        if (!f)
                return;
        ignore_list_free(&f->excludes);
        for (size_t i = 0; i < f->cap; i++)
                if (f->table[i]) {
                        ignore_list_free(f->table[i]);
                        free(f->table[i]);
                }
        free(f->table);
        free(f);
}

int backup_filter_exclude(struct backup_filter *f, const char *pat, struct cella_error *err)
{
        if (f->excludes.n >= CELLA_BACKUP_EXCLUDES_MAX)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "more than %d exclude patterns", CELLA_BACKUP_EXCLUDES_MAX);
        int r = ignore_list_add(&f->excludes, pat, strlen(pat), err);
        if (r == -ENOMEM)
                return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
        return r < 0 ? -1 : 0;
}

static size_t hash(const char *s, size_t len)
{
        uint64_t h = 1469598103934665603ULL; /* FNV-1a */

        for (size_t i = 0; i < len; i++)
                h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
        return (size_t)h;
}

/* The list of directory dir (relative, "" for the root), or NULL. */
static const struct ignore_list *filter_find(const struct backup_filter *f, const char *dir,
                                             size_t len)
{
        if (!f->cap)
                return NULL;
        for (size_t i = hash(dir, len) & (f->cap - 1);; i = (i + 1) & (f->cap - 1)) {
                const struct ignore_list *l = f->table[i];
                if (!l)
                        return NULL;
                if (l->base_len == len && memcmp(l->base, dir, len) == 0)
                        return l;
        }
}

static int filter_insert(struct backup_filter *f, struct ignore_list *l)
{
        if ((f->n + 1) * 2 > f->cap) {
                size_t cap = f->cap ? f->cap * 2 : 16;
                struct ignore_list **t = calloc(cap, sizeof(*t));
                if (!t)
                        return -ENOMEM;
                for (size_t i = 0; i < f->cap; i++) {
                        struct ignore_list *o = f->table[i];
                        if (!o)
                                continue;
                        size_t k = hash(o->base, o->base_len) & (cap - 1);
                        while (t[k])
                                k = (k + 1) & (cap - 1);
                        t[k] = o;
                }
                free(f->table);
                f->table = t;
                f->cap = cap;
        }
        size_t k = hash(l->base, l->base_len) & (f->cap - 1);
        while (f->table[k])
                k = (k + 1) & (f->cap - 1);
        f->table[k] = l;
        f->n++;
        f->loaded += l->n;
        return 0;
}

/* Is path (relative to the root, not "") left out? The excludes first, then the
 * .gitignore of its directory, of that directory's parent, and so up to the root's. */
static bool filter_excludes(const struct backup_filter *f, const char *path, size_t len,
                            bool is_dir)
{
        int m = ignore_list_match(&f->excludes, path, len, is_dir);
        size_t dl = len;

        while (m < 0 && f->n > 0) {
                const char *slash = memrchr(path, '/', dl);
                const struct ignore_list *l;

                dl = slash ? (size_t)(slash - path) : 0;
                if ((l = filter_find(f, path, dl)))
                        m = ignore_list_match(l, path, len, is_dir);
                if (dl == 0)
                        break;
        }
        return m == 1;
}

/* The patterns in effect for what is below dir (relative): its ancestors' and its own. */
static size_t filter_in_effect(const struct backup_filter *f, const char *dir, size_t len)
{
        size_t sum = 0, dl = len;

        for (;;) {
                const struct ignore_list *l = filter_find(f, dir, dl);
                const char *slash = dl ? memrchr(dir, '/', dl) : NULL;

                if (l)
                        sum += l->n;
                if (dl == 0)
                        return sum;
                dl = slash ? (size_t)(slash - dir) : 0;
        }
}

/* The directory dir (relative, "" for the root) is entered: its .gitignore, if it has a
 * regular one, read (bounded) and pushed. 0 or -1 with err set. */
static int filter_enter(struct backup_filter *f, const char *dir, size_t len,
                        struct cella_error *err)
{
        char path[CELLA_PATH_MAX + 16];
        struct stat sb;
        ssize_t n;
        int r;

        if (!f->gitignore)
                return 0;
        if (snprintf(path, sizeof(path), "%s%s.gitignore", dir, len ? "/" : "") >=
            (int)sizeof(path))
                return 0;
        _cleanup_close_ int fd =
                open(path[0] ? path : ".gitignore", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &sb) < 0 || !S_ISREG(sb.st_mode))
                return 0; /* none, or a link, a fifo, a directory: not a .gitignore */
        if (sb.st_size > CELLA_BACKUP_GITIGNORE_BYTES)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "'%.200s' is larger than %d bytes, the most a backup "
                                       "with gitignore reads",
                                       path, CELLA_BACKUP_GITIGNORE_BYTES);
        _cleanup_free_ char *text = malloc(CELLA_BACKUP_GITIGNORE_BYTES + 1);
        if (!text)
                return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
        size_t got = 0;
        while ((n = read(fd, text + got, CELLA_BACKUP_GITIGNORE_BYTES + 1 - got)) > 0)
                got += (size_t)n;
        if (n < 0)
                return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "read '%.200s': %s", path,
                                       strerror(errno));
        if (got > CELLA_BACKUP_GITIGNORE_BYTES)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "'%.200s' is larger than %d bytes, the most a backup "
                                       "with gitignore reads",
                                       path, CELLA_BACKUP_GITIGNORE_BYTES);
        _cleanup_free_ struct ignore_list *l = calloc(1, sizeof(*l));
        if (!l || ignore_list_init(l, dir, len) < 0)
                return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
        r = ignore_list_parse(l, text, got);
        if (r < 0 || l->n == 0 || f->loaded + l->n > CELLA_BACKUP_GITIGNORE_TOTAL ||
            filter_in_effect(f, dir, len) + l->n > CELLA_BACKUP_GITIGNORE_ACTIVE) {
                size_t had = l->n;
                ignore_list_free(l);
                if (r == -ENOMEM)
                        return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
                if (r < 0)
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "'%.200s' has a line longer than %d bytes", path,
                                               CELLA_BACKUP_PATTERN_MAX);
                if (had == 0)
                        return 0;
                if (f->loaded + had > CELLA_BACKUP_GITIGNORE_TOTAL)
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "'%.200s': more than %d .gitignore patterns in "
                                               "the tree",
                                               path, CELLA_BACKUP_GITIGNORE_TOTAL);
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "'%.200s': more than %d .gitignore patterns in effect at "
                                       "once",
                                       path, CELLA_BACKUP_GITIGNORE_ACTIVE);
        }
        if (filter_insert(f, l) < 0) {
                ignore_list_free(l);
                return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
        }
        l = NULL;
        return 0;
}

/* ---- writing ---- */

static void archive_fail(struct archive *a, struct cella_error *err, int code, const char *what)
{
        const char *m = archive_error_string(a);

        cella_error_set(err, code, "%s: %s", what, m ? m : "failed");
}

int backup_archive_write_cwd(int out_fd, struct backup_filter *filter,
                             struct backup_archive_stats *st, struct cella_error *err)
{
        struct archive *disk = archive_read_disk_new();
        struct archive *out = archive_write_new();
        struct archive_entry *e = NULL;
        _cleanup_free_ char *buf = malloc(BLOCK);
        int r = -1;

        memset(st, 0, sizeof(*st));
        if (!disk || !out || !buf) {
                cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
                goto done;
        }
        /* Links are archived as links (never followed), one filesystem, and neither
         * extended attributes (file capabilities), ACLs nor flags. No name lookup: owners
         * are numbers (a lookup would read the sandbox's /etc and its NSS modules). */
        archive_read_disk_set_symlink_physical(disk);
        archive_read_disk_set_behavior(
                disk, ARCHIVE_READDISK_NO_TRAVERSE_MOUNTS | ARCHIVE_READDISK_NO_XATTR |
                              ARCHIVE_READDISK_NO_ACL | ARCHIVE_READDISK_NO_FFLAGS);
        if (archive_write_set_format_pax_restricted(out) != ARCHIVE_OK ||
            archive_write_add_filter_zstd(out) != ARCHIVE_OK ||
            /* 1 MiB writes into the pipe, not libarchive's 10 KiB blocks (a hundred
             * thousand wake-ups of the reader per GiB) */
            archive_write_set_bytes_per_block(out, BLOCK * 4) != ARCHIVE_OK ||
            archive_write_set_bytes_in_last_block(out, 1) != ARCHIVE_OK ||
            archive_write_open_fd(out, out_fd) != ARCHIVE_OK) {
                archive_fail(out, err, CELLA_E_BACKUP_CREATE_FAILED, "archive");
                goto done;
        }
        if (archive_read_disk_open(disk, ".") != ARCHIVE_OK) {
                archive_fail(disk, err, CELLA_E_BACKUP_CREATE_FAILED, "read directory");
                goto done;
        }
        for (;;) {
                e = archive_entry_new();
                if (!e) {
                        cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED, "out of memory");
                        goto done;
                }
                int rr = archive_read_next_header2(disk, e);
                if (rr == ARCHIVE_EOF)
                        break;
                if (rr == ARCHIVE_WARN) {
                        /* e.g. a file that vanished while the tree was read */
                        archive_entry_free(e);
                        continue;
                }
                if (rr != ARCHIVE_OK) {
                        archive_fail(disk, err, CELLA_E_BACKUP_CREATE_FAILED, "read directory");
                        goto done;
                }
                mode_t type = archive_entry_filetype(e);
                if (filter) {
                        /* "." then "./a", "./a/b": the path relative to the root */
                        const char *p = archive_entry_pathname(e);
                        p = p && p[0] == '.' && p[1] == '/' ? p + 2 : p && p[0] == '.' ? p + 1 : "";
                        size_t pl = strlen(p);
                        bool is_dir = type == AE_IFDIR;

                        if (pl > 0 && filter_excludes(filter, p, pl, is_dir)) {
                                st->excluded++;
                                archive_entry_free(e);
                                e = NULL;
                                continue; /* a directory: not entered */
                        }
                        if (is_dir && filter_enter(filter, p, pl, err) < 0)
                                goto done;
                }
                archive_read_disk_descend(disk);
                if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO) {
                        st->skipped++;
                        archive_entry_free(e);
                        e = NULL;
                        continue;
                }
                archive_entry_set_perm(e, archive_entry_perm(e) & ~(mode_t)(S_ISUID | S_ISGID));
                archive_entry_set_uname(e, NULL);
                archive_entry_set_gname(e, NULL);
                if (archive_write_header(out, e) < ARCHIVE_WARN) {
                        archive_fail(out, err, CELLA_E_BACKUP_CREATE_FAILED, "archive");
                        goto done;
                }
                if (type == AE_IFREG && archive_entry_size(e) > 0) {
                        for (;;) {
                                la_ssize_t n = archive_read_data(disk, buf, BLOCK);
                                if (n == 0)
                                        break;
                                if (n < 0) {
                                        archive_fail(disk, err, CELLA_E_BACKUP_CREATE_FAILED,
                                                     archive_entry_pathname(e));
                                        goto done;
                                }
                                if (archive_write_data(out, buf, (size_t)n) != n) {
                                        archive_fail(out, err, CELLA_E_BACKUP_CREATE_FAILED,
                                                     "archive");
                                        goto done;
                                }
                        }
                }
                st->entries++;
                archive_entry_free(e);
                e = NULL;
        }
        if (archive_write_close(out) != ARCHIVE_OK) {
                archive_fail(out, err, CELLA_E_BACKUP_CREATE_FAILED, "archive");
                goto done;
        }
        st->bytes = (uint64_t)archive_filter_bytes(out, -1);
        r = 0;
done:
        archive_entry_free(e);
        if (disk)
                archive_read_free(disk);
        if (out)
                archive_write_free(out);
        return r;
}

/* ---- extracting ---- */

struct reader {
        int fd;
        EVP_MD_CTX *md;
        uint64_t bytes;
        int error; /* errno of a failed read */
        char buf[BLOCK];
};

static la_ssize_t reader_read(struct archive *a, void *ud, const void **ret)
{
        struct reader *r = ud;
        ssize_t n;

        (void)a;
        do
                n = read(r->fd, r->buf, sizeof(r->buf));
        while (n < 0 && errno == EINTR);
        if (n < 0) {
                r->error = errno;
                archive_set_error(a, errno, "read archive: %s", strerror(errno));
                return -1;
        }
        if (r->md && n > 0)
                EVP_DigestUpdate(r->md, r->buf, (size_t)n);
        r->bytes += (uint64_t)n;
        *ret = r->buf;
        return n;
}

/* What follows the archive's end in the input: read (and hashed) to the end. */
static int reader_drain(struct reader *r)
{
        const void *p;
        la_ssize_t n;

        while ((n = reader_read(NULL, r, &p)) > 0)
                ;
        return n < 0 ? -r->error : 0;
}

static bool has_dotdot(const char *p)
{
        for (const char *s = p; *s;) {
                size_t n = strcspn(s, "/");
                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return true;
                s += n;
                while (*s == '/')
                        s++;
        }
        return false;
}

int backup_archive_extract_cwd(int in_fd, const char *sha256_hex, int64_t size,
                               struct backup_archive_stats *st, struct cella_error *err)
{
        struct archive *in = archive_read_new();
        struct archive *disk = archive_write_disk_new();
        struct reader *rd = calloc(1, sizeof(*rd));
        struct archive_entry *e;
        int r = -1;

        memset(st, 0, sizeof(*st));
        if (!in || !disk || !rd) {
                cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED, "out of memory");
                goto done;
        }
        rd->fd = in_fd;
        if (sha256_hex) {
                rd->md = EVP_MD_CTX_new();
                if (!rd->md || EVP_DigestInit_ex(rd->md, EVP_sha256(), NULL) != 1) {
                        cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED, "sha256");
                        goto done;
                }
        }
        /* Only what cella writes: pax tar compressed with zstd. */
        archive_read_support_format_tar(in);
        archive_read_support_filter_zstd(in);
        /* Never through a link, never "..", never absolute; owners as numbers (no lookup:
         * they are the sandbox's ids, mapped by its user namespace); no xattrs, ACLs or
         * flags. */
        archive_write_disk_set_options(
                disk, ARCHIVE_EXTRACT_TIME | ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_OWNER |
                              ARCHIVE_EXTRACT_SECURE_SYMLINKS | ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                              ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS | ARCHIVE_EXTRACT_SPARSE);
        if (archive_read_open(in, rd, NULL, reader_read, NULL) != ARCHIVE_OK) {
                archive_fail(in, err, CELLA_E_BACKUP_RESTORE_FAILED, "archive");
                goto done;
        }
        for (;;) {
                int rr = archive_read_next_header(in, &e);
                if (rr == ARCHIVE_EOF)
                        break;
                if (rr != ARCHIVE_OK) {
                        archive_fail(in, err, CELLA_E_BACKUP_RESTORE_FAILED,
                                     "the archive is damaged");
                        goto done;
                }
                const char *name = archive_entry_pathname(e);
                mode_t type = archive_entry_filetype(e);
                if (!name || !*name || name[0] == '/' || has_dotdot(name)) {
                        cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED,
                                        "the archive names '%.100s', outside its directory",
                                        name ? name : "");
                        goto done;
                }
                if (archive_entry_hardlink(e)) {
                        cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED,
                                        "the archive has a hard link ('%.100s'), which backups "
                                        "never hold",
                                        name);
                        goto done;
                }
                if (type != AE_IFREG && type != AE_IFDIR && type != AE_IFLNK && type != AE_IFIFO) {
                        cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED,
                                        "the archive has '%.100s', neither a file, a directory, "
                                        "a link nor a fifo",
                                        name);
                        goto done;
                }
                archive_entry_set_perm(e, archive_entry_perm(e) & ~(mode_t)(S_ISUID | S_ISGID));
                archive_entry_set_uname(e, NULL);
                archive_entry_set_gname(e, NULL);
                /* Owners beyond the sandbox's ids become nobody's. */
                if (archive_entry_uid(e) < 0 || archive_entry_uid(e) >= CELLA_UID_RANGE)
                        archive_entry_set_uid(e, 65534);
                if (archive_entry_gid(e) < 0 || archive_entry_gid(e) >= CELLA_UID_RANGE)
                        archive_entry_set_gid(e, 65534);
                rr = archive_write_header(disk, e);
                if (rr < ARCHIVE_WARN) {
                        archive_fail(disk, err, CELLA_E_BACKUP_RESTORE_FAILED, name);
                        goto done;
                }
                if (type == AE_IFREG) {
                        const void *blk;
                        size_t len;
                        la_int64_t off;
                        while ((rr = archive_read_data_block(in, &blk, &len, &off)) == ARCHIVE_OK) {
                                if (archive_write_data_block(disk, blk, len, off) < ARCHIVE_WARN) {
                                        archive_fail(disk, err, CELLA_E_BACKUP_RESTORE_FAILED,
                                                     name);
                                        goto done;
                                }
                        }
                        if (rr != ARCHIVE_EOF) {
                                archive_fail(in, err, CELLA_E_BACKUP_RESTORE_FAILED,
                                             "the archive is damaged");
                                goto done;
                        }
                }
                if (archive_write_finish_entry(disk) < ARCHIVE_WARN) {
                        archive_fail(disk, err, CELLA_E_BACKUP_RESTORE_FAILED, name);
                        goto done;
                }
                st->entries++;
        }
        if (archive_write_close(disk) != ARCHIVE_OK) {
                archive_fail(disk, err, CELLA_E_BACKUP_RESTORE_FAILED, "finish");
                goto done;
        }
        if (reader_drain(rd) < 0) {
                cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED, "read archive: %s",
                                strerror(rd->error));
                goto done;
        }
        st->bytes = rd->bytes;
        if (sha256_hex) {
                unsigned char md[32];
                unsigned int mdlen = 0;
                char hex[65];

                EVP_DigestFinal_ex(rd->md, md, &mdlen);
                for (unsigned i = 0; i < 32; i++)
                        snprintf(hex + 2 * i, 3, "%02x", md[i]);
                if ((int64_t)rd->bytes != size || strcmp(hex, sha256_hex) != 0) {
                        cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED,
                                        "the archive is damaged: %llu bytes with SHA-256 "
                                        "%.12s..., its record says %lld bytes with %.12s...",
                                        (unsigned long long)rd->bytes, hex, (long long)size,
                                        sha256_hex);
                        goto done;
                }
        }
        r = 0;
done:
        if (in)
                archive_read_free(in);
        if (disk)
                archive_write_free(disk);
        if (rd) {
                EVP_MD_CTX_free(rd->md);
                free(rd);
        }
        return r;
}

int backup_remove_tree(int dir_fd, const char *name)
{
        struct stat sb;

        if (fstatat(dir_fd, name, &sb, AT_SYMLINK_NOFOLLOW) < 0)
                return -errno;
        if (!S_ISDIR(sb.st_mode))
                return unlinkat(dir_fd, name, 0) < 0 ? -errno : 0;
        int fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        DIR *d = fdopendir(fd);
        if (!d) {
                int e = errno;
                close(fd);
                return -e;
        }
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
                        continue;
                int rr = backup_remove_tree(dirfd(d), de->d_name);
                if (rr < 0 && rr != -ENOENT && r == 0)
                        r = rr;
        }
        closedir(d);
        if (unlinkat(dir_fd, name, AT_REMOVEDIR) < 0 && r == 0)
                r = -errno;
        return r;
}

void backup_archive_warm_up(void)
{
        unsigned char md[32];
        unsigned int mdlen;
        size_t used = 0;
        char *buf = malloc(16384);

        setlocale(LC_ALL, "C.UTF-8");
        EVP_Digest("", 0, md, &mdlen, EVP_sha256(), NULL);
        iconv_t cd = iconv_open("UTF-8", "UTF-8");
        if (cd != (iconv_t)-1)
                iconv_close(cd);
        if (!buf)
                return;
        /* one entry with a non-ASCII name through the writer and back through the reader */
        struct archive *w = archive_write_new();
        if (w && archive_write_set_format_pax_restricted(w) == ARCHIVE_OK &&
            archive_write_add_filter_zstd(w) == ARCHIVE_OK &&
            archive_write_open_memory(w, buf, 16384, &used) == ARCHIVE_OK) {
                struct archive_entry *e = archive_entry_new();
                if (e) {
                        archive_entry_set_pathname(e, "./w\xc3\xa4rm");
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_size(e, 0);
                        archive_write_header(w, e);
                        archive_entry_free(e);
                }
                archive_write_close(w);
        }
        if (w)
                archive_write_free(w);
        struct archive *rd = archive_read_new();
        struct archive_entry *re;
        if (rd) {
                archive_read_support_format_tar(rd);
                archive_read_support_filter_zstd(rd);
                if (archive_read_open_memory(rd, buf, used) == ARCHIVE_OK)
                        while (archive_read_next_header(rd, &re) == ARCHIVE_OK)
                                archive_entry_pathname(re);
                archive_read_free(rd);
        }
        free(buf);
}
