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

#endif
