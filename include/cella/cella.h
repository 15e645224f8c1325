/* libcella: the C client of the cella HTTP API (docs/api.md).
 *
 * One cella_client per thread; it keeps one HTTP connection alive between calls. Every
 * function returns CELLA_OK (0) or a negative CELLA_ERR_*; after CELLA_ERR_API the server's
 * error code ("FILE_NOT_FOUND"), message and HTTP status are readable from the client
 * until the next call. Strings returned through ret_ parameters are the caller's, freed
 * with cella_free(). */
#ifndef CELLA_CELLA_H
#define CELLA_CELLA_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CELLA_VERSION "0.1.0"

enum {
        CELLA_OK = 0,
        CELLA_ERR_API = -1,       /* the server answered with an error */
        CELLA_ERR_TRANSPORT = -2, /* no answer: connection refused, reset, timeout */
        CELLA_ERR_NOMEM = -3,
        CELLA_ERR_INVALID = -4,  /* bad argument, or an answer that is not what the API says */
        CELLA_ERR_CALLBACK = -5, /* a callback asked to stop */
        CELLA_ERR_IO = -6,       /* local read or write failed (errno is kept) */
};

typedef struct cella_client cella_client;
typedef struct cella_exec_result cella_exec_result;

/* The process-wide setup of libcella's transport (libcurl and its TLS library): done once,
 * thread-safe. cella_client_new calls it; a program that makes clients on several threads
 * calls it first from its main thread, so that the TLS library's own state belongs to that
 * thread (libcurl's curl_global_init advice). 0 or CELLA_ERR_TRANSPORT. */
int cella_global_init(void);

/* url NULL: $CELLA_URL, else http://127.0.0.1:7070; "unix:/PATH" (or "unix:///PATH"):
 * cellad's unix socket at /PATH (cellad --listen unix:PATH), CELLA_ERR_INVALID for a
 * relative one. token NULL: $CELLA_TOKEN (may be unset). */
int cella_client_new(const char *url, const char *token, cella_client **ret);
void cella_client_free(cella_client *c);
/* From any thread: end the call in progress on c at once (its connection is shut down, so
 * the server sees the client go: a code run is interrupted, a stream ends) and make it and
 * every later call on c return CELLA_ERR_CALLBACK (code INTERRUPTED). For a thread
 * blocked in a stream (cella_code_run, cella_watch, ...) that another thread must stop. */
void cella_client_interrupt(cella_client *c);
const char *cella_client_error_code(const cella_client *c);    /* "" when none */
const char *cella_client_error_message(const cella_client *c); /* "" when none */
long cella_client_http_status(const cella_client *c);
/* The daemon's base URL the client talks to ("http://127.0.0.1:7070", no trailing slash),
 * as chosen by cella_client_new; the client's, valid until cella_client_free. */
const char *cella_client_url(const cella_client *c);
void cella_free(void *p);

/* Any route: method, path below the base URL ("/v1/health"), optional JSON body. The
 * answer body (JSON text) goes to *ret_body when ret_body is not NULL. */
int cella_request(cella_client *c, const char *method, const char *path, const char *json_body,
                  char **ret_body);

/* ---- sandboxes ---- */
struct cella_sandbox_options {
        const char *image;         /* NULL: the daemon's default */
        const char *instance_type; /* NULL: default */
        const char *const *env;    /* "K=V" strings, NULL-terminated, or NULL */
        const char *const *labels; /* "K=V" strings, NULL-terminated, or NULL */
        const char *sleep_after; /* idle time before sleeping: "30s", "10m", "2h"; NULL: default */
        bool keep_alive;         /* never sleep */
        bool no_default_session; /* calls without a session run sessionless (fresh shell) */
        const char *network;     /* "none" or "outbound"; NULL: the daemon's default */
        const char *const *network_allow; /* "CIDR[:port]", NULL-terminated, or NULL */
        const char *sleep_mode; /* "files" or "memory" (what a sleep keeps); NULL: not given */
};
int cella_sandbox_create(cella_client *c, const char *name, const struct cella_sandbox_options *o,
                         char **ret_json);
int cella_sandbox_info(cella_client *c, const char *name, char **ret_json);
int cella_sandbox_list(cella_client *c, char **ret_json);
int cella_sandbox_destroy(cella_client *c, const char *name, bool *ret_existed);
/* Put the sandbox to sleep now, as an idle sleep does (its sleepMode; keepAlive and open
 * streams notwithstanding: they end), and return once it sleeps (a memory sleep: after its
 * checkpoint). *ret_json: its SandboxInfo (state "sleeping"); free with cella_free. A
 * sleeping sandbox is answered as it is; a stopped one is code SANDBOX_STOPPED (409). */
int cella_sandbox_sleep(cella_client *c, const char *name, char **ret_json);
/* setEnvVars: "K=V" sets, a bare "K" unsets; NULL-terminated. */
int cella_sandbox_set_env(cella_client *c, const char *name, const char *const *vars);

/* ---- sessions (persistent shells) ---- */
struct cella_session_options {
        const char *id;          /* NULL: generated */
        const char *cwd;         /* NULL: /workspace */
        const char *const *env;  /* "K=V", NULL-terminated, or NULL */
        long command_timeout_ms; /* default timeout of its commands; 0: none */
};
/* *ret_json: the SessionInfo ({id, cwd, createdAt, ...}); free with cella_free. */
int cella_session_create(cella_client *c, const char *sandbox,
                         const struct cella_session_options *o, char **ret_json);
int cella_session_list(cella_client *c, const char *sandbox, char **ret_json);
int cella_session_delete(cella_client *c, const char *sandbox, const char *id);
/* setEnvVars for one session ("K=V" sets, "K" unsets). */
int cella_session_set_env(cella_client *c, const char *sandbox, const char *id,
                          const char *const *vars);
int cella_health(cella_client *c, char **ret_json);

/* ---- exposed ports and preview URLs ---- */
/* Expose port (1024..65535) of the sandbox; name and token (1..16 of [a-z0-9_]) may be
 * NULL. *ret_json: {url, port, name}; free with cella_free. Re-exposing keeps the URL. */
int cella_port_expose(cella_client *c, const char *sandbox, int port, const char *name,
                      const char *token, char **ret_json);
/* *ret_json: {ports: [{url, port, name, status: "active" | "stale"}]}. */
int cella_port_list(cella_client *c, const char *sandbox, char **ret_json);
/* Idempotent. */
int cella_port_unexpose(cella_client *c, const char *sandbox, int port);

/* ---- commands ---- */
struct cella_exec_options {
        const char *cwd;        /* NULL: /workspace */
        const char *const *env; /* "K=V", NULL-terminated, or NULL */
        long timeout_ms;        /* 0: none */
        const char *session_id; /* NULL: the default session (or sessionless) */
};
struct cella_exec_callbacks {
        void (*on_start)(int pid, void *userdata);
        /* Return non-zero to stop (the command is then killed). */
        int (*on_stdout)(const void *data, size_t len, void *userdata);
        int (*on_stderr)(const void *data, size_t len, void *userdata);
        void *userdata;
};
/* Run and stream output as it arrives (SSE). *ret_exit_code gets the exit code. A timeout
 * is CELLA_ERR_API with code COMMAND_TIMEOUT; a command that ended its session's shell
 * (`exit 3`) is CELLA_ERR_API with code SESSION_TERMINATED, and *ret_exit_code still gets
 * the shell's exit code. */
int cella_exec_stream(cella_client *c, const char *sandbox, const char *command,
                      const struct cella_exec_options *o, const struct cella_exec_callbacks *cb,
                      int *ret_exit_code);
/* The same through the raw form (Accept: application/octet-stream, docs/api.md): stdout
 * reaches cb->on_stdout as it arrives, undecoded, in the sizes the socket gives; stderr,
 * kept by the daemon up to 64 KiB (the rest is dropped), reaches cb->on_stderr once, after
 * stdout. Errors and *ret_exit_code as cella_exec_stream's. The fastest way to take a
 * command's output; cella_exec_stream when stderr must come as it is written. */
int cella_exec_raw(cella_client *c, const char *sandbox, const char *command,
                   const struct cella_exec_options *o, const struct cella_exec_callbacks *cb,
                   int *ret_exit_code);
/* Run and collect everything (byte-exact). */
int cella_exec(cella_client *c, const char *sandbox, const char *command,
               const struct cella_exec_options *o, cella_exec_result **ret);
int cella_exec_result_exit_code(const cella_exec_result *r);
const void *cella_exec_result_stdout(const cella_exec_result *r, size_t *ret_len);
const void *cella_exec_result_stderr(const cella_exec_result *r, size_t *ret_len);
void cella_exec_result_free(cella_exec_result *r);

/* ---- file watch ----
 * Events under a directory of the sandbox as they happen (SSE, docs/api.md): on_event
 * gets each event's JSON text ({"type":"watching"|"event"|"overflow", ...}, borrowed);
 * returning non-zero stops the watch (CELLA_ERR_CALLBACK). Runs until stopped, the
 * connection ends (CELLA_OK) or an error event (CELLA_ERR_API). */
struct cella_watch_options {
        bool no_recursive;          /* watch the directory itself only */
        const char *const *include; /* globs, NULL-terminated, or NULL: every path */
        const char *const *exclude; /* globs, NULL-terminated; NULL: .git, node_modules */
};
int cella_watch(cella_client *c, const char *sandbox, const char *path,
                const struct cella_watch_options *o,
                int (*on_event)(const char *json, size_t len, void *userdata), void *userdata);

/* ---- code interpreter ----
 * Contexts are long-lived interpreters in the sandbox (docs/api.md "Code interpreter").
 * Answers are JSON text freed with free(): a Context {id, language, cwd, status}, a list
 * {contexts: [...]}, an Execution {results, logs: {stdout[], stderr[]}, error?,
 * executionCount}. */
struct cella_context_options {
        const char *language;   /* python (default), javascript, typescript */
        const char *cwd;        /* NULL: /workspace */
        const char *const *env; /* "K=V", NULL-terminated, or NULL */
};
int cella_context_create(cella_client *c, const char *sandbox,
                         const struct cella_context_options *o, char **ret_json);
int cella_context_list(cella_client *c, const char *sandbox, char **ret_json);
int cella_context_delete(cella_client *c, const char *sandbox, const char *id);

struct cella_code_options {
        const char *language;   /* NULL: python, or the context's */
        const char *context_id; /* NULL: the language's default context */
        long long timeout_ms;   /* 0: none */
};
/* Run code. Without on_event: one request, *ret_json the Execution. With on_event: the
 * run's events as they happen (SSE), each event's JSON text (borrowed) to on_event:
 * {"type":"stdout"|"stderr", "text"}, {"type":"result", ...}, {"type":"error", "name",
 * "message", "traceback"} (an error in the code) and last {"type":"execution_complete",
 * "executionCount", "timedOut"}; a non-zero return stops (CELLA_ERR_CALLBACK). A failure
 * of the run itself (unknown context, dead interpreter) is CELLA_ERR_API in both modes. */
int cella_code_run(cella_client *c, const char *sandbox, const char *code,
                   const struct cella_code_options *o,
                   int (*on_event)(const char *json, size_t len, void *userdata), void *userdata,
                   char **ret_json);

/* ---- background processes ----
 * Process ids are the ones given at start or generated ("proc-1"); a pid (as text) also
 * names a process. Answers are JSON text (ProcessInfo, docs/api.md) freed with free(). */
struct cella_process_options {
        const char *id;         /* NULL: generated */
        const char *session_id; /* NULL: none */
        const char *cwd;        /* NULL: /workspace */
        const char *const *env; /* "K=V", NULL-terminated, or NULL */
};
int cella_process_start(cella_client *c, const char *sandbox, const char *command,
                        const struct cella_process_options *o, char **ret_json);
int cella_process_list(cella_client *c, const char *sandbox, char **ret_json);
int cella_process_get(cella_client *c, const char *sandbox, const char *id, char **ret_json);
/* signal: "SIGINT", "INT" or a number as text; NULL: SIGTERM, then SIGKILL after a grace
 * period. Answers once the process has ended (ProcessInfo). */
int cella_process_kill(cella_client *c, const char *sandbox, const char *id, const char *signal,
                       char **ret_json);
int cella_process_kill_all(cella_client *c, const char *sandbox, const char *signal,
                           int *ret_killed);
/* The whole log so far, byte-exact, as a result whose exit code is 0. */
int cella_process_logs(cella_client *c, const char *sandbox, const char *id,
                       cella_exec_result **ret);
/* Output so far, then live output, until the process ends; *ret_exit_code its exit code.
 * on_start is not called. */
int cella_process_stream(cella_client *c, const char *sandbox, const char *id,
                         const struct cella_exec_callbacks *cb, int *ret_exit_code);
/* Waits: timeout_ms 0 waits as long as it takes. A timeout is CELLA_ERR_API with code
 * PROCESS_READY_TIMEOUT; a process that ended first, PROCESS_EXITED_BEFORE_READY. */
int cella_process_wait_log(cella_client *c, const char *sandbox, const char *id,
                           const char *pattern, bool regex, long timeout_ms, char **ret_json);
struct cella_wait_port_options {
        const char *http_path;      /* NULL: a TCP connect is enough; else GET this path */
        int status_min, status_max; /* 0: 200..399 */
        long interval_ms;           /* 0: the default (500) */
        long timeout_ms;            /* 0: none */
};
int cella_process_wait_port(cella_client *c, const char *sandbox, const char *id, int port,
                            const struct cella_wait_port_options *o, char **ret_json);
int cella_process_wait_exit(cella_client *c, const char *sandbox, const char *id, long timeout_ms,
                            char **ret_json);

/* ---- files (paths absolute or relative to /workspace) ---- */
int cella_file_write(cella_client *c, const char *sandbox, const char *path, const void *data,
                     size_t len);
int cella_file_write_fd(cella_client *c, const char *sandbox, const char *path, int fd);
/* The file's bytes written to fd from its current offset. Into a regular file (not
 * O_APPEND) or a pipe over http:// or unix:, the body is spliced from the socket (no copy
 * in this process); a connection that ends early leaves what came and is
 * CELLA_ERR_TRANSPORT; an API error writes nothing. */
int cella_file_read_fd(cella_client *c, const char *sandbox, const char *path, int fd);
int cella_file_list(cella_client *c, const char *sandbox, const char *path, bool recursive,
                    bool include_hidden, char **ret_json);
int cella_file_exists(cella_client *c, const char *sandbox, const char *path, bool *ret);
int cella_file_mkdir(cella_client *c, const char *sandbox, const char *path, bool recursive);
int cella_file_move(cella_client *c, const char *sandbox, const char *from, const char *to);
int cella_file_delete(cella_client *c, const char *sandbox, const char *path, bool recursive);

/* ---- git ---- */
struct cella_git_options {
        const char *branch;     /* NULL: the remote's default branch */
        const char *target_dir; /* NULL: /workspace/<repository name>; relative: below /workspace */
        long depth;             /* 0: full history; N: the last N commits (shallow) */
        long timeout_ms;        /* 0: the daemon's default (10 minutes) */
};
/* Clone repo_url inside the sandbox (POST .../git/checkout). *ret_json: {success, repoUrl,
 * branch, targetDir} (repoUrl without credentials). Failures are CELLA_ERR_API with code
 * GIT_REPOSITORY_NOT_FOUND, GIT_BRANCH_NOT_FOUND, GIT_AUTH_FAILED, GIT_NETWORK_ERROR,
 * INVALID_GIT_URL, DIRECTORY_NOT_EMPTY, COMMAND_TIMEOUT or GIT_CLONE_FAILED. */
int cella_git_checkout(cella_client *c, const char *sandbox, const char *repo_url,
                       const struct cella_git_options *o, char **ret_json);

/* ---- images ---- */
int cella_image_list(cella_client *c, char **ret_json);
/* Build (or rebuild) an image; on_line gets each log line as it arrives. */
int cella_image_build(cella_client *c, const char *name,
                      void (*on_line)(const char *line, size_t len, void *userdata),
                      void *userdata);
/* The same with extra Debian packages (on top of the image's list). */
int cella_image_build_packages(cella_client *c, const char *name, const char *const *packages,
                               size_t npackages,
                               void (*on_line)(const char *line, size_t len, void *userdata),
                               void *userdata);
/* Import an OCI image layout or `docker save` tarball read from fd as image name
 * (replace: swap an existing image). *ret_json: {name, source, layers, entries, sizeBytes,
 * skippedDevices}. Failures: INVALID_IMAGE (400), IMAGE_EXISTS / IMAGE_IN_USE / IMAGE_BUSY
 * (409), PAYLOAD_TOO_LARGE (413). */
int cella_image_import(cella_client *c, const char *name, int fd, bool replace, char **ret_json);
/* Delete an image: IMAGE_IN_USE (409) while a sandbox uses it, IMAGE_NOT_FOUND (404). */
int cella_image_delete(cella_client *c, const char *name, char **ret_json);

/* ---- snapshots and fork (docs/api.md "Snapshots and fork") ----
 * A snapshot's JSON: {snapshotId, name, sandbox, image, sizeBytes, createdAt}. */
/* Capture the files of sandbox (its processes frozen meanwhile); name NULL: its id.
 * Failures: SANDBOX_NOT_FOUND (404), VALIDATION_FAILED (400: a bad or taken name). */
int cella_snapshot_create(cella_client *c, const char *sandbox, const char *name, char **ret_json);
/* {snapshots: [...]}: every snapshot (sandbox NULL) or those taken of sandbox. */
int cella_snapshot_list(cella_client *c, const char *sandbox, char **ret_json);
/* One snapshot by id or name: SNAPSHOT_NOT_FOUND (404). */
int cella_snapshot_get(cella_client *c, const char *id, char **ret_json);
/* Delete: SNAPSHOT_IN_USE (409) while a sandbox made from it exists. */
int cella_snapshot_delete(cella_client *c, const char *id, char **ret_json);
/* Create sandbox name with the files of snapshot (PUT {fromSnapshot}): SandboxInfo. */
int cella_sandbox_from_snapshot(cella_client *c, const char *name, const char *snapshot,
                                char **ret_json);
/* Fork sandbox into a new sandbox name (a snapshot now, and a sandbox over it): its
 * SandboxInfo (with `snapshot`). */
int cella_fork(cella_client *c, const char *sandbox, const char *name, char **ret_json);
/* A fork with the sandbox's processes too ({"memory": true}): MEMORY_SNAPSHOT_UNAVAILABLE
 * (501) where the host cannot checkpoint them, and nothing is made. */
int cella_fork_memory(cella_client *c, const char *sandbox, const char *name, char **ret_json);

/* ---- tenants' API keys (docs/api.md "Tenants and keys", docs/tenants.md) ----
 * The admin's (the --token): a tenant's key is refused with PERMISSION_DENIED (403). A
 * key's JSON: {id, tenant, maxSandboxes, maxMemory, createdAt}; a tenant's key is used as
 * any token (cella_client_new's token). */
/* A new key of tenant ([a-z0-9], at most 16) with its quotas (0: none; maxMemory in
 * bytes): the key's JSON with `key`, the secret, shown this once. */
int cella_key_create(cella_client *c, const char *tenant, long long max_sandboxes,
                     long long max_memory, char **ret_json);
/* {keys: [...]} (never a secret). */
int cella_key_list(cella_client *c, char **ret_json);
/* Remove key id: it is refused from the next request on. KEY_NOT_FOUND (404). */
int cella_key_delete(cella_client *c, const char *id, char **ret_json);

/* ---- the cluster (docs/cluster.md; the admin's) ---- */
/* The cluster's live nodes: {nodes: [{node, advertise, capacity, sandboxes, running,
 * images, version, startedAt, lease, draining?, self}]}. NOT_FOUND (404) from a cellad
 * without --cluster, CLUSTER_UNAVAILABLE (503) when etcd does not answer. */
int cella_cluster_nodes(cella_client *c, char **ret_json);

/* ---- metrics (GET /metrics, docs/metrics.md) ---- */
/* The node's counters: *ret_text, the Prometheus text exposition (version 0.0.4); free
 * with cella_free. Needs the API token like every route but health. */
int cella_metrics(cella_client *c, char **ret_text);
/* In text (an answer of cella_metrics), the sum of the samples named name whose labels
 * include each "label=value" of match (NULL-terminated; NULL: every sample of that name).
 * *ret is 0 when no sample matches. CELLA_ERR_INVALID when text is not the text format. */
int cella_metrics_value(const char *text, const char *name, const char *const *match, double *ret);
/* The q-quantile (0 < q < 1) of histogram name (its _bucket samples) in text, estimated
 * from the buckets as Prometheus's histogram_quantile() does (linear within a bucket);
 * before_text, when not NULL, is an earlier answer: the quantile of what was observed
 * between the two. *ret is -1 when no observation falls in that span. */
int cella_metrics_quantile(const char *text, const char *before_text, const char *name, double q,
                           double *ret);

/* ---- backups (docs/api.md "Backups") ----
 * A backup's JSON: {id, name?, sandbox, dir, sizeBytes, createdAt, expiresAt}. */
/* Archive dir of sandbox into the daemon's backup store; name NULL: none; ttl_s 0: the
 * default (259200 s). Failures: SANDBOX_NOT_FOUND (404), INVALID_BACKUP_CONFIG (400),
 * BACKUP_CREATE_FAILED (500). */
int cella_backup_create(cella_client *c, const char *sandbox, const char *dir, const char *name,
                        int64_t ttl_s, char **ret_json);
/* Replace dir (NULL: the backup's) of sandbox with backup id's content, all or nothing:
 * {success, id, dir, sandbox}. Failures: BACKUP_NOT_FOUND (404), BACKUP_EXPIRED (400),
 * INVALID_BACKUP_CONFIG (400), BACKUP_RESTORE_FAILED (500: the directory is unchanged). */
int cella_backup_restore(cella_client *c, const char *sandbox, const char *id, const char *dir,
                         char **ret_json);
/* A backup with every option of POST /backups (docs/api.md "Backups"); o NULL or zeroed:
 * the defaults of cella_backup_create. */
struct cella_backup_options {
        const char *name;            /* NULL: none */
        int64_t ttl_s;               /* 0: the default (259200 s) */
        bool gitignore;              /* leave out what the tree's .gitignore files ignore */
        const char *const *excludes; /* nexcludes gitignore-style patterns, relative to dir */
        size_t nexcludes;
        bool consistent;   /* the sandbox frozen while dir is read: one point in time */
        bool no_multipart; /* to S3: spooled, then one PUT (multipart is the default) */
};
int cella_backup_create_with(cella_client *c, const char *sandbox, const char *dir,
                             const struct cella_backup_options *o, char **ret_json);
/* {backups: [...]}, newest first. */
int cella_backup_list(cella_client *c, char **ret_json);
/* One backup: BACKUP_NOT_FOUND (404). */
int cella_backup_get(cella_client *c, const char *id, char **ret_json);
/* {id, deleted}: BACKUP_NOT_FOUND (404). */
int cella_backup_delete(cella_client *c, const char *id, char **ret_json);

/* ---- terminal ----
 * A session's terminal over a WebSocket (GET .../pty, docs/api.md): one interactive shell
 * per session, shared by every connection to it. cella_pty_open connects (blocking) and
 * completes the handshake; an error answer (no such session, ...) is CELLA_ERR_API. Then
 * the caller waits for cella_pty_fd() to be readable (poll; POLLOUT too while
 * cella_pty_want_write()) and calls cella_pty_process(), which delivers what arrived
 * through the callbacks. Call cella_pty_process() once right after cella_pty_open too:
 * what arrived together with the handshake's answer is already read and waits there.
 * Not thread-safe; one thread per cella_pty. */
typedef struct cella_pty cella_pty;
struct cella_pty_options {
        const char *session_id; /* NULL: the default session */
        unsigned cols, rows;    /* 0: 80 x 24 */
};
struct cella_pty_events {
        /* terminal output (the replay of recent output first, then live) */
        void (*on_output)(const void *data, size_t len, void *userdata);
        /* the replay is complete ({"type":"ready"}) */
        void (*on_ready)(void *userdata);
        /* the shell exited with code ({"type":"exit","code":n}); the connection closes */
        void (*on_exit)(int code, void *userdata);
        /* every control message as received (JSON text, borrowed), ready/exit included;
         * may be NULL */
        void (*on_control)(const char *json, size_t len, void *userdata);
};
int cella_pty_open(cella_client *c, const char *sandbox, const struct cella_pty_options *o,
                   cella_pty **ret);
/* The socket to poll. */
int cella_pty_fd(const cella_pty *p);
/* Queued output for the server waits for the socket (poll for POLLOUT). */
bool cella_pty_want_write(const cella_pty *p);
/* Read what the socket has and deliver it; write what is queued. CELLA_OK while the
 * connection is open, 1 once it ended (cleanly or not), or an error. */
int cella_pty_process(cella_pty *p, const struct cella_pty_events *ev, void *userdata);
/* Typed bytes (a binary message). */
int cella_pty_send(cella_pty *p, const void *data, size_t len);
int cella_pty_resize(cella_pty *p, unsigned cols, unsigned rows);
/* A raw control message (JSON text; for tools and tests). */
int cella_pty_send_control(cella_pty *p, const char *json);
/* The shell's exit code once on_exit came, else -1. */
int cella_pty_exit_code(const cella_pty *p);
/* Close (a close frame if still open) and free. */
void cella_pty_close(cella_pty *p);

#ifdef __cplusplus
}
#endif
#endif
