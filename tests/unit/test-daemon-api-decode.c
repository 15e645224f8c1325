/* The JSON request decoders: accepted shapes, and every rejection with its code. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>

#include <cmocka.h>

#include "common/wire.h"
#include "daemon/api-decode.h"

#define BODY(s) s, sizeof(s) - 1

static void test_put_sandbox(void **state)
{
        struct api_put_sandbox p;
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(api_decode_put_sandbox("", 0, &p, &err), 0);
        assert_null(p.image);
        api_put_sandbox_done(&p);
        assert_int_equal(api_decode_put_sandbox(BODY("{\"image\":\"default\",\"instanceType\":"
                                                     "\"lite\",\"env\":{\"A\":\"1\"},\"labels\":"
                                                     "{\"t\":\"x\"},\"normalizeId\":true}"),
                                                &p, &err),
                         0);
        assert_string_equal(p.image, "default");
        assert_string_equal(p.instance_type, "lite");
        assert_string_equal(json_string_value(json_object_get(p.env, "A")), "1");
        assert_true(p.normalize_id);
        api_put_sandbox_done(&p);
        /* networkAllow comes out canonical (what the table stores and compares) */
        assert_int_equal(api_decode_put_sandbox(BODY("{\"networkAllow\":[\"198.51.100.7\","
                                                     "\"203.0.113.0/24:443\"]}"),
                                                &p, &err),
                         0);
        assert_int_equal(json_array_size(p.network_allow), 2);
        assert_string_equal(json_string_value(json_array_get(p.network_allow, 0)),
                            "198.51.100.7/32");
        assert_string_equal(json_string_value(json_array_get(p.network_allow, 1)),
                            "203.0.113.0/24:443");
        api_put_sandbox_done(&p);

        static const char *const bad[] = {
                "[]",
                "{\"image\":1}",
                "{\"image\":\"../x\"}",
                "{\"instanceType\":\"huge\"}",
                "{\"env\":{\"A\":1}}",
                "{\"env\":{\"A=B\":\"1\"}}",
                "{\"unknown\":1}",
                "{",
                "{\"image\":\"a\",\"image\":\"b\"}",
                "{\"env\":{\"A\":\"x\\u0000y\"}}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (api_decode_put_sandbox(bad[i], strlen(bad[i]), &p, &err) >= 0)
                        fail_msg("accepted %s", bad[i]);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                api_put_sandbox_done(&p); /* no-op on the zeroed struct */
        }
}

static void test_exec(void **state)
{
        struct api_exec p;
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(api_decode_exec(BODY("{\"command\":\"echo hi\",\"timeout\":1000,\"env\":"
                                              "{\"K\":\"V\"},\"cwd\":\"sub/../dir\","
                                              "\"sessionId\":\"s1\"}"),
                                         &p, &err),
                         0);
        assert_string_equal(p.command, "echo hi");
        assert_int_equal(p.timeout_ms, 1000);
        assert_string_equal(p.cwd, "/workspace/dir");
        assert_string_equal(p.session_id, "s1");
        api_exec_done(&p);
        assert_int_equal(api_decode_exec(BODY("{\"command\":\"true\"}"), &p, &err), 0);
        assert_null(p.cwd);
        assert_int_equal(p.timeout_ms, 0);
        api_exec_done(&p);

        static const char *const bad[] = {
                "{}",
                "{\"command\":\"\"}",
                "{\"command\":1}",
                "{\"command\":\"a\\u0000b\"}",
                "{\"command\":\"x\",\"timeout\":-1}",
                "{\"command\":\"x\",\"timeout\":\"5\"}",
                "{\"command\":\"x\",\"timeout\":99999999999999}",
                "{\"command\":\"x\",\"cwd\":\"\"}",
                "{\"command\":\"x\",\"extra\":true}",
                "null",
                "{\"command\":\"x\",\"env\":[]}",
                "{\"command\":\"x\",\"env\":{\"A-B\":\"1\"}}",
                "{\"command\":\"x\",\"env\":{\"1A\":\"1\"}}",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (api_decode_exec(bad[i], strlen(bad[i]), &p, &err) >= 0)
                        fail_msg("accepted %s", bad[i]);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                assert_null(p.command);
        }
        /* the env name rule is checked here, once, with the message the agent used to give */
        memset(&err, 0, sizeof(err));
        assert_int_equal(
                api_decode_exec(BODY("{\"command\":\"x\",\"env\":{\"A-B\":\"1\"}}"), &p, &err),
                -EINVAL);
        assert_string_equal(err.msg, "env key 'A-B' is not an identifier");
}

static void test_git_checkout(void **state)
{
        struct api_git_checkout p;
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(
                api_decode_git_checkout(BODY("{\"repoUrl\":\"https://h/org/app.git\"}"), &p, &err),
                0);
        assert_string_equal(p.repo_url, "https://h/org/app.git");
        assert_null(p.branch);
        assert_string_equal(p.target_dir, "/workspace/app");
        assert_int_equal(p.depth, 0);
        assert_int_equal(p.timeout_ms, CELLA_GIT_DEFAULT_TIMEOUT_MS);
        api_git_checkout_done(&p);
        assert_int_equal(api_decode_git_checkout(
                                 BODY("{\"repoUrl\":\"git@h:o/r\",\"branch\":\"feature/x\","
                                      "\"targetDir\":\"src/../r\",\"depth\":1,\"timeout\":0}"),
                                 &p, &err),
                         0);
        assert_string_equal(p.branch, "feature/x");
        assert_string_equal(p.target_dir, "/workspace/r");
        assert_int_equal(p.depth, 1);
        assert_int_equal(p.timeout_ms, 0);
        api_git_checkout_done(&p);
        assert_int_equal(api_decode_git_checkout(
                                 BODY("{\"repoUrl\":\"https://h/r\",\"targetDir\":\"/tmp/x\","
                                      "\"branch\":null,\"depth\":null,\"timeout\":null}"),
                                 &p, &err),
                         0);
        assert_string_equal(p.target_dir, "/tmp/x");
        assert_int_equal(p.timeout_ms, CELLA_GIT_DEFAULT_TIMEOUT_MS);
        api_git_checkout_done(&p);

        static const struct {
                const char *body;
                int code;
        } bad[] = {
                {"{}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":5}", CELLA_E_INVALID_GIT_URL},
                {"{\"repoUrl\":\"file:///r\"}", CELLA_E_INVALID_GIT_URL},
                {"{\"repoUrl\":\"-u\"}", CELLA_E_INVALID_GIT_URL},
                {"{\"repoUrl\":\"https://h/r\\u0000x\"}", CELLA_E_INVALID_GIT_URL},
                {"{\"repoUrl\":\"https://h/\"}", CELLA_E_INVALID_GIT_URL},
                {"{\"repoUrl\":\"https://h/.git\"}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"branch\":\"-b\"}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"branch\":1}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"targetDir\":\"/\"}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"targetDir\":\"\"}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"depth\":-1}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"depth\":1.5}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"timeout\":\"5\"}", CELLA_E_VALIDATION_FAILED},
                {"{\"repoUrl\":\"https://h/r\",\"ref\":\"x\"}", CELLA_E_VALIDATION_FAILED},
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (api_decode_git_checkout(bad[i].body, strlen(bad[i].body), &p, &err) >= 0)
                        fail_msg("accepted %s", bad[i].body);
                if (err.code != bad[i].code)
                        fail_msg("%s: %s", bad[i].body, cella_code_name(err.code));
                assert_null(p.repo_url);
        }
}

static void test_files(void **state)
{
        struct api_file_read r;
        struct api_file_write w;
        struct api_mkdir m;
        struct api_move mv;
        struct cella_error err = {0};

        (void)state;
        assert_int_equal(api_decode_file_read(BODY("{\"path\":\"a.txt\",\"encoding\":\"base64\"}"),
                                              &r, &err),
                         0);
        assert_string_equal(r.path, "/workspace/a.txt");
        assert_true(r.base64);
        assert_int_equal(api_decode_file_write(BODY("{\"path\":\"/b\",\"content\":\"AAEC/w==\","
                                                    "\"encoding\":\"base64\"}"),
                                               &w, &err),
                         0);
        assert_int_equal(w.content.len, 4);
        assert_memory_equal(w.content.data, "\x00\x01\x02\xff", 4);
        api_file_write_done(&w);
        assert_int_equal(api_decode_file_write(BODY("{\"path\":\"/b\",\"content\":\"x\\u0000y\"}"),
                                               &w, &err),
                         0);
        assert_int_equal(w.content.len, 3); /* NUL kept in utf-8 content */
        api_file_write_done(&w);
        assert_int_equal(
                api_decode_mkdir(BODY("{\"path\":\"/w/a/b\",\"recursive\":true}"), &m, &err), 0);
        assert_true(m.recursive);
        assert_int_equal(api_decode_move(BODY("{\"from\":\"a\",\"to\":\"/b\"}"), &mv, &err), 0);
        assert_string_equal(mv.from, "/workspace/a");
        assert_string_equal(mv.to, "/b");

        memset(&err, 0, sizeof(err));
        assert_true(api_decode_file_write(BODY("{\"path\":\"/b\",\"content\":\"!!\","
                                               "\"encoding\":\"base64\"}"),
                                          &w, &err) < 0);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        assert_null(w.content.data);
        memset(&err, 0, sizeof(err));
        assert_true(api_decode_file_read(BODY("{\"path\":\"\"}"), &r, &err) < 0);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        memset(&err, 0, sizeof(err));
        assert_true(api_decode_file_read(BODY("{\"path\":\"a\",\"encoding\":\"latin1\"}"), &r,
                                         &err) < 0);
        memset(&err, 0, sizeof(err));
        assert_true(api_decode_mkdir(BODY("{\"path\":\"a\",\"recursive\":\"yes\"}"), &m, &err) < 0);
        memset(&err, 0, sizeof(err));
        assert_true(api_decode_move(BODY("{\"from\":\"a\"}"), &mv, &err) < 0);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
}

static void watch_bad(const char *body)
{
        struct cella_error err = {0};
        struct api_watch w;

        assert_true(api_decode_watch(body, strlen(body), &w, &err) < 0);
        assert_null(w.include);
        assert_null(w.exclude);
        assert_int_equal(w.path[0], 0);
        assert_true(err.code == CELLA_E_VALIDATION_FAILED || err.code == CELLA_E_NAME_TOO_LONG);
}

static void test_watch(void **state)
{
        struct cella_error err = {0};
        struct api_watch w;

        (void)state;
        assert_int_equal(api_decode_watch(BODY("{\"path\":\"src\"}"), &w, &err), 0);
        assert_string_equal(w.path, "/workspace/src");
        assert_true(w.recursive);
        assert_null(w.include);
        assert_null(w.exclude);
        api_watch_done(&w);
        assert_int_equal(api_decode_watch(BODY("{\"path\":\"/w\",\"recursive\":false,"
                                               "\"include\":[\"*.c\"],\"exclude\":[]}"),
                                          &w, &err),
                         0);
        assert_false(w.recursive);
        assert_int_equal(json_array_size(w.include), 1);
        assert_true(json_is_array(w.exclude));
        api_watch_done(&w);

        watch_bad("{}");
        watch_bad("[]");
        watch_bad("{\"path\":1}");
        watch_bad("{\"path\":\"/\",\"x\":1}");
        watch_bad("{\"path\":\"/\",\"recursive\":\"yes\"}");
        watch_bad("{\"path\":\"/\",\"include\":\"*.c\"}");
        watch_bad("{\"path\":\"/\",\"include\":[\"\"]}");
        watch_bad("{\"path\":\"/\",\"exclude\":[null]}");
        watch_bad("{\"path\":\"/\",\"exclude\":[\"a\\u0000b\"]}");
}

static void code_bad(bool run, const char *body)
{
        struct cella_error err = {0};
        struct api_context_create c;
        struct api_code_run x;

        if (run) {
                assert_true(api_decode_code_run(body, strlen(body), &x, &err) < 0);
                assert_null(x.code);
                assert_null(x.context_id);
        } else {
                assert_true(api_decode_context_create(body, strlen(body), &c, &err) < 0);
                assert_null(c.cwd);
                assert_null(c.env);
        }
        assert_true(err.code == CELLA_E_VALIDATION_FAILED || err.code == CELLA_E_NAME_TOO_LONG);
}

static void test_code(void **state)
{
        struct cella_error err = {0};
        struct api_context_create c;
        struct api_code_run x;

        (void)state;
        assert_int_equal(api_decode_context_create(BODY("{}"), &c, &err), 0);
        assert_int_equal(c.language, WIRE_CODE_PYTHON);
        assert_null(c.cwd);
        assert_null(c.env);
        api_context_create_done(&c);
        assert_int_equal(api_decode_context_create(BODY("{\"language\":\"typescript\",\"cwd\":"
                                                        "\"src\",\"env\":{\"A\":\"1\"}}"),
                                                   &c, &err),
                         0);
        assert_int_equal(c.language, WIRE_CODE_TYPESCRIPT);
        assert_string_equal(c.cwd, "/workspace/src");
        assert_string_equal(json_string_value(json_object_get(c.env, "A")), "1");
        api_context_create_done(&c);
        code_bad(false, "[]");
        code_bad(false, "{\"language\":\"ruby\"}");
        code_bad(false, "{\"language\":\"python\\u0000x\"}");
        code_bad(false, "{\"language\":null,\"x\":1}");
        code_bad(false, "{\"cwd\":7}");
        code_bad(false, "{\"env\":{\"A\":1}}");
        code_bad(false, "{\"env\":{\"A=B\":\"1\"}}");

        assert_int_equal(api_decode_code_run(BODY("{\"code\":\"1+1\"}"), &x, &err), 0);
        assert_string_equal(x.code, "1+1");
        assert_null(x.context_id);
        assert_false(x.language_given);
        assert_int_equal(x.timeout_ms, 0);
        api_code_run_done(&x);
        assert_int_equal(api_decode_code_run(BODY("{\"code\":\"\",\"contextId\":\"ctx-1\","
                                                  "\"language\":\"javascript\",\"timeout\":"
                                                  "2500.5}"),
                                             &x, &err),
                         0);
        assert_string_equal(x.context_id, "ctx-1");
        assert_true(x.language_given);
        assert_int_equal(x.language, WIRE_CODE_JAVASCRIPT);
        assert_int_equal(x.timeout_ms, 2500);
        api_code_run_done(&x);
        code_bad(true, "{}");
        code_bad(true, "{\"code\":null}");
        code_bad(true, "{\"code\":\"a\\u0000b\"}");
        code_bad(true, "{\"code\":\"1\",\"contextId\":\"../x\"}");
        code_bad(true, "{\"code\":\"1\",\"contextId\":5}");
        code_bad(true, "{\"code\":\"1\",\"language\":\"c\"}");
        code_bad(true, "{\"code\":\"1\",\"timeout\":-5}");
        code_bad(true, "{\"code\":\"1\",\"extra\":true}");
}

static void pty_bad(const char *body)
{
        struct cella_error err = {0};
        struct api_pty_control c;

        assert_true(api_decode_pty_control(body, strlen(body), &c, &err) < 0);
        assert_int_equal(c.cols, 0);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
}

static void test_pty(void **state)
{
        struct cella_error err = {0};
        struct api_pty_control c;
        unsigned v;

        (void)state;
        assert_int_equal(api_decode_pty_control(BODY("{\"type\":\"resize\",\"cols\":132,"
                                                     "\"rows\":43}"),
                                                &c, &err),
                         0);
        assert_int_equal(c.cols, 132);
        assert_int_equal(c.rows, 43);
        pty_bad("");
        pty_bad("{\"type\":\"resize\",\"cols\":");
        pty_bad("[]");
        pty_bad("{}");
        pty_bad("{\"type\":\"shout\"}");
        pty_bad("{\"type\":5}");
        pty_bad("{\"type\":\"resize\"}");
        pty_bad("{\"type\":\"resize\",\"cols\":0,\"rows\":5}");
        pty_bad("{\"type\":\"resize\",\"cols\":5,\"rows\":1001}");
        pty_bad("{\"type\":\"resize\",\"cols\":5,\"rows\":-1}");
        pty_bad("{\"type\":\"resize\",\"cols\":\"5\",\"rows\":5}");
        pty_bad("{\"type\":\"resize\",\"cols\":5,\"rows\":5,\"x\":1}");
        pty_bad("{\"type\":\"resize\",\"cols\":5,\"rows\":5,\"rows\":6}");

        assert_int_equal(api_parse_pty_dim(NULL, "cols", 80, &v, &err), 0);
        assert_int_equal(v, 80);
        assert_int_equal(api_parse_pty_dim("1000", "cols", 80, &v, &err), 0);
        assert_int_equal(v, 1000);
        assert_true(api_parse_pty_dim("1001", "cols", 80, &v, &err) < 0);
        assert_true(api_parse_pty_dim("0", "cols", 80, &v, &err) < 0);
        assert_true(api_parse_pty_dim("", "cols", 80, &v, &err) < 0);
        assert_true(api_parse_pty_dim("12x", "cols", 80, &v, &err) < 0);
        assert_true(api_parse_pty_dim("-1", "cols", 80, &v, &err) < 0);
        assert_true(api_parse_pty_dim("99999999999", "cols", 80, &v, &err) < 0);
}

static void test_helpers(void **state)
{
        bool b;

        (void)state;
        assert_int_equal(api_parse_bool(NULL, true, &b), 0);
        assert_true(b);
        assert_int_equal(api_parse_bool("0", true, &b), 0);
        assert_false(b);
        assert_int_equal(api_parse_bool("yes", true, &b), -1);
}

static void duration_ok(const char *json, int64_t want)
{
        struct api_put_sandbox p;
        struct cella_error err = {0};
        char body[128];
        int n = snprintf(body, sizeof(body), "{\"sleepAfter\":%s}", json);
        assert_int_equal(api_decode_put_sandbox(body, (size_t)n, &p, &err), 0);
        assert_int_equal(p.sleep_after_ms, want);
        api_put_sandbox_done(&p);
}

static void duration_bad(const char *json)
{
        struct api_put_sandbox p;
        struct cella_error err = {0};
        char body[128];
        int n = snprintf(body, sizeof(body), "{\"sleepAfter\":%s}", json);
        assert_true(api_decode_put_sandbox(body, (size_t)n, &p, &err) < 0);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        assert_non_null(strstr(err.msg, "sleepAfter"));
}

static void test_sleep_after(void **state)
{
        struct api_put_sandbox p;
        struct cella_error err = {0};

        (void)state;
        duration_ok("90", 90000);
        duration_ok("\"90\"", 90000);
        duration_ok("\"30s\"", 30000);
        duration_ok("\"10m\"", 600000);
        duration_ok("\"2h\"", 7200000);
        duration_ok("\"30d\"", 30LL * 86400000);
        duration_bad("0");
        duration_bad("-5");
        duration_bad("1.5");
        duration_bad("\"\"");
        duration_bad("\"s\"");
        duration_bad("\"10ms\"");
        duration_bad("\"31d\"");
        duration_bad("\"99999999999999999999s\"");
        duration_bad("true");
        assert_int_equal(api_decode_put_sandbox("{\"keepAlive\":true}", 18, &p, &err), 0);
        assert_true(p.has_keep_alive && p.keep_alive);
        assert_int_equal(p.sleep_after_ms, 0);
        api_put_sandbox_done(&p);
        assert_int_equal(api_decode_put_sandbox("{}", 2, &p, &err), 0);
        assert_false(p.has_keep_alive);
        api_put_sandbox_done(&p);
}

/* sleepMode (decision 0050): "files" or "memory"; anything else is a clear 400. */
static void test_sleep_mode(void **state)
{
        static const char *const bad[] = {
                "{\"sleepMode\":\"disk\"}",     "{\"sleepMode\":\"Memory\"}",
                "{\"sleepMode\":\"\"}",         "{\"sleepMode\":true}",
                "{\"sleepMode\":[\"memory\"]}", "{\"sleepMode\":\"memory\\u0000\"}",
        };
        struct api_put_sandbox p;
        struct cella_error err = {0};
        const char *ok = "{\"sleepMode\":\"memory\",\"sleepAfter\":\"30s\"}";

        (void)state;
        assert_int_equal(api_decode_put_sandbox(ok, strlen(ok), &p, &err), 0);
        assert_string_equal(p.sleep_mode, "memory");
        assert_int_equal(p.sleep_after_ms, 30000);
        api_put_sandbox_done(&p);
        assert_int_equal(api_decode_put_sandbox("{\"sleepMode\":\"files\"}", 21, &p, &err), 0);
        assert_string_equal(p.sleep_mode, "files");
        api_put_sandbox_done(&p);
        assert_int_equal(api_decode_put_sandbox("{}", 2, &p, &err), 0);
        assert_null(p.sleep_mode);
        api_put_sandbox_done(&p);
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_true(api_decode_put_sandbox(bad[i], strlen(bad[i]), &p, &err) < 0);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                assert_non_null(strstr(err.msg, "sleepMode must be \"files\" or \"memory\""));
                assert_null(p.sleep_mode);
        }
}

static void test_env(void **state)
{
        struct api_env e;
        struct cella_error err = {0};
        const char *ok = "{\"vars\":{\"A\":\"1\",\"_b2\":\"\",\"GONE\":null}}";

        (void)state;
        assert_int_equal(api_decode_env(ok, strlen(ok), &e, &err), 0);
        assert_int_equal(json_object_size(e.vars), 3);
        assert_true(json_is_null(json_object_get(e.vars, "GONE")));
        api_env_done(&e);
        static const char *const bad[] = {
                "{}",
                "{\"vars\":[]}",
                "{\"vars\":{\"1A\":\"x\"}}",
                "{\"vars\":{\"A-B\":\"x\"}}",
                "{\"vars\":{\"A\":1}}",
                "{\"vars\":{\"A\":\"x\\u0000y\"}}",
                "{\"vars\":{},\"extra\":1}",
                "[",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                assert_true(api_decode_env(bad[i], strlen(bad[i]), &e, &err) < 0);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                assert_null(e.vars);
        }
}

static void test_session(void **state)
{
        struct api_session p;
        struct api_env e;
        struct cella_error err = {0};
        const char *ok = "{\"id\":\"build.1\",\"cwd\":\"/workspace/../tmp\",\"env\":{\"A\":\"1\"},"
                         "\"commandTimeoutMs\":5000}";
        const char *env = "{\"vars\":{\"A\":null},\"sessionId\":\"s-1\"}";

        (void)state;
        assert_int_equal(api_decode_session(ok, strlen(ok), &p, &err), 0);
        assert_string_equal(p.id, "build.1");
        assert_string_equal(p.cwd, "/tmp");
        assert_int_equal(p.timeout_ms, 5000);
        assert_string_equal(json_string_value(json_object_get(p.env, "A")), "1");
        api_session_done(&p);
        assert_int_equal(api_decode_session("", 0, &p, &err), 0); /* all defaults */
        assert_null(p.id);
        api_session_done(&p);
        assert_int_equal(api_decode_env(env, strlen(env), &e, &err), 0);
        assert_string_equal(e.session_id, "s-1");
        api_env_done(&e);
        static const char *const bad[] = {
                "{\"id\":\"..\"}",
                "{\"id\":\"a/b\"}",
                "{\"id\":\"\"}",
                "{\"id\":5}",
                "{\"env\":{\"A-B\":\"x\"}}",
                "{\"env\":{\"A\":1}}",
                "{\"cwd\":\"/a\\u0000b\"}",
                "{\"commandTimeoutMs\":-1}",
                "{\"commandTimeoutMs\":1.5}",
                "{\"other\":1}",
                "[]",
                "{\"id\":",
        };
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
                memset(&err, 0, sizeof(err));
                if (api_decode_session(bad[i], strlen(bad[i]), &p, &err) >= 0)
                        fail_msg("accepted %s", bad[i]);
                assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
                assert_null(p.id);
        }
        const char *badenv = "{\"vars\":{},\"sessionId\":\"../x\"}";
        memset(&err, 0, sizeof(err));
        assert_true(api_decode_env(badenv, strlen(badenv), &e, &err) < 0);
        assert_null(e.session_id);
}

/* Background processes: a valid body is decoded for the PROC body; a bad one is refused
 * and leaves nothing. */
static void proc_ok(enum api_proc_call call, const char *body, const char *q, struct api_process *p)
{
        struct cella_error err = {0};

        if (api_decode_process(call, body, strlen(body), q, p, &err) != 0)
                fail_msg("refused %s: %s", body, err.msg);
}

static void proc_bad(enum api_proc_call call, const char *body, const char *q, int code)
{
        struct cella_error err = {0};
        struct api_process p;

        if (api_decode_process(call, body, strlen(body), q, &p, &err) != -EINVAL)
                fail_msg("accepted %s", body);
        assert_null(p.command);
        assert_null(p.process_id);
        assert_null(p.env);
        assert_null(p.pattern);
        assert_int_equal(err.code, code);
}

static void test_processes(void **state)
{
        struct api_process p;

        (void)state;
        proc_ok(API_PROC_START,
                "{\"command\":\"sleep 1\",\"processId\":\"web-1\",\"sessionId\":\"s\","
                "\"env\":{\"A\":\"1\"},\"cwd\":\"app/../srv\"}",
                NULL, &p);
        assert_string_equal(p.command, "sleep 1");
        assert_string_equal(p.process_id, "web-1");
        assert_string_equal(p.session_id, "s");
        assert_string_equal(p.cwd, "/workspace/srv");
        assert_string_equal(json_string_value(json_object_get(p.env, "A")), "1");
        api_process_done(&p);
        proc_bad(API_PROC_START, "{\"command\":\"\"}", NULL, CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_START, "{\"command\":\"x\",\"processId\":\"12\"}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_START, "{\"command\":\"x\",\"processId\":\"a/b\"}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_START, "{\"command\":\"x\",\"env\":{\"A-B\":\"1\"}}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_START, "{\"command\":\"x\",\"other\":1}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_START, "{\"command\":", NULL, CELLA_E_VALIDATION_FAILED);

        proc_ok(API_PROC_KILL, "", NULL, &p);
        assert_int_equal(p.signal, 0);
        api_process_done(&p);
        proc_ok(API_PROC_KILL, "", "SIGINT", &p);
        assert_int_equal(p.signal, 2);
        proc_ok(API_PROC_KILL, "{\"signal\":\"usr1\"}", NULL, &p);
        assert_int_equal(p.signal, 10);
        proc_ok(API_PROC_KILL, "{\"signal\":9}", NULL, &p);
        assert_int_equal(p.signal, 9);
        proc_bad(API_PROC_KILL, "", "SIGNOPE", CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_KILL, "", "65", CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_KILL, "{\"signal\":0}", NULL, CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_KILL, "{\"signal\":\"TERM\"}", "INT", CELLA_E_VALIDATION_FAILED);

        proc_ok(API_PROC_WAIT_LOG, "{\"pattern\":\"a+\",\"regex\":true,\"timeout\":5}", NULL, &p);
        assert_string_equal(p.pattern, "a+");
        assert_int_equal(p.timeout_ms, 5);
        assert_true(p.regex);
        api_process_done(&p);
        proc_bad(API_PROC_WAIT_LOG, "{\"pattern\":\"\"}", NULL, CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_WAIT_LOG, "{\"pattern\":\"a\",\"timeout\":-1}", NULL,
                 CELLA_E_VALIDATION_FAILED);

        proc_ok(API_PROC_WAIT_PORT,
                "{\"port\":8080,\"mode\":\"http\",\"path\":\"/h\",\"status\":{\"min\":200,"
                "\"max\":204},\"interval\":100}",
                NULL, &p);
        assert_int_equal(p.port, 8080);
        assert_int_equal(p.mode, 1);
        assert_string_equal(p.path, "/h");
        assert_int_equal(p.status_min, 200);
        assert_int_equal(p.status_max, 204);
        assert_int_equal(p.interval_ms, 100);
        api_process_done(&p);
        proc_ok(API_PROC_WAIT_PORT, "{\"port\":1,\"status\":204}", NULL, &p);
        assert_int_equal(p.status_min, 204);
        assert_int_equal(p.status_max, 204);
        assert_int_equal(p.mode, 0);
        assert_null(p.path);
        api_process_done(&p);
        proc_bad(API_PROC_WAIT_PORT, "{\"port\":0}", NULL, CELLA_E_INVALID_PORT);
        proc_bad(API_PROC_WAIT_PORT, "{\"port\":80,\"mode\":\"udp\"}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_WAIT_PORT, "{\"port\":80,\"path\":\"/a b\"}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_WAIT_PORT, "{\"port\":80,\"status\":{\"min\":300,\"max\":200}}", NULL,
                 CELLA_E_VALIDATION_FAILED);
        proc_bad(API_PROC_WAIT_PORT, "{\"port\":80,\"interval\":1}", NULL,
                 CELLA_E_VALIDATION_FAILED);

        proc_ok(API_PROC_WAIT_EXIT, "", NULL, &p);
        assert_int_equal(p.timeout_ms, 0);
        api_process_done(&p);
        proc_bad(API_PROC_WAIT_EXIT, "{\"timeout\":\"1s\"}", NULL, CELLA_E_VALIDATION_FAILED);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_put_sandbox), cmocka_unit_test(test_exec),
                cmocka_unit_test(test_files),       cmocka_unit_test(test_helpers),
                cmocka_unit_test(test_sleep_after), cmocka_unit_test(test_sleep_mode),
                cmocka_unit_test(test_env),         cmocka_unit_test(test_session),
                cmocka_unit_test(test_processes),   cmocka_unit_test(test_git_checkout),
                cmocka_unit_test(test_watch),       cmocka_unit_test(test_code),
                cmocka_unit_test(test_pty),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
