/* The MCP tools of commands and background processes (tools-internal.h). */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/utf8.h"
#include "mcp/mcp-internal.h"
#include "mcp/tools-internal.h"

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
        const char *sandbox = tool_str(args, "sandbox"), *sid = tool_str(args, "sessionId");
        struct cella_exec_options o = {
                .cwd = tool_str(args, "cwd"),
                .env = (const char *const *)env,
                .timeout_ms = (long)tool_num(args, "timeoutMs"),
                .session_id = sid,
        };
        struct tool_capture cap = {.call = call};
        struct cella_exec_callbacks cb = {
                .on_stdout = tool_on_out, .on_stderr = tool_on_err, .userdata = &cap};
        int rc, exit_code = -1;
        bool timed_out = false;
        json_t *res = NULL;

        rc = cella_exec_stream(call->client, sandbox, tool_str(args, "command"), &o, &cb,
                               &exit_code);
        if (rc == CELLA_ERR_API &&
            strcmp(cella_client_error_code(call->client), "SESSION_NOT_FOUND") == 0) {
                struct cella_session_options so = {.id = sid};
                char *info = NULL;

                rc = cella_session_create(call->client, sandbox, &so, &info);
                cella_free(info);
                if (rc == CELLA_OK ||
                    (rc == CELLA_ERR_API &&
                     strcmp(cella_client_error_code(call->client), "SESSION_ALREADY_EXISTS") == 0))
                        rc = cella_exec_stream(call->client, sandbox, tool_str(args, "command"), &o,
                                               &cb, &exit_code);
        }
        if (rc == CELLA_ERR_API &&
            strcmp(cella_client_error_code(call->client), "COMMAND_TIMEOUT") == 0) {
                timed_out = true;
                exit_code = -1;
        } else if (rc != CELLA_OK && rc != CELLA_ERR_CALLBACK) {
                res = mcp_result_client_error(call, rc);
                goto out;
        }
        res = json_pack("{sisososs}", "exitCode", exit_code, "stdout", tool_text_of(&cap.out),
                        "stderr", tool_text_of(&cap.err), "sessionId", sid);
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
json_t *mcp_tool_exec(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char **env = tool_env_list(json_object_get(args, "env"));
        struct cella_process_options o = {
                .cwd = tool_str(args, "cwd"),
                .env = (const char *const *)env,
        };
        struct tool_capture cap = {.call = call};
        struct exec_timer timer = {0};
        pthread_t timer_th;
        bool timing = false;
        struct cella_exec_callbacks cb = {
                .on_stdout = tool_on_out, .on_stderr = tool_on_err, .userdata = &cap};
        const char *sandbox = tool_str(args, "sandbox");
        unsigned char rnd[8];
        char id[32], *info = NULL;
        int rc, exit_code = -1;
        json_t *res;

        if (tool_str(args, "sessionId"))
                return exec_in_session(call, args, env);
        if (getrandom(rnd, sizeof(rnd), 0) != sizeof(rnd))
                return mcp_result_error("INTERNAL_ERROR", "no random bytes");
        snprintf(id, sizeof(id), EXEC_ID_PREFIX "%02x%02x%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1],
                 rnd[2], rnd[3], rnd[4], rnd[5], rnd[6], rnd[7]);
        o.id = id;
        rc = cella_process_start(call->client, sandbox, tool_str(args, "command"), &o, &info);
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
        timer.ms = tool_num(args, "timeoutMs");
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
        res = json_pack("{sisoso}", "exitCode", exit_code, "stdout", tool_text_of(&cap.out),
                        "stderr", tool_text_of(&cap.err));
        if (res && cap.truncated)
                json_object_set_new(res, "truncated", json_true());
        if (res && timer.fired)
                json_object_set_new(res, "timedOut", json_true());
        buf_free(&cap.out);
        buf_free(&cap.err);
        return mcp_result_structured(res);
}

/* ---- processes ---- */

json_t *mcp_tool_process_start(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char **env = tool_env_list(json_object_get(args, "env"));
        struct cella_process_options o = {
                .id = tool_str(args, "processId"),
                .cwd = tool_str(args, "cwd"),
                .env = (const char *const *)env,
        };
        char *out = NULL;

        return tool_answer(call,
                           cella_process_start(call->client, tool_str(args, "sandbox"),
                                               tool_str(args, "command"), &o, &out),
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

json_t *mcp_tool_process_list(struct mcp_call *call, json_t *args)
{
        _cleanup_free_ char *out = NULL;
        json_t *list, *j;
        int rc;

        rc = cella_process_list(call->client, tool_str(args, "sandbox"), &out);
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

json_t *mcp_tool_process_kill(struct mcp_call *call, json_t *args)
{
        char *out = NULL;

        return tool_answer(call,
                           cella_process_kill(call->client, tool_str(args, "sandbox"),
                                              tool_str(args, "processId"), tool_str(args, "signal"),
                                              &out),
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

json_t *mcp_tool_process_logs(struct mcp_call *call, json_t *args)
{
        cella_exec_result *r = NULL;
        struct buf out = {0}, err = {0};
        const void *p;
        size_t n;
        json_t *res;
        bool truncated = false;
        int rc;

        rc = cella_process_logs(call->client, tool_str(args, "sandbox"),
                                tool_str(args, "processId"), &r);
        if (rc != CELLA_OK)
                return mcp_result_client_error(call, rc);
        p = cella_exec_result_stdout(r, &n);
        rc = keep_tail(&out, p, n, &truncated);
        p = cella_exec_result_stderr(r, &n);
        if (rc == 0)
                rc = keep_tail(&err, p, n, &truncated);
        cella_exec_result_free(r);
        res = rc < 0 ? NULL
                     : json_pack("{sssoso}", "processId", tool_str(args, "processId"), "stdout",
                                 tool_text_of(&out), "stderr", tool_text_of(&err));
        if (res && truncated)
                json_object_set_new(res, "truncated", json_true());
        buf_free(&out);
        buf_free(&err);
        return mcp_result_structured(res);
}
