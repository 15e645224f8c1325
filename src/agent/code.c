/* The code interpreter (CODE frames; docs/decisions/0021-code-interpreter.md).
 *
 * A struct interp is one runner process (src/agent/runners/, protocol in the decision): a
 * python3 or node started with agent_spawn in a cgroup of its own (code-<n>), its stdout and
 * stderr on two pipes, requests to its fd 3 and events from its fd 4. An interp is either
 * a context's (linked in the table's list, with an id) or the spare of its runner kind
 * (t->spare[]): started in the background once the kind has been used, handed to the next
 * context created so that it does not wait for the interpreter's start.
 *
 * A context serializes its work in a FIFO of jobs: first the setup (from a create, or made
 * implicitly for a default context), then runs. A job is a stream (a create's or a run's;
 * the implicit setup has none). The head job runs once the runner said ready. A run's
 * output goes out as STDOUT/STDERR frames and its events as DATA (one JSON object per line,
 * re-serialised from the validated event), all within the stream's credit: what waits for
 * credit is held per job (CELLA_CODE_OUT_PENDING per output stream, one event), and the
 * runner's pipes are not read meanwhile, so a chatty run blocks in its own write. The run
 * ends with RESULT {executionCount, timedOut} once the runner's done arrived and everything
 * before it was sent.
 *
 * Interrupts: a timeout or a cancelled run sends SIGINT, again every
 * CELLA_CODE_INTERRUPT_REPEAT_MS until done; no done within
 * CELLA_CODE_INTERRUPT_GRACE_MS kills the runner's cgroup. A runner that exits (or is
 * killed) makes its context dead: every job in it ends with CONTEXT_DEAD, later runs too;
 * a dead default context is replaced on the next run that needs it. An interp is freed
 * once it is out of the table, reaped and its handles are closed.
 *
 * This file holds the table, the contexts' names and the CODE operations; the runners,
 * their jobs and output are in code-interp.c beneath it. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "agent/code-interp.h"
#include "agent/code.h"
#include "agent/service.h"
#include "agent/code-request.h"
#include "common/limits.h"
#include "common/log.h"

/* ---- the table and the operations ---- */

static struct code_table *table_get(struct agent *a)
{
        if (!a->code) {
                a->code = calloc(1, sizeof(*a->code));
                if (a->code)
                        a->code->a = a;
        }
        return a->code;
}

static struct interp *context_find(struct code_table *t, const char *id)
{
        for (struct interp *it = t->contexts; it; it = it->next)
                if (strcmp(it->id, id) == 0)
                        return it;
        return NULL;
}

static void set_base_env(struct code_table *t, struct code_request *r)
{
        if (!r->ctx.base_env)
                return;
        agent_env_free(t->base_env, t->n_base_env);
        t->base_env = TAKE_PTR(r->ctx.base_env);
        t->n_base_env = r->ctx.n_base_env;
        r->ctx.n_base_env = 0;
}

static void random_id(char *out, size_t size)
{
        static const char chars[] = "abcdefghijklmnopqrstuvwxyz0123456789";
        uint8_t rnd[16];

        if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
                for (size_t i = 0; i < sizeof(rnd); i++)
                        rnd[i] = (uint8_t)(rand() ^ (int)i);
        snprintf(out, size, "ctx-");
        for (size_t i = 0; i < sizeof(rnd) && 4 + i + 1 < size; i++) {
                out[4 + i] = chars[rnd[i] % (sizeof(chars) - 1)];
                out[5 + i] = '\0';
        }
}

/* A new context of lang with the setup job (setup, with its stream or not) queued first;
 * NULL with err set. */
static struct interp *context_new(struct code_table *t, enum code_lang lang, const char *id,
                                  char **cwd_take, struct code_job *setup, struct cella_error *err)
{
        enum runner_kind kind = code_runner_kind(lang);
        struct interp *it;

        if (t->n_contexts >= CELLA_CODE_MAX_CONTEXTS) {
                cella_error_set(err, CELLA_E_VALIDATION_FAILED,
                                "a sandbox has at most %d code contexts; delete some first",
                                CELLA_CODE_MAX_CONTEXTS);
                return NULL;
        }
        it = t->spare[kind];
        if (it) {
                t->spare[kind] = NULL;
        } else {
                it = interp_start(t, kind, err);
                if (!it)
                        return NULL;
        }
        t->used[kind] = true;
        it->lang = lang;
        it->is_default = id != NULL;
        if (cwd_take)
                it->cwd = TAKE_PTR(*cwd_take);
        if (id)
                snprintf(it->id, sizeof(it->id), "%s", id);
        else
                do
                        random_id(it->id, sizeof(it->id));
                while (context_find(t, it->id));
        it->in_table = true;
        it->next = t->contexts;
        if (t->contexts)
                t->contexts->prev = it;
        t->contexts = it;
        t->n_contexts++;
        setup->is_setup = true;
        code_enqueue(it, setup);
        interp_next(it);
        /* The next spare starts once this context's setup is done (CODE_EV_SETUP_OK), so that
         * its start (a fork and a second of CPU for the preloads) never delays the answer. */
        return it;
}

static struct code_job *job_new(struct conn *c, uint32_t sid, struct cella_error *err)
{
        struct code_job *j = calloc(1, sizeof(*j));

        if (!j) {
                cella_error_set(err, CELLA_E_INTERNAL_ERROR, "out of memory");
                return NULL;
        }
        if (c && conn_add_stream(c, &j->s, sid, &code_job_ops) < 0) {
                free(j);
                cella_error_set(err, CELLA_E_SANDBOX_UNAVAILABLE, "too many concurrent operations");
                return NULL;
        }
        return j;
}

static void op_create(struct code_table *t, struct conn *c, uint32_t sid, struct code_request *r)
{
        struct cella_error err = {0};
        struct code_job *j = job_new(c, sid, &err);
        struct interp *it;

        if (!j) {
                conn_send_error(c, sid, &err);
                return;
        }
        j->env = TAKE_PTR(r->ctx.env);
        j->n_env = r->ctx.n_env;
        r->ctx.n_env = 0;
        it = context_new(t, r->language, NULL, &r->ctx.cwd, j, &err);
        if (!it)
                code_job_fail(j, err.code, err.msg);
}

static void op_run(struct code_table *t, struct conn *c, uint32_t sid, struct code_request *r)
{
        struct cella_error err = {0};
        struct interp *it;
        struct code_job *j;
        char defid[32];

        if (r->ctx.id) {
                it = context_find(t, r->ctx.id);
                if (!it) {
                        conn_reply_error(c, sid, CELLA_E_CONTEXT_NOT_FOUND,
                                         "code context '%s' not found", r->ctx.id);
                        return;
                }
                if (r->language_given && r->language != it->lang) {
                        conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED,
                                         "context '%s' runs %s, not %s", r->ctx.id,
                                         code_lang_name(it->lang), code_lang_name(r->language));
                        return;
                }
        } else {
                snprintf(defid, sizeof(defid), "default-%s", code_lang_name(r->language));
                it = context_find(t, defid);
                if (it && it->dead) {
                        context_remove(it); /* replaced by a fresh one */
                        it = NULL;
                }
                if (!it) {
                        struct code_job *setup = job_new(NULL, 0, &err);

                        if (setup)
                                it = context_new(t, r->language, defid, NULL, setup, &err);
                        if (!it) {
                                if (setup)
                                        code_job_free(setup);
                                conn_send_error(c, sid, &err);
                                return;
                        }
                }
        }
        if (it->dead) {
                conn_reply_error(c, sid, CELLA_E_CONTEXT_DEAD,
                                 "the %s interpreter of context '%s' is gone (%s); delete the "
                                 "context and create a new one",
                                 code_lang_name(it->lang), it->id, it->reason);
                return;
        }
        if (it->queued >= CELLA_CODE_MAX_QUEUE) {
                conn_reply_error(c, sid, CELLA_E_VALIDATION_FAILED,
                                 "context '%s' has %d runs waiting", it->id, CELLA_CODE_MAX_QUEUE);
                return;
        }
        j = job_new(c, sid, &err);
        if (!j) {
                conn_send_error(c, sid, &err);
                return;
        }
        j->code = TAKE_PTR(r->code);
        j->timeout_ms = r->timeout_ms;
        code_enqueue(it, j);
        interp_next(it);
}

static void op_list(struct code_table *t, struct conn *c, uint32_t sid)
{
        json_t *arr = json_array();

        for (struct interp *it = t->contexts; arr && it; it = it->next)
                json_array_append_new(arr, context_json(it));
        conn_send_json(c, FRAME_RESULT, sid,
                       json_pack("{s:o}", "contexts", arr ? arr : json_array()));
}

void code_request(struct agent *a, struct conn *c, struct agent_request *req)
{
        struct code_request r;
        struct cella_error err = {0};
        struct code_table *t;
        struct interp *it;

        if (code_request_decode(req->body, &r, &err) < 0) {
                conn_send_error(c, req->stream, &err);
                code_request_done(&r);
                return;
        }
        t = table_get(a);
        if (!t) {
                conn_reply_error(c, req->stream, CELLA_E_INTERNAL_ERROR, "out of memory");
                code_request_done(&r);
                return;
        }
        set_base_env(t, &r);
        switch (r.op) {
        case CODE_OP_CREATE:
                op_create(t, c, req->stream, &r);
                break;
        case CODE_OP_RUN:
                op_run(t, c, req->stream, &r);
                break;
        case CODE_OP_LIST:
                op_list(t, c, req->stream);
                break;
        case CODE_OP_DELETE:
                it = context_find(t, r.ctx.id);
                if (!it) {
                        conn_reply_error(c, req->stream, CELLA_E_CONTEXT_NOT_FOUND,
                                         "code context '%s' not found", r.ctx.id);
                        break;
                }
                context_remove(it);
                conn_send_json(c, FRAME_RESULT, req->stream, json_pack("{s:s}", "id", r.ctx.id));
                break;
        }
        code_request_done(&r);
}

void code_shutdown(struct agent *a)
{
        struct code_table *t = a->code;

        if (!t)
                return;
        a->code = NULL;
        t->shutdown = true;
        t->objects++; /* held while the interps are let go */
        while (t->contexts) {
                struct interp *it = t->contexts;

                code_table_unlink(it);
                agent_unwatch_child(a, it->pid);
                it->reaped = true;
                if (!it->dead)
                        interp_die(it, "agent shutting down");
                else
                        interp_maybe_free(it);
        }
        for (int k = 0; k < _RUNNER_MAX; k++)
                if (t->spare[k]) {
                        struct interp *it = t->spare[k];

                        agent_unwatch_child(a, it->pid);
                        it->reaped = true;
                        interp_die(it, "agent shutting down");
                }
        if (--t->objects == 0) {
                agent_env_free(t->base_env, t->n_base_env);
                free(t);
        }
}
