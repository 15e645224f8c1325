/* libcella: commands (exec, buffered or streamed), background processes and git
 * checkouts. */
#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "client/raw.h"
#include "client/sse.h"
#include "common/base64.h"
#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/limits.h"

static json_t *exec_body(const char *command, const struct cella_exec_options *o)
{
        json_t *b = json_pack("{s:s}", "command", command);
        if (!b)
                return NULL;
        if (o && o->cwd)
                json_object_set_new(b, "cwd", json_string(o->cwd));
        if (o && o->timeout_ms > 0)
                json_object_set_new(b, "timeout", json_integer(o->timeout_ms));
        if (o && o->session_id)
                json_object_set_new(b, "sessionId", json_string(o->session_id));
        if (o && o->env) {
                json_t *e = client_kv_object(o->env);
                if (!e) {
                        json_decref(b);
                        return NULL;
                }
                json_object_set_new(b, "env", e);
        }
        return b;
}

/* A JSON string field, base64-decoded when enc says so, appended to out. */
static int client_take_output(json_t *obj, const char *field, const char *enc_field,
                              struct buf *out)
{
        json_t *v = json_object_get(obj, field);
        const char *enc = json_string_value(json_object_get(obj, enc_field));
        if (!json_is_string(v))
                return v ? -EINVAL : 0;
        if (enc && strcmp(enc, "base64") == 0)
                return base64_decode(out, json_string_value(v), json_string_length(v));
        return buf_append(out, json_string_value(v), json_string_length(v));
}

int cella_exec(cella_client *c, const char *sandbox, const char *command,
               const struct cella_exec_options *o, cella_exec_result **ret)
{
        json_t *body = exec_body(command, o);
        _cleanup_json_ json_t *j = NULL;
        char *text = NULL;
        cella_exec_result *res;
        int r;

        if (!body) {
                client_errorf(c, "VALIDATION_FAILED", "invalid exec options (env must be K=V)");
                return CELLA_ERR_INVALID;
        }
        r = client_request_json(c, "POST", client_url(c, sandbox, "/exec", NULL, NULL, NULL), body,
                                &text);
        if (r < 0)
                return r;
        j = json_loads(text, JSON_ALLOW_NUL, NULL);
        free(text);
        res = calloc(1, sizeof(*res));
        if (!j || !res || !json_is_integer(json_object_get(j, "exitCode"))) {
                free(res);
                client_errorf(c, "INVALID_RESPONSE", "exec answer is not an ExecResult");
                return CELLA_ERR_INVALID;
        }
        res->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
        if (client_take_output(j, "stdout", "stdoutEncoding", &res->out[0]) < 0 ||
            client_take_output(j, "stderr", "stderrEncoding", &res->out[1]) < 0) {
                cella_exec_result_free(res);
                client_errorf(c, "INVALID_RESPONSE", "exec answer has malformed output");
                return CELLA_ERR_INVALID;
        }
        *ret = res;
        return CELLA_OK;
}

int cella_exec_result_exit_code(const cella_exec_result *r)
{
        return r->exit_code;
}

const void *cella_exec_result_stdout(const cella_exec_result *r, size_t *ret_len)
{
        *ret_len = r->out[0].len;
        return r->out[0].data ? r->out[0].data : "";
}

const void *cella_exec_result_stderr(const cella_exec_result *r, size_t *ret_len)
{
        *ret_len = r->out[1].len;
        return r->out[1].data ? r->out[1].data : "";
}

void cella_exec_result_free(cella_exec_result *r)
{
        if (!r)
                return;
        buf_free(&r->out[0]);
        buf_free(&r->out[1]);
        free(r);
}

struct exec_stream {
        cella_client *c;
        const struct cella_exec_callbacks *cb;
        int exit_code;
        bool completed;
        bool failed;
        bool error_has_exit_code; /* SESSION_TERMINATED carries the shell's code */
};

static int on_exec_event(const char *event, const char *data, size_t len, void *ud)
{
        struct exec_stream *x = ud;
        const char *text;
        size_t tlen;
        int which = sse_plain_output(data, len, &text, &tlen);
        _cleanup_json_ json_t *j = NULL;

        if (which >= 0) {
                int (*fn)(const void *, size_t, void *) =
                        x->cb ? (which ? x->cb->on_stderr : x->cb->on_stdout) : NULL;

                if (fn && tlen && fn(text, tlen, x->cb->userdata) != 0) {
                        client_errorf(x->c, "CANCELLED", "stopped by the caller");
                        return CELLA_ERR_CALLBACK;
                }
                return 0;
        }
        j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
        const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;
        int r = 0;

        if (!type) {
                client_errorf(x->c, "INVALID_RESPONSE", "malformed exec event");
                return CELLA_ERR_INVALID;
        }
        if (strcmp(type, "start") == 0) {
                if (x->cb && x->cb->on_start)
                        x->cb->on_start((int)json_integer_value(json_object_get(j, "pid")),
                                        x->cb->userdata);
        } else if (strcmp(type, "stdout") == 0 || strcmp(type, "stderr") == 0) {
                struct buf b = BUF_INIT;
                bool out = type[3] == 'o';
                int (*fn)(const void *, size_t, void *) =
                        x->cb ? (out ? x->cb->on_stdout : x->cb->on_stderr) : NULL;
                if (client_take_output(j, "data", "encoding", &b) < 0) {
                        client_errorf(x->c, "INVALID_RESPONSE", "malformed output event");
                        r = CELLA_ERR_INVALID;
                } else if (fn && b.len && fn(b.data, b.len, x->cb->userdata) != 0) {
                        client_errorf(x->c, "CANCELLED", "stopped by the caller");
                        r = CELLA_ERR_CALLBACK;
                }
                buf_free(&b);
        } else if (strcmp(type, "complete") == 0 || strcmp(type, "exit") == 0) {
                x->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
                x->completed = true;
        } else if (strcmp(type, "error") == 0) {
                const char *code = json_string_value(json_object_get(j, "code"));
                const char *msg = json_string_value(json_object_get(j, "error"));
                client_errorf(x->c, code ? code : "INTERNAL_ERROR", "%s", msg ? msg : "");
                x->failed = true;
                if (json_is_integer(json_object_get(j, "exitCode"))) {
                        x->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
                        x->error_has_exit_code = true;
                }
        }
        return r;
}

/* An SSE GET/POST whose events are the exec stream's (stdout, stderr, exit/complete,
 * error). url and body are taken. */
static int event_stream(cella_client *c, const char *method, char *url, json_t *body,
                        const struct cella_exec_callbacks *cb, int *ret_exit_code)
{
        struct exec_stream x = {.c = c, .cb = cb};
        int r = client_event_stream(c, method, url, body, CELLA_CLIENT_SSE_LINE_MAX, on_exec_event,
                                    &x);

        if (r < 0)
                return r;
        if (x.failed) {
                if (ret_exit_code && x.error_has_exit_code)
                        *ret_exit_code = x.exit_code;
                return CELLA_ERR_API;
        }
        if (!x.completed) {
                client_errorf(c, "INCOMPLETE", "the event stream ended before the command did");
                return CELLA_ERR_TRANSPORT;
        }
        if (ret_exit_code)
                *ret_exit_code = x.exit_code;
        return CELLA_OK;
}

int cella_exec_stream(cella_client *c, const char *sandbox, const char *command,
                      const struct cella_exec_options *o, const struct cella_exec_callbacks *cb,
                      int *ret_exit_code)
{
        json_t *body = exec_body(command, o);

        if (!body) {
                client_errorf(c, "VALIDATION_FAILED", "invalid exec options (env must be K=V)");
                return CELLA_ERR_INVALID;
        }
        return event_stream(c, "POST", client_url(c, sandbox, "/exec", NULL, NULL, NULL), body, cb,
                            ret_exit_code);
}

/* ---- the raw form: stdout as the body, the end in trailers ---- */

struct exec_raw {
        cella_client *c;
        const struct cella_exec_callbacks *cb;
        bool started;
        struct raw_end end;
};

static int raw_body(const char *p, size_t n, void *ud)
{
        struct exec_raw *x = ud;

        if (x->cb && x->cb->on_stdout && n && x->cb->on_stdout(p, n, x->cb->userdata) != 0) {
                client_errorf(x->c, "CANCELLED", "stopped by the caller");
                return CELLA_ERR_CALLBACK;
        }
        return 0;
}

static void raw_header(const char *line, size_t n, void *ud)
{
        struct exec_raw *x = ud;

        raw_end_line(&x->end, line, n);
        if (x->end.has_pid && !x->started) {
                x->started = true;
                if (x->cb && x->cb->on_start)
                        x->cb->on_start(x->end.pid, x->cb->userdata);
        }
}

int cella_exec_raw(cella_client *c, const char *sandbox, const char *command,
                   const struct cella_exec_options *o, const struct cella_exec_callbacks *cb,
                   int *ret_exit_code)
{
        struct exec_raw x = {.c = c, .cb = cb, .end = {.err = BUF_INIT}};
        struct sink s = {.body = BUF_INIT,
                         .stream = raw_body,
                         .header = raw_header,
                         .read_size = CELLA_CLIENT_RAW_READ,
                         .ud = &x};
        json_t *body = exec_body(command, o);
        char *url = client_url(c, sandbox, "/exec", NULL, NULL, NULL);
        char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        int r;

        json_decref(body);
        if (!body || !text || !url) {
                free(text);
                free(url);
                if (!body) {
                        client_errorf(c, "VALIDATION_FAILED",
                                      "invalid exec options (env must be K=V)");
                        return CELLA_ERR_INVALID;
                }
                return CELLA_ERR_NOMEM;
        }
        r = client_perform(c, "POST", url, text, NULL, "application/octet-stream", &s);
        free(text);
        free(url);
        buf_free(&s.body);
        if (r >= 0 && x.end.err.len && cb && cb->on_stderr) {
                _cleanup_buf_ struct buf e = BUF_INIT;

                if (base64_decode(&e, x.end.err.data, x.end.err.len) < 0) {
                        client_errorf(c, "INVALID_RESPONSE", "malformed Cella-Stderr trailer");
                        r = CELLA_ERR_INVALID;
                } else if (e.len && cb->on_stderr(e.data, e.len, cb->userdata) != 0) {
                        client_errorf(c, "CANCELLED", "stopped by the caller");
                        r = CELLA_ERR_CALLBACK;
                }
        }
        raw_end_free(&x.end);
        if (r < 0)
                return r;
        if (x.end.has_error) {
                client_errorf(c, x.end.code, "%s", x.end.message);
                if (ret_exit_code && x.end.has_exit)
                        *ret_exit_code = x.end.exit_code;
                return CELLA_ERR_API;
        }
        if (!x.end.has_exit) {
                client_errorf(c, "INCOMPLETE", "the answer ended before the command did");
                return CELLA_ERR_TRANSPORT;
        }
        if (ret_exit_code)
                *ret_exit_code = x.end.exit_code;
        return CELLA_OK;
}

/* .../processes[/<id>][tail] */
static char *proc_url(cella_client *c, const char *sandbox, const char *id, const char *tail,
                      const char *extra_query)
{
        struct buf b = BUF_INIT;
        char *eid = id ? curl_easy_escape(c->curl, id, 0) : NULL;
        char *url;

        if ((id && !eid) || buf_printf(&b, "/processes%s%s%s", id ? "/" : "", id ? eid : "",
                                       tail ? tail : "") < 0) {
                curl_free(eid);
                buf_free(&b);
                return NULL;
        }
        curl_free(eid);
        url = client_url(c, sandbox, b.data, NULL, NULL, extra_query);
        buf_free(&b);
        return url;
}

int cella_process_start(cella_client *c, const char *sandbox, const char *command,
                        const struct cella_process_options *o, char **ret_json)
{
        json_t *b = json_pack("{s:s}", "command", command);

        if (!b)
                return CELLA_ERR_NOMEM;
        if (o && o->id)
                json_object_set_new(b, "processId", json_string(o->id));
        if (o && o->session_id)
                json_object_set_new(b, "sessionId", json_string(o->session_id));
        if (o && o->cwd)
                json_object_set_new(b, "cwd", json_string(o->cwd));
        return client_create_member(c, sandbox, "/processes", b, o ? o->env : NULL, ret_json);
}

int cella_process_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return client_request_url(c, "GET", proc_url(c, sandbox, NULL, NULL, NULL), NULL, ret_json);
}

int cella_process_get(cella_client *c, const char *sandbox, const char *id, char **ret_json)
{
        return client_request_url(c, "GET", proc_url(c, sandbox, id, NULL, NULL), NULL, ret_json);
}

int cella_process_kill(cella_client *c, const char *sandbox, const char *id, const char *signal,
                       char **ret_json)
{
        return client_request_json(c, "DELETE", proc_url(c, sandbox, id, NULL, NULL),
                                   signal ? json_pack("{s:s}", "signal", signal) : NULL, ret_json);
}

int cella_process_kill_all(cella_client *c, const char *sandbox, const char *signal,
                           int *ret_killed)
{
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        int r = client_request_json(c, "DELETE", proc_url(c, sandbox, NULL, NULL, NULL),
                                    signal ? json_pack("{s:s}", "signal", signal) : NULL, &text);

        if (r < 0)
                return r;
        j = json_loads(text, 0, NULL);
        free(text);
        if (ret_killed)
                *ret_killed = (int)json_integer_value(json_object_get(j, "killed"));
        return CELLA_OK;
}

int cella_process_logs(cella_client *c, const char *sandbox, const char *id,
                       cella_exec_result **ret)
{
        char *text = NULL;
        cella_exec_result *res;
        _cleanup_json_ json_t *j = NULL;
        int r = client_request_url(c, "GET", proc_url(c, sandbox, id, "/logs", NULL), NULL, &text);

        if (r < 0)
                return r;
        j = json_loads(text, JSON_ALLOW_NUL, NULL);
        free(text);
        res = calloc(1, sizeof(*res));
        if (!j || !res || client_take_output(j, "stdout", "stdoutEncoding", &res->out[0]) < 0 ||
            client_take_output(j, "stderr", "stderrEncoding", &res->out[1]) < 0) {
                cella_exec_result_free(res);
                client_errorf(c, "INVALID_RESPONSE", "logs answer has malformed output");
                return CELLA_ERR_INVALID;
        }
        *ret = res;
        return CELLA_OK;
}

int cella_process_stream(cella_client *c, const char *sandbox, const char *id,
                         const struct cella_exec_callbacks *cb, int *ret_exit_code)
{
        return event_stream(c, "GET", proc_url(c, sandbox, id, "/stream", NULL), NULL, cb,
                            ret_exit_code);
}

int cella_process_wait_log(cella_client *c, const char *sandbox, const char *id,
                           const char *pattern, bool regex, long timeout_ms, char **ret_json)
{
        json_t *b = json_pack("{s:s, s:b}", "pattern", pattern, "regex", regex);

        if (b && timeout_ms > 0)
                json_object_set_new(b, "timeout", json_integer(timeout_ms));
        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "POST", proc_url(c, sandbox, id, "/waitForLog", NULL), b,
                                   ret_json);
}

int cella_process_wait_port(cella_client *c, const char *sandbox, const char *id, int port,
                            const struct cella_wait_port_options *o, char **ret_json)
{
        json_t *b =
                json_pack("{s:i, s:s}", "port", port, "mode", o && o->http_path ? "http" : "tcp");

        if (!b)
                return CELLA_ERR_NOMEM;
        if (o && o->http_path)
                json_object_set_new(b, "path", json_string(o->http_path));
        if (o && o->status_min > 0)
                json_object_set_new(
                        b, "status",
                        json_pack("{s:i, s:i}", "min", o->status_min, "max",
                                  o->status_max >= o->status_min ? o->status_max : o->status_min));
        if (o && o->interval_ms > 0)
                json_object_set_new(b, "interval", json_integer(o->interval_ms));
        if (o && o->timeout_ms > 0)
                json_object_set_new(b, "timeout", json_integer(o->timeout_ms));
        return client_request_json(c, "POST", proc_url(c, sandbox, id, "/waitForPort", NULL), b,
                                   ret_json);
}

int cella_process_wait_exit(cella_client *c, const char *sandbox, const char *id, long timeout_ms,
                            char **ret_json)
{
        json_t *b = timeout_ms > 0 ? json_pack("{s:I}", "timeout", (json_int_t)timeout_ms)
                                   : json_object();

        if (!b)
                return CELLA_ERR_NOMEM;
        return client_request_json(c, "POST", proc_url(c, sandbox, id, "/waitForExit", NULL), b,
                                   ret_json);
}

int cella_git_checkout(cella_client *c, const char *sandbox, const char *repo_url,
                       const struct cella_git_options *o, char **ret_json)
{
        json_t *b = json_pack("{s:s?}", "repoUrl", repo_url);

        if (!repo_url) {
                json_decref(b);
                client_errorf(c, "INVALID_GIT_URL", "no repository URL");
                return CELLA_ERR_INVALID;
        }
        if (!b)
                return CELLA_ERR_NOMEM;
        if (o && o->branch)
                json_object_set_new(b, "branch", json_string(o->branch));
        if (o && o->target_dir)
                json_object_set_new(b, "targetDir", json_string(o->target_dir));
        if (o && o->depth > 0)
                json_object_set_new(b, "depth", json_integer(o->depth));
        if (o && o->timeout_ms > 0)
                json_object_set_new(b, "timeout", json_integer(o->timeout_ms));
        return client_request_json(
                c, "POST", client_url(c, sandbox, "/git/checkout", NULL, NULL, NULL), b, ret_json);
}
