/* The options of a sandbox as a request gives them (PUT /v1/sandboxes/{id}): what can be
 * checked from the request alone is checked where it is decoded (api-decode.c calls these),
 * so that the table (sandbox.h) receives options in their canonical form and only checks
 * what needs the table: the sandbox that already exists, the host's capabilities. */
#ifndef CELLA_DAEMON_SANDBOX_OPTIONS_H
#define CELLA_DAEMON_SANDBOX_OPTIONS_H

#include <jansson.h>

#include "common/error.h"

struct sandbox_options;

/* networkAllow: an array of at most CELLA_NETWORK_ALLOW_MAX IPv4 "CIDR[:port]" strings.
 * Returns the canonical array (net_allow_format of each entry; new reference), or NULL
 * with *err (VALIDATION_FAILED, or INTERNAL_ERROR when out of memory). */
json_t *sandbox_options_network_allow(json_t *a, struct cella_error *err);

/* What PUT asks of the existing sandbox name (of image and instance_type): changing the
 * image or the instance type needs a new sandbox. (Its network mode is compared by the
 * table, after asking the host whether the mode asked for is there at all.) 0, or -1 with
 * *err (VALIDATION_FAILED). */
int sandbox_options_check_update(const struct sandbox_options *opts, const char *name,
                                 const char *image, const char *instance_type,
                                 struct cella_error *err);

#endif
