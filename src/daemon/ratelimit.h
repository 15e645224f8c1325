/* Failed authentications per client address (docs/decisions/0030-auth-rate-limit.md): a
 * token bucket per address of CELLA_AUTH_FAIL_BURST failures, refilled at
 * CELLA_AUTH_FAIL_RATE per second. While an address's bucket is empty every request of
 * it that needs a credential (a bearer token, a preview token) is answered 429
 * TOO_MANY_REQUESTS before the credential is looked at, so guesses cannot go faster than
 * the refill rate. At most CELLA_AUTH_FAIL_TRACKED addresses are remembered (a fixed
 * table: an address whose slot another one takes starts with a full bucket again). */
#ifndef CELLA_DAEMON_RATELIMIT_H
#define CELLA_DAEMON_RATELIMIT_H

#include <stdbool.h>
#include <stdint.h>

struct auth_limiter;

struct auth_limiter *auth_limiter_new(void); /* NULL without memory */
void auth_limiter_free(struct auth_limiter *l);
/* addr: the client's address (an IP literal); now_ms: a monotonic clock. */
bool auth_limiter_blocked(struct auth_limiter *l, const char *addr, uint64_t now_ms);
void auth_limiter_failed(struct auth_limiter *l, const char *addr, uint64_t now_ms);

/* Constant-time comparison of a presented credential (a bearer token, a preview token)
 * with the expected one; false when want is empty. */
bool auth_token_equal(const char *given, const char *want);

#endif
