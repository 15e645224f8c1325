/* The raw form's end; see raw.h. */
#include "client/raw.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/limits.h"

/* "Name: value\r\n": the value, trimmed, when the line is name's. */
static bool header_is(const char *line, size_t n, const char *name, const char **value,
                      size_t *vlen)
{
        size_t k = strlen(name);

        if (n <= k || strncasecmp(line, name, k) != 0 || line[k] != ':')
                return false;
        line += k + 1;
        n -= k + 1;
        while (n && (*line == ' ' || *line == '\t')) {
                line++;
                n--;
        }
        while (n && (line[n - 1] == '\r' || line[n - 1] == '\n' || line[n - 1] == ' ' ||
                     line[n - 1] == '\t'))
                n--;
        *value = line;
        *vlen = n;
        return true;
}

/* A decimal int (an optional '-'), the whole value; false otherwise. */
static bool parse_int(const char *v, size_t n, int *ret)
{
        char num[16];
        char *end = NULL;
        long x;

        if (n == 0 || n >= sizeof(num))
                return false;
        memcpy(num, v, n);
        num[n] = '\0';
        errno = 0;
        x = strtol(num, &end, 10);
        if (errno || *end || x < INT_MIN || x > INT_MAX)
                return false;
        *ret = (int)x;
        return true;
}

static void copy_text(char *out, size_t size, const char *v, size_t n)
{
        snprintf(out, size, "%.*s", (int)MIN(n, size - 1), v);
}

void raw_end_line(struct raw_end *e, const char *line, size_t n)
{
        const char *v;
        size_t vn;

        if (header_is(line, n, "Cella-Pid", &v, &vn)) {
                e->has_pid = parse_int(v, vn, &e->pid);
        } else if (header_is(line, n, "Cella-Exit-Code", &v, &vn)) {
                e->has_exit = parse_int(v, vn, &e->exit_code);
        } else if (header_is(line, n, "Cella-Stderr", &v, &vn)) {
                /* its lines join in order, up to what the daemon sends at most */
                if (e->err.len + vn <= (size_t)CELLA_EXEC_RAW_STDERR / 3 * 4 + 4)
                        buf_append(&e->err, v, vn);
                else
                        e->err_cut = true;
        } else if (header_is(line, n, "Cella-Stderr-Truncated", &v, &vn)) {
                e->err_cut = vn == 4 && strncasecmp(v, "true", 4) == 0;
        } else if (header_is(line, n, "Cella-Error-Code", &v, &vn)) {
                copy_text(e->code, sizeof(e->code), v, vn);
                e->has_error = true;
        } else if (header_is(line, n, "Cella-Error-Message", &v, &vn)) {
                copy_text(e->message, sizeof(e->message), v, vn);
        }
}

void raw_end_free(struct raw_end *e)
{
        buf_free(&e->err);
}
