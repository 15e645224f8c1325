/* The raw form's end (docs/api.md "exec, raw"): the header and trailer lines of a raw exec
 * answer read into what the command did. Pure. */
#ifndef CELLA_CLIENT_RAW_H
#define CELLA_CLIENT_RAW_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"

struct raw_end {
        bool has_pid;
        int pid;
        bool has_exit;
        int exit_code;
        bool has_error;
        char code[64];     /* Cella-Error-Code */
        char message[512]; /* Cella-Error-Message */
        struct buf err;    /* the Cella-Stderr lines joined (base64) */
        bool err_cut;      /* Cella-Stderr-Truncated */
};

/* One header or trailer line ("Name: value\r\n", any case; other lines are ignored).
 * Numbers that do not parse leave the field unset. */
void raw_end_line(struct raw_end *e, const char *line, size_t n);
void raw_end_free(struct raw_end *e);

#endif
