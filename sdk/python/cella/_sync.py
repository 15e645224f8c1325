"""The synchronous client: :func:`connect`, :class:`Client`, :class:`Sandbox`,
:class:`Session`, :class:`Process` and the event streams."""

from __future__ import annotations

import ssl
from typing import (IO, Any, Callable, Dict, Generic, Iterable, Iterator, List, Literal,
                    Mapping, Optional, Sequence, TypeVar, Union, overload)

from . import _core as core
from . import errors
from ._core import CodeCallbacks, Op, SandboxRef
from ._http import CHUNK, Pool, SyncBody
from ._ws import Terminal, WebSocket, open_terminal, open_websocket
from .types import (CodeContext, ExecEvent, ExecResult, Execution, ExecutionError,
                    ExposedPort, FileInfo, GitCheckoutResult, LogEvent, ProcessInfo,
                    ProcessLogs, RawExecResult, Result, SandboxInfo, SessionInfo, SnapshotInfo,
                    WaitForLogResult,
                    WatchEvent, WriteResult, DirectoryBackup,
                    RestoreBackupResult)

T = TypeVar("T")
E = TypeVar("E")

__all__ = ["connect", "Client", "Sandbox", "Session", "Process", "EventStream", "RawExecStream"]


class EventStream(Generic[E]):
    """An iterator over the events of an SSE answer (exec_stream, watch, process logs,
    run_code_stream). Closing it (``close()``, leaving a ``with`` block, or dropping it)
    closes the connection, which stops the command or the watch in the sandbox. A stream
    cut before its last event raises :class:`cella.StreamClosedError`."""

    def __init__(self, body: SyncBody, decode: Callable[[Dict[str, Any]], E],
                 end: Optional[frozenset[str]]) -> None:
        self._body = body
        self._events = core.EventDecoder(decode, end)
        self._done = False

    def __iter__(self) -> "EventStream[E]":
        return self

    def __enter__(self) -> "EventStream[E]":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> E:
        while not self._events.ready:
            if self._done or self._events.ended:
                self._finish()
                raise StopIteration
            chunk = self._body.read1(65536)
            if not chunk:
                self._done = True
                self._body.close()
                self._events.at_eof()
                raise StopIteration
            self._events.feed(chunk)
        return self._events.take()

    def _finish(self) -> None:
        if self._done:
            return
        self._done = True
        # Read the rest (the chunked end) so the connection can be kept.
        try:
            while self._body.read1(65536):
                pass
        except errors.SandboxError:
            pass
        self._body.close()

    def close(self) -> None:
        """Stop reading and close the connection."""
        self._done = True
        self._body.close()

    def __del__(self) -> None:
        try:
            self._body.close()
        except Exception:
            pass


class RawExecStream:
    """The stdout of :meth:`Sandbox.exec_raw` as an iterator of ``bytes`` chunks, as they
    come (nothing decoded); then :meth:`result` says how the command ended. Closing it
    before the end (``close()``, leaving a ``with`` block, or dropping it) closes the
    connection, which stops the command. A connection cut before the end raises
    :class:`cella.StreamClosedError`."""

    def __init__(self, body: SyncBody, command: str, session_id: Optional[str],
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

    def __iter__(self) -> "RawExecStream":
        return self

    def __enter__(self) -> "RawExecStream":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __next__(self) -> bytes:
        chunk = self.read1(CHUNK)
        if not chunk:
            raise StopIteration
        return chunk

    def read1(self, n: int = CHUNK) -> bytes:
        """Up to ``n`` bytes of stdout as soon as some arrive; b"" at its end."""
        if self._ended:
            return b""
        chunk = self._body.read1(n)
        if not chunk:
            self._end()
        return chunk

    def readinto(self, buf: memoryview) -> int:
        """Fill ``buf`` with stdout as far as it goes (at least one byte); 0 at its end."""
        if self._ended:
            return 0
        n = self._body.readinto(buf)
        if not n:
            self._end()
        return n

    def _end(self) -> None:
        self._ended = True
        try:
            self._result = core.raw_exec_result(self._command, self._session_id,
                                                self._headers, self._body.trailers)
        except errors.SandboxError as e:
            self._error = e

    def result(self) -> RawExecResult:
        """How the command ended: its exit code, the first 64 KiB of its stderr, its
        duration. Reads (and drops) what stdout is still unread. Raises the error the
        command ended with (:class:`cella.CommandTimeoutError`,
        :class:`cella.SessionTerminatedError`, :class:`cella.SandboxUnavailableError`)."""
        while not self._ended:
            self.read1(CHUNK)
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result

    def close(self) -> None:
        """Stop reading and close the connection (the command is stopped if it runs)."""
        if not self._ended:
            self._ended = True
            self._error = errors.StreamClosedError("the stream was closed before its end",
                                                   http_status=0)
        self._body.close()

    def __del__(self) -> None:
        try:
            self._body.close()
        except Exception:
            pass


class Client(core.ClientBase["Sandbox"]):
    """A connection to one cellad (made by :func:`connect`). Thread-safe; keep one and
    reuse it: it owns the keep-alive connections and remembers which sandbox options it
    has sent."""

    def __init__(self, url: str = "http://127.0.0.1:7070", token: Optional[str] = None, *,
                 timeout: Optional[float] = 60.0, headers: Optional[Mapping[str, str]] = None,
                 pool_size: int = 8, ssl_context: Optional[ssl.SSLContext] = None) -> None:
        super().__init__(url, token, timeout, headers, ssl_context)
        self._pool = Pool(self.url, timeout, pool_size, ssl_context)

    def _run(self, op: Op[T]) -> T:
        try:
            req = next(op)
            while True:
                try:
                    resp = self._pool.send(req, self._headers)
                except errors.SandboxError as e:
                    req = op.throw(e)
                else:
                    req = op.send(resp)
        except StopIteration as stop:
            return stop.value  # type: ignore[no-any-return]

    def _handle(self, ref: SandboxRef, destroy_on_exit: bool) -> "Sandbox":
        return Sandbox(self, ref, destroy_on_exit)

    def health(self) -> Dict[str, Any]:
        """``GET /v1/health``."""
        return self._run(core.health())

    def list_sandboxes(self) -> List[SandboxInfo]:
        """Every sandbox (``GET /v1/sandboxes``)."""
        return self._run(core.list_sandboxes())

    # ---- snapshots ----
    def list_snapshots(self, sandbox: Optional[str] = None) -> List[SnapshotInfo]:
        """Every snapshot, oldest first; with ``sandbox``, those taken of that sandbox (also
        once it is destroyed: snapshots outlive their sandbox)."""
        return self._run(core.list_snapshots(sandbox))

    def get_snapshot(self, snapshot: str) -> SnapshotInfo:
        """A snapshot by id or name; :class:`cella.SnapshotNotFoundError` if there is none."""
        return self._run(core.get_snapshot(snapshot))

    def delete_snapshot(self, snapshot: str) -> str:
        """Delete a snapshot (by id or name); answers its id.
        :class:`cella.SnapshotInUseError` while a sandbox made from it exists,
        :class:`cella.SnapshotNotFoundError` if there is none."""
        return self._run(core.delete_snapshot(snapshot))

    def close(self) -> None:
        """Close the idle connections (the client stays usable)."""
        self._pool.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(url: str = "http://127.0.0.1:7070", token: Optional[str] = None, *,
            timeout: Optional[float] = 60.0, headers: Optional[Mapping[str, str]] = None,
            pool_size: int = 8, ssl_context: Optional[ssl.SSLContext] = None) -> Client:
    """A :class:`Client` for the cellad at ``url`` (sends nothing). ``token``: cellad's
    ``CELLA_TOKEN``; ``timeout``: seconds to wait for the daemon (None: forever)."""
    return Client(url, token, timeout=timeout, headers=headers, pool_size=pool_size,
                  ssl_context=ssl_context)


class Sandbox(core.SandboxBase[Client]):
    """A sandbox: commands, files, sessions, processes, ports, code, terminal.

    Made by :meth:`Client.sandbox`; the sandbox itself is created by the first operation.
    """

    def _run(self, op: Op[T]) -> T:
        return self.client._run(op)

    def __enter__(self) -> "Sandbox":
        return self

    def __exit__(self, *exc: object) -> None:
        if self._destroy_on_exit:
            self.destroy()

    # ---- lifecycle ----
    def create(self) -> SandboxInfo:
        """Create the sandbox now (or update it) with the handle's options."""
        return self._run(core.create(self._ref))

    def get_info(self) -> SandboxInfo:
        """The sandbox's state; :class:`cella.SandboxNotFoundError` if it does not exist."""
        return self._run(core.get_info(self._ref))

    def sleep(self) -> SandboxInfo:
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
        return self._run(core.sleep(self._ref))

    def destroy(self) -> bool:
        """Delete the sandbox and everything in it; answers whether it existed."""
        return self._run(core.destroy(self._ref))

    def set_keep_alive(self, keep_alive: bool) -> SandboxInfo:
        """Turn sleeping off (True) or on (one PUT)."""
        return self._run(core.set_options(self._ref, keep_alive=keep_alive))

    def set_sleep_after(self, sleep_after: Union[str, int]) -> SandboxInfo:
        """Set the idle time before the sandbox sleeps (``"30m"`` or seconds; one PUT)."""
        return self._run(core.set_options(self._ref, sleep_after=sleep_after))

    def set_labels(self, labels: Mapping[str, str]) -> SandboxInfo:
        """Replace the sandbox's labels (one PUT)."""
        return self._run(core.set_options(self._ref, labels=dict(labels)))

    # ---- snapshots and fork ----
    def create_snapshot(self, name: Optional[str] = None) -> SnapshotInfo:
        """A snapshot of the sandbox's files now (its processes are frozen for the copy and
        run on after). It outlives the sandbox; ``client.sandbox(id, from_snapshot=...)``
        makes sandboxes that start with its files. ``name``: 1-63 of ``a-z 0-9 . _ -``,
        unique (default: its id; a taken or bad one is
        :class:`cella.ValidationFailedError`). A sandbox that does not exist:
        :class:`cella.SandboxNotFoundError`."""
        return self._run(core.create_snapshot(self._ref, name))

    def list_snapshots(self) -> List[SnapshotInfo]:
        """The snapshots taken of this sandbox, oldest first."""
        return self._run(core.list_snapshots(self._ref.id))

    def fork(self, name: str, *, destroy_on_exit: bool = False,
             sleep_after: Union[str, int, None] = None, keep_alive: Optional[bool] = None,
             labels: Optional[Mapping[str, str]] = None, env: Optional[Mapping[str, str]] = None,
             network_allow: Optional[List[str]] = None,
             memory: bool = False) -> "Sandbox":
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
        self._run(core.fork(self._ref, child, memory))
        return Sandbox(self.client, child, destroy_on_exit)

    # ---- commands ----
    def exec(self, command: str, *, timeout: Optional[int] = None,
             env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> ExecResult:
        """Run ``command`` (bash) and wait for it. ``timeout`` in ms: past it the
        command's process tree is killed and :class:`cella.CommandTimeoutError` raised
        (its ``context`` has the output so far)."""
        return self._run(core.exec_(self._ref, command, timeout, env, cwd))

    def exec_stream(self, command: str, *, timeout: Optional[int] = None,
                    env: Optional[Mapping[str, str]] = None,
                    cwd: Optional[str] = None) -> EventStream[ExecEvent]:
        """Run ``command``, answering its events as they come: ``start``, ``stdout``/
        ``stderr``, then ``complete`` or ``error``. Closing the stream kills the command."""
        resp = self._run(core.exec_stream(self._ref, command, timeout, env, cwd))
        return EventStream(resp.stream, ExecEvent.from_json, core.EXEC_END)

    def exec_raw(self, command: str, *, timeout: Optional[int] = None,
                 env: Optional[Mapping[str, str]] = None,
                 cwd: Optional[str] = None) -> RawExecStream:
        """Run ``command`` and answer its stdout as it comes, as bytes (the raw form:
        nothing escaped or decoded, the fastest way to take bulk output); iterate it, then
        ``result()`` gives the exit code and the first 64 KiB of stderr. Errors before the
        command starts are raised here; how it ended (a timeout ...) by ``result()``.
        Closing the stream early kills the command."""
        resp = self._run(core.exec_raw(self._ref, command, timeout, env, cwd))
        return RawExecStream(resp.stream, command, self._ref.session_id, resp.headers)

    def set_env(self, env: Mapping[str, Optional[str]]) -> None:
        """Set (``None``: unset) environment variables of the sandbox (of the session, for a
        :class:`Session`), for every later command."""
        self._run(core.set_env(self._ref, env))

    # ---- files ----
    def write_file(self, path: Union[str, bytes],
                   content: Union[str, bytes, IO[bytes], Iterable[bytes]], *,
                   mode: Optional[int] = None, encoding: str = "utf-8") -> WriteResult:
        """Write a file (parents are created): text (encoded with ``encoding``), bytes, a
        binary file object (streamed from its position to its end) or an iterable of
        byte chunks. Any size. ``mode`` e.g. ``0o755``."""
        return self._run(core.write_file(self._ref, path, content, mode, encoding))  # type: ignore[arg-type]

    @overload
    def read_file(self, path: Union[str, bytes], encoding: Literal["bytes"]) -> bytes: ...

    @overload
    def read_file(self, path: Union[str, bytes],
                  encoding: Literal["utf-8", "utf8", "ascii", "latin-1"] = "utf-8") -> str: ...

    def read_file(self, path: Union[str, bytes], encoding: str = "utf-8") -> Union[str, bytes]:
        """A file's content: text decoded with ``encoding`` (invalid bytes raise
        :class:`UnicodeDecodeError`), or its bytes with ``encoding="bytes"``."""
        data = self._run(core.read_file(self._ref, path))  # type: ignore[arg-type]
        return data if encoding == "bytes" else data.decode(encoding)

    def read_file_to(self, path: Union[str, bytes], fileobj: IO[bytes]) -> int:
        """Stream a file of any size into a binary file object; answers the bytes read."""
        resp = self._run(core.read_file_stream(self._ref, path))  # type: ignore[arg-type]
        body: SyncBody = resp.stream
        buf = bytearray(CHUNK)
        view = memoryview(buf)
        total = 0
        try:
            while True:
                n = body.readinto(view)
                if not n:
                    break
                fileobj.write(view[:n])
                total += n
        finally:
            body.close()
        return total

    def read_file_stream(self, path: Union[str, bytes]) -> Iterator[bytes]:
        """A file's content as an iterator of byte chunks (streamed, any size)."""
        resp = self._run(core.read_file_stream(self._ref, path))  # type: ignore[arg-type]
        body: SyncBody = resp.stream

        def gen() -> Iterator[bytes]:
            try:
                while True:
                    chunk = body.read1(CHUNK)
                    if not chunk:
                        return
                    yield chunk
            finally:
                body.close()
        return gen()

    def list_files(self, path: Union[str, bytes] = "/workspace", *, recursive: bool = False,
                   include_hidden: bool = True) -> List[FileInfo]:
        """The entries of a directory (``recursive``: and below)."""
        return self._run(core.list_files(self._ref, path, recursive, include_hidden))  # type: ignore[arg-type]

    def exists(self, path: Union[str, bytes]) -> bool:
        """Whether ``path`` exists."""
        return self._run(core.exists(self._ref, path))  # type: ignore[arg-type]

    def mkdir(self, path: str, *, recursive: bool = False) -> None:
        """Make a directory (``recursive``: and its parents, no error if it exists)."""
        self._run(core.mkdir(self._ref, path, recursive))

    def delete_file(self, path: Union[str, bytes], *, recursive: bool = False) -> None:
        """Delete a file (a directory with ``recursive=True``)."""
        self._run(core.delete_file(self._ref, path, recursive))  # type: ignore[arg-type]

    def move_file(self, source: str, destination: str) -> None:
        """Move (rename) a file or directory."""
        self._run(core.move_file(self._ref, source, destination))

    def rename_file(self, old_path: str, new_path: str) -> None:
        """Rename a file: the same as :meth:`move_file`."""
        self._run(core.move_file(self._ref, old_path, new_path))

    def watch(self, path: str = "/workspace", *, recursive: bool = True,
              include: Optional[List[str]] = None,
              exclude: Optional[List[str]] = None) -> EventStream[WatchEvent]:
        """Watch a directory: ``watching`` once live, then an ``event`` per change
        (``overflow`` when some were lost). Close the stream to stop watching."""
        resp = self._run(core.watch(self._ref, path, recursive, include, exclude))
        return EventStream(resp.stream, WatchEvent.from_json, None)

    # ---- sessions ----
    def create_session(self, *, id: Optional[str] = None, cwd: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None,
                       command_timeout_ms: Optional[int] = None) -> "Session":
        """Make a session (a persistent shell): a :class:`Session` with this object's
        methods, run in it."""
        info = self._run(core.create_session(self._ref, id, cwd, env, command_timeout_ms))
        return Session(self.client, self._ref.in_session(info.id), info)

    def get_session(self, id: str) -> "Session":
        """An existing session; :class:`cella.SessionNotFoundError` otherwise."""
        info = self._run(core.get_session(self._ref, id))
        return Session(self.client, self._ref.in_session(info.id), info)

    def list_sessions(self) -> List[SessionInfo]:
        """The sandbox's sessions."""
        return self._run(core.list_sessions(self._ref))

    def delete_session(self, id: str) -> None:
        """Delete a session: its shell and everything it started are killed."""
        self._run(core.delete_session(self._ref, id))

    # ---- processes ----
    def start_process(self, command: str, *, process_id: Optional[str] = None,
                      env: Optional[Mapping[str, str]] = None,
                      cwd: Optional[str] = None) -> "Process":
        """Start a background process; answers once it has a pid."""
        info = self._run(core.start_process(self._ref, command, process_id, env, cwd))
        return Process(self, info)

    def list_processes(self) -> List["Process"]:
        """Every process the sandbox knows (oldest first)."""
        return [Process(self, i) for i in self._run(core.list_processes(self._ref))]

    def get_process(self, id: str) -> "Process":
        """A process by id or pid; :class:`cella.ProcessNotFoundError` otherwise."""
        return Process(self, self._run(core.get_process(self._ref, id)))

    def kill_process(self, id: str, signal: Optional[str] = None) -> ProcessInfo:
        """Kill a process's tree (SIGTERM, SIGKILL after 3 s; or ``signal`` as given)."""
        return self._run(core.kill_process(self._ref, id, signal))

    def kill_all_processes(self, signal: Optional[str] = None) -> int:
        """Kill every running process; answers how many."""
        return self._run(core.kill_all_processes(self._ref, signal))

    def get_process_logs(self, id: str) -> ProcessLogs:
        """A process's whole output so far."""
        return self._run(core.process_logs(self._ref, id))

    def stream_process_logs(self, id: str) -> EventStream[LogEvent]:
        """A process's output so far, then live, then its ``exit`` event."""
        resp = self._run(core.stream_process_logs(self._ref, id))
        return EventStream(resp.stream, LogEvent.from_json, core.LOG_END)

    # ---- ports ----
    def expose_port(self, port: int, *, name: Optional[str] = None,
                    token: Optional[str] = None) -> ExposedPort:
        """Expose a port of the sandbox; ``.url`` is its preview URL."""
        return self._run(core.expose_port(self._ref, port, name, token))

    def unexpose_port(self, port: int) -> None:
        """Stop exposing a port (its URL stops working)."""
        self._run(core.unexpose_port(self._ref, port))

    def get_exposed_ports(self) -> List[ExposedPort]:
        """The exposed ports with their URLs and status."""
        return self._run(core.get_exposed_ports(self._ref))

    # ---- git ----
    def git_checkout(self, repo_url: str, *, branch: Optional[str] = None,
                     target_dir: Optional[str] = None, depth: Optional[int] = None,
                     timeout: Optional[int] = None) -> GitCheckoutResult:
        """``git clone`` inside the sandbox (``timeout`` in ms, default 10 minutes)."""
        return self._run(core.git_checkout(self._ref, repo_url, branch, target_dir, depth,
                                           timeout))

    # ---- backups ----
    def create_backup(self, dir: str, *, name: Optional[str] = None,
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
        return self._run(core.create_backup(self._ref, dir, name, ttl, gitignore, excludes,
                                            consistent, multipart))

    def restore_backup(self, backup: Union[str, DirectoryBackup], *,
                       dir: Optional[str] = None) -> RestoreBackupResult:
        """Replace ``dir`` (default: the backup's) of this sandbox with the backup's content,
        all or nothing; the backup may be of another sandbox."""
        if dir is None and isinstance(backup, DirectoryBackup):
            dir = backup.dir
        return self._run(core.restore_backup(self._ref, backup, dir))

    def list_backups(self) -> List[DirectoryBackup]:
        """Every backup of the store (other sandboxes' and daemons' too), newest first."""
        return self._run(core.list_backups(self._ref))

    def delete_backup(self, backup: Union[str, DirectoryBackup]) -> None:
        """Delete a backup (:class:`BackupNotFoundError` if there is none)."""
        self._run(core.delete_backup(self._ref, backup))

    # ---- code interpreter ----
    def create_code_context(self, *, language: Optional[str] = None, cwd: Optional[str] = None,
                            env: Optional[Mapping[str, str]] = None) -> CodeContext:
        """Start an interpreter (``python``, ``javascript``, ``typescript``) whose variables
        persist from one run to the next."""
        return self._run(core.create_code_context(self._ref, language, cwd, env))

    def list_code_contexts(self) -> List[CodeContext]:
        """The sandbox's code contexts."""
        return self._run(core.list_code_contexts(self._ref))

    def delete_code_context(self, context: Union[str, CodeContext]) -> None:
        """Stop a code context's interpreter."""
        self._run(core.delete_code_context(self._ref, context))

    def run_code(self, code: str, *, context: Union[str, CodeContext, None] = None,
                 language: Optional[str] = None, timeout: Optional[int] = None,
                 on_stdout: Optional[Callable[[str], Any]] = None,
                 on_stderr: Optional[Callable[[str], Any]] = None,
                 on_result: Optional[Callable[[Result], Any]] = None,
                 on_error: Optional[Callable[[ExecutionError], Any]] = None) -> Execution:
        """Run code in a context (default: the language's default context). With any
        ``on_*`` callback the run is streamed and they are called as output comes."""
        cbs = CodeCallbacks(on_stdout, on_stderr, on_result, on_error)
        if not cbs.any():
            return self._run(core.run_code(self._ref, code, context, language, timeout))
        resp = self._run(core.run_code_stream(self._ref, code, context, language, timeout))
        with EventStream(resp.stream, lambda d: d, core.CODE_END) as events:
            for ev in events:
                for fn, arg in cbs.event(ev):
                    fn(arg)
        return cbs.execution

    def run_code_stream(self, code: str, *, context: Union[str, CodeContext, None] = None,
                        language: Optional[str] = None,
                        timeout: Optional[int] = None) -> EventStream[Dict[str, Any]]:
        """A code run's raw events (``stdout``, ``stderr``, ``result``, ``error``, then
        ``execution_complete``), as dicts."""
        resp = self._run(core.run_code_stream(self._ref, code, context, language, timeout))
        return EventStream(resp.stream, lambda d: d, core.CODE_END)


    def connect_websocket(self, port: int, path: str = "/") -> WebSocket:
        """A WebSocket to a server listening on ``port`` inside the sandbox (through
        ``GET .../ws/{port}/path``; the port need not be exposed)."""
        self._run(core.ensure(self._ref))
        return open_websocket(self.client.url, core.ws_path(self._ref, port, path), None,
                              self.client._headers, self.client.timeout,
                              self.client._ssl_context)

    # ---- terminal ----
    def terminal(self, *, session: Optional[str] = None, cols: int = 80,
                 rows: int = 24) -> Terminal:
        """Attach to the terminal of a session (default: this handle's session, else
        ``default``): a :class:`cella.Terminal` over the WebSocket ``GET .../pty``."""
        ref = self._ref
        self._run(core.ensure(ref))
        query = {"cols": str(cols), "rows": str(rows)}
        sid = session or ref.session_id
        if sid is not None:
            query["session"] = core.check_id(sid, "sessionId")
        return open_terminal(self.client.url, ref.base + "/pty", query,
                             self.client._headers, self.client.timeout,
                             self.client._ssl_context)


class Session(Sandbox):
    """A session of a sandbox: the :class:`Sandbox` methods, with commands, processes and
    env run in this session's persistent shell."""

    def __init__(self, client: Client, ref: SandboxRef, info: SessionInfo) -> None:
        super().__init__(client, ref)
        self.info = info
        """The session as it was when this object was made."""

    @property
    def session_id(self) -> str:
        """The session's id."""
        return self.info.id

    def delete(self) -> None:
        """Delete this session."""
        self._run(core.delete_session(self._ref, self.info.id))


class Process(core.ProcessBase[Sandbox]):
    """A background process of a sandbox."""

    def status(self) -> ProcessInfo:
        """Fetch its current status (also kept in ``info``)."""
        self.info = self.sandbox._run(core.get_process(self.sandbox._ref, self.id))
        return self.info

    def logs(self) -> ProcessLogs:
        """Its whole output so far."""
        return self.sandbox._run(core.process_logs(self.sandbox._ref, self.id))

    def stream_logs(self) -> EventStream[LogEvent]:
        """Its output so far, then live output, then the ``exit`` event."""
        return self.sandbox.stream_process_logs(self.id)

    def wait_for_log(self, pattern: str, *, regex: bool = False,
                     timeout: Optional[int] = None) -> WaitForLogResult:
        """Wait for a line of its output containing ``pattern`` (``regex``: matching the
        POSIX extended regular expression). ``timeout`` in ms:
        :class:`cella.ProcessReadyTimeoutError` past it,
        :class:`cella.ProcessExitedBeforeReadyError` if it exits first."""
        return self.sandbox._run(core.wait_for_log(self.sandbox._ref, self.id, pattern, regex,
                                                   timeout))

    def wait_for_port(self, port: int, *, mode: Optional[str] = None, path: Optional[str] = None,
                      status: Any = None, interval: Optional[int] = None,
                      timeout: Optional[int] = None) -> None:
        """Wait until ``port`` accepts connections (``mode="http"``: answers ``path`` with
        a status in ``status``, a number or ``{"min","max"}``)."""
        self.sandbox._run(core.wait_for_port(self.sandbox._ref, self.id, port, mode, path,
                                             status, interval, timeout))

    def wait_for_exit(self, timeout: Optional[int] = None) -> ProcessInfo:
        """Wait for it to end; answers its final status."""
        self.info = self.sandbox._run(core.wait_for_exit(self.sandbox._ref, self.id, timeout))
        return self.info

    def kill(self, signal: Optional[str] = None) -> ProcessInfo:
        """Kill its whole tree; answers its final status."""
        self.info = self.sandbox._run(core.kill_process(self.sandbox._ref, self.id, signal))
        return self.info
