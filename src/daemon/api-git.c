/* POST /v1/sandboxes/{id}/git/checkout: `git clone` inside the sandbox as a sessionless
 * EXEC (api_agent_call), its failure mapped to an error code from git's stderr
 * (docs/decisions/0019-git-checkout.md).
 *
 * User input never enters the command text: the URL, branch, depth and directory reach the
 * fixed script below through its environment, after api_decode_git_checkout() checked
 * them. Whatever goes into an answer or a log line passes git_url_redact() first, so a
 * "user:password@" in the URL is never repeated. */
#include <errno.h>
#include <string.h>

#include "common/git-url.h"
#include "common/log.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-service.h"

/* $CELLA_GIT_* come from the request; the last line of stdout is the branch checked out
 * (or the commit, when HEAD is detached: a tag). */
static const char clone_script[] =
        "set --\n"
        "[ -n \"$CELLA_GIT_BRANCH\" ] && set -- \"$@\" --branch \"$CELLA_GIT_BRANCH\"\n"
        "[ -n \"$CELLA_GIT_DEPTH\" ] && set -- \"$@\" --depth \"$CELLA_GIT_DEPTH\"\n"
        "git clone --quiet \"$@\" -- \"$CELLA_GIT_URL\" \"$CELLA_GIT_DIR\" || exit $?\n"
        "git -C \"$CELLA_GIT_DIR\" symbolic-ref --quiet --short HEAD ||"
        " git -C \"$CELLA_GIT_DIR\" rev-parse HEAD\n";

struct git_op {
        struct api *a;
        char name[CELLA_NAME_MAX + 1];
        struct api_git_checkout in;
        char url[CELLA_GIT_MAX_URL + 1]; /* in.repo_url without user information */
        struct sandbox *sb;
};

static void op_free(struct git_op *op)
{
        api_git_checkout_done(&op->in);
        sandbox_unref(op->sb);
        free(op);
}

static void body_abort(struct http_request *req, void *ud)
{
        (void)req;
        op_free(ud);
}

/* The last non-empty line of s (trailing newlines dropped), at most outsz - 1 bytes. */
static void last_line(const char *s, char *out, size_t outsz)
{
        size_t n = strlen(s), start;

        while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r'))
                n--;
        start = n;
        while (start > 0 && s[start - 1] != '\n')
                start--;
        snprintf(out, outsz, "%.*s", (int)(n - start), s + start);
}

static void answer(struct http_request *req, json_t *result, const struct cella_error *err,
                   json_t *error_payload, void *ud)
{
        struct git_op *op = ud;
        const char *so, *se;
        json_int_t code;
        char ts[32];

        (void)error_payload;
        if (!req) {
                op_free(op);
                return;
        }
        if (err) {
                log_info("sandbox '%s': git checkout of %s: %s", op->name, op->url,
                         cella_code_name(err->code));
                http_respond_error(req, err, NULL);
                op_free(op);
                return;
        }
        code = json_integer_value(json_object_get(result, "exitCode"));
        so = json_string_value(json_object_get(result, "stdout"));
        se = json_string_value(json_object_get(result, "stderr"));
        if (!so)
                so = "";
        if (!se)
                se = "";
        if (json_is_true(json_object_get(result, "timedOut")) || code != 0) {
                struct cella_error e = {0};
                char clean[1024], line[200];
                json_t *ctx;

                /* the end of stderr holds git's verdict ("fatal: ..."), the start only
                 * progress: keep the tail when it is long */
                {
                        size_t n = strlen(se);
                        size_t keep = sizeof(clean) - 1;

                        git_url_redact(n > keep ? se + n - keep : se, MIN(n, keep), clean,
                                       sizeof(clean));
                }
                last_line(clean, line, sizeof(line));
                if (json_is_true(json_object_get(result, "timedOut")))
                        cella_error_set(&e, CELLA_E_COMMAND_TIMEOUT,
                                        "git clone of %s timed out after %lld ms; its process "
                                        "tree was killed",
                                        op->url, (long long)op->in.timeout_ms);
                else
                        cella_error_set(&e, git_clone_error_code(clean), "git clone of %s: %s",
                                        op->url, line[0] ? line : "failed");
                ctx = json_pack("{s:s, s:s, s:I, s:s}", "repoUrl", op->url, "targetDir",
                                op->in.target_dir, "exitCode", code, "stderr", clean);
                if (ctx && op->in.branch)
                        json_object_set_new(ctx, "branch", json_string(op->in.branch));
                log_info("sandbox '%s': git checkout of %s: %s", op->name, op->url,
                         cella_code_name(e.code));
                http_respond_error(req, &e, ctx);
                json_decref(ctx);
        } else {
                char branch[CELLA_GIT_MAX_BRANCH + 1];
                json_t *j;

                last_line(so, branch, sizeof(branch));
                j = json_pack("{s:b, s:s, s:s, s:s, s:s}", "success", 1, "repoUrl", op->url,
                              "branch", op->in.branch ? op->in.branch : branch, "targetDir",
                              op->in.target_dir, "timestamp", (api_timestamp(ts), ts));
                log_info("sandbox '%s': git checkout of %s done", op->name, op->url);
                if (j)
                        http_respond_json(req, 200, j);
                else
                        http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                json_decref(j);
        }
        op_free(op);
}

static void checkout_body(struct http_request *req, const char *body, size_t len, void *ud)
{
        struct git_op *op = ud;
        struct cella_error err = {0};
        json_t *env, *vars, *payload;
        char depth[24] = "";

        http_request_on_abort(req, NULL, NULL);
        if (api_decode_git_checkout(body, len, &op->in, &err) < 0) {
                http_respond_error(req, &err, NULL);
                op_free(op);
                return;
        }
        git_url_redact(op->in.repo_url, strlen(op->in.repo_url), op->url, sizeof(op->url));
        op->sb = api_sandbox_for(op->a, req, op->name);
        if (!op->sb) {
                op_free(op);
                return;
        }
        sandbox_ref(op->sb);
        if (op->in.depth > 0)
                snprintf(depth, sizeof(depth), "%lld", (long long)op->in.depth);
        env = sandbox_env(op->sb) ? json_deep_copy(sandbox_env(op->sb)) : json_object();
        vars = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "CELLA_GIT_URL", op->in.repo_url,
                         "CELLA_GIT_BRANCH", op->in.branch ? op->in.branch : "", "CELLA_GIT_DEPTH",
                         depth, "CELLA_GIT_DIR", op->in.target_dir, "LC_ALL", "C",
                         "GIT_TERMINAL_PROMPT", "0");
        if (!vars || (env && json_object_update(env, vars) < 0)) {
                json_decref(env);
                env = NULL;
        }
        json_decref(vars);
        payload = env ? wire_exec_encode(&(struct wire_exec){.command = clone_script,
                                                             .cwd = "/",
                                                             .env = env,
                                                             .timeout_ms = op->in.timeout_ms})
                      : NULL;
        json_decref(env);
        if (!payload) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                op_free(op);
                return;
        }
        if (api_agent_call(req, op->sb, FRAME_EXEC, payload, answer, op) < 0)
                op_free(op);
        json_decref(payload);
}

void api_git_checkout(struct api *a, struct http_request *req, const struct api_args *p)
{
        const char *name = p->name;
        struct git_op *op = calloc(1, sizeof(*op));

        if (!op) {
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "out of memory");
                return;
        }
        op->a = a;
        snprintf(op->name, sizeof(op->name), "%s", name);
        http_request_on_abort(req, body_abort, op);
        if (http_request_read_body(req, CELLA_HTTP_MAX_JSON_BODY, checkout_body, op) < 0) {
                http_request_on_abort(req, NULL, NULL);
                http_respond_code(req, CELLA_E_INTERNAL_ERROR, "cannot read the request body");
                op_free(op);
        }
}
