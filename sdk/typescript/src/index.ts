/**
 * `@cella/sandbox`: the `@cloudflare/sandbox` API on a self-hosted cellad. Existing code
 * ports by changing the import and the line that gets the namespace:
 *
 *     import { connect, getSandbox } from '@cella/sandbox';
 *     const sandbox = getSandbox(connect({ url: 'http://127.0.0.1:7070' }), 'my-sandbox');
 *     const r = await sandbox.exec('echo hi');
 */
export { connect, getSandbox, CellaNamespace, Sandbox, ExecutionSession, ContainerProxy } from './sandbox.js';
export type { ConnectOptions } from './transport.js';
export { parseSSEStream, responseToAsyncIterable, asyncIterableToSSEStream } from './sse.js';
export { streamFile, collectFile } from './files.js';
export type { WriteFileOptions, ReadFileOptions } from './files.js';
export { CodeInterpreter, Execution } from './interpreter.js';
export {
  SandboxError,
  type ErrorResponse,
  FileNotFoundError,
  FileExistsError,
  FileSystemError,
  FileTooLargeError,
  PermissionDeniedError,
  IsDirectoryError,
  NotDirectoryError,
  NoSpaceError,
  CommandError,
  CommandNotFoundError,
  CommandTimeoutError,
  ProcessError,
  ProcessNotFoundError,
  ProcessAlreadyExistsError,
  ProcessReadyTimeoutError,
  ProcessExitedBeforeReadyError,
  type ProcessReadyContext,
  type ProcessExitedContext,
  SessionAlreadyExistsError,
  SessionNotFoundError,
  SessionDestroyedError,
  SessionTerminatedError,
  PortError,
  PortAlreadyExposedError,
  PortInUseError,
  PortNotExposedError,
  InvalidPortError,
  ServiceNotRespondingError,
  CustomDomainRequiredError,
  GitError,
  GitCloneError,
  GitCheckoutError,
  GitNetworkError,
  GitAuthenticationError,
  GitBranchNotFoundError,
  GitRepositoryNotFoundError,
  InvalidGitUrlError,
  InterpreterNotReadyError,
  ContextNotFoundError,
  ContextDeadError,
  CodeExecutionError,
  InterpreterNotFoundError,
  ValidationFailedError,
  SandboxNotFoundError,
  InsufficientStorageError,
  SnapshotError,
  SnapshotNotFoundError,
  SnapshotInUseError,
  SandboxSecurityError,
  UnauthorizedError,
  ContainerUnavailableError,
  RPCTransportError,
  OperationInterruptedError,
  NotSupportedError,
  BackupNotFoundError,
  BackupExpiredError,
  InvalidBackupConfigError,
  BackupCreateError,
  BackupRestoreError,
  BucketMountError,
  S3FSMountError,
  BucketUnmountError,
  MissingCredentialsError,
  InvalidMountConfigError,
  RuntimeIdentityInactiveError,
  SandboxLifetimeChangedError,
  SessionInitInvalidatedError,
  isPlatformTransientError,
  isDurableObjectCodeUpdateReset,
} from './errors.js';
export * from './types.js';
export { isExecResult, isProcess, isProcessStatus } from './guards.js';
export { proxyToSandbox, parsePreviewHost } from './proxy.js';
export type { ProxyEnv, ProxyToSandboxOptions, PreviewHost } from './proxy.js';
export { UPGRADE, getUpgradeTarget, isWebSocketUpgrade } from './websocket.js';
export type { UpgradeTarget, ConnectWebSocketOptions } from './websocket.js';
export { proxyTerminal, Terminal } from './terminal.js';
export type { OpenTerminalOptions, TerminalControlMessage, TerminalStub } from './terminal.js';
