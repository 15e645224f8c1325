/* Sandbox names: 1-63 chars of [a-z0-9-], not starting or ending with '-', not reserved. */
#ifndef CELLA_NAME_H
#define CELLA_NAME_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

/* Validate name (len bytes, may contain NULs, which are invalid). With normalize, upper
 * case ASCII is lowered into out. out must hold CELLA_NAME_MAX + 1 bytes; written only on
 * success. Returns 0 or -1 with err set to INVALID_SANDBOX_NAME. */
int sandbox_name_check(const char *name, size_t len, bool normalize, char *out,
                       struct cella_error *err);
bool sandbox_name_is_reserved(const char *name);
/* A session or process id: 1..CELLA_ID_MAX of [A-Za-z0-9_.-], not "." or "..". */
bool cella_id_is_valid(const char *s);
/* An image name: a directory name under the images dir, 1..CELLA_NAME_MAX of [a-z0-9._-],
 * not starting with '.' or '-'. The one rule for the API's decoders, the image routes and
 * the sandbox table. */
bool image_name_is_valid(const char *s);

/* A sandbox's slot id, "s<slot>": the name of its cgroup directories and its data
 * directory, which never change while it lives (a warm-pool claim renames nothing). */
int slot_id_format(unsigned slot, char *buf, size_t size);
/* Parse id (len bytes) as "s<slot>" with slot < max, in its one spelling (no leading
 * zeros). Returns 0 with *ret set, or -EINVAL / -ERANGE. */
int slot_id_parse(const char *id, size_t len, unsigned max, unsigned *ret);

#endif
