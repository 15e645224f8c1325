"""Errors: one class per error code of the HTTP API (docs/api.md, "Errors").

Every failure cellad reports is ``{code, message, context, httpStatus, timestamp}``; the
client raises the class of that code, a subclass of :class:`SandboxError`. A code this
module does not know raises :class:`SandboxError` itself with the code kept. Failures that
never reached an answer (connection refused, a stream cut, a client-side timeout) raise
:class:`ConnectionError_`'s subclasses, also under :class:`SandboxError`.

The Python names that would shadow built-ins (``FileNotFoundError``, ``FileExistsError``,
``PermissionError``...) are the same names as the TypeScript SDK's; import them through the
module (``cella.FileNotFoundError``) and they do not replace the built-ins in your code.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional, Type

__all__ = ["SandboxError", "TransportError", "StreamClosedError",
           "ClientTimeoutError", "error_from_answer", "ERROR_CLASSES"]


class SandboxError(Exception):
    """Base class of every error the SDK raises for a failed operation.

    Attributes: ``code`` (the API's code, e.g. ``FILE_NOT_FOUND``), ``http_status``,
    ``context`` (a dict, the error's details), ``message``, ``timestamp``.
    """

    code: str = "INTERNAL_ERROR"
    """The API error code this class stands for."""
    default_status: int = 500
    """The HTTP status cellad answers with this code."""

    def __init__(self, message: str, *, code: Optional[str] = None,
                 http_status: Optional[int] = None,
                 context: Optional[Mapping[str, Any]] = None,
                 timestamp: str = "") -> None:
        super().__init__(message)
        self.message: str = message
        """The error's message as cellad wrote it."""
        if code is not None:
            self.code = code
        self.http_status: int = http_status if http_status is not None else self.default_status
        """The HTTP status of the answer (0 when there was none)."""
        self.context: Dict[str, Any] = dict(context or {})
        """The error's details (e.g. ``{"path": ...}``)."""
        self.timestamp: str = timestamp
        """When cellad answered (ISO-8601), or empty."""

    def __str__(self) -> str:
        return f"{self.code}: {self.message}"

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(code={self.code!r}, http_status={self.http_status}, "
                f"message={self.message!r}, context={self.context!r})")


class TransportError(SandboxError):
    """The daemon could not be reached, or the connection broke before a whole answer
    arrived (code ``SANDBOX_UNAVAILABLE``, ``http_status`` 0)."""

    code = "SANDBOX_UNAVAILABLE"
    default_status = 0


class StreamClosedError(TransportError):
    """A stream (exec_stream, watch, process logs, run_code) ended before its last event:
    the connection was closed, e.g. by a daemon restart."""


class ClientTimeoutError(TransportError):
    """No answer (or no byte of a stream) within the call's ``timeout``; code
    ``REQUEST_TIMEOUT``."""

    code = "REQUEST_TIMEOUT"


class FileNotFoundError(SandboxError):
    """The API error ``FILE_NOT_FOUND`` (HTTP 404)."""

    code = "FILE_NOT_FOUND"
    default_status = 404

class PermissionDeniedError(SandboxError):
    """The API error ``PERMISSION_DENIED`` (HTTP 403)."""

    code = "PERMISSION_DENIED"
    default_status = 403

class FileExistsError(SandboxError):
    """The API error ``FILE_EXISTS`` (HTTP 409)."""

    code = "FILE_EXISTS"
    default_status = 409

class IsDirectoryError(SandboxError):
    """The API error ``IS_DIRECTORY`` (HTTP 400)."""

    code = "IS_DIRECTORY"
    default_status = 400

class NotDirectoryError(SandboxError):
    """The API error ``NOT_DIRECTORY`` (HTTP 400)."""

    code = "NOT_DIRECTORY"
    default_status = 400

class DirectoryNotEmptyError(SandboxError):
    """The API error ``DIRECTORY_NOT_EMPTY`` (HTTP 409)."""

    code = "DIRECTORY_NOT_EMPTY"
    default_status = 409

class FileTooLargeError(SandboxError):
    """The API error ``FILE_TOO_LARGE`` (HTTP 413)."""

    code = "FILE_TOO_LARGE"
    default_status = 413

class NoSpaceError(SandboxError):
    """The API error ``NO_SPACE`` (HTTP 507)."""

    code = "NO_SPACE"
    default_status = 507

class InsufficientStorageError(SandboxError):
    """The API error ``INSUFFICIENT_STORAGE`` (HTTP 507)."""

    code = "INSUFFICIENT_STORAGE"
    default_status = 507

class NameTooLongError(SandboxError):
    """The API error ``NAME_TOO_LONG`` (HTTP 400)."""

    code = "NAME_TOO_LONG"
    default_status = 400

class ReadOnlyError(SandboxError):
    """The API error ``READ_ONLY`` (HTTP 403)."""

    code = "READ_ONLY"
    default_status = 403

class CommandNotFoundError(SandboxError):
    """The API error ``COMMAND_NOT_FOUND`` (HTTP 404)."""

    code = "COMMAND_NOT_FOUND"
    default_status = 404

class InvalidCommandError(SandboxError):
    """The API error ``INVALID_COMMAND`` (HTTP 400)."""

    code = "INVALID_COMMAND"
    default_status = 400

class CommandTimeoutError(SandboxError):
    """The API error ``COMMAND_TIMEOUT`` (HTTP 408)."""

    code = "COMMAND_TIMEOUT"
    default_status = 408

class ProcessNotFoundError(SandboxError):
    """The API error ``PROCESS_NOT_FOUND`` (HTTP 404)."""

    code = "PROCESS_NOT_FOUND"
    default_status = 404

class ProcessAlreadyExistsError(SandboxError):
    """The API error ``PROCESS_ALREADY_EXISTS`` (HTTP 409)."""

    code = "PROCESS_ALREADY_EXISTS"
    default_status = 409

class SessionNotFoundError(SandboxError):
    """The API error ``SESSION_NOT_FOUND`` (HTTP 404)."""

    code = "SESSION_NOT_FOUND"
    default_status = 404

class SessionAlreadyExistsError(SandboxError):
    """The API error ``SESSION_ALREADY_EXISTS`` (HTTP 409)."""

    code = "SESSION_ALREADY_EXISTS"
    default_status = 409

class SessionDestroyedError(SandboxError):
    """The API error ``SESSION_DESTROYED`` (HTTP 410)."""

    code = "SESSION_DESTROYED"
    default_status = 410

class SessionTerminatedError(SandboxError):
    """The API error ``SESSION_TERMINATED`` (HTTP 410)."""

    code = "SESSION_TERMINATED"
    default_status = 410

class PortAlreadyExposedError(SandboxError):
    """The API error ``PORT_ALREADY_EXPOSED`` (HTTP 409)."""

    code = "PORT_ALREADY_EXPOSED"
    default_status = 409

class PortNotExposedError(SandboxError):
    """The API error ``PORT_NOT_EXPOSED`` (HTTP 404)."""

    code = "PORT_NOT_EXPOSED"
    default_status = 404

class InvalidPortError(SandboxError):
    """The API error ``INVALID_PORT`` (HTTP 400)."""

    code = "INVALID_PORT"
    default_status = 400

class InvalidTokenError(SandboxError):
    """The API error ``INVALID_TOKEN`` (HTTP 404)."""

    code = "INVALID_TOKEN"
    default_status = 404

class StalePreviewUrlError(SandboxError):
    """The API error ``STALE_PREVIEW_URL`` (HTTP 410)."""

    code = "STALE_PREVIEW_URL"
    default_status = 410

class BadGatewayError(SandboxError):
    """The API error ``BAD_GATEWAY`` (HTTP 502)."""

    code = "BAD_GATEWAY"
    default_status = 502

class ContextNotFoundError(SandboxError):
    """The API error ``CONTEXT_NOT_FOUND`` (HTTP 404)."""

    code = "CONTEXT_NOT_FOUND"
    default_status = 404

class ContextDeadError(SandboxError):
    """The API error ``CONTEXT_DEAD`` (HTTP 410)."""

    code = "CONTEXT_DEAD"
    default_status = 410

class InterpreterNotFoundError(SandboxError):
    """The API error ``INTERPRETER_NOT_FOUND`` (HTTP 501)."""

    code = "INTERPRETER_NOT_FOUND"
    default_status = 501

class ProcessReadyTimeoutError(SandboxError):
    """The API error ``PROCESS_READY_TIMEOUT`` (HTTP 408)."""

    code = "PROCESS_READY_TIMEOUT"
    default_status = 408

class ProcessExitedBeforeReadyError(SandboxError):
    """The API error ``PROCESS_EXITED_BEFORE_READY`` (HTTP 409)."""

    code = "PROCESS_EXITED_BEFORE_READY"
    default_status = 409

class ValidationFailedError(SandboxError):
    """The API error ``VALIDATION_FAILED`` (HTTP 400)."""

    code = "VALIDATION_FAILED"
    default_status = 400

class InvalidSandboxNameError(SandboxError):
    """The API error ``INVALID_SANDBOX_NAME`` (HTTP 400)."""

    code = "INVALID_SANDBOX_NAME"
    default_status = 400

class SandboxNotFoundError(SandboxError):
    """The API error ``SANDBOX_NOT_FOUND`` (HTTP 404)."""

    code = "SANDBOX_NOT_FOUND"
    default_status = 404

class SandboxLimitReachedError(SandboxError):
    """The API error ``SANDBOX_LIMIT_REACHED`` (HTTP 429)."""

    code = "SANDBOX_LIMIT_REACHED"
    default_status = 429

class ImageNotFoundError(SandboxError):
    """The API error ``IMAGE_NOT_FOUND`` (HTTP 404)."""

    code = "IMAGE_NOT_FOUND"
    default_status = 404

class ImageInUseError(SandboxError):
    """The API error ``IMAGE_IN_USE`` (HTTP 409)."""

    code = "IMAGE_IN_USE"
    default_status = 409

class ImageExistsError(SandboxError):
    """The API error ``IMAGE_EXISTS`` (HTTP 409)."""

    code = "IMAGE_EXISTS"
    default_status = 409

class ImageBusyError(SandboxError):
    """The API error ``IMAGE_BUSY`` (HTTP 409)."""

    code = "IMAGE_BUSY"
    default_status = 409

class InvalidImageError(SandboxError):
    """The API error ``INVALID_IMAGE`` (HTTP 400)."""

    code = "INVALID_IMAGE"
    default_status = 400

class SnapshotNotFoundError(SandboxError):
    """The API error ``SNAPSHOT_NOT_FOUND`` (HTTP 404): no snapshot has that id or name."""

    code = "SNAPSHOT_NOT_FOUND"
    default_status = 404

class SnapshotInUseError(SandboxError):
    """The API error ``SNAPSHOT_IN_USE`` (HTTP 409): a sandbox made from the snapshot (in
    any state), or a snapshot taken of such a sandbox, exists."""

    code = "SNAPSHOT_IN_USE"
    default_status = 409

class UnauthorizedError(SandboxError):
    """The API error ``UNAUTHORIZED`` (HTTP 401)."""

    code = "UNAUTHORIZED"
    default_status = 401

class NotFoundError(SandboxError):
    """The API error ``NOT_FOUND`` (HTTP 404)."""

    code = "NOT_FOUND"
    default_status = 404

class MethodNotAllowedError(SandboxError):
    """The API error ``METHOD_NOT_ALLOWED`` (HTTP 405)."""

    code = "METHOD_NOT_ALLOWED"
    default_status = 405

class UnsupportedMediaTypeError(SandboxError):
    """The API error ``UNSUPPORTED_MEDIA_TYPE`` (HTTP 415)."""

    code = "UNSUPPORTED_MEDIA_TYPE"
    default_status = 415

class PayloadTooLargeError(SandboxError):
    """The API error ``PAYLOAD_TOO_LARGE`` (HTTP 413)."""

    code = "PAYLOAD_TOO_LARGE"
    default_status = 413

class UriTooLongError(SandboxError):
    """The API error ``URI_TOO_LONG`` (HTTP 414)."""

    code = "URI_TOO_LONG"
    default_status = 414

class HeadersTooLargeError(SandboxError):
    """The API error ``HEADERS_TOO_LARGE`` (HTTP 431)."""

    code = "HEADERS_TOO_LARGE"
    default_status = 431

class BadRequestError(SandboxError):
    """The API error ``BAD_REQUEST`` (HTTP 400)."""

    code = "BAD_REQUEST"
    default_status = 400

class SandboxUnavailableError(SandboxError):
    """The API error ``SANDBOX_UNAVAILABLE`` (HTTP 503)."""

    code = "SANDBOX_UNAVAILABLE"
    default_status = 503

class ServerBusyError(SandboxError):
    """The API error ``SERVER_BUSY`` (HTTP 503)."""

    code = "SERVER_BUSY"
    default_status = 503

class RequestTimeoutError(SandboxError):
    """The API error ``REQUEST_TIMEOUT`` (HTTP 408)."""

    code = "REQUEST_TIMEOUT"
    default_status = 408

class TooManyRequestsError(SandboxError):
    """The API error ``TOO_MANY_REQUESTS`` (HTTP 429)."""

    code = "TOO_MANY_REQUESTS"
    default_status = 429

class InvalidGitUrlError(SandboxError):
    """The API error ``INVALID_GIT_URL`` (HTTP 400)."""

    code = "INVALID_GIT_URL"
    default_status = 400

class GitRepositoryNotFoundError(SandboxError):
    """The API error ``GIT_REPOSITORY_NOT_FOUND`` (HTTP 404)."""

    code = "GIT_REPOSITORY_NOT_FOUND"
    default_status = 404

class GitBranchNotFoundError(SandboxError):
    """The API error ``GIT_BRANCH_NOT_FOUND`` (HTTP 404)."""

    code = "GIT_BRANCH_NOT_FOUND"
    default_status = 404

class GitAuthFailedError(SandboxError):
    """The API error ``GIT_AUTH_FAILED`` (HTTP 401)."""

    code = "GIT_AUTH_FAILED"
    default_status = 401

class GitNetworkError(SandboxError):
    """The API error ``GIT_NETWORK_ERROR`` (HTTP 502)."""

    code = "GIT_NETWORK_ERROR"
    default_status = 502

class GitCloneFailedError(SandboxError):
    """The API error ``GIT_CLONE_FAILED`` (HTTP 500)."""

    code = "GIT_CLONE_FAILED"
    default_status = 500

class InternalError(SandboxError):
    """The API error ``INTERNAL_ERROR`` (HTTP 500)."""

    code = "INTERNAL_ERROR"
    default_status = 500


ERROR_CLASSES: Dict[str, Type[SandboxError]] = {
    "FILE_NOT_FOUND": FileNotFoundError,
    "PERMISSION_DENIED": PermissionDeniedError,
    "FILE_EXISTS": FileExistsError,
    "IS_DIRECTORY": IsDirectoryError,
    "NOT_DIRECTORY": NotDirectoryError,
    "DIRECTORY_NOT_EMPTY": DirectoryNotEmptyError,
    "FILE_TOO_LARGE": FileTooLargeError,
    "NO_SPACE": NoSpaceError,
    "INSUFFICIENT_STORAGE": InsufficientStorageError,
    "NAME_TOO_LONG": NameTooLongError,
    "READ_ONLY": ReadOnlyError,
    "COMMAND_NOT_FOUND": CommandNotFoundError,
    "INVALID_COMMAND": InvalidCommandError,
    "COMMAND_TIMEOUT": CommandTimeoutError,
    "PROCESS_NOT_FOUND": ProcessNotFoundError,
    "PROCESS_ALREADY_EXISTS": ProcessAlreadyExistsError,
    "SESSION_NOT_FOUND": SessionNotFoundError,
    "SESSION_ALREADY_EXISTS": SessionAlreadyExistsError,
    "SESSION_DESTROYED": SessionDestroyedError,
    "SESSION_TERMINATED": SessionTerminatedError,
    "PORT_ALREADY_EXPOSED": PortAlreadyExposedError,
    "PORT_NOT_EXPOSED": PortNotExposedError,
    "INVALID_PORT": InvalidPortError,
    "INVALID_TOKEN": InvalidTokenError,
    "STALE_PREVIEW_URL": StalePreviewUrlError,
    "BAD_GATEWAY": BadGatewayError,
    "CONTEXT_NOT_FOUND": ContextNotFoundError,
    "CONTEXT_DEAD": ContextDeadError,
    "INTERPRETER_NOT_FOUND": InterpreterNotFoundError,
    "PROCESS_READY_TIMEOUT": ProcessReadyTimeoutError,
    "PROCESS_EXITED_BEFORE_READY": ProcessExitedBeforeReadyError,
    "VALIDATION_FAILED": ValidationFailedError,
    "INVALID_SANDBOX_NAME": InvalidSandboxNameError,
    "SANDBOX_NOT_FOUND": SandboxNotFoundError,
    "SANDBOX_LIMIT_REACHED": SandboxLimitReachedError,
    "IMAGE_NOT_FOUND": ImageNotFoundError,
    "IMAGE_IN_USE": ImageInUseError,
    "IMAGE_EXISTS": ImageExistsError,
    "IMAGE_BUSY": ImageBusyError,
    "INVALID_IMAGE": InvalidImageError,
    "SNAPSHOT_NOT_FOUND": SnapshotNotFoundError,
    "SNAPSHOT_IN_USE": SnapshotInUseError,
    "UNAUTHORIZED": UnauthorizedError,
    "NOT_FOUND": NotFoundError,
    "METHOD_NOT_ALLOWED": MethodNotAllowedError,
    "UNSUPPORTED_MEDIA_TYPE": UnsupportedMediaTypeError,
    "PAYLOAD_TOO_LARGE": PayloadTooLargeError,
    "URI_TOO_LONG": UriTooLongError,
    "HEADERS_TOO_LARGE": HeadersTooLargeError,
    "BAD_REQUEST": BadRequestError,
    "SANDBOX_UNAVAILABLE": SandboxUnavailableError,
    "SERVER_BUSY": ServerBusyError,
    "REQUEST_TIMEOUT": RequestTimeoutError,
    "TOO_MANY_REQUESTS": TooManyRequestsError,
    "INVALID_GIT_URL": InvalidGitUrlError,
    "GIT_REPOSITORY_NOT_FOUND": GitRepositoryNotFoundError,
    "GIT_BRANCH_NOT_FOUND": GitBranchNotFoundError,
    "GIT_AUTH_FAILED": GitAuthFailedError,
    "GIT_NETWORK_ERROR": GitNetworkError,
    "GIT_CLONE_FAILED": GitCloneFailedError,
    "INTERNAL_ERROR": InternalError,
}
"""Every known API error code and its class."""

__all__ += [cls.__name__ for cls in ERROR_CLASSES.values()]


def error_from_answer(status: int, body: bytes) -> SandboxError:
    """The exception for an error answer: its JSON body's code picks the class; a body that
    is not cella's JSON gives :class:`SandboxError` with a code from the status."""
    doc: Any = None
    try:
        doc = json.loads(body.decode("utf-8", "replace")) if body else None
    except ValueError:
        doc = None
    if isinstance(doc, dict) and isinstance(doc.get("code"), str):
        code = str(doc["code"])
        message = doc.get("message")
        context = doc.get("context")
        cls = ERROR_CLASSES.get(code, SandboxError)
        return cls(message if isinstance(message, str) else code, code=code, http_status=status,
                   context=context if isinstance(context, dict) else {},
                   timestamp=str(doc.get("timestamp") or ""))
    fallback = {400: "BAD_REQUEST", 401: "UNAUTHORIZED", 403: "PERMISSION_DENIED",
                404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 408: "REQUEST_TIMEOUT",
                413: "PAYLOAD_TOO_LARGE", 429: "TOO_MANY_REQUESTS", 502: "BAD_GATEWAY",
                503: "SANDBOX_UNAVAILABLE"}.get(status, "INTERNAL_ERROR")
    text = body[:512].decode("utf-8", "replace").strip() or f"HTTP {status}"
    return ERROR_CLASSES[fallback](text, code=fallback, http_status=status)
