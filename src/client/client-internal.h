/* What libcella's files share beyond the public header: the client, one request and its
 * answer (client.c), and the helpers every area (client-*.c, pty.c) builds its calls on. */
#ifndef CELLA_CLIENT_INTERNAL_H
#define CELLA_CLIENT_INTERNAL_H

#include <curl/curl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "cella/cella.h"
#include "client/sse.h"
#include "common/buf.h"
#include "common/macros.h"

struct cella_client {
        CURL *curl;
        char *base;      /* without trailing slash */
        char *unix_path; /* CELLA_URL unix:PATH: the socket (base is then http://localhost) */
        char *auth;      /* "Authorization: Bearer ..." or NULL */
        char code[64];   /* last API error code */
        char message[512];
        long status;
        /* cella_client_interrupt's (any thread): the flag, and the socket of the transfer
         * in progress (-1: none) under sock_lock, so that it is never one already closed */
        atomic_bool interrupted;
        pthread_mutex_t sock_lock;
        curl_socket_t sock;
};

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
        /* each header line of the answer, trailers included (if set; CURLOPT_HEADERFUNCTION) */
        void (*header)(const char *line, size_t n, void *ud);
        size_t read_size; /* curl's receive buffer (0: its default) */
        int stream_err;   /* first error a stream callback returned */
        bool checked;     /* status looked at */
        bool is_error;
};

/* A raw request body: memory or a descriptor. */
struct upload {
        const char *data; /* memory source */
        size_t len, off;
        int fd; /* or a descriptor (-1 when memory) */
        int err;
};

/* Set the client's error code and message (as read by cella_client_error_*). */
void client_set_error(cella_client *c, const char *code, const char *message);
void client_errorf(cella_client *c, const char *code, const char *fmt, ...) _printf_(3, 4);
/* An error answer: status and the {code, message} of body. Returns CELLA_ERR_API. */
int client_api_error(cella_client *c, long status, const struct buf *body);

/* base + "/v1/sandboxes/" + escaped name + suffix [+ "?" extra_query]; NULL: out of
 * memory. */
char *client_sandbox_url(cella_client *c, const char *name, const char *suffix,
                         const char *extra_query);
/* The same with a query parameter qkey=escaped qval first (qkey NULL: none). */
char *client_url(cella_client *c, const char *name, const char *suffix, const char *qkey,
                 const char *qval, const char *extra_query);

/* One request. body: JSON text (or NULL); up: a raw upload (or NULL); accept: Accept
 * header value (or NULL). The answer goes to s. Returns CELLA_OK or a CELLA_ERR_*, the
 * client's error set. */
int client_perform(cella_client *c, const char *method, const char *url, const char *body,
                   struct upload *up, const char *accept, struct sink *s);
/* The end of a request into s: its JSON body to *ret (when r is CELLA_OK and ret is not
 * NULL; "" for an empty one), s freed. Returns r, or CELLA_ERR_NOMEM. */
int client_finish_json(struct sink *s, int r, char **ret);
/* A request and its JSON answer to *ret (NULL: dropped). url is taken (NULL: out of
 * memory); body is JSON text (or NULL), or a JSON value, taken (or NULL). */
int client_request_url(cella_client *c, const char *method, char *url, const char *body,
                       char **ret);
int client_request_json(cella_client *c, const char *method, char *url, json_t *body, char **ret);
/* POST body b (taken; NULL: out of memory) with its "env" member from the "K=V" list env
 * (NULL: none) to /v1/sandboxes/{sandbox}{suffix}: a session, context or process. */
int client_create_member(cella_client *c, const char *sandbox, const char *suffix, json_t *b,
                         const char *const *env, char **ret_json);
/* DELETE /v1/sandboxes/{sandbox}/{collection}/{id}, the id escaped. */
int client_delete_member(cella_client *c, const char *sandbox, const char *collection,
                         const char *id);

/* A request whose success answer is an event stream (Accept: text/event-stream): body
 * (taken; NULL: none) sent as JSON, the answer's events, lines of max_line at most, to
 * on_event(ud). url is taken. Returns client_perform's value; a line too long is
 * CELLA_ERR_INVALID (INVALID_RESPONSE). */
int client_event_stream(cella_client *c, const char *method, char *url, json_t *body,
                        size_t max_line, sse_event_fn on_event, void *ud);
/* An event stream whose events are JSON objects passed to on_event as they are (file
 * watch, code runs); an error event ends it as the call's failure (CELLA_ERR_API). With
 * code_run, an error without a "code" is the code's own error and passed on. */
int client_json_events(cella_client *c, char *url, json_t *body, size_t max_line, bool code_run,
                       int (*on_event)(const char *json, size_t len, void *ud), void *ud);

/* "K=V" list to a JSON object; NULL on a malformed entry. */
json_t *client_kv_object(const char *const *kv);
/* b's member key set to the object of the "K=V" list kv (nothing when kv is NULL): 0, or
 * CELLA_ERR_INVALID with VALIDATION_FAILED "what must be K=V" set (b is the caller's). */
int client_set_kv(cella_client *c, json_t *b, const char *key, const char *const *kv,
                  const char *what);

#endif
