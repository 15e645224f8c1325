/* File streams (files.c): downloads, uploads and the one-shot file operations. Entry
 * points for the dispatcher (agent.c). */
#ifndef CELLA_AGENT_FILES_H
#define CELLA_AGENT_FILES_H

struct agent;
struct conn;
struct agent_request;

/* FILE_READ: FILE_INFO, DATA... under the send window, RESULT. */
void file_read_start(struct agent *a, struct conn *c, struct agent_request *req);
/* FILE_WRITE: DATA... and END under the receive window, RESULT. */
void file_write_start(struct agent *a, struct conn *c, struct agent_request *req);
/* FILE_OP: stat, exists, delete, mkdir, move, list; one RESULT or ERROR. */
void file_op_run(struct agent *a, struct conn *c, struct agent_request *req);

#endif
