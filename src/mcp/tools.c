/* The tool table: what each tool takes and gives (JSON Schemas) and the hints; the
 * handlers, each a few libcella calls on the worker's client, live in tools-*.c by group
 * (tools-internal.h). docs/mcp.md lists them. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <pthread.h>
#include <sys/random.h>
#include <time.h>

#include "common/buf.h"
#include "common/json-cleanup.h"
#include "common/macros.h"
#include "common/name.h"
#include "common/utf8.h"
#include "mcp/mcp-internal.h"
#include "mcp/tools-internal.h"

#define SANDBOX_PROP                                                                        \
        "\"sandbox\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"                \
        "\"description\":\"Sandbox name: lowercase letters, digits and '-'. Made on first " \
        "use (with the default image) if it does not exist.\"}"
#define PATH_PROP(what)                                                         \
        "\"path\":{\"type\":\"string\",\"minLength\":1,\"description\":\"" what \
        " Absolute, or relative to /workspace.\"}"
#define ENV_PROP                                                                       \
        "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"}," \
        "\"description\":\"Environment variables for this command only.\"}"
#define OBJ(props, req)                                                      \
        "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" req \
        "],\"additionalProperties\":false}"

/* ---- the table ---- */

#define PROCESS_INFO                                                                           \
        "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"pid\":{\"type\":" \
        "\"integer\"},\"command\":{\"type\":\"string\"},\"status\":{\"type\":\"string\"},"     \
        "\"exitCode\":{\"type\":\"integer\"}},\"required\":[\"id\",\"status\"]}"
#define PROCESS_ID_PROP                                                                     \
        "\"processId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"              \
        "\"description\":\"The id given to process_start (or its generated id, or its pid " \
        "as text).\"}"

#define SNAPSHOT_INFO                                                                         \
        "{\"type\":\"object\",\"properties\":{\"snapshotId\":{\"type\":\"string\"},\"name\":" \
        "{\"type\":\"string\"},\"sandbox\":{\"type\":\"string\"},\"image\":{\"type\":"        \
        "\"string\"},\"sizeBytes\":{\"type\":\"integer\"},\"createdAt\":{\"type\":"           \
        "\"string\"}},\"required\":[\"snapshotId\",\"name\",\"sandbox\"]}"

const struct mcp_tool mcp_tools[] = {
        {"sandbox_create", "Create a sandbox",
         "Create a sandbox (an isolated Linux machine: Debian with bash, python3, node, git) "
         "or update the settings of an existing one. Optional: every other tool makes the "
         "sandbox on first use with the defaults. Use it to pick an image, set environment "
         "variables, cut network access (network: \"none\") or keep it from sleeping.",
         OBJ("\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,\"description\":"
             "\"Sandbox name: lowercase letters, digits and '-'.\"},"
             "\"image\":{\"type\":\"string\",\"description\":\"Image name (default: the "
             "server's).\"},"
             "\"env\":{\"type\":\"object\",\"additionalProperties\":{\"type\":\"string\"},"
             "\"description\":\"Environment variables of every command in the sandbox.\"},"
             "\"network\":{\"type\":\"string\",\"enum\":[\"none\",\"outbound\"],"
             "\"description\":\"none: loopback only; outbound: internet access.\"},"
             "\"sleepAfter\":{\"type\":\"string\",\"description\":\"Idle time before it "
             "sleeps (files kept, processes stopped): 30s, 10m, 2h.\"},"
             "\"keepAlive\":{\"type\":\"boolean\",\"description\":\"Never sleep.\"},"
             "\"sleepMode\":{\"type\":\"string\",\"enum\":[\"files\",\"memory\"],"
             "\"description\":\"What a sleep keeps: files, or memory (processes too, where "
             "the host can; the answer's sleepMode says what it does).\"},"
             "\"fromSnapshot\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"
             "\"description\":\"Start with the files of this snapshot (its id or name, from "
             "snapshot_create or snapshot_list); the image is the snapshot's. Only when the "
             "sandbox is created.\"}",
             "\"name\""),
         "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"state\":{"
         "\"type\":\"string\"}},\"required\":[\"id\"]}",
         false, false, true, false, mcp_tool_sandbox_create},
        {"sandbox_list", "List sandboxes",
         "List every sandbox with its state (running, sleeping, stopped), image, labels and "
         "last activity.",
         OBJ("", ""),
         "{\"type\":\"object\",\"properties\":{\"sandboxes\":{\"type\":\"array\",\"items\":{"
         "\"type\":\"object\"}}},\"required\":[\"sandboxes\"]}",
         true, false, true, false, mcp_tool_sandbox_list},
        {"sandbox_destroy", "Destroy a sandbox",
         "Destroy a sandbox: its processes are killed and its files are deleted for good. "
         "Idempotent: destroyed is false when there was none.",
         OBJ("\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63}", "\"name\""),
         "{\"type\":\"object\",\"properties\":{\"name\":{\"type\":\"string\"},\"destroyed\":{"
         "\"type\":\"boolean\"}},\"required\":[\"name\",\"destroyed\"]}",
         false, true, true, false, mcp_tool_sandbox_destroy},
        {"sandbox_sleep", "Put a sandbox to sleep",
         "Put a sandbox to sleep now, as it would after sleepAfter idle: its files stay, its "
         "processes stop (with sleepMode memory, where the host can, they are saved and come "
         "back), its running commands end. Any later tool call on it wakes it. Answers its "
         "info once it sleeps; a stopped sandbox is refused (SANDBOX_STOPPED).",
         OBJ("\"name\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63}", "\"name\""),
         "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"state\":{"
         "\"type\":\"string\"}},\"required\":[\"id\",\"state\"]}",
         false, true, true, false, mcp_tool_sandbox_sleep},
        {"snapshot_create", "Snapshot a sandbox",
         "Save the files of a sandbox as they are now (everything it changed over its image: "
         "installed packages, /workspace, ...) as a snapshot. Its processes pause for the copy "
         "and then go on. The snapshot outlives the sandbox: start new sandboxes with its "
         "files with sandbox_create fromSnapshot, e.g. to try several approaches from the "
         "same checkpoint. Processes and memory are not saved.",
         OBJ(SANDBOX_PROP ",\"name\":{\"type\":\"string\",\"minLength\":1,"
                          "\"maxLength\":63,\"description\":\"A name for it (a-z 0-9 . _ -, "
                          "unique); default: its id.\"}",
             "\"sandbox\""),
         SNAPSHOT_INFO, false, false, false, false, mcp_tool_snapshot_create},
        {"snapshot_list", "List snapshots",
         "List the snapshots (oldest first) with their id, name, the sandbox they were taken "
         "of, image, size and time; with sandbox, only those of that sandbox (also once it "
         "was destroyed).",
         OBJ("\"sandbox\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"
             "\"description\":\"Only the snapshots taken of this sandbox.\"}",
             ""),
         "{\"type\":\"object\",\"properties\":{\"snapshots\":{\"type\":\"array\","
         "\"items\":" SNAPSHOT_INFO "}},\"required\":[\"snapshots\"]}",
         true, false, true, false, mcp_tool_snapshot_list},
        {"snapshot_delete", "Delete a snapshot",
         "Delete a snapshot for good (by id or name). Refused with SNAPSHOT_IN_USE while a "
         "sandbox made from it exists (destroy those first); SNAPSHOT_NOT_FOUND when there is "
         "none.",
         OBJ("\"snapshot\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":63,"
             "\"description\":\"The snapshot's id or name.\"}",
             "\"snapshot\""),
         "{\"type\":\"object\",\"properties\":{\"snapshotId\":{\"type\":\"string\"},"
         "\"deleted\":{\"type\":\"boolean\"}},\"required\":[\"snapshotId\",\"deleted\"]}",
         false, true, true, false, mcp_tool_snapshot_delete},
        {"sandbox_fork", "Fork a sandbox",
         "Make a new sandbox that starts with a copy of another's files as they are now "
         "(a snapshot taken and shared, not copied: quick whatever the size). The two then "
         "go their own ways: writes in one never reach the other. Processes are not copied, "
         "and the new sandbox has the default settings. The result names the snapshot "
         "(snapshot), which stays until deleted.",
         OBJ(SANDBOX_PROP ",\"name\":{\"type\":\"string\",\"minLength\":1,"
                          "\"maxLength\":63,\"description\":\"The new sandbox's name "
                          "(lowercase letters, digits and '-'); it must not exist.\"}",
             "\"sandbox\",\"name\""),
         "{\"type\":\"object\",\"properties\":{\"id\":{\"type\":\"string\"},\"state\":{"
         "\"type\":\"string\"},\"snapshot\":{\"type\":\"string\"}},\"required\":[\"id\","
         "\"snapshot\"]}",
         false, false, false, false, mcp_tool_sandbox_fork},
        {"exec", "Run a shell command",
         "Run a bash command line in a sandbox and return its exit code, stdout and stderr "
         "(each cut at 1 MiB). Without sessionId each call is a fresh shell in /workspace "
         "(or cwd), so `cd` and `export` do not carry over: chain with && instead. With "
         "sessionId (any name, e.g. \"main\") the command runs in that session's persistent "
         "shell, created on first use: `cd`, `export`, shell functions and variables carry "
         "over to the next exec with the same sessionId (one command at a time per session; "
         "a cwd or env given with the call applies to that command only). Output streams "
         "as progress notifications when a progress token is given; cancelling the request "
         "kills the command and everything it started, as timeoutMs does after that long "
         "(a session keeps its state). For servers and other long-running programs use "
         "process_start.",
         OBJ(SANDBOX_PROP ",\"command\":{\"type\":\"string\",\"minLength\":1,\"description\":"
                          "\"A bash command line, e.g. \\\"pip install requests && python "
                          "main.py\\\".\"},"
                          "\"cwd\":{\"type\":\"string\",\"description\":\"Working directory "
                          "(default /workspace).\"},"
                          "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":1,\"description\":"
                          "\"Kill the command after this long; the result then has timedOut: "
                          "true.\"},"
                          "\"sessionId\":{\"type\":\"string\",\"minLength\":1,"
                          "\"maxLength\":64,\"description\":\"Run in this persistent shell "
                          "session (1-64 of A-Z a-z 0-9 _ . -; created on first use) so that "
                          "cd and export carry over.\"}," ENV_PROP,
             "\"sandbox\",\"command\""),
         "{\"type\":\"object\",\"properties\":{\"exitCode\":{\"type\":\"integer\"},\"stdout\":"
         "{\"type\":\"string\"},\"stderr\":{\"type\":\"string\"},\"truncated\":{\"type\":"
         "\"boolean\"},\"timedOut\":{\"type\":\"boolean\"},\"sessionId\":{\"type\":"
         "\"string\"}},\"required\":[\"exitCode\","
         "\"stdout\",\"stderr\"]}",
         false, true, false, true, mcp_tool_exec},
        {"file_read", "Read a file",
         "Read a file of a sandbox. encoding utf-8 (default) returns text; base64 returns the "
         "bytes of any file (images, archives). isBinary tells when a file is not text.",
         OBJ(SANDBOX_PROP "," PATH_PROP("The file.") ",\"encoding\":{\"type\":\"string\","
                                                     "\"enum\":[\"utf-8\",\"base64\"]}",
             "\"sandbox\",\"path\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"content\":{"
         "\"type\":\"string\"},\"encoding\":{\"type\":\"string\"},\"size\":{\"type\":"
         "\"integer\"}},\"required\":[\"path\",\"content\"]}",
         true, false, true, false, mcp_tool_file_read},
        {"file_write", "Write a file",
         "Write a file in a sandbox (replacing it; parent directories are made). content is "
         "text, or base64 of the bytes with encoding base64.",
         OBJ(SANDBOX_PROP "," PATH_PROP("The file.") ",\"content\":{\"type\":\"string\"},"
                                                     "\"encoding\":{\"type\":\"string\","
                                                     "\"enum\":[\"utf-8\",\"base64\"]}",
             "\"sandbox\",\"path\",\"content\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"size\":{"
         "\"type\":\"integer\"}},\"required\":[\"path\"]}",
         false, true, true, false, mcp_tool_file_write},
        {"file_list", "List a directory",
         "List a directory of a sandbox (default /workspace): name, type, size, mode and "
         "modification time of each entry; recursive descends, includeHidden shows dot "
         "files.",
         OBJ(SANDBOX_PROP "," PATH_PROP(
                     "The directory (default /workspace).") ",\"recursive\":{\"type\":\"boolean\"},"
                                                            "\"includeHidden\":{\"type\":"
                                                            "\"boolean\"}",
             "\"sandbox\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"files\":{"
         "\"type\":\"array\",\"items\":{\"type\":\"object\"}},\"count\":{\"type\":"
         "\"integer\"}},\"required\":[\"files\"]}",
         true, false, true, false, mcp_tool_file_list},
        {"file_delete", "Delete a file",
         "Delete a file, or a directory and everything in it with recursive: true.",
         OBJ(SANDBOX_PROP
             "," PATH_PROP("The file or directory.") ",\"recursive\":{\"type\":\"boolean\"}",
             "\"sandbox\",\"path\""),
         "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\"},\"deleted\":{"
         "\"type\":\"boolean\"}},\"required\":[\"path\",\"deleted\"]}",
         false, true, true, false, mcp_tool_file_delete},
        {"process_start", "Start a background process",
         "Start a long-running command in the background (a web server, a watcher) and "
         "return at once with its id. Read its output with process_logs, wait for its port "
         "with wait_for_port, stop it with process_kill.",
         OBJ(SANDBOX_PROP ",\"command\":{\"type\":\"string\",\"minLength\":1},"
                          "\"processId\":{\"type\":\"string\",\"minLength\":1,\"maxLength\":64,"
                          "\"description\":\"An id of your choosing ([A-Za-z0-9_.-]); "
                          "default: generated.\"},"
                          "\"cwd\":{\"type\":\"string\"}," ENV_PROP,
             "\"sandbox\",\"command\""),
         PROCESS_INFO, false, false, false, true, mcp_tool_process_start},
        {"process_list", "List background processes",
         "List a sandbox's background processes, running and finished, with status and exit "
         "code (exec's own commands once finished are not listed: their output was exec's "
         "result).",
         OBJ(SANDBOX_PROP, "\"sandbox\""),
         "{\"type\":\"object\",\"properties\":{\"processes\":{\"type\":\"array\",\"items\":{"
         "\"type\":\"object\"}}},\"required\":[\"processes\"]}",
         true, false, true, false, mcp_tool_process_list},
        {"process_kill", "Stop a background process",
         "Stop a background process and everything it started: SIGTERM, then SIGKILL after "
         "a grace period (or the signal given, e.g. SIGINT). Answers once it has ended.",
         OBJ(SANDBOX_PROP "," PROCESS_ID_PROP ",\"signal\":{\"type\":\"string\"}",
             "\"sandbox\",\"processId\""),
         PROCESS_INFO, false, true, true, false, mcp_tool_process_kill},
        {"process_logs", "Read a process's output",
         "The output of a background process so far (the last 1 MiB of each stream).",
         OBJ(SANDBOX_PROP "," PROCESS_ID_PROP, "\"sandbox\",\"processId\""),
         "{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"string\"},\"stderr\":{"
         "\"type\":\"string\"},\"truncated\":{\"type\":\"boolean\"}},\"required\":["
         "\"stdout\",\"stderr\"]}",
         true, false, true, false, mcp_tool_process_logs},
        {"wait_for_port", "Wait for a port",
         "Wait until a background process listens on a port of the sandbox (a TCP connect, "
         "or with httpPath a GET answered 200-399). Fails with PROCESS_EXITED_BEFORE_READY if "
         "the process ends first, PROCESS_READY_TIMEOUT after timeoutMs (default 60000).",
         OBJ(SANDBOX_PROP "," PROCESS_ID_PROP
                          ",\"port\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":65535},"
                          "\"httpPath\":{\"type\":\"string\"},"
                          "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":0}",
             "\"sandbox\",\"processId\",\"port\""),
         "{\"type\":\"object\",\"properties\":{\"port\":{\"type\":\"integer\"}},\"required\":["
         "\"port\"]}",
         true, false, true, false, mcp_tool_wait_for_port},
        {"expose_port", "Expose a port",
         "Give a port of the sandbox (1024-65535) a public preview URL that proxies HTTP and "
         "WebSocket to it. Exposing again keeps the URL.",
         OBJ(SANDBOX_PROP ",\"port\":{\"type\":\"integer\",\"minimum\":1024,\"maximum\":65535},"
                          "\"name\":{\"type\":\"string\",\"description\":\"A label for the "
                          "port.\"}",
             "\"sandbox\",\"port\""),
         "{\"type\":\"object\",\"properties\":{\"url\":{\"type\":\"string\"},\"port\":{"
         "\"type\":\"integer\"}},\"required\":[\"url\",\"port\"]}",
         false, false, true, true, mcp_tool_expose_port},
        {"run_code", "Run code",
         "Run Python (default), JavaScript or TypeScript in a long-lived interpreter of the "
         "sandbox, like a notebook cell: variables and imports persist between calls of the "
         "same language. The last expression's value is returned; matplotlib figures come "
         "back as PNG images, pandas tables as HTML text. Errors in the code come back as a "
         "tool error with the traceback.",
         OBJ(SANDBOX_PROP ",\"code\":{\"type\":\"string\",\"minLength\":1},"
                          "\"language\":{\"type\":\"string\",\"enum\":[\"python\","
                          "\"javascript\",\"typescript\"]},"
                          "\"contextId\":{\"type\":\"string\"},"
                          "\"timeoutMs\":{\"type\":\"integer\",\"minimum\":0}",
             "\"sandbox\",\"code\""),
         "{\"type\":\"object\",\"properties\":{\"stdout\":{\"type\":\"string\"},\"stderr\":{"
         "\"type\":\"string\"},\"results\":{\"type\":\"array\",\"items\":{\"type\":\"object\"}"
         "},\"error\":{\"type\":\"object\"},\"executionCount\":{\"type\":\"integer\"}},"
         "\"required\":[\"stdout\",\"stderr\",\"results\"]}",
         false, true, false, true, mcp_tool_run_code},
        {"git_checkout", "Clone a git repository",
         "Clone a git repository into the sandbox (default /workspace/<name>). branch picks "
         "a branch, depth makes a shallow clone.",
         OBJ(SANDBOX_PROP ",\"repoUrl\":{\"type\":\"string\",\"minLength\":1},"
                          "\"branch\":{\"type\":\"string\"},\"targetDir\":{\"type\":\"string\"},"
                          "\"depth\":{\"type\":\"integer\",\"minimum\":0}",
             "\"sandbox\",\"repoUrl\""),
         "{\"type\":\"object\",\"properties\":{\"repoUrl\":{\"type\":\"string\"},\"branch\":{"
         "\"type\":\"string\"},\"targetDir\":{\"type\":\"string\"}},\"required\":["
         "\"targetDir\"]}",
         false, false, false, true, mcp_tool_git_checkout},
};
const size_t mcp_ntools = ARRAY_SIZE(mcp_tools);

json_t *mcp_tool_run(const struct mcp_tool *t, struct mcp_call *call, json_t *args)
{
        json_t *bad = tool_bad_sandbox(args);

        return bad ? bad : t->run(call, args);
}

const struct mcp_tool *mcp_tool_find(const char *name)
{
        for (size_t i = 0; name && i < mcp_ntools; i++)
                if (strcmp(mcp_tools[i].name, name) == 0)
                        return &mcp_tools[i];
        return NULL;
}

json_t *mcp_tool_describe(const struct mcp_tool *t)
{
        json_t *in = json_loads(t->input_schema, 0, NULL);
        json_t *out = t->output_schema ? json_loads(t->output_schema, 0, NULL) : NULL;
        json_t *d;

        if (!in || (t->output_schema && !out)) {
                json_decref(in);
                json_decref(out);
                return NULL;
        }
        d = json_pack("{sssssssos{sssbsbsbsb}}", "name", t->name, "title", t->title, "description",
                      t->description, "inputSchema", in, "annotations", "title", t->title,
                      "readOnlyHint", t->read_only, "destructiveHint", t->destructive,
                      "idempotentHint", t->idempotent, "openWorldHint", t->open_world);
        if (d && out)
                json_object_set_new(d, "outputSchema", out);
        else
                json_decref(out);
        return d;
}
