/* cella mcp: the MCP server (mcp/server.h) on stdio. Messages are one JSON text a line on
 * stdin and stdout (the MCP stdio transport); stdout carries nothing else, logs go to
 * stderr. Lines are read in bounded pieces: a line over CELLA_MCP_MAX_MESSAGE is dropped
 * whole and answered with a parse error, never held. */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cli/cli.h"
#include "common/buf.h"
#include "common/limits.h"
#include "mcp/server.h"

static void send_line(const char *text, size_t len, const json_t *related, void *ud)
{
        /* the server serialises sends: no line is interleaved with another */
        if (cli_write_all(STDOUT_FILENO, text, len) < 0 ||
            cli_write_all(STDOUT_FILENO, "\n", 1) < 0)
                fprintf(stderr, "cella mcp: stdout: %s\n", strerror(errno));
}

static void handle_line(struct mcp_server *s, char *line, size_t len)
{
        while (len > 0 && (line[len - 1] == '\r' || line[len - 1] == ' ' || line[len - 1] == '\t'))
                len--;
        if (len > 0)
                mcp_server_handle(s, line, len);
}

int cmd_mcp(cella_client *c, struct cli_args *a)
{
        struct mcp_server_options o = {.url = cella_client_url(c), .token = a->token};
        struct mcp_transport t = {.send = send_line};
        _cleanup_(buf_freep) struct buf in = {0};
        struct mcp_server *s = NULL;
        bool skipping = false;
        char chunk[64 * 1024];

        if (!cli_has_args(a, 1))
                return cli_bad_args(a);
        if (mcp_server_new(&o, &t, &s) < 0) {
                fputs("cella mcp: out of memory\n", stderr);
                return 1;
        }
        for (;;) {
                ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
                char *nl;

                if (n < 0 && errno == EINTR)
                        continue;
                if (n <= 0)
                        break;
                if (buf_append(&in, chunk, (size_t)n) < 0)
                        break;
                while ((nl = memchr(in.data, '\n', in.len))) {
                        size_t len = (size_t)(nl - in.data);

                        if (!skipping)
                                handle_line(s, in.data, len);
                        skipping = false;
                        buf_consume(&in, len + 1);
                }
                if (in.len > CELLA_MCP_MAX_MESSAGE) {
                        if (!skipping)
                                mcp_server_handle(s, in.data, in.len); /* answers "too large" */
                        skipping = true;
                        buf_reset(&in);
                }
        }
        if (!skipping && in.len > 0)
                handle_line(s, in.data, in.len);
        /* stdin ended: what runs is answered, then the session ends */
        mcp_server_drain(s);
        mcp_server_close(s);
        return 0;
}
