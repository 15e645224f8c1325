/* Sandbox names, sandbox paths, base64, buffers, the error table. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/error.h"
#include "common/json-path.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/name.h"
#include "common/path.h"

static void name_ok(const char *in, bool normalize, const char *want)
{
        char out[CELLA_NAME_MAX + 1];
        struct cella_error err = {0};
        assert_int_equal(sandbox_name_check(in, strlen(in), normalize, out, &err), 0);
        assert_string_equal(out, want);
}

static void name_bad(const char *in, size_t len, const char *msg_part)
{
        char out[CELLA_NAME_MAX + 1] = "untouched";
        struct cella_error err = {0};
        assert_int_equal(sandbox_name_check(in, len, false, out, &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_INVALID_SANDBOX_NAME);
        assert_non_null(strstr(err.msg, msg_part));
        assert_string_equal(out, "untouched"); /* outputs written only on success */
}

static void test_names(void **state)
{
        char long_ok[64], long_bad[65];
        memset(long_ok, 'a', 63);
        long_ok[63] = '\0';
        memset(long_bad, 'a', 64);
        long_bad[64] = '\0';

        name_ok("demo", false, "demo");
        name_ok("a", false, "a");
        name_ok("my-box-2", false, "my-box-2");
        name_ok(long_ok, false, long_ok);
        name_ok("My-Box", true, "my-box");
        name_bad("", 0, "empty");
        name_bad(long_bad, 64, "longer");
        name_bad("-abc", 4, "start or end");
        name_bad("abc-", 4, "start or end");
        name_bad("My-Box", 6, "normalizeId");
        name_bad("a_b", 3, "only a-z");
        name_bad("a.b", 3, "only a-z");
        name_bad("a/b", 3, "only a-z");
        name_bad("ab\0c", 4, "only a-z");
        name_bad("default", 7, "reserved");
        name_bad("pool-1", 6, "reserved");
}

static void path_ok(const char *in, const char *want)
{
        char out[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        int n = sandbox_path_normalize(in, strlen(in), out, sizeof(out), &err);
        assert_int_equal(n, (int)strlen(want));
        assert_string_equal(out, want);
}

static void test_image_names(void **state)
{
        static const char *const good[] = {
                "default", "a", "tools-1.2_x", "0abc",
                "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz0"};
        static const char *const bad[] = {
                "",
                ".hidden",
                "-x",
                "A",
                "a/b",
                "a b",
                "..",
                "é",
                "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwxyz01"};

        (void)state;
        for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
                if (!image_name_is_valid(good[i]))
                        fail_msg("'%s' refused", good[i]);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (image_name_is_valid(bad[i]))
                        fail_msg("'%s' accepted", bad[i]);
}

static void test_slot_ids(void **state)
{
        char id[16];
        unsigned slot = 99;

        (void)state;
        assert_int_equal(slot_id_format(0, id, sizeof(id)), 0);
        assert_string_equal(id, "s0");
        assert_int_equal(slot_id_format(4095, id, sizeof(id)), 0);
        assert_string_equal(id, "s4095");
        assert_int_equal(slot_id_format(4095, id, 5), -ENAMETOOLONG);
        assert_int_equal(slot_id_parse("s0", 2, 4096, &slot), 0);
        assert_int_equal(slot, 0);
        assert_int_equal(slot_id_parse("s4095", 5, 4096, &slot), 0);
        assert_int_equal(slot, 4095);
        assert_int_equal(slot_id_parse("s17x", 3, 4096, &slot), 0); /* len bounds it */
        assert_int_equal(slot, 17);
        slot = 99;
        assert_int_equal(slot_id_parse("s4096", 5, 4096, &slot), -ERANGE);
        assert_int_equal(slot_id_parse("s99999999999", 12, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("s", 1, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("s01", 3, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("s00", 3, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("S1", 2, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("s-1", 3, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("s1 ", 3, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse("pool-1", 6, 4096, &slot), -EINVAL);
        assert_int_equal(slot_id_parse(".m-1", 4, 4096, &slot), -EINVAL);
        assert_int_equal(slot, 99); /* written only on success */
}

static void test_paths(void **state)
{
        char out[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        static char big[CELLA_PATH_MAX + 10];

        path_ok("/", "/");
        path_ok("file.txt", "/workspace/file.txt");
        path_ok("./a/./b/", "/workspace/a/b");
        path_ok("/etc//passwd", "/etc/passwd");
        path_ok("/a/b/../c", "/a/c");
        path_ok("../../../../etc/shadow", "/etc/shadow");
        path_ok("/..", "/");
        path_ok("..", "/");
        path_ok("a/..", "/workspace");

        assert_int_equal(sandbox_path_normalize("", 0, out, sizeof(out), &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        memset(&err, 0, sizeof(err));
        assert_int_equal(sandbox_path_normalize("/a\0b", 4, out, sizeof(out), &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        memset(&err, 0, sizeof(err));
        memset(big, 'x', sizeof(big) - 1);
        assert_int_equal(sandbox_path_normalize(big, strlen(big), out, sizeof(out), &err),
                         -ENAMETOOLONG);
        assert_int_equal(err.code, CELLA_E_NAME_TOO_LONG);
        /* Too small an output buffer is an error, never an overflow. */
        memset(&err, 0, sizeof(err));
        assert_int_equal(sandbox_path_normalize("/abcdef", 7, out, 4, &err), -ENAMETOOLONG);
}

/* A query string's path: UTF-8 text, or raw bytes in base64 (pathEncoding=base64). */
static void test_path_decode(void **state)
{
        static const struct {
                const char *in;
                bool base64;
                const char *want; /* NULL: VALIDATION_FAILED */
        } cases[] = {
                {"a.txt", false, "/workspace/a.txt"},
                {"/workspace/\xc3\xbc", false, "/workspace/\xc3\xbc"},
                {"bad\xff", false, NULL},
                {"bad\xe6\x97", false, NULL},    /* cut inside a character */
                {"/a\xc0\xaf\x62", false, NULL}, /* overlong '/' */
                {"L3dvcmtzcGFjZS9pbnb/bmFtZQ==", true, "/workspace/inv\xffname"},
                {"L3dvcmtzcGFjZS9pbnb_bmFtZQ", true, "/workspace/inv\xffname"},
                {"L3dvcmtzcGFjZS9pbnb-bmFtZQ", true, "/workspace/inv\xfename"},
                {"L3dvcmtzcGFjZS9pbnb bmFtZQ", true, "/workspace/inv\xfename"},
                {"YS50eHQ=", true, "/workspace/a.txt"},
                {"Ly4uLy4uL2V0Yy9wYXNzd2Q=", true, "/etc/passwd"},
                {"L2EAYg==", true, NULL}, /* "/a\0b" */
                {"L3d*cmtz", true, NULL},
                {"L3=vcmtz", true, NULL},
                {"L", true, NULL},
                {"", true, NULL},
                {"====", true, NULL},
        };
        char out[CELLA_PATH_MAX + 1];

        (void)state;
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                struct cella_error err = {0};
                int n = sandbox_path_decode(cases[i].in, strlen(cases[i].in), cases[i].base64, out,
                                            sizeof(out), &err);

                if (cases[i].want) {
                        if (n < 0)
                                fail_msg("case %zu: %s", i, err.msg);
                        assert_string_equal(out, cases[i].want);
                } else {
                        assert_int_equal(n, -EINVAL);
                        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                }
        }
}

/* A path in JSON: text when UTF-8, else for display with its bytes in key + "Base64". */
static void test_json_path(void **state)
{
        json_t *j = json_set_path(json_object(), "path", "/workspace/\xc3\xbc");

        (void)state;
        assert_string_equal(json_string_value(json_object_get(j, "path")), "/workspace/\xc3\xbc");
        assert_null(json_object_get(j, "pathBase64"));
        j = json_set_path(j, "to", "/inv\xffname");
        assert_string_equal(json_string_value(json_object_get(j, "to")), "/inv\xef\xbf\xbdname");
        assert_string_equal(json_string_value(json_object_get(j, "toBase64")), "L2ludv9uYW1l");
        json_decref(j);
        assert_null(json_set_path(NULL, "path", "/x"));
}

static void test_base64(void **state)
{
        static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
        static const char *enc[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
        for (size_t i = 0; i < 7; i++) {
                struct buf b = BUF_INIT, d = BUF_INIT;
                assert_int_equal(base64_encode(&b, plain[i], strlen(plain[i])), 0);
                assert_string_equal(b.data, enc[i]);
                assert_int_equal(base64_decode(&d, b.data, b.len), 0);
                assert_int_equal(d.len, strlen(plain[i]));
                assert_memory_equal(d.data, plain[i], d.len);
                buf_free(&b);
                buf_free(&d);
        }
        uint8_t all[256];
        for (int i = 0; i < 256; i++)
                all[i] = (uint8_t)i;
        struct buf b = BUF_INIT, d = BUF_INIT;
        assert_int_equal(base64_encode(&b, all, sizeof(all)), 0);
        assert_int_equal(base64_decode(&d, b.data, b.len), 0);
        assert_int_equal(d.len, 256);
        assert_memory_equal(d.data, all, 256);
        buf_free(&d);
        assert_int_equal(base64_decode(&d, "Zm9", 3), -EINVAL);
        assert_int_equal(base64_decode(&d, "Zm9!", 4), -EINVAL);
        assert_int_equal(base64_decode(&d, "Z===", 4), -EINVAL);
        assert_int_equal(base64_decode(&d, "Zm 9", 4), -EINVAL);
        buf_free(&b);
        buf_free(&d);
}

static void test_buf(void **state)
{
        struct buf b = BUF_INIT;
        assert_int_equal(buf_append(&b, "ab\0c", 4), 0);
        assert_int_equal(b.len, 4);
        assert_int_equal(b.data[4], '\0');
        assert_int_equal(buf_printf(&b, "%d-%s", 42, "x"), 0);
        assert_memory_equal(b.data, "ab\0c42-x", 8);
        buf_consume(&b, 2);
        assert_memory_equal(b.data, "\0c42-x", 6);
        buf_consume(&b, 100);
        assert_int_equal(b.len, 0);
        char *s = buf_steal(&b);
        assert_string_equal(s, "");
        free(s);
        assert_null(b.data);
        buf_free(&b);
}

static void test_errors(void **state)
{
        struct cella_error err = {0};
        assert_string_equal(cella_code_name(CELLA_E_FILE_NOT_FOUND), "FILE_NOT_FOUND");
        assert_int_equal(cella_code_status(CELLA_E_FILE_NOT_FOUND), 404);
        assert_int_equal(cella_code_status(CELLA_E_SESSION_TERMINATED), 410);
        assert_int_equal(cella_code_status(CELLA_E_VALIDATION_FAILED), 400);
        assert_int_equal(cella_code_status(CELLA_E_HEADERS_TOO_LARGE), 431);
        assert_int_equal(cella_code_from_name("PORT_ALREADY_EXPOSED"),
                         CELLA_E_PORT_ALREADY_EXPOSED);
        assert_int_equal(cella_code_from_name("NOPE"), -1);
        assert_string_equal(cella_code_name(-5), "INTERNAL_ERROR");
        assert_int_equal(cella_code_status(9999), 500);
        assert_int_equal(cella_code_from_errno(-ENOENT), CELLA_E_FILE_NOT_FOUND);
        assert_int_equal(cella_code_from_errno(EISDIR), CELLA_E_IS_DIRECTORY);
        assert_int_equal(cella_code_from_errno(ENOSPC), CELLA_E_NO_SPACE);
        /* The first error wins: the deepest function writes it once. */
        cella_error_errno(&err, ENOENT, "open %s", "/x");
        cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "later");
        assert_int_equal(err.code, CELLA_E_FILE_NOT_FOUND);
        assert_string_equal(err.msg, "open /x: No such file or directory");
        /* A message is JSON text: bytes that are not UTF-8 (a path the sandbox chose) are
         * replaced, valid characters kept. */
        memset(&err, 0, sizeof(err));
        cella_error_set(&err, CELLA_E_FILE_NOT_FOUND, "open '%s'", "/inv\xffn\xc3\xbc\xe6");
        assert_string_equal(err.msg, "open '/inv?n\xc3\xbc?'");
}

static void test_log_levels(void **state)
{
        enum log_level l = LOG_LEVEL_ERROR;
        assert_int_equal(log_level_from_name("debug", &l), 0);
        assert_int_equal(l, LOG_LEVEL_DEBUG);
        assert_int_equal(log_level_from_name("warn", &l), 0);
        assert_int_equal(l, LOG_LEVEL_WARN);
        assert_int_equal(log_level_from_name("WARN", &l), -1);
        assert_int_equal(log_level_from_name("", &l), -1);
        assert_int_equal(l, LOG_LEVEL_WARN); /* untouched on failure */
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_names),       cmocka_unit_test(test_image_names),
                cmocka_unit_test(test_slot_ids),    cmocka_unit_test(test_paths),
                cmocka_unit_test(test_path_decode), cmocka_unit_test(test_json_path),
                cmocka_unit_test(test_base64),      cmocka_unit_test(test_buf),
                cmocka_unit_test(test_errors),      cmocka_unit_test(test_log_levels),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
