/* The server's parsing of requests (see http-internal.h): http-parser's callbacks, and
 * what is checked beyond it.
 *
 * A request's head is scanned byte by byte (http_head_scan) before the parser sees it, for
 * what http-parser lets through in its lenient mode (bare LF, obs-fold, "Name : value");
 * the parser is paused after every message so that the scan restarts at the next head. In
 * a chunked body, the CRLF after each chunk's data is checked the same way (chunk_crlf):
 * the lenient parser would take any two bytes there and read a chunk size from what
 * follows. Limits (header bytes and count, URL, body) are counted here as bytes arrive. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/pct.h"
#include "daemon/http.h"
#include "daemon/http-internal.h"

/* 503 SERVER_BUSY: the daemon holds as much for clients as its budget allows. */
static void respond_busy(struct http_request *req)
{
        struct cella_error e = {0};
        char extra[64];

        cella_error_set(&e, CELLA_E_SERVER_BUSY,
                        "cellad is holding its whole buffer budget (%zu MiB) for requests: "
                        "retry later",
                        req->budget ? req->budget->limit >> 20 : 0);
        snprintf(extra, sizeof(extra), "Retry-After: %d\r\n", CELLA_HTTP_RETRY_AFTER_S);
        http_respond_error_headers(req, &e, NULL, extra);
}

/* ---- parser callbacks ---- */

static struct conn *pconn(http_parser *p)
{
        return p->data;
}

/* Nothing more is parsed on a connection that is closing or answered an error, and no
 * callback runs without a current request (parsing stops at once). */
static bool stopped(struct conn *c)
{
        if (c->dead_input || c->closing || !c->cur) {
                http_parser_pause(&c->parser, 1);
                return true;
        }
        return false;
}

static int fail(struct conn *c, int code)
{
        if (!c->perr)
                c->perr = code;
        http_parser_pause(&c->parser, 1);
        return 0;
}

static int on_message_begin(http_parser *p)
{
        struct conn *c = pconn(p);

        if (c->dead_input || c->closing) {
                http_parser_pause(p, 1);
                return 0;
        }
        if (c->cur) /* a request is still current: cannot happen, parser is paused then */
                return fail(c, CELLA_E_INTERNAL_ERROR);
        c->cur = http_req_new(c);
        if (!c->cur)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        buf_reset(&c->url);
        buf_reset(&c->field);
        buf_reset(&c->value);
        c->in_value = false;
        c->header_bytes = 0;
        c->crlf_need = 0;
        if (c->served)
                c->head_ms = conn_now(c); /* the first head counts from the connection */
        return 0;
}

static int count_header_bytes(struct conn *c, size_t n)
{
        c->header_bytes += n;
        if (c->header_bytes > CELLA_HTTP_MAX_HEADER_BYTES)
                return fail(c, CELLA_E_HEADERS_TOO_LARGE);
        return 0;
}

static int on_url(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);

        if (stopped(c))
                return 0;

        if (c->url.len + len > CELLA_HTTP_MAX_URL)
                return fail(c, CELLA_E_URI_TOO_LONG);
        if (count_header_bytes(c, len) < 0 || c->perr)
                return 0;
        if (buf_append(&c->url, at, len) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        return 0;
}

static int commit_header(struct conn *c)
{
        struct http_request *req = c->cur;

        if (!c->in_value)
                return 0;
        if (req->nheaders >= CELLA_HTTP_MAX_HEADERS)
                return fail(c, CELLA_E_HEADERS_TOO_LARGE);
        if (memchr(c->field.data, 0, c->field.len) || memchr(c->value.data, 0, c->value.len))
                return fail(c, CELLA_E_BAD_REQUEST);
        if (http_headers_add(&req->headers, &req->nheaders, &c->field, &c->value) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        buf_reset(&c->field);
        buf_reset(&c->value);
        c->in_value = false;
        return 0;
}

static int on_header_field(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);

        if (stopped(c))
                return 0;

        if (c->in_value && (commit_header(c) < 0 || c->perr))
                return 0;
        if (count_header_bytes(c, len + (c->field.len == 0 ? 4 : 0)) < 0 || c->perr)
                return 0;
        if (buf_append(&c->field, at, len) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        return 0;
}

static int on_header_value(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);

        if (stopped(c))
                return 0;

        c->in_value = true;
        if (count_header_bytes(c, len) < 0 || c->perr)
                return 0;
        if (buf_append(&c->value, at, len) < 0)
                return fail(c, CELLA_E_INTERNAL_ERROR);
        return 0;
}

/* Percent-decode s[0..len) into a new string. -EINVAL for a bad escape or a NUL. */
static int pct_decode_new(const char *s, size_t len, bool plus_space, char **ret)
{
        char *out = malloc(len + 1);

        if (!out)
                return -ENOMEM;
        int r = pct_decode(s, len, plus_space, out, len + 1, NULL);
        if (r < 0) {
                free(out);
                return r;
        }
        *ret = out;
        return 0;
}

static int parse_query(struct http_request *req, const char *q, size_t len)
{
        size_t i = 0;

        while (i < len) {
                size_t end = i, eq;
                struct http_header *n;
                char *k = NULL, *v = NULL;

                while (end < len && q[end] != '&')
                        end++;
                eq = i;
                while (eq < end && q[eq] != '=')
                        eq++;
                if (end > i) {
                        if (pct_decode_new(q + i, eq - i, true, &k) < 0)
                                return -EINVAL;
                        if (pct_decode_new(q + (eq < end ? eq + 1 : end),
                                           eq < end ? end - eq - 1 : 0, true, &v) < 0) {
                                free(k);
                                return -EINVAL;
                        }
                        n = realloc(req->query, (req->nquery + 1) * sizeof(*n));
                        if (!n) {
                                free(k);
                                free(v);
                                return -ENOMEM;
                        }
                        req->query = n;
                        n[req->nquery].name = k;
                        n[req->nquery].value = v;
                        req->nquery++;
                }
                i = end + 1;
        }
        return 0;
}

static int parse_target(struct conn *c, struct http_request *req)
{
        struct http_parser_url u;
        const char *url = c->url.data ? c->url.data : "";

        http_parser_url_init(&u);
        if (c->url.len == 0 || http_parser_parse_url(url, c->url.len, 0, &u) != 0)
                return -EINVAL;
        if (memchr(url, 0, c->url.len))
                return -EINVAL;
        req->target = strndup(url, c->url.len);
        if (!req->target)
                return -ENOMEM;
        if (u.field_set & (1 << UF_PATH)) {
                if (pct_decode_new(url + u.field_data[UF_PATH].off, u.field_data[UF_PATH].len,
                                   false, &req->path) < 0)
                        return -EINVAL;
        } else {
                req->path = strdup("/");
                if (!req->path)
                        return -ENOMEM;
        }
        if (u.field_set & (1 << UF_QUERY))
                return parse_query(req, url + u.field_data[UF_QUERY].off,
                                   u.field_data[UF_QUERY].len);
        return 0;
}

/* Message framing beyond http-parser: at most one Content-Length, and Transfer-Encoding
 * only as one "chunked" (a coding cellad does not decode, or a list, is refused rather than
 * guessed at: a proxy in front may frame it differently). */
static int check_framing(const struct http_request *req)
{
        unsigned cl = 0, te = 0;

        for (size_t i = 0; i < req->nheaders; i++) {
                const char *v = req->headers[i].value;

                if (strcasecmp(req->headers[i].name, "Content-Length") == 0)
                        cl++;
                else if (strcasecmp(req->headers[i].name, "Transfer-Encoding") == 0) {
                        size_t n;

                        te++;
                        v += strspn(v, " \t");
                        n = strlen(v);
                        while (n > 0 && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                                n--;
                        if (n != 7 || strncasecmp(v, "chunked", 7) != 0)
                                return -EINVAL;
                }
        }
        return cl > 1 || te > 1 || (cl && te) ? -EINVAL : 0;
}

static int on_headers_complete(http_parser *p)
{
        struct conn *c = pconn(p);
        struct http_request *req = c->cur;
        const char *expect;

        if (stopped(c))
                return 0;

        if (commit_header(c) < 0 || c->perr)
                return 0;
        if (p->http_major != 1)
                return fail(c, CELLA_E_BAD_REQUEST);
        req->method = http_method_str((enum http_method)p->method);
        req->head = p->method == HTTP_HEAD;
        req->http10 = p->http_minor == 0;
        req->keep_alive = http_should_keep_alive(p) && !p->upgrade;
        if (p->method == HTTP_CONNECT)
                return fail(c, CELLA_E_METHOD_NOT_ALLOWED);
        if (parse_target(c, req) < 0)
                return fail(c, CELLA_E_BAD_REQUEST);
        if (check_framing(req) < 0)
                return fail(c, CELLA_E_BAD_REQUEST);
        expect = http_request_header(req, "Expect");
        if (expect) {
                if (strcasecmp(expect, "100-continue") != 0)
                        return fail(c, CELLA_E_BAD_REQUEST);
                req->expect_continue = !req->http10;
        }
        req->dispatched = true;
        c->served = true;
        c->body_ms = c->read_ms = conn_now(c);
        http_request_ref(req);
        c->srv->cfg.on_request(req, c->srv->cfg.userdata);
        /* A held body: nothing after the head is parsed until the handler asks for it
         * (or answers). An upgrade has no body, and the parser stops after its head anyway
         * (paused here, it would leave the head's last byte for the new protocol). */
        if (req->body_mode == BODY_HELD && req->conn && !p->upgrade) {
                req->body_paused = true;
                http_parser_pause(p, 1);
        }
        http_request_unref(req);
        return 0;
}

/* A chunk's data ends at q (in `in`): the CRLF that must follow, as far as it was read;
 * the rest is checked when more arrives (http_chunk_crlf_pending). 0 or -EBADMSG. */
static int chunk_crlf(struct conn *c, const char *q)
{
        const char *end = c->in.data + c->in.len;

        c->crlf_need = 0;
        for (unsigned i = 0; i < 2; i++) {
                if (q + i >= end) {
                        c->crlf_need = 2 - i;
                        return 0;
                }
                if (q[i] != "\r\n"[i])
                        return -EBADMSG;
        }
        return 0;
}

/* The rest of a chunk's CRLF, at the front of `in` (the data ended where the last read
 * did, and the parser took everything up to there). 0 or -EBADMSG. */
int http_chunk_crlf_pending(struct conn *c)
{
        const char *want = c->crlf_need == 2 ? "\r\n" : "\n";
        size_t i;

        for (i = 0; i < c->crlf_need && i < c->in.len; i++)
                if (c->in.data[i] != want[i])
                        return -EBADMSG;
        c->crlf_need -= (unsigned)i;
        return 0;
}

static int on_body(http_parser *p, const char *at, size_t len)
{
        struct conn *c = pconn(p);
        struct http_request *req = c->cur;
        size_t took;

        if ((p->flags & F_CHUNKED) && p->content_length == 0 && chunk_crlf(c, at + len) < 0)
                return fail(c, CELLA_E_BAD_REQUEST);
        if (stopped(c))
                return 0;

        if (!req)
                return 0;
        switch (req->body_mode) {
        case BODY_DISCARD:
                req->discarded += len;
                if (req->ended && req->discarded > CELLA_HTTP_MAX_JSON_BODY) {
                        c->dead_input = true;
                        http_parser_pause(p, 1);
                }
                return 0;
        case BODY_WHOLE: {
                size_t reserved = req->body.len < CELLA_HTTP_BODY_RESERVE
                                          ? MIN(len, CELLA_HTTP_BODY_RESERVE - req->body.len)
                                          : 0;

                if (req->body.len + len > req->body_limit ||
                    (len > reserved && !mem_budget_take(req->budget, len - reserved))) {
                        bool busy = req->body.len + len <= req->body_limit;

                        req->body_mode = BODY_DISCARD;
                        req->keep_alive = false;
                        http_body_release(req);
                        http_req_abort(req);
                        if (busy)
                                respond_busy(req);
                        else
                                http_respond_code(req, CELLA_E_PAYLOAD_TOO_LARGE,
                                                  "request body over %zu bytes", req->body_limit);
                        c->dead_input = true;
                        http_parser_pause(p, 1);
                        return 0;
                }
                mem_budget_force(req->budget, reserved);
                req->body_counted += len;
                if (buf_append(&req->body, at, len) < 0)
                        return fail(c, CELLA_E_INTERNAL_ERROR);
                return 0;
        }
        case BODY_HELD: /* cannot be: the parser waits after the head of a held body */
                return fail(c, CELLA_E_INTERNAL_ERROR);
        case BODY_STREAM:
                http_request_ref(req);
                took = req->ops->on_data(req, at, len, req->body_ud);
                if (took < len && req->conn && req->body_mode == BODY_STREAM) {
                        if (buf_append(&req->pending, at + took, len - took) < 0) {
                                http_request_unref(req);
                                return fail(c, CELLA_E_INTERNAL_ERROR);
                        }
                        req->body_paused = true;
                        http_parser_pause(p, 1);
                }
                http_request_unref(req);
                return 0;
        }
        return 0;
}

static int on_message_complete(http_parser *p)
{
        struct conn *c = pconn(p);
        struct http_request *req = c->cur;

        if (stopped(c))
                return 0;

        if (!req)
                return 0;
        req->body_complete = true;
        http_request_ref(req);
        if (req->body_mode == BODY_WHOLE && !req->ended) {
                if (buf_reserve(&req->body, 1) < 0) {
                        http_request_unref(req);
                        return fail(c, CELLA_E_INTERNAL_ERROR);
                }
                req->body_cb(req, req->body.data ? req->body.data : "", req->body.len,
                             req->body_ud);
                http_body_release(req);
        } else if (req->body_mode == BODY_STREAM && !req->ended && req->ops->on_end) {
                req->ops->on_end(req, req->body_ud);
        }
        if (req->conn && c->cur == req && req->ended)
                http_conn_detach(c, false);
        /* Stop here in any case: the response is awaited, or the next head is to be scanned
         * (http_head_scan) before the parser sees it. */
        http_parser_pause(p, 1);
        c->scan = SCAN_LINE_START;
        c->scan_headers = false;
        c->scan_off = 0;
        http_request_unref(req);
        return 0;
}

const http_parser_settings http_parser_callbacks = {
        .on_message_begin = on_message_begin,
        .on_url = on_url,
        .on_header_field = on_header_field,
        .on_header_value = on_header_value,
        .on_headers_complete = on_headers_complete,
        .on_body = on_body,
        .on_message_complete = on_message_complete,
};

int http_errno_code(enum http_errno e)
{
        switch (e) {
        case HPE_HEADER_OVERFLOW:
                return CELLA_E_HEADERS_TOO_LARGE;
        default:
                return CELLA_E_BAD_REQUEST;
        }
}

/* Scan the head bytes of `in` not scanned yet (see the top of this file). -EBADMSG for a
 * bare LF or CR, an obs-fold line, or whitespace in a header's name. */
int http_head_scan(struct conn *c)
{
        for (; c->scan_off < c->in.len && c->scan != SCAN_DONE; c->scan_off++) {
                char ch = c->in.data[c->scan_off];

                switch (c->scan) {
                case SCAN_LINE_START:
                        if (ch == '\r')
                                /* an empty line: the end of the head, or (before the
                                 * request line) one that is skipped */
                                c->scan = c->scan_headers ? SCAN_DONE_CR : SCAN_CR_SKIP;
                        else if (ch == '\n' || ch == ' ' || ch == '\t')
                                return -EBADMSG; /* bare LF, obs-fold */
                        else
                                c->scan = c->scan_headers ? SCAN_NAME : SCAN_LINE;
                        break;
                case SCAN_NAME:
                        if (ch == ' ' || ch == '\t' || ch == '\n')
                                return -EBADMSG; /* "Name : v", bare LF */
                        if (ch == ':')
                                c->scan = SCAN_LINE;
                        else if (ch == '\r')
                                c->scan = SCAN_CR; /* no colon: the parser answers 400 */
                        break;
                case SCAN_LINE:
                        if (ch == '\n')
                                return -EBADMSG;
                        if (ch == '\r')
                                c->scan = SCAN_CR;
                        break;
                case SCAN_CR:
                        if (ch != '\n')
                                return -EBADMSG;
                        c->scan = SCAN_LINE_START;
                        c->scan_headers = true;
                        break;
                case SCAN_CR_SKIP:
                        if (ch != '\n')
                                return -EBADMSG;
                        c->scan = SCAN_LINE_START;
                        break;
                case SCAN_DONE_CR:
                        if (ch != '\n')
                                return -EBADMSG;
                        c->scan = SCAN_DONE;
                        break;
                case SCAN_DONE:
                        break;
                }
        }
        return 0;
}

/* ---- fuzzing ---- */

static size_t fuzz_on_data(struct http_request *req, const char *data, size_t len, void *ud)
{
        size_t *calls = ud;

        (void)req;
        (void)data;
        /* take half of every other chunk, to exercise pausing and resuming */
        return (++*calls % 2) ? len : len / 2;
}

static void fuzz_on_end(struct http_request *req, void *ud)
{
        (void)ud;
        http_respond_code(req, CELLA_E_OK, "ok");
}

static const struct http_body_ops fuzz_ops = {fuzz_on_data, fuzz_on_end};

static void fuzz_on_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        json_t *j = json_loadb(body, len, 0, NULL);

        (void)ud;
        http_respond_json(req, 200, j ? j : json_null());
        json_decref(j);
}

struct fuzz_state {
        int count;
        size_t calls;
        struct http_request *held; /* a request whose body waits (a path with "hold") */
        bool held_stream;          /* ... to be streamed ("holdstream"), else read whole */
};

static void fuzz_on_request(struct http_request *req, void *ud)
{
        struct fuzz_state *st = ud;
        const char *path = http_request_path(req);

        st->count++;
        (void)http_request_query(req, "path");
        (void)http_request_header(req, "accept");
        /* forwarding's pattern: the body held while the request's node is looked up, then
         * read, streamed or left (an answer) by whoever serves it */
        if (strstr(path, "hold") && !st->held && http_request_hold_body(req) == 0) {
                http_request_ref(req);
                st->held = req;
                st->held_stream = strstr(path, "holdstream") != NULL;
                return;
        }
        if (strcmp(req->method, "PUT") == 0 && strstr(path, "files"))
                http_request_stream_body(req, &fuzz_ops, &st->calls);
        else if (strcmp(req->method, "POST") == 0 || strcmp(req->method, "PUT") == 0)
                http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, fuzz_on_body, NULL);
        else if (strstr(path, "sse")) {
                json_t *e = json_pack("{s:s}", "type", "start");

                http_response_begin_sse(req);
                http_sse_send(req, e, NULL, NULL);
                http_response_end(req);
                json_decref(e);
        } else
                http_respond_code(req, CELLA_E_NOT_FOUND, "no route %s", path);
}

/* The held request is served now (after a pass of the parser, as after a lookup). */
static void fuzz_release(struct fuzz_state *st)
{
        struct http_request *req = st->held;

        st->held = NULL;
        if (strcmp(req->method, "GET") == 0 || strcmp(req->method, "HEAD") == 0)
                http_respond_code(req, CELLA_E_NOT_FOUND, "held, then answered");
        else if (st->held_stream)
                http_request_stream_body(req, &fuzz_ops, &st->calls);
        else
                http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, fuzz_on_body, NULL);
        http_request_unref(req);
}

int http_parse_fuzz(const uint8_t *data, size_t len)
{
        struct http_server srv = {0};
        struct conn *c = calloc(1, sizeof(*c));
        struct fuzz_state st = {0};
        size_t off = 0;

        if (!c)
                return 0;
        srv.cfg.on_request = fuzz_on_request;
        srv.cfg.userdata = &st;
        c->srv = &srv;
        c->fuzz = true;
        http_parser_init(&c->parser, HTTP_REQUEST);
        c->parser.data = c;
        /* feed in two reads to exercise split callbacks, then keep resuming */
        while (off < len && !c->closing) {
                size_t n = MIN(len - off, (size_t)(len / 2 + 1));

                if (buf_append(&c->in, data + off, n) < 0)
                        break;
                off += n;
                for (int guard = 0; guard < 64 && !c->closing; guard++) {
                        size_t before = c->in.len;

                        if (c->cur && c->cur->body_paused)
                                http_request_resume_body(c->cur);
                        http_conn_process(c);
                        if (st.held) {
                                fuzz_release(&st);
                                continue;
                        }
                        if (c->in.len == before && !(c->cur && c->cur->body_paused))
                                break;
                }
        }
        if (st.held) {
                http_request_unref(st.held);
                st.held = NULL;
        }
        c->closing = true;
        http_conn_detach(c, true);
        http_conn_free(c);
        return st.count;
}
