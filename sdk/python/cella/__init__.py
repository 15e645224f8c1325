"""cella: the Python client of cellad (docs/sdk-python.md).

    import cella
    client = cella.connect(url="http://127.0.0.1:7070", token=None)
    sb = client.sandbox("demo")
    print(sb.exec("echo hi").stdout)

:func:`connect` gives a thread-safe synchronous :class:`Client`; :func:`connect_async` an
asyncio one with the same methods as coroutines. Every error is a :class:`SandboxError`.
"""

from . import errors, types
from ._async import (AsyncClient, AsyncEventStream, AsyncProcess, AsyncRawExecStream,
                     AsyncSandbox, AsyncSession, AsyncTerminal, AsyncWebSocket, connect_async)
from ._ws import Terminal, WebSocket
from ._sync import Client, EventStream, Process, RawExecStream, Sandbox, Session, connect
from .errors import *  # noqa: F401,F403 (one class per API error code)
from .types import *  # noqa: F401,F403

__version__ = "0.1.0"
"""The package's version."""

__all__ = ["connect", "Client", "Sandbox", "Session", "Process", "EventStream", "RawExecStream",
           "connect_async", "AsyncClient", "AsyncSandbox", "AsyncSession", "AsyncProcess",
           "AsyncEventStream", "AsyncRawExecStream", "Terminal", "AsyncTerminal", "WebSocket", "AsyncWebSocket", "errors",
           "types", "__version__"] + errors.__all__ + types.__all__
