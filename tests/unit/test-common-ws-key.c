/* WebSocket handshake keys (src/common/ws-key.h): the RFC 6455 example, malformed keys,
 * generated keys, and header token lists. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "common/ws-key.h"

static void test_accept(void **state)
{
        char out[WS_ACCEPT_LEN + 1];

        (void)state;
        /* RFC 6455 section 1.3 */
        assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ==", out), 0);
        assert_string_equal(out, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
        assert_int_equal(ws_accept_key(NULL, out), -EINVAL);
        assert_int_equal(ws_accept_key("", out), -EINVAL);
        /* not 16 bytes, not base64, wrong length */
        assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25j", out), -EINVAL);
        assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ=!", out), -EINVAL);
        assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZQ== ", out), -EINVAL);
        assert_int_equal(ws_accept_key("dGhlIHNhbXBsZSBub25jZXM=", out), -EINVAL);
}

static void test_new_key(void **state)
{
        char k1[25], k2[25], out[WS_ACCEPT_LEN + 1];

        (void)state;
        assert_int_equal(ws_new_key(k1), 0);
        assert_int_equal(ws_new_key(k2), 0);
        assert_int_equal(strlen(k1), 24);
        assert_string_not_equal(k1, k2);
        assert_int_equal(ws_accept_key(k1, out), 0);
}

static void test_tokens(void **state)
{
        (void)state;
        assert_true(ws_header_has_token("Upgrade", "upgrade"));
        assert_true(ws_header_has_token("keep-alive, Upgrade", "upgrade"));
        assert_true(ws_header_has_token(" keep-alive ,\tUPGRADE\t", "upgrade"));
        assert_false(ws_header_has_token("upgrade-insecure", "upgrade"));
        assert_false(ws_header_has_token("", "upgrade"));
        assert_false(ws_header_has_token(",,", "upgrade"));
        assert_true(ws_header_has_token("websocket", "websocket"));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_accept),
                cmocka_unit_test(test_new_key),
                cmocka_unit_test(test_tokens),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
