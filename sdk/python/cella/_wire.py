"""HTTP/1.1 as both transports speak it, without the I/O (sans-IO): where the daemon is,
an answer's head parsed from its bytes, how its body is framed, and what becomes of the
connection when the body is done. _http.py moves the bytes over sockets, _aio.py over
asyncio streams."""

from __future__ import annotations

import ssl
from typing import Dict, Generic, List, Optional, Protocol, Tuple, TypeVar
from urllib.parse import urlsplit

from . import errors


class Conn(Protocol):
    """A connection of either transport."""

    def close(self) -> None: ...


C = TypeVar("C", bound=Conn)


class PoolBase(Generic[C]):
    """The daemon's address (from ``url``) and the idle keep-alive connections to it."""

    def __init__(self, url: str, timeout: Optional[float], size: int = 8,
                 ssl_context: Optional[ssl.SSLContext] = None) -> None:
        u = urlsplit(url)
        if u.scheme not in ("http", "https") or not u.hostname:
            raise errors.ValidationFailedError(f"url must be http:// or https://, not {url!r}",
                                               http_status=0)
        self.https = u.scheme == "https"
        self.host = u.hostname
        self.port = u.port or (443 if self.https else 80)
        host = f"[{self.host}]" if ":" in self.host else self.host
        self.hostport = f"{host}:{self.port}"
        self.prefix = u.path.rstrip("/")
        self.timeout = timeout
        self.size = size
        self.ssl_context = ssl_context or (ssl.create_default_context() if self.https else None)
        self._idle: List[Tuple[C, float]] = []

    def put(self, conn: C) -> None:
        """Take back a connection whose answer was read to its end."""
        raise NotImplementedError


def parse_head(raw: bytes) -> Tuple[int, Dict[str, str]]:
    """The status and the headers (lower-case names) of an answer's head: its status line
    and header lines, each ending in CRLF (or LF), up to the empty line or not. Raises
    ValueError for a bad status line."""
    lines = raw.split(b"\n")
    parts = lines[0].split(None, 2)
    if len(parts) < 2 or not parts[0].startswith(b"HTTP/1.") or not parts[1].isdigit():
        raise ValueError(f"bad status line {lines[0][:80]!r}")
    hdrs: Dict[str, str] = {}
    for line in lines[1:]:
        k, sep, v = line.partition(b":")
        if sep:
            hdrs[k.strip().lower().decode("latin-1")] = v.strip().decode("latin-1")
    return int(parts[1]), hdrs


def is_final(status: int) -> bool:
    """Whether an answer with ``status`` is the answer (not an interim 1xx to skip)."""
    return status >= 200 or status == 101


def framing(method: str, status: int, hdrs: Dict[str, str]) -> Tuple[Optional[int], bool, bool]:
    """How the body of an answer is framed: its length (None: chunked, or until the
    connection closes), whether it is chunked, and whether the connection ends with it."""
    te = hdrs.get("transfer-encoding", "").lower()
    cl = hdrs.get("content-length")
    will_close = hdrs.get("connection", "").lower() == "close"
    length: Optional[int] = int(cl) if cl is not None and cl.isdigit() else None
    if method == "HEAD" or status in (204, 304):
        length = 0
    chunked = "chunked" in te
    if not chunked and length is None:
        will_close = True
    return (None if chunked else length), chunked, will_close


class BodyBase(Generic[C]):
    """What becomes of an answer's connection: back to the pool once the body was read to
    its end (unless the answer closes it), closed when the body is dropped before."""

    _pool: PoolBase[C]
    _conn: Optional[C]
    _eof: bool
    _will_close: bool

    def _done(self) -> None:
        self._eof = True
        conn, self._conn = self._conn, None
        if conn is not None:
            if self._will_close:
                conn.close()
            else:
                self._pool.put(conn)

    def close(self) -> None:
        """Release the connection: closed unless the answer was read to its end."""
        conn, self._conn = self._conn, None
        self._eof = True
        if conn is not None:
            conn.close()


TRAILER_LINE_MAX = 8192
"""The longest trailer line accepted (cellad's longest, a ``Cella-Stderr`` line, is about
3,000 characters)."""
TRAILERS_MAX = 256 * 1024
"""The most trailer bytes accepted in one answer (cellad's raw exec sends at most about
90 KiB: 64 KiB of stderr as base64, and a few fields)."""
TRAILER_FIELDS_MAX = 1024
"""The most trailer fields accepted in one answer."""


class Trailers:
    """The trailer fields of a chunked answer, fed line by line after its last chunk
    (sans-IO). Names are lower-case; a repeated field keeps each value, in order. Raises
    ValueError for a line that is not a field, too long a line, too many fields or bytes."""

    def __init__(self) -> None:
        self.fields: List[Tuple[str, str]] = []
        self._size = 0

    def line(self, raw: bytes) -> bool:
        """Take one line (with its CRLF or LF); answers whether it was the empty line that
        ends the trailers."""
        if len(raw) > TRAILER_LINE_MAX + 2:
            raise ValueError(f"trailer line of {len(raw)} bytes (at most {TRAILER_LINE_MAX})")
        if not raw.endswith(b"\n"):
            raise ValueError("trailer line without its end")
        text = raw.rstrip(b"\r\n")
        if not text:
            return True
        self._size += len(raw)
        if self._size > TRAILERS_MAX:
            raise ValueError(f"trailers longer than {TRAILERS_MAX} bytes")
        if len(self.fields) >= TRAILER_FIELDS_MAX:
            raise ValueError(f"more than {TRAILER_FIELDS_MAX} trailer fields")
        k, sep, v = text.partition(b":")
        name = k.strip()
        if not sep or not name or name != k or b" " in name or b"\t" in name:
            raise ValueError(f"bad trailer line {text[:60]!r}")
        self.fields.append((name.lower().decode("latin-1"), v.strip().decode("latin-1")))
        return False

    def get(self, name: str) -> Optional[str]:
        """The first value of field ``name`` (lower-case), or None."""
        for k, v in self.fields:
            if k == name:
                return v
        return None

    def get_all(self, name: str) -> List[str]:
        """Every value of field ``name`` (lower-case), in order."""
        return [v for k, v in self.fields if k == name]
