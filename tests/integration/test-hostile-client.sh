#!/bin/bash
# A hostile client against cellad's HTTP server: 10,000 headers, 1 MiB of header, invalid
# chunked bodies, JSON nested 100,000 deep, and a 10 GiB upload past the sandbox's disk
# limit. Each gets its clear answer (431, 400, 507), loses nothing (the old file stays,
# the registry and other sandboxes are untouched), and cellad keeps answering with its
# memory bounded. (Slowloris with 5,000 connections, malformed WebSocket frames, body
# limits and token guessing are in test-http.sh; docs/reliability.md lists them all.)
. "$(dirname "$0")/lib.sh"
start_cellad --pool 0 --disk-quota required --disk-limit-override 64M

S=$(sbx upload)
run_in "$S" 'echo precious > /workspace/keep.txt; echo old > /workspace/big.bin' >/dev/null
HOSTPORT=${CELLA_URL#http://}

cat >"$IT_TMP/client.py" <<'EOF'
import json, os, select, socket, sys, time

host, port = sys.argv[1].rsplit(":", 1)
port = int(port)
sandbox = sys.argv[2]
token = os.environ.get("CELLA_TOKEN")
auth = ("Authorization: Bearer %s\r\n" % token).encode() if token else b""


def conn():
    s = socket.create_connection((host, port), timeout=60)
    return s


def answer(s, limit=60):
    """Status line and body of one answer (reads until the body is complete or EOF)."""
    s.settimeout(limit)
    data = b""
    while b"\r\n\r\n" not in data:
        b = s.recv(65536)
        if not b:
            break
        data += b
    head, _, rest = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/1.1 ") else 0
    clen = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            clen = int(v)
    while len(rest) < clen:
        b = s.recv(65536)
        if not b:
            break
        rest += b
    return status, rest[:clen]


def code(body):
    try:
        return json.loads(body).get("code")
    except ValueError:
        return None


def check(name, got, want):
    print("%s: %s" % (name, got), flush=True)
    if got != want:
        print("FAIL: %s: expected %s" % (name, want), flush=True)
        sys.exit(1)


def health():
    s = conn()
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    st, _ = answer(s)
    s.close()
    return st


# 10,000 headers and 1 MiB of one header: 431, before any body is read.
for name, extra in (("10000 headers", b"".join(b"X-H%d: v\r\n" % i for i in range(10000))),
                    ("1 MiB header", b"X-Big: " + b"a" * (1 << 20) + b"\r\n")):
    s = conn()
    try:
        s.sendall(b"GET /v1/sandboxes HTTP/1.1\r\nHost: localhost\r\n" + auth + extra + b"\r\n")
    except (BrokenPipeError, ConnectionResetError):
        pass  # the server answered and closed while the head was still being sent
    st, body = answer(s)
    s.close()
    check(name, (st, code(body)), (431, "HEADERS_TOO_LARGE"))
    check("health after " + name, health(), 200)

# Invalid chunked bodies: 400, the connection closed, nothing run.
bad_chunks = {
    "chunk size not hex": b"zz\r\nabc\r\n0\r\n\r\n",
    "chunk size overflow": b"fffffffffffffffffffff\r\n" + b"a" * 16 + b"\r\n0\r\n\r\n",
    "chunk data longer than its size": b"3\r\nabcdef\r\n0\r\n\r\n",
    "bare LF after the size": b"3\nabc\r\n0\r\n\r\n",
    "no CRLF after the data": b"3\r\nabcXY5\r\nhello\r\n0\r\n\r\n",
    "negative size": b"-1\r\nabc\r\n0\r\n\r\n",
}
for name, chunks in bad_chunks.items():
    s = conn()
    s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: localhost\r\n" % sandbox.encode()
              + auth + b"Content-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n"
              + chunks)
    st, body = answer(s)
    s.close()
    check(name, st, 400)
check("health after bad chunking", health(), 200)

# JSON nested 100,000 deep, as an exec body: 400, no stack exhaustion.
for name, doc in (("100000-deep arrays", b"[" * 100000 + b"]" * 100000),
                  ("100000-deep objects", b'{"a":' * 100000 + b"1" + b"}" * 100000),
                  ("100000-deep command", b'{"command":' + b"[" * 100000 + b"]" * 100000 + b"}")):
    s = conn()
    s.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: localhost\r\n" % sandbox.encode()
              + auth + b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n" % len(doc)
              + doc)
    st, body = answer(s)
    s.close()
    check(name, (st, code(body)), (400, "VALIDATION_FAILED"))
check("health after deep JSON", health(), 200)

# A 10 GiB upload past the 64 MiB disk: 507 NO_SPACE once the disk is full; the server
# stops taking the body (the client sends far less than 10 GiB), the old file stays.
total = 10 << 30
s = conn()
s.sendall(b"PUT /v1/sandboxes/%s/files?path=big.bin HTTP/1.1\r\nHost: localhost\r\n" % sandbox.encode()
          + auth + b"Content-Type: application/octet-stream\r\nContent-Length: %d\r\n\r\n" % total)
block = b"\xa5" * (1 << 20)
sent = 0
s.setblocking(False)
t0 = time.time()
# Send until the server answers (as curl does: an early answer ends the upload), the
# connection breaks, or nothing moves for 60 s.
try:
    while sent < total:
        r, w, _ = select.select([s], [s], [], 60)
        if r or not w:
            break
        sent += s.send(block)
except (BrokenPipeError, ConnectionResetError, BlockingIOError):
    pass
s.setblocking(True)
st, body = answer(s)
s.close()
print("10 GiB upload: %d MiB sent in %.1f s before the answer" % (sent >> 20, time.time() - t0),
      flush=True)
check("10 GiB upload", (st, code(body)), (507, "NO_SPACE"))
if sent >= total:
    print("FAIL: the whole 10 GiB was taken", flush=True)
    sys.exit(1)
check("health after the upload", health(), 200)
print("client: ok", flush=True)
EOF

base_kb=$(awk '/^VmRSS/ {print $2}' "/proc/$CELLAD_PID/status")
python3 "$IT_TMP/client.py" "$HOSTPORT" "$S" || fail "hostile client"
hwm_kb=$(awk '/^VmHWM/ {print $2}' "/proc/$CELLAD_PID/status")
info "cellad VmRSS at start $base_kb kB, VmHWM after $hwm_kb kB"
[ $((hwm_kb - base_kb)) -lt $((64 * 1024)) ] || fail "cellad grew by $((hwm_kb - base_kb)) kB"

info "nothing lost"
assert_eq precious "$(run_in "$S" 'cat /workspace/keep.txt')" "another file"
assert_eq old "$(run_in "$S" 'cat /workspace/big.bin')" "the upload's target keeps its old content"
assert_eq "" "$(run_in "$S" 'ls -a /workspace | grep -v "^\.\.\?$" | grep -v "^keep.txt$" | grep -v "^big.bin$"; true')" "leftovers of the upload"
run_in "$S" 'echo more > /workspace/after.txt' >/dev/null
assert_eq more "$(run_in "$S" 'cat /workspace/after.txt')" "the disk has room again"
api GET "/v1/sandboxes/$S" >/dev/null
expect_status 200
info "hostile-client: ok"
