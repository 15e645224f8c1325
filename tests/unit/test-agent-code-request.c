/* code_request_decode (CODE frames from cellad) and code_event_decode (runner event lines,
 * hostile): valid and invalid inputs (src/agent/code-request.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "agent/code-request.h"
#include "common/buf.h"
#include "common/limits.h"

static int decode(const char *text, struct code_request *r, struct cella_error *err)
{
        json_t *j = json_loads(text, JSON_ALLOW_NUL, NULL);
        int k;

        assert_non_null(j);
        memset(err, 0, sizeof(*err));
        k = code_request_decode(j, r, err);
        json_decref(j);
        return k;
}

static void ok(const char *text, struct code_request *r)
{
        struct cella_error err;

        if (decode(text, r, &err) != 0)
                fail_msg("refused %s: %s", text, err.msg);
}

static void bad(const char *text)
{
        struct code_request r;
        struct cella_error err;

        if (decode(text, &r, &err) != -EINVAL)
                fail_msg("accepted %s", text);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        code_request_done(&r);
}

static void test_create(void **state)
{
        struct code_request r;

        (void)state;
        ok("{\"op\":\"create\",\"language\":\"javascript\"}", &r);
        assert_int_equal(r.op, CODE_OP_CREATE);
        assert_int_equal(r.language, CODE_JAVASCRIPT);
        assert_null(r.ctx.cwd);
        assert_int_equal(r.ctx.n_env, 0);
        code_request_done(&r);
        ok("{\"op\":\"create\",\"language\":\"typescript\",\"cwd\":\"/a/../b/\",\"env\":{\"A\":"
           "\"1\"},\"baseEnv\":{\"PATH\":\"/bin\"}}",
           &r);
        assert_int_equal(r.language, CODE_TYPESCRIPT);
        assert_string_equal(r.ctx.cwd, "/b");
        assert_int_equal(r.ctx.n_env, 1);
        assert_string_equal(r.ctx.env[0], "A=1");
        assert_int_equal(r.ctx.n_base_env, 1);
        assert_string_equal(r.ctx.base_env[0], "PATH=/bin");
        code_request_done(&r);
        ok("{\"op\":\"create\"}", &r);
        assert_int_equal(r.language, CODE_PYTHON);
        code_request_done(&r);

        bad("{\"op\":\"create\",\"language\":\"cobol\"}");
        bad("{\"op\":\"create\",\"language\":1}");
        bad("{\"op\":\"create\",\"cwd\":\"relative\"}");
        bad("{\"op\":\"create\",\"cwd\":5}");
        bad("{\"op\":\"create\",\"env\":{\"A\":1}}");
        bad("{\"op\":\"create\",\"env\":[]}");
        /* unknown members are ignored (common/wire.h): a newer cellad may send more */
        ok("{\"op\":\"create\",\"extra\":true}", &r);
        assert_int_equal(r.language, CODE_PYTHON);
        code_request_done(&r);
}

static void test_run(void **state)
{
        struct code_request r;
        char *big;

        (void)state;
        ok("{\"op\":\"run\",\"code\":\"1+1\"}", &r);
        assert_int_equal(r.op, CODE_OP_RUN);
        assert_null(r.ctx.id);
        assert_false(r.language_given);
        assert_int_equal(r.language, CODE_PYTHON);
        assert_string_equal(r.code, "1+1");
        assert_int_equal(r.timeout_ms, 0);
        code_request_done(&r);
        ok("{\"op\":\"run\",\"code\":\"\",\"id\":\"ctx-abc\",\"language\":\"javascript\","
           "\"timeoutMs\":1500,\"baseEnv\":{}}",
           &r);
        assert_string_equal(r.ctx.id, "ctx-abc");
        assert_true(r.language_given);
        assert_int_equal(r.language, CODE_JAVASCRIPT);
        assert_int_equal(r.timeout_ms, 1500);
        code_request_done(&r);
        ok("{\"op\":\"run\",\"code\":\"x\",\"id\":null,\"timeoutMs\":null}", &r);
        assert_null(r.ctx.id);
        code_request_done(&r);

        bad("{\"op\":\"run\"}");
        bad("{\"op\":\"run\",\"code\":1}");
        bad("{\"op\":\"run\",\"code\":\"a\\u0000b\"}");
        bad("{\"op\":\"run\",\"code\":\"x\",\"id\":\"../etc\"}");
        bad("{\"op\":\"run\",\"code\":\"x\",\"id\":\"\"}");
        bad("{\"op\":\"run\",\"code\":\"x\",\"timeoutMs\":-1}");
        bad("{\"op\":\"run\",\"code\":\"x\",\"timeoutMs\":1.5}");
        bad("{\"op\":\"run\",\"code\":\"x\",\"timeoutMs\":999999999999999}");
        ok("{\"op\":\"run\",\"code\":\"x\",\"cwd\":\"/\"}", &r); /* a run has no cwd: ignored */
        assert_null(r.ctx.cwd);
        code_request_done(&r);
        big = malloc(CELLA_CODE_MAX_CODE + 64);
        assert_non_null(big);
        memcpy(big, "{\"op\":\"run\",\"code\":\"", 20);
        memset(big + 20, 'a', CELLA_CODE_MAX_CODE + 1);
        memcpy(big + 20 + CELLA_CODE_MAX_CODE + 1, "\"}", 3);
        bad(big);
        free(big);
}

static void test_list_delete(void **state)
{
        struct code_request r;

        (void)state;
        ok("{\"op\":\"list\"}", &r);
        assert_int_equal(r.op, CODE_OP_LIST);
        code_request_done(&r);
        ok("{\"op\":\"delete\",\"id\":\"default-python\"}", &r);
        assert_int_equal(r.op, CODE_OP_DELETE);
        assert_string_equal(r.ctx.id, "default-python");
        code_request_done(&r);
        bad("{\"op\":\"delete\"}");
        bad("{\"op\":\"delete\",\"id\":\"a/b\"}");
        ok("{\"op\":\"list\",\"id\":\"x\"}", &r); /* a list has no id: ignored */
        assert_null(r.ctx.id);
        code_request_done(&r);
        bad("{\"op\":\"run\",\"code\":\"x\",\"baseEnv\":{\"A-B\":\"1\"}}");
        bad("{\"op\":\"create\",\"language\":\"python\\u0000\"}");
        bad("{\"op\":\"restart\"}");
        bad("{\"op\":7}");
        bad("{}");
        bad("[]");
}

static int ev(const char *line, struct code_event *e)
{
        struct cella_error err = {0};
        int k = code_event_decode(line, strlen(line), e, &err);

        if (k < 0)
                assert_true(cella_error_is_set(&err));
        return k;
}

static void test_events(void **state)
{
        struct code_event e;

        (void)state;
        assert_int_equal(ev("{\"type\":\"ready\"}", &e), 0);
        assert_int_equal(e.type, CODE_EV_READY);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"setup_ok\"}", &e), 0);
        assert_int_equal(e.type, CODE_EV_SETUP_OK);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"setup_error\",\"message\":\"no dir\"}", &e), 0);
        assert_int_equal(e.type, CODE_EV_SETUP_ERROR);
        assert_string_equal(e.message, "no dir");
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"done\",\"id\":3,\"executionCount\":2}", &e), 0);
        assert_int_equal(e.type, CODE_EV_DONE);
        assert_int_equal(e.id, 3);
        assert_int_equal(e.execution_count, 2);
        code_event_done(&e);
        /* unknown types are ignored, not errors */
        assert_int_equal(ev("{\"type\":\"progress\",\"x\":1}", &e), 0);
        assert_int_equal(e.type, CODE_EV_UNKNOWN);
        code_event_done(&e);

        /* results keep the known keys with the right types only */
        assert_int_equal(ev("{\"type\":\"result\",\"id\":1,\"result\":{\"text\":\"42\",\"html\":5,"
                            "\"png\":\"iVBORw0K\",\"jpeg\":\"not base64!\",\"json\":{\"a\":[1]},"
                            "\"isMainResult\":true,\"evil\":\"x\"}}",
                            &e),
                         0);
        assert_int_equal(e.type, CODE_EV_RESULT);
        assert_string_equal(json_string_value(json_object_get(e.result, "text")), "42");
        assert_string_equal(json_string_value(json_object_get(e.result, "png")), "iVBORw0K");
        assert_null(json_object_get(e.result, "html"));
        assert_null(json_object_get(e.result, "jpeg"));
        assert_null(json_object_get(e.result, "evil"));
        assert_true(json_is_object(json_object_get(e.result, "json")));
        assert_true(json_is_true(json_object_get(e.result, "isMainResult")));
        code_event_done(&e);

        assert_int_equal(ev("{\"type\":\"error\",\"id\":2,\"name\":\"ValueError\",\"message\":"
                            "\"bad\",\"traceback\":[\"a\",\"b\"]}",
                            &e),
                         0);
        assert_int_equal(e.type, CODE_EV_ERROR);
        assert_string_equal(e.name, "ValueError");
        assert_string_equal(e.message, "bad");
        assert_int_equal(json_array_size(e.traceback), 2);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"error\",\"id\":2}", &e), 0);
        assert_string_equal(e.name, "");
        assert_int_equal(json_array_size(e.traceback), 0);
        code_event_done(&e);

        assert_int_equal(ev("", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("not json", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("[1]", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":1}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"done\"}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"done\",\"id\":-1}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"done\",\"id\":1,\"executionCount\":\"x\"}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"result\",\"id\":1}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"result\",\"id\":1,\"result\":[]}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"error\",\"id\":1,\"traceback\":\"x\"}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"error\",\"id\":1,\"traceback\":[1]}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"error\",\"id\":1,\"name\":7}", &e), -EINVAL);
        code_event_done(&e);
        assert_int_equal(ev("{\"type\":\"ready\",\"type\":\"done\"}", &e), -EINVAL);
        code_event_done(&e);
}

static void test_event_limits(void **state)
{
        struct code_event e;
        size_t n = CELLA_CODE_MAX_TEXT * 2, tb = CELLA_CODE_MAX_TRACEBACK + 10;
        struct buf b = BUF_INIT;

        (void)state;
        /* a long name is cut; a long traceback keeps CELLA_CODE_MAX_TRACEBACK lines */
        assert_int_equal(buf_append_str(&b, "{\"type\":\"error\",\"id\":1,\"name\":\""), 0);
        for (size_t i = 0; i < n; i++)
                assert_int_equal(buf_append(&b, "\xc3\xa9", 2), 0); /* multi-byte */
        assert_int_equal(buf_append_str(&b, "\",\"traceback\":["), 0);
        for (size_t i = 0; i < tb; i++)
                assert_int_equal(buf_printf(&b, "%s\"l\"", i ? "," : ""), 0);
        assert_int_equal(buf_append_str(&b, "]}"), 0);
        assert_int_equal(code_event_decode(b.data, b.len, &e, &(struct cella_error){0}), 0);
        assert_true(strlen(e.name) <= CELLA_CODE_MAX_TEXT);
        assert_int_equal(strlen(e.name) % 2, 0); /* not cut inside a character */
        assert_int_equal(json_array_size(e.traceback), CELLA_CODE_MAX_TRACEBACK);
        code_event_done(&e);
        buf_free(&b);
}

static void test_lang(void **state)
{
        enum code_lang l;

        (void)state;
        assert_int_equal(code_lang_parse("typescript", &l), 0);
        assert_int_equal(l, CODE_TYPESCRIPT);
        assert_string_equal(code_lang_name(l), "typescript");
        assert_int_equal(code_lang_parse("Python", &l), -EINVAL);
        assert_int_equal(code_lang_parse("", &l), -EINVAL);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_create),       cmocka_unit_test(test_run),
                cmocka_unit_test(test_list_delete),  cmocka_unit_test(test_events),
                cmocka_unit_test(test_event_limits), cmocka_unit_test(test_lang),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
