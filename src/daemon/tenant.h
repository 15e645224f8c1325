/* Tenants (docs/tenants.md, decision 0053): who a request comes from (its principal), and
 * how a tenant's names live beside the default tenant's in one sandbox table.
 *
 * The admin (the --token, or anyone in loopback-only mode) is the default tenant "": its
 * sandboxes keep their names and data as before tenants. A tenant T's sandbox "web" is
 * "web.T" inside cellad (the table, the registry, the snapshots' sandbox field): '.' is in
 * no sandbox name, so the two spaces never meet, and the internal name still fits
 * CELLA_NAME_MAX (a tenant's names are shorter by the tenant's length and 2). What a
 * client sees is always {id: "web", tenant: "T"}. A tenant's snapshot names are
 * "<name>:T" the same way (':' is in no snapshot name). A tenant's preview host names its
 * sandbox "web--T" (one DNS label; T has no '-'). */
#ifndef CELLA_DAEMON_TENANT_H
#define CELLA_DAEMON_TENANT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/apikey.h"
#include "common/error.h"
#include "common/limits.h"
#include "daemon/http.h"

struct principal {
        bool admin;                        /* every tenant, the keys, images, /metrics */
        char tenant[CELLA_TENANT_MAX + 1]; /* "": the default tenant */
        char key_id[CELLA_KEY_ID_LEN + 1]; /* a tenant's key; "" for the admin */
        int64_t max_sandboxes;             /* the key's quotas; 0: none */
        int64_t max_memory_bytes;
};

/* The request's principal (set by the dispatcher before any route runs; the admin's when
 * none was set: loopback-only mode, the public routes). Borrowed from req. */
const struct principal *principal_of(const struct http_request *req);
/* The principal to act as for a route: a tenant key's own, or for the admin the tenant a
 * ?tenant= query names (out filled). NULL after answering req: a tenant key naming
 * another tenant, a bad tenant name. */
const struct principal *principal_acting(struct http_request *req, struct principal *out);

/* The internal name of tenant's sandbox name (both valid; "" tenant: name itself). 0, or
 * -1 with err (INVALID_SANDBOX_NAME: too long for the tenant). */
int tenant_qualify(const char *tenant, const char *name, char out[CELLA_NAME_MAX + 1],
                   struct cella_error *err);
/* The client's name and the tenant of an internal name (tenant "" for the default). */
void tenant_split(const char *internal, char name[CELLA_NAME_MAX + 1],
                  char tenant[CELLA_TENANT_MAX + 1]);
/* Is the internal name one of tenant's sandboxes? */
bool tenant_owns(const char *tenant, const char *internal);

/* The same for snapshot names ("<name>:<tenant>"). */
int tenant_snapshot_qualify(const char *tenant, const char *name, char out[CELLA_NAME_MAX + 1],
                            struct cella_error *err);

/* Is s a sandbox's internal name (a default tenant's valid name, or a valid name, '.' and
 * a valid tenant, fitting as tenant_qualify makes them)? 0 with s copied to out, or -1.
 * What the registry and the identity files hold is checked with it. */
int tenant_internal_name_check(const char *s, char out[CELLA_NAME_MAX + 1]);
/* The same for a snapshot's name (image_name_is_valid(), or that, ':' and a tenant). */
bool tenant_snapshot_name_is_valid(const char *s);

/* The sandbox id of a preview host for an internal name ("web.T" -> "web--T"). */
void tenant_preview_id(const char *internal, char out[CELLA_NAME_MAX + 1]);
/* The tenant reading of a preview host's id ("web--T" -> "web.T"): 1 with out, 0 when the
 * id names no tenant's sandbox. */
int tenant_preview_internal(const char *id, char out[CELLA_NAME_MAX + 1]);

/* SandboxInfo as a client sees it: id the client's name, tenant set for a tenant's
 * sandbox (in place). */
void tenant_info_view(json_t *info);
/* A snapshot's JSON as a client sees it (in place): false when the viewer (admin: every
 * tenant) may not see it; name and sandbox the tenant's, tenant set for a tenant's. */
bool tenant_snapshot_view(json_t *snap, const struct principal *viewer);

/* An error's JSON (an answer's or an event's) as the request's principal sees it (an
 * http_error_view_fn): for a tenant, every quoted internal name of its own in message,
 * error and context's strings ('web.acme', 'base:acme') becomes its name ('web', 'base'),
 * and a context string that is one becomes that name too. The admin's: untouched. */
void tenant_error_view(const struct http_request *req, json_t *error);
/* The same for one text: in (NUL-terminated) into out (outsz bytes; truncated). */
void tenant_text_view(const char *tenant, const char *in, char *out, size_t outsz);

/* A backup's JSON (or a restore's answer) as a client sees it (in place): sandbox the
 * client's name, tenant set for a tenant's sandbox. Who may see it is the backup
 * store's filter (backup.h). */
void tenant_backup_view(json_t *backup);

#endif
