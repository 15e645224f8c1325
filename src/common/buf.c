#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"

int buf_reserve(struct buf *b, size_t extra)
{
        size_t need, cap;
        char *p;

        if (extra > SIZE_MAX - b->len - 1)
                return -ENOMEM;
        need = b->len + extra + 1;
        if (need <= b->cap)
                return 0;
        cap = b->cap ? b->cap : 64;
        while (cap < need)
                cap = cap > SIZE_MAX / 2 ? need : cap * 2;
        p = realloc(b->data, cap);
        if (!p)
                return -ENOMEM;
        b->data = p;
        b->cap = cap;
        return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
        int r = buf_reserve(b, n);
        if (r < 0)
                return r;
        if (n)
                memcpy(b->data + b->len, p, n);
        b->len += n;
        b->data[b->len] = '\0';
        return 0;
}

int buf_append_str(struct buf *b, const char *s)
{
        return buf_append(b, s, strlen(s));
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
        va_list ap;
        int n, r;

        va_start(ap, fmt);
        n = vsnprintf(NULL, 0, fmt, ap);
        va_end(ap);
        if (n < 0)
                return -EINVAL;
        r = buf_reserve(b, (size_t)n);
        if (r < 0)
                return r;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
        va_end(ap);
        b->len += (size_t)n;
        return 0;
}

void buf_consume(struct buf *b, size_t n)
{
        if (n >= b->len) {
                buf_reset(b);
                return;
        }
        memmove(b->data, b->data + n, b->len - n);
        b->len -= n;
        b->data[b->len] = '\0';
}

void buf_reset(struct buf *b)
{
        b->len = 0;
        if (b->data)
                b->data[0] = '\0';
}

void buf_free(struct buf *b)
{
        free(b->data);
        b->data = NULL;
        b->len = b->cap = 0;
}

char *buf_steal(struct buf *b)
{
        char *p;
        if (!b->data && buf_reserve(b, 0) < 0)
                return NULL;
        b->data[b->len] = '\0';
        p = b->data;
        b->data = NULL;
        b->len = b->cap = 0;
        return p;
}
