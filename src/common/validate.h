/* The rules for the names and strings a request carries, each in exactly one place. The
 * daemon's decoders (src/daemon/api-decode.c) apply them to what a client sends; the
 * agent's decoders apply the same functions as bounds on what cellad sends, so the two
 * sides of the agent socket cannot drift apart.
 *
 * The other rules of this kind live next to the names they govern and are the only ones:
 * sandbox names, session/process/context ids (cella_id_is_valid) and image names
 * (image_name_is_valid) in common/name.h; sandbox paths in common/path.h; git URLs and
 * branches in common/git-url.h. */
#ifndef CELLA_VALIDATE_H
#define CELLA_VALIDATE_H

#include <stdbool.h>
#include <stddef.h>

/* An environment variable name as a POSIX shell accepts it in an assignment:
 * [A-Za-z_][A-Za-z0-9_]*, 1..CELLA_ENV_NAME_MAX bytes (NUL-terminated s). */
bool env_name_is_valid(const char *s);

/* A command for the shell: 1..CELLA_EXEC_MAX_COMMAND bytes (len), none of them NUL. */
bool command_is_valid(const char *s, size_t len);

/* The path of an HTTP request a port check sends (waitPort): '/' then printable ASCII
 * without spaces, at most CELLA_PROC_MAX_HTTP_PATH bytes (len), so that it goes on the
 * request line as it is. */
bool http_path_is_valid(const char *s, size_t len);

#endif
