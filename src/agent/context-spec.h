/* What a long-lived shell or interpreter of the agent is made with, as the SESSION and
 * CODE requests carry it (docs/protocol.md): its id and the place it runs in. Pure
 * decoding, reached by the agent fuzz target through both requests. */
#ifndef CELLA_AGENT_CONTEXT_SPEC_H
#define CELLA_AGENT_CONTEXT_SPEC_H

#include <jansson.h>
#include <stddef.h>

#include "common/error.h"

/* Strings owned, NUL-free and NUL-terminated. */
struct context_spec {
        char *id;   /* NULL: none given */
        char *cwd;  /* NULL: none given (/workspace) */
        char **env; /* "K=V" of the request */
        size_t n_env;
        char **base_env; /* "K=V": the sandbox's, under env */
        size_t n_base_env;
};

/* Decode the place of body (an object): "cwd" (a path, or null), "env" and "baseEnv"
 * (objects of identifier keys and string values, or null) into c. 0, or the decoders'
 * -errno with err set (VALIDATION_FAILED); what was decoded stays in c for
 * context_spec_done. */
int context_spec_decode_place(json_t *body, struct context_spec *c, struct cella_error *err);
/* Release what c owns and clear it. */
void context_spec_done(struct context_spec *c);

#endif
