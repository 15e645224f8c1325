/* Image import: OCI image layout and `docker save` tarballs into IMAGES_DIR/NAME/rootfs
 * (docs/decisions/0023-images.md).
 *
 * The decoders (JSON -> layer list) and the entry path rules are pure and unit-tested;
 * image_import() does the file work and blocks: it runs off the event loop (a libuv work
 * thread), never on it. Everything in the tarball is hostile: paths are checked
 * lexically, then resolved beneath the new rootfs with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS), and the last component is always created with *at() calls that
 * follow no symlink. */
#ifndef CELLA_DAEMON_IMAGE_H
#define CELLA_DAEMON_IMAGE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/error.h"
#include "common/limits.h"

#define IMAGE_DIGEST_LEN 71 /* "sha256:" + 64 hex */

struct image_blob {
        char *path;                        /* in the outer tarball ("blobs/sha256/..."), owned */
        char digest[IMAGE_DIGEST_LEN + 1]; /* expected sha256 of the file, "" if unknown */
};

/* What a manifest says: the config blob and the layers, lowest first. */
struct image_manifest {
        struct image_blob config;
        struct image_blob layers[CELLA_IMAGE_MAX_LAYERS];
        size_t n_layers;
};

/* The image config's parts that are used (docs/api.md "Images"). */
struct image_config {
        char diff_ids[CELLA_IMAGE_MAX_LAYERS][IMAGE_DIGEST_LEN + 1]; /* sha256 of each layer
                                                                      * uncompressed */
        size_t n_diff_ids;
        json_t *env;        /* array of "K=V" strings (new reference) */
        char *working_dir;  /* or NULL */
        json_t *entrypoint; /* array of strings or NULL */
        json_t *cmd;        /* array of strings or NULL */
};

void image_manifest_done(struct image_manifest *m);
void image_config_done(struct image_config *c);

/* "sha256:" + 64 lowercase hex. */
bool image_digest_ok(const char *s);

/* docker save's manifest.json: [{Config, Layers: [...]}] (the first image). Blob digests
 * come from names of the form blobs/sha256/HEX and HEX.json. */
int image_decode_docker_manifest(const char *json, size_t len, struct image_manifest *m,
                                 struct cella_error *err);
/* OCI index.json (or a nested image index): the digest of the manifest to use (the
 * linux/amd64 one when platforms are given, else the first) and whether it is an index
 * itself (*nested). */
int image_decode_oci_index(const char *json, size_t len, char digest[IMAGE_DIGEST_LEN + 1],
                           bool *nested, struct cella_error *err);
/* An OCI (or Docker v2 schema 2) image manifest: config and layer digests. */
int image_decode_oci_manifest(const char *json, size_t len, struct image_manifest *m,
                              struct cella_error *err);
/* The image config: rootfs.diff_ids, config.Env/WorkingDir/Entrypoint/Cmd. */
int image_decode_config(const char *json, size_t len, struct image_config *c,
                        struct cella_error *err);

/* An entry path of a layer or of the outer tarball, made relative and canonical into out
 * ("./a//b/" -> "a/b"; "." and "" -> ""). -EINVAL for an absolute path, a ".."
 * component, a NUL byte or more than CELLA_IMAGE_PATH_DEPTH components; -ENAMETOOLONG
 * beyond outsz. */
int image_entry_path(const char *in, char *out, size_t outsz);

enum image_whiteout { IMAGE_WH_NONE, IMAGE_WH_FILE, IMAGE_WH_OPAQUE, IMAGE_WH_BAD };
/* Classify a canonical entry path's last component: ".wh..wh..opq" (the parent is
 * opaque), ".wh.NAME" (NAME is deleted; *target = NAME's offset in path), other
 * ".wh..wh.*" (AUFS metadata: ignored, reported as NONE with *ignore) and whiteouts of
 * ".", ".." or "" (BAD). */
enum image_whiteout image_whiteout(const char *path, size_t *target, bool *ignore);

/* Debian package names as a build takes them: [a-z0-9][a-z0-9+.-]*, at most
 * CELLA_IMAGE_PACKAGE_MAX bytes. */
bool image_package_ok(const char *s);

/* A build's body: {packages: [...]} or empty; pkgs[] (CELLA_IMAGE_MAX_PACKAGES entries)
 * borrow from *owner (release it with json_decref; NULL for an empty body). 0, or -1 with
 * err (VALIDATION_FAILED), *n 0 and *owner NULL. */
int image_decode_build(const char *body, size_t len, const char **pkgs, size_t *n, json_t **owner,
                       struct cella_error *err);

struct image_import_result {
        uint64_t layers, entries, bytes, skipped_devices;
};

/* Import tarball (a file) as images_dir/name: everything is made in a temporary directory
 * under images_dir, renamed into place last (.complete written last inside it); replace
 * allows an existing image to be swapped. Returns 0, or -1 with err set (INVALID_IMAGE for
 * anything wrong with the tarball, IMAGE_EXISTS, NO_SPACE, INTERNAL_ERROR) and nothing
 * left behind. Blocking. */
int image_import(const char *images_dir, const char *name, const char *tarball, bool replace,
                 struct image_import_result *res, struct cella_error *err);

/* rm -rf of dirfd/name without following any symlink. 0 or -errno. */
int image_remove_tree(int dirfd, const char *name);

#endif
