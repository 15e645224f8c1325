/* The etcd JSON gateway's answers, decoded (etcd.h). Pure: no I/O, fuzzed by
 * tests/fuzz/fuzz-etcd.c. The gateway follows proto3's JSON mapping: 64-bit integers are
 * strings, bytes are base64, fields at their zero value are left out (a false
 * "succeeded", an empty "kvs", a "count" of 0). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "common/base64.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "daemon/etcd.h"

static void drop_kvs(struct etcd_answer *a);

void etcd_answer_clear(struct etcd_answer *a)
{
        drop_kvs(a);
        *a = (struct etcd_answer){0};
}

int etcd_int_parse(const char *s, int64_t *ret)
{
        const char *p = s;
        int64_t v = 0;
        bool neg = false;

        if (*p == '-') {
                neg = true;
                p++;
        }
        if (!*p || strlen(p) > 19)
                return -EINVAL;
        for (; *p; p++) {
                if (*p < '0' || *p > '9')
                        return -EINVAL;
                if (v > (INT64_MAX - (*p - '0')) / 10)
                        return -EINVAL;
                v = v * 10 + (*p - '0');
        }
        *ret = neg ? -v : v;
        return 0;
}

int etcd_code_errno(int64_t grpc_code)
{
        switch (grpc_code) {
        case 3:
                return -EINVAL;
        case 4:
        case 14:
                return -EAGAIN;
        case 5:
        case 9:
                return -ENOENT;
        default:
                return -EIO;
        }
}

static int fail(struct etcd_answer *a, int r, const char *what)
{
        cella_error_set(&a->err, CELLA_E_CLUSTER_UNAVAILABLE, "etcd answered %s", what);
        a->r = r;
        return r;
}

/* An optional integer field: absent or null is 0. */
static int int_field(json_t *o, const char *name, int64_t *ret)
{
        json_t *v = json_object_get(o, name);

        *ret = 0;
        if (!v || json_is_null(v))
                return 0;
        if (json_is_integer(v)) {
                *ret = json_integer_value(v);
                return 0;
        }
        if (json_is_string(v))
                return etcd_int_parse(json_string_value(v), ret);
        return -EINVAL;
}

/* An optional base64 field into a NUL-terminated copy (absent: empty). */
static int bytes_field(json_t *o, const char *name, char **ret, size_t *ret_len)
{
        json_t *v = json_object_get(o, name);
        _cleanup_buf_ struct buf b = BUF_INIT;
        int r;

        if (v && !json_is_null(v)) {
                if (!json_is_string(v))
                        return -EINVAL;
                r = base64_decode(&b, json_string_value(v), json_string_length(v));
                if (r < 0)
                        return r;
        }
        if (buf_reserve(&b, 1) < 0)
                return -ENOMEM;
        *ret_len = b.len;
        *ret = buf_steal(&b);
        return 0;
}

static int decode_header(json_t *root, struct etcd_answer *a)
{
        json_t *h = json_object_get(root, "header");

        if (h && !json_is_object(h))
                return fail(a, -EPROTO, "a header that is not an object");
        if (h && int_field(h, "revision", &a->revision) < 0)
                return fail(a, -EPROTO, "a bad header revision");
        return 0;
}

static int decode_kvs_into(json_t *o, struct etcd_answer *a)
{
        json_t *kvs = json_object_get(o, "kvs");
        size_t n;

        if (int_field(o, "count", &a->count) < 0 || a->count < 0)
                return fail(a, -EPROTO, "a bad count");
        if (!kvs || json_is_null(kvs))
                return 0;
        if (!json_is_array(kvs))
                return fail(a, -EPROTO, "kvs that are not an array");
        n = json_array_size(kvs);
        if (n > CELLA_ETCD_RANGE_MAX)
                return fail(a, -EPROTO, "too many keys");
        if (n == 0)
                return 0;
        a->kvs = calloc(n, sizeof(*a->kvs));
        if (!a->kvs)
                return fail(a, -ENOMEM, "more than memory holds");
        for (size_t i = 0; i < n; i++) {
                json_t *kv = json_array_get(kvs, i);
                struct etcd_kv *k = &a->kvs[i];
                int r;

                if (!json_is_object(kv))
                        return fail(a, -EPROTO, "a kv that is not an object");
                a->n_kvs = i + 1;
                r = bytes_field(kv, "key", &k->key, &k->key_len);
                if (r == -ENOMEM)
                        return fail(a, r, "more than memory holds");
                if (r < 0 || k->key_len == 0)
                        return fail(a, -EPROTO, "a kv with a bad key");
                r = bytes_field(kv, "value", &k->value, &k->value_len);
                if (r == -ENOMEM)
                        return fail(a, r, "more than memory holds");
                if (r < 0)
                        return fail(a, -EPROTO, "a kv with a bad value");
                if (int_field(kv, "create_revision", &k->create_revision) < 0 ||
                    int_field(kv, "mod_revision", &k->mod_revision) < 0 ||
                    int_field(kv, "version", &k->version) < 0 ||
                    int_field(kv, "lease", &k->lease) < 0)
                        return fail(a, -EPROTO, "a kv with a bad revision, version or lease");
        }
        if (a->count < (int64_t)a->n_kvs)
                a->count = (int64_t)a->n_kvs;
        return 0;
}

static void drop_kvs(struct etcd_answer *a)
{
        for (size_t i = 0; i < a->n_kvs; i++) {
                free(a->kvs[i].key);
                free(a->kvs[i].value);
        }
        free(a->kvs);
        a->kvs = NULL;
        a->n_kvs = 0;
}

/* The kvs and count of a range answer; on failure none are kept. */
static int decode_kvs(json_t *o, struct etcd_answer *a)
{
        int r = decode_kvs_into(o, a);

        if (r < 0)
                drop_kvs(a);
        return r;
}

static int decode_error(json_t *root, struct etcd_answer *a)
{
        json_t *msg = json_object_get(root, "message");
        int64_t code = 0;

        if (!json_is_string(msg))
                msg = json_object_get(root, "error");
        if (int_field(root, "code", &code) < 0 || !json_is_string(msg))
                return fail(a, -EPROTO, "an error without a code or message");
        a->r = etcd_code_errno(code);
        cella_error_set(&a->err, CELLA_E_CLUSTER_UNAVAILABLE, "etcd: %.200s",
                        json_string_value(msg));
        return a->r;
}

static int decode_answer(enum etcd_op op, const char *body, size_t len, struct etcd_answer *a)
{
        _cleanup_json_ json_t *root = NULL;
        json_t *o;
        json_error_t jerr;

        *a = (struct etcd_answer){0};
        if (len > CELLA_ETCD_ANSWER_MAX)
                return fail(a, -EPROTO, "an answer over its size limit");
        root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
        if (!json_is_object(root))
                return fail(a, -EPROTO, "something that is not a JSON object");
        o = root;
        if (op == ETCD_OP_LEASE_KEEPALIVE) {
                /* A stream's message: {"result": {...}} or {"error": {...}}. */
                json_t *e = json_object_get(root, "error");

                if (json_is_object(e))
                        return decode_error(e, a);
                o = json_object_get(root, "result");
                if (!json_is_object(o))
                        return fail(a, -EPROTO, "a keepalive without a result");
        } else if (json_object_get(root, "error") || json_object_get(root, "code")) {
                return decode_error(root, a);
        }
        if (decode_header(o, a) < 0)
                return a->r;

        switch (op) {
        case ETCD_OP_RANGE:
                if (decode_kvs(o, a) < 0)
                        return a->r;
                break;
        case ETCD_OP_DELETE:
                if (int_field(o, "deleted", &a->deleted) < 0 || a->deleted < 0)
                        return fail(a, -EPROTO, "a bad deleted count");
                break;
        case ETCD_OP_TXN: {
                json_t *ok = json_object_get(o, "succeeded");
                json_t *resp = json_object_get(o, "responses");

                if (ok && !json_is_boolean(ok))
                        return fail(a, -EPROTO, "a txn whose succeeded is not a boolean");
                a->succeeded = json_is_true(ok);
                if (resp && !json_is_array(resp) && !json_is_null(resp))
                        return fail(a, -EPROTO, "txn responses that are not an array");
                if (!a->succeeded) {
                        /* The failure branch of etcd_create is one range. */
                        json_t *first = json_array_get(resp, 0);
                        json_t *range = json_object_get(first, "response_range");

                        if (!json_is_object(range))
                                return fail(a, -EPROTO, "a failed txn without its range");
                        if (decode_kvs(range, a) < 0)
                                return a->r;
                }
                break;
        }
        case ETCD_OP_LEASE_GRANT:
        case ETCD_OP_LEASE_KEEPALIVE: {
                json_t *e = json_object_get(o, "error");

                if (json_is_string(e) && json_string_length(e) > 0) {
                        cella_error_set(&a->err, CELLA_E_CLUSTER_UNAVAILABLE, "etcd: %.200s",
                                        json_string_value(e));
                        return a->r = -EIO;
                }
                if (int_field(o, "ID", &a->lease_id) < 0 || int_field(o, "TTL", &a->ttl) < 0)
                        return fail(a, -EPROTO, "a lease with a bad ID or TTL");
                if (a->ttl < 0)
                        a->ttl = 0;
                if (op == ETCD_OP_LEASE_GRANT && (a->lease_id == 0 || a->ttl == 0))
                        return fail(a, -EPROTO, "a lease grant without an ID or TTL");
                if (op == ETCD_OP_LEASE_KEEPALIVE && a->ttl == 0) {
                        cella_error_set(&a->err, CELLA_E_CLUSTER_UNAVAILABLE,
                                        "etcd: lease %lld not found", (long long)a->lease_id);
                        return a->r = -ENOENT;
                }
                break;
        }
        case ETCD_OP_PUT:
        case ETCD_OP_LEASE_REVOKE:
        case ETCD_OP_MAX:
                break;
        }
        return 0;
}

int etcd_decode(enum etcd_op op, const char *body, size_t len, struct etcd_answer *a)
{
        int r = decode_answer(op, body, len, a);

        if (r < 0) {
                /* A failed answer holds its error alone. */
                struct cella_error err = a->err;

                etcd_answer_clear(a);
                a->r = r;
                a->err = err;
        }
        return r;
}
