/* SESSION payload -> struct session_request; see session.h. Pure: no I/O. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agent/request.h"
#include "agent/session.h"
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

static int decode_id(json_t *body, bool required, char **ret, struct cella_error *err)
{
        json_t *v = json_object_get(body, "id");
        int k;

        if (!v || json_is_null(v)) {
                if (required) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'id' is required");
                        return -EINVAL;
                }
                return 0;
        }
        k = agent_decode_string(v, "id", CELLA_ID_MAX, true, ret, err);
        if (k < 0)
                return k;
        if (!agent_id_is_valid(*ret)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "session id must be 1..%d of [A-Za-z0-9_.-]", CELLA_ID_MAX);
                return -EINVAL;
        }
        return 0;
}

/* setenv's env: identifier keys, string (set) or null (unset) values. */
static int decode_setenv(json_t *env, struct session_request *r, struct cella_error *err)
{
        _cleanup_(json_decrefp) json_t *strings = NULL;
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

int session_request_decode(json_t *body, struct session_request *r, struct cella_error *err)
{
        static const struct {
                const char *name;
                enum session_op op;
        } ops[] = {
                {"create", SESSION_OP_CREATE},
                {"delete", SESSION_OP_DELETE},
                {"list", SESSION_OP_LIST},
                {"setenv", SESSION_OP_SETENV},
        };
        json_t *v;
        size_t i;
        int k;

        memset(r, 0, sizeof(*r));
        if (!json_is_object(body)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "SESSION payload must be an object");
                return -EINVAL;
        }
        v = json_object_get(body, "op");
        if (!json_is_string(v)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "'op' must be a string");
                return -EINVAL;
        }
        for (i = 0; i < ARRAY_SIZE(ops); i++)
                if (strcmp(json_string_value(v), ops[i].name) == 0)
                        break;
        if (i == ARRAY_SIZE(ops)) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED, "unknown session operation '%.32s'",
                                json_string_value(v));
                return -EINVAL;
        }
        r->op = ops[i].op;
        switch (r->op) {
        case SESSION_OP_LIST:
                return 0;
        case SESSION_OP_DELETE:
                return decode_id(body, true, &r->ctx.id, err);
        case SESSION_OP_SETENV:
                k = decode_id(body, false, &r->ctx.id, err);
                if (k < 0)
                        return k;
                return decode_setenv(json_object_get(body, "env"), r, err);
        case SESSION_OP_CREATE:
                break;
        }
        k = decode_id(body, false, &r->ctx.id, err);
        if (k < 0)
                return k;
        k = context_spec_decode_place(body, &r->ctx, err);
        if (k < 0)
                return k;
        v = json_object_get(body, "commandTimeoutMs");
        if (v && !json_is_null(v)) {
                if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                    json_integer_value(v) > CELLA_EXEC_MAX_TIMEOUT_MS) {
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "'commandTimeoutMs' must be an integer in 0..%lld",
                                        (long long)CELLA_EXEC_MAX_TIMEOUT_MS);
                        return -EINVAL;
                }
                r->timeout_ms = json_integer_value(v);
        }
        return 0;
}
