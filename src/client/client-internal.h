/* What libcella's files share beyond the public header. */
#ifndef CELLA_CLIENT_INTERNAL_H
#define CELLA_CLIENT_INTERNAL_H

#include <curl/curl.h>

#include "cella/cella.h"
#include "common/buf.h"

struct cella_client {
        CURL *curl;
        char *base;    /* without trailing slash */
        char *auth;    /* "Authorization: Bearer ..." or NULL */
        char code[64]; /* last API error code */
        char message[512];
        long status;
};

/* Set the client's error code and message (as read by cella_client_error_*). */
void client_set_error(cella_client *c, const char *code, const char *message);
/* An error answer: status and the {code, message} of body. Returns CELLA_ERR_API. */
int client_api_error(cella_client *c, long status, const struct buf *body);
/* base + "/v1/sandboxes/" + escaped name + suffix [+ "?" extra_query]; NULL: out of
 * memory. */
char *client_sandbox_url(cella_client *c, const char *name, const char *suffix,
                         const char *extra_query);

#endif
