/* What the runtime's tests on real containers share (test-runtime-live.c and
 * test-runtime-faults.c): the host checks that make them skip, a runtime on a cgroup name
 * of the test's own, the temporary directory their sandboxes live in, and the cleanup of
 * all of it, also after an interrupted earlier run. Each test has its own cgroup name,
 * sandbox ids and uid slots, so the two run at once and beside a daemon. */
#ifndef CELLA_TESTS_RUNTIME_FIXTURE_H
#define CELLA_TESTS_RUNTIME_FIXTURE_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/cgroup.h"
#include "runtime/container.h"

#define RUNTIME_FIXTURE_ROOTFS "/var/lib/cella/images/default/rootfs"

struct runtime_fixture {
        /* the test's */
        const char *what;        /* "runtime live tests": named in the skip messages */
        const char *cgroup_name; /* the runtime's cgroup name */
        const char *const *ids;  /* every sandbox id the tests start */
        size_t n_ids;
        char tmpdir[64]; /* a mkdtemp template, the directory once made */
        /* the fixture's, from setup on */
        const char *probe;  /* PID 1 of the containers: $CELLA_TEST_PROBE or the build's */
        struct runtime *rt; /* NULL: the host cannot run the tests (skipped) */
        struct cgroup_layout layout;
};

/* The checks (root, the default image, a static probe: the image has none of the build's
 * shared libraries), then the runtime, the host's cgroup layout, the sandboxes of f->ids
 * an interrupted run left destroyed, and the temporary directory. 0 (f->rt NULL when
 * skipped, with a SKIP message), or -1. */
int runtime_fixture_setup(struct runtime_fixture *f);
/* The sandboxes of f->ids destroyed (those still running are the test's to destroy
 * first, with their container), the temporary directory and the cgroup parents removed,
 * the runtime freed. */
void runtime_fixture_teardown(struct runtime_fixture *f);
/* Is a cgroup directory of sandbox id left (v2, or any v1 hierarchy)? */
bool runtime_fixture_cgroup_left(const struct runtime_fixture *f, const char *id);

#endif
