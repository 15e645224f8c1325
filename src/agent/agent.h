/* cella-init's server side of the agent protocol (docs/protocol.md): what main.c starts.
 *
 * One struct agent per process: the listening socket (fd 3 in a sandbox), at most one
 * active connection, the SIGCHLD reaper and every command still running. agent.c is the
 * dispatcher: it accepts the connection, decodes its frames and routes each through its
 * frame table to a handler (exec.c, files.c, session.c, proc.c, pty.c, code.c, watch.c).
 * The handlers answer through the services beneath (service.h) and never include this
 * header (docs/decisions/0038). */
#ifndef CELLA_AGENT_AGENT_H
#define CELLA_AGENT_AGENT_H

#include <stdbool.h>
#include <uv.h>

struct agent;

struct agent_options {
        int listen_fd;            /* listening unix stream socket (3) */
        bool no_cgroup;           /* never create per-command cgroups */
        const char *run_dir;      /* the agent's own files (sessions/); NULL: /run/cella */
        const char *proc_log_dir; /* background process logs; NULL: /var/log/cella/processes */
};

/* Set up the agent on loop. Returns 0 or -errno. */
int agent_new(uv_loop_t *loop, const struct agent_options *opts, struct agent **ret);
void agent_free(struct agent *a);

#endif
