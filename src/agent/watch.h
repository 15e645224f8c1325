/* File watch filters (watch.c): which paths, relative to the watched directory, produce
 * events. Pure; unit tested (tests/unit/test-watch.c). */
#ifndef CELLA_AGENT_WATCH_H
#define CELLA_AGENT_WATCH_H

#include <stdbool.h>
#include <stddef.h>

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
