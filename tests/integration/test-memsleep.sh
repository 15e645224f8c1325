#!/bin/bash
# Memory sleep (docs/decisions/0050-memory-sleep.md): sleepMode "memory" asks sleep to keep
# a sandbox's processes with CRIU. cellad's check at its start (criu --version and criu
# check; `cellad --check` prints the same) decides what happens on this host:
# * where the CRIU cellad runs can checkpoint a sandbox here (its check passes; at least
#   4.1, 4.2 on Linux 6.16 and later), sleepMode is "memory": a python http.server started
#   as a background process and a code context holding a variable are checkpointed by
#   cellad's own idle sleep (no process and no cgroup left asleep, the images' size in
#   SandboxInfo and /v1/health's promised disk) and restored by the next request: the
#   preview URL exposed before the sleep wakes it and answers with the same server, an
#   exec reaches it, the context's variable is read back (x + 1 = 42, executionCount going
#   on); a second sleep and wake by the same cellad (its CRIU reads the kernel features
#   the first restore probed) keeps the same server; the sandbox's network namespace (lo's
#   addresses, rules, routes) is the same after each wake, the ip images of a namespace
#   as a new one has it left out of the checkpoint, an address, rule and routes added
#   from the host kept in it and restored; a sleep asked by POST /sleep is
#   answered once its checkpoint is written and its wake keeps the same server and the
#   context's variable (decision 0063); a restart of cellad while it sleeps
#   keeps the checkpoint and a later request restores it; a corrupt image gives a wake
#   from the files, which are intact, with the reason in memorySleepError and the images
#   moved aside;
# * elsewhere (and with CELLA_CRIU pointing at a missing file or at a stand-in whose check
#   fails, simulated on any host), the sandbox sleeps with its files only, as sleepMode
#   "files" does, and SandboxInfo says why (sleepModeRequested "memory", sleepMode "files",
#   sleepModeFallback); a sandbox asleep with its memory whose daemon comes back without a
#   working CRIU wakes from its files with the reason;
# * sleepMode is validated (400 VALIDATION_FAILED, nothing made), kept by PUT on an existing
#   sandbox, in the registry across a SIGKILL restart and in the identity file (a registry
#   deleted while cellad was down is rebuilt with it);
# * fork with "memory": true is refused, 501 MEMORY_SNAPSHOT_UNAVAILABLE with the reason,
#   and makes nothing (no sandbox, no snapshot); "memory": false is a files fork.
. "$(dirname "$0")/lib.sh"
# wait_memory_asleep NAME: asleep with its memory, the checkpoint over (SandboxInfo says
# "sleeping" from the checkpoint's start; memorySnapshotBytes once it is written); 90 s
wait_memory_asleep() {
        local i
        for i in $(seq 1 450); do
                api GET "/v1/sandboxes/$1" >/dev/null
                [ "$(body .state)" = sleeping ] && [ "$(body .memorySnapshotBytes)" != null ] &&
                        return 0
                sleep 0.2
        done
        fail "$1 is not asleep with its memory after 90 s: $(body)"
}
start_cellad

info "the host check: cellad --check, cellad's log and /v1/health agree"
# the CRIU cellad runs: the one scripts/criu.sh built when it is there, else PATH's
CRIU_BIN=criu
[ -x /var/cache/cella/criu/criu ] && CRIU_BIN=/var/cache/cella/criu/criu
kernel=$(uname -r)
kernel=${kernel%%-*}
min=4.1
dpkg --compare-versions "$kernel" ge 6.16 && min=4.2
ver=
command -v "$CRIU_BIN" >/dev/null &&
        ver=$("$CRIU_BIN" --version 2>/dev/null | sed -n 's/^Version: //p' | head -1)
MEMORY=0 # can this host checkpoint a sandbox (what cellad must conclude)?
if [ -n "$ver" ] && dpkg --compare-versions "$ver" ge "$min" && "$CRIU_BIN" check >/dev/null 2>&1; then
        MEMORY=1
fi
check=$("$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/check-dir" 2>&1) || fail "cellad --check: $check"
line=$(echo "$check" | grep '^memory sleep ') || fail "no memory sleep line in: $check"
api GET /v1/health >/dev/null
if [ "$MEMORY" = 1 ]; then
        assert_eq "memory sleep (sleepMode \"memory\", fork with memory): available, criu $ver checkpoints sleeping sandboxes and forks running ones with their processes" \
                "$line" "--check says"
        assert_contains "$(cat "$CELLAD_LOG")" "memory sleep available: criu $ver" "cellad's log"
        assert_eq true "$(body .memorySleep.available)" "health: memory sleep available"
        assert_eq null "$(body .memorySleep.reason)" "health: no reason"
        REASON=
        info "memory sleep here: criu $ver"
else
        assert_contains "$line" 'unavailable, sandboxes sleep with their files only: ' "--check says"
        REASON=${line#*with their files only: }
        [ -n "$REASON" ] || fail "an empty reason: $line"
        assert_contains "$(cat "$CELLAD_LOG")" "memory sleep unavailable" "cellad's log"
        assert_contains "$(cat "$CELLAD_LOG")" "$REASON" "cellad's log has --check's reason"
        assert_eq false "$(body .memorySleep.available)" "health: memory sleep unavailable"
        assert_eq "$REASON" "$(body .memorySleep.reason)" "health: the reason"
        if [ -z "$ver" ] && ! command -v "$CRIU_BIN" >/dev/null; then
                assert_contains "$REASON" "no CRIU" "no criu binary"
        elif "$CRIU_BIN" check >"$IT_TMP/criu-check" 2>&1; then
                assert_contains "$REASON" "passes its check here, but a sandbox on Linux" "too old a CRIU"
        else
                assert_contains "$REASON" "check fails on this kernel: " "criu check failed"
                first=$(grep -v 'exited, status=' "$IT_TMP/criu-check" | grep -m1 'Error (' |
                        sed 's/^.*Error ([^)]*): //') || true
                [ -z "$first" ] || assert_contains "$REASON" "$first" "criu's first error"
        fi
        info "memory sleep here: unavailable: $REASON"
fi
# what a sandbox asking for memory says here
MODE=files
FALLBACK=$REASON
[ "$MEMORY" = 1 ] && MODE=memory && FALLBACK=null

info "sleepMode: validated, nothing made by a bad one"
B=$(sbx bad)
for bad in '"disk"' '"Memory"' '""' 'true' '["memory"]' 'null'; do
        api_json PUT "/v1/sandboxes/$B" "{\"sleepMode\":$bad}"
        expect_status 400 VALIDATION_FAILED
        assert_contains "$(body .message)" 'sleepMode must be "files" or "memory"' "$bad"
done
api GET "/v1/sandboxes/$B" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

info "default: files, no fallback"
F=$(sbx files)
api_json PUT "/v1/sandboxes/$F" '{}'
expect_status 201
assert_eq files "$(body .sleepModeRequested)" "requested by default"
assert_eq files "$(body .sleepMode)" "in effect by default"
assert_eq null "$(body .sleepModeFallback)" "no fallback for files"

info "memory asked: what is in effect here, and why not memory"
M=$(sbx mem)
api_json PUT "/v1/sandboxes/$M" '{"sleepMode":"memory","sleepAfter":"15s"}'
expect_status 201
assert_eq memory "$(body .sleepModeRequested)" "requested"
assert_eq "$MODE" "$(body .sleepMode)" "in effect"
assert_eq "$FALLBACK" "$(body .sleepModeFallback)" "fallback reason as --check says"
api GET /v1/sandboxes >/dev/null
assert_eq memory "$(body ".sandboxes[] | select(.id == \"$M\") | .sleepModeRequested")" \
        "the list says it too"

info "PUT on the existing sandbox changes it; an error keeps it"
api_json PUT "/v1/sandboxes/$F" '{"sleepMode":"memory"}'
expect_status 200
assert_eq memory "$(body .sleepModeRequested)" "changed to memory"
assert_eq "$FALLBACK" "$(body .sleepModeFallback)" "and falls back where it must"
api_json PUT "/v1/sandboxes/$F" '{"sleepMode":"nap"}'
expect_status 400 VALIDATION_FAILED
api GET "/v1/sandboxes/$F" >/dev/null
assert_eq memory "$(body .sleepModeRequested)" "a refused PUT changed nothing"
api_json PUT "/v1/sandboxes/$F" '{"sleepMode":"files"}'
expect_status 200
assert_eq files "$(body .sleepModeRequested)" "back to files"
assert_eq null "$(body .sleepModeFallback)" "no fallback once files"
api_json PUT "/v1/sandboxes/$F" '{"labels":{"a":"b"}}'
assert_eq files "$(body .sleepModeRequested)" "a PUT without sleepMode keeps it"

info "a python http.server and a code context in a sandbox asking for memory"
P=8765
run_in "$M" 'echo kept >/workspace/kept.txt; echo page >/workspace/index.html' >/dev/null
# /tmp (the writable layer) and /dev/shm (a directory of the /dev tmpfs, whose contents the
# checkpoint holds): both come back from a memory sleep
run_in "$M" 'echo in-tmp >/tmp/kept-tmp; echo in-shm >/dev/shm/kept-shm' >/dev/null
MASK_BEFORE=$(run_in "$M" 'grep " /sys/devices/virtual/block " /proc/self/mountinfo | cut -d" " -f4-6')
assert_contains "$MASK_BEFORE" " ro," "the block devices' mask is read-only"
api_json POST "/v1/sandboxes/$M/processes" \
        "{\"command\":\"cd /workspace && exec python3 -m http.server $P\",\"processId\":\"web\"}"
expect_status 200
api_json POST "/v1/sandboxes/$M/processes/web/waitForPort" "{\"port\":$P,\"timeout\":30000}"
expect_status 200
api_json POST "/v1/sandboxes/$M/contexts" '{"language":"python"}'
expect_status 201
CTX=$(body .id)
api_json POST "/v1/sandboxes/$M/code" "{\"code\":\"x = 41\\nx + 1\",\"contextId\":\"$CTX\"}"
expect_status 200
assert_eq 42 "$(body '.results[0].text')" "the context's variable"
api_json POST "/v1/sandboxes/$M/ports" "{\"port\":$P}"
expect_status 201
TOKEN=$(body .url | sed -E "s#^http://$P-$M-([a-z0-9_]+)\..*#\1#")
HOSTPORT=${CELLA_URL#http://}
PHOST="$P-$M-$TOKEN.localhost:${HOSTPORT##*:}"
pv() { curl -sS -o "$IT_TMP/pv" -w '%{http_code}' -H "Host: $PHOST" "$CELLA_URL$1"; }
assert_eq 200 "$(pv /index.html)" "the server answers through the preview URL"
assert_eq page "$(cat "$IT_TMP/pv")" "its page"
[ -n "$(sandbox_pids "$M")" ] || fail "no process of the running sandbox"
api GET "/v1/sandboxes/$M/processes/web" >/dev/null
expect_status 200
WEBPID=$(body .pid)
# its network namespace as the tenant sees it (lo's addresses, the rules, the routes)
netstate() { run_in "$1" 'ip -o addr show dev lo; ip rule; ip -6 rule; ip route; ip -6 route show table main'; }
if [ "$MEMORY" = 1 ]; then
        NET_BEFORE=$(netstate "$M")
        info "a memory sleep by cellad's idle sleep: the processes checkpointed, memory freed"
        wait_memory_asleep "$M"
        assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$M' sleeping after 15 s idle with its memory" \
                "slept with its memory"
        assert_eq "" "$(sandbox_pids "$M")" "no process left asleep (memory freed)"
        assert_eq "" "$(sandbox_cgroups "$M")" "no cgroup left asleep"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq memory "$(body .sleepMode)" "slept with memory"
        assert_eq null "$(body .memorySleepError)" "nothing went wrong"
        MSB=$(body .memorySnapshotBytes)
        info "memory on disk for $M (python http.server and a code context): $((MSB / 1048576)) MiB"
        [ "$MSB" -gt 1048576 ] || fail "memorySnapshotBytes $MSB holds no process memory"
        D=$IT_TMP/data/sandboxes/s$(sandbox_slot "$M")
        assert_eq "$MSB" "$(find "$D/checkpoint" -maxdepth 1 -type f -printf '%s\n' |
                awk '{s += $1} END {print s}')" "the size of its images"
        assert_contains "$("$CELLA_BUILD/cella" info "$M")" "state:         sleeping with its memory" \
                "cella info says so"
        assert_eq 700 "$(stat -c %a "$D/checkpoint")" "the images dir is cellad's alone"
        assert_eq root "$(stat -c %U "$D/checkpoint")" "and root's"
        # what a new namespace with lo up has anyway is not in the images: the restore runs
        # no `ip` for it (0050, "the memory wake's time")
        assert_eq "" "$(cd "$D/checkpoint" && ls ifaddr-*.img rule-*.img route-*.img route6-*.img 2>/dev/null)" \
                "no ip image of an unchanged namespace"
        api GET /v1/health >/dev/null
        [ "$(body .disk.promisedBytes)" -ge "$MSB" ] || fail "health's promised disk leaves out the images"

        info "the preview URL exposed before the sleep wakes it: the same server answers"
        assert_eq 200 "$(pv /index.html)" "the preview URL after the sleep"
        assert_eq page "$(cat "$IT_TMP/pv")" "its page"
        assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$M' woke from its memory checkpoint" "a memory wake"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq running "$(body .state)" "awake"
        assert_eq null "$(body .memorySnapshotBytes)" "no images once awake"
        [ ! -e "$D/checkpoint" ] || fail "the images outlived a good restore"
        api GET "/v1/sandboxes/$M/processes/web" >/dev/null
        expect_status 200
        assert_eq running "$(body .status)" "the background server is the same process"
        assert_eq "$WEBPID" "$(body .pid)" "with its pid"
        assert_eq page "$(run_in "$M" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
                "the server through an exec"
        api_json POST "/v1/sandboxes/$M/code" "{\"code\":\"x + 1\",\"contextId\":\"$CTX\"}"
        expect_status 200
        assert_eq 42 "$(body '.results[0].text')" "the context's variable after the wake"
        assert_eq 2 "$(body .executionCount)" "the same interpreter"
        assert_eq kept "$(run_in "$M" 'cat /workspace/kept.txt')" "the files"
        assert_eq in-tmp "$(run_in "$M" 'cat /tmp/kept-tmp')" "a file of /tmp after the wake"
        assert_eq in-shm "$(run_in "$M" 'cat /dev/shm/kept-shm')" "a file of /dev/shm after the wake"
        # the mask is restored as it was: read-only, empty, nothing can be made in it
        assert_eq "$MASK_BEFORE" "$(run_in "$M" 'grep " /sys/devices/virtual/block " /proc/self/mountinfo | cut -d" " -f4-6')" \
                "the block devices' mask after the wake"
        assert_eq "" "$(run_in "$M" 'ls -A /sys/devices/virtual/block')" "the mask is empty after the wake"
        sx "$M" 'mkdir /sys/devices/virtual/block/x || touch /sys/devices/virtual/block/y'
        assert_ne 0 "$(exit_code)" "something was made in the mask after the wake"
        run_in "$M" 'ip -4 -o addr show dev eth0' | grep -q inet || fail "no address after the wake"
        assert_eq "$NET_BEFORE" "$(netstate "$M")" "its network namespace as it was"

        # a namespace not as a new one has it: its images are kept and restored (the
        # sandbox's root has no CAP_NET_ADMIN, so the change is made from the host)
        NSPID=$(sandbox_pids "$M" | head -n 1)
        nsenter -t "$NSPID" -n sh -c 'ip addr add 10.123.0.1/32 dev lo && ip rule add from 10.123.0.1 lookup 100 pref 1000 && ip route add 10.124.0.0/24 dev lo && ip -6 route add fd00:124::/64 dev lo' ||
                fail "change the sandbox's network namespace"
        NET_BEFORE=$(netstate "$M")
        assert_contains "$NET_BEFORE" "10.123.0.1" "the added address"

        # the same cellad's second restore: CRIU reads the kernel features its first one
        # probed (criu.kdat in cellad's tmpfs for CRIU's /run, decision 0050)
        info "a second memory sleep and wake by the same cellad"
        wait_memory_asleep "$M"
        for img in ifaddr rule route route6; do
                ls "$D/checkpoint/$img"-*.img >/dev/null 2>&1 || fail "no $img image of a changed namespace"
        done
        assert_eq 200 "$(pv /index.html)" "the preview URL after a second sleep"
        assert_eq page "$(cat "$IT_TMP/pv")" "its page, again"
        assert_eq 2 "$(grep -c "sandbox '$M' woke from its memory checkpoint" "$CELLAD_LOG")" \
                "two memory wakes"
        api GET "/v1/sandboxes/$M/processes/web" >/dev/null
        assert_eq "$WEBPID" "$(body .pid)" "the same server after a second wake"
        assert_eq "$NET_BEFORE" "$(netstate "$M")" "the added address, rule and routes after the wake"

        info "POST /sleep: a memory sleep now, answered once the checkpoint is written"
        api POST "/v1/sandboxes/$M/sleep" >/dev/null
        expect_status 200
        assert_eq sleeping "$(body .state)" "the answer of POST /sleep"
        assert_eq memory "$(body .sleepMode)" "its mode"
        [ "$(body .memorySnapshotBytes)" -gt 1048576 ] ||
                fail "POST /sleep answered before its checkpoint: $(body)"
        assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$M' sleeping on request (POST /sleep) with its memory" \
                "the log says who asked"
        assert_eq "" "$(sandbox_pids "$M")" "no process after POST /sleep"
        api POST "/v1/sandboxes/$M/sleep" >/dev/null
        expect_status 200
        assert_eq sleeping "$(body .state)" "a second POST /sleep: as it is"
        assert_eq 200 "$(pv /index.html)" "the preview URL after POST /sleep"
        assert_eq page "$(cat "$IT_TMP/pv")" "its page, after POST /sleep"
        api GET "/v1/sandboxes/$M/processes/web" >/dev/null
        assert_eq "$WEBPID" "$(body .pid)" "the same server after POST /sleep"
        api_json POST "/v1/sandboxes/$M/code" "{\"code\":\"x\",\"contextId\":\"$CTX\"}"
        expect_status 200
        assert_eq 41 "$(body '.results[0].text')" "the context's variable after POST /sleep"

        info "a cellad restart while it sleeps with its memory: restored by the next request"
        wait_memory_asleep "$M"
        SLOT=$(sandbox_slot "$M")
        RESTART_ARGS=(--listen "${CELLA_URL#http://}")
        RESTARTS=0
        restart_daemon "kill -9 asleep" || fail "$RESTART_ERR"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq sleeping "$(body .state)" "still asleep after the restart"
        [ "$(body .memorySnapshotBytes)" -gt 1048576 ] || fail "the images after the restart"
        api_json POST "/v1/sandboxes/$M/code" "{\"code\":\"x + 2\",\"contextId\":\"$CTX\"}"
        expect_status 200
        assert_eq 43 "$(body '.results[0].text')" "the context's variable after a restart"
        assert_eq 4 "$(body .executionCount)" "the same interpreter after a restart"
        assert_eq 200 "$(pv /index.html)" "the preview URL after a restart"

        info "a corrupt image: a wake from the files, which are intact, and why"
        wait_memory_asleep "$M"
        D=$IT_TMP/data/sandboxes/s$SLOT
        [ -d "$D/checkpoint" ] || fail "no images in $D"
        head -c 64 /dev/urandom >"$D/checkpoint/inventory.img"
        assert_eq kept "$(run_in "$M" 'cat /workspace/kept.txt')" "an exec wakes it with its files"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq running "$(body .state)" "awake"
        assert_contains "$(body .memorySleepError)" "its memory checkpoint was not restored (criu restore failed: " \
                "the reason in SandboxInfo"
        assert_contains "$(body .memorySleepError)" "it woke with its files" "and what happened"
        assert_contains "$("$CELLA_BUILD/cella" info "$M")" \
                "memory sleep:  its memory checkpoint was not restored" "cella info says why"
        [ -d "$D/checkpoint.failed" ] || fail "the images were not moved aside"
        [ ! -e "$D/checkpoint" ] || fail "the failed images are still where a wake reads them"
        api GET "/v1/sandboxes/$M/processes/web" >/dev/null
        expect_status 404 PROCESS_NOT_FOUND
        assert_eq 410 "$(pv /index.html)" "a files wake: the preview URL is stale"
else
        info "a fallback sleep is a files sleep: processes and the code context go, files stay"
        wait_sleeping "$M"
        assert_eq "" "$(sandbox_pids "$M")" "no process left asleep (memory freed)"
        assert_eq "" "$(sandbox_cgroups "$M")" "no cgroup left asleep"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq files "$(body .sleepMode)" "slept with files"
        assert_eq 410 "$(pv /index.html)" "asleep: the preview URL is stale, as with files"
        info "POST /sleep here: a files sleep, as the idle one"
        run_in "$M" true >/dev/null
        api POST "/v1/sandboxes/$M/sleep" >/dev/null
        expect_status 200
        assert_eq sleeping "$(body .state)" "the answer of POST /sleep"
        assert_eq files "$(body .sleepMode)" "slept with files on request"
        assert_eq null "$(body .memorySnapshotBytes)" "no images"
        assert_eq "" "$(sandbox_pids "$M")" "no process after POST /sleep"
        assert_eq STALE_PREVIEW_URL "$(jq -r .code "$IT_TMP/pv")" "stale code"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq sleeping "$(body .state)" "the preview URL did not wake it"
        assert_eq kept "$(run_in "$M" 'cat /workspace/kept.txt')" "an exec wakes it with its files"
        api GET "/v1/sandboxes/$M/processes/web" >/dev/null
        expect_status 404 PROCESS_NOT_FOUND
        api_json POST "/v1/sandboxes/$M/code" "{\"code\":\"x\",\"contextId\":\"$CTX\"}"
        expect_status 404 CONTEXT_NOT_FOUND
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq running "$(body .state)" "awake"
        assert_eq memory "$(body .sleepModeRequested)" "still asks for memory"
fi

C=$(sbx child)
if [ "$MEMORY" = 0 ]; then
        info "fork with memory: refused with the reason, nothing made"
        api GET /v1/snapshots >/dev/null
        snaps=$(body '.snapshots | length')
        api_json POST "/v1/sandboxes/$M/fork" "{\"name\":\"$C\",\"memory\":true}"
        expect_status 501 MEMORY_SNAPSHOT_UNAVAILABLE
        assert_eq "fork with memory: $REASON" "$(body .message)" "the reason"
        api GET "/v1/sandboxes/$C" >/dev/null
        expect_status 404 SANDBOX_NOT_FOUND
        api GET /v1/snapshots >/dev/null
        assert_eq "$snaps" "$(body '.snapshots | length')" "no snapshot taken"
fi # where it can: integration/memfork
api_json POST "/v1/sandboxes/$M/fork" "{\"name\":\"$C\",\"memory\":\"yes\"}"
expect_status 400 VALIDATION_FAILED
api_json POST "/v1/sandboxes/$M/fork" "{\"name\":\"$C\",\"memory\":false}"
expect_status 201
assert_eq kept "$(run_in "$C" 'cat /workspace/kept.txt')" "a files fork has the files"
api GET "/v1/sandboxes/$C" >/dev/null
assert_eq files "$(body .sleepModeRequested)" "a fork's own sleepMode starts as files"

info "the CLI: create --sleep-mode, info, fork --memory"
CLI=$CELLA_BUILD/cella
Q=$(sbx cli)
out=$("$CLI" create "$Q" --sleep-mode memory) || fail "cella create --sleep-mode memory"
assert_eq "created sandbox '$Q'" "$out" "create's line"
api GET "/v1/sandboxes/$Q" >/dev/null
assert_eq memory "$(body .sleepModeRequested)" "--sleep-mode memory sent"
if [ "$MEMORY" = 1 ]; then
        assert_contains "$("$CLI" info "$Q")" "sleep mode:    memory" "cella info"
else
        assert_contains "$("$CLI" info "$Q")" \
                "sleep mode:    files (memory asked for; not on this host: $REASON)" "cella info"
fi
"$CLI" -q create "$Q" --sleep-mode files || fail "cella create --sleep-mode files"
assert_contains "$("$CLI" info "$Q")" "sleep mode:    files" "cella info, files"
RC=0
"$CLI" create "$Q" --sleep-mode ram >"$IT_TMP/out" 2>"$IT_TMP/err" || RC=$?
assert_eq 2 "$RC" "a bad --sleep-mode is a usage error"
assert_contains "$(cat "$IT_TMP/err")" "--sleep-mode takes files or memory, not 'ram'" "its message"
if [ "$MEMORY" = 0 ]; then
        RC=0
        "$CLI" fork "$M" "$C-cli" --memory >"$IT_TMP/out" 2>"$IT_TMP/err" || RC=$?
        assert_eq 1 "$RC" "cella fork --memory fails here"
        assert_contains "$(cat "$IT_TMP/err")" MEMORY_SNAPSHOT_UNAVAILABLE "its error"
        assert_contains "$(cat "$IT_TMP/err")" "$REASON" "and the reason"
        api GET "/v1/sandboxes/$C-cli" >/dev/null
        expect_status 404 SANDBOX_NOT_FOUND
fi

info "MCP: sandbox_create with sleepMode"
G=$(sbx mcp)
mcp_line() { # mcp_line ID TOOL ARGS: a tools/call line
        echo "{\"jsonrpc\":\"2.0\",\"id\":$1,\"method\":\"tools/call\",\"params\":{\"name\":\"$2\",\"arguments\":$3}}"
}
{
        echo '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"memsleep","version":"1"}}}'
        echo '{"jsonrpc":"2.0","method":"notifications/initialized"}'
        mcp_line 2 sandbox_create "{\"name\":\"$G\",\"sleepMode\":\"memory\"}"
        mcp_line 3 sandbox_create "{\"name\":\"$G\",\"sleepMode\":\"ram\"}"
} | timeout 60 "$CLI" mcp >"$IT_TMP/mcp" || fail "cella mcp: $(cat "$IT_TMP/mcp")"
got=$(jq -r 'select(.id == 2) | .result.content[0].text' "$IT_TMP/mcp")
assert_eq memory "$(echo "$got" | jq -r .sleepModeRequested)" "MCP: sleepMode memory asked"
assert_eq "$FALLBACK" "$(echo "$got" | jq -r .sleepModeFallback)" "MCP: the reason"
assert_eq -32602 "$(jq -r 'select(.id == 3) | .error.code' "$IT_TMP/mcp")" "MCP: a bad sleepMode"

info "restart: the requested mode is in the registry, the reason is the new daemon's"
RESTART_ARGS=(--listen "$HOSTPORT")
RESTARTS=0
restart_daemon "kill -9" || fail "$RESTART_ERR"
api GET "/v1/sandboxes/$M" >/dev/null
expect_status 200
assert_eq memory "$(body .sleepModeRequested)" "after a restart"
assert_eq "$FALLBACK" "$(body .sleepModeFallback)" "same host, same reason"

if [ "$MEMORY" = 1 ]; then
        info "asleep with its memory, then a daemon without a working CRIU: a files wake, and why"
        api_json POST "/v1/sandboxes/$M/processes" \
                "{\"command\":\"cd /workspace && exec python3 -m http.server $P\",\"processId\":\"web2\"}"
        expect_status 200
        wait_memory_asleep "$M"
        SLOT=$(sandbox_slot "$M")
        [ -d "$IT_TMP/data/sandboxes/s$SLOT/checkpoint" ] || fail "$M did not sleep with its memory"
fi
info "a host without CRIU (simulated: CELLA_CRIU names a missing file)"
export CELLA_CRIU=$IT_TMP/no-such-criu
restart_daemon "no criu" || fail "$RESTART_ERR"
api GET "/v1/sandboxes/$M" >/dev/null
assert_eq files "$(body .sleepMode)" "no CRIU: files"
assert_eq "no CRIU: $CELLA_CRIU: No such file or directory (Debian's package criu provides it)" \
        "$(body .sleepModeFallback)" "no CRIU: the reason"
api GET /v1/health >/dev/null
assert_eq "$(api GET "/v1/sandboxes/$M" >/dev/null; body .sleepModeFallback)" \
        "$(api GET /v1/health >/dev/null; body .memorySleep.reason)" "health: the same reason"
check=$("$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/check-dir" 2>&1) || fail "cellad --check: $check"
assert_contains "$check" "with their files only: no CRIU: $CELLA_CRIU" "--check without CRIU"
if [ "$MEMORY" = 1 ]; then
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_eq sleeping "$(body .state)" "asleep"
        assert_eq kept "$(run_in "$M" 'cat /workspace/kept.txt')" "woken with its files"
        api GET "/v1/sandboxes/$M" >/dev/null
        assert_contains "$(body .memorySleepError)" \
                "its memory checkpoint was not restored (no CRIU: $CELLA_CRIU: No such file or directory" \
                "the reason: this daemon's"
        api GET "/v1/sandboxes/$M/processes/web2" >/dev/null
        expect_status 404 PROCESS_NOT_FOUND
        [ -d "$IT_TMP/data/sandboxes/s$SLOT/checkpoint.failed" ] || fail "the images were not kept aside"
fi

info "a host whose criu check fails (simulated: a stand-in that fails its check)"
cat >"$IT_TMP/fake-criu" <<'EOF'
#!/bin/sh
case "$1" in
--version) echo "Version: 9.9.9" ;;
check) echo "Error (criu/kerndat.c:1): memfd: no such kernel feature" >&2; exit 1 ;;
*) exit 2 ;;
esac
EOF
chmod 755 "$IT_TMP/fake-criu"
export CELLA_CRIU=$IT_TMP/fake-criu
restart_daemon "criu check fails" || fail "$RESTART_ERR"
api GET "/v1/sandboxes/$M" >/dev/null
assert_eq "criu 9.9.9 check fails on this kernel: memfd: no such kernel feature" \
        "$(body .sleepModeFallback)" "the stand-in's reason"
unset CELLA_CRIU

info "a registry deleted while cellad was down: rebuilt with sleepMode"
kill -KILL "$CELLAD_PID"
wait "$CELLAD_PID" 2>/dev/null || true
CELLAD_PID=
rm -f "$IT_TMP/data/cella.db" "$IT_TMP/data/cella.db-wal" "$IT_TMP/data/cella.db-shm"
start_cellad "${RESTART_ARGS[@]}"
api GET "/v1/sandboxes/$M" >/dev/null
expect_status 200
assert_eq memory "$(body .sleepModeRequested)" "from the identity file"
api GET "/v1/sandboxes/$F" >/dev/null
assert_eq files "$(body .sleepModeRequested)" "files stays files"
assert_eq kept "$(run_in "$M" 'cat /workspace/kept.txt')" "files kept throughout"
info "memsleep: ok"
