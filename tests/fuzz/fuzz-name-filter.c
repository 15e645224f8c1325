/* Fuzz the session scripts' name filter (src/agent/name-filter.h).
 *
 * The first byte picks the chunk sizes; the rest is a command's stderr. Invariants: fed in
 * those chunks, the filter's output equals a plain one-pass rewrite of every
 * "<prefix><1..10 digits>" as "bash", and no feed writes more than it held plus what it
 * was given. */
#include <stdlib.h>
#include <string.h>

#include "agent/name-filter.h"
#include "fuzz.h"

#define PREFIX "/run/cella/sessions/s1/c"

static size_t model(const uint8_t *in, size_t n, char *out)
{
        size_t plen = strlen(PREFIX), w = 0, i = 0;

        while (i < n) {
                if (i + plen <= n && memcmp(in + i, PREFIX, plen) == 0) {
                        size_t d = 0;

                        while (i + plen + d < n && d < NAME_FILTER_MAX_DIGITS &&
                               in[i + plen + d] >= '0' && in[i + plen + d] <= '9')
                                d++;
                        if (d > 0) {
                                memcpy(out + w, "bash", 4);
                                w += 4;
                                i += plen + d;
                                continue;
                        }
                }
                out[w++] = (char)in[i++];
        }
        return w;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct name_filter f;
        char *want, *got;
        size_t wn, gn = 0, off = 0, k = 0;
        unsigned sizes[4];

        if (size < 1)
                return 0;
        for (int i = 0; i < 4; i++)
                sizes[i] = 1 + ((data[0] >> (2 * i)) & 3) * 7;
        data++;
        size--;
        want = malloc(size + 1);
        got = malloc(size + NAME_FILTER_MAX_PREFIX + NAME_FILTER_MAX_DIGITS + 1);
        FUZZ_CHECK(want && got);
        FUZZ_CHECK(name_filter_init(&f, PREFIX, "bash") == 0);
        wn = model(data, size, want);
        while (off < size) {
                size_t len = sizes[k++ % 4], held = name_filter_held(&f), w;

                if (len > size - off)
                        len = size - off;
                w = name_filter_feed(&f, (const char *)data + off, len, got + gn);
                FUZZ_CHECK(w <= held + len);
                gn += w;
                off += len;
        }
        gn += name_filter_flush(&f, got + gn);
        FUZZ_CHECK(gn == wn && memcmp(got, want, wn) == 0);
        free(want);
        free(got);
        return 0;
}
