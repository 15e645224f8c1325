#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "common/proto.h"

static const char *const names[_FRAME_TYPE_MAX] = {
        [FRAME_HELLO] = "HELLO",
        [FRAME_EXEC] = "EXEC",
        [FRAME_STARTED] = "STARTED",
        [FRAME_STDOUT] = "STDOUT",
        [FRAME_STDERR] = "STDERR",
        [FRAME_EXIT] = "EXIT",
        [FRAME_ERROR] = "ERROR",
        [FRAME_CANCEL] = "CANCEL",
        [FRAME_WINDOW] = "WINDOW",
        [FRAME_FILE_READ] = "FILE_READ",
        [FRAME_FILE_WRITE] = "FILE_WRITE",
        [FRAME_FILE_OP] = "FILE_OP",
        [FRAME_DATA] = "DATA",
        [FRAME_END] = "END",
        [FRAME_RESULT] = "RESULT",
        [FRAME_FILE_INFO] = "FILE_INFO",
        [FRAME_PING] = "PING",
        [FRAME_PONG] = "PONG",
        [FRAME_SESSION] = "SESSION",
        [FRAME_PROC] = "PROC",
        [FRAME_WATCH] = "WATCH",
        [FRAME_CODE] = "CODE",
        [FRAME_PTY] = "PTY",
        [FRAME_CHECKPOINT] = "CHECKPOINT",
};

const char *frame_type_name(uint8_t type)
{
        if (type == 0 || type >= _FRAME_TYPE_MAX || !names[type])
                return "UNKNOWN";
        return names[type];
}

bool frame_type_is_data(uint8_t type)
{
        return type == FRAME_STDOUT || type == FRAME_STDERR || type == FRAME_DATA;
}

static uint32_t get_be32(const uint8_t *p)
{
        return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static void put_be32(uint8_t *p, uint32_t v)
{
        p[0] = (uint8_t)(v >> 24);
        p[1] = (uint8_t)(v >> 16);
        p[2] = (uint8_t)(v >> 8);
        p[3] = (uint8_t)v;
}

int frame_decode(const uint8_t *in, size_t len, struct frame *ret)
{
        uint32_t plen;
        uint8_t type;

        if (len < CELLA_FRAME_HEADER)
                return 0;
        plen = get_be32(in);
        type = in[4];
        if (type == 0 || type >= _FRAME_TYPE_MAX || !names[type] || in[5] != 0 || in[6] != 0 ||
            in[7] != 0 || plen > CELLA_FRAME_MAX)
                return -EPROTO;
        if (len - CELLA_FRAME_HEADER < plen)
                return 0;
        ret->type = type;
        ret->flags = 0;
        ret->stream = get_be32(in + 8);
        ret->len = plen;
        ret->payload = in + CELLA_FRAME_HEADER;
        return (int)(CELLA_FRAME_HEADER + plen);
}

void frame_header_pack(uint8_t out[12], uint8_t type, uint32_t stream, uint32_t len)
{
        put_be32(out, len);
        out[4] = type;
        out[5] = 0;
        out[6] = 0;
        out[7] = 0;
        put_be32(out + 8, stream);
}

int frame_append(struct buf *b, uint8_t type, uint32_t stream, const void *payload, uint32_t len)
{
        uint8_t hdr[CELLA_FRAME_HEADER];
        int r;

        if (len > CELLA_FRAME_MAX)
                return -EINVAL;
        r = buf_reserve(b, CELLA_FRAME_HEADER + (size_t)len);
        if (r < 0)
                return r;
        frame_header_pack(hdr, type, stream, len);
        buf_append(b, hdr, sizeof(hdr));
        return buf_append(b, payload, len);
}

int frame_encode(uint8_t *out, uint8_t type, uint32_t stream, const void *payload, size_t len)
{
        if (len > CELLA_FRAME_MAX)
                return -EINVAL;
        frame_header_pack(out, type, stream, (uint32_t)len);
        if (len)
                memcpy(out + CELLA_FRAME_HEADER, payload, len);
        return (int)frame_size(len);
}

int frame_encode_alloc(size_t head, uint8_t type, uint32_t stream, const void *payload, size_t len,
                       void **ret)
{
        uint8_t *p;

        if (len > CELLA_FRAME_MAX)
                return -EINVAL;
        p = malloc(head + frame_size(len));
        if (!p)
                return -ENOMEM;
        *ret = p;
        return frame_encode(p + head, type, stream, payload, len);
}

int frame_reader_space(struct frame_reader *r, size_t want, char **ret)
{
        if (buf_reserve(&r->in, want) < 0)
                return -ENOMEM;
        *ret = r->in.data + r->in.len;
        /* buf keeps one byte past len for its NUL */
        return (int)MIN(r->in.cap - r->in.len - 1, (size_t)INT_MAX);
}

void frame_reader_commit(struct frame_reader *r, size_t n)
{
        r->in.len += n;
}

int frame_reader_next(struct frame_reader *r, struct frame *ret)
{
        int n;

        if (r->off >= r->in.len)
                return 0;
        n = frame_decode((const uint8_t *)r->in.data + r->off, r->in.len - r->off, ret);
        if (n <= 0)
                return n;
        r->off += (size_t)n;
        return 1;
}

void frame_reader_compact(struct frame_reader *r)
{
        buf_consume(&r->in, r->off);
        r->off = 0;
}

void frame_reader_free(struct frame_reader *r)
{
        buf_free(&r->in);
        r->off = 0;
}

void frame_window_pack(uint8_t out[4], uint32_t credit)
{
        put_be32(out, credit);
}

int frame_window_unpack(const struct frame *f, uint32_t *ret_credit)
{
        if (f->len != 4)
                return -EPROTO;
        *ret_credit = get_be32(f->payload);
        return 0;
}
