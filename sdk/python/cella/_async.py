"""The asyncio client: :func:`connect_async`, :class:`AsyncClient`, :class:`AsyncSandbox`,
:class:`AsyncSession`, :class:`AsyncProcess`: the sync client's methods as coroutines, its
streams as async iterators (``async for``). Requests are built and answers decoded by the
same code as the sync client's (_core); only the transport differs."""

from __future__ import annotations

import asyncio
import inspect
import ssl
from typing import (IO, Any, AsyncIterator, Callable, Dict, Generic, Iterable, List,
                    Literal, Mapping, Optional, Sequence, TypeVar, Union, overload)

from . import _core as core
from . import errors
from ._aio import CHUNK, AsyncBody, AsyncPool
from ._core import CodeCallbacks, Op, SandboxRef
from ._ws import Terminal, WebSocket, open_terminal, open_websocket
from .types import (CodeContext, ExecEvent, ExecResult, Execution, ExecutionError,
                    ExposedPort, FileInfo, GitCheckoutResult, LogEvent, ProcessInfo,
                    ProcessLogs, RawExecResult, Result, SandboxInfo, SessionInfo, SnapshotInfo,
                    WaitForLogResult,
                    WatchEvent, WriteResult, DirectoryBackup,
                    RestoreBackupResult)

T = TypeVar("T")
E = TypeVar("E")

__all__ = ["connect_async", "AsyncClient", "AsyncSandbox", "AsyncSession", "AsyncProcess",
           "AsyncEventStream", "AsyncRawExecStream", "AsyncTerminal", "AsyncWebSocket"]


class AsyncEventStream(Generic[E]):
    """An async iterator over the events of an SSE answer (``async for ev in stream``).
    ``aclose()`` (or leaving an ``async with`` block) closes the connection, which stops the
    command or watch. A stream cut before its last event raises
    :class:`cella.StreamClosedError`."""

    def __init__(self, body: AsyncBody, decode: Callable[[Dict[str, Any]], E],
                 end: Optional[frozenset[str]]) -> None:
        self._body = body
        self._events = core.EventDecoder(decode, end)
        self._done = False

    def __aiter__(self) -> "AsyncEventStream[E]":
        return self

    async def __aenter__(self) -> "AsyncEventStream[E]":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def __anext__(self) -> E:
        while not self._events.ready:
            if self._done or self._events.ended:
                await self._finish()
                raise StopAsyncIteration
            chunk = await self._body.read1(65536)
            if not chunk:
                self._done = True
                self._body.close()
                self._events.at_eof()
                raise StopAsyncIteration
            self._events.feed(chunk)
        return self._events.take()

    async def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        try:
            while await self._body.read1(65536):
                pass
        except errors.SandboxError:
            pass
        self._body.close()

    async def aclose(self) -> None:
        """Stop reading and close the connection."""
        self._done = True
        self._body.close()


class AsyncRawExecStream:
    """The stdout of :meth:`AsyncSandbox.exec_raw` as an async iterator of ``bytes``
    chunks (``async for chunk in stream``); then ``await result()`` says how the command
    ended. ``aclose()`` (or leaving an ``async with`` block) before the end closes the
    connection, which stops the command."""

    def __init__(self, body: AsyncBody, command: str, session_id: Optional[str],
                 headers: Mapping[str, str]) -> None:
        self._body = body
        self._command = command
        self._session_id = session_id
        self._headers = dict(headers)
        self._result: Optional[RawExecResult] = None
        self._error: Optional[errors.SandboxError] = None
        self._ended = False
        self.pid: int = core._trailer_int(self._headers.get("cella-pid"), -1)
        """The command's pid in the sandbox (the ``Cella-Pid`` header)."""

    def __aiter__(self) -> "AsyncRawExecStream":
        return self

    async def __aenter__(self) -> "AsyncRawExecStream":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def __anext__(self) -> bytes:
        chunk = await self.read1(CHUNK)
        if not chunk:
            raise StopAsyncIteration
        return chunk

    async def read1(self, n: int = CHUNK) -> bytes:
        """Up to ``n`` bytes of stdout as soon as some arrive; b"" at its end."""
        if self._ended:
            return b""
        chunk = await self._body.read1(n)
        if not chunk:
            self._ended = True
            try:
                self._result = core.raw_exec_result(self._command, self._session_id,
                                                    self._headers, self._body.trailers)
            except errors.SandboxError as e:
                self._error = e
        return chunk

    async def result(self) -> RawExecResult:
        """How the command ended (see :meth:`cella.RawExecStream.result`); reads (and
        drops) what stdout is still unread."""
        while not self._ended:
            await self.read1(CHUNK)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    async def aclose(self) -> None:
        """Stop reading and close the connection (the command is stopped if it runs)."""
        if not self._ended:
            self._ended = True
            self._error = errors.StreamClosedError("the stream was closed before its end",
                                                   http_status=0)
        self._body.close()


class AsyncClient(core.ClientBase["AsyncSandbox"]):
    """An asyncio connection to one cellad (made by :func:`connect_async`); use it from
    one event loop. It owns keep-alive connections and remembers which sandbox options it
    has sent."""

    def __init__(self, url: str = "http://127.0.0.1:7070", token: Optional[str] = None, *,
                 timeout: Optional[float] = 60.0, headers: Optional[Mapping[str, str]] = None,
                 pool_size: int = 8, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        super().__init__(url, token, timeout, headers, ssl_context)
        self._pool = AsyncPool(self.url, timeout, pool_size, ssl_context)

    async def _run(self, op: Op[T]) -> T:
        try:
            req = next(op)
            while True:
                try:
                    resp = await self._pool.send(req, self._headers)
                except errors.SandboxError as e:
                    req = op.throw(e)
                else:
                    req = op.send(resp)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _handle(self, ref: SandboxRef, destroy_on_exit: bool) -> "AsyncSandbox":
        return AsyncSandbox(self, ref, destroy_on_exit)

    async def health(self) -> Dict[str, Any]:
        """``GET /v1/health``."""
        return await self._run(core.health())

    async def list_sandboxes(self) -> List[SandboxInfo]:
        """Every sandbox (``GET /v1/sandboxes``)."""
        return await self._run(core.list_sandboxes())

    # ---- snapshots ----
    async def list_snapshots(self, sandbox: Optional[str] = None) -> List[SnapshotInfo]:
        """Every snapshot, oldest first; with ``sandbox``, those taken of that sandbox (also
        once it is destroyed: snapshots outlive their sandbox)."""
        return await self._run(core.list_snapshots(sandbox))

    async def get_snapshot(self, snapshot: str) -> SnapshotInfo:
        """A snapshot by id or name; :class:`cella.SnapshotNotFoundError` if there is none."""
        return await self._run(core.get_snapshot(snapshot))

    async def delete_snapshot(self, snapshot: str) -> str:
        """Delete a snapshot (by id or name); answers its id.
        :class:`cella.SnapshotInUseError` while a sandbox made from it exists,
        :class:`cella.SnapshotNotFoundError` if there is none."""
        return await self._run(core.delete_snapshot(snapshot))

    async def close(self) -> None:
        """Close the idle connections (the client stays usable)."""
        self._pool.close()

    async def __aenter__(self) -> "AsyncClient":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def connect_async(url: str = "http://127.0.0.1:7070", token: Optional[str] = None, *,
                  timeout: Optional[float] = 60.0, headers: Optional[Mapping[str, str]] = None,
                  pool_size: int = 8, ssl_context: Optional[ssl.SSLContext] = None) -> AsyncClient:
    """An :class:`AsyncClient` for the cellad at ``url`` (sends nothing)."""
    return AsyncClient(url, token, timeout=timeout, headers=headers, pool_size=pool_size,
                       ssl_context=ssl_context)


class AsyncSandbox(core.SandboxBase[AsyncClient]):
    """A sandbox: commands, files, sessions, processes, ports, code, terminal.

    Made by :meth:`AsyncClient.sandbox`; the sandbox itself is created by the first operation.
    """

    async def _run(self, op: Op[T]) -> T:
        return await self.client._run(op)

    async def __aenter__(self) -> "AsyncSandbox":
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._destroy_on_exit:
            await self.destroy()

    # ---- lifecycle ----
    async def create(self) -> SandboxInfo:
        """Create the sandbox now (or update it) with the handle's options."""
        return await self._run(core.create(self._ref))

    async def get_info(self) -> SandboxInfo:
        """The sandbox's state; :class:`cella.SandboxNotFoundError` if it does not exist."""
        return await self._run(core.get_info(self._ref))

    async def sleep(self) -> SandboxInfo:
        """Put the sandbox to sleep now, as an idle sleep does, and answer its
        state once it sleeps (``state == "sleeping"``).

        Its ``sleep_mode`` decides what is kept: with ``"memory"`` where the host can, its
        processes are checkpointed (the answer comes after the checkpoint, with
        ``raw["memorySnapshotBytes"]``), else its files. ``keep_alive`` does not prevent it; its
        open commands, streams and terminals end. A sleeping sandbox is answered as it is;
        a stopped one raises a :class:`cella.SandboxError` with code ``SANDBOX_STOPPED``
        (HTTP 409). The handle's options not yet sent are sent first, as by every call
        (which creates the sandbox); without options, a sandbox that does not exist is
        :class:`cella.SandboxNotFoundError`. Any later operation wakes it."""
        return await self._run(core.sleep(self._ref))

    async def destroy(self) -> bool:
        """Delete the sandbox and everything in it; answers whether it existed."""
        return await self._run(core.destroy(self._ref))

    async def set_keep_alive(self, keep_alive: bool) -> SandboxInfo:
        """Turn sleeping off (True) or on (one PUT)."""
        return await self._run(core.set_options(self._ref, keep_alive=keep_alive))

    async def set_sleep_after(self, sleep_after: Union[str, int]) -> SandboxInfo:
        """Set the idle time before the sandbox sleeps (``"30m"`` or seconds; one PUT)."""
        return await self._run(core.set_options(self._ref, sleep_after=sleep_after))

    async def set_labels(self, labels: Mapping[str, str]) -> SandboxInfo:
        """Replace the sandbox's labels (one PUT)."""
        return await self._run(core.set_options(self._ref, labels=dict(labels)))

    # ---- snapshots and fork ----
    async def create_snapshot(self, name: Optional[str] = None) -> SnapshotInfo:
        """A snapshot of the sandbox's files now (its processes are frozen for the copy and
        run on after). It outlives the sandbox; ``client.sandbox(id, from_snapshot=...)``
        makes sandboxes that start with its files. ``name``: 1-63 of ``a-z 0-9 . _ -``,
        unique (default: its id; a taken or bad one is
        :class:`cella.ValidationFailedError`). A sandbox that does not exist:
        :class:`cella.SandboxNotFoundError`."""
        return await self._run(core.create_snapshot(self._ref, name))

    async def list_snapshots(self) -> List[SnapshotInfo]:
        """The snapshots taken of this sandbox, oldest first."""
        return await self._run(core.list_snapshots(self._ref.id))

    async def fork(self, name: str, *, destroy_on_exit: bool = False,
             sleep_after: Union[str, int, None] = None, keep_alive: Optional[bool] = None,
             labels: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None,
             network_allow: Optional[List[str]] = None,
             memory: bool = False) -> "AsyncSandbox":
        """A new sandbox ``name`` with this sandbox's files as they are now (a snapshot,
        shared, not copied; ``get_info().snapshot`` names it), answered as its handle, as
        ``client.sandbox(name, from_snapshot=...)`` would make it. The other options are
        sent in one PUT once it exists; settings fixed at creation (image, network,
        instance type) are the defaults: for others, :meth:`create_snapshot` and
        ``client.sandbox(name, from_snapshot=..., ...)``. The snapshot stays after the child
        is destroyed, until deleted. A taken name: :class:`cella.ValidationFailedError`.
        ``memory=True``: the child has this sandbox's processes too (its background
        servers, sessions and code contexts go on in it; this one runs on); a dump or
        restore that failed is a ``MEMORY_FORK_FAILED`` error (HTTP 500), nothing made."""
        child = core.child_ref(self._ref, name, {
            "sleep_after": sleep_after, "keep_alive": keep_alive,
            "labels": dict(labels) if labels is not None else None,
            "env": dict(env) if env is not None else None, "network_allow": network_allow})
        await self._run(core.fork(self._ref, child, memory))
        return AsyncSandbox(self.client, child, destroy_on_exit)

    # ---- commands ----
    async def exec(self, command: str, *, timeout: Optional[int] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> ExecResult:
        """Run ``command`` (bash) and wait for it. ``timeout`` in ms: past it the
        command's process tree is killed and :class:`cella.CommandTimeoutError` raised
        (its ``context`` has the output so far)."""
        return await self._run(core.exec_(self._ref, command, timeout, env, cwd))

    async def exec_stream(self, command: str, *, timeout: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None) -> AsyncEventStream[ExecEvent]:
        """Run ``command``, answering its events as they come: ``start``, ``stdout``/
        ``stderr``, then ``complete`` or ``error``. Closing the stream kills the command."""
        resp = await self._run(core.exec_stream(self._ref, command, timeout, env, cwd))
        return AsyncEventStream(resp.stream, ExecEvent.from_json, core.EXEC_END)

    async def exec_raw(self, command: str, *, timeout: Optional[int] = None,
                       env: Optional[Mapping[str, str]] = None,
                       cwd: Optional[str] = None) -> AsyncRawExecStream:
        """Run ``command`` and answer its stdout as bytes as it comes (the raw form; see
        :meth:`cella.Sandbox.exec_raw`)."""
        resp = await self._run(core.exec_raw(self._ref, command, timeout, env, cwd))
        return AsyncRawExecStream(resp.stream, command, self._ref.session_id, resp.headers)

    async def set_env(self, env: Mapping[str, Optional[str]]) -> None:
        """Set (``None``: unset) environment variables of the sandbox (of the session, for a
        :class:`AsyncSession`), for every later command."""
        await self._run(core.set_env(self._ref, env))

    # ---- files ----
    async def write_file(self, path: Union[str, bytes],
                   content: Union[str, bytes, IO[bytes], Iterable[bytes]], *,
                   mode: Optional[int] = None, encoding: str = "utf-8") -> WriteResult:
        """Write a file (parents are created): text (encoded with ``encoding``), bytes, a
        binary file object (streamed from its position to its end) or an iterable of
        byte chunks. Any size. ``mode`` e.g. ``0o755``."""
        return await self._run(core.write_file(self._ref, path, content, mode, encoding))  # type: ignore[arg-type]

    @overload
    async def read_file(self, path: Union[str, bytes], encoding: Literal["bytes"]) -> bytes: ...

    @overload
    async def read_file(self, path: Union[str, bytes],
                  encoding: Literal["utf-8", "utf8", "ascii", "latin-1"] = "utf-8") -> str: ...

    async def read_file(self, path: Union[str, bytes], encoding: str = "utf-8") -> Union[str, bytes]:
        """A file's content: text decoded with ``encoding`` (invalid bytes raise
        :class:`UnicodeDecodeError`), or its bytes with ``encoding="bytes"``."""
        data = await self._run(core.read_file(self._ref, path))  # type: ignore[arg-type]
        return data if encoding == "bytes" else data.decode(encoding)

    async def read_file_to(self, path: Union[str, bytes], fileobj: IO[bytes]) -> int:
        """Stream a file of any size into a binary file object; answers the bytes read."""
        total = 0
        async for chunk in await self.read_file_stream(path):
            fileobj.write(chunk)
            total += len(chunk)
        return total

    async def read_file_stream(self, path: Union[str, bytes]) -> AsyncIterator[bytes]:
        """A file's content as an async iterator of byte chunks (streamed, any size)."""
        resp = await self._run(core.read_file_stream(self._ref, path))  # type: ignore[arg-type]
        body: AsyncBody = resp.stream

        async def gen() -> AsyncIterator[bytes]:
            try:
                while True:
                    chunk = await body.read1(CHUNK)
                    if not chunk:
                        return
                    yield chunk
            finally:
                body.close()
        return gen()

    async def list_files(self, path: Union[str, bytes] = "/workspace", *, recursive: bool = False,
                   include_hidden: bool = True) -> List[FileInfo]:
        """The entries of a directory (``recursive``: and below)."""
        return await self._run(core.list_files(self._ref, path, recursive, include_hidden))  # type: ignore[arg-type]

    async def exists(self, path: Union[str, bytes]) -> bool:
        """Whether ``path`` exists."""
        return await self._run(core.exists(self._ref, path))  # type: ignore[arg-type]

    async def mkdir(self, path: str, *, recursive: bool = False) -> None:
        """Make a directory (``recursive``: and its parents, no error if it exists)."""
        await self._run(core.mkdir(self._ref, path, recursive))

    async def delete_file(self, path: Union[str, bytes], *, recursive: bool = False) -> None:
        """Delete a file (a directory with ``recursive=True``)."""
        await self._run(core.delete_file(self._ref, path, recursive))  # type: ignore[arg-type]

    async def move_file(self, source: str, destination: str) -> None:
        """Move (rename) a file or directory."""
        await self._run(core.move_file(self._ref, source, destination))

    async def rename_file(self, old_path: str, new_path: str) -> None:
        """Rename a file: the same as :meth:`move_file`."""
        await self._run(core.move_file(self._ref, old_path, new_path))

    async def watch(self, path: str = "/workspace", *, recursive: bool = True,
              include: Optional[List[str]] = None,
              exclude: Optional[List[str]] = None) -> AsyncEventStream[WatchEvent]:
        """Watch a directory: ``watching`` once live, then an ``event`` per change
        (``overflow`` when some were lost). Close the stream to stop watching."""
        resp = await self._run(core.watch(self._ref, path, recursive, include, exclude))
        return AsyncEventStream(resp.stream, WatchEvent.from_json, None)

    # ---- sessions ----
    async def create_session(self, *, id: Optional[str] = None, cwd: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None,
                       command_timeout_ms: Optional[int] = None) -> "AsyncSession":
        """Make a session (a persistent shell): a :class:`AsyncSession` with this object's
        methods, run in it."""
        info = await self._run(core.create_session(self._ref, id, cwd, env, command_timeout_ms))
        return AsyncSession(self.client, self._ref.in_session(info.id), info)

    async def get_session(self, id: str) -> "AsyncSession":
        """An existing session; :class:`cella.SessionNotFoundError` otherwise."""
        info = await self._run(core.get_session(self._ref, id))
        return AsyncSession(self.client, self._ref.in_session(info.id), info)

    async def list_sessions(self) -> List[SessionInfo]:
        """The sandbox's sessions."""
        return await self._run(core.list_sessions(self._ref))

    async def delete_session(self, id: str) -> None:
        """Delete a session: its shell and everything it started are killed."""
        await self._run(core.delete_session(self._ref, id))

    # ---- processes ----
    async def start_process(self, command: str, *, process_id: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None,
                      cwd: Optional[str] = None) -> "AsyncProcess":
        """Start a background process; answers once it has a pid."""
        info = await self._run(core.start_process(self._ref, command, process_id, env, cwd))
        return AsyncProcess(self, info)

    async def list_processes(self) -> List["AsyncProcess"]:
        """Every process the sandbox knows (oldest first)."""
        return [AsyncProcess(self, i) for i in await self._run(core.list_processes(self._ref))]

    async def get_process(self, id: str) -> "AsyncProcess":
        """A process by id or pid; :class:`cella.ProcessNotFoundError` otherwise."""
        return AsyncProcess(self, await self._run(core.get_process(self._ref, id)))

    async def kill_process(self, id: str, signal: Optional[str] = None) -> ProcessInfo:
        """Kill a process's tree (SIGTERM, SIGKILL after 3 s; or ``signal`` as given)."""
        return await self._run(core.kill_process(self._ref, id, signal))

    async def kill_all_processes(self, signal: Optional[str] = None) -> int:
        """Kill every running process; answers how many."""
        return await self._run(core.kill_all_processes(self._ref, signal))

    async def get_process_logs(self, id: str) -> ProcessLogs:
        """A process's whole output so far."""
        return await self._run(core.process_logs(self._ref, id))

    async def stream_process_logs(self, id: str) -> AsyncEventStream[LogEvent]:
        """A process's output so far, then live, then its ``exit`` event."""
        resp = await self._run(core.stream_process_logs(self._ref, id))
        return AsyncEventStream(resp.stream, LogEvent.from_json, core.LOG_END)

    # ---- ports ----
    async def expose_port(self, port: int, *, name: Optional[str] = None,
                    token: Optional[str] = None) -> ExposedPort:
        """Expose a port of the sandbox; ``.url`` is its preview URL."""
        return await self._run(core.expose_port(self._ref, port, name, token))

    async def unexpose_port(self, port: int) -> None:
        """Stop exposing a port (its URL stops working)."""
        await self._run(core.unexpose_port(self._ref, port))

    async def get_exposed_ports(self) -> List[ExposedPort]:
        """The exposed ports with their URLs and status."""
        return await self._run(core.get_exposed_ports(self._ref))

    # ---- git ----
    async def git_checkout(self, repo_url: str, *, branch: Optional[str] = None,
                     target_dir: Optional[str] = None, depth: Optional[int] = None,
                     timeout: Optional[int] = None) -> GitCheckoutResult:
        """``git clone`` inside the sandbox (``timeout`` in ms, default 10 minutes)."""
        return await self._run(core.git_checkout(self._ref, repo_url, branch, target_dir, depth,
                                           timeout))

    # ---- backups ----
    async def create_backup(self, dir: str, *, name: Optional[str] = None,
                            ttl: Optional[int] = None, gitignore: Optional[bool] = None,
                            excludes: Optional[Sequence[str]] = None,
                            consistent: Optional[bool] = None,
                            multipart: Optional[bool] = None) -> DirectoryBackup:
        """Archive ``dir`` (absolute, under /workspace, /home, /tmp, /var/tmp or /app) into
        cellad's backup store, kept ``ttl`` seconds (default 259200). ``excludes`` are
        gitignore-style patterns relative to ``dir`` left out of the archive; ``gitignore``
        honours the .gitignore files under ``dir``; ``consistent`` freezes the sandbox while
        ``dir`` is read (one point in time); ``multipart`` (default true) streams an upload
        to an S3 store in parts."""
        return await self._run(core.create_backup(self._ref, dir, name, ttl, gitignore,
                                                  excludes, consistent, multipart))

    async def restore_backup(self, backup: Union[str, DirectoryBackup], *,
                       dir: Optional[str] = None) -> RestoreBackupResult:
        """Replace ``dir`` (default: the backup's) of this sandbox with the backup's content,
        all or nothing; the backup may be of another sandbox."""
        if dir is None and isinstance(backup, DirectoryBackup):
            dir = backup.dir
        return await self._run(core.restore_backup(self._ref, backup, dir))

    async def list_backups(self) -> List[DirectoryBackup]:
        """Every backup of the store (other sandboxes' and daemons' too), newest first."""
        return await self._run(core.list_backups(self._ref))

    async def delete_backup(self, backup: Union[str, DirectoryBackup]) -> None:
        """Delete a backup (:class:`BackupNotFoundError` if there is none)."""
        await self._run(core.delete_backup(self._ref, backup))

    # ---- code interpreter ----
    async def create_code_context(self, *, language: Optional[str] = None, cwd: Optional[str] = None,
                            env: Optional[Mapping[str, str]] = None) -> CodeContext:
        """Start an interpreter (``python``, ``javascript``, ``typescript``) whose variables
        persist from one run to the next."""
        return await self._run(core.create_code_context(self._ref, language, cwd, env))

    async def list_code_contexts(self) -> List[CodeContext]:
        """The sandbox's code contexts."""
        return await self._run(core.list_code_contexts(self._ref))

    async def delete_code_context(self, context: Union[str, CodeContext]) -> None:
        """Stop a code context's interpreter."""
        await self._run(core.delete_code_context(self._ref, context))

    async def run_code(self, code: str, *, context: Union[str, CodeContext, None] = None,
                 language: Optional[str] = None, timeout: Optional[int] = None,
                 on_stdout: Optional[Callable[[str], Any]] = None,
                 on_stderr: Optional[Callable[[str], Any]] = None,
                 on_result: Optional[Callable[[Result], Any]] = None,
                 on_error: Optional[Callable[[ExecutionError], Any]] = None) -> Execution:
        """Run code in a context (default: the language's default context). With any
        ``on_*`` callback (a function or a coroutine function) the run is streamed and they
        are called as output comes."""
        cbs = CodeCallbacks(on_stdout, on_stderr, on_result, on_error)
        if not cbs.any():
            return await self._run(core.run_code(self._ref, code, context, language, timeout))
        resp = await self._run(core.run_code_stream(self._ref, code, context, language, timeout))
        async with AsyncEventStream(resp.stream, lambda d: d, core.CODE_END) as events:
            async for ev in events:
                for fn, arg in cbs.event(ev):
                    r = fn(arg)
                    if inspect.isawaitable(r):
                        await r
        return cbs.execution

    async def run_code_stream(self, code: str, *, context: Union[str, CodeContext, None] = None,
                        language: Optional[str] = None,
                        timeout: Optional[int] = None) -> AsyncEventStream[Dict[str, Any]]:
        """A code run's raw events (``stdout``, ``stderr``, ``result``, ``error``, then
        ``execution_complete``), as dicts."""
        resp = await self._run(core.run_code_stream(self._ref, code, context, language, timeout))
        return AsyncEventStream(resp.stream, lambda d: d, core.CODE_END)


    async def connect_websocket(self, port: int, path: str = "/") -> "AsyncWebSocket":
        """A WebSocket to a server on ``port`` inside the sandbox: an
        :class:`AsyncWebSocket`."""
        await self._run(core.ensure(self._ref))
        target = core.ws_path(self._ref, port, path)
        ws = await asyncio.get_running_loop().run_in_executor(None, lambda: open_websocket(
            self.client.url, target, None, self.client._headers, self.client.timeout,
            self.client._ssl_context))
        return AsyncWebSocket(ws)

    # ---- terminal ----
    async def terminal(self, *, session: Optional[str] = None, cols: int = 80,
                       rows: int = 24) -> "AsyncTerminal":
        """Attach to a session's terminal: an :class:`AsyncTerminal`."""
        await self._run(core.ensure(self._ref))
        query = {"cols": str(cols), "rows": str(rows)}
        sid = session or self._ref.session_id
        if sid is not None:
            query["session"] = core.check_id(sid, "sessionId")
        loop = asyncio.get_running_loop()
        t = await loop.run_in_executor(None, lambda: open_terminal(
            self.client.url, self._ref.base + "/pty", query, self.client._headers,
            self.client.timeout, self.client._ssl_context))
        return AsyncTerminal(t)


class AsyncWebSocket:
    """The asyncio face of :class:`cella.WebSocket` (its reads run in the loop's default
    executor)."""

    def __init__(self, ws: WebSocket) -> None:
        self.ws = ws
        """The underlying WebSocket."""

    async def send(self, data: Union[str, bytes]) -> None:
        """Send a text (``str``) or binary (``bytes``) message."""
        self.ws.send(data)

    async def recv(self, timeout: Optional[float] = None) -> Union[str, bytes, None]:
        """The next message (``str`` or ``bytes``), None once closed."""
        return await asyncio.get_running_loop().run_in_executor(None, self.ws.recv, timeout)

    async def close(self, code: int = 1000) -> None:
        """Close the connection."""
        self.ws.close(code)

    async def __aenter__(self) -> "AsyncWebSocket":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncTerminal:
    """The asyncio face of :class:`cella.Terminal` (its socket reads run in the loop's
    default executor)."""

    def __init__(self, terminal: Terminal) -> None:
        self.terminal = terminal
        """The underlying terminal."""

    @property
    def exit_code(self) -> Optional[int]:
        """The shell's exit status once it ended."""
        return self.terminal.exit_code

    async def read(self, timeout: Optional[float] = None) -> bytes:
        """The next output bytes; b"" once the terminal ended."""
        return await asyncio.get_running_loop().run_in_executor(None, self.terminal.read, timeout)

    async def write(self, data: Union[str, bytes]) -> None:
        """Type into the terminal."""
        self.terminal.write(data)

    async def resize(self, cols: int, rows: int) -> None:
        """Set the terminal's size."""
        self.terminal.resize(cols, rows)

    async def close(self) -> None:
        """Close the connection (the shell goes on)."""
        self.terminal.close()

    async def __aenter__(self) -> "AsyncTerminal":
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class AsyncSession(AsyncSandbox):
    """A session of a sandbox: the :class:`AsyncSandbox` methods, with commands, processes and
    env run in this session's persistent shell."""

    def __init__(self, client: AsyncClient, ref: SandboxRef, info: SessionInfo) -> None:
        super().__init__(client, ref)
        self.info = info
        """The session as it was when this object was made."""

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.info.id

    async def delete(self) -> None:
        """Delete this session."""
        await self._run(core.delete_session(self._ref, self.info.id))


class AsyncProcess(core.ProcessBase[AsyncSandbox]):
    """A background process of a sandbox."""

    async def status(self) -> ProcessInfo:
        """Fetch its current status (also kept in ``info``)."""
        self.info = await self.sandbox._run(core.get_process(self.sandbox._ref, self.id))
        return self.info

    async def logs(self) -> ProcessLogs:
        """Its whole output so far."""
        return await self.sandbox._run(core.process_logs(self.sandbox._ref, self.id))

    async def stream_logs(self) -> AsyncEventStream[LogEvent]:
        """Its output so far, then live output, then the ``exit`` event."""
        return await self.sandbox.stream_process_logs(self.id)

    async def wait_for_log(self, pattern: str, *, regex: bool = False,
                     timeout: Optional[int] = None) -> WaitForLogResult:
        """Wait for a line of its output containing ``pattern`` (``regex``: matching the
        POSIX extended regular expression). ``timeout`` in ms:
        :class:`cella.ProcessReadyTimeoutError` past it,
        :class:`cella.ProcessExitedBeforeReadyError` if it exits first."""
        return await self.sandbox._run(core.wait_for_log(self.sandbox._ref, self.id, pattern, regex,
                                                   timeout))

    async def wait_for_port(self, port: int, *, mode: Optional[str] = None, path: Optional[str] = None,
                      status: Any = None, interval: Optional[int] = None,
                      timeout: Optional[int] = None) -> None:
        """Wait until ``port`` accepts connections (``mode="http"``: answers ``path`` with
        a status in ``status``, a number or ``{"min","max"}``)."""
        await self.sandbox._run(core.wait_for_port(self.sandbox._ref, self.id, port, mode, path,
                                             status, interval, timeout))

    async def wait_for_exit(self, timeout: Optional[int] = None) -> ProcessInfo:
        """Wait for it to end; answers its final status."""
        self.info = await self.sandbox._run(core.wait_for_exit(self.sandbox._ref, self.id, timeout))
        return self.info

    async def kill(self, signal: Optional[str] = None) -> ProcessInfo:
        """Kill its whole tree; answers its final status."""
        self.info = await self.sandbox._run(core.kill_process(self.sandbox._ref, self.id, signal))
        return self.info
