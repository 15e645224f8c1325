/* The preview proxy's pure parts: the Host parser ({port}-{id}-{token}.{domain}), token
 * generation and validation, the X-Forwarded-Host form of the target, and the header
 * rewriting of requests and responses. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "daemon/preview.h"

static void test_host_parse(void **state)
{
        struct preview_target t;

        (void)state;
        assert_int_equal(preview_host_parse("8080-box-abc123.localhost:7070", "localhost", &t), 1);
        assert_int_equal(t.port, 8080);
        assert_string_equal(t.id, "box");
        assert_string_equal(t.token, "abc123");
        /* ids hold '-': the port is up to the first, the token after the last */
        assert_int_equal(preview_host_parse("3001-my-app-2-t_k.localhost", "localhost", &t), 1);
        assert_int_equal(t.port, 3001);
        assert_string_equal(t.id, "my-app-2");
        assert_string_equal(t.token, "t_k");
        /* case-insensitive, trailing dot, other domain */
        assert_int_equal(
                preview_host_parse("8080-BOX-ABC.Preview.Example.COM.", "preview.example.com", &t),
                1);
        assert_string_equal(t.id, "box");
        assert_string_equal(t.token, "abc");
        /* not preview hosts: the API's */
        static const char *const api[] = {"localhost:7070",
                                          "127.0.0.1:7070",
                                          "[::1]:7070",
                                          "app.localhost",
                                          "8080-box-tok.example.com",
                                          "a.8080-box-tok.localhost",
                                          "x8080-box-tok.localhost",
                                          "8080.localhost",
                                          "",
                                          "8080-box-tok.localhost:x",
                                          "localhost",
                                          ".localhost",
                                          "8080-box-t.k.localhost"};
        for (size_t i = 0; i < sizeof(api) / sizeof(api[0]); i++)
                if (preview_host_parse(api[i], "localhost", &t) != 0)
                        fail_msg("%s taken as a preview host", api[i]);
        assert_int_equal(preview_host_parse(NULL, "localhost", &t), 0);
        /* preview-shaped but malformed */
        static const char *const bad[] = {
                "8080-box.localhost",       "0-box-tok.localhost",
                "65536-box-tok.localhost",  "08080-box-tok.localhost",
                "123456-box-tok.localhost", "8080--tok.localhost",
                "8080-box-.localhost",      "8080-box-tok!.localhost",
                "8080-b_x-tok.localhost",   "8080-box-12345678901234567.localhost",
                "80a-box-tok.localhost"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                if (preview_host_parse(bad[i], "localhost", &t) != -EINVAL)
                        fail_msg("%s not refused", bad[i]);
}

static void test_forwarded_host(void **state)
{
        struct preview_target t;
        char *host;

        (void)state;
        assert_int_equal(
                preview_forwarded_host_parse("8080-box-abc.localhost:7070", "localhost", &t, &host),
                1);
        assert_string_equal(host, "8080-box-abc.localhost:7070");
        assert_int_equal(t.port, 8080);
        assert_string_equal(t.id, "box");
        assert_string_equal(t.token, "abc");
        free(host);
        /* a list: the first host (the original client's), trimmed */
        assert_int_equal(
                preview_forwarded_host_parse(" \t3001-My-App-t_k.localhost \t, a.example, b",
                                             "localhost", &t, &host),
                1);
        assert_string_equal(host, "3001-My-App-t_k.localhost");
        assert_string_equal(t.id, "my-app");
        free(host);
        /* not preview hosts, or not the first of the list: an API request */
        static const char *const api[] = {"",
                                          " ",
                                          ",8080-box-abc.localhost",
                                          "proxy.example, 8080-box-abc.localhost",
                                          "localhost:7070",
                                          "8080-box-abc.example.com"};
        for (size_t i = 0; i < sizeof(api) / sizeof(api[0]); i++) {
                if (preview_forwarded_host_parse(api[i], "localhost", &t, &host) != 0)
                        fail_msg("'%s' taken as a preview host", api[i]);
                assert_null(host);
        }
        assert_int_equal(preview_forwarded_host_parse(NULL, "localhost", &t, &host), 0);
        assert_null(host);
        /* preview-shaped but malformed */
        assert_int_equal(preview_forwarded_host_parse("8080-box-wrong-Token!.localhost, x",
                                                      "localhost", &t, &host),
                         -EINVAL);
        assert_null(host);
        assert_int_equal(preview_forwarded_host_parse("0-box-t.localhost", "localhost", &t, &host),
                         -EINVAL);
        assert_null(host);
        assert_int_equal(
                preview_forwarded_host_parse("8080-box-t .localhost", "localhost", &t, &host),
                -EINVAL);
        assert_null(host);
}

static void test_tokens(void **state)
{
        char a[CELLA_PREVIEW_TOKEN_LEN + 1], b[CELLA_PREVIEW_TOKEN_LEN + 1];

        (void)state;
        assert_int_equal(preview_token_generate(a), 0);
        assert_int_equal(preview_token_generate(b), 0);
        assert_int_equal(strlen(a), CELLA_PREVIEW_TOKEN_LEN);
        assert_true(preview_token_valid(a));
        assert_string_not_equal(a, b);
        assert_true(preview_token_valid("a"));
        assert_true(preview_token_valid("abc_123"));
        assert_true(preview_token_valid("0123456789abcdef"));
        assert_false(preview_token_valid(""));
        assert_false(preview_token_valid("0123456789abcdefg"));
        assert_false(preview_token_valid("ABC"));
        assert_false(preview_token_valid("a-b"));
        assert_false(preview_token_valid("a.b"));
}

#define H(...) ((const char *const[]){__VA_ARGS__})

static void test_request_head(void **state)
{
        struct buf b = BUF_INIT;
        enum preview_body body;
        struct preview_headers h = {
                11,
                H("Host", "Connection", "X-Drop", "Keep-Alive", "X-Forwarded-For", "Content-Length",
                  "Cookie", "Proxy-Authorization", "Authorization", "X-Forwarded-Host",
                  "X-Cella-Cluster"),
                H("8080-box-t.localhost:7070", "keep-alive, X-Drop", "1", "timeout=5", "10.0.0.1",
                  "5", "a=1", "Basic x", "Bearer api-token", "evil.example", "v1; node=a"),
        };

        (void)state;
        assert_int_equal(
                preview_request_head(&b, "POST", "/a?b=%20", &h, "127.0.0.1", NULL, NULL, &body),
                0);
        assert_int_equal(body, PREVIEW_BODY_LENGTH);
        assert_string_equal(b.data, "POST /a?b=%20 HTTP/1.1\r\n"
                                    "Host: 8080-box-t.localhost:7070\r\n"
                                    "Content-Length: 5\r\n"
                                    "Cookie: a=1\r\n"
                                    "X-Forwarded-For: 10.0.0.1, 127.0.0.1\r\n"
                                    "X-Forwarded-Host: 8080-box-t.localhost:7070\r\n"
                                    "X-Forwarded-Proto: http\r\n\r\n");
        buf_reset(&b);
        /* chunked: Content-Length dropped whatever its place, chunked announced */
        struct preview_headers c = {
                3,
                H("Content-Length", "Transfer-Encoding", "Host"),
                H("9", "chunked", "h"),
        };
        assert_int_equal(preview_request_head(&b, "PUT", "/", &c, NULL, NULL, NULL, &body), 0);
        assert_int_equal(body, PREVIEW_BODY_CHUNKED);
        assert_string_equal(b.data, "PUT / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n"
                                    "X-Forwarded-Host: h\r\nX-Forwarded-Proto: http\r\n\r\n");
        buf_reset(&b);
        /* an upgrade is passed on as one */
        struct preview_headers u = {
                4,
                H("Host", "Upgrade", "Connection", "Sec-WebSocket-Key"),
                H("h", "websocket", "Upgrade", "k=="),
        };
        assert_int_equal(preview_request_head(&b, "GET", "/ws", &u, NULL, "websocket", NULL, &body),
                         0);
        assert_int_equal(body, PREVIEW_BODY_NONE);
        assert_non_null(strstr(b.data, "Sec-WebSocket-Key: k==\r\n"));
        assert_non_null(strstr(b.data, "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n"));
        assert_null(strstr(b.data, "Connection: close"));
        buf_reset(&b);
        /* the target named by X-Forwarded-Host: its host replaces the client's (cellad's)
         * Host, X-Forwarded-Host is it, once; Authorization never passes, on an upgrade
         * neither */
        struct preview_headers f = {
                7,
                H("host", "X-Forwarded-Host", "authorization", "Cookie", "X-Forwarded-For",
                  "Upgrade", "Connection"),
                H("127.0.0.1:7070", "8080-box-t.localhost:7070, proxy.example", "Bearer api-token",
                  "a=1; b=2", "192.0.2.1", "websocket", "Upgrade"),
        };
        assert_int_equal(preview_request_head(&b, "GET", "/p?q", &f, "127.0.0.1", "websocket",
                                              "8080-box-t.localhost:7070", &body),
                         0);
        assert_string_equal(b.data, "GET /p?q HTTP/1.1\r\n"
                                    "Host: 8080-box-t.localhost:7070\r\n"
                                    "Cookie: a=1; b=2\r\n"
                                    "X-Forwarded-For: 192.0.2.1, 127.0.0.1\r\n"
                                    "X-Forwarded-Host: 8080-box-t.localhost:7070\r\n"
                                    "X-Forwarded-Proto: http\r\n"
                                    "Connection: Upgrade\r\nUpgrade: websocket\r\n\r\n");
        buf_reset(&b);
        /* the same without a Host of the client's (HTTP/1.0) */
        struct preview_headers o = {1, H("Accept"), H("*/*")};
        assert_int_equal(
                preview_request_head(&b, "GET", "/", &o, NULL, NULL, "9-b-t.localhost", &body), 0);
        assert_string_equal(b.data, "GET / HTTP/1.1\r\nHost: 9-b-t.localhost\r\nAccept: */*\r\n"
                                    "X-Forwarded-Host: 9-b-t.localhost\r\n"
                                    "X-Forwarded-Proto: http\r\n\r\n");
        buf_reset(&b);
        /* a CR or LF anywhere would split the head */
        struct preview_headers x = {1, H("X-A"), H("a\r\nX-B: b")};
        assert_int_equal(preview_request_head(&b, "GET", "/", &o, NULL, NULL, "h\r\nX: y", &body),
                         -EINVAL);
        buf_reset(&b);
        assert_int_equal(preview_request_head(&b, "GET", "/", &x, NULL, NULL, NULL, &body),
                         -EINVAL);
        assert_int_equal(preview_request_head(&b, "GET", "/ x", &h, NULL, NULL, NULL, &body),
                         -EINVAL);
        buf_free(&b);
}

static void test_response_headers(void **state)
{
        struct buf b = BUF_INIT;
        struct preview_headers h = {
                8,
                H("Content-Type", "Set-Cookie", "Set-Cookie", "Location", "Transfer-Encoding",
                  "Content-Length", "Connection", "X-Gone"),
                H("text/html", "a=1; Path=/", "b=2; HttpOnly", "/next", "chunked", "10",
                  "close, X-Gone", "1"),
        };

        (void)state;
        assert_int_equal(preview_response_headers(&b, &h, false), 0);
        assert_string_equal(b.data, "Content-Type: text/html\r\nSet-Cookie: a=1; Path=/\r\n"
                                    "Set-Cookie: b=2; HttpOnly\r\nLocation: /next\r\n");
        buf_reset(&b);
        struct preview_headers u = {
                3,
                H("Upgrade", "Connection", "Sec-WebSocket-Accept"),
                H("websocket", "Upgrade", "x="),
        };
        assert_int_equal(preview_response_headers(&b, &u, true), 0);
        assert_string_equal(b.data, "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                                    "Sec-WebSocket-Accept: x=\r\n");
        buf_free(&b);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_host_parse),       cmocka_unit_test(test_forwarded_host),
                cmocka_unit_test(test_tokens),           cmocka_unit_test(test_request_head),
                cmocka_unit_test(test_response_headers),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
