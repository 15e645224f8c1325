/* Image import (image.h): the outer tarball's blobs are stored in a work directory, the
 * manifest chain is decoded and every blob's sha256 checked, then the layers are applied
 * in order to a new rootfs (whiteouts first, against the lower layers, then the entries),
 * all beneath a directory fd and with no symlink followed out of it. */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <openssl/evp.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/timeutil.h"
#include "daemon/image.h"

#define IO_CHUNK (256 * 1024)

struct import {
        int images_fd; /* images_dir */
        int work_fd;   /* images_dir/.import-NAME.XXXXXX */
        int blobs_fd;  /* work/blobs: the outer tarball's files, flat names */
        int root_fd;   /* work/rootfs */
        char work_name[CELLA_NAME_MAX + 32];
        uint64_t bytes, entries;
        struct image_import_result *res;
        struct cella_error *err;
        /* the last entry's parent directory, reused by the next entry with the same one */
        char parent[CELLA_PATH_MAX];
        int parent_fd;
        /* outer symlinks (docker save's legacy dirs point into blobs/) */
        json_t *links;
};

#define invalid(im, ...) cella_error_set((im)->err, CELLA_E_INVALID_IMAGE, __VA_ARGS__)

static int sys_fail(struct import *im, int e, const char *what, const char *arg)
{
        if (e == ENOSPC || e == EDQUOT)
                return cella_error_set(im->err, CELLA_E_NO_SPACE, "no space left importing (%s)",
                                       what);
        return cella_error_errno(im->err, e, "%s %.200s", what, arg);
}

static int open_beneath(int dirfd, const char *path, int flags, uint64_t resolve)
{
        struct open_how how = {
                .flags = (uint64_t)(flags | O_CLOEXEC),
                .resolve = resolve | RESOLVE_NO_MAGICLINKS,
        };

        for (;;) {
                long fd = syscall(SYS_openat2, dirfd, path, &how, sizeof(how));

                if (fd >= 0)
                        return (int)fd;
                if (errno != EAGAIN && errno != EINTR)
                        return -errno;
        }
}

int image_remove_tree(int at, const char *name)
{
        struct stat st;
        int fd, r = 0;
        DIR *d;
        struct dirent *de;

        if (fstatat(at, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 0 : -errno;
        if (!S_ISDIR(st.st_mode))
                return unlinkat(at, name, 0) < 0 && errno != ENOENT ? -errno : 0;
        fd = openat(at, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        d = fdopendir(fd);
        if (!d) {
                r = -errno;
                close(fd);
                return r;
        }
        while (r == 0 && (de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        r = image_remove_tree(dirfd(d), de->d_name);
        closedir(d);
        if (r == 0 && unlinkat(at, name, AT_REMOVEDIR) < 0 && errno != ENOENT)
                r = -errno;
        return r;
}

/* ---- digests ---- */

static int sha256_fd(int fd, char out[IMAGE_DIGEST_LEN + 1])
{
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        unsigned char md[32];
        unsigned int mdlen = 0;
        char *buf = malloc(IO_CHUNK);
        ssize_t n;
        int r = -EIO;

        if (!c || !buf || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
                goto out;
        if (lseek(fd, 0, SEEK_SET) < 0) {
                r = -errno;
                goto out;
        }
        while ((n = read(fd, buf, IO_CHUNK)) != 0) {
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        r = -errno;
                        goto out;
                }
                if (EVP_DigestUpdate(c, buf, (size_t)n) != 1)
                        goto out;
        }
        if (EVP_DigestFinal_ex(c, md, &mdlen) != 1 || mdlen != 32)
                goto out;
        memcpy(out, "sha256:", 7);
        for (int i = 0; i < 32; i++)
                snprintf(out + 7 + 2 * i, 3, "%02x", md[i]);
        r = 0;
out:
        free(buf);
        EVP_MD_CTX_free(c);
        return r;
}

/* ---- the outer tarball ---- */

/* A stored blob's flat name: the path with '/' as '%' (paths are canonical and of
 * [A-Za-z0-9._-/] only, so the mapping is one to one). */
static bool flat_name(const char *path, char *out, size_t outsz)
{
        size_t n = strlen(path);

        if (n == 0 || n + 1 > outsz)
                return false;
        for (size_t i = 0; i <= n; i++) {
                char c = path[i];

                if (c && !((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                           (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-' || c == '/'))
                        return false;
                out[i] = c == '/' ? '%' : c;
        }
        return true;
}

/* Copy the current entry's data into fd (sparse-aware), bounded by the import's limit. */
static int copy_data(struct import *im, struct archive *ar, struct archive_entry *e, int fd,
                     const char *what)
{
        const void *p;
        size_t size;
        la_int64_t off;
        int r;

        if (archive_entry_size_is_set(e) &&
            (archive_entry_size(e) < 0 || archive_entry_size(e) > CELLA_IMAGE_UNPACKED_MAX))
                return invalid(im, "%s: the entry is larger than the import limit", what);
        for (;;) {
                r = archive_read_data_block(ar, &p, &size, &off);
                if (r == ARCHIVE_EOF)
                        break;
                if (r != ARCHIVE_OK && r != ARCHIVE_WARN)
                        return invalid(im, "cannot read %s (truncated or corrupt archive)", what);
                if (off < 0 || (uint64_t)off + size > (uint64_t)CELLA_IMAGE_UNPACKED_MAX ||
                    im->bytes + size > (uint64_t)CELLA_IMAGE_UNPACKED_MAX)
                        return invalid(im, "%s: the image is larger than the import limit", what);
                im->bytes += size;
                for (size_t done = 0; done < size;) {
                        ssize_t w =
                                pwrite(fd, (const char *)p + done, size - done, off + (off_t)done);

                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w <= 0)
                                return sys_fail(im, w < 0 ? errno : ENOSPC, "write", what);
                        done += (size_t)w;
                }
        }
        /* a hole at the end has no data block: the entry's size says where it ends */
        if (archive_entry_size_is_set(e) && ftruncate(fd, archive_entry_size(e)) < 0)
                return sys_fail(im, errno, "truncate", what);
        return 0;
}

static struct archive *open_archive(int fd)
{
        struct archive *ar = archive_read_new();

        if (!ar)
                return NULL;
        /* The compressions of image layers, done by libraries: not filter_all, whose
         * fallbacks run external programs (lrzip, lzop, ...) on the tarball's bytes. */
        archive_read_support_filter_gzip(ar);
        archive_read_support_filter_bzip2(ar);
        archive_read_support_filter_xz(ar);
        archive_read_support_filter_lzma(ar);
        archive_read_support_filter_zstd(ar);
        archive_read_support_format_tar(ar);
        if (archive_read_open_fd(ar, fd, IO_CHUNK) != ARCHIVE_OK) {
                archive_read_free(ar);
                return NULL;
        }
        return ar;
}

static int store_outer(struct import *im, int tar_fd)
{
        struct archive *ar = open_archive(tar_fd);
        struct archive_entry *e;
        int r = 0, hr;
        size_t n = 0;

        if (!ar)
                return invalid(im, "%s", "the upload is not a tar archive");
        while ((hr = archive_read_next_header(ar, &e)) == ARCHIVE_OK || hr == ARCHIVE_WARN) {
                char canon[512], flat[512];
                const char *p = archive_entry_pathname(e);
                mode_t type = archive_entry_filetype(e);

                if (++n > CELLA_IMAGE_MAX_ENTRIES) {
                        r = invalid(im, "%s", "too many entries in the tarball");
                        break;
                }
                if (!p || image_entry_path(p, canon, sizeof(canon)) < 0 ||
                    !flat_name(canon, flat, sizeof(flat)))
                        continue; /* not a file we look for */
                if (type == AE_IFLNK && archive_entry_symlink(e)) {
                        /* relative to the link's directory, kept as a canonical path */
                        char joined[1024], target[512];
                        const char *slash = strrchr(canon, '/');

                        snprintf(joined, sizeof(joined), "%.*s/%s",
                                 slash ? (int)(slash - canon) : 0, canon, archive_entry_symlink(e));
                        if (image_entry_path(joined, target, sizeof(target)) == 0)
                                json_object_set_new(im->links, canon, json_string(target));
                        continue;
                }
                if (type != AE_IFREG)
                        continue;
                {
                        _cleanup_close_ int fd =
                                openat(im->blobs_fd, flat,
                                       O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);

                        if (fd < 0) {
                                r = sys_fail(im, errno, "store", canon);
                                break;
                        }
                        r = copy_data(im, ar, e, fd, canon);
                        if (r < 0)
                                break;
                }
        }
        if (r == 0 && hr != ARCHIVE_EOF)
                r = invalid(im, "the tarball is not a valid tar archive: %s",
                            archive_error_string(ar) ? archive_error_string(ar) : "bad header");
        if (r == 0 && n == 0)
                r = invalid(im, "%s", "the tarball is empty");
        archive_read_free(ar);
        return r;
}

/* Open a stored blob by its path in the tarball (one symlink of the tarball followed). */
static int open_blob(struct import *im, const char *path)
{
        char flat[512];
        const char *target = json_string_value(json_object_get(im->links, path));
        int fd;

        if (!flat_name(path, flat, sizeof(flat)))
                return -ENOENT;
        fd = openat(im->blobs_fd, flat, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 && errno == ENOENT && target && flat_name(target, flat, sizeof(flat)))
                fd = openat(im->blobs_fd, flat, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        return fd < 0 ? -errno : fd;
}

/* Open a blob and check its sha256 against want (when known). */
static int open_verified(struct import *im, const struct image_blob *b, const char *what)
{
        char got[IMAGE_DIGEST_LEN + 1];
        int fd = open_blob(im, b->path), r;

        if (fd < 0)
                return cella_error_set(im->err, CELLA_E_INVALID_IMAGE,
                                       "%s %.200s is missing from the tarball", what, b->path);
        if (b->digest[0]) {
                r = sha256_fd(fd, got);
                if (r < 0) {
                        close(fd);
                        return sys_fail(im, -r, "read", b->path);
                }
                if (strcmp(got, b->digest) != 0) {
                        close(fd);
                        return cella_error_set(im->err, CELLA_E_INVALID_IMAGE,
                                               "%s %.200s: digest mismatch (want %s, got %s)", what,
                                               b->path, b->digest, got);
                }
        }
        if (lseek(fd, 0, SEEK_SET) < 0) {
                r = -errno;
                close(fd);
                return sys_fail(im, -r, "seek", b->path);
        }
        return fd;
}

static char *read_small(struct import *im, int fd, size_t *len, const char *what)
{
        struct stat st;
        char *s;
        size_t got = 0;

        if (fstat(fd, &st) < 0 || st.st_size > CELLA_IMAGE_META_MAX) {
                invalid(im, "%s is too large", what);
                return NULL;
        }
        s = malloc((size_t)st.st_size + 1);
        if (!s) {
                cella_error_set(im->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        while (got < (size_t)st.st_size) {
                ssize_t n = read(fd, s + got, (size_t)st.st_size - got);

                if (n <= 0) {
                        if (n < 0 && errno == EINTR)
                                continue;
                        free(s);
                        sys_fail(im, n < 0 ? errno : EIO, "read", what);
                        return NULL;
                }
                got += (size_t)n;
        }
        s[got] = '\0';
        *len = got;
        return s;
}

/* Read (and check) a blob as JSON text. */
static char *read_blob(struct import *im, const struct image_blob *b, const char *what, size_t *len)
{
        _cleanup_close_ int fd = open_verified(im, b, what);

        if (fd < 0)
                return NULL;
        return read_small(im, fd, len, what);
}

/* The manifest chain: OCI layout (index.json) or docker save (manifest.json). */
static int decode_chain(struct import *im, struct image_manifest *m, struct image_config *c)
{
        struct image_blob b = {0};
        _cleanup_free_ char *text = NULL;
        size_t len = 0;
        int fd;

        fd = open_blob(im, "manifest.json");
        if (fd >= 0) {
                text = read_small(im, fd, &len, "manifest.json");
                close(fd);
                if (!text || image_decode_docker_manifest(text, len, m, im->err) < 0)
                        return -1;
        } else if ((fd = open_blob(im, "index.json")) >= 0) {
                char digest[IMAGE_DIGEST_LEN + 1];
                bool nested = false;
                int depth = 0;

                text = read_small(im, fd, &len, "index.json");
                close(fd);
                if (!text)
                        return -1;
                for (;;) {
                        if (image_decode_oci_index(text, len, digest, &nested, im->err) < 0)
                                return -1;
                        free(text);
                        memcpy(b.digest, digest, sizeof(digest));
                        if (asprintf(&b.path, "blobs/sha256/%s", digest + 7) < 0)
                                return cella_error_set(im->err, CELLA_E_INTERNAL_ERROR,
                                                       "out of memory");
                        text = read_blob(im, &b, nested ? "image index" : "image manifest", &len);
                        free(b.path);
                        b.path = NULL;
                        if (!text)
                                return -1;
                        if (!nested)
                                break;
                        if (++depth > 2)
                                return invalid(im, "%s", "image indexes nested too deep");
                }
                if (image_decode_oci_manifest(text, len, m, im->err) < 0)
                        return -1;
        } else {
                return invalid(im, "%s",
                               "neither an OCI image layout (index.json) nor a docker save "
                               "tarball (manifest.json)");
        }
        free(text);
        text = read_blob(im, &m->config, "image config", &len);
        if (!text || image_decode_config(text, len, c, im->err) < 0)
                return -1;
        if (c->n_diff_ids && c->n_diff_ids != m->n_layers)
                return invalid(im, "%s", "the config's diff_ids do not match the layers");
        /* docker save's legacy layout names layers by ids, not digests: the layer tar is
         * then checked against the config's diff_ids (it is stored uncompressed). */
        for (size_t i = 0; i < m->n_layers; i++)
                if (!m->layers[i].digest[0]) {
                        if (!c->n_diff_ids)
                                return invalid(im, "layer %s has no digest to check",
                                               m->layers[i].path);
                        memcpy(m->layers[i].digest, c->diff_ids[i], IMAGE_DIGEST_LEN + 1);
                }
        return 0;
}

/* ---- applying a layer ---- */

static void parent_reset(struct import *im)
{
        if (im->parent_fd >= 0 && im->parent_fd != im->root_fd)
                close(im->parent_fd);
        im->parent_fd = -1;
        im->parent[0] = '\0';
}

/* The directory dir (canonical, non-empty) beneath the rootfs, made with what is missing
 * on the way (each prefix is resolved beneath the rootfs, then the missing component made
 * in it). New fd or -errno. */
static int make_dirs(struct import *im, const char *dir)
{
        char pre[CELLA_PATH_MAX];
        size_t n = strlen(dir), cs = 0;
        int prev = fcntl(im->root_fd, F_DUPFD_CLOEXEC, 3);

        if (prev < 0)
                return -errno;
        for (size_t i = 0; i <= n; i++) {
                int fd;

                if (dir[i] != '/' && dir[i] != '\0')
                        continue;
                memcpy(pre, dir, i);
                pre[i] = '\0';
                fd = open_beneath(im->root_fd, pre, O_PATH | O_DIRECTORY, RESOLVE_BENEATH);
                if (fd == -ENOENT) {
                        if (mkdirat(prev, pre + cs, 0755) < 0 && errno != EEXIST)
                                fd = -errno;
                        else
                                fd = open_beneath(im->root_fd, pre, O_PATH | O_DIRECTORY,
                                                  RESOLVE_BENEATH);
                }
                close(prev);
                if (fd < 0)
                        return fd;
                prev = fd;
                cs = i + 1;
        }
        return prev;
}

/* The directory dir (canonical, "" for the root) beneath the rootfs, missing directories
 * made (create) on the way. Borrowed fd (cached until the next call), or -errno. */
static int lookup_dir(struct import *im, const char *dir, bool create)
{
        int fd;

        if (im->parent_fd >= 0 && strcmp(dir, im->parent) == 0)
                return im->parent_fd;
        parent_reset(im);
        if (!*dir) {
                im->parent_fd = im->root_fd;
                return im->root_fd;
        }
        fd = open_beneath(im->root_fd, dir, O_PATH | O_DIRECTORY, RESOLVE_BENEATH);
        if (fd == -ENOENT && create)
                fd = make_dirs(im, dir);
        if (fd < 0)
                return fd;
        snprintf(im->parent, sizeof(im->parent), "%s", dir);
        im->parent_fd = fd;
        return fd;
}

/* lookup_dir with the error set. */
static int parent_dir(struct import *im, const char *dir, bool create)
{
        int fd = lookup_dir(im, dir, create);

        if (fd == -EXDEV || fd == -ELOOP)
                return invalid(im, "%.200s: the path leaves the image through a symlink", dir);
        if (fd == -ENOTDIR)
                return invalid(im, "%.200s: a path component is not a directory", dir);
        if (fd < 0)
                return sys_fail(im, -fd, "open directory", dir);
        return fd;
}

/* Remove what is at dirfd/name unless it is a directory and keep_dir is set. */
static int clear_slot(struct import *im, int dirfd, const char *name, bool keep_dir, bool *is_dir)
{
        struct stat st;
        int r;

        *is_dir = false;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
                if (errno == ENOENT)
                        return 0;
                return sys_fail(im, errno, "stat", name);
        }
        if (S_ISDIR(st.st_mode) && keep_dir) {
                *is_dir = true;
                return 0;
        }
        r = image_remove_tree(dirfd, name);
        return r < 0 ? sys_fail(im, -r, "remove", name) : 0;
}

/* The entry's mode with setuid/setgid dropped (the sandbox's lower layer is nosuid
 * anyway, and the image must not give host users a setuid-root file). */
static mode_t entry_mode(struct archive_entry *e)
{
        return archive_entry_perm(e) & 01777;
}

static int set_owner_mode(struct import *im, int fd, struct archive_entry *e, const char *path)
{
        if (fchown(fd, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e)) < 0 ||
            fchmod(fd, entry_mode(e)) < 0)
                return sys_fail(im, errno, "chown/chmod", path);
        return 0;
}

static int apply_whiteout(struct import *im, const char *path, enum image_whiteout wh,
                          size_t target)
{
        char dir[CELLA_PATH_MAX];
        const char *slash = strrchr(path, '/');
        int dfd, r;

        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 0, path);
        dfd = lookup_dir(im, dir, false);
        if (dfd == -ENOENT || dfd == -ENOTDIR)
                return 0; /* nothing below to delete */
        if (dfd < 0)
                return parent_dir(im, dir, false);
        if (wh == IMAGE_WH_FILE) {
                r = image_remove_tree(dfd, path + target);
                return r < 0 ? sys_fail(im, -r, "whiteout", path) : 0;
        }
        /* opaque: empty the directory of what the lower layers put there */
        {
                int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
                struct dirent *de;

                if (!d) {
                        if (fd >= 0)
                                close(fd);
                        return sys_fail(im, errno, "open opaque directory", dir);
                }
                r = 0;
                while (r == 0 && (de = readdir(d)))
                        if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                                r = image_remove_tree(dfd, de->d_name);
                closedir(d);
                return r < 0 ? sys_fail(im, -r, "opaque whiteout", path) : 0;
        }
}

static int apply_entry(struct import *im, struct archive *ar, struct archive_entry *e,
                       const char *path)
{
        char dir[CELLA_PATH_MAX];
        const char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        mode_t type = archive_entry_filetype(e);
        const char *hl = archive_entry_hardlink(e);
        bool is_dir = false;
        int dfd, r;

        snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - path) : 0, path);
        dfd = parent_dir(im, dir, true);
        if (dfd < 0)
                return -1;
        if (hl) {
                char tpath[CELLA_PATH_MAX], tdir[CELLA_PATH_MAX];
                const char *ts;
                _cleanup_close_ int tfd = -EBADF;
                struct stat a, b;

                if (image_entry_path(hl, tpath, sizeof(tpath)) < 0 || !tpath[0])
                        return invalid(im, "%.200s: a hard link to a bad path", path);
                ts = strrchr(tpath, '/');
                snprintf(tdir, sizeof(tdir), "%.*s", ts ? (int)(ts - tpath) : 0, tpath);
                tfd = open_beneath(im->root_fd, tdir[0] ? tdir : ".", O_PATH | O_DIRECTORY,
                                   RESOLVE_BENEATH);
                if (tfd < 0)
                        return invalid(im, "%.200s: hard link target not in the image", path);
                if (fstatat(tfd, ts ? ts + 1 : tpath, &a, AT_SYMLINK_NOFOLLOW) < 0 ||
                    S_ISDIR(a.st_mode))
                        return invalid(im, "%.200s: hard link target not in the image", path);
                if (fstatat(dfd, base, &b, AT_SYMLINK_NOFOLLOW) == 0 && a.st_ino == b.st_ino &&
                    a.st_dev == b.st_dev)
                        return 0;
                if (clear_slot(im, dfd, base, false, &is_dir) < 0)
                        return -1;
                if (linkat(tfd, ts ? ts + 1 : tpath, dfd, base, 0) < 0)
                        return sys_fail(im, errno, "link", path);
                return 0;
        }
        switch (type) {
        case AE_IFDIR: {
                _cleanup_close_ int fd = -EBADF;

                if (clear_slot(im, dfd, base, true, &is_dir) < 0)
                        return -1;
                if (!is_dir && mkdirat(dfd, base, 0700) < 0)
                        return sys_fail(im, errno, "mkdir", path);
                fd = openat(dfd, base, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return sys_fail(im, errno, "open", path);
                return set_owner_mode(im, fd, e, path);
        }
        case AE_IFREG: {
                _cleanup_close_ int fd = -EBADF;
                struct timespec ts[2] = {
                        {.tv_nsec = UTIME_OMIT},
                        {.tv_sec = archive_entry_mtime(e), .tv_nsec = archive_entry_mtime_nsec(e)}};

                if (clear_slot(im, dfd, base, false, &is_dir) < 0)
                        return -1;
                fd = openat(dfd, base, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
                if (fd < 0)
                        return sys_fail(im, errno, "create", path);
                r = copy_data(im, ar, e, fd, path);
                if (r < 0)
                        return r;
                if (set_owner_mode(im, fd, e, path) < 0)
                        return -1;
                (void)futimens(fd, ts);
                return 0;
        }
        case AE_IFLNK: {
                const char *t = archive_entry_symlink(e);

                if (!t || !*t || strlen(t) >= CELLA_PATH_MAX)
                        return invalid(im, "%.200s: bad symlink", path);
                if (clear_slot(im, dfd, base, false, &is_dir) < 0)
                        return -1;
                if (symlinkat(t, dfd, base) < 0)
                        return sys_fail(im, errno, "symlink", path);
                if (fchownat(dfd, base, (uid_t)archive_entry_uid(e), (gid_t)archive_entry_gid(e),
                             AT_SYMLINK_NOFOLLOW) < 0)
                        return sys_fail(im, errno, "chown", path);
                return 0;
        }
        case AE_IFIFO:
                if (clear_slot(im, dfd, base, false, &is_dir) < 0)
                        return -1;
                if (mknodat(dfd, base, S_IFIFO | entry_mode(e), 0) < 0)
                        return sys_fail(im, errno, "mkfifo", path);
                return 0;
        default:
                /* Device nodes and sockets: the sandbox has its own /dev. */
                im->res->skipped_devices++;
                return 0;
        }
}

/* Pass 0: whiteouts (against the lower layers); pass 1: everything else. */
static int apply_pass(struct import *im, int fd, int pass, const char *lname)
{
        struct archive *ar;
        struct archive_entry *e;
        int r = 0, hr;

        if (lseek(fd, 0, SEEK_SET) < 0)
                return sys_fail(im, errno, "seek", lname);
        ar = open_archive(fd);
        if (!ar)
                return invalid(im, "layer %.200s is not a tar archive", lname);
        parent_reset(im);
        while ((hr = archive_read_next_header(ar, &e)) == ARCHIVE_OK || hr == ARCHIVE_WARN) {
                char path[CELLA_PATH_MAX];
                const char *p = archive_entry_pathname(e);
                enum image_whiteout wh;
                size_t target = 0;
                bool ignore;

                if (pass == 1 && ++im->entries > CELLA_IMAGE_MAX_ENTRIES) {
                        r = invalid(im, "%s", "too many entries in the layers");
                        break;
                }
                if (!p || image_entry_path(p, path, sizeof(path)) < 0) {
                        r = invalid(im,
                                    "layer entry %.200s: bad path (absolute, '..', too long or "
                                    "too deep)",
                                    p ? p : "(none)");
                        break;
                }
                if (!path[0])
                        continue; /* the layer's root itself */
                wh = image_whiteout(path, &target, &ignore);
                if (wh == IMAGE_WH_BAD) {
                        r = invalid(im, "layer entry %.200s: bad whiteout", path);
                        break;
                }
                if (ignore)
                        continue;
                if (pass == 0) {
                        if (wh != IMAGE_WH_NONE)
                                r = apply_whiteout(im, path, wh, target);
                } else if (wh == IMAGE_WH_NONE) {
                        r = apply_entry(im, ar, e, path);
                }
                if (r < 0)
                        break;
        }
        if (r == 0 && hr != ARCHIVE_EOF)
                r = invalid(im, "layer %.200s: truncated or corrupt tar", lname);
        parent_reset(im);
        archive_read_free(ar);
        return r;
}

static int write_meta(struct import *im, const struct image_config *c,
                      const struct image_manifest *m)
{
        json_t *layers = json_array();
        _cleanup_json_ json_t *j = NULL;
        char ts[32];
        int r;

        for (size_t i = 0; layers && i < m->n_layers; i++)
                json_array_append_new(layers, json_string(m->layers[i].digest));
        time_format_iso(time_now_ms(), ts, sizeof(ts));
        j = json_pack("{s:s, s:s, s:I, s:O, s:s?, s:O?, s:O?, s:o?}", "source", "import",
                      "createdAt", ts, "sizeBytes", (json_int_t)im->res->bytes, "env", c->env,
                      "workingDir", c->working_dir, "entrypoint", c->entrypoint, "cmd", c->cmd,
                      "layers", layers);
        if (!j)
                return cella_error_set(im->err, CELLA_E_INTERNAL_ERROR, "out of memory");
        {
                _cleanup_free_ char *text = json_dumps(j, JSON_COMPACT);
                _cleanup_close_ int fd = -EBADF;
                size_t len;

                if (!text)
                        return cella_error_set(im->err, CELLA_E_INTERNAL_ERROR, "out of memory");
                len = strlen(text);
                fd = openat(im->work_fd, "image.json",
                            O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
                r = fd < 0 ? -errno : (write(fd, text, len) == (ssize_t)len ? 0 : -EIO);
                if (r < 0)
                        return sys_fail(im, -r, "write", "image.json");
        }
        return 0;
}

static int mark_complete(struct import *im)
{
        char ts[32];
        _cleanup_close_ int fd = -EBADF;
        size_t len;

        time_format_iso(time_now_ms(), ts, sizeof(ts));
        len = strlen(ts);
        ts[len++] = '\n';
        fd = openat(im->work_fd, ".complete", O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC,
                    0644);
        if (fd < 0 || write(fd, ts, len) != (ssize_t)len || fsync(fd) < 0)
                return sys_fail(im, errno ? errno : EIO, "write", ".complete");
        return 0;
}

static int install(struct import *im, const char *name, bool replace)
{
        char old[CELLA_NAME_MAX + 32];
        int r;

        if (renameat2(im->images_fd, im->work_name, im->images_fd, name, RENAME_NOREPLACE) == 0)
                return 0;
        if (errno != EEXIST)
                return sys_fail(im, errno, "rename into place", name);
        if (!replace)
                return cella_error_set(im->err, CELLA_E_IMAGE_EXISTS, "image '%s' exists", name);
        /* swap atomically, then drop the old tree */
        if (renameat2(im->images_fd, im->work_name, im->images_fd, name, RENAME_EXCHANGE) < 0)
                return sys_fail(im, errno, "swap into place", name);
        snprintf(old, sizeof(old), "%s", im->work_name);
        r = image_remove_tree(im->images_fd, old);
        if (r < 0)
                log_warn("image '%s': cannot remove the replaced tree: %s", name, strerror(-r));
        return 0;
}

int image_import(const char *images_dir, const char *name, const char *tarball, bool replace,
                 struct image_import_result *res, struct cella_error *err)
{
        struct import im = {.images_fd = -1,
                            .work_fd = -1,
                            .blobs_fd = -1,
                            .root_fd = -1,
                            .parent_fd = -1,
                            .res = res,
                            .err = err};
        struct image_manifest m = {0};
        struct image_config c = {0};
        _cleanup_close_ int tar_fd = -EBADF;
        bool made = false;
        uint64_t stored = 0;
        int r = -1;

        memset(res, 0, sizeof(*res));
        im.links = json_object();
        tar_fd = open(tarball, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        im.images_fd = open(images_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (!im.links || tar_fd < 0 || im.images_fd < 0) {
                sys_fail(&im, errno ? errno : ENOMEM, "open", tarball);
                goto out;
        }
        for (int i = 0; i < 100 && !made; i++) {
                snprintf(im.work_name, sizeof(im.work_name), ".import-%s.%08x", name,
                         (unsigned)(time_mono_us() * 2654435761u + (unsigned)i));
                if (mkdirat(im.images_fd, im.work_name, 0700) == 0)
                        made = true;
                else if (errno != EEXIST)
                        break;
        }
        if (!made) {
                sys_fail(&im, errno, "mkdir", im.work_name);
                goto out;
        }
        im.work_fd =
                openat(im.images_fd, im.work_name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (im.work_fd < 0 || mkdirat(im.work_fd, "blobs", 0700) < 0 ||
            mkdirat(im.work_fd, "rootfs", 0755) < 0) {
                sys_fail(&im, errno, "mkdir", im.work_name);
                goto out;
        }
        im.blobs_fd = openat(im.work_fd, "blobs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        im.root_fd = openat(im.work_fd, "rootfs", O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (im.blobs_fd < 0 || im.root_fd < 0) {
                sys_fail(&im, errno, "open", im.work_name);
                goto out;
        }
        if (store_outer(&im, tar_fd) < 0 || decode_chain(&im, &m, &c) < 0)
                goto out;
        stored = im.bytes;
        for (size_t i = 0; i < m.n_layers; i++) {
                _cleanup_close_ int lfd = open_verified(&im, &m.layers[i], "layer");

                if (lfd < 0 || apply_pass(&im, lfd, 0, m.layers[i].path) < 0 ||
                    apply_pass(&im, lfd, 1, m.layers[i].path) < 0)
                        goto out;
                res->layers++;
        }
        res->entries = im.entries;
        res->bytes = im.bytes - stored; /* what the rootfs holds (file data) */
        /* the blobs are not kept: the image is its rootfs and metadata */
        close(im.blobs_fd);
        im.blobs_fd = -1;
        if (image_remove_tree(im.work_fd, "blobs") < 0 || write_meta(&im, &c, &m) < 0 ||
            mark_complete(&im) < 0 || install(&im, name, replace) < 0)
                goto out;
        made = false; /* the work dir is the image now (or was swapped away and removed) */
        r = 0;
out:
        if (made && image_remove_tree(im.images_fd, im.work_name) < 0)
                log_warn("image import: cannot remove %s/%s", images_dir, im.work_name);
        image_manifest_done(&m);
        image_config_done(&c);
        json_decref(im.links);
        if (im.blobs_fd >= 0)
                close(im.blobs_fd);
        if (im.root_fd >= 0)
                close(im.root_fd);
        if (im.work_fd >= 0)
                close(im.work_fd);
        if (im.images_fd >= 0)
                close(im.images_fd);
        return r;
}
