#include <string.h>

#include "cli/help.h"
#include "common/macros.h"

/* Every command, in the order `cella --help` lists them. docs/cli.md says the same. */
const struct cli_command cli_commands[] = {
        {"exec", "run a shell command line in a sandbox (created on first use)",
         "cella exec NAME [--session S] [--timeout D] [--cwd DIR] [--env K=V]... [--] "
         "COMMAND...",
         "Runs COMMAND (the words joined with spaces into one shell command line, as ssh\n"
         "does) in the sandbox's default session, or in session S, streaming its output\n"
         "byte-exact to stdout and stderr. Exits with the command's exit status; 124 when\n"
         "--timeout expired (the command's whole process tree was killed). Options go\n"
         "before the first command word; everything after it belongs to the command.\n",
         "  --session S    run in session S (cd and export carry over to its next exec)\n"
         "  --timeout D    kill the command after D (bare number: milliseconds)\n"
         "  --cwd DIR      working directory for this command only\n"
         "  --env K=V      an environment variable for this command only (repeatable)\n",
         "  cella exec box 'ls -la /workspace'\n"
         "  cella exec box --timeout 30s -- make test\n",
         1},
        {"write", "write stdin to a file in a sandbox", "cella write NAME PATH < FILE",
         "Streams stdin to PATH (any size; parent directories are created) and prints\n"
         "`wrote PATH`.\n",
         NULL, "  cella write box /workspace/app.py < app.py\n", 1},
        {"read", "write a file of a sandbox to stdout", "cella read NAME PATH > FILE",
         "Streams the file at PATH to stdout.\n", NULL,
         "  cella read box /workspace/out.csv > out.csv\n", 1},
        {"ls", "list a directory of a sandbox (without NAME: the sandboxes)",
         "cella ls NAME [PATH] [-r] [-a] [--json]\ncella ls [--json]",
         "Lists PATH (default /workspace): type and mode, size, modification time, name.\n"
         "Without NAME it is `cella list`.\n",
         "  -r, --recursive  descend into directories\n"
         "  -a, --all        include hidden files\n"
         "  --json           the server's JSON\n",
         "  cella ls box /workspace -r\n", 1},
        {"rm", "delete a file or directory in a sandbox", "cella rm NAME PATH [-r]",
         "Deletes the file at PATH, or a directory with -r, and prints `removed PATH`.\n",
         "  -r, --recursive  delete a directory and everything in it\n",
         "  cella rm box /workspace/build -r\n", 1},
        {"mkdir", "make a directory in a sandbox", "cella mkdir NAME PATH [-p]",
         "Makes the directory PATH and prints `created directory PATH`.\n",
         "  -p, --parents  make parent directories too; no error if it exists\n",
         "  cella mkdir box /workspace/src/lib -p\n", 1},
        {"mv", "move or rename a file in a sandbox", "cella mv NAME FROM TO",
         "Moves FROM to TO and prints `moved FROM to TO`.\n", NULL,
         "  cella mv box /workspace/a.txt /workspace/b.txt\n", 1},
        {"create", "create a sandbox, or change the settings of one",
         "cella create NAME [--image I] [--instance-type T] [--sleep-after D] [--keep-alive]\n"
         "      [--sleep-mode files|memory] [--no-default-session] [--network none|outbound]\n"
         "      [--allow CIDR[:PORT]]... [--env K=V]... [--label K=V]...",
         "Creates the sandbox, or updates the env, labels, sleep settings and allowlist of\n"
         "an existing one, and prints `created sandbox 'NAME'` (or `updated ...`); --json\n"
         "prints its SandboxInfo. A sandbox sleeps after D without activity: its processes,\n"
         "sessions and code contexts stop and its files stay (`cella info` shows when).\n",
         "  --image I              the image (default: the daemon's)\n"
         "  --instance-type T      the instance type (limits)\n"
         "  --sleep-after D        idle time before it sleeps, 1s to 30d, whole seconds\n"
         "                         (bare number: seconds; default 10m)\n"
         "  --keep-alive           never sleep\n"
         "  --sleep-mode M         what a sleep keeps: files (default) or memory (the\n"
         "                         processes too, where the host can: `cella info` says)\n"
         "  --no-default-session   each exec without --session is a fresh shell\n"
         "  --network none|outbound  loopback only, or NAT to the internet (default)\n"
         "  --allow CIDR[:PORT]    a destination allowed despite the refusals (repeatable)\n"
         "  --env K=V              a sandbox environment variable (repeatable)\n"
         "  --label K=V            a label (repeatable)\n"
         "  --json                 print the SandboxInfo\n",
         "  cella create box --sleep-after 1h30m --label team=web\n", 1},
        {"info", "show a sandbox: state, sleep settings, last activity, image, ...",
         "cella info NAME [--json]",
         "Prints the sandbox's state (running, sleeping, stopped), when it sleeps (its\n"
         "sleep-after time, keep-alive and sleep mode), its last activity, image, instance\n"
         "type, network, disk use, labels and env.\n",
         "  --json   the SandboxInfo JSON\n", "  cella info box\n", 1},
        {"list", "list the sandboxes", "cella list [--json]",
         "One line per sandbox: name, state, sleep-after (`never` with keep-alive), time\n"
         "since its last activity, image, instance type. `cella ls` and `cella ps` without\n"
         "NAME are the same.\n",
         "  --json   the server's JSON\n", "  cella list\n", 0},
        {"destroy", "remove a sandbox: processes, files, record", "cella destroy NAME",
         "Removes the sandbox and prints `destroyed sandbox 'NAME'` (or that it did not\n"
         "exist: destroying is idempotent).\n",
         NULL, "  cella destroy box\n", 1},
        {"sleep", "put a sandbox to sleep now", "cella sleep NAME [--json]",
         "Puts the sandbox to sleep at once, as an idle sleep does (its sleep mode: its\n"
         "memory checkpointed where the host can, else its files kept), whatever its\n"
         "keep-alive, ending its open commands and terminals. Prints `sandbox 'NAME' is\n"
         "sleeping` (and with its memory, the checkpoint's size); a sleeping sandbox is\n"
         "left as it is; a stopped one fails with SANDBOX_STOPPED. Any later command\n"
         "wakes it.\n",
         "  --json   the SandboxInfo JSON\n", "  cella sleep box\n", 1},
        {"env", "set or unset environment variables of a sandbox or a session",
         "cella env set NAME K=V|K... [--session S]",
         "K=V sets, K alone unsets. Without --session: the sandbox's variables (kept\n"
         "across restarts, applied to its live sessions). Prints one confirmation line.\n",
         "  --session S   set them in session S only\n", "  cella env set box DEBUG=1 OLD_VAR\n",
         2},
        {"session", "create, list and remove sessions (persistent shells)",
         "cella session create NAME [--id S] [--cwd DIR] [--env K=V]... [--timeout D]\n"
         "cella session ls NAME [--json]\n"
         "cella session rm NAME S",
         "create prints the new session's id; rm ends the session (its shell and\n"
         "everything it started are killed) and prints `removed session S`.\n",
         "  --id S        the session's id (default: generated)\n"
         "  --cwd DIR     its working directory\n"
         "  --env K=V     a variable of the session (repeatable)\n"
         "  --timeout D   its commands' default timeout (bare number: milliseconds)\n"
         "  --json        the server's JSON\n",
         "  S=$(cella session create box --cwd /workspace/app)\n"
         "  cella exec box --session \"$S\" 'cd src && make'\n",
         2},
        {"context", "create, list and remove code interpreter contexts",
         "cella context create NAME [--lang L] [--cwd DIR] [--env K=V]...\n"
         "cella context ls NAME [--json]\n"
         "cella context rm NAME ID",
         "create prints the new context's id; rm kills its interpreter and prints\n"
         "`removed context ID`.\n",
         "  --lang L      python (default), javascript or typescript\n"
         "  --cwd DIR     its working directory\n"
         "  --env K=V     a variable of the interpreter (repeatable)\n"
         "  --json        the server's JSON\n",
         "  X=$(cella context create box --lang python)\n"
         "  cella code box --context \"$X\" 'x = 41'\n",
         2},
        {"code", "run code in a code interpreter context",
         "cella code NAME [--lang L] [--context ID] [--timeout D] [--out-dir DIR] [--json] "
         "CODE|-",
         "Runs CODE (`-`: read it from stdin), printing stdout and stderr as they stream and\n"
         "text results; png/jpeg/svg results are written to DIR/result-N.EXT and their paths\n"
         "printed. Exits 1 when the code raised (the traceback on stderr) or timed out.\n",
         "  --lang L       python (default), javascript or typescript\n"
         "  --context ID   run in this context (default: the language's default one)\n"
         "  --timeout D    stop it after D (bare number: milliseconds)\n"
         "  --out-dir DIR  where image results go\n"
         "  --json         the Execution JSON\n",
         "  cella code box 'import sys; print(sys.version)'\n", 1},
        {"shell", "an interactive terminal in a sandbox's session",
         "cella shell NAME [--session S]",
         "Like `docker exec -it`: a terminal on stdin is put in raw mode and the window size\n"
         "goes along; a pipe is passed on as typed input. Exits with the shell's status.\n",
         "  --session S   the session (default: default)\n", "  cella shell box\n", 1},
        {"watch", "print file changes under a directory of a sandbox",
         "cella watch NAME PATH [--include G]... [--exclude G]... [--no-recursive] [--json]",
         "One line per change until interrupted: `create /workspace/a.txt` (modify, delete,\n"
         "move_from, move_to; a directory ends in /), `overflow` after lost events.\n",
         "  --include G      only paths matching glob G (repeatable)\n"
         "  --exclude G      not paths matching G (replaces the default .git, node_modules)\n"
         "  --no-recursive   only PATH itself, not its subdirectories\n"
         "  --json           each event's JSON\n",
         "  cella watch box /workspace --include '*.py'\n", 1},
        {"start", "start a background process in a sandbox",
         "cella start NAME [--id ID] [--session S] [--cwd DIR] [--env K=V]... [--] COMMAND...",
         "Starts COMMAND (words joined like exec) in the background and prints its id.\n"
         "Background processes stop when the sandbox sleeps (see `cella info`).\n",
         "  --id ID       the process's id (default: generated)\n"
         "  --session S   start it from session S\n"
         "  --cwd DIR     its working directory\n"
         "  --env K=V     a variable of the process (repeatable)\n"
         "  --json        the ProcessInfo JSON\n",
         "  cella start box --id web -- python3 -m http.server 8080\n", 1},
        {"ps", "list a sandbox's background processes (without NAME: the sandboxes)",
         "cella ps NAME [--json]\ncella ps [--json]",
         "One line per process: id, pid, status, exit code, start time, command. Without\n"
         "NAME it is `cella list`.\n",
         "  --json   the server's JSON\n", "  cella ps box\n", 1},
        {"logs", "a background process's output", "cella logs NAME ID [-f]",
         "The output so far, stdout to stdout and stderr to stderr. ID is the process's id\n"
         "or its pid.\n",
         "  -f, --follow   keep printing until the process exits\n", "  cella logs box web -f\n",
         1},
        {"kill", "kill a background process (its whole tree), or all of them",
         "cella kill NAME ID [--signal SIG]\ncella kill NAME --all [--signal SIG]",
         "Prints `ID STATUS` once the process tree is gone (with --all: how many were\n"
         "signalled).\n",
         "  --signal SIG   the signal (default SIGTERM, SIGKILL after 3 s)\n"
         "  -a, --all      every running process\n"
         "  --json         the ProcessInfo JSON\n",
         "  cella kill box web --signal INT\n", 1},
        {"wait", "wait for a background process's log line, port or exit",
         "cella wait NAME ID --log PATTERN [--regex] [--timeout D]\n"
         "cella wait NAME ID --port N [--http PATH] [--timeout D]\n"
         "cella wait NAME ID --exit [--timeout D]",
         "Exits 0 when the process printed a line matching PATTERN (the line is printed),\n"
         "listens on port N (TCP, or an HTTP GET of PATH answered 2xx/3xx), or, with --exit,\n"
         "with the process's exit code; 124 when D passed first. The sandbox does not sleep\n"
         "while a wait is open, however long it lasts.\n",
         "  --log PATTERN   a line containing PATTERN\n"
         "  --regex         PATTERN is a regular expression\n"
         "  --port N        a port that accepts connections\n"
         "  --http PATH     ... and answers GET PATH with 2xx/3xx\n"
         "  --exit          the process's exit\n"
         "  --timeout D     give up after D (bare number: milliseconds; default: no limit)\n"
         "  --json          the server's JSON\n",
         "  cella wait box web --port 8080 --http /health --timeout 2m\n", 1},
        {"git", "clone a git repository inside a sandbox",
         "cella git clone NAME URL [--branch B] [--depth N] [--dir DIR] [--timeout D] [--json]",
         "Clones into /workspace/<repository name> (or --dir) and prints\n"
         "`cloned URL (BRANCH) into DIR` (the URL without credentials). A timeout exits 124.\n",
         "  --branch B    the branch to check out\n"
         "  --depth N     a shallow clone of N commits\n"
         "  --dir DIR     the target directory\n"
         "  --timeout D   give up after D (bare number: milliseconds)\n"
         "  --json        the server's JSON\n",
         "  cella git clone box https://github.com/octocat/Hello-World.git --depth 1\n", 2},
        {"expose", "expose a port of a sandbox at a preview URL",
         "cella expose NAME PORT [--name N] [--token T] [--json]",
         "Prints the preview URL (http://PORT-NAME-TOKEN.localhost:7070/), then the same\n"
         "request for clients that do not resolve *.localhost (wget, Python, Go, ...): the\n"
         "daemon's address with the preview host in a Host header. Exposing a port again\n"
         "prints the same URL.\n",
         "  --name N    a name for the port\n"
         "  --token T   the URL's token (16 of [a-z0-9_]); the API token then goes before\n"
         "              the command word, or in CELLA_TOKEN\n"
         "  --json      the server's JSON only\n",
         "  cella expose box 8080 --name web\n", 1},
        {"ports", "list a sandbox's exposed ports", "cella ports NAME [--json]",
         "One line per port: port, active or stale (the sandbox restarted or sleeps: expose\n"
         "again to revive the same URL), name, URL.\n",
         "  --json   the server's JSON\n", "  cella ports box\n", 1},
        {"unexpose", "stop a port's preview URL", "cella unexpose NAME PORT",
         "The URL answers 404 from now on; prints `unexposed port PORT`. No error if the\n"
         "port was not exposed.\n",
         NULL, "  cella unexpose box 8080\n", 1},
        {"image", "build, import, list and delete images",
         "cella image build [NAME] [--package P]...\n"
         "cella image import NAME FILE.tar [--replace] [--json]\n"
         "cella image ls [--json]\n"
         "cella image rm NAME",
         "build (re)builds an image through the daemon (NAME default: default), its log on\n"
         "stderr; import takes an OCI image layout or `docker save` tarball (FILE `-`:\n"
         "stdin); rm refuses an image a sandbox uses. Each prints one confirmation line.\n",
         "  --package P   build: add a Debian package (repeatable)\n"
         "  --replace     import: replace an image of that name\n"
         "  --json        the server's JSON\n",
         "  docker save alpine | cella image import alpine -\n", 0},
        {"snapshot", "capture, list and delete snapshots of a sandbox's files",
         "cella snapshot create NAME [--name SNAPSHOT] [--json]\n"
         "cella snapshot ls [NAME] [--json]\n"
         "cella snapshot rm SNAPSHOT",
         "create captures the files of sandbox NAME (its processes frozen for the copy) and\n"
         "prints its id; ls lists every snapshot, or those of NAME; rm deletes one (by id or\n"
         "name), refused while a sandbox made from it exists. `cella create NAME` does not\n"
         "take a snapshot: see fork, or PUT {\"fromSnapshot\"} (docs/api.md).\n",
         "  --name S   create: the snapshot's name ([a-z0-9._-]; default: its id)\n"
         "  --json     the server's JSON\n",
         "  cella snapshot create box --name deps-installed\n", 0},
        {"key", "tenants' API keys: create, list, remove (the admin's)",
         "cella key create --tenant T [--max-sandboxes N] [--max-memory SIZE] [--json]\n"
         "cella key ls [--json]\n"
         "cella key rm ID",
         "create makes an API key of tenant T and prints it (cella_<id>_<secret>): it is shown\n"
         "this once, cellad keeps only its hash. A tenant's key sees and touches only its\n"
         "tenant's sandboxes and snapshots (names are per tenant) within its quotas; use it\n"
         "as any token (--token, CELLA_TOKEN). ls lists the keys (never a secret); rm removes\n"
         "one, refused from the next request on. Needs the admin token (docs/tenants.md).\n",
         "  --tenant T          create: the tenant, 1-16 of [a-z0-9]\n"
         "  --max-sandboxes N   create: its sandboxes, in any state (0: no limit)\n"
         "  --max-memory SIZE   create: the memory of its running sandboxes' instance types\n"
         "                      (512M, 2G, bytes; 0: no limit)\n"
         "  --json              the server's JSON\n",
         "  cella key create --tenant acme --max-sandboxes 10 --max-memory 16G\n", 0},
        {"fork", "a new sandbox with the files of another, now",
         "cella fork NAME NEW [--memory] [--json]",
         "Snapshots sandbox NAME and creates sandbox NEW over that snapshot: NEW starts with\n"
         "NAME's files, shared, not copied; each one's writes are its own.\n",
         "  --memory the processes too (refused, MEMORY_SNAPSHOT_UNAVAILABLE, where the\n"
         "           host cannot checkpoint them: `cellad --check` says why)\n"
         "  --json   the server's JSON (NEW's SandboxInfo)\n",
         "  cella fork box box-2\n", 1},
        {"backup", "archive a sandbox's directory, restore it, list and delete backups",
         "cella backup create NAME DIR [--name LABEL] [--ttl SECONDS] [--exclude PATTERN]...\n"
         "                   [--gitignore] [--consistent] [--no-multipart] [--json]\n"
         "cella backup restore NAME BACKUP [--dir DIR] [--json]\n"
         "cella backup ls [--json]\n"
         "cella backup rm BACKUP",
         "create archives directory DIR of sandbox NAME into the daemon's backup store and\n"
         "prints the backup's id; restore replaces DIR (default: the backup's) of sandbox\n"
         "NAME, any sandbox, with a backup's content, all or nothing; ls lists the store's\n"
         "backups (those other daemons sharing it made too); rm deletes one. A backup\n"
         "expires after its ttl (default 3 days) and cannot be restored then.\n",
         "  --name L     create: a label for the backup\n"
         "  --ttl S      create: seconds the backup is kept (default 259200)\n"
         "  --exclude P  create: leave out what gitignore pattern P (relative to DIR) matches;\n"
         "               repeatable, '!P' takes back what a .gitignore left out\n"
         "  --gitignore  create: leave out what the .gitignore files under DIR ignore\n"
         "  --consistent create: freeze the sandbox while DIR is read (one point in time)\n"
         "  --no-multipart create: to S3, spool the archive and upload it in one PUT\n"
         "  --dir D      restore: the directory to replace (default: the backup's)\n"
         "  --json       the server's JSON\n",
         "  cella backup create box /workspace/app --ttl 86400\n"
         "  cella backup create box /workspace/app --gitignore --exclude '*.log'\n"
         "  cella backup restore box-2 0b5e6f0e-2c64-4d0c-9d44-52c1f1b8a0e3\n",
         0},
        {"mcp", "serve the Model Context Protocol on stdin/stdout (for AI agents)", "cella mcp",
         "Runs an MCP server (JSON-RPC 2.0, one message a line) on stdin and stdout: AI\n"
         "agents (Claude Desktop, Cursor, VS Code) get cella's sandboxes as tools and their\n"
         "files as resources. It talks to the daemon at --url / CELLA_URL with --token /\n"
         "CELLA_TOKEN; it logs to stderr only. Ends when stdin ends. docs/mcp.md lists the\n"
         "tools and the agents' configuration.\n",
         NULL, "  CELLA_URL=http://127.0.0.1:7070 cella mcp\n", 0},
        {"top", "the node at a glance: sandboxes, their states, rates (refreshing)",
         "cella top [--interval D]\ncella top --once",
         "Shows the daemon's counters from GET /metrics (sandboxes by state, the warm pool,\n"
         "execs and their latency, starts, requests, errors, bytes streamed) and its\n"
         "sandboxes (state, image, network, disk used, last activity), refreshed every\n"
         "interval with each counter's rate over it and the latencies of that interval,\n"
         "until interrupted. --once prints one frame with totals and exits (for scripts).\n"
         "Needs the API token (--token / CELLA_TOKEN) when the daemon has one.\n",
         "  --interval D   time between refreshes (default 2s; 100ms to 1h)\n"
         "  --once         one frame, totals since the daemon started, then exit\n",
         "  cella top\n  cella top --once | grep '^execs'\n", 0},
        {"health", "the daemon's health answer", "cella health", NULL, NULL, "  cella health\n", 0},
        {"help", "help for a command", "cella help [COMMAND]", NULL, NULL, "  cella help wait\n",
         0},
        {"version", "print cella's version", "cella version", NULL, NULL, "  cella --version\n", 0},
};
const size_t cli_ncommands = ARRAY_SIZE(cli_commands);

const struct cli_command *cli_command_find(const char *name)
{
        for (size_t i = 0; name && i < cli_ncommands; i++)
                if (strcmp(cli_commands[i].name, name) == 0)
                        return &cli_commands[i];
        return NULL;
}

void cli_usage_print(FILE *f)
{
        fputs("usage: cella [OPTIONS] COMMAND [ARGS]\n"
              "\n"
              "options (anywhere before exec's and start's command words):\n"
              "  --url URL       the daemon (default: $CELLA_URL, else http://127.0.0.1:7070;\n"
              "                  unix:/PATH: its unix socket, cellad --listen unix:PATH)\n"
              "  --token TOKEN   the API token (default: $CELLA_TOKEN)\n"
              "  --json          print the server's JSON\n"
              "  -q, --quiet     no confirmation lines (ids, URLs and other results stay)\n"
              "  -h, --help      this text; cella help COMMAND or cella COMMAND --help for one\n"
              "  --version       print cella's version\n"
              "\n"
              "durations (--timeout, --sleep-after): 500ms, 30s, 10m, 1h30m, 2d; a bare number\n"
              "is milliseconds for --timeout, seconds for --sleep-after\n"
              "\n"
              "commands:\n",
              f);
        for (size_t i = 0; i < cli_ncommands; i++)
                fprintf(f, "  %-9s %s\n", cli_commands[i].name, cli_commands[i].summary);
        fputs("\nexit status: 0 success, 1 API or connection error, 2 usage error, 124 timeout;\n"
              "exec and wait --exit: the command's own\n",
              f);
}

/* The usage lines, each indented under "usage: ". */
static void usage_lines(FILE *f, const struct cli_command *c)
{
        const char *s = c->usage;

        fputs("usage: ", f);
        while (*s) {
                const char *nl = strchr(s, '\n');
                size_t n = nl ? (size_t)(nl - s) : strlen(s);

                fprintf(f, "%.*s\n", (int)n, s);
                s += n;
                if (*s == '\n') {
                        s++;
                        fputs("       ", f);
                }
        }
}

void cli_help_print(FILE *f, const struct cli_command *c)
{
        usage_lines(f, c);
        fprintf(f, "\n%s\n", c->summary);
        if (c->detail)
                fprintf(f, "\n%s", c->detail);
        if (c->options)
                fprintf(f, "\noptions:\n%s", c->options);
        fprintf(f, "\nexample:\n%s", c->example);
}

void cli_usage_lines_print(FILE *f, const struct cli_command *c)
{
        usage_lines(f, c);
        fprintf(f, "(cella help %s for more)\n", c->name);
}
