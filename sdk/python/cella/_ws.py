"""A minimal RFC 6455 WebSocket client (standard library only) and the terminal over it.

:class:`FrameParser` is sans-IO: bytes in, messages out, with masking checked (a server
must not mask), fragmentation reassembled, control frames validated (at most 125 bytes,
never fragmented), lengths minimal and bounded, RSV bits and reserved opcodes refused.
Anything else raises :class:`ProtocolError` carrying the close code to send.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import threading
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Tuple, Union
from urllib.parse import urlencode, urlsplit

from . import errors

GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
MAX_MESSAGE = 1 << 20
"""The largest message accepted (cellad sends at most 64 KiB)."""

OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG = 0, 1, 2, 8, 9, 10


class ProtocolError(Exception):
    """The peer broke RFC 6455; ``close_code`` is the status to close with."""

    def __init__(self, message: str, close_code: int = 1002) -> None:
        super().__init__(message)
        self.close_code = close_code


@dataclass
class Message:
    """A whole message: ``opcode`` TEXT, BINARY, CLOSE, PING or PONG, and its payload."""

    opcode: int
    data: bytes


def accept_key(key: str) -> str:
    """The Sec-WebSocket-Accept answering ``key``."""
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def encode_frame(opcode: int, payload: bytes, fin: bool = True,
                 mask_key: Optional[bytes] = None) -> bytes:
    """One client frame (masked, as a client must)."""
    key = mask_key if mask_key is not None else os.urandom(4)
    head = bytearray([(0x80 if fin else 0) | opcode])
    n = len(payload)
    if n < 126:
        head.append(0x80 | n)
    elif n < 65536:
        head.append(0x80 | 126)
        head += struct.pack("!H", n)
    else:
        head.append(0x80 | 127)
        head += struct.pack("!Q", n)
    head += key
    return bytes(head) + mask(payload, key)


def mask(data: bytes, key: bytes) -> bytes:
    """XOR ``data`` with the 4-byte ``key`` (masking and unmasking)."""
    if not data:
        return b""
    n = len(data)
    k = (key * (n // 4 + 1))[:n]
    return (int.from_bytes(data, "little") ^ int.from_bytes(k, "little")).to_bytes(n, "little")


class FrameParser:
    """Feed server bytes; answers whole messages (control frames as they come)."""

    def __init__(self, max_message: int = MAX_MESSAGE) -> None:
        self._buf = bytearray()
        self._frag_op: Optional[int] = None
        self._frag: List[bytes] = []
        self._frag_len = 0
        self._max = max_message

    def feed(self, data: bytes) -> List[Message]:
        """Add bytes; answer the messages they complete."""
        self._buf += data
        out: List[Message] = []
        while True:
            frame = self._frame()
            if frame is None:
                return out
            fin, opcode, payload = frame
            if opcode >= 8:
                out.append(Message(opcode, payload))
                continue
            if opcode == OP_CONT:
                if self._frag_op is None:
                    raise ProtocolError("continuation without a message")
            else:
                if self._frag_op is not None:
                    raise ProtocolError("new message inside a fragmented one")
                self._frag_op = opcode
            self._frag.append(payload)
            self._frag_len += len(payload)
            if self._frag_len > self._max:
                raise ProtocolError("message too big", 1009)
            if fin:
                op = self._frag_op
                msg = b"".join(self._frag)
                self._frag_op, self._frag, self._frag_len = None, [], 0
                if op == OP_TEXT:
                    try:
                        msg.decode("utf-8")
                    except UnicodeDecodeError:
                        raise ProtocolError("text message not UTF-8", 1007) from None
                out.append(Message(op, msg))

    def _frame(self) -> Optional[Tuple[bool, int, bytes]]:
        b = self._buf
        if len(b) < 2:
            return None
        b0, b1 = b[0], b[1]
        fin, opcode = bool(b0 & 0x80), b0 & 0x0F
        if b0 & 0x70:
            raise ProtocolError("RSV bits set")
        if opcode not in (OP_CONT, OP_TEXT, OP_BINARY, OP_CLOSE, OP_PING, OP_PONG):
            raise ProtocolError(f"reserved opcode {opcode}")
        if b1 & 0x80:
            raise ProtocolError("a server frame must not be masked")
        n = b1 & 0x7F
        pos = 2
        if n == 126:
            if len(b) < 4:
                return None
            n = struct.unpack_from("!H", b, 2)[0]
            if n < 126:
                raise ProtocolError("non-minimal length")
            pos = 4
        elif n == 127:
            if len(b) < 10:
                return None
            n = struct.unpack_from("!Q", b, 2)[0]
            if n < 65536 or n >> 63:
                raise ProtocolError("non-minimal or oversized length")
            pos = 10
        if opcode >= 8 and (n > 125 or not fin):
            raise ProtocolError("control frame too long or fragmented")
        if n > self._max:
            raise ProtocolError("frame too big", 1009)
        if len(b) < pos + n:
            return None
        payload = bytes(b[pos:pos + n])
        del b[:pos + n]
        return fin, opcode, payload


def handshake_request(host: str, target: str, key: str, headers: Dict[str, str]) -> bytes:
    """The upgrade request."""
    lines = [f"GET {target} HTTP/1.1", f"Host: {host}", "Upgrade: websocket",
             "Connection: Upgrade", f"Sec-WebSocket-Key: {key}", "Sec-WebSocket-Version: 13"]
    lines += [f"{k}: {v}" for k, v in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


class WebSocket:
    """A client WebSocket (RFC 6455) over a connected socket: :meth:`send` a text or binary
    message, :meth:`recv` the next one (pings are answered, a close is answered and ends
    it). Thread-safe for one reader and any writers."""

    def __init__(self, sock: Union[socket.socket, ssl.SSLSocket], rest: bytes) -> None:
        self._sock = sock
        self._parser = FrameParser()
        self._pending: List[Message] = []
        self._wlock = threading.Lock()
        self._closed = False
        self.close_code: Optional[int] = None
        """The status of the peer's close frame, once it came."""
        if rest:
            self._pending += self._parser.feed(rest)

    @property
    def closed(self) -> bool:
        """Whether the connection is closed."""
        return self._closed

    def _send(self, opcode: int, payload: bytes) -> None:
        with self._wlock:
            try:
                self._sock.sendall(encode_frame(opcode, payload))
            except OSError as e:
                raise errors.StreamClosedError(f"websocket: {e}", http_status=0) from e

    def send(self, data: Union[str, bytes]) -> None:
        """Send a text (``str``) or binary (``bytes``) message."""
        if isinstance(data, str):
            self._send(OP_TEXT, data.encode("utf-8"))
        else:
            self._send(OP_BINARY, bytes(data))

    def recv_message(self, timeout: Optional[float] = None) -> Optional[Message]:
        """The next text or binary :class:`Message`; None once the connection closed
        cleanly. Raises :class:`cella.ClientTimeoutError` after ``timeout`` seconds and
        :class:`cella.StreamClosedError` when the connection breaks."""
        while True:
            while self._pending:
                m = self._pending.pop(0)
                if m.opcode in (OP_TEXT, OP_BINARY):
                    return m
                if m.opcode == OP_PING:
                    self._send(OP_PONG, m.data)
                elif m.opcode == OP_CLOSE:
                    if len(m.data) >= 2:
                        self.close_code = struct.unpack("!H", m.data[:2])[0]
                    self.close()
                    return None
            if self._closed:
                return None
            self._sock.settimeout(timeout)
            try:
                data = self._sock.recv(65536)
            except (socket.timeout, TimeoutError) as e:
                raise errors.ClientTimeoutError("websocket: nothing within the timeout",
                                                http_status=0) from e
            except OSError as e:
                self._closed = True
                self._sock.close()
                raise errors.StreamClosedError(f"websocket: {e}", http_status=0) from e
            if not data:
                self._closed = True
                self._sock.close()
                raise errors.StreamClosedError("websocket closed without a close frame",
                                               http_status=0)
            try:
                self._pending += self._parser.feed(data)
            except ProtocolError as e:
                self.close(e.close_code)
                raise errors.StreamClosedError(f"websocket: {e}", http_status=0) from e

    def recv(self, timeout: Optional[float] = None) -> Union[str, bytes, None]:
        """The next message: ``str`` for text, ``bytes`` for binary, None once closed."""
        m = self.recv_message(timeout)
        if m is None:
            return None
        return m.data.decode("utf-8") if m.opcode == OP_TEXT else m.data

    def close(self, code: int = 1000) -> None:
        """Send a close frame (``code``) and close the connection."""
        if self._closed:
            return
        self._closed = True
        try:
            with self._wlock:
                self._sock.sendall(encode_frame(OP_CLOSE, struct.pack("!H", code)))
        except OSError:
            pass
        try:
            self._sock.close()
        except OSError:
            pass

    def __enter__(self) -> "WebSocket":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class Terminal:
    """A sandbox session's terminal (a pty) over a WebSocket: :meth:`write` types into it,
    :meth:`read` answers its output bytes, :meth:`resize` changes its size. ``exit_code``
    is set once the shell exited. Thread-safe for one reader and any writers."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        """The WebSocket it runs over."""
        self.exit_code: Optional[int] = None
        """The shell's exit status once it ended (128+signal if killed)."""
        self.ready = False
        """Whether the replay of recent output was received."""

    def write(self, data: Union[str, bytes]) -> None:
        """Type into the terminal (``"\\r"`` is Enter, ``"\\x03"`` ^C)."""
        self.ws._send(OP_BINARY, data.encode() if isinstance(data, str) else data)

    def resize(self, cols: int, rows: int) -> None:
        """Set the terminal's size (its programs get SIGWINCH)."""
        self.ws.send(json.dumps({"type": "resize", "cols": cols, "rows": rows}))

    def read(self, timeout: Optional[float] = None) -> bytes:
        """The next output bytes; b"" once the terminal ended (``exit_code`` set) or the
        connection closed. Raises :class:`cella.ClientTimeoutError` after ``timeout`` s."""
        while True:
            try:
                m = self.ws.recv_message(timeout)
            except errors.StreamClosedError:
                if self.exit_code is not None:
                    return b""
                raise
            if m is None:
                return b""
            if m.opcode == OP_BINARY:
                return m.data
            self._control(m.data)

    def _control(self, data: bytes) -> None:
        try:
            doc: Any = json.loads(data)
        except ValueError:
            return
        if not isinstance(doc, dict):
            return
        if doc.get("type") == "ready":
            self.ready = True
        elif doc.get("type") == "exit":
            code = doc.get("code")
            self.exit_code = code if isinstance(code, int) else -1
        elif doc.get("type") == "error":
            raise errors.error_from_answer(400, data)

    def close(self) -> None:
        """Close the connection (the terminal's shell goes on, like a detached tmux)."""
        self.ws.close()

    def __enter__(self) -> "Terminal":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_terminal(url: str, path: str, query: Dict[str, str], headers: Dict[str, str],
                  timeout: Optional[float],
                  ssl_context: Optional[ssl.SSLContext] = None) -> Terminal:
    """Connect the terminal WebSocket at ``url`` + ``path``."""
    return Terminal(open_websocket(url, path, query, headers, timeout, ssl_context))


def open_websocket(url: str, path: str, query: Optional[Dict[str, str]],
                   headers: Dict[str, str], timeout: Optional[float],
                   ssl_context: Optional[ssl.SSLContext] = None) -> WebSocket:
    """Open a WebSocket to ``url`` + ``path`` (an API route: errors before the upgrade
    raise the API's error class)."""
    u = urlsplit(url)
    host = u.hostname or "127.0.0.1"
    port = u.port or (443 if u.scheme == "https" else 80)
    try:
        raw = socket.create_connection((host, port), timeout=timeout)
    except OSError as e:
        raise errors.TransportError(f"terminal: {e}", http_status=0) from e
    sock: Union[socket.socket, ssl.SSLSocket] = raw
    if u.scheme == "https":
        sock = (ssl_context or ssl.create_default_context()).wrap_socket(raw, server_hostname=host)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    key = base64.b64encode(os.urandom(16)).decode()
    target = u.path.rstrip("/") + path + ("?" + urlencode(query) if query else "")
    h = {k: v for k, v in headers.items() if k.lower() != "user-agent"}
    try:
        sock.sendall(handshake_request(f"{host}:{port}", target, key, h))
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = sock.recv(65536)
            if not data:
                raise errors.TransportError("terminal: connection closed in the handshake",
                                            http_status=0)
            buf += data
            if len(buf) > 65536:
                raise errors.TransportError("terminal: handshake answer too long", http_status=0)
    except OSError as e:
        sock.close()
        raise errors.TransportError(f"terminal: {e}", http_status=0) from e
    head, _, rest = buf.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1]) if len(lines[0].split(" ")) > 1 else 0
    hdrs = {ln.split(":", 1)[0].strip().lower(): ln.split(":", 1)[1].strip()
            for ln in lines[1:] if ":" in ln}
    if status != 101:
        body = rest
        length = int(hdrs.get("content-length", "0") or 0)
        sock.settimeout(timeout)
        try:
            while len(body) < length:
                data = sock.recv(65536)
                if not data:
                    break
                body += data
        except OSError:
            pass
        sock.close()
        raise errors.error_from_answer(status, body)
    if hdrs.get("sec-websocket-accept") != accept_key(key):
        sock.close()
        raise errors.TransportError("terminal: bad Sec-WebSocket-Accept", http_status=0)
    sock.settimeout(None)
    return WebSocket(sock, rest)
