/* POST /v1/sandboxes/{id}/git/checkout: `git clone` inside the sandbox as a sessionless
 * EXEC (an agent call on a struct api_req), its failure mapped to an error code from git's
 * stderr (docs/decisions/0019-git-checkout.md).
 *
 * User input never enters the command text: the URL, branch, depth and directory reach the
 * fixed script below through its environment, after api_decode_git_checkout() checked
 * them. Whatever goes into an answer or a log line passes git_url_redact() first, so a
 * "user:password@" in the URL is never repeated.
 *
 * struct git_op is an agent call on a struct api_req (api-req.h): the EXEC's exit and
 * output come to answer(), a failure is logged by failed() and answered by the request. */
#include <errno.h>
#include <string.h>

#include "common/git-url.h"
#include "common/json-cleanup.h"
#include "common/log.h"
#include "common/wire.h"
#include "daemon/api-decode.h"
#include "daemon/api-handlers.h"
#include "daemon/api-req.h"

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
        struct api_req base; /* first: an agent call (EXEC) */
        struct api_git_checkout in;
        char url[CELLA_GIT_MAX_URL + 1]; /* in.repo_url without user information */
};

static void op_free(struct api_req *r)
{
        api_git_checkout_done(&((struct git_op *)r)->in);
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

static void failed(struct api_req *r, const struct cella_error *err)
{
        struct git_op *op = (struct git_op *)r;

        log_info("sandbox '%s': git checkout of %s: %s", r->name, op->url,
                 cella_code_name(err->code));
}

static void answer(struct api_req *r, json_t *result)
{
        struct git_op *op = (struct git_op *)r;
        const char *so, *se;
        json_int_t code;
        char ts[32];

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
                _cleanup_json_ json_t *ctx = NULL;

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
                log_info("sandbox '%s': git checkout of %s: %s", r->name, op->url,
                         cella_code_name(e.code));
                if (r->http)
                        http_respond_error(r->http, &e, ctx);
        } else {
                char branch[CELLA_GIT_MAX_BRANCH + 1];
                _cleanup_json_ json_t *j = NULL;

                last_line(so, branch, sizeof(branch));
                j = json_pack("{s:b, s:s, s:s, s:s, s:s}", "success", 1, "repoUrl", op->url,
                              "branch", op->in.branch ? op->in.branch : branch, "targetDir",
                              op->in.target_dir, "timestamp", (api_timestamp(ts), ts));
                log_info("sandbox '%s': git checkout of %s done", r->name, op->url);
                api_req_respond_json(r, 200, j);
        }
}

static const struct api_req_ops git_ops = {.result = answer, .failed = failed, .free = op_free};

static void checkout_body(struct api_req *r, const char *body, size_t len)
{
        struct git_op *op = (struct git_op *)r;
        struct cella_error err = {0};
        _cleanup_json_ json_t *env = NULL;
        _cleanup_json_ json_t *vars = NULL;
        _cleanup_json_ json_t *payload = NULL;
        char depth[24] = "";

        api_git_checkout_done(&op->in); /* a second call, once the sandbox runs */
        if (api_decode_git_checkout(body, len, &op->in, &err) < 0) {
                api_req_fail(r, &err, NULL);
                return;
        }
        git_url_redact(op->in.repo_url, strlen(op->in.repo_url), op->url, sizeof(op->url));
        if (!api_req_find_sandbox(r))
                return;
        if (op->in.depth > 0)
                snprintf(depth, sizeof(depth), "%lld", (long long)op->in.depth);
        env = api_req_base_env(r);
        vars = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s}", "CELLA_GIT_URL", op->in.repo_url,
                         "CELLA_GIT_BRANCH", op->in.branch ? op->in.branch : "", "CELLA_GIT_DEPTH",
                         depth, "CELLA_GIT_DIR", op->in.target_dir, "LC_ALL", "C",
                         "GIT_TERMINAL_PROMPT", "0");
        if (env && vars && json_object_update(env, vars) == 0)
                payload = wire_exec_encode(&(struct wire_exec){.command = clone_script,
                                                               .cwd = "/",
                                                               .env = env,
                                                               .timeout_ms = op->in.timeout_ms});
        api_req_open(r, FRAME_EXEC, payload); /* NULL: out of memory, answered so */
}

void api_git_checkout(struct api *a, struct http_request *req, const struct api_args *p)
{
        struct api_req *r = api_req_new(a, req, p->name, sizeof(struct git_op), &git_ops);

        if (r)
                api_req_read_body(r, CELLA_HTTP_MAX_JSON_BODY, checkout_body);
}
