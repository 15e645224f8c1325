/* Scope-bound jansson references: `_cleanup_json_ json_t *j = json_object();` drops the
 * reference when j goes out of scope (jansson's json_decrefp; NULL is fine); TAKE_PTR(j)
 * hands it on. */
#ifndef CELLA_JSON_CLEANUP_H
#define CELLA_JSON_CLEANUP_H

#include <jansson.h>

#include "common/macros.h"

#define _cleanup_json_ _cleanup_(json_decrefp)

#endif
