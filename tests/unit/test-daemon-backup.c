/* Backups' pure parts and the archive on a temporary tree (decision 0049): the dir rules,
 * the s3:// URL, the record's format/parse, a write/extract round trip (links kept as links,
 * set-id bits dropped, a fifo, an empty dir), and extraction refusing crafted archives
 * ("../", absolute names, a file through a link, a hard link, a device) and a damaged or
 * substituted one (size and SHA-256), leaving nothing outside its directory. The namespace
 * entry of cella-archive is tested end to end by integration/backups. */
#include <archive.h>
#include <archive_entry.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <cmocka.h>

#include "common/limits.h"
#include "daemon/backup-archive.h"
#include "daemon/backup-store.h"

static char root[256];

static int setup(void **state)
{
        (void)state;
        snprintf(root, sizeof(root), "/tmp/cella-backup-test.XXXXXX");
        assert_non_null(mkdtemp(root));
        return 0;
}

static int teardown(void **state)
{
        int fd = open("/", O_RDONLY | O_DIRECTORY);

        (void)state;
        assert_int_equal(chdir("/"), 0);
        backup_remove_tree(fd, root + 1);
        close(fd);
        return 0;
}

static void test_dir_check(void **state)
{
        static const char *const ok[] = {"/workspace", "/workspace/a", "/home/user/x y",
                                         "/tmp",       "/var/tmp/a",   "/app/src/.git"};
        static const char *const bad[] = {"",
                                          "workspace",
                                          "/",
                                          "/etc",
                                          "/workspacex",
                                          "/workspace/",
                                          "/workspace//a",
                                          "/workspace/../etc",
                                          "/workspace/.",
                                          "/workspace/./a",
                                          "/home/a\nb",
                                          "/var",
                                          "/proc/1"};
        struct cella_error err;

        (void)state;
        for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++)
                assert_int_equal(backup_dir_check(ok[i], NULL), 0);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_true(backup_dir_check(bad[i], &err) < 0);
                assert_int_equal(err.code, CELLA_E_INVALID_BACKUP_CONFIG);
        }
}

static void test_spec(void **state)
{
        struct backup_s3_spec s;
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(backup_s3_spec_parse("s3://bkt/a/b/?endpoint=http://127.0.0.1:9000/&"
                                              "region=eu-west-1",
                                              &s, &err),
                         0);
        assert_string_equal(s.bucket, "bkt");
        assert_string_equal(s.prefix, "a/b/");
        assert_string_equal(s.endpoint, "http://127.0.0.1:9000");
        assert_string_equal(s.region, "eu-west-1");
        assert_int_equal(backup_s3_spec_parse("s3://bkt?endpoint=https%3A%2F%2Fh", &s, &err), 0);
        assert_string_equal(s.endpoint, "https://h");
        assert_string_equal(s.prefix, "");
        assert_string_equal(s.region, "us-east-1");
        static const char *const bad[] = {"http://bkt?endpoint=http://h",
                                          "s3://bkt",
                                          "s3://BK?endpoint=http://h",
                                          "s3://bkt?endpoint=ftp://h",
                                          "s3://bkt?endpoint=http://h/p",
                                          "s3://bkt?endpoint=http://h&x=1",
                                          "s3://bkt/a//b?endpoint=http://h",
                                          "s3://bkt?endpoint=http://u@h",
                                          "s3://bkt?endpoint"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_true(backup_s3_spec_parse(bad[i], &s, &err) < 0);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        }
}

static void test_record(void **state)
{
        struct backup_record a = {.size_bytes = 5, .created_ms = 10, .expires_ms = 20}, b;
        struct cella_error err = {0};
        char *text;

        (void)state;
        assert_int_equal(backup_id_new(a.id), 0);
        assert_true(backup_id_is_valid(a.id));
        snprintf(a.name, sizeof(a.name), "label \"quoted\"");
        snprintf(a.sandbox, sizeof(a.sandbox), "dev");
        snprintf(a.dir, sizeof(a.dir), "/workspace/app");
        memset(a.sha256, 'f', 64);
        text = backup_record_format(&a);
        assert_non_null(text);
        assert_int_equal(backup_record_parse(text, strlen(text), &b, &err), 0);
        assert_memory_equal(&a, &b, sizeof(a));
        free(text);
        assert_false(backup_id_is_valid("0B5E6F0E-2C64-4D0C-9D44-52C1F1B8A0E3"));
        assert_false(backup_id_is_valid("../../../../etc/passwd-aaaaaaaaaaaaaa"));
        const char *bad = "{\"version\":1,\"id\":\"0b5e6f0e-2c64-4d0c-9d44-52c1f1b8a0e3\","
                          "\"name\":\"\",\"sandbox\":\"s\",\"dir\":\"/etc\",\"sizeBytes\":1,"
                          "\"createdMs\":1,\"expiresMs\":2,\"sha256\":\"aaaaaaaaaaaaaaaaaaaaaaaaa"
                          "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"}";
        assert_true(backup_record_parse(bad, strlen(bad), &b, &err) < 0);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);

        assert_true(fd >= 0);
        assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
        assert_int_equal(fchmod(fd, mode), 0);
        close(fd);
}

static void sha256_file(const char *path, char hex[65], int64_t *size)
{
        unsigned char buf[65536], md[32];
        unsigned int mdlen;
        EVP_MD_CTX *c = EVP_MD_CTX_new();
        int fd = open(path, O_RDONLY);
        ssize_t n;

        assert_true(fd >= 0);
        EVP_DigestInit_ex(c, EVP_sha256(), NULL);
        *size = 0;
        while ((n = read(fd, buf, sizeof(buf))) > 0) {
                EVP_DigestUpdate(c, buf, (size_t)n);
                *size += n;
        }
        EVP_DigestFinal_ex(c, md, &mdlen);
        EVP_MD_CTX_free(c);
        close(fd);
        for (int i = 0; i < 32; i++)
                snprintf(hex + 2 * i, 3, "%02x", md[i]);
}

/* Extract archive (a file) into a new empty directory dest under root. */
static int extract(const char *archive, const char *dest, const char *sha, int64_t size,
                   struct cella_error *err)
{
        struct backup_archive_stats st;
        char path[512];
        int fd, r;

        snprintf(path, sizeof(path), "%s/%s", root, dest);
        assert_int_equal(mkdir(path, 0700), 0);
        assert_int_equal(chdir(path), 0);
        fd = open(archive, O_RDONLY);
        assert_true(fd >= 0);
        r = backup_archive_extract_cwd(fd, sha, size, &st, err);
        close(fd);
        assert_int_equal(chdir("/"), 0);
        return r;
}

static void test_round_trip(void **state)
{
        struct backup_archive_stats st;
        struct cella_error err = {0};
        char path[512], archive[512], link[256], sha[65];
        struct stat sb;
        int64_t size;
        int fd;

        (void)state;
        snprintf(path, sizeof(path), "%s/src", root);
        assert_int_equal(mkdir(path, 0755), 0);
        assert_int_equal(chdir(path), 0);
        assert_int_equal(mkdir("empty", 0700), 0);
        assert_int_equal(mkdir("sub", 0750), 0);
        write_file("sub/f", "hello\n", 0640);
        write_file("suid", "x", 04755);
        assert_int_equal(symlink("/etc/shadow", "shadow"), 0);
        assert_int_equal(symlink("sub/f", "rel"), 0);
        assert_int_equal(mkfifo("fifo", 0600), 0);
        snprintf(archive, sizeof(archive), "%s/a.tar.zst", root);
        fd = open(archive, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(backup_archive_write_cwd(fd, NULL, &st, &err), 0);
        close(fd);
        assert_int_equal(chdir("/"), 0);
        assert_int_equal(st.entries, 8); /* . empty sub sub/f suid shadow rel fifo */
        sha256_file(archive, sha, &size);
        assert_int_equal((int64_t)st.bytes, size);

        assert_int_equal(extract(archive, "out", sha, size, &err), 0);
        snprintf(path, sizeof(path), "%s/out/shadow", root);
        assert_int_equal(readlink(path, link, sizeof(link)), 11);
        assert_memory_equal(link, "/etc/shadow", 11);
        snprintf(path, sizeof(path), "%s/out/sub/f", root);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 07777, 0640);
        assert_int_equal(sb.st_size, 6);
        snprintf(path, sizeof(path), "%s/out/sub", root);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 07777, 0750);
        snprintf(path, sizeof(path), "%s/out/suid", root);
        assert_int_equal(stat(path, &sb), 0);
        assert_int_equal(sb.st_mode & 07777, 0755);
        snprintf(path, sizeof(path), "%s/out/fifo", root);
        assert_int_equal(lstat(path, &sb), 0);
        assert_true(S_ISFIFO(sb.st_mode));
        snprintf(path, sizeof(path), "%s/out/empty", root);
        assert_int_equal(stat(path, &sb), 0);
        assert_true(S_ISDIR(sb.st_mode));

        /* the wrong size or hash: refused */
        memset(&err, 0, sizeof(err));
        assert_true(extract(archive, "out2", sha, size + 1, &err) < 0);
        assert_int_equal(err.code, CELLA_E_BACKUP_RESTORE_FAILED);
        assert_non_null(strstr(err.msg, "damaged"));
        sha[0] = sha[0] == '0' ? '1' : '0';
        memset(&err, 0, sizeof(err));
        assert_true(extract(archive, "out3", sha, size, &err) < 0);
        assert_non_null(strstr(err.msg, "damaged"));
}

/* An archive of the entries given as (type, name, target-or-content) triples. */
static void craft(const char *path, ...)
{
        struct archive *a = archive_write_new();
        va_list ap;
        int type;

        assert_int_equal(archive_write_set_format_pax_restricted(a), ARCHIVE_OK);
        assert_int_equal(archive_write_add_filter_zstd(a), ARCHIVE_OK);
        assert_int_equal(archive_write_open_filename(a, path), ARCHIVE_OK);
        va_start(ap, path);
        while ((type = va_arg(ap, int)) != 0) {
                const char *name = va_arg(ap, const char *);
                const char *extra = va_arg(ap, const char *);
                struct archive_entry *e = archive_entry_new();

                archive_entry_set_pathname(e, name);
                archive_entry_set_perm(e, 0644);
                if (type == 'f') {
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_size(e, (la_int64_t)strlen(extra));
                } else if (type == 'l') {
                        archive_entry_set_filetype(e, AE_IFLNK);
                        archive_entry_set_symlink(e, extra);
                } else if (type == 'h') {
                        archive_entry_set_filetype(e, AE_IFREG);
                        archive_entry_set_hardlink(e, extra);
                } else if (type == 'c') {
                        archive_entry_set_filetype(e, AE_IFCHR);
                        archive_entry_set_rdev(e, makedev(1, 3));
                }
                assert_true(archive_write_header(a, e) >= ARCHIVE_WARN);
                if (type == 'f')
                        archive_write_data(a, extra, strlen(extra));
                archive_entry_free(e);
        }
        va_end(ap);
        archive_write_close(a);
        archive_write_free(a);
}

static void test_crafted(void **state)
{
        char archive[512], path[512], sha[65];
        struct cella_error err;
        struct stat sb;
        int64_t size;
        int n = 0;

        (void)state;
        snprintf(archive, sizeof(archive), "%s/c.tar.zst", root);
        struct {
                const char *what;
                int t1;
                const char *n1, *x1;
                int t2;
                const char *n2, *x2;
        } cases[] = {
                {"dotdot", 'f', "../escape", "x", 0, NULL, NULL},
                {"deep dotdot", 'f', "./a/../../escape", "x", 0, NULL, NULL},
                {"absolute", 'f', "/tmp/cella-backup-escape", "x", 0, NULL, NULL},
                {"link then file", 'l', "./l", "..", 'f', "./l/escape", "x"},
                {"hard link", 'f', "./a", "x", 'h', "./b", "./a"},
                {"device", 'c', "./null", NULL, 0, NULL, NULL},
        };
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                char dest[32];

                craft(archive, cases[i].t1, cases[i].n1, cases[i].x1, cases[i].t2, cases[i].n2,
                      cases[i].x2, 0);
                sha256_file(archive, sha, &size);
                snprintf(dest, sizeof(dest), "c%d", n++);
                memset(&err, 0, sizeof(err));
                if (extract(archive, dest, sha, size, &err) == 0)
                        fail_msg("%s: extracted", cases[i].what);
                assert_int_equal(err.code, CELLA_E_BACKUP_RESTORE_FAILED);
        }
        snprintf(path, sizeof(path), "%s/escape", root);
        assert_true(lstat(path, &sb) < 0);
        assert_true(lstat("/tmp/cella-backup-escape", &sb) < 0);
        /* not an archive at all */
        write_file(archive, "this is not a zstd stream", 0600);
        sha256_file(archive, sha, &size);
        memset(&err, 0, sizeof(err));
        assert_true(extract(archive, "junk", sha, size, &err) < 0);
        assert_int_equal(err.code, CELLA_E_BACKUP_RESTORE_FAILED);
}

static bool exists(const char *rel)
{
        char path[512];
        struct stat sb;

        snprintf(path, sizeof(path), "%s/%s", root, rel);
        return lstat(path, &sb) == 0;
}

/* The filter on a tree: excludes, nested .gitignore files (negation, directory-only,
 * anchored, "**"), a .gitignore inside an excluded directory never read, the excludes
 * before the .gitignore files, sibling directories' files kept apart, and a .gitignore over
 * the size limit refused. */
static void test_filter(void **state)
{
        struct backup_archive_stats st;
        struct cella_error err = {0};
        struct backup_filter *f;
        char path[512], archive[512], sha[65];
        int64_t size;
        int fd;

        (void)state;
        snprintf(path, sizeof(path), "%s/src", root);
        assert_int_equal(mkdir(path, 0755), 0);
        assert_int_equal(chdir(path), 0);
        write_file(".gitignore", "*.log\n!keep.log\nbuild/\n/top.txt\ndocs/**/*.tmp\n", 0644);
        write_file("a.log", "x", 0644);
        write_file("keep.log", "x", 0644);
        write_file("top.txt", "x", 0644);
        write_file("main.c", "x", 0644);
        assert_int_equal(mkdir("build", 0755), 0);
        write_file("build/out.o", "x", 0644);
        write_file("build/.gitignore", "!*\n", 0644); /* inside an excluded dir: unread */
        write_file("build.txt", "x", 0644);           /* "build/" is for directories */
        assert_int_equal(mkdir("docs", 0755), 0);
        assert_int_equal(mkdir("docs/x", 0755), 0);
        write_file("docs/x/y.tmp", "x", 0644);
        write_file("docs/z.tmp", "x", 0644);
        assert_int_equal(mkdir("sub", 0755), 0);
        write_file("sub/.gitignore", "secret\n!a.log\n/top.txt\n", 0644);
        write_file("sub/top.txt", "x", 0644);
        write_file("sub/a.log", "x", 0644);
        assert_int_equal(mkdir("sub/deep", 0755), 0);
        write_file("sub/deep/secret", "x", 0644);
        write_file("sub/deep/top.txt", "x", 0644);
        assert_int_equal(mkdir("sub2", 0755), 0); /* a sibling: sub's patterns are not its */
        write_file("sub2/secret", "x", 0644);
        write_file("sub2/a.log", "x", 0644);
        assert_int_equal(mkdir("node_modules", 0755), 0);
        write_file("node_modules/m.js", "x", 0644);

        assert_int_equal(backup_filter_new(true, &f), 0);
        assert_int_equal(backup_filter_exclude(f, "node_modules", &err), 0);
        assert_int_equal(backup_filter_exclude(f, "!a.log", &err), 0); /* over the .gitignore */
        assert_int_equal(backup_filter_exclude(f, "sub2/a.log", &err), 0);
        snprintf(archive, sizeof(archive), "%s/f.tar.zst", root);
        fd = open(archive, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(backup_archive_write_cwd(fd, f, &st, &err), 0);
        close(fd);
        backup_filter_free(f);
        assert_int_equal(chdir("/"), 0);
        sha256_file(archive, sha, &size);
        assert_int_equal(extract(archive, "out", sha, size, &err), 0);

        assert_true(exists("out/.gitignore"));
        assert_true(exists("out/a.log")); /* "!a.log" of the excludes */
        assert_true(exists("out/keep.log"));
        assert_false(exists("out/top.txt"));
        assert_true(exists("out/main.c"));
        assert_false(exists("out/build"));
        assert_true(exists("out/build.txt"));
        assert_false(exists("out/docs/x/y.tmp"));
        assert_false(exists("out/docs/z.tmp"));
        assert_true(exists("out/docs/x"));
        assert_false(exists("out/sub/top.txt"));
        assert_true(exists("out/sub/a.log"));
        assert_false(exists("out/sub/deep/secret"));
        assert_true(exists("out/sub/deep/top.txt")); /* "/top.txt" of sub: sub's own only */
        assert_true(exists("out/sub2/secret"));
        assert_false(exists("out/sub2/a.log"));
        assert_false(exists("out/node_modules"));
        assert_int_equal(st.excluded, 8);

        /* a .gitignore over the limit: refused, naming it */
        snprintf(path, sizeof(path), "%s/src/sub2/.gitignore", root);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        assert_true(fd >= 0);
        assert_int_equal(ftruncate(fd, CELLA_BACKUP_GITIGNORE_BYTES + 1), 0);
        close(fd);
        snprintf(path, sizeof(path), "%s/src", root);
        assert_int_equal(chdir(path), 0);
        assert_int_equal(backup_filter_new(true, &f), 0);
        fd = open(archive, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        assert_true(fd >= 0);
        memset(&err, 0, sizeof(err));
        assert_int_equal(backup_archive_write_cwd(fd, f, &st, &err), -1);
        close(fd);
        backup_filter_free(f);
        assert_int_equal(chdir("/"), 0);
        assert_int_equal(err.code, CELLA_E_INVALID_BACKUP_CONFIG);
        assert_non_null(strstr(err.msg, "sub2/.gitignore"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_dir_check),
                cmocka_unit_test(test_spec),
                cmocka_unit_test(test_record),
                cmocka_unit_test_setup_teardown(test_round_trip, setup, teardown),
                cmocka_unit_test_setup_teardown(test_crafted, setup, teardown),
                cmocka_unit_test_setup_teardown(test_filter, setup, teardown),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
