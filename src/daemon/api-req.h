/* One request object per HTTP request that talks to a sandbox's agent (decision 0042),
 * after h2o's h2o_req_t: the HTTP request, the sandbox, the agent stream, the output mode
 * (buffered JSON, SSE, raw bytes), the output collector and the SSE/raw writer, with one
 * lifetime. Every route that talks to the agent (api-exec.c, api-sessions.c, api-code.c,
 * api-processes.c, api-files.c, api-git.c, api-watch.c, api-pty.c) builds its own struct
 * on a struct api_req (first member) and says what it adds through a struct api_req_ops.
 *
 * Beneath the handlers, above api-service.h: handlers include this; this never includes a
 * handler. The writer and the collector (api-sse.c) know nothing of the request: the
 * request drives them, nothing calls back into it. */
#ifndef CELLA_DAEMON_API_REQ_H
#define CELLA_DAEMON_API_REQ_H

#include "daemon/agent-conn.h"
#include "daemon/api-service.h"

/* ---- the writer: SSE events and raw body bytes to one HTTP client ---- */

/* Output of an agent stream to an HTTP client. Each write carries `ack` bytes of agent
 * credit, returned to the stream once the client took the bytes (a slow client slows the
 * agent instead of filling the daemon's memory). Refcounted: the request's reference and
 * one per write in flight, so a write completing after the request ended touches only the
 * writer. The request clears http (it answered or the client left) and stream (the agent
 * stream closed); with either gone, events are dropped and their credit returned. */
struct api_sse {
        unsigned refs;
        struct http_request *http;   /* borrowed from the request; NULL once let go */
        struct agent_stream *stream; /* borrowed; NULL once closed */
        struct buf carry[2];         /* incomplete UTF-8 tail of stdout, stderr */
        const char *data_key;        /* the output events' text field: "data" or "text" */
};
/* A writer for http and stream (both borrowed), or NULL without memory. */
struct api_sse *api_sse_new(struct http_request *http, struct agent_stream *stream,
                            const char *data_key);
void api_sse_unref(struct api_sse *w);
/* Writers not yet freed, in the whole process (for tests: nothing outlives its request's
 * last write). */
unsigned api_sse_live(void);
/* Send event ev (consumed; a timestamp is added). */
void api_sse_event(struct api_sse *w, json_t *ev, size_t ack);
/* stdout (0) / stderr (1) bytes as {type, data} events, never splitting a UTF-8 character
 * (flush: send what is held); bytes that are not UTF-8 go as base64 with encoding. */
void api_sse_output(struct api_sse *w, int which, const uint8_t *data, size_t len, bool flush);
/* Raw body bytes (a response begun by the caller). -1 if nothing was queued (the credit is
 * returned then). */
int api_sse_write(struct api_sse *w, const void *data, size_t len, size_t ack);

/* Output as a JSON string when it is UTF-8, else base64 (*ret_b64 set). New reference. */
json_t *api_output_json(const struct buf *b, bool *ret_b64);

/* ---- the collector: stdout/stderr kept for a buffered answer ---- */

/* Output of a command (stdout, stderr) kept for a JSON answer. Parameters, set before the
 * first byte:
 *  - cap: bytes kept per stream (0: nothing kept); the first CELLA_EXEC_BUFFER_RESERVE
 *    bytes of each stream whatever the budget (an echo is never starved by another
 *    tenant's bulk output), more while budget (NULL: not counted) has room; beyond that the
 *    rest of the stream is dropped and truncated[] is set;
 *  - total (instead of cap): pieces are kept whole or not at all while stdout, stderr and
 *    whatever else api_outbuf_room() admits stay under total bytes (a code run's output and
 *    events); a piece that does not fit sets dropped.
 * The answer is written by api_outbuf_respond(), escaped piece by piece as the client
 * takes it, so a buffer is never copied whole into a JSON string. */
struct api_outbuf {
        struct buf out[2];
        bool truncated[2];
        size_t counted[2];         /* bytes of out[i] counted in budget */
        struct mem_budget *budget; /* borrowed; NULL: not counted */
        size_t cap;
        size_t total;      /* the whole-piece limit; 0: cap applies */
        size_t used;       /* bytes admitted under total */
        bool dropped;      /* a piece did not fit under total */
        size_t utf8_to[2]; /* out[i] is known to be UTF-8 up to here (checked as it came) */
        bool not_utf8[2];  /* out[i] is known not to be */
};
void api_outbuf_add(struct api_outbuf *ob, int which, const void *data, size_t len);
/* Whole-piece mode: admit n more bytes? (dropped is set when not) */
bool api_outbuf_room(struct api_outbuf *ob, size_t n);
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

/* ---- the request ---- */

enum api_req_mode {
        API_REQ_JSON, /* one JSON answer at the end (output collected) */
        API_REQ_SSE,  /* SSE events from the first frame that is not an error */
        API_REQ_RAW,  /* a body of raw bytes (the route begins the response) */
};

struct api_req;

/* What a route adds to the request; every member may be NULL. */
struct api_req_ops {
        /* A frame of the agent stream (the request is finished after an ERROR, whatever
         * the route did with it). NULL: an agent call (api_req_call's defaults: the
         * RESULT object or an EXEC's EXIT is given to result, an ERROR is answered). */
        void (*frame)(struct api_req *r, const struct frame *f);
        /* The agent stream has send credit again. */
        void (*writable)(struct api_req *r);
        /* An agent call's answer (borrowed): {exitCode, timedOut, stdout, stderr} for an
         * EXEC (its output kept up to CELLA_CALL_MAX_OUTPUT bytes per stream), the RESULT
         * object otherwise. The route answers. */
        void (*result)(struct api_req *r, json_t *result);
        /* An agent call failed with e, answered right after (a route's log line). */
        void (*failed)(struct api_req *r, const struct cella_error *e);
        /* The agent stream closed before the answer; NULL: answered SANDBOX_UNAVAILABLE
         * (api_req_lost). */
        void (*closed)(struct api_req *r, int err);
        /* The route's own fields; the request is freed after it. */
        void (*free)(struct api_req *r);
};

/* The request. Refcounted, with one free path: the handler's reference (from
 * api_req_new; for a request body, the body read holds it and drops it after the body's
 * callback), one for the agent stream (api_req_open to its on_close), one held around
 * every callback into the route (a route may finish, answer or cancel from any callback).
 * Client disconnect, agent loss, an answer and the agent's end all pass through
 * api_req_finish(); the route's free runs once, after the last reference. */
struct api_req {
        unsigned refs;
        struct api *api;
        const struct api_req_ops *ops;
        char name[CELLA_NAME_MAX + 1]; /* the sandbox's */
        struct http_request *http;     /* referenced until answered or the client left */
        struct sandbox *sb;            /* referenced once found */
        struct agent_stream *stream;   /* NULL before api_req_open and after on_close */
        enum api_req_mode mode;
        bool begun;             /* SSE: the event stream's head is sent */
        bool finished;          /* answered, or the client left */
        struct api_sse *writer; /* SSE/raw output, once begun */
        const char *data_key;   /* SSE: the output events' text field; NULL: "data" */
        struct api_outbuf out;  /* JSON: the collector (out.cap/total, out.budget set by
                                   the route; an agent call keeps CELLA_CALL_MAX_OUTPUT) */
        bool frames_wake;       /* the agent's frames keep the sandbox awake (default) */
        bool reading;           /* the body read holds the handler's reference */
        void (*body)(struct api_req *r, const char *body, size_t len);
        /* Waiting for the sandbox's start (api_req_find_sandbox): what runs again once it
         * runs. The wait holds a reference. */
        struct api_sandbox_wait wait;
        bool finding;                    /* inside api_req_find_sandbox's get */
        bool waiting;                    /* a start or wake is awaited */
        void (*step)(struct api_req *r); /* api_req_run's */
        bool in_body;                    /* inside body's call */
        const char *cur_body;            /* the body being handled */
        size_t cur_len;
        char *kept;        /* the body, kept to be handled again */
        bool lost_body;    /* it could not be kept (out of memory) */
        uint8_t open_type; /* an api_req_open waiting for the sandbox */
        json_t *open_payload;
};

/* A new request of size bytes (the route's struct, zeroed, beginning with a struct
 * api_req) for http, holding the handler's reference. NULL after answering http (out of
 * memory). */
struct api_req *api_req_new(struct api *a, struct http_request *http, const char *name, size_t size,
                            const struct api_req_ops *ops);
void api_req_ref(struct api_req *r);
void api_req_unref(struct api_req *r);
/* Requests not yet freed, in the whole process (for tests: every path frees). */
unsigned api_req_live(void);
/* Read the request's body (at most limit bytes) into body(r, ...); the handler's reference
 * goes to the read and is dropped after body returns. Failures are answered here. body may
 * be called twice (see api_req_find_sandbox): before its sandbox, it must only decode and
 * check, without effects that a second call would repeat. */
void api_req_read_body(struct api_req *r, size_t limit,
                       void (*body)(struct api_req *r, const char *body, size_t len));
/* Run step(r), a route's part that needs no body (the handler keeps its reference); like
 * body, it may be called again once its sandbox runs. */
void api_req_run(struct api_req *r, void (*step)(struct api_req *r));
/* The request's sandbox (a reference kept in r->sb): true when it runs now. false either
 * after answering, or when the sandbox has to start or wake: the start runs off the loop
 * and the route's part that asked (the body callback with the same body, api_req_run's
 * step, or api_req_open with the same type and payload) runs again once the sandbox runs,
 * finding it at once; if the client left meanwhile, nothing runs and the request is
 * freed. Either way the caller returns: nothing it does after false is seen. */
bool api_req_find_sandbox(struct api_req *r);
/* A copy of the sandbox's env (new reference), for a payload's baseEnv. */
json_t *api_req_base_env(const struct api_req *r);
/* Open the agent stream of type with payload (borrowed; NULL: out of memory) on r's
 * sandbox (found first if it is not yet: api_req_find_sandbox); -1 after answering or
 * while the sandbox starts (the open is made again then). */
int api_req_open(struct api_req *r, uint8_t type, json_t *payload);
/* The answer is given (or the client left): http is let go, the writer keeps only what is
 * in flight. Idempotent. */
void api_req_finish(struct api_req *r);

/* Answering, each finishing the request (nothing happens once it is finished). */
void api_req_respond_json(struct api_req *r, int status, json_t *doc);
/* doc (borrowed) with the collector's output in place of its markers (api_outbuf_set). */
void api_req_respond_output(struct api_req *r, int status, json_t *doc);
/* The one conversion of a failure to an answer: before any of the answer, the error
 * response; in an SSE stream, ev (consumed; NULL: {type: error, error, code}) after the
 * output still held, then the end of the stream; in a raw body, the connection closed
 * (the client must not take a short body for a whole one). */
void api_req_fail(struct api_req *r, const struct cella_error *e, json_t *ev);
/* The agent's ERROR frame f, through api_req_fail. */
void api_req_fail_frame(struct api_req *r, const struct frame *f);
/* The agent stream closed before the answer (err: -errno): SANDBOX_UNAVAILABLE. */
void api_req_lost(struct api_req *r, int err);

/* Output, by mode. */
/* SSE: begin the event stream now (a no-op if begun or finished). */
void api_req_begin_sse(struct api_req *r);
/* SSE: event ev (consumed), beginning the stream if needed; ack bytes of credit. */
void api_req_event(struct api_req *r, json_t *ev, size_t ack);
/* STDOUT (0) / STDERR (1) bytes: SSE events, or kept by the collector (JSON); their credit
 * is returned (SSE: once the client took them). */
void api_req_output(struct api_req *r, int which, const uint8_t *data, size_t len);
/* SSE: the output still held, the last event ev (consumed), the end; finishes. */
void api_req_end_sse(struct api_req *r, json_t *ev);
/* RAW: body bytes (the response begun by the route); -1 if not queued (credit returned). */
int api_req_write(struct api_req *r, const void *data, size_t len);

/* ---- the agent's EXIT and ERROR, parsed once ---- */

struct api_exit {
        json_int_t code; /* -1 when absent */
        bool timed_out;
        json_int_t timeout_ms; /* the limit the agent applied; -1 when absent */
};
void api_exit_parse(const struct frame *f, struct api_exit *x);
/* Fill e from an agent ERROR payload; *ret_exit_code (may be NULL) is its exitCode (a
 * SESSION_TERMINATED) or -1 without one, and the return tells whether there was one. */
bool api_error_parse(const struct frame *f, struct cella_error *e, json_int_t *ret_exit_code);

#endif
