/* The services beneath the API's handlers (docs/architecture.md, "The daemon's API"):
 * struct api as handlers see it, finding a request's sandbox, calls and streams on its
 * agent (api-call.c, api-op.c), SSE and buffered output (api-sse.c), and answering
 * (api-service.c). Handlers (api-exec.c, api-files.c, ... api-ports.c) include this and
 * api-handlers.h; never api.h or the route table, which sit above them. */
#ifndef CELLA_DAEMON_API_SERVICE_H
#define CELLA_DAEMON_API_SERVICE_H

#include "common/limits.h"
#include "daemon/api-config.h"
#include "daemon/http.h"
#include "daemon/preview.h"
#include "daemon/sandbox.h"

struct api {
        struct api_config cfg;
        struct preview_config preview;
        json_t *images_busy;             /* names being built or imported (api-images.c) */
        struct auth_limiter *auth_fails; /* failed authentications per client address */
};

/* What the route table (api-routes.c) captured and the dispatcher checked, for a handler:
 * pointers into the request's path or the dispatcher's buffers, valid during the call. */
struct api_args {
        const char *name; /* {id}: the sandbox's name, checked (normalizeId applied); {image}:
                             the image's name (at most CELLA_NAME_MAX) */
        const char *raw;  /* {id} as sent (raw_len bytes, not NUL-terminated): PUT
                             /v1/sandboxes/{id} checks it after the body */
        size_t raw_len;
        bool normalize;    /* ?normalizeId= */
        const char *param; /* {pid}, {sid}, {cid}: a valid id (cella_id_is_valid) */
        int port;          /* {port}: 1..CELLA_PORT_MAX */
        const char *tail;  /* /ws/{port}...: what follows the port ("" or "/...") */
};

/* A route's handler: the method and parameters are checked, the request is its to answer. */
typedef void (*api_handler)(struct api *a, struct http_request *req, const struct api_args *p);

/* The sandbox named name, created if needed, running, with an agent link, marked active;
 * borrowed (sandbox_ref() to keep it). NULL after answering req with the error. */
struct sandbox *api_sandbox_for(struct api *a, struct http_request *req, const char *name);

/* One call on the sandbox's agent: open a stream of type with payload (borrowed), and when
 * it ends call done with the RESULT object (borrowed) or the error (err, and the agent's
 * ERROR payload when it sent one, both borrowed). req is NULL when the client went away
 * (done must then only release ud). Returns 0, or -1 after answering req with the error
 * (done is then not called). */
typedef void (*api_call_done)(struct http_request *req, json_t *result,
                              const struct cella_error *err, json_t *error_payload, void *ud);
int api_agent_call(struct http_request *req, struct sandbox *sb, uint8_t type, json_t *payload,
                   api_call_done done, void *ud);
/* An EXEC (type FRAME_EXEC) through api_agent_call answers {exitCode, timedOut, stdout,
 * stderr} when the command ended: its output kept up to CELLA_CALL_MAX_OUTPUT bytes per
 * stream (as api_output_json() gives it), for commands the daemon runs on its own behalf. */

/* api-sse.c: output of an agent stream to an HTTP client. The owner embeds the struct and
 * sets req/stream (borrowed; NULL once finished/closed) and hold/release (a reference on
 * the owner per SSE write in flight). */
struct api_sse {
        struct http_request *req;
        struct agent_stream *stream;
        struct buf carry[2];  /* incomplete UTF-8 tail of stdout, stderr */
        const char *data_key; /* the output events' text field; NULL: "data" */
        void (*hold)(void *owner);
        void (*release)(void *owner);
        void *owner;
};
/* Send event ev (consumed; a timestamp is added); `ack` data bytes of agent credit are
 * returned once the client took it. */
void api_sse_event(struct api_sse *o, json_t *ev, size_t ack);
/* stdout (0) / stderr (1) bytes as {type, data} events, never splitting a UTF-8 character
 * (flush: send what is held); bytes that are not UTF-8 go as base64 with encoding. */
void api_sse_output(struct api_sse *o, int which, const uint8_t *data, size_t len, bool flush);
void api_sse_done(struct api_sse *o);
/* The call failed: with sse, an {type: error} event and the end of the stream; without,
 * the error response. */
void api_sse_fail(struct api_sse *o, bool sse, const struct cella_error *e);
/* The agent stream closed before its answer (err: -errno): SANDBOX_UNAVAILABLE as above. */
void api_sse_agent_lost(struct api_sse *o, bool sse, int err);
/* Output as a JSON string when it is UTF-8, else base64 (*ret_b64 set). New reference. */
json_t *api_output_json(const struct buf *b, bool *ret_b64);

/* Buffered output of a command (stdout, stderr) for a JSON answer, counted in the daemon's
 * budget: the first CELLA_EXEC_BUFFER_RESERVE bytes of each stream whatever the budget
 * (an echo is never starved by another tenant's bulk output), more while the budget has
 * room and the stream is under its cap; beyond that the rest of the stream is dropped and
 * truncated is set. The answer is written by api_outbuf_respond(), escaped piece by piece
 * as the client takes it, so a buffer is never copied whole into a JSON string. */
struct api_outbuf {
        struct buf out[2];
        bool truncated[2];
        size_t counted[2];         /* bytes of out[i] counted in budget */
        struct mem_budget *budget; /* borrowed; NULL: not counted */
};
void api_outbuf_add(struct api_outbuf *ob, int which, const void *data, size_t len, size_t cap);
/* The JSON placeholder of stream which (new reference), to put in the answer's document
 * where the output goes; *ret_b64 tells whether it will be written as base64 (it is not
 * UTF-8). api_outbuf_respond() writes the output in its place. */
json_t *api_outbuf_marker(const struct api_outbuf *ob, int which, bool *ret_b64);
/* obj.stdout / obj.stderr as markers, with stdoutEncoding/stderrEncoding: "base64" when
 * so and truncated: true when either stream was cut. */
void api_outbuf_set(const struct api_outbuf *ob, json_t *obj);
/* Answer req with status and doc (borrowed), the markers replaced by the output. The
 * buffers move to the answer (ob is left empty) and are let go as they are written; the
 * answer is chunked and paced by the client's socket. */
int api_outbuf_respond(struct http_request *req, int status, json_t *doc, struct api_outbuf *ob);
void api_outbuf_done(struct api_outbuf *ob);

/* api-op.c: a request answered from one agent stream (exec, processes, file watch, code
 * runs). The route's struct begins with a struct api_op. Refcounted: one reference while
 * the request body is read (dropped by the body callback with api_op_unref), one for the
 * agent stream (taken by api_op_open, dropped by api_op_on_close), one per SSE write in
 * flight (io.hold/io.release). */
struct api_op {
        unsigned refs;
        struct api *api;
        char name[CELLA_NAME_MAX + 1]; /* the sandbox's */
        struct api_sse io;  /* io.req referenced until the response ended or the client left */
        struct sandbox *sb; /* referenced once found (the route sets it) */
        bool sse_begun;     /* the answer is an SSE stream already */
        bool finished;      /* response given */
        void (*free)(struct api_op *op); /* the route's own fields; then the op is freed */
};
/* A new op of size bytes (the route's struct, zeroed; the body read's reference), or NULL
 * without memory. */
struct api_op *api_op_new(struct api *a, const char *name, size_t size,
                          void (*free_fn)(struct api_op *op));
/* Read the request's JSON body into body(req, body, len, op); failures (op NULL included)
 * are answered here. */
void api_op_read_body(struct api_op *op, struct http_request *req, http_body_cb body);
void api_op_unref(struct api_op *op);
/* The response is given (or the client left): req is let go. */
void api_op_finish(struct api_op *op);
/* The request's sandbox (a reference kept in op->sb); false after answering req. */
bool api_op_find_sandbox(struct api_op *op, struct http_request *req);
/* A copy of the sandbox's env (new reference), for a payload's baseEnv. */
json_t *api_op_base_env(const struct api_op *op);
/* Open the agent stream (payload not consumed; ops' userdata is op) and keep req, whose
 * client leaving cancels the stream; -1 after answering req. */
int api_op_open(struct api_op *op, struct http_request *req, uint8_t type, json_t *payload,
                const struct agent_stream_ops *ops);
/* The agent stream's on_close for every op: SANDBOX_UNAVAILABLE unless answered, then the
 * stream's reference goes. */
void api_op_on_close(struct agent_stream *s, int err, void *userdata);

/* Helpers */
void api_timestamp(char out[32]);
/* Answer from an agent ERROR frame payload. */
void api_respond_agent_error(struct http_request *req, const struct frame *f);
/* Fill err from an agent ERROR frame payload. */
void api_agent_error(const struct frame *f, struct cella_error *err);
bool api_wants_sse(const struct http_request *req);

#endif
