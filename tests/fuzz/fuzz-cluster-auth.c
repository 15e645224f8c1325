/* Fuzz the X-Cella-Cluster header (src/daemon/cluster-auth.h): the authenticator a node
 * sends with a forwarded request, parsed by the node that receives it from any client.
 *
 * Invariants: a value that parses has every field of its shape (a node name, a 32-hex
 * nonce, a 64-hex MAC, a tenant of [a-z0-9], a key id empty or 12 hex); signing the parsed
 * fields again with a secret gives a value that parses to the same fields and verifies
 * with that secret at its own time, and not with another secret nor for another target;
 * the parsed MAC of the input itself never verifies against a secret the input cannot
 * know. */
#include <stdio.h>
#include <string.h>

#include "common/buf.h"
#include "daemon/cluster-auth.h"
#include "fuzz.h"

static const unsigned char secret[] = "fuzz-cluster-secret-0123456789abcdef";

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        struct cluster_auth a, b;
        struct cella_error err = {0};
        struct buf out = BUF_INIT;
        char s[1024];
        const char *colon;

        if (size >= sizeof(s))
                return 0;
        memcpy(s, data, size);
        s[size] = '\0';
        if (cluster_auth_parse(s, &a) < 0)
                return 0;
        FUZZ_CHECK(strlen(a.nonce) == CLUSTER_AUTH_NONCE_LEN);
        FUZZ_CHECK(strlen(a.mac) == CLUSTER_AUTH_MAC_LEN);
        FUZZ_CHECK(a.node[0] && strlen(a.node) < sizeof(a.node));
        FUZZ_CHECK(strlen(a.key_id) == 0 || strlen(a.key_id) == CELLA_KEY_ID_LEN);
        FUZZ_CHECK(!strchr(a.tenant, '-'));
        /* the input's MAC was made with nothing the fuzzer knows */
        FUZZ_CHECK(cluster_auth_verify(secret, sizeof(secret) - 1, "GET", "/", &a, a.ts_ms, &err) <
                   0);
        /* signed again: the same fields, and it holds */
        FUZZ_CHECK(cluster_auth_sign(secret, sizeof(secret) - 1, "POST", "/v1/x?y=1", &a, &out) ==
                   0);
        colon = strstr(out.data, ": ");
        FUZZ_CHECK(colon && out.len > 2);
        out.data[out.len - 2] = '\0'; /* the CRLF */
        FUZZ_CHECK(cluster_auth_parse(colon + 2, &b) == 0);
        FUZZ_CHECK(strcmp(a.node, b.node) == 0 && a.ts_ms == b.ts_ms &&
                   strcmp(a.nonce, b.nonce) == 0 && a.admin == b.admin &&
                   strcmp(a.tenant, b.tenant) == 0 && strcmp(a.key_id, b.key_id) == 0 &&
                   a.max_sandboxes == b.max_sandboxes && a.max_memory_bytes == b.max_memory_bytes &&
                   strcmp(a.mac, b.mac) == 0);
        FUZZ_CHECK(cluster_auth_verify(secret, sizeof(secret) - 1, "POST", "/v1/x?y=1", &b, b.ts_ms,
                                       &err) == 0);
        FUZZ_CHECK(cluster_auth_verify(secret, sizeof(secret) - 1, "POST", "/v1/x?y=2", &b, b.ts_ms,
                                       &err) < 0);
        FUZZ_CHECK(cluster_auth_verify((const unsigned char *)"another-secret-0123", 19, "POST",
                                       "/v1/x?y=1", &b, b.ts_ms, &err) < 0);
        buf_free(&out);
        return 0;
}
