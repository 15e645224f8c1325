/* Backups of a sandbox's directories (docs/decisions/0049-backups.md): made and restored by
 * cella-archive inside the sandbox (archive-main.c), kept in a backup store
 * (backup-store.h), expired by a sweep. Every operation runs on the loop's thread pool and
 * calls back on the loop, exactly once. */
#ifndef CELLA_DAEMON_BACKUP_H
#define CELLA_DAEMON_BACKUP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <uv.h>

#include "common/error.h"
#include "common/limits.h"

struct backups;
struct api_backup_create;
struct sandbox;

/* result: a new reference the callee drops after the call, or NULL with err set. */
typedef void (*backup_cb)(json_t *result, const struct cella_error *err, void *ud);

/* store_spec NULL: the local store under data_dir. archiver: the path of cella-archive.
 * 0 or -1 with err set. */
int backups_new(uv_loop_t *loop, const char *store_spec, const char *data_dir, const char *archiver,
                struct backups **ret, struct cella_error *err);
/* Called on the loop with every backup made (its JSON, the sandbox by its internal
 * name; borrowed), before the operation's own callback: a cluster node records the
 * name's latest backup (decision 0057). NULL fn: none. */
typedef void (*backup_created_hook)(const json_t *backup, void *ud);
void backups_on_created(struct backups *b, backup_created_hook fn, void *ud);
/* After the loop ran its last work (no operation may be in progress). */
void backups_free(struct backups *b);
const char *backups_store_describe(const struct backups *b);

/* Archive dir of the running sandbox s (borrowed; kept referenced meanwhile); name may be
 * NULL; ttl in seconds (1..CELLA_BACKUP_TTL_MAX). The result is the backup's JSON. */
int backups_create(struct backups *b, struct sandbox *s, const char *dir, const char *name,
                   int64_t ttl, backup_cb cb, void *ud, struct cella_error *err);
/* The same with every option of the request (o->dir, name, ttl, gitignore, excludes,
 * consistent, multipart), checked as api_decode_backup_create checks them. */
int backups_create_with(struct backups *b, struct sandbox *s, const struct api_backup_create *o,
                        backup_cb cb, void *ud, struct cella_error *err);
/* owner: the tenant whose backups the operation sees (those of its sandboxes, the
 * record's internal sandbox name saying whose; decision 0053), NULL: every tenant's (the
 * admin). Another tenant's backup is BACKUP_NOT_FOUND exactly as an absent one. Results
 * name sandboxes by their internal names. */
/* Replace dir (NULL: the backup's) of the running sandbox s with backup id's content.
 * Result: {success, id, dir, sandbox}. */
int backups_restore(struct backups *b, struct sandbox *s, const char *id, const char *dir,
                    const char *owner, backup_cb cb, void *ud, struct cella_error *err);
/* {backups: [...]} newest first; one backup; {id, deleted}. */
int backups_list(struct backups *b, const char *owner, backup_cb cb, void *ud,
                 struct cella_error *err);
int backups_get(struct backups *b, const char *id, const char *owner, backup_cb cb, void *ud,
                struct cella_error *err);
int backups_delete(struct backups *b, const char *id, const char *owner, backup_cb cb, void *ud,
                   struct cella_error *err);

/* The bodies of POST /backups {dir, name?, ttl?, gitignore?, excludes?, consistent?,
 * multipart?} and POST /backups/{bid}/restore {dir?} (api-backups.c): every field checked
 * (backup_dir_check, the name's length, ttl 1 to CELLA_BACKUP_TTL_MAX seconds, default
 * CELLA_BACKUP_TTL_DEFAULT, each exclude by ignore_pattern_check, at most
 * CELLA_BACKUP_EXCLUDES_MAX of them in CELLA_BACKUP_EXCLUDES_BYTES). 0, or -1 with err set
 * (INVALID_BACKUP_CONFIG). */
struct api_backup_create {
        char dir[CELLA_BACKUP_DIR_MAX + 1];
        char name[CELLA_BACKUP_NAME_MAX + 1];
        bool has_name;
        int64_t ttl_s;
        bool gitignore;  /* honour the tree's .gitignore files */
        bool consistent; /* the sandbox frozen while the archive reads dir */
        bool multipart;  /* to S3: parts streamed as the archive is made (default true) */
        /* the excludes, each NUL-terminated, one after the other (ignore_pattern_check) */
        char excludes[CELLA_BACKUP_EXCLUDES_BYTES];
        unsigned nexcludes;
};
int api_decode_backup_create(const char *body, size_t len, struct api_backup_create *ret,
                             struct cella_error *err);
/* dir: "" when the body (which may be empty) names none. */
int api_decode_backup_restore(const char *body, size_t len, char *dir, size_t dirsz,
                              struct cella_error *err);

#endif
