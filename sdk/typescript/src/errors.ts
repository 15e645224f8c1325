/**
 * Errors. Every failure cellad reports is `{code, message, context, httpStatus, timestamp}`
 * (docs/api.md, "Errors"); the SDK turns it into the class the hosted SDK uses for that code,
 * so `instanceof FileNotFoundError` and `err.code === 'FILE_NOT_FOUND'` both work. A code
 * this table does not know gives the base `SandboxError` with the code kept.
 */

/** The JSON body of an error answer, as cellad sends it. */
export interface ErrorResponse<TContext = Record<string, unknown>> {
  code: string;
  message: string;
  context: TContext;
  httpStatus: number;
  timestamp: string;
  operation?: string;
  suggestion?: string;
  documentation?: string;
}

/** Base class of every error the SDK throws for a failed operation. */
export class SandboxError<TContext = Record<string, unknown>> extends Error {
  readonly errorResponse: ErrorResponse<TContext>;

  constructor(errorResponse: ErrorResponse<TContext>, options?: { cause?: unknown }) {
    super(errorResponse.message, options);
    this.errorResponse = errorResponse;
    this.name = new.target.name;
  }

  get code(): string {
    return this.errorResponse.code;
  }
  get context(): TContext {
    return this.errorResponse.context;
  }
  get httpStatus(): number {
    return this.errorResponse.httpStatus;
  }
  get operation(): string | undefined {
    return this.errorResponse.operation;
  }
  get suggestion(): string | undefined {
    return this.errorResponse.suggestion;
  }
  get timestamp(): string {
    return this.errorResponse.timestamp;
  }
  get documentation(): string | undefined {
    return this.errorResponse.documentation;
  }

  toJSON(): ErrorResponse<TContext> & { name: string; stack?: string } {
    return { ...this.errorResponse, name: this.name, stack: this.stack };
  }
}

// ---- files ----
export class FileNotFoundError extends SandboxError {}
export class FileExistsError extends SandboxError {}
export class FileSystemError extends SandboxError {}
export class FileTooLargeError extends SandboxError {}
export class PermissionDeniedError extends SandboxError {}
export class IsDirectoryError extends FileSystemError {}
export class NotDirectoryError extends FileSystemError {}
export class NoSpaceError extends FileSystemError {}

// ---- commands ----
export class CommandError extends SandboxError {}
export class CommandNotFoundError extends CommandError {}
/** A command ran past its `timeout`; cella killed its process tree. `context` has
 * `{timeout, stdout, stderr}`: the output so far. */
export class CommandTimeoutError extends CommandError {}

// ---- processes ----
export class ProcessError extends SandboxError {}
export class ProcessNotFoundError extends ProcessError {}
export class ProcessAlreadyExistsError extends ProcessError {}

export interface ProcessReadyContext {
  processId: string;
  command: string;
  condition: string;
  timeout?: number;
  [key: string]: unknown;
}
export interface ProcessExitedContext extends ProcessReadyContext {
  exitCode: number | null;
}
export class ProcessReadyTimeoutError extends SandboxError<ProcessReadyContext> {
  get processId(): string {
    return this.context.processId;
  }
  get command(): string {
    return this.context.command;
  }
  get condition(): string {
    return this.context.condition;
  }
  get timeout(): number | undefined {
    return this.context.timeout;
  }
}
export class ProcessExitedBeforeReadyError extends SandboxError<ProcessExitedContext> {
  get processId(): string {
    return this.context.processId;
  }
  get command(): string {
    return this.context.command;
  }
  get condition(): string {
    return this.context.condition;
  }
  get exitCode(): number | null {
    return this.context.exitCode;
  }
}

// ---- sessions ----
export class SessionAlreadyExistsError extends SandboxError {}
export class SessionNotFoundError extends SandboxError {}
export class SessionDestroyedError extends SandboxError {}
export class SessionTerminatedError extends SandboxError<{
  sessionId?: string;
  exitCode?: number;
  stdout?: string;
  stderr?: string;
  [key: string]: unknown;
}> {
  get sessionId(): string | undefined {
    return this.context.sessionId;
  }
  get exitCode(): number | undefined {
    return this.context.exitCode;
  }
}

// ---- ports ----
export class PortError extends SandboxError {}
export class PortAlreadyExposedError extends PortError {}
export class PortInUseError extends PortError {}
export class PortNotExposedError extends PortError {}
export class InvalidPortError extends PortError {}
export class ServiceNotRespondingError extends PortError {}
export class CustomDomainRequiredError extends PortError {}

// ---- git ----
export class GitError extends SandboxError {}
export class GitCloneError extends GitError {}
export class GitCheckoutError extends GitError {}
export class GitNetworkError extends GitError {}
export class GitAuthenticationError extends GitError {}
export class GitBranchNotFoundError extends GitError {}
export class GitRepositoryNotFoundError extends GitError {}
export class InvalidGitUrlError extends GitError {}

// ---- code interpreter ----
export class InterpreterNotReadyError extends SandboxError {}
export class ContextNotFoundError extends SandboxError {}
/** The context's interpreter exited or was killed (cella: 410 CONTEXT_DEAD). */
export class ContextDeadError extends SandboxError {}
export class CodeExecutionError extends SandboxError {}
/** The sandbox's image has no interpreter for the language (cella: 501
 * INTERPRETER_NOT_FOUND; the hosted SDK says PYTHON_NOT_AVAILABLE). */
export class InterpreterNotFoundError extends SandboxError {}

// ---- validation, sandboxes, platform ----
export class ValidationFailedError extends SandboxError {}
export class SandboxNotFoundError extends SandboxError {}
/** cellad's host storage ran short (507 `INSUFFICIENT_STORAGE`): its data directory is full,
 * or a new sandbox's disk would take the disk promised to sandboxes past cellad's
 * `--disk-overcommit`. Nothing of the request happened. A sandbox's own disk full is
 * `NoSpaceError`. */
export class InsufficientStorageError extends SandboxError {}

// ---- snapshots (cella) ----
/** Base class of the snapshot errors. */
export class SnapshotError extends SandboxError {}
/** No snapshot has that id or name (404 `SNAPSHOT_NOT_FOUND`): `getSnapshot`,
 * `deleteSnapshot`, and a sandbox created `fromSnapshot` one that is not there. */
export class SnapshotNotFoundError extends SnapshotError {}
/** The snapshot cannot be deleted (409 `SNAPSHOT_IN_USE`): a sandbox made from it (in any
 * state), or a snapshot taken of such a sandbox, exists. Destroy those first. */
export class SnapshotInUseError extends SnapshotError {}
/**
 * An invalid sandbox id: `getSandbox` refuses it before any request (code
 * `INVALID_SANDBOX_NAME`, also cellad's answer for a bad name). The hosted SDK throws it for
 * ports it refuses too; cella answers `InvalidPortError` there.
 */
export class SandboxSecurityError extends SandboxError {}
/** The API refused the bearer token (401). */
export class UnauthorizedError extends SandboxError {}
/** The sandbox cannot be started now (limits, a host without what it needs). */
export class ContainerUnavailableError extends SandboxError<{
  reason?: string;
  retryAfterMs?: number;
  [key: string]: unknown;
}> {
  get reason(): string | undefined {
    return this.context.reason;
  }
  get retryAfterMs(): number | undefined {
    return this.context.retryAfterMs;
  }
}
/**
 * The connection to cellad failed: it could not be made (`kind: 'connection_failed'`), or
 * it broke while an answer or stream was in flight (`kind: 'peer_closed'`), or what came
 * back was not the API's (`kind: 'protocol_error'`), or a client WebSocket did not open and
 * the platform gave no answer to read (`kind: 'upgrade_failed'`). The name and the kinds
 * are the hosted SDK's; cella's transport is HTTP.
 */
export class RPCTransportError extends SandboxError<{ kind: string; [key: string]: unknown }> {
  get kind(): string {
    return this.context.kind;
  }
}
export class OperationInterruptedError extends SandboxError {}
/** A hosted-SDK method cella does not have. The message says why and names what to use
 * instead (also in `suggestion`); `context.method` names the method. Code `NOT_SUPPORTED`. */
export class NotSupportedError extends SandboxError {}

// ---- backups (hosted names; cella has no backups yet, they throw NotSupportedError) ----
export class BackupNotFoundError extends SandboxError {}
export class BackupExpiredError extends SandboxError {}
export class InvalidBackupConfigError extends SandboxError {}
export class BackupCreateError extends SandboxError {}
export class BackupRestoreError extends SandboxError {}

// ---- bucket mounts (hosted names and codes; cella mounts no buckets: mountBucket throws
// NotSupportedError). The hosted SDK makes them plain Errors with a `code`; here they are
// SandboxErrors like every other class, so `code` and `instanceof Error` work the same. ----
export class BucketMountError extends SandboxError {}
export class S3FSMountError extends BucketMountError {}
export class BucketUnmountError extends BucketMountError {}
export class MissingCredentialsError extends BucketMountError {}
export class InvalidMountConfigError extends BucketMountError {}

// ---- the hosted Durable Object's runtime and lifetime fences (exported by name so code
// that checks for them compiles; cella has no Durable Object and never throws them) ----
export class RuntimeIdentityInactiveError extends SandboxError {}
export class SandboxLifetimeChangedError extends SandboxError {}
export class SessionInitInvalidatedError extends SandboxError {}

type ErrorClass = new (r: ErrorResponse<any>, o?: { cause?: unknown }) => SandboxError<any>;

/** code → class. Codes of the hosted SDK and cella's own (docs/api.md). */
const byCode: Record<string, ErrorClass> = {
  FILE_NOT_FOUND: FileNotFoundError,
  FILE_EXISTS: FileExistsError,
  FILESYSTEM_ERROR: FileSystemError,
  FILE_TOO_LARGE: FileTooLargeError,
  PERMISSION_DENIED: PermissionDeniedError,
  IS_DIRECTORY: IsDirectoryError,
  NOT_DIRECTORY: NotDirectoryError,
  NO_SPACE: NoSpaceError,
  NAME_TOO_LONG: FileSystemError,
  DIRECTORY_NOT_EMPTY: FileSystemError,
  TOO_MANY_FILES: FileSystemError,
  TOO_MANY_LINKS: FileSystemError,
  READ_ONLY: PermissionDeniedError,
  COMMAND_NOT_FOUND: CommandNotFoundError,
  COMMAND_PERMISSION_DENIED: PermissionDeniedError,
  COMMAND_EXECUTION_ERROR: CommandError,
  INVALID_COMMAND: CommandError,
  COMMAND_TIMEOUT: CommandTimeoutError,
  STREAM_START_ERROR: CommandError,
  PROCESS_NOT_FOUND: ProcessNotFoundError,
  PROCESS_ALREADY_EXISTS: ProcessAlreadyExistsError,
  PROCESS_ERROR: ProcessError,
  PROCESS_PERMISSION_DENIED: PermissionDeniedError,
  PROCESS_READY_TIMEOUT: ProcessReadyTimeoutError,
  PROCESS_EXITED_BEFORE_READY: ProcessExitedBeforeReadyError,
  SESSION_ALREADY_EXISTS: SessionAlreadyExistsError,
  SESSION_NOT_FOUND: SessionNotFoundError,
  SESSION_DESTROYED: SessionDestroyedError,
  SESSION_TERMINATED: SessionTerminatedError,
  PORT_ALREADY_EXPOSED: PortAlreadyExposedError,
  PORT_IN_USE: PortInUseError,
  PORT_NOT_EXPOSED: PortNotExposedError,
  INVALID_PORT: InvalidPortError,
  INVALID_PORT_NUMBER: InvalidPortError,
  PORT_OPERATION_ERROR: PortError,
  SERVICE_NOT_RESPONDING: ServiceNotRespondingError,
  CUSTOM_DOMAIN_REQUIRED: CustomDomainRequiredError,
  GIT_OPERATION_FAILED: GitError,
  GIT_CLONE_FAILED: GitCloneError,
  GIT_CHECKOUT_FAILED: GitCheckoutError,
  GIT_NETWORK_ERROR: GitNetworkError,
  GIT_AUTH_FAILED: GitAuthenticationError,
  GIT_BRANCH_NOT_FOUND: GitBranchNotFoundError,
  GIT_REPOSITORY_NOT_FOUND: GitRepositoryNotFoundError,
  INVALID_GIT_URL: InvalidGitUrlError,
  INTERPRETER_NOT_READY: InterpreterNotReadyError,
  INTERPRETER_NOT_FOUND: InterpreterNotFoundError,
  PYTHON_NOT_AVAILABLE: InterpreterNotFoundError,
  JAVASCRIPT_NOT_AVAILABLE: InterpreterNotFoundError,
  CONTEXT_NOT_FOUND: ContextNotFoundError,
  CONTEXT_DEAD: ContextDeadError,
  CODE_EXECUTION_ERROR: CodeExecutionError,
  VALIDATION_FAILED: ValidationFailedError,
  INVALID_SANDBOX_NAME: SandboxSecurityError,
  SANDBOX_NOT_FOUND: SandboxNotFoundError,
  INSUFFICIENT_STORAGE: InsufficientStorageError,
  SNAPSHOT_NOT_FOUND: SnapshotNotFoundError,
  SNAPSHOT_IN_USE: SnapshotInUseError,
  SANDBOX_UNAVAILABLE: ContainerUnavailableError,
  SANDBOX_LIMIT_REACHED: ContainerUnavailableError,
  CONTAINER_UNAVAILABLE: ContainerUnavailableError,
  UNAUTHORIZED: UnauthorizedError,
  RPC_TRANSPORT_ERROR: RPCTransportError,
  OPERATION_INTERRUPTED: OperationInterruptedError,
  NOT_SUPPORTED: NotSupportedError,
  BACKUP_NOT_FOUND: BackupNotFoundError,
  BACKUP_EXPIRED: BackupExpiredError,
  INVALID_BACKUP_CONFIG: InvalidBackupConfigError,
  BACKUP_CREATE_FAILED: BackupCreateError,
  BACKUP_RESTORE_FAILED: BackupRestoreError,
  BUCKET_MOUNT_ERROR: BucketMountError,
  S3FS_MOUNT_ERROR: S3FSMountError,
  BUCKET_UNMOUNT_ERROR: BucketUnmountError,
  MISSING_CREDENTIALS: MissingCredentialsError,
  INVALID_MOUNT_CONFIG: InvalidMountConfigError,
};

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** Builds the error for an error answer: the class of its code, or `SandboxError`. */
export function createSandboxError(
  response: ErrorResponse<any>,
  options?: { cause?: unknown },
): SandboxError<any> {
  const cls = byCode[response.code] ?? SandboxError;
  return new cls(response, options);
}

/**
 * Parses an error body (any JSON the server sent with a non-2xx status) into an
 * `ErrorResponse`. Something that is not cella's error shape keeps the status and the text.
 */
export function errorResponseFrom(
  status: number,
  body: unknown,
  operation?: string,
): ErrorResponse {
  if (isRecord(body) && typeof body.code === 'string' && typeof body.message === 'string') {
    const r: ErrorResponse = {
      code: body.code,
      message: body.message,
      context: isRecord(body.context) ? body.context : {},
      httpStatus: typeof body.httpStatus === 'number' ? body.httpStatus : status,
      timestamp: typeof body.timestamp === 'string' ? body.timestamp : new Date().toISOString(),
    };
    if (operation) r.operation = operation;
    if (typeof body.suggestion === 'string') r.suggestion = body.suggestion;
    return r;
  }
  const text = typeof body === 'string' ? body.slice(0, 500) : JSON.stringify(body)?.slice(0, 500);
  const r: ErrorResponse = {
    code: status >= 500 ? 'INTERNAL_ERROR' : 'UNKNOWN_ERROR',
    message: `HTTP ${status}${text ? `: ${text}` : ''}`,
    context: {},
    httpStatus: status,
    timestamp: new Date().toISOString(),
  };
  if (operation) r.operation = operation;
  return r;
}

/** An error made on this side (validation, a client-side wait), in the same shape. */
export function clientError<T extends SandboxError<any>>(
  cls: new (r: ErrorResponse<any>, o?: { cause?: unknown }) => T,
  code: string,
  httpStatus: number,
  message: string,
  context: Record<string, unknown> = {},
  extra?: { operation?: string; suggestion?: string; cause?: unknown },
): T {
  const r: ErrorResponse = {
    code,
    message,
    context,
    httpStatus,
    timestamp: new Date().toISOString(),
  };
  if (extra?.operation) r.operation = extra.operation;
  if (extra?.suggestion) r.suggestion = extra.suggestion;
  return new cls(r, extra?.cause !== undefined ? { cause: extra.cause } : undefined);
}

/**
 * A hosted method cella does not have: `NOT_SUPPORTED` (501) whose message says why
 * (`reason`) and what to use instead (`alternative`, also the `suggestion`).
 */
export function notSupported(method: string, reason: string, alternative: string): NotSupportedError {
  return clientError(
    NotSupportedError,
    'NOT_SUPPORTED',
    501,
    `${method} is not supported by cella: ${reason}. Instead: ${alternative}`,
    { method },
    { suggestion: alternative },
  );
}

/** The transport kinds worth retrying: the connection was not made, or it broke. */
const TRANSIENT_KINDS = new Set(['connection_failed', 'peer_closed']);

/**
 * True for failures worth retrying as they are: the connection to cellad could not be made
 * or broke (`RPCTransportError` of kind `connection_failed` or `peer_closed`; not
 * `protocol_error` or `upgrade_failed`, which a retry does not mend), or any answer with
 * status 503 (`SANDBOX_UNAVAILABLE`, `INTERPRETER_NOT_READY`, a proxy's 503 ...). The
 * hosted SDK's name.
 */
export function isPlatformTransientError(e: unknown): boolean {
  if (e instanceof RPCTransportError) return TRANSIENT_KINDS.has(e.kind);
  if (e instanceof SandboxError) return e.httpStatus === 503;
  return false;
}

/** Always false in cella: there are no Durable Object code updates. The hosted SDK's name. */
export function isDurableObjectCodeUpdateReset(_e: unknown): boolean {
  return false;
}
