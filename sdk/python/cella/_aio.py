"""The asyncio transport: a minimal HTTP/1.1 client over asyncio streams with a pool of
keep-alive connections (the request building and decoding are _core's)."""

from __future__ import annotations

import asyncio
import time
from typing import IO, Any, AsyncIterable, Dict, Iterable, List, Optional, Tuple, cast

from . import errors
from ._core import Request, Response
from ._http import chunk_size
from ._wire import BodyBase, PoolBase, Trailers, framing, is_final, parse_head

CHUNK = 1 << 20
HEAD_MAX = 64 * 1024
IDLE_MAX = 60.0


class _Conn:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    def close(self) -> None:
        try:
            self.writer.close()
        except Exception:
            pass


async def _timed(aw: Any, timeout: Optional[float]) -> Any:
    if timeout is None:
        return await aw
    try:
        return await asyncio.wait_for(aw, timeout)
    except asyncio.TimeoutError as e:
        raise errors.ClientTimeoutError("timed out waiting for the daemon", http_status=0) from e


class AsyncBody(BodyBase["_Conn"]):
    """The open body of a streamed answer."""

    def __init__(self, pool: "AsyncPool", conn: _Conn, length: Optional[int], chunked: bool,
                 will_close: bool, timeout: Optional[float]) -> None:
        self._pool = pool
        self._conn: Optional[_Conn] = conn
        self._left = length
        self._chunked = chunked
        self._chunk_left = 0
        self._eof = length == 0
        self._will_close = will_close
        self._timeout = timeout
        self.trailers: Optional[Trailers] = None
        """The trailer fields of a chunked answer, once its end was read."""

    async def read1(self, n: int = 65536) -> bytes:
        """Up to ``n`` bytes as soon as some arrive; b"" at the answer's end."""
        if self._eof or self._conn is None:
            return b""
        try:
            data: bytes = await _timed(self._read(n), self._timeout)
            return data
        except errors.SandboxError:
            self.close()
            raise
        except (OSError, asyncio.IncompleteReadError, ValueError) as e:
            self.close()
            raise errors.StreamClosedError(f"stream cut: {type(e).__name__}: {e}",
                                           http_status=0) from e

    async def _read(self, n: int) -> bytes:
        assert self._conn is not None
        r = self._conn.reader
        if self._chunked:
            if self._chunk_left == 0:
                line = await r.readuntil(b"\r\n")
                size = chunk_size(line)
                if size == 0:
                    trailers = Trailers()
                    while True:
                        try:
                            t = await r.readuntil(b"\n")
                        except asyncio.LimitOverrunError as e:
                            raise ValueError("trailer line too long") from e
                        if trailers.line(t):
                            break
                    self.trailers = trailers
                    self._done()
                    return b""
                self._chunk_left = size
            data = await r.read(min(n, self._chunk_left))
            if not data:
                raise asyncio.IncompleteReadError(b"", self._chunk_left)
            self._chunk_left -= len(data)
            if self._chunk_left == 0:
                if await r.readexactly(2) != b"\r\n":
                    raise ValueError("bad chunk end")
            return data
        if self._left is None:
            data = await r.read(n)
            if not data:
                self._will_close = True
                self._done()
            return data
        data = await r.read(min(n, self._left))
        if not data:
            raise asyncio.IncompleteReadError(b"", self._left)
        self._left -= len(data)
        if self._left == 0:
            self._done()
        return data

    async def read_all(self) -> bytes:
        """The whole (rest of the) body."""
        parts: List[bytes] = []
        while True:
            d = await self.read1(CHUNK)
            if not d:
                return b"".join(parts)
            parts.append(d)



class AsyncPool(PoolBase[_Conn]):
    """Keep-alive connections to one daemon, for one event loop."""

    async def _get(self, timeout: Optional[float]) -> Tuple[_Conn, bool]:
        now = time.monotonic()
        while self._idle:
            conn, t = self._idle.pop()
            if now - t < IDLE_MAX and not conn.reader.at_eof():
                return conn, True
            conn.close()
        r, w = await _timed(asyncio.open_connection(self.host, self.port, ssl=self.ssl_context,
                                                    limit=HEAD_MAX), timeout)
        return _Conn(r, w), False

    def put(self, conn: _Conn) -> None:
        """Return a connection whose answer was read to its end."""
        if len(self._idle) < self.size:
            self._idle.append((conn, time.monotonic()))
        else:
            conn.close()

    def close(self) -> None:
        """Close the idle connections."""
        idle, self._idle = self._idle, []
        for conn, _ in idle:
            conn.close()

    async def send(self, req: Request, headers: Dict[str, str]) -> Response:
        """Send ``req``; raise its error for a status >= 400."""
        body, h = req.payload()
        h.update(headers)
        timeout = self.timeout if req.timeout is not None and req.timeout < 0 else req.timeout
        replayable = body is None or isinstance(body, bytes)
        attempt = 0
        while True:
            attempt += 1
            try:
                conn, reused = await self._get(timeout)
            except ConnectionRefusedError as e:
                if replayable and attempt < 3:
                    await asyncio.sleep(0.05 * attempt)
                    continue
                raise errors.TransportError(f"{req.method} {req.path}: {e}", http_status=0) from e
            except OSError as e:
                raise errors.TransportError(f"{req.method} {req.path}: {e}", http_status=0) from e
            try:
                await self._write(conn, req, body, h)
            except (OSError, RuntimeError) as e:
                conn.close()
                if reused:
                    self.close()
                if reused and replayable and attempt < 3:
                    continue
                raise errors.TransportError(f"{req.method} {req.path}: {e}", http_status=0) from e
            try:
                status, hdrs = await _timed(self._head(conn), timeout)
            except (OSError, asyncio.IncompleteReadError, ValueError, asyncio.LimitOverrunError) as e:
                conn.close()
                if reused:
                    self.close()
                if reused and req.idempotent and replayable and attempt < 3:
                    continue
                raise errors.TransportError(f"{req.method} {req.path}: no answer: {e!r}",
                                            http_status=0) from e
            except errors.SandboxError:
                conn.close()
                raise
            length, chunked, will_close = framing(req.method, status, hdrs)
            stream_timeout = None if req.stream else timeout
            b = AsyncBody(self, conn, length, chunked, will_close, stream_timeout)
            if req.stream and status < 400:
                return Response(status, hdrs, stream=b)
            data = await b.read_all()
            if status >= 400:
                raise errors.error_from_answer(status, data)
            return Response(status, hdrs, body=data)

    async def _write(self, conn: _Conn, req: Request, body: Any, h: Dict[str, str]) -> None:
        lines = [f"{req.method} {self.prefix}{req.target()} HTTP/1.1", f"Host: {self.hostport}"]
        lines += [f"{k}: {v}" for k, v in h.items()]
        w = conn.writer
        if body is None or isinstance(body, bytes):
            data = body or b""
            if data or req.method in ("POST", "PUT"):
                lines.append(f"Content-Length: {len(data)}")
            w.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + data)
            await w.drain()
            return
        lines.append("Transfer-Encoding: chunked")
        w.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1"))
        if hasattr(body, "read"):
            f = cast(IO[bytes], body)
            while True:
                chunk = f.read(CHUNK)
                if not chunk:
                    break
                w.write(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
                await w.drain()
        elif hasattr(body, "__aiter__"):
            async for chunk in cast(AsyncIterable[bytes], body):
                if chunk:
                    w.write(b"%x\r\n" % len(chunk) + bytes(chunk) + b"\r\n")
                    await w.drain()
        else:
            for chunk in cast(Iterable[bytes], body):
                if chunk:
                    w.write(b"%x\r\n" % len(chunk) + bytes(chunk) + b"\r\n")
                    await w.drain()
        w.write(b"0\r\n\r\n")
        await w.drain()

    async def _head(self, conn: _Conn) -> Tuple[int, Dict[str, str]]:
        while True:
            status, hdrs = parse_head(await conn.reader.readuntil(b"\r\n\r\n"))
            if is_final(status):
                return status, hdrs
