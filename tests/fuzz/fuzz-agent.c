/* Fuzz the agent's request decoder (src/agent/request.h) as the agent meets it: a byte
 * stream from the daemon's socket, split into frames by frame_decode(), each frame fed to
 * agent_request_decode() and released with agent_request_done().
 *
 * Invariants: *ret is initialised whatever the input (it starts as garbage here, and done()
 * must still be safe); failure is -EPROTO or -EINVAL with err set (or -ENOMEM); success
 * echoes the frame's type and stream, a stream-opening request is never on stream 0 and a
 * PING always is, and the fields the type uses are well-formed: strings NUL-free, paths
 * absolute and normalised, env entries "KEY=value" with a non-empty key within
 * CELLA_EXEC_MAX_ENV, a non-negative timeout, a mode of -1 or permission bits, WINDOW
 * credit as on the wire, DATA/PING bytes borrowed from the frame. A CODE body goes through
 * code_request_decode() too, and every DATA payload through code_event_decode() (the
 * decoder of a runner's event lines, hostile input of the same kind). */
#include <errno.h>
#include <string.h>

#include "agent/code-request.h"
#include "agent/proc-request.h"
#include "agent/request.h"
#include "agent/session.h"
#include "common/limits.h"
#include "common/path.h"
#include "common/proto.h"
#include "fuzz.h"

static void check_path(const char *p)
{
        char again[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        size_t n;

        FUZZ_CHECK(p != NULL);
        n = strnlen(p, CELLA_PATH_MAX + 1);
        FUZZ_CHECK(n >= 1 && n <= CELLA_PATH_MAX && p[0] == '/');
        FUZZ_CHECK(sandbox_path_normalize(p, n, again, sizeof(again), &err) == (int)n);
        FUZZ_CHECK(strcmp(again, p) == 0);
}

static void check_success(const struct frame *f, const struct agent_request *r)
{
        FUZZ_CHECK(r->type == f->type);
        FUZZ_CHECK(r->stream == f->stream);
        if (agent_request_opens_stream(r->type))
                FUZZ_CHECK(r->stream != 0);

        switch (r->type) {
        case FRAME_EXEC:
                FUZZ_CHECK(r->command != NULL);
                FUZZ_CHECK(strlen(r->command) <= CELLA_EXEC_MAX_COMMAND);
                if (r->cwd)
                        check_path(r->cwd);
                FUZZ_CHECK(r->n_env <= CELLA_EXEC_MAX_ENV);
                FUZZ_CHECK(r->n_env == 0 || r->env != NULL);
                for (size_t i = 0; i < r->n_env; i++) {
                        const char *eq = strchr(r->env[i], '=');
                        FUZZ_CHECK(eq != NULL && eq != r->env[i]);
                }
                FUZZ_CHECK(r->timeout_ms >= 0);
                FUZZ_CHECK(r->session == NULL || agent_id_is_valid(r->session));
                for (size_t i = 0; i < r->n_base_env; i++)
                        FUZZ_CHECK(strchr(r->base_env[i], '=') > r->base_env[i]);
                break;
        case FRAME_FILE_READ:
                check_path(r->path);
                break;
        case FRAME_FILE_WRITE:
                check_path(r->path);
                FUZZ_CHECK(r->mode == -1 || (r->mode >= 0 && r->mode <= 07777));
                break;
        case FRAME_FILE_OP:
                FUZZ_CHECK(r->op >= AGENT_OP_STAT && r->op <= AGENT_OP_LIST);
                check_path(r->path);
                if (r->op == AGENT_OP_MOVE)
                        check_path(r->to);
                break;
        case FRAME_SESSION: {
                /* The module's own decoder runs on the body, as session_request() does. */
                struct session_request sr;
                struct cella_error err = {0};
                int k;

                FUZZ_CHECK(json_is_object(r->body));
                k = session_request_decode(r->body, &sr, &err);
                if (k == 0) {
                        FUZZ_CHECK(sr.op >= SESSION_OP_CREATE && sr.op <= SESSION_OP_SETENV);
                        FUZZ_CHECK(sr.ctx.id == NULL || agent_id_is_valid(sr.ctx.id));
                        FUZZ_CHECK(sr.op != SESSION_OP_DELETE || sr.ctx.id != NULL);
                        if (sr.ctx.cwd)
                                check_path(sr.ctx.cwd);
                        FUZZ_CHECK(sr.timeout_ms >= 0);
                        for (size_t i = 0; i < sr.n_set; i++)
                                FUZZ_CHECK(strchr(sr.set[i], '=') > sr.set[i]);
                        for (size_t i = 0; i < sr.n_unset; i++)
                                FUZZ_CHECK(strchr(sr.unset[i], '=') == NULL);
                } else {
                        FUZZ_CHECK(k == -EINVAL && cella_error_is_set(&err));
                }
                session_request_done(&sr);
                break;
        }
        case FRAME_WINDOW: {
                uint32_t credit = 0;
                FUZZ_CHECK(frame_window_unpack(f, &credit) == 0 && credit == r->credit);
                break;
        }
        case FRAME_PING:
                FUZZ_CHECK(r->stream == 0);
                /* fall through */
        case FRAME_DATA:
                FUZZ_CHECK(r->len == f->len);
                FUZZ_CHECK(r->len == 0 || r->data == f->payload);
                break;
        case FRAME_PROC:
                FUZZ_CHECK(json_is_object(r->body));
                break;
        case FRAME_PTY:
                FUZZ_CHECK(r->session != NULL && agent_id_is_valid(r->session));
                FUZZ_CHECK(r->cols >= 1 && r->cols <= CELLA_PTY_MAX_DIM);
                FUZZ_CHECK(r->rows >= 1 && r->rows <= CELLA_PTY_MAX_DIM);
                for (size_t i = 0; i < r->n_base_env; i++)
                        FUZZ_CHECK(strchr(r->base_env[i], '=') > r->base_env[i]);
                break;
        default:
                break;
        }
}

/* The second step for PROC: the operation's own decoder (src/agent/proc-request.h). */
static void check_proc(json_t *body)
{
        struct proc_request p;
        struct cella_error err = {0};
        int r;

        memset(&p, 0xa5, sizeof(p));
        r = proc_request_decode(body, &p, &err);
        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL && cella_error_is_set(&err));
                proc_request_done(&p);
                return;
        }
        FUZZ_CHECK(!cella_error_is_set(&err));
        FUZZ_CHECK(p.op >= PROC_START && p.op <= PROC_WAIT_EXIT);
        if (p.op == PROC_START) {
                FUZZ_CHECK(p.command && p.command[0]);
                check_path(p.cwd);
                FUZZ_CHECK(!p.id ||
                           (agent_id_is_valid(p.id) && strspn(p.id, "0123456789") != strlen(p.id)));
                FUZZ_CHECK(!p.session || agent_id_is_valid(p.session));
                FUZZ_CHECK(p.n_env <= CELLA_EXEC_MAX_ENV && p.n_base_env <= CELLA_EXEC_MAX_ENV);
        } else if (p.op != PROC_LIST && p.op != PROC_KILLALL) {
                FUZZ_CHECK(p.id && (agent_id_is_valid(p.id)));
        }
        FUZZ_CHECK(p.signal >= 0 && p.signal <= 64);
        FUZZ_CHECK(p.timeout_ms >= 0 && p.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
        if (p.op == PROC_WAIT_LOG)
                FUZZ_CHECK(p.pattern && p.pattern[0] &&
                           strlen(p.pattern) <= CELLA_PROC_MAX_PATTERN);
        if (p.op == PROC_WAIT_PORT) {
                FUZZ_CHECK(p.port >= 1 && p.port <= 65535);
                FUZZ_CHECK(p.path && p.path[0] == '/');
                FUZZ_CHECK(p.status_min >= 100 && p.status_min <= p.status_max &&
                           p.status_max <= 599);
                FUZZ_CHECK(p.interval_ms >= CELLA_PROC_MIN_INTERVAL_MS &&
                           p.interval_ms <= CELLA_PROC_MAX_INTERVAL_MS);
        }
        proc_request_done(&p);
}

/* The second step for CODE: the operation's decoder (src/agent/code-request.h). */
static void check_code(json_t *body)
{
        struct code_request c;
        struct cella_error err = {0};
        int r;

        memset(&c, 0xa5, sizeof(c));
        r = code_request_decode(body, &c, &err);
        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL && cella_error_is_set(&err));
                code_request_done(&c);
                return;
        }
        FUZZ_CHECK(c.op >= CODE_OP_CREATE && c.op <= CODE_OP_RUN);
        FUZZ_CHECK(c.language >= CODE_PYTHON && c.language <= CODE_TYPESCRIPT);
        FUZZ_CHECK(!c.ctx.id || agent_id_is_valid(c.ctx.id));
        FUZZ_CHECK(c.op != CODE_OP_DELETE || c.ctx.id);
        if (c.ctx.cwd)
                check_path(c.ctx.cwd);
        if (c.op == CODE_OP_RUN)
                FUZZ_CHECK(c.code && strlen(c.code) <= CELLA_CODE_MAX_CODE);
        FUZZ_CHECK(c.timeout_ms >= 0 && c.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
        for (size_t i = 0; i < c.ctx.n_env; i++)
                FUZZ_CHECK(strchr(c.ctx.env[i], '=') > c.ctx.env[i]);
        code_request_done(&c);
}

/* A runner's event line: decoded, or refused with err set; results keep known keys only. */
static void check_event(const uint8_t *line, size_t len)
{
        struct code_event e;
        struct cella_error err = {0};
        const char *key;
        json_t *v;
        int r = code_event_decode((const char *)line, len, &e, &err);

        if (r < 0) {
                FUZZ_CHECK(r == -EINVAL && cella_error_is_set(&err));
        } else {
                FUZZ_CHECK(e.type >= CODE_EV_UNKNOWN && e.type <= CODE_EV_DONE);
                FUZZ_CHECK(e.id >= 0 && e.execution_count >= 0);
                if (e.type == CODE_EV_RESULT)
                        json_object_foreach(e.result, key, v)
                                FUZZ_CHECK(strcmp(key, "json") == 0 ||
                                           strcmp(key, "isMainResult") == 0 || json_is_string(v));
                if (e.type == CODE_EV_ERROR)
                        FUZZ_CHECK(e.name && e.message && strlen(e.name) <= CELLA_CODE_MAX_TEXT &&
                                   json_array_size(e.traceback) <= CELLA_CODE_MAX_TRACEBACK);
        }
        code_event_done(&e);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        size_t off = 0;

        while (off < size) {
                struct agent_request req;
                struct cella_error err = {0};
                struct frame f;
                int n, r;

                n = frame_decode(data + off, size - off, &f);
                if (n <= 0)
                        break;
                memset(&req, 0xa5, sizeof(req));
                r = agent_request_decode(&f, &req, &err);
                if (r == 0) {
                        FUZZ_CHECK(!cella_error_is_set(&err));
                        check_success(&f, &req);
                        if (req.type == FRAME_PROC)
                                check_proc(req.body);
                        if (req.type == FRAME_CODE)
                                check_code(req.body);
                        if (req.type == FRAME_DATA)
                                check_event(req.data, req.len);
                } else {
                        FUZZ_CHECK(r == -EPROTO || r == -EINVAL || r == -ENOMEM);
                        FUZZ_CHECK(r == -ENOMEM || cella_error_is_set(&err));
                }
                agent_request_done(&req);
                off += (size_t)n;
        }
        return 0;
}
