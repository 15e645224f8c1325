/* One request/answer call on a sandbox's agent (api-service.h: api_agent_call). An EXEC
 * call's output is kept (CELLA_CALL_MAX_OUTPUT bytes per stream) and its EXIT becomes the
 * answer {exitCode, timedOut, stdout, stderr}. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/api-service.h"

struct agent_call {
        struct http_request *req; /* referenced; NULL once the client left */
        struct sandbox *sb;       /* referenced */
        struct agent_stream *stream;
        api_call_done done;
        void *ud;
        bool answered;
        struct buf out[2]; /* an EXEC's stdout, stderr */
};

static void call_free(struct agent_call *c)
{
        if (c->req) {
                http_request_on_abort(c->req, NULL, NULL);
                http_request_unref(c->req);
        }
        sandbox_unref(c->sb);
        buf_free(&c->out[0]);
        buf_free(&c->out[1]);
        free(c);
}

static void call_answer(struct agent_call *c, json_t *result, const struct cella_error *err,
                        json_t *error_payload)
{
        if (c->answered)
                return;
        c->answered = true;
        if (c->req)
                c->done(c->req, result, err, error_payload, c->ud);
        else
                c->done(NULL, NULL, NULL, NULL, c->ud); /* the client left: release ud */
}

/* An EXEC's EXIT as the call's answer. */
static void on_exit_frame(struct agent_call *c, const struct frame *f)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        json_int_t code = -1;
        int timed_out = 0;
        bool b64;
        json_t *so = api_output_json(&c->out[0], &b64);
        json_t *se = api_output_json(&c->out[1], &b64);
        json_t *r;

        if (j)
                json_unpack(j, "{s?I, s?b}", "exitCode", &code, "timedOut", &timed_out);
        json_decref(j);
        r = json_pack("{s:I, s:b, s:o, s:o}", "exitCode", code, "timedOut", timed_out, "stdout",
                      so ? so : json_string(""), "stderr", se ? se : json_string(""));
        if (r) {
                call_answer(c, r, NULL, NULL);
        } else {
                struct cella_error e = {0};

                cella_error_set(&e, CELLA_E_INTERNAL_ERROR, "out of memory");
                call_answer(c, NULL, &e, NULL);
        }
        json_decref(r);
}

static void on_frame(struct agent_stream *s, const struct frame *f, void *userdata)
{
        struct agent_call *c = userdata;

        if (c->sb)
                sandbox_touch(c->sb);
        if (f->type == FRAME_STDOUT || f->type == FRAME_STDERR) {
                struct buf *b = &c->out[f->type == FRAME_STDERR];
                size_t room = CELLA_CALL_MAX_OUTPUT - MIN(b->len, CELLA_CALL_MAX_OUTPUT);
                size_t n = MIN(room, (size_t)f->len);

                if (n && !c->answered)
                        buf_append(b, f->payload, n); /* best effort: output is a diagnostic */
                agent_stream_ack(s, f->len);
        } else if (f->type == FRAME_EXIT) {
                on_exit_frame(c, f);
        } else if (f->type == FRAME_RESULT) {
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);

                if (json_is_object(j)) {
                        call_answer(c, j, NULL, NULL);
                } else {
                        struct cella_error e = {0};

                        cella_error_set(&e, CELLA_E_INTERNAL_ERROR,
                                        "the sandbox's agent sent a malformed answer");
                        call_answer(c, NULL, &e, NULL);
                }
                json_decref(j);
        } else if (f->type == FRAME_ERROR) {
                struct cella_error e = {0};
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);

                api_agent_error(f, &e);
                call_answer(c, NULL, &e, json_is_object(j) ? j : NULL);
                json_decref(j);
        }
}

static void on_close(struct agent_stream *s, int err, void *userdata)
{
        struct agent_call *c = userdata;

        (void)s;
        c->stream = NULL;
        if (!c->answered) {
                struct cella_error e = {0};

                cella_error_set(&e, CELLA_E_SANDBOX_UNAVAILABLE,
                                "the sandbox's agent went away (%s)", strerror(-err));
                call_answer(c, NULL, &e, NULL);
        }
        call_free(c);
}

static const struct agent_stream_ops call_ops = {on_frame, NULL, on_close};

static void on_abort(struct http_request *req, void *ud)
{
        struct agent_call *c = ud;

        http_request_unref(req);
        c->req = NULL;
        if (c->stream)
                agent_stream_cancel(c->stream);
}

int api_agent_call(struct http_request *req, struct sandbox *sb, uint8_t type, json_t *payload,
                   api_call_done done, void *ud)
{
        struct cella_error err = {0};
        struct agent_call *c = calloc(1, sizeof(*c));
        struct agent_conn *conn = sandbox_agent(sb);

        if (!c || !payload || !conn) {
                free(c);
                if (!conn)
                        http_respond_code(req, CELLA_E_SANDBOX_UNAVAILABLE,
                                          "sandbox '%s' has no agent connection", sandbox_name(sb));
                else
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -1;
        }
        c->done = done;
        c->ud = ud;
        c->sb = sb;
        sandbox_ref(sb);
        if (agent_conn_open(conn, type, payload, &call_ops, c, &c->stream, &err) < 0) {
                sandbox_unref(sb);
                free(c);
                http_respond_error(req, &err, NULL);
                return -1;
        }
        c->req = req;
        http_request_ref(req);
        http_request_on_abort(req, on_abort, c);
        return 0;
}
