/* EXEC streams without a session: `bash -c command` in a process group and cgroup of its
 * own (exec.c). Entry points for the dispatcher (agent.c). */
#ifndef CELLA_AGENT_EXEC_H
#define CELLA_AGENT_EXEC_H

#include <sys/types.h>

struct agent;
struct conn;
struct agent_request;

/* An EXEC frame without a session: start the command on the request's stream. */
void exec_start(struct agent *a, struct conn *c, struct agent_request *req);
/* The reaper: a child that no watch claimed (agent_child_exited) is an EXEC command's. */
void exec_on_child(struct agent *a, pid_t pid, int status);

#endif
