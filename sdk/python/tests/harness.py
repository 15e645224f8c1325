"""Harness of the SDK's unittest suites: the daemon they talk to and the way to restart it.

tests/integration/test-sdk-python.sh starts a real cellad (auth on, a fixed loopback port)
and runs the suites with CELLA_URL, CELLA_TOKEN, CELLA_TEST_PREFIX (the run's sandbox name
prefix: name sandboxes with sandbox_name() so the run's leak checks find them), CELLA_CTL
(a directory with the FIFOs req and ack: restart_daemon() writes a line to req, the script
restarts cellad on the same data dir and port and answers `ok` on ack) and CELLA_BUILD.
Without CELLA_URL the daemon tests skip.
"""

from __future__ import annotations

import json
import os
import re
import select
import time
import unittest
import urllib.error
import urllib.request
from typing import Any, Optional, Tuple

import cella

URL = os.environ.get("CELLA_URL", "").rstrip("/")
TOKEN = os.environ.get("CELLA_TOKEN", "")
PREFIX = os.environ.get("CELLA_TEST_PREFIX", f"sdkpy-{os.getpid()}-").lower()
CTL = os.environ.get("CELLA_CTL", "")

needs_daemon = unittest.skipUnless(URL, "CELLA_URL is not set (run tests/integration/test-sdk-python.sh)")
needs_restart = unittest.skipUnless(URL and CTL, "CELLA_CTL is not set")


def sandbox_name(suffix: str) -> str:
    """A sandbox name of this run: PREFIX + suffix, cut to 63 valid characters."""
    clean = re.sub(r"[^a-z0-9-]", "-", suffix.lower())
    return (PREFIX + clean)[:63].rstrip("-")


def client(**kw: Any) -> cella.Client:
    """A client of the test daemon with its token."""
    return cella.connect(url=URL, token=TOKEN, **kw)


def api(method: str, path: str, body: Any = None, auth: bool = True) -> Tuple[int, Any]:
    """A raw request beneath the SDK: (status, parsed JSON or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(URL + path, data=data, method=method)
    if auth and TOKEN:
        req.add_header("Authorization", f"Bearer {TOKEN}")
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            raw = r.read()
            status = r.status
    except urllib.error.HTTPError as e:
        raw = e.read()
        status = e.code
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, None


def wait_healthy(timeout: float = 30.0) -> None:
    """Poll /v1/health until it answers ok."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            st, doc = api("GET", "/v1/health", auth=False)
            if st == 200 and doc and doc.get("status") == "ok":
                return
        except OSError:
            pass
        if time.monotonic() > deadline:
            raise AssertionError("daemon not healthy")
        time.sleep(0.1)


def restart_daemon(timeout: float = 60.0) -> None:
    """Have the test script SIGKILL cellad and start it again (same data dir and port)."""
    ack = os.open(os.path.join(CTL, "ack"), os.O_RDONLY | os.O_NONBLOCK)
    try:
        while True:  # drop a stale answer
            try:
                if not os.read(ack, 4096):
                    break
            except BlockingIOError:
                break
        req = os.open(os.path.join(CTL, "req"), os.O_WRONLY | os.O_NONBLOCK)
        try:
            os.write(req, b"kill9-restart\n")
        finally:
            os.close(req)
        data = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in data:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("restart_daemon: no answer")
            r, _, _ = select.select([ack], [], [], left)
            if r:
                try:
                    data += os.read(ack, 4096)
                except BlockingIOError:
                    pass
        line = data.split(b"\n", 1)[0].decode().strip()
        if line != "ok":
            raise AssertionError(f"restart_daemon: {line}")
    finally:
        os.close(ack)
    wait_healthy()


def destroy_quietly(sb: Optional[cella.Sandbox]) -> None:
    """Destroy a sandbox at a test's end, whatever happened."""
    if sb is None:
        return
    try:
        sb.destroy()
    except cella.SandboxError:
        pass
