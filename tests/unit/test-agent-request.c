/* agent_request_decode: valid and invalid frames (src/agent/request.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/request.h"
#include "agent/session.h"
#include "common/limits.h"
#include "common/proto.h"

static struct frame mk(uint8_t type, uint32_t stream, const char *payload)
{
        struct frame f = {.type = type, .stream = stream};

        f.payload = (const uint8_t *)payload;
        f.len = payload ? (uint32_t)strlen(payload) : 0;
        return f;
}

/* Decode and return the result; the request is released, err is reported in *ret_err. */
static int decode(uint8_t type, uint32_t stream, const char *payload, struct agent_request *req,
                  struct cella_error *err)
{
        struct frame f = mk(type, stream, payload);

        memset(err, 0, sizeof(*err));
        return agent_request_decode(&f, req, err);
}

static void expect_invalid(uint8_t type, const char *payload)
{
        struct agent_request req;
        struct cella_error err;
        int r = decode(type, 7, payload, &req, &err);

        if (r != -EINVAL)
                fail_msg("expected -EINVAL for %s, got %d", payload, r);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        assert_true(err.msg[0] != '\0');
        agent_request_done(&req);
}

static void expect_proto(uint8_t type, uint32_t stream, const char *payload)
{
        struct agent_request req;
        struct cella_error err;

        assert_int_equal(decode(type, stream, payload, &req, &err), -EPROTO);
        agent_request_done(&req);
}

static void test_exec_valid(void **state)
{
        struct agent_request req;
        struct cella_error err;

        (void)state;
        assert_int_equal(decode(FRAME_EXEC, 5,
                                "{\"command\":\"echo hi\",\"cwd\":\"/tmp/../work//x/\","
                                "\"env\":{\"A\":\"1\",\"_b2\":\"x=y\"},\"timeoutMs\":1500}",
                                &req, &err),
                         0);
        assert_int_equal(req.type, FRAME_EXEC);
        assert_int_equal(req.stream, 5);
        assert_string_equal(req.command, "echo hi");
        assert_string_equal(req.cwd, "/work/x");
        assert_int_equal(req.n_env, 2);
        assert_true((strcmp(req.env[0], "A=1") == 0 && strcmp(req.env[1], "_b2=x=y") == 0) ||
                    (strcmp(req.env[1], "A=1") == 0 && strcmp(req.env[0], "_b2=x=y") == 0));
        assert_int_equal(req.timeout_ms, 1500);
        agent_request_done(&req);

        /* defaults */
        assert_int_equal(decode(FRAME_EXEC, 5, "{\"command\":\"true\"}", &req, &err), 0);
        assert_string_equal(req.cwd, "/workspace");
        assert_int_equal(req.n_env, 0);
        assert_int_equal(req.timeout_ms, 0);
        agent_request_done(&req);
        agent_request_done(&req); /* idempotent */
}

static void test_exec_invalid(void **state)
{
        (void)state;
        expect_invalid(FRAME_EXEC, "{\"command\":");
        expect_invalid(FRAME_EXEC, "\"echo\"");
        expect_invalid(FRAME_EXEC, "{}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"\"}");
        expect_invalid(FRAME_EXEC, "{\"command\":42}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"a\\u0000b\"}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"cwd\":\"relative\"}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"cwd\":\"\"}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"cwd\":7}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"env\":[]}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"env\":{\"A\":1}}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"env\":{\"1A\":\"v\"}}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"env\":{\"A=B\":\"v\"}}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"env\":{\"\":\"v\"}}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"env\":{\"A\":\"v\\u0000\"}}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"timeoutMs\":-1}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"timeoutMs\":1.5}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"timeoutMs\":\"1\"}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"timeoutMs\":999999999999999}");
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"command\":\"y\"}");
}

static void test_exec_limits(void **state)
{
        static char big[CELLA_EXEC_MAX_COMMAND + 64];
        struct agent_request req;
        struct cella_error err;
        size_t n;

        (void)state;
        /* a command of exactly the limit is accepted, one byte more is not */
        n = (size_t)snprintf(big, sizeof(big), "{\"command\":\"");
        memset(big + n, 'x', CELLA_EXEC_MAX_COMMAND);
        snprintf(big + n + CELLA_EXEC_MAX_COMMAND, sizeof(big) - n - CELLA_EXEC_MAX_COMMAND, "\"}");
        assert_int_equal(decode(FRAME_EXEC, 1, big, &req, &err), 0);
        assert_int_equal(strlen(req.command), CELLA_EXEC_MAX_COMMAND);
        agent_request_done(&req);
        memset(big + n, 'x', CELLA_EXEC_MAX_COMMAND + 1);
        snprintf(big + n + CELLA_EXEC_MAX_COMMAND + 1, sizeof(big) - n - CELLA_EXEC_MAX_COMMAND - 1,
                 "\"}");
        expect_invalid(FRAME_EXEC, big);
}

static void test_env_count_limit(void **state)
{
        static char buf[(CELLA_EXEC_MAX_ENV + 2) * 16 + 64];
        struct agent_request req;
        struct cella_error err;
        size_t off;

        (void)state;
        off = (size_t)snprintf(buf, sizeof(buf), "{\"command\":\"x\",\"env\":{");
        for (int i = 0; i < CELLA_EXEC_MAX_ENV; i++)
                off += (size_t)snprintf(buf + off, sizeof(buf) - off, "%s\"V%d\":\"\"",
                                        i ? "," : "", i);
        snprintf(buf + off, sizeof(buf) - off, "}}");
        assert_int_equal(decode(FRAME_EXEC, 1, buf, &req, &err), 0);
        assert_int_equal(req.n_env, CELLA_EXEC_MAX_ENV);
        agent_request_done(&req);
        snprintf(buf + off, sizeof(buf) - off, ",\"EXTRA\":\"\"}}");
        expect_invalid(FRAME_EXEC, buf);
}

static void test_files(void **state)
{
        struct agent_request req;
        struct cella_error err;

        (void)state;
        assert_int_equal(decode(FRAME_FILE_READ, 2, "{\"path\":\"/a/./b\"}", &req, &err), 0);
        assert_string_equal(req.path, "/a/b");
        agent_request_done(&req);
        expect_invalid(FRAME_FILE_READ, "{\"path\":\"a.txt\"}");
        expect_invalid(FRAME_FILE_READ, "{\"path\":\"/a\\u0000b\"}");
        expect_invalid(FRAME_FILE_READ, "{}");

        assert_int_equal(decode(FRAME_FILE_WRITE, 3, "{\"path\":\"/b\",\"mode\":420}", &req, &err),
                         0);
        assert_int_equal(req.mode, 0644);
        agent_request_done(&req);
        assert_int_equal(decode(FRAME_FILE_WRITE, 3, "{\"path\":\"/b\"}", &req, &err), 0);
        assert_int_equal(req.mode, -1);
        agent_request_done(&req);
        expect_invalid(FRAME_FILE_WRITE, "{\"path\":\"/b\",\"mode\":-1}");
        expect_invalid(FRAME_FILE_WRITE, "{\"path\":\"/b\",\"mode\":4096}");
        expect_invalid(FRAME_FILE_WRITE, "{\"path\":\"/b\",\"mode\":\"644\"}");

        assert_int_equal(decode(FRAME_FILE_OP, 4,
                                "{\"op\":\"list\",\"path\":\"/\",\"recursive\":true,"
                                "\"includeHidden\":true}",
                                &req, &err),
                         0);
        assert_int_equal(req.op, AGENT_OP_LIST);
        assert_true(req.recursive && req.include_hidden);
        agent_request_done(&req);
        assert_int_equal(decode(FRAME_FILE_OP, 4,
                                "{\"op\":\"move\",\"from\":\"/a\",\"to\":\"/b/\"}", &req, &err),
                         0);
        assert_int_equal(req.op, AGENT_OP_MOVE);
        assert_string_equal(req.path, "/a");
        assert_string_equal(req.to, "/b");
        agent_request_done(&req);
        assert_int_equal(
                decode(FRAME_FILE_OP, 4, "{\"op\":\"delete\",\"path\":\"/x\"}", &req, &err), 0);
        assert_int_equal(req.op, AGENT_OP_DELETE);
        assert_false(req.recursive);
        agent_request_done(&req);
        expect_invalid(FRAME_FILE_OP, "{\"op\":\"chmod\",\"path\":\"/\"}");
        expect_invalid(FRAME_FILE_OP, "{\"op\":1,\"path\":\"/\"}");
        expect_invalid(FRAME_FILE_OP, "{\"path\":\"/\"}");
        expect_invalid(FRAME_FILE_OP, "{\"op\":\"move\",\"from\":\"/a\"}");
        expect_invalid(FRAME_FILE_OP, "{\"op\":\"mkdir\",\"path\":\"/a\",\"recursive\":1}");
        expect_invalid(FRAME_FILE_OP, "{\"op\":\"stat\",\"path\":\"x\"}");
}

static void test_long_path(void **state)
{
        static char buf[CELLA_PATH_MAX + 64];
        struct agent_request req;
        struct cella_error err;
        size_t n;

        (void)state;
        n = (size_t)snprintf(buf, sizeof(buf), "{\"path\":\"/");
        memset(buf + n, 'a', CELLA_PATH_MAX + 1);
        snprintf(buf + n + CELLA_PATH_MAX + 1, sizeof(buf) - n - CELLA_PATH_MAX - 1, "\"}");
        assert_int_equal(decode(FRAME_FILE_READ, 1, buf, &req, &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_NAME_TOO_LONG);
        agent_request_done(&req);
}

static void test_control(void **state)
{
        uint8_t w[4];
        struct frame f = {.type = FRAME_WINDOW, .stream = 9, .len = 4, .payload = w};
        struct agent_request req;
        struct cella_error err = {0};

        (void)state;
        frame_window_pack(w, 123456);
        assert_int_equal(agent_request_decode(&f, &req, &err), 0);
        assert_int_equal(req.credit, 123456);
        agent_request_done(&req);

        f = mk(FRAME_DATA, 9, "bytes\0");
        assert_int_equal(agent_request_decode(&f, &req, &err), 0);
        assert_int_equal(req.len, 5);
        assert_ptr_equal(req.data, f.payload);
        agent_request_done(&req);

        f = mk(FRAME_PING, 0, "p");
        assert_int_equal(agent_request_decode(&f, &req, &err), 0);
        agent_request_done(&req);
        f = mk(FRAME_END, 9, NULL);
        assert_int_equal(agent_request_decode(&f, &req, &err), 0);
        agent_request_done(&req);
        f = mk(FRAME_CANCEL, 9, NULL);
        assert_int_equal(agent_request_decode(&f, &req, &err), 0);
        agent_request_done(&req);

        /* protocol errors: the connection is closed */
        expect_proto(FRAME_WINDOW, 9, "abc");
        expect_proto(FRAME_WINDOW, 0, "abcd");
        expect_proto(FRAME_EXEC, 0, "{\"command\":\"x\"}");
        expect_proto(FRAME_FILE_OP, 0, "{}");
        expect_proto(FRAME_DATA, 0, "x");
        expect_proto(FRAME_PING, 3, "x");
        expect_proto(FRAME_CANCEL, 3, "x");
        expect_proto(FRAME_END, 0, NULL);
        expect_proto(FRAME_HELLO, 0, "{}");
        expect_proto(FRAME_STDOUT, 1, "x");
        expect_proto(FRAME_RESULT, 1, "{}");
        expect_proto(FRAME_EXIT, 1, "{}");
        expect_proto(FRAME_FILE_INFO, 1, "{}");
        assert_true(agent_request_opens_stream(FRAME_EXEC));
        assert_false(agent_request_opens_stream(FRAME_DATA));
}

/* session_request_decode on the body of a SESSION frame; EXEC's session fields. */
static int session_decode(const char *payload, struct session_request *sr, struct cella_error *err)
{
        struct agent_request req;
        int r = decode(FRAME_SESSION, 9, payload, &req, err);

        if (r == 0)
                r = session_request_decode(req.body, sr, err);
        else
                memset(sr, 0, sizeof(*sr));
        agent_request_done(&req);
        return r;
}

static void test_watch(void **state)
{
        struct agent_request req;
        struct cella_error err;
        char many[2048];
        size_t n;

        (void)state;
        assert_int_equal(decode(FRAME_WATCH, 3, "{\"path\":\"/workspace//a/\"}", &req, &err), 0);
        assert_string_equal(req.path, "/workspace/a");
        assert_true(req.recursive);
        assert_int_equal(req.n_include, 0);
        assert_false(req.exclude_given);
        agent_request_done(&req);

        assert_int_equal(decode(FRAME_WATCH, 3,
                                "{\"path\":\"/w\",\"recursive\":false,\"include\":[\"*.c\","
                                "\"src/*.h\"],\"exclude\":[]}",
                                &req, &err),
                         0);
        assert_false(req.recursive);
        assert_int_equal(req.n_include, 2);
        assert_string_equal(req.include[1], "src/*.h");
        assert_true(req.exclude_given);
        assert_int_equal(req.n_exclude, 0);
        agent_request_done(&req);

        expect_invalid(FRAME_WATCH, "{\"path\":\"rel\"}");
        expect_invalid(FRAME_WATCH, "{}");
        expect_invalid(FRAME_WATCH, "{\"path\":\"/\",\"recursive\":1}");
        expect_invalid(FRAME_WATCH, "{\"path\":\"/\",\"include\":\"*.c\"}");
        expect_invalid(FRAME_WATCH, "{\"path\":\"/\",\"include\":[\"\"]}");
        expect_invalid(FRAME_WATCH, "{\"path\":\"/\",\"exclude\":[1]}");
        expect_invalid(FRAME_WATCH, "{\"path\":\"/\",\"include\":[\"a\\u0000b\"]}");
        /* one pattern over the limit, split over include and exclude */
        n = (size_t)snprintf(many, sizeof(many), "{\"path\":\"/\",\"include\":[\"a\"");
        for (int i = 1; i < CELLA_WATCH_MAX_PATTERNS; i++)
                n += (size_t)snprintf(many + n, sizeof(many) - n, ",\"a\"");
        snprintf(many + n, sizeof(many) - n, "],\"exclude\":[\"b\"]}");
        expect_invalid(FRAME_WATCH, many);
        expect_proto(FRAME_WATCH, 0, "{\"path\":\"/\"}");
}

static void test_pty(void **state)
{
        struct agent_request req;
        struct cella_error err;
        char big[64];

        (void)state;
        assert_true(agent_request_opens_stream(FRAME_PTY));
        assert_int_equal(decode(FRAME_PTY, 5, "{\"cols\":80,\"rows\":24}", &req, &err), 0);
        assert_string_equal(req.session, "default");
        assert_int_equal(req.cols, 80);
        assert_int_equal(req.rows, 24);
        assert_int_equal(req.n_base_env, 0);
        agent_request_done(&req);

        assert_int_equal(decode(FRAME_PTY, 5,
                                "{\"sessionId\":\"work-1\",\"cols\":1,\"rows\":1000,"
                                "\"baseEnv\":{\"A\":\"b\"}}",
                                &req, &err),
                         0);
        assert_string_equal(req.session, "work-1");
        assert_int_equal(req.cols, 1);
        assert_int_equal(req.rows, CELLA_PTY_MAX_DIM);
        assert_int_equal(req.n_base_env, 1);
        assert_string_equal(req.base_env[0], "A=b");
        agent_request_done(&req);

        expect_invalid(FRAME_PTY, "{}");
        expect_invalid(FRAME_PTY, "{\"cols\":80}");
        expect_invalid(FRAME_PTY, "{\"cols\":0,\"rows\":24}");
        snprintf(big, sizeof(big), "{\"cols\":%d,\"rows\":24}", CELLA_PTY_MAX_DIM + 1);
        expect_invalid(FRAME_PTY, big);
        expect_invalid(FRAME_PTY, "{\"cols\":80.5,\"rows\":24}");
        expect_invalid(FRAME_PTY, "{\"cols\":\"80\",\"rows\":24}");
        expect_invalid(FRAME_PTY, "{\"cols\":80,\"rows\":24,\"sessionId\":\"a b\"}");
        expect_invalid(FRAME_PTY, "{\"cols\":80,\"rows\":24,\"sessionId\":\"..\"}");
        expect_invalid(FRAME_PTY, "{\"cols\":80,\"rows\":24,\"sessionId\":5}");
        expect_invalid(FRAME_PTY, "{\"cols\":80,\"rows\":24,\"baseEnv\":{\"1A\":\"x\"}}");
        expect_invalid(FRAME_PTY, "{\"cols\":80,\"rows\":24,\"cols\":81}");
        expect_invalid(FRAME_PTY, "[80,24]");
        expect_proto(FRAME_PTY, 0, "{\"cols\":80,\"rows\":24}");
}

static void test_session(void **state)
{
        struct session_request sr;
        struct agent_request req;
        struct cella_error err;

        (void)state;
        assert_int_equal(session_decode("{\"op\":\"create\",\"id\":\"s1\",\"cwd\":\"/a/./b\","
                                        "\"env\":{\"A\":\"1\"},\"baseEnv\":{\"B\":\"2\"},"
                                        "\"commandTimeoutMs\":7}",
                                        &sr, &err),
                         0);
        assert_int_equal(sr.op, SESSION_OP_CREATE);
        assert_string_equal(sr.ctx.id, "s1");
        assert_string_equal(sr.ctx.cwd, "/a/b");
        assert_int_equal(sr.ctx.n_env, 1);
        assert_string_equal(sr.ctx.env[0], "A=1");
        assert_string_equal(sr.ctx.base_env[0], "B=2");
        assert_int_equal(sr.timeout_ms, 7);
        session_request_done(&sr);

        assert_int_equal(
                session_decode("{\"op\":\"setenv\",\"env\":{\"A\":\"x\",\"B\":null}}", &sr, &err),
                0);
        assert_null(sr.ctx.id);
        assert_int_equal(sr.n_set, 1);
        assert_string_equal(sr.set[0], "A=x");
        assert_int_equal(sr.n_unset, 1);
        assert_string_equal(sr.unset[0], "B");
        session_request_done(&sr);

        assert_int_equal(session_decode("{\"op\":\"list\"}", &sr, &err), 0);
        session_request_done(&sr);

        static const char *const bad[] = {
                "{\"op\":\"delete\"}",
                "{\"op\":\"create\",\"id\":\"..\"}",
                "{\"op\":\"create\",\"id\":\"a b\"}",
                "{\"op\":\"create\",\"cwd\":\"rel\"}",
                "{\"op\":\"create\",\"commandTimeoutMs\":-1}",
                "{\"op\":\"setenv\",\"env\":{\"1A\":null}}",
                "{\"op\":\"setenv\",\"env\":{\"A\":5}}",
                "{\"op\":\"setenv\"}",
                "{\"op\":\"spawn\"}",
                "{\"op\":5}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (session_decode(bad[i], &sr, &err) != -EINVAL)
                        fail_msg("accepted %s", bad[i]);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                session_request_done(&sr);
        }
        /* EXEC with a session */
        assert_int_equal(
                decode(FRAME_EXEC, 3,
                       "{\"command\":\"x\",\"session\":\"default\",\"baseEnv\":{\"K\":\"v\"}}",
                       &req, &err),
                0);
        assert_string_equal(req.session, "default");
        assert_false(req.cwd_given);
        assert_string_equal(req.base_env[0], "K=v");
        agent_request_done(&req);
        expect_invalid(FRAME_EXEC, "{\"command\":\"x\",\"session\":\"a/b\"}");
        expect_proto(FRAME_SESSION, 0, "{\"op\":\"list\"}");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_valid),  cmocka_unit_test(test_exec_invalid),
                cmocka_unit_test(test_exec_limits), cmocka_unit_test(test_env_count_limit),
                cmocka_unit_test(test_files),       cmocka_unit_test(test_long_path),
                cmocka_unit_test(test_control),     cmocka_unit_test(test_session),
                cmocka_unit_test(test_watch),       cmocka_unit_test(test_pty),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
