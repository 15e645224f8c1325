"""Result types: dataclasses decoded from cellad's JSON answers (docs/api.md).

Every class keeps the answer it was made of in ``raw`` (a dict), so fields this version of
the SDK does not name are still reachable.
"""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional

__all__ = [
    "ExecResult", "RawExecResult", "ExecEvent", "SandboxInfo", "SessionInfo", "FileInfo", "WriteResult",
    "ProcessInfo", "ProcessLogs", "LogEvent", "ExposedPort", "WatchEvent", "CodeContext",
    "Result", "ExecutionError", "Logs", "Execution", "GitCheckoutResult", "WaitForLogResult",
    "SnapshotInfo",
    "DirectoryBackup", "RestoreBackupResult", "RestoredFrom",
]


def _str(d: Mapping[str, Any], key: str, default: str = "") -> str:
    v = d.get(key)
    return v if isinstance(v, str) else default


def _int(d: Mapping[str, Any], key: str, default: int = 0) -> int:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


def _opt_int(d: Mapping[str, Any], key: str) -> Optional[int]:
    v = d.get(key)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _bool(d: Mapping[str, Any], key: str, default: bool = False) -> bool:
    v = d.get(key)
    return v if isinstance(v, bool) else default


def _opt_str(d: Mapping[str, Any], key: str) -> Optional[str]:
    v = d.get(key)
    return v if isinstance(v, str) else None


def _output_event(d: Mapping[str, Any]) -> Dict[str, Any]:
    """The fields an output event of a stream (exec, process logs) has whatever its kind:
    type, data and data_bytes, exit_code, timestamp, raw."""
    return {"type": _str(d, "type"), "data": output_text(d, "data"),
            "data_bytes": output_bytes(d, "data"), "exit_code": _opt_int(d, "exitCode"),
            "timestamp": _str(d, "timestamp"), "raw": dict(d)}


def _b64(text: str) -> bytes:
    try:
        return base64.b64decode(text, validate=False)
    except (binascii.Error, ValueError):
        return b""


def output_bytes(d: Mapping[str, Any], key: str) -> bytes:
    """The exact bytes of an output field (``stdout``, ``stderr``, ``data``): base64 when
    its ``<key>Encoding`` (or ``encoding``) says so, else UTF-8 text."""
    text = _str(d, key)
    enc = d.get(key + "Encoding", d.get("encoding") if key == "data" else None)
    if enc == "base64":
        return _b64(text)
    return text.encode("utf-8")


def output_text(d: Mapping[str, Any], key: str) -> str:
    """An output field as text: UTF-8 as sent, or base64 bytes decoded with U+FFFD for the
    bytes that are not UTF-8."""
    enc = d.get(key + "Encoding", d.get("encoding") if key == "data" else None)
    if enc == "base64":
        return _b64(_str(d, key)).decode("utf-8", "replace")
    return _str(d, key)


@dataclass
class RawExecResult:
    """How a command run by :meth:`Sandbox.exec_raw` ended (its stdout was the stream).
    A non-zero exit is a result, not an error."""

    exit_code: int
    """The command's exit status (128+N when killed by signal N)."""
    stderr: bytes
    """The first 64 KiB of its standard error, as bytes."""
    stderr_truncated: bool
    """Whether it wrote more standard error than ``stderr`` holds."""
    duration: int
    """How long it ran, in ms."""
    pid: int
    """Its pid in the sandbox."""
    command: str = ""
    """The command as sent."""
    trailers: Dict[str, str] = field(default_factory=dict, repr=False)
    """The answer's trailer fields as cellad sent them (lower-case names, repeated fields
    joined with ``,``)."""

    @property
    def success(self) -> bool:
        """``exit_code == 0``."""
        return self.exit_code == 0


@dataclass
class ExecResult:
    """The result of :meth:`Sandbox.exec`. A non-zero exit is a result, not an error."""

    exit_code: int
    """The command's exit status (128+N when killed by signal N)."""
    stdout: str
    """Its standard output as text (bytes that are not UTF-8 shown as U+FFFD; the exact
    bytes are in ``stdout_bytes``)."""
    stderr: str
    """Its standard error as text (see ``stdout``)."""
    success: bool
    """``exit_code == 0``."""
    duration: int
    """How long it ran, in ms."""
    command: str = ""
    """The command as sent."""
    session_id: Optional[str] = None
    """The session it ran in."""
    timestamp: str = ""
    """When it ended (ISO-8601 UTC)."""
    truncated: bool = False
    """Whether cellad kept only the first part of the output (docs/api.md, limits)."""
    stdout_bytes: bytes = b""
    """The exact bytes of standard output."""
    stderr_bytes: bytes = b""
    """The exact bytes of standard error."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The answer as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ExecResult":
        """Decode an ExecResult answer."""
        code = _int(d, "exitCode", -1)
        return cls(exit_code=code, stdout=output_text(d, "stdout"),
                   stderr=output_text(d, "stderr"), success=_bool(d, "success", code == 0),
                   duration=_int(d, "duration"), command=_str(d, "command"),
                   session_id=_opt_str(d, "sessionId"),
                   timestamp=_str(d, "timestamp"), truncated=_bool(d, "truncated"),
                   stdout_bytes=output_bytes(d, "stdout"),
                   stderr_bytes=output_bytes(d, "stderr"), raw=dict(d))


@dataclass
class ExecEvent:
    """One event of :meth:`Sandbox.exec_stream`: ``type`` is ``start``, ``stdout``,
    ``stderr``, ``complete`` or ``error``."""

    type: str
    """The event's kind."""
    data: str = ""
    """The output of a ``stdout``/``stderr`` event as text (see ``data_bytes``)."""
    data_bytes: bytes = b""
    """The exact bytes of a ``stdout``/``stderr`` event."""
    exit_code: Optional[int] = None
    """``complete``: the exit status (``error`` of a terminated session: its status)."""
    duration: Optional[int] = None
    """``complete``: the run time in ms."""
    error: Optional[str] = None
    """``error``: the message."""
    code: Optional[str] = None
    """``error``: the API error code (e.g. ``COMMAND_TIMEOUT``)."""
    pid: Optional[int] = None
    """``start``: the command's pid."""
    timestamp: str = ""
    """When cellad sent the event."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The event as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ExecEvent":
        """Decode one SSE event of an exec stream."""
        return cls(**_output_event(d), duration=_opt_int(d, "duration"),
                   error=_opt_str(d, "error"), code=_opt_str(d, "code"), pid=_opt_int(d, "pid"))


@dataclass
class RestoredFrom:
    """The backup a cluster's failover restored a sandbox's files from (docs/api.md,
    "Cluster")."""

    backup_id: str
    """The backup's id."""
    created_at: str = ""
    """When the backup was made."""
    dir: str = ""
    """The directory it held."""

    @classmethod
    def from_json(cls, d: Any) -> Optional["RestoredFrom"]:
        """Decode SandboxInfo's ``restoredFrom``; None when absent."""
        if not isinstance(d, dict) or not isinstance(d.get("backupId"), str):
            return None
        return cls(backup_id=d["backupId"], created_at=_str(d, "createdAt"), dir=_str(d, "dir"))


@dataclass
class SandboxInfo:
    """A sandbox as ``GET /v1/sandboxes/{id}`` describes it."""

    id: str
    """Its name."""
    state: str
    """``running``, ``sleeping`` or ``stopped``."""
    image: str = ""
    """Its image."""
    created_at: str = ""
    """When the name came to exist."""
    last_active_at: str = ""
    """Its last activity."""
    labels: Dict[str, str] = field(default_factory=dict)
    """Its labels."""
    env: Dict[str, str] = field(default_factory=dict)
    """Its environment (setEnvVars)."""
    sleep_after: int = 0
    """Idle seconds before it sleeps."""
    keep_alive: bool = False
    """Whether sleep is disabled."""
    network: str = ""
    """``none`` or ``outbound``."""
    instance_type: str = ""
    """Its instance type (``lite``, ``standard-1``, ...)."""
    enable_default_session: bool = True
    """Whether commands without a session run in its default session."""
    network_allow: List[str] = field(default_factory=list)
    """Destinations opened before the private-range refusals (``a.b.c.d[/n][:port]``)."""
    network_address: Optional[str] = None
    """Its address on the host's sandbox network, when it has one."""
    disk_limit_bytes: Optional[int] = None
    """Its disk's size limit in bytes (``disk.limitBytes``)."""
    disk_used_bytes: Optional[int] = None
    """What its disk holds in bytes (``disk.usedBytes``)."""
    sleep_mode_requested: str = "files"
    """The sleep mode asked for: ``files`` or ``memory``."""
    sleep_mode: str = "files"
    """What a sleep does on this host: ``files`` or ``memory``."""
    sleep_mode_fallback: Optional[str] = None
    """When the two differ: why, in one line."""
    memory_snapshot_bytes: Optional[int] = None
    """While it sleeps with its memory: the size of its checkpoint on disk."""
    memory_sleep_error: Optional[str] = None
    """Why its last memory sleep or wake fell back to its files, if it did."""
    tenant: Optional[str] = None
    """The tenant it belongs to (absent for the admin's sandboxes)."""
    node: Optional[str] = None
    """On a cluster: the node it runs on."""
    forked_with_memory: bool = False
    """In a fork's answer: True when it was forked with its parent's processes."""
    snapshot: Optional[str] = None
    """The id of the snapshot it was made from (``from_snapshot``, ``fork``), if any."""
    restored_from: Optional[RestoredFrom] = None
    """On a cluster node: the backup its files were restored from when it was placed anew
    after its node went, if any."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The answer as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SandboxInfo":
        """Decode a SandboxInfo answer."""
        labels = d.get("labels")
        env = d.get("env")
        allow = d.get("networkAllow")
        raw_disk = d.get("disk")
        disk: Mapping[str, Any] = raw_disk if isinstance(raw_disk, dict) else {}
        return cls(id=_str(d, "id"), state=_str(d, "state"), image=_str(d, "image"),
                   created_at=_str(d, "createdAt"), last_active_at=_str(d, "lastActiveAt"),
                   labels=dict(labels) if isinstance(labels, dict) else {},
                   env=dict(env) if isinstance(env, dict) else {},
                   sleep_after=_int(d, "sleepAfter"), keep_alive=_bool(d, "keepAlive"),
                   network=_str(d, "network"), instance_type=_str(d, "instanceType"),
                   enable_default_session=_bool(d, "enableDefaultSession", True),
                   network_allow=[a for a in allow if isinstance(a, str)]
                   if isinstance(allow, list) else [],
                   network_address=_opt_str(d, "networkAddress"),
                   disk_limit_bytes=_opt_int(disk, "limitBytes"),
                   disk_used_bytes=_opt_int(disk, "usedBytes"),
                   sleep_mode_requested=_str(d, "sleepModeRequested", "files"),
                   sleep_mode=_str(d, "sleepMode", "files"),
                   sleep_mode_fallback=_opt_str(d, "sleepModeFallback"),
                   memory_snapshot_bytes=_opt_int(d, "memorySnapshotBytes"),
                   memory_sleep_error=_opt_str(d, "memorySleepError"),
                   tenant=_opt_str(d, "tenant"), node=_opt_str(d, "node"),
                   forked_with_memory=_bool(d, "forkedWithMemory"),
                   snapshot=_opt_str(d, "snapshot"),
                   restored_from=RestoredFrom.from_json(d.get("restoredFrom")), raw=dict(d))


@dataclass
class SnapshotInfo:
    """A snapshot: a sandbox's files at one moment (``GET /v1/snapshots/{id}``)."""

    id: str
    """``snap-`` and 16 hex digits (the API's ``snapshotId``)."""
    name: str
    """Its name: the one given to ``create_snapshot``, else its id."""
    sandbox: str = ""
    """The sandbox it was taken of (which may since have been destroyed)."""
    image: str = ""
    """The image under it: sandboxes made from it have this image."""
    size_bytes: int = 0
    """Bytes it occupies on cellad's disk (counted once, however many sandboxes use it)."""
    created_at: str = ""
    """When it was taken (ISO-8601)."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The answer as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SnapshotInfo":
        """Decode a Snapshot answer."""
        return cls(id=_str(d, "snapshotId"), name=_str(d, "name"), sandbox=_str(d, "sandbox"),
                   image=_str(d, "image"), size_bytes=_int(d, "sizeBytes"),
                   created_at=_str(d, "createdAt"), raw=dict(d))


@dataclass
class SessionInfo:
    """A session (a persistent shell) as cellad describes it."""

    id: str
    """Its id."""
    cwd: str = ""
    """The shell's current directory."""
    created_at: str = ""
    """When it was made."""
    running: bool = False
    """Whether its shell is alive."""
    busy: bool = False
    """Whether a command runs."""
    command_timeout_ms: Optional[int] = None
    """Its commands' default timeout."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The answer as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "SessionInfo":
        """Decode a SessionInfo answer."""
        return cls(id=_str(d, "id"), cwd=_str(d, "cwd"), created_at=_str(d, "createdAt"),
                   running=_bool(d, "running"), busy=_bool(d, "busy"),
                   command_timeout_ms=_opt_int(d, "commandTimeoutMs"), raw=dict(d))


@dataclass
class FileInfo:
    """One entry of :meth:`Sandbox.list_files`."""

    name: str
    """The file's name (invalid UTF-8 shown as U+FFFD)."""
    absolute_path: str
    """Its absolute path."""
    relative_path: str
    """Its path relative to the listed directory."""
    type: str
    """``file``, ``directory``, ``symlink`` or ``other``."""
    size: int = 0
    """Its size in bytes."""
    modified_at: str = ""
    """Its modification time."""
    mode: str = ""
    """Its permissions as ``rwxr-xr-x``."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The entry as cellad sent it (``absolutePathBase64`` for names not UTF-8)."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "FileInfo":
        """Decode a FileInfo."""
        return cls(name=_str(d, "name"), absolute_path=_str(d, "absolutePath"),
                   relative_path=_str(d, "relativePath"), type=_str(d, "type"),
                   size=_int(d, "size"), modified_at=_str(d, "modifiedAt"),
                   mode=_str(d, "mode"), raw=dict(d))

    @property
    def is_dir(self) -> bool:
        """Whether the entry is a directory."""
        return self.type == "directory"


@dataclass
class WriteResult:
    """What :meth:`Sandbox.write_file` wrote."""

    path: str
    """The path written."""
    size: int
    """The bytes written."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The answer as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "WriteResult":
        """Decode a write answer."""
        return cls(path=_str(d, "path"), size=_int(d, "size"), raw=dict(d))


@dataclass
class ProcessInfo:
    """A background process's status (ProcessInfo in docs/api.md)."""

    id: str
    """Its process id (``processId``)."""
    pid: int
    """Its numeric pid inside the sandbox."""
    command: str
    """Its command line."""
    status: str
    """``running``, ``completed``, ``failed``, ``killed`` or ``error``."""
    start_time: str = ""
    """When it started."""
    end_time: Optional[str] = None
    """When it ended."""
    exit_code: Optional[int] = None
    """Its exit status once ended."""
    signal: Optional[int] = None
    """The signal that ended it."""
    session_id: Optional[str] = None
    """The session it was started in."""
    error: Optional[str] = None
    """Why it could not start (status ``error``)."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The answer as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessInfo":
        """Decode a ProcessInfo answer."""
        return cls(id=_str(d, "id"), pid=_int(d, "pid"), command=_str(d, "command"),
                   status=_str(d, "status"), start_time=_str(d, "startTime"),
                   end_time=_opt_str(d, "endTime"),
                   exit_code=_opt_int(d, "exitCode"), signal=_opt_int(d, "signal"),
                   session_id=_opt_str(d, "sessionId"), error=_opt_str(d, "error"),
                   raw=dict(d))


@dataclass
class ProcessLogs:
    """A process's whole output so far."""

    stdout: str
    """Standard output as text."""
    stderr: str
    """Standard error as text."""
    process_id: str = ""
    """The process's id."""
    truncated: bool = False
    """Whether the log stopped growing at its cap."""
    stdout_bytes: bytes = b""
    """The exact bytes of standard output."""
    stderr_bytes: bytes = b""
    """The exact bytes of standard error."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ProcessLogs":
        """Decode a logs answer."""
        return cls(stdout=output_text(d, "stdout"), stderr=output_text(d, "stderr"),
                   process_id=_str(d, "processId"), truncated=_bool(d, "truncated"),
                   stdout_bytes=output_bytes(d, "stdout"), stderr_bytes=output_bytes(d, "stderr"))


@dataclass
class LogEvent:
    """One event of a process's log stream: ``stdout``, ``stderr``, then ``exit``."""

    type: str
    """The event's kind."""
    data: str = ""
    """The output as text."""
    data_bytes: bytes = b""
    """The output's exact bytes."""
    exit_code: Optional[int] = None
    """``exit``: the exit status."""
    status: Optional[str] = None
    """``exit``: the process's final status."""
    timestamp: str = ""
    """When cellad sent it."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The event as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "LogEvent":
        """Decode one SSE event of a process stream."""
        return cls(**_output_event(d), status=_opt_str(d, "status"))


@dataclass
class WaitForLogResult:
    """The line :meth:`Process.wait_for_log` found."""

    line: str
    """The matching line, without its newline."""
    stream: str
    """``stdout`` or ``stderr``."""


@dataclass
class ExposedPort:
    """An exposed port and its preview URL."""

    url: str
    """The preview URL."""
    port: int
    """The sandbox's port."""
    name: Optional[str] = None
    """Its name, if one was given."""
    status: Optional[str] = None
    """``active`` or ``stale`` (from :meth:`Sandbox.get_exposed_ports`)."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ExposedPort":
        """Decode a port answer."""
        return cls(url=_str(d, "url"), port=_int(d, "port"), name=_opt_str(d, "name"),
                   status=_opt_str(d, "status"))


@dataclass
class WatchEvent:
    """One event of :meth:`Sandbox.watch`: ``watching``, ``event`` or ``overflow``."""

    type: str
    """The event's kind."""
    event_type: Optional[str] = None
    """``event``: ``create``, ``modify``, ``delete``, ``move_from`` or ``move_to``."""
    path: str = ""
    """The path concerned."""
    is_directory: bool = False
    """Whether it is a directory."""
    timestamp: str = ""
    """When cellad sent it."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The event as cellad sent it."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "WatchEvent":
        """Decode one SSE event of a watch."""
        return cls(type=_str(d, "type"), event_type=_opt_str(d, "eventType"),
                   path=_str(d, "path"), is_directory=_bool(d, "isDirectory"),
                   timestamp=_str(d, "timestamp"), raw=dict(d))


@dataclass
class CodeContext:
    """A code interpreter context: a long-lived interpreter whose variables persist."""

    id: str
    """Its id (give it as ``context=`` to :meth:`Sandbox.run_code`)."""
    language: str
    """``python``, ``javascript`` or ``typescript``."""
    cwd: str = ""
    """Its working directory."""
    status: str = ""
    """``starting``, ``ready``, ``busy`` or ``dead``."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "CodeContext":
        """Decode a context answer."""
        return cls(id=_str(d, "id"), language=_str(d, "language"), cwd=_str(d, "cwd"),
                   status=_str(d, "status"))


@dataclass
class Result:
    """One result of a code run: the value of the last expression (``is_main_result``) or
    a displayed object (e.g. a matplotlib figure)."""

    text: Optional[str] = None
    """The plain-text form."""
    html: Optional[str] = None
    """HTML (pandas DataFrames)."""
    png: Optional[bytes] = None
    """A PNG image's bytes (every matplotlib figure)."""
    jpeg: Optional[bytes] = None
    """A JPEG image's bytes."""
    svg: Optional[str] = None
    """An SVG image."""
    markdown: Optional[str] = None
    """Markdown."""
    latex: Optional[str] = None
    """LaTeX."""
    javascript: Optional[str] = None
    """JavaScript."""
    data: Any = None
    """Structured data: the ``json`` form (decoded), when there is one."""
    is_main_result: bool = False
    """Whether this is the value of the run's last expression."""
    raw: Dict[str, Any] = field(default_factory=dict, repr=False)
    """The result as cellad sent it (its ``png`` still base64)."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Result":
        """Decode one result."""
        def s(key: str) -> Optional[str]:
            return _opt_str(d, key)

        def img(key: str) -> Optional[bytes]:
            v = d.get(key)
            return _b64(v) if isinstance(v, str) else None

        return cls(text=s("text"), html=s("html"), png=img("png"), jpeg=img("jpeg"),
                   svg=s("svg"), markdown=s("markdown"), latex=s("latex"),
                   javascript=s("javascript"), data=d.get("json"),
                   is_main_result=_bool(d, "isMainResult"), raw=dict(d))

    def formats(self) -> List[str]:
        """The forms this result has (``text``, ``png``...)."""
        return [k for k in ("text", "html", "png", "jpeg", "svg", "markdown", "latex",
                            "javascript") if getattr(self, k) is not None] + (
            ["data"] if self.data is not None else [])


@dataclass
class ExecutionError:
    """The exception a code run raised."""

    ename: str
    """The exception's class name (``ZeroDivisionError``), or ``CONTEXT_DEAD``."""
    evalue: str
    """Its message."""
    traceback: List[str] = field(default_factory=list)
    """The traceback's lines."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "ExecutionError":
        """Decode a run's error (``{name, message/value, traceback}``)."""
        tb = d.get("traceback")
        lines: List[str] = []
        if isinstance(tb, list):
            lines = [str(x) for x in tb]
        elif isinstance(tb, str):
            lines = tb.splitlines()
        return cls(ename=_str(d, "name", _str(d, "ename")),
                   evalue=_str(d, "message", _str(d, "value", _str(d, "evalue"))),
                   traceback=lines)


@dataclass
class Logs:
    """A code run's printed output, as the pieces it was written in."""

    stdout: List[str] = field(default_factory=list)
    """What it wrote to standard output."""
    stderr: List[str] = field(default_factory=list)
    """What it wrote to standard error."""


@dataclass
class Execution:
    """The outcome of :meth:`Sandbox.run_code`."""

    results: List[Result] = field(default_factory=list)
    """Its results, in order."""
    logs: Logs = field(default_factory=Logs)
    """Its printed output."""
    error: Optional[ExecutionError] = None
    """The exception it raised, if any."""
    execution_count: int = 0
    """The context's run counter."""
    timed_out: bool = False
    """Whether its ``timeout`` interrupted it."""

    @property
    def text(self) -> Optional[str]:
        """The main result's text, if there is one."""
        for r in self.results:
            if r.is_main_result:
                return r.text
        return None

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "Execution":
        """Decode an Execution answer."""
        res = d.get("results")
        logs = d.get("logs")
        err = d.get("error")
        lg = Logs()
        if isinstance(logs, dict):
            lg = Logs(stdout=[str(x) for x in logs.get("stdout") or []],
                      stderr=[str(x) for x in logs.get("stderr") or []])
        return cls(results=[Result.from_json(r) for r in res if isinstance(r, dict)]
                   if isinstance(res, list) else [],
                   logs=lg, error=ExecutionError.from_json(err) if isinstance(err, dict) else None,
                   execution_count=_int(d, "executionCount"), timed_out=_bool(d, "timedOut"))


@dataclass
class GitCheckoutResult:
    """What :meth:`Sandbox.git_checkout` cloned."""

    repo_url: str
    """The URL, without credentials."""
    branch: str
    """The branch checked out (the remote's default when none was asked)."""
    target_dir: str
    """Where it was cloned."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "GitCheckoutResult":
        """Decode a checkout answer."""
        return cls(repo_url=_str(d, "repoUrl"), branch=_str(d, "branch"),
                   target_dir=_str(d, "targetDir"))


@dataclass
class DirectoryBackup:
    """A backup of one directory (:meth:`Sandbox.create_backup`; docs/api.md "Backups"):
    the hosted SDK's ``{id, dir}`` handle plus what cellad says of it."""

    id: str
    dir: str
    name: Optional[str] = None
    sandbox: str = ""
    """The sandbox it was made of."""
    size_bytes: int = 0
    """Bytes of its archive (zstd tar) in the store."""
    created_at: str = ""
    expires_at: str = ""
    """ISO time after which it cannot be restored and is removed."""

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "DirectoryBackup":
        """Decode a backup."""
        return cls(id=_str(d, "id"), dir=_str(d, "dir"), name=_opt_str(d, "name"),
                   sandbox=_str(d, "sandbox"), size_bytes=_int(d, "sizeBytes"),
                   created_at=_str(d, "createdAt"), expires_at=_str(d, "expiresAt"))


@dataclass
class RestoreBackupResult:
    """What :meth:`Sandbox.restore_backup` did (the hosted SDK's ``{success, dir, id}``)."""

    success: bool
    dir: str
    id: str

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "RestoreBackupResult":
        """Decode a restore answer."""
        return cls(success=_bool(d, "success"), dir=_str(d, "dir"), id=_str(d, "id"))
