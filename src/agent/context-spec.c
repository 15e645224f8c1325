/* See context-spec.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/context-spec.h"
#include "agent/request.h"

int context_spec_decode_place(json_t *body, struct context_spec *c, struct cella_error *err)
{
        json_t *cwd = json_object_get(body, "cwd");
        int k;

        if (cwd && !json_is_null(cwd)) {
                k = agent_decode_path(cwd, "cwd", &c->cwd, err);
                if (k < 0)
                        return k;
        }
        k = agent_decode_env(json_object_get(body, "env"), "env", &c->env, &c->n_env, err);
        if (k < 0)
                return k;
        return agent_decode_env(json_object_get(body, "baseEnv"), "baseEnv", &c->base_env,
                                &c->n_base_env, err);
}

void context_spec_done(struct context_spec *c)
{
        free(c->id);
        free(c->cwd);
        agent_env_free(c->env, c->n_env);
        agent_env_free(c->base_env, c->n_base_env);
        memset(c, 0, sizeof(*c));
}
