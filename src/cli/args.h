/* The cella CLI's argument handling, as pure functions (unit-tested). */
#ifndef CELLA_CLI_ARGS_H
#define CELLA_CLI_ARGS_H

#include <stdbool.h>
#include <stddef.h>

#include "common/buf.h"
#include "common/limits.h"

#define CLI_MAX_KV 256

/* Options every command may take, and what the command line said. */
struct cli_args {
        const char *url;                      /* --url */
        const char *token;                    /* --token */
        bool json;                            /* --json */
        bool recursive;                       /* -r / -p */
        bool all;                             /* -a */
        bool help;                            /* -h / --help */
        bool quiet;                           /* -q / --quiet: no confirmation lines */
        bool version;                         /* --version */
        const char *cwd;                      /* --cwd */
        long timeout_ms;                      /* --timeout D (0: not given) */
        const char *image;                    /* --image */
        const char *packages[CLI_MAX_KV + 1]; /* image build --package P */
        int npackages;
        bool replace;                      /* image import --replace */
        const char *instance_type;         /* --instance-type */
        long sleep_after_s;                /* --sleep-after D, in seconds (0: not given) */
        bool keep_alive;                   /* --keep-alive */
        const char *sleep_mode;            /* --sleep-mode files|memory */
        bool memory;                       /* fork --memory */
        bool no_default_session;           /* --no-default-session */
        const char *network;               /* --network */
        const char *allow[CLI_MAX_KV + 1]; /* --allow CIDR[:port] */
        int nallow;
        const char *env[CLI_MAX_KV + 1];
        int nenv;
        const char *labels[CLI_MAX_KV + 1];
        int nlabels;
        /* background processes */
        const char *id;        /* start --id, session create --id */
        const char *session;   /* exec/start/env set --session */
        const char *signal;    /* kill --signal */
        bool follow;           /* logs -f / --follow */
        const char *log;       /* wait --log PATTERN */
        bool regex;            /* wait --regex */
        long port;             /* wait --port N (0: not given) */
        const char *http_path; /* wait --http PATH */
        bool exit;             /* wait --exit */
        /* file watch */
        const char *include[CLI_MAX_KV + 1]; /* --include GLOB */
        int ninclude;
        const char *exclude[CLI_MAX_KV + 1]; /* --exclude GLOB */
        int nexclude;
        bool no_recursive; /* --no-recursive */
        /* code interpreter */
        const char *lang;    /* code/context create --lang */
        const char *context; /* code --context ID */
        const char *out_dir; /* code --out-dir DIR */
        /* git clone */
        const char *branch; /* --branch */
        long depth;         /* --depth N (0: not given) */
        const char *dir;    /* --dir */
        const char *ttl;    /* backup create --ttl SECONDS */
        bool gitignore;     /* backup create --gitignore */
        bool consistent;    /* backup create --consistent */
        bool no_multipart;  /* backup create --no-multipart */
        /* exposed ports */
        const char *port_name;  /* expose --name */
        const char *port_token; /* expose --token (after the command word "expose"; before
                                   it, --token is the API token) */
        /* tenants' keys */
        const char *tenant;   /* key create --tenant */
        long max_sandboxes;   /* key create --max-sandboxes N (0: none) */
        long long max_memory; /* key create --max-memory SIZE, in bytes (0: none) */
        /* top */
        bool once;           /* --once */
        long interval_ms;    /* --interval D (0: not given) */
        const char *pos[64]; /* positional words (command name first) */
        int npos;
        bool rest_is_command; /* after "--" or the first command word of exec */
        char error[256];      /* usage error, when parse returns -1 */
};

/* Parse argv[1..argc). For "exec" and "start", everything from the first word after NAME
 * on (or after "--") is the command, taken verbatim. Returns 0 or -1 (args->error says
 * why). */
int cli_parse(int argc, char **argv, struct cli_args *args);
/* A size: digits, then an optional K, M, G or T (powers of 1024, "KiB", "Ki" and "KB" read
 * the same), at most 2^62 bytes. 0 or -1. */
int cli_size_parse(const char *s, long long *ret);

/* Join words with single spaces into one shell command line, as ssh does. */
int cli_join(char **words, int n, struct buf *out);

/* The longest --timeout: an exec's own limit (7 days). */
#define CLI_TIMEOUT_MAX_MS CELLA_EXEC_MAX_TIMEOUT_MS
/* top --interval's range: 100 ms to 1 h. */
#define CLI_INTERVAL_MIN_MS 100
#define CLI_INTERVAL_MAX_MS (3600L * 1000)
/* --sleep-after's range, the API's: 1 s to 30 days, whole seconds. */
#define CLI_SLEEP_AFTER_MAX_S (30L * 24 * 3600)

/* Is name a valid sandbox name? If not, write the reason and the rule (lower-case a-z,
 * 0-9 and '-', 1-63 characters, ...) to msg and return false. */
bool cli_sandbox_name_ok(const char *name, char *msg, size_t size);

#endif
