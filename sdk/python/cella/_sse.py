"""Incremental Server-Sent Events parser (the ``data:`` lines cellad sends), bounded.

Bytes are fed as they arrive, in pieces of any size; complete events come out as decoded
JSON objects. A line longer than ``max_line`` or an event longer than ``max_event`` raises
:class:`cella.errors.SandboxError` instead of growing without limit.
"""

from __future__ import annotations

import json
from typing import Any, Dict, List

from .errors import SandboxError

MAX_LINE = 16 * 1024 * 1024
"""The longest SSE line accepted (a 64 MiB exec output arrives in many events)."""


class SSEParser:
    """Feed bytes with :meth:`feed`; it answers the events completed by them."""

    def __init__(self, max_line: int = MAX_LINE, max_event: int = MAX_LINE) -> None:
        self._buf = bytearray()
        self._data: List[bytes] = []
        self._size = 0
        self._max_line = max_line
        self._max_event = max_event

    def feed(self, chunk: bytes) -> List[Dict[str, Any]]:
        """Add bytes; answer the events they complete, in order."""
        out: List[Dict[str, Any]] = []
        buf = self._buf
        buf += chunk
        start = 0
        while True:
            nl = buf.find(b"\n", start)
            if nl < 0:
                break
            line = bytes(buf[start:nl])
            start = nl + 1
            if line.endswith(b"\r"):
                line = line[:-1]
            self._line(line, out)
        if start:
            del buf[:start]
        if len(buf) > self._max_line:
            raise SandboxError(f"SSE line over {self._max_line} bytes", code="INTERNAL_ERROR",
                               http_status=0)
        return out

    def _line(self, line: bytes, out: List[Dict[str, Any]]) -> None:
        if not line:
            if self._data:
                payload = b"\n".join(self._data)
                self._data = []
                self._size = 0
                try:
                    doc = json.loads(payload)
                except ValueError:
                    doc = {"type": "data", "data": payload.decode("utf-8", "replace")}
                if isinstance(doc, dict):
                    out.append(doc)
            return
        if line.startswith(b":"):
            return
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._size += len(value)
            if self._size > self._max_event:
                raise SandboxError(f"SSE event over {self._max_event} bytes",
                                   code="INTERNAL_ERROR", http_status=0)
            self._data.append(value)
        # event:, id:, retry: carry nothing cellad uses.

    @property
    def pending(self) -> bool:
        """Whether a partial line or event is held (a stream that ends here was cut)."""
        return bool(self._buf) or bool(self._data)
