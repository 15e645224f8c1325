/* WebSocket (RFC 6455) handshake keys, shared by cellad's server (daemon/ws.c) and
 * libcella's client: Sec-WebSocket-Accept = base64(SHA-1(key + the RFC's GUID)). */
#ifndef CELLA_WS_KEY_H
#define CELLA_WS_KEY_H

#include <stdbool.h>
#include <stddef.h>

#define WS_ACCEPT_LEN 28 /* base64 of a 20-byte digest */

/* The accept value for key (a client's Sec-WebSocket-Key) into out (NUL-terminated).
 * Returns 0, or -EINVAL when key is not the base64 of 16 bytes (the RFC's requirement). */
int ws_accept_key(const char *key, char out[WS_ACCEPT_LEN + 1]);
/* A new random key (base64 of 16 random bytes) into out. 0 or -errno. */
int ws_new_key(char out[25]);
/* A comma-separated header value (Connection, Upgrade) contains token (case-insensitive). */
bool ws_header_has_token(const char *value, const char *token);

/* Browsers cannot set Authorization on a WebSocket; they offer subprotocols instead
 * (docs/api.md "Auth"). WS_PROTOCOL is the one cellad answers with when it is offered;
 * WS_BEARER_PREFIX + the token in base64url (RFC 4648 section 5, padding optional) is the
 * offered element that carries a bearer token. */
#define WS_PROTOCOL "cella"
#define WS_BEARER_PREFIX "cella.bearer."

/* The bearer token of a Sec-WebSocket-Protocol value (comma-separated elements, spaces and
 * tabs around each) into out (outsz bytes, NUL-terminated): the first element that starts
 * with WS_BEARER_PREFIX, decoded. 1 with a token, 0 without such an element, -EINVAL for
 * one that is not base64url, decodes to nothing or holds a byte below 0x21 or 0x7f,
 * -ENAMETOOLONG when it does not fit in out, -ENOMEM. */
int ws_protocol_bearer(const char *value, char *out, size_t outsz);

#endif
