/* Filesystem snapshots and fork (docs/api.md "Snapshots", docs/decisions/0048):
 * POST /v1/sandboxes/{id}/snapshots, GET /v1/sandboxes/{id}/snapshots, POST
 * /v1/sandboxes/{id}/fork, GET /v1/snapshots, GET and DELETE /v1/snapshots/{snap}. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"
#include "common/name.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/sandbox-directory.h"
#include "daemon/sandbox.h"
#include "daemon/tenant.h"

struct snap_ctx {
        struct api *a;
        char sandbox[CELLA_NAME_MAX + 1];
        struct principal who; /* whom the request acts for */
};

json_t *api_snapshot_find(struct api *a, const struct principal *p, const char *id_or_name,
                          char *image, size_t image_sz, struct cella_error *err)
{
        char q[CELLA_NAME_MAX + 1];
        struct cella_error e = {0};
        json_t *sn = NULL;

        /* the tenant's own name first, then an id (or a default tenant's name) */
        if (p->tenant[0] && tenant_snapshot_qualify(p->tenant, id_or_name, q, NULL) == 0)
                sn = sandbox_table_snapshot_get(a->cfg.table, q, image, image_sz, &e);
        if (!sn) {
                memset(&e, 0, sizeof(e));
                sn = sandbox_table_snapshot_get(a->cfg.table, id_or_name, image, image_sz, &e);
        }
        if (sn && !p->admin &&
            !tenant_owns(p->tenant, json_string_value(json_object_get(sn, "sandbox")))) {
                json_decref(sn);
                sn = NULL;
        }
        if (!sn) /* one answer for absent and another tenant's: nothing to learn */
                cella_error_set(err, CELLA_E_SNAPSHOT_NOT_FOUND, "no snapshot '%s'", id_or_name);
        return sn;
}

/* Answer req with snapshot snap (borrowed) as its principal sees it. */
static void respond_snapshot(struct http_request *req, int status, json_t *snap)
{
        json_t *v = json_deep_copy(snap);

        if (!v) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        tenant_snapshot_view(v, &(struct principal){.admin = true});
        http_respond_json(req, status, v);
        json_decref(v);
}

static void snap_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

/* The body {name?} (POST snapshots) or {name, memory?} (fork, ret_memory not NULL): the
 * name, or false with req answered. */
static bool body_name(struct http_request *req, const char *body, size_t len, bool required,
                      const char *what, char *out, size_t outsz, bool *ret_given, bool *ret_memory)
{
        int memory = 0;
        struct cella_error err = {0};
        const char *name = NULL;
        json_error_t je;
        json_t *j = NULL;

        *ret_given = false;
        if (len > 0) {
                j = json_loadb(body, len, 0, &je);
                if (!j || (ret_memory ? json_unpack_ex(j, &je, JSON_STRICT, "{s?s, s?b}", "name",
                                                       &name, "memory", &memory)
                                      : json_unpack_ex(j, &je, JSON_STRICT, "{s?s}", "name",
                                                       &name)) < 0) {
                        http_respond_code(req, CELLA_E_VALIDATION_FAILED, "body must be {%s}: %s",
                                          what, je.text);
                        json_decref(j);
                        return false;
                }
        }
        if (!name) {
                json_decref(j);
                if (required) {
                        http_respond_code(req, CELLA_E_VALIDATION_FAILED, "body must be {%s}",
                                          what);
                        return false;
                }
                return true;
        }
        if (required) {
                if (sandbox_name_check(name, strlen(name), false, out, &err) < 0) {
                        json_decref(j);
                        http_respond_error(req, &err, NULL);
                        return false;
                }
        } else if (!image_name_is_valid(name)) {
                json_decref(j);
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "name must be 1-%d characters of [a-z0-9._-], not starting "
                                  "with '.' or '-'",
                                  CELLA_NAME_MAX);
                return false;
        } else {
                snprintf(out, outsz, "%s", name);
        }
        json_decref(j);
        *ret_given = true;
        if (ret_memory)
                *ret_memory = memory != 0;
        return true;
}

/* The capture's end: answered (a client that left: a no-op), the request released. */
static void created(json_t *snap, const struct cella_error *err, void *ud)
{
        struct http_request *req = ud;

        if (snap)
                respond_snapshot(req, 201, snap);
        else
                http_respond_error(req, err, NULL);
        http_request_unref(req);
}

static void create_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct snap_ctx *ctx = ud;
        struct cella_error err = {0};
        char name[CELLA_NAME_MAX + 1];
        bool given;

        if (body_name(req, body, len, false, "name?", name, sizeof(name), &given, NULL) &&
            (!given || tenant_snapshot_qualify(ctx->who.tenant, name, name, &err) == 0)) {
                http_request_ref(req);
                if (sandbox_table_snapshot_create(ctx->a->cfg.table, ctx->sandbox,
                                                  given ? name : NULL, created, req, &err) < 0) {
                        http_request_unref(req);
                        http_respond_error(req, &err, NULL);
                }
        } else if (cella_error_is_set(&err)) {
                http_respond_error(req, &err, NULL);
        }
        http_request_set_userdata(req, NULL);
        free(ctx);
}

static void read_body_into(struct api *a, struct http_request *req, const struct api_args *p,
                           void (*fn)(struct http_request *, const char *, size_t, void *))
{
        struct snap_ctx *ctx = calloc(1, sizeof(*ctx));

        if (!ctx) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        ctx->a = a;
        ctx->who = *p->principal;
        snprintf(ctx->sandbox, sizeof(ctx->sandbox), "%s", p->name);
        http_request_set_userdata(req, ctx);
        http_request_on_abort(req, snap_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, fn, ctx) < 0) {
                http_request_set_userdata(req, NULL);
                free(ctx);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}

void api_snapshot_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        read_body_into(a, req, p, create_body);
}

/* A fork in progress (the request still referenced). */
struct fork_job {
        struct api *a;
        struct http_request *req;
        char name[CELLA_NAME_MAX + 1];
        struct quota_hold *hold; /* the child's on its tenant's quotas, until its answer */
        /* with memory (0050): the parent's images until the child's PUT moved them, and
         * the fork's snapshot, removed when no child is made */
        bool memory;
        char images[CELLA_PATH_MAX];
        char snapshot[64];
};

/* The fork's child: answered as PUT answers (SandboxInfo, 201) plus its snapshot. */
static void fork_answer(struct sandbox *sb, bool created, const struct cella_error *err, void *ud)
{
        struct fork_job *f = ud;
        struct http_request *req = f->req;
        bool memory = f->memory;

        api_quota_release(f->a, f->hold);
        if (memory) {
                /* moved into the child's dir when it was made; else removed */
                struct cella_error e = {0};
                int r = sandbox_memfork_images_remove(f->images);
                if (r < 0 && r != -ENOENT)
                        log_warn("fork with memory: remove %s: %s", f->images, strerror(-r));
                if ((err || !created) &&
                    sandbox_table_snapshot_delete(f->a->cfg.table, f->snapshot, &e) < 0)
                        log_warn("fork with memory: snapshot '%s': %s", f->snapshot, e.msg);
        }
        free(f);

        if (err) {
                http_respond_error(req, err, NULL);
        } else if (!created) {
                json_t *info = sandbox_info(sb);

                http_respond_code(req, CELLA_E_VALIDATION_FAILED, "sandbox '%s' exists",
                                  info ? json_string_value(json_object_get(info, "id")) : "?");
                json_decref(info);
        } else {
                json_t *info = sandbox_info(sb);

                sandbox_touch(sb);
                if (info && memory)
                        json_object_set_new(info, "forkedWithMemory", json_true());
                http_respond_json(req, 201, info);
                json_decref(info);
        }
        http_request_unref(req);
}

/* The fork's snapshot is taken: the child over it. */
static void fork_snapshot_taken(json_t *snap, const struct cella_error *err, void *ud)
{
        struct fork_job *f = ud;
        struct http_request *req = f->req;

        if (!snap) {
                http_respond_error(req, err, NULL);
                http_request_unref(req);
                api_quota_release(f->a, f->hold);
                free(f);
        } else {
                struct sandbox_options o = {
                        .image = json_string_value(json_object_get(snap, "image")),
                        .snapshot = json_string_value(json_object_get(snap, "snapshotId")),
                };
                struct sandbox_directory *d = api_directory(f->a);

                d->ops->put(d, f->name, &o, fork_answer, f); /* takes f and our reference */
        }
}

/* A memory fork's dump and snapshot are taken: the child over both, made here (the
 * images are this node's). */
static void memfork_taken(json_t *snap, const char *images, const struct cella_error *err, void *ud)
{
        struct fork_job *f = ud;
        struct http_request *req = f->req;

        if (!snap) {
                http_respond_error(req, err, NULL);
                http_request_unref(req);
                api_quota_release(f->a, f->hold);
                free(f);
                return;
        }
        snprintf(f->images, sizeof(f->images), "%s", images);
        snprintf(f->snapshot, sizeof(f->snapshot), "%s",
                 json_string_value(json_object_get(snap, "snapshotId")));
        struct sandbox_options o = {
                .image = json_string_value(json_object_get(snap, "image")),
                .snapshot = f->snapshot,
                .memory_images = f->images,
        };
        struct sandbox_directory *d = sandbox_table_directory(f->a->cfg.table);

        d->ops->put(d, f->name, &o, fork_answer, f); /* takes f and our reference */
}

static void fork_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct snap_ctx *ctx = ud;
        struct sandbox_table *t = ctx->a->cfg.table;
        struct cella_error err = {0};
        struct sandbox *existing = NULL;
        struct fork_job *f = NULL;
        char name[CELLA_NAME_MAX + 1];
        bool given, memory = false;
        struct quota_hold *hold = NULL;

        if (!body_name(req, body, len, true, "name, memory?", name, sizeof(name), &given, &memory))
                goto out;
        /* the child is the same tenant's */
        if (tenant_qualify(ctx->who.tenant, name, name, &err) < 0) {
                http_respond_error(req, &err, NULL);
                goto out;
        }
        /* With its processes: where this host cannot checkpoint them, nothing is made, and
         * the answer says why (a fork of the files alone is memory: false). */
        if (memory && sandbox_table_memory_sleep_fallback(t)[0]) {
                http_respond_code(req, CELLA_E_MEMORY_SNAPSHOT_UNAVAILABLE, "fork with memory: %s",
                                  sandbox_table_memory_sleep_fallback(t));
                goto out;
        }
        /* The child's name must be free before anything is captured. */
        if (sandbox_table_get(t, name, false, NULL, &existing, NULL, &err) == 0) {
                char n[CELLA_NAME_MAX + 1], tn[CELLA_TENANT_MAX + 1];

                tenant_split(name, n, tn);
                http_respond_code(req, CELLA_E_VALIDATION_FAILED, "sandbox '%s' exists", n);
                goto out;
        }
        memset(&err, 0, sizeof(err));
        /* a tenant's quotas hold for the child (the parent's instance type) */
        if (sandbox_table_get(t, ctx->sandbox, false, NULL, &existing, NULL, &err) == 0) {
                json_t *pi = sandbox_info(existing);
                int q = api_quota_reserve(
                        ctx->a, &ctx->who, name, true,
                        pi ? json_string_value(json_object_get(pi, "instanceType")) : NULL, &hold,
                        &err);

                json_decref(pi);
                if (q < 0) {
                        http_respond_error(req, &err, NULL);
                        goto out;
                }
        }
        memset(&err, 0, sizeof(err));
        f = calloc(1, sizeof(*f));
        if (!f) {
                api_quota_release(ctx->a, hold);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                goto out;
        }
        f->a = ctx->a;
        f->req = req;
        f->hold = hold;
        snprintf(f->name, sizeof(f->name), "%s", name);
        f->memory = memory;
        http_request_ref(req);
        /* named by its id: a fork's snapshot never takes a name a user may want */
        if ((memory ? sandbox_table_memory_fork(t, ctx->sandbox, memfork_taken, f, &err)
                    : sandbox_table_snapshot_create(t, ctx->sandbox, NULL, fork_snapshot_taken, f,
                                                    &err)) < 0) {
                http_request_unref(req);
                api_quota_release(ctx->a, hold);
                free(f);
                http_respond_error(req, &err, NULL);
        }
out:
        http_request_set_userdata(req, NULL);
        free(ctx);
}

void api_fork(struct api *a, struct http_request *req, const struct api_args *p)
{
        read_body_into(a, req, p, fork_body);
}

static void respond_list(struct api *a, struct http_request *req, const char *sandbox)
{
        struct cella_error err = {0};
        json_t *arr = sandbox_table_snapshots(a->cfg.table, sandbox, &err);
        const struct principal *who = principal_of(req);

        if (!arr) {
                http_respond_error(req, &err, NULL);
                return;
        }
        /* each as the caller sees it: a tenant's own only */
        for (size_t i = json_array_size(arr); i-- > 0;)
                if (!tenant_snapshot_view(json_array_get(arr, i), who))
                        json_array_remove(arr, i);
        json_t *j = json_pack("{s:o}", "snapshots", arr);
        http_respond_json(req, 200, j);
        json_decref(j);
}

void api_snapshots_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        (void)p;
        respond_list(a, req, NULL);
}

void api_sandbox_snapshots(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        struct sandbox *sb = NULL;

        if (sandbox_table_get(a->cfg.table, p->name, false, NULL, &sb, NULL, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        respond_list(a, req, p->name);
}

void api_snapshot_get(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        json_t *j = api_snapshot_find(a, p->principal, p->name, NULL, 0, &err);

        if (!j) {
                http_respond_error(req, &err, NULL);
                return;
        }
        respond_snapshot(req, 200, j);
        json_decref(j);
}

void api_snapshot_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};
        char id[CELLA_NAME_MAX + 1];
        json_t *sn = api_snapshot_find(a, p->principal, p->name, NULL, 0, &err);

        if (!sn) {
                http_respond_error(req, &err, NULL);
                return;
        }
        snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(sn, "snapshotId")));
        json_decref(sn);
        if (sandbox_table_snapshot_delete(a->cfg.table, id, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        json_t *j = json_pack("{s:s, s:b}", "snapshotId", id, "deleted", 1);
        http_respond_json(req, 200, j);
        json_decref(j);
}
