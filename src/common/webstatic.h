/* Static files under a directory, as the web console's routes serve them
 * (daemon/console.c; docs/console.md): the part of a URL path after the route's prefix
 * checked and made a relative file name, and the Content-Type of a file name. Lexical
 * only: nothing here touches the filesystem. */
#ifndef CELLA_WEBSTATIC_H
#define CELLA_WEBSTATIC_H

#include <stdbool.h>
#include <stddef.h>

#define WEBSTATIC_PATH_MAX 255 /* a relative name served (the console's are far shorter) */

/* The relative file name for rel (len bytes, the decoded URL path after the prefix, no
 * query) into out (outsz bytes, NUL-terminated): "" and a name ending in '/' get
 * "index.html" appended. Each '/'-separated segment is 1..WEBSTATIC_PATH_MAX of
 * [A-Za-z0-9._~-] and does not start with '.' (no "..", ".", hidden files, empty
 * segments, absolute names, NUL or any other byte), so the result never leaves the
 * directory it is joined to. Returns its length, or -EINVAL (not a name served here) or
 * -ENAMETOOLONG (over WEBSTATIC_PATH_MAX or outsz). */
int webstatic_path(const char *rel, size_t len, char *out, size_t outsz);

/* The Content-Type of name by its extension (text types with "; charset=utf-8");
 * "application/octet-stream" for one not known. Never NULL. */
const char *webstatic_type(const char *name);

/* Is name one of the bundler's content-hashed assets ("assets/...": its name changes
 * when its bytes do, so a client may keep it for good)? */
bool webstatic_immutable(const char *name);

#endif
