/* The relay after a 101 (see preview-internal.h): the client's socket is taken from the
 * HTTP server and bytes go both ways between it and the sandbox's connection, each side's
 * reads stopped while the other side's queue is over the high water. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "daemon/preview.h"
#include "daemon/preview-internal.h"

/* ---- the relay after a 101 ---- */

static void relay_start_reading(struct pxy *p);

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *b)
{
        (void)h;
        (void)suggested;
        b->base = malloc(64 * 1024);
        b->len = b->base ? 64 * 1024 : 0;
}

struct relw {
        uv_write_t w;
        struct pxy *p;
        char *data;
};

static void relay_check_close(struct pxy *p)
{
        if (p->eof_up && p->eof_cl)
                pxy_finish(p);
}

static void on_relay_written(uv_write_t *w, int status)
{
        struct relw *r = (struct relw *)w;
        struct pxy *p = r->p;

        free(r->data);
        free(r);
        if (p->finished)
                return;
        if (status < 0) {
                pxy_finish(p);
                return;
        }
        relay_start_reading(p);
}

/* Queue data (owned, freed here) on dst. */
static int relay_write(struct pxy *p, uv_tcp_t *dst, char *data, size_t len)
{
        struct relw *r = malloc(sizeof(*r));
        uv_buf_t b = uv_buf_init(data, (unsigned)len);

        if (!r) {
                free(data);
                return -ENOMEM;
        }
        r->p = p;
        r->data = data;
        if (uv_write(&r->w, (uv_stream_t *)dst, &b, 1, on_relay_written) < 0) {
                free(data);
                free(r);
                return -EPIPE;
        }
        return 0;
}

static int relay_copy(struct pxy *p, uv_tcp_t *dst, const char *data, size_t len)
{
        char *d;

        if (len == 0)
                return 0;
        d = malloc(len);
        if (!d)
                return -ENOMEM;
        memcpy(d, data, len);
        return relay_write(p, dst, d, len);
}

static void on_shutdown(uv_shutdown_t *sh, int status)
{
        (void)sh;
        (void)status;
}

static void on_fin_timeout(uv_timer_t *t)
{
        pxy_finish(t->data);
}

static void relay_read(struct pxy *p, bool from_up, ssize_t nread, const uv_buf_t *b)
{
        uv_stream_t *s = from_up ? (uv_stream_t *)&p->uc->tcp : (uv_stream_t *)&p->cl;
        uv_tcp_t *dst = from_up ? &p->cl : &p->uc->tcp;

        if (p->finished) {
                free(b->base);
                return;
        }
        if (nread > 0) {
                pxy_touch(p);
                if (relay_write(p, dst, b->base, (size_t)nread) < 0) {
                        pxy_finish(p);
                        return;
                }
                /* Backpressure: stop reading this side while the other is slow. */
                if (uv_stream_get_write_queue_size((uv_stream_t *)dst) >
                    CELLA_HTTP_WRITE_HIGH_WATER) {
                        uv_read_stop(s);
                        if (from_up)
                                p->read_up = false;
                        else
                                p->read_cl = false;
                }
                return;
        }
        free(b->base);
        if (nread == 0)
                return;
        if (nread != UV_EOF) {
                pxy_finish(p);
                return;
        }
        /* EOF: pass the half-close on once what was queued is written. The other side
         * then has CELLA_PREVIEW_HALF_CLOSE_MS to close too: a client that went away
         * (close, not shutdown) sends the same FIN, and an app that keeps its side open
         * would hold the relay, and its place among CELLA_PREVIEW_MAX_UPGRADES, forever. */
        uv_read_stop(s);
        if (!p->eof_up && !p->eof_cl)
                uv_timer_start(&p->fin, on_fin_timeout, CELLA_PREVIEW_HALF_CLOSE_MS, 0);
        if (from_up) {
                p->eof_up = true;
                p->read_up = false;
                uv_shutdown(&p->sh_cl, (uv_stream_t *)&p->cl, on_shutdown);
        } else {
                p->eof_cl = true;
                p->read_cl = false;
                uv_shutdown(&p->sh_up, (uv_stream_t *)&p->uc->tcp, on_shutdown);
        }
        relay_check_close(p);
}

static void relay_read_up(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        struct upconn *uc = s->data;

        if (!uc->owner) {
                free(b->base);
                return;
        }
        relay_read(uc->owner, true, nread, b);
}

static void relay_read_cl(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
        relay_read(s->data, false, nread, b);
}

static void relay_start_reading(struct pxy *p)
{
        if (p->finished)
                return;
        if (!p->read_up && !p->eof_up &&
            uv_stream_get_write_queue_size((uv_stream_t *)&p->cl) <= CELLA_HTTP_WRITE_HIGH_WATER &&
            uv_read_start((uv_stream_t *)&p->uc->tcp, on_alloc, relay_read_up) == 0)
                p->read_up = true;
        if (!p->read_cl && !p->eof_cl &&
            uv_stream_get_write_queue_size((uv_stream_t *)&p->uc->tcp) <=
                    CELLA_HTTP_WRITE_HIGH_WATER &&
            uv_read_start((uv_stream_t *)&p->cl, on_alloc, relay_read_cl) == 0)
                p->read_cl = true;
}

/* The sandbox answered 101: take the client's socket, send it the 101 head and what the
 * sandbox sent after it, send the sandbox what the client sent after its request, then
 * relay both ways. */
void pxy_relay_begin(struct pxy *p, const char *rest, size_t restlen)
{
        _cleanup_buf_ struct buf head = BUF_INIT;
        _cleanup_buf_ struct buf leftover = BUF_INIT;
        int fd, r;

        uv_read_stop((uv_stream_t *)&p->uc->tcp);
        p->uc->reading = false;
        r = buf_append_str(&head, "HTTP/1.1 101 Switching Protocols\r\n");
        if (r >= 0)
                r = pxy_response_headers(p, &head, true);
        if (r == -ENOMEM) {
                pxy_fail(p, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        if (r >= 0)
                r = buf_append_str(&head, "\r\n");
        if (r < 0) {
                pxy_fail(p, CELLA_E_BAD_GATEWAY, "bad upgrade answer from the sandbox");
                return;
        }
        r = http_request_take_socket(p->req, &fd, &leftover);
        if (r < 0) {
                pxy_fail(p, CELLA_E_INTERNAL_ERROR, "cannot take the connection over");
                return;
        }
        http_request_on_abort(p->req, NULL, NULL);
        http_request_unref(p->req);
        p->req = NULL;
        p->resp_begun = true;
        p->upgraded = true;
        uv_tcp_init(p->uc->tcp.loop, &p->cl);
        p->cl.data = p;
        p->refs++;
        p->cl_open = true;
        uv_timer_init(p->uc->tcp.loop, &p->fin);
        p->fin.data = p;
        p->refs++;
        p->fin_open = true;
        if (uv_tcp_open(&p->cl, fd) < 0) {
                close(fd);
                pxy_finish(p);
                return;
        }
        uv_tcp_nodelay(&p->cl, 1);
        if (relay_copy(p, &p->cl, head.data, head.len) < 0 ||
            relay_copy(p, &p->cl, rest, restlen) < 0 ||
            relay_copy(p, &p->uc->tcp, leftover.data, leftover.len) < 0) {
                pxy_finish(p);
                return;
        }
        relay_start_reading(p);
}
