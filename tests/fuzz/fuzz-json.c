/* Fuzz the API's JSON request decoders (src/daemon/api-decode.h). The first input byte
 * picks the decoder (modulo 23: 0-5 put_sandbox, exec, file_read, file_write, mkdir, move;
 * 6 and 7 the shared helpers api_parse_bool (and POST /sleep's body, api_decode_sleep) and
 * api_check_string_object (and setEnvVars);
 * 8-12 the process calls of api_decode_process (start, kill, waitLog, waitPort, waitExit);
 * 13-15 kill with the body as the ?signal= query value; 16 sessions; 17 git checkout; 18 file
 * watch; 19 code context create; 20 code run; 21 a terminal's WebSocket control message;
 * 22 the image decoders of daemon/image.h: docker manifest.json, OCI index, OCI manifest,
 * image config and the build body, all on the same bytes), the rest is the body, in
 * an exact-size heap copy without a terminating NUL, as the HTTP server hands it over.
 *
 * Invariants, from the header's contract: success is 0 with err unset and the result
 * well-formed (commands and strings NUL-free, paths absolute and normalised, timeouts
 * non-negative, env/labels objects of strings); failure is -EINVAL with err set, or -ENOMEM,
 * and *ret left all zero, so that the _done() call the handlers always make is a no-op.
 * What a process or code call accepts is also encoded as its route encodes it
 * (common/wire.h), and the agent's decoder must read the same members back. */
#include <errno.h>
#include <jansson.h>
#include <stdbool.h>
#include <string.h>

#include "common/git-url.h"
#include "common/limits.h"
#include "common/path.h"
#include "common/name.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/image.h"
#include "runtime/net.h"
#include "fuzz.h"

static bool is_zero(const void *p, size_t n)
{
        const unsigned char *c = p;
        for (size_t i = 0; i < n; i++)
                if (c[i])
                        return false;
        return true;
}

static void check_path(const char *p)
{
        char again[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        size_t n = strnlen(p, CELLA_PATH_MAX + 1);
        int r;

        FUZZ_CHECK(n >= 1 && n <= CELLA_PATH_MAX);
        FUZZ_CHECK(p[0] == '/');
        r = sandbox_path_normalize(p, n, again, sizeof(again), &err);
        FUZZ_CHECK(r == (int)n && strcmp(again, p) == 0);
}

static void check_strings(json_t *o)
{
        const char *k;
        json_t *v;

        if (!o)
                return;
        FUZZ_CHECK(json_is_object(o));
        json_object_foreach(o, k, v)
        {
                FUZZ_CHECK(k[0] != '\0');
                FUZZ_CHECK(json_is_string(v));
                FUZZ_CHECK(strlen(json_string_value(v)) == json_string_length(v));
        }
}

/* r, err and the struct after a decode: either a valid success or a clean failure. */
#define CHECK_OUTCOME(r, err, x, valid)                                           \
        do {                                                                      \
                if ((r) == 0) {                                                   \
                        FUZZ_CHECK(!cella_error_is_set(&(err)));                  \
                        valid;                                                    \
                } else {                                                          \
                        FUZZ_CHECK((r) == -EINVAL || (r) == -ENOMEM);             \
                        FUZZ_CHECK((r) == -ENOMEM || cella_error_is_set(&(err))); \
                        FUZZ_CHECK(is_zero(&(x), sizeof(x)));                     \
                }                                                                 \
        } while (0)

/* A decoded manifest: 1..MAX layers, canonical relative paths, digests valid or empty. */
static void check_manifest(const struct image_manifest *m)
{
        char again[CELLA_PATH_MAX];

        FUZZ_CHECK(m->n_layers >= 1 && m->n_layers <= CELLA_IMAGE_MAX_LAYERS);
        for (size_t i = 0; i <= m->n_layers; i++) {
                const struct image_blob *b = i < m->n_layers ? &m->layers[i] : &m->config;

                FUZZ_CHECK(b->path && b->path[0] && b->path[0] != '/');
                FUZZ_CHECK(image_entry_path(b->path, again, sizeof(again)) == 0);
                FUZZ_CHECK(strcmp(again, b->path) == 0);
                FUZZ_CHECK(!b->digest[0] || image_digest_ok(b->digest));
        }
}

static void fuzz_image(const char *body, size_t len)
{
        struct cella_error err = {0};
        struct image_manifest m;
        struct image_config c;
        char digest[IMAGE_DIGEST_LEN + 1];
        const char *pkgs[CELLA_IMAGE_MAX_PACKAGES];
        json_t *owner;
        bool nested;
        size_t n;
        int r;

        r = image_decode_docker_manifest(body, len, &m, &err);
        CHECK_OUTCOME(r == 0 ? 0 : -EINVAL, err, m, check_manifest(&m));
        FUZZ_CHECK(r == 0 || err.code == CELLA_E_INVALID_IMAGE ||
                   err.code == CELLA_E_INTERNAL_ERROR);
        image_manifest_done(&m);
        memset(&err, 0, sizeof(err));
        r = image_decode_oci_manifest(body, len, &m, &err);
        CHECK_OUTCOME(r == 0 ? 0 : -EINVAL, err, m, {
                check_manifest(&m);
                FUZZ_CHECK(image_digest_ok(m.config.digest));
                for (size_t i = 0; i < m.n_layers; i++)
                        FUZZ_CHECK(image_digest_ok(m.layers[i].digest));
        });
        image_manifest_done(&m);
        memset(&err, 0, sizeof(err));
        r = image_decode_oci_index(body, len, digest, &nested, &err);
        FUZZ_CHECK(r == 0 ? image_digest_ok(digest) && !cella_error_is_set(&err)
                          : err.code == CELLA_E_INVALID_IMAGE);
        memset(&err, 0, sizeof(err));
        r = image_decode_config(body, len, &c, &err);
        CHECK_OUTCOME(r == 0 ? 0 : -EINVAL, err, c, {
                json_t *v;
                size_t i;

                FUZZ_CHECK(json_is_array(c.env));
                json_array_foreach(c.env, i, v) FUZZ_CHECK(json_is_string(v));
                FUZZ_CHECK(c.n_diff_ids <= CELLA_IMAGE_MAX_LAYERS);
                for (i = 0; i < c.n_diff_ids; i++)
                        FUZZ_CHECK(image_digest_ok(c.diff_ids[i]));
                FUZZ_CHECK(!c.working_dir || c.working_dir[0] == '/');
        });
        image_config_done(&c);
        memset(&err, 0, sizeof(err));
        r = image_decode_build(body, len, pkgs, &n, &owner, &err);
        if (r == 0) {
                FUZZ_CHECK(n <= CELLA_IMAGE_MAX_PACKAGES && !cella_error_is_set(&err));
                for (size_t i = 0; i < n; i++)
                        FUZZ_CHECK(image_package_ok(pkgs[i]) && pkgs[i][0] != '-');
        } else {
                FUZZ_CHECK(r == -EINVAL && n == 0 && !owner &&
                           err.code == CELLA_E_VALIDATION_FAILED);
        }
        json_decref(owner);
        /* the body as an entry path: canonical output is a fixed point, never ".." */
        if (len < CELLA_PATH_MAX && !memchr(body, 0, len)) {
                char in[CELLA_PATH_MAX], out[CELLA_PATH_MAX], again[CELLA_PATH_MAX];
                size_t target = 0;
                bool ignore;

                memcpy(in, body, len);
                in[len] = '\0';
                if (image_entry_path(in, out, sizeof(out)) == 0) {
                        FUZZ_CHECK(out[0] != '/' && !strstr(out, "//"));
                        FUZZ_CHECK(image_entry_path(out, again, sizeof(again)) == 0 &&
                                   strcmp(out, again) == 0);
                        if (image_whiteout(out, &target, &ignore) == IMAGE_WH_FILE) {
                                FUZZ_CHECK(target > 0 && target < strlen(out));
                                FUZZ_CHECK(strcmp(out + target, "..") != 0 &&
                                           strcmp(out + target, ".") != 0);
                        }
                }
        }
}

/* networkAllow comes out canonical: each entry parses and formats back to itself. */
static void check_network_allow(json_t *a)
{
        size_t i;
        json_t *v;

        if (!a)
                return;
        FUZZ_CHECK(json_is_array(a) && json_array_size(a) <= CELLA_NETWORK_ALLOW_MAX);
        json_array_foreach(a, i, v)
        {
                struct net_allow na;
                char text[64];

                FUZZ_CHECK(json_is_string(v) &&
                           net_allow_parse(json_string_value(v), json_string_length(v), &na) == 0);
                net_allow_format(&na, text, sizeof(text));
                FUZZ_CHECK(strcmp(text, json_string_value(v)) == 0);
        }
}

/* What cellad accepted, sent as its route sends it (common/wire.h), is what the agent
 * reads: the same members, the defaults filled in. */
static void check_proc_wire(enum api_proc_call call, const struct api_process *p)
{
        static const enum wire_proc_op ops[] = {
                [API_PROC_START] = WIRE_PROC_START,
                [API_PROC_KILL] = WIRE_PROC_KILL,
                [API_PROC_WAIT_LOG] = WIRE_PROC_WAIT_LOG,
                [API_PROC_WAIT_PORT] = WIRE_PROC_WAIT_PORT,
                [API_PROC_WAIT_EXIT] = WIRE_PROC_WAIT_EXIT,
        };
        struct wire_proc x = {.op = ops[call],
                              .id = call == API_PROC_START ? p->process_id : "web-1",
                              .command = p->command,
                              .session = p->session_id,
                              .cwd = p->cwd,
                              .env = p->env,
                              .signal = p->signal,
                              .pattern = p->pattern,
                              .regex = p->regex,
                              .port = (int)p->port,
                              .http = p->mode == 1,
                              .path = p->path,
                              .status_min = (int)p->status_min,
                              .status_max = (int)p->status_max,
                              .interval_ms = p->interval_ms,
                              .timeout_ms = p->timeout_ms},
                         y;
        struct cella_error err = {0};
        json_t *j = wire_proc_encode(&x);

        FUZZ_CHECK(j != NULL);
        FUZZ_CHECK(wire_proc_decode(j, &y, &err) == 0);
        FUZZ_CHECK(y.op == x.op && y.signal == x.signal && y.regex == x.regex &&
                   y.timeout_ms == x.timeout_ms);
        FUZZ_CHECK((!x.id && !y.id) || strcmp(x.id, y.id) == 0);
        FUZZ_CHECK((!x.command && !y.command) || strcmp(x.command, y.command) == 0);
        FUZZ_CHECK((!x.cwd && !y.cwd) || strcmp(x.cwd, y.cwd) == 0);
        FUZZ_CHECK((!x.pattern && !y.pattern) || strcmp(x.pattern, y.pattern) == 0);
        if (x.op == WIRE_PROC_WAIT_PORT) {
                FUZZ_CHECK(y.port == x.port && y.http == x.http);
                FUZZ_CHECK((!x.path && !y.path) || strcmp(x.path, y.path) == 0);
                FUZZ_CHECK(y.status_min == (x.status_min ? x.status_min : 200));
                FUZZ_CHECK(y.status_max == (x.status_max ? x.status_max : 399));
                FUZZ_CHECK(y.interval_ms ==
                           (x.interval_ms ? x.interval_ms : CELLA_PROC_DEFAULT_INTERVAL_MS));
        }
        json_decref(j);
}

static void check_code_wire(const struct wire_code *x)
{
        struct cella_error err = {0};
        struct wire_code y;
        json_t *j = wire_code_encode(x);

        FUZZ_CHECK(j != NULL);
        FUZZ_CHECK(wire_code_decode(j, &y, &err) == 0);
        FUZZ_CHECK(y.op == x->op && y.language == x->language && y.timeout_ms == x->timeout_ms);
        FUZZ_CHECK((!x->id && !y.id) || strcmp(x->id, y.id) == 0);
        FUZZ_CHECK((!x->cwd && !y.cwd) || strcmp(x->cwd, y.cwd) == 0);
        FUZZ_CHECK((!x->code && !y.code) || strcmp(x->code, y.code) == 0);
        FUZZ_CHECK((!x->env && !y.env) || json_equal(x->env, y.env));
        json_decref(j);
}

static void fuzz_decoder(unsigned which, const char *body, size_t len)
{
        struct cella_error err = {0};
        int r;

        switch (which) {
        case 0: {
                struct api_put_sandbox x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_put_sandbox(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        check_strings(x.env);
                        check_strings(x.labels);
                        check_network_allow(x.network_allow);
                });
                api_put_sandbox_done(&x);
                break;
        }
        case 1: {
                struct api_exec x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_exec(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        FUZZ_CHECK(x.command != NULL);
                        FUZZ_CHECK(strlen(x.command) <= CELLA_EXEC_MAX_COMMAND);
                        FUZZ_CHECK(x.timeout_ms >= 0);
                        check_strings(x.env);
                        if (x.cwd)
                                check_path(x.cwd);
                });
                api_exec_done(&x);
                break;
        }
        case 2: {
                struct api_file_read x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_file_read(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, check_path(x.path));
                api_file_read_done(&x);
                break;
        }
        case 3: {
                struct api_file_write x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_file_write(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        check_path(x.path);
                        FUZZ_CHECK(x.content.len <= len);
                        FUZZ_CHECK(x.content.len == 0 || x.content.data != NULL);
                });
                api_file_write_done(&x);
                break;
        }
        case 4: {
                struct api_mkdir x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_mkdir(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, check_path(x.path));
                api_mkdir_done(&x);
                break;
        }
        case 5: {
                struct api_move x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_move(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        check_path(x.from);
                        check_path(x.to);
                });
                api_move_done(&x);
                break;
        }
        case 6: {
                /* A query-string boolean (NUL-terminated there). */
                /* Not strndup: the body is an exact-size copy, and ASan's strndup reads a
                 * byte past a zero-length one. */
                char *s = malloc(len + 1);
                bool b = false;
                if (!s)
                        return;
                memcpy(s, body, len);
                s[len] = '\0';
                r = api_parse_bool(s, true, &b);
                FUZZ_CHECK(r == 0 || r == -1);
                if (r == 0 && strlen(s) == len)
                        FUZZ_CHECK(b == (strcmp(s, "true") == 0 || strcmp(s, "1") == 0));
                free(s);
                /* POST /sleep's body, on the same bytes: 0 exactly for nothing or {} */
                {
                        struct cella_error se = {0};
                        json_t *o =
                                len ? json_loadb(body, len, JSON_REJECT_DUPLICATES, NULL) : NULL;
                        bool empty = len == 0 || (json_is_object(o) && json_object_size(o) == 0);

                        r = api_decode_sleep(body, len, &se);
                        json_decref(o);
                        FUZZ_CHECK(r == 0 || r == -EINVAL || r == -ENOMEM);
                        FUZZ_CHECK((r == 0) == !cella_error_is_set(&se) || r == -ENOMEM);
                        if (r != -ENOMEM)
                                FUZZ_CHECK((r == 0) == empty);
                }
                break;
        }
        case 8:
        case 9:
        case 10:
        case 11:
        case 12:
        case 13:
        case 14:
        case 15: {
                /* Background processes: a body for the agent's PROC, or a clean failure. */
                enum api_proc_call call =
                        which <= 12 ? (enum api_proc_call)(which - 8) : API_PROC_KILL;
                struct api_process x;
                char *q = NULL;

                if (which > 12) {
                        q = malloc(len + 1);
                        if (!q)
                                return;
                        memcpy(q, body, len);
                        q[len] = '\0';
                }
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_process(call, q ? "" : body, q ? 0 : len, q, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        if (call == API_PROC_START) {
                                FUZZ_CHECK(x.command && x.command[0] &&
                                           strlen(x.command) <= CELLA_EXEC_MAX_COMMAND);
                                FUZZ_CHECK(!x.process_id || cella_id_is_valid(x.process_id));
                                check_strings(x.env);
                                if (x.cwd)
                                        check_path(x.cwd);
                        }
                        FUZZ_CHECK(x.signal >= 0 && x.signal <= 64);
                        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
                        if (call == API_PROC_WAIT_PORT)
                                FUZZ_CHECK(x.port >= 1 && x.port <= 65535);
                        check_proc_wire(call, &x);
                });
                api_process_done(&x);
                free(q);
                break;
        }
        case 16: {
                struct api_session x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_session(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
                        FUZZ_CHECK(x.id == NULL || cella_id_is_valid(x.id));
                        check_strings(x.env);
                        if (x.cwd)
                                check_path(x.cwd);
                });
                api_session_done(&x);
                break;
        }
        case 17: {
                struct api_git_checkout x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_git_checkout(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        struct cella_error e = {0};

                        FUZZ_CHECK(x.repo_url != NULL);
                        FUZZ_CHECK(git_url_check(x.repo_url, strlen(x.repo_url), &e) == 0);
                        FUZZ_CHECK(x.branch == NULL ||
                                   git_branch_check(x.branch, strlen(x.branch), &e) == 0);
                        check_path(x.target_dir);
                        FUZZ_CHECK(strcmp(x.target_dir, "/") != 0);
                        FUZZ_CHECK(x.depth >= 0 && x.depth <= CELLA_GIT_MAX_DEPTH);
                        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
                });
                if (r < 0)
                        FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED ||
                                   err.code == CELLA_E_INVALID_GIT_URL ||
                                   err.code == CELLA_E_NAME_TOO_LONG ||
                                   err.code == CELLA_E_PAYLOAD_TOO_LARGE || r == -ENOMEM);
                api_git_checkout_done(&x);
                break;
        }
        case 18: {
                struct api_watch x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_watch(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        check_path(x.path);
                        FUZZ_CHECK(!x.include || json_is_array(x.include));
                        FUZZ_CHECK(!x.exclude || json_is_array(x.exclude));
                        FUZZ_CHECK(json_array_size(x.include) + json_array_size(x.exclude) <=
                                   CELLA_WATCH_MAX_PATTERNS);
                });
                api_watch_done(&x);
                break;
        }
        case 19: {
                struct api_context_create x;

                memset(&x, 0xa5, sizeof(x));
                r = api_decode_context_create(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        FUZZ_CHECK(x.language >= WIRE_CODE_PYTHON &&
                                   x.language <= WIRE_CODE_TYPESCRIPT);
                        if (x.cwd)
                                check_path(x.cwd);
                        check_strings(x.env);
                        check_code_wire(&(struct wire_code){.op = WIRE_CODE_CREATE,
                                                            .language = x.language,
                                                            .cwd = x.cwd,
                                                            .env = x.env});
                });
                api_context_create_done(&x);
                break;
        }
        case 20: {
                struct api_code_run x;

                memset(&x, 0xa5, sizeof(x));
                r = api_decode_code_run(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        FUZZ_CHECK(x.code && strlen(x.code) <= CELLA_CODE_MAX_CODE);
                        FUZZ_CHECK(!x.context_id || cella_id_is_valid(x.context_id));
                        FUZZ_CHECK(!x.language_given || (x.language >= WIRE_CODE_PYTHON &&
                                                         x.language <= WIRE_CODE_TYPESCRIPT));
                        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
                        check_code_wire(&(struct wire_code){.op = WIRE_CODE_RUN,
                                                            .id = x.context_id,
                                                            .language = x.language,
                                                            .language_given = x.language_given,
                                                            .code = x.code,
                                                            .timeout_ms = x.timeout_ms});
                });
                api_code_run_done(&x);
                break;
        }
        case 22:
                fuzz_image(body, len);
                break;
        case 21: {
                struct api_pty_control x;
                memset(&x, 0xa5, sizeof(x));
                r = api_decode_pty_control(body, len, &x, &err);
                CHECK_OUTCOME(r, err, x, {
                        FUZZ_CHECK(x.cols >= 1 && x.cols <= CELLA_PTY_MAX_DIM);
                        FUZZ_CHECK(x.rows >= 1 && x.rows <= CELLA_PTY_MAX_DIM);
                });
                if (r < 0)
                        FUZZ_CHECK(err.code == CELLA_E_VALIDATION_FAILED || r == -ENOMEM);
                break;
        }
        default: {
                /* setEnvVars bodies share this selector with the string-object check. */
                struct api_env e;
                struct cella_error eerr = {0};
                int er = api_decode_env(body, len, &e, &eerr);
                FUZZ_CHECK(er == 0 ? (json_is_object(e.vars) && !cella_error_is_set(&eerr))
                                   : (e.vars == NULL && cella_error_is_set(&eerr)));
                FUZZ_CHECK(er != 0 || e.session_id == NULL || cella_id_is_valid(e.session_id));
                api_env_done(&e);
                json_t *j = json_loadb(body, len, JSON_ALLOW_NUL, NULL);
                if (!j)
                        return;
                if (json_is_object(j)) {
                        r = api_check_string_object(j, "env", 16, &err);
                        if (r == 0) {
                                FUZZ_CHECK(json_object_size(j) <= 16);
                                check_strings(j);
                        } else {
                                FUZZ_CHECK(r < 0 && cella_error_is_set(&err));
                        }
                }
                json_decref(j);
                break;
        }
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *body;

        if (size == 0)
                return 0;
        body = malloc(size - 1 ? size - 1 : 1);
        if (!body)
                return 0;
        memcpy(body, data + 1, size - 1);
        fuzz_decoder(data[0] % 23, body, size - 1);
        free(body);
        return 0;
}
