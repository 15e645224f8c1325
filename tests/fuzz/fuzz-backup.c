/* Fuzz the backup parsers (decision 0049): the first byte picks one, the rest is its input.
 *   0  a backup record (backup.json, read from the store, which another cellad may have
 *      written): success gives a valid id, a dir backup_dir_check accepts, sizes and times
 *      not negative, and format/parse is a fixed point;
 *   1  --backup-store s3://...: success gives a bucket of 3-63 [a-z0-9.-], a prefix "" or
 *      ending in '/', an http(s) endpoint without a path;
 *   2  a ListObjectsV2 answer: every key handed over is a C string, the token fits;
 *   3  a dir: accepted only when absolute, without "", "." or ".." components;
 *   4, 5  the bodies of POST /backups and POST /backups/{id}/restore: success gives a dir
 *      backup_dir_check accepts and a ttl of 1..CELLA_BACKUP_TTL_MAX. */
#include <string.h>

#include "daemon/backup-archive.h"
#include "daemon/backup-store.h"
#include "daemon/backup.h"
#include "fuzz.h"

static int count_key(const char *key, void *ud)
{
        size_t *n = ud;

        FUZZ_CHECK(strlen(key) < 1100);
        (*n)++;
        return 0;
}

static void check_dir_ok(const char *dir)
{
        FUZZ_CHECK(dir[0] == '/' && !strstr(dir, "//") && !strstr(dir, "/../") &&
                   !strstr(dir, "/./"));
        size_t n = strlen(dir);
        FUZZ_CHECK(dir[n - 1] != '/');
        FUZZ_CHECK(!(n >= 3 && strcmp(dir + n - 3, "/..") == 0));
        FUZZ_CHECK(!(n >= 2 && strcmp(dir + n - 2, "/.") == 0));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        static struct backup_record a, b;
        static struct backup_s3_spec spec;
        static struct api_backup_create body;
        char text[4096], dir[CELLA_BACKUP_DIR_MAX + 1], next[1100];
        struct cella_error err = {0};
        size_t n = 0;
        char *t;

        if (size < 1)
                return 0;
        const char *in = (const char *)data + 1;
        size_t len = size - 1;
        switch (data[0] % 6) {
        case 0:
                if (backup_record_parse(in, len, &a, &err) < 0) {
                        FUZZ_CHECK(cella_error_is_set(&err));
                        return 0;
                }
                FUZZ_CHECK(backup_id_is_valid(a.id));
                FUZZ_CHECK(backup_dir_check(a.dir, NULL) == 0);
                check_dir_ok(a.dir);
                FUZZ_CHECK(a.size_bytes >= 0 && a.created_ms >= 0 && a.expires_ms >= a.created_ms);
                t = backup_record_format(&a);
                if (!t)
                        return 0;
                FUZZ_CHECK(backup_record_parse(t, strlen(t), &b, NULL) == 0);
                FUZZ_CHECK(memcmp(&a, &b, sizeof(a)) == 0);
                free(t);
                break;
        case 1:
                if (len >= sizeof(text))
                        return 0;
                memcpy(text, in, len);
                text[len] = '\0';
                if (backup_s3_spec_parse(text, &spec, &err) < 0) {
                        FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED);
                        return 0;
                }
                FUZZ_CHECK(strlen(spec.bucket) >= 3 && strlen(spec.bucket) <= 63);
                FUZZ_CHECK(strspn(spec.bucket, "abcdefghijklmnopqrstuvwxyz0123456789.-") ==
                           strlen(spec.bucket));
                FUZZ_CHECK(!spec.prefix[0] || spec.prefix[strlen(spec.prefix) - 1] == '/');
                FUZZ_CHECK(strncmp(spec.endpoint, "http://", 7) == 0 ||
                           strncmp(spec.endpoint, "https://", 8) == 0);
                FUZZ_CHECK(!strchr(strstr(spec.endpoint, "://") + 3, '/'));
                FUZZ_CHECK(spec.region[0]);
                break;
        case 2:
                if (backup_s3_list_parse(in, len, count_key, &n, next, sizeof(next), &err) < 0)
                        FUZZ_CHECK(cella_error_is_set(&err));
                else
                        FUZZ_CHECK(strlen(next) < sizeof(next));
                break;
        case 3:
                if (len >= sizeof(text))
                        return 0;
                memcpy(text, in, len);
                text[len] = '\0';
                if (backup_dir_check(text, &err) == 0)
                        check_dir_ok(text);
                else
                        FUZZ_CHECK(err.code == CELLA_E_INVALID_BACKUP_CONFIG);
                break;
        case 4:
                if (api_decode_backup_create(in, len, &body, &err) == 0) {
                        FUZZ_CHECK(backup_dir_check(body.dir, NULL) == 0);
                        FUZZ_CHECK(body.ttl_s >= 1 && body.ttl_s <= CELLA_BACKUP_TTL_MAX);
                } else {
                        FUZZ_CHECK(err.code == CELLA_E_INVALID_BACKUP_CONFIG);
                }
                break;
        case 5:
                if (api_decode_backup_restore(in, len, dir, sizeof(dir), &err) == 0)
                        FUZZ_CHECK(!dir[0] || backup_dir_check(dir, NULL) == 0);
                else
                        FUZZ_CHECK(err.code == CELLA_E_INVALID_BACKUP_CONFIG);
                break;
        }
        return 0;
}
