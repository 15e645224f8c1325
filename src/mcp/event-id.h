/* The SSE event ids of MCP's Streamable HTTP transport as cellad's /mcp writes them and
 * reads them back from a Last-Event-ID header (docs/mcp.md):
 *
 *   EVENT         an event of the session's standalone (GET) stream
 *   EVENT-STREAM  an event of POST stream STREAM
 *
 * EVENT and STREAM are decimal: digits only (no sign, space or other base), within
 * uint64_t; POST streams are numbered from 1, so STREAM is never 0. Pure, no allocation;
 * fuzzed by tests/fuzz/fuzz-mcp.c. */
#ifndef CELLA_MCP_EVENT_ID_H
#define CELLA_MCP_EVENT_ID_H

#include <stddef.h>
#include <stdint.h>

/* The longest id written, with its NUL: two 20-digit numbers and the dash. */
#define MCP_EVENT_ID_MAX 42

/* Write the id of event in stream (0: the standalone stream) into buf (at least
 * MCP_EVENT_ID_MAX bytes); returns its length. */
size_t mcp_event_id_format(char *buf, size_t size, uint64_t event, uint64_t stream);
/* Parse s: 0 with *ret_event and *ret_stream (0 for the EVENT form) set, or -EINVAL for
 * anything else (empty, a non-digit, a missing number around the dash, a second dash,
 * a number over UINT64_MAX, a STREAM of 0); nothing is written then. */
int mcp_event_id_parse(const char *s, uint64_t *ret_event, uint64_t *ret_stream);

#endif
