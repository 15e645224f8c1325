/* PROC body -> struct proc_request; see proc-request.h. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/proc-request.h"
#include "agent/request.h"
#include "common/limits.h"
#include "common/path.h"

void proc_request_done(struct proc_request *r)
{
        if (!r)
                return;
        free(r->command);
        free(r->id);
        free(r->session);
        free(r->cwd);
        free(r->pattern);
        free(r->path);
        agent_env_free(r->env, r->n_env);
        agent_env_free(r->base_env, r->n_base_env);
        memset(r, 0, sizeof(*r));
}

/* A copy of s into *ret (NULL stays NULL): 0, or -ENOMEM. */
static int copy(const char *s, char **ret)
{
        *ret = s ? strdup(s) : NULL;
        return s && !*ret ? -ENOMEM : 0;
}

/* The body's members come from wire_proc_decode (common/wire.c), which checks their types
 * and bounds and fills in the defaults; here they become the request's own strings, the
 * cwd normalised and the env's names checked as they are converted. */
int proc_request_decode(json_t *body, struct proc_request *r, struct cella_error *err)
{
        struct wire_proc x;
        int k;

        memset(r, 0, sizeof(*r));
        if (!json_is_object(body)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "PROC payload must be an object");
                return -EINVAL;
        }
        k = wire_proc_decode(body, &x, err);
        if (k < 0)
                return k;
        r->op = (enum proc_op)x.op;
        r->signal = x.signal;
        r->regex = x.regex;
        r->port = x.port;
        r->http = x.http;
        r->status_min = x.status_min;
        r->status_max = x.status_max;
        r->interval_ms = x.interval_ms;
        r->timeout_ms = x.timeout_ms;
        if (copy(x.id, &r->id) < 0 || copy(x.command, &r->command) < 0 ||
            copy(x.session, &r->session) < 0 || copy(x.pattern, &r->pattern) < 0 ||
            copy(r->op == PROC_WAIT_PORT && !x.path ? "/" : x.path, &r->path) < 0 ||
            (r->op == PROC_START && !x.cwd && copy(CELLA_WORKSPACE, &r->cwd) < 0)) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -ENOMEM;
        }
        if (r->op != PROC_START)
                return 0;
        if (x.cwd) {
                k = agent_decode_path(json_object_get(body, "cwd"), "cwd", &r->cwd, err);
                if (k < 0)
                        return k;
                r->cwd_given = true;
        }
        k = agent_decode_env(x.env, "env", &r->env, &r->n_env, err);
        if (k < 0)
                return k;
        return agent_decode_env(x.base_env, "baseEnv", &r->base_env, &r->n_base_env, err);
}
