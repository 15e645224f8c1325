/* The etcd client's transport (etcd.h): libcurl's multi interface on the libuv loop, the
 * documented curl_multi_socket_action pattern. curl tells which sockets to watch
 * (CURLMOPT_SOCKETFUNCTION: one uv_poll each) and when to call it back
 * (CURLMOPT_TIMERFUNCTION: one uv_timer); a finished transfer is decoded and its request
 * either answered or, on a connection error or a timed-out attempt, retried at the next
 * endpoint.
 *
 * Invariants: every request is in e->reqs from its creation until its callback has run;
 * a request's easy handle is in the multi handle exactly while an attempt runs; the
 * client's memory goes when it is closing and its last handle (timer, polls) is closed. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <jansson.h>

#include "common/base64.h"
#include "common/json-cleanup.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/timeutil.h"
#include "daemon/etcd.h"

struct etcd_req {
        struct etcd *e;
        struct etcd_req *next, *prev;
        enum etcd_op op;
        CURL *easy;
        struct curl_slist *headers;
        char *body; /* the JSON request */
        struct buf answer;
        bool too_large;
        size_t tries; /* endpoints tried */
        etcd_cb cb;
        void *userdata;
};

struct etcd_socket {
        uv_poll_t poll;
        struct etcd *e;
        struct etcd_socket *next, *prev; /* e->sockets */
        curl_socket_t fd;
};

struct etcd {
        uv_loop_t *loop;
        CURLM *multi;
        uv_timer_t timer;
        char *endpoints[CELLA_ETCD_ENDPOINTS_MAX];
        size_t n_endpoints;
        size_t current;
        struct etcd_req *reqs;
        size_t n_reqs;
        struct etcd_socket *sockets; /* whose polls are open */
        unsigned handles;            /* open uv handles (the timer, the polls) */
        bool closing;
        struct etcd_stats stats;
};

static const char *const op_paths[ETCD_OP_MAX] = {
        [ETCD_OP_RANGE] = "/v3/kv/range",
        [ETCD_OP_PUT] = "/v3/kv/put",
        [ETCD_OP_DELETE] = "/v3/kv/deleterange",
        [ETCD_OP_TXN] = "/v3/kv/txn",
        [ETCD_OP_LEASE_GRANT] = "/v3/lease/grant",
        [ETCD_OP_LEASE_KEEPALIVE] = "/v3/lease/keepalive",
        [ETCD_OP_LEASE_REVOKE] = "/v3/lease/revoke",
};

static void maybe_free(struct etcd *e)
{
        if (!e->closing || e->handles > 0)
                return;
        for (size_t i = 0; i < e->n_endpoints; i++)
                free(e->endpoints[i]);
        free(e);
}

static void on_handle_closed(uv_handle_t *h)
{
        struct etcd *e = h->data;

        if (h->type == UV_POLL)
                free((struct etcd_socket *)(void *)h); /* poll is its first member */
        e->handles--;
        maybe_free(e);
}

static void req_free(struct etcd_req *q)
{
        struct etcd *e = q->e;

        if (q->prev)
                q->prev->next = q->next;
        else
                e->reqs = q->next;
        if (q->next)
                q->next->prev = q->prev;
        e->n_reqs--;
        if (q->easy) {
                curl_multi_remove_handle(e->multi, q->easy);
                curl_easy_cleanup(q->easy);
        }
        curl_slist_free_all(q->headers);
        free(q->body);
        buf_free(&q->answer);
        free(q);
}

/* Call the request's callback with a, then free it. */
static void req_answer(struct etcd_req *q, struct etcd_answer *a)
{
        struct etcd *e = q->e;
        etcd_cb cb = q->cb;
        void *userdata = q->userdata;
        enum etcd_op op = q->op;

        e->stats.requests[op]++;
        if (a->r < 0)
                e->stats.failures[op]++;
        req_free(q);
        cb(a, userdata);
        etcd_answer_clear(a);
}

static void req_fail(struct etcd_req *q, int r, const char *what, const char *detail)
{
        struct etcd_answer a = {.r = r};

        cella_error_set(&a.err, CELLA_E_CLUSTER_UNAVAILABLE, "%s: %s", what, detail);
        req_answer(q, &a);
}

static size_t on_write(char *p, size_t size, size_t n, void *userdata)
{
        struct etcd_req *q = userdata;

        if (q->answer.len + n > CELLA_ETCD_ANSWER_MAX) {
                q->too_large = true;
                return 0;
        }
        if (buf_append(&q->answer, p, n) < 0)
                return 0;
        return n;
}

/* Start an attempt at the current endpoint. */
static int req_start(struct etcd_req *q)
{
        struct etcd *e = q->e;
        char url[512];

        if (q->easy) {
                curl_multi_remove_handle(e->multi, q->easy);
                curl_easy_cleanup(q->easy);
        }
        buf_reset(&q->answer);
        q->too_large = false;
        q->easy = curl_easy_init();
        if (!q->easy)
                return -ENOMEM;
        snprintf(url, sizeof(url), "%s%s", e->endpoints[e->current], op_paths[q->op]);
        curl_easy_setopt(q->easy, CURLOPT_URL, url);
        curl_easy_setopt(q->easy, CURLOPT_POSTFIELDS, q->body);
        curl_easy_setopt(q->easy, CURLOPT_HTTPHEADER, q->headers);
        curl_easy_setopt(q->easy, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(q->easy, CURLOPT_WRITEDATA, q);
        curl_easy_setopt(q->easy, CURLOPT_PRIVATE, q);
        curl_easy_setopt(q->easy, CURLOPT_NOSIGNAL, 1L);
        curl_easy_setopt(q->easy, CURLOPT_CONNECTTIMEOUT_MS, (long)CELLA_ETCD_CONNECT_TIMEOUT_MS);
        curl_easy_setopt(q->easy, CURLOPT_TIMEOUT_MS, (long)CELLA_ETCD_ATTEMPT_TIMEOUT_MS);
        curl_easy_setopt(q->easy, CURLOPT_PROTOCOLS_STR, "http,https");
        q->tries++;
        if (curl_multi_add_handle(e->multi, q->easy) != CURLM_OK)
                return -ENOMEM;
        return 0;
}

/* Whether a transfer's failure says nothing about etcd's state: the endpoint was not
 * reached, or did not answer in time. Another endpoint may. */
static bool is_failover_error(CURLcode c)
{
        switch (c) {
        case CURLE_COULDNT_CONNECT:
        case CURLE_COULDNT_RESOLVE_HOST:
        case CURLE_OPERATION_TIMEDOUT:
        case CURLE_SEND_ERROR:
        case CURLE_RECV_ERROR:
        case CURLE_GOT_NOTHING:
        case CURLE_PARTIAL_FILE:
                return true;
        default:
                return false;
        }
}

static void req_done(struct etcd_req *q, CURLcode c)
{
        struct etcd *e = q->e;
        struct etcd_answer a;
        long status = 0;

        if (c != CURLE_OK && q->too_large) {
                req_fail(q, -EPROTO, "etcd answered", "more than the answer limit");
                return;
        }
        if (c != CURLE_OK || (curl_easy_getinfo(q->easy, CURLINFO_RESPONSE_CODE, &status),
                              status == 502 || status == 503 || status == 504)) {
                const char *why = c != CURLE_OK ? curl_easy_strerror(c) : "an unavailable gateway";

                e->stats.healthy = false;
                if ((c == CURLE_OK || is_failover_error(c)) && q->tries < e->n_endpoints) {
                        log_warn("etcd %s: %s; trying the next endpoint", e->endpoints[e->current],
                                 why);
                        e->current = (e->current + 1) % e->n_endpoints;
                        e->stats.failovers++;
                        if (req_start(q) == 0)
                                return;
                }
                req_fail(q, -EAGAIN, "etcd unreachable", why);
                return;
        }
        e->stats.healthy = true;
        e->stats.last_ok_ms = time_now_ms();
        if (q->op == ETCD_OP_LEASE_KEEPALIVE) {
                /* A stream of messages, one per line: the first is the answer. */
                char *nl = memchr(q->answer.data ? q->answer.data : "", '\n', q->answer.len);

                if (nl)
                        q->answer.len = (size_t)(nl - q->answer.data);
        }
        etcd_decode(q->op, q->answer.data ? q->answer.data : "", q->answer.len, &a);
        req_answer(q, &a);
}

static void check_done(struct etcd *e)
{
        CURLMsg *m;
        int left;

        while ((m = curl_multi_info_read(e->multi, &left))) {
                struct etcd_req *q = NULL;

                if (m->msg != CURLMSG_DONE)
                        continue;
                curl_easy_getinfo(m->easy_handle, CURLINFO_PRIVATE, (char **)&q);
                req_done(q, m->data.result);
        }
}

static void on_poll(uv_poll_t *h, int status, int events)
{
        struct etcd_socket *s = (struct etcd_socket *)(void *)h; /* poll is its first member */
        struct etcd *e = s->e;
        int flags = 0, running;

        if (status < 0)
                flags = CURL_CSELECT_ERR;
        if (events & UV_READABLE)
                flags |= CURL_CSELECT_IN;
        if (events & UV_WRITABLE)
                flags |= CURL_CSELECT_OUT;
        curl_multi_socket_action(e->multi, s->fd, flags, &running);
        check_done(e);
}

static void socket_close(struct etcd_socket *s)
{
        struct etcd *e = s->e;

        if (s->prev)
                s->prev->next = s->next;
        else
                e->sockets = s->next;
        if (s->next)
                s->next->prev = s->prev;
        uv_poll_stop(&s->poll);
        uv_close((uv_handle_t *)&s->poll, on_handle_closed);
}

static int on_socket(CURL *easy, curl_socket_t fd, int what, void *userp, void *socketp)
{
        struct etcd *e = userp;
        struct etcd_socket *s = socketp;
        int events = 0;

        if (what == CURL_POLL_REMOVE) {
                if (s) {
                        curl_multi_assign(e->multi, fd, NULL);
                        socket_close(s);
                }
                return 0;
        }
        if (!s) {
                if (e->closing)
                        return -1;
                s = calloc(1, sizeof(*s));
                if (!s)
                        return -1;
                s->e = e;
                s->fd = fd;
                if (uv_poll_init_socket(e->loop, &s->poll, fd) < 0) {
                        free(s);
                        return -1;
                }
                s->poll.data = e;
                e->handles++;
                s->next = e->sockets;
                if (e->sockets)
                        e->sockets->prev = s;
                e->sockets = s;
                curl_multi_assign(e->multi, fd, s);
        }
        if (what & CURL_POLL_IN)
                events |= UV_READABLE;
        if (what & CURL_POLL_OUT)
                events |= UV_WRITABLE;
        uv_poll_start(&s->poll, events, on_poll);
        return 0;
}

static void on_timer(uv_timer_t *t)
{
        struct etcd *e = t->data;
        int running;

        curl_multi_socket_action(e->multi, CURL_SOCKET_TIMEOUT, 0, &running);
        check_done(e);
}

static int on_timer_set(CURLM *multi, long timeout_ms, void *userp)
{
        struct etcd *e = userp;

        if (timeout_ms < 0)
                uv_timer_stop(&e->timer);
        else
                uv_timer_start(&e->timer, on_timer, (uint64_t)timeout_ms, 0);
        return 0;
}

static int endpoint_check(const char *s, size_t n)
{
        const char *host;

        if (n >= 8 && strncmp(s, "http://", 7) == 0)
                host = s + 7;
        else if (n >= 9 && strncmp(s, "https://", 8) == 0)
                host = s + 8;
        else
                return -EINVAL;
        if (host == s + n || n > 256)
                return -EINVAL;
        for (const char *p = host; p < s + n; p++)
                if (!(('a' <= *p && *p <= 'z') || ('A' <= *p && *p <= 'Z') ||
                      ('0' <= *p && *p <= '9') || strchr(".-:[]_", *p)))
                        return -EINVAL;
        return 0;
}

int etcd_new(uv_loop_t *loop, const char *endpoints, struct etcd **ret, struct cella_error *err)
{
        struct etcd *e;
        const char *p = endpoints;

        if (strlen(endpoints) > CELLA_ETCD_SPEC_MAX)
                return cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                       "etcd endpoints: longer than %d bytes", CELLA_ETCD_SPEC_MAX);
        e = calloc(1, sizeof(*e));
        if (!e)
                return cella_error_errno(err, ENOMEM, "etcd client");
        e->loop = loop;
        for (;;) {
                const char *end = strchrnul(p, ',');
                size_t n = (size_t)(end - p);

                while (n > 0 && p[n - 1] == '/')
                        n--;
                if (endpoint_check(p, n) < 0 || e->n_endpoints == CELLA_ETCD_ENDPOINTS_MAX) {
                        for (size_t i = 0; i < e->n_endpoints; i++)
                                free(e->endpoints[i]);
                        free(e);
                        return cella_error_set(
                                err, CELLA_E_VALIDATION_FAILED,
                                "etcd endpoints: '%.*s' is not an http:// or https:// URL of a "
                                "host and port (at most %d endpoints)",
                                (int)(n > 100 ? 100 : n), p, CELLA_ETCD_ENDPOINTS_MAX);
                }
                e->endpoints[e->n_endpoints] = strndup(p, n);
                if (!e->endpoints[e->n_endpoints]) {
                        for (size_t i = 0; i < e->n_endpoints; i++)
                                free(e->endpoints[i]);
                        free(e);
                        return cella_error_errno(err, ENOMEM, "etcd client");
                }
                e->n_endpoints++;
                if (!*end)
                        break;
                p = end + 1;
        }
        e->multi = curl_multi_init();
        if (!e->multi) {
                for (size_t i = 0; i < e->n_endpoints; i++)
                        free(e->endpoints[i]);
                free(e);
                return cella_error_errno(err, ENOMEM, "etcd client");
        }
        curl_multi_setopt(e->multi, CURLMOPT_SOCKETFUNCTION, on_socket);
        curl_multi_setopt(e->multi, CURLMOPT_SOCKETDATA, e);
        curl_multi_setopt(e->multi, CURLMOPT_TIMERFUNCTION, on_timer_set);
        curl_multi_setopt(e->multi, CURLMOPT_TIMERDATA, e);
        uv_timer_init(loop, &e->timer);
        e->timer.data = e;
        e->handles = 1;
        *ret = e;
        return 0;
}

void etcd_free(struct etcd *e)
{
        if (!e)
                return;
        while (e->reqs)
                req_fail(e->reqs, -ECANCELED, "etcd", "the client is closing");
        e->closing = true;
        curl_multi_cleanup(e->multi);
        e->multi = NULL;
        /* What curl did not remove itself: the sockets are closed by now. */
        while (e->sockets)
                socket_close(e->sockets);
        uv_timer_stop(&e->timer);
        uv_close((uv_handle_t *)&e->timer, on_handle_closed);
}

const struct etcd_stats *etcd_stats(const struct etcd *e)
{
        return &e->stats;
}

const char *etcd_endpoint(const struct etcd *e)
{
        return e->endpoints[e->current];
}

/* Queue a request with body (taken; NULL is -ENOMEM). */
static int submit(struct etcd *e, enum etcd_op op, json_t *body_take, etcd_cb cb, void *userdata)
{
        _cleanup_json_ json_t *body = body_take;
        struct etcd_req *q;

        if (!body || e->closing)
                return -ENOMEM;
        if (e->n_reqs >= CELLA_ETCD_PENDING_MAX)
                return -EBUSY;
        q = calloc(1, sizeof(*q));
        if (!q)
                return -ENOMEM;
        q->e = e;
        q->op = op;
        q->cb = cb;
        q->userdata = userdata;
        q->body = json_dumps(body, JSON_COMPACT);
        q->headers = curl_slist_append(NULL, "Content-Type: application/json");
        q->next = e->reqs;
        if (e->reqs)
                e->reqs->prev = q;
        e->reqs = q;
        e->n_reqs++;
        if (!q->body || !q->headers || req_start(q) < 0) {
                req_free(q);
                return -ENOMEM;
        }
        return 0;
}

static json_t *b64(const char *p, size_t n)
{
        _cleanup_buf_ struct buf b = BUF_INIT;

        if (base64_encode(&b, p, n) < 0 || buf_reserve(&b, 1) < 0)
                return NULL;
        return json_stringn(b.data ? b.data : "", b.len);
}

static json_t *int_string(int64_t v)
{
        char s[24];

        snprintf(s, sizeof(s), "%lld", (long long)v);
        return json_string(s);
}

/* The end of the range of every key starting with key: key with its last byte that is not
 * 0xff incremented (and what follows dropped); "\0" (every key) when all are 0xff. */
static json_t *prefix_end(const char *key, size_t n)
{
        _cleanup_free_ char *end = malloc(n ? n : 1);

        if (!end)
                return NULL;
        memcpy(end, key, n);
        while (n > 0) {
                if ((unsigned char)end[n - 1] != 0xff) {
                        end[n - 1]++;
                        return b64(end, n);
                }
                n--;
        }
        return b64("\0", 1);
}

/* A JSON object from pairs, NULL if any value is NULL (every value's reference taken). */
static json_t *obj(size_t n, const char *const *names, json_t **values)
{
        json_t *o = json_object();
        bool ok = o != NULL;

        for (size_t i = 0; i < n; i++) {
                if (!values[i] || !ok || json_object_set_new(o, names[i], values[i]) < 0) {
                        ok = false;
                        json_decref(values[i]);
                }
        }
        if (!ok) {
                json_decref(o);
                return NULL;
        }
        return o;
}

static json_t *range_body(const char *key, size_t key_len, bool prefix)
{
        if (prefix)
                return obj(2, (const char *const[]){"key", "range_end"},
                           (json_t *[]){b64(key, key_len), prefix_end(key, key_len)});
        return obj(1, (const char *const[]){"key"}, (json_t *[]){b64(key, key_len)});
}

static json_t *put_body(const char *key, size_t key_len, const char *value, size_t value_len,
                        int64_t lease)
{
        return obj(3, (const char *const[]){"key", "value", "lease"},
                   (json_t *[]){b64(key, key_len), b64(value, value_len), int_string(lease)});
}

int etcd_range(struct etcd *e, const char *key, size_t key_len, bool prefix, etcd_cb cb,
               void *userdata)
{
        return submit(e, ETCD_OP_RANGE, range_body(key, key_len, prefix), cb, userdata);
}

int etcd_put(struct etcd *e, const char *key, size_t key_len, const char *value, size_t value_len,
             int64_t lease, etcd_cb cb, void *userdata)
{
        return submit(e, ETCD_OP_PUT, put_body(key, key_len, value, value_len, lease), cb,
                      userdata);
}

int etcd_delete(struct etcd *e, const char *key, size_t key_len, bool prefix, etcd_cb cb,
                void *userdata)
{
        return submit(e, ETCD_OP_DELETE, range_body(key, key_len, prefix), cb, userdata);
}

/* A txn of one compare (taken), one success request and one failure request (taken). */
static int txn(struct etcd *e, json_t *cmp, json_t *then, json_t *otherwise, etcd_cb cb,
               void *userdata)
{
        json_t *a1 = json_array(), *a2 = json_array(), *a3 = json_array();

        if (!a1 || json_array_append_new(a1, cmp) < 0)
                json_decref(a1), a1 = NULL;
        if (!a2 || json_array_append_new(a2, then) < 0)
                json_decref(a2), a2 = NULL;
        if (!a3 || json_array_append_new(a3, otherwise) < 0)
                json_decref(a3), a3 = NULL;
        return submit(e, ETCD_OP_TXN,
                      obj(3, (const char *const[]){"compare", "success", "failure"},
                          (json_t *[]){a1, a2, a3}),
                      cb, userdata);
}

int etcd_create(struct etcd *e, const char *key, size_t key_len, const char *value,
                size_t value_len, int64_t lease, etcd_cb cb, void *userdata)
{
        json_t *cmp = obj(4, (const char *const[]){"key", "target", "create_revision", "result"},
                          (json_t *[]){b64(key, key_len), json_string("CREATE"), json_string("0"),
                                       json_string("EQUAL")});
        json_t *put = obj(1, (const char *const[]){"request_put"},
                          (json_t *[]){put_body(key, key_len, value, value_len, lease)});
        json_t *get = obj(1, (const char *const[]){"request_range"},
                          (json_t *[]){range_body(key, key_len, false)});

        return txn(e, cmp, put, get, cb, userdata);
}

int etcd_delete_leased(struct etcd *e, const char *key, size_t key_len, int64_t lease, etcd_cb cb,
                       void *userdata)
{
        json_t *cmp = obj(4, (const char *const[]){"key", "target", "lease", "result"},
                          (json_t *[]){b64(key, key_len), json_string("LEASE"), int_string(lease),
                                       json_string("EQUAL")});
        json_t *del = obj(1, (const char *const[]){"request_delete_range"},
                          (json_t *[]){range_body(key, key_len, false)});
        json_t *get = obj(1, (const char *const[]){"request_range"},
                          (json_t *[]){range_body(key, key_len, false)});

        return txn(e, cmp, del, get, cb, userdata);
}

int etcd_txn(struct etcd *e, json_t *compare, json_t *success, json_t *failure, etcd_cb cb,
             void *userdata)
{
        return submit(e, ETCD_OP_TXN,
                      obj(3, (const char *const[]){"compare", "success", "failure"},
                          (json_t *[]){compare, success, failure}),
                      cb, userdata);
}

json_t *etcd_cmp_absent(const char *key, size_t key_len)
{
        return obj(4, (const char *const[]){"key", "target", "create_revision", "result"},
                   (json_t *[]){b64(key, key_len), json_string("CREATE"), json_string("0"),
                                json_string("EQUAL")});
}

json_t *etcd_cmp_present(const char *key, size_t key_len)
{
        return obj(4, (const char *const[]){"key", "target", "version", "result"},
                   (json_t *[]){b64(key, key_len), json_string("VERSION"), json_string("0"),
                                json_string("GREATER")});
}

json_t *etcd_cmp_prefix_unchanged(const char *prefix, size_t prefix_len, int64_t revision)
{
        return obj(5, (const char *const[]){"key", "range_end", "target", "mod_revision", "result"},
                   (json_t *[]){b64(prefix, prefix_len), prefix_end(prefix, prefix_len),
                                json_string("MOD"), int_string(revision + 1), json_string("LESS")});
}

json_t *etcd_req_put(const char *key, size_t key_len, const char *value, size_t value_len,
                     int64_t lease)
{
        return obj(1, (const char *const[]){"request_put"},
                   (json_t *[]){put_body(key, key_len, value, value_len, lease)});
}

json_t *etcd_req_delete(const char *key, size_t key_len)
{
        return obj(1, (const char *const[]){"request_delete_range"},
                   (json_t *[]){range_body(key, key_len, false)});
}

json_t *etcd_req_range(const char *key, size_t key_len)
{
        return obj(1, (const char *const[]){"request_range"},
                   (json_t *[]){range_body(key, key_len, false)});
}

int etcd_lease_grant(struct etcd *e, int64_t ttl, etcd_cb cb, void *userdata)
{
        return submit(e, ETCD_OP_LEASE_GRANT,
                      obj(1, (const char *const[]){"TTL"}, (json_t *[]){int_string(ttl)}), cb,
                      userdata);
}

int etcd_lease_keepalive(struct etcd *e, int64_t id, etcd_cb cb, void *userdata)
{
        return submit(e, ETCD_OP_LEASE_KEEPALIVE,
                      obj(1, (const char *const[]){"ID"}, (json_t *[]){int_string(id)}), cb,
                      userdata);
}

int etcd_lease_revoke(struct etcd *e, int64_t id, etcd_cb cb, void *userdata)
{
        return submit(e, ETCD_OP_LEASE_REVOKE,
                      obj(1, (const char *const[]){"ID"}, (json_t *[]){int_string(id)}), cb,
                      userdata);
}
