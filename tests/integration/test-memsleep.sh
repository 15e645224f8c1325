#!/bin/bash
# Memory sleep (docs/decisions/0050-memory-sleep.md): sleepMode "memory" asks sleep to keep
# a sandbox's processes with CRIU; where the host cannot (cellad's check at start: criu
# --version and criu check; `cellad --check` prints the same reason), the sandbox sleeps
# with its files only, as sleepMode "files" does, and SandboxInfo says so
# (sleepModeRequested "memory", sleepMode "files", sleepModeFallback: why). This build has
# no checkpoint of its own, so on every host the fallback is what is checked here:
# * the reason is the host check's: the same as `cellad --check` and cellad's log, and a
#   host without CRIU or whose `criu check` fails (simulated with CELLA_CRIU pointing at a
#   missing file, and at a stand-in script failing its check) gives its own reason;
# * sleepMode is validated (400 VALIDATION_FAILED, nothing made), kept by PUT on an existing
#   sandbox, in the registry across a SIGKILL restart and in the identity file (a registry
#   deleted while cellad was down is rebuilt with it);
# * a fallback sleep is a files sleep: a python http.server started as a background process
#   and a code context holding a variable are gone, the processes and cgroups are gone
#   (memory freed), the preview URL is stale (410, no wake), the files stay and any API
#   request wakes the sandbox with them;
# * fork with "memory": true is refused, 501 MEMORY_SNAPSHOT_UNAVAILABLE with the reason,
#   and makes nothing (no sandbox, no snapshot); "memory": false is a files fork;
# * where the CRIU cellad runs can checkpoint here (its check passes; at least 4.1, 4.2 on
#   Linux 6.16 and later), a running sandbox with a python http.server and a code context
#   is dumped whole by hand (--leave-running, cellad down, cellad's bind mounts and the
#   agent log external): what the checkpoint needs of the runtime (the agent leads its own
#   session, its listening socket is of the sandbox's network namespace) holds, and the
#   sandbox runs on.
. "$(dirname "$0")/lib.sh"
AGENT_DIR=
it_cleanup_hook() { # the agent's copy a restore by hand maps (below)
        [ -z "$AGENT_DIR" ] || rm -rf "$AGENT_DIR"
}
start_cellad

info "the host check: cellad --check and cellad's log give one reason"
check=$("$CELLA_BUILD/cellad" --check --data-dir "$IT_TMP/check-dir" 2>&1) || fail "cellad --check: $check"
line=$(echo "$check" | grep '^memory sleep ') || fail "no memory sleep line in: $check"
assert_contains "$line" 'unavailable, sandboxes sleep with their files only: ' "--check says"
REASON=${line#*with their files only: }
[ -n "$REASON" ] || fail "an empty reason: $line"
assert_contains "$(cat "$CELLAD_LOG")" "memory sleep unavailable" "cellad's log"
assert_contains "$(cat "$CELLAD_LOG")" "$REASON" "cellad's log has --check's reason"
api GET /v1/health >/dev/null
assert_eq false "$(body .memorySleep.available)" "health: memory sleep unavailable"
assert_eq "$REASON" "$(body .memorySleep.reason)" "health: the reason"
# the CRIU cellad runs: the one scripts/criu.sh built when it is there, else PATH's
CRIU_BIN=criu
[ -x /var/cache/cella/criu/criu ] && CRIU_BIN=/var/cache/cella/criu/criu
if command -v "$CRIU_BIN" >/dev/null; then
        # criu check's own verdict, beside cellad's reading of it
        if "$CRIU_BIN" check >"$IT_TMP/criu-check" 2>&1; then
                assert_contains "$REASON" "passes its check here" "criu check passed"
        else
                assert_contains "$REASON" "check fails on this kernel: " "criu check failed"
                first=$(grep -v 'exited, status=' "$IT_TMP/criu-check" | grep -m1 'Error (' |
                        sed 's/^.*Error ([^)]*): //') || true
                [ -z "$first" ] || assert_contains "$REASON" "$first" "criu's first error"
        fi
else
        assert_contains "$REASON" "no CRIU" "no criu binary"
fi
info "memory sleep here: $REASON"

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

info "memory asked: files in effect, and why"
M=$(sbx mem)
api_json PUT "/v1/sandboxes/$M" '{"sleepMode":"memory","sleepAfter":"2s"}'
expect_status 201
assert_eq memory "$(body .sleepModeRequested)" "requested"
assert_eq files "$(body .sleepMode)" "in effect"
assert_eq "$REASON" "$(body .sleepModeFallback)" "fallback reason as --check says"
api GET /v1/sandboxes >/dev/null
assert_eq memory "$(body ".sandboxes[] | select(.id == \"$M\") | .sleepModeRequested")" \
        "the list says it too"

info "PUT on the existing sandbox changes it; an error keeps it"
api_json PUT "/v1/sandboxes/$F" '{"sleepMode":"memory"}'
expect_status 200
assert_eq memory "$(body .sleepModeRequested)" "changed to memory"
assert_eq "$REASON" "$(body .sleepModeFallback)" "and falls back"
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

info "a fallback sleep is a files sleep: processes and the code context go, files stay"
P=8765
run_in "$M" 'echo kept >/workspace/kept.txt; echo page >/workspace/index.html' >/dev/null
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
wait_sleeping "$M"
assert_eq "" "$(sandbox_pids "$M")" "no process left asleep (memory freed)"
assert_eq "" "$(sandbox_cgroups "$M")" "no cgroup left asleep"
api GET "/v1/sandboxes/$M" >/dev/null
assert_eq files "$(body .sleepMode)" "slept with files"
assert_eq 410 "$(pv /index.html)" "asleep: the preview URL is stale, as with files"
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

info "fork with memory: refused with the reason, nothing made"
api GET /v1/snapshots >/dev/null
snaps=$(body '.snapshots | length')
C=$(sbx child)
api_json POST "/v1/sandboxes/$M/fork" "{\"name\":\"$C\",\"memory\":true}"
expect_status 501 MEMORY_SNAPSHOT_UNAVAILABLE
assert_eq "fork with memory: $REASON" "$(body .message)" "the reason"
api GET "/v1/sandboxes/$C" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND
api GET /v1/snapshots >/dev/null
assert_eq "$snaps" "$(body '.snapshots | length')" "no snapshot taken"
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
assert_contains "$("$CLI" info "$Q")" \
        "sleep mode:    files (memory asked for; not on this host: $REASON)" "cella info"
"$CLI" -q create "$Q" --sleep-mode files || fail "cella create --sleep-mode files"
assert_contains "$("$CLI" info "$Q")" "sleep mode:    files" "cella info, files"
RC=0
"$CLI" create "$Q" --sleep-mode ram >"$IT_TMP/out" 2>"$IT_TMP/err" || RC=$?
assert_eq 2 "$RC" "a bad --sleep-mode is a usage error"
assert_contains "$(cat "$IT_TMP/err")" "--sleep-mode takes files or memory, not 'ram'" "its message"
RC=0
"$CLI" fork "$M" "$C-cli" --memory >"$IT_TMP/out" 2>"$IT_TMP/err" || RC=$?
assert_eq 1 "$RC" "cella fork --memory fails here"
assert_contains "$(cat "$IT_TMP/err")" MEMORY_SNAPSHOT_UNAVAILABLE "its error"
assert_contains "$(cat "$IT_TMP/err")" "$REASON" "and the reason"
api GET "/v1/sandboxes/$C-cli" >/dev/null
expect_status 404 SANDBOX_NOT_FOUND

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
assert_eq "$REASON" "$(echo "$got" | jq -r .sleepModeFallback)" "MCP: the reason"
assert_eq -32602 "$(jq -r 'select(.id == 3) | .error.code' "$IT_TMP/mcp")" "MCP: a bad sleepMode"

info "restart: the requested mode is in the registry, the reason is the new daemon's"
RESTART_ARGS=(--listen "$HOSTPORT")
RESTARTS=0
restart_daemon "kill -9" || fail "$RESTART_ERR"
api GET "/v1/sandboxes/$M" >/dev/null
expect_status 200
assert_eq memory "$(body .sleepModeRequested)" "after a restart"
assert_eq "$REASON" "$(body .sleepModeFallback)" "same host, same reason"

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
info "a running sandbox can be checkpointed whole (what the checkpoint needs of the runtime)"
# The CRIU cellad runs, where it is one that can checkpoint here: its check passes and it
# is at least 4.1, or 4.2 on Linux 6.16 and later (decision 0050: older ones cannot dump a
# TCP socket on those kernels). The tree is dumped with --leave-running while cellad is
# down (the agent's end of cellad's connection belongs to cellad's network namespace and
# goes with it), with the mounts cellad binds given as external (the host's devices, the
# cgroup, the agent's executable), as cellad's own dump will: this fails if the agent
# shares cellad's session or its listening socket is of cellad's network namespace, and
# the sandbox must run on unharmed.
kernel=$(uname -r)
kernel=${kernel%%-*}
min=4.1
dpkg --compare-versions "$kernel" ge 6.16 && min=4.2
ver=$("$CRIU_BIN" --version 2>/dev/null | sed -n 's/^Version: //p' | head -1) || true
if [ -z "$ver" ] || ! dpkg --compare-versions "$ver" ge "$min" || ! "$CRIU_BIN" check >/dev/null 2>&1; then
        info "skipped: no CRIU of at least $min passing its check here (${ver:-none}; scripts/criu.sh builds one)"
else
        K=$(sbx ckpt)
        api_json PUT "/v1/sandboxes/$K" '{"sleepMode":"memory"}'
        expect_status 201
        run_in "$K" 'echo ckpt >/workspace/index.html' >/dev/null
        api_json POST "/v1/sandboxes/$K/processes" \
                "{\"command\":\"cd /workspace && exec python3 -m http.server $P\",\"processId\":\"web\"}"
        expect_status 200
        api_json POST "/v1/sandboxes/$K/processes/web/waitForPort" "{\"port\":$P,\"timeout\":30000}"
        expect_status 200
        api_json POST "/v1/sandboxes/$K/contexts" '{"language":"python"}'
        expect_status 201
        KCTX=$(body .id)
        api_json POST "/v1/sandboxes/$K/code" "{\"code\":\"y = 7\",\"contextId\":\"$KCTX\"}"
        expect_status 200
        A=
        for p in $(sandbox_pids "$K"); do
                [ "$(awk '/^NSpid:/ {print $NF}' "/proc/$p/status" 2>/dev/null)" = 1 ] && A=$p
        done
        [ -n "$A" ] || fail "no pid 1 of $K"
        assert_eq "$A" "$(ps -o sid= -p "$A" | tr -d ' ')" "the agent leads its own session"
        kill -KILL "$CELLAD_PID"
        wait "$CELLAD_PID" 2>/dev/null || true
        CELLAD_PID=
        # the agent closes its end of the connection once it sees cellad gone
        for _ in $(seq 1 100); do
                [ "$(find "/proc/$A/fd" -lname 'socket:*' 2>/dev/null | wc -l)" -le 1 ] && break
                sleep 0.1
        done
        ext=()
        while read -r mp; do
                ext+=(--external "mnt[$mp]:m$(echo "$mp" | tr / _)")
        done < <(awk '{for (i = 7; i <= NF; i++) if ($i == "-") break;
                       if ($(i + 1) == "devtmpfs" || $(i + 1) == "cgroup2" ||
                           $5 == "/run/.cella/cella-init") print $5}' "/proc/$A/mountinfo")
        mnt=$(awk '/^mnt_id:/ {print $2}' "/proc/$A/fdinfo/1")
        ino=$(stat -L -c %i "/proc/$A/fd/1")
        mkdir "$IT_TMP/ckpt"
        RC=0
        "$CRIU_BIN" dump -t "$A" -D "$IT_TMP/ckpt" -o dump.log --leave-running \
                --network-lock nftables "${ext[@]}" \
                --external "$(printf 'file[%x:%x]' "$mnt" "$ino")" 2>"$IT_TMP/criu-dump" || RC=$?
        # cellad back first, so that a failure leaves nothing behind
        start_cellad "${RESTART_ARGS[@]}"
        [ "$RC" = 0 ] || fail "criu dump of $K: $(grep 'Error' "$IT_TMP/ckpt/dump.log" |
                grep -v RLIMIT_NOFILE | head -3 | tr '\n' ' ')"
        size=$(du -sb "$IT_TMP/ckpt" | cut -f1)
        info "checkpoint of $K (python http.server and a code context): $((size / 1048576)) MiB"
        [ "$size" -gt 1048576 ] || fail "an image of $size bytes holds no process memory"
        assert_eq ckpt "$(run_in "$K" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
                "the server runs on after the dump"
        api_json POST "/v1/sandboxes/$K/code" "{\"code\":\"y + 1\",\"contextId\":\"$KCTX\"}"
        expect_status 200
        assert_eq 8 "$(body '.results[0].text')" "so does the code context"

        info "the same sandbox dumped whole (the tree ends) and restored by hand, then reattached"
        # What cellad's wake is to do (decision 0050, experiment 18), by hand: this fails if
        # the agent's executable, log or socket is one CRIU cannot restore (a memfd, a log
        # opened O_NOFOLLOW or host root's, a socket bound outside the sandbox's mounts).
        # The veth goes first (a restore cannot rejoin it); the restarted cellad makes it
        # again as a start does (the same address).
        api_json POST "/v1/sandboxes/$K/ports" "{\"port\":$P}"
        expect_status 201
        KTOKEN=$(body .url | sed -E "s#^http://$P-$K-([a-z0-9_]+)\..*#\1#")
        kpv() { curl -sS -o "$IT_TMP/kpv" -w '%{http_code}' -H "Host: $P-$K-$KTOKEN.localhost:${CELLA_URL##*:}" "$CELLA_URL$1"; }
        assert_eq 200 "$(kpv /index.html)" "$K's server through its preview URL"
        kaddr=$(nsenter -t "$A" -n ip -4 -o addr show dev eth0 | awk '{print $4}')
        [ -n "$kaddr" ] || fail "$K has no eth0 address"
        uidb=$(awk 'NR == 1 {print $2}' "/proc/$A/uid_map")
        D=$IT_TMP/data/sandboxes/s$(sandbox_slot "$K")
        cgs=$(sandbox_cgroups "$K")
        v2cg=
        for c in $cgs; do [ "$(stat -f -c %T "$c")" = cgroup2fs ] && v2cg=$c; done
        if [ -z "$v2cg" ] || [ ! -f "$D/disk.img" ]; then
                fail "no v2 cgroup or disk image for $K ($cgs, $D)"
        fi
        nsenter -t "$A" -n ip link del eth0 2>/dev/null || true
        kill -KILL "$CELLAD_PID"
        wait "$CELLAD_PID" 2>/dev/null || true
        CELLAD_PID=
        for _ in $(seq 1 100); do
                [ "$(find "/proc/$A/fd" -lname 'socket:*' 2>/dev/null | wc -l)" -le 1 ] && break
                sleep 0.1
        done
        mkdir "$IT_TMP/ckpt2" "$IT_TMP/root2"
        logext=$(printf 'file[%x:%x]' "$(awk '/^mnt_id:/ {print $2}' "/proc/$A/fdinfo/1")" \
                "$(stat -L -c %i "/proc/$A/fd/1")")
        RC=0
        "$CRIU_BIN" dump -t "$A" -D "$IT_TMP/ckpt2" -o dump.log --network-lock nftables \
                "${ext[@]}" --external "$logext" 2>"$IT_TMP/criu-dump2" || RC=$?
        [ "$RC" = 0 ] || fail "criu dump (the tree ending) of $K: $(grep 'Error' "$IT_TMP/ckpt2/dump.log" |
                grep -v RLIMIT_NOFILE | head -3 | tr '\n' ' ')"
        left=$(wait_empty sandbox_pids "$K") || fail "processes of $K left after the dump: $left"
        # the agent's executable: the same bytes and mode as cellad's copy (CRIU checks
        # both), where the restored tree's root can reach it (CRIU opens it from inside the
        # sandbox's user namespace: not under the test's 0700 dir)
        AGENT_DIR=$(mktemp -d /tmp/cella-it-agent.XXXXXX)
        chmod 0755 "$AGENT_DIR"
        install -m 0555 "$CELLA_BUILD/cella-init" "$AGENT_DIR/cella-init"
        rext=()
        for m in "${ext[@]}"; do
                case "$m" in
                mnt\[/run/.cella/cella-init\]:*) rext+=(--external "mnt[${m#*]:}]:$AGENT_DIR/cella-init") ;;
                mnt\[/sys/fs/cgroup\]:*) rext+=(--external "mnt[${m#*]:}]:$v2cg") ;;
                mnt\[/proc/*) rext+=(--external "mnt[${m#*]:}]:/dev/null") ;;
                mnt\[*) mp=${m#mnt[}; rext+=(--external "mnt[${m#*]:}]:${mp%%]*}") ;;
                esac
        done
        RC=0
        # shellcheck disable=SC2016 # expanded by the inner bash
        CGS="$cgs" CELLA_IMAGES="$CELLA_IMAGES" unshare -m --propagation private bash -c '
                set -e
                T=$1 D=$2 uidb=$3 criu=$4 logext=$5; shift 5
                mkdir -p "$T/disk2" "$T/lower2"
                mount -o loop "$D/disk.img" "$T/disk2"
                mount --bind -o "X-mount.idmap=0:$uidb:65536" "$CELLA_IMAGES/default/rootfs" "$T/lower2"
                mount -t overlay -o "lowerdir=$T/lower2,upperdir=$T/disk2/upper,workdir=$T/disk2/work,userxattr" none "$T/root2"
                for c in $CGS; do echo $$ >"$c/cgroup.procs"; done
                exec 7>>"$D/agent.log"
                "$criu" restore -D "$T/ckpt2" -o restore.log --restore-detached --root "$T/root2" \
                        --manage-cgroups=none "$@" --inherit-fd "fd[7]:$logext" --pidfile "$T/pid2"
        ' restore "$IT_TMP" "$D" "$uidb" "$CRIU_BIN" "$logext" "${rext[@]}" \
                2>"$IT_TMP/criu-restore" || RC=$?
        [ "$RC" = 0 ] || fail "criu restore of $K: $(cat "$IT_TMP/criu-restore") $(grep 'Error' "$IT_TMP/ckpt2/restore.log" |
                grep -v 'RLIMIT_NOFILE\|tables\|already assigned' | head -3 | tr '\n' ' ')"
        rm -rf "$AGENT_DIR" # the restored tree holds its bind mount, not the path
        R=$(cat "$IT_TMP/pid2")
        assert_eq 1 "$(awk '/^NSpid:/ {print $NF}' "/proc/$R/status")" "the restored tree's PID 1"
        # the registry pointed at the restored PID 1, as cellad's wake will record it
        sqlite3 "$IT_TMP/data/cella.db" "UPDATE sandboxes SET pid = $R,
                pid_start = $(sed 's/.*) //' "/proc/$R/stat" | awk '{print $20}') WHERE name = '$K'"
        start_cellad "${RESTART_ARGS[@]}"
        assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$K' reattached" "the restored $K reattached"
        assert_contains "$(cat "$CELLAD_LOG")" "sandbox '$K': its network namespace has no veth" \
                "the restored $K's veth, made again"
        assert_eq "$kaddr" "$(nsenter -t "$R" -n ip -4 -o addr show dev eth0 | awk '{print $4}')" \
                "the restored $K's address"
        assert_contains "$(nsenter -t "$R" -n ip route show default)" "default via" \
                "the restored $K's default route"
        # A port exposure belongs to the PID 1's run (its start time), and the restored PID 1
        # is a new one: exposed again here (200: the port was exposed), as cellad's wake
        # is to carry it over (0050).
        api_json POST "/v1/sandboxes/$K/ports" "{\"port\":$P}"
        expect_status 200
        KTOKEN=$(body .url | sed -E "s#^http://$P-$K-([a-z0-9_]+)\..*#\1#")
        assert_eq 200 "$(kpv /index.html)" "$K's server through its preview URL after the restore"
        assert_eq ckpt "$(cat "$IT_TMP/kpv")" "its page"
        api_json POST "/v1/sandboxes/$K/code" "{\"code\":\"y + 2\",\"contextId\":\"$KCTX\"}"
        expect_status 200
        assert_eq 9 "$(body '.results[0].text')" "the code context's variable after the restore"
        assert_eq ckpt "$(run_in "$K" "python3 -c 'import urllib.request as u; print(u.urlopen(\"http://127.0.0.1:$P/index.html\").read().decode().strip())'")" \
                "the server after the restore"
fi
info "memsleep: ok"
