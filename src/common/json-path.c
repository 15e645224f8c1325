/* A path in a JSON object; see json-path.h. */
#include "common/json-path.h"

#include <stdio.h>
#include <string.h>

#include "common/base64.h"
#include "common/buf.h"
#include "common/utf8.h"

json_t *json_set_path(json_t *j, const char *key, const char *path)
{
        _cleanup_buf_ struct buf shown = BUF_INIT, b64 = BUF_INIT;
        size_t len = strlen(path);
        char bkey[32];

        if (!j)
                return NULL;
        if (utf8_is_valid(path, len)) {
                if (json_object_set_new(j, key, json_string(path)) < 0)
                        goto oom;
                return j;
        }
        snprintf(bkey, sizeof(bkey), "%sBase64", key);
        if (utf8_sanitize(&shown, path, len) < 0 || base64_encode(&b64, path, len) < 0 ||
            json_object_set_new(j, key, json_stringn(shown.data, shown.len)) < 0 ||
            json_object_set_new(j, bkey, json_stringn(b64.data, b64.len)) < 0)
                goto oom;
        return j;
oom:
        json_decref(j);
        return NULL;
}
