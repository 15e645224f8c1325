"""The sync transport: a small thread-safe pool of keep-alive ``http.client`` connections."""

from __future__ import annotations

import http.client
import os
import socket
import ssl
import stat
import threading
import time
from typing import IO, Any, Dict, Iterable, List, Optional, Tuple, cast
from urllib.parse import urlsplit

from . import errors
from ._core import Body, Request, Response

IDLE_MAX = 60.0
"""Seconds a pooled connection may stay idle before it is dropped (cellad closes idle
keep-alive connections after 120 s)."""
CHUNK = 1 << 20
"""Bytes per read/write of a streamed body."""


def _transport_error(e: BaseException, what: str) -> errors.SandboxError:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return errors.ClientTimeoutError(f"{what}: timed out", http_status=0)
    return errors.TransportError(f"{what}: {type(e).__name__}: {e}", http_status=0)


class SyncBody:
    """The open body of a streamed answer. Reads raise :class:`StreamClosedError` when the
    connection breaks before the answer's end."""

    def __init__(self, pool: "Pool", conn: http.client.HTTPConnection,
                 resp: http.client.HTTPResponse) -> None:
        self._pool = pool
        self._conn: Optional[http.client.HTTPConnection] = conn
        self._resp = resp

    @property
    def length(self) -> Optional[int]:
        """Bytes of a Content-Length answer not read yet (None: chunked)."""
        return self._resp.length

    def _cut(self, n: int, data_len: int) -> None:
        if n > 0 and data_len == 0 and (self._resp.length or 0) > 0:
            self.close()
            raise errors.StreamClosedError(
                f"answer cut {self._resp.length} bytes before its end", http_status=0)

    def read1(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes as soon as some arrive; b"" at the answer's end."""
        try:
            data = self._resp.read1(n)
            self._cut(n, len(data))
            return data
        except errors.SandboxError:
            raise
        except (http.client.IncompleteRead, OSError, http.client.HTTPException) as e:
            self.close()
            if isinstance(e, (socket.timeout, TimeoutError)):
                raise errors.ClientTimeoutError("stream: no data within the timeout",
                                                http_status=0) from e
            raise errors.StreamClosedError(f"stream cut: {type(e).__name__}: {e}",
                                           http_status=0) from e

    def readinto(self, buf: memoryview) -> int:
        """Fill ``buf`` as far as the answer goes; 0 at its end."""
        try:
            got = self._resp.readinto(buf)
            self._cut(len(buf), got)
            return got
        except errors.SandboxError:
            raise
        except (http.client.IncompleteRead, OSError, http.client.HTTPException) as e:
            self.close()
            raise errors.StreamClosedError(f"download cut: {type(e).__name__}: {e}",
                                           http_status=0) from e

    def close(self) -> None:
        """Release the connection: back to the pool when the answer was read to its end."""
        conn, self._conn = self._conn, None
        if conn is None:
            return
        if self._resp.isclosed() and not self._resp.will_close:
            self._pool.put(conn)
        else:
            conn.close()


class Pool:
    """Keep-alive connections to one daemon; ``send`` is thread-safe."""

    def __init__(self, url: str, timeout: Optional[float], size: int = 8,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise errors.ValidationFailedError(f"url must be http:// or https://, not {url!r}",
                                               http_status=0)
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout
        self.size = size
        self.ssl_context = ssl_context or (ssl.create_default_context() if self.https else None)
        self._idle: List[Tuple[http.client.HTTPConnection, float]] = []
        self._lock = threading.Lock()

    def _new(self) -> http.client.HTTPConnection:
        if self.https:
            return http.client.HTTPSConnection(self.host, self.port, timeout=self.timeout,
                                               context=self.ssl_context, blocksize=CHUNK)
        return http.client.HTTPConnection(self.host, self.port, timeout=self.timeout,
                                          blocksize=CHUNK)

    def get(self) -> Tuple[http.client.HTTPConnection, bool]:
        """A connection, and whether it was used before."""
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, t = self._idle.pop()
                if now - t < IDLE_MAX:
                    return conn, True
                conn.close()
        return self._new(), False

    def put(self, conn: http.client.HTTPConnection) -> None:
        """Return a connection whose answer was read to its end."""
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append((conn, time.monotonic()))
                return
        conn.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def close(self) -> None:
        """Close every idle connection."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    def send(self, req: Request, headers: Dict[str, str]) -> Response:
        """Send ``req``; raise its error for a status >= 400."""
        body, h = req.payload()
        h.update(headers)
        replayable = body is None or isinstance(body, bytes) or _seekable(body)
        start = _tell(body)
        timeout = self.timeout if req.timeout is not None and req.timeout < 0 else req.timeout
        attempt = 0
        while True:
            attempt += 1
            conn, reused = self.get()
            try:
                if conn.sock is None:
                    conn.timeout = timeout
                    conn.connect()
                    cast(socket.socket, conn.sock).setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                else:
                    conn.sock.settimeout(timeout)
                _send(conn, req.method, self.prefix + req.target(), body, h)
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                refused = isinstance(e, ConnectionRefusedError)
                stale = reused and isinstance(e, (BrokenPipeError, ConnectionResetError))
                if stale:
                    self.close()  # the others idle as long are likely dead as well
                if (refused or stale) and replayable and attempt < 3:
                    _seek(body, start)
                    if refused:
                        time.sleep(0.05 * attempt)
                    continue
                raise _transport_error(e, f"{req.method} {req.path}") from e
            try:
                resp = conn.getresponse()
            except (OSError, http.client.HTTPException) as e:
                conn.close()
                if (reused and req.idempotent and replayable and attempt < 3
                        and isinstance(e, (http.client.RemoteDisconnected,
                                           ConnectionResetError, BrokenPipeError))):
                    self.close()
                    _seek(body, start)
                    continue
                raise _transport_error(e, f"{req.method} {req.path}") from e
            return self._answer(req, conn, resp)

    def _answer(self, req: Request, conn: http.client.HTTPConnection,
                resp: http.client.HTTPResponse) -> Response:
        status = resp.status
        hdrs = {k.lower(): v for k, v in resp.getheaders()}
        if req.stream and status < 400:
            return Response(status, hdrs, stream=SyncBody(self, conn, resp))
        try:
            data = resp.read()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise _transport_error(e, f"{req.method} {req.path}: reading the answer") from e
        if resp.will_close:
            conn.close()
        else:
            self.put(conn)
        if status >= 400:
            raise errors.error_from_answer(status, data)
        return Response(status, hdrs, body=data)


def _seekable(body: Any) -> bool:
    try:
        return bool(body.seekable())
    except (AttributeError, OSError, ValueError):
        return False


def _tell(body: Any) -> int:
    try:
        return int(body.tell()) if _seekable(body) else 0
    except (OSError, ValueError):
        return 0


def _seek(body: Any, pos: int) -> None:
    if _seekable(body):
        body.seek(pos)


def _file_size(body: Any) -> Optional[int]:
    """Bytes left in a regular file object, or None."""
    try:
        st = os.fstat(body.fileno())
    except (AttributeError, OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return max(0, st.st_size - int(body.tell()))


def _send(conn: http.client.HTTPConnection, method: str, target: str, body: Body,
          headers: Dict[str, str]) -> None:
    if body is None or isinstance(body, bytes):
        conn.request(method, target, body=body, headers=headers)
        return
    size = _file_size(body)
    conn.putrequest(method, target, skip_accept_encoding=True)
    for k, v in headers.items():
        conn.putheader(k, v)
    if size is not None:
        conn.putheader("Content-Length", str(size))
        conn.endheaders()
        f = cast(IO[bytes], body)
        sock = conn.sock
        if not isinstance(sock, ssl.SSLSocket):
            # os.sendfile: the file's pages go to the socket without a copy in Python.
            sock.sendfile(f, int(f.tell()), size)
            return
        while size > 0:
            chunk = f.read(min(CHUNK, size))
            if not chunk:
                break
            sock.sendall(chunk)
            size -= len(chunk)
        return
    conn.putheader("Transfer-Encoding", "chunked")
    conn.endheaders()
    it: Iterable[bytes]
    if hasattr(body, "read"):
        f2 = cast(IO[bytes], body)
        it = iter(lambda: f2.read(CHUNK), b"")
    else:
        it = body
    for chunk in it:
        if chunk:
            conn.sock.sendall(b"%x\r\n" % len(chunk) + bytes(chunk) + b"\r\n")
    conn.sock.sendall(b"0\r\n\r\n")
