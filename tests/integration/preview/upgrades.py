#!/usr/bin/env python3
"""Hold N WebSocket upgrades at once through a preview URL, then try one more, then close
one and try again (test-preview.sh: the proxy's cap on upgrades held at once).

upgrades.py ADDR HOST N: prints JSON {"held": how many of the N got 101, "over": the status
line of the one beyond them, "over_body": its body, "after": the status line once one of
the N is closed: a relay whose client went away ends within the half-close deadline)}."""
import base64, json, os, resource, socket, sys, time


def upgrade(h, p, host):
    s = socket.create_connection((h, p), timeout=30)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(("GET /ws HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
               "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (host, key))
              .encode())
    data = b""
    while b"\r\n\r\n" not in data:
        d = s.recv(65536)
        if not d:
            break
        data += d
    return s, data


def wait_upgrade(h, p, host):
    """The status line of the first upgrade that gets 101 (closed at once), trying for 60 s;
    else the last one's."""
    line = ""
    for _ in range(600):
        s, data = upgrade(h, p, host)
        s.close()
        line = data.split(b"\r\n")[0].decode("latin-1")
        if line.startswith("HTTP/1.1 101"):
            break
        time.sleep(0.1)
    return line


def main():
    addr, host, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    h, p = addr.rsplit(":", 1)
    p = int(p)
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(want, hard), hard))
    held = []
    for _ in range(n):
        s, data = upgrade(h, p, host)
        if not data.startswith(b"HTTP/1.1 101"):
            s.close()
            break
        held.append(s)
    s, data = upgrade(h, p, host)
    head, _, body = data.partition(b"\r\n\r\n")
    if b"Content-Length:" in head:
        length = int(head.split(b"Content-Length:")[1].split(b"\r\n")[0])
        while len(body) < length:
            d = s.recv(65536)
            if not d:
                break
            body += d
    s.close()
    out = {"held": len(held), "over": head.split(b"\r\n")[0].decode("latin-1"),
           "over_body": body.decode("latin-1")}
    held.pop().close()
    # The app keeps its side open after the client's FIN: the relay ends after the
    # half-close deadline (10 s); wait for the place it held, 60 s at most.
    out["after"] = wait_upgrade(h, p, host)
    for s in held:
        s.close()
    # the same for every place, so that the next WebSockets of the test get in
    wait_upgrade(h, p, host)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
