/* The dispatcher's frame table (src/agent/agent.c, src/agent/dispatch.h): a route for
 * exactly the frame types agent_request_decode accepts, the stream-opening types routed to
 * their handlers' entry points, the frames on open streams to the streams' ops. The same
 * table is driven end to end through a running agent in test-agent-live.c
 * (test_frame_table). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "agent/code.h"
#include "agent/dispatch.h"
#include "agent/files.h"
#include "agent/proc.h"
#include "agent/pty.h"
#include "agent/request.h"
#include "agent/session.h"
#include "agent/watch.h"
#include "common/proto.h"

/* Decode a minimal frame of type (stream 0 for the stream-0 frames, a valid WINDOW
 * length) and return the result: 0, -EINVAL (a request that is invalid but well formed)
 * or -EPROTO. */
static int decode_minimal(uint8_t type)
{
        static const uint8_t credit[4] = {0, 0, 16, 0};
        struct agent_request req;
        struct cella_error err = {0};
        struct frame f = {.type = type, .stream = 1};
        int r;

        if (type == FRAME_PING || type == FRAME_PONG || type == FRAME_HELLO ||
            type == FRAME_CHECKPOINT)
                f.stream = 0;
        if (type == FRAME_WINDOW) {
                f.payload = credit;
                f.len = sizeof(credit);
        }
        r = agent_request_decode(&f, &req, &err);
        agent_request_done(&req);
        return r;
}

/* A route for every type the decoder lets through, none for the others. */
static void test_routes_match_decoder(void **state)
{
        (void)state;
        for (unsigned t = 0; t < 256; t++) {
                const struct frame_route *route = agent_frame_route((uint8_t)t);
                int r = decode_minimal((uint8_t)t);

                if (t >= _FRAME_TYPE_MAX) {
                        assert_null(route);
                        continue;
                }
                if ((r == -EPROTO) != (route == NULL))
                        fail_msg("frame type %u: decode %d, route %p", t, r, (void *)route);
                if (!route)
                        continue;
                /* exactly one kind of route, except PTY: it opens a stream or resizes one */
                assert_int_equal(route->open != NULL, agent_request_opens_stream((uint8_t)t));
                assert_int_equal(route->control != NULL,
                                 t == FRAME_PING || t == FRAME_PONG || t == FRAME_CHECKPOINT);
                assert_int_equal(route->on_stream != NULL,
                                 t == FRAME_WINDOW || t == FRAME_CANCEL || t == FRAME_DATA ||
                                         t == FRAME_END || t == FRAME_PTY);
                if (route->control)
                        assert_true(!route->open && !route->on_stream);
        }
}

/* The stream-opening types go to their handlers' entry points (EXEC to the dispatcher's
 * choice between a session's shell and a command of its own, tested live). */
static void test_open_routes(void **state)
{
        (void)state;
        assert_ptr_equal(agent_frame_route(FRAME_FILE_READ)->open, file_read_start);
        assert_ptr_equal(agent_frame_route(FRAME_FILE_WRITE)->open, file_write_start);
        assert_ptr_equal(agent_frame_route(FRAME_FILE_OP)->open, file_op_run);
        assert_ptr_equal(agent_frame_route(FRAME_SESSION)->open, session_request);
        assert_ptr_equal(agent_frame_route(FRAME_PROC)->open, proc_request);
        assert_ptr_equal(agent_frame_route(FRAME_CODE)->open, code_request);
        assert_ptr_equal(agent_frame_route(FRAME_WATCH)->open, watch_start);
        assert_ptr_equal(agent_frame_route(FRAME_PTY)->open, pty_open);
        assert_non_null(agent_frame_route(FRAME_EXEC)->open);
        /* frames the agent sends and never receives have no route */
        assert_null(agent_frame_route(FRAME_HELLO));
        assert_null(agent_frame_route(FRAME_STARTED));
        assert_null(agent_frame_route(FRAME_RESULT));
        assert_null(agent_frame_route(FRAME_ERROR));
}

int main(void)
{
        const struct CMUnitTest tests[] = {
                cmocka_unit_test(test_routes_match_decoder),
                cmocka_unit_test(test_open_routes),
        };

        return cmocka_run_group_tests(tests, NULL, NULL);
}
