/* The sandbox directory: where the daemon finds sandboxes by name, as an operations table
 * (crun's cgroup managers are the model) so that another directory (one shared by several
 * nodes) can stand where the local table (sandbox.h) stands today. The HTTP handlers (through
 * api_sandbox_for, with get) and the preview proxy (get_now, a lookup) reach sandboxes
 * through it.
 *
 * get is asynchronous: it calls back once the sandbox runs (create) or is found (lookup),
 * or with the error; the callback may come before get returns. Gets of one name while it
 * starts wait for that start, and a name is started once however many ask. put is
 * asynchronous the same way. get_now is a lookup answered before it returns (it never
 * starts nor waits for a start); destroy, list and the rest are answered at once too.
 *
 * A struct sandbox passed to a callback is borrowed for the callback; keep it with
 * sandbox_ref(). */
#ifndef CELLA_DAEMON_SANDBOX_DIRECTORY_H
#define CELLA_DAEMON_SANDBOX_DIRECTORY_H

#include <jansson.h>
#include <stdbool.h>

#include "common/error.h"
#include "daemon/sandbox.h"

struct sandbox_directory;

/* s: the sandbox (NULL with err set on failure); created: this get made it. */
typedef void (*sandbox_get_cb)(struct sandbox *s, bool created, const struct cella_error *err,
                               void *userdata);

struct sandbox_directory_ops {
        /* Find name (already validated). With create, make it (opts, or defaults when
         * NULL) or wake it, and call back when it runs; without, call back with it in
         * whatever state it is in (nothing starts), or SANDBOX_NOT_FOUND. cb is called
         * exactly once. */
        void (*get)(struct sandbox_directory *d, const char *name, bool create,
                    const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata);
        /* get without create, answered before it returns: 0 with *ret (in whatever state
         * it is, maybe not running yet), or -1 with err (SANDBOX_NOT_FOUND). Nothing
         * starts, nothing waits: a first use that needs a start goes through get. */
        int (*get_now)(struct sandbox_directory *d, const char *name, struct sandbox **ret,
                       struct cella_error *err);
        /* PUT semantics: create with opts (called back when it runs, as get) or update an
         * existing one (called back before put returns). opts are read before put
         * returns. */
        void (*put)(struct sandbox_directory *d, const char *name,
                    const struct sandbox_options *opts, sandbox_get_cb cb, void *userdata);
        int (*destroy)(struct sandbox_directory *d, const char *name, bool *ret_existed,
                       struct cella_error *err);
        json_t *(*list)(struct sandbox_directory *d); /* new reference */
        unsigned (*count)(struct sandbox_directory *d);
        bool (*image_in_use)(struct sandbox_directory *d, const char *image);
        /* The registry beside the sandboxes (exposed ports). */
        struct store *(*store)(struct sandbox_directory *d);
};

struct sandbox_directory {
        const struct sandbox_directory_ops *ops;
};

/* The local table as a directory (it lives as long as the table). */
struct sandbox_directory *sandbox_table_directory(struct sandbox_table *t);

#endif
