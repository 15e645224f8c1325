/* The MCP engine without a daemon: the JSON-RPC decoder, the schema check, resource URIs,
 * and a session driven message by message through a transport that keeps what it is sent
 * (initialize and version negotiation, the order rules, tools/list, argument errors, a
 * tool call whose daemon does not answer, a cancelled call whose daemon stays silent). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/name.h"
#include "mcp/event-id.h"
#include "mcp/jsonrpc.h"
#include "mcp/mcp-internal.h"
#include "mcp/schema.h"
#include "mcp/server.h"

static int decode(const char *text, struct jsonrpc_msg *m, char *errmsg)
{
        json_t *id = NULL;
        int r = jsonrpc_decode(text, strlen(text), m, &id, errmsg, 256);

        json_decref(id);
        return r;
}

static void test_decode_kinds(void **state)
{
        struct jsonrpc_msg m;
        char err[256];

        assert_int_equal(decode("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}", &m, err), 0);
        assert_int_equal(m.kind, JSONRPC_REQUEST);
        assert_string_equal(m.method, "ping");
        assert_null(m.params);
        jsonrpc_msg_clear(&m);
        assert_int_equal(decode("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                                "\"params\":{\"requestId\":\"x\"}}",
                                &m, err),
                         0);
        assert_int_equal(m.kind, JSONRPC_NOTIFICATION);
        assert_non_null(m.params);
        jsonrpc_msg_clear(&m);
        assert_int_equal(decode("{\"jsonrpc\":\"2.0\",\"id\":\"a\",\"result\":{}}", &m, err), 0);
        assert_int_equal(m.kind, JSONRPC_RESPONSE);
        assert_int_equal(m.is_error, 0);
        jsonrpc_msg_clear(&m);
}

static void test_decode_faults(void **state)
{
        static const struct {
                const char *text;
                int code;
        } cases[] = {
                {"{", JSONRPC_PARSE_ERROR},
                {"", JSONRPC_PARSE_ERROR},
                {"[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", JSONRPC_INVALID_REQUEST},
                {"42", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"id\":1,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\",\"params\":[1]}",
                 JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"p\"}", JSONRPC_PARSE_ERROR},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\",\"x\":1}",
                 JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":1,\"error\":{}}",
                 JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":1}", JSONRPC_INVALID_REQUEST},
                {"{\"jsonrpc\":\"2.0\",\"id\":\"\\u0000\",\"method\":\"p\"}", JSONRPC_PARSE_ERROR},
                {"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"p\xff\"}", JSONRPC_PARSE_ERROR},
        };
        struct jsonrpc_msg m;
        json_t *id = NULL;
        char err[256];

        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
                err[0] = '\0';
                assert_int_equal(jsonrpc_decode(cases[i].text, strlen(cases[i].text), &m, &id, err,
                                                sizeof(err)),
                                 cases[i].code);
                assert_true(err[0] != '\0');
                json_decref(id);
                id = NULL;
        }
        /* the id of a bad message is given back when it can be read */
        const char *bad = "{\"jsonrpc\":\"1.0\",\"id\":7,\"method\":\"p\"}";

        assert_int_equal(jsonrpc_decode(bad, strlen(bad), &m, &id, err, sizeof(err)),
                         JSONRPC_INVALID_REQUEST);
        assert_true(json_is_integer(id) && json_integer_value(id) == 7);
        json_decref(id);
}

static void test_schema(void **state)
{
        const struct mcp_tool *t = mcp_tool_find("wait_for_port");
        json_t *schema = json_loads(t->input_schema, 0, NULL);
        json_t *ok = json_pack("{sssssi}", "sandbox", "b", "processId", "p", "port", 8080);
        json_t *big = json_pack("{sssssi}", "sandbox", "b", "processId", "p", "port", 70000);
        json_t *str = json_pack("{sssssf}", "sandbox", "b", "processId", "p", "port", 1.5);
        json_t *extra =
                json_pack("{sssssisi}", "sandbox", "b", "processId", "p", "port", 1, "x", 1);
        json_t *missing = json_pack("{ss}", "sandbox", "b");
        char err[256];

        assert_non_null(schema);
        assert_true(schema_check(schema, ok, "arguments", err, sizeof(err)));
        assert_false(schema_check(schema, big, "arguments", err, sizeof(err)));
        assert_string_equal(err, "arguments.port: must be at most 65535");
        assert_false(schema_check(schema, str, "arguments", err, sizeof(err)));
        assert_string_equal(err, "arguments.port: must be an integer");
        assert_false(schema_check(schema, extra, "arguments", err, sizeof(err)));
        assert_string_equal(err, "arguments: unknown property \"x\"");
        assert_false(schema_check(schema, missing, "arguments", err, sizeof(err)));
        assert_string_equal(err, "arguments: missing required property \"processId\"");
        json_decref(schema);
        json_decref(ok);
        json_decref(big);
        json_decref(str);
        json_decref(extra);
        json_decref(missing);
        t = mcp_tool_find("run_code");
        schema = json_loads(t->input_schema, 0, NULL);
        ok = json_pack("{ssssss}", "sandbox", "b", "code", "1", "language", "ruby");
        assert_false(schema_check(schema, ok, "arguments", err, sizeof(err)));
        assert_string_equal(err, "arguments.language: must be one of "
                                 "[\"python\",\"javascript\",\"typescript\"]");
        json_decref(ok);
        ok = json_pack("{sss{si}}", "sandbox", "b", "env", "A", 1);
        json_decref(schema);
        schema = json_loads(mcp_tool_find("process_start")->input_schema, 0, NULL);
        assert_false(schema_check(schema, ok, "arguments", err, sizeof(err)));
        json_decref(ok);
        json_decref(schema);
}

static void test_uri(void **state)
{
        char sb[CELLA_NAME_MAX + 1], path[64];

        assert_int_equal(mcp_uri_parse("cella://box/workspace/a%20b.txt", sb, sizeof(sb), path,
                                       sizeof(path)),
                         0);
        assert_string_equal(sb, "box");
        assert_string_equal(path, "/workspace/a b.txt");
        assert_int_equal(mcp_uri_parse("cella://box/", sb, sizeof(sb), path, sizeof(path)),
                         -EINVAL);
        assert_int_equal(mcp_uri_parse("cella://Box/x", sb, sizeof(sb), path, sizeof(path)),
                         -EINVAL);
        assert_int_equal(mcp_uri_parse("file:///etc/passwd", sb, sizeof(sb), path, sizeof(path)),
                         -EINVAL);
        assert_int_equal(mcp_uri_parse("cella://box/a%00b", sb, sizeof(sb), path, sizeof(path)),
                         -EINVAL);
        assert_int_equal(mcp_uri_parse("cella://box/a%zz", sb, sizeof(sb), path, sizeof(path)),
                         -EINVAL);
        assert_int_equal(mcp_uri_parse("cella://box/a?x=1", sb, sizeof(sb), path, sizeof(path)),
                         -EINVAL);
}

/* Last-Event-ID of /mcp: what the server writes parses back; nothing else parses (and
 * leaves the outputs alone). */
static void test_event_id(void **state)
{
        static const char *const bad[] = {
                "",
                "-",
                "-1",
                "1-",
                "1-0",
                "+1",
                " 1",
                "1 ",
                "1-2-3",
                "0x10",
                "1.5",
                "abc",
                "1-a",
                "1--2",
                "1-+2",
                "٣",
                "18446744073709551616",
                "1-18446744073709551616",
                "99999999999999999999",
        };
        char buf[MCP_EVENT_ID_MAX];
        uint64_t ev = 7, st = 7;

        (void)state;
        assert_int_equal(mcp_event_id_format(buf, sizeof(buf), 12, 0), 2);
        assert_string_equal(buf, "12");
        assert_int_equal(mcp_event_id_parse(buf, &ev, &st), 0);
        assert_int_equal(ev, 12);
        assert_int_equal(st, 0);
        mcp_event_id_format(buf, sizeof(buf), UINT64_MAX, UINT64_MAX);
        assert_string_equal(buf, "18446744073709551615-18446744073709551615");
        assert_int_equal(mcp_event_id_parse(buf, &ev, &st), 0);
        assert_true(ev == UINT64_MAX && st == UINT64_MAX);
        assert_int_equal(mcp_event_id_parse("0", &ev, &st), 0);
        assert_true(ev == 0 && st == 0);
        assert_int_equal(mcp_event_id_parse("007-3", &ev, &st), 0);
        assert_true(ev == 7 && st == 3);
        for (size_t i = 0; i < ARRAY_SIZE(bad); i++) {
                ev = st = 42;
                if (mcp_event_id_parse(bad[i], &ev, &st) != -EINVAL)
                        fail_msg("accepted '%s'", bad[i]);
                assert_true(ev == 42 && st == 42);
        }
        assert_int_equal(mcp_event_id_parse(NULL, &ev, &st), -EINVAL);
}

/* ---- a session ---- */

struct sink {
        json_t *msgs;
};

static void keep(const char *text, size_t len, const json_t *related, void *ud)
{
        struct sink *s = ud;
        json_t *m = json_loadb(text, len, 0, NULL);

        assert_non_null(m);
        assert_null(memchr(text, '\n', len));
        json_array_append_new(s->msgs, m);
}

static json_t *last(struct sink *s)
{
        assert_true(json_array_size(s->msgs) > 0);
        return json_array_get(s->msgs, json_array_size(s->msgs) - 1);
}

static void say(struct mcp_server *srv, const char *text)
{
        mcp_server_handle(srv, text, strlen(text));
}

static int error_code(json_t *m)
{
        return (int)json_integer_value(json_object_get(json_object_get(m, "error"), "code"));
}

static struct mcp_server *session(struct sink *sink)
{
        struct mcp_server_options o = {.url = "http://127.0.0.1:1", .token = "t"};
        struct mcp_transport t = {.send = keep, .userdata = sink};
        struct mcp_server *srv = NULL;

        sink->msgs = json_array();
        assert_int_equal(mcp_server_new(&o, &t, &srv), 0);
        return srv;
}

static void test_initialize(void **state)
{
        struct sink sink;
        struct mcp_server *srv = session(&sink);
        json_t *r;

        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/list\"}");
        assert_int_equal(error_code(last(&sink)), JSONRPC_INVALID_REQUEST);
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}");
        assert_true(json_is_object(json_object_get(last(&sink), "result")));
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\",\"params\":{}}");
        assert_int_equal(error_code(last(&sink)), JSONRPC_INVALID_PARAMS);
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{},"
                 "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}");
        r = json_object_get(last(&sink), "result");
        assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), "2025-06-18");
        assert_string_equal(mcp_server_protocol_version(srv), "2025-06-18");
        assert_true(json_is_true(json_object_get(
                json_object_get(json_object_get(r, "capabilities"), "resources"), "subscribe")));
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-06-18\",\"capabilities\":{}}}");
        assert_int_equal(error_code(last(&sink)), JSONRPC_INVALID_REQUEST);
        say(srv, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}");
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"nope\"}");
        assert_int_equal(error_code(last(&sink)), JSONRPC_METHOD_NOT_FOUND);
        say(srv, "not json");
        assert_int_equal(error_code(last(&sink)), JSONRPC_PARSE_ERROR);
        assert_true(json_is_null(json_object_get(last(&sink), "id")));
        mcp_server_close(srv);
        json_decref(sink.msgs);

        /* an unknown revision gets the newest */
        srv = session(&sink);
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":\"i\",\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"1999-01-01\",\"capabilities\":{}}}");
        r = json_object_get(last(&sink), "result");
        assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")),
                            MCP_PROTOCOL_LATEST);
        assert_string_equal(json_string_value(json_object_get(last(&sink), "id")), "i");
        mcp_server_close(srv);
        json_decref(sink.msgs);
}

static void test_tools(void **state)
{
        struct sink sink;
        struct mcp_server *srv = session(&sink);
        json_t *tools, *t, *r, *content;
        size_t i;

        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\"}");
        tools = json_object_get(json_object_get(last(&sink), "result"), "tools");
        assert_int_equal(json_array_size(tools), mcp_ntools);
        assert_true(mcp_ntools >= 16);
        json_array_foreach(tools, i, t)
        {
                json_t *in = json_object_get(t, "inputSchema");

                assert_true(strlen(json_string_value(json_object_get(t, "description"))) > 40);
                assert_string_equal(json_string_value(json_object_get(in, "type")), "object");
                assert_true(json_is_object(json_object_get(t, "outputSchema")));
                assert_true(json_is_boolean(
                        json_object_get(json_object_get(t, "annotations"), "destructiveHint")));
        }
        /* sandbox_destroy is destructive */
        assert_true(json_is_true(json_object_get(
                json_object_get(json_array_get(tools, 2), "annotations"), "destructiveHint")));
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"nope\"}}");
        assert_int_equal(error_code(last(&sink)), JSONRPC_INVALID_PARAMS);
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"expose_port\",\"arguments\":{\"sandbox\":\"b\",\"port\":80}}}");
        assert_int_equal(error_code(last(&sink)), JSONRPC_INVALID_PARAMS);
        assert_string_equal(json_string_value(json_object_get(json_object_get(last(&sink), "error"),
                                                              "message")),
                            "arguments.port: must be at least 1024");
        /* a valid call whose daemon does not answer: a tool error, from the worker */
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"sandbox_list\",\"arguments\":{}}}");
        mcp_server_drain(srv);
        assert_int_equal(mcp_server_inflight(srv), 0);
        r = last(&sink);
        assert_int_equal(json_integer_value(json_object_get(r, "id")), 5);
        r = json_object_get(r, "result");
        assert_true(json_is_true(json_object_get(r, "isError")));
        content = json_array_get(json_object_get(r, "content"), 0);
        assert_string_equal(json_string_value(json_object_get(content, "type")), "text");
        assert_non_null(strstr(json_string_value(json_object_get(content, "text")), "UNAVAILABLE"));
        /* a bad sandbox name is a tool error that never reaches a URL */
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":6,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"file_list\",\"arguments\":{\"sandbox\":\"../x\"}}}");
        mcp_server_drain(srv);
        r = json_object_get(last(&sink), "result");
        assert_true(json_is_true(json_object_get(r, "isError")));
        assert_string_equal(
                json_string_value(json_object_get(
                        json_object_get(json_object_get(r, "_meta"), "cella/error"), "code")),
                "INVALID_SANDBOX_NAME");
        mcp_server_close(srv);
        json_decref(sink.msgs);
}

/* Every tool that names a sandbox has it checked before its handler runs (which would
 * reach the daemon through call->client: none here). */
static void test_tool_sandbox_checked(void **state)
{
        struct mcp_call call = {0};
        size_t checked = 0;

        (void)state;
        for (size_t i = 0; i < mcp_ntools; i++) {
                json_t *args, *r;

                if (strcmp(mcp_tools[i].name, "sandbox_list") == 0)
                        continue; /* the one tool about no sandbox */
                args = json_pack("{ssss}", "sandbox", "../x", "name", "Not_A_Name");
                r = mcp_tool_run(&mcp_tools[i], &call, args);
                assert_non_null(r);
                assert_true(json_is_true(json_object_get(r, "isError")));
                assert_string_equal(
                        json_string_value(json_object_get(
                                json_object_get(json_object_get(r, "_meta"), "cella/error"),
                                "code")),
                        "INVALID_SANDBOX_NAME");
                json_decref(r);
                json_decref(args);
                /* sandbox_create, sandbox_destroy and sandbox_sleep name theirs "name", as
                 * sandbox_fork names the sandbox it makes */
                args = json_pack("{ss}", "name", "Not_A_Name");
                r = mcp_tool_run(&mcp_tools[i], &call, args);
                if (strncmp(mcp_tools[i].name, "sandbox_", 8) == 0) {
                        assert_non_null(r);
                        assert_true(json_is_true(json_object_get(r, "isError")));
                        checked++;
                }
                json_decref(r);
                json_decref(args);
        }
        assert_int_equal(checked, 4);
}

/* The tool error (cella/error code) of running the tool name on args (JSON text) with no
 * daemon behind the call: the checks before any request. */
static const char *refused(const char *name, const char *args_text, char *code, size_t len)
{
        struct mcp_call call = {0};
        json_t *args = json_loads(args_text, 0, NULL), *r;

        assert_non_null(args);
        r = mcp_tool_run(mcp_tool_find(name), &call, args);
        assert_non_null(r);
        assert_true(json_is_true(json_object_get(r, "isError")));
        snprintf(code, len, "%s",
                 json_string_value(json_object_get(
                         json_object_get(json_object_get(r, "_meta"), "cella/error"), "code")));
        json_decref(r);
        json_decref(args);
        return code;
}

/* sandbox_fork checks the name of the sandbox it makes too; snapshot_delete refuses a
 * reference a URL would resolve away. Neither reaches the daemon. */
static void test_snapshot_tools_checked(void **state)
{
        char code[64];

        (void)state;
        assert_string_equal(refused("sandbox_fork", "{\"sandbox\":\"box\",\"name\":\"Not_A_Name\"}",
                                    code, sizeof(code)),
                            "INVALID_SANDBOX_NAME");
        assert_string_equal(refused("sandbox_fork", "{\"sandbox\":\"box\",\"name\":\"-x\"}", code,
                                    sizeof(code)),
                            "INVALID_SANDBOX_NAME");
        assert_string_equal(refused("snapshot_delete", "{\"snapshot\":\"..\"}", code, sizeof(code)),
                            "VALIDATION_FAILED");
        assert_string_equal(refused("snapshot_delete", "{\"snapshot\":\".\"}", code, sizeof(code)),
                            "VALIDATION_FAILED");
        assert_string_equal(refused("snapshot_list", "{\"sandbox\":\"../x\"}", code, sizeof(code)),
                            "INVALID_SANDBOX_NAME");
}

/* A daemon that takes one request and never answers: it reports the request through a
 * pipe, then waits for the client to close the connection. */
struct silent {
        int lfd, seen[2];
        bool eof;
};

static void *silent_main(void *arg)
{
        struct silent *sv = arg;
        char buf[4096];
        size_t got = 0;
        bool told = false;
        int fd = accept(sv->lfd, NULL, NULL);

        if (fd < 0)
                return NULL;
        for (;;) {
                ssize_t n = read(fd, buf + got, sizeof(buf) - 1 - got);

                if (n <= 0) {
                        sv->eof = n == 0;
                        break;
                }
                got += (size_t)n;
                buf[got] = '\0';
                if (!told && strstr(buf, "\r\n\r\n")) {
                        told = write(sv->seen[1], "r", 1) == 1;
                        got = 0; /* the rest (the body) is not looked at */
                }
                if (got >= sizeof(buf) - 1)
                        got = 0;
        }
        close(fd);
        return NULL;
}

static void *drain_main(void *arg)
{
        mcp_server_drain(arg);
        return NULL;
}

/* notifications/cancelled ends a run_code whose daemon stays silent at once (its
 * connection is closed, which is how cellad learns to interrupt the run), with no answer. */
static void test_cancel_silent(void **state)
{
        struct silent sv = {0};
        struct sockaddr_in a = {.sin_family = AF_INET};
        socklen_t alen = sizeof(a);
        char url[64], ch;
        struct mcp_server_options o = {.url = url, .token = "t"};
        struct sink sink = {.msgs = json_array()};
        struct mcp_transport t = {.send = keep, .userdata = &sink};
        struct mcp_server *srv = NULL;
        pthread_t th, drain;
        struct timespec deadline;
        json_t *m;
        size_t i;

        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        sv.lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(sv.lfd >= 0);
        assert_int_equal(bind(sv.lfd, (struct sockaddr *)&a, sizeof(a)), 0);
        assert_int_equal(listen(sv.lfd, 1), 0);
        assert_int_equal(getsockname(sv.lfd, (struct sockaddr *)&a, &alen), 0);
        assert_int_equal(pipe2(sv.seen, O_CLOEXEC), 0);
        snprintf(url, sizeof(url), "http://127.0.0.1:%d", ntohs(a.sin_port));
        assert_int_equal(pthread_create(&th, NULL, silent_main, &sv), 0);
        assert_int_equal(mcp_server_new(&o, &t, &srv), 0);
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{}}}");
        say(srv, "{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"run_code\",\"arguments\":{\"sandbox\":\"box\","
                 "\"code\":\"import time; time.sleep(100)\"}}}");
        assert_int_equal(read(sv.seen[0], &ch, 1), 1); /* the run is at the daemon */
        say(srv, "{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                 "\"params\":{\"requestId\":7}}");
        /* a generous bound: without the interrupt the call would wait for ever */
        assert_int_equal(pthread_create(&drain, NULL, drain_main, srv), 0);
        clock_gettime(CLOCK_REALTIME, &deadline);
        deadline.tv_sec += 60;
        assert_int_equal(pthread_timedjoin_np(drain, NULL, &deadline), 0);
        assert_int_equal(mcp_server_inflight(srv), 0);
        assert_int_equal(pthread_timedjoin_np(th, NULL, &deadline), 0);
        assert_true(sv.eof); /* the daemon saw the connection end */
        json_array_foreach(sink.msgs, i, m)
                assert_false(json_integer_value(json_object_get(m, "id")) == 7);
        mcp_server_close(srv);
        json_decref(sink.msgs);
        close(sv.lfd);
        close(sv.seen[0]);
        close(sv.seen[1]);
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_decode_kinds),
                cmocka_unit_test(test_decode_faults),
                cmocka_unit_test(test_schema),
                cmocka_unit_test(test_uri),
                cmocka_unit_test(test_event_id),
                cmocka_unit_test(test_initialize),
                cmocka_unit_test(test_tools),
                cmocka_unit_test(test_snapshot_tools_checked),
                cmocka_unit_test(test_tool_sandbox_checked),
                cmocka_unit_test(test_cancel_silent),
        };
        return cmocka_run_group_tests(tests, NULL, NULL);
}
