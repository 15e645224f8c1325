"""Many buffered execs at once against one cellad, and what it costs the daemon.

usage: exec-flood.py URL CELLAD_PID N COMMAND SANDBOX... -- ECHO_SANDBOX

N clients POST COMMAND (buffered, no SSE) at once, spread over the SANDBOXes, and read
their answers; one more client sends the same request and never reads its answer. While
they run, cellad's VmRSS is sampled every 50 ms and ECHO_SANDBOX runs `echo ok` now and
then. Prints one JSON object: statuses, codes, truncated count, output bytes decoded,
peak RSS sampled, VmHWM, the echo round trips (ms)."""
import http.client
import json
import socket
import sys
import threading
import time
import urllib.parse

url, pid, n, command = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rest = sys.argv[5:]
sep = rest.index("--")
sandboxes, echo_sb = rest[:sep], rest[sep + 1]
u = urllib.parse.urlparse(url)
body = json.dumps({"command": command}).encode()
results = []
lock = threading.Lock()
done = threading.Event()


def status_kb(field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    return 0


def one(i):
    sb = sandboxes[i % len(sandboxes)]
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=300)
    try:
        c.request("POST", f"/v1/sandboxes/{sb}/exec", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        data = r.read()
        j = json.loads(data)
        out = {"status": r.status, "code": j.get("code")}
        if r.status == 200:
            out["truncated"] = bool(j.get("truncated"))
            out["bytes"] = len(j["stdout"]) + len(j["stderr"])
            out["encoding"] = j.get("stdoutEncoding", "utf-8")
        with lock:
            results.append(out)
    except Exception as e:  # noqa: BLE001: reported, and the test fails on it
        with lock:
            results.append({"status": 0, "error": repr(e)})
    finally:
        c.close()


def sampler(peak):
    while not done.is_set():
        peak[0] = max(peak[0], status_kb("VmRSS"))
        time.sleep(0.05)


def echoes(times):
    while not done.is_set():
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
        t = time.monotonic()
        c.request("POST", f"/v1/sandboxes/{echo_sb}/exec", json.dumps({"command": "echo ok"}),
                  {"Content-Type": "application/json"})
        r = c.getresponse()
        j = json.loads(r.read())
        c.close()
        times.append({"ms": round((time.monotonic() - t) * 1000), "ok": r.status == 200 and j.get("stdout") == "ok\n"})
        time.sleep(0.5)


# a client that sends the request and never reads the answer
idle = socket.create_connection((u.hostname, u.port))
idle.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
idle.sendall(b"POST /v1/sandboxes/%s/exec HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
             b"Content-Length: %d\r\n\r\n%s" % (sandboxes[0].encode(), len(body), body))

peak = [0]
times = []
start_rss = status_kb("VmRSS")
aux = [threading.Thread(target=sampler, args=(peak,)), threading.Thread(target=echoes, args=(times,))]
for t in aux:
    t.start()
workers = [threading.Thread(target=one, args=(i,)) for i in range(n)]
t0 = time.monotonic()
for t in workers:
    t.start()
for t in workers:
    t.join()
elapsed = time.monotonic() - t0
time.sleep(1)
after_rss = status_kb("VmRSS")
done.set()
for t in aux:
    t.join()
idle.close()
print(json.dumps({
    "statuses": sorted(r["status"] for r in results),
    "codes": sorted({r.get("code") or "" for r in results}),
    "errors": [r["error"] for r in results if "error" in r][:3],
    "truncated": sum(1 for r in results if r.get("truncated")),
    "bytes": sum(r.get("bytes", 0) for r in results),
    "start_rss_kb": start_rss,
    "peak_rss_kb": peak[0],
    "after_rss_kb": after_rss,
    "hwm_kb": status_kb("VmHWM"),
    "seconds": round(elapsed, 1),
    "echo": times,
}))
