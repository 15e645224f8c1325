"""Hostile HTTP clients against one cellad (test-http.sh).

usage: hostile.py MODE HOST PORT [ARGS...]
  latency SECONDS          GET /v1/health every 2 s (best of 3 tries per round) for
                           SECONDS; prints {"rounds": [best ms...], "failures": N}
  bodies PID N PATH        N connections each send most of a 1.9 MiB JSON body to PATH and
                           stop; one more sends a head a byte every 2 s. Prints the statuses
                           and codes they got back (within 90 s) and cellad's RSS (kB).
  raw                      malformed heads, one per connection: prints [status line...]
  ws PATH                  WebSocket frames that break RFC 6455, one per connection to the
                           WebSocket route PATH: prints [close code cellad sent...]
"""
import json
import socket
import sys
import threading
import time

mode, host, port = sys.argv[1], sys.argv[2], int(sys.argv[3])


def status_kb(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def read_answer(s, limit=90):
    """The status and error code of the answer on s (0, None when none came)."""
    s.settimeout(limit)
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (socket.timeout, ConnectionResetError):
        pass
    if not data.startswith(b"HTTP/1.1 "):
        return 0, None, data[:60].decode("latin-1")
    status = int(data[9:12])
    body = data.split(b"\r\n\r\n", 1)[1] if b"\r\n\r\n" in data else b""
    try:
        code = json.loads(body).get("code")
    except ValueError:
        code = None
    return status, code, data.split(b"\r\n", 1)[0].decode("latin-1")


def health_ms():
    t = time.monotonic()
    s = socket.create_connection((host, port), timeout=10)
    s.sendall(b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    status, _, _ = read_answer(s, 10)
    s.close()
    return (time.monotonic() - t) * 1000 if status == 200 else None


if mode == "latency":
    end = time.monotonic() + float(sys.argv[4])
    rounds, failures = [], 0
    while time.monotonic() < end:
        tries = [health_ms() for _ in range(3)]
        failures += sum(1 for t in tries if t is None)
        ok = [t for t in tries if t is not None]
        if ok:
            rounds.append(round(min(ok), 1))
        time.sleep(2)
    print(json.dumps({"rounds": rounds, "failures": failures}))

elif mode == "bodies":
    pid, n, path = int(sys.argv[4]), int(sys.argv[5]), sys.argv[6]
    total = 1900 * 1024
    sent = 1500 * 1024
    chunk = b'{"command":"' + b"x" * (sent - 12)
    results = []
    lock = threading.Lock()
    start_rss = status_kb(pid, "VmRSS")
    peak = [start_rss]

    def one():
        s = socket.create_connection((host, port), timeout=30)
        s.sendall(b"POST %s HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\n\r\n" % (path.encode(), total))
        try:
            s.sendall(chunk)
        except OSError:
            pass  # answered (503) and closed while sending
        r = read_answer(s)
        s.close()
        with lock:
            results.append(r)

    def slow_head():
        s = socket.create_connection((host, port), timeout=30)
        t = time.monotonic()
        head = b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-Slow: " + b"x" * 100
        try:
            for b in head:
                s.sendall(bytes([b]))
                time.sleep(2)
        except OSError:
            pass
        r = read_answer(s)
        s.close()
        with lock:
            results.append(r + ("head %.0f s" % (time.monotonic() - t),))

    threads = [threading.Thread(target=one) for _ in range(n)] + [threading.Thread(target=slow_head)]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        peak[0] = max(peak[0], status_kb(pid, "VmRSS"))
        time.sleep(0.1)
    print(json.dumps({
        "statuses": sorted(r[0] for r in results),
        "codes": sorted({r[1] or "" for r in results}),
        "slow": [r for r in results if len(r) > 3],
        "start_rss_kb": start_rss,
        "peak_rss_kb": peak[0],
        "after_rss_kb": status_kb(pid, "VmRSS"),
    }))

elif mode == "raw":
    bad = [
        b"GET /v1/health HTTP/1.1\nHost: localhost\n\n",                          # bare LF
        b"GET /v1/health HTTP/1.1\r\nHost: localhost\r\nX-A: 1\r\n folded\r\n\r\n",  # obs-fold
        b"GET /v1/health HTTP/1.1\r\nHost : localhost\r\n\r\n",                   # space before colon
        b"POST /v1/health HTTP/1.1\r\nHost: localhost\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx",
        b"POST /v1/health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: gzip\r\n\r\n",
        b"POST /v1/health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        b"POST /v1/health HTTP/1.1\r\nHost: localhost\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n0\r\n\r\n",
        b"GET /v1/health HTTP/1.1\r\nHost: localhost\rX: y\r\n\r\n",                # bare CR
    ]
    out = []
    for req in bad:
        s = socket.create_connection((host, port), timeout=10)
        s.sendall(req)
        out.append(read_answer(s, 10)[2])
        s.close()
    print(json.dumps(out))

elif mode == "ws":
    import base64
    import os
    import struct

    path = sys.argv[4]
    mask = b"\x01\x02\x03\x04"

    def masked(payload):
        return bytes(b ^ mask[i % 4] for i, b in enumerate(payload))

    bad = [
        b"\x81\x02hi",                                          # unmasked text
        b"\x81\xfe\x00\x02" + mask + masked(b"hi"),              # 16-bit length for 2 bytes
        b"\x81\xff" + struct.pack(">Q", 2) + mask + masked(b"hi"),  # 64-bit length for 2
        b"\xc1\x82" + mask + masked(b"hi"),                      # RSV1 without an extension
        b"\x83\x82" + mask + masked(b"hi"),                      # reserved opcode 3
        b"\x89\xfe\x00\x7e" + mask + masked(b"p" * 126),         # ping of 126 bytes
        b"\x09\x82" + mask + masked(b"hi"),                      # fragmented ping
    ]
    out = []
    for frame in bad:
        s = socket.create_connection((host, port), timeout=20)
        key = base64.b64encode(os.urandom(16))
        s.sendall(b"GET %s HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\n"
                  b"Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  b"Sec-WebSocket-Key: %s\r\n\r\n" % (path.encode(), key))
        data = b""
        while b"\r\n\r\n" not in data:
            b = s.recv(4096)
            if not b:
                break
            data += b
        if not data.startswith(b"HTTP/1.1 101"):
            out.append("no upgrade: " + data[:40].decode("latin-1"))
            s.close()
            continue
        data = data.split(b"\r\n\r\n", 1)[1]
        s.sendall(frame)
        code = None
        try:
            while code is None:
                # frames from the server (unmasked): look for the close frame
                while len(data) >= 2:
                    op, ln = data[0] & 0x0F, data[1] & 0x7F
                    hl = 2
                    if ln == 126:
                        if len(data) < 4:
                            break
                        ln, hl = struct.unpack(">H", data[2:4])[0], 4
                    elif ln == 127:
                        if len(data) < 10:
                            break
                        ln, hl = struct.unpack(">Q", data[2:10])[0], 10
                    if len(data) < hl + ln:
                        break
                    if op == 8:
                        code = struct.unpack(">H", data[hl:hl + 2])[0] if ln >= 2 else 1005
                        break
                    data = data[hl + ln:]
                if code is not None:
                    break
                b = s.recv(65536)
                if not b:
                    code = "closed"
                    break
                data += b
        except socket.timeout:
            code = "timeout"
        out.append(code)
        s.close()
    print(json.dumps(out))
