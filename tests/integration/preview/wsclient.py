#!/usr/bin/env python3
"""Minimal WebSocket client for test-preview.sh: connect to HOST:PORT with the given Host
header and path (and optional bearer token), send each message, print each echo.

wsclient.py [-H "Name: value"]... [--seen] ADDR HOST PATH [MESSAGE...]: -H adds a request
header; --seen prints "seen JSON", the upgrade request's headers as the server saw them (its
X-Seen answer header)."""
import base64, os, socket, struct, sys


def recv_exact(s, n):
    out = b""
    while len(out) < n:
        d = s.recv(n - len(out))
        if not d:
            raise EOFError("connection closed")
        out += d
    return out


def main():
    args, extra, seen = sys.argv[1:], "", False
    while args and args[0] in ("-H", "--seen"):
        if args[0] == "--seen":
            seen = True
            args = args[1:]
        else:
            extra += args[1] + "\r\n"
            args = args[2:]
    addr, host, path = args[0], args[1], args[2]
    msgs = args[3:]
    h, p = addr.rsplit(":", 1)
    s = socket.create_connection((h, int(p)), timeout=20)
    key = base64.b64encode(os.urandom(16)).decode()
    auth = ""
    if os.environ.get("CELLA_TOKEN"):
        auth = "Authorization: Bearer %s\r\n" % os.environ["CELLA_TOKEN"]
    req = ("GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n%s%s\r\n") % (
               path, host, key, auth, extra)
    s.sendall(req.encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            raise EOFError("closed during handshake: %r" % head)
        head += d
    status = head.split(b"\r\n")[0].decode()
    print(status)
    if " 101 " not in status:
        return 1
    for line in head.decode().split("\r\n"):
        if line.lower().startswith("x-path:"):
            print("path " + line.split(":", 1)[1].strip())
        if seen and line.lower().startswith("x-seen:"):
            print("seen " + line.split(":", 1)[1].strip())
    for m in msgs:
        data = m.encode() if m != "@big" else b"x" * 200000
        mask = os.urandom(4)
        n = len(data)
        if n < 126:
            hdr = struct.pack("!BB", 0x81, 0x80 | n)
        elif n < 65536:
            hdr = struct.pack("!BBH", 0x81, 0x80 | 126, n)
        else:
            hdr = struct.pack("!BBQ", 0x81, 0x80 | 127, n)
        s.sendall(hdr + mask + bytes(b ^ mask[i & 3] for i, b in enumerate(data)))
        b0, b1 = recv_exact(s, 2)
        ln = b1 & 0x7F
        if ln == 126:
            ln = struct.unpack("!H", recv_exact(s, 2))[0]
        elif ln == 127:
            ln = struct.unpack("!Q", recv_exact(s, 8))[0]
        payload = recv_exact(s, ln)
        print("echo " + (payload.decode() if m != "@big" else "big %d" % len(payload)))
    s.sendall(struct.pack("!BB", 0x88, 0x80) + os.urandom(4))
    s.close()
    return 0


sys.exit(main())
