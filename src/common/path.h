/* Paths inside a sandbox as given through the API.
 *
 * A path is resolved by the agent inside the sandbox's own root, so it cannot escape the
 * sandbox whatever it says; this module only gives it a canonical, lexical form so that
 * errors and listings are predictable: relative paths are taken from /workspace, '.' and
 * empty components are dropped, '..' pops (and stops at '/'). */
#ifndef CELLA_PATH_H
#define CELLA_PATH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

#define CELLA_WORKSPACE "/workspace"

/* Normalize path (len bytes) into out (outsz bytes). Returns the length of the result, or
 * -1 with err set: VALIDATION_FAILED for empty path or NUL byte, NAME_TOO_LONG beyond
 * CELLA_PATH_MAX or outsz. */
int sandbox_path_normalize(const char *path, size_t len, char *out, size_t outsz,
                           struct cella_error *err);

/* A path as a client sends it in a query string: UTF-8 text, or with base64 the path's raw
 * bytes in base64 (standard or URL-safe alphabet, padding optional; a space counts as '+',
 * which a query string decodes to a space). Normalized into out as
 * sandbox_path_normalize(). Returns its length, or -1 with err set: VALIDATION_FAILED for
 * text that is not UTF-8, bad base64 and what sandbox_path_normalize() refuses (a NUL
 * byte), NAME_TOO_LONG. */
int sandbox_path_decode(const char *s, size_t len, bool base64, char *out, size_t outsz,
                        struct cella_error *err);

#endif
