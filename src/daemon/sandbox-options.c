/* Checks of sandbox options (sandbox-options.h). */
#include <string.h>

#include "common/limits.h"
#include "daemon/sandbox-options.h"
#include "daemon/sandbox.h"
#include "runtime/net.h"

json_t *sandbox_options_network_allow(json_t *a, struct cella_error *err)
{
        json_t *out, *v;
        size_t i;

        if (!json_is_array(a) || json_array_size(a) > CELLA_NETWORK_ALLOW_MAX) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "networkAllow must be an array of at most %d strings",
                                CELLA_NETWORK_ALLOW_MAX);
                return NULL;
        }
        out = json_array();
        if (!out) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        json_array_foreach(a, i, v)
        {
                struct net_allow na;
                char text[64];

                if (!json_is_string(v) ||
                    net_allow_parse(json_string_value(v), json_string_length(v), &na) < 0) {
                        json_decref(out);
                        cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                        "networkAllow[%zu] must be an IPv4 \"CIDR\" or "
                                        "\"CIDR:port\" with no host bits, e.g. "
                                        "\"203.0.113.0/24:443\"",
                                        i);
                        return NULL;
                }
                net_allow_format(&na, text, sizeof(text));
                if (json_array_append_new(out, json_string(text)) < 0) {
                        json_decref(out);
                        cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                        return NULL;
                }
        }
        return out;
}

int sandbox_options_check_update(const struct sandbox_options *opts, const char *name,
                                 const char *image, const char *instance_type,
                                 struct cella_error *err)
{
        if (opts->image && strcmp(opts->image, image) != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "sandbox '%s' exists with image '%s'; destroy it to change "
                                       "the image",
                                       name, image);
        if (opts->instance_type && strcmp(opts->instance_type, instance_type) != 0)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "sandbox '%s' exists with instanceType '%s'; destroy it "
                                       "to change the instance type",
                                       name, instance_type);
        return 0;
}
