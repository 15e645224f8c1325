#!/bin/bash
# The terminal (GET /pty WebSocket, decision 0022) through libcella's WebSocket client
# (build/tests/pty-client) and `cella shell`: echo of typed input, resize seen by
# `stty size`, replay of recent output to a new connection before its ready, two
# connections sharing one terminal, `exit 7` reported to every connection and a new shell
# for the next one, the session's cwd and env in the terminal, a bad control message
# answered with an error on a connection that stays, upgrade validation (HTTP errors
# before the upgrade), session delete ending the terminal, and `cella shell` driven
# through a real pty (python3's pty module) exiting with the shell's status.
. "$(dirname "$0")/lib.sh"
start_cellad

PC=$CELLA_BUILD/tests/pty-client
[ -x "$PC" ] || skip "no $PC"
S=$(sbx pty)
BG=()

pc() {
        "$PC" --url "$CELLA_URL" --timeout 60 "$@"
}

# For `pc_bg ... &`: the background job becomes the client itself, so that $! is the
# client's pid (kill reaches it, not a subshell around it).
pc_bg() {
        exec "$PC" --url "$CELLA_URL" --timeout 60 "$@"
}

# Clients left in the background by a failed step are stopped at exit.
it_cleanup_hook() {
        local p
        for p in "${BG[@]}"; do
                kill "$p" 2>/dev/null || true
                wait "$p" 2>/dev/null || true
        done
}

run_in "$S" "true" >/dev/null

info "echo: typed input is echoed and run"
pc "$S" ready 'send:echo hi-$((40+2))-$RANDOM\r' 'expect:hi-42-' 

info "resize: stty size reports the new size"
pc --cols 100 --rows 30 "$S" ready 'send:stty size\r' 'expect:30 100' \
        'resize:132x43' 'send:stty size\r' 'expect:43 132'

info "replay: output typed on one connection reaches the next one before its ready"
pc "$S" ready 'send:echo replay-$((6*7))-mark\r' 'expect:replay-42-mark'
pc "$S" 'replay:replay-42-mark' 

info "shared: typing on one connection is seen on another"
F=$IT_TMP/attached
pc_bg "$S" ready "touch:$F" 'expect:shared-$((5*5))' 'expect:shared-25-ok' &
BG+=($!)
pc "$S" ready "wait-file:$F" 'send:echo shared-$((5*5))-ok\r' 'expect:shared-25-ok'
wait "${BG[0]}" || fail "the second connection did not see the first one's typing"
BG=()

info "exit: every connection gets the shell's exit code"
F=$IT_TMP/attached2
pc_bg "$S" ready "touch:$F" 'exit:7' &
BG+=($!)
pc "$S" ready "wait-file:$F" 'send:exit 7\r' 'exit:7'
wait "${BG[0]}" || fail "the other connection did not get exit 7"
BG=()

info "after exit: a new connection gets a new shell"
pc "$S" ready 'send:echo new-$((3*3))-$$\r' 'expect:new-9-'

info "session cwd and env carry into the terminal"
api_json POST "/v1/sandboxes/$S/sessions" '{"id":"work","cwd":"/tmp","env":{"PTY_VAR":"from-session"}}'
expect_status 201
pc --session work "$S" ready 'send:echo "[$PWD][$PTY_VAR]"\r' 'expect:[/tmp][from-session]'
run_in "$S" "true" >/dev/null

info "bad control JSON: an error message, and the connection stays"
pc "$S" ready 'control:{"type":"resize","cols":' 'expect-control:"code":"VALIDATION_FAILED"' \
        'control:{"type":"resize","cols":0,"rows":5}' 'expect-control:from 1 to 1000' \
        'control:{"type":"shout"}' 'expect-control:unknown control message' \
        'send:echo alive-$((4*4))\r' 'expect:alive-16'

info "backpressure: a client that stops reading stalls the terminal, not cellad's memory"
rss_kb() {
        awk '/^VmRSS:/ {print $2}' "/proc/$CELLAD_PID/status"
}
F=$IT_TMP/flooding
G=$IT_TMP/resume
RSS0=$(rss_kb)
pc_bg "$S" ready 'send:yes flood-line-$((1+1))\r' 'expect:flood-line-2' "touch:$F" "stall:$G" \
        'send:\x03' 'send:echo after-$((9*9))\r' 'expect:after-81' &
BG+=($!)
for _ in $(seq 600); do [ -e "$F" ] && break; sleep 0.05; done
[ -e "$F" ] || fail "the flooding client did not start"
MAX=0
for _ in $(seq 30); do
        sleep 0.1
        R=$(rss_kb)
        [ "$R" -gt "$MAX" ] && MAX=$R
done
touch "$G"
wait "${BG[0]}" || fail "the terminal did not recover after the stall"
BG=()
info "cellad RSS: $RSS0 KiB before, at most $MAX KiB while the client stalled"
[ $((MAX - RSS0)) -lt $((64 * 1024)) ] || fail "cellad grew by $((MAX - RSS0)) KiB"

info "a client that vanishes mid-stream leaves the terminal running"
pc_bg "$S" ready 'send:yes vanish\r' 'expect:vanish' "touch:$IT_TMP/vanish" "stall:$IT_TMP/never" &
P=$!
for _ in $(seq 600); do [ -e "$IT_TMP/vanish" ] && break; sleep 0.05; done
kill -9 "$P"
wait "$P" 2>/dev/null || true
pc "$S" ready 'send:\x03' 'send:echo still-$((8*8))\r' 'expect:still-64'

info "protocol violations close the WebSocket with the RFC's status code; pings get pongs"
# ws_violation KIND: a raw client (python3 stdlib) does the handshake, waits for ready,
# checks a ping's pong, then breaks the protocol; prints the close code it got.
ws_violation() {
        python3 - "$CELLA_URL" "$S" "$1" <<'PY'
import base64, hashlib, os, socket, struct, sys
url, name, kind = sys.argv[1], sys.argv[2], sys.argv[3]
host, port = url.split("//")[1].split(":")
s = socket.create_connection((host, int(port)), timeout=30)
key = base64.b64encode(os.urandom(16)).decode()
request = ("GET /v1/sandboxes/%s/pty HTTP/1.1\r\nHost: %s:%s\r\nUpgrade: websocket\r\n"
           "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n"
           % (name, host, port, key)).encode()
buf = b""
def frame():
    global buf
    while True:
        if len(buf) >= 2:
            op, n = buf[0] & 15, buf[1] & 127
            off = 2
            if n == 126:
                n, off = struct.unpack(">H", buf[2:4])[0], 4
            elif n == 127:
                n, off = struct.unpack(">Q", buf[2:10])[0], 10
            if len(buf) >= off + n:
                p, buf = buf[off:off + n], buf[off + n:]
                return op, p
        d = s.recv(65536)
        if not d:
            return None, b""
        buf += d
def mkframe(op, payload, mask=True):
    n = len(payload)
    m = 0x80 if mask else 0
    hdr = bytes([0x80 | op]) + (bytes([m | n]) if n < 126 else
                                bytes([m | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([m | 127]) + struct.pack(">Q", n))
    if mask:
        k = os.urandom(4)
        payload = bytes(c ^ k[i % 4] for i, c in enumerate(payload))
        hdr += k
    return hdr + payload
def send(op, payload, mask=True):
    s.sendall(mkframe(op, payload, mask))
# "early": typed input sent right behind the upgrade request, before the 101
s.sendall(request + (mkframe(2, b"echo early-$((2*50))\r") if kind == "early" else b""))
while b"\r\n\r\n" not in buf:
    d = s.recv(4096)
    if not d:
        sys.exit("no handshake answer")
    buf += d
head, buf = buf.split(b"\r\n\r\n", 1)
want = base64.b64encode(hashlib.sha1((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").encode()).digest())
if not head.startswith(b"HTTP/1.1 101") or b"Sec-WebSocket-Accept: " + want not in head:
    sys.exit("bad handshake: %r" % head)
out = b""
while True:
    op, p = frame()
    if op is None:
        sys.exit("closed before ready")
    if op == 2:
        out += p
    if op == 1 and b'"ready"' in p:
        break
if kind == "early":
    while b"early-100" not in out:
        op, p = frame()
        if op is None:
            sys.exit("closed before the early input's output")
        if op == 2:
            out += p
    kind = "close"
send(9, b"are-you-there")
while True:
    op, p = frame()
    if op is None:
        sys.exit("closed before the pong")
    if op == 10:
        if p != b"are-you-there":
            sys.exit("pong with %r" % p)
        break
if kind == "unmasked":
    send(2, b"x", mask=False)
elif kind == "utf8":
    send(1, b'{"type":"\xff"}')
elif kind == "toobig":
    send(2, b"x" * (70 * 1024))
elif kind == "close":
    send(8, struct.pack(">H", 1000))
while True:
    op, p = frame()
    if op is None:
        sys.exit("no close frame")
    if op == 8:
        print(struct.unpack(">H", p[:2])[0] if len(p) >= 2 else 1005)
        break
PY
}
assert_eq 1002 "$(ws_violation unmasked)" "close code for an unmasked frame"
assert_eq 1007 "$(ws_violation utf8)" "close code for a text message that is not UTF-8"
assert_eq 1009 "$(ws_violation toobig)" "close code for a message over 64 KiB"
assert_eq 1000 "$(ws_violation close)" "close code answering a client's close"
# input sent right behind the upgrade request (before the 101) is not lost
assert_eq 1000 "$(ws_violation early)" "early input, then a clean close"
pc "$S" ready 'send:echo after-violations-$((2*3))\r' 'expect:after-violations-6'

info "cellad restart: connections end, the terminal runs on with its replay"
pc "$S" ready 'send:echo before-restart-$((7*7))\r' 'expect:before-restart-49'
F=$IT_TMP/attached4
pc_bg "$S" ready "touch:$F" closed &
BG+=($!)
for _ in $(seq 600); do [ -e "$F" ] && break; sleep 0.05; done
kill -TERM "$CELLAD_PID"
wait "$CELLAD_PID" || true
CELLAD_PID=
wait "${BG[0]}" || fail "the connection did not end cleanly when cellad stopped"
BG=()
start_cellad
pc "$S" 'replay:before-restart-49' 'send:echo after-restart-$((7*8))\r' 'expect:after-restart-56'

info "errors before the upgrade are HTTP errors"
pc --session nosuch "$S" open-error:SESSION_NOT_FOUND
pc --session 'bad id' "$S" open-error:VALIDATION_FAILED
api GET "/v1/sandboxes/$S/pty" >/dev/null
expect_status 400 VALIDATION_FAILED
api GET "/v1/sandboxes/$S/pty?cols=0" -H 'Upgrade: websocket' -H 'Connection: Upgrade' \
        -H 'Sec-WebSocket-Version: 13' -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' >/dev/null
expect_status 400 VALIDATION_FAILED
api POST "/v1/sandboxes/$S/pty" >/dev/null
expect_status 405
api GET "/v1/sandboxes/$S/pty" -H 'Origin: http://evil.example' -H 'Upgrade: websocket' \
        -H 'Connection: Upgrade' -H 'Sec-WebSocket-Version: 13' \
        -H 'Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==' >/dev/null
expect_status 403 PERMISSION_DENIED

info "deleting the session ends its terminal"
F=$IT_TMP/attached3
pc_bg --session work "$S" ready "touch:$F" 'exit:137' &
BG+=($!)
for _ in $(seq 600); do [ -e "$F" ] && break; sleep 0.05; done
api DELETE "/v1/sandboxes/$S/sessions/work" >/dev/null
expect_status 200
wait "${BG[0]}" || fail "deleting the session did not end its terminal"
BG=()

info "cella shell through a real pty: commands run, exit 3 is cella's status"
OUT=$IT_TMP/shell.out
set +e
python3 - "$CELLA_BUILD/cella" "$S" "$OUT" <<'PY'
import os, pty, sys, time, select
cella, name, out = sys.argv[1], sys.argv[2], sys.argv[3]
pid, fd = pty.fork()
if pid == 0:
    os.execv(cella, [cella, "shell", name])
buf = b""
def until(pat, limit=60):
    global buf
    end = time.time() + limit
    while pat not in buf:
        if time.time() > end:
            return False
        r, _, _ = select.select([fd], [], [], 0.2)
        if r:
            try:
                d = os.read(fd, 65536)
            except OSError:
                return False
            if not d:
                return False
            buf += d
    return True
ok = until(b"#") or until(b"$")
os.write(fd, b"echo shell-$((10+1))-ok\r")
ok = ok and until(b"shell-11-ok")
os.write(fd, b"exit 3\r")
while True:
    try:
        d = os.read(fd, 65536)
    except OSError:
        break
    if not d:
        break
    buf += d
_, status = os.waitpid(pid, 0)
open(out, "wb").write(buf)
sys.exit(os.waitstatus_to_exitcode(status) if ok else 99)
PY
rc=$?
set -e
[ "$rc" = 99 ] && fail "cella shell: no echo: $(tail -c 1000 "$OUT")"
assert_eq 3 "$rc" "cella shell exit status"

info "cella shell: SIGTERM restores the terminal's mode and exits 143"
set +e
python3 - "$CELLA_BUILD/cella" "$S" <<'PY'
import os, select, signal, subprocess, sys, termios, time
cella, name = sys.argv[1], sys.argv[2]
master, slave = os.openpty()
before = termios.tcgetattr(slave)
p = subprocess.Popen([cella, "shell", name], stdin=slave, stdout=slave, stderr=slave,
                     start_new_session=True)
buf, end = b"", time.time() + 60
os.write(master, b"echo raw-$((5*5))\r")
while b"raw-25" not in buf and time.time() < end:
    r, _, _ = select.select([master], [], [], 0.2)
    if r:
        buf += os.read(master, 65536)
if b"raw-25" not in buf:
    sys.exit("no output from cella shell: %r" % buf[-500:])
if termios.tcgetattr(slave)[3] & termios.ICANON:
    sys.exit("cella shell did not put the terminal in raw mode")
p.send_signal(signal.SIGTERM)
rc = p.wait(timeout=30)
after = termios.tcgetattr(slave)
if after != before:
    sys.exit("terminal mode not restored: %r != %r" % (after, before))
sys.exit(0 if rc == 143 else "exit status %d, not 143" % rc)
PY
rc=$?
set -e
assert_eq 0 "$rc" "cella shell under SIGTERM"

info "cella shell with stdin not a terminal"
set +e
printf 'echo piped-$((2*21))\nexit 5\n' | "$CELLA_BUILD/cella" shell "$S" >"$OUT" 2>&1
rc=$?
set -e
assert_eq 5 "$rc" "cella shell (pipe) exit status"
assert_contains "$(cat "$OUT")" "piped-42"

info "with CELLA_TOKEN: no token is 401 before the upgrade, the token opens the terminal"
stop_cellad
token=tok-$IT_RUN-$RANDOM$RANDOM
CELLA_TOKEN=$token start_cellad
unset CELLA_TOKEN
pc "$S" open-error:UNAUTHORIZED
pc --token "wrong-$token" "$S" open-error:UNAUTHORIZED
pc --token "$token" "$S" ready 'send:echo token-$((3*4))\r' 'expect:token-12'
export CELLA_TOKEN=$token # for the cleanup's API calls

echo "PASS"
