/* common/wire.c: each agent request body decodes to what was encoded, and the decoders
 * bound what they accept. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "common/limits.h"
#include "common/proto.h"
#include "common/wire.h"

static json_t *parse(const char *s)
{
        json_t *j = json_loads(s, 0, NULL);

        assert_non_null(j);
        return j;
}

static void test_exec_roundtrip(void **state)
{
        json_t *env = parse("{\"A\":\"1\"}"), *base = parse("{\"B\":\"2\"}");
        struct wire_exec in = {.command = "echo hi",
                               .cwd = "/tmp",
                               .env = env,
                               .base_env = base,
                               .session = "s1",
                               .timeout_ms = 5000};
        struct cella_error err = {0};
        struct wire_exec out;
        json_t *j;

        (void)state;
        j = wire_exec_encode(&in);
        assert_non_null(j);
        assert_int_equal(wire_exec_decode(j, &out, &err), 0);
        assert_string_equal(out.command, "echo hi");
        assert_string_equal(out.cwd, "/tmp");
        assert_true(json_equal(out.env, env));
        assert_true(json_equal(out.base_env, base));
        assert_string_equal(out.session, "s1");
        assert_int_equal(out.timeout_ms, 5000);
        json_decref(j);

        /* what is not given is not sent, and decodes as not given */
        j = wire_exec_encode(&(struct wire_exec){.command = "true"});
        assert_non_null(j);
        assert_int_equal(json_object_size(j), 2); /* command, timeoutMs */
        assert_int_equal(wire_exec_decode(j, &out, &err), 0);
        assert_null(out.cwd);
        assert_null(out.env);
        assert_null(out.base_env);
        assert_null(out.session);
        assert_int_equal(out.timeout_ms, 0);
        json_decref(j);
        json_decref(env);
        json_decref(base);
}

static void test_exec_bounds(void **state)
{
        static const char *const bad[] = {
                "{}",
                "{\"command\":\"\"}",
                "{\"command\":1}",
                "{\"command\":\"a\\u0000b\"}",
                "{\"command\":\"x\",\"cwd\":1}",
                "{\"command\":\"x\",\"env\":[]}",
                "{\"command\":\"x\",\"baseEnv\":\"A=1\"}",
                "{\"command\":\"x\",\"session\":\"..\"}",
                "{\"command\":\"x\",\"session\":\"a/b\"}",
                "{\"command\":\"x\",\"timeoutMs\":-1}",
                "{\"command\":\"x\",\"timeoutMs\":1.5}",
                "{\"command\":\"x\",\"timeoutMs\":99999999999999}",
        };
        struct wire_exec out;

        (void)state;
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                struct cella_error err = {0};
                json_t *j = json_loads(bad[i], JSON_ALLOW_NUL, NULL);

                assert_non_null(j);
                if (wire_exec_decode(j, &out, &err) != -EINVAL)
                        fail_msg("accepted %s", bad[i]);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                json_decref(j);
        }
}

static void test_pty(void **state)
{
        struct cella_error err = {0};
        struct wire_pty out;
        json_t *j;

        (void)state;
        j = wire_pty_encode(&(struct wire_pty){.session = "dev", .cols = 80, .rows = 24});
        assert_int_equal(wire_pty_decode(j, &out, &err), 0);
        assert_string_equal(out.session, "dev");
        assert_int_equal(out.cols, 80);
        assert_int_equal(out.rows, 24);
        assert_null(out.base_env);
        json_decref(j);

        j = parse("{\"cols\":0,\"rows\":24}");
        assert_int_equal(wire_pty_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'cols' must be an integer from 1 to 1000");
        json_decref(j);
}

static void test_session(void **state)
{
        json_t *env = parse("{\"A\":\"1\"}"), *vars = parse("{\"A\":\"1\",\"B\":null}");
        struct cella_error err = {0};
        struct wire_session out;
        char *text;
        json_t *j;

        (void)state;
        /* the members and their order as cellad has always sent them */
        j = wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_CREATE,
                                                       .id = "dev",
                                                       .cwd = "/w",
                                                       .env = env,
                                                       .timeout_ms = 500});
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, "{\"op\":\"create\",\"baseEnv\":{},\"commandTimeoutMs\":500,"
                                  "\"id\":\"dev\",\"cwd\":\"/w\",\"env\":{\"A\":\"1\"}}");
        free(text);
        assert_int_equal(wire_session_decode(j, &out, &err), 0);
        assert_int_equal(out.op, WIRE_SESSION_CREATE);
        assert_string_equal(out.id, "dev");
        assert_string_equal(out.cwd, "/w");
        assert_true(json_equal(out.env, env));
        assert_int_equal(json_object_size(out.base_env), 0);
        assert_int_equal(out.timeout_ms, 500);
        json_decref(j);

        j = wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_SETENV, .env = vars});
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, "{\"op\":\"setenv\",\"env\":{\"A\":\"1\",\"B\":null}}");
        free(text);
        assert_int_equal(wire_session_decode(j, &out, &err), 0);
        assert_int_equal(out.op, WIRE_SESSION_SETENV);
        assert_null(out.id);
        assert_true(json_equal(out.env, vars));
        json_decref(j);

        j = wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_DELETE, .id = "dev"});
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, "{\"op\":\"delete\",\"id\":\"dev\"}");
        free(text);
        json_decref(j);
        j = wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_LIST, .id = "x"});
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, "{\"op\":\"list\"}");
        free(text);
        json_decref(j);
        /* setenv without its env is not a request */
        assert_null(wire_session_encode(&(struct wire_session){.op = WIRE_SESSION_SETENV}));

        err = (struct cella_error){0};
        j = parse("{\"op\":\"delete\"}");
        assert_int_equal(wire_session_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'id' is required");
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"rename\"}");
        assert_int_equal(wire_session_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "unknown session operation 'rename'");
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"create\",\"id\":\"a/b\"}");
        assert_int_equal(wire_session_decode(j, &out, &err), -EINVAL);
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"create\",\"commandTimeoutMs\":604800001}");
        assert_int_equal(wire_session_decode(j, &out, &err), -EINVAL);
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"setenv\",\"env\":[]}");
        assert_int_equal(wire_session_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'env' must be an object");
        json_decref(j);
        json_decref(env);
        json_decref(vars);
}

static void test_watch(void **state)
{
        json_t *inc = parse("[\"*.c\"]");
        struct cella_error err = {0};
        struct wire_watch out;
        char *text;
        json_t *j;

        (void)state;
        /* the members and their order as cellad has always sent them */
        j = wire_watch_encode(
                &(struct wire_watch){.path = "/w", .recursive = false, .include = inc});
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, "{\"path\":\"/w\",\"recursive\":false,\"include\":[\"*.c\"]}");
        free(text);
        assert_int_equal(wire_watch_decode(j, &out, &err), 0);
        assert_string_equal(out.path, "/w");
        assert_false(out.recursive);
        assert_true(json_equal(out.include, inc));
        assert_null(out.exclude);
        json_decref(j);

        j = parse("{\"path\":\"/w\",\"exclude\":null}");
        assert_int_equal(wire_watch_decode(j, &out, &err), 0);
        assert_true(out.recursive);
        assert_null(out.exclude);
        json_decref(j);
        j = parse("{\"path\":\"/w\",\"include\":[\"\"]}");
        assert_int_equal(wire_watch_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'include' must hold strings of 1..256 bytes without NUL");
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"recursive\":true}");
        assert_int_equal(wire_watch_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'path' must be a string");
        json_decref(j);
        json_decref(inc);
}

/* A body dumped as cellad sends it. */
static void assert_dump(json_t *j, const char *want)
{
        char *text;

        assert_non_null(j);
        text = json_dumps(j, JSON_COMPACT);
        assert_string_equal(text, want);
        free(text);
}

static void proc_refused(const char *body, const char *msg)
{
        struct cella_error err = {0};
        struct wire_proc out;
        json_t *j = parse(body);

        assert_int_equal(wire_proc_decode(j, &out, &err), -EINVAL);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        if (msg)
                assert_string_equal(err.msg, msg);
        json_decref(j);
}

static void test_proc(void **state)
{
        json_t *env = parse("{\"A\":\"1\"}"), *base = parse("{\"PATH\":\"/bin\"}");
        struct cella_error err = {0};
        struct wire_proc out;
        json_t *j;

        (void)state;
        /* the members and their order as cellad has always sent them */
        j = wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_START,
                                                 .command = "sleep 9",
                                                 .id = "web",
                                                 .session = "dev",
                                                 .env = env,
                                                 .cwd = "/workspace/app",
                                                 .base_env = base});
        assert_dump(j, "{\"op\":\"start\",\"command\":\"sleep 9\",\"id\":\"web\",\"session\":"
                       "\"dev\",\"env\":{\"A\":\"1\"},\"cwd\":\"/workspace/app\",\"baseEnv\":"
                       "{\"PATH\":\"/bin\"}}");
        assert_int_equal(wire_proc_decode(j, &out, &err), 0);
        assert_int_equal(out.op, WIRE_PROC_START);
        assert_string_equal(out.command, "sleep 9");
        assert_string_equal(out.id, "web");
        assert_string_equal(out.session, "dev");
        assert_string_equal(out.cwd, "/workspace/app");
        assert_true(json_equal(out.env, env) && json_equal(out.base_env, base));
        json_decref(j);
        j = wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_KILL, .signal = 2, .id = "web"});
        assert_dump(j, "{\"op\":\"kill\",\"signal\":2,\"id\":\"web\"}");
        json_decref(j);
        j = wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_KILLALL, .id = "ignored"});
        assert_dump(j, "{\"op\":\"killall\"}");
        json_decref(j);
        j = wire_proc_encode(&(struct wire_proc){
                .op = WIRE_PROC_WAIT_LOG, .pattern = "ready", .regex = true, .id = "web"});
        assert_dump(j, "{\"op\":\"waitLog\",\"pattern\":\"ready\",\"regex\":true,\"id\":\"web\"}");
        json_decref(j);
        j = wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_WAIT_PORT,
                                                 .port = 8080,
                                                 .http = true,
                                                 .path = "/h",
                                                 .status_min = 200,
                                                 .status_max = 204,
                                                 .interval_ms = 100,
                                                 .timeout_ms = 3000,
                                                 .id = "web"});
        assert_dump(j, "{\"op\":\"waitPort\",\"port\":8080,\"mode\":\"http\",\"path\":\"/h\","
                       "\"statusMin\":200,\"statusMax\":204,\"intervalMs\":100,\"timeoutMs\":"
                       "3000,\"id\":\"web\"}");
        json_decref(j);
        /* the defaults: filled in by the decoder, left out by the encoder */
        j = wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_WAIT_PORT, .port = 80, .id = "1"});
        assert_dump(j, "{\"op\":\"waitPort\",\"port\":80,\"id\":\"1\"}");
        assert_int_equal(wire_proc_decode(j, &out, &err), 0);
        assert_false(out.http);
        assert_null(out.path);
        assert_int_equal(out.status_min, 200);
        assert_int_equal(out.status_max, 399);
        assert_int_equal(out.interval_ms, CELLA_PROC_DEFAULT_INTERVAL_MS);
        assert_int_equal(out.timeout_ms, 0);
        json_decref(j);
        /* a pid as a number */
        j = parse("{\"op\":\"get\",\"id\":1234}");
        assert_int_equal(wire_proc_decode(j, &out, &err), 0);
        assert_string_equal(out.id, "1234");
        assert_int_equal(out.op, WIRE_PROC_GET);
        json_decref(j);
        /* unknown members are ignored */
        j = parse("{\"op\":\"list\",\"later\":[1]}");
        assert_int_equal(wire_proc_decode(j, &out, &err), 0);
        json_decref(j);
        /* start and waitLog without what they need are no requests */
        assert_null(wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_START}));
        assert_null(wire_proc_encode(&(struct wire_proc){.op = WIRE_PROC_WAIT_LOG, .id = "a"}));

        proc_refused("{\"op\":\"restart\"}", "unknown process operation 'restart'");
        proc_refused("{\"op\":\"get\"}", "'id' is required");
        proc_refused("{\"op\":\"get\",\"id\":0}", "'id' as a pid must be in 1..2147483647");
        proc_refused("{\"op\":\"start\",\"command\":\"x\",\"id\":\"42\"}",
                     "'id' must not be only digits (those name pids)");
        proc_refused("{\"op\":\"start\",\"command\":\"x\",\"id\":42}", NULL);
        proc_refused("{\"op\":\"start\",\"command\":\"\"}",
                     "'command' must be a string of 1..1048576 bytes without NUL");
        proc_refused("{\"op\":\"start\",\"command\":\"x\",\"cwd\":7}", "'cwd' must be a string");
        proc_refused("{\"op\":\"kill\",\"id\":\"a\",\"signal\":65}",
                     "'signal' must be a signal name (SIGTERM, TERM) or a number in 1..64");
        proc_refused("{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"\"}",
                     "'pattern' must be a string of 1..4096 bytes without NUL");
        proc_refused("{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"x\",\"regex\":1}",
                     "'regex' must be a boolean");
        proc_refused("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":65536}",
                     "'port' must be an integer from 1 to 65535");
        proc_refused("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":1,\"mode\":\"udp\"}",
                     "'mode' must be \"tcp\" or \"http\"");
        proc_refused("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":1,\"path\":\"x\"}", NULL);
        proc_refused("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":1,\"statusMin\":400}",
                     "'statusMin' must not be above 'statusMax' (400 > 399)");
        proc_refused("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":1,\"intervalMs\":1}", NULL);
        proc_refused("{\"op\":\"waitExit\",\"id\":\"a\",\"timeoutMs\":-1}", NULL);
        json_decref(env);
        json_decref(base);
}

static void test_code(void **state)
{
        json_t *env = parse("{\"A\":\"1\"}"), *base = parse("{}");
        struct cella_error err = {0};
        struct wire_code out;
        json_t *j;

        (void)state;
        j = wire_code_encode(&(struct wire_code){.op = WIRE_CODE_CREATE,
                                                 .language = WIRE_CODE_TYPESCRIPT,
                                                 .cwd = "/w",
                                                 .env = env,
                                                 .base_env = base});
        assert_dump(j, "{\"op\":\"create\",\"language\":\"typescript\",\"cwd\":\"/w\",\"env\":"
                       "{\"A\":\"1\"},\"baseEnv\":{}}");
        assert_int_equal(wire_code_decode(j, &out, &err), 0);
        assert_int_equal(out.op, WIRE_CODE_CREATE);
        assert_int_equal(out.language, WIRE_CODE_TYPESCRIPT);
        assert_string_equal(out.cwd, "/w");
        json_decref(j);
        j = wire_code_encode(&(struct wire_code){.op = WIRE_CODE_RUN,
                                                 .code = "1+1",
                                                 .id = "ctx",
                                                 .language = WIRE_CODE_JAVASCRIPT,
                                                 .language_given = true,
                                                 .timeout_ms = 1500,
                                                 .base_env = base});
        assert_dump(j, "{\"op\":\"run\",\"code\":\"1+1\",\"id\":\"ctx\",\"language\":"
                       "\"javascript\",\"timeoutMs\":1500,\"baseEnv\":{}}");
        assert_int_equal(wire_code_decode(j, &out, &err), 0);
        assert_true(out.language_given);
        assert_int_equal(out.language, WIRE_CODE_JAVASCRIPT);
        assert_int_equal(out.timeout_ms, 1500);
        assert_string_equal(out.code, "1+1");
        json_decref(j);
        /* a run without a language names none; the default context's */
        j = wire_code_encode(&(struct wire_code){.op = WIRE_CODE_RUN, .code = ""});
        assert_dump(j, "{\"op\":\"run\",\"code\":\"\"}");
        assert_int_equal(wire_code_decode(j, &out, &err), 0);
        assert_false(out.language_given);
        assert_null(out.id);
        json_decref(j);
        j = wire_code_encode(&(struct wire_code){.op = WIRE_CODE_DELETE, .id = "ctx"});
        assert_dump(j, "{\"op\":\"delete\",\"id\":\"ctx\"}");
        json_decref(j);
        j = wire_code_encode(&(struct wire_code){.op = WIRE_CODE_LIST, .id = "x"});
        assert_dump(j, "{\"op\":\"list\"}");
        json_decref(j);
        assert_null(wire_code_encode(&(struct wire_code){.op = WIRE_CODE_DELETE}));
        assert_null(wire_code_encode(&(struct wire_code){.op = WIRE_CODE_RUN}));

        j = parse("{\"op\":\"compile\"}");
        assert_int_equal(wire_code_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "unknown code operation 'compile'");
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"create\",\"language\":\"Python\"}");
        assert_int_equal(wire_code_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'language' must be python, javascript or typescript");
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"delete\"}");
        assert_int_equal(wire_code_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'id' is required");
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"run\",\"code\":\"x\",\"timeoutMs\":1.5}");
        assert_int_equal(wire_code_decode(j, &out, &err), -EINVAL);
        json_decref(j);
        err = (struct cella_error){0};
        j = parse("{\"op\":\"run\"}");
        assert_int_equal(wire_code_decode(j, &out, &err), -EINVAL);
        assert_string_equal(err.msg, "'code' must be a string of 0..524288 bytes without NUL");
        json_decref(j);
        json_decref(env);
        json_decref(base);
}

static void test_file(void **state)
{
        char path[CELLA_PATH_MAX + 1], to[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        struct wire_file out;
        json_t *j;

        (void)state;
        /* a name that is not UTF-8 travels as base64 and comes back byte for byte */
        j = wire_file_encode(
                FRAME_FILE_OP,
                &(struct wire_file){.op = WIRE_FILE_MOVE, .path = "/w/a\xff", .to = "/w/b"});
        assert_non_null(json_object_get(j, "fromBase64"));
        assert_int_equal(wire_file_decode(FRAME_FILE_OP, j, &out, path, to, &err), 0);
        assert_int_equal(out.op, WIRE_FILE_MOVE);
        assert_string_equal(out.path, "/w/a\xff");
        assert_string_equal(out.to, "/w/b");
        json_decref(j);

        j = wire_file_encode(FRAME_FILE_WRITE, &(struct wire_file){.path = "/x", .mode = 0600});
        assert_int_equal(wire_file_decode(FRAME_FILE_WRITE, j, &out, path, to, &err), 0);
        assert_int_equal(out.mode, 0600);
        json_decref(j);

        j = parse("{\"op\":\"list\",\"path\":\"/a/../b\",\"includeHidden\":true}");
        assert_int_equal(wire_file_decode(FRAME_FILE_OP, j, &out, path, to, &err), 0);
        assert_string_equal(out.path, "/b");
        assert_true(out.include_hidden);
        assert_false(out.recursive);
        json_decref(j);

        j = parse("{\"op\":\"chmod\",\"path\":\"/a\"}");
        assert_int_equal(wire_file_decode(FRAME_FILE_OP, j, &out, path, to, &err), -EINVAL);
        assert_string_equal(err.msg, "unknown file operation 'chmod'");
        json_decref(j);
        memset(&err, 0, sizeof(err));
        j = parse("{\"path\":\"rel\"}");
        assert_int_equal(wire_file_decode(FRAME_FILE_READ, j, &out, path, to, &err), -EINVAL);
        assert_string_equal(err.msg, "'path' must be an absolute path");
        json_decref(j);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_exec_roundtrip),
                cmocka_unit_test(test_exec_bounds),
                cmocka_unit_test(test_pty),
                cmocka_unit_test(test_file),
                cmocka_unit_test(test_session),
                cmocka_unit_test(test_watch),
                cmocka_unit_test(test_proc),
                cmocka_unit_test(test_code),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
