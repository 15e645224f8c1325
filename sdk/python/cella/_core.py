"""What every call sends and how its answer is decoded, shared by the sync and the asyncio
clients.

An operation is a generator: it yields :class:`Request` objects and is sent back a
:class:`Response` for each (or has the call's :class:`SandboxError` thrown into it), and
returns the call's result. The sync driver (``_sync.py``) and the asyncio driver
(``_async.py``) only move bytes; so lazy creation (the ``PUT`` of a handle's options, the
re-try of a first read of a sandbox that does not exist yet), request bodies and result
decoding exist once.
"""

from __future__ import annotations

import base64
import binascii
import collections
import json
import re
import ssl
import threading
from dataclasses import dataclass, field
from typing import (IO, Any, Callable, Deque, Dict, Generator, Generic, Iterable, List,
                    Mapping, Optional, Sequence, Tuple, TypeVar, Union)
from urllib.parse import quote, urlencode

from . import errors
from ._sse import SSEParser
from ._wire import Trailers
from .types import (CodeContext, ExecResult, RawExecResult, ExecEvent, Execution, ExecutionError,
                    ExposedPort, FileInfo, GitCheckoutResult, ProcessInfo, ProcessLogs, Result,
                    SandboxInfo, SessionInfo, SnapshotInfo, WaitForLogResult, WriteResult, Logs,
                    DirectoryBackup, RestoreBackupResult)

T = TypeVar("T")
E = TypeVar("E")
H = TypeVar("H")
C = TypeVar("C")
S = TypeVar("S")

VERSION = "0.1.0"

Body = Union[bytes, IO[bytes], Iterable[bytes], None]
"""A raw request body: bytes, a binary file object (read to its end), or an iterable of
byte chunks (sent chunked)."""


@dataclass
class Request:
    """One HTTP request of an operation."""

    method: str
    path: str
    query: Optional[Mapping[str, str]] = None
    json: Any = None
    body: Body = None
    headers: Dict[str, str] = field(default_factory=dict)
    stream: bool = False
    """Leave the answer's body open (SSE, downloads)."""
    idempotent: bool = False
    """Safe to send again when the connection failed before an answer."""
    timeout: Optional[float] = -1.0
    """Socket timeout in seconds; -1: the client's; None: none."""

    def target(self) -> str:
        """The request target (path and query)."""
        if self.query:
            return self.path + "?" + urlencode(self.query, quote_via=quote)
        return self.path

    def payload(self) -> Tuple[Body, Dict[str, str]]:
        """The body to send and the headers that describe it."""
        h = dict(self.headers)
        if self.json is not None:
            h["Content-Type"] = "application/json"
            return json.dumps(self.json, separators=(",", ":")).encode(), h
        return self.body, h


@dataclass
class Response:
    """The answer to a :class:`Request` (status < 400: errors are raised)."""

    status: int
    headers: Dict[str, str]
    body: bytes = b""
    stream: Any = None
    """The open body of a streamed answer (driver specific)."""

    def json(self) -> Any:
        """The body parsed as JSON (an empty dict for an empty body)."""
        if not self.body:
            return {}
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise errors.InternalError(f"answer is not JSON: {e}", http_status=self.status)


Op = Generator[Request, Response, T]
"""An operation (see the module's docstring)."""

NAME_RE = re.compile(r"^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$")
RESERVED = frozenset({"www", "api", "admin", "root", "system", "cloudflare", "workers"})
SESSION_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

SANDBOX_OPTIONS = {
    "sleep_after": "sleepAfter", "keep_alive": "keepAlive",
    "enable_default_session": "enableDefaultSession", "labels": "labels", "image": "image",
    "instance_type": "instanceType", "env": "env", "network": "network",
    "network_allow": "networkAllow", "from_snapshot": "fromSnapshot",
}
"""The options of ``client.sandbox(id, ...)`` that shape the sandbox (sent as one PUT)."""

LONG_MARGIN = 30.0
"""Seconds added to a call's own timeout for its socket's (the answer comes after it)."""


def check_sandbox_id(name: str) -> str:
    """Raise :class:`InvalidSandboxNameError` for a name cellad would refuse."""
    if not isinstance(name, str) or not NAME_RE.match(name) or name in RESERVED:
        raise errors.InvalidSandboxNameError(
            f"invalid sandbox id {name!r}: 1-63 of a-z, 0-9 and -, not starting or ending "
            "with -, not a reserved name", http_status=400, context={"id": str(name)})
    return name


def check_id(value: str, what: str) -> str:
    """Raise :class:`ValidationFailedError` for a session/process/context id that is not
    1-64 of [A-Za-z0-9_.-]."""
    if not isinstance(value, str) or not SESSION_RE.match(value):
        raise errors.ValidationFailedError(f"{what} must be 1-64 of [A-Za-z0-9_.-]",
                                           http_status=400, context={what: str(value)})
    return value


def q(segment: str) -> str:
    """A path segment, percent-encoded."""
    return quote(segment, safe="")


def ms_timeout(ms: Optional[float]) -> Optional[float]:
    """The socket timeout of a call whose own timeout is ``ms``: None (not given) is the
    client's timeout (-1), 0 (no limit) none."""
    if ms is None:
        return -1.0
    if ms == 0:
        return None
    return ms / 1000.0 + LONG_MARGIN


class ClientState:
    """What a client shares between its sandbox handles: which option PUTs were sent."""

    def __init__(self) -> None:
        self._sent: set[Tuple[str, str]] = set()
        self._lock = threading.Lock()

    def sent(self, sid: str, key: str) -> bool:
        """Whether the PUT of ``key`` for sandbox ``sid`` was sent by this client."""
        with self._lock:
            return (sid, key) in self._sent

    def mark(self, sid: str, key: str) -> None:
        """Remember the PUT of ``key`` for ``sid``."""
        with self._lock:
            self._sent.add((sid, key))

    def forget(self, sid: str) -> None:
        """Forget every PUT sent for ``sid`` (it was destroyed or is gone)."""
        with self._lock:
            self._sent = {k for k in self._sent if k[0] != sid}


class SandboxRef:
    """A sandbox handle's identity: its id, the options to create it with, a session."""

    def __init__(self, state: ClientState, sid: str, options: Mapping[str, Any],
                 session_id: Optional[str] = None) -> None:
        self.state = state
        self.id = check_sandbox_id(sid)
        self.options: Dict[str, Any] = {}
        for k, v in options.items():
            if k not in SANDBOX_OPTIONS:
                raise TypeError(f"unknown sandbox option {k!r}")
            if v is not None:
                self.options[SANDBOX_OPTIONS[k]] = v
        self.key = json.dumps(self.options, sort_keys=True)
        self.session_id = session_id
        self.base = "/v1/sandboxes/" + q(self.id)

    def in_session(self, session_id: str) -> "SandboxRef":
        """The same sandbox, with calls run in ``session_id``."""
        r = SandboxRef.__new__(SandboxRef)
        r.__dict__.update(self.__dict__)
        r.session_id = session_id
        return r


# ---- the building blocks ----

def _put_options(ref: SandboxRef) -> Request:
    return Request("PUT", ref.base, json=ref.options, idempotent=True)


def ensure(ref: SandboxRef) -> Op[None]:
    """Send the handle's options once per client (when it has some)."""
    if ref.options and not ref.state.sent(ref.id, ref.key):
        yield _put_options(ref)
        ref.state.mark(ref.id, ref.key)


def call(ref: SandboxRef, req: Request) -> Op[Response]:
    """Send ``req`` after :func:`ensure`. A GET/HEAD on a sandbox that does not exist yet
    creates it (a PUT with the handle's options) and is sent again, once."""
    yield from ensure(ref)
    if req.method not in ("GET", "HEAD"):
        return (yield req)
    try:
        return (yield req)
    except errors.SandboxNotFoundError:
        yield _put_options(ref)
        ref.state.mark(ref.id, ref.key)
        return (yield req)


def call_json(ref: SandboxRef, req: Request) -> Op[Any]:
    """:func:`call`, answering the parsed JSON body."""
    resp = yield from call(ref, req)
    return resp.json()


def _env(env: Optional[Mapping[str, Optional[str]]]) -> Optional[Dict[str, Optional[str]]]:
    return dict(env) if env is not None else None


def _drop_none(d: Dict[str, Any]) -> Dict[str, Any]:
    return {k: v for k, v in d.items() if v is not None}


# ---- client-level ----

def health() -> Op[Dict[str, Any]]:
    """GET /v1/health."""
    resp = yield Request("GET", "/v1/health", idempotent=True)
    doc = resp.json()
    return dict(doc) if isinstance(doc, dict) else {}


def list_sandboxes() -> Op[List[SandboxInfo]]:
    """GET /v1/sandboxes."""
    resp = yield Request("GET", "/v1/sandboxes", idempotent=True)
    return [SandboxInfo.from_json(s) for s in resp.json().get("sandboxes", [])]


# ---- sandbox ----

def get_info(ref: SandboxRef) -> Op[SandboxInfo]:
    """GET the sandbox (never creates it)."""
    try:
        resp = yield Request("GET", ref.base, idempotent=True)
    except errors.SandboxNotFoundError:
        ref.state.forget(ref.id)
        raise
    return SandboxInfo.from_json(resp.json())


def create(ref: SandboxRef) -> Op[SandboxInfo]:
    """PUT the sandbox with the handle's options (creates or updates it)."""
    resp = yield _put_options(ref)
    ref.state.mark(ref.id, ref.key)
    return SandboxInfo.from_json(resp.json())


def set_options(ref: SandboxRef, **changes: Any) -> Op[SandboxInfo]:
    """One PUT with ``changes`` (snake_case options): the change alone when the handle's
    options were sent, else all of them with the change. The handle keeps the change."""
    body: Dict[str, Any] = {SANDBOX_OPTIONS[k]: v for k, v in changes.items()}
    if ref.options and not ref.state.sent(ref.id, ref.key):
        body = {**ref.options, **body}
    resp = yield Request("PUT", ref.base, json=body, idempotent=True)
    ref.options.update({SANDBOX_OPTIONS[k]: v for k, v in changes.items()})
    ref.key = json.dumps(ref.options, sort_keys=True)
    ref.state.mark(ref.id, ref.key)
    return SandboxInfo.from_json(resp.json())


# ---- snapshots and fork ----

def _snapshot_path(snapshot: str) -> str:
    """``/v1/snapshots/{snapshot}``; a reference that cannot stand as a path segment (not a
    non-empty str, or ``.``/``..``) raises :class:`ValidationFailedError`."""
    if not isinstance(snapshot, str) or snapshot in ("", ".", ".."):
        raise errors.ValidationFailedError("a snapshot is named by its id or name",
                                           http_status=400, context={"snapshotId": str(snapshot)})
    return "/v1/snapshots/" + q(snapshot)


def create_snapshot(ref: SandboxRef, name: Optional[str]) -> Op[SnapshotInfo]:
    """POST /snapshots: the sandbox's files now (its processes frozen for the copy)."""
    if name is not None and not isinstance(name, str):
        raise errors.ValidationFailedError("a snapshot name is a str", http_status=400)
    yield from ensure(ref)
    resp = yield Request("POST", ref.base + "/snapshots",
                         json={"name": name} if name is not None else {}, timeout=None)
    return SnapshotInfo.from_json(resp.json())


def list_snapshots(sandbox: Optional[str] = None) -> Op[List[SnapshotInfo]]:
    """GET /v1/snapshots (oldest first); with ``sandbox``, those taken of it, filtered here:
    snapshots outlive their sandbox, whose own route answers 404 once it is gone."""
    resp = yield Request("GET", "/v1/snapshots", idempotent=True)
    doc = resp.json()
    found = doc.get("snapshots", []) if isinstance(doc, dict) else []
    snaps = [SnapshotInfo.from_json(x) for x in found if isinstance(x, dict)]
    return [x for x in snaps if sandbox is None or x.sandbox == sandbox]


def get_snapshot(snapshot: str) -> Op[SnapshotInfo]:
    """GET /v1/snapshots/{id or name}."""
    resp = yield Request("GET", _snapshot_path(snapshot), idempotent=True)
    return SnapshotInfo.from_json(resp.json())


def delete_snapshot(snapshot: str) -> Op[str]:
    """DELETE /v1/snapshots/{id or name}; answers the id of the snapshot deleted."""
    resp = yield Request("DELETE", _snapshot_path(snapshot))
    return _str_of(resp.json(), "snapshotId")


FORK_OPTIONS = ("sleep_after", "keep_alive", "labels", "env", "network_allow")
"""The options of a fork's child: those cellad changes on an existing sandbox."""


def child_ref(ref: SandboxRef, name: str, options: Mapping[str, Any]) -> SandboxRef:
    """The handle identity of a fork's child ``name`` (checked here) with ``options``."""
    return SandboxRef(ref.state, name, {k: v for k, v in options.items() if k in FORK_OPTIONS})


def fork(ref: SandboxRef, child: SandboxRef, memory: bool = False) -> Op[SandboxInfo]:
    """POST /fork {name, memory?}: a snapshot now and the sandbox ``child`` over it (with
    ``memory``, the parent's processes too). The child's handle then has ``fromSnapshot``
    (so it makes the child again from the same snapshot after a destroy, as a
    ``from_snapshot`` handle does: its files, not its processes); its other options, if
    any, are sent in one PUT."""
    yield from ensure(ref)
    body: Dict[str, Any] = {"name": child.id}
    if memory:
        body["memory"] = True
    resp = yield Request("POST", ref.base + "/fork", json=body, timeout=None)
    info = SandboxInfo.from_json(resp.json())
    child.state.forget(child.id)
    if info.snapshot:
        child.options["fromSnapshot"] = info.snapshot
        child.key = json.dumps(child.options, sort_keys=True)
    if any(k != "fromSnapshot" for k in child.options):
        info = yield from create(child)
    else:
        child.state.mark(child.id, child.key)
    return info


def _str_of(doc: Any, key: str) -> str:
    v = doc.get(key) if isinstance(doc, dict) else None
    return v if isinstance(v, str) else ""


def ws_path(ref: SandboxRef, port: int, path: str) -> str:
    """The API path of a WebSocket to ``port`` in the sandbox (``GET .../ws/{port}/path``)."""
    if not isinstance(port, int) or not 1 <= port <= 65535:
        raise errors.InvalidPortError(f"port must be 1-65535, not {port!r}", http_status=400)
    return f"{ref.base}/ws/{port}/{path.lstrip('/')}"


def sleep(ref: SandboxRef) -> Op[SandboxInfo]:
    """POST /sleep after :func:`ensure` (which sends the handle's options once, as every
    call does): asleep now. POST /sleep itself creates nothing: a name that does not exist
    (a handle without options) is :class:`cella.SandboxNotFoundError`."""
    yield from ensure(ref)
    resp = yield Request("POST", ref.base + "/sleep")
    return SandboxInfo.from_json(resp.json())


def destroy(ref: SandboxRef) -> Op[bool]:
    """DELETE the sandbox; answers whether it existed."""
    resp = yield Request("DELETE", ref.base, idempotent=True)
    ref.state.forget(ref.id)
    return bool(resp.json().get("destroyed"))


def exec_request(ref: SandboxRef, command: str, timeout: Optional[int],
                 env: Optional[Mapping[str, str]], cwd: Optional[str], stream: bool) -> Request:
    """The request of exec / exec_stream."""
    if not isinstance(command, str) or command == "":
        raise errors.ValidationFailedError("command must be a non-empty string",
                                           http_status=400)
    body = _drop_none({"command": command, "timeout": timeout, "env": _env(env), "cwd": cwd,
                       "sessionId": ref.session_id})
    h = {"Accept": "text/event-stream"} if stream else {}
    return Request("POST", ref.base + "/exec", json=body, headers=h, stream=stream,
                   timeout=None if stream else ms_timeout(timeout))


def exec_raw(ref: SandboxRef, command: str, timeout: Optional[int] = None,
             env: Optional[Mapping[str, str]] = None,
             cwd: Optional[str] = None) -> Op[Response]:
    """POST /exec in the raw form (``Accept: application/octet-stream``): the open response,
    whose body is the command's stdout and whose trailers say how it ended."""
    req = exec_request(ref, command, timeout, env, cwd, True)
    req.headers = {"Accept": "application/octet-stream"}
    return (yield from call(ref, req))


def raw_exec_result(command: str, session_id: Optional[str], headers: Mapping[str, str],
                    trailers: Optional[Trailers]) -> RawExecResult:
    """How a raw exec ended, from its answer's headers and trailers (docs/api.md, "Raw
    exec"); raises the error the trailers name (a timeout, a session that ended, the agent
    gone) and :class:`cella.StreamClosedError` for a body that ended without trailers."""
    if trailers is None:
        raise errors.StreamClosedError(
            f"the output of {command!r} ended without its trailers (the connection dropped)",
            http_status=0)
    fields: Dict[str, str] = {}
    for k, v in trailers.fields:
        fields[k] = fields[k] + "," + v if k in fields else v
    parts = trailers.get_all("cella-stderr")
    try:
        stderr = base64.b64decode("".join(parts), validate=True)
    except (binascii.Error, ValueError) as e:
        raise errors.InternalError(f"the stderr trailer of {command!r} is not base64: {e}",
                                   http_status=200) from e
    truncated = (trailers.get("cella-stderr-truncated") or "").lower() == "true"
    pid = _trailer_int(headers.get("cella-pid"), -1)
    duration = _trailer_int(trailers.get("cella-duration"), 0)
    exit_raw = trailers.get("cella-exit-code")
    exit_code = _trailer_int(exit_raw, -1)
    code = trailers.get("cella-error-code")
    if code:
        message = trailers.get("cella-error-message") or f"command {command!r} failed"
        context: Dict[str, Any] = {"command": command, "stderr": stderr.decode("utf-8", "replace")}
        if exit_raw is not None:
            context["exitCode"] = exit_code
        if code.startswith("SESSION_"):
            context["sessionId"] = session_id or "default"
        status = 408 if code == "COMMAND_TIMEOUT" else 410 if code.startswith("SESSION_") else 500
        cls = errors.ERROR_CLASSES.get(code, errors.SandboxError)
        raise cls(message, code=code, http_status=status, context=context)
    if exit_raw is None or exit_code < 0:
        raise errors.InternalError(
            f"the trailers of {command!r} carry neither an exit code nor an error",
            http_status=200, context={"trailers": fields})
    return RawExecResult(exit_code=exit_code, stderr=stderr, stderr_truncated=truncated,
                         duration=duration, pid=pid, command=command, trailers=fields)


def _trailer_int(v: Optional[str], default: int) -> int:
    if v is None or not re.fullmatch(r"-?[0-9]{1,18}", v.strip()):
        return default
    return int(v.strip())


def exec_(ref: SandboxRef, command: str, timeout: Optional[int] = None,
          env: Optional[Mapping[str, str]] = None, cwd: Optional[str] = None) -> Op[ExecResult]:
    """POST /exec."""
    doc = yield from call_json(ref, exec_request(ref, command, timeout, env, cwd, False))
    return ExecResult.from_json(doc)


def exec_stream(ref: SandboxRef, command: str, timeout: Optional[int] = None,
                env: Optional[Mapping[str, str]] = None,
                cwd: Optional[str] = None) -> Op[Response]:
    """POST /exec as SSE; answers the open response."""
    return (yield from call(ref, exec_request(ref, command, timeout, env, cwd, True)))


def set_env(ref: SandboxRef, env: Mapping[str, Optional[str]]) -> Op[None]:
    """POST /env (None unsets a variable)."""
    body: Dict[str, Any] = {"vars": dict(env)}
    if ref.session_id is not None:
        body["sessionId"] = ref.session_id
    yield from call(ref, Request("POST", ref.base + "/env", json=body))


# ---- files ----

def _path_query(path: str, **extra: Optional[str]) -> Dict[str, str]:
    if not isinstance(path, (str, bytes)) or len(path) == 0:
        raise errors.ValidationFailedError("path must be a non-empty str or bytes",
                                           http_status=400)
    qd: Dict[str, str]
    if isinstance(path, bytes):
        qd = {"path": base64.b64encode(path).decode(), "pathEncoding": "base64"}
    else:
        qd = {"path": path}
    qd.update({k: v for k, v in extra.items() if v is not None})
    return qd


def write_file(ref: SandboxRef, path: str, content: Union[str, bytes, IO[bytes], Iterable[bytes]],
               mode: Optional[int] = None, encoding: str = "utf-8") -> Op[WriteResult]:
    """PUT /files with the raw bytes (any size; a file object is streamed)."""
    body: Body
    if isinstance(content, str):
        body = content.encode(encoding)
    elif isinstance(content, (bytes, bytearray, memoryview)):
        body = bytes(content)
    else:
        body = content
    query = _path_query(path, mode=format(mode, "04o") if mode is not None else None)
    req = Request("PUT", ref.base + "/files", query=query, body=body,
                  headers={"Content-Type": "application/octet-stream"}, timeout=None)
    doc = yield from call_json(ref, req)
    return WriteResult.from_json(doc)


def read_request(ref: SandboxRef, path: str, stream: bool) -> Request:
    """GET /files of ``path``."""
    return Request("GET", ref.base + "/files", query=_path_query(path), stream=stream,
                   idempotent=True, timeout=-1.0)


def read_file(ref: SandboxRef, path: str) -> Op[bytes]:
    """GET /files: the file's bytes."""
    resp = yield from call(ref, read_request(ref, path, False))
    return resp.body


def read_file_stream(ref: SandboxRef, path: str) -> Op[Response]:
    """GET /files with the body left open."""
    return (yield from call(ref, read_request(ref, path, True)))


def list_files(ref: SandboxRef, path: str, recursive: bool = False,
               include_hidden: bool = True) -> Op[List[FileInfo]]:
    """GET /files/list."""
    query = _path_query(path, recursive="true" if recursive else "false",
                        includeHidden="true" if include_hidden else "false")
    doc = yield from call_json(ref, Request("GET", ref.base + "/files/list", query=query,
                                            idempotent=True))
    return [FileInfo.from_json(f) for f in doc.get("files", []) if isinstance(f, dict)]


def exists(ref: SandboxRef, path: str) -> Op[bool]:
    """GET /files/exists."""
    doc = yield from call_json(ref, Request("GET", ref.base + "/files/exists",
                                            query=_path_query(path), idempotent=True))
    return bool(doc.get("exists"))


def mkdir(ref: SandboxRef, path: str, recursive: bool = False) -> Op[None]:
    """POST /files/mkdir."""
    yield from call(ref, Request("POST", ref.base + "/files/mkdir",
                                 json={"path": path, "recursive": recursive}))


def delete_file(ref: SandboxRef, path: str, recursive: bool = False) -> Op[None]:
    """DELETE /files."""
    query = _path_query(path, recursive="true" if recursive else None)
    yield from call(ref, Request("DELETE", ref.base + "/files", query=query, idempotent=True))


def move_file(ref: SandboxRef, src: str, dst: str) -> Op[None]:
    """POST /files/move."""
    yield from call(ref, Request("POST", ref.base + "/files/move", json={"from": src, "to": dst}))


def watch(ref: SandboxRef, path: str, recursive: bool = True,
          include: Optional[List[str]] = None, exclude: Optional[List[str]] = None) -> Op[Response]:
    """POST /files/watch as SSE; answers the open response."""
    body = _drop_none({"path": path, "recursive": recursive, "include": include,
                       "exclude": exclude})
    return (yield from call(ref, Request("POST", ref.base + "/files/watch", json=body,
                                         stream=True, timeout=None)))


# ---- sessions ----

def create_session(ref: SandboxRef, id: Optional[str], cwd: Optional[str],
                   env: Optional[Mapping[str, str]],
                   command_timeout_ms: Optional[int]) -> Op[SessionInfo]:
    """POST /sessions."""
    if id is not None:
        check_id(id, "sessionId")
    body = _drop_none({"id": id, "cwd": cwd, "env": _env(env),
                       "commandTimeoutMs": command_timeout_ms})
    doc = yield from call_json(ref, Request("POST", ref.base + "/sessions", json=body))
    return SessionInfo.from_json(doc)


def get_session(ref: SandboxRef, sid: str) -> Op[SessionInfo]:
    """GET /sessions/{sid}."""
    doc = yield from call_json(ref, Request("GET", ref.base + "/sessions/" + q(
        check_id(sid, "sessionId")), idempotent=True))
    return SessionInfo.from_json(doc)


def list_sessions(ref: SandboxRef) -> Op[List[SessionInfo]]:
    """GET /sessions."""
    doc = yield from call_json(ref, Request("GET", ref.base + "/sessions", idempotent=True))
    return [SessionInfo.from_json(s) for s in doc.get("sessions", []) if isinstance(s, dict)]


def delete_session(ref: SandboxRef, sid: str) -> Op[None]:
    """DELETE /sessions/{sid}."""
    yield from call(ref, Request("DELETE", ref.base + "/sessions/" + q(
        check_id(sid, "sessionId")), idempotent=True))


# ---- processes ----

def _proc(ref: SandboxRef, pid: str) -> str:
    if not isinstance(pid, str) or pid == "":
        raise errors.ValidationFailedError("process id must be a non-empty string",
                                           http_status=400)
    return ref.base + "/processes/" + q(pid)


def start_process(ref: SandboxRef, command: str, process_id: Optional[str],
                  env: Optional[Mapping[str, str]], cwd: Optional[str]) -> Op[ProcessInfo]:
    """POST /processes."""
    if process_id is not None:
        check_id(process_id, "processId")
    body = _drop_none({"command": command, "processId": process_id, "env": _env(env),
                       "cwd": cwd, "sessionId": ref.session_id})
    doc = yield from call_json(ref, Request("POST", ref.base + "/processes", json=body))
    return ProcessInfo.from_json(doc)


def list_processes(ref: SandboxRef) -> Op[List[ProcessInfo]]:
    """GET /processes."""
    doc = yield from call_json(ref, Request("GET", ref.base + "/processes", idempotent=True))
    return [ProcessInfo.from_json(p) for p in doc.get("processes", []) if isinstance(p, dict)]


def get_process(ref: SandboxRef, pid: str) -> Op[ProcessInfo]:
    """GET /processes/{pid}."""
    doc = yield from call_json(ref, Request("GET", _proc(ref, pid), idempotent=True))
    return ProcessInfo.from_json(doc)


def kill_process(ref: SandboxRef, pid: str, signal: Optional[str] = None) -> Op[ProcessInfo]:
    """DELETE /processes/{pid}."""
    query = {"signal": str(signal)} if signal is not None else None
    doc = yield from call_json(ref, Request("DELETE", _proc(ref, pid), query=query,
                                            timeout=LONG_MARGIN))
    return ProcessInfo.from_json(doc)


def kill_all_processes(ref: SandboxRef, signal: Optional[str] = None) -> Op[int]:
    """DELETE /processes."""
    query = {"signal": str(signal)} if signal is not None else None
    doc = yield from call_json(ref, Request("DELETE", ref.base + "/processes", query=query,
                                            timeout=LONG_MARGIN))
    return int(doc.get("killed", 0))


def process_logs(ref: SandboxRef, pid: str) -> Op[ProcessLogs]:
    """GET /processes/{pid}/logs."""
    doc = yield from call_json(ref, Request("GET", _proc(ref, pid) + "/logs", idempotent=True))
    return ProcessLogs.from_json(doc)


def stream_process_logs(ref: SandboxRef, pid: str) -> Op[Response]:
    """GET /processes/{pid}/stream (SSE) with the body left open."""
    return (yield from call(ref, Request("GET", _proc(ref, pid) + "/stream", stream=True,
                                         idempotent=True, timeout=None)))


def wait_for_log(ref: SandboxRef, pid: str, pattern: str, regex: bool,
                 timeout: Optional[int]) -> Op[WaitForLogResult]:
    """POST /processes/{pid}/waitForLog."""
    body = _drop_none({"pattern": pattern, "regex": regex or None, "timeout": timeout})
    doc = yield from call_json(ref, Request("POST", _proc(ref, pid) + "/waitForLog", json=body,
                                            timeout=ms_timeout(timeout)))
    return WaitForLogResult(line=str(doc.get("line", "")), stream=str(doc.get("stream", "")))


def wait_for_port(ref: SandboxRef, pid: str, port: int, mode: Optional[str],
                  path: Optional[str], status: Any, interval: Optional[int],
                  timeout: Optional[int]) -> Op[None]:
    """POST /processes/{pid}/waitForPort."""
    body = _drop_none({"port": port, "mode": mode, "path": path, "status": status,
                       "interval": interval, "timeout": timeout})
    yield from call(ref, Request("POST", _proc(ref, pid) + "/waitForPort", json=body,
                                 timeout=ms_timeout(timeout)))


def wait_for_exit(ref: SandboxRef, pid: str, timeout: Optional[int]) -> Op[ProcessInfo]:
    """POST /processes/{pid}/waitForExit."""
    body = _drop_none({"timeout": timeout})
    doc = yield from call_json(ref, Request("POST", _proc(ref, pid) + "/waitForExit", json=body,
                                            timeout=ms_timeout(timeout)))
    return ProcessInfo.from_json(doc)


# ---- ports ----

def expose_port(ref: SandboxRef, port: int, name: Optional[str],
                token: Optional[str]) -> Op[ExposedPort]:
    """POST /ports."""
    doc = yield from call_json(ref, Request("POST", ref.base + "/ports", json=_drop_none(
        {"port": port, "name": name, "token": token})))
    return ExposedPort.from_json(doc)


def unexpose_port(ref: SandboxRef, port: int) -> Op[None]:
    """DELETE /ports/{port}."""
    yield from call(ref, Request("DELETE", ref.base + "/ports/" + str(int(port)),
                                 idempotent=True))


def get_exposed_ports(ref: SandboxRef) -> Op[List[ExposedPort]]:
    """GET /ports."""
    doc = yield from call_json(ref, Request("GET", ref.base + "/ports", idempotent=True))
    return [ExposedPort.from_json(p) for p in doc.get("ports", []) if isinstance(p, dict)]


# ---- git ----

def git_checkout(ref: SandboxRef, repo_url: str, branch: Optional[str],
                 target_dir: Optional[str], depth: Optional[int],
                 timeout: Optional[int]) -> Op[GitCheckoutResult]:
    """POST /git/checkout."""
    body = _drop_none({"repoUrl": repo_url, "branch": branch, "targetDir": target_dir,
                       "depth": depth, "timeout": timeout})
    doc = yield from call_json(ref, Request("POST", ref.base + "/git/checkout", json=body,
                                            timeout=ms_timeout(600000 if timeout is None else timeout)))
    return GitCheckoutResult.from_json(doc)


# ---- backups (docs/api.md "Backups") ----

def create_backup(ref: SandboxRef, dir: str, name: Optional[str],
                  ttl: Optional[int], gitignore: Optional[bool] = None,
                  excludes: Optional[Sequence[str]] = None,
                  consistent: Optional[bool] = None,
                  multipart: Optional[bool] = None) -> Op[DirectoryBackup]:
    """POST /backups."""
    doc = yield from call_json(ref, Request("POST", ref.base + "/backups", json=_drop_none(
        {"dir": dir, "name": name, "ttl": ttl, "gitignore": gitignore,
         "excludes": list(excludes) if excludes is not None else None,
         "consistent": consistent, "multipart": multipart}), timeout=LONG_MARGIN * 60))
    return DirectoryBackup.from_json(doc)


def restore_backup(ref: SandboxRef, backup: Union[str, DirectoryBackup],
                   dir: Optional[str]) -> Op[RestoreBackupResult]:
    """POST /backups/{backupId}/restore."""
    ident = backup.id if isinstance(backup, DirectoryBackup) else backup
    doc = yield from call_json(ref, Request("POST", ref.base + "/backups/" + q(ident) + "/restore",
                                            json=_drop_none({"dir": dir}),
                                            timeout=LONG_MARGIN * 60))
    return RestoreBackupResult.from_json(doc)


def list_backups(ref: SandboxRef) -> Op[List[DirectoryBackup]]:
    """GET /v1/backups."""
    doc = yield from call_json(ref, Request("GET", "/v1/backups", idempotent=True))
    return [DirectoryBackup.from_json(b) for b in doc.get("backups", []) if isinstance(b, dict)]


def delete_backup(ref: SandboxRef, backup: Union[str, DirectoryBackup]) -> Op[None]:
    """DELETE /v1/backups/{backupId}."""
    ident = backup.id if isinstance(backup, DirectoryBackup) else backup
    yield from call(ref, Request("DELETE", "/v1/backups/" + q(ident)))


# ---- code interpreter ----

def create_code_context(ref: SandboxRef, language: Optional[str], cwd: Optional[str],
                        env: Optional[Mapping[str, str]]) -> Op[CodeContext]:
    """POST /contexts."""
    body = _drop_none({"language": language, "cwd": cwd, "env": _env(env)})
    doc = yield from call_json(ref, Request("POST", ref.base + "/contexts", json=body,
                                            timeout=LONG_MARGIN * 4))
    return CodeContext.from_json(doc)


def list_code_contexts(ref: SandboxRef) -> Op[List[CodeContext]]:
    """GET /contexts."""
    doc = yield from call_json(ref, Request("GET", ref.base + "/contexts", idempotent=True))
    return [CodeContext.from_json(c) for c in doc.get("contexts", []) if isinstance(c, dict)]


def delete_code_context(ref: SandboxRef, cid: Union[str, CodeContext]) -> Op[None]:
    """DELETE /contexts/{cid}."""
    ident = cid.id if isinstance(cid, CodeContext) else cid
    yield from call(ref, Request("DELETE", ref.base + "/contexts/" + q(
        check_id(ident, "contextId")), idempotent=True))


def code_request(ref: SandboxRef, code: str, context: Union[str, CodeContext, None],
                 language: Optional[str], timeout: Optional[int], stream: bool) -> Request:
    """The request of run_code."""
    cid = context.id if isinstance(context, CodeContext) else context
    body = _drop_none({"code": code, "contextId": cid, "language": language,
                       "timeout": timeout})
    return Request("POST", ref.base + "/code", json=body, stream=stream,
                   headers={"Accept": "text/event-stream"} if stream else {},
                   timeout=None if stream else ms_timeout(timeout))


def run_code(ref: SandboxRef, code: str, context: Union[str, CodeContext, None],
             language: Optional[str], timeout: Optional[int]) -> Op[Execution]:
    """POST /code, buffered."""
    doc = yield from call_json(ref, code_request(ref, code, context, language, timeout, False))
    return Execution.from_json(doc)


def run_code_stream(ref: SandboxRef, code: str, context: Union[str, CodeContext, None],
                    language: Optional[str], timeout: Optional[int]) -> Op[Response]:
    """POST /code as SSE; answers the open response."""
    return (yield from call(ref, code_request(ref, code, context, language, timeout, True)))


class CodeCallbacks:
    """The streaming callbacks of run_code, and the Execution they assemble."""

    def __init__(self, on_stdout: Optional[Callable[[str], Any]] = None,
                 on_stderr: Optional[Callable[[str], Any]] = None,
                 on_result: Optional[Callable[[Result], Any]] = None,
                 on_error: Optional[Callable[[ExecutionError], Any]] = None) -> None:
        self.on_stdout = on_stdout
        self.on_stderr = on_stderr
        self.on_result = on_result
        self.on_error = on_error
        self.execution = Execution(logs=Logs())
        self.done = False

    def any(self) -> bool:
        """Whether a callback was given (the run is then streamed)."""
        return any(c is not None for c in (self.on_stdout, self.on_stderr, self.on_result,
                                           self.on_error))

    def event(self, ev: Mapping[str, Any]) -> List[Tuple[Callable[[Any], Any], Any]]:
        """Take one SSE event; answer the callbacks to call (the async client awaits
        those that are coroutines)."""
        t = ev.get("type")
        calls: List[Tuple[Callable[[Any], Any], Any]] = []
        ex = self.execution
        if t in ("stdout", "stderr"):
            text = str(ev.get("text", ""))
            (ex.logs.stdout if t == "stdout" else ex.logs.stderr).append(text)
            cb = self.on_stdout if t == "stdout" else self.on_stderr
            if cb is not None:
                calls.append((cb, text))
        elif t == "result":
            r = Result.from_json({k: v for k, v in ev.items() if k not in ("type", "timestamp")})
            ex.results.append(r)
            if self.on_result is not None:
                calls.append((self.on_result, r))
        elif t == "error":
            err = ExecutionError.from_json(ev)
            ex.error = err
            if self.on_error is not None:
                calls.append((self.on_error, err))
            if ev.get("code") == "CONTEXT_DEAD":
                self.done = True
        elif t == "execution_complete":
            ex.execution_count = int(ev.get("executionCount") or 0)
            ex.timed_out = bool(ev.get("timedOut"))
            self.done = True
        return calls


EXEC_END = frozenset({"complete", "error"})
"""The events that end an exec stream."""
LOG_END = frozenset({"exit"})
"""The event that ends a process log stream."""
CODE_END = frozenset({"execution_complete"})
"""The event that ends a code run's stream (or an ``error`` with code CONTEXT_DEAD)."""


# ---- what the sync and the asyncio objects share (everything but the I/O) ----

def auth_headers(token: Optional[str], headers: Optional[Mapping[str, str]]) -> Dict[str, str]:
    """The headers every API request carries."""
    h = {"User-Agent": f"cella-python/{VERSION}"}
    if headers:
        h.update(headers)
    if token:
        h["Authorization"] = f"Bearer {token}"
    return h


class ClientBase(Generic[H]):
    """A client's settings and state; ``H`` is the type of its sandbox handles."""

    def __init__(self, url: str, token: Optional[str], timeout: Optional[float],
                 headers: Optional[Mapping[str, str]],
                 ssl_context: Optional[ssl.SSLContext]) -> None:
        self.url = url.rstrip("/")
        """cellad's base URL."""
        self.timeout = timeout
        """Seconds a call may wait for the daemon's next byte (None: no limit). Calls with
        a timeout of their own (exec, waits, run_code) wait that long plus 30 s."""
        self._headers = auth_headers(token, headers)
        self._ssl_context = ssl_context
        self._state = ClientState()

    def _handle(self, ref: SandboxRef, destroy_on_exit: bool) -> H:
        raise NotImplementedError

    def sandbox(self, id: str, *, destroy_on_exit: bool = False, sleep_after: Union[str, int, None] = None,
                keep_alive: Optional[bool] = None, enable_default_session: Optional[bool] = None,
                labels: Optional[Mapping[str, str]] = None, image: Optional[str] = None,
                instance_type: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                network: Optional[str] = None,
                network_allow: Optional[List[str]] = None,
                from_snapshot: Optional[str] = None) -> H:
        """The handle of sandbox ``id`` (sends nothing). The options are sent as one PUT
        before the handle's first operation (once per client, id and options); without
        options cellad creates the sandbox with its defaults on the first write.
        ``from_snapshot`` (a snapshot's id or name): the sandbox starts with the snapshot's
        files and has its image (:class:`cella.SnapshotNotFoundError` if there is none; an
        existing sandbox not made from it: :class:`cella.ValidationFailedError`).
        ``destroy_on_exit``: ``with client.sandbox(...) as sb:`` (``async with`` for the
        asyncio client) destroys it at the end."""
        opts = {"sleep_after": sleep_after, "keep_alive": keep_alive,
                "enable_default_session": enable_default_session,
                "labels": dict(labels) if labels is not None else None, "image": image,
                "instance_type": instance_type, "env": dict(env) if env is not None else None,
                "network": network, "network_allow": network_allow,
                "from_snapshot": from_snapshot}
        return self._handle(SandboxRef(self._state, id, opts), destroy_on_exit)


class SandboxBase(Generic[C]):
    """A sandbox handle's identity, talking through a client of type ``C``."""

    def __init__(self, client: C, ref: SandboxRef, destroy_on_exit: bool = False) -> None:
        self.client = client
        """The client it talks through."""
        self._ref = ref
        self._destroy_on_exit = destroy_on_exit

    @property
    def id(self) -> str:
        """The sandbox's name."""
        return self._ref.id


class ProcessBase(Generic[S]):
    """A background process of a sandbox (of type ``S``)."""

    def __init__(self, sandbox: S, info: ProcessInfo) -> None:
        self.sandbox = sandbox
        """The sandbox it runs in."""
        self.info = info
        """Its status as last fetched."""

    @property
    def id(self) -> str:
        """Its process id."""
        return self.info.id

    @property
    def pid(self) -> int:
        """Its pid in the sandbox."""
        return self.info.pid


class EventDecoder(Generic[E]):
    """The events of an SSE answer without the I/O: :meth:`feed` it the body's bytes as
    they arrive; :attr:`ready` says an event is there to :meth:`take` (decoded by
    ``decode``); :attr:`ended` once the stream's last event (one of ``end``, or an error
    with code CONTEXT_DEAD) was taken; :meth:`at_eof` when the body ends."""

    def __init__(self, decode: Callable[[Dict[str, Any]], E],
                 end: Optional[frozenset[str]]) -> None:
        self._decode = decode
        self._end = end
        self._parser = SSEParser()
        self._queue: Deque[Dict[str, Any]] = collections.deque()
        self.ended = False

    def feed(self, chunk: bytes) -> None:
        """Bytes of the body, in pieces of any size."""
        self._queue.extend(self._parser.feed(chunk))

    @property
    def ready(self) -> bool:
        """Whether an event is there to take."""
        return bool(self._queue)

    def take(self) -> E:
        """The next event, decoded."""
        ev = self._queue.popleft()
        t = ev.get("type")
        if self._end is not None and (t in self._end or
                                      (t == "error" and ev.get("code") == "CONTEXT_DEAD")):
            self.ended = True
        return self._decode(ev)

    def at_eof(self) -> None:
        """The body ended: raise :class:`cella.StreamClosedError` when that cut an event,
        or came before the last event of a stream that has one."""
        if self._parser.pending or self._end is not None:
            raise errors.StreamClosedError("the stream ended before its last event",
                                           http_status=0)
