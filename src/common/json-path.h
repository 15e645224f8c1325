/* A path (or file name) in a JSON object, as docs/api.md says of names that are not UTF-8.
 *
 * A name is bytes and JSON text is UTF-8. A path that is UTF-8 is set as text under key; any
 * other is set under key for display (each invalid byte as U+FFFD) and, exactly, as base64
 * under key + "Base64". cellad's answers, the agent's FILE_INFO and watch events, and the
 * agent protocol's requests (the agent reads "pathBase64" before "path") all use it. */
#ifndef CELLA_JSON_PATH_H
#define CELLA_JSON_PATH_H

#include <jansson.h>

/* Set key (at most 24 bytes) to path in j. Returns j, or NULL (j released) when j is NULL
 * or out of memory. */
json_t *json_set_path(json_t *j, const char *key, const char *path);

#endif
