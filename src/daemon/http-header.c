/* Header pair lists (see http-header.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "common/macros.h"
#include "daemon/http-header.h"

int http_headers_add(struct http_header **v, size_t *n, const struct buf *name,
                     const struct buf *value)
{
        _cleanup_free_ char *k = strndup(name->data ? name->data : "", name->len);
        _cleanup_free_ char *s = strndup(value->data ? value->data : "", value->len);
        struct http_header *a;

        if (!k || !s)
                return -ENOMEM;
        a = realloc(*v, (*n + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        *v = a;
        a[*n].name = TAKE_PTR(k);
        a[*n].value = TAKE_PTR(s);
        (*n)++;
        return 0;
}

void http_headers_free(struct http_header *v, size_t n)
{
        for (size_t i = 0; i < n; i++) {
                free(v[i].name);
                free(v[i].value);
        }
        free(v);
}
