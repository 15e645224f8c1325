/* libcella: the cella HTTP API over one reused libcurl easy handle (keep-alive). This file
 * holds the client, one request and its answer, the helpers of client-internal.h, and the
 * calls on sandboxes, sessions and ports; the other areas are client-proc.c (exec and
 * background processes, git), client-files.c (files, watch), client-code.c (code
 * contexts and runs), client-images.c and pty.c (the terminal). */
#include <curl/curl.h>
#include <errno.h>
#include <jansson.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cella/cella.h"
#include "client/client-internal.h"
#include "client/sse.h"
#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/macros.h"

/* libcurl's global init (and with it OpenSSL's) once per process: pthread_once, since
 * clients are made on several threads (the MCP engine's workers). */
static pthread_once_t global_once = PTHREAD_ONCE_INIT;
static int global_rc;

static void global_init(void)
{
        global_rc = curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK ? 0 : CELLA_ERR_TRANSPORT;
}

int cella_global_init(void)
{
        pthread_once(&global_once, global_init);
        return global_rc;
}

void cella_free(void *p)
{
        free(p);
}

int cella_client_new(const char *url, const char *token, cella_client **ret)
{
        cella_client *c;
        size_t n;

        if (cella_global_init() < 0)
                return CELLA_ERR_TRANSPORT;
        if (!url)
                url = getenv("CELLA_URL");
        if (!url || !*url)
                url = "http://127.0.0.1:7070";
        if (!token)
                token = getenv("CELLA_TOKEN");
        c = calloc(1, sizeof(*c));
        if (!c)
                return CELLA_ERR_NOMEM;
        pthread_mutex_init(&c->sock_lock, NULL);
        c->sock = CURL_SOCKET_BAD;
        if (strncmp(url, "unix:", 5) == 0) {
                /* unix:/path or unix:///path (Docker's form): HTTP over that socket */
                const char *path = strncmp(url, "unix://", 7) == 0 ? url + 7 : url + 5;

                if (path[0] != '/') {
                        cella_client_free(c);
                        return CELLA_ERR_INVALID;
                }
                c->unix_path = strdup(path);
                url = "http://localhost";
                if (!c->unix_path) {
                        cella_client_free(c);
                        return CELLA_ERR_NOMEM;
                }
        }
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
        pthread_mutex_destroy(&c->sock_lock);
        free(c->base);
        free(c->unix_path);
        free(c->auth);
        free(c);
}

/* From any thread: a shutdown of the socket wakes the transfer blocked on it (the server
 * sees the connection end), the flag fails it and every later call. */
void cella_client_interrupt(cella_client *c)
{
        atomic_store(&c->interrupted, true);
        pthread_mutex_lock(&c->sock_lock);
        if (c->sock != CURL_SOCKET_BAD)
                shutdown(c->sock, SHUT_RDWR);
        pthread_mutex_unlock(&c->sock_lock);
}

static curl_socket_t on_open_socket(void *ud, curlsocktype purpose, struct curl_sockaddr *a)
{
        cella_client *c = ud;
        curl_socket_t fd = socket(a->family, a->socktype | SOCK_CLOEXEC, a->protocol);

        if (fd == CURL_SOCKET_BAD)
                return fd;
        pthread_mutex_lock(&c->sock_lock);
        c->sock = fd;
        if (atomic_load(&c->interrupted))
                shutdown(fd, SHUT_RDWR);
        pthread_mutex_unlock(&c->sock_lock);
        return fd;
}

static int on_close_socket(void *ud, curl_socket_t fd)
{
        cella_client *c = ud;

        pthread_mutex_lock(&c->sock_lock);
        if (c->sock == fd)
                c->sock = CURL_SOCKET_BAD;
        pthread_mutex_unlock(&c->sock_lock);
        return close(fd);
}

/* Curl's progress callback, called at least once a second: the net under the shutdown. */
static int on_xfer(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
        cella_client *c = ud;

        return atomic_load(&c->interrupted) ? 1 : 0;
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

void client_errorf(cella_client *c, const char *code, const char *fmt, ...)
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
        if (s->body.len + n > CELLA_CLIENT_JSON_ANSWER_MAX && !s->stream)
                return 0; /* a JSON answer this big is not one */
        if (buf_append(&s->body, p, n) < 0)
                return 0;
        return n;
}

static size_t on_header(char *p, size_t size, size_t nmemb, void *ud)
{
        struct sink *s = ud;

        s->header(p, size * nmemb, s->ud);
        return size * nmemb;
}

/* Turn an error body into code/message. */
static int api_error(cella_client *c, const struct buf *body)
{
        _cleanup_json_ json_t *j = body->len ? json_loadb(body->data, body->len, 0, NULL) : NULL;
        const char *code = j ? json_string_value(json_object_get(j, "code")) : NULL;
        const char *msg = j ? json_string_value(json_object_get(j, "message")) : NULL;

        if (code)
                client_errorf(c, code, "%s", msg ? msg : "");
        else
                client_errorf(c, "HTTP_ERROR", "HTTP %ld%s%.200s", c->status, body->len ? ": " : "",
                              body->len ? body->data : "");
        return CELLA_ERR_API;
}

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

int client_perform(cella_client *c, const char *method, const char *url, const char *body,
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
        if (c->unix_path)
                curl_easy_setopt(c->curl, CURLOPT_UNIX_SOCKET_PATH, c->unix_path);
        curl_easy_setopt(c->curl, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, s);
        curl_easy_setopt(c->curl, CURLOPT_CONNECTTIMEOUT_MS, CELLA_CLIENT_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(c->curl, CURLOPT_TCP_NODELAY, 1L);
        curl_easy_setopt(c->curl, CURLOPT_OPENSOCKETFUNCTION, on_open_socket);
        curl_easy_setopt(c->curl, CURLOPT_OPENSOCKETDATA, c);
        curl_easy_setopt(c->curl, CURLOPT_CLOSESOCKETFUNCTION, on_close_socket);
        curl_easy_setopt(c->curl, CURLOPT_CLOSESOCKETDATA, c);
        curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_xfer);
        curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, c);
        curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
        if (s->header) {
                curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_header);
                curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, s);
        }
        if (s->read_size)
                curl_easy_setopt(c->curl, CURLOPT_BUFFERSIZE, (long)s->read_size);
        if (atomic_load(&c->interrupted)) {
                client_errorf(c, "INTERRUPTED", "the call was interrupted");
                return CELLA_ERR_CALLBACK;
        }
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

        if (atomic_load(&c->interrupted)) {
                client_errorf(c, "INTERRUPTED", "the call was interrupted");
                r = CELLA_ERR_CALLBACK;
        } else if (s->stream_err) {
                r = s->stream_err;
        } else if (up && up->err) {
                client_errorf(c, "IO_ERROR", "read upload: %s", strerror(up->err));
                errno = up->err;
                r = CELLA_ERR_IO;
        } else if (rc != CURLE_OK && !(s->is_error && rc == CURLE_WRITE_ERROR)) {
                client_errorf(c, "TRANSPORT_ERROR", "%s%s: %s", c->unix_path ? "unix:" : "",
                              c->unix_path ? c->unix_path : c->base, curl_easy_strerror(rc));
                r = CELLA_ERR_TRANSPORT;
        } else if (c->status >= 400) {
                r = api_error(c, &s->body);
        }
        return r;
}

char *client_url(cella_client *c, const char *name, const char *suffix, const char *qkey,
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

int client_finish_json(struct sink *s, int r, char **ret)
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
        r = client_perform(c, method, url.data, json_body, NULL, NULL, &s);
        buf_free(&url);
        return client_finish_json(&s, r, ret_body);
}

int client_request_url(cella_client *c, const char *method, char *url, const char *body, char **ret)
{
        struct sink s = {.body = BUF_INIT};
        int r;
        if (!url)
                return CELLA_ERR_NOMEM;
        r = client_perform(c, method, url, body, NULL, NULL, &s);
        free(url);
        return client_finish_json(&s, r, ret);
}

int client_request_json(cella_client *c, const char *method, char *url, json_t *body, char **ret)
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
        r = client_request_url(c, method, url, text, ret);
        free(text);
        return r;
}

json_t *client_kv_object(const char *const *kv)
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

int client_delete_member(cella_client *c, const char *sandbox, const char *collection,
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
        r = client_request_json(c, "DELETE", client_url(c, sandbox, sub.data, NULL, NULL, NULL),
                                NULL, NULL);
        buf_free(&sub);
        return r;
}

/* Feed an SSE chunk to p; a line too long for the parser is an invalid response. */
static int sse_feed(cella_client *c, struct sse_parser *p, const char *chunk, size_t n,
                    sse_event_fn fn, void *ud)
{
        int r = sse_parser_feed(p, chunk, n, fn, ud);

        if (r == -E2BIG || r == -ENOMEM) {
                client_errorf(c, "INVALID_RESPONSE", "event stream line too long");
                return CELLA_ERR_INVALID;
        }
        return r;
}

/* Every chunk of an event stream through its parser. */
struct event_stream {
        cella_client *c;
        struct sse_parser sse;
        sse_event_fn on_event;
        void *ud;
};

static int event_chunk(const char *p, size_t n, void *ud)
{
        struct event_stream *x = ud;

        return sse_feed(x->c, &x->sse, p, n, x->on_event, x->ud);
}

int client_event_stream(cella_client *c, const char *method, char *url, json_t *body,
                        size_t max_line, sse_event_fn on_event, void *ud)
{
        struct event_stream x = {.c = c, .on_event = on_event, .ud = ud};
        struct sink s = {.body = BUF_INIT,
                         .stream = event_chunk,
                         .ud = &x,
                         .read_size = CELLA_CLIENT_RAW_READ};
        char *text = NULL;
        int r = CELLA_ERR_NOMEM;

        if (body) {
                text = json_dumps(body, JSON_COMPACT);
                json_decref(body);
                if (!text)
                        goto out;
        }
        if (!url)
                goto out;
        sse_parser_init(&x.sse, max_line);
        r = client_perform(c, method, url, text, NULL, "text/event-stream", &s);
        sse_parser_free(&x.sse);
        buf_free(&s.body);
out:
        free(text);
        free(url);
        return r;
}

struct json_events {
        cella_client *c;
        int (*on_event)(const char *json, size_t len, void *userdata);
        void *userdata;
        bool failed;
        bool code_run;
};

static int on_json_event(const char *event, const char *data, size_t len, void *ud)
{
        struct json_events *x = ud;
        _cleanup_json_ json_t *j = json_loadb(data, len, JSON_ALLOW_NUL, NULL);
        const char *type = j ? json_string_value(json_object_get(j, "type")) : NULL;
        int r = 0;

        (void)event;
        if (!type) {
                client_errorf(x->c, "INVALID_RESPONSE", "malformed event");
                return CELLA_ERR_INVALID;
        }
        if (strcmp(type, "error") == 0 && (!x->code_run || json_object_get(j, "code"))) {
                const char *code = json_string_value(json_object_get(j, "code"));
                const char *msg = json_string_value(json_object_get(j, "error"));

                if (!msg)
                        msg = json_string_value(json_object_get(j, "message"));

                client_errorf(x->c, code ? code : "INTERNAL_ERROR", "%s", msg ? msg : "");
                x->failed = true;
        } else if (x->on_event && x->on_event(data, len, x->userdata) != 0) {
                client_errorf(x->c, "CANCELLED", "stopped by the caller");
                r = CELLA_ERR_CALLBACK;
        }
        return r;
}

int client_json_events(cella_client *c, char *url, json_t *body, size_t max_line, bool code_run,
                       int (*on_event)(const char *json, size_t len, void *ud), void *ud)
{
        struct json_events x = {.c = c, .on_event = on_event, .userdata = ud, .code_run = code_run};
        int r = client_event_stream(c, "POST", url, body, max_line, on_json_event, &x);

        if (r >= 0 && x.failed)
                r = CELLA_ERR_API;
        return r;
}

int client_create_member(cella_client *c, const char *sandbox, const char *suffix, json_t *b,
                         const char *const *env, char **ret_json)
{
        if (!b)
                return CELLA_ERR_NOMEM;
        if (client_set_kv(c, b, "env", env, "env") < 0) {
                json_decref(b);
                return CELLA_ERR_INVALID;
        }
        return client_request_json(c, "POST", client_url(c, sandbox, suffix, NULL, NULL, NULL), b,
                                   ret_json);
}

int client_set_kv(cella_client *c, json_t *b, const char *key, const char *const *kv,
                  const char *what)
{
        json_t *o;

        if (!kv)
                return 0;
        o = client_kv_object(kv);
        if (!o) {
                client_errorf(c, "VALIDATION_FAILED", "%s must be K=V", what);
                return CELLA_ERR_INVALID;
        }
        json_object_set_new(b, key, o);
        return 0;
}

/* ---- sandboxes, sessions, ports ---- */

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
        if (o && o->sleep_mode)
                json_object_set_new(body, "sleepMode", json_string(o->sleep_mode));
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
        if (o && (client_set_kv(c, body, "env", o->env, "env entries") < 0 ||
                  client_set_kv(c, body, "labels", o->labels, "labels") < 0)) {
                json_decref(body);
                return CELLA_ERR_INVALID;
        }
        return client_request_json(c, "PUT", client_url(c, name, NULL, NULL, NULL, NULL), body,
                                   ret_json);
}

int cella_sandbox_info(cella_client *c, const char *name, char **ret_json)
{
        return client_request_url(c, "GET", client_url(c, name, NULL, NULL, NULL, NULL), NULL,
                                  ret_json);
}

int cella_sandbox_list(cella_client *c, char **ret_json)
{
        return cella_request(c, "GET", "/v1/sandboxes", NULL, ret_json);
}

int cella_sandbox_destroy(cella_client *c, const char *name, bool *ret_existed)
{
        char *body = NULL;
        int r = client_request_url(c, "DELETE", client_url(c, name, NULL, NULL, NULL, NULL), NULL,
                                   &body);
        if (r == CELLA_OK && ret_existed) {
                _cleanup_json_ json_t *j = json_loads(body, 0, NULL);
                *ret_existed = json_is_true(json_object_get(j, "destroyed"));
        }
        free(body);
        return r;
}

int cella_sandbox_sleep(cella_client *c, const char *name, char **ret_json)
{
        return client_request_url(c, "POST", client_url(c, name, "/sleep", NULL, NULL, NULL), NULL,
                                  ret_json);
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
                        client_errorf(c, "VALIDATION_FAILED",
                                      "variables are K=V (set) or K (unset)");
                        return NULL;
                }
                memcpy(key, *vars, klen);
                key[klen] = '\0';
                json_object_set_new(o, key, eq ? json_string(eq + 1) : json_null());
        }
        if (!o)
                client_errorf(c, "INTERNAL_ERROR", "out of memory");
        return o;
}

int cella_sandbox_set_env(cella_client *c, const char *name, const char *const *vars)
{
        json_t *o = env_vars_object(c, vars);

        if (!o)
                return CELLA_ERR_INVALID;
        return client_request_json(c, "POST", client_url(c, name, "/env", NULL, NULL, NULL),
                                   json_pack("{s:o}", "vars", o), NULL);
}

int cella_session_set_env(cella_client *c, const char *sandbox, const char *id,
                          const char *const *vars)
{
        json_t *o = env_vars_object(c, vars);

        if (!o)
                return CELLA_ERR_INVALID;
        return client_request_json(c, "POST", client_url(c, sandbox, "/env", NULL, NULL, NULL),
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
        return client_create_member(c, sandbox, "/sessions", b, o ? o->env : NULL, ret_json);
}

int cella_session_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return client_request_json(c, "GET", client_url(c, sandbox, "/sessions", NULL, NULL, NULL),
                                   NULL, ret_json);
}

int cella_session_delete(cella_client *c, const char *sandbox, const char *id)
{
        return client_delete_member(c, sandbox, "sessions", id);
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
        return client_request_json(c, "POST", client_url(c, sandbox, "/ports", NULL, NULL, NULL), b,
                                   ret_json);
}

int cella_port_list(cella_client *c, const char *sandbox, char **ret_json)
{
        return client_request_json(c, "GET", client_url(c, sandbox, "/ports", NULL, NULL, NULL),
                                   NULL, ret_json);
}

int cella_port_unexpose(cella_client *c, const char *sandbox, int port)
{
        char sub[32];

        snprintf(sub, sizeof(sub), "/ports/%d", port);
        return client_request_json(c, "DELETE", client_url(c, sandbox, sub, NULL, NULL, NULL), NULL,
                                   NULL);
}

/* ---- for pty.c ---- */

void client_set_error(cella_client *c, const char *code, const char *message)
{
        client_errorf(c, code, "%s", message);
}

int client_api_error(cella_client *c, long status, const struct buf *body)
{
        c->status = status;
        return api_error(c, body);
}

char *client_sandbox_url(cella_client *c, const char *name, const char *suffix,
                         const char *extra_query)
{
        return client_url(c, name, suffix, NULL, NULL, extra_query);
}
