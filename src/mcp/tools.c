/* The tool table: what each tool takes and gives (JSON Schemas), the hints, and the
 * handlers, each a few libcella calls on the worker's client. docs/mcp.md lists them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/utf8.h"
#include "mcp/mcp-internal.h"

#define SANDBOX_PROP                                                                        \
        "\"sandbox\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"                \
        "\"description\":\"Sandbox name: lowercase letters, digits and '-'. Made on first " \
        "use (with the default image) if it does not exist.\"}"
#define PATH_PROP(what)                                                         \
        "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"" what \
        " Absolute, or relative to /workspace.\"}"
#define ENV_PROP                                                                       \
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}," \
        "\"description\":\"Environment variables for this command only.\"}"
#define OBJ(props, req)                                                      \
        "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req \
        "],\"additionalProperties\":false}"

/* ---- helpers ---- */

static const char *str(json_t *args, const char *key)
{
        return json_string_value(json_object_get(args, key));
}

static bool flag(json_t *args, const char *key)
{
        return json_is_true(json_object_get(args, key));
}

static long num(json_t *args, const char *key)
{
        return (long)json_integer_value(json_object_get(args, key));
}

/* The sandbox the arguments name (sandbox, or name for sandbox_create and
 * sandbox_destroy) checked as cellad checks it, so a bad name is a clear tool error and
 * never reaches a URL; NULL when it is good or the tool names none (sandbox_list). */
static json_t *bad_name(const char *name)
{
        char norm[CELLA_NAME_MAX + 1];
        struct cella_error err = {0};

        if (name && sandbox_name_check(name, strlen(name), false, norm, &err) < 0)
                return mcp_result_error("INVALID_SANDBOX_NAME", "%s", err.msg);
        return NULL;
}

static json_t *bad_sandbox(json_t *args)
{
        const char *name = str(args, "sandbox");

        return bad_name(name ? name : str(args, "name"));
}

/* env {K: V} as "K=V" strings, NULL-terminated, in one allocation; NULL when absent. */
static char **env_list(json_t *env)
{
        size_t n = json_object_size(env), size = (n + 1) * sizeof(char *), i = 0;
        const char *k;
        json_t *v;
        char **list, *p;

        if (!json_is_object(env) || n == 0)
                return NULL;
        json_object_foreach(env, k, v) size += strlen(k) + json_string_length(v) + 2;
        if (!(list = calloc(1, size)))
                return NULL;
        p = (char *)(list + n + 1);
        json_object_foreach(env, k, v)
        {
                size_t kl = strlen(k), vl = json_string_length(v);

                list[i++] = p;
                memcpy(p, k, kl);
                p[kl] = '=';
                memcpy(p + kl + 1, json_string_value(v), vl);
                p += kl + vl + 2; /* calloc'd: the NUL is there */
        }
        return list;
}

/* The answer *text of a call that returned rc, as the structured result; *text is freed.
 * A pointer, so that the call may be an argument: C leaves the order of arguments open. */
static json_t *answer(struct mcp_call *call, int rc, char **text)
{
        _cleanup_free_ char *t = TAKE_PTR(*text);
        json_t *j;

        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        if (!t)
                return mcp_result_structured(json_pack("{sb}", "success", 1));
        if (!(j = json_loads(t, 0, NULL)) || !json_is_object(j)) {
                json_decref(j);
                return mcp_result_client_error(call, CELLA_ERR_INVALID);
        }
        json_object_del(j, "timestamp");
        return mcp_result_structured(j);
}

static char *sandbox_path(const char *sandbox, const char *rest)
{
        char *p = NULL;

        return asprintf(&p, "/v1/sandboxes/%s%s", sandbox, rest) < 0 ? NULL : p;
}

/* Output bytes kept for a result: the first CELLA_MCP_MAX_OUTPUT bytes of a stream. */
struct capture {
        struct buf out, err;
        bool truncated;
        struct mcp_call *call;
};

static int keep(struct capture *cap, struct buf *b, const void *d, size_t n)
{
        size_t room = CELLA_MCP_MAX_OUTPUT - MIN(b->len, (size_t)CELLA_MCP_MAX_OUTPUT);

        if (n > room)
                cap->truncated = true;
        if (buf_append(b, d, MIN(n, room)) < 0)
                return -1;
        mcp_call_progress(cap->call, (double)n, d, n);
        return mcp_call_is_cancelled(cap->call) ? 1 : 0;
}

static int on_out(const void *d, size_t n, void *ud)
{
        struct capture *cap = ud;
        return keep(cap, &cap->out, d, n);
}

static int on_err(const void *d, size_t n, void *ud)
{
        struct capture *cap = ud;
        return keep(cap, &cap->err, d, n);
}

/* Bytes as a JSON string: UTF-8 as is, anything else made valid (U+FFFD). */
static json_t *text_of(const struct buf *b)
{
        _cleanup_(buf_freep) struct buf s = {0};

        if (utf8_sanitize(&s, b->data ? b->data : "", b->len) < 0)
                return NULL;
        return json_stringn(s.data ? s.data : "", s.len);
}

/* ---- sandboxes ---- */

/* sandbox_create with fromSnapshot: one PUT of the arguments as they are (their names are
 * the API's) but the name, so that the snapshot and the other settings make the sandbox
 * together (network, for one, cannot change once it exists). */
static json_t *create_from_snapshot(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char *path = sandbox_path(str(args, "name"), "");
        _cleanup_json_ json_t *req = json_deep_copy(args);
        _cleanup_free_ char *body = NULL;
        char *out = NULL;

        if (!path || !req)
                return NULL;
        json_object_del(req, "name");
        if (!(body = json_dumps(req, JSON_COMPACT)))
                return NULL;
        return answer(call, cella_request(call->client, "PUT", path, body, &out), &out);
}

static json_t *t_sandbox_create(struct mcp_call *call, json_t *args)
{
        if (str(args, "fromSnapshot"))
                return create_from_snapshot(call, args);

        _cleanup_free_ char **env = env_list(json_object_get(args, "env"));
        struct cella_sandbox_options o = {
                .image = str(args, "image"),
                .network = str(args, "network"),
                .keep_alive = flag(args, "keepAlive"),
                .sleep_after = str(args, "sleepAfter"),
                .sleep_mode = str(args, "sleepMode"),
                .env = (const char *const *)env,
        };
        char *info = NULL;

        return answer(call, cella_sandbox_create(call->client, str(args, "name"), &o, &info),
                      &info);
}

static json_t *t_sandbox_list(struct mcp_call *call, json_t *args)
{
        char *list = NULL;

        return answer(call, cella_sandbox_list(call->client, &list), &list);
}

static json_t *t_sandbox_destroy(struct mcp_call *call, json_t *args)
{
        bool existed = false;
        int rc;

        rc = cella_sandbox_destroy(call->client, str(args, "name"), &existed);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        return mcp_result_structured(
                json_pack("{sssb}", "name", str(args, "name"), "destroyed", existed));
}

/* ---- snapshots and fork ---- */

/* A snapshot named by id or name must stand as one path segment: "." and ".." would be
 * resolved away by the URL (the schema already asks for 1-63 characters). */
static json_t *bad_snapshot(const char *ref)
{
        if (strcmp(ref, ".") == 0 || strcmp(ref, "..") == 0)
                return mcp_result_error("VALIDATION_FAILED",
                                        "snapshot: '%s' names no snapshot (an id or a name)", ref);
        return NULL;
}

static json_t *t_snapshot_create(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return answer(
                call,
                cella_snapshot_create(call->client, str(args, "sandbox"), str(args, "name"), &out),
                &out);
}

/* Every snapshot, or those taken of sandbox: filtered here from the whole list, since
 * snapshots outlive their sandbox and the sandbox's own route answers 404 once it is
 * gone (docs/decisions/0052). */
static json_t *t_snapshot_list(struct mcp_call *call, json_t *args)
{
        const char *sandbox = str(args, "sandbox");
        _cleanup_free_ char *out = NULL;
        _cleanup_json_ json_t *doc = NULL;
        json_t *all, *kept, *snap;
        size_t i;
        int rc;

        rc = cella_snapshot_list(call->client, NULL, &out);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        doc = out ? json_loads(out, 0, NULL) : NULL;
        if (!json_is_array(all = json_object_get(doc, "snapshots")))
                return mcp_result_client_error(call, CELLA_ERR_INVALID);
        if (!(kept = json_array()))
                return NULL;
        json_array_foreach(all, i, snap)
        {
                const char *of = json_string_value(json_object_get(snap, "sandbox"));

                if (!sandbox || (of && strcmp(of, sandbox) == 0))
                        json_array_append(kept, snap);
        }
        return mcp_result_structured(json_pack("{so}", "snapshots", kept));
}

static json_t *t_snapshot_delete(struct mcp_call *call, json_t *args)
{
        const char *ref = str(args, "snapshot");
        json_t *bad = bad_snapshot(ref);
        char *out = NULL;

        if (bad)
                return bad;
        return answer(call, cella_snapshot_delete(call->client, ref, &out), &out);
}

/* The new sandbox's name is checked as the one forked is (bad_sandbox checks that one). */
static json_t *t_sandbox_fork(struct mcp_call *call, json_t *args)
{
        json_t *bad = bad_name(str(args, "name"));
        char *out = NULL;

        if (bad)
                return bad;
        return answer(call, cella_fork(call->client, str(args, "sandbox"), str(args, "name"), &out),
                      &out);
}

/* ---- commands ---- */

/* exec's timeout: a thread that kills the command (by its process id, on a client of its
 * own) unless the exec ends first. Invariant: done and fired change under lock only. */
struct exec_timer {
        pthread_mutex_t lock;
        pthread_cond_t cond;
        bool done, fired;
        long ms;
        struct mcp_call *call;
        const char *sandbox, *id; /* the exec's, alive until the thread is joined */
};

static void *timer_main(void *arg)
{
        struct exec_timer *t = arg;
        struct timespec at;
        cella_client *c;
        char *info = NULL;
        int rc = 0;

        clock_gettime(CLOCK_MONOTONIC, &at);
        at.tv_sec += t->ms / 1000;
        at.tv_nsec += (t->ms % 1000) * 1000000L;
        if (at.tv_nsec >= 1000000000L) {
                at.tv_sec++;
                at.tv_nsec -= 1000000000L;
        }
        pthread_mutex_lock(&t->lock);
        while (!t->done && rc != ETIMEDOUT)
                rc = pthread_cond_timedwait(&t->cond, &t->lock, &at);
        t->fired = !t->done;
        pthread_mutex_unlock(&t->lock);
        if (!t->fired || !(c = mcp_server_client(t->call->srv)))
                return NULL;
        cella_process_kill(c, t->sandbox, t->id, "SIGKILL", &info);
        cella_free(info);
        cella_client_free(c);
        return NULL;
}

#define EXEC_ID_PREFIX "mcp-exec-"

/* exec in a named session: the session's persistent shell (created on first use), so `cd`
 * and `export` carry over. The command streams on the exec route, whose client going away
 * stops it (the session keeps its state): a cancellation interrupts the call's client. */
static json_t *exec_in_session(struct mcp_call *call, json_t *args, char **env)
{
        const char *sandbox = str(args, "sandbox"), *sid = str(args, "sessionId");
        struct cella_exec_options o = {
                .cwd = str(args, "cwd"),
                .env = (const char *const *)env,
                .timeout_ms = (long)num(args, "timeoutMs"),
                .session_id = sid,
        };
        struct capture cap = {.call = call};
        struct cella_exec_callbacks cb = {
                .on_stdout = on_out, .on_stderr = on_err, .userdata = &cap};
        int rc, exit_code = -1;
        bool timed_out = false;
        json_t *res = NULL;

        rc = cella_exec_stream(call->client, sandbox, str(args, "command"), &o, &cb, &exit_code);
        if (rc == CELLA_ERR_API &&
            strcmp(cella_client_error_code(call->client), "SESSION_NOT_FOUND") == 0) {
                struct cella_session_options so = {.id = sid};
                char *info = NULL;

                rc = cella_session_create(call->client, sandbox, &so, &info);
                cella_free(info);
                if (rc == CELLA_OK ||
                    (rc == CELLA_ERR_API &&
                     strcmp(cella_client_error_code(call->client), "SESSION_ALREADY_EXISTS") == 0))
                        rc = cella_exec_stream(call->client, sandbox, str(args, "command"), &o, &cb,
                                               &exit_code);
        }
        if (rc == CELLA_ERR_API &&
            strcmp(cella_client_error_code(call->client), "COMMAND_TIMEOUT") == 0) {
                timed_out = true;
                exit_code = -1;
        } else if (rc != CELLA_OK && rc != CELLA_ERR_CALLBACK) {
                res = mcp_result_client_error(call, rc);
                goto out;
        }
        res = json_pack("{sisososs}", "exitCode", exit_code, "stdout", text_of(&cap.out), "stderr",
                        text_of(&cap.err), "sessionId", sid);
        if (res && cap.truncated)
                json_object_set_new(res, "truncated", json_true());
        if (res && timed_out)
                json_object_set_new(res, "timedOut", json_true());
        res = mcp_result_structured(res);
out:
        buf_free(&cap.out);
        buf_free(&cap.err);
        return res;
}

/* exec: the command runs as a background process with an id of our own, so that a
 * cancellation can kill it (and its whole tree) by name while its output streams here;
 * each chunk of output is a progress notification. */
static json_t *t_exec(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char **env = env_list(json_object_get(args, "env"));
        struct cella_process_options o = {
                .cwd = str(args, "cwd"),
                .env = (const char *const *)env,
        };
        struct capture cap = {.call = call};
        struct exec_timer timer = {0};
        pthread_t timer_th;
        bool timing = false;
        struct cella_exec_callbacks cb = {
                .on_stdout = on_out, .on_stderr = on_err, .userdata = &cap};
        const char *sandbox = str(args, "sandbox");
        unsigned char rnd[8];
        char id[32], *info = NULL;
        int rc, exit_code = -1;
        json_t *res;

        if (str(args, "sessionId"))
                return exec_in_session(call, args, env);
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return mcp_result_error("INTERNAL_ERROR", "no random bytes");
        snprintf(id, sizeof(id), EXEC_ID_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        o.id = id;
        rc = cella_process_start(call->client, sandbox, str(args, "command"), &o, &info);
        cella_free(info);
        if (rc != CELLA_OK) {
                /* cancelled while starting: the command may have started all the same */
                if (mcp_call_is_cancelled(call))
                        mcp_call_set_kill(call, sandbox, id);
                return mcp_result_client_error(call, rc);
        }
        mcp_call_set_kill(call, sandbox, id);
        timer.call = call;
        timer.sandbox = sandbox;
        timer.id = id;
        timer.ms = num(args, "timeoutMs");
        if (timer.ms > 0) {
                pthread_condattr_t ca;

                pthread_mutex_init(&timer.lock, NULL);
                pthread_condattr_init(&ca);
                pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
                pthread_cond_init(&timer.cond, &ca);
                pthread_condattr_destroy(&ca);
                timing = pthread_create(&timer_th, NULL, timer_main, &timer) == 0;
        }
        rc = cella_process_stream(call->client, sandbox, id, &cb, &exit_code);
        if (timing) {
                pthread_mutex_lock(&timer.lock);
                timer.done = true;
                pthread_cond_signal(&timer.cond);
                pthread_mutex_unlock(&timer.lock);
                pthread_join(timer_th, NULL);
        }
        if (timer.ms > 0) {
                pthread_cond_destroy(&timer.cond);
                pthread_mutex_destroy(&timer.lock);
        }
        if (rc != CELLA_OK && rc != CELLA_ERR_CALLBACK) {
                buf_free(&cap.out);
                buf_free(&cap.err);
                return mcp_result_client_error(call, rc);
        }
        res = json_pack("{sisoso}", "exitCode", exit_code, "stdout", text_of(&cap.out), "stderr",
                        text_of(&cap.err));
        if (res && cap.truncated)
                json_object_set_new(res, "truncated", json_true());
        if (res && timer.fired)
                json_object_set_new(res, "timedOut", json_true());
        buf_free(&cap.out);
        buf_free(&cap.err);
        return mcp_result_structured(res);
}

/* ---- files ---- */

/* POST req (taken) to the sandbox's /files/<op>, the answer as the result. */
static json_t *files_post(struct mcp_call *call, json_t *args, const char *op, json_t *take)
{
        _cleanup_free_ char *path = sandbox_path(str(args, "sandbox"), op);
        _cleanup_json_ json_t *req = take;
        _cleanup_free_ char *body = NULL;
        char *out = NULL;

        if (!path || !req || !(body = json_dumps(req, JSON_COMPACT)))
                return NULL;
        return answer(call, cella_request(call->client, "POST", path, body, &out), &out);
}

static const char *encoding(json_t *args)
{
        return str(args, "encoding") ? str(args, "encoding") : "utf-8";
}

static json_t *t_file_read(struct mcp_call *call, json_t *args)
{
        return files_post(
                call, args, "/files/read",
                json_pack("{ssss}", "path", str(args, "path"), "encoding", encoding(args)));
}

static json_t *t_file_write(struct mcp_call *call, json_t *args)
{
        return files_post(call, args, "/files/write",
                          json_pack("{sOsOss}", "path", json_object_get(args, "path"), "content",
                                    json_object_get(args, "content"), "encoding", encoding(args)));
}

static json_t *t_file_list(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return answer(call,
                      cella_file_list(call->client, str(args, "sandbox"),
                                      str(args, "path") ? str(args, "path") : "/workspace",
                                      flag(args, "recursive"), flag(args, "includeHidden"), &out),
                      &out);
}

static json_t *t_file_delete(struct mcp_call *call, json_t *args)
{
        int rc;

        rc = cella_file_delete(call->client, str(args, "sandbox"), str(args, "path"),
                               flag(args, "recursive"));
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        return mcp_result_structured(json_pack("{sssb}", "path", str(args, "path"), "deleted", 1));
}

/* ---- processes ---- */

static json_t *t_process_start(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char **env = env_list(json_object_get(args, "env"));
        struct cella_process_options o = {
                .id = str(args, "processId"),
                .cwd = str(args, "cwd"),
                .env = (const char *const *)env,
        };
        char *out = NULL;

        return answer(call,
                      cella_process_start(call->client, str(args, "sandbox"), str(args, "command"),
                                          &o, &out),
                      &out);
}

/* exec's own processes once finished: their output was exec's result, they are no
 * process of the model's (the agent forgets the oldest finished ones by itself). */
static bool finished_exec(json_t *p)
{
        const char *id = json_string_value(json_object_get(p, "id"));
        const char *status = json_string_value(json_object_get(p, "status"));

        return id && strncmp(id, EXEC_ID_PREFIX, strlen(EXEC_ID_PREFIX)) == 0 && status &&
               strcmp(status, "running") != 0;
}

static json_t *t_process_list(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char *out = NULL;
        json_t *list, *j;
        int rc;

        rc = cella_process_list(call->client, str(args, "sandbox"), &out);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        if (!(j = json_loads(out, 0, NULL)) ||
            !json_is_array(list = json_object_get(j, "processes"))) {
                json_decref(j);
                return mcp_result_client_error(call, CELLA_ERR_INVALID);
        }
        for (size_t i = json_array_size(list); i-- > 0;)
                if (finished_exec(json_array_get(list, i)))
                        json_array_remove(list, i);
        json_object_del(j, "timestamp");
        return mcp_result_structured(j);
}

static json_t *t_process_kill(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return answer(call,
                      cella_process_kill(call->client, str(args, "sandbox"), str(args, "processId"),
                                         str(args, "signal"), &out),
                      &out);
}

/* The end of a long log is what a model wants: the last CELLA_MCP_MAX_OUTPUT bytes of
 * (d, n) into b; *truncated set when that is not all of them. */
static int keep_tail(struct buf *b, const void *d, size_t n, bool *truncated)
{
        if (n > CELLA_MCP_MAX_OUTPUT) {
                *truncated = true;
                d = (const char *)d + n - CELLA_MCP_MAX_OUTPUT;
                n = CELLA_MCP_MAX_OUTPUT;
        }
        return buf_append(b, d, n);
}

static json_t *t_process_logs(struct mcp_call *call, json_t *args)
{
        cella_exec_result *r = NULL;
        struct buf out = {0}, err = {0};
        const void *p;
        size_t n;
        json_t *res;
        bool truncated = false;
        int rc;

        rc = cella_process_logs(call->client, str(args, "sandbox"), str(args, "processId"), &r);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        p = cella_exec_result_stdout(r, &n);
        rc = keep_tail(&out, p, n, &truncated);
        p = cella_exec_result_stderr(r, &n);
        if (rc == 0)
                rc = keep_tail(&err, p, n, &truncated);
        cella_exec_result_free(r);
        res = rc < 0 ? NULL
                     : json_pack("{sssoso}", "processId", str(args, "processId"), "stdout",
                                 text_of(&out), "stderr", text_of(&err));
        if (res && truncated)
                json_object_set_new(res, "truncated", json_true());
        buf_free(&out);
        buf_free(&err);
        return mcp_result_structured(res);
}

/* ---- ports ---- */

static json_t *t_wait_for_port(struct mcp_call *call, json_t *args)
{
        struct cella_wait_port_options o = {
                .http_path = str(args, "httpPath"),
                .timeout_ms = json_object_get(args, "timeoutMs") ? num(args, "timeoutMs") : 60000,
        };
        char *out = NULL;

        return answer(call,
                      cella_process_wait_port(call->client, str(args, "sandbox"),
                                              str(args, "processId"), (int)num(args, "port"), &o,
                                              &out),
                      &out);
}

static json_t *t_expose_port(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return answer(call,
                      cella_port_expose(call->client, str(args, "sandbox"), (int)num(args, "port"),
                                        str(args, "name"), NULL, &out),
                      &out);
}

/* ---- code ---- */

/* run_code's events gathered: logs, rich results (MCP content), the error. */
struct code_run {
        struct mcp_call *call;
        json_t *content; /* the CallToolResult's content, images among them */
        json_t *results; /* structured: each result's formats, and its text */
        struct buf out, err;
        json_t *error;
        json_int_t count;
        bool timed_out;
};

static void add_result(struct code_run *r, json_t *ev)
{
        static const char *const images[][2] = {{"png", "image/png"}, {"jpeg", "image/jpeg"}};
        static const char *const texts[] = {"text",  "html", "markdown",  "svg",
                                            "latex", "json", "javascript"};
        json_t *formats = json_array(), *item = json_object(), *v;

        for (size_t i = 0; i < ARRAY_SIZE(images); i++)
                if (json_is_string(v = json_object_get(ev, images[i][0]))) {
                        json_array_append_new(formats, json_string(images[i][0]));
                        json_array_append_new(r->content,
                                              json_pack("{sssOss}", "type", "image", "data", v,
                                                        "mimeType", images[i][1]));
                }
        for (size_t i = 0; i < ARRAY_SIZE(texts); i++) {
                _cleanup_free_ char *dumped = NULL;
                const char *text;

                if (!(v = json_object_get(ev, texts[i])))
                        continue;
                json_array_append_new(formats, json_string(texts[i]));
                text = json_string_value(v);
                if (!text && (dumped = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY)))
                        text = dumped;
                if (!text)
                        continue;
                if (strcmp(texts[i], "text") == 0)
                        json_object_set_new(item, "text", json_string(text));
                /* text/plain, and the richer forms a model reads as text (HTML tables) */
                if (strcmp(texts[i], "text") == 0 || strcmp(texts[i], "html") == 0 ||
                    strcmp(texts[i], "markdown") == 0 || strcmp(texts[i], "json") == 0)
                        json_array_append_new(r->content,
                                              json_pack("{ssss}", "type", "text", "text", text));
        }
        json_object_set_new(item, "formats", formats);
        json_array_append_new(r->results, item);
}

static int on_code_event(const char *text, size_t len, void *ud)
{
        struct code_run *r = ud;
        _cleanup_json_ json_t *ev = json_loadb(text, len, 0, NULL);
        const char *type = json_string_value(json_object_get(ev, "type"));
        const char *s;

        if (!type)
                return 0;
        if ((strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) &&
            (s = json_string_value(json_object_get(ev, "text")))) {
                buf_append(type[3] == 'o' ? &r->out : &r->err, s, strlen(s));
                mcp_call_progress(r->call, (double)strlen(s), s, strlen(s));
        } else if (strcmp(type, "result") == 0) {
                add_result(r, ev);
        } else if (strcmp(type, "error") == 0) {
                json_decref(r->error);
                r->error = json_pack("{sOsOsO}", "name", json_object_get(ev, "name"), "message",
                                     json_object_get(ev, "message"), "traceback",
                                     json_object_get(ev, "traceback"));
                if (!r->error)
                        r->error = json_pack("{ss}", "name", "Error");
        } else if (strcmp(type, "execution_complete") == 0) {
                r->count = json_integer_value(json_object_get(ev, "executionCount"));
                r->timed_out = json_is_true(json_object_get(ev, "timedOut"));
        }
        return mcp_call_is_cancelled(r->call) ? 1 : 0;
}

static json_t *t_run_code(struct mcp_call *call, json_t *args)
{
        struct cella_code_options o = {
                .language = str(args, "language"),
                .context_id = str(args, "contextId"),
                .timeout_ms = num(args, "timeoutMs"),
        };
        struct code_run r = {.call = call, .content = json_array(), .results = json_array()};
        _cleanup_json_ json_t *structured = NULL;
        _cleanup_free_ char *dumped = NULL;
        json_t *res = NULL;
        int rc;

        if (!r.content || !r.results)
                goto out;
        rc = cella_code_run(call->client, str(args, "sandbox"), str(args, "code"), &o,
                            on_code_event, &r, NULL);
        if (rc != CELLA_OK) {
                res = mcp_result_client_error(call, rc);
                goto out;
        }
        structured =
                json_pack("{sosososI}", "stdout", text_of(&r.out), "stderr", text_of(&r.err),
                          "results", json_incref(r.results), "executionCount", (json_int_t)r.count);
        if (!structured)
                goto out;
        if (r.error)
                json_object_set(structured, "error", r.error);
        if (r.timed_out)
                json_object_set_new(structured, "timedOut", json_true());
        if (!(dumped = json_dumps(structured, JSON_COMPACT)))
                goto out;
        /* the summary first (logs, error), then each result as the content it is */
        json_array_insert_new(r.content, 0, json_pack("{ssss}", "type", "text", "text", dumped));
        res = json_pack("{sOsO}", "content", r.content, "structuredContent", structured);
        if (res && r.error)
                json_object_set_new(res, "isError", json_true());
out:
        json_decref(r.content);
        json_decref(r.results);
        json_decref(r.error);
        buf_free(&r.out);
        buf_free(&r.err);
        return res;
}

/* ---- git ---- */

static json_t *t_git_checkout(struct mcp_call *call, json_t *args)
{
        struct cella_git_options o = {
                .branch = str(args, "branch"),
                .target_dir = str(args, "targetDir"),
                .depth = num(args, "depth"),
        };
        char *out = NULL;

        return answer(call,
                      cella_git_checkout(call->client, str(args, "sandbox"), str(args, "repoUrl"),
                                         &o, &out),
                      &out);
}

/* ---- the table ---- */

#define PROCESS_INFO                                                                           \
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"pid\":{\"type\":" \
        "\"integer\"},\"command\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},"     \
        "\"exitCode\":{\"type\":\"integer\"}},\"required\":[\"id\",\"status\"]}"
#define PROCESS_ID_PROP                                                                     \
        "\"processId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"              \
        "\"description\":\"The id given to process_start (or its generated id, or its pid " \
        "as text).\"}"

#define SNAPSHOT_INFO                                                                         \
        "{\"type\":\"object\",\"properties\":{\"snapshotId\":{\"type\":\"string\"},\"name\":" \
        "{\"type\":\"string\"},\"sandbox\":{\"type\":\"string\"},\"image\":{\"type\":"        \
        "\"string\"},\"sizeBytes\":{\"type\":\"integer\"},\"createdAt\":{\"type\":"           \
        "\"string\"}},\"required\":[\"snapshotId\",\"name\",\"sandbox\"]}"

const struct mcp_tool mcp_tools[] = {
        {"sandbox_create", "Create a sandbox",
         "Create a sandbox (an isolated Linux machine: Debian with bash, python3, node, git) "
         "or update the settings of an existing one. Optional: every other tool makes the "
         "sandbox on first use with the defaults. Use it to pick an image, set environment "
         "variables, cut network access (network: \"none\") or keep it from sleeping.",
         OBJ("\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,\"description\":"
             "\"Sandbox name: lowercase letters, digits and '-'.\"},"
             "\"image\":{\"type\":\"string\",\"description\":\"Image name (default: the "
             "server's).\"},"
             "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
             "\"description\":\"Environment variables of every command in the sandbox.\"},"
             "\"network\":{\"type\":\"string\",\"enum\":[\"none\",\"outbound\"],"
             "\"description\":\"none: loopback only; outbound: internet access.\"},"
             "\"sleepAfter\":{\"type\":\"string\",\"description\":\"Idle time before it "
             "sleeps (files kept, processes stopped): 30s, 10m, 2h.\"},"
             "\"keepAlive\":{\"type\":\"boolean\",\"description\":\"Never sleep.\"},"
             "\"sleepMode\":{\"type\":\"string\",\"enum\":[\"files\",\"memory\"],"
             "\"description\":\"What a sleep keeps: files, or memory (processes too, where "
             "the host can; the answer's sleepMode says what it does).\"},"
             "\"fromSnapshot\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"
             "\"description\":\"Start with the files of this snapshot (its id or name, from "
             "snapshot_create or snapshot_list); the image is the snapshot's. Only when the "
             "sandbox is created.\"}",
             "\"name\""),
         "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"state\":{"
         "\"type\":\"string\"}},\"required\":[\"id\"]}",
         false, false, true, false, t_sandbox_create},
        {"sandbox_list", "List sandboxes",
         "List every sandbox with its state (running, sleeping, stopped), image, labels and "
         "last activity.",
         OBJ("", ""),
         "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":\"array\",\"items\":{"
         "\"type\":\"object\"}}},\"required\":[\"sandboxes\"]}",
         true, false, true, false, t_sandbox_list},
        {"sandbox_destroy", "Destroy a sandbox",
         "Destroy a sandbox: its processes are killed and its files are deleted for good. "
         "Idempotent: destroyed is false when there was none.",
         OBJ("\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63}", "\"name\""),
         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"destroyed\":{"
         "\"type\":\"boolean\"}},\"required\":[\"name\",\"destroyed\"]}",
         false, true, true, false, t_sandbox_destroy},
        {"snapshot_create", "Snapshot a sandbox",
         "Save the files of a sandbox as they are now (everything it changed over its image: "
         "installed packages, /workspace, ...) as a snapshot. Its processes pause for the copy "
         "and then go on. The snapshot outlives the sandbox: start new sandboxes with its "
         "files with sandbox_create fromSnapshot, e.g. to try several approaches from the "
         "same checkpoint. Processes and memory are not saved.",
         OBJ(SANDBOX_PROP ",\"name\":{\"type\":\"string\",\"minLength\":1,"
                          "\"maxLength\":63,\"description\":\"A name for it (a-z 0-9 . _ -, "
                          "unique); default: its id.\"}",
             "\"sandbox\""),
         SNAPSHOT_INFO, false, false, false, false, t_snapshot_create},
        {"snapshot_list", "List snapshots",
         "List the snapshots (oldest first) with their id, name, the sandbox they were taken "
         "of, image, size and time; with sandbox, only those of that sandbox (also once it "
         "was destroyed).",
         OBJ("\"sandbox\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"
             "\"description\":\"Only the snapshots taken of this sandbox.\"}",
             ""),
         "{\"type\":\"object\",\"properties\":{\"snapshots\":{\"type\":\"array\","
         "\"items\":" SNAPSHOT_INFO "}},\"required\":[\"snapshots\"]}",
         true, false, true, false, t_snapshot_list},
        {"snapshot_delete", "Delete a snapshot",
         "Delete a snapshot for good (by id or name). Refused with SNAPSHOT_IN_USE while a "
         "sandbox made from it exists (destroy those first); SNAPSHOT_NOT_FOUND when there is "
         "none.",
         OBJ("\"snapshot\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"
             "\"description\":\"The snapshot's id or name.\"}",
             "\"snapshot\""),
         "{\"type\":\"object\",\"properties\":{\"snapshotId\":{\"type\":\"string\"},"
         "\"deleted\":{\"type\":\"boolean\"}},\"required\":[\"snapshotId\",\"deleted\"]}",
         false, true, true, false, t_snapshot_delete},
        {"sandbox_fork", "Fork a sandbox",
         "Make a new sandbox that starts with a copy of another's files as they are now "
         "(a snapshot taken and shared, not copied: quick whatever the size). The two then "
         "go their own ways: writes in one never reach the other. Processes are not copied, "
         "and the new sandbox has the default settings. The result names the snapshot "
         "(snapshot), which stays until deleted.",
         OBJ(SANDBOX_PROP ",\"name\":{\"type\":\"string\",\"minLength\":1,"
                          "\"maxLength\":63,\"description\":\"The new sandbox's name "
                          "(lowercase letters, digits and '-'); it must not exist.\"}",
             "\"sandbox\",\"name\""),
         "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"state\":{"
         "\"type\":\"string\"},\"snapshot\":{\"type\":\"string\"}},\"required\":[\"id\","
         "\"snapshot\"]}",
         false, false, false, false, t_sandbox_fork},
        {"exec", "Run a shell command",
         "Run a bash command line in a sandbox and return its exit code, stdout and stderr "
         "(each cut at 1 MiB). Without sessionId each call is a fresh shell in /workspace "
         "(or cwd), so `cd` and `export` do not carry over: chain with && instead. With "
         "sessionId (any name, e.g. \"main\") the command runs in that session's persistent "
         "shell, created on first use: `cd`, `export`, shell functions and variables carry "
         "over to the next exec with the same sessionId (one command at a time per session; "
         "a cwd or env given with the call applies to that command only). Output streams "
         "as progress notifications when a progress token is given; cancelling the request "
         "kills the command and everything it started, as timeoutMs does after that long "
         "(a session keeps its state). For servers and other long-running programs use "
         "process_start.",
         OBJ(SANDBOX_PROP ",\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":"
                          "\"A bash command line, e.g. \\\"pip install requests && python "
                          "main.py\\\".\"},"
                          "\"cwd\":{\"type\":\"string\",\"description\":\"Working directory "
                          "(default /workspace).\"},"
                          "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":1,\"description\":"
                          "\"Kill the command after this long; the result then has timedOut: "
                          "true.\"},"
                          "\"sessionId\":{\"type\":\"string\",\"minLength\":1,"
                          "\"maxLength\":64,\"description\":\"Run in this persistent shell "
                          "session (1-64 of A-Z a-z 0-9 _ . -; created on first use) so that "
                          "cd and export carry over.\"}," ENV_PROP,
             "\"sandbox\",\"command\""),
         "{\"type\":\"object\",\"properties\":{\"exitCode\":{\"type\":\"integer\"},\"stdout\":"
         "{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},\"truncated\":{\"type\":"
         "\"boolean\"},\"timedOut\":{\"type\":\"boolean\"},\"sessionId\":{\"type\":"
         "\"string\"}},\"required\":[\"exitCode\","
         "\"stdout\",\"stderr\"]}",
         false, true, false, true, t_exec},
        {"file_read", "Read a file",
         "Read a file of a sandbox. encoding utf-8 (default) returns text; base64 returns the "
         "bytes of any file (images, archives). isBinary tells when a file is not text.",
         OBJ(SANDBOX_PROP "," PATH_PROP("The file.") ",\"encoding\":{\"type\":\"string\","
                                                     "\"enum\":[\"utf-8\",\"base64\"]}",
             "\"sandbox\",\"path\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{"
         "\"type\":\"string\"},\"encoding\":{\"type\":\"string\"},\"size\":{\"type\":"
         "\"integer\"}},\"required\":[\"path\",\"content\"]}",
         true, false, true, false, t_file_read},
        {"file_write", "Write a file",
         "Write a file in a sandbox (replacing it; parent directories are made). content is "
         "text, or base64 of the bytes with encoding base64.",
         OBJ(SANDBOX_PROP "," PATH_PROP("The file.") ",\"content\":{\"type\":\"string\"},"
                                                     "\"encoding\":{\"type\":\"string\","
                                                     "\"enum\":[\"utf-8\",\"base64\"]}",
             "\"sandbox\",\"path\",\"content\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{"
         "\"type\":\"integer\"}},\"required\":[\"path\"]}",
         false, true, true, false, t_file_write},
        {"file_list", "List a directory",
         "List a directory of a sandbox (default /workspace): name, type, size, mode and "
         "modification time of each entry; recursive descends, includeHidden shows dot "
         "files.",
         OBJ(SANDBOX_PROP "," PATH_PROP(
                     "The directory (default /workspace).") ",\"recursive\":{\"type\":\"boolean\"},"
                                                            "\"includeHidden\":{\"type\":"
                                                            "\"boolean\"}",
             "\"sandbox\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"files\":{"
         "\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"count\":{\"type\":"
         "\"integer\"}},\"required\":[\"files\"]}",
         true, false, true, false, t_file_list},
        {"file_delete", "Delete a file",
         "Delete a file, or a directory and everything in it with recursive: true.",
         OBJ(SANDBOX_PROP
             "," PATH_PROP("The file or directory.") ",\"recursive\":{\"type\":\"boolean\"}",
             "\"sandbox\",\"path\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"deleted\":{"
         "\"type\":\"boolean\"}},\"required\":[\"path\",\"deleted\"]}",
         false, true, true, false, t_file_delete},
        {"process_start", "Start a background process",
         "Start a long-running command in the background (a web server, a watcher) and "
         "return at once with its id. Read its output with process_logs, wait for its port "
         "with wait_for_port, stop it with process_kill.",
         OBJ(SANDBOX_PROP ",\"command\":{\"type\":\"string\",\"minLength\":1},"
                          "\"processId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
                          "\"description\":\"An id of your choosing ([A-Za-z0-9_.-]); "
                          "default: generated.\"},"
                          "\"cwd\":{\"type\":\"string\"}," ENV_PROP,
             "\"sandbox\",\"command\""),
         PROCESS_INFO, false, false, false, true, t_process_start},
        {"process_list", "List background processes",
         "List a sandbox's background processes, running and finished, with status and exit "
         "code (exec's own commands once finished are not listed: their output was exec's "
         "result).",
         OBJ(SANDBOX_PROP, "\"sandbox\""),
         "{\"type\":\"object\",\"properties\":{\"processes\":{\"type\":\"array\",\"items\":{"
         "\"type\":\"object\"}}},\"required\":[\"processes\"]}",
         true, false, true, false, t_process_list},
        {"process_kill", "Stop a background process",
         "Stop a background process and everything it started: SIGTERM, then SIGKILL after "
         "a grace period (or the signal given, e.g. SIGINT). Answers once it has ended.",
         OBJ(SANDBOX_PROP "," PROCESS_ID_PROP ",\"signal\":{\"type\":\"string\"}",
             "\"sandbox\",\"processId\""),
         PROCESS_INFO, false, true, true, false, t_process_kill},
        {"process_logs", "Read a process's output",
         "The output of a background process so far (the last 1 MiB of each stream).",
         OBJ(SANDBOX_PROP "," PROCESS_ID_PROP, "\"sandbox\",\"processId\""),
         "{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"string\"},\"stderr\":{"
         "\"type\":\"string\"},\"truncated\":{\"type\":\"boolean\"}},\"required\":["
         "\"stdout\",\"stderr\"]}",
         true, false, true, false, t_process_logs},
        {"wait_for_port", "Wait for a port",
         "Wait until a background process listens on a port of the sandbox (a TCP connect, "
         "or with httpPath a GET answered 200-399). Fails with PROCESS_EXITED_BEFORE_READY if "
         "the process ends first, PROCESS_READY_TIMEOUT after timeoutMs (default 60000).",
         OBJ(SANDBOX_PROP "," PROCESS_ID_PROP
                          ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
                          "\"httpPath\":{\"type\":\"string\"},"
                          "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":0}",
             "\"sandbox\",\"processId\",\"port\""),
         "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"}},\"required\":["
         "\"port\"]}",
         true, false, true, false, t_wait_for_port},
        {"expose_port", "Expose a port",
         "Give a port of the sandbox (1024-65535) a public preview URL that proxies HTTP and "
         "WebSocket to it. Exposing again keeps the URL.",
         OBJ(SANDBOX_PROP ",\"port\":{\"type\":\"integer\",\"minimum\":1024,\"maximum\":65535},"
                          "\"name\":{\"type\":\"string\",\"description\":\"A label for the "
                          "port.\"}",
             "\"sandbox\",\"port\""),
         "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"},\"port\":{"
         "\"type\":\"integer\"}},\"required\":[\"url\",\"port\"]}",
         false, false, true, true, t_expose_port},
        {"run_code", "Run code",
         "Run Python (default), JavaScript or TypeScript in a long-lived interpreter of the "
         "sandbox, like a notebook cell: variables and imports persist between calls of the "
         "same language. The last expression's value is returned; matplotlib figures come "
         "back as PNG images, pandas tables as HTML text. Errors in the code come back as a "
         "tool error with the traceback.",
         OBJ(SANDBOX_PROP ",\"code\":{\"type\":\"string\",\"minLength\":1},"
                          "\"language\":{\"type\":\"string\",\"enum\":[\"python\","
                          "\"javascript\",\"typescript\"]},"
                          "\"contextId\":{\"type\":\"string\"},"
                          "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":0}",
             "\"sandbox\",\"code\""),
         "{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"string\"},\"stderr\":{"
         "\"type\":\"string\"},\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}"
         "},\"error\":{\"type\":\"object\"},\"executionCount\":{\"type\":\"integer\"}},"
         "\"required\":[\"stdout\",\"stderr\",\"results\"]}",
         false, true, false, true, t_run_code},
        {"git_checkout", "Clone a git repository",
         "Clone a git repository into the sandbox (default /workspace/<name>). branch picks "
         "a branch, depth makes a shallow clone.",
         OBJ(SANDBOX_PROP ",\"repoUrl\":{\"type\":\"string\",\"minLength\":1},"
                          "\"branch\":{\"type\":\"string\"},\"targetDir\":{\"type\":\"string\"},"
                          "\"depth\":{\"type\":\"integer\",\"minimum\":0}",
             "\"sandbox\",\"repoUrl\""),
         "{\"type\":\"object\",\"properties\":{\"repoUrl\":{\"type\":\"string\"},\"branch\":{"
         "\"type\":\"string\"},\"targetDir\":{\"type\":\"string\"}},\"required\":["
         "\"targetDir\"]}",
         false, false, false, true, t_git_checkout},
};
const size_t mcp_ntools = ARRAY_SIZE(mcp_tools);

json_t *mcp_tool_run(const struct mcp_tool *t, struct mcp_call *call, json_t *args)
{
        json_t *bad = bad_sandbox(args);

        return bad ? bad : t->run(call, args);
}

const struct mcp_tool *mcp_tool_find(const char *name)
{
        for (size_t i = 0; name && i < mcp_ntools; i++)
                if (strcmp(mcp_tools[i].name, name) == 0)
                        return &mcp_tools[i];
        return NULL;
}

json_t *mcp_tool_describe(const struct mcp_tool *t)
{
        json_t *in = json_loads(t->input_schema, 0, NULL);
        json_t *out = t->output_schema ? json_loads(t->output_schema, 0, NULL) : NULL;
        json_t *d;

        if (!in || (t->output_schema && !out)) {
                json_decref(in);
                json_decref(out);
                return NULL;
        }
        d = json_pack("{sssssssos{sssbsbsbsb}}", "name", t->name, "title", t->title, "description",
                      t->description, "inputSchema", in, "annotations", "title", t->title,
                      "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
                      "idempotentHint", t->idempotent, "openWorldHint", t->open_world);
        if (d && out)
                json_object_set_new(d, "outputSchema", out);
        else
                json_decref(out);
        return d;
}
