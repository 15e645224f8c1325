/* SESSION payload -> struct session_request; see session.h. Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/request.h"
#include "agent/session.h"
#include "common/json-cleanup.h"
#include "common/limits.h"

void session_request_done(struct session_request *r)
{
        if (!r)
                return;
        context_spec_done(&r->ctx);
        agent_env_free(r->set, r->n_set);
        agent_env_free(r->unset, r->n_unset);
        memset(r, 0, sizeof(*r));
}

/* setenv's env: identifier keys, string (set) or null (unset) values. */
static int decode_setenv(json_t *env, struct session_request *r, struct cella_error *err)
{
        _cleanup_json_ json_t *strings = NULL;
        const char *key;
        json_t *val;
        size_t n;

        if (!json_is_object(env)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'env' must be an object");
                return -EINVAL;
        }
        n = json_object_size(env);
        strings = json_object();
        r->unset = calloc(n ? n : 1, sizeof(char *));
        if (!strings || !r->unset) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return -EINVAL;
        }
        json_object_foreach(env, key, val)
        {
                if (json_is_null(val)) {
                        /* the key is checked by agent_decode_env below via a dummy value */
                        if (json_object_set_new(strings, key, json_string("")) < 0) {
                                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                                return -EINVAL;
                        }
                        r->unset[r->n_unset] = strdup(key);
                        if (!r->unset[r->n_unset]) {
                                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                                return -EINVAL;
                        }
                        r->n_unset++;
                } else if (json_object_set(strings, key, val) < 0) {
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return -EINVAL;
                }
        }
        /* Validates every key (and every set value) the way EXEC's env is validated. */
        if (agent_decode_env(strings, "env", &r->set, &r->n_set, err) < 0)
                return -EINVAL;
        /* Drop the unset keys' placeholders from the set list. */
        for (size_t i = 0; i < r->n_set;) {
                size_t klen = (size_t)(strchr(r->set[i], '=') - r->set[i]);
                bool is_unset = false;

                for (size_t j = 0; j < r->n_unset; j++)
                        if (strlen(r->unset[j]) == klen &&
                            strncmp(r->unset[j], r->set[i], klen) == 0)
                                is_unset = true;
                if (is_unset) {
                        free(r->set[i]);
                        r->set[i] = r->set[--r->n_set];
                } else {
                        i++;
                }
        }
        return 0;
}

/* The body's fields come from wire_session_decode (common/wire.c), which checks their
 * types, the id and the timeout; here they become the session's own strings, the cwd
 * normalised and the env's names checked as they are converted. */
int session_request_decode(json_t *body, struct session_request *r, struct cella_error *err)
{
        struct wire_session x;
        int k;

        memset(r, 0, sizeof(*r));
        if (!json_is_object(body)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "SESSION payload must be an object");
                return -EINVAL;
        }
        k = wire_session_decode(body, &x, err);
        if (k < 0)
                return k;
        r->op = (enum session_op)x.op;
        if (x.id) {
                r->ctx.id = strdup(x.id);
                if (!r->ctx.id) {
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return -ENOMEM;
                }
        }
        switch (r->op) {
        case SESSION_OP_LIST:
        case SESSION_OP_DELETE:
                return 0;
        case SESSION_OP_SETENV:
                return decode_setenv(x.env, r, err);
        case SESSION_OP_CREATE:
                break;
        }
        k = context_spec_decode_place(body, &r->ctx, err);
        if (k < 0)
                return k;
        r->timeout_ms = x.timeout_ms;
        return 0;
}
