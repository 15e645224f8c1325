/* The web console's routes (docs/console.md, decision 0062): GET/HEAD `/` and `/console`
 * redirect to `/console/`, and `/console/{file*}` answers the console's built files from
 * the --console directory. Static files only: no directory listing, names checked
 * lexically (common/webstatic.h) and opened without following a last symlink, regular
 * files alone. The console's own pages carry a strict Content-Security-Policy; the API
 * routes they call are unchanged (same auth, same Origin check). The files are small and
 * read at once from the page cache on the loop (a few per page load, cached for good by
 * the browser when content-hashed). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/buf.h"
#include "common/limits.h"
#include "common/macros.h"
#include "common/webstatic.h"
#include "daemon/api-handlers.h"

#define CONSOLE_PREFIX "/console/"

static void redirect(struct http_request *req)
{
        static const char body[] = "see /console/\n";

        if (http_response_begin(req, 302, "text/plain; charset=utf-8", sizeof(body) - 1,
                                "Location: /console/\r\nCache-Control: no-cache\r\n") == 0) {
                http_response_write(req, body, sizeof(body) - 1, NULL, NULL);
                http_response_end(req);
        }
}

void api_console_root(struct api *a, struct http_request *req, const struct api_args *p)
{
        (void)a;
        (void)p;
        redirect(req);
}

/* The Host header when it is a plain host[:port] (what may go into a CSP source), else
 * NULL. */
static const char *csp_host(struct http_request *req)
{
        const char *h = http_request_header(req, "Host");

        if (!h || !h[0] || strlen(h) > 255)
                return NULL;
        for (const char *c = h; *c; c++)
                if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
                      (*c >= '0' && *c <= '9') || *c == '.' || *c == '-' || *c == ':' ||
                      *c == '[' || *c == ']'))
                        return NULL;
        return h;
}

/* The headers of every console answer: the CSP (scripts only from the console's own
 * files, no inline script, no eval; connections to this origin and its WebSockets; never
 * framed), no sniffing, no referrer, and the caching the file allows. */
static int console_headers(struct http_request *req, const char *name, struct buf *out)
{
        const char *host = csp_host(req);

        return buf_printf(
                out,
                "Content-Security-Policy: default-src 'self'; script-src 'self'; "
                "style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; "
                "font-src 'self' data:; connect-src 'self'%s%s%s%s; "
                "object-src 'none'; base-uri 'none'; form-action 'self'; "
                "frame-ancestors 'none'\r\n"
                "X-Content-Type-Options: nosniff\r\n"
                "Referrer-Policy: no-referrer\r\n"
                "X-Frame-Options: DENY\r\n"
                "Cross-Origin-Opener-Policy: same-origin\r\n"
                "Cache-Control: %s\r\n",
                host ? " ws://" : "", host ? host : "", host ? " wss://" : "", host ? host : "",
                webstatic_immutable(name) ? "public, max-age=31536000, immutable" : "no-cache");
}

void api_console(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *path = http_request_path(req), *dir = a->cfg.console_dir;
        _cleanup_buf_ struct buf headers = BUF_INIT;
        _cleanup_buf_ struct buf body = BUF_INIT;
        _cleanup_close_ int fd = -1;
        char name[WEBSTATIC_PATH_MAX + 1], full[PATH_MAX];
        struct stat st;
        int n;

        (void)p;
        if (strcmp(path, "/console") == 0) {
                redirect(req);
                return;
        }
        if (!dir || !dir[0]) {
                http_respond_code(req, CELLA_E_NOT_FOUND,
                                  "the web console is not built (make console) or cellad runs "
                                  "without --console");
                return;
        }
        n = webstatic_path(path + sizeof(CONSOLE_PREFIX) - 1,
                           strlen(path + sizeof(CONSOLE_PREFIX) - 1), name, sizeof(name));
        if (n < 0 || (size_t)snprintf(full, sizeof(full), "%s/%s", dir, name) >= sizeof(full)) {
                http_respond_code(req, CELLA_E_NOT_FOUND, "no console file %s", path);
                return;
        }
        fd = open(full, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
                http_respond_code(req, CELLA_E_NOT_FOUND, "no console file %s", path);
                return;
        }
        if (st.st_size > CELLA_CONSOLE_FILE_MAX) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "console file %s is over %d bytes",
                                  path, CELLA_CONSOLE_FILE_MAX);
                return;
        }
        if (buf_reserve(&body, (size_t)st.st_size + 1) < 0 ||
            console_headers(req, name, &headers) < 0) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        while (body.len < (size_t)st.st_size) {
                ssize_t r = read(fd, body.data + body.len, (size_t)st.st_size - body.len);

                if (r < 0 && errno == EINTR)
                        continue;
                if (r <= 0) {
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR,
                                          "cannot read console file %s: %s", path,
                                          r < 0 ? strerror(errno) : "it shrank");
                        return;
                }
                body.len += (size_t)r;
        }
        if (http_response_begin(req, 200, webstatic_type(name), (int64_t)body.len, headers.data) ==
            0) {
                http_response_write(req, body.data, body.len, NULL, NULL);
                http_response_end(req);
        }
}
