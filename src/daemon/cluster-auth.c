/* The authenticator of node-to-node requests (cluster-auth.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "common/macros.h"
#include "daemon/cluster-auth.h"

/* ---- the header ---- */

static bool is_hex(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
                        return false;
        return true;
}

static bool is_name(const char *s, size_t n)
{
        for (size_t i = 0; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '-'))
                        return false;
        return true;
}

/* A decimal in 0..INT64_MAX of n bytes. */
static int dec(const char *s, size_t n, int64_t *ret)
{
        int64_t v = 0;

        if (n == 0 || n > 18)
                return -EINVAL;
        for (size_t i = 0; i < n; i++) {
                if (s[i] < '0' || s[i] > '9')
                        return -EINVAL;
                v = v * 10 + (s[i] - '0');
        }
        *ret = v;
        return 0;
}

static int copy(char *out, size_t outsz, const char *v, size_t n)
{
        if (n >= outsz)
                return -EINVAL;
        memcpy(out, v, n);
        out[n] = '\0';
        return 0;
}

enum { F_V1, F_NODE, F_TS, F_NONCE, F_ADMIN, F_TENANT, F_KEY, F_MAXSB, F_MAXMEM, F_MAC, F_N };

int cluster_auth_parse(const char *value, struct cluster_auth *ret)
{
        static const char *const names[F_N] = {"v1",     "node", "ts",    "nonce",  "admin",
                                               "tenant", "key",  "maxsb", "maxmem", "mac"};
        struct cluster_auth a = {0};
        unsigned seen = 0;
        const char *s = value;
        int64_t adm = 0;

        if (!value || strlen(value) > CELLA_CLUSTER_AUTH_HEADER_MAX)
                return -EINVAL;
        while (*s) {
                size_t len, kl, vl;
                const char *eq, *v;
                int f;

                while (*s == ' ' || *s == '\t')
                        s++;
                len = strcspn(s, ";");
                while (len > 0 && (s[len - 1] == ' ' || s[len - 1] == '\t'))
                        len--;
                eq = memchr(s, '=', len);
                kl = eq ? (size_t)(eq - s) : len;
                v = eq ? eq + 1 : s + len;
                vl = eq ? len - kl - 1 : 0;
                for (f = 0; f < F_N; f++)
                        if (strlen(names[f]) == kl && memcmp(names[f], s, kl) == 0)
                                break;
                if (f == F_N || (seen & (1u << f)) || (f == F_V1) != !eq)
                        return -EINVAL;
                if (f == F_V1 && seen)
                        return -EINVAL; /* the version comes first */
                seen |= 1u << f;
                switch (f) {
                case F_V1:
                        break;
                case F_NODE:
                        if (vl == 0 || !is_name(v, vl) || copy(a.node, sizeof(a.node), v, vl) < 0)
                                return -EINVAL;
                        break;
                case F_TS:
                        if (dec(v, vl, &a.ts_ms) < 0)
                                return -EINVAL;
                        break;
                case F_NONCE:
                        if (vl != CLUSTER_AUTH_NONCE_LEN || !is_hex(v, vl))
                                return -EINVAL;
                        copy(a.nonce, sizeof(a.nonce), v, vl);
                        break;
                case F_ADMIN:
                        if (vl != 1 || (v[0] != '0' && v[0] != '1') || dec(v, vl, &adm) < 0)
                                return -EINVAL;
                        a.admin = adm == 1;
                        break;
                case F_TENANT: /* "" is the default tenant */
                        if ((vl && !is_name(v, vl)) || memchr(v, '-', vl) ||
                            copy(a.tenant, sizeof(a.tenant), v, vl) < 0)
                                return -EINVAL;
                        break;
                case F_KEY:
                        if ((vl != 0 && vl != CELLA_KEY_ID_LEN) || !is_hex(v, vl))
                                return -EINVAL;
                        copy(a.key_id, sizeof(a.key_id), v, vl);
                        break;
                case F_MAXSB:
                        if (dec(v, vl, &a.max_sandboxes) < 0)
                                return -EINVAL;
                        break;
                case F_MAXMEM:
                        if (dec(v, vl, &a.max_memory_bytes) < 0)
                                return -EINVAL;
                        break;
                case F_MAC:
                        if (vl != CLUSTER_AUTH_MAC_LEN || !is_hex(v, vl))
                                return -EINVAL;
                        copy(a.mac, sizeof(a.mac), v, vl);
                        break;
                }
                s += strcspn(s, ";");
                if (*s == ';')
                        s++;
        }
        if (seen != (1u << F_N) - 1)
                return -EINVAL;
        *ret = a;
        return 0;
}

/* ---- the MAC ---- */

/* What the MAC covers: every field in a fixed order, one per line (no field holds '\n':
 * the method and target come from a parsed request line, the rest from the parser above or
 * the signer's own values). */
static int canonical(char *out, size_t outsz, const char *method, const char *target,
                     const struct cluster_auth *a)
{
        int n = snprintf(out, outsz,
                         "cella-cluster-v1\n%s\n%s\n%s\n%" PRId64 "\n%s\n%d\n%s\n%s\n%" PRId64
                         "\n%" PRId64 "\n",
                         method, target, a->node, a->ts_ms, a->nonce, a->admin ? 1 : 0, a->tenant,
                         a->key_id, a->max_sandboxes, a->max_memory_bytes);

        return n < 0 || (size_t)n >= outsz ? -E2BIG : n;
}

int cluster_auth_mac(const unsigned char *secret, size_t secret_len, const char *method,
                     const char *target, const struct cluster_auth *a,
                     char out[CLUSTER_AUTH_MAC_LEN + 1])
{
        static const char hex[] = "0123456789abcdef";
        unsigned char md[EVP_MAX_MD_SIZE];
        unsigned int mdlen = 0;
        size_t tl = strlen(target) + strlen(method);
        _cleanup_free_ char *msg = malloc(tl + 512);
        int n;

        if (!msg)
                return -ENOMEM;
        n = canonical(msg, tl + 512, method, target, a);
        if (n < 0)
                return n;
        if (!HMAC(EVP_sha256(), secret, (int)secret_len, (const unsigned char *)msg, (size_t)n, md,
                  &mdlen) ||
            mdlen != 32)
                return -EIO;
        for (unsigned i = 0; i < 32; i++) {
                out[2 * i] = hex[md[i] >> 4];
                out[2 * i + 1] = hex[md[i] & 15];
        }
        out[CLUSTER_AUTH_MAC_LEN] = '\0';
        return 0;
}

int cluster_auth_sign(const unsigned char *secret, size_t secret_len, const char *method,
                      const char *target, struct cluster_auth *a, struct buf *out)
{
        static const char hex[] = "0123456789abcdef";
        unsigned char rnd[CLUSTER_AUTH_NONCE_LEN / 2];
        int r;

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                return -EIO;
        for (size_t i = 0; i < sizeof(rnd); i++) {
                a->nonce[2 * i] = hex[rnd[i] >> 4];
                a->nonce[2 * i + 1] = hex[rnd[i] & 15];
        }
        a->nonce[CLUSTER_AUTH_NONCE_LEN] = '\0';
        r = cluster_auth_mac(secret, secret_len, method, target, a, a->mac);
        if (r < 0)
                return r;
        return buf_printf(out,
                          CLUSTER_AUTH_HEADER ": v1; node=%s; ts=%" PRId64
                                              "; nonce=%s; admin=%d; tenant=%s; key=%s; "
                                              "maxsb=%" PRId64 "; maxmem=%" PRId64 "; mac=%s\r\n",
                          a->node, a->ts_ms, a->nonce, a->admin ? 1 : 0, a->tenant, a->key_id,
                          a->max_sandboxes, a->max_memory_bytes, a->mac);
}

int cluster_auth_verify(const unsigned char *secret, size_t secret_len, const char *method,
                        const char *target, const struct cluster_auth *a, int64_t now_ms,
                        struct cella_error *err)
{
        char mac[CLUSTER_AUTH_MAC_LEN + 1];

        if (cluster_auth_mac(secret, secret_len, method, target, a, mac) < 0 ||
            CRYPTO_memcmp(mac, a->mac, CLUSTER_AUTH_MAC_LEN) != 0) {
                cella_error_set(err, CELLA_E_UNAUTHORIZED,
                                "cluster authenticator of node '%s' does not hold (another "
                                "secret, or a forged request)",
                                a->node);
                return -EACCES;
        }
        if (a->ts_ms < now_ms - CELLA_CLUSTER_AUTH_SKEW_MS ||
            a->ts_ms > now_ms + CELLA_CLUSTER_AUTH_SKEW_MS) {
                cella_error_set(err, CELLA_E_UNAUTHORIZED,
                                "cluster authenticator of node '%s' is %lld ms off this node's "
                                "clock (at most %d)",
                                a->node, (long long)(a->ts_ms - now_ms),
                                CELLA_CLUSTER_AUTH_SKEW_MS);
                return -EACCES;
        }
        return 0;
}

/* ---- the nonces seen ---- */

struct nonce_slot {
        uint64_t hi, lo; /* the nonce's 128 bits; 0/0: free */
        int64_t ts_ms;
};

struct nonce_cache {
        struct nonce_slot slot[CELLA_CLUSTER_AUTH_NONCES];
};

struct nonce_cache *nonce_cache_new(void)
{
        return calloc(1, sizeof(struct nonce_cache));
}

void nonce_cache_free(struct nonce_cache *nc)
{
        free(nc);
}

static uint64_t hex64(const char *s)
{
        uint64_t v = 0;

        for (int i = 0; i < 16; i++)
                v = v << 4 | (uint64_t)(s[i] <= '9' ? s[i] - '0' : s[i] - 'a' + 10);
        return v;
}

#define NONCE_PROBES 64

int nonce_cache_add(struct nonce_cache *nc, const char *nonce, int64_t ts_ms, int64_t now_ms)
{
        uint64_t hi = hex64(nonce), lo = hex64(nonce + 16);
        int64_t old = now_ms - 2 * CELLA_CLUSTER_AUTH_SKEW_MS;
        size_t h = (size_t)((hi ^ (lo * 0x9e3779b97f4a7c15ull)) % CELLA_CLUSTER_AUTH_NONCES);
        struct nonce_slot *free_slot = NULL;

        if (hi == 0 && lo == 0)
                lo = 1; /* never the free mark */
        for (size_t i = 0; i < NONCE_PROBES; i++) {
                struct nonce_slot *s = &nc->slot[(h + i) % CELLA_CLUSTER_AUTH_NONCES];
                bool empty = (s->hi == 0 && s->lo == 0) || s->ts_ms < old;

                if (!empty && s->hi == hi && s->lo == lo)
                        return -EEXIST;
                if (empty && !free_slot)
                        free_slot = s;
                if (s->hi == 0 && s->lo == 0)
                        break; /* nothing was ever put past a never-used slot */
        }
        if (!free_slot)
                return -ENOSPC;
        free_slot->hi = hi;
        free_slot->lo = lo;
        free_slot->ts_ms = ts_ms > now_ms ? ts_ms : now_ms;
        return 0;
}
