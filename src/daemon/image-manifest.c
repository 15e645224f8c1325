/* The image decoders (manifest.json, index.json, OCI manifest, config) and the entry path
 * rules of image import (image.h). Pure: no file system. */
#include <errno.h>
#include <string.h>

#include "common/json-cleanup.h"
#include "common/limits.h"
#include "daemon/image.h"

bool image_digest_ok(const char *s)
{
        if (!s || strncmp(s, "sha256:", 7) != 0 || strlen(s) != IMAGE_DIGEST_LEN)
                return false;
        for (const char *p = s + 7; *p; p++)
                if (!((*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f')))
                        return false;
        return true;
}

void image_manifest_done(struct image_manifest *m)
{
        free(m->config.path);
        for (size_t i = 0; i < m->n_layers; i++)
                free(m->layers[i].path);
        memset(m, 0, sizeof(*m));
}

void image_config_done(struct image_config *c)
{
        json_decref(c->env);
        json_decref(c->entrypoint);
        json_decref(c->cmd);
        free(c->working_dir);
        memset(c, 0, sizeof(*c));
}

int image_entry_path(const char *in, char *out, size_t outsz)
{
        size_t o = 0, depth = 0;
        const char *p = in;

        if (outsz == 0)
                return -ENAMETOOLONG;
        if (in[0] == '/')
                return -EINVAL;
        while (*p) {
                const char *s = p;
                size_t n;

                while (*p && *p != '/')
                        p++;
                n = (size_t)(p - s);
                if (*p == '/')
                        p++;
                if (n == 0 || (n == 1 && s[0] == '.'))
                        continue;
                if (n == 2 && s[0] == '.' && s[1] == '.')
                        return -EINVAL;
                if (++depth > CELLA_IMAGE_PATH_DEPTH)
                        return -EINVAL;
                if (o + (o > 0) + n + 1 > outsz)
                        return -ENAMETOOLONG;
                if (o > 0)
                        out[o++] = '/';
                memcpy(out + o, s, n);
                o += n;
        }
        out[o] = '\0';
        return 0;
}

enum image_whiteout image_whiteout(const char *path, size_t *target, bool *ignore)
{
        const char *slash = strrchr(path, '/');
        const char *base = slash ? slash + 1 : path;
        const char *name;

        *ignore = false;
        if (strncmp(base, ".wh.", 4) != 0)
                return IMAGE_WH_NONE;
        if (strcmp(base, ".wh..wh..opq") == 0)
                return IMAGE_WH_OPAQUE;
        if (strncmp(base, ".wh..wh.", 8) == 0) {
                *ignore = true;
                return IMAGE_WH_NONE;
        }
        name = base + 4;
        if (!*name || strcmp(name, ".") == 0 || strcmp(name, "..") == 0)
                return IMAGE_WH_BAD;
        *target = (size_t)(name - path);
        return IMAGE_WH_FILE;
}

bool image_package_ok(const char *s)
{
        size_t n = strlen(s);

        if (n == 0 || n > CELLA_IMAGE_PACKAGE_MAX)
                return false;
        if (!((s[0] >= 'a' && s[0] <= 'z') || (s[0] >= '0' && s[0] <= '9')))
                return false;
        for (size_t i = 1; i < n; i++)
                if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || s[i] == '+' ||
                      s[i] == '.' || s[i] == '-'))
                        return false;
        return true;
}

static int bad(struct cella_error *err, const char *what)
{
        return cella_error_set(err, CELLA_E_INVALID_IMAGE, "%s", what);
}

/* A blob path named by docker's manifest.json: canonical, relative, and its digest when
 * the name carries it (blobs/sha256/HEX, HEX.json). */
static int blob_from_path(json_t *v, struct image_blob *b, struct cella_error *err)
{
        const char *p = json_string_value(v);
        char canon[CELLA_IMAGE_BLOB_PATH_MAX];
        const char *base;
        char d[IMAGE_DIGEST_LEN + 1];

        if (!p || image_entry_path(p, canon, sizeof(canon)) < 0 || !canon[0])
                return bad(err, "manifest.json names a bad blob path");
        b->path = strdup(canon);
        if (!b->path)
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        base = strrchr(canon, '/');
        base = base ? base + 1 : canon;
        snprintf(d, sizeof(d), "sha256:%.64s", base);
        if ((strncmp(canon, "blobs/sha256/", 13) == 0 && strlen(base) == 64 &&
             image_digest_ok(d)) ||
            (strlen(base) == 69 && strcmp(base + 64, ".json") == 0 && image_digest_ok(d)))
                memcpy(b->digest, d, sizeof(d));
        return 0;
}

/* The blobs of manifest what into m: its config and its layers (an array of 1 to
 * CELLA_IMAGE_MAX_LAYERS), each read by blob; on error m is emptied again. */
static int manifest_blobs(const char *what, json_t *config, json_t *layers,
                          int (*blob)(json_t *, struct image_blob *, struct cella_error *),
                          struct image_manifest *m, struct cella_error *err)
{
        json_t *l;
        size_t i;
        int r;

        if (!json_is_array(layers) || json_array_size(layers) == 0 ||
            json_array_size(layers) > CELLA_IMAGE_MAX_LAYERS)
                return cella_error_set(err, CELLA_E_INVALID_IMAGE, "%s: 1 to %d layers", what,
                                       CELLA_IMAGE_MAX_LAYERS);
        r = blob(config, &m->config, err);
        if (r < 0)
                goto free_manifest;
        json_array_foreach(layers, i, l)
        {
                r = blob(l, &m->layers[i], err);
                if (r < 0)
                        goto free_manifest;
                m->n_layers = i + 1;
        }
        return 0;
free_manifest:
        image_manifest_done(m);
        return r;
}

/* Parse what (a file of the image) into *ret. Returns 0 or -EINVAL with *err set. */
static int load(const char *json, size_t len, const char *what, json_t **ret,
                struct cella_error *err)
{
        json_error_t je;

        if (len > CELLA_IMAGE_META_MAX)
                return cella_error_set(err, CELLA_E_INVALID_IMAGE, "%s is too large", what);
        *ret = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
        if (!*ret)
                return cella_error_set(err, CELLA_E_INVALID_IMAGE, "%s is not JSON: %s", what,
                                       je.text);
        return 0;
}

int image_decode_docker_manifest(const char *json, size_t len, struct image_manifest *m,
                                 struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_t *img, *layers;
        int r;

        memset(m, 0, sizeof(*m));
        r = load(json, len, "manifest.json", &j, err);
        if (r < 0)
                return r;
        img = json_array_get(j, 0);
        layers = json_object_get(img, "Layers");
        if (!json_is_object(img) || !json_is_array(layers))
                return bad(err, "manifest.json: expected [{Config, Layers}]");
        return manifest_blobs("manifest.json", json_object_get(img, "Config"), layers,
                              blob_from_path, m, err);
}

static bool media_is_index(const char *mt)
{
        return mt && (strcmp(mt, "application/vnd.oci.image.index.v1+json") == 0 ||
                      strcmp(mt, "application/vnd.docker.distribution.manifest.list.v2+json") == 0);
}

int image_decode_oci_index(const char *json, size_t len, char digest[IMAGE_DIGEST_LEN + 1],
                           bool *nested, struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_t *ms, *m, *pick = NULL;
        size_t i;
        int r;

        r = load(json, len, "index.json", &j, err);
        if (r < 0)
                return r;
        ms = json_object_get(j, "manifests");
        if (!json_is_array(ms) || json_array_size(ms) == 0)
                return bad(err, "index.json: no manifests");
        json_array_foreach(ms, i, m)
        {
                json_t *plat = json_object_get(m, "platform");
                const char *os = json_string_value(json_object_get(plat, "os"));
                const char *arch = json_string_value(json_object_get(plat, "architecture"));

                if (!json_is_object(m))
                        continue;
                if (!pick)
                        pick = m;
                if (os && arch && strcmp(os, "linux") == 0 && strcmp(arch, "amd64") == 0) {
                        pick = m;
                        break;
                }
        }
        if (!pick || !image_digest_ok(json_string_value(json_object_get(pick, "digest"))))
                return bad(err, "index.json: a manifest without a sha256 digest");
        memcpy(digest, json_string_value(json_object_get(pick, "digest")), IMAGE_DIGEST_LEN + 1);
        *nested = media_is_index(json_string_value(json_object_get(pick, "mediaType")));
        return 0;
}

static int blob_from_descriptor(json_t *d, struct image_blob *b, struct cella_error *err)
{
        const char *dg = json_string_value(json_object_get(d, "digest"));

        if (!json_is_object(d) || !image_digest_ok(dg))
                return bad(err, "manifest: a descriptor without a sha256 digest");
        memcpy(b->digest, dg, IMAGE_DIGEST_LEN + 1);
        if (asprintf(&b->path, "blobs/sha256/%s", dg + 7) < 0) {
                b->path = NULL;
                return cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
        }
        return 0;
}

int image_decode_oci_manifest(const char *json, size_t len, struct image_manifest *m,
                              struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_t *layers, *l;
        size_t i;
        int r;

        memset(m, 0, sizeof(*m));
        r = load(json, len, "image manifest", &j, err);
        if (r < 0)
                return r;
        layers = json_object_get(j, "layers");
        json_array_foreach(layers, i, l)
        {
                const char *mt = json_string_value(json_object_get(l, "mediaType"));

                /* Layers are tar archives (maybe compressed); foreign or encrypted ones
                 * are not something we can apply. */
                if (mt && !strstr(mt, "tar"))
                        return cella_error_set(err, CELLA_E_INVALID_IMAGE,
                                               "image manifest: unsupported layer type %.100s", mt);
        }
        return manifest_blobs("image manifest", json_object_get(j, "config"), layers,
                              blob_from_descriptor, m, err);
}

static json_t *string_array(json_t *v)
{
        json_t *x;
        size_t i;

        if (!json_is_array(v))
                return NULL;
        json_array_foreach(v, i, x) if (!json_is_string(x)) return NULL;
        return json_incref(v);
}

int image_decode_config(const char *json, size_t len, struct image_config *c,
                        struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_t *ids, *id, *cfg, *env, *wd;
        size_t i;
        int r;

        memset(c, 0, sizeof(*c));
        r = load(json, len, "image config", &j, err);
        if (r < 0)
                return r;
        if (!json_is_object(j))
                return bad(err, "image config is not an object");
        ids = json_object_get(json_object_get(j, "rootfs"), "diff_ids");
        if (ids && (!json_is_array(ids) || json_array_size(ids) > CELLA_IMAGE_MAX_LAYERS))
                return bad(err, "image config: bad rootfs.diff_ids");
        json_array_foreach(ids, i, id)
        {
                if (!image_digest_ok(json_string_value(id))) {
                        r = bad(err, "image config: a diff_id is not a sha256 digest");
                        goto free_config;
                }
                memcpy(c->diff_ids[i], json_string_value(id), IMAGE_DIGEST_LEN + 1);
                c->n_diff_ids = i + 1;
        }
        cfg = json_object_get(j, "config");
        env = json_object_get(cfg, "Env");
        c->env = env && !json_is_null(env) ? string_array(env) : json_array();
        if (!c->env) {
                r = bad(err, "image config: Env is not an array of strings");
                goto free_config;
        }
        wd = json_object_get(cfg, "WorkingDir");
        if (json_is_string(wd) && json_string_length(wd) > 0 &&
            json_string_length(wd) < CELLA_PATH_MAX && json_string_value(wd)[0] == '/')
                c->working_dir = strdup(json_string_value(wd));
        c->entrypoint = string_array(json_object_get(cfg, "Entrypoint"));
        c->cmd = string_array(json_object_get(cfg, "Cmd"));
        return 0;
free_config:
        image_config_done(c);
        return r;
}

int image_decode_build(const char *body, size_t len, const char **pkgs, size_t *n, json_t **owner,
                       struct cella_error *err)
{
        _cleanup_json_ json_t *j = NULL;
        json_t *arr, *p;
        const char *k;
        size_t i;

        *n = 0;
        *owner = NULL;
        if (len == 0)
                return 0;
        j = json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL);
        if (!json_is_object(j))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "body must be a JSON object {packages: [...]}");
        json_object_foreach(j, k, p) if (strcmp(k, "packages") != 0) return cella_error_set(
                err, CELLA_E_VALIDATION_FAILED, "unknown field '%.64s'", k);
        arr = json_object_get(j, "packages");
        if (arr && (!json_is_array(arr) || json_array_size(arr) > CELLA_IMAGE_MAX_PACKAGES))
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "packages must be an array of at most %d package names",
                                       CELLA_IMAGE_MAX_PACKAGES);
        json_array_foreach(arr, i, p)
        {
                if (!json_is_string(p) || !image_package_ok(json_string_value(p)))
                        return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                               "packages[%zu]: not a Debian package name "
                                               "([a-z0-9][a-z0-9+.-]*, at most %d bytes)",
                                               i, CELLA_IMAGE_PACKAGE_MAX);
                pkgs[i] = json_string_value(p);
        }
        *n = json_array_size(arr);
        *owner = TAKE_PTR(j);
        return 0;
}
