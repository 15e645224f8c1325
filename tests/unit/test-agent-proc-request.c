/* proc_request_decode: every PROC operation, valid and invalid (src/agent/proc-request.h). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "agent/proc-request.h"
#include "common/limits.h"

static int decode(const char *text, struct proc_request *r, struct cella_error *err)
{
        json_t *j = json_loads(text, 0, NULL);
        int k;

        assert_non_null(j);
        memset(err, 0, sizeof(*err));
        k = proc_request_decode(j, r, err);
        json_decref(j);
        return k;
}

static void ok(const char *text, struct proc_request *r)
{
        struct cella_error err;

        if (decode(text, r, &err) != 0)
                fail_msg("refused %s: %s", text, err.msg);
}

static void bad(const char *text)
{
        struct proc_request r;
        struct cella_error err;

        if (decode(text, &r, &err) != -EINVAL)
                fail_msg("accepted %s", text);
        assert_int_equal(err.code, CELLA_E_VALIDATION_FAILED);
        proc_request_done(&r);
}

static void test_start(void **state)
{
        struct proc_request r;

        (void)state;
        ok("{\"op\":\"start\",\"command\":\"sleep 1\"}", &r);
        assert_int_equal(r.op, PROC_START);
        assert_string_equal(r.command, "sleep 1");
        assert_string_equal(r.cwd, "/workspace");
        assert_null(r.id);
        proc_request_done(&r);
        ok("{\"op\":\"start\",\"command\":\"x\",\"id\":\"web.1\",\"session\":\"s\",\"cwd\":"
           "\"/a/../b\",\"env\":{\"A\":\"1\"},\"baseEnv\":{\"B\":\"2\",\"C\":\"3\"}}",
           &r);
        assert_string_equal(r.id, "web.1");
        assert_string_equal(r.session, "s");
        assert_string_equal(r.cwd, "/b");
        assert_int_equal(r.n_env, 1);
        assert_string_equal(r.env[0], "A=1");
        assert_int_equal(r.n_base_env, 2);
        proc_request_done(&r);
        bad("{\"op\":\"start\"}");
        bad("{\"op\":\"start\",\"command\":\"\"}");
        bad("{\"op\":\"start\",\"command\":\"x\",\"id\":\"42\"}");
        bad("{\"op\":\"start\",\"command\":\"x\",\"id\":\"..\"}");
        bad("{\"op\":\"start\",\"command\":\"x\",\"session\":\"a b\"}");
        bad("{\"op\":\"start\",\"command\":\"x\",\"cwd\":\"rel\"}");
        bad("{\"op\":\"start\",\"command\":\"x\",\"env\":{\"A\":1}}");
        bad("{\"op\":\"restart\"}");
        bad("{\"id\":\"x\"}");
}

static void test_ids_and_signals(void **state)
{
        struct proc_request r;

        (void)state;
        ok("{\"op\":\"get\",\"id\":1234}", &r);
        assert_string_equal(r.id, "1234");
        proc_request_done(&r);
        ok("{\"op\":\"logs\",\"id\":\"proc-1\"}", &r);
        assert_int_equal(r.op, PROC_LOGS);
        proc_request_done(&r);
        ok("{\"op\":\"kill\",\"id\":\"a\"}", &r);
        assert_int_equal(r.signal, 0);
        proc_request_done(&r);
        ok("{\"op\":\"kill\",\"id\":\"a\",\"signal\":\"SIGINT\"}", &r);
        assert_int_equal(r.signal, 2);
        proc_request_done(&r);
        ok("{\"op\":\"killall\",\"signal\":\"TERM\"}", &r);
        assert_int_equal(r.signal, 15);
        proc_request_done(&r);
        ok("{\"op\":\"killall\",\"signal\":64}", &r);
        assert_int_equal(r.signal, 64);
        proc_request_done(&r);
        bad("{\"op\":\"get\"}");
        bad("{\"op\":\"get\",\"id\":0}");
        bad("{\"op\":\"stream\",\"id\":\"\"}");
        bad("{\"op\":\"kill\",\"id\":\"a\",\"signal\":65}");
        bad("{\"op\":\"kill\",\"id\":\"a\",\"signal\":\"SIGFOO\"}");
        bad("{\"op\":\"kill\",\"id\":\"a\",\"signal\":true}");
}

static void test_waits(void **state)
{
        struct proc_request r;
        char big[CELLA_PROC_MAX_PATTERN + 64];

        (void)state;
        ok("{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"x+\",\"regex\":true,\"timeoutMs\":10}",
           &r);
        assert_string_equal(r.pattern, "x+");
        assert_true(r.regex);
        assert_int_equal(r.timeout_ms, 10);
        proc_request_done(&r);
        ok("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":80}", &r);
        assert_int_equal(r.port, 80);
        assert_false(r.http);
        assert_string_equal(r.path, "/");
        assert_int_equal(r.status_min, 200);
        assert_int_equal(r.status_max, 399);
        assert_true(r.interval_ms > 0);
        proc_request_done(&r);
        ok("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":65535,\"mode\":\"http\",\"path\":\"/h?x=1\","
           "\"statusMin\":204,\"statusMax\":204,\"intervalMs\":10}",
           &r);
        assert_true(r.http);
        assert_string_equal(r.path, "/h?x=1");
        proc_request_done(&r);
        ok("{\"op\":\"waitExit\",\"id\":\"a\"}", &r);
        assert_int_equal(r.timeout_ms, 0);
        proc_request_done(&r);
        bad("{\"op\":\"waitLog\",\"id\":\"a\"}");
        bad("{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"\"}");
        bad("{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"x\",\"regex\":1}");
        bad("{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"x\",\"timeoutMs\":-1}");
        {
                char pat[CELLA_PROC_MAX_PATTERN + 2];

                memset(pat, 'p', sizeof(pat) - 1);
                pat[sizeof(pat) - 1] = '\0';
                snprintf(big, sizeof(big), "{\"op\":\"waitLog\",\"id\":\"a\",\"pattern\":\"%s\"}",
                         pat);
                bad(big);
        }
        bad("{\"op\":\"waitPort\",\"id\":\"a\"}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":0}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":65536}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":80,\"mode\":\"udp\"}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":80,\"path\":\"x\"}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":80,\"path\":\"/a\\r\\nX: y\"}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":80,\"statusMin\":300,\"statusMax\":200}");
        bad("{\"op\":\"waitPort\",\"id\":\"a\",\"port\":80,\"intervalMs\":0}");
        bad("{\"op\":\"waitExit\",\"id\":\"a\",\"timeoutMs\":\"5\"}");
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_start),
                cmocka_unit_test(test_ids_and_signals),
                cmocka_unit_test(test_waits),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
