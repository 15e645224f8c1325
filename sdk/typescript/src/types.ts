/**
 * Public types. Names, fields and shapes are those of `@cloudflare/sandbox` 0.12; fields
 * cella adds are marked "cella:".
 */

// ---------------------------------------------------------------- sandbox options

/** Options of `getSandbox(ns, id, options)`. */
export interface SandboxOptions {
  /** Idle time before the sandbox sleeps: seconds, or `"30s"`, `"10m"`, `"2h"`, `"1d"`.
   * Default 10 minutes. Ignored while `keepAlive` is set. */
  sleepAfter?: string | number;
  /** Never sleep; the caller destroys the sandbox. */
  keepAlive?: boolean;
  /** `false`: commands that name no session each run in a fresh `bash -c`. Default true.
   * Applies when the sandbox is created. */
  enableDefaultSession?: boolean;
  /** Lower-case the id before use (a different sandbox than the id as written). */
  normalizeId?: boolean;
  /** Metadata kept with the sandbox. */
  labels?: Record<string, string>;
  /** Cloudflare's container budgets. `portReadyTimeoutMS` and `waitIntervalMS` are the
   * defaults of `startAndWaitForPorts`; `instanceGetTimeoutMS` is accepted and unused.
   * Nothing is sent to cellad. */
  containerTimeouts?: {
    instanceGetTimeoutMS?: number;
    portReadyTimeoutMS?: number;
    waitIntervalMS?: number;
  };
  /** Cloudflare only (the Durable Object ↔ container channel): accepted and ignored. */
  transport?: 'http' | 'websocket' | 'rpc';
  /** cella: the image the sandbox is made from (at creation). */
  image?: string;
  /** cella: `lite`, `basic`, `standard-1` ... (at creation). */
  instanceType?: string;
  /** cella: environment of every command (kept by the sandbox). */
  env?: Record<string, string>;
  /** cella: `outbound` (default where the host can) or `none` (loopback only). */
  network?: 'none' | 'outbound';
  /** cella: destinations opened before the private-range refusals, `"a.b.c.d[/n][:port]"`. */
  networkAllow?: string[];
  /** cella: a snapshot (id or name) the sandbox starts with the files of, at creation; its
   * image is the snapshot's. A handle whose sandbox exists and was made from another
   * snapshot (or none) fails its first operation with `ValidationFailedError`; one made
   * from this snapshot is used as it is. Unknown: `SnapshotNotFoundError`. */
  fromSnapshot?: string;
}

/** What `GET /v1/sandboxes/{id}` answers (cella). */
export interface SandboxInfo {
  id: string;
  state: 'running' | 'sleeping' | 'stopped' | string;
  image: string;
  instanceType: string;
  createdAt: string;
  lastActiveAt: string;
  labels: Record<string, string>;
  env: Record<string, string>;
  sleepAfter: number;
  keepAlive: boolean;
  enableDefaultSession: boolean;
  network: 'none' | 'outbound';
  networkAllow: string[];
  networkAddress?: string;
  disk?: { limitBytes: number; usedBytes: number };
  /** cella: the sleep mode asked for (`PUT {sleepMode}`). */
  sleepModeRequested?: 'files' | 'memory';
  /** cella: what a sleep does on this host. */
  sleepMode?: 'files' | 'memory';
  /** cella: when `sleepMode` differs from `sleepModeRequested`, why (one line). */
  sleepModeFallback?: string;
  /** cella: while it sleeps with its memory, its checkpoint's size on disk in bytes. */
  memorySnapshotBytes?: number;
  /** cella: why its last memory sleep or wake fell back to its files, if it did. */
  memorySleepError?: string;
  /** cella: the tenant it belongs to (absent for the admin's sandboxes). */
  tenant?: string;
  /** cella: on a cluster, the node it runs on. */
  node?: string;
  /** The id of the snapshot it was made from (`fromSnapshot`, `fork`), if any. */
  snapshot?: string;
  /** In a fork's answer: true when it was forked with its parent's processes. */
  forkedWithMemory?: boolean;
  /** On a cluster node: the backup its files were restored from when it was placed anew
   * after its node went (docs/api.md, "Cluster"), if any. */
  restoredFrom?: RestoredFrom;
}

/** The backup a cluster's failover restored a sandbox's files from. */
export interface RestoredFrom {
  backupId: string;
  createdAt: string;
  dir: string;
}

/** The hosted `Container.getState()` shape. */
export interface SandboxState {
  status: 'running' | 'healthy' | 'stopping' | 'stopped' | 'stopped_with_code';
  lastChange: number;
  exitCode?: number;
}

/** The hosted `Container.startAndWaitForPorts` cancellation options. */
export interface CancellationOptions {
  /** Aborting cancels the start and the wait. */
  abort?: AbortSignal;
  /** Accepted, unused: cellad answers once the sandbox has started. */
  instanceGetTimeoutMS?: number;
  /** Milliseconds the ports may take, all together (default: `containerTimeouts`', else
   * 90000); then `ProcessReadyTimeoutError`. */
  portReadyTimeoutMS?: number;
  /** Milliseconds between tries (default: `containerTimeouts.waitIntervalMS`, else 300). */
  waitInterval?: number;
}

/** The hosted `Container` start options. */
export interface ContainerStartConfigOptions {
  /** Set as the sandbox's environment (`setEnvVars`) before the ports are waited for. */
  envVars?: Record<string, string>;
  /** Accepted, unused: a sandbox runs cella's agent, not an entrypoint. */
  entrypoint?: string[];
  /** Accepted, unused: the sandbox's network is the `network` option, fixed at creation. */
  enableInternet?: boolean;
}

/** The object form of `startAndWaitForPorts`. */
export interface StartAndWaitForPortsOptions {
  ports?: number | number[];
  cancellationOptions?: CancellationOptions;
  startOptions?: ContainerStartConfigOptions;
}

// ---------------------------------------------------------------- snapshots and fork (cella)

/** A snapshot: a sandbox's files at one moment (`GET /v1/snapshots/{id}`). */
export interface SnapshotInfo {
  /** `snap-` and 16 hex digits. */
  snapshotId: string;
  /** Its name: the one given to `createSnapshot`, else its id. */
  name: string;
  /** The sandbox it was taken of (which may since have been destroyed). */
  sandbox: string;
  /** The image under it: sandboxes made from it have this image. */
  image: string;
  /** Bytes it occupies on cellad's disk (counted once, however many sandboxes use it). */
  sizeBytes: number;
  /** ISO time it was taken. */
  createdAt: string;
}

/** Options of `sandbox.createSnapshot()`. */
export interface CreateSnapshotOptions {
  /** 1-63 of `a-z 0-9 . _ -`, not starting with `.` or `-`, unique among snapshots;
   * default: its id. A taken or bad name is `ValidationFailedError`. */
  name?: string;
  /** Aborting cancels the request (a capture under way still completes in cellad). */
  signal?: AbortSignal;
}

/** Options of `ns.listSnapshots()`. */
export interface ListSnapshotsOptions {
  /** Only those taken of this sandbox (also once it is destroyed). */
  sandbox?: string;
}

/** What `ns.deleteSnapshot()` answers. */
export interface DeleteSnapshotResult {
  /** The id of the snapshot deleted (also when it was named by its name). */
  snapshotId: string;
  deleted: boolean;
}

/**
 * Options of `sandbox.fork()`: the new sandbox's name, and options of its handle (as
 * `getSandbox` takes them) that cellad applies to an existing sandbox, sent in one `PUT`
 * once the fork is made. The child has the parent's image and files; its environment,
 * labels, network and other settings are cellad's defaults unless given here. Options
 * fixed at creation (`image`, `instanceType`, `network`, `enableDefaultSession`) cannot
 * be given to a fork: take a snapshot and use `getSandbox(ns, id, { fromSnapshot, ... })`.
 */
export interface ForkOptions {
  /** The new sandbox's id: a free, valid sandbox name (else `SandboxSecurityError` here, or
   * `ValidationFailedError` from cellad when a sandbox of that name exists). */
  name: string;
  /** Lower-case `name` before use. */
  normalizeId?: boolean;
  sleepAfter?: string | number;
  keepAlive?: boolean;
  labels?: Record<string, string>;
  env?: Record<string, string>;
  networkAllow?: string[];
  containerTimeouts?: SandboxOptions['containerTimeouts'];
  /** cella: with the parent's processes too (its background servers, sessions and code
   * contexts go on in the child; the parent runs on): `POST /fork {"memory": true}`.
   * An error with code `MEMORY_FORK_FAILED` (500) when CRIU could not dump or restore it,
   * `MEMORY_SNAPSHOT_UNAVAILABLE` (501) where the host cannot; nothing made either way.
   * Default false. */
  memory?: boolean;
  /** Aborting cancels the request (a fork under way still completes in cellad). */
  signal?: AbortSignal;
}

// ---------------------------------------------------------------- commands

export interface BaseExecOptions {
  /** Milliseconds; the command's process tree is killed when it passes. */
  timeout?: number;
  /** Per-command environment; `undefined`/`null` values are dropped. */
  env?: Record<string, string | undefined | null>;
  /** Per-command working directory; does not move the session's. */
  cwd?: string;
  /** Accepted; output is always UTF-8 text (bytes that are not are replaced). */
  encoding?: string;
}

export interface ExecOptions extends BaseExecOptions {
  /** With `onOutput`: run through the streaming route and call `onOutput` as output arrives. */
  stream?: boolean;
  onOutput?: (stream: 'stdout' | 'stderr', data: string) => void;
  onComplete?: (result: ExecResult) => void;
  onError?: (error: Error) => void;
  /** Aborting cancels the request; cella then kills the command's process tree. */
  signal?: AbortSignal;
  /** Logging only. */
  origin?: 'user' | 'internal';
  /** cella: the session to run in (an `ExecutionSession` sets it). */
  sessionId?: string;
}

export interface ExecResult {
  success: boolean;
  exitCode: number;
  stdout: string;
  stderr: string;
  command: string;
  /** Milliseconds. */
  duration: number;
  /** ISO time of the start. */
  timestamp: string;
  sessionId?: string;
  /** cella: set when the output passed the 64 MiB per-stream cap and was cut. */
  truncated?: boolean;
}

export interface StreamOptions extends BaseExecOptions {
  sessionId?: string;
  /** Accepted, unused. */
  bufferSize?: number;
  signal?: AbortSignal;
}

/** How a command run by `execRaw` ended (its stdout was the stream). cella only. */
export interface RawExecResult {
  success: boolean;
  exitCode: number;
  /** The first 64 KiB of its stderr, as bytes. */
  stderr: Uint8Array;
  /** Set when it wrote more stderr than `stderr` holds. */
  stderrTruncated: boolean;
  command: string;
  /** Milliseconds. */
  duration: number;
  /** Its pid in the sandbox. */
  pid: number;
  sessionId?: string;
}

/** What `execRaw` answers once the command started. cella only. */
export interface RawExec {
  /** The command's stdout, byte for byte as it comes (nothing decoded). Cancelling it
   * stops the command. */
  stdout: ReadableStream<Uint8Array>;
  /** Its pid in the sandbox. */
  pid: number;
  /** Settles after stdout's end: how the command ended, or the error it ended with
   * (`CommandTimeoutError`, `SessionTerminatedError`, a transport error when the stream
   * broke or was cancelled). Read `stdout` to its end first: the trailers come after it. */
  result: Promise<RawExecResult>;
}

export interface ExecEvent {
  type: 'start' | 'stdout' | 'stderr' | 'complete' | 'error';
  timestamp: string;
  data?: string;
  command?: string;
  exitCode?: number;
  result?: ExecResult;
  error?: string;
  sessionId?: string;
  pid?: number;
  /** cella: `"base64"` when `data` carries bytes that are not UTF-8. */
  encoding?: 'base64';
  /** cella: the error code of an `error` event (e.g. `COMMAND_TIMEOUT`). */
  code?: string;
  /** cella: the command's duration on `complete`, ms. */
  duration?: number;
}

// ---------------------------------------------------------------- processes

export type ProcessStatus = 'starting' | 'running' | 'completed' | 'failed' | 'killed' | 'error';

export interface ProcessOptions extends BaseExecOptions {
  /**
   * Accepted and not enforced: cellad's background processes have no time limit, so the
   * process runs until it exits or is killed (the hosted SDK enforces it only without a
   * default session). Bound a wait with `waitForExit(timeout)`, then `kill()`.
   */
  timeout?: number;
  /**
   * Accepted and unused: logs and `onOutput` are text; output that is not UTF-8 is decoded
   * with U+FFFD for the bytes that are not (read files for exact bytes).
   */
  encoding?: string;
  sessionId?: string;
  /** A custom id (1–64 of `[A-Za-z0-9_.-]`); cella answers 409 if it is in use. */
  processId?: string;
  /** Accepted, unused. */
  autoCleanup?: boolean;
  onExit?: (code: number | null) => void;
  onOutput?: (stream: 'stdout' | 'stderr', data: string) => void;
  onStart?: (process: Process) => void;
  onError?: (error: Error) => void;
}

/** The plain data of a process (the hosted SDK's `ProcessInfo`). */
export interface ProcessInfo {
  id: string;
  pid?: number;
  command: string;
  status: ProcessStatus;
  startTime: Date;
  endTime?: Date;
  exitCode?: number;
  sessionId?: string;
  /** cella: the signal that ended it. */
  signal?: number;
  /** cella: why it could not start (status `error`). */
  error?: string;
}

export interface WaitForLogResult {
  /** The whole matching line, without its newline. */
  line: string;
  /** The RegExp's match (RegExp patterns only). */
  match?: RegExpMatchArray;
}

export interface WaitForPortOptions {
  /** `http` (default): wait for a status in `status`; `tcp`: wait for a connection. */
  mode?: 'http' | 'tcp';
  path?: string;
  status?: number | { min?: number; max?: number };
  /** Milliseconds; none by default. */
  timeout?: number;
  /** Milliseconds between tries (default 500). */
  interval?: number;
}

export interface WaitForExitResult {
  exitCode: number;
}

/** A background process: a snapshot of its state plus bound methods. */
export interface Process extends ProcessInfo {
  /** Sends SIGTERM (then SIGKILL) to the whole process tree, or the given signal. */
  kill(signal?: string): Promise<void>;
  getStatus(): Promise<ProcessStatus>;
  getLogs(): Promise<{ stdout: string; stderr: string }>;
  waitForLog(pattern: string | RegExp, timeout?: number): Promise<WaitForLogResult>;
  waitForPort(port: number, options?: WaitForPortOptions): Promise<void>;
  waitForExit(timeout?: number): Promise<WaitForExitResult>;
}

export interface LogEvent {
  type: 'stdout' | 'stderr' | 'exit' | 'error';
  timestamp: string;
  data: string;
  processId: string;
  sessionId?: string;
  exitCode?: number;
  /** cella: the final status on `exit`. */
  status?: ProcessStatus;
}

export interface ProcessLogsResult {
  stdout: string;
  stderr: string;
  processId: string;
}

// ---------------------------------------------------------------- files

export interface WriteFileResult {
  success: boolean;
  path: string;
  timestamp: string;
  exitCode?: number;
  /** cella: bytes written. */
  bytesWritten?: number;
}

export interface ReadFileResult {
  success: boolean;
  path: string;
  content: string;
  timestamp: string;
  exitCode?: number;
  encoding?: 'utf-8' | 'base64';
  isBinary?: boolean;
  mimeType?: string;
  size?: number;
}

export interface ReadFileStreamResult {
  success: true;
  path: string;
  content: ReadableStream<Uint8Array>;
  size: number;
  mimeType: string;
  timestamp: string;
}

export interface MkdirResult {
  success: boolean;
  path: string;
  recursive: boolean;
  timestamp: string;
  exitCode?: number;
}

export interface DeleteFileResult {
  success: boolean;
  path: string;
  timestamp: string;
  exitCode?: number;
}

export interface RenameFileResult {
  success: boolean;
  path: string;
  newPath: string;
  timestamp: string;
  exitCode?: number;
}

export type MoveFileResult = RenameFileResult;

export interface FileInfo {
  name: string;
  absolutePath: string;
  relativePath: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modifiedAt: string;
  mode: string;
  permissions: { readable: boolean; writable: boolean; executable: boolean };
  /**
   * cella: `'base64'` when the name, or a directory above it, is not valid UTF-8 (a file a
   * command made). `name`, `absolutePath` and `relativePath` then show invalid bytes as
   * U+FFFD, and the `...Base64` fields hold the exact bytes; cellad's raw file routes take
   * them back with `pathEncoding=base64`.
   */
  nameEncoding?: 'base64';
  /** cella: the name's bytes, base64 (with `nameEncoding`). */
  nameBase64?: string;
  /** cella: the absolute path's bytes, base64 (with `nameEncoding`). */
  absolutePathBase64?: string;
  /** cella: the relative path's bytes, base64 (with `nameEncoding`). */
  relativePathBase64?: string;
}

export interface ListFilesOptions {
  recursive?: boolean;
  includeHidden?: boolean;
}

export interface ListFilesResult {
  success: boolean;
  path: string;
  files: FileInfo[];
  count: number;
  timestamp: string;
  exitCode?: number;
}

export interface FileExistsResult {
  success: boolean;
  path: string;
  exists: boolean;
  timestamp: string;
  exitCode?: number;
}

export interface FileMetadata {
  mimeType: string;
  size: number;
  isBinary: boolean;
  encoding: 'utf-8' | 'base64';
}

export type FileStreamEvent =
  | ({ type: 'metadata' } & FileMetadata)
  | { type: 'chunk'; data: string }
  | { type: 'complete'; bytesRead: number }
  | { type: 'error'; error: string };

export interface WatchOptions {
  /** Default true. */
  recursive?: boolean;
  /** Globs; only matching paths are reported. */
  include?: string[];
  /** Globs; default `[".git", "node_modules"]`. */
  exclude?: string[];
  /** Aborting ends the watch. */
  signal?: AbortSignal;
  sessionId?: string;
}

export type FileWatchEventType = 'create' | 'modify' | 'delete' | 'move_from' | 'move_to' | 'attrib';

export type FileWatchSSEEvent =
  | { type: 'watching'; path: string; watchId?: string; timestamp?: string }
  | {
      type: 'event';
      eventType: FileWatchEventType;
      path: string;
      isDirectory: boolean;
      timestamp: string;
    }
  | { type: 'error'; error: string; timestamp?: string }
  | { type: 'stopped'; reason: string; timestamp?: string }
  /** cella: events were lost (a slow reader); list the directory again. */
  | { type: 'overflow'; timestamp?: string };

// ---------------------------------------------------------------- git

export interface GitCheckoutOptions {
  branch?: string;
  targetDir?: string;
  sessionId?: string;
  depth?: number;
  /** Milliseconds (default 600000). */
  cloneTimeoutMs?: number;
}

export interface GitCheckoutResult {
  success: boolean;
  repoUrl: string;
  branch: string;
  targetDir: string;
  timestamp: string;
  exitCode?: number;
}

// ---------------------------------------------------------------- sessions

export interface SessionOptions {
  id?: string;
  /** Accepted (the hosted SDK's display name); not sent. */
  name?: string;
  env?: Record<string, string | undefined | null>;
  cwd?: string;
  /** Accepted, ignored: sessions share the sandbox's filesystem and processes. */
  isolation?: boolean;
  commandTimeoutMs?: number;
}

export interface DeleteSessionResult {
  success: boolean;
  sessionId: string;
  timestamp: string;
}

/** cella: a session as the API lists it. */
export interface SessionInfo {
  id: string;
  cwd: string;
  createdAt: string;
  running: boolean;
  busy: boolean;
  commandTimeoutMs?: number;
}

// ---------------------------------------------------------------- ports

export interface ExposePortOptions {
  /** The host preview URLs are built on. Default: cellad's own (`--preview-domain`). Give
   * your server's host when it forwards preview requests with `proxyToSandbox`. */
  hostname?: string;
  name?: string;
  /** 1–16 of `[a-z0-9_]`; default a random 16-character token. */
  token?: string;
}

export interface ExposedPort {
  url: string;
  port: number;
  name?: string;
  status: 'active' | 'stale' | string;
}

// ---------------------------------------------------------------- code interpreter

export interface CreateContextOptions {
  language?: 'python' | 'javascript' | 'typescript';
  cwd?: string;
  envVars?: Record<string, string>;
  /** Accepted; cella times runs, not context creation. */
  timeout?: number;
}

export interface CodeContext {
  readonly id: string;
  readonly language: string;
  readonly cwd: string;
  /** cella keeps no times: when this client first saw the context (its creation, for
   * contexts it created). */
  readonly createdAt: Date;
  /** cella: when this client last ran code in it (else `createdAt`). */
  readonly lastUsed: Date;
  /** cella: the interpreter's state (`dead`: it exited or was killed; delete the context). */
  readonly status?: 'starting' | 'ready' | 'busy' | 'dead' | string;
}

export interface OutputMessage {
  text: string;
  timestamp: number;
}

export interface ExecutionError {
  name: string;
  message: string;
  traceback: string[];
  /** The line of the run's code the error was raised at, read from the traceback. */
  lineNumber?: number;
}

export interface ChartData {
  type?: string;
  title?: string;
  data?: unknown;
  [key: string]: unknown;
}

/** One rich result of a run (the value of the last expression, a figure, a display()). */
export interface Result {
  text?: string;
  html?: string;
  png?: string;
  jpeg?: string;
  svg?: string;
  latex?: string;
  markdown?: string;
  javascript?: string;
  json?: unknown;
  chart?: ChartData;
  data?: unknown;
  /** cella: true on the value of the last expression. */
  isMainResult?: boolean;
  /** The formats this result has. */
  formats(): string[];
}

export interface RunCodeOptions {
  context?: CodeContext;
  language?: 'python' | 'javascript' | 'typescript';
  /**
   * Accepted and not sent: a run in cellad has no environment of its own (a context's
   * interpreter keeps one environment). Give a context its variables when it is created:
   * `createCodeContext({ envVars })`, then `runCode(code, { context })`.
   */
  envVars?: Record<string, string>;
  /** Milliseconds; the run is interrupted (KeyboardInterrupt) when it passes. */
  timeout?: number;
  signal?: AbortSignal;
  onStdout?: (output: OutputMessage) => void | Promise<void>;
  onStderr?: (output: OutputMessage) => void | Promise<void>;
  onResult?: (result: Result) => void | Promise<void>;
  onError?: (error: ExecutionError) => void | Promise<void>;
}

export interface ExecutionResult {
  code: string;
  logs: { stdout: string[]; stderr: string[] };
  error?: ExecutionError;
  executionCount?: number;
  results: Array<Omit<Result, 'formats'>>;
  /** cella: the run was interrupted by its timeout. */
  timedOut?: boolean;
  /** cella: the output passed the 64 MiB buffered cap and was cut (JSON route only). */
  truncated?: boolean;
}

/**
 * The events of `runCodeStream` (parse them with `parseSSEStream<RunCodeStreamEvent>`):
 * the hosted SDK's names and fields, plus cella's (`name`/`message` beside `ename`/`evalue`,
 * `executionCount` beside `execution_count`, a `timestamp` on each).
 */
export type RunCodeStreamEvent =
  | { type: 'stdout' | 'stderr'; text: string; timestamp: string }
  | ({ type: 'result'; timestamp: string } & Omit<Result, 'formats'>)
  | {
      type: 'error';
      ename: string;
      evalue: string;
      traceback: string[];
      name: string;
      message: string;
      timestamp: string;
      /** cella: the line of the code the error was raised at (as `ExecutionError`). */
      lineNumber?: number;
      /** cella: set when the run itself failed (`CONTEXT_DEAD`: the interpreter died); the
       * stream ends after it, with no `execution_complete`. */
      code?: string;
    }
  | {
      type: 'execution_complete';
      execution_count: number;
      executionCount: number;
      timedOut: boolean;
      timestamp: string;
    };

// ---------------------------------------------------------------- terminal

export interface PtyOptions {
  cols?: number;
  rows?: number;
  /** Accepted; cella runs the image's bash (or sh). */
  shell?: string;
}

// ---------------------------------------------------------------- env

export type EnvVars = Record<string, string | undefined | null>;
