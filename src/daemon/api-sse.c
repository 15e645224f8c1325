/* Output of an agent stream passed on to an HTTP client (api-req.h): the writer (SSE
 * events and raw body bytes whose agent credit is returned only once the client took
 * them), output as JSON text or base64, and the collector with its JSON answer written
 * piece by piece. */
#include <errno.h>
#include <string.h>
#include <sys/random.h>

#include "common/base64.h"
#include "common/json-cleanup.h"
#include "common/json-escape.h"
#include "common/utf8.h"
#include "daemon/api-req.h"

json_t *api_output_json(const struct buf *b, bool *ret_b64)
{
        const char *d = b->data ? b->data : "";

        *ret_b64 = false;
        if (utf8_is_valid(d, b->len))
                return json_stringn(d, b->len);
        {
                _cleanup_buf_ struct buf e = BUF_INIT;

                if (base64_encode(&e, d, b->len) < 0)
                        return NULL;
                *ret_b64 = true;
                return json_stringn(e.data ? e.data : "", e.len);
        }
}

static unsigned live; /* writers not yet freed (read by tests from another thread) */

unsigned api_sse_live(void)
{
        return __atomic_load_n(&live, __ATOMIC_RELAXED);
}

struct api_sse *api_sse_new(struct http_request *http, struct agent_stream *stream,
                            const char *data_key)
{
        struct api_sse *w = calloc(1, sizeof(*w));

        if (!w)
                return NULL;
        __atomic_add_fetch(&live, 1, __ATOMIC_RELAXED);
        w->refs = 1;
        w->http = http;
        w->stream = stream;
        w->data_key = data_key ? data_key : "data";
        return w;
}

void api_sse_unref(struct api_sse *w)
{
        if (!w || --w->refs > 0)
                return;
        for (int i = 0; i < 2; i++)
                buf_free(&w->carry[i]);
        free(w);
        __atomic_sub_fetch(&live, 1, __ATOMIC_RELAXED);
}

/* A write in flight: its credit, returned once the client took the bytes. */
struct sse_write {
        struct api_sse *w;
        size_t ack;
};

static void sse_written(struct http_request *req, int status, size_t len, void *ud)
{
        struct sse_write *sw = ud;
        struct api_sse *w = sw->w;

        (void)req;
        (void)len;
        if (status == 0 && w->stream && sw->ack)
                agent_stream_ack(w->stream, sw->ack);
        free(sw);
        api_sse_unref(w);
}

static void ack_now(struct api_sse *w, size_t ack)
{
        if (w->stream && ack)
                agent_stream_ack(w->stream, ack);
}

void api_sse_event(struct api_sse *w, json_t *ev, size_t ack)
{
        struct sse_write *sw;
        char ts[32];

        if (!ev)
                return;
        api_timestamp(ts);
        json_object_set_new(ev, "timestamp", json_string(ts));
        sw = calloc(1, sizeof(*sw));
        if (!w->http || !sw || http_sse_send(w->http, ev, sse_written, sw) < 0) {
                free(sw);
                ack_now(w, ack);
                json_decref(ev);
                return;
        }
        sw->w = w;
        sw->ack = ack;
        w->refs++;
        json_decref(ev);
}

int api_sse_write(struct api_sse *w, const void *data, size_t len, size_t ack)
{
        struct sse_write *sw = calloc(1, sizeof(*sw));

        if (!w->http || !sw || http_response_write(w->http, data, len, sse_written, sw) < 0) {
                free(sw);
                ack_now(w, ack);
                return -1;
        }
        sw->w = w;
        sw->ack = ack;
        w->refs++;
        return 0;
}

/* An output event of n bytes of UTF-8 text, written without a json_t: the text is escaped
 * once, straight into the event (decision 0058). */
static void text_event(struct api_sse *w, const char *type, const char *d, size_t n, size_t ack)
{
        _cleanup_buf_ struct buf b = BUF_INIT;
        char ts[32];

        api_timestamp(ts);
        if (buf_reserve(&b, n + n / 16 + 96) < 0 ||
            buf_printf(&b, "data: {\"type\":\"%s\",\"%s\":\"", type, w->data_key) < 0 ||
            json_escape_append(&b, d, n) < 0 ||
            buf_printf(&b, "\",\"timestamp\":\"%s\"}\n\n", ts) < 0) {
                ack_now(w, ack);
                return;
        }
        api_sse_write(w, b.data, b.len, ack);
}

void api_sse_output(struct api_sse *w, int which, const uint8_t *data, size_t len, bool flush)
{
        static const char *const types[] = {"stdout", "stderr"};
        struct buf *c = &w->carry[which];
        const char *key = w->data_key;
        const char *d = (const char *)data;
        size_t dlen = len, n;

        /* nothing held: the bytes are used where they are, only a cut tail is kept */
        if (c->len > 0) {
                if (buf_append(c, data, len) < 0) {
                        ack_now(w, len);
                        return;
                }
                d = c->data;
                dlen = c->len;
        }
        if (dlen == 0)
                return;
        n = flush ? dlen : utf8_complete_prefix(d, dlen);
        if (n > 0 && utf8_is_valid(d, n)) {
                text_event(w, types[which], d, n, len);
                if (d == c->data)
                        buf_consume(c, n);
                else if (n < dlen && buf_append(c, d + n, dlen - n) < 0)
                        return;
                return;
        }
        if (d != c->data && buf_append(c, data, len) < 0) {
                ack_now(w, len);
                return;
        }
        if (n == 0) {
                ack_now(w, len);
                return;
        }
        {
                /* the text up to the first invalid byte as text, the rest of this piece
                 * (with any held tail) as base64 */
                _cleanup_buf_ struct buf e = BUF_INIT;
                size_t v = utf8_valid_prefix(c->data, n);

                if (v > 0) {
                        text_event(w, types[which], c->data, v, 0);
                        buf_consume(c, v);
                }
                n = c->len;
                if (base64_encode(&e, c->data, n) < 0) {
                        buf_consume(c, n);
                        ack_now(w, len);
                        return;
                }
                api_sse_event(w,
                              json_pack("{s:s, s:s%, s:s}", "type", types[which], key,
                                        e.data ? e.data : "", e.len, "encoding", "base64"),
                              len);
        }
        buf_consume(c, n);
}

/* ---- buffered output, answered as JSON written piece by piece ---- */

#define OUT_PIECE (255 * 1024) /* raw bytes escaped per write (a multiple of 3: base64) */

bool api_outbuf_room(struct api_outbuf *ob, size_t n)
{
        if (ob->used + n > ob->total) {
                ob->dropped = true;
                return false;
        }
        ob->used += n;
        return true;
}

/* Check the bytes of out[which] added since the last check, while they are in the cache:
 * its UTF-8 validity is then known at the end without a walk over all of it. */
static void outbuf_check(struct api_outbuf *ob, int which)
{
        const struct buf *b = &ob->out[which];
        size_t from = ob->utf8_to[which], n;

        if (ob->not_utf8[which] || from >= b->len)
                return;
        n = utf8_complete_prefix(b->data + from, b->len - from);
        if (n && !utf8_is_valid(b->data + from, n))
                ob->not_utf8[which] = true;
        else
                ob->utf8_to[which] = from + n;
}

/* out[which] is UTF-8 as a whole (its last bytes checked now). */
static bool outbuf_utf8(const struct api_outbuf *ob, int which)
{
        const struct buf *b = &ob->out[which];
        size_t from = MIN(ob->utf8_to[which], b->len);

        return !ob->not_utf8[which] && utf8_is_valid(b->data ? b->data + from : "", b->len - from);
}

void api_outbuf_add(struct api_outbuf *ob, int which, const void *data, size_t len)
{
        struct buf *b = &ob->out[which];
        size_t n, reserved = 0, cap = ob->cap;

        if (ob->total) {
                /* whole pieces under a limit shared with what else the answer holds */
                if (api_outbuf_room(ob, len) && buf_append(b, data, len) == 0)
                        outbuf_check(ob, which);
                return;
        }
        if (ob->truncated[which] || len == 0 || cap == 0)
                return;
        n = MIN(len, cap - MIN(b->len, cap));
        if (b->len < CELLA_EXEC_BUFFER_RESERVE)
                reserved = MIN(n, (size_t)CELLA_EXEC_BUFFER_RESERVE - b->len);
        if (n > reserved && !mem_budget_take(ob->budget, n - reserved))
                n = reserved;
        mem_budget_force(ob->budget, reserved);
        if (n && buf_append(b, data, n) < 0) {
                mem_budget_give(ob->budget, n);
                n = 0;
        } else {
                ob->counted[which] += n;
                outbuf_check(ob, which);
        }
        /* keep the first bytes only: once a piece is dropped, the rest of the stream is */
        if (n < len)
                ob->truncated[which] = true;
}

static void outbuf_release(struct api_outbuf *ob, int which)
{
        buf_free(&ob->out[which]);
        mem_budget_give(ob->budget, ob->counted[which]);
        ob->counted[which] = 0;
        ob->utf8_to[which] = 0;
        ob->not_utf8[which] = false;
}

void api_outbuf_done(struct api_outbuf *ob)
{
        outbuf_release(ob, 0);
        outbuf_release(ob, 1);
}

/* The placeholders: a random nonce that no client can know, so no string of its own can
 * be taken for one. */
static const char *marker_text(int which)
{
        static char marks[2][40];

        if (!marks[0][0]) {
                uint8_t rnd[8] = {0};

                if (getrandom(rnd, sizeof(rnd), 0) < 0)
                        memset(rnd, 0x5a, sizeof(rnd)); /* still not in anyone's input */
                for (int i = 0; i < 2; i++)
                        snprintf(marks[i], sizeof(marks[i]),
                                 "\x01"
                                 "cella-out-%02x%02x%02x%02x%02x%02x%02x%02x-%d",
                                 rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7], i);
        }
        return marks[which];
}

json_t *api_outbuf_marker(const struct api_outbuf *ob, int which, bool *ret_b64)
{
        *ret_b64 = !outbuf_utf8(ob, which);
        return json_string(marker_text(which));
}

void api_outbuf_set(const struct api_outbuf *ob, json_t *obj)
{
        static const char *const names[2][2] = {{"stdout", "stdoutEncoding"},
                                                {"stderr", "stderrEncoding"}};

        if (!obj)
                return;
        for (int i = 0; i < 2; i++) {
                bool b64;

                json_object_set_new(obj, names[i][0], api_outbuf_marker(ob, i, &b64));
                if (b64)
                        json_object_set_new(obj, names[i][1], json_string("base64"));
        }
        if (ob->truncated[0] || ob->truncated[1])
                json_object_set_new(obj, "truncated", json_true());
}

struct out_writer {
        struct http_request *req; /* referenced */
        char *text;               /* the document, with the markers */
        size_t text_len;
        size_t pos;         /* next byte of text to write */
        size_t mark_at[2];  /* where each marker's content starts in text (SIZE_MAX: none) */
        size_t mark_len[2]; /* its length there (as dumped) */
        bool b64[2];
        int cur;          /* the stream being written, -1: text */
        size_t off;       /* in out[cur] */
        struct buf piece; /* the escaped piece in flight, reused from piece to piece */
        struct api_outbuf ob;
};

static void writer_free(struct out_writer *w)
{
        api_outbuf_done(&w->ob);
        buf_free(&w->piece);
        free(w->text);
        http_request_unref(w->req);
        free(w);
}

static void writer_step(struct out_writer *w);

static void writer_written(struct http_request *req, int status, size_t len, void *ud)
{
        struct out_writer *w = ud;

        (void)req;
        (void)len;
        if (status < 0) {
                writer_free(w);
                return;
        }
        writer_step(w);
}

/* The next piece of out[cur], escaped (JSON string content, or base64), into piece. */
static int writer_piece(struct out_writer *w, struct buf *piece)
{
        const struct buf *b = &w->ob.out[w->cur];
        const char *d = b->data + w->off;
        size_t n = MIN((size_t)OUT_PIECE, b->len - w->off);

        if (w->b64[w->cur]) {
                if (base64_encode(piece, d, n) < 0)
                        return -ENOMEM;
        } else {
                /* valid UTF-8 as a whole (b64 is not set): escaped straight into the piece */
                if (w->off + n < b->len)
                        n = utf8_complete_prefix(d, n); /* a character is never split */
                if (json_escape_append(piece, d, n) < 0)
                        return -ENOMEM;
        }
        w->off += n;
        return 0;
}

/* Write the next piece of the answer; the write's completion calls it again. Both the
 * escaped piece (in w->piece, reused) and a stretch of the document are written from
 * where they are, held until the write completes: no copy into the write. */
static void writer_step(struct out_writer *w)
{
        const char *data;
        size_t stop, len;
        int next = -1;

        for (;;) {
                if (w->cur >= 0) {
                        if (w->off < w->ob.out[w->cur].len) {
                                buf_reset(&w->piece);
                                if (writer_piece(w, &w->piece) < 0) {
                                        http_request_close(w->req);
                                        writer_free(w);
                                        return;
                                }
                                if (w->piece.len == 0)
                                        continue; /* an empty piece (cannot happen) */
                                data = w->piece.data;
                                len = w->piece.len;
                                break;
                        }
                        outbuf_release(&w->ob, w->cur);
                        w->pos = w->mark_at[w->cur] + w->mark_len[w->cur];
                        w->cur = -1;
                        continue;
                }
                stop = w->text_len;
                for (int i = 0; i < 2; i++)
                        if (w->mark_at[i] != SIZE_MAX && w->mark_at[i] >= w->pos &&
                            w->mark_at[i] < stop) {
                                stop = w->mark_at[i];
                                next = i;
                        }
                if (stop > w->pos) {
                        data = w->text + w->pos;
                        len = stop - w->pos;
                        w->pos = stop;
                        break;
                }
                if (next >= 0) {
                        w->cur = next;
                        w->off = 0;
                        next = -1;
                        continue;
                }
                http_response_end(w->req);
                writer_free(w);
                return;
        }
        if (http_response_write_held(w->req, data, len, writer_written, w) < 0)
                writer_free(w);
}

int api_outbuf_respond(struct http_request *req, int status, json_t *doc, struct api_outbuf *ob)
{
        struct out_writer *w = calloc(1, sizeof(*w));
        int r;

        if (!w || !(w->text = json_dumps(doc, JSON_COMPACT))) {
                free(w);
                api_outbuf_done(ob);
                return http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        w->text_len = strlen(w->text);
        w->cur = -1;
        for (int i = 0; i < 2; i++) {
                /* the marker as jansson dumps it (its \u0001 escaped) */
                _cleanup_json_ json_t *m = json_string(marker_text(i));
                _cleanup_free_ char *dumped = m ? json_dumps(m, JSON_ENCODE_ANY) : NULL;
                const char *at = dumped ? strstr(w->text, dumped) : NULL;

                w->mark_at[i] = at ? (size_t)(at - w->text) + 1 : SIZE_MAX;
                w->mark_len[i] = dumped ? strlen(dumped) - 2 : 0;
                w->b64[i] = !outbuf_utf8(ob, i);
        }
        w->ob = *ob;
        *ob = (struct api_outbuf){.budget = ob->budget, .cap = ob->cap, .total = ob->total};
        r = http_response_begin(req, status, "application/json", -1, NULL);
        if (r < 0 || http_request_is_head(req)) {
                if (r == 0)
                        http_response_end(req);
                free(w->text);
                api_outbuf_done(&w->ob);
                free(w);
                return r;
        }
        w->req = req;
        http_request_ref(req);
        writer_step(w);
        return 0;
}
