/* The API's route table and its matcher (docs/api.md; docs/architecture.md "The daemon's
 * API"). Part of the dispatcher: api.c walks the table for every request that is not a
 * preview one; no handler includes this.
 *
 * A route is its methods, a path pattern and its handler. A pattern is segments between
 * '/': a literal, "{name}" (one segment, possibly empty) or, last, "{name*}" (the rest of
 * the path, '/' included, possibly empty). The path matched is the decoded one
 * (http_request_path): "%2F" in a name is a '/' by then, as it always was. */
#ifndef CELLA_DAEMON_API_ROUTES_H
#define CELLA_DAEMON_API_ROUTES_H

#include <stddef.h>

#include "daemon/api-service.h"

/* Answered before the cross-origin and bearer-token checks (GET /v1/health). */
#define API_ROUTE_PUBLIC 1u
/* {id} is passed as sent (p->raw): the handler checks it once it has the body's
 * normalizeId (PUT /v1/sandboxes/{id}). */
#define API_ROUTE_RAW_ID 2u
/* Only the admin (the --token, loopback-only mode) may call it; a tenant's key gets 403
 * PERMISSION_DENIED (decision 0053). */
#define API_ROUTE_ADMIN 4u
/* A browser's WebSocket may carry its bearer token in Sec-WebSocket-Protocol
 * ("cella.bearer.<base64url>", common/ws-key.h) when it sends no Authorization (GET
 * .../pty; never a route whose request reaches a sandbox's own server). */
#define API_ROUTE_WS_BEARER 8u

struct api_route {
        const char *methods; /* space-separated: "GET HEAD" */
        const char *pattern;
        api_handler handler;
        unsigned flags;
};

#define API_ROUTE_MAX_PARAMS 4

struct api_capture {
        const char *name; /* the pattern's "{name}" without braces and '*' (name_len bytes) */
        size_t name_len;
        const char *value; /* inside the path (len bytes; a "{name*}" one ends the path) */
        size_t len;
};

struct api_match {
        int status; /* 200: route matched; 405: the path is a route's but not the method; 404 */
        const struct api_route *route; /* 200: the one; 405: the first route of that path;
                                          404: NULL */
        /* The parameters captured: of the route (200, 405), or on 404 of the route whose
         * pattern matched the most leading segments of the path (the dispatcher checks
         * them before it answers 404, as a parameter is checked before what follows it). */
        size_t n;
        struct api_capture cap[API_ROUTE_MAX_PARAMS];
};

extern const struct api_route api_routes[];
extern const size_t api_routes_count;

/* Match method and path (NUL-terminated) against table (n routes). Never fails. */
void api_route_match(const struct api_route *table, size_t n, const char *method, const char *path,
                     struct api_match *m);
/* The capture named name in m, or NULL. */
const struct api_capture *api_match_param(const struct api_match *m, const char *name);

#endif
