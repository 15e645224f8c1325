/* libcella: the cella HTTP API over one reused libcurl easy handle (keep-alive). */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "client/sse.h"
#include "common/base64.h"
#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/macros.h"

struct cella_exec_result {
        int exit_code;
        struct buf out[2];
};

/* Where an answer's body goes. */
struct sink {
        cella_client *c;
        struct buf body; /* JSON answers, and error bodies always */
        int (*stream)(const char *p, size_t n, void *ud); /* success bodies, if set */
        void *ud;
        int stream_err; /* first error a stream callback returned */
        bool checked;   /* status looked at */
        bool is_error;
};

static int once = 0;

void cella_free(void *p)
{
        free(p);
}

int cella_client_new(const char *url, const char *token, cella_client **ret)
{
        cella_client *c;
        size_t n;

        if (!once) {
                if (curl_global_init(CURL_GLOBAL_DEFAULT) != 0)
                        return CELLA_ERR_TRANSPORT;
                once = 1;
        }
        if (!url)
                url = getenv("CELLA_URL");
        if (!url || !*url)
                url = "http://127.0.0.1:7070";
        if (!token)
                token = getenv("CELLA_TOKEN");
        c = calloc(1, sizeof(*c));
        if (!c)
                return CELLA_ERR_NOMEM;
        c->base = strdup(url);
        c->curl = curl_easy_init();
        if (!c->base || !c->curl) {
                cella_client_free(c);
                return CELLA_ERR_NOMEM;
        }
        n = strlen(c->base);
        while (n > 0 && c->base[n - 1] == '/')
                c->base[--n] = '\0';
        if (token && *token) {
                struct buf b = BUF_INIT;
                if (buf_printf(&b, "Authorization: Bearer %s", token) < 0) {
                        cella_client_free(c);
                        return CELLA_ERR_NOMEM;
                }
                c->auth = buf_steal(&b);
        }
        *ret = c;
        return CELLA_OK;
}

void cella_client_free(cella_client *c)
{
        if (!c)
                return;
        if (c->curl)
                curl_easy_cleanup(c->curl);
        free(c->base);
        free(c->auth);
        free(c);
}

const char *cella_client_error_code(const cella_client *c)
{
        return c->code;
}

const char *cella_client_error_message(const cella_client *c)
{
        return c->message;
}

long cella_client_http_status(const cella_client *c)
{
        return c->status;
}

const char *cella_client_url(const cella_client *c)
{
        return c->base;
}

static void set_error(cella_client *c, const char *code, const char *fmt, ...)
{
        va_list ap;
        snprintf(c->code, sizeof(c->code), "%s", code);
        va_start(ap, fmt);
        vsnprintf(c->message, sizeof(c->message), fmt, ap);
        va_end(ap);
}

static size_t on_body(char *p, size_t size, size_t nmemb, void *ud)
{
        struct sink *s = ud;
        size_t n = size * nmemb;

        if (!s->checked) {
                long st = 0;
                curl_easy_getinfo(s->c->curl, CURLINFO_RESPONSE_CODE, &st);
                s->is_error = st >= 400;
                s->checked = true;
        }
        if (s->stream && !s->is_error) {
                int r = s->stream(p, n, s->ud);
                if (r < 0) {
                        s->stream_err = r;
                        return 0; /* aborts the transfer */
                }
                return n;
        }
        if (s->body.len + n > 64u * 1024 * 1024 && !s->stream)
                return 0; /* a JSON answer this big is not one */
        if (buf_append(&s->body, p, n) < 0)
                return 0;
        return n;
}

/* Turn an error body into code/message. */
static int api_error(cella_client *c, const struct buf *body)
{
        json_t *j = body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
        const char *code = j ? json_string_value(json_object_get(j, "code")) : NULL;
        const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;

        if (code)
                set_error(c, code, "%s", msg ? msg : "");
        else
                set_error(c, "HTTP_ERROR", "HTTP %ld%s%.200s", c->status, body->len ? ": " : "",
                          body->len ? body->data : "");
        json_decref(j);
        return CELLA_ERR_API;
}

struct upload {
        const char *data; /* memory source */
        size_t len, off;
        int fd; /* or a descriptor (-1 when memory) */
        int err;
};

static size_t on_upload(char *p, size_t size, size_t nmemb, void *ud)
{
        struct upload *u = ud;
        size_t n = size * nmemb;
        if (u->fd >= 0) {
                ssize_t r;
                do
                        r = read(u->fd, p, n);
                while (r < 0 && errno == EINTR);
                if (r < 0) {
                        u->err = errno;
                        return CURL_READFUNC_ABORT;
                }
                return (size_t)r;
        }
        n = MIN(n, u->len - u->off);
        memcpy(p, u->data + u->off, n);
        u->off += n;
        return n;
}

/* One request. body: JSON text (or NULL); up: a raw upload (or NULL); accept: Accept
 * header value (or NULL). */
static int perform(cella_client *c, const char *method, const char *url, const char *body,
                   struct upload *up, const char *accept, struct sink *s)
{
        struct curl_slist *h = NULL;
        char accept_hdr[128];
        CURLcode rc;
        int r = CELLA_OK;

        c->code[0] = '\0';
        c->message[0] = '\0';
        c->status = 0;
        s->c = c;
        curl_easy_reset(c->curl);
        curl_easy_setopt(c->curl, CURLOPT_URL, url);
        curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
        curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
        h = curl_slist_append(h, "Expect:");
        if (c->auth)
                h = curl_slist_append(h, c->auth);
        if (accept) {
                snprintf(accept_hdr, sizeof(accept_hdr), "Accept: %s", accept);
                h = curl_slist_append(h, accept_hdr);
        }
        if (body) {
                h = curl_slist_append(h, "Content-Type: application/json");
                curl_easy_setopt(c->curl, CURLOPT_POSTFIELDS, body);
                curl_easy_setopt(c->curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)strlen(body));
        } else if (up) {
                struct stat st;
                curl_easy_setopt(c->curl, CURLOPT_UPLOAD, 1L);
                curl_easy_setopt(c->curl, CURLOPT_READFUNCTION, on_upload);
                curl_easy_setopt(c->curl, CURLOPT_READDATA, up);
                h = curl_slist_append(h, "Content-Type: application/octet-stream");
                if (up->fd < 0)
                        curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)up->len);
                else if (fstat(up->fd, &st) == 0 && S_ISREG(st.st_mode) &&
                         lseek(up->fd, 0, SEEK_CUR) == 0)
                        curl_easy_setopt(c->curl, CURLOPT_INFILESIZE_LARGE, (curl_off_t)st.st_size);
                /* else: chunked transfer, any size */
        }
        curl_easy_setopt(c->curl, CURLOPT_CUSTOMREQUEST, method);
        if (strcmp(method, "HEAD") == 0)
                curl_easy_setopt(c->curl, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c->curl, CURLOPT_HTTPHEADER, h);
        rc = curl_easy_perform(c->curl);
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &c->status);
        curl_slist_free_all(h);

        if (s->stream_err) {
                r = s->stream_err;
        } else if (up && up->err) {
                set_error(c, "IO_ERROR", "read upload: %s", strerror(up->err));
                errno = up->err;
                r = CELLA_ERR_IO;
        } else if (rc != CURLE_OK && !(s->is_error && rc == CURLE_WRITE_ERROR)) {
                set_error(c, "TRANSPORT_ERROR", "%s: %s", c->base, curl_easy_strerror(rc));
                r = CELLA_ERR_TRANSPORT;
        } else if (c->status >= 400) {
                r = api_error(c, &s->body);
        }
        return r;
}

/* base + "/v1/sandboxes/" + escaped name + suffix [+ "?path=" escaped path]. */
static char *sandbox_url(cella_client *c, const char *name, const char *suffix, const char *qkey,
                         const char *qval, const char *extra_query)
{
        struct buf b = BUF_INIT;
        char *en = curl_easy_escape(c->curl, name, 0);
        char *ev = qval ? curl_easy_escape(c->curl, qval, 0) : NULL;
        int r = 0;

        if (!en || (qval && !ev))
                r = -ENOMEM;
        if (r == 0)
                r = buf_printf(&b, "%s/v1/sandboxes/%s%s", c->base, en, suffix ? suffix : "");
        if (r == 0 && qkey)
                r = buf_printf(&b, "?%s=%s", qkey, ev);
        if (r == 0 && extra_query)
                r = buf_printf(&b, "%s%s", qkey ? "&" : "?", extra_query);
        curl_free(en);
        curl_free(ev);
        if (r < 0) {
                buf_free(&b);
                return NULL;
        }
        return buf_steal(&b);
}

static int finish_json(struct sink *s, int r, char **ret)
{
        if (r == CELLA_OK && ret) {
                if (!s->body.data && buf_reserve(&s->body, 0) < 0)
                        r = CELLA_ERR_NOMEM;
                else
                        *ret = buf_steal(&s->body);
        }
        buf_free(&s->body);
        return r;
}

int cella_request(cella_client *c, const char *method, const char *path, const char *json_body,
                  char **ret_body)
{
        struct sink s = {.body = BUF_INIT};
        struct buf url = BUF_INIT;
        int r;

        if (buf_printf(&url, "%s%s", c->base, path) < 0)
                return CELLA_ERR_NOMEM;
        r = perform(c, method, url.data, json_body, NULL, NULL, &s);
        buf_free(&url);
        return finish_json(&s, r, ret_body);
}

static int request_url(cella_client *c, const char *method, char *url, const char *body, char **ret)
{
        struct sink s = {.body = BUF_INIT};
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = perform(c, method, url, body, NULL, NULL, &s);
        free(url);
        return finish_json(&s, r, ret);
}

static int request_json(cella_client *c, const char *method, char *url, json_t *body, char **ret)
{
        char *text = NULL;
        int r;
        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                json_decref(body);
                if (!text) {
                        free(url);
                        return CELLA_ERR_NOMEM;
                }
        }
        r = request_url(c, method, url, text, ret);
        free(text);
        return r;
}

/* "K=V" list to a JSON object; NULL on a malformed entry. */
static json_t *kv_object(const char *const *kv)
{
        json_t *o = json_object();
        for (; o && kv && *kv; kv++) {
                const char *eq = strchr(*kv, '=');
                char key[256];
                if (!eq || eq == *kv || (size_t)(eq - *kv) >= sizeof(key)) {
                        json_decref(o);
                        return NULL;
                }
                memcpy(key, *kv, (size_t)(eq - *kv));
                key[eq - *kv] = '\0';
                if (json_object_set_new(o, key, json_string(eq + 1)) < 0) {
                        json_decref(o);
                        return NULL;
                }
        }
        return o;
}

int cella_health(cella_client *c, char **ret_json)
{
        return cella_request(c, "GET", "/v1/health", NULL, ret_json);
}

int cella_sandbox_create(cella_client *c, const char *name, const struct cella_sandbox_options *o,
                         char **ret_json)
{
        json_t *body = json_object();
        if (!body)
                return CELLA_ERR_NOMEM;
        if (o && o->image)
                json_object_set_new(body, "image", json_string(o->image));
        if (o && o->instance_type)
                json_object_set_new(body, "instanceType", json_string(o->instance_type));
        if (o && o->sleep_after)
                json_object_set_new(body, "sleepAfter", json_string(o->sleep_after));
        if (o && o->keep_alive)
                json_object_set_new(body, "keepAlive", json_true());
        if (o && o->no_default_session)
                json_object_set_new(body, "enableDefaultSession", json_false());
        if (o && o->network)
                json_object_set_new(body, "network", json_string(o->network));
        if (o && o->network_allow) {
                json_t *a = json_array();
                for (size_t i = 0; a && o->network_allow[i]; i++)
                        json_array_append_new(a, json_string(o->network_allow[i]));
                json_object_set_new(body, "networkAllow", a);
        }
        if (o && o->env) {
                json_t *e = kv_object(o->env);
                if (!e) {
                        json_decref(body);
                        set_error(c, "VALIDATION_FAILED", "env entries must be K=V");
                        return CELLA_ERR_INVALID;
                }
                json_object_set_new(body, "env", e);
        }
        if (o && o->labels) {
                json_t *l = kv_object(o->labels);
                if (!l) {
                        json_decref(body);
                        set_error(c, "VALIDATION_FAILED", "labels must be K=V");
                        return CELLA_ERR_INVALID;
                }
                json_object_set_new(body, "labels", l);
        }
        return request_json(c, "PUT", sandbox_url(c, name, NULL, NULL, NULL, NULL), body, ret_json);
}

int cella_sandbox_info(cella_client *c, const char *name, char **ret_json)
{
        return request_url(c, "GET", sandbox_url(c, name, NULL, NULL, NULL, NULL), NULL, ret_json);
}

int cella_sandbox_list(cella_client *c, char **ret_json)
{
        return cella_request(c, "GET", "/v1/sandboxes", NULL, ret_json);
}

int cella_sandbox_destroy(cella_client *c, const char *name, bool *ret_existed)
{
        char *body = NULL;
        int r = request_url(c, "DELETE", sandbox_url(c, name, NULL, NULL, NULL, NULL), NULL, &body);
        if (r == CELLA_OK && ret_existed) {
                _cleanup_json_ json_t *j = json_loads(body, 0, NULL);
                *ret_existed = json_is_true(json_object_get(j, "destroyed"));
        }
        free(body);
        return r;
}

/* {"K": "V" | null} from "K=V" / "K" strings; NULL (error set) if one is malformed. */
static json_t *env_vars_object(cella_client *c, const char *const *vars)
{
        json_t *o = json_object();

        for (; o && vars && *vars; vars++) {
                const char *eq = strchr(*vars, '=');
                size_t klen = eq ? (size_t)(eq - *vars) : strlen(*vars);
                char key[256];

                if (klen == 0 || klen >= sizeof(key)) {
                        json_decref(o);
                        set_error(c, "VALIDATION_FAILED", "variables are K=V (set) or K (unset)");
                        return NULL;
                }
                memcpy(key, *vars, klen);
                key[klen] = '\0';
                json_object_set_new(o, key, eq ? json_string(eq + 1) : json_null());
        }
        if (!o)
                set_error(c, "INTERNAL_ERROR", "out of memory");
        return o;
}

int cella_sandbox_set_env(cella_client *c, const char *name, const char *const *vars)
{
        json_t *o = env_vars_object(c, vars);

        if (!o)
                return CELLA_ERR_INVALID;
        return request_json(c, "POST", sandbox_url(c, name, "/env", NULL, NULL, NULL),
                            json_pack("{s:o}", "vars", o), NULL);
}

int cella_session_set_env(cella_client *c, const char *sandbox, const char *id,
                          const char *const *vars)
{
        json_t *o = env_vars_object(c, vars);

        if (!o)
                return CELLA_ERR_INVALID;
        return request_json(c, "POST", sandbox_url(c, sandbox, "/env", NULL, NULL, NULL),
                            json_pack("{s:o, s:s}", "vars", o, "sessionId", id), NULL);
}

int cella_session_create(cella_client *c, const char *sandbox,
                         const struct cella_session_options *o, char **ret_json)
{
        json_t *b = json_object();

        if (b && o && o->id)
                json_object_set_new(b, "id", json_string(o->id));
        if (b && o && o->cwd)
                json_object_set_new(b, "cwd", json_string(o->cwd));
        if (b && o && o->command_timeout_ms > 0)
                json_object_set_new(b, "commandTimeoutMs", json_integer(o->command_timeout_ms));
        if (b && o && o->env) {
                json_t *e = kv_object(o->env);

                if (!e) {
                        json_decref(b);
                        set_error(c, "VALIDATION_FAILED", "env must be K=V");
                        return CELLA_ERR_INVALID;
                }
                json_object_set_new(b, "env", e);
        }
        if (!b)
                return CELLA_ERR_NOMEM;
        return request_json(c, "POST", sandbox_url(c, sandbox, "/sessions", NULL, NULL, NULL), b,
                            ret_json);
}

int cella_session_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return request_json(c, "GET", sandbox_url(c, sandbox, "/sessions", NULL, NULL, NULL), NULL,
                            ret_json);
}

int cella_port_expose(cella_client *c, const char *sandbox, int port, const char *name,
                      const char *token, char **ret_json)
{
        json_t *b = json_pack("{s:i}", "port", port);

        if (b && name)
                json_object_set_new(b, "name", json_string(name));
        if (b && token)
                json_object_set_new(b, "token", json_string(token));
        if (!b)
                return CELLA_ERR_NOMEM;
        return request_json(c, "POST", sandbox_url(c, sandbox, "/ports", NULL, NULL, NULL), b,
                            ret_json);
}

int cella_port_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return request_json(c, "GET", sandbox_url(c, sandbox, "/ports", NULL, NULL, NULL), NULL,
                            ret_json);
}

int cella_port_unexpose(cella_client *c, const char *sandbox, int port)
{
        char sub[32];

        snprintf(sub, sizeof(sub), "/ports/%d", port);
        return request_json(c, "DELETE", sandbox_url(c, sandbox, sub, NULL, NULL, NULL), NULL,
                            NULL);
}

/* DELETE /v1/sandboxes/{sandbox}/{collection}/{id}, the id escaped. */
static int delete_member(cella_client *c, const char *sandbox, const char *collection,
                         const char *id)
{
        struct buf sub = BUF_INIT;
        char *eid = curl_easy_escape(c->curl, id, 0);
        int r;

        if (!eid || buf_printf(&sub, "/%s/%s", collection, eid) < 0) {
                curl_free(eid);
                return CELLA_ERR_NOMEM;
        }
        curl_free(eid);
        r = request_json(c, "DELETE", sandbox_url(c, sandbox, sub.data, NULL, NULL, NULL), NULL,
                         NULL);
        buf_free(&sub);
        return r;
}

int cella_session_delete(cella_client *c, const char *sandbox, const char *id)
{
        return delete_member(c, sandbox, "sessions", id);
}

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
                json_t *e = kv_object(o->env);
                if (!e) {
                        json_decref(b);
                        return NULL;
                }
                json_object_set_new(b, "env", e);
        }
        return b;
}

/* A JSON string field, base64-decoded when enc says so, appended to out. */
static int take_output(json_t *obj, const char *field, const char *enc_field, struct buf *out)
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
                set_error(c, "VALIDATION_FAILED", "invalid exec options (env must be K=V)");
                return CELLA_ERR_INVALID;
        }
        r = request_json(c, "POST", sandbox_url(c, sandbox, "/exec", NULL, NULL, NULL), body,
                         &text);
        if (r < 0)
                return r;
        j = json_loads(text, JSON_ALLOW_NUL, NULL);
        free(text);
        res = calloc(1, sizeof(*res));
        if (!j || !res || !json_is_integer(json_object_get(j, "exitCode"))) {
                free(res);
                set_error(c, "INVALID_RESPONSE", "exec answer is not an ExecResult");
                return CELLA_ERR_INVALID;
        }
        res->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
        if (take_output(j, "stdout", "stdoutEncoding", &res->out[0]) < 0 ||
            take_output(j, "stderr", "stderrEncoding", &res->out[1]) < 0) {
                cella_exec_result_free(res);
                set_error(c, "INVALID_RESPONSE", "exec answer has malformed output");
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
        struct sse_parser sse;
        int exit_code;
        bool completed;
        bool failed;
        bool error_has_exit_code; /* SESSION_TERMINATED carries the shell's code */
};

static int on_exec_event(const char *event, const char *data, size_t len, void *ud)
{
        struct exec_stream *x = ud;
        _cleanup_json_ json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
        const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;
        int r = 0;

        if (!type) {
                set_error(x->c, "INVALID_RESPONSE", "malformed exec event");
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
                if (take_output(j, "data", "encoding", &b) < 0) {
                        set_error(x->c, "INVALID_RESPONSE", "malformed output event");
                        r = CELLA_ERR_INVALID;
                } else if (fn && b.len && fn(b.data, b.len, x->cb->userdata) != 0) {
                        set_error(x->c, "CANCELLED", "stopped by the caller");
                        r = CELLA_ERR_CALLBACK;
                }
                buf_free(&b);
        } else if (strcmp(type, "complete") == 0 || strcmp(type, "exit") == 0) {
                x->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
                x->completed = true;
        } else if (strcmp(type, "error") == 0) {
                const char *code = json_string_value(json_object_get(j, "code"));
                const char *msg = json_string_value(json_object_get(j, "error"));
                set_error(x->c, code ? code : "INTERNAL_ERROR", "%s", msg ? msg : "");
                x->failed = true;
                if (json_is_integer(json_object_get(j, "exitCode"))) {
                        x->exit_code = (int)json_integer_value(json_object_get(j, "exitCode"));
                        x->error_has_exit_code = true;
                }
        }
        return r;
}

/* Feed an SSE chunk to p; a line too long for the parser is an invalid response. */
static int sse_feed(cella_client *c, struct sse_parser *p, const char *chunk, size_t n,
                    sse_event_fn fn, void *ud)
{
        int r = sse_parser_feed(p, chunk, n, fn, ud);

        if (r == -E2BIG || r == -ENOMEM) {
                set_error(c, "INVALID_RESPONSE", "event stream line too long");
                return CELLA_ERR_INVALID;
        }
        return r;
}

static int exec_sse_chunk(const char *p, size_t n, void *ud)
{
        struct exec_stream *x = ud;

        return sse_feed(x->c, &x->sse, p, n, on_exec_event, x);
}

static int event_stream(cella_client *c, const char *method, char *url, const char *body,
                        const struct cella_exec_callbacks *cb, int *ret_exit_code);

int cella_exec_stream(cella_client *c, const char *sandbox, const char *command,
                      const struct cella_exec_options *o, const struct cella_exec_callbacks *cb,
                      int *ret_exit_code)
{
        json_t *body = exec_body(command, o);
        char *text, *url;
        int r;

        if (!body) {
                set_error(c, "VALIDATION_FAILED", "invalid exec options (env must be K=V)");
                return CELLA_ERR_INVALID;
        }
        text = json_dumps(body, JSON_COMPACT);
        json_decref(body);
        url = sandbox_url(c, sandbox, "/exec", NULL, NULL, NULL);
        if (!text || !url) {
                free(text);
                free(url);
                return CELLA_ERR_NOMEM;
        }
        /* event_stream frees url */
        r = event_stream(c, "POST", url, text, cb, ret_exit_code);
        free(text);
        return r;
}

/* ---- file watch ---- */

/* An SSE answer whose events are JSON objects passed to on_event as they are (file watch,
 * code runs); an error event ends it as the call's failure. */
struct json_events {
        cella_client *c;
        struct sse_parser sse;
        int (*on_event)(const char *json, size_t len, void *userdata);
        void *userdata;
        bool failed;
        bool code_run; /* code events: an error with a "code" is the run's failure, one
                        * without is the code's own error, passed on */
};

static int on_json_event(const char *event, const char *data, size_t len, void *ud)
{
        struct json_events *x = ud;
        _cleanup_json_ json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
        const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;
        int r = 0;

        (void)event;
        if (!type) {
                set_error(x->c, "INVALID_RESPONSE", "malformed event");
                return CELLA_ERR_INVALID;
        }
        if (strcmp(type, "error") == 0 && (!x->code_run || json_object_get(j, "code"))) {
                const char *code = json_string_value(json_object_get(j, "code"));
                const char *msg = json_string_value(json_object_get(j, "error"));

                if (!msg)
                        msg = json_string_value(json_object_get(j, "message"));

                set_error(x->c, code ? code : "INTERNAL_ERROR", "%s", msg ? msg : "");
                x->failed = true;
        } else if (x->on_event && x->on_event(data, len, x->userdata) != 0) {
                set_error(x->c, "CANCELLED", "stopped by the caller");
                r = CELLA_ERR_CALLBACK;
        }
        return r;
}

static int json_events_chunk(const char *p, size_t n, void *ud)
{
        struct json_events *x = ud;

        return sse_feed(x->c, &x->sse, p, n, on_json_event, x);
}

static json_t *string_array(const char *const *v)
{
        json_t *a = json_array();

        for (size_t i = 0; a && v[i]; i++)
                if (json_array_append_new(a, json_string(v[i])) < 0) {
                        json_decref(a);
                        return NULL;
                }
        return a;
}

int cella_watch(cella_client *c, const char *sandbox, const char *path,
                const struct cella_watch_options *o,
                int (*on_event)(const char *json, size_t len, void *userdata), void *userdata)
{
        struct json_events x = {.c = c, .on_event = on_event, .userdata = userdata};
        struct sink s = {.body = BUF_INIT, .stream = json_events_chunk, .ud = &x};
        _cleanup_json_ json_t *b =
                json_pack("{s:s, s:b}", "path", path, "recursive", !(o && o->no_recursive));
        char *text = NULL, *url = NULL;
        int r = CELLA_ERR_NOMEM;

        if (b && o && o->include)
                json_object_set_new(b, "include", string_array(o->include));
        if (b && o && o->exclude)
                json_object_set_new(b, "exclude", string_array(o->exclude));
        if (b)
                text = json_dumps(b, JSON_COMPACT);
        url = sandbox_url(c, sandbox, "/files/watch", NULL, NULL, NULL);
        if (!text || !url)
                goto out;
        sse_parser_init(&x.sse, CELLA_CLIENT_SSE_LINE_MAX);
        r = perform(c, "POST", url, text, NULL, "text/event-stream", &s);
        sse_parser_free(&x.sse);
        buf_free(&s.body);
        if (r >= 0 && x.failed)
                r = CELLA_ERR_API;
out:
        free(text);
        free(url);
        return r;
}

/* ---- code interpreter ---- */

int cella_context_create(cella_client *c, const char *sandbox,
                         const struct cella_context_options *o, char **ret_json)
{
        json_t *b = json_pack("{s:s}", "language", o && o->language ? o->language : "python");

        if (!b)
                return CELLA_ERR_NOMEM;
        if (o && o->cwd)
                json_object_set_new(b, "cwd", json_string(o->cwd));
        if (o && o->env) {
                json_t *e = kv_object(o->env);

                if (!e) {
                        json_decref(b);
                        set_error(c, "VALIDATION_FAILED", "env must be K=V");
                        return CELLA_ERR_INVALID;
                }
                json_object_set_new(b, "env", e);
        }
        return request_json(c, "POST", sandbox_url(c, sandbox, "/contexts", NULL, NULL, NULL), b,
                            ret_json);
}

int cella_context_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return request_url(c, "GET", sandbox_url(c, sandbox, "/contexts", NULL, NULL, NULL), NULL,
                           ret_json);
}

int cella_context_delete(cella_client *c, const char *sandbox, const char *id)
{
        return delete_member(c, sandbox, "contexts", id);
}

int cella_code_run(cella_client *c, const char *sandbox, const char *code,
                   const struct cella_code_options *o,
                   int (*on_event)(const char *json, size_t len, void *userdata), void *userdata,
                   char **ret_json)
{
        struct json_events x = {
                .c = c, .on_event = on_event, .userdata = userdata, .code_run = true};
        struct sink s = {.body = BUF_INIT, .stream = json_events_chunk, .ud = &x};
        json_t *b = json_pack("{s:s}", "code", code ? code : "");
        char *text = NULL, *url;
        int r = CELLA_ERR_NOMEM;

        if (b && o && o->language)
                json_object_set_new(b, "language", json_string(o->language));
        if (b && o && o->context_id)
                json_object_set_new(b, "contextId", json_string(o->context_id));
        if (b && o && o->timeout_ms > 0)
                json_object_set_new(b, "timeout", json_integer(o->timeout_ms));
        url = sandbox_url(c, sandbox, "/code", NULL, NULL, NULL);
        if (!on_event)
                return b ? request_json(c, "POST", url, b, ret_json) : (free(url), r);
        if (b)
                text = json_dumps(b, JSON_COMPACT);
        json_decref(b);
        if (!text || !url)
                goto out;
        /* events carry rich results (a PNG is a base64 line) */
        sse_parser_init(&x.sse, CELLA_CLIENT_SSE_CODE_LINE_MAX);
        r = perform(c, "POST", url, text, NULL, "text/event-stream", &s);
        sse_parser_free(&x.sse);
        buf_free(&s.body);
        if (r >= 0 && x.failed)
                r = CELLA_ERR_API;
out:
        free(text);
        free(url);
        return r;
}

/* ---- background processes ---- */

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
        url = sandbox_url(c, sandbox, b.data, NULL, NULL, extra_query);
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
        if (o && o->env) {
                json_t *e = kv_object(o->env);

                if (!e) {
                        json_decref(b);
                        set_error(c, "VALIDATION_FAILED", "env must be K=V");
                        return CELLA_ERR_INVALID;
                }
                json_object_set_new(b, "env", e);
        }
        return request_json(c, "POST", proc_url(c, sandbox, NULL, NULL, NULL), b, ret_json);
}

int cella_git_checkout(cella_client *c, const char *sandbox, const char *repo_url,
                       const struct cella_git_options *o, char **ret_json)
{
        json_t *b = json_pack("{s:s?}", "repoUrl", repo_url);

        if (!repo_url) {
                json_decref(b);
                set_error(c, "INVALID_GIT_URL", "no repository URL");
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
        return request_json(c, "POST", sandbox_url(c, sandbox, "/git/checkout", NULL, NULL, NULL),
                            b, ret_json);
}

int cella_process_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return request_url(c, "GET", proc_url(c, sandbox, NULL, NULL, NULL), NULL, ret_json);
}

int cella_process_get(cella_client *c, const char *sandbox, const char *id, char **ret_json)
{
        return request_url(c, "GET", proc_url(c, sandbox, id, NULL, NULL), NULL, ret_json);
}

int cella_process_kill(cella_client *c, const char *sandbox, const char *id, const char *signal,
                       char **ret_json)
{
        return request_json(c, "DELETE", proc_url(c, sandbox, id, NULL, NULL),
                            signal ? json_pack("{s:s}", "signal", signal) : NULL, ret_json);
}

int cella_process_kill_all(cella_client *c, const char *sandbox, const char *signal,
                           int *ret_killed)
{
        char *text = NULL;
        _cleanup_json_ json_t *j = NULL;
        int r = request_json(c, "DELETE", proc_url(c, sandbox, NULL, NULL, NULL),
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
        int r = request_url(c, "GET", proc_url(c, sandbox, id, "/logs", NULL), NULL, &text);

        if (r < 0)
                return r;
        j = json_loads(text, JSON_ALLOW_NUL, NULL);
        free(text);
        res = calloc(1, sizeof(*res));
        if (!j || !res || take_output(j, "stdout", "stdoutEncoding", &res->out[0]) < 0 ||
            take_output(j, "stderr", "stderrEncoding", &res->out[1]) < 0) {
                cella_exec_result_free(res);
                set_error(c, "INVALID_RESPONSE", "logs answer has malformed output");
                return CELLA_ERR_INVALID;
        }
        *ret = res;
        return CELLA_OK;
}

/* An SSE GET/POST whose events are the exec stream's (stdout, stderr, exit/complete,
 * error). */
static int event_stream(cella_client *c, const char *method, char *url, const char *body,
                        const struct cella_exec_callbacks *cb, int *ret_exit_code)
{
        struct exec_stream x = {.c = c, .cb = cb};
        struct sink s = {.body = BUF_INIT, .stream = exec_sse_chunk, .ud = &x};
        int r;

        if (!url)
                return CELLA_ERR_NOMEM;
        sse_parser_init(&x.sse, CELLA_CLIENT_SSE_LINE_MAX);
        r = perform(c, method, url, body, NULL, "text/event-stream", &s);
        free(url);
        sse_parser_free(&x.sse);
        buf_free(&s.body);
        if (r < 0)
                return r;
        if (x.failed) {
                if (ret_exit_code && x.error_has_exit_code)
                        *ret_exit_code = x.exit_code;
                return CELLA_ERR_API;
        }
        if (!x.completed) {
                set_error(c, "INCOMPLETE", "the event stream ended before the command did");
                return CELLA_ERR_TRANSPORT;
        }
        if (ret_exit_code)
                *ret_exit_code = x.exit_code;
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
        return request_json(c, "POST", proc_url(c, sandbox, id, "/waitForLog", NULL), b, ret_json);
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
        return request_json(c, "POST", proc_url(c, sandbox, id, "/waitForPort", NULL), b, ret_json);
}

int cella_process_wait_exit(cella_client *c, const char *sandbox, const char *id, long timeout_ms,
                            char **ret_json)
{
        json_t *b = timeout_ms > 0 ? json_pack("{s:I}", "timeout", (json_int_t)timeout_ms)
                                   : json_object();

        if (!b)
                return CELLA_ERR_NOMEM;
        return request_json(c, "POST", proc_url(c, sandbox, id, "/waitForExit", NULL), b, ret_json);
}

static int file_put(cella_client *c, const char *sandbox, const char *path, struct upload *up)
{
        struct sink s = {.body = BUF_INIT};
        char *url = sandbox_url(c, sandbox, "/files", "path", path, NULL);
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = perform(c, "PUT", url, NULL, up, NULL, &s);
        free(url);
        return finish_json(&s, r, NULL);
}

int cella_file_write(cella_client *c, const char *sandbox, const char *path, const void *data,
                     size_t len)
{
        struct upload up = {.data = data, .len = len, .fd = -1};
        return file_put(c, sandbox, path, &up);
}

int cella_file_write_fd(cella_client *c, const char *sandbox, const char *path, int fd)
{
        struct upload up = {.fd = fd};
        return file_put(c, sandbox, path, &up);
}

static int write_fd_chunk(const char *p, size_t n, void *ud)
{
        int fd = *(int *)ud;
        while (n > 0) {
                ssize_t w = write(fd, p, n);
                if (w < 0 && errno == EINTR)
                        continue;
                if (w < 0)
                        return CELLA_ERR_IO;
                p += w;
                n -= (size_t)w;
        }
        return 0;
}

int cella_file_read_fd(cella_client *c, const char *sandbox, const char *path, int fd)
{
        struct sink s = {.body = BUF_INIT, .stream = write_fd_chunk, .ud = &fd};
        char *url = sandbox_url(c, sandbox, "/files", "path", path, NULL);
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = perform(c, "GET", url, NULL, NULL, NULL, &s);
        if (r == CELLA_ERR_IO)
                set_error(c, "IO_ERROR", "write: %s", strerror(errno));
        free(url);
        return finish_json(&s, r, NULL);
}

int cella_file_list(cella_client *c, const char *sandbox, const char *path, bool recursive,
                    bool include_hidden, char **ret_json)
{
        char q[64];
        snprintf(q, sizeof(q), "recursive=%s&includeHidden=%s", recursive ? "true" : "false",
                 include_hidden ? "true" : "false");
        return request_url(c, "GET", sandbox_url(c, sandbox, "/files/list", "path", path, q), NULL,
                           ret_json);
}

int cella_file_exists(cella_client *c, const char *sandbox, const char *path, bool *ret)
{
        char *body = NULL;
        int r = request_url(c, "GET", sandbox_url(c, sandbox, "/files/exists", "path", path, NULL),
                            NULL, &body);
        if (r == CELLA_OK) {
                _cleanup_json_ json_t *j = json_loads(body, 0, NULL);
                *ret = json_is_true(json_object_get(j, "exists"));
        }
        free(body);
        return r;
}

int cella_file_mkdir(cella_client *c, const char *sandbox, const char *path, bool recursive)
{
        return request_json(c, "POST", sandbox_url(c, sandbox, "/files/mkdir", NULL, NULL, NULL),
                            json_pack("{s:s, s:b}", "path", path, "recursive", recursive), NULL);
}

int cella_file_move(cella_client *c, const char *sandbox, const char *from, const char *to)
{
        return request_json(c, "POST", sandbox_url(c, sandbox, "/files/move", NULL, NULL, NULL),
                            json_pack("{s:s, s:s}", "from", from, "to", to), NULL);
}

int cella_file_delete(cella_client *c, const char *sandbox, const char *path, bool recursive)
{
        return request_url(c, "DELETE",
                           sandbox_url(c, sandbox, "/files", "path", path,
                                       recursive ? "recursive=true" : NULL),
                           NULL, NULL);
}

int cella_image_list(cella_client *c, char **ret_json)
{
        return cella_request(c, "GET", "/v1/images", NULL, ret_json);
}

struct build_stream {
        cella_client *c;
        struct sse_parser sse;
        void (*on_line)(const char *line, size_t len, void *userdata);
        void *ud;
        bool completed, failed;
};

static int on_build_event(const char *event, const char *data, size_t len, void *ud)
{
        struct build_stream *b = ud;
        _cleanup_json_ json_t *j = json_loadb(data, len, 0, NULL);
        const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;

        if (type && strcmp(type, "log") == 0) {
                json_t *d = json_object_get(j, "data");
                if (json_is_string(d) && b->on_line)
                        b->on_line(json_string_value(d), json_string_length(d), b->ud);
        } else if (type && strcmp(type, "complete") == 0) {
                json_t *code = json_object_get(j, "exitCode");
                if (code && json_integer_value(code) != 0) {
                        set_error(b->c, "IMAGE_BUILD_FAILED", "image build exited with %d",
                                  (int)json_integer_value(code));
                        b->failed = true;
                } else {
                        b->completed = true;
                }
        } else if (type && strcmp(type, "error") == 0) {
                const char *code = json_string_value(json_object_get(j, "code"));
                const char *msg = json_string_value(json_object_get(j, "error"));
                set_error(b->c, code ? code : "IMAGE_BUILD_FAILED", "%s", msg ? msg : "");
                b->failed = true;
        }
        return 0;
}

static int build_chunk(const char *p, size_t n, void *ud)
{
        struct build_stream *b = ud;

        return sse_feed(b->c, &b->sse, p, n, on_build_event, b);
}

/* /v1/images/NAME[suffix] (NAME escaped); NULL when out of memory. */
static char *image_url(cella_client *c, const char *name, const char *suffix)
{
        char *en = curl_easy_escape(c->curl, name, 0);
        struct buf url = BUF_INIT;

        if (!en || buf_printf(&url, "%s/v1/images/%s%s", c->base, en, suffix) < 0) {
                curl_free(en);
                buf_free(&url);
                return NULL;
        }
        curl_free(en);
        return buf_steal(&url);
}

int cella_image_build(cella_client *c, const char *name,
                      void (*on_line)(const char *line, size_t len, void *userdata), void *userdata)
{
        return cella_image_build_packages(c, name, NULL, 0, on_line, userdata);
}

int cella_image_build_packages(cella_client *c, const char *name, const char *const *packages,
                               size_t npackages,
                               void (*on_line)(const char *line, size_t len, void *userdata),
                               void *userdata)
{
        struct build_stream b = {.c = c, .on_line = on_line, .ud = userdata};
        struct sink s = {.body = BUF_INIT, .stream = build_chunk, .ud = &b};
        char *url = image_url(c, name, "/build"), *text = NULL;
        json_t *pk = json_array(), *body;
        int r;

        for (size_t i = 0; pk && i < npackages; i++)
                json_array_append_new(pk, json_string(packages[i]));
        body = pk ? json_pack("{s:o}", "packages", pk) : NULL;
        text = body ? json_dumps(body, JSON_COMPACT) : NULL;
        json_decref(body);
        if (!url || !text) {
                free(url);
                free(text);
                return CELLA_ERR_NOMEM;
        }
        sse_parser_init(&b.sse, 1024 * 1024);
        r = perform(c, "POST", url, text, NULL, "text/event-stream", &s);
        sse_parser_free(&b.sse);
        free(url);
        free(text);
        buf_free(&s.body);
        if (r < 0)
                return r;
        if (b.failed)
                return CELLA_ERR_API;
        if (!b.completed) {
                set_error(c, "INCOMPLETE", "the build stream ended early");
                return CELLA_ERR_TRANSPORT;
        }
        return CELLA_OK;
}

int cella_image_import(cella_client *c, const char *name, int fd, bool replace, char **ret_json)
{
        struct upload up = {.fd = fd};
        struct sink s = {.body = BUF_INIT};
        char *url = image_url(c, name, replace ? "/import?replace=true" : "/import");
        int r;

        if (!url)
                return CELLA_ERR_NOMEM;
        r = perform(c, "POST", url, NULL, &up, NULL, &s);
        free(url);
        return finish_json(&s, r, ret_json);
}

int cella_image_delete(cella_client *c, const char *name, char **ret_json)
{
        return request_url(c, "DELETE", image_url(c, name, ""), NULL, ret_json);
}

/* ---- for the other files of libcella (client-internal.h) ---- */

void client_set_error(cella_client *c, const char *code, const char *message)
{
        set_error(c, code, "%s", message);
}

int client_api_error(cella_client *c, long status, const struct buf *body)
{
        c->status = status;
        return api_error(c, body);
}

char *client_sandbox_url(cella_client *c, const char *name, const char *suffix,
                         const char *extra_query)
{
        return sandbox_url(c, name, suffix, NULL, NULL, extra_query);
}
