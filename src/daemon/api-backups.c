/* Backups (docs/api.md "Backups", docs/decisions/0049-backups.md): POST
 * /v1/sandboxes/{id}/backups, POST /v1/sandboxes/{id}/backups/{bid}/restore, GET
 * /v1/backups, GET and DELETE /v1/backups/{bid}. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"
#include "daemon/backup-archive.h"
#include "daemon/backup-ignore.h"
#include "daemon/backup-store.h"
#include "daemon/backup.h"
#include "daemon/sandbox-directory.h"
#include "daemon/sandbox.h"
#include "daemon/tenant.h"

int api_decode_backup_create(const char *body, size_t len, struct api_backup_create *ret,
                             struct cella_error *err)
{
        const char *dir = NULL, *name = NULL;
        json_t *ttl = NULL, *excludes = NULL, *gitignore = NULL, *consistent = NULL,
               *multipart = NULL;
        json_error_t je;

        memset(ret, 0, sizeof(*ret));
        ret->ttl_s = CELLA_BACKUP_TTL_DEFAULT;
        ret->multipart = true;
        _cleanup_json_ json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!j ||
            json_unpack_ex(j, &je, JSON_STRICT, "{s:s, s?s, s?o, s?o, s?o, s?o, s?o}", "dir", &dir,
                           "name", &name, "ttl", &ttl, "excludes", &excludes, "gitignore",
                           &gitignore, "consistent", &consistent, "multipart", &multipart) < 0)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "body must be {dir, name?, ttl?, gitignore?, excludes?, "
                                       "consistent?, multipart?}: %s",
                                       je.text);
        struct {
                const char *key;
                json_t *v;
                bool *out;
        } flags[] = {{"gitignore", gitignore, &ret->gitignore},
                     {"consistent", consistent, &ret->consistent},
                     {"multipart", multipart, &ret->multipart}};
        for (size_t i = 0; i < sizeof(flags) / sizeof(flags[0]); i++) {
                if (!flags[i].v || json_is_null(flags[i].v))
                        continue;
                if (!json_is_boolean(flags[i].v))
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "%s must be true or false", flags[i].key);
                *flags[i].out = json_is_true(flags[i].v);
        }
        if (excludes && !json_is_null(excludes)) {
                size_t i, used = 0;
                json_t *e;

                if (!json_is_array(excludes))
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "excludes must be an array of patterns");
                if (json_array_size(excludes) > CELLA_BACKUP_EXCLUDES_MAX)
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "more than %d exclude patterns",
                                               CELLA_BACKUP_EXCLUDES_MAX);
                json_array_foreach(excludes, i, e)
                {
                        const char *pat = json_string_value(e);
                        size_t pl = pat ? json_string_length(e) : 0;

                        if (!pat)
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "excludes[%zu] is not a string", i);
                        if (strlen(pat) != pl)
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "excludes[%zu] has a NUL", i);
                        if (ignore_pattern_check(pat, pl, err) < 0)
                                return -1;
                        if (used + pl + 1 > sizeof(ret->excludes))
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "excludes are longer than %d bytes "
                                                       "together",
                                                       CELLA_BACKUP_EXCLUDES_BYTES);
                        memcpy(ret->excludes + used, pat, pl + 1);
                        used += pl + 1;
                        ret->nexcludes++;
                }
        }
        if (backup_dir_check(dir, err) < 0)
                return -1;
        snprintf(ret->dir, sizeof(ret->dir), "%s", dir);
        if (name) {
                size_t nl = strlen(name);
                if (nl == 0 || nl > CELLA_BACKUP_NAME_MAX)
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "name must be 1-%d bytes", CELLA_BACKUP_NAME_MAX);
                for (size_t i = 0; i < nl; i++)
                        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
                                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                                       "name has a control character");
                snprintf(ret->name, sizeof(ret->name), "%s", name);
                ret->has_name = true;
        }
        if (ttl && !json_is_null(ttl)) {
                if (!json_is_integer(ttl) || json_integer_value(ttl) < 1 ||
                    json_integer_value(ttl) > CELLA_BACKUP_TTL_MAX)
                        return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                               "ttl must be a whole number of seconds, 1 to "
                                               "%lld",
                                               CELLA_BACKUP_TTL_MAX);
                ret->ttl_s = json_integer_value(ttl);
        }
        return 0;
}

int api_decode_backup_restore(const char *body, size_t len, char *dir, size_t dirsz,
                              struct cella_error *err)
{
        const char *d = NULL;
        json_error_t je;

        dir[0] = '\0';
        if (len == 0)
                return 0;
        _cleanup_json_ json_t *j = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
        if (!j || json_unpack_ex(j, &je, JSON_STRICT, "{s?s}", "dir", &d) < 0)
                return cella_error_set(err, CELLA_E_INVALID_BACKUP_CONFIG,
                                       "body must be {dir?}: %s", je.text);
        if (d) {
                if (backup_dir_check(d, err) < 0)
                        return -1;
                snprintf(dir, dirsz, "%s", d);
        }
        return 0;
}

/* A request in progress: its body decoded, then its sandbox found (and woken), then the
 * operation. */
struct bk_req {
        struct api *a;
        struct http_request *req;
        struct api_sandbox_wait wait;
        bool restore;
        struct api_backup_create create;
        char id[BACKUP_ID_LEN + 1];
        char dir[CELLA_BACKUP_DIR_MAX + 1];
        char sandbox[CELLA_NAME_MAX + 1];
        bool owner_any;
        char owner[CELLA_TENANT_MAX + 1];
};

static void bk_abort(struct http_request *req, void *ud)
{
        (void)ud;
        free(http_request_get_userdata(req));
        http_request_set_userdata(req, NULL);
}

/* The tenant whose backups a request sees: a tenant key's own; NULL for the admin (every
 * tenant's, with or without ?tenant=). */
static const char *owner_of(const struct principal *who)
{
        return who->admin ? NULL : who->tenant;
}

/* An operation's end: answered (a client that left: a no-op), the request released.
 * Sandboxes are named as the client names them (a tenant's without its suffix). */
static void answer(struct http_request *req, int status, json_t *result,
                   const struct cella_error *err)
{
        json_t *list = result ? json_object_get(result, "backups") : NULL;
        json_t *e;
        size_t i;

        if (list)
                json_array_foreach(list, i, e) tenant_backup_view(e);
        else if (result)
                tenant_backup_view(result);
        if (result)
                http_respond_json(req, status, result);
        else
                http_respond_error(req, err, NULL);
        http_request_unref(req);
}

static void answered_201(json_t *result, const struct cella_error *err, void *ud)
{
        answer(ud, 201, result, err);
}

static void answered_200(json_t *result, const struct cella_error *err, void *ud)
{
        answer(ud, 200, result, err);
}

static void got_sandbox(struct http_request *req, struct sandbox *sb, void *ud)
{
        struct bk_req *r = ud;
        struct cella_error err = {0};
        int rc;

        /* sb is the caller's own (its name is the caller's tenant's internal name): a
         * restore reaches no other tenant's sandbox, and one it creates or wakes passed
         * api_quota_check in api_sandbox_for. */
        if (sb) {
                sandbox_touch(sb);
                http_request_ref(req);
                if (r->restore)
                        rc = backups_restore(
                                r->a->cfg.backups, sb, r->id, r->dir[0] ? r->dir : NULL,
                                r->owner_any ? NULL : r->owner, answered_200, req, &err);
                else
                        rc = backups_create_with(r->a->cfg.backups, sb, &r->create, answered_201,
                                                 req, &err);
                if (rc < 0) {
                        http_request_unref(req);
                        http_respond_error(req, &err, NULL);
                }
        }
        free(r);
}

static void body_read(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct bk_req *r = ud;
        struct cella_error err = {0};
        int rc;

        http_request_set_userdata(req, NULL);
        if (r->restore)
                rc = api_decode_backup_restore(body, len, r->dir, sizeof(r->dir), &err);
        else
                rc = api_decode_backup_create(body, len, &r->create, &err);
        if (rc < 0) {
                http_respond_error(req, &err, NULL);
                free(r);
                return;
        }
        api_sandbox_for(r->a, req, r->sandbox, &r->wait, got_sandbox, r);
}

static void read_request(struct api *a, struct http_request *req, const struct api_args *p,
                         bool restore)
{
        struct bk_req *r;

        if (!a->cfg.backups) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "backups are not configured");
                return;
        }
        r = calloc(1, sizeof(*r));
        if (!r) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        r->a = a;
        r->req = req;
        r->restore = restore;
        r->owner_any = !owner_of(p->principal);
        snprintf(r->owner, sizeof(r->owner), "%s", p->principal->tenant);
        snprintf(r->sandbox, sizeof(r->sandbox), "%s", p->name);
        if (restore)
                snprintf(r->id, sizeof(r->id), "%s", p->param);
        http_request_set_userdata(req, r);
        http_request_on_abort(req, bk_abort, NULL);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, body_read, r) < 0) {
                http_request_set_userdata(req, NULL);
                free(r);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read body");
        }
}

void api_backup_create(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct sandbox_directory *d = sandbox_table_directory(a->cfg.table);
        struct cella_error err = {0};
        struct sandbox *sb = NULL;

        /* A backup is of a sandbox that exists: this write does not create one. */
        if (d->ops->get_now(d, p->name, &sb, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return;
        }
        read_request(a, req, p, false);
}

void api_backup_restore(struct api *a, struct http_request *req, const struct api_args *p)
{
        read_request(a, req, p, true);
}

static bool configured(struct api *a, struct http_request *req)
{
        if (a->cfg.backups)
                return true;
        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "backups are not configured");
        return false;
}

void api_backups_list(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};

        if (!configured(a, req))
                return;
        http_request_ref(req);
        if (backups_list(a->cfg.backups, owner_of(p->principal), answered_200, req, &err) < 0) {
                http_request_unref(req);
                http_respond_error(req, &err, NULL);
        }
}

void api_backup_get(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};

        if (!configured(a, req))
                return;
        http_request_ref(req);
        if (backups_get(a->cfg.backups, p->param, owner_of(p->principal), answered_200, req, &err) <
            0) {
                http_request_unref(req);
                http_respond_error(req, &err, NULL);
        }
}

void api_backup_delete(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct cella_error err = {0};

        if (!configured(a, req))
                return;
        http_request_ref(req);
        if (backups_delete(a->cfg.backups, p->param, owner_of(p->principal), answered_200, req,
                           &err) < 0) {
                http_request_unref(req);
                http_respond_error(req, &err, NULL);
        }
}
