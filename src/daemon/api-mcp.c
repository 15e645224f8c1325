/* /mcp: the MCP server (src/mcp) over MCP's Streamable HTTP transport.
 *
 * POST carries one JSON-RPC message. A request is answered with an SSE stream on that
 * POST: its progress notifications, then its response, which ends the stream; a
 * notification or a response is answered 202. The first request, initialize, makes a
 * session: its id comes back in Mcp-Session-Id and every later request must carry it (400
 * without, 404 for one that ended). GET opens the session's stream for messages that
 * belong to no request (resource updates); its events have ids, and a GET with
 * Last-Event-ID gets those after it again (the last CELLA_MCP_REPLAY). A POST stream's
 * event ids name it ("EVENT-STREAM"): when its connection breaks it waits, and a GET with
 * such a Last-Event-ID carries it on (the spec's resumption). DELETE ends the session:
 * running calls are cancelled and their commands killed; so does CELLA_MCP_IDLE_TIMEOUT_MS
 * without a request or an open stream.
 *
 * The engine is the one `cella mcp` runs: its tools call this daemon through libcella on
 * worker threads, at the API listener's own bound address (api_set_self_address), with
 * the request's own bearer token, so a tool does exactly what the same call through
 * the API does, authorisation included. The engine sends from any thread: messages go
 * through a queue to a uv_async handle and are written on the loop, never elsewhere.
 * Sessions live in this file's table (loop thread only). */
#include <ctype.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/macros.h"
#include "daemon/api-handlers.h"
#include "daemon/http.h"
#include "mcp/event-id.h"
#include "mcp/server.h"

/* The last CELLA_MCP_REPLAY events of a stream, each in the slot of its id modulo
 * CELLA_MCP_REPLAY (an empty slot: text NULL). */
struct mcp_replay {
        uint64_t id;
        char *text;
};

/* A POST's stream, waiting for the response to the request id it carries. Its events
 * are kept (the last CELLA_MCP_REPLAY) so that a client that lost the connection resumes
 * it with GET and Last-Event-ID "EVENT-STREAM": req is then that GET, or NULL while no
 * connection carries the stream (detached); done once the response was sent or kept. */
struct mcp_post {
        struct http_request *req;
        char *id;        /* the request id as compact JSON text */
        uint64_t stream; /* this session's POST stream number, from 1 */
        bool done;
        struct mcp_session *s;
        struct mcp_replay replay[CELLA_MCP_REPLAY];
        struct mcp_post *next;
};

/* One session. Invariants: refs counts the table's reference and one per queued message
 * (atomic: the engine's threads take them); everything else is touched on the loop only;
 * srv is NULL once the session ended (DELETE or eviction) and then nothing is written. */
struct mcp_session {
        char id[33];
        struct mcp_server *srv;
        atomic_uint refs;
        struct http_request *get; /* the standalone stream, or NULL */
        struct mcp_post *posts;
        uint64_t next_event;
        uint64_t next_stream; /* POST streams numbered */
        uint64_t last_used;   /* uv_now */
        struct mcp_replay replay[CELLA_MCP_REPLAY];
        struct mcp_session *next;
};

struct mcp_msg {
        struct mcp_session *s;
        char *text;
        char *related; /* compact JSON of the request id, or NULL */
        struct mcp_msg *next;
};

static struct mcp_session *sessions;
static uv_async_t wake;
static bool wake_ready;
static uv_timer_t idle_timer;
static uint64_t idle_ms; /* CELLA_MCP_IDLE_TIMEOUT_MS, or the environment's for tests */
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static struct mcp_msg *queue_head, **queue_tail = &queue_head;

static void replay_free(struct mcp_replay ring[CELLA_MCP_REPLAY])
{
        for (size_t i = 0; i < CELLA_MCP_REPLAY; i++)
                free(ring[i].text);
}

/* Keep event id (text copied; without memory the slot stays empty). */
static void replay_keep(struct mcp_replay ring[CELLA_MCP_REPLAY], uint64_t id, const char *text)
{
        size_t slot = id % CELLA_MCP_REPLAY;

        free(ring[slot].text);
        ring[slot].id = id;
        ring[slot].text = strdup(text);
}

static void session_unref(struct mcp_session *s)
{
        if (atomic_fetch_sub(&s->refs, 1) != 1)
                return;
        replay_free(s->replay);
        free(s);
}

/* The engine's send (any thread, one at a time): queue, wake the loop. */
static void mcp_send(const char *text, size_t len, const json_t *related, void *ud)
{
        struct mcp_session *s = ud;
        struct mcp_msg *m = calloc(1, sizeof(*m));

        if (!m || !(m->text = strndup(text, len)) ||
            (related && !(m->related = json_dumps(related, JSON_COMPACT | JSON_ENCODE_ANY)))) {
                if (m)
                        free(m->text);
                free(m);
                return;
        }
        atomic_fetch_add(&s->refs, 1);
        m->s = s;
        pthread_mutex_lock(&queue_lock);
        *queue_tail = m;
        queue_tail = &m->next;
        pthread_mutex_unlock(&queue_lock);
        uv_async_send(&wake);
}

/* An event's id is the session's event count, unique across its streams; a POST
 * stream's also names the stream ("12-3"), which a GET with Last-Event-ID resumes. */
static void sse_event(struct http_request *req, uint64_t id, uint64_t stream, const char *text)
{
        char head[MCP_EVENT_ID_MAX + 16] = "id: ";
        size_t n = 4;

        n += mcp_event_id_format(head + n, sizeof(head) - n, id, stream);
        n += (size_t)snprintf(head + n, sizeof(head) - n, "\ndata: ");
        http_response_write(req, head, n, NULL, NULL);
        http_response_write(req, text, strlen(text), NULL, NULL);
        http_response_write(req, "\n\n", 2, NULL, NULL);
}

static void post_drop(struct mcp_post *p)
{
        struct mcp_session *s = p->s;

        for (struct mcp_post **pp = &s->posts; *pp; pp = &(*pp)->next)
                if (*pp == p) {
                        *pp = p->next;
                        break;
                }
        if (p->req) {
                s->last_used = uv_now(wake.loop); /* idle from its end */
                http_request_on_abort(p->req, NULL, NULL);
                http_request_unref(p->req);
        }
        replay_free(p->replay);
        free(p->id);
        free(p);
        session_unref(s);
}

/* The connection carrying a POST stream went away: the stream waits for a resuming GET
 * (its call runs on: a disconnect is no cancellation). */
static void post_detach(struct mcp_post *p)
{
        p->s->last_used = uv_now(wake.loop);
        http_request_on_abort(p->req, NULL, NULL);
        http_request_unref(p->req);
        p->req = NULL;
}

/* Streams kept for a resumption that may never come: at most CELLA_MCP_MAX_INFLIGHT
 * answered ones per session, the oldest dropped first. */
static void posts_trim(struct mcp_session *s)
{
        struct mcp_post *p, *oldest;
        unsigned n;

        for (;;) {
                n = 0;
                oldest = NULL;
                for (p = s->posts; p; p = p->next)
                        if (!p->req && p->done) {
                                n++;
                                oldest = p; /* the list is newest first */
                        }
                if (n <= CELLA_MCP_MAX_INFLIGHT)
                        return;
                post_drop(oldest);
        }
}

/* On the loop: write a message where it belongs. */
static void deliver(struct mcp_msg *m)
{
        struct mcp_session *s = m->s;
        uint64_t id = ++s->next_event;
        bool response = false;

        if (!s->srv)
                return;
        if (m->related) {
                _cleanup_json_ json_t *j = json_loads(m->text, 0, NULL);

                response = json_object_get(j, "result") || json_object_get(j, "error");
                for (struct mcp_post *p = s->posts; p; p = p->next) {
                        if (p->done || strcmp(p->id, m->related) != 0)
                                continue;
                        replay_keep(p->replay, id, m->text); /* for a resumption */
                        if (p->req)
                                sse_event(p->req, id, p->stream, m->text);
                        if (response) {
                                p->done = true;
                                if (p->req) {
                                        http_response_end(p->req);
                                        post_drop(p);
                                } else {
                                        posts_trim(s);
                                }
                        }
                        return;
                }
                if (response)
                        return; /* no stream of this session waits for it */
        }
        /* the standalone stream's messages are kept for a resuming GET */
        replay_keep(s->replay, id, m->text);
        if (s->get)
                sse_event(s->get, id, 0, m->text);
}

static void on_wake(uv_async_t *h)
{
        struct mcp_msg *m, *next;

        pthread_mutex_lock(&queue_lock);
        m = queue_head;
        queue_head = NULL;
        queue_tail = &queue_head;
        pthread_mutex_unlock(&queue_lock);
        for (; m; m = next) {
                next = m->next;
                deliver(m);
                session_unref(m->s);
                free(m->text);
                free(m->related);
                free(m);
        }
}

struct close_job {
        struct mcp_server *srv;
        struct mcp_session *s;
};

/* Close an ended session's engine, then drop the session's reference the engine's send
 * needed until then (a resource watch may send until the engine is closed). */
static void *close_main(void *arg)
{
        struct close_job *job = arg;

        mcp_server_close(job->srv);
        session_unref(job->s);
        free(job);
        return NULL;
}

/* End a session (loop): out of the table, its streams ended, its calls cancelled on a
 * thread of their own (closing waits for them; the loop never does). */
static void session_end(struct mcp_session *s)
{
        struct close_job *job = malloc(sizeof(*job));
        struct mcp_server *srv = s->srv;
        pthread_attr_t attr;
        pthread_t th;

        for (struct mcp_session **pp = &sessions; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        break;
                }
        s->srv = NULL;
        while (s->posts) {
                if (s->posts->req)
                        http_response_end(s->posts->req);
                post_drop(s->posts);
        }
        if (s->get) {
                http_request_on_abort(s->get, NULL, NULL);
                http_response_end(s->get);
                http_request_unref(s->get);
                s->get = NULL;
                session_unref(s);
        }
        /* the table's reference goes to the closing thread */
        if (!job) {
                mcp_server_close(srv); /* no memory: wait here rather than leak */
                session_unref(s);
                return;
        }
        job->srv = srv;
        job->s = s;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&th, &attr, close_main, job) != 0)
                close_main(job); /* no thread: wait here rather than leak */
        pthread_attr_destroy(&attr);
}

/* A session with an open stream is in use, however long since its last request. */
static bool session_busy(struct mcp_session *s)
{
        if (s->get)
                return true;
        for (struct mcp_post *p = s->posts; p; p = p->next)
                if (p->req)
                        return true;
        return false;
}

/* Sessions idle for idle_ms (no request, no stream open) end as DELETE ends them. */
static void on_idle_timer(uv_timer_t *t)
{
        uint64_t now = uv_now(t->loop);
        struct mcp_session *s, *next;

        for (s = sessions; s; s = next) {
                next = s->next;
                if (!session_busy(s) && now - s->last_used >= idle_ms) {
                        log_msg(LOG_LEVEL_DEBUG, "mcp: session %s idle, ended", s->id);
                        session_end(s);
                }
        }
}

/* The idle timeout: CELLA_MCP_IDLE_TIMEOUT_MS in the environment (milliseconds, for tests)
 * or the limit; swept a few times per timeout, at least once a minute. */
static int idle_timer_start(uv_loop_t *loop)
{
        const char *env = getenv("CELLA_MCP_IDLE_TIMEOUT_MS");
        char *end = NULL;
        unsigned long long v = env ? strtoull(env, &end, 10) : 0;
        uint64_t every;

        idle_ms = env && *env && end && !*end && v > 0 ? v : CELLA_MCP_IDLE_TIMEOUT_MS;
        every = idle_ms / 4 ? idle_ms / 4 : 1;
        if (every > 60 * 1000)
                every = 60 * 1000;
        uv_timer_init(loop, &idle_timer);     /* cannot fail */
        uv_unref((uv_handle_t *)&idle_timer); /* never what keeps the loop running */
        return uv_timer_start(&idle_timer, on_idle_timer, every, every) < 0 ? -1 : 0;
}

static struct mcp_session *session_find(const char *id)
{
        for (struct mcp_session *s = sessions; s; s = s->next)
                if (strcmp(s->id, id) == 0)
                        return s;
        return NULL;
}

/* The engine's tools call the daemon at the API's own bound address (never at an address
 * the request names: its Host is the client's to choose). */
static struct mcp_session *session_new(struct api *a, struct http_request *req,
                                       struct cella_error *err)
{
        const char *url = a->self_url[0] ? a->self_url : NULL;
        const char *auth = http_request_header(req, "Authorization");
        struct mcp_server_options o = {.url = url};
        struct mcp_transport t = {.send = mcp_send};
        struct mcp_session *s, *oldest = NULL;
        unsigned char rnd[16];
        unsigned n = 0;
        uv_loop_t *loop = http_request_loop(req);

        if (!url) {
                cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "the API is not listening");
                return NULL;
        }
        if (!wake_ready) {
                if (uv_async_init(loop, &wake, on_wake) < 0) {
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "uv_async_init failed");
                        return NULL;
                }
                if (idle_timer_start(loop) < 0) /* never with a live loop */
                        log_msg(LOG_LEVEL_WARN,
                                "mcp: no idle timer: sessions end only when "
                                "%d exist",
                                CELLA_MCP_MAX_SESSIONS);
                uv_unref((uv_handle_t *)&wake); /* never what keeps the loop running */
                wake_ready = true;
        }
        /* at most CELLA_MCP_MAX_SESSIONS: the least recently used one makes room */
        for (s = sessions; s; s = s->next, n++)
                if (!oldest || s->last_used <= oldest->last_used)
                        oldest = s;
        if (n >= CELLA_MCP_MAX_SESSIONS && oldest)
                session_end(oldest);
        if (auth && strncasecmp(auth, "Bearer ", 7) == 0)
                o.token = auth + 7;
        else
                o.token = "";
        if (!(s = calloc(1, sizeof(*s))) || getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd)) {
                free(s);
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        for (size_t i = 0; i < sizeof(rnd); i++)
                snprintf(s->id + 2 * i, 3, "%02x", rnd[i]);
        atomic_init(&s->refs, 1);
        t.userdata = s;
        if (mcp_server_new(&o, &t, &s->srv) < 0) {
                free(s);
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        s->last_used = uv_now(loop);
        s->next = sessions;
        sessions = s;
        return s;
}

static void on_post_abort(struct http_request *req, void *ud)
{
        struct mcp_post *p = ud;

        if (p->done) /* nothing more to send on it */
                post_drop(p);
        else
                post_detach(p);
}

static void on_get_abort(struct http_request *req, void *ud)
{
        struct mcp_session *s = ud;

        if (s->get == req) {
                s->last_used = uv_now(wake.loop);
                http_request_unref(req);
                s->get = NULL;
        }
        session_unref(s);
}

/* The MCP-Protocol-Version header, when sent, names a revision the server speaks. */
static bool version_ok(struct http_request *req)
{
        const char *v = http_request_header(req, "MCP-Protocol-Version");

        if (!v)
                return true;
        for (size_t i = 0; mcp_protocol_versions[i]; i++)
                if (strcmp(v, mcp_protocol_versions[i]) == 0)
                        return true;
        /* the revision older clients assume when the header is missing */
        return strcmp(v, "2025-03-26") == 0;
}

static struct mcp_session *session_of(struct http_request *req)
{
        const char *sid = http_request_header(req, "Mcp-Session-Id");
        struct mcp_session *s;

        if (!sid) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "Mcp-Session-Id header required (send initialize first)");
                return NULL;
        }
        if (!(s = session_find(sid))) {
                http_respond_code(req, CELLA_E_NOT_FOUND,
                                  "no MCP session '%.64s' (it ended: initialize again)", sid);
                return NULL;
        }
        if (!version_ok(req)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "MCP-Protocol-Version: not a revision this server speaks");
                return NULL;
        }
        s->last_used = uv_now(wake.loop);
        return s;
}

/* req becomes the connection of the stream that *slot holds (a POST stream's or the
 * session's standalone one): the connection that held it until now is ended and released
 * (a newer one takes over), req's SSE head is sent and the events of ring after `after`
 * (stream: the POST stream's number, 0 for the standalone one; ring NULL: none) are sent
 * again. *slot then holds a reference on req; the caller sets req's abort callback (and
 * drops what an ended connection held beyond its request). 0, or -1 when req's head
 * could not be sent (*slot is left empty). */
static int stream_begin(struct mcp_session *s, struct http_request **slot, struct http_request *req,
                        const struct mcp_replay *ring, uint64_t after, uint64_t stream)
{
        struct http_request *old = *slot;
        char headers[128];

        if (old) {
                *slot = NULL;
                http_request_on_abort(old, NULL, NULL);
                http_response_end(old);
                http_request_unref(old);
        }
        snprintf(headers, sizeof(headers), "Cache-Control: no-cache\r\nMcp-Session-Id: %s\r\n",
                 s->id);
        if (http_response_begin(req, 200, "text/event-stream", -1, headers) < 0)
                return -1;
        for (uint64_t id = after + 1; ring && id <= s->next_event; id++) {
                const struct mcp_replay *e = &ring[id % CELLA_MCP_REPLAY];

                if (e->id == id && e->text)
                        sse_event(req, id, stream, e->text);
        }
        http_request_ref(req);
        *slot = req;
        return 0;
}

static void on_post_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        _cleanup_json_ json_t *j = json_loadb(body, len, JSON_DECODE_ANY, NULL);
        const char *method = json_string_value(json_object_get(j, "method"));
        json_t *id = json_object_get(j, "id");
        bool is_request = method && id;
        struct mcp_session *s;
        struct cella_error err = {0};
        struct mcp_post *p;

        if (!json_is_object(j)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "the body is one JSON-RPC message (a JSON object)");
                return;
        }
        if (!http_request_header(req, "Mcp-Session-Id") && is_request &&
            strcmp(method, "initialize") == 0) {
                if (!(s = session_new(ud, req, &err))) {
                        http_respond_error(req, &err, NULL);
                        return;
                }
        } else if (!(s = session_of(req))) {
                return;
        }
        if (!is_request) {
                mcp_server_handle(s->srv, body, len);
                http_respond_bytes(req, 202, "application/json", "", 0);
                return;
        }
        if (!(p = calloc(1, sizeof(*p))) ||
            !(p->id = json_dumps(id, JSON_COMPACT | JSON_ENCODE_ANY))) {
                free(p);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        if (stream_begin(s, &p->req, req, NULL, 0, 0) < 0) {
                free(p->id);
                free(p);
                return;
        }
        p->s = s;
        p->stream = ++s->next_stream;
        atomic_fetch_add(&s->refs, 1);
        p->next = s->posts;
        s->posts = p;
        http_request_on_abort(req, on_post_abort, p);
        mcp_server_handle(s->srv, body, len);
}

/* GET with Last-Event-ID "EVENT-STREAM": the POST stream STREAM goes on on this
 * connection, from after EVENT (the events kept, then live; its response ends it). */
static void post_resume(struct mcp_session *s, struct http_request *req, uint64_t after,
                        uint64_t stream)
{
        struct mcp_post *p;

        for (p = s->posts; p && p->stream != stream; p = p->next)
                ;
        if (!p) {
                /* not 404: that would tell the client its session ended */
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "Last-Event-ID: stream %llu of this session is not kept "
                                  "(its response was delivered, or it was never opened)",
                                  (unsigned long long)stream);
                return;
        }
        if (stream_begin(s, &p->req, req, p->replay, after, p->stream) < 0)
                return;
        if (p->done) {
                http_response_end(req);
                post_drop(p);
                return;
        }
        http_request_on_abort(req, on_post_abort, p);
}

static void mcp_get(struct http_request *req)
{
        const char *accept = http_request_header(req, "Accept");
        const char *last = http_request_header(req, "Last-Event-ID");
        uint64_t after = 0, stream = 0;
        struct mcp_session *s;
        bool had_stream;
        int r;

        if (!accept || !strstr(accept, "text/event-stream")) {
                http_respond_code(req, CELLA_E_METHOD_NOT_ALLOWED,
                                  "GET /mcp is an event stream: Accept: text/event-stream");
                return;
        }
        if (!(s = session_of(req)))
                return;
        if (last && mcp_event_id_parse(last, &after, &stream) < 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "Last-Event-ID must be an event id this server sent: EVENT or "
                                  "EVENT-STREAM in decimal digits (got '%.64s')",
                                  last);
                return;
        }
        if (stream) {
                post_resume(s, req, after, stream);
                return;
        }
        had_stream = s->get != NULL;
        r = stream_begin(s, &s->get, req, last ? s->replay : NULL, after, 0);
        if (had_stream)
                session_unref(s); /* the reference of the stream taken over */
        if (r < 0)
                return;
        atomic_fetch_add(&s->refs, 1);
        http_request_on_abort(req, on_get_abort, s);
        if (!last)
                http_response_write(req, ": stream open\n\n", 16, NULL, NULL);
}

void api_mcp(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *method = http_request_method(req);
        struct mcp_session *s;

        if (strcmp(method, "POST") == 0) {
                if (http_request_read_body(req, CELLA_MCP_MAX_MESSAGE, on_post_body, a) < 0)
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the body");
        } else if (strcmp(method, "GET") == 0) {
                mcp_get(req);
        } else if ((s = session_of(req))) {
                session_end(s);
                http_respond_bytes(req, 200, "application/json", "{\"success\":true}", 16);
        }
}
