/* The code interpreter (code.c, decision 0021). Entry points for the dispatcher (agent.c). */
#ifndef CELLA_AGENT_CODE_H
#define CELLA_AGENT_CODE_H

struct agent;
struct conn;
struct agent_request;

/* A CODE frame: run the op and answer on the request's stream. */
void code_request(struct agent *a, struct conn *c, struct agent_request *req);
/* Agent going away: kill every interpreter. */
void code_shutdown(struct agent *a);

#endif
