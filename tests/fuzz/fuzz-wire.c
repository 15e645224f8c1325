/* Fuzz the agent request bodies' decoders (common/wire.h) on any JSON text: the input is
 * parsed (as the agent parses a frame's payload), then decoded as each body type.
 *
 * Invariants: a refused body has err set and the result zeroed of borrowed pointers that
 * matter; an accepted one is within the bounds wire.h promises (command 1..max bytes
 * without NUL, session a valid id, timeout 0..max, dimensions 1..max, env objects), and
 * encoding the decoded fields then decoding that gives the same fields back. The same for
 * the file bodies (FILE_READ, FILE_WRITE, FILE_OP), paths in both their forms, and for
 * SESSION, WATCH, PROC and CODE. */
#include <errno.h>
#include <string.h>

#include "common/limits.h"
#include "common/name.h"
#include "common/proto.h"
#include "common/validate.h"
#include "common/wire.h"
#include "fuzz.h"

static bool same(const char *a, const char *b)
{
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static void check_exec(json_t *j)
{
        struct cella_error err = {0};
        struct wire_exec x, y;
        json_t *again;

        if (wire_exec_decode(j, &x, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.command && x.command[0] && strlen(x.command) <= CELLA_EXEC_MAX_COMMAND);
        FUZZ_CHECK(!x.session || cella_id_is_valid(x.session));
        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
        FUZZ_CHECK(!x.env || json_is_object(x.env));
        FUZZ_CHECK(!x.base_env || json_is_object(x.base_env));
        again = wire_exec_encode(&x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_exec_decode(again, &y, &err) == 0);
        FUZZ_CHECK(strcmp(x.command, y.command) == 0 && same(x.cwd, y.cwd) &&
                   same(x.session, y.session) && x.timeout_ms == y.timeout_ms);
        FUZZ_CHECK((!x.env && !y.env) || json_equal(x.env, y.env));
        FUZZ_CHECK((!x.base_env && !y.base_env) || json_equal(x.base_env, y.base_env));
        json_decref(again);
}

static void check_pty(json_t *j)
{
        struct cella_error err = {0};
        struct wire_pty x, y;
        json_t *again;

        if (wire_pty_decode(j, &x, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.cols >= 1 && x.cols <= CELLA_PTY_MAX_DIM);
        FUZZ_CHECK(x.rows >= 1 && x.rows <= CELLA_PTY_MAX_DIM);
        FUZZ_CHECK(!x.session || cella_id_is_valid(x.session));
        again = wire_pty_encode(&x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_pty_decode(again, &y, &err) == 0);
        FUZZ_CHECK(x.cols == y.cols && x.rows == y.rows && same(x.session, y.session));
        FUZZ_CHECK((!x.base_env && !y.base_env) || json_equal(x.base_env, y.base_env));
        json_decref(again);
}

/* FILE_READ, FILE_WRITE, FILE_OP: paths absolute and normalised, a known op, a mode in
 * range; re-encoded, the same request decodes again. */
static void check_file(uint8_t type, json_t *j)
{
        char path[CELLA_PATH_MAX + 1], to[CELLA_PATH_MAX + 1];
        char path2[CELLA_PATH_MAX + 1], to2[CELLA_PATH_MAX + 1];
        struct cella_error err = {0};
        struct wire_file x, y;
        json_t *again;

        if (wire_file_decode(type, j, &x, path, to, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.path == path && path[0] == '/');
        FUZZ_CHECK(type != FRAME_FILE_OP || (x.op >= WIRE_FILE_STAT && x.op <= WIRE_FILE_LIST));
        FUZZ_CHECK((x.to != NULL) == (type == FRAME_FILE_OP && x.op == WIRE_FILE_MOVE));
        FUZZ_CHECK(x.mode == -1 || (type == FRAME_FILE_WRITE && x.mode >= 0 && x.mode <= 07777));
        again = wire_file_encode(type, &x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_file_decode(type, again, &y, path2, to2, &err) == 0);
        FUZZ_CHECK(strcmp(path, path2) == 0 && same(x.to, y.to) && x.mode == y.mode);
        FUZZ_CHECK(type != FRAME_FILE_OP || x.op == y.op);
        if (type == FRAME_FILE_OP && x.op == WIRE_FILE_LIST)
                FUZZ_CHECK(x.recursive == y.recursive && x.include_hidden == y.include_hidden);
        json_decref(again);
}

/* SESSION: a known op, a valid id (always for delete), an env object for setenv, the
 * timeout in range; re-encoded, the same request decodes again. */
static void check_session(json_t *j)
{
        struct cella_error err = {0};
        struct wire_session x, y;
        json_t *again;

        if (wire_session_decode(j, &x, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.op >= WIRE_SESSION_CREATE && x.op <= WIRE_SESSION_SETENV);
        FUZZ_CHECK(!x.id || cella_id_is_valid(x.id));
        FUZZ_CHECK(x.op != WIRE_SESSION_DELETE || x.id);
        FUZZ_CHECK(x.op != WIRE_SESSION_SETENV || json_is_object(x.env));
        FUZZ_CHECK(!x.env || json_is_object(x.env));
        FUZZ_CHECK(!x.base_env || json_is_object(x.base_env));
        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
        again = wire_session_encode(&x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_session_decode(again, &y, &err) == 0);
        FUZZ_CHECK(x.op == y.op && same(x.id, y.id) && same(x.cwd, y.cwd) &&
                   x.timeout_ms == y.timeout_ms);
        FUZZ_CHECK((!x.env && !y.env) || json_equal(x.env, y.env));
        FUZZ_CHECK((!x.base_env && (!y.base_env || json_object_size(y.base_env) == 0)) ||
                   json_equal(x.base_env, y.base_env));
        json_decref(again);
}

/* WATCH: a path, globs within their bounds; re-encoded, the same request decodes again. */
static void check_watch(json_t *j)
{
        struct cella_error err = {0};
        struct wire_watch x, y;
        json_t *again;

        if (wire_watch_decode(j, &x, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.path != NULL);
        FUZZ_CHECK(!x.include || json_is_array(x.include));
        FUZZ_CHECK(!x.exclude || json_is_array(x.exclude));
        FUZZ_CHECK(json_array_size(x.include) + json_array_size(x.exclude) <=
                   CELLA_WATCH_MAX_PATTERNS);
        again = wire_watch_encode(&x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_watch_decode(again, &y, &err) == 0);
        FUZZ_CHECK(strcmp(x.path, y.path) == 0 && x.recursive == y.recursive);
        FUZZ_CHECK((!x.include && !y.include) || json_equal(x.include, y.include));
        FUZZ_CHECK((!x.exclude && !y.exclude) || json_equal(x.exclude, y.exclude));
        json_decref(again);
}

/* PROC: a known op, an id where the op needs one (never only digits for a start), each
 * member within its bound, the defaults filled in; re-encoded, the same request decodes
 * again. */
static void check_proc(json_t *j)
{
        struct cella_error err = {0};
        struct wire_proc x, y;
        json_t *again;

        if (wire_proc_decode(j, &x, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.op >= WIRE_PROC_START && x.op <= WIRE_PROC_WAIT_EXIT);
        if (x.op == WIRE_PROC_START) {
                FUZZ_CHECK(command_is_valid(x.command, strlen(x.command)));
                FUZZ_CHECK(!x.id ||
                           (cella_id_is_valid(x.id) && strspn(x.id, "0123456789") < strlen(x.id)));
                FUZZ_CHECK(!x.session || cella_id_is_valid(x.session));
        } else if (x.op != WIRE_PROC_LIST && x.op != WIRE_PROC_KILLALL) {
                FUZZ_CHECK(x.id && cella_id_is_valid(x.id));
        }
        FUZZ_CHECK(x.signal >= 0 && x.signal <= 64);
        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
        if (x.op == WIRE_PROC_WAIT_LOG)
                FUZZ_CHECK(x.pattern && x.pattern[0] &&
                           strlen(x.pattern) <= CELLA_PROC_MAX_PATTERN);
        if (x.op == WIRE_PROC_WAIT_PORT) {
                FUZZ_CHECK(x.port >= 1 && x.port <= 65535);
                FUZZ_CHECK(!x.path || http_path_is_valid(x.path, strlen(x.path)));
                FUZZ_CHECK(x.status_min >= 100 && x.status_min <= x.status_max &&
                           x.status_max <= 599);
                FUZZ_CHECK(x.interval_ms >= CELLA_PROC_MIN_INTERVAL_MS &&
                           x.interval_ms <= CELLA_PROC_MAX_INTERVAL_MS);
        }
        again = wire_proc_encode(&x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_proc_decode(again, &y, &err) == 0);
        FUZZ_CHECK(x.op == y.op && same(x.command, y.command) && same(x.session, y.session) &&
                   same(x.cwd, y.cwd) && x.signal == y.signal && same(x.pattern, y.pattern) &&
                   x.regex == y.regex && x.port == y.port && x.http == y.http &&
                   same(x.path, y.path) && x.status_min == y.status_min &&
                   x.status_max == y.status_max && x.interval_ms == y.interval_ms &&
                   x.timeout_ms == y.timeout_ms);
        FUZZ_CHECK(x.op == WIRE_PROC_LIST || x.op == WIRE_PROC_KILLALL || same(x.id, y.id));
        FUZZ_CHECK((!x.env && !y.env) || json_equal(x.env, y.env));
        FUZZ_CHECK((!x.base_env && !y.base_env) || json_equal(x.base_env, y.base_env));
        json_decref(again);
}

/* CODE: a known op, an id for delete, a known language, code within its bound; re-encoded,
 * the same request decodes again. */
static void check_code(json_t *j)
{
        struct cella_error err = {0};
        struct wire_code x, y;
        json_t *again;

        if (wire_code_decode(j, &x, &err) < 0) {
                FUZZ_CHECK(cella_error_is_set(&err));
                return;
        }
        FUZZ_CHECK(x.op >= WIRE_CODE_CREATE && x.op <= WIRE_CODE_RUN);
        FUZZ_CHECK(x.language >= WIRE_CODE_PYTHON && x.language <= WIRE_CODE_TYPESCRIPT);
        FUZZ_CHECK(!x.id || cella_id_is_valid(x.id));
        FUZZ_CHECK(x.op != WIRE_CODE_DELETE || x.id);
        FUZZ_CHECK(x.op != WIRE_CODE_RUN || (x.code && strlen(x.code) <= CELLA_CODE_MAX_CODE));
        FUZZ_CHECK(x.timeout_ms >= 0 && x.timeout_ms <= CELLA_EXEC_MAX_TIMEOUT_MS);
        again = wire_code_encode(&x);
        FUZZ_CHECK(again != NULL);
        FUZZ_CHECK(wire_code_decode(again, &y, &err) == 0);
        FUZZ_CHECK(x.op == y.op && same(x.id, y.id) && same(x.cwd, y.cwd) && same(x.code, y.code) &&
                   x.timeout_ms == y.timeout_ms);
        FUZZ_CHECK(x.op != WIRE_CODE_CREATE || x.language == y.language);
        FUZZ_CHECK(x.op != WIRE_CODE_RUN || (x.language_given == y.language_given &&
                                             (!x.language_given || x.language == y.language)));
        FUZZ_CHECK((!x.env && !y.env) || json_equal(x.env, y.env));
        FUZZ_CHECK((!x.base_env && !y.base_env) || json_equal(x.base_env, y.base_env));
        json_decref(again);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        json_t *j = json_loadb((const char *)data, size, JSON_REJECT_DUPLICATES, NULL);

        if (!json_is_object(j)) {
                json_decref(j);
                return 0;
        }
        check_exec(j);
        check_pty(j);
        check_file(FRAME_FILE_READ, j);
        check_file(FRAME_FILE_WRITE, j);
        check_file(FRAME_FILE_OP, j);
        check_session(j);
        check_watch(j);
        check_proc(j);
        check_code(j);
        json_decref(j);
        return 0;
}
