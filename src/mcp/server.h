/* cella's MCP server: one session of the Model Context Protocol over any transport.
 *
 * The transport hands every message it reads to mcp_server_handle() (one thread: the
 * reader) and gets every message the server writes through its send callback, already
 * serialised (one call at a time, any thread). Requests that talk to cellad (tools/call and
 * the resources requests) run on worker threads with a libcella client of their own, so the reader
 * keeps reading and sees notifications/cancelled while a command runs. Tools and
 * resources are in mcp/tools*.c and mcp/resources.c; docs/mcp.md lists them. */
#ifndef CELLA_MCP_SERVER_H
#define CELLA_MCP_SERVER_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

struct mcp_server;

/* The protocol revisions spoken, newest first: the current one and the previous one. */
extern const char *const mcp_protocol_versions[];
#define MCP_PROTOCOL_LATEST "2025-11-25"

struct mcp_transport {
        /* One message: compact JSON text, no newline, borrowed for the call. related is
         * the id of the request the message belongs to (its response, or a progress
         * notification of it), NULL when it belongs to none (a resource update). */
        void (*send)(const char *text, size_t len, const json_t *related, void *userdata);
        void *userdata;
};

struct mcp_server_options {
        const char *url;   /* cellad's base URL; NULL: $CELLA_URL or the default */
        const char *token; /* bearer token; NULL: $CELLA_TOKEN */
};

/* 0 and *ret, or -ENOMEM. The options' strings are copied. */
int mcp_server_new(const struct mcp_server_options *o, const struct mcp_transport *t,
                   struct mcp_server **ret);
/* One message as read (len bytes). Answers protocol faults and quick requests at once;
 * tool calls and resource requests are answered from their worker thread later. */
void mcp_server_handle(struct mcp_server *s, const char *text, size_t len);
/* The protocol revision initialize settled on, or NULL before it. */
const char *mcp_server_protocol_version(struct mcp_server *s);
/* Running tool calls: 0 once every answer has been sent. */
unsigned mcp_server_inflight(struct mcp_server *s);
/* Wait until every running call has been answered (a transport whose input ended). */
void mcp_server_drain(struct mcp_server *s);
/* End the session: running calls are cancelled (their commands killed), nothing is sent
 * any more, and the caller's reference is dropped. Waits for the calls to end; resource
 * watches end on their next event and free what is left then. */
void mcp_server_close(struct mcp_server *s);

#endif
