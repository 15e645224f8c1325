/* Where backups are kept: the local directory and the S3 bucket (backup-store.h). */
#include <curl/curl.h>
#include <dirent.h>
#include <pthread.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/fsutil.h"
#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/pct.h"
#include "common/timeutil.h"
#include "daemon/backup-archive.h"
#include "daemon/backup-store.h"

#define ARCHIVE_NAME "archive.tar.zst"
#define RECORD_NAME "backup.json"

struct backup_store {
        bool s3;
        char root[CELLA_PATH_MAX]; /* <data-dir>/backups: the local store, and every partial */
        struct backup_s3_spec spec;
        char userpwd[512];
        char token_header[2100]; /* "x-amz-security-token: ..." or "" */
        char sigv4[128];
        char describe[CELLA_PATH_MAX + 1400];
};

/* ---- ids and records ---- */

bool backup_id_is_valid(const char *id)
{
        if (!id || strlen(id) != BACKUP_ID_LEN)
                return false;
        for (int i = 0; i < BACKUP_ID_LEN; i++) {
                bool dash = i == 8 || i == 13 || i == 18 || i == 23;
                char c = id[i];
                if (dash ? c != '-' : !((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f')))
                        return false;
        }
        return true;
}

int backup_id_new(char *out)
{
        uint8_t b[16];

        if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
                return -EIO;
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        snprintf(out, BACKUP_ID_LEN + 1,
                 "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1],
                 b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                 b[15]);
        return 0;
}

char *backup_record_format(const struct backup_record *rec)
{
        _cleanup_json_ json_t *j = json_pack(
                "{s:i, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s}", "version", 1, "id", rec->id,
                "name", rec->name, "sandbox", rec->sandbox, "dir", rec->dir, "sizeBytes",
                (json_int_t)rec->size_bytes, "createdMs", (json_int_t)rec->created_ms, "expiresMs",
                (json_int_t)rec->expires_ms, "sha256", rec->sha256);

        return j ? json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
}

static bool copy_str(char *out, size_t outsz, const char *s)
{
        size_t n = strlen(s);

        if (n >= outsz)
                return false;
        memcpy(out, s, n + 1);
        return true;
}

int backup_record_parse(const char *text, size_t len, struct backup_record *rec,
                        struct cella_error *err)
{
        const char *id, *name, *sandbox, *dir, *sha;
        json_int_t version, size, created, expires;
        json_error_t je;
        struct cella_error derr = {0};

        if (len > CELLA_BACKUP_RECORD_MAX)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backup record too large");
        _cleanup_json_ json_t *j = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
        if (!j || json_unpack_ex(j, &je, 0, "{s:I, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s}",
                                 "version", &version, "id", &id, "name", &name, "sandbox", &sandbox,
                                 "dir", &dir, "sizeBytes", &size, "createdMs", &created,
                                 "expiresMs", &expires, "sha256", &sha) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backup record: %s", je.text);
        memset(rec, 0, sizeof(*rec));
        if (version != 1)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backup record: version %lld",
                                       (long long)version);
        if (!backup_id_is_valid(id) || !copy_str(rec->id, sizeof(rec->id), id))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backup record: bad id");
        if (!copy_str(rec->name, sizeof(rec->name), name) ||
            !copy_str(rec->sandbox, sizeof(rec->sandbox), sandbox) ||
            !copy_str(rec->dir, sizeof(rec->dir), dir) || strlen(sha) != 64 ||
            !copy_str(rec->sha256, sizeof(rec->sha256), sha))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backup record: too long");
        if (backup_dir_check(dir, &derr) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "backup record: %s", derr.msg);
        for (int i = 0; i < 64; i++)
                if (!((sha[i] >= '0' && sha[i] <= '9') || (sha[i] >= 'a' && sha[i] <= 'f')))
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                               "backup record: bad sha256");
        if (size < 0 || created < 0 || expires < created)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "backup record: bad size or times");
        rec->size_bytes = size;
        rec->created_ms = created;
        rec->expires_ms = expires;
        return 0;
}

json_t *backup_record_json(const struct backup_record *rec)
{
        char created[32], expires[32];
        json_t *j;

        time_format_iso(rec->created_ms, created, sizeof(created));
        time_format_iso(rec->expires_ms, expires, sizeof(expires));
        j = json_pack("{s:s, s:s, s:s, s:I, s:s, s:s}", "id", rec->id, "sandbox", rec->sandbox,
                      "dir", rec->dir, "sizeBytes", (json_int_t)rec->size_bytes, "createdAt",
                      created, "expiresAt", expires);
        if (j && rec->name[0] && json_object_set_new(j, "name", json_string(rec->name)) < 0) {
                json_decref(j);
                return NULL;
        }
        return j;
}

/* ---- the s3:// URL ---- */

int backup_s3_spec_parse(const char *spec, struct backup_s3_spec *out, struct cella_error *err)
{
        const char *p, *q;
        size_t n;

        memset(out, 0, sizeof(*out));
        snprintf(out->region, sizeof(out->region), "us-east-1");
        if (!spec || strncmp(spec, "s3://", 5) != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "backup store must be s3://bucket?endpoint=URL");
        if (strlen(spec) > CELLA_BACKUP_STORE_SPEC_MAX)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "backup store too long");
        p = spec + 5;
        n = strcspn(p, "/?");
        if (n < 3 || n > 63)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "bucket must be 3-63 characters");
        for (size_t i = 0; i < n; i++)
                if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9') || p[i] == '-' ||
                      p[i] == '.'))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "bucket must be of [a-z0-9.-]");
        memcpy(out->bucket, p, n);
        p += n;
        if (*p == '/') {
                p++;
                n = strcspn(p, "?");
                while (n > 0 && p[n - 1] == '/')
                        n--;
                if (n + 2 > sizeof(out->prefix))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED, "prefix too long");
                for (size_t i = 0; i < n; i++)
                        if (!(pct_unreserved(p[i]) || p[i] == '/') ||
                            (p[i] == '/' && (i == 0 || p[i - 1] == '/')))
                                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                       "prefix must be of [A-Za-z0-9._~-] "
                                                       "separated by single '/'");
                if (n > 0) {
                        memcpy(out->prefix, p, n);
                        out->prefix[n] = '/';
                }
                p += strcspn(p, "?");
        }
        if (*p != '?')
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "backup store needs ?endpoint=http(s)://host:port");
        for (q = p + 1; *q;) {
                size_t kv = strcspn(q, "&"), kl = strcspn(q, "=");
                char val[1024];

                if (kl >= kv)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "backup store: parameter without '='");
                if (pct_decode(q + kl + 1, kv - kl - 1, false, val, sizeof(val), NULL) < 0)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "backup store: bad parameter value");
                if (kl == 8 && strncmp(q, "endpoint", 8) == 0) {
                        size_t vl = strlen(val);
                        const char *host;
                        while (vl > 0 && val[vl - 1] == '/')
                                val[--vl] = '\0';
                        if (strncmp(val, "http://", 7) == 0)
                                host = val + 7;
                        else if (strncmp(val, "https://", 8) == 0)
                                host = val + 8;
                        else
                                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                       "endpoint must be http:// or https://");
                        if (!*host || strpbrk(host, "/?#@ \\"))
                                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                       "endpoint must be scheme://host[:port]");
                        snprintf(out->endpoint, sizeof(out->endpoint), "%s", val);
                } else if (kl == 6 && strncmp(q, "region", 6) == 0) {
                        size_t vl = strlen(val);
                        if (vl == 0 || vl >= sizeof(out->region))
                                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                       "bad region");
                        for (size_t i = 0; i < vl; i++)
                                if (!(pct_unreserved(val[i])))
                                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                                               "bad region");
                        memcpy(out->region, val, vl + 1);
                } else {
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "backup store: unknown parameter '%.*s'", (int)kl,
                                               q);
                }
                q += kv;
                if (*q == '&')
                        q++;
        }
        if (!out->endpoint[0])
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "backup store needs ?endpoint=http(s)://host:port");
        return 0;
}

/* ---- ListObjectsV2 answers ---- */

/* The text of <tag>...</tag> starting at or after *pos, entities decoded into out; false
 * when there is none. */
static bool xml_next(const char *xml, size_t len, size_t *pos, const char *tag, char *out,
                     size_t outsz, bool *bad)
{
        char open[48], close[48];
        int ol = snprintf(open, sizeof(open), "<%s>", tag);
        int cl = snprintf(close, sizeof(close), "</%s>", tag);
        const char *s = memmem(xml + *pos, len - *pos, open, (size_t)ol);
        const char *e;
        size_t o = 0;

        if (!s)
                return false;
        s += ol;
        e = memmem(s, len - (size_t)(s - xml), close, (size_t)cl);
        if (!e) {
                *bad = true;
                return false;
        }
        for (const char *c = s; c < e; c++) {
                char ch = *c;
                if (ch == '&') {
                        static const struct {
                                const char *ent;
                                char ch;
                        } ents[] = {{"&amp;", '&'},
                                    {"&lt;", '<'},
                                    {"&gt;", '>'},
                                    {"&quot;", '"'},
                                    {"&apos;", '\''}};
                        size_t k;
                        for (k = 0; k < ARRAY_SIZE(ents); k++) {
                                size_t el = strlen(ents[k].ent);
                                if ((size_t)(e - c) >= el && memcmp(c, ents[k].ent, el) == 0) {
                                        ch = ents[k].ch;
                                        c += el - 1;
                                        break;
                                }
                        }
                        if (k == ARRAY_SIZE(ents)) {
                                *bad = true;
                                return false;
                        }
                }
                if (ch == '\0' || o + 1 >= outsz) {
                        *bad = true;
                        return false;
                }
                out[o++] = ch;
        }
        out[o] = '\0';
        *pos = (size_t)(e - xml) + (size_t)cl;
        return true;
}

int backup_s3_list_parse(const char *xml, size_t len, int (*cb)(const char *key, void *ud),
                         void *ud, char *ret_next, size_t next_sz, struct cella_error *err)
{
        char key[1100], trunc[16];
        size_t pos = 0;
        bool bad = false;
        int r;

        ret_next[0] = '\0';
        if (len > CELLA_BACKUP_S3_LIST_MAX)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 listing too large");
        if (!memmem(xml, len, "<ListBucketResult", 17))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "S3 listing: no ListBucketResult");
        while (xml_next(xml, len, &pos, "Key", key, sizeof(key), &bad))
                if ((r = cb(key, ud)) < 0)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 listing: %s",
                                               strerror(-r));
        if (bad)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 listing: bad XML");
        pos = 0;
        if (xml_next(xml, len, &pos, "IsTruncated", trunc, sizeof(trunc), &bad) &&
            strcmp(trunc, "true") == 0) {
                pos = 0;
                if (!xml_next(xml, len, &pos, "NextContinuationToken", ret_next, next_sz, &bad) ||
                    !ret_next[0])
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                               "S3 listing: truncated without a token");
        }
        if (bad)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 listing: bad XML");
        return 0;
}

/* ---- the store ---- */

int backup_store_new(const char *spec, const char *data_dir, struct backup_store **ret,
                     struct cella_error *err)
{
        _cleanup_free_ struct backup_store *st = calloc(1, sizeof(*st));
        int r;

        if (!st)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (snprintf(st->root, sizeof(st->root), "%s/backups", data_dir) >= (int)sizeof(st->root))
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "data dir path too long");
        r = fs_mkdir_p(st->root, 0700);
        if (r < 0)
                return cella_error_errno(err, -r, "%s", st->root);
        if (spec) {
                const char *key = getenv("AWS_ACCESS_KEY_ID");
                const char *secret = getenv("AWS_SECRET_ACCESS_KEY");
                const char *token = getenv("AWS_SESSION_TOKEN");
                const char *region = getenv("AWS_REGION");

                if (backup_s3_spec_parse(spec, &st->spec, err) < 0)
                        return -1;
                if (!strstr(spec, "region=") && region && *region &&
                    strlen(region) < sizeof(st->spec.region))
                        snprintf(st->spec.region, sizeof(st->spec.region), "%s", region);
                if (!key || !*key || !secret || !*secret)
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "--backup-store s3://...: AWS_ACCESS_KEY_ID and "
                                               "AWS_SECRET_ACCESS_KEY must be set");
                if (strchr(key, ':') || snprintf(st->userpwd, sizeof(st->userpwd), "%s:%s", key,
                                                 secret) >= (int)sizeof(st->userpwd))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "bad AWS credentials");
                if (token && *token &&
                    snprintf(st->token_header, sizeof(st->token_header), "x-amz-security-token: %s",
                             token) >= (int)sizeof(st->token_header))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "AWS_SESSION_TOKEN too long");
                snprintf(st->sigv4, sizeof(st->sigv4), "aws:amz:%s:s3", st->spec.region);
                st->s3 = true;
                snprintf(st->describe, sizeof(st->describe), "s3 %s/%s/%s", st->spec.endpoint,
                         st->spec.bucket, st->spec.prefix);
        } else {
                snprintf(st->describe, sizeof(st->describe), "local %s", st->root);
        }
        *ret = TAKE_PTR(st);
        return 0;
}

void backup_store_free(struct backup_store *st)
{
        free(st);
}

const char *backup_store_describe(const struct backup_store *st)
{
        return st->describe;
}

/* ---- S3 requests ---- */

struct s3_body {
        char *buf; /* the answer, when collected */
        size_t len, cap, max;
        int fd; /* the answer written here instead, when >= 0 */
        int write_errno;
};

static size_t s3_write(char *p, size_t size, size_t nmemb, void *ud)
{
        struct s3_body *b = ud;
        size_t n = size * nmemb;

        if (b->fd >= 0) {
                for (size_t off = 0; off < n;) {
                        ssize_t w = write(b->fd, p + off, n - off);
                        if (w < 0 && errno == EINTR)
                                continue;
                        if (w < 0) {
                                b->write_errno = errno;
                                return 0;
                        }
                        off += (size_t)w;
                }
                return n;
        }
        if (b->len + n + 1 > b->max)
                return 0;
        if (b->len + n + 1 > b->cap) {
                size_t cap = (b->len + n + 1) * 2;
                char *nb = realloc(b->buf, cap < b->max ? cap : b->max);
                if (!nb)
                        return 0;
                b->buf = nb;
                b->cap = cap < b->max ? cap : b->max;
        }
        memcpy(b->buf + b->len, p, n);
        b->len += n;
        b->buf[b->len] = '\0';
        return n;
}

/* A body sent from memory (a part, a small archive, CompleteMultipartUpload's XML). */
struct mem_body {
        const char *p;
        size_t left;
};

static size_t mem_read(char *buf, size_t size, size_t nitems, void *ud)
{
        struct mem_body *m = ud;
        size_t n = size * nitems < m->left ? size * nitems : m->left;

        memcpy(buf, m->p, n);
        m->p += n;
        m->left -= n;
        return n;
}

/* The ETag of an answer's head, quotes included (UploadPart's). */
struct etag_out {
        char *buf;
        size_t size;
};

static size_t header_etag(char *p, size_t size, size_t nitems, void *ud)
{
        struct etag_out *e = ud;
        size_t n = size * nitems;

        if (n > 5 && strncasecmp(p, "etag:", 5) == 0) {
                size_t a = 5, b = n;
                while (a < b && (p[a] == ' ' || p[a] == '\t'))
                        a++;
                while (b > a && (p[b - 1] == '\r' || p[b - 1] == '\n' || p[b - 1] == ' '))
                        b--;
                if (b - a < e->size) {
                        memcpy(e->buf, p + a, b - a);
                        e->buf[b - a] = '\0';
                }
        }
        return n;
}

/* One request's parts beyond its method and key. */
struct s3_call {
        const char *query; /* NULL: none; its parameters in SigV4's canonical order */
        int upload_fd;     /* >= 0: the body is upload_len bytes read from it */
        int64_t upload_len;
        const char *text; /* a JSON body (PUT) */
        const void *mem;  /* a body from memory, mem_len bytes (PUT, or POST with post) */
        size_t mem_len;
        bool post;             /* POST (mem, possibly empty) */
        const char *mem_type;  /* its Content-Type */
        struct etag_out *etag; /* the answer's ETag, when wanted */
};

/* One request: method on key (NULL: the bucket) with call's body and query; body is what
 * comes back. Returns the HTTP status, or -1 with err set when no answer came. */
static long s3_perform(struct backup_store *st, const char *method, const char *key,
                       const struct s3_call *call, struct s3_body *body, struct cella_error *err)
{
        char url[2600];
        struct curl_slist *h = NULL;
        struct mem_body mb = {call->mem, call->mem_len};
        FILE *in = NULL;
        long status = -1;
        CURLcode rc;
        CURL *c = curl_easy_init();

        if (!c)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "curl: out of memory"), -1;
        /* path style; the bucket itself without a trailing '/' (the canonical URI that
         * servers compute for it) */
        snprintf(url, sizeof(url), "%s/%s%s%s%s%s", st->spec.endpoint, st->spec.bucket,
                 key ? "/" : "", key ? key : "", call->query ? "?" : "",
                 call->query ? call->query : "");
        curl_easy_setopt(c, CURLOPT_URL, url);
        curl_easy_setopt(c, CURLOPT_AWS_SIGV4, st->sigv4);
        curl_easy_setopt(c, CURLOPT_USERPWD, st->userpwd);
        curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 30L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c, CURLOPT_LOW_SPEED_TIME, 120L);
        curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
        curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, s3_write);
        curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
        if (call->etag) {
                call->etag->buf[0] = '\0';
                curl_easy_setopt(c, CURLOPT_HEADERFUNCTION, header_etag);
                curl_easy_setopt(c, CURLOPT_HEADERDATA, call->etag);
        }
        /* The body is not part of the signature (libcurl hashes only a body given as
         * POSTFIELDS; an upload is streamed): S3 takes "UNSIGNED-PAYLOAD" for that, and
         * the header is signed with the others. */
        h = curl_slist_append(h, "x-amz-content-sha256: UNSIGNED-PAYLOAD");
        if (st->token_header[0])
                h = curl_slist_append(h, st->token_header);
        if (call->upload_fd >= 0) {
                int fd2 = fcntl(call->upload_fd, F_DUPFD_CLOEXEC, 3);
                in = fd2 >= 0 ? fdopen(fd2, "rb") : NULL;
                if (!in) {
                        if (fd2 >= 0)
                                close(fd2);
                        cella_error_errno(err, errno, "upload");
                        goto out;
                }
                curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c, CURLOPT_READDATA, in);
                curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)call->upload_len);
                /* (an "Expect:" line to skip the 100-continue round trip would be signed
                 * by libcurl 7.88 as an empty header it never sends) */
                h = curl_slist_append(h, "Content-Type: application/zstd");
        } else if (call->post) {
                curl_easy_setopt(c, CURLOPT_POST, 1L);
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, call->mem ? (const char *)call->mem : "");
                curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)call->mem_len);
                if (call->mem_type)
                        h = curl_slist_append(h, call->mem_type);
        } else if (call->mem) {
                curl_easy_setopt(c, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c, CURLOPT_READFUNCTION, mem_read);
                curl_easy_setopt(c, CURLOPT_READDATA, &mb);
                curl_easy_setopt(c, CURLOPT_INFILESIZE_LARGE, (curl_off_t)call->mem_len);
                if (call->mem_type)
                        h = curl_slist_append(h, call->mem_type);
        } else if (call->text) {
                curl_easy_setopt(c, CURLOPT_POSTFIELDS, call->text);
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
                h = curl_slist_append(h, "Content-Type: application/json");
        } else if (strcmp(method, "GET") != 0) {
                curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
        }
        if (h)
                curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
        rc = curl_easy_perform(c);
        if (rc != CURLE_OK) {
                if (body->write_errno)
                        cella_error_errno(err, body->write_errno, "S3 %s %s", method, url);
                else
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 %s %s: %s", method, url,
                                        curl_easy_strerror(rc));
                goto out;
        }
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
out:
        if (in)
                fclose(in);
        curl_slist_free_all(h);
        curl_easy_cleanup(c);
        return status;
}

/* One request: method on key (NULL: the bucket, with query). upload_fd >= 0: its content
 * is the body (upload_len bytes, read as sent); text: a JSON body; body is what comes
 * back. Returns the HTTP status, or -1 with err set when no answer came. */
static long s3_request(struct backup_store *st, const char *method, const char *key,
                       const char *query, int upload_fd, int64_t upload_len, const char *text,
                       struct s3_body *body, struct cella_error *err)
{
        struct s3_call call = {
                .query = query, .upload_fd = upload_fd, .upload_len = upload_len, .text = text};

        return s3_perform(st, method, key, &call, body, err);
}

static void s3_key(const struct backup_store *st, const char *id, const char *file, char *out,
                   size_t outsz)
{
        snprintf(out, outsz, "%sbackups/%s/%s", st->spec.prefix, id, file);
}

/* A status other than 2xx as an error (the answer's <Message> when there is one). */
static int s3_fail(long status, const struct s3_body *b, const char *what, struct cella_error *err)
{
        char msg[200] = "";
        size_t pos = 0;
        bool bad = false;

        if (b->buf)
                xml_next(b->buf, b->len, &pos, "Message", msg, sizeof(msg), &bad);
        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 %s: HTTP %ld%s%s", what, status,
                               msg[0] ? ": " : "", msg);
}

/* status as the answer of a request whose body is b: 0 for 2xx; else -1 with err set (by
 * the transport already when status < 0) and b's buffer freed. */
static int s3_check(long status, struct s3_body *b, const char *what, struct cella_error *err)
{
        if (status >= 0 && status / 100 == 2)
                return 0;
        if (status >= 0)
                s3_fail(status, b, what, err);
        free(b->buf);
        b->buf = NULL;
        return -1;
}

/* ---- the store's operations ---- */

int backup_store_begin(struct backup_store *st, const char *id, char *out, size_t outsz,
                       struct cella_error *err)
{
        char dir[CELLA_PATH_MAX + 64];

        snprintf(dir, sizeof(dir), "%s/.partial-%s", st->root, id);
        if (mkdir(dir, 0700) < 0)
                return cella_error_errno(err, errno, "%s", dir);
        if (snprintf(out, outsz, "%s/" ARCHIVE_NAME, dir) >= (int)outsz)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "path too long");
        return 0;
}

void backup_store_abort(struct backup_store *st, const char *id)
{
        char name[64];
        int fd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return;
        snprintf(name, sizeof(name), ".partial-%s", id);
        backup_remove_tree(fd, name);
        close(fd);
}

static int write_synced(const char *path, const char *text)
{
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
        size_t len = strlen(text);
        int r = 0;

        if (fd < 0)
                return -errno;
        if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0)
                r = -EIO;
        close(fd);
        return r;
}

int backup_store_commit(struct backup_store *st, const struct backup_record *rec,
                        struct cella_error *err)
{
        char dir[CELLA_PATH_MAX + 64], path[CELLA_PATH_MAX + 96], final[CELLA_PATH_MAX + 64];
        _cleanup_free_ char *text = backup_record_format(rec);
        int r;

        if (!text)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        snprintf(dir, sizeof(dir), "%s/.partial-%s", st->root, rec->id);
        if (!st->s3) {
                snprintf(path, sizeof(path), "%s/" RECORD_NAME, dir);
                snprintf(final, sizeof(final), "%s/%s", st->root, rec->id);
                r = write_synced(path, text);
                if (r < 0)
                        return cella_error_errno(err, -r, "%s", path);
                if (rename(dir, final) < 0)
                        return cella_error_errno(err, errno, "%s", final);
                return 0;
        }
        /* S3: the archive first, the record last (a listing never shows a backup whose
         * archive is not there yet). */
        char key[600];
        struct s3_body b = {.fd = -1, .max = 65536};
        long status;

        snprintf(path, sizeof(path), "%s/" ARCHIVE_NAME, dir);
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return cella_error_errno(err, errno, "%s", path);
        s3_key(st, rec->id, ARCHIVE_NAME, key, sizeof(key));
        status = s3_request(st, "PUT", key, NULL, fd, rec->size_bytes, NULL, &b, err);
        if (s3_check(status, &b, "upload archive", err) < 0)
                return -1;
        free(b.buf);
        b = (struct s3_body){.fd = -1, .max = 65536};
        s3_key(st, rec->id, RECORD_NAME, key, sizeof(key));
        status = s3_request(st, "PUT", key, NULL, -1, 0, text, &b, err);
        if (s3_check(status, &b, "upload record", err) < 0)
                return -1;
        free(b.buf);
        backup_store_abort(st, rec->id); /* the local copy */
        return 0;
}

static int read_small(const char *path, char *buf, size_t bufsz, size_t *ret_len)
{
        int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
        ssize_t n;

        if (fd < 0)
                return -errno;
        n = read(fd, buf, bufsz);
        close(fd);
        if (n < 0)
                return -errno;
        if ((size_t)n >= bufsz)
                return -EFBIG;
        *ret_len = (size_t)n;
        return 0;
}

int backup_store_record(struct backup_store *st, const char *id, struct backup_record *rec,
                        struct cella_error *err)
{
        if (!backup_id_is_valid(id))
                return cella_error_set(err, CELLA_E_BACKUP_NOT_FOUND, "no backup '%.64s'", id);
        if (!st->s3) {
                char path[CELLA_PATH_MAX + 64], buf[CELLA_BACKUP_RECORD_MAX + 1];
                size_t len = 0;
                int r;

                snprintf(path, sizeof(path), "%s/%s/" RECORD_NAME, st->root, id);
                r = read_small(path, buf, sizeof(buf), &len);
                if (r == -ENOENT)
                        return cella_error_set(err, CELLA_E_BACKUP_NOT_FOUND, "no backup '%s'", id);
                if (r < 0)
                        return cella_error_errno(err, -r, "%s", path);
                r = backup_record_parse(buf, len, rec, err);
                if (r == 0 && strcmp(rec->id, id) != 0)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                               "backup '%s': its record names '%s'", id, rec->id);
                return r;
        }
        char key[600];
        struct s3_body b = {.fd = -1, .max = CELLA_BACKUP_RECORD_MAX + 1};
        long status;
        int r;

        s3_key(st, id, RECORD_NAME, key, sizeof(key));
        status = s3_request(st, "GET", key, NULL, -1, 0, NULL, &b, err);
        if (status == 404)
                r = cella_error_set(err, CELLA_E_BACKUP_NOT_FOUND, "no backup '%s'", id);
        else if (status < 0)
                r = -1;
        else if (status / 100 != 2)
                r = s3_fail(status, &b, "get record", err);
        else
                r = backup_record_parse(b.buf ? b.buf : "", b.len, rec, err);
        if (r == 0 && strcmp(rec->id, id) != 0)
                r = cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                    "backup '%s': its record names "
                                    "'%s'",
                                    id, rec->id);
        free(b.buf);
        return r;
}

int backup_store_fetch(struct backup_store *st, const char *id, int fd, struct cella_error *err)
{
        if (!st->s3) {
                char path[CELLA_PATH_MAX + 64];
                _cleanup_free_ char *buf = malloc(256 * 1024);
                ssize_t n;

                snprintf(path, sizeof(path), "%s/%s/" ARCHIVE_NAME, st->root, id);
                _cleanup_close_ int in = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
                if (in < 0)
                        return cella_error_errno(err, errno, "%s", path);
                if (!buf)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                while ((n = read(in, buf, 256 * 1024)) > 0) {
                        for (ssize_t off = 0; off < n;) {
                                ssize_t w = write(fd, buf + off, (size_t)(n - off));
                                if (w < 0 && errno == EINTR)
                                        continue;
                                if (w < 0)
                                        return cella_error_errno(err, errno, "write archive");
                                off += w;
                        }
                }
                return n < 0 ? cella_error_errno(err, errno, "%s", path) : 0;
        }
        char key[600];
        struct s3_body b = {.fd = fd};
        long status;

        s3_key(st, id, ARCHIVE_NAME, key, sizeof(key));
        status = s3_request(st, "GET", key, NULL, -1, 0, NULL, &b, err);
        if (status < 0)
                return -1;
        if (status / 100 != 2)
                return cella_error_set(err, CELLA_E_BACKUP_RESTORE_FAILED,
                                       "S3 get archive: HTTP %ld", status);
        return 0;
}

struct list_ctx {
        struct backup_store *st;
        int (*cb)(const struct backup_record *rec, void *ud);
        void *ud;
        unsigned n;
        int r;
};

static int list_one(struct list_ctx *l, const char *id)
{
        struct backup_record rec;
        struct cella_error e = {0};

        if (l->n >= CELLA_BACKUP_LIST_MAX)
                return 0;
        if (backup_store_record(l->st, id, &rec, &e) < 0) {
                if (e.code != CELLA_E_BACKUP_NOT_FOUND)
                        log_warn("backup '%s': %s", id, e.msg);
                return 0;
        }
        l->n++;
        return l->cb(&rec, l->ud);
}

static int list_key(const char *key, void *ud)
{
        struct list_ctx *l = ud;
        char want[300];
        size_t pl;

        snprintf(want, sizeof(want), "%sbackups/", l->st->spec.prefix);
        pl = strlen(want);
        /* <prefix>backups/<id>/backup.json */
        if (strncmp(key, want, pl) != 0 ||
            strlen(key) != pl + BACKUP_ID_LEN + 1 + strlen(RECORD_NAME) ||
            key[pl + BACKUP_ID_LEN] != '/' || strcmp(key + pl + BACKUP_ID_LEN + 1, RECORD_NAME))
                return 0;
        char id[BACKUP_ID_LEN + 1];
        memcpy(id, key + pl, BACKUP_ID_LEN);
        id[BACKUP_ID_LEN] = '\0';
        if (!backup_id_is_valid(id))
                return 0;
        return list_one(l, id);
}

static void pct_encode(const char *s, char *out, size_t outsz)
{
        size_t o = 0;

        for (; *s && o + 4 < outsz; s++) {
                if (pct_unreserved(*s))
                        out[o++] = *s;
                else
                        o += (size_t)snprintf(out + o, outsz - o, "%%%02X", (unsigned char)*s);
        }
        out[o] = '\0';
}

int backup_store_list(struct backup_store *st, int (*cb)(const struct backup_record *rec, void *ud),
                      void *ud, struct cella_error *err)
{
        struct list_ctx l = {st, cb, ud, 0, 0};

        if (!st->s3) {
                DIR *d = opendir(st->root);
                struct dirent *de;
                int r = 0;

                if (!d)
                        return cella_error_errno(err, errno, "%s", st->root);
                while ((de = readdir(d)) && r >= 0)
                        if (backup_id_is_valid(de->d_name))
                                r = list_one(&l, de->d_name);
                closedir(d);
                return r < 0 ? cella_error_errno(err, -r, "list backups") : 0;
        }
        char next[1100] = "", prefix[300], enc_prefix[900], enc_next[3300], query[4400];

        snprintf(prefix, sizeof(prefix), "%sbackups/", st->spec.prefix);
        pct_encode(prefix, enc_prefix, sizeof(enc_prefix));
        do {
                struct s3_body b = {.fd = -1, .max = CELLA_BACKUP_S3_LIST_MAX + 1};
                long status;
                int r;

                /* the parameters in SigV4's canonical (sorted) order */
                if (next[0]) {
                        pct_encode(next, enc_next, sizeof(enc_next));
                        snprintf(query, sizeof(query),
                                 "continuation-token=%s&list-type=2&prefix=%s", enc_next,
                                 enc_prefix);
                } else {
                        snprintf(query, sizeof(query), "list-type=2&prefix=%s", enc_prefix);
                }
                status = s3_request(st, "GET", NULL, query, -1, 0, NULL, &b, err);
                if (s3_check(status, &b, "list", err) < 0)
                        return -1;
                r = backup_s3_list_parse(b.buf ? b.buf : "", b.len, list_key, &l, next,
                                         sizeof(next), err);
                free(b.buf);
                if (r < 0)
                        return -1;
        } while (next[0] && l.n < CELLA_BACKUP_LIST_MAX);
        return 0;
}

int backup_store_delete(struct backup_store *st, const char *id, struct cella_error *err)
{
        struct backup_record rec;

        if (backup_store_record(st, id, &rec, err) < 0)
                return -1;
        if (!st->s3) {
                _cleanup_close_ int fd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                int r = fd < 0 ? -errno : backup_remove_tree(fd, id);
                return r < 0 ? cella_error_errno(err, -r, "remove backup '%s'", id) : 0;
        }
        /* the record first: a listing stops showing it before its archive goes */
        static const char *const files[] = {RECORD_NAME, ARCHIVE_NAME};
        for (size_t i = 0; i < ARRAY_SIZE(files); i++) {
                char key[600];
                struct s3_body b = {.fd = -1, .max = 65536};
                long status;

                s3_key(st, id, files[i], key, sizeof(key));
                status = s3_request(st, "DELETE", key, NULL, -1, 0, NULL, &b, err);
                if (status < 0 || (status / 100 != 2 && status != 404)) {
                        if (status >= 0)
                                s3_fail(status, &b, "delete", err);
                        free(b.buf);
                        return -1;
                }
                free(b.buf);
        }
        return 0;
}

void backup_store_sweep_partials(struct backup_store *st)
{
        int fd = open(st->root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        int dfd = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;
        DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
        struct dirent *de;

        if (!d) {
                if (dfd >= 0)
                        close(dfd);
                if (fd >= 0)
                        close(fd);
                return;
        }
        while ((de = readdir(d)))
                if (strncmp(de->d_name, ".partial-", 9) == 0 &&
                    backup_remove_tree(fd, de->d_name) == 0)
                        log_info("backups: %s/%s, a backup a stop cut short, removed", st->root,
                                 de->d_name);
        closedir(d);
        close(fd);
}

/* ---- a streamed upload to S3 (multipart) ---- */

int backup_s3_upload_query(unsigned part, const char *upload_id, char *out, size_t outsz)
{
        char enc[3300];
        int n;

        if (strlen(upload_id) * 3 >= sizeof(enc))
                return -ENAMETOOLONG;
        pct_encode(upload_id, enc, sizeof(enc));
        /* the parameters in SigV4's canonical (sorted) order, values encoded: libcurl 7.88
         * signs the query as it is written */
        n = part ? snprintf(out, outsz, "partNumber=%u&uploadId=%s", part, enc)
                 : snprintf(out, outsz, "uploadId=%s", enc);
        return n < 0 || (size_t)n >= outsz ? -ENAMETOOLONG : 0;
}

/* A part uploaded by a thread of its own while the next one fills. */
struct part_job {
        struct backup_upload *u;
        unsigned n; /* its number, 1-based */
        char *buf;
        size_t len, cap;
        int rc;
        struct cella_error err;
};

struct backup_upload {
        struct backup_store *st;
        char id[BACKUP_ID_LEN + 1];
        char key[600];
        char upload_id[1100]; /* "" until the multipart upload is made */
        char *buf;            /* the part being filled */
        size_t len, cap;
        char *spare; /* the other buffer, when no part is in flight (NULL: not made yet) */
        size_t spare_cap;
        unsigned parts;    /* parts numbered so far (sent, or in flight) */
        char (*etags)[80]; /* theirs, in order (written by the part's upload) */
        size_t etags_cap;
        bool inflight; /* job runs on thread */
        pthread_t thread;
        struct part_job job;
        uint64_t bytes;
};

bool backup_store_is_s3(const struct backup_store *st)
{
        return st->s3;
}

/* The size of part n (1-based): CELLA_BACKUP_PART_BYTES for the first thousand, one more
 * time that for each thousand after (S3 allows 10,000 parts: 440 GiB at most). */
static size_t part_size(unsigned n)
{
        return (size_t)CELLA_BACKUP_PART_BYTES * (1 + (n - 1) / 1000);
}

int backup_store_upload_begin(struct backup_store *st, const char *id, struct backup_upload **ret,
                              struct cella_error *err)
{
        struct backup_upload *u = calloc(1, sizeof(*u));

        if (!u || !(u->buf = malloc(part_size(1)))) {
                free(u);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        u->cap = part_size(1);
        u->st = st;
        snprintf(u->id, sizeof(u->id), "%s", id);
        s3_key(st, id, ARCHIVE_NAME, u->key, sizeof(u->key));
        *ret = u;
        return 0;
}

/* CreateMultipartUpload: the upload's id from <UploadId>. */
static int upload_create(struct backup_upload *u, struct cella_error *err)
{
        struct s3_body b = {.fd = -1, .max = 65536};
        struct s3_call call = {.query = "uploads=",
                               .upload_fd = -1,
                               .post = true,
                               .mem_type = "Content-Type: application/zstd"};
        size_t pos = 0;
        bool bad = false;
        long status = s3_perform(u->st, "POST", u->key, &call, &b, err);

        if (s3_check(status, &b, "create multipart upload", err) < 0)
                return -1;
        if (!b.buf ||
            !xml_next(b.buf, b.len, &pos, "UploadId", u->upload_id, sizeof(u->upload_id), &bad) ||
            !u->upload_id[0]) {
                free(b.buf);
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "S3 create multipart upload: no UploadId in the answer");
        }
        free(b.buf);
        return 0;
}

/* UploadPart of part n from buf (len bytes), its ETag into u->etags[n - 1] (made room for
 * by the caller). Reads only what does not change while a part is in flight. */
static int part_put(struct backup_upload *u, unsigned n, const char *buf, size_t len,
                    struct cella_error *err)
{
        char query[3400], etag[80];
        struct etag_out eo = {etag, sizeof(etag)};
        struct s3_body b = {.fd = -1, .max = 65536};
        long status;

        if (backup_s3_upload_query(n, u->upload_id, query, sizeof(query)) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 upload id too long");
        struct s3_call call = {.query = query,
                               .upload_fd = -1,
                               .mem = buf,
                               .mem_len = len,
                               .mem_type = "Content-Type: application/octet-stream",
                               .etag = &eo};
        status = s3_perform(u->st, "PUT", u->key, &call, &b, err);
        if (s3_check(status, &b, "upload part", err) < 0)
                return -1;
        free(b.buf);
        if (!etag[0])
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR,
                                       "S3 upload part %u: no ETag in the answer", n);
        snprintf(u->etags[n - 1], sizeof(u->etags[0]), "%s", etag);
        return 0;
}

static void *part_thread(void *ud)
{
        struct part_job *j = ud;

        j->rc = part_put(j->u, j->n, j->buf, j->len, &j->err);
        return NULL;
}

/* The part in flight waited for: its buffer back as the spare, its result. */
static int upload_wait(struct backup_upload *u, struct cella_error *err)
{
        if (!u->inflight)
                return 0;
        pthread_join(u->thread, NULL);
        u->inflight = false;
        u->spare = u->job.buf;
        u->spare_cap = u->job.cap;
        if (u->job.rc < 0) {
                *err = u->job.err;
                return -1;
        }
        return 0;
}

/* The next part's number, with room for its ETag; the upload made at the first. */
static int upload_next(struct backup_upload *u, unsigned *ret, struct cella_error *err)
{
        unsigned n = u->parts + 1;

        if (!u->upload_id[0] && upload_create(u, err) < 0)
                return -1;
        if (n > CELLA_BACKUP_PARTS_MAX)
                return cella_error_set(err, CELLA_E_BACKUP_CREATE_FAILED,
                                       "the archive needs more than %d parts",
                                       CELLA_BACKUP_PARTS_MAX);
        if (u->parts == u->etags_cap) {
                size_t cap = u->etags_cap ? u->etags_cap * 2 : 64;
                void *p = realloc(u->etags, cap * sizeof(*u->etags));
                if (!p)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                u->etags = p;
                u->etags_cap = cap;
        }
        *ret = n;
        return 0;
}

/* The full buffer sent as the next part by a thread while the archive fills the other
 * one (the archive and the network overlap; one part in flight at most). */
static int upload_part(struct backup_upload *u, struct cella_error *err)
{
        unsigned n;

        if (upload_wait(u, err) < 0 || upload_next(u, &n, err) < 0)
                return -1;
        if (u->spare_cap < part_size(n + 1)) {
                char *p = realloc(u->spare, part_size(n + 1));
                if (!p)
                        return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                u->spare = p;
                u->spare_cap = part_size(n + 1);
        }
        u->job = (struct part_job){.u = u, .n = n, .buf = u->buf, .len = u->len, .cap = u->cap};
        u->parts = n;
        if (pthread_create(&u->thread, NULL, part_thread, &u->job) != 0) {
                /* no thread: sent from here */
                part_thread(&u->job);
                if (u->job.rc < 0) {
                        *err = u->job.err;
                        return -1;
                }
        } else {
                u->inflight = true;
        }
        if (!u->inflight) {
                /* the same buffer is filled again */
                u->len = 0;
                return 0;
        }
        u->buf = u->spare;
        u->cap = u->spare_cap;
        u->spare = NULL;
        u->spare_cap = 0;
        u->len = 0;
        return 0;
}

int backup_store_upload_write(struct backup_upload *u, const void *p, size_t n,
                              struct cella_error *err)
{
        const char *c = p;

        u->bytes += n;
        while (n > 0) {
                size_t room = part_size(u->parts + 1) - u->len;
                size_t k = n < room ? n : room;

                memcpy(u->buf + u->len, c, k);
                u->len += k;
                c += k;
                n -= k;
                /* a full part goes when more follows (the last part may be any size) */
                if (u->len == part_size(u->parts + 1) && n > 0 && upload_part(u, err) < 0)
                        return -1;
        }
        return 0;
}

/* CompleteMultipartUpload with every part's ETag. */
static int upload_complete(struct backup_upload *u, struct cella_error *err)
{
        size_t cap = 128 + (size_t)u->parts * 128, o = 0;
        _cleanup_free_ char *xml = malloc(cap);
        char query[3400];
        struct s3_body b = {.fd = -1, .max = 65536};
        long status;

        if (!xml)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        o += (size_t)snprintf(xml + o, cap - o, "<CompleteMultipartUpload>");
        for (unsigned i = 0; i < u->parts; i++)
                o += (size_t)snprintf(xml + o, cap - o,
                                      "<Part><PartNumber>%u</PartNumber><ETag>%s</ETag></Part>",
                                      i + 1, u->etags[i]);
        o += (size_t)snprintf(xml + o, cap - o, "</CompleteMultipartUpload>");
        if (backup_s3_upload_query(0, u->upload_id, query, sizeof(query)) < 0)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "S3 upload id too long");
        struct s3_call call = {.query = query,
                               .upload_fd = -1,
                               .mem = xml,
                               .mem_len = o,
                               .post = true,
                               .mem_type = "Content-Type: application/xml"};
        status = s3_perform(u->st, "POST", u->key, &call, &b, err);
        /* S3 may answer 200 with an <Error> in the body */
        if (status < 0 || status / 100 != 2 || (b.buf && memmem(b.buf, b.len, "<Error>", 7))) {
                if (status >= 0)
                        s3_fail(status, &b, "complete multipart upload", err);
                free(b.buf);
                return -1;
        }
        free(b.buf);
        return 0;
}

int backup_store_upload_finish(struct backup_upload *u, const struct backup_record *rec,
                               struct cella_error *err)
{
        _cleanup_free_ char *text = backup_record_format(rec);
        struct s3_body b = {.fd = -1, .max = 65536};
        char key[600];
        long status;

        if (!text)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        if (u->parts == 0) {
                /* smaller than a part: one PUT from memory */
                struct s3_call call = {.upload_fd = -1,
                                       .mem = u->buf,
                                       .mem_len = u->len,
                                       .mem_type = "Content-Type: application/zstd"};
                if (u->len == 0)
                        call.mem = "";
                status = s3_perform(u->st, "PUT", u->key, &call, &b, err);
                if (s3_check(status, &b, "upload archive", err) < 0)
                        return -1;
                free(b.buf);
        } else {
                unsigned n;
                if (upload_wait(u, err) < 0 || upload_next(u, &n, err) < 0 ||
                    part_put(u, n, u->buf, u->len, err) < 0)
                        return -1;
                u->parts = n;
                if (upload_complete(u, err) < 0)
                        return -1;
        }
        /* the record last: a listing never shows a backup whose archive is not there */
        b = (struct s3_body){.fd = -1, .max = 65536};
        s3_key(u->st, rec->id, RECORD_NAME, key, sizeof(key));
        status = s3_request(u->st, "PUT", key, NULL, -1, 0, text, &b, err);
        if (status < 0 || status / 100 != 2) {
                if (status >= 0)
                        s3_fail(status, &b, "upload record", err);
                free(b.buf);
                /* the archive without its record is no backup: removed */
                struct s3_body d = {.fd = -1, .max = 65536};
                struct cella_error derr = {0};
                s3_request(u->st, "DELETE", u->key, NULL, -1, 0, NULL, &d, &derr);
                free(d.buf);
                return -1;
        }
        free(b.buf);
        u->upload_id[0] = '\0'; /* done: nothing to abort */
        return 0;
}

unsigned backup_store_upload_parts(const struct backup_upload *u)
{
        return u->parts;
}

void backup_store_upload_free(struct backup_upload *u)
{
        struct cella_error ignored = {0};

        if (!u)
                return;
        upload_wait(u, &ignored);
        if (u->upload_id[0]) {
                /* AbortMultipartUpload: the parts stored so far are dropped */
                char query[3400];
                struct s3_body b = {.fd = -1, .max = 65536};
                struct cella_error err = {0};
                struct s3_call call = {.query = query, .upload_fd = -1};
                long status;

                backup_s3_upload_query(0, u->upload_id, query, sizeof(query));
                status = s3_perform(u->st, "DELETE", u->key, &call, &b, &err);
                if (status < 0 || (status / 100 != 2 && status != 404))
                        log_warn("backup '%s': abort multipart upload %s: %s", u->id, u->upload_id,
                                 status < 0 ? err.msg : "refused");
                free(b.buf);
        }
        free(u->etags);
        free(u->buf);
        free(u->spare);
        free(u);
}
