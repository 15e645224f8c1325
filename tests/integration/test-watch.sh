#!/bin/bash
# File watch over HTTP (decision 0020): the watching event, create/modify/delete/move
# events for files and directories, recursion into a new subdirectory, the include filter,
# the default excludes, validation and a missing directory, and that closing the stream
# frees the agent's inotify descriptor (seen from the host in /proc/<pid1>/fdinfo), and
# `cella watch`.
. "$(dirname "$0")/lib.sh"
start_cellad

S=$(sbx watch)
W=/v1/sandboxes/$S/files/watch
OUT=$IT_TMP/watch.out
WPID=

run_in "$S" "mkdir -p /workspace/w/old && echo x >/workspace/w/keep" >/dev/null

# host pid of the sandbox's PID 1 (cella-init)
pid1() {
        local p
        for p in $(sandbox_pids "$S"); do
                if grep -qs '^NSpid:.*[[:space:]]1$' "/proc/$p/status"; then
                        echo "$p"
                        return
                fi
        done
}

# inotify descriptors PID 1 holds
inotify_fds() {
        local n=0 f
        for f in /proc/"$1"/fdinfo/*; do
                grep -qs '^inotify' "$f" && n=$((n + 1))
        done
        echo "$n"
}

# watch_start JSON: stream the watch into $OUT in the background, wait for "watching".
watch_start() {
        : >"$OUT"
        curl -sS -N -X POST -H 'Content-Type: application/json' --data-binary "$1" \
                "$CELLA_URL$W" >"$OUT" 2>/dev/null &
        WPID=$!
        wait_for '"type":"watching"'
}

watch_stop() {
        kill "$WPID" 2>/dev/null || true
        wait "$WPID" 2>/dev/null || true
        WPID=
}

# wait_for TEXT: until $OUT holds TEXT (30 s at most).
wait_for() {
        local i
        for i in $(seq 300); do
                grep -qF -- "$1" "$OUT" && return 0
                sleep 0.1
        done
        fail "no [$1] in the watch stream: $(head -c 2000 "$OUT")"
}

# event TYPE PATH ISDIR: the stream has that event.
event() {
        wait_for "\"eventType\":\"$1\",\"path\":\"$2\",\"isDirectory\":$3"
}

info "validation before the sandbox is touched"
api_json POST "$W" '{"path":5}'
expect_status 400 VALIDATION_FAILED
api_json POST "$W" '{"path":"/workspace","include":"*.c"}'
expect_status 400 VALIDATION_FAILED
api_json POST "$W" '{"path":"/workspace","bogus":1}'
expect_status 400 VALIDATION_FAILED
api_json GET "$W" '{}'
expect_status 405
api_json POST "$W" '{"path":"/workspace/nothing-here"}'
expect_status 404 FILE_NOT_FOUND

p1=$(pid1)
[ -n "$p1" ] || fail "no PID 1 found for $S"
base=$(inotify_fds "$p1")

info "events for files and directories, recursive into a new subdirectory"
watch_start '{"path":"/workspace/w"}'
assert_contains "$(cat "$OUT")" '"path":"/workspace/w"' "watching path"
assert_eq $((base + 1)) "$(inotify_fds "$p1")" "one inotify descriptor while watching"
run_in "$S" "echo a >/workspace/w/f.txt" >/dev/null
event create /workspace/w/f.txt false
event modify /workspace/w/f.txt false
run_in "$S" "mv /workspace/w/f.txt /workspace/w/g.txt" >/dev/null
event move_from /workspace/w/f.txt false
event move_to /workspace/w/g.txt false
run_in "$S" "rm /workspace/w/g.txt" >/dev/null
event delete /workspace/w/g.txt false
run_in "$S" "mkdir /workspace/w/sub" >/dev/null
event create /workspace/w/sub true
# the agent watches a new directory before it reports its create event
run_in "$S" "echo b >/workspace/w/sub/inner.txt; echo c >/workspace/w/old/o.txt" >/dev/null
event create /workspace/w/sub/inner.txt false
event create /workspace/w/old/o.txt false
run_in "$S" "rm -r /workspace/w/sub" >/dev/null
event delete /workspace/w/sub true

info "default excludes: .git and node_modules"
run_in "$S" "mkdir -p /workspace/w/.git/objects /workspace/w/node_modules; echo 1 >/workspace/w/.git/objects/a; echo 2 >/workspace/w/node_modules/b; echo 3 >/workspace/w/after" >/dev/null
event create /workspace/w/after false
assert_not_contains "$(cat "$OUT")" ".git" "no .git events"
assert_not_contains "$(cat "$OUT")" "node_modules" "no node_modules events"

info "closing the stream frees the inotify descriptor"
watch_stop
for i in $(seq 100); do
        [ "$(inotify_fds "$p1")" = "$base" ] && break
        sleep 0.1
done
assert_eq "$base" "$(inotify_fds "$p1")" "inotify descriptors after the client left"

info "include filter"
watch_start '{"path":"/workspace/w","include":["*.c"]}'
run_in "$S" "echo x >/workspace/w/skip.txt; echo y >/workspace/w/take.c" >/dev/null
event create /workspace/w/take.c false
assert_not_contains "$(cat "$OUT")" "skip.txt" "include filter"
watch_stop

info "exclude replaces the defaults"
watch_start '{"path":"/workspace/w","exclude":["*.log"]}'
run_in "$S" "echo x >/workspace/w/a.log; echo y >/workspace/w/node_modules/seen" >/dev/null
event create /workspace/w/node_modules/seen false
assert_not_contains "$(cat "$OUT")" "a.log" "exclude filter"
watch_stop

info "cella watch: one line per event"
CLI=$CELLA_BUILD/cella
: >"$OUT"
"$CLI" watch "$S" /workspace/w --include '*.txt' >"$OUT" 2>"$IT_TMP/cli.err" &
WPID=$!
for i in $(seq 300); do
        grep -qs watching "$IT_TMP/cli.err" && break
        sleep 0.1
done
assert_contains "$(cat "$IT_TMP/cli.err")" "watching /workspace/w" "cli watching line"
run_in "$S" "mkdir /workspace/w/clidir; echo x >/workspace/w/cli.txt; echo y >/workspace/w/cli.bin" >/dev/null
wait_for "create /workspace/w/cli.txt"
assert_not_contains "$(cat "$OUT")" "cli.bin" "cli include"
watch_stop

info "deleting the watched directory: its delete event is the last, then the stream ends"
run_in "$S" "mkdir -p /workspace/gone/inner" >/dev/null
watch_start '{"path":"/workspace/gone"}'
run_in "$S" "rm -r /workspace/gone" >/dev/null
event delete /workspace/gone/inner true
event delete /workspace/gone true
for i in $(seq 100); do
        kill -0 "$WPID" 2>/dev/null || break
        sleep 0.1
done
kill -0 "$WPID" 2>/dev/null && fail "the stream did not end after its directory went"
wait "$WPID" || fail "curl failed on the ended stream"
WPID=

info "a client that does not read: the agent drops events (overflow), memory stays bounded"
run_in "$S" "mkdir -p /workspace/flood" >/dev/null
rss_before=$(awk '/^VmRSS/ {print $2}' "/proc/$p1/status")
python3 - "$CELLA_URL" "$W" "$S" >"$IT_TMP/flood.out" 2>&1 <<'PY' &
import json, socket, sys, time, urllib.parse, urllib.request
url, path, name = sys.argv[1], sys.argv[2], sys.argv[3]
u = urllib.parse.urlparse(url)
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # a small window: the client stalls
s.connect((u.hostname, u.port))
body = b'{"path":"/workspace/flood"}'
s.sendall(b"POST " + path.encode() + b" HTTP/1.1\r\nHost: " + u.netloc.encode() +
          b"\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() +
          b"\r\n\r\n" + body)
got = b""
while b'"type":"watching"' not in got:
    got += s.recv(4096)
# 200,000 distinct files made while this client reads nothing (their events, ~20 MB, are
# more than the stream's credit window and the sockets' buffers hold)
req = urllib.request.Request(url + "/v1/sandboxes/" + name + "/exec", method="POST",
                             headers={"Content-Type": "application/json"},
                             data=json.dumps({"command": "cd /workspace/flood && seq 1 200000 | xargs touch"}).encode())
res = json.load(urllib.request.urlopen(req, timeout=120))
assert res["exitCode"] == 0, res
print("flooded", flush=True)
time.sleep(1)
# drain: the queued events, then the overflow event once the agent's queue emptied
s.settimeout(60)
while b'"type":"overflow"' not in got:
    d = s.recv(1 << 20)
    if not d:
        break
    got += d
# the stream still works after an overflow
req = urllib.request.Request(url + "/v1/sandboxes/" + name + "/exec", method="POST",
                             headers={"Content-Type": "application/json"},
                             data=json.dumps({"command": "touch /workspace/flood/zz-after"}).encode())
urllib.request.urlopen(req, timeout=60).read()
while b"zz-after" not in got:
    d = s.recv(1 << 20)
    if not d:
        break
    got += d
events = got.count(b'"type":"event"')
print("events", events, "overflow", got.count(b'"type":"overflow"'), "after", b"zz-after" in got, flush=True)
PY
FPID=$!
for i in $(seq 1200); do
        grep -qs '^flooded' "$IT_TMP/flood.out" && break
        kill -0 "$FPID" 2>/dev/null || break
        sleep 0.1
done
grep -qs '^flooded' "$IT_TMP/flood.out" || fail "flood did not run: $(cat "$IT_TMP/flood.out")"
rss_flood=$(awk '/^VmRSS/ {print $2}' "/proc/$p1/status")
wait "$FPID" || fail "flood client: $(cat "$IT_TMP/flood.out")"
line=$(grep '^events' "$IT_TMP/flood.out")
info "$line (agent VmRSS ${rss_before} kB before, ${rss_flood} kB while stalled)"
set -- $line
[ "$2" -lt 200000 ] || fail "every event was delivered to a stalled client: $line"
[ "$4" -ge 1 ] || fail "no overflow event: $line"
assert_eq True "$6" "an event after the overflow"
# the agent's queue is bounded: a stalled client costs it at most a few MiB
[ $((rss_flood - rss_before)) -lt 16384 ] || fail "agent grew by $((rss_flood - rss_before)) kB"

for i in $(seq 100); do
        [ "$(inotify_fds "$p1")" = "$base" ] && break
        sleep 0.1
done
assert_eq "$base" "$(inotify_fds "$p1")" "no inotify descriptor left"

info "a name that is not UTF-8 is reported, its bytes in pathBase64"
watch_start '{"path":"/workspace/w"}'
run_in "$S" "printf x >/workspace/w/inv\$'\\377'name" >/dev/null
wait_for "\"path\":\"/workspace/w/inv$(printf '\357\277\275')name\",\"isDirectory\":false,\"pathBase64\":\"$(printf '/workspace/w/inv\377name' | base64)\""
watch_stop

info "watch: ok"
