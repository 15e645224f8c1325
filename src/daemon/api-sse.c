/* Output of an agent stream passed on to an HTTP client: SSE events whose agent credit is
 * returned only once the client took the bytes, and output as JSON text or base64. Shared
 * by exec (api-exec.c) and process streams (api-processes.c); see api-internal.h. */
#include <errno.h>
#include <string.h>

#include "common/base64.h"
#include "common/utf8.h"
#include "daemon/api-internal.h"

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

void api_sse_done(struct api_sse *o)
{
        for (int i = 0; i < 2; i++)
                buf_free(&o->carry[i]);
}

struct sse_write {
        struct api_sse *o;
        size_t ack;
};

static void sse_written(struct http_request *req, int status, size_t len, void *ud)
{
        struct sse_write *w = ud;
        struct api_sse *o = w->o;

        (void)req;
        (void)len;
        if (status == 0 && o->stream && w->ack)
                agent_stream_ack(o->stream, w->ack);
        free(w);
        o->release(o->owner);
}

void api_sse_event(struct api_sse *o, json_t *ev, size_t ack)
{
        struct sse_write *w;
        char ts[32];

        if (!ev)
                return;
        api_timestamp(ts);
        json_object_set_new(ev, "timestamp", json_string(ts));
        w = calloc(1, sizeof(*w));
        if (!o->req || !w || http_sse_send(o->req, ev, sse_written, w) < 0) {
                free(w);
                if (o->stream && ack)
                        agent_stream_ack(o->stream, ack);
                json_decref(ev);
                return;
        }
        w->o = o;
        w->ack = ack;
        o->hold(o->owner);
        json_decref(ev);
}

void api_sse_output(struct api_sse *o, int which, const uint8_t *data, size_t len, bool flush)
{
        static const char *const types[] = {"stdout", "stderr"};
        struct buf *c = &o->carry[which];
        const char *key = o->data_key ? o->data_key : "data";
        size_t n;

        if (buf_append(c, data, len) < 0) {
                if (o->stream)
                        agent_stream_ack(o->stream, len);
                return;
        }
        if (c->len == 0)
                return;
        n = flush ? c->len : utf8_complete_prefix(c->data, c->len);
        if (n == 0) {
                if (o->stream && len)
                        agent_stream_ack(o->stream, len);
                return;
        }
        if (utf8_is_valid(c->data, n)) {
                api_sse_event(o, json_pack("{s:s, s:s%}", "type", types[which], key, c->data, n),
                              len);
        } else {
                /* the text up to the first invalid byte as text, the rest of this piece
                 * (with any held tail) as base64 */
                _cleanup_buf_ struct buf e = BUF_INIT;
                size_t v = utf8_valid_prefix(c->data, n);

                if (v > 0) {
                        api_sse_event(
                                o, json_pack("{s:s, s:s%}", "type", types[which], key, c->data, v),
                                0);
                        buf_consume(c, v);
                }
                n = c->len;
                if (base64_encode(&e, c->data, n) < 0) {
                        buf_consume(c, n);
                        return;
                }
                api_sse_event(o,
                              json_pack("{s:s, s:s%, s:s}", "type", types[which], key,
                                        e.data ? e.data : "", e.len, "encoding", "base64"),
                              len);
        }
        buf_consume(c, n);
}

void api_sse_fail(struct api_sse *o, bool sse, const struct cella_error *e)
{
        if (!o->req)
                return;
        if (!sse) {
                http_respond_error(o->req, e, NULL);
                return;
        }
        api_sse_event(o,
                      json_pack("{s:s, s:s, s:s}", "type", "error", "error", e->msg, "code",
                                cella_code_name(e->code)),
                      0);
        if (o->req)
                http_response_end(o->req);
}

void api_sse_agent_lost(struct api_sse *o, bool sse, int err)
{
        struct cella_error e = {0};

        cella_error_set(&e, CELLA_E_SANDBOX_UNAVAILABLE, "the sandbox's agent went away (%s)",
                        strerror(-err));
        api_sse_fail(o, sse, &e);
}
