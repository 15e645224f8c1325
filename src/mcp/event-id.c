/* See event-id.h. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "mcp/event-id.h"

size_t mcp_event_id_format(char *buf, size_t size, uint64_t event, uint64_t stream)
{
        int n = stream ? snprintf(buf, size, "%" PRIu64 "-%" PRIu64, event, stream)
                       : snprintf(buf, size, "%" PRIu64, event);

        return n < 0 ? 0 : (size_t)n;
}

/* One decimal number at *s, advanced past it: 0, or -EINVAL (no digit, overflow). */
static int number(const char **s, uint64_t *ret)
{
        const char *p = *s;
        uint64_t v = 0;

        if (*p < '0' || *p > '9')
                return -EINVAL;
        for (; *p >= '0' && *p <= '9'; p++) {
                unsigned d = (unsigned)(*p - '0');

                if (v > (UINT64_MAX - d) / 10)
                        return -EINVAL;
                v = v * 10 + d;
        }
        *s = p;
        *ret = v;
        return 0;
}

int mcp_event_id_parse(const char *s, uint64_t *ret_event, uint64_t *ret_stream)
{
        uint64_t event, stream = 0;

        if (!s || number(&s, &event) < 0)
                return -EINVAL;
        if (*s == '-') {
                s++;
                if (number(&s, &stream) < 0 || stream == 0)
                        return -EINVAL;
        }
        if (*s != '\0')
                return -EINVAL;
        *ret_event = event;
        *ret_stream = stream;
        return 0;
}
