/* Terminals, one per session (pty.c, decision 0022). Entry points for the dispatcher
 * (agent.c) and for session.c (a deleted session's terminal). A PTY frame on an open
 * terminal stream is a resize, routed through the stream's ops (on_resize). */
#ifndef CELLA_AGENT_PTY_H
#define CELLA_AGENT_PTY_H

struct agent;
struct conn;
struct agent_request;

/* A PTY frame opening a stream: attach it to the session's terminal (started if needed). */
void pty_open(struct agent *a, struct conn *c, struct agent_request *req);
/* End the terminal of session sid (deleted): its shell's process group is killed. */
void pty_kill_session(struct agent *a, const char *sid);
void pty_shutdown(struct agent *a);

#endif
