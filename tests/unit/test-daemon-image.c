/* Image import: the entry path and whiteout rules, package names, the manifest/config
 * decoders, and image_import() on tarballs made here with libarchive (layers in order,
 * whiteouts, opaque directories, hard links, digests, hostile entries, replace). */
#include <archive.h>
#include <archive_entry.h>
#include <dirent.h>
#include <fcntl.h>
#include <openssl/evp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
#include <cmocka.h>

#include "daemon/image.h"

static void test_entry_path(void **state)
{
        static const struct {
                const char *in, *out;
                int r;
        } cases[] = {
                {"a/b", "a/b", 0},
                {"./a//b/", "a/b", 0},
                {".", "", 0},
                {"", "", 0},
                {"./", "", 0},
                {"a/./b", "a/b", 0},
                {"../a", NULL, -EINVAL},
                {"a/../b", NULL, -EINVAL},
                {"/etc/passwd", NULL, -EINVAL},
                {"a/..", NULL, -EINVAL},
                {"..", NULL, -EINVAL},
                {"a/...", "a/...", 0},
                {"a/..b", "a/..b", 0},
                {".wh..wh..opq", ".wh..wh..opq", 0},
        };
        char out[64], small[4], deep[CELLA_IMAGE_PATH_DEPTH * 2 + 8];

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                int r = image_entry_path(cases[i].in, out, sizeof(out));

                assert_int_equal(r, cases[i].r);
                if (r == 0)
                        assert_string_equal(out, cases[i].out);
        }
        assert_int_equal(image_entry_path("abcdef", small, sizeof(small)), -ENAMETOOLONG);
        /* depth: CELLA_IMAGE_PATH_DEPTH components pass, one more does not */
        for (int i = 0; i < CELLA_IMAGE_PATH_DEPTH; i++)
                memcpy(deep + 2 * i, "a/", 2);
        deep[2 * CELLA_IMAGE_PATH_DEPTH - 1] = '\0';
        {
                char big[sizeof(deep)];

                assert_int_equal(image_entry_path(deep, big, sizeof(big)), 0);
                deep[2 * CELLA_IMAGE_PATH_DEPTH - 1] = '/';
                deep[2 * CELLA_IMAGE_PATH_DEPTH] = 'b';
                deep[2 * CELLA_IMAGE_PATH_DEPTH + 1] = '\0';
                assert_int_equal(image_entry_path(deep, big, sizeof(big)), -EINVAL);
        }
}

static void test_whiteout(void **state)
{
        size_t t = 0;
        bool ignore;

        (void)state;
        assert_int_equal(image_whiteout("a/b", &t, &ignore), IMAGE_WH_NONE);
        assert_false(ignore);
        assert_int_equal(image_whiteout("a/.wh.b", &t, &ignore), IMAGE_WH_FILE);
        assert_string_equal("a/.wh.b" + t, "b");
        assert_int_equal(image_whiteout(".wh.top", &t, &ignore), IMAGE_WH_FILE);
        assert_string_equal(".wh.top" + t, "top");
        assert_int_equal(image_whiteout("d/.wh..wh..opq", &t, &ignore), IMAGE_WH_OPAQUE);
        assert_int_equal(image_whiteout("d/.wh..wh.plnk", &t, &ignore), IMAGE_WH_NONE);
        assert_true(ignore);
        assert_int_equal(image_whiteout("d/.wh..", &t, &ignore), IMAGE_WH_BAD);
        assert_int_equal(image_whiteout("d/.wh.", &t, &ignore), IMAGE_WH_BAD);
        assert_int_equal(image_whiteout(".wh..", &t, &ignore), IMAGE_WH_BAD);
        assert_int_equal(image_whiteout("d/.wh...x", &t, &ignore), IMAGE_WH_FILE);
}

static void test_package_names(void **state)
{
        (void)state;
        assert_true(image_package_ok("busybox-static"));
        assert_true(image_package_ok("g++"));
        assert_true(image_package_ok("libstdc++6"));
        assert_true(image_package_ok("0ad"));
        assert_true(image_package_ok("python3.11"));
        assert_false(image_package_ok(""));
        assert_false(image_package_ok("-rf"));
        assert_false(image_package_ok(".x"));
        assert_false(image_package_ok("Foo"));
        assert_false(image_package_ok("a b"));
        assert_false(image_package_ok("a;b"));
        assert_false(image_package_ok("a/b"));
        assert_false(image_package_ok("a=1.0"));
}

#define H64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"

static void test_decode_docker(void **state)
{
        struct image_manifest m;
        struct cella_error err = {0};
        const char *ok = "[{\"Config\":\"" H64 ".json\",\"Layers\":[\"x/layer.tar\","
                         "\"blobs/sha256/" H64 "\"]}]";

        (void)state;
        assert_int_equal(image_decode_docker_manifest(ok, strlen(ok), &m, &err), 0);
        assert_int_equal(m.n_layers, 2);
        assert_string_equal(m.config.path, H64 ".json");
        assert_string_equal(m.config.digest, "sha256:" H64);
        assert_string_equal(m.layers[0].path, "x/layer.tar");
        assert_string_equal(m.layers[0].digest, "");
        assert_string_equal(m.layers[1].digest, "sha256:" H64);
        image_manifest_done(&m);

        static const char *const bad[] = {
                "{}",
                "[]",
                "[{\"Config\":\"c.json\",\"Layers\":[]}]",
                "[{\"Config\":\"../c.json\",\"Layers\":[\"a\"]}]",
                "[{\"Config\":\"c.json\",\"Layers\":[\"/etc/passwd\"]}]",
                "[{\"Config\":\"c.json\",\"Layers\":[5]}]",
                "[{\"Layers\":[\"a\"]}]",
                "not json",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_int_equal(image_decode_docker_manifest(bad[i], strlen(bad[i]), &m, &err),
                                 -EINVAL);
                assert_int_equal(err.code, CELLA_E_INVALID_IMAGE);
                assert_int_equal(m.n_layers, 0);
                assert_null(m.config.path);
        }
}

static void test_decode_oci(void **state)
{
        const char *idx = "{\"manifests\":[{\"digest\":\"sha256:" H64 "\",\"platform\":{\"os\":"
                          "\"linux\",\"architecture\":\"arm64\"}},{\"mediaType\":\"application/"
                          "vnd.oci.image.index.v1+json\",\"digest\":\"sha256:"
                          "1111111111111111111111111111111111111111111111111111111111111111\","
                          "\"platform\":{\"os\":\"linux\",\"architecture\":\"amd64\"}}]}";
        const char *man =
                "{\"config\":{\"digest\":\"sha256:" H64 "\"},\"layers\":[{\"mediaType\":"
                "\"application/vnd.oci.image.layer.v1.tar+zstd\",\"digest\":\"sha256:" H64 "\"}]}";
        const char *foreign =
                "{\"config\":{\"digest\":\"sha256:" H64 "\"},\"layers\":[{"
                "\"mediaType\":\"application/x-encrypted\",\"digest\":\"sha256:" H64 "\"}]}";
        char d[IMAGE_DIGEST_LEN + 1];
        struct cella_error err = {0};
        struct image_manifest m;
        bool nested = false;

        (void)state;
        assert_int_equal(image_decode_oci_index(idx, strlen(idx), d, &nested, &err), 0);
        assert_string_equal(
                d, "sha256:1111111111111111111111111111111111111111111111111111111111111111");
        assert_true(nested);
        assert_int_equal(image_decode_oci_index("{\"manifests\":[]}", 16, d, &nested, &err),
                         -EINVAL);
        assert_int_equal(image_decode_oci_manifest(man, strlen(man), &m, &err), 0);
        assert_int_equal(m.n_layers, 1);
        assert_string_equal(m.layers[0].path, "blobs/sha256/" H64);
        image_manifest_done(&m);
        memset(&err, 0, sizeof(err));
        assert_int_equal(image_decode_oci_manifest(foreign, strlen(foreign), &m, &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_INVALID_IMAGE);
        assert_int_equal(m.n_layers, 0);
        {
                static const char *const bad[] = {
                        "{\"config\":{\"digest\":\"sha256:" H64 "\"}}",
                        "{\"config\":{\"digest\":\"sha256:" H64 "\"},\"layers\":[]}",
                        "{\"config\":{\"digest\":\"sha256:" H64 "\"},\"layers\":{}}",
                        "{\"config\":{},\"layers\":[{\"digest\":\"sha256:" H64 "\"}]}",
                        "{\"config\":{\"digest\":\"sha256:" H64 "\"},\"layers\":[{\"digest\":"
                        "\"sha256:" H64 "\"},{\"digest\":\"md5:00\"}]}",
                };

                for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                        memset(&err, 0, sizeof(err));
                        assert_int_equal(
                                image_decode_oci_manifest(bad[i], strlen(bad[i]), &m, &err),
                                -EINVAL);
                        assert_int_equal(err.code, CELLA_E_INVALID_IMAGE);
                        assert_int_equal(m.n_layers, 0);
                        assert_null(m.config.path);
                        if (i < 3)
                                assert_non_null(strstr(err.msg, "image manifest: 1 to"));
                }
        }
        assert_false(image_digest_ok("sha256:" H64 "0"));
        assert_false(image_digest_ok(
                "sha256:0123456789ABCDEF0123456789abcdef0123456789abcdef0123456789abcdef"));
        assert_false(image_digest_ok("sha512:" H64));
}

static void test_decode_config(void **state)
{
        const char *cfg = "{\"config\":{\"Env\":[\"PATH=/bin\",\"A=b=c\"],\"WorkingDir\":\"/app\","
                          "\"Cmd\":[\"sh\"]},\"rootfs\":{\"diff_ids\":[\"sha256:" H64 "\"]}}";
        const char *nul = "{\"config\":{\"Env\":null}}";
        const char *bad = "{\"config\":{\"Env\":[1]}}";
        struct cella_error err = {0};
        struct image_config c;

        (void)state;
        assert_int_equal(image_decode_config(cfg, strlen(cfg), &c, &err), 0);
        assert_int_equal(json_array_size(c.env), 2);
        assert_string_equal(c.working_dir, "/app");
        assert_int_equal(c.n_diff_ids, 1);
        assert_non_null(c.cmd);
        assert_null(c.entrypoint);
        image_config_done(&c);
        assert_int_equal(image_decode_config(nul, strlen(nul), &c, &err), 0);
        assert_int_equal(json_array_size(c.env), 0);
        image_config_done(&c);
        assert_int_equal(image_decode_config(bad, strlen(bad), &c, &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_INVALID_IMAGE);
}

static void test_decode_build(void **state)
{
        const char *pkgs[CELLA_IMAGE_MAX_PACKAGES];
        struct cella_error err = {0};
        json_t *owner = NULL;
        size_t n = 9;
        const char *ok = "{\"packages\":[\"busybox-static\",\"g++\"]}";
        static const char *const bad[] = {"{\"packages\":[\"-x\"]}", "{\"packages\":\"a\"}",
                                          "{\"other\":[]}", "[]", "{\"packages\":[1]}"};

        (void)state;
        assert_int_equal(image_decode_build("", 0, pkgs, &n, &owner, &err), 0);
        assert_int_equal(n, 0);
        assert_int_equal(image_decode_build(ok, strlen(ok), pkgs, &n, &owner, &err), 0);
        assert_int_equal(n, 2);
        assert_string_equal(pkgs[1], "g++");
        json_decref(owner);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_int_equal(image_decode_build(bad[i], strlen(bad[i]), pkgs, &n, &owner, &err),
                                 -EINVAL);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                assert_null(owner);
                assert_int_equal(n, 0);
        }
}

/* ---- image_import on tarballs made here ---- */

struct ent {
        const char *path;
        mode_t type;      /* AE_IFREG, AE_IFDIR, AE_IFLNK, AE_IFCHR; 0: hard link */
        const char *data; /* content, or link target */
        mode_t perm;
};

static size_t make_tar(const struct ent *e, size_t n, char *out, size_t cap)
{
        struct archive *a = archive_write_new();
        size_t used = 0;

        assert_non_null(a);
        archive_write_set_format_pax_restricted(a);
        assert_int_equal(archive_write_open_memory(a, out, cap, &used), ARCHIVE_OK);
        for (size_t i = 0; i < n; i++) {
                struct archive_entry *x = archive_entry_new();

                archive_entry_set_pathname(x, e[i].path);
                archive_entry_set_perm(x, e[i].perm ? e[i].perm : 0644);
                if (e[i].type == 0) {
                        archive_entry_set_filetype(x, AE_IFREG);
                        archive_entry_set_hardlink(x, e[i].data);
                } else {
                        archive_entry_set_filetype(x, e[i].type);
                }
                if (e[i].type == AE_IFLNK)
                        archive_entry_set_symlink(x, e[i].data);
                if (e[i].type == AE_IFREG)
                        archive_entry_set_size(x, (la_int64_t)strlen(e[i].data));
                if (e[i].type == AE_IFCHR)
                        archive_entry_set_rdev(x, makedev(1, 3));
                assert_int_equal(archive_write_header(a, x), ARCHIVE_OK);
                if (e[i].type == AE_IFREG)
                        archive_write_data(a, e[i].data, strlen(e[i].data));
                archive_entry_free(x);
        }
        archive_write_close(a);
        archive_write_free(a);
        return used;
}

static void hex_sha(const void *p, size_t n, char out[65])
{
        unsigned char md[32];
        unsigned int len = 0;

        EVP_Digest(p, n, md, &len, EVP_sha256(), NULL);
        for (int i = 0; i < 32; i++)
                snprintf(out + 2 * i, 3, "%02x", md[i]);
}

#define TAR_CAP (256 * 1024)

/* A docker save (legacy layout) tarball of the layers at path; a digest of "" keeps the
 * real one, "bad" puts a wrong diff_id in the config. */
static void make_docker(const char *path, const struct ent *const *layers, const size_t *counts,
                        size_t nl, bool bad_digest)
{
        static char lt[4][TAR_CAP];
        size_t ll[4];
        char hex[4][65], cfg[2048], man[2048], cfghex[65], name[128];
        size_t off;
        static char buf[4 * TAR_CAP + 65536];
        size_t used;
        int fd;

        off = (size_t)snprintf(
                cfg, sizeof(cfg),
                "{\"config\":{\"Env\":[\"PATH=/bin\",\"X=1\"],\"WorkingDir\":\"/w\"},"
                "\"rootfs\":{\"type\":\"layers\",\"diff_ids\":[");
        for (size_t i = 0; i < nl; i++) {
                ll[i] = make_tar(layers[i], counts[i], lt[i], TAR_CAP);
                hex_sha(lt[i], ll[i], hex[i]);
                if (bad_digest && i == nl - 1)
                        hex[i][0] = hex[i][0] == '0' ? '1' : '0';
                off += (size_t)snprintf(cfg + off, sizeof(cfg) - off, "%s\"sha256:%s\"",
                                        i ? "," : "", hex[i]);
        }
        snprintf(cfg + off, sizeof(cfg) - off, "]}}");
        hex_sha(cfg, strlen(cfg), cfghex);
        off = (size_t)snprintf(man, sizeof(man), "[{\"Config\":\"%s.json\",\"Layers\":[", cfghex);
        for (size_t i = 0; i < nl; i++)
                off += (size_t)snprintf(man + off, sizeof(man) - off, "%s\"l%zu/layer.tar\"",
                                        i ? "," : "", i);
        snprintf(man + off, sizeof(man) - off, "]}]");
        /* the outer tar: written by hand with libarchive too (binary-safe data) */
        {
                struct archive *a = archive_write_new();

                archive_write_set_format_pax_restricted(a);
                assert_int_equal(archive_write_open_memory(a, buf, sizeof(buf), &used), ARCHIVE_OK);
                for (size_t i = 0; i < nl + 2; i++) {
                        struct archive_entry *x = archive_entry_new();
                        const char *data;
                        size_t len;

                        if (i < nl) {
                                snprintf(name, sizeof(name), "l%zu/layer.tar", i);
                                data = lt[i];
                                len = ll[i];
                        } else if (i == nl) {
                                snprintf(name, sizeof(name), "%s.json", cfghex);
                                data = cfg;
                                len = strlen(cfg);
                        } else {
                                snprintf(name, sizeof(name), "manifest.json");
                                data = man;
                                len = strlen(man);
                        }
                        archive_entry_set_pathname(x, name);
                        archive_entry_set_filetype(x, AE_IFREG);
                        archive_entry_set_perm(x, 0644);
                        archive_entry_set_size(x, (la_int64_t)len);
                        assert_int_equal(archive_write_header(a, x), ARCHIVE_OK);
                        archive_write_data(a, data, len);
                        archive_entry_free(x);
                }
                archive_write_close(a);
                archive_write_free(a);
        }
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        assert_true(fd >= 0);
        assert_int_equal(write(fd, buf, used), (ssize_t)used);
        close(fd);
}

static char *slurp(const char *dir, const char *rel)
{
        static char buf[256];
        char p[512];
        int fd;
        ssize_t n;

        snprintf(p, sizeof(p), "%s/%s", dir, rel);
        fd = open(p, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return NULL;
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        buf[n < 0 ? 0 : n] = '\0';
        return buf;
}

static int count_entries(const char *dir)
{
        DIR *d = opendir(dir);
        struct dirent *de;
        int n = 0;

        if (!d)
                return -1;
        while ((de = readdir(d)))
                if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
                        n++;
        closedir(d);
        return n;
}

static void test_import(void **state)
{
        char dir[] = "/tmp/cella-image-XXXXXX", images[128], tar[128], root[256], p[300];
        const struct ent l1[] = {
                {"bin/", AE_IFDIR, NULL, 0755},
                {"bin/tool", AE_IFREG, "tool\n", 04755},
                {"bin/sh", AE_IFLNK, "tool", 0777},
                {"data/", AE_IFDIR, NULL, 0755},
                {"data/keep", AE_IFREG, "keep\n", 0},
                {"data/gone", AE_IFREG, "gone\n", 0},
                {"opq/", AE_IFDIR, NULL, 0755},
                {"opq/old", AE_IFREG, "old\n", 0},
                {"dev-null", AE_IFCHR, NULL, 0666},
                {"./dup", AE_IFREG, "first\n", 0},
                {"dup", AE_IFREG, "second\n", 0},
                {"implicit/parent/file", AE_IFREG, "made\n", 0},
        };
        const struct ent l2[] = {
                {"data/.wh.gone", AE_IFREG, "", 0},         {"opq/.wh..wh..opq", AE_IFREG, "", 0},
                {"opq/new", AE_IFREG, "new\n", 0},          {"data/link", 0, "data/keep", 0},
                {"bin/sh", AE_IFREG, "now a file\n", 0755},
        };
        const struct ent *layers[] = {l1, l2};
        const size_t counts[] = {sizeof(l1) / sizeof(l1[0]), sizeof(l2) / sizeof(l2[0])};
        struct image_import_result res;
        struct cella_error err = {0};
        struct stat st;

        (void)state;
        assert_non_null(mkdtemp(dir));
        snprintf(images, sizeof(images), "%s/images", dir);
        assert_int_equal(mkdir(images, 0700), 0);
        snprintf(tar, sizeof(tar), "%s/img.tar", dir);
        make_docker(tar, layers, counts, 2, false);
        assert_int_equal(image_import(images, "one", tar, false, &res, &err), 0);
        assert_int_equal(res.layers, 2);
        assert_int_equal(res.skipped_devices, 1);
        snprintf(root, sizeof(root), "%s/one/rootfs", images);
        assert_string_equal(slurp(root, "data/keep"), "keep\n");
        assert_null(slurp(root, "data/gone"));
        assert_null(slurp(root, "opq/old"));
        assert_string_equal(slurp(root, "opq/new"), "new\n");
        assert_string_equal(slurp(root, "dup"), "second\n");
        assert_string_equal(slurp(root, "implicit/parent/file"), "made\n");
        assert_string_equal(slurp(root, "bin/sh"), "now a file\n");
        snprintf(p, sizeof(p), "%s/data/link", root);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_nlink, 2);
        snprintf(p, sizeof(p), "%s/bin/tool", root);
        assert_int_equal(stat(p, &st), 0);
        assert_int_equal(st.st_mode & 07777, 0755); /* setuid dropped */
        snprintf(p, sizeof(p), "%s/dev-null", root);
        assert_int_equal(lstat(p, &st), -1);
        snprintf(p, sizeof(p), "%s/one", images);
        assert_non_null(slurp(p, ".complete"));
        assert_non_null(strstr(slurp(p, "image.json"), "\"X=1\""));
        assert_null(slurp(p, "blobs")); /* the blobs are not kept */
        /* exists: refused, then replaced */
        memset(&err, 0, sizeof(err));
        assert_int_equal(image_import(images, "one", tar, false, &res, &err), -1);
        assert_int_equal(err.code, CELLA_E_IMAGE_EXISTS);
        assert_int_equal(image_import(images, "one", tar, true, &res, &err), 0);
        assert_int_equal(count_entries(images), 1);

        /* hostile: each is INVALID_IMAGE, nothing outside, nothing left behind */
        {
                char outside[160], target[200];
                const struct ent esc[] = {{"esc", AE_IFLNK, outside, 0777},
                                          {"esc/pwned", AE_IFREG, "x", 0}};
                const struct ent rel[] = {{"a/", AE_IFDIR, NULL, 0755},
                                          {"a/up", AE_IFLNK, "../../../../../../..", 0777},
                                          {"a/up/tmp/pwned", AE_IFREG, "x", 0}};
                const struct ent dotdot[] = {{"../../pwned", AE_IFREG, "x", 0}};
                const struct ent abs[] = {{"/pwned-abs", AE_IFREG, "x", 0}};
                const struct ent hl[] = {{"hl", 0, "../../../etc/passwd", 0}};
                const struct ent wh[] = {{".wh..", AE_IFREG, "", 0}};
                const struct ent *hostile[] = {esc, rel, dotdot, abs, hl, wh};
                const size_t hc[] = {2, 3, 1, 1, 1, 1};

                snprintf(outside, sizeof(outside), "%s/outside", dir);
                assert_int_equal(mkdir(outside, 0700), 0);
                for (size_t i = 0; i < sizeof(hc) / sizeof(hc[0]); i++) {
                        const struct ent *ls[] = {l1, hostile[i]};
                        const size_t cs[] = {counts[0], hc[i]};

                        make_docker(tar, ls, cs, 2, false);
                        memset(&err, 0, sizeof(err));
                        assert_int_equal(image_import(images, "bad", tar, false, &res, &err), -1);
                        assert_int_equal(err.code, CELLA_E_INVALID_IMAGE);
                        assert_int_equal(count_entries(outside), 0);
                        assert_int_equal(count_entries(images), 1);
                }
                /* a bad diff_id */
                make_docker(tar, layers, counts, 2, true);
                memset(&err, 0, sizeof(err));
                assert_int_equal(image_import(images, "bad", tar, false, &res, &err), -1);
                assert_int_equal(err.code, CELLA_E_INVALID_IMAGE);
                assert_non_null(strstr(err.msg, "digest mismatch"));
                assert_int_equal(count_entries(images), 1);

                /* image_remove_tree never follows a symlink out */
                snprintf(target, sizeof(target), "%s/keepme", outside);
                assert_int_equal(mkdir(target, 0700), 0);
                snprintf(p, sizeof(p), "%s/one/rootfs/link-out", images);
                assert_int_equal(symlink(outside, p), 0);
                {
                        int fd = open(images, O_PATH | O_DIRECTORY | O_CLOEXEC);

                        assert_int_equal(image_remove_tree(fd, "one"), 0);
                        close(fd);
                }
                assert_int_equal(count_entries(images), 0);
                assert_int_equal(count_entries(outside), 1);
        }
        {
                int fd = open("/tmp", O_PATH | O_DIRECTORY | O_CLOEXEC);

                assert_int_equal(image_remove_tree(fd, dir + 5), 0);
                close(fd);
        }
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_entry_path),    cmocka_unit_test(test_whiteout),
                cmocka_unit_test(test_package_names), cmocka_unit_test(test_decode_docker),
                cmocka_unit_test(test_decode_oci),    cmocka_unit_test(test_decode_config),
                cmocka_unit_test(test_decode_build),  cmocka_unit_test(test_import),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
