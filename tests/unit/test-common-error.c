/* The error record (common/error.h): setters return the code's -errno, the first error
 * set wins, context is prefixed in place and cut to fit, messages stay UTF-8. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "common/utf8.h"

static void test_set_returns_errno(void **state)
{
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(cella_error_set(&err, CELLA_E_FILE_NOT_FOUND, "no %s", "x"), -ENOENT);
        assert_int_equal(err.code, CELLA_E_FILE_NOT_FOUND);
        assert_string_equal(err.msg, "no x");
        /* The first error wins; a second setter returns the first one's errno. */
        assert_int_equal(cella_error_set(&err, CELLA_E_VALIDATION_FAILED, "later"), -ENOENT);
        assert_string_equal(err.msg, "no x");
        /* No record: the value still says what failed. */
        assert_int_equal(cella_error_set(NULL, CELLA_E_VALIDATION_FAILED, "x"), -EINVAL);
        assert_int_equal(cella_error_set(NULL, CELLA_E_INTERNAL_ERROR, "x"), -EIO);
}

static void test_errno_returns_errnum(void **state)
{
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(cella_error_errno(&err, EBUSY, "umount %s", "/a"), -EBUSY);
        assert_int_equal(err.code, CELLA_E_INTERNAL_ERROR);
        assert_string_equal(err.msg, "umount /a: Device or resource busy");
        memset(&err, 0, sizeof(err));
        assert_int_equal(cella_error_errno(&err, -EACCES, "open"), -EACCES);
        assert_int_equal(err.code, CELLA_E_PERMISSION_DENIED);
        memset(&err, 0, sizeof(err));
        assert_int_equal(cella_error_errno(&err, 0, "odd"), -EIO);
        assert_int_equal(cella_error_errno(NULL, ENOSPC, "write"), -ENOSPC);
}

static void test_every_code_has_an_errno(void **state)
{
        (void)state;
        for (int c = 0; c < _CELLA_E_MAX; c++) {
                int e = cella_code_errno(c);
                if (e >= 0)
                        fail_msg("%s has no errno", cella_code_name(c));
                /* A file operation's errno maps back to the code it came from. */
                if (c != CELLA_E_OK && cella_code_from_errno(e) != CELLA_E_INTERNAL_ERROR &&
                    cella_code_errno(cella_code_from_errno(e)) != e)
                        fail_msg("%s: errno %d does not round-trip", cella_code_name(c), e);
        }
        assert_int_equal(cella_code_errno(CELLA_E_VALIDATION_FAILED), -EINVAL);
        assert_int_equal(cella_code_errno(CELLA_E_NAME_TOO_LONG), -ENAMETOOLONG);
        assert_int_equal(cella_code_errno(-3), -EIO);
        assert_int_equal(cella_code_errno(_CELLA_E_MAX), -EIO);
}

static void test_prefix(void **state)
{
        struct cella_error err = {0};

        (void)state;
        cella_error_errno(&err, EPERM, "mount %s", "overlay");
        assert_int_equal(cella_error_prefix(&err, "create sandbox '%s'", "abc"), -EACCES);
        assert_string_equal(err.msg,
                            "create sandbox 'abc': mount overlay: Operation not permitted");
        assert_int_equal(err.code, CELLA_E_PERMISSION_DENIED);
        /* Twice: contexts stack outermost first. */
        cella_error_prefix(&err, "pool");
        assert_string_equal(err.msg,
                            "pool: create sandbox 'abc': mount overlay: Operation not permitted");
        /* Nothing set: nothing to add to. */
        memset(&err, 0, sizeof(err));
        assert_int_equal(cella_error_prefix(&err, "ctx"), -EIO);
        assert_string_equal(err.msg, "");
        assert_int_equal(cella_error_prefix(NULL, "ctx"), -EIO);
}

static void test_prefix_truncates(void **state)
{
        struct cella_error err = {0};
        char big[400];

        (void)state;
        /* A full message loses its end, never the prefix, and stays terminated. */
        memset(big, 'm', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        cella_error_set(&err, CELLA_E_VALIDATION_FAILED, "%s", big);
        assert_int_equal(strlen(err.msg), sizeof(err.msg) - 1);
        cella_error_prefix(&err, "ctx");
        assert_int_equal(strlen(err.msg), sizeof(err.msg) - 1);
        assert_memory_equal(err.msg, "ctx: mmm", 8);
        /* A prefix longer than the buffer keeps its head and the separator. */
        memset(big, 'p', sizeof(big) - 1);
        cella_error_prefix(&err, "%s", big);
        assert_int_equal(strlen(err.msg), sizeof(err.msg) - 1);
        assert_int_equal(err.msg[sizeof(err.msg) - 3], ':');
        assert_int_equal(err.msg[sizeof(err.msg) - 2], ' ');
        /* A cut inside a multi-byte character (255 bytes of euros, 4 more in front) leaves
         * valid UTF-8. */
        memset(&err, 0, sizeof(err));
        char euros[256];
        for (int i = 0; i < 85; i++)
                memcpy(euros + 3 * i, "\xe2\x82\xac", 3);
        euros[255] = '\0';
        cella_error_set(&err, CELLA_E_VALIDATION_FAILED, "%s", euros);
        cella_error_prefix(&err, "xy");
        assert_true(utf8_is_valid(err.msg, strlen(err.msg)));
        assert_memory_equal(err.msg, "xy: \xe2\x82\xac", 7);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_set_returns_errno),
                cmocka_unit_test(test_errno_returns_errnum),
                cmocka_unit_test(test_every_code_has_an_errno),
                cmocka_unit_test(test_prefix),
                cmocka_unit_test(test_prefix_truncates),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
