/* An HTTP/1.1 answer's head, read by libcella's spliced download (head.h). */
#include <errno.h>
#include <string.h>
#include <strings.h>

#include "client/head.h"

static bool is_digit(char c)
{
        return c >= '0' && c <= '9';
}

/* The value of a Content-Length (spaces and tabs around it allowed) into *v. */
static int parse_length(const char *p, const char *e, uint64_t *v)
{
        uint64_t n = 0;

        while (p < e && (*p == ' ' || *p == '\t'))
                p++;
        while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
                e--;
        if (p == e)
                return -EBADMSG;
        for (; p < e; p++) {
                if (!is_digit(*p) || n > (INT64_MAX - 9) / 10)
                        return -EBADMSG;
                n = n * 10 + (uint64_t)(*p - '0');
        }
        *v = n;
        return 0;
}

int client_head_parse(const char *buf, size_t len, struct client_head *h)
{
        const char *end = len >= 4 ? memmem(buf, len, "\r\n\r\n", 4) : NULL;
        const char *line, *eol;

        if (!end)
                return 0;
        memset(h, 0, sizeof(*h));
        h->end = (size_t)(end - buf) + 4;
        /* "HTTP/1.x NNN" then a space or the line's end */
        if (h->end < 16 || strncmp(buf, "HTTP/1.", 7) != 0 || !is_digit(buf[7]) || buf[8] != ' ' ||
            !is_digit(buf[9]) || !is_digit(buf[10]) || !is_digit(buf[11]) || buf[9] == '0' ||
            (buf[12] != ' ' && buf[12] != '\r'))
                return -EBADMSG;
        h->status = (buf[9] - '0') * 100 + (buf[10] - '0') * 10 + (buf[11] - '0');
        line = memmem(buf, h->end, "\r\n", 2) + 2;
        for (; line < end + 2; line = eol + 2) {
                const char *colon;
                size_t nl;

                eol = memmem(line, (size_t)(end + 2 - line), "\r\n", 2);
                colon = memchr(line, ':', (size_t)(eol - line));
                if (!colon || colon == line)
                        return -EBADMSG;
                nl = (size_t)(colon - line);
                if (nl == 14 && strncasecmp(line, "Content-Length", 14) == 0) {
                        uint64_t v;

                        if (parse_length(colon + 1, eol, &v) < 0 ||
                            (h->has_length && v != h->length))
                                return -EBADMSG;
                        h->has_length = true;
                        h->length = v;
                } else if (nl == 17 && strncasecmp(line, "Transfer-Encoding", 17) == 0) {
                        h->encoded = true;
                }
        }
        return 1;
}
