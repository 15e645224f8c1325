/* The request object (api-req.h, decision 0042): one lifetime for an HTTP request that
 * talks to a sandbox's agent, and the one conversion of the agent's end (RESULT, EXIT,
 * ERROR, the stream lost) to an answer. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/api-req.h"
#include "daemon/metrics.h"

/* ---- lifetime ---- */

static unsigned live; /* requests not yet freed (read by tests from another thread) */

unsigned api_req_live(void)
{
        return __atomic_load_n(&live, __ATOMIC_RELAXED);
}

void api_req_ref(struct api_req *r)
{
        r->refs++;
}

void api_req_finish(struct api_req *r)
{
        r->finished = true;
        if (r->http) {
                http_request_on_abort(r->http, NULL, NULL);
                http_request_unref(r->http);
                r->http = NULL;
        }
        if (r->writer)
                r->writer->http = NULL;
}

void api_req_unref(struct api_req *r)
{
        if (--r->refs > 0)
                return;
        api_req_finish(r);
        if (r->writer) {
                r->writer->stream = NULL;
                api_sse_unref(r->writer);
        }
        sandbox_unref(r->sb);
        api_outbuf_done(&r->out);
        if (r->ops->free)
                r->ops->free(r);
        free(r);
        __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
}

/* The client went away: whatever the request was doing ends here, and the agent stream is
 * cancelled (the agent stops what it does for it). */
static void on_abort(struct http_request *http, void *ud)
{
        struct api_req *r = ud;
        bool reading = r->reading;

        (void)http;
        api_req_ref(r);
        r->reading = false;
        api_req_finish(r);
        if (r->stream)
                agent_stream_cancel(r->stream);
        if (reading)
                api_req_unref(r); /* the body read's: its callback will not come */
        api_req_unref(r);
}

struct api_req *api_req_new(struct api *a, struct http_request *http, const char *name, size_t size,
                            const struct api_req_ops *ops)
{
        struct api_req *r = calloc(1, size);

        if (!r) {
                http_respond_code(http, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        __atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
        r->refs = 1;
        r->api = a;
        r->ops = ops;
        r->frames_wake = true;
        snprintf(r->name, sizeof(r->name), "%s", name);
        if (!ops->frame)
                r->out.cap = CELLA_CALL_MAX_OUTPUT; /* an agent call's EXEC */
        r->http = http;
        http_request_ref(http);
        http_request_on_abort(http, on_abort, r);
        return r;
}

static void body_read(struct http_request *http, const char *body, size_t len, void *ud)
{
        struct api_req *r = ud;

        (void)http;
        r->reading = false;
        r->in_body = true;
        r->cur_body = body;
        r->cur_len = len;
        r->body(r, body, len);
        r->in_body = false;
        api_req_unref(r); /* the body read's */
}

void api_req_read_body(struct api_req *r, size_t limit,
                       void (*body)(struct api_req *r, const char *body, size_t len))
{
        r->body = body;
        r->reading = true;
        if (http_request_read_body(r->http, limit, body_read, r) < 0) {
                r->reading = false;
                http_respond_code(r->http, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                api_req_unref(r);
        }
}

void api_req_run(struct api_req *r, void (*step)(struct api_req *r))
{
        r->step = step;
        step(r);
}

/* The sandbox is there (sb), or its failure is answered or the client left (NULL). Inside
 * api_req_find_sandbox's call (a running sandbox, an error), only the result is kept;
 * after a start, the part that asked runs again. */
static void sandbox_ready(struct http_request *http, struct sandbox *sb, void *ud)
{
        struct api_req *r = ud;
        struct cella_error err = {0};

        (void)http;
        if (sb) {
                sandbox_ref(sb);
                r->sb = sb;
        }
        r->waiting = false;
        if (r->finding)
                return;
        if (!r->sb || r->finished || !r->http) {
                api_req_finish(r);
        } else if (r->kept) {
                r->in_body = true;
                r->body(r, r->kept, r->cur_len);
                r->in_body = false;
        } else if (r->lost_body) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                api_req_fail(r, &err, NULL);
        } else if (r->step) {
                r->step(r);
        } else if (r->open_payload) {
                api_req_open(r, r->open_type, r->open_payload);
        }
        free(r->kept);
        r->kept = NULL;
        json_decref(r->open_payload);
        r->open_payload = NULL;
        api_req_unref(r); /* the wait's */
}

/* api_req_find_sandbox, with the open to make again (payload NULL: none). */
static bool find_sandbox(struct api_req *r, uint8_t type, json_t *payload)
{
        if (r->sb)
                return true;
        if (!r->http || r->waiting)
                return false;
        r->finding = true;
        r->waiting = true; /* until sandbox_ready */
        r->refs++;         /* the wait's */
        api_sandbox_for(r->api, r->http, r->name, &r->wait, sandbox_ready, r);
        r->finding = false;
        if (!r->waiting) {
                /* answered inside the call: running, or the failure answered */
                r->refs--; /* the caller holds one too */
                if (!r->sb)
                        api_req_finish(r);
                return r->sb != NULL;
        }
        /* The sandbox starts or wakes off the loop: keep what runs again. */
        if (r->in_body) {
                r->kept = malloc(r->cur_len + 1);
                if (r->kept) {
                        memcpy(r->kept, r->cur_body, r->cur_len);
                        r->kept[r->cur_len] = '\0';
                } else {
                        r->lost_body = true;
                }
        } else if (!r->step && payload) {
                r->open_type = type;
                r->open_payload = json_incref(payload);
        }
        return false;
}

bool api_req_find_sandbox(struct api_req *r)
{
        return find_sandbox(r, 0, NULL);
}

json_t *api_req_base_env(const struct api_req *r)
{
        json_t *env = sandbox_env(r->sb);

        return env ? json_deep_copy(env) : json_object();
}

/* ---- the agent stream ---- */

static void call_frame(struct api_req *r, const struct frame *f);

static void on_frame(struct agent_stream *s, const struct frame *f, void *ud)
{
        struct api_req *r = ud;

        (void)s;
        api_req_ref(r);
        if (r->sb && r->frames_wake)
                sandbox_touch(r->sb);
        if (r->ops->frame)
                r->ops->frame(r, f);
        else
                call_frame(r, f);
        if (f->type == FRAME_ERROR)
                api_req_finish(r); /* an ERROR ends the stream, answered or not */
        api_req_unref(r);
}

static void on_writable(struct agent_stream *s, void *ud)
{
        struct api_req *r = ud;

        (void)s;
        if (!r->ops->writable)
                return;
        api_req_ref(r);
        r->ops->writable(r);
        api_req_unref(r);
}

static void on_close(struct agent_stream *s, int err, void *ud)
{
        struct api_req *r = ud;

        (void)s;
        r->stream = NULL;
        if (r->writer)
                r->writer->stream = NULL;
        if (r->ops->closed)
                r->ops->closed(r, err);
        else if (!r->finished)
                api_req_lost(r, err);
        api_req_finish(r);
        api_req_unref(r); /* the stream's */
}

static const struct agent_stream_ops req_stream_ops = {on_frame, on_writable, on_close};

int api_req_open(struct api_req *r, uint8_t type, json_t *payload)
{
        struct cella_error err = {0};

        if (!find_sandbox(r, type, payload))
                return -1;
        if (!payload) {
                cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
        } else if (!sandbox_agent(r->sb)) {
                cella_error_set(&err, CELLA_E_SANDBOX_UNAVAILABLE,
                                "sandbox '%s' has no agent connection", sandbox_name(r->sb));
        } else {
                r->refs++; /* the stream's */
                if (agent_conn_open(sandbox_agent(r->sb), type, payload, &req_stream_ops, r,
                                    &r->stream, &err) == 0)
                        return 0;
                r->refs--;
        }
        if (r->http)
                http_respond_error(r->http, &err, NULL);
        api_req_finish(r);
        return -1;
}

/* ---- answering ---- */

void api_req_respond_json(struct api_req *r, int status, json_t *doc)
{
        if (r->finished || !r->http)
                return;
        if (doc)
                http_respond_json(r->http, status, doc);
        else
                http_respond_code(r->http, CELLA_E_INTERNAL_ERROR, "out of memory");
        api_req_finish(r);
}

void api_req_respond_output(struct api_req *r, int status, json_t *doc)
{
        if (r->finished || !r->http)
                return;
        if (doc)
                api_outbuf_respond(r->http, status, doc, &r->out);
        else
                http_respond_code(r->http, CELLA_E_INTERNAL_ERROR, "out of memory");
        api_req_finish(r);
}

static void flush_output(struct api_req *r)
{
        api_sse_output(r->writer, 0, NULL, 0, true);
        api_sse_output(r->writer, 1, NULL, 0, true);
}

void api_req_fail(struct api_req *r, const struct cella_error *e, json_t *ev)
{
        if (r->finished || !r->http) {
                json_decref(ev);
                return;
        }
        if (r->begun && r->writer) {
                if (ev)
                        flush_output(r); /* a route's event ends the run's own output */
                else
                        ev = json_pack("{s:s, s:s, s:s}", "type", "error", "error", e->msg, "code",
                                       cella_code_name(e->code));
                metrics_error(e->code);
                http_request_error_view(r->http, ev);
                api_sse_event(r->writer, ev, 0);
                if (r->http)
                        http_response_end(r->http);
        } else if (http_request_status(r->http) != 0) {
                /* mid-body: the client must not take a short body for a whole one */
                json_decref(ev);
                http_request_close(r->http);
        } else {
                json_decref(ev);
                http_respond_error(r->http, e, NULL);
        }
        api_req_finish(r);
}

void api_req_fail_frame(struct api_req *r, const struct frame *f)
{
        struct cella_error e = {0};

        api_agent_error(f, &e);
        api_req_fail(r, &e, NULL);
}

void api_req_lost(struct api_req *r, int err)
{
        struct cella_error e = {0};

        cella_error_set(&e, CELLA_E_SANDBOX_UNAVAILABLE, "the sandbox's agent went away (%s)",
                        strerror(-err));
        api_req_fail(r, &e, NULL);
}

/* ---- output ---- */

void api_req_begin_sse(struct api_req *r)
{
        if (r->begun || r->finished || !r->http)
                return;
        r->writer = api_sse_new(r->http, r->stream, r->data_key);
        if (!r->writer) {
                http_respond_code(r->http, CELLA_E_INTERNAL_ERROR, "out of memory");
                api_req_finish(r);
                if (r->stream)
                        agent_stream_cancel(r->stream);
                return;
        }
        r->begun = true;
        http_response_begin_sse(r->http);
}

void api_req_event(struct api_req *r, json_t *ev, size_t ack)
{
        if (r->mode == API_REQ_SSE)
                api_req_begin_sse(r);
        if (r->writer) {
                api_sse_event(r->writer, ev, ack);
                return;
        }
        json_decref(ev);
        if (r->stream && ack)
                agent_stream_ack(r->stream, ack);
}

void api_req_output(struct api_req *r, int which, const uint8_t *data, size_t len)
{
        metrics_bytes(which ? METRICS_BYTES_STDERR : METRICS_BYTES_STDOUT, len);
        if (r->mode == API_REQ_SSE && !r->finished) {
                api_req_begin_sse(r);
                if (r->writer) {
                        api_sse_output(r->writer, which, data, len, false);
                        return;
                }
        }
        if (!r->finished)
                api_outbuf_add(&r->out, which, data, len);
        if (r->stream)
                agent_stream_ack(r->stream, len);
}

void api_req_end_sse(struct api_req *r, json_t *ev)
{
        if (!r->finished)
                api_req_begin_sse(r);
        if (r->finished || !r->writer) {
                json_decref(ev);
                api_req_finish(r);
                return;
        }
        flush_output(r);
        api_sse_event(r->writer, ev, 0);
        if (r->http)
                http_response_end(r->http);
        api_req_finish(r);
}

int api_req_write(struct api_req *r, const void *data, size_t len)
{
        if (r->http && !r->writer)
                r->writer = api_sse_new(r->http, r->stream, NULL);
        if (!r->http || !r->writer) {
                if (r->stream)
                        agent_stream_ack(r->stream, len);
                return -1;
        }
        return api_sse_write(r->writer, data, len, len);
}

/* ---- the agent's EXIT and ERROR ---- */

void api_exit_parse(const struct frame *f, struct api_exit *x)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        int timed_out = 0;

        x->code = -1;
        x->timeout_ms = -1;
        if (j)
                json_unpack(j, "{s?I, s?b, s?I}", "exitCode", &x->code, "timedOut", &timed_out,
                            "timeoutMs", &x->timeout_ms);
        x->timed_out = timed_out;
        json_decref(j);
}

bool api_error_parse(const struct frame *f, struct cella_error *e, json_int_t *ret_exit_code)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        json_t *v = json_object_get(j, "exitCode");
        bool has = json_is_integer(v);

        api_agent_error(f, e);
        if (ret_exit_code)
                *ret_exit_code = has ? json_integer_value(v) : -1;
        json_decref(j);
        return has;
}

/* ---- an agent call: one answer ---- */

static void call_result(struct api_req *r, json_t *result)
{
        if (r->ops->result)
                r->ops->result(r, result);
        api_req_finish(r);
}

static void call_failed(struct api_req *r, const struct cella_error *e)
{
        if (r->ops->failed)
                r->ops->failed(r, e);
        api_req_fail(r, e, NULL);
}

/* An EXEC's EXIT as the call's answer: {exitCode, timedOut, stdout, stderr}. */
static void call_exit(struct api_req *r, const struct frame *f)
{
        struct api_exit x;
        bool b64;
        json_t *so = api_output_json(&r->out.out[0], &b64);
        json_t *se = api_output_json(&r->out.out[1], &b64);
        json_t *res;

        api_exit_parse(f, &x);
        res = json_pack("{s:I, s:b, s:o, s:o}", "exitCode", x.code, "timedOut", x.timed_out,
                        "stdout", so ? so : json_string(""), "stderr", se ? se : json_string(""));
        if (res) {
                call_result(r, res);
        } else {
                struct cella_error e = {0};

                cella_error_set(&e, CELLA_E_INTERNAL_ERROR, "out of memory");
                call_failed(r, &e);
        }
        json_decref(res);
}

static void call_frame(struct api_req *r, const struct frame *f)
{
        if (frame_type_is_data(f->type)) {
                if (f->type == FRAME_STDOUT || f->type == FRAME_STDERR)
                        api_req_output(r, f->type == FRAME_STDERR, f->payload, f->len);
                else if (r->stream)
                        agent_stream_ack(r->stream, f->len);
                return;
        }
        if (r->finished)
                return;
        if (f->type == FRAME_EXIT) {
                call_exit(r, f);
        } else if (f->type == FRAME_RESULT) {
                json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);

                if (json_is_object(j)) {
                        call_result(r, j);
                } else {
                        struct cella_error e = {0};

                        cella_error_set(&e, CELLA_E_INTERNAL_ERROR,
                                        "the sandbox's agent sent a malformed answer");
                        call_failed(r, &e);
                }
                json_decref(j);
        } else if (f->type == FRAME_ERROR) {
                struct cella_error e = {0};

                api_agent_error(f, &e);
                call_failed(r, &e);
        }
}
