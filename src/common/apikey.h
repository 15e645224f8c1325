/* API keys of tenants (docs/tenants.md, decision 0053): the key string, its hash and the
 * tenant name rule. A key is "cella_<id>_<secret>": id CELLA_KEY_ID_LEN lower-case hex (the
 * registry's lookup), secret CELLA_KEY_SECRET_LEN of [A-Za-z0-9] (only its SHA-256 is
 * kept). Pure functions: the parser is fuzzed (tests/fuzz/fuzz-apikey.c). */
#ifndef CELLA_COMMON_APIKEY_H
#define CELLA_COMMON_APIKEY_H

#include <stdbool.h>
#include <stddef.h>

#include "common/limits.h"

#define CELLA_KEY_PREFIX "cella_"
#define CELLA_KEY_LEN (sizeof(CELLA_KEY_PREFIX) - 1 + CELLA_KEY_ID_LEN + 1 + CELLA_KEY_SECRET_LEN)
#define CELLA_KEY_HASH_HEX 64 /* SHA-256, hex */

/* A tenant's name: 1..CELLA_TENANT_MAX of [a-z0-9] (no '-': a tenant's preview host
 * splits at the last "--", decision 0053). */
bool tenant_name_is_valid(const char *s);
/* A key id: exactly CELLA_KEY_ID_LEN of [0-9a-f]. */
bool apikey_id_is_valid(const char *s);

/* Split key (len bytes, not NUL-terminated, may hold anything) into its id and secret.
 * 0, or -EINVAL when it is not a key's shape. */
int apikey_parse(const char *key, size_t len, char id[CELLA_KEY_ID_LEN + 1],
                 char secret[CELLA_KEY_SECRET_LEN + 1]);
/* A new key from getrandom: its id, its secret, and the whole string. 0 or -errno. */
int apikey_generate(char id[CELLA_KEY_ID_LEN + 1], char secret[CELLA_KEY_SECRET_LEN + 1],
                    char key[CELLA_KEY_LEN + 1]);
/* SHA-256 of secret, lower-case hex. 0 or -EIO. */
int apikey_hash(const char *secret, char out[CELLA_KEY_HASH_HEX + 1]);
/* Does secret hash to hash_hex? The hashes are compared in constant time. */
bool apikey_secret_matches(const char *secret, const char *hash_hex);

#endif
