/* Failed-authentication buckets per client address (see ratelimit.h). */
#include <stdlib.h>
#include <string.h>

#include "common/limits.h"
#include "daemon/ratelimit.h"

#define ADDR_MAX 46 /* INET6_ADDRSTRLEN */

struct bucket {
        char addr[ADDR_MAX]; /* "" for a free slot */
        double tokens;
        uint64_t at_ms; /* tokens as of this time */
};

struct auth_limiter {
        struct bucket slots[CELLA_AUTH_FAIL_TRACKED];
};

struct auth_limiter *auth_limiter_new(void)
{
        return calloc(1, sizeof(struct auth_limiter));
}

void auth_limiter_free(struct auth_limiter *l)
{
        free(l);
}

static struct bucket *slot(struct auth_limiter *l, const char *addr, bool create, uint64_t now)
{
        uint32_t h = 2166136261u; /* FNV-1a */
        struct bucket *b;

        for (const char *p = addr; *p; p++)
                h = (h ^ (uint8_t)*p) * 16777619u;
        b = &l->slots[h % CELLA_AUTH_FAIL_TRACKED];
        if (strncmp(b->addr, addr, ADDR_MAX) == 0 && b->addr[0])
                return b;
        if (!create)
                return NULL;
        snprintf(b->addr, sizeof(b->addr), "%s", addr);
        b->tokens = CELLA_AUTH_FAIL_BURST;
        b->at_ms = now;
        return b;
}

static void refill(struct bucket *b, uint64_t now)
{
        if (now > b->at_ms) {
                b->tokens += (double)(now - b->at_ms) * CELLA_AUTH_FAIL_RATE / 1000.0;
                if (b->tokens > CELLA_AUTH_FAIL_BURST)
                        b->tokens = CELLA_AUTH_FAIL_BURST;
                b->at_ms = now;
        }
}

bool auth_limiter_blocked(struct auth_limiter *l, const char *addr, uint64_t now_ms)
{
        struct bucket *b = l ? slot(l, addr, false, now_ms) : NULL;

        if (!b)
                return false;
        refill(b, now_ms);
        return b->tokens < 1.0;
}

void auth_limiter_failed(struct auth_limiter *l, const char *addr, uint64_t now_ms)
{
        struct bucket *b = l ? slot(l, addr, true, now_ms) : NULL;

        if (!b)
                return;
        refill(b, now_ms);
        b->tokens = b->tokens >= 1.0 ? b->tokens - 1.0 : 0.0;
}

bool auth_token_equal(const char *given, const char *want)
{
        size_t gl = strlen(given), wl = strlen(want);
        unsigned char diff = gl != wl;

        /* Time depends on the length of the presented token only, never on where the
         * first difference is. */
        for (size_t i = 0; i < gl; i++)
                diff |= (unsigned char)(given[i] ^ want[wl ? i % wl : 0]);
        return wl > 0 && diff == 0;
}
