"""The Python side of the SDK benchmark (bench/sdk-python.sh): the work of bench/sdk-client.c
through the Python SDK (sdk/python), in one long-lived process. Reads commands on stdin,
answers each with one line of key=value figures; never asserts on timing.

  warm N          exec('true') N times, unmeasured
  rt N            exec('true') N times: p50_us= p95_us=
  upload FILE     write_file(big.bin, the open FILE): bytes= seconds= mbps=
  download        read_file_to(big.bin, /dev/null): bytes= seconds= mbps=
usage: python3 bench/sdk-python.py URL SANDBOX
"""

import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "sdk", "python"))
import cella  # noqa: E402


def main() -> None:
    url, name = sys.argv[1], sys.argv[2]
    sb = cella.connect(url=url, timeout=600).sandbox(name)
    for line in sys.stdin:
        cmd, _, arg = line.strip().partition(" ")
        if cmd in ("warm", "rt"):
            n = int(arg)
            t = []
            for _ in range(n):
                t0 = time.perf_counter()
                r = sb.exec("true")
                t.append((time.perf_counter() - t0) * 1e6)
                if r.exit_code != 0:
                    sys.exit("exec true failed")
            t.sort()
            out = f"p50_us={t[n // 2]:.0f} p95_us={t[int(0.95 * (n - 1) + 0.5)]:.0f}"
        elif cmd == "upload":
            size = os.path.getsize(arg)
            with open(arg, "rb") as f:
                t0 = time.perf_counter()
                w = sb.write_file("big.bin", f)
                dt = time.perf_counter() - t0
            assert w.size == size, (w.size, size)
            out = f"bytes={size} seconds={dt:.3f} mbps={size / dt / 1e6:.0f}"
        elif cmd == "download":
            with open("/dev/null", "wb") as f:
                t0 = time.perf_counter()
                n = sb.read_file_to("big.bin", f)
                dt = time.perf_counter() - t0
            out = f"bytes={n} seconds={dt:.3f} mbps={n / dt / 1e6:.0f}"
        else:
            sys.exit(f"unknown command {line!r}")
        print(out, flush=True)


if __name__ == "__main__":
    main()
