/* Where backups are kept (docs/decisions/0049-backups.md): a local directory,
 * <data-dir>/backups/<id>/{archive.tar.zst,backup.json}, or an S3-compatible bucket
 * (cellad --backup-store s3://bucket[/prefix]?endpoint=URL[&region=R]), keys
 * <prefix>backups/<id>/archive.tar.zst and .../backup.json, signed with SigV4 by libcurl
 * with the credentials of the environment. The store is the backups' registry: each
 * backup's record (backup.json) lies beside its archive, so a second cellad sharing the
 * bucket lists and restores what the first made.
 *
 * Every backup_store_* call but new/free blocks (disk or network): call it on the loop's
 * thread pool. A store is shared by those calls (it holds no per-call state). */
#ifndef CELLA_DAEMON_BACKUP_STORE_H
#define CELLA_DAEMON_BACKUP_STORE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/limits.h"

#define BACKUP_ID_LEN 36 /* a UUID: 8-4-4-4-12 lowercase hex digits */

struct backup_record {
        char id[BACKUP_ID_LEN + 1];
        char name[CELLA_BACKUP_NAME_MAX + 1]; /* "" when none was given */
        char sandbox[CELLA_NAME_MAX + 1];     /* the sandbox it was made of */
        char dir[CELLA_BACKUP_DIR_MAX + 1];
        int64_t size_bytes; /* of the archive */
        int64_t created_ms;
        int64_t expires_ms;
        char sha256[65]; /* of the archive, lowercase hex */
};

bool backup_id_is_valid(const char *id);
/* A new random (version 4) UUID into out (BACKUP_ID_LEN + 1 bytes). 0 or -errno. */
int backup_id_new(char *out);

/* The record as stored (backup.json): a malloc'd string, NULL without memory. */
char *backup_record_format(const struct backup_record *rec);
/* Parse a stored record, every field checked (types, lengths, the id, the dir rules of
 * backup_dir_check, sizes and times not negative). 0 or -1 with err set. */
int backup_record_parse(const char *text, size_t len, struct backup_record *rec,
                        struct cella_error *err);
/* The record as the API answers it: {id, name?, sandbox, dir, sizeBytes, createdAt,
 * expiresAt} (docs/api.md "Backups"). New reference or NULL. */
json_t *backup_record_json(const struct backup_record *rec);

/* The parts of an s3:// store URL. */
struct backup_s3_spec {
        char bucket[64];     /* 3-63 of [a-z0-9.-] */
        char prefix[256];    /* "" or "a/b/" (ends with '/'): keys start with it */
        char endpoint[1024]; /* http(s)://host[:port], no path, no trailing '/' */
        char region[64];     /* "us-east-1" unless given */
};
/* Parse "s3://bucket[/prefix]?endpoint=http(s)://host[:port][&region=R]". 0 or -1 with err
 * set (VALIDATION_FAILED) naming what is wrong. */
int backup_s3_spec_parse(const char *spec, struct backup_s3_spec *out, struct cella_error *err);

/* A ListObjectsV2 answer: cb gets each <Key> (XML entities decoded); *ret_next gets the
 * <NextContinuationToken> when <IsTruncated> is true, else "". 0 or -1 with err set. */
int backup_s3_list_parse(const char *xml, size_t len, int (*cb)(const char *key, void *ud),
                         void *ud, char *ret_next, size_t next_sz, struct cella_error *err);

/* The query of a multipart upload's request, canonical as SigV4 wants it (libcurl signs
 * the query as written): "partNumber=N&uploadId=ID" (part > 0: UploadPart) or "uploadId=ID"
 * (part 0: Complete, Abort), ID percent-encoded. 0 or -ENAMETOOLONG. */
int backup_s3_upload_query(unsigned part, const char *upload_id, char *out, size_t outsz);

struct backup_store;

/* spec NULL: the local store under data_dir; else an s3:// URL. Credentials come from
 * AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN (and AWS_REGION when the URL
 * names none). 0 or -1 with err set. */
int backup_store_new(const char *spec, const char *data_dir, struct backup_store **ret,
                     struct cella_error *err);
void backup_store_free(struct backup_store *st);
/* "local <dir>" or "s3 <endpoint>/<bucket>/<prefix>" for logs and /v1/health. */
const char *backup_store_describe(const struct backup_store *st);

/* A new backup's archive is written to out (a path under <data-dir>/backups/.partial-<id>/,
 * made here), then either committed with its record or aborted. */
int backup_store_begin(struct backup_store *st, const char *id, char *out, size_t outsz,
                       struct cella_error *err);
int backup_store_commit(struct backup_store *st, const struct backup_record *rec,
                        struct cella_error *err);
void backup_store_abort(struct backup_store *st, const char *id);
/* The record of id: BACKUP_NOT_FOUND when there is none. */
int backup_store_record(struct backup_store *st, const char *id, struct backup_record *rec,
                        struct cella_error *err);
/* The archive of id written to fd (a pipe) as it is read, never held whole. */
int backup_store_fetch(struct backup_store *st, const char *id, int fd, struct cella_error *err);
/* Every record (at most CELLA_BACKUP_LIST_MAX), in no order; records that do not parse
 * are skipped (and logged). */
int backup_store_list(struct backup_store *st, int (*cb)(const struct backup_record *rec, void *ud),
                      void *ud, struct cella_error *err);
/* Remove the archive and the record; BACKUP_NOT_FOUND when there is neither. */
int backup_store_delete(struct backup_store *st, const char *id, struct cella_error *err);
/* Is the store a bucket (where a backup may be uploaded as it is made)? */
bool backup_store_is_s3(const struct backup_store *st);

/* A new backup's archive streamed to the bucket without a local copy: written in parts of
 * CELLA_BACKUP_PART_BYTES (more after each thousand parts) held in memory, each uploaded
 * when full (CreateMultipartUpload at the first, UploadPart for each) by a thread of its
 * own while the next fills the other of two buffers (one part in flight); finish uploads the
 * last part, completes the upload (CompleteMultipartUpload) and puts the record; an archive
 * smaller than one part is one PUT. free aborts an upload not finished
 * (AbortMultipartUpload: nothing half-stored stays) and releases u. S3 stores only. */
struct backup_upload;
int backup_store_upload_begin(struct backup_store *st, const char *id, struct backup_upload **ret,
                              struct cella_error *err);
int backup_store_upload_write(struct backup_upload *u, const void *p, size_t n,
                              struct cella_error *err);
int backup_store_upload_finish(struct backup_upload *u, const struct backup_record *rec,
                               struct cella_error *err);
void backup_store_upload_free(struct backup_upload *u);
/* The parts uploaded so far (0: none yet, or a single PUT). */
unsigned backup_store_upload_parts(const struct backup_upload *u);

/* What a stopped daemon left in <data-dir>/backups/.partial-*: removed. */
void backup_store_sweep_partials(struct backup_store *st);

#endif
