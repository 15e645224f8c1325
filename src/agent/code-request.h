/* Decoding for the code interpreter (docs/decisions/0021-code-interpreter.md): the body of a
 * CODE frame from cellad, and one event line a runner process writes on its fd 4.
 *
 * Pure: no I/O, no global state; everything a decoded object owns is released by its _done
 * function, also after a failed decode. Both inputs are hostile (the event lines come from
 * user code's process) and both decoders are reached by the agent fuzz target. */
#ifndef CELLA_AGENT_CODE_REQUEST_H
#define CELLA_AGENT_CODE_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "agent/context-spec.h"
#include "common/error.h"
#include "common/wire.h"

/* The body's ops and languages (common/wire.h) */
enum code_op {
        CODE_OP_CREATE = WIRE_CODE_CREATE,
        CODE_OP_DELETE = WIRE_CODE_DELETE,
        CODE_OP_LIST = WIRE_CODE_LIST,
        CODE_OP_RUN = WIRE_CODE_RUN,
};
enum code_lang {
        CODE_PYTHON = WIRE_CODE_PYTHON,
        CODE_JAVASCRIPT = WIRE_CODE_JAVASCRIPT,
        CODE_TYPESCRIPT = WIRE_CODE_TYPESCRIPT,
};

/* create  language, cwd (NULL: /workspace), env, base_env
 * delete  id
 * list    nothing
 * run     id (NULL: the language's default context), language (default python; with an id
 *         it must match the context's when given), language_given, code, timeout_ms (0:
 *         none), base_env */
struct code_request {
        enum code_op op;
        enum code_lang language;
        bool language_given;
        struct context_spec ctx; /* id; create: cwd, env, base_env; run: base_env */
        char *code;
        int64_t timeout_ms;
};

/* The body's schema is common/wire.c's (wire_code_decode): 0, or -EINVAL with err set
 * (VALIDATION_FAILED), or -ENOMEM; *ret is always initialised. */
int code_request_decode(json_t *body, struct code_request *ret, struct cella_error *err);
void code_request_done(struct code_request *r);

const char *code_lang_name(enum code_lang l);
/* 0 with *ret set, or -EINVAL for anything but python, javascript, typescript. */
int code_lang_parse(const char *s, enum code_lang *ret);

enum code_event_type {
        CODE_EV_UNKNOWN, /* a well-formed event of a type we do not know: ignored */
        CODE_EV_READY,
        CODE_EV_SETUP_OK,
        CODE_EV_SETUP_ERROR, /* message */
        CODE_EV_RESULT,      /* id, result: a new object of the known keys only */
        CODE_EV_ERROR,       /* id, name, message, traceback */
        CODE_EV_DONE,        /* id, execution_count */
};

struct code_event {
        enum code_event_type type;
        int64_t id;
        int64_t execution_count;
        json_t *result;    /* owned */
        char *name;        /* owned, at most CELLA_CODE_MAX_TEXT bytes (cut) */
        char *message;     /* owned, at most CELLA_CODE_MAX_TEXT bytes (cut) for setup_error */
        json_t *traceback; /* owned array of strings, at most CELLA_CODE_MAX_TRACEBACK */
};

/* Decode one line (without its '\n') into *ret (always initialised). 0, or -EINVAL with err
 * set for a line that is not a valid event (not JSON, no type, a field of the wrong type).
 * Rich result values keep only the hosted SDK's keys: text, html, markdown, latex, svg,
 * javascript (strings), png, jpeg (base64 strings), json (any value), isMainResult (bool). */
int code_event_decode(const char *line, size_t len, struct code_event *ret,
                      struct cella_error *err);
void code_event_done(struct code_event *ev);

#endif
