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

/* ---- writing ---- */

static void archive_fail(struct archive *a, struct cella_error *err, int code, const char *what)
{
        const char *m = archive_error_string(a);

        cella_error_set(err, code, "%s: %s", what, m ? m : "failed");
}

int backup_archive_write_cwd(int out_fd, struct backup_archive_stats *st, struct cella_error *err)
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
                archive_read_disk_descend(disk);
                mode_t type = archive_entry_filetype(e);
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
