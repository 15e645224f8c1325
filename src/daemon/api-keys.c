/* Tenants' API keys (docs/api.md "Tenants and keys", docs/tenants.md, decision 0053):
 * POST /v1/keys, GET /v1/keys, DELETE /v1/keys/{key}. The admin's routes (API_ROUTE_ADMIN):
 * a key's secret is answered once, at its creation, and only its SHA-256 is kept: in the
 * registry, or on a cluster node in etcd (cluster-keys.h), answered when etcd has it. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/apikey.h"
#include "common/timeutil.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/cluster-keys.h"
#include "daemon/cluster.h"
#include "daemon/sandbox.h"
#include "daemon/store.h"
#include "daemon/tenant.h"

/* A key's JSON (never its secret or hash). New reference. */
static json_t *key_json(const struct store_key *k)
{
        char created[32];

        time_format_iso(k->created_ms, created, sizeof(created));
        return json_pack("{s:s, s:s, s:I, s:I, s:s}", "id", k->id, "tenant", k->tenant,
                         "maxSandboxes", (json_int_t)k->max_sandboxes, "maxMemory",
                         (json_int_t)k->max_memory_bytes, "createdAt", created);
}

static int key_append(const struct store_key *k, void *ud)
{
        return json_array_append_new(ud, key_json(k)) < 0 ? -ENOMEM : 0;
}

static int key_count(const struct store_key *k, void *ud)
{
        (void)k;
        (*(size_t *)ud)++;
        return 0;
}

/* A limit given as a non-negative integer (absent: 0, none). false after answering. */
static bool limit_of(struct http_request *req, json_t *body, const char *field, int64_t *out)
{
        json_t *v = json_object_get(body, field);

        *out = 0;
        if (!v || json_is_null(v))
                return true;
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "%s must be a non-negative integer (0: no limit)", field);
                return false;
        }
        *out = json_integer_value(v);
        return true;
}

/* ---- on a cluster node: the keys are etcd's ---- */

/* A key being put into etcd: its answer (with the secret) waits for etcd's. */
struct key_put {
        struct http_request *req;
        json_t *answer;
};

static void key_put_done(int r, const struct cella_error *err, void *ud)
{
        struct key_put *kp = ud;
        json_t *key = json_object_get(kp->answer, "key");

        if (r < 0)
                http_respond_error(kp->req, err, NULL);
        else
                http_respond_json(kp->req, 201, kp->answer);
        if (json_is_string(key)) /* the secret goes with the answer's memory */
                explicit_bzero((char *)json_string_value(key), json_string_length(key));
        json_decref(kp->answer);
        http_request_unref(kp->req);
        free(kp);
}

/* Put k into etcd and answer out (taken) when it is there. */
static void cluster_key_put(struct api *a, struct http_request *req, const struct store_key *k,
                            json_t *out)
{
        struct cluster_keys *ck = cluster_keys(a->cfg.cluster);
        struct key_put *kp;

        if (!ck || cluster_keys_count(ck) >= CELLA_KEYS_MAX) {
                json_decref(out);
                http_respond_code(req, ck ? CELLA_E_VALIDATION_FAILED : CELLA_E_INTERNAL_ERROR,
                                  ck ? "%d keys exist: remove one first" : "no key store",
                                  CELLA_KEYS_MAX);
                return;
        }
        kp = calloc(1, sizeof(*kp));
        if (!kp) {
                json_decref(out);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        kp->req = req;
        kp->answer = out;
        http_request_ref(req);
        if (cluster_keys_create(ck, k, key_put_done, kp) < 0) {
                struct cella_error err = {0};

                cella_error_set(&err, CELLA_E_SERVER_BUSY, "too many requests to etcd at once");
                key_put_done(-EBUSY, &err, kp);
        }
}

static void keys_listed(const struct store_key *keys, size_t n, const struct cella_error *err,
                        void *ud)
{
        struct http_request *req = ud;
        json_t *arr = err ? NULL : json_array(), *j;

        for (size_t i = 0; arr && i < n; i++)
                json_array_append_new(arr, key_json(&keys[i]));
        if (err) {
                http_respond_error(req, err, NULL);
        } else if (!arr || !(j = json_pack("{s:o}", "keys", arr))) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
        } else {
                http_respond_json(req, 200, j);
                json_decref(j);
        }
        http_request_unref(req);
}

struct key_rm {
        struct http_request *req;
        char id[CELLA_KEY_ID_LEN + 1];
};

static void key_removed(int r, const struct cella_error *err, void *ud)
{
        struct key_rm *rm = ud;
        json_t *j;

        if (r < 0) {
                http_respond_error(rm->req, err, NULL);
        } else if (r == 0) {
                http_respond_code(rm->req, CELLA_E_KEY_NOT_FOUND, "no key '%s'", rm->id);
        } else {
                j = json_pack("{s:s, s:b}", "id", rm->id, "deleted", 1);
                http_respond_json(rm->req, 200, j);
                json_decref(j);
        }
        http_request_unref(rm->req);
        free(rm);
}

static void create_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct api *a = ud;
        struct store *st = sandbox_table_store(a->cfg.table);
        char id[CELLA_KEY_ID_LEN + 1], secret[CELLA_KEY_SECRET_LEN + 1], key[CELLA_KEY_LEN + 1];
        char hash[CELLA_KEY_HASH_HEX + 1];
        struct cella_error err = {0};
        const char *tenant = NULL;
        size_t n = 0;
        json_error_t je;
        json_t *j = json_loadb(body, len, 0, &je), *out;
        struct store_key k = {0};

        if (!j || json_unpack_ex(j, &je, 0, "{s:s}", "tenant", &tenant) < 0) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "body must be {tenant, maxSandboxes?, maxMemory?}: %s", je.text);
                goto out;
        }
        {
                const char *f;
                json_t *v;

                json_object_foreach(j, f, v)
                {
                        if (strcmp(f, "tenant") != 0 && strcmp(f, "maxSandboxes") != 0 &&
                            strcmp(f, "maxMemory") != 0) {
                                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                                  "unknown field '%.64s' (tenant, maxSandboxes, "
                                                  "maxMemory)",
                                                  f);
                                goto out;
                        }
                }
        }
        if (!tenant_name_is_valid(tenant)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "tenant must be 1-%d characters of [a-z0-9]", CELLA_TENANT_MAX);
                goto out;
        }
        if (!limit_of(req, j, "maxSandboxes", &k.max_sandboxes) ||
            !limit_of(req, j, "maxMemory", &k.max_memory_bytes))
                goto out;
        if (!a->cfg.cluster && store_key_foreach(st, key_count, &n, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (n >= CELLA_KEYS_MAX) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED, "%d keys exist: remove one first",
                                  CELLA_KEYS_MAX);
                goto out;
        }
        if (apikey_generate(id, secret, key) < 0 || apikey_hash(secret, hash) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot make a key");
                goto out;
        }
        k.id = id;
        k.tenant = tenant;
        k.secret_sha256 = hash;
        k.created_ms = time_now_ms();
        if (a->cfg.cluster) {
                out = key_json(&k);
                if (out && json_object_set_new(out, "key", json_string(key)) == 0)
                        cluster_key_put(a, req, &k, out); /* shown this once */
                else {
                        json_decref(out);
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                }
                goto out;
        }
        if (store_key_save(st, &k, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        out = key_json(&k);
        if (out)
                json_object_set_new(out, "key", json_string(key)); /* shown this once */
        if (out)
                http_respond_json(req, 201, out);
        else
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
        json_decref(out);
out:
        explicit_bzero(secret, sizeof(secret));
        explicit_bzero(key, sizeof(key));
        json_decref(j);
}

void api_keys_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        (void)p;
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, create_body, a) < 0)
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
}

void api_keys_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        json_t *arr = json_array(), *j;

        (void)p;
        if (a->cfg.cluster && cluster_keys(a->cfg.cluster)) {
                json_decref(arr);
                http_request_ref(req);
                if (cluster_keys_list(cluster_keys(a->cfg.cluster), keys_listed, req) < 0) {
                        http_request_unref(req);
                        http_respond_code(req, CELLA_E_SERVER_BUSY,
                                          "too many requests to etcd at once");
                }
                return;
        }
        if (!arr ||
            store_key_foreach(sandbox_table_store(a->cfg.table), key_append, arr, &err) < 0) {
                json_decref(arr);
                if (!cella_error_is_set(&err))
                        cella_error_set(&err, CELLA_E_INTERNAL_ERROR, "out of memory");
                http_respond_error(req, &err, NULL);
                return;
        }
        j = json_pack("{s:o}", "keys", arr);
        http_respond_json(req, 200, j);
        json_decref(j);
}

void api_keys_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        bool existed = false;
        json_t *j;

        if (a->cfg.cluster && cluster_keys(a->cfg.cluster)) {
                struct key_rm *rm = calloc(1, sizeof(*rm));

                if (!rm) {
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return;
                }
                rm->req = req;
                snprintf(rm->id, sizeof(rm->id), "%s", p->param);
                http_request_ref(req);
                if (cluster_keys_delete(cluster_keys(a->cfg.cluster), p->param, key_removed, rm) <
                    0) {
                        http_request_unref(req);
                        free(rm);
                        http_respond_code(req, CELLA_E_SERVER_BUSY,
                                          "too many requests to etcd at once");
                }
                return;
        }
        if (store_key_delete(sandbox_table_store(a->cfg.table), p->param, &existed, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        if (!existed) {
                http_respond_code(req, CELLA_E_KEY_NOT_FOUND, "no key '%s'", p->param);
                return;
        }
        j = json_pack("{s:s, s:b}", "id", p->param, "deleted", 1);
        http_respond_json(req, 200, j);
        json_decref(j);
}
