/* What a number of sandboxes needs of the host's kernel limits (docs/decisions/0060): the
 * sysctls each sandbox takes a share of (its processes, its namespaces, the neighbour entry
 * of its veth) and cellad's own descriptors. The pure part (what n sandboxes need) has no
 * I/O, for unit tests; host_limits_report reads /proc/sys for cellad --check, and
 * host_limits_raise_nofile raises cellad's RLIMIT_NOFILE at start. */
#ifndef CELLA_RUNTIME_HOST_LIMITS_H
#define CELLA_RUNTIME_HOST_LIMITS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* cellad's descriptors: each sandbox's agent link, held while it runs (its end watches
 * PID 1's exit; PID 1's pidfd is taken from it only while a use needs it: decision 0060;
 * a terminal, a preview or a file transfer is an HTTP connection's: the HTTP server caps
 * connections by what the limit leaves) */
#define HOST_LIMITS_FDS_PER_SANDBOX 1
#define HOST_LIMITS_FDS_BASE 256 /* the loop, the registry, logs, the thread pool's work */

struct host_limit {
        const char *name;     /* a sysctl ("kernel.pid_max") */
        uint64_t base;        /* the host's own share, before any sandbox */
        uint64_t per_sandbox; /* what each sandbox adds */
        bool outbound_only;   /* only sandboxes with network "outbound" take it */
        const char *what;     /* what a sandbox takes of it */
};

size_t host_limits_count(void);
const struct host_limit *host_limit_at(size_t i);
/* base + per_sandbox * n, or what cellad's descriptors need (fs.nr_open). */
uint64_t host_limit_need(const struct host_limit *l, unsigned n);
/* cellad's descriptors for n running sandboxes. */
uint64_t host_limits_fds(unsigned n);
/* The sandboxes fds descriptors hold (host_limits_fds' inverse, rounded down). */
uint64_t host_limits_fit(uint64_t fds);

/* A sysctl's value (/proc/sys/...; the largest of several numbers on one line). 0 or
 * -errno. */
int host_limit_read(const char *name, uint64_t *ret);

/* One line per limit to out: its value, what n sandboxes need, "too low" and the sysctl to
 * set where it is below; and the descriptor limit cellad would have. Returns how many are
 * too low. */
int host_limits_report(unsigned n, FILE *out);

/* Raise RLIMIT_NOFILE's soft limit to need, and the hard one too where it is below and the
 * process may (CAP_SYS_RESOURCE, up to fs.nr_open). Returns the soft limit it has then. */
uint64_t host_limits_raise_nofile(uint64_t need);

#endif
