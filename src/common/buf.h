/* A growable byte buffer. Invariant: data is NULL with len == cap == 0, or data points to
 * cap bytes of which the first len are valid and data[len] == '\0' (always room for it),
 * so the contents can be used as a C string when they hold no NUL. */
#ifndef CELLA_BUF_H
#define CELLA_BUF_H

#include <stddef.h>
#include <stdint.h>

#include "common/macros.h"

struct buf {
        char *data;
        size_t len;
        size_t cap;
};

#define BUF_INIT           \
        {                  \
                NULL, 0, 0 \
        }

int buf_reserve(struct buf *b, size_t extra); /* 0 or -ENOMEM */
int buf_append(struct buf *b, const void *p, size_t n);
int buf_append_str(struct buf *b, const char *s);
int buf_printf(struct buf *b, const char *fmt, ...) _printf_(2, 3);
void buf_consume(struct buf *b, size_t n); /* drop n bytes from the front */
void buf_reset(struct buf *b);             /* len = 0, keeps memory */
void buf_free(struct buf *b);
char *buf_steal(struct buf *b); /* returns data (NUL-terminated, never NULL on success) */

static inline void buf_freep(struct buf *b)
{
        buf_free(b);
}
#define _cleanup_buf_ _cleanup_(buf_freep)

#endif
