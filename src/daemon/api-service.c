/* Services beneath the handlers (api-service.h): finding a request's sandbox, and
 * reading an agent's ERROR. */
#include <string.h>
#include <strings.h>

#include "common/timeutil.h"
#include "daemon/api-service.h"
#include "daemon/sandbox-directory.h"

static bool is(const struct http_request *req, const char *m)
{
        return strcmp(http_request_method(req), m) == 0;
}

void api_timestamp(char out[32])
{
        time_format_iso(time_now_ms(), out, 32);
}

void api_agent_error(const struct frame *f, struct cella_error *err)
{
        json_t *j = json_loadb((const char *)f->payload, f->len, 0, NULL);
        const char *code = NULL, *msg = NULL;
        int c;

        if (j)
                json_unpack(j, "{s?s, s?s}", "code", &code, "message", &msg);
        c = code ? cella_code_from_name(code) : -1;
        if (c < 0 || c == CELLA_E_OK)
                c = CELLA_E_INTERNAL_ERROR;
        cella_error_set(err, c, "%s", msg ? msg : cella_code_name(c));
        json_decref(j);
}

bool api_wants_sse(const struct http_request *req)
{
        const char *acc = http_request_header(req, "Accept");

        return acc && strstr(acc, "text/event-stream");
}

static bool is_websocket_upgrade(const struct http_request *req)
{
        const char *u = http_request_header(req, "Upgrade");

        return u && strcasecmp(u, "websocket") == 0;
}

struct sandbox *api_sandbox_for(struct api *a, struct http_request *req, const char *name)
{
        struct sandbox_directory *d = sandbox_table_directory(a->cfg.table);
        struct cella_error err = {0};
        struct sandbox *sb = NULL;
        bool created = false;

        /* Only explicit writes create: a GET or HEAD is what any web page can make a browser
         * send (an <img>, a link) without a token or an Origin, so it never makes a
         * sandbox. It still wakes one that exists. A WebSocket upgrade (ws, pty) is the
         * exception: browsers always send it with an Origin, which
         * request_from_allowed_origin() has checked, and a terminal or a relay is a
         * sandbox's first use like an exec (decision 0032). */
        if ((is(req, "GET") || is(req, "HEAD")) && !is_websocket_upgrade(req) &&
            d->ops->get_now(d, name, false, NULL, &sb, NULL, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return NULL;
        }
        if (d->ops->get_now(d, name, true, NULL, &sb, &created, &err) < 0) {
                http_respond_error(req, &err, NULL);
                return NULL;
        }
        if (!sandbox_agent(sb)) {
                http_respond_code(req, CELLA_E_SANDBOX_UNAVAILABLE,
                                  "sandbox '%s' has no agent connection", name);
                return NULL;
        }
        sandbox_touch(sb);
        return sb;
}
