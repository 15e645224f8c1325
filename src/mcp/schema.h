/* The JSON Schema subset the tool table uses, and the check of a tool call's arguments
 * against it: type (object, string, integer, number, boolean, array), properties,
 * required, additionalProperties: false, enum, minimum, maximum, minLength, maxLength,
 * items. Keywords outside the subset are ignored (they are for the model to read). */
#ifndef CELLA_MCP_SCHEMA_H
#define CELLA_MCP_SCHEMA_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* Does value match schema? true, or false with the first violation in errmsg
 * ("arguments.port: must be an integer", path rooted at `where`). */
bool schema_check(const json_t *schema, const json_t *value, const char *where, char *errmsg,
                  size_t errlen);

#endif
