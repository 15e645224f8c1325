/* File watches (watch.c): the WATCH stream's entry point for the dispatcher (agent.c), and
 * the filters saying which paths, relative to the watched directory, produce events (pure;
 * unit tested, tests/unit/test-agent-watch.c). */
#ifndef CELLA_AGENT_WATCH_H
#define CELLA_AGENT_WATCH_H

#include <stdbool.h>
#include <stddef.h>

struct agent;
struct conn;
struct agent_request;

/* A WATCH frame: watch the path, events on the request's stream until CANCEL. */
void watch_start(struct agent *a, struct conn *c, struct agent_request *req);

struct watch_filter {
        char **include; /* fnmatch globs; none: everything */
        size_t n_include;
        char **exclude; /* fnmatch globs; with exclude_given false: .git and node_modules */
        size_t n_exclude;
        bool exclude_given;
};

/* rel (and so everything under it) is excluded. A glob without '/' is matched against each
 * component of rel; one with '/' against rel and each of its leading directories. */
bool watch_filter_excludes(const struct watch_filter *f, const char *rel);
/* rel is not excluded and, with include globs, one of them matches it (a glob without
 * '/' against its last component, one with '/' against the whole of rel). */
bool watch_filter_matches(const struct watch_filter *f, const char *rel);

#endif
