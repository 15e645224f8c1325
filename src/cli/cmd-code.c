/* cella code NAME CODE|-: code interpreter runs, their results saved or printed. */
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/base64.h"
#include "common/buf.h"

struct code_out {
        const char *out_dir;
        int images;
        bool error; /* the code raised */
        bool timed_out;
};

/* Write a base64 image result to DIR/result-N.EXT; prints the path. */
static void save_image(struct code_out *o, const char *b64, const char *ext, bool is_text)
{
        char path[4096];
        FILE *f;

        if (!o->out_dir) {
                fprintf(stderr, "cella: a %s result (use --out-dir DIR to save it)\n", ext);
                return;
        }
        snprintf(path, sizeof(path), "%s/result-%d.%s", o->out_dir, ++o->images, ext);
        f = fopen(path, "we");
        if (!f) {
                fprintf(stderr, "cella: %s: %s\n", path, strerror(errno));
                return;
        }
        if (is_text) {
                fputs(b64, f);
        } else {
                struct buf bytes = BUF_INIT;

                if (base64_decode(&bytes, b64, strlen(b64)) == 0 && bytes.len)
                        fwrite(bytes.data, 1, bytes.len, f);
                else
                        fprintf(stderr, "cella: %s: the result is not valid base64\n", path);
                buf_free(&bytes);
        }
        if (fclose(f) != 0)
                fprintf(stderr, "cella: %s: %s\n", path, strerror(errno));
        else
                printf("%s\n", path);
}

static void print_code_result(struct code_out *o, json_t *r)
{
        const char *png = cli_str(r, "png"), *jpeg = cli_str(r, "jpeg"), *svg = cli_str(r, "svg");

        if (*png)
                save_image(o, png, "png", false);
        if (*jpeg)
                save_image(o, jpeg, "jpeg", false);
        if (*svg)
                save_image(o, svg, "svg", true);
        if (!*png && !*jpeg && !*svg && json_object_get(r, "text"))
                printf("%s\n", cli_str(r, "text"));
}

static void print_code_error(struct code_out *o, json_t *e)
{
        json_t *line;
        size_t i;

        o->error = true;
        fflush(stdout);
        json_array_foreach(json_object_get(e, "traceback"), i, line)
                fprintf(stderr, "%s\n", json_string_value(line) ? json_string_value(line) : "");
        if (json_array_size(json_object_get(e, "traceback")) == 0)
                fprintf(stderr, "%s: %s\n", cli_str(e, "name"), cli_str(e, "message"));
}

static int on_code_event(const char *json, size_t len, void *ud)
{
        struct code_out *o = ud;
        json_t *j = json_loadb(json, len, 0, NULL);
        const char *type = cli_str(j, "type");

        if (strcmp(type, "stdout") == 0) {
                fputs(cli_str(j, "text"), stdout);
                fflush(stdout);
        } else if (strcmp(type, "stderr") == 0) {
                fputs(cli_str(j, "text"), stderr);
        } else if (strcmp(type, "result") == 0) {
                print_code_result(o, j);
        } else if (strcmp(type, "error") == 0) {
                print_code_error(o, j);
        } else if (strcmp(type, "execution_complete") == 0) {
                o->timed_out = json_is_true(json_object_get(j, "timedOut"));
        }
        fflush(stdout);
        json_decref(j);
        return 0;
}

int cmd_code(cella_client *c, struct cli_args *a)
{
        struct cella_code_options o = {
                .language = a->lang, .context_id = a->context, .timeout_ms = a->timeout_ms};
        struct code_out out = {.out_dir = a->out_dir};
        struct buf code = BUF_INIT;
        const char *src = a->pos[2];
        char *text = NULL;
        int r;

        if (!cli_has_args(a, 3))
                return cli_bad_args(a);
        if (strcmp(src, "-") == 0) {
                char chunk[65536];
                size_t n;

                while ((n = fread(chunk, 1, sizeof(chunk), stdin)) > 0)
                        if (buf_append(&code, chunk, n) < 0)
                                return cli_api_fail(c, CELLA_ERR_NOMEM);
                if (buf_append(&code, "", 1) < 0)
                        return cli_api_fail(c, CELLA_ERR_NOMEM);
                src = code.data;
        }
        if (a->json) {
                r = cella_code_run(c, a->pos[1], src, &o, NULL, NULL, &text);
        } else {
                r = cella_code_run(c, a->pos[1], src, &o, on_code_event, &out, NULL);
        }
        buf_free(&code);
        if (r < 0)
                return cli_api_fail(c, r);
        if (a->json) {
                json_t *j = json_loads(text, 0, NULL);

                cli_print_json(text);
                out.error = json_object_get(j, "error") != NULL;
                out.timed_out = json_is_true(json_object_get(j, "timedOut"));
                json_decref(j);
                free(text);
        }
        if (out.timed_out)
                fprintf(stderr, "cella: timed out\n");
        return out.error || out.timed_out ? 1 : 0;
}
