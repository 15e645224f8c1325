/* Tenants and principals (tenant.h). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/name.h"
#include "daemon/tenant.h"

static const struct principal admin = {.admin = true};

const struct principal *principal_of(const struct http_request *req)
{
        const struct principal *p = http_request_auth(req);

        return p ? p : &admin;
}

const struct principal *principal_acting(struct http_request *req, struct principal *out)
{
        const struct principal *p = principal_of(req);
        const char *t = http_request_query(req, "tenant");

        if (!t)
                return p;
        if (!p->admin) {
                if (strcmp(t, p->tenant) == 0)
                        return p;
                http_respond_code(req, CELLA_E_PERMISSION_DENIED,
                                  "only the admin key acts for another tenant (?tenant=)");
                return NULL;
        }
        if (t[0] && !tenant_name_is_valid(t)) {
                http_respond_code(req, CELLA_E_VALIDATION_FAILED,
                                  "tenant must be 1-%d characters of [a-z0-9]", CELLA_TENANT_MAX);
                return NULL;
        }
        *out = *p;
        snprintf(out->tenant, sizeof(out->tenant), "%s", t);
        return out;
}

/* name and tenant joined by sep into out: the internal form. */
static int qualify(const char *tenant, const char *name, char sep, const char *what,
                   char out[CELLA_NAME_MAX + 1], struct cella_error *err)
{
        size_t nl = strlen(name), tl = strlen(tenant);

        if (tl == 0) {
                if (nl > CELLA_NAME_MAX)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "%s too long", what);
                memcpy(out, name, nl + 1);
                return 0;
        }
        /* + 2: the preview host's "--" (the internal separator is one character) */
        if (nl + 2 + tl > CELLA_NAME_MAX)
                return cella_error_set(
                        err, sep == '.' ? CELLA_E_INVALID_SANDBOX_NAME : CELLA_E_VALIDATION_FAILED,
                        "a %s of tenant '%s' is at most %zu characters", what, tenant,
                        CELLA_NAME_MAX - 2 - tl);
        /* name may be out itself */
        memmove(out, name, nl);
        out[nl] = sep;
        memcpy(out + nl + 1, tenant, tl + 1);
        return 0;
}

int tenant_qualify(const char *tenant, const char *name, char out[CELLA_NAME_MAX + 1],
                   struct cella_error *err)
{
        return qualify(tenant, name, '.', "sandbox name", out, err);
}

int tenant_snapshot_qualify(const char *tenant, const char *name, char out[CELLA_NAME_MAX + 1],
                            struct cella_error *err)
{
        return qualify(tenant, name, ':', "snapshot name", out, err);
}

static void split(const char *internal, char sep, char name[CELLA_NAME_MAX + 1],
                  char tenant[CELLA_TENANT_MAX + 1])
{
        const char *s = strrchr(internal, sep);

        if (!s || strlen(s + 1) > CELLA_TENANT_MAX) {
                snprintf(name, CELLA_NAME_MAX + 1, "%s", internal);
                tenant[0] = '\0';
                return;
        }
        snprintf(name, CELLA_NAME_MAX + 1, "%.*s", (int)(s - internal), internal);
        snprintf(tenant, CELLA_TENANT_MAX + 1, "%s", s + 1);
}

void tenant_split(const char *internal, char name[CELLA_NAME_MAX + 1],
                  char tenant[CELLA_TENANT_MAX + 1])
{
        split(internal, '.', name, tenant);
}

bool tenant_owns(const char *tenant, const char *internal)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        tenant_split(internal, n, t);
        return strcmp(t, tenant) == 0;
}

int tenant_internal_name_check(const char *s, char out[CELLA_NAME_MAX + 1])
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1], q[CELLA_NAME_MAX + 1];
        const char *dot = strrchr(s, '.');

        if (strlen(s) > CELLA_NAME_MAX)
                return -1;
        if (!dot)
                return sandbox_name_check(s, strlen(s), false, out, NULL);
        tenant_split(s, n, t);
        if (!tenant_name_is_valid(t) || sandbox_name_check(n, strlen(n), false, n, NULL) < 0 ||
            tenant_qualify(t, n, q, NULL) < 0 || strcmp(q, s) != 0)
                return -1;
        memcpy(out, q, strlen(q) + 1);
        return 0;
}

bool tenant_snapshot_name_is_valid(const char *s)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1], q[CELLA_NAME_MAX + 1];

        if (!strchr(s, ':'))
                return image_name_is_valid(s);
        if (strlen(s) > CELLA_NAME_MAX)
                return false;
        split(s, ':', n, t);
        return tenant_name_is_valid(t) && image_name_is_valid(n) &&
               tenant_snapshot_qualify(t, n, q, NULL) == 0 && strcmp(q, s) == 0;
}

void tenant_preview_id(const char *internal, char out[CELLA_NAME_MAX + 1])
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];

        tenant_split(internal, n, t);
        size_t nl = strlen(n), tl = strlen(t);

        if (t[0] && nl + 2 + tl <= CELLA_NAME_MAX) {
                memcpy(out, n, nl);
                memcpy(out + nl, "--", 2);
                memcpy(out + nl + 2, t, tl + 1);
        } else {
                memcpy(out, n, nl + 1);
        }
}

int tenant_preview_internal(const char *id, char out[CELLA_NAME_MAX + 1])
{
        const char *s = NULL;

        for (const char *p = strstr(id, "--"); p; p = strstr(p + 1, "--"))
                s = p;
        if (!s || s == id || !tenant_name_is_valid(s + 2))
                return 0;
        snprintf(out, CELLA_NAME_MAX + 1, "%.*s.%s", (int)(s - id), id, s + 2);
        return 1;
}

void tenant_info_view(json_t *info)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        const char *id = json_string_value(json_object_get(info, "id"));

        if (!id)
                return;
        tenant_split(id, n, t);
        if (!t[0])
                return;
        json_object_set_new(info, "id", json_string(n));
        json_object_set_new(info, "tenant", json_string(t));
}

bool tenant_snapshot_view(json_t *snap, const struct principal *viewer)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1], sn[CELLA_NAME_MAX + 1],
                st[CELLA_TENANT_MAX + 1];
        const char *sandbox = json_string_value(json_object_get(snap, "sandbox"));
        const char *name = json_string_value(json_object_get(snap, "name"));

        if (!sandbox || !name)
                return false;
        tenant_split(sandbox, n, t);
        if (!viewer->admin && strcmp(t, viewer->tenant) != 0)
                return false;
        split(name, ':', sn, st);
        json_object_set_new(snap, "sandbox", json_string(n));
        json_object_set_new(snap, "name", json_string(sn));
        if (t[0])
                json_object_set_new(snap, "tenant", json_string(t));
        return true;
}

void tenant_backup_view(json_t *backup)
{
        char n[CELLA_NAME_MAX + 1], t[CELLA_TENANT_MAX + 1];
        const char *sandbox = json_string_value(json_object_get(backup, "sandbox"));

        if (!sandbox)
                return;
        tenant_split(sandbox, n, t);
        json_object_set_new(backup, "sandbox", json_string(n));
        if (t[0])
                json_object_set_new(backup, "tenant", json_string(t));
}

/* Is s (len bytes) one of tenant's internal names (a sandbox's "<name>.<tenant>" or a
 * snapshot's "<name>:<tenant>")? Its name's length, or 0. */
static size_t own_internal(const char *tenant, const char *s, size_t len)
{
        char buf[CELLA_NAME_MAX + 1], q[CELLA_NAME_MAX + 1];
        size_t tl = strlen(tenant);

        if (!tl || len <= tl + 1 || len > CELLA_NAME_MAX || memcmp(s + len - tl, tenant, tl) != 0)
                return 0;
        memcpy(buf, s, len);
        buf[len] = '\0';
        if (buf[len - tl - 1] == '.' && tenant_internal_name_check(buf, q) == 0)
                return len - tl - 1;
        if (buf[len - tl - 1] == ':' && tenant_snapshot_name_is_valid(buf))
                return len - tl - 1;
        return 0;
}

void tenant_text_view(const char *tenant, const char *in, char *out, size_t outsz)
{
        size_t o = 0;

        if (!outsz)
                return;
        for (const char *p = in; *p && o + 1 < outsz;) {
                const char *end = (*p == '\'' || *p == '"') ? strchr(p + 1, *p) : NULL;
                size_t n = end ? own_internal(tenant, p + 1, (size_t)(end - p - 1)) : 0;

                if (n && o + n + 2 < outsz) { /* 'web.acme' -> 'web' */
                        memcpy(out + o, p, n + 1);
                        out[o + n + 1] = *p;
                        o += n + 2;
                        p = end + 1;
                } else {
                        out[o++] = *p++;
                }
        }
        out[o] = '\0';
}

static void view_field(const char *tenant, json_t *obj, const char *key)
{
        const char *s = json_string_value(json_object_get(obj, key));
        char *v;
        size_t n;

        if (!s)
                return;
        if ((n = own_internal(tenant, s, strlen(s)))) {
                json_object_set_new(obj, key, json_stringn(s, n));
                return;
        }
        if (!strchr(s, '.') && !strchr(s, ':'))
                return;
        v = malloc(strlen(s) + 1);
        if (!v)
                return;
        tenant_text_view(tenant, s, v, strlen(s) + 1);
        if (strcmp(v, s) != 0)
                json_object_set_new(obj, key, json_string(v));
        free(v);
}

void tenant_error_view(const struct http_request *req, json_t *error)
{
        const struct principal *p = principal_of(req);
        json_t *ctx = json_object_get(error, "context");
        const char *k;
        json_t *v;

        if (p->admin || !p->tenant[0] || !json_is_object(error))
                return;
        view_field(p->tenant, error, "message");
        view_field(p->tenant, error, "error");
        if (json_is_object(ctx))
                json_object_foreach(ctx, k, v) if (json_is_string(v)) view_field(p->tenant, ctx, k);
}
