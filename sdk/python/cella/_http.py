"""The sync transport: HTTP/1.1 over sockets with a small thread-safe pool of keep-alive
connections.

It is written on ``socket`` rather than ``http.client`` for speed: a request goes out in
one ``sendall`` (head and JSON body together), the answer's head is parsed without the
``email`` package, files go up and down in 1 MiB pieces (downloads straight from the
socket). It speaks what cellad answers: ``Content-Length`` or
chunked bodies, keep-alive, ``Connection: close``.
"""

from __future__ import annotations

import io
import os
import socket
import ssl
import stat
import struct
import threading
import time
from typing import IO, Any, Dict, Iterable, List, Optional, Tuple, Union, cast

from . import errors
from ._core import Body, Request, Response
from ._wire import TRAILER_LINE_MAX, BodyBase, PoolBase, Trailers, framing, is_final, parse_head

IDLE_MAX = 60.0
"""Seconds a pooled connection may stay idle before it is dropped (cellad closes idle
keep-alive connections after 120 s)."""
CHUNK = 1 << 20
"""Bytes per read/write of a streamed body."""
HEAD_MAX = 64 * 1024
"""The longest answer head accepted."""


def chunk_size(line: bytes) -> int:
    """The size of a chunk from its size line (hex digits, then extensions after ``;``)."""
    digits = line.split(b";", 1)[0].strip()
    if not digits or len(digits) > 16 or digits.strip(b"0123456789abcdefABCDEF"):
        raise ValueError(f"bad chunk size line {line[:40]!r}")
    return int(digits, 16)


class _NoAnswer(ConnectionError):
    """The connection closed before a status line arrived."""


def _transport_error(e: BaseException, what: str) -> errors.SandboxError:
    if isinstance(e, (socket.timeout, TimeoutError)):
        return errors.ClientTimeoutError(f"{what}: timed out", http_status=0)
    return errors.TransportError(f"{what}: {type(e).__name__}: {e}", http_status=0)


class _Conn:
    """One connection: its socket and a buffered reader on it."""

    def __init__(self, sock: Union[socket.socket, ssl.SSLSocket]) -> None:
        self.sock = sock
        self.rfile: io.BufferedReader = cast(io.BufferedReader,
                                             sock.makefile("rb", buffering=65536))
        self.direct = False
        """Whether the socket is blocking with kernel timeouts (see _direct)."""

    def close(self) -> None:
        try:
            self.rfile.close()
        except OSError:
            pass
        try:
            self.sock.close()
        except OSError:
            pass


def _timeval(timeout: Optional[float]) -> bytes:
    t = timeout or 0.0
    return struct.pack("@ll", int(t), int((t - int(t)) * 1e6))


def _direct(conn: _Conn, timeout: Optional[float]) -> None:
    """Make the socket blocking with SO_RCVTIMEO/SO_SNDTIMEO for a download read with
    ``recv_into``: a socket with a Python timeout polls before every read, which costs a
    large download half its rate. A kernel timeout raises BlockingIOError."""
    if isinstance(conn.sock, ssl.SSLSocket):
        return
    conn.sock.settimeout(None)
    tv = _timeval(timeout)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    conn.direct = True


def _undirect(conn: _Conn) -> None:
    """Back to Python timeouts (the kernel's off) before the connection is reused."""
    tv = _timeval(0)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, tv)
    conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, tv)
    conn.direct = False


class SyncBody(BodyBase["_Conn"]):
    """The body of an answer, read as it arrives. Reads raise
    :class:`cella.StreamClosedError` when the connection breaks before the answer's end and
    :class:`cella.ClientTimeoutError` when nothing arrives within the timeout."""

    def __init__(self, pool: "Pool", conn: _Conn, length: Optional[int], chunked: bool,
                 will_close: bool, timeout: Optional[float] = None) -> None:
        self._pool = pool
        self._timeout = timeout
        self._buffered: Optional[int] = None
        self._conn: Optional[_Conn] = conn
        self._left = length
        self._chunked = chunked
        self._chunk_left = 0
        self._will_close = will_close
        self._eof = length == 0 and not chunked
        self.trailers: Optional[Trailers] = None
        """The trailer fields of a chunked answer, once its end was read."""
        if self._eof:
            self._done()

    @property
    def length(self) -> Optional[int]:
        """Bytes of a Content-Length answer not read yet (None: chunked or until close)."""
        return None if self._chunked else self._left

    def read1(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes as soon as some arrive; b"" at the answer's end."""
        if self._eof or self._conn is None:
            return b""
        try:
            return self._read(n)
        except (socket.timeout, TimeoutError) as e:
            self.close()
            raise errors.ClientTimeoutError("stream: no data within the timeout",
                                            http_status=0) from e
        except (OSError, ValueError) as e:
            self.close()
            raise errors.StreamClosedError(f"stream cut: {type(e).__name__}: {e}",
                                           http_status=0) from e

    def _read(self, n: int) -> bytes:
        assert self._conn is not None
        r = self._conn.rfile
        if self._chunked:
            if self._chunk_left == 0:
                line = r.readline(1024)
                if not line.endswith(b"\n"):
                    raise ConnectionError("connection closed inside a chunked answer")
                size = chunk_size(line)
                if size == 0:
                    trailers = Trailers()
                    while True:
                        t = r.readline(TRAILER_LINE_MAX + 3)
                        if not t.endswith(b"\n") and len(t) <= TRAILER_LINE_MAX + 2:
                            raise ConnectionError("connection closed in the trailer")
                        if trailers.line(t):
                            break
                    self.trailers = trailers
                    self._done()
                    return b""
                self._chunk_left = size
            data = r.read1(min(n, self._chunk_left))
            if not data:
                raise ConnectionError("connection closed inside a chunk")
            self._chunk_left -= len(data)
            if self._chunk_left == 0 and r.read(2) != b"\r\n":
                raise ValueError("chunk not followed by CRLF")
            return data
        if self._left is None:
            data = r.read1(n)
            if not data:
                self._will_close = True
                self._done()
            return data
        data = r.read1(min(n, self._left))
        if not data:
            raise ConnectionError(f"connection closed {self._left} bytes before the answer's end")
        self._left -= len(data)
        if self._left == 0:
            self._done()
        return data

    def readinto(self, buf: memoryview) -> int:
        """Fill ``buf`` as far as the answer goes (at least one byte); 0 at its end."""
        if self._eof or self._conn is None:
            return 0
        if self._chunked or self._left is None:
            data = self.read1(len(buf))
            buf[:len(data)] = data
            return len(data)
        want = min(len(buf), self._left)
        conn = self._conn
        try:
            if self._buffered is None:
                # What the reader holds past the head is copied out first; then the socket
                # is read directly (see _direct).
                self._buffered = len(conn.rfile.peek(1))
            if self._buffered > 0:
                got = conn.rfile.readinto(buf[:min(want, self._buffered)])
                self._buffered -= got
            else:
                if not conn.direct:
                    _direct(conn, self._timeout)
                got = conn.sock.recv_into(buf[:want])
        except (socket.timeout, TimeoutError, BlockingIOError) as e:
            self.close()
            raise errors.ClientTimeoutError("download: no data within the timeout",
                                            http_status=0) from e
        except OSError as e:
            self.close()
            raise errors.StreamClosedError(f"download cut: {e}", http_status=0) from e
        if not got:
            left = self._left
            self.close()
            raise errors.StreamClosedError(f"download cut {left} bytes before its end",
                                           http_status=0)
        self._left -= got
        if self._left == 0:
            self._done()
        return got

    def read_all(self) -> bytes:
        """The whole (rest of the) body."""
        if self._left is not None and not self._chunked:
            if self._left == 0 or self._conn is None:
                return b""
            try:
                data = self._conn.rfile.read(self._left)
            except (socket.timeout, TimeoutError) as e:
                self.close()
                raise errors.ClientTimeoutError("answer: timed out", http_status=0) from e
            except OSError as e:
                self.close()
                raise errors.StreamClosedError(f"answer cut: {e}", http_status=0) from e
            if len(data) < self._left:
                self.close()
                raise errors.StreamClosedError("answer cut before its end", http_status=0)
            self._left = 0
            self._done()
            return data
        parts: List[bytes] = []
        while True:
            d = self.read1(CHUNK)
            if not d:
                return b"".join(parts)
            parts.append(d)



class Pool(PoolBase[_Conn]):
    """Keep-alive connections to one daemon; ``send`` is thread-safe."""

    def __init__(self, url: str, timeout: Optional[float], size: int = 8,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        super().__init__(url, timeout, size, ssl_context)
        self._lock = threading.Lock()

    def _new(self, timeout: Optional[float]) -> _Conn:
        sock = socket.create_connection((self.host, self.port), timeout=timeout)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if self.ssl_context is not None:
            sock = self.ssl_context.wrap_socket(sock, server_hostname=self.host)
        return _Conn(sock)

    def _get(self) -> Optional[_Conn]:
        now = time.monotonic()
        with self._lock:
            while self._idle:
                conn, t = self._idle.pop()
                if now - t < IDLE_MAX:
                    return conn
                conn.close()
        return None

    def put(self, conn: _Conn) -> None:
        """Return a connection whose answer was read to its end."""
        if conn.direct:
            try:
                _undirect(conn)
            except OSError:
                conn.close()
                return
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
        what = f"{req.method} {req.path}"
        attempt = 0
        while True:
            attempt += 1
            conn = self._get()
            reused = conn is not None
            try:
                if conn is None:
                    conn = self._new(timeout)
                else:
                    conn.sock.settimeout(timeout)
                self._write(conn, req, body, h)
            except OSError as e:
                if conn is not None:
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
                raise _transport_error(e, what) from e
            try:
                status, hdrs = _read_head(conn.rfile)
            except (OSError, ValueError) as e:
                conn.close()
                if (reused and req.idempotent and replayable and attempt < 3
                        and isinstance(e, (_NoAnswer, ConnectionResetError, BrokenPipeError))):
                    self.close()
                    _seek(body, start)
                    continue
                raise _transport_error(e, what) from e
            length, chunked, will_close = framing(req.method, status, hdrs)
            b = SyncBody(self, conn, length, chunked, will_close, timeout)
            if req.stream and status < 400:
                if conn.sock.gettimeout() != timeout:
                    conn.sock.settimeout(timeout)
                return Response(status, hdrs, stream=b)
            try:
                data = b.read_all()
            except errors.SandboxError as e:
                raise type(e)(f"{what}: {e.message}", http_status=0) from e
            if status >= 400:
                raise errors.error_from_answer(status, data)
            return Response(status, hdrs, body=data)

    def _write(self, conn: _Conn, req: Request, body: Body, h: Dict[str, str]) -> None:
        head = [f"{req.method} {self.prefix}{req.target()} HTTP/1.1\r\nHost: {self.hostport}\r\n"]
        for k, v in h.items():
            head.append(f"{k}: {v}\r\n")
        sock = conn.sock
        if body is None or isinstance(body, bytes):
            data = body or b""
            if data or req.method in ("POST", "PUT"):
                head.append(f"Content-Length: {len(data)}\r\n")
            head.append("\r\n")
            sock.sendall("".join(head).encode("latin-1") + data)
            return
        size = _file_size(body)
        if size is not None:
            f = cast(IO[bytes], body)
            head.append(f"Content-Length: {size}\r\n\r\n")
            sock.sendall("".join(head).encode("latin-1"))
            # 1 MiB reads and sends: on loopback as fast as sendfile(2) (which measured
            # no better), and the same code over TLS.
            buf = bytearray(CHUNK)
            view = memoryview(buf)
            left: int = size
            readinto = getattr(f, "readinto")
            while left > 0:
                n = int(readinto(view[:min(CHUNK, left)]) or 0)
                if not n:
                    raise OSError("the file shrank while it was sent")
                sock.sendall(view[:n])
                left -= n
            return
        head.append("Transfer-Encoding: chunked\r\n\r\n")
        sock.sendall("".join(head).encode("latin-1"))
        it: Iterable[bytes]
        if hasattr(body, "read"):
            f2 = cast(IO[bytes], body)
            it = iter(lambda: f2.read(CHUNK), b"")
        else:
            it = body
        for chunk in it:
            if chunk:
                sock.sendall(b"%x\r\n" % len(chunk))
                sock.sendall(chunk)
                sock.sendall(b"\r\n")
        sock.sendall(b"0\r\n\r\n")


def _read_head(r: io.BufferedReader) -> Tuple[int, Dict[str, str]]:
    """The status and the headers (lower-case names) of an answer; 1xx skipped."""
    while True:
        line = r.readline(HEAD_MAX)
        if not line:
            raise _NoAnswer("the connection closed before an answer")
        lines = [line]
        total = len(line)
        while True:
            line = r.readline(HEAD_MAX)
            total += len(line)
            if not line.endswith(b"\n") or total > HEAD_MAX:
                raise ConnectionError("answer head cut or too long")
            if line in (b"\r\n", b"\n"):
                break
            lines.append(line)
        status, hdrs = parse_head(b"".join(lines))
        if is_final(status):
            return status, hdrs


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
    except (AttributeError, OSError, ValueError, io.UnsupportedOperation):
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    return max(0, st.st_size - int(body.tell()))
