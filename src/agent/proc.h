/* Background processes (proc.c, decision 0012). Entry points for the dispatcher (agent.c)
 * and for session.c (a deleted session's processes). */
#ifndef CELLA_AGENT_PROC_H
#define CELLA_AGENT_PROC_H

struct agent;
struct conn;
struct agent_request;

/* A PROC frame: run the op and answer on the request's stream. */
void proc_request(struct agent *a, struct conn *c, struct agent_request *req);
/* SIGKILL every running process started with session id sid (status killed). */
void proc_kill_session(struct agent *a, const char *sid);
/* Agent going away (after its connection): kill every process, release everything once
 * the loop has closed the handles. */
void proc_shutdown(struct agent *a);

#endif
