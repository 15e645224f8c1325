/* The sandboxes themselves (docs/api.md "Sandboxes"): health, list, create or update (PUT),
 * info, destroy, sleep now (0063). */
#include <stdlib.h>
#include <string.h>

#include "common/name.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/cluster.h"
#include "daemon/sandbox-directory.h"
#include "daemon/tenant.h"

#define CELLA_VERSION "0.1.0"

void api_health(struct api *a, struct http_request *req, const struct api_args *p)
{
        json_t *j = json_pack("{s:s, s:s, s:I, s:o, s:o}", "status", "ok", "version", CELLA_VERSION,
                              "sandboxes", (json_int_t)sandbox_table_count(a->cfg.table), "pool",
                              sandbox_table_pool_info(a->cfg.table), "disk",
                              sandbox_table_disk_info(a->cfg.table));
        const char *why = sandbox_table_memory_sleep_fallback(a->cfg.table);

        /* what sleepMode "memory" does on this host (decision 0050) */
        if (j)
                json_object_set_new(j, "memorySleep",
                                    why[0] ? json_pack("{s:b, s:s}", "available", 0, "reason", why)
                                           : json_pack("{s:b}", "available", 1));
        http_respond_json(req, 200, j);
        json_decref(j);
}

/* Keep in arr (SandboxInfo, each with its tenant's view) only tenant's sandboxes. */
static void only_tenant(json_t *arr, const char *tenant)
{
        for (size_t i = json_array_size(arr); i-- > 0;) {
                const char *t =
                        json_string_value(json_object_get(json_array_get(arr, i), "tenant"));

                if (strcmp(t ? t : "", tenant) != 0)
                        json_array_remove(arr, i);
        }
}

void api_sandboxes_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        json_t *arr;
        json_t *j;

        /* On a cluster node: every node's (cluster.h), from etcd. */
        if (a->cfg.cluster) {
                bool all = p->principal->admin && !http_request_query(req, "tenant");

                http_request_ref(req);
                if (cluster_sandboxes(a->cfg.cluster, all ? NULL : p->principal->tenant,
                                      api_answer_json, req) < 0) {
                        http_respond_code(req, CELLA_E_SERVER_BUSY,
                                          "too many requests to etcd at once");
                        http_request_unref(req);
                }
                return;
        }
        arr = sandbox_table_list(a->cfg.table);

        /* the admin sees every tenant's, unless it names one */
        if (arr && (!p->principal->admin || http_request_query(req, "tenant")))
                only_tenant(arr, p->principal->tenant);
        j = json_pack("{s:o}", "sandboxes", arr);
        if (!j) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        http_respond_json(req, 200, j);
        json_decref(j);
}

/* PUT /v1/sandboxes/{id}: the body is read first; the name is checked again with the
 * body's normalizeId. */
struct put_ctx {
        struct api *a;
        struct principal who;             /* whom the request acts for */
        char raw[CELLA_NAME_MAX * 4 + 1]; /* the name as given (checked again) */
        bool query_normalize;
};

/* The directory's answer to PUT (a new sandbox's after its start, off the loop): the
 * request is held until then; answering a client that left is a no-op. */
struct put_wait {
        struct api *a;
        struct http_request *req;
        struct quota_hold *hold; /* the new sandbox's on its tenant's quotas, until here */
};

static void put_answer(struct sandbox *sb, bool created, const struct cella_error *err, void *ud)
{
        struct put_wait *pw = ud;
        struct http_request *req = pw->req;

        api_quota_release(pw->a, pw->hold);
        free(pw);

        if (err) {
                http_respond_error(req, err, NULL);
        } else {
                json_t *info = sandbox_info(sb);

                sandbox_touch(sb);
                http_respond_json(req, created ? 201 : 200, info);
                json_decref(info);
        }
        http_request_unref(req);
}

static void put_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct put_ctx *ctx = ud;
        struct api_put_sandbox p;
        struct cella_error err = {0};
        char name[CELLA_NAME_MAX + 1];

        if (api_decode_put_sandbox(body, len, &p, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        if (sandbox_name_check(ctx->raw, strlen(ctx->raw), ctx->query_normalize || p.normalize_id,
                               name, &err) < 0 ||
            tenant_qualify(ctx->who.tenant, name, name, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto done;
        }
        {
                char image[CELLA_NAME_MAX + 1], snap_id[CELLA_NAME_MAX + 1];
                struct sandbox_options o = {
                        .image = p.image,
                        .instance_type = p.instance_type,
                        .env = p.env,
                        .labels = p.labels,
                        .sleep_after_ms = p.sleep_after_ms,
                        .sleep_mode = p.sleep_mode,
                        .has_keep_alive = p.has_keep_alive,
                        .keep_alive = p.keep_alive,
                        .has_default_session = p.has_default_session,
                        .default_session = p.default_session,
                        .network = p.network,
                        .network_allow = p.network_allow,
                };

                struct sandbox_directory *d = api_directory(ctx->a);

                /* A tenant's quotas hold for a new sandbox. */
                struct sandbox *existing = NULL;
                struct cella_error ne = {0};

                struct quota_hold *hold = NULL;
                struct put_wait *pw;

                if (d->ops->get_now(d, name, &existing, &ne) < 0 &&
                    api_quota_reserve(ctx->a, &ctx->who, name, true, p.instance_type, &hold, &err) <
                            0) {
                        http_respond_error(req, &err, NULL);
                        goto done;
                }
                /* Its files start from a snapshot's (the tenant's own): the snapshot's
                 * image, its layer. */
                if (p.from_snapshot) {
                        json_t *sj = api_snapshot_find(ctx->a, &ctx->who, p.from_snapshot, image,
                                                       sizeof(image), &err);
                        if (!sj) {
                                api_quota_release(ctx->a, hold);
                                http_respond_error(req, &err, NULL);
                                goto done;
                        }
                        snprintf(snap_id, sizeof(snap_id), "%s",
                                 json_string_value(json_object_get(sj, "snapshotId")));
                        json_decref(sj);
                        if (p.image && strcmp(p.image, image) != 0) {
                                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                                  "snapshot '%s' is of image '%s', not '%s'",
                                                  p.from_snapshot, image, p.image);
                                api_quota_release(ctx->a, hold);
                                goto done;
                        }
                        o.image = image;
                        o.snapshot = snap_id;
                }
                pw = calloc(1, sizeof(*pw));
                if (!pw) {
                        api_quota_release(ctx->a, hold);
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                        goto done;
                }
                pw->a = ctx->a;
                pw->req = req;
                pw->hold = hold;
                http_request_ref(req);
                d->ops->put(d, name, &o, put_answer, pw);
        }
done:
        api_put_sandbox_done(&p);
out:
        http_request_set_userdata(req, NULL);
        free(ctx);
}

static void put_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

void api_sandbox_put(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct put_ctx *ctx;

        if (p->raw_len >= sizeof(ctx->raw)) {
                http_respond_code(req, CELLA_E_INVALID_SANDBOX_NAME, "sandbox name is too long");
                return;
        }
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        ctx->a = a;
        ctx->who = *p->principal;
        memcpy(ctx->raw, p->raw, p->raw_len);
        ctx->query_normalize = p->normalize;
        http_request_set_userdata(req, ctx);
        http_request_on_abort(req, put_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, put_body, ctx) < 0) {
                http_request_set_userdata(req, NULL);
                free(ctx);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}

void api_sandbox_get(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        struct sandbox *sb = NULL;
        json_t *info;

        if (sandbox_table_get(a->cfg.table, p->name, false, NULL, &sb, NULL, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        info = sandbox_info(sb);
        http_respond_json(req, 200, info);
        json_decref(info);
}

void api_sandbox_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        bool existed = false;
        json_t *j;

        struct sandbox_directory *d = api_directory(a);

        if (d->ops->destroy(d, p->name, &existed, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        preview_forget(&a->preview, p->name);
        {
                char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

                tenant_split(p->name, n, t);
                j = json_pack("{s:s, s:b}", "id", n, "destroyed", existed);
        }
        http_respond_json(req, 200, j);
        json_decref(j);
}

/* The sleep is over: SandboxInfo of the sandbox asleep (a client that left: a no-op). */
static void slept(struct sandbox *sb, const struct cella_error *err, void *ud)
{
        struct http_request *req = ud;

        if (err) {
                http_respond_error(req, err, NULL);
        } else {
                json_t *info = sandbox_info(sb);

                if (info)
                        http_respond_json(req, 200, info);
                else
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                json_decref(info);
        }
        http_request_unref(req);
}

static void sleep_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct api *a = ud;
        struct cella_error err = {0};
        const char *name = http_request_get_userdata(req);

        http_request_set_userdata(req, NULL);
        if (api_decode_sleep(body, len, &err) < 0) { /* refused before anything sleeps */
                http_respond_error(req, &err, NULL);
                free((char *)name);
                return;
        }
        http_request_ref(req);
        if (sandbox_table_sleep(a->cfg.table, name, slept, req, &err) < 0) {
                http_request_unref(req);
                http_respond_error(req, &err, NULL);
        }
        free((char *)name);
}

static void sleep_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

void api_sandbox_sleep(struct api *a, struct http_request *req, const struct api_args *p)
{
        char *name = strdup(p->name);

        if (!name) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        http_request_set_userdata(req, name);
        http_request_on_abort(req, sleep_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, sleep_body, a) < 0) {
                http_request_set_userdata(req, NULL);
                free(name);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}
