/**
 * `connect`, `getSandbox`, the `Sandbox` and the `ExecutionSession`. A `Sandbox` is a
 * handle: making one sends nothing; its first operation creates the sandbox in cellad
 * (docs/api.md: lazy creation by name). Each method is one module's function
 * (commands, processes, files, ports, interpreter, terminal) bound to the handle.
 */
import * as backups from './backups.js';
import * as commands from './commands.js';
import { SandboxCore } from './core.js';
import {
  InvalidPortError,
  SandboxNotFoundError,
  SandboxSecurityError,
  SessionAlreadyExistsError,
  SessionNotFoundError,
  ValidationFailedError,
  clientError,
  notSupported,
} from './errors.js';
import * as files from './files.js';
import * as interpreter from './interpreter.js';
import type { CodeContext, CreateContextOptions, RunCodeOptions } from './types.js';
import * as ports from './ports.js';
import * as processes from './processes.js';
import * as snapshots from './snapshots.js';
import * as terminals from './terminal.js';
import * as websockets from './websocket.js';
import type { PtyOptions } from './types.js';
import { Transport, type ConnectOptions } from './transport.js';
import type {
  CancellationOptions,
  ContainerStartConfigOptions,
  DeleteSessionResult,
  EnvVars,
  ExecOptions,
  ExecResult,
  ExposedPort,
  ExposePortOptions,
  FileExistsResult,
  GitCheckoutOptions,
  GitCheckoutResult,
  ListFilesOptions,
  ListFilesResult,
  MkdirResult,
  MoveFileResult,
  Process,
  ProcessLogsResult,
  ProcessOptions,
  ReadFileResult,
  ReadFileStreamResult,
  RenameFileResult,
  SandboxInfo,
  SandboxOptions,
  SandboxState,
  SessionInfo,
  SessionOptions,
  StartAndWaitForPortsOptions,
  StreamOptions,
  RawExec,
  WatchOptions,
  WriteFileResult,
  DeleteFileResult,
  CreateSnapshotOptions,
  DeleteSnapshotResult,
  ForkOptions,
  ListSnapshotsOptions,
  SnapshotInfo,
} from './types.js';
import { cleanEnv, compact, nowIso } from './util.js';

/**
 * A connection to one cellad: what stands where the hosted SDK has a Durable Object
 * namespace (`env.Sandbox`). Make one with `connect()`.
 */
export class CellaNamespace {
  /** @internal */
  readonly transport: Transport;
  constructor(options: ConnectOptions) {
    this.transport = new Transport(options);
  }
  /** cellad's base URL. */
  get url(): string {
    return this.transport.baseUrl;
  }
  /** `GET /v1/health`. */
  async health(): Promise<{ status: string; version: string; sandboxes: number; [k: string]: unknown }> {
    return this.transport.json('GET', '/v1/health');
  }
  /** Every sandbox of this cellad (`GET /v1/sandboxes`). */
  async listSandboxes(): Promise<SandboxInfo[]> {
    const r = await this.transport.json<{ sandboxes: SandboxInfo[] }>('GET', '/v1/sandboxes');
    return r.sandboxes;
  }

  // ------------------------------------------------------------------ snapshots

  /** cella: every snapshot, oldest first; with `{ sandbox }`, those taken of that sandbox
   * (also once it is destroyed). */
  listSnapshots(options?: ListSnapshotsOptions): Promise<SnapshotInfo[]> {
    return snapshots.listSnapshots(this.transport, options);
  }
  /** cella: a snapshot by id or name; `SnapshotNotFoundError` when there is none. */
  getSnapshot(snapshotId: string): Promise<SnapshotInfo> {
    return snapshots.getSnapshot(this.transport, snapshotId);
  }
  /** cella: deletes a snapshot (by id or name). `SnapshotInUseError` while a sandbox made
   * from it exists, `SnapshotNotFoundError` when there is none. */
  deleteSnapshot(snapshotId: string): Promise<DeleteSnapshotResult> {
    return snapshots.deleteSnapshot(this.transport, snapshotId);
  }
}

/** Connects to cellad: `getSandbox(connect({ url, token }), 'my-sandbox')`. Sends nothing. */
export function connect(options: ConnectOptions): CellaNamespace {
  return new CellaNamespace(options);
}

/** The session of calls that name none (docs/api.md). */
const DEFAULT_SESSION = 'default';

const RESERVED = new Set(['www', 'api', 'admin', 'root', 'system', 'cloudflare', 'workers']);

/** The sandbox name rules (lower-case a–z, 0–9, `-`; 1–63; not starting or ending with `-`). */
function checkId(id: unknown): asserts id is string {
  const bad = (why: string) =>
    clientError(SandboxSecurityError, 'INVALID_SANDBOX_NAME', 400, `invalid sandbox id '${String(id)}': ${why}`, { id });
  if (typeof id !== 'string' || id.length === 0) throw bad('it must be a non-empty string');
  if (id.length > 63) throw bad('at most 63 characters');
  if (!/^[a-z0-9-]+$/.test(id)) throw bad('only lower-case letters a-z, digits 0-9 and - (or pass normalizeId: true)');
  if (id.startsWith('-') || id.endsWith('-')) throw bad('it must not start or end with -');
  if (RESERVED.has(id)) throw bad('the name is reserved');
}

/**
 * The handle of sandbox `id` on `ns`. Synchronous and free: the sandbox is created (with
 * `options`) by its first operation. Throws `SandboxSecurityError` for an invalid id.
 */
export function getSandbox(ns: CellaNamespace, id: string, options: SandboxOptions = {}): Sandbox {
  if (!(ns instanceof CellaNamespace))
    throw new TypeError('getSandbox(ns, id): ns must come from connect({ url, token })');
  const name = options.normalizeId && typeof id === 'string' ? id.toLowerCase() : id;
  checkId(name);
  return new Sandbox(new SandboxCore(ns.transport, name, { ...options }));
}

function checkSessionId(id: unknown): asserts id is string {
  if (typeof id !== 'string' || !/^[A-Za-z0-9_.-]{1,64}$/.test(id))
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'a session id is 1-64 of [A-Za-z0-9_.-]', {
      sessionId: id,
    });
}

/** A sandbox: commands, processes, files, sessions, ports, code, terminal. */
export class Sandbox {
  /** @internal */
  readonly core: SandboxCore;

  /** @internal use getSandbox() */
  constructor(core: SandboxCore) {
    this.core = core;
  }

  /** The sandbox's id (its name in cellad). */
  get id(): string {
    return this.core.id;
  }

  // ------------------------------------------------------------------ commands

  /** Runs a command and answers its result; a non-zero exit is not an error. */
  exec(command: string, options?: ExecOptions): Promise<ExecResult> {
    return commands.exec(this.core, command, options);
  }

  /** Runs a command and answers its events as an SSE byte stream (`parseSSEStream`). */
  execStream(command: string, options?: StreamOptions): Promise<ReadableStream<Uint8Array>> {
    return commands.execStream(this.core, command, options);
  }

  /**
   * cella: runs a command and answers its stdout as bytes as they come (the raw form:
   * nothing escaped or decoded, the fastest way to take bulk output) and a promise of how
   * it ended (exit code, first 64 KiB of stderr) that settles after stdout's end. Node only.
   */
  execRaw(command: string, options?: StreamOptions): Promise<RawExec> {
    return commands.execRaw(this.core, command, options);
  }

  // ------------------------------------------------------------------ processes

  startProcess(command: string, options?: ProcessOptions): Promise<Process> {
    return processes.startProcess(this.core, command, options);
  }
  /** Running and finished processes, oldest first. `sessionId` does not filter (hosted). */
  listProcesses(_sessionId?: string): Promise<Process[]> {
    return processes.listProcesses(this.core);
  }
  /** The process, or null when there is none with that id. */
  getProcess(id: string, _sessionId?: string): Promise<Process | null> {
    return processes.getProcess(this.core, id);
  }
  /** Ends the process's whole tree (SIGTERM, then SIGKILL), or sends `signal` to it. */
  async killProcess(id: string, signal?: string, _sessionId?: string): Promise<void> {
    await processes.killProcess(this.core, id, signal);
  }
  /** Kills every running process; answers how many were running. */
  killAllProcesses(_sessionId?: string): Promise<number> {
    return processes.killAllProcesses(this.core);
  }
  getProcessLogs(id: string, _sessionId?: string): Promise<ProcessLogsResult> {
    return processes.getProcessLogs(this.core, id);
  }
  streamProcessLogs(processId: string, options?: { signal?: AbortSignal }): Promise<ReadableStream<Uint8Array>> {
    return processes.streamProcessLogs(this.core, processId, options);
  }
  /**
   * Not supported: cellad has no route that forgets finished processes; it keeps the last
   * 1024 and forgets the oldest finished ones by itself (the hosted SDK's method always
   * answers 0).
   */
  async cleanupCompletedProcesses(_sessionId?: string): Promise<number> {
    throw notSupported(
      'cleanupCompletedProcesses',
      'cellad has no route that forgets finished processes',
      'nothing to do: cellad keeps the last 1024 processes and forgets the oldest finished ones by itself; ' +
        'listProcesses() shows each status',
    );
  }

  // ------------------------------------------------------------------ files

  writeFile(
    path: string,
    content: string | ReadableStream<Uint8Array> | Uint8Array,
    options?: files.WriteFileOptions,
  ): Promise<WriteFileResult> {
    return files.writeFile(this.core, path, content, options);
  }
  readFile(path: string, options: { encoding: 'none'; sessionId?: string }): Promise<ReadFileStreamResult>;
  readFile(path: string, options?: files.ReadFileOptions): Promise<ReadFileResult>;
  readFile(path: string, options?: files.ReadFileOptions): Promise<ReadFileResult | ReadFileStreamResult> {
    if (options?.encoding === 'none') return files.readFileBytes(this.core, path);
    return files.readFile(this.core, path, options);
  }
  readFileStream(path: string, _options?: { sessionId?: string }): Promise<ReadableStream<Uint8Array>> {
    return files.readFileStream(this.core, path);
  }
  mkdir(path: string, options?: { recursive?: boolean; sessionId?: string }): Promise<MkdirResult> {
    return files.mkdir(this.core, path, options);
  }
  /** Deletes a file (a directory is `IS_DIRECTORY`; cella: `{recursive: true}` deletes one). */
  deleteFile(path: string, sessionIdOrOptions?: string | { recursive?: boolean }): Promise<DeleteFileResult> {
    return files.deleteFile(this.core, path, typeof sessionIdOrOptions === 'object' ? sessionIdOrOptions : {});
  }
  renameFile(oldPath: string, newPath: string, _sessionId?: string): Promise<RenameFileResult> {
    return files.renameFile(this.core, oldPath, newPath);
  }
  moveFile(sourcePath: string, destinationPath: string, _sessionId?: string): Promise<MoveFileResult> {
    return files.moveFile(this.core, sourcePath, destinationPath);
  }
  listFiles(path: string, options?: ListFilesOptions & { sessionId?: string }): Promise<ListFilesResult> {
    return files.listFiles(this.core, path, options);
  }
  exists(path: string, _sessionId?: string): Promise<FileExistsResult> {
    return files.exists(this.core, path);
  }
  watch(path: string, options?: WatchOptions): Promise<ReadableStream<Uint8Array>> {
    return files.watch(this.core, path, options);
  }
  /** Not supported: cellad keeps no record of changes between calls; use `watch()`, which
   * streams every change as it happens. */
  async checkChanges(_path: string, _options?: WatchOptions & { since?: string }): Promise<never> {
    throw notSupported(
      'checkChanges',
      'cellad keeps no record of the changes to a directory between calls (it sees changes only while a watch is open)',
      'keep watch(path) open, which streams each change as it happens (an overflow event says when to list again)',
    );
  }

  // ------------------------------------------------------------------ git

  async gitCheckout(repoUrl: string, options: GitCheckoutOptions = {}): Promise<GitCheckoutResult> {
    const t = options.cloneTimeoutMs;
    if (t !== undefined && !(Number.isInteger(t) && t > 0))
      throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'cloneTimeoutMs must be a positive integer', {
        cloneTimeoutMs: t,
      });
    await this.core.ready();
    const r = await this.core.t.json<{ repoUrl: string; branch: string; targetDir: string; timestamp: string }>(
      'POST',
      this.core.path('git', 'checkout'),
      {
        json: compact({ repoUrl, branch: options.branch, targetDir: options.targetDir, depth: options.depth, timeout: t }),
        operation: 'git.checkout',
      },
    );
    return { success: true, repoUrl: r.repoUrl, branch: r.branch, targetDir: r.targetDir, timestamp: r.timestamp, exitCode: 0 };
  }

  // ------------------------------------------------------------------ snapshots and fork

  /**
   * cella: a snapshot of the sandbox's files now (its processes are frozen for the copy and
   * run on after). It outlives the sandbox; `getSandbox(ns, id, { fromSnapshot })` makes
   * sandboxes that start with its files. A taken or bad `name`: `ValidationFailedError`.
   */
  createSnapshot(options?: CreateSnapshotOptions): Promise<SnapshotInfo> {
    return snapshots.createSnapshot(this.core, options);
  }
  /** cella: the snapshots taken of this sandbox, oldest first (`ns.listSnapshots({ sandbox })`). */
  listSnapshots(): Promise<SnapshotInfo[]> {
    return snapshots.listSnapshots(this.core.t, { sandbox: this.id });
  }
  /**
   * cella: a new sandbox `name` with this sandbox's files as they are now (a snapshot,
   * shared, not copied; its `getInfo().snapshot` names it). Answers the new sandbox's
   * handle, as `getSandbox(ns, name, { fromSnapshot })` would, with the other options
   * given applied. The snapshot stays after the child is destroyed, until deleted
   * (`ns.deleteSnapshot`). A name that is taken: `ValidationFailedError`.
   */
  async fork(options: ForkOptions): Promise<Sandbox> {
    if (typeof options !== 'object' || options === null)
      throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'fork(options): options.name is required');
    const name = options.normalizeId && typeof options.name === 'string' ? options.name.toLowerCase() : options.name;
    checkId(name);
    const made = await snapshots.fork(this.core, name, options);
    const child = new Sandbox(new SandboxCore(this.core.t, name, made.options));
    child.core.forget();
    // made from its snapshot by the fork: a PUT only for the other options given
    const body = child.core.putBody();
    if (body === null || Object.keys(body).every((k) => k === 'fromSnapshot')) child.core.markApplied();
    else await child.core.ready();
    return child;
  }

  // ------------------------------------------------------------------ environment

  /** Sets (string) or unsets (`null`/`undefined`) variables for every session and command. */
  async setEnvVars(vars: EnvVars): Promise<void> {
    await this.core.ready();
    await this.core.t.json('POST', this.core.path('env'), {
      json: { vars: cleanEnv(envWithNulls(vars), true) },
      operation: 'env.set',
    });
  }

  // ------------------------------------------------------------------ sessions

  /** Creates a session (a persistent shell); 409 `SessionAlreadyExistsError` if the id is taken. */
  async createSession(options: SessionOptions = {}): Promise<ExecutionSession> {
    if (options.id !== undefined) checkSessionId(options.id);
    await this.core.ready();
    const r = await this.core.t.json<SessionInfo>('POST', this.core.path('sessions'), {
      json: compact({ id: options.id, env: cleanEnv(options.env), cwd: options.cwd, commandTimeoutMs: options.commandTimeoutMs }),
      operation: 'session.create',
    });
    return new ExecutionSession(this, r.id, options);
  }
  /** The session `id`; sends nothing. A session that does not exist is made on first use. */
  async getSession(id: string): Promise<ExecutionSession> {
    checkSessionId(id);
    return new ExecutionSession(this, id, { id });
  }
  /**
   * Deletes a session: its shell and everything it started. The default session (`default`)
   * is refused, as in the hosted SDK (`ValidationFailedError`), unless the sandbox was made
   * with `enableDefaultSession: false`, where `default` is a session like any other.
   */
  async deleteSession(sessionId: string): Promise<DeleteSessionResult> {
    checkSessionId(sessionId);
    if (sessionId === DEFAULT_SESSION && this.core.options.enableDefaultSession !== false)
      throw clientError(
        ValidationFailedError,
        'VALIDATION_FAILED',
        400,
        `cannot delete the default session '${DEFAULT_SESSION}': it is the session of every call that names none`,
        { sessionId },
        {
          operation: 'session.delete',
          suggestion: 'reset its state with exec (cd, unset), or use sessions of your own (createSession) and delete those',
        },
      );
    await this.core.ready();
    await this.core.t.json('DELETE', this.core.path('sessions', sessionId), { operation: 'session.delete' });
    return { success: true, sessionId, timestamp: nowIso() };
  }
  /** cella: the sandbox's sessions. */
  async listSessions(): Promise<SessionInfo[]> {
    await this.core.ready();
    const r = await this.core.read(() =>
      this.core.t.json<{ sessions: SessionInfo[] }>('GET', this.core.path('sessions'), { operation: 'session.list' }),
    );
    return r.sessions;
  }

  // ------------------------------------------------------------------ ports

  /** Exposes a port; answers its preview URL. */
  exposePort(port: number, options?: ExposePortOptions): Promise<{ url: string; port: number; name: string | undefined }> {
    return ports.exposePort(this.core, port, options);
  }
  unexposePort(port: number): Promise<void> {
    return ports.unexposePort(this.core, port);
  }
  getExposedPorts(hostname?: string): Promise<ExposedPort[]> {
    return ports.getExposedPorts(this.core, hostname);
  }
  isPortExposed(port: number): Promise<boolean> {
    return ports.isPortExposed(this.core, port);
  }
  validatePortToken(port: number, token: string): Promise<boolean> {
    return ports.validatePortToken(this.core, port, token);
  }

  // ------------------------------------------------------------------ websockets and terminal

  /**
   * Relays a WebSocket upgrade request to `port` in the sandbox (path and query kept), through
   * cellad's `/ws/{port}`. In Node the answer is relayed by `serve()`/`toNodeUpgradeListener`
   * of '@cella/sandbox/node' (elsewhere it is a 426 saying so).
   */
  wsConnect(request: Request, port: number): Promise<Response> {
    return websockets.wsConnect(this.core, request, port);
  }
  /** cella: a WebSocket (open) to `port` in the sandbox through cellad's `/ws/{port}`. */
  connectWebSocket(port: number, options?: websockets.ConnectWebSocketOptions): Promise<WebSocket> {
    return websockets.connectWebSocket(this.core, port, options);
  }
  /** Relays a WebSocket upgrade request to the default session's terminal (see wsConnect). */
  terminal(request: Request, options?: PtyOptions): Promise<Response> {
    return terminals.terminal(this.core, undefined, request, options);
  }
  /** cella: a client of a session's terminal (default session), resolved once attached. */
  openTerminal(options?: terminals.OpenTerminalOptions): Promise<terminals.Terminal> {
    if (options?.sessionId !== undefined) {
      const { sessionId, ...rest } = options;
      return this.getSession(sessionId).then((s) => s.openTerminal(rest));
    }
    return terminals.openTerminal(this.core, options);
  }

  // ------------------------------------------------------------------ code interpreter

  /** Creates a code context: an interpreter (python, javascript, typescript) whose state
   * persists from one run to the next. */
  createCodeContext(options?: CreateContextOptions): Promise<CodeContext> {
    return interpreter.createCodeContext(this.core, options);
  }
  /** Runs code in a context (default: the language's default context); with a callback,
   * calls it as the output and results arrive. The code raising is the result's `error`. */
  runCode(code: string, options?: RunCodeOptions): Promise<interpreter.Execution> {
    return interpreter.runCode(this.core, code, options);
  }
  /** Runs code and answers its events as an SSE byte stream, as they happen. */
  runCodeStream(code: string, options?: RunCodeOptions): Promise<ReadableStream<Uint8Array>> {
    return interpreter.runCodeStream(this.core, code, options);
  }
  listCodeContexts(): Promise<CodeContext[]> {
    return interpreter.listCodeContexts(this.core);
  }
  /** Deletes a context (kills its interpreter); unknown: `ContextNotFoundError`. */
  deleteCodeContext(contextId: string): Promise<void> {
    return interpreter.deleteCodeContext(this.core, contextId);
  }

  // ------------------------------------------------------------------ lifecycle

  /** Destroys the sandbox: processes, files, ports, records. The id can be used again. */
  async destroy(): Promise<void> {
    await this.core.t.json('DELETE', this.core.path(), { operation: 'sandbox.destroy' });
    this.core.forget();
  }
  /**
   * cella: the sandbox's record (`GET /v1/sandboxes/{id}`); never starts it. When there is
   * none (`SandboxNotFoundError`: never created, or destroyed elsewhere), the connection
   * forgets that it applied this handle's options, so the next operation sends them again.
   */
  async getInfo(): Promise<SandboxInfo> {
    try {
      return await this.core.t.json<SandboxInfo>('GET', this.core.path(), { operation: 'sandbox.get' });
    } catch (e) {
      if (e instanceof SandboxNotFoundError) this.core.forget();
      throw e;
    }
  }
  /**
   * cella: puts the sandbox to sleep now (`POST /v1/sandboxes/{id}/sleep`), as an idle sleep
   * does: its `sleepMode` decides what is kept (its processes too, checkpointed, where the
   * host can; else its files), whatever its `keepAlive`; its open commands, streams and
   * terminals end. Answers its `SandboxInfo` (`state: "sleeping"`) once it sleeps: after
   * the checkpoint for a memory sleep, with `memorySnapshotBytes`. A sleeping sandbox is
   * answered as it is; a stopped one is an error with code `SANDBOX_STOPPED` (409); the
   * handle's options not yet applied are applied first. Any later operation wakes it.
   */
  async sleep(): Promise<SandboxInfo> {
    await this.core.ready();
    return this.core.t.json<SandboxInfo>('POST', this.core.path('sleep'), { operation: 'sandbox.sleep' });
  }
  /** The hosted `getState()`: `running` or `stopped` (sleeping, stopped or not created). */
  async getState(): Promise<SandboxState> {
    try {
      const info = await this.getInfo();
      return {
        status: info.state === 'running' ? 'running' : 'stopped',
        lastChange: Date.parse(info.lastActiveAt) || Date.now(),
      };
    } catch (e) {
      if (e instanceof SandboxNotFoundError) return { status: 'stopped', lastChange: Date.now() };
      throw e;
    }
  }
  /** Creates or wakes the sandbox now (with the `getSandbox` options). */
  async start(): Promise<void> {
    await this.core.start('sandbox.start');
  }
  /**
   * Not supported: cellad has no route that stops or puts a sandbox to sleep on demand. A
   * sandbox sleeps by itself after `sleepAfter` without activity (its files kept; shorten
   * it with `setSleepAfter`); `destroy()` removes it; `killAllProcesses()` ends its
   * processes.
   */
  async stop(_signal?: string | number): Promise<never> {
    throw notSupported(
      'stop',
      'cellad has no route that stops a sandbox on demand',
      'it sleeps by itself after sleepAfter without activity, keeping its files (setSleepAfter shortens that); ' +
        'destroy() removes it; killAllProcesses() ends its processes',
    );
  }
  /**
   * The hosted `Container.startAndWaitForPorts`: starts (or wakes) the sandbox with the
   * `getSandbox` options, then waits until each port accepts TCP connections inside it.
   * The wait is cellad's (`waitForPort` in `tcp` mode), attached to a short `sleep` process
   * (id `cella-port-wait-…`) that is killed when the wait ends. `portReadyTimeoutMS`
   * (default: the `containerTimeouts` option's, else 90 s) bounds the whole wait, then
   * `ProcessReadyTimeoutError`; `waitInterval` is the time between tries (default 300 ms);
   * `abort` cancels it. `startOptions.envVars` are set as the sandbox's environment
   * (`setEnvVars`); `entrypoint`, `enableInternet` and `instanceGetTimeoutMS` are accepted
   * and unused.
   */
  startAndWaitForPorts(options?: StartAndWaitForPortsOptions): Promise<void>;
  startAndWaitForPorts(
    ports?: number | number[],
    cancellationOptions?: CancellationOptions,
    startOptions?: ContainerStartConfigOptions,
  ): Promise<void>;
  async startAndWaitForPorts(
    portsOrOptions?: number | number[] | StartAndWaitForPortsOptions,
    cancellationOptions?: CancellationOptions,
    startOptions?: ContainerStartConfigOptions,
  ): Promise<void> {
    let ports = portsOrOptions as number | number[] | undefined;
    let cancel = cancellationOptions;
    let start = startOptions;
    if (typeof portsOrOptions === 'object' && portsOrOptions !== null && !Array.isArray(portsOrOptions)) {
      ports = portsOrOptions.ports;
      cancel = portsOrOptions.cancellationOptions;
      start = portsOrOptions.startOptions;
    }
    const list = ports === undefined ? [] : Array.isArray(ports) ? ports : [ports];
    for (const p of list)
      if (typeof p !== 'number' || !Number.isInteger(p) || p < 1 || p > 65535)
        throw clientError(InvalidPortError, 'INVALID_PORT', 400, `invalid port ${String(p)}: 1-65535`, { port: p });
    const signal = cancel?.abort;
    if (signal?.aborted) throw signal.reason;
    const timeouts = this.core.options.containerTimeouts;
    const timeout = positive(cancel?.portReadyTimeoutMS) ?? positive(timeouts?.portReadyTimeoutMS) ?? 90_000;
    const interval = positive(cancel?.waitInterval) ?? positive(timeouts?.waitIntervalMS) ?? 300;
    await this.core.start('sandbox.start', signal);
    if (start?.envVars) await this.setEnvVars(start.envVars);
    if (list.length > 0) await processes.waitForPorts(this.core, list, { timeout, interval, signal });
  }
  /**
   * The hosted `Container.renewActivityTimeout`: counts as activity now, so a running
   * sandbox's `sleepAfter` countdown starts again (`PUT /v1/sandboxes/{id}` with no
   * changes). A sandbox that is not running is left as it is: this neither creates nor
   * wakes one.
   */
  async renewActivityTimeout(): Promise<void> {
    let info: SandboxInfo;
    try {
      info = await this.getInfo();
    } catch (e) {
      if (e instanceof SandboxNotFoundError) return;
      throw e;
    }
    if (info.state !== 'running') return;
    await this.core.t.json('PUT', this.core.path(), { json: {}, operation: 'sandbox.renewActivity' });
  }
  /**
   * The hosted `containerFetch(request, port)`: an HTTP request to `port` inside the
   * sandbox, answered by the app there. cellad reaches a port through its preview proxy,
   * so the port must have been exposed (`exposePort`; else `PortNotExposedError`). The
   * port is exposed again first, which wakes the sandbox and renews a stale preview URL
   * (same token and name). The request's path, query, method, headers and body are
   * forwarded; the API token is not. A WebSocket upgrade request is `wsConnect(request,
   * port)`. cella has no default port: `port` is required.
   */
  containerFetch(request: Request, port?: number): Promise<Response>;
  containerFetch(url: string | URL, init?: RequestInit, port?: number): Promise<Response>;
  containerFetch(input: Request | string | URL, initOrPort?: RequestInit | number, port?: number): Promise<Response> {
    let request: Request;
    let p: number | undefined;
    if (input instanceof Request) {
      request = input;
      p = typeof initOrPort === 'number' ? initOrPort : port;
    } else {
      request = new Request(input, typeof initOrPort === 'object' ? initOrPort : undefined);
      p = typeof initOrPort === 'number' ? initOrPort : port;
    }
    return ports.containerFetch(this.core, request, p);
  }
  async setKeepAlive(keepAlive: boolean): Promise<void> {
    await this.core.update({ keepAlive });
  }
  async setSleepAfter(sleepAfter: string | number): Promise<void> {
    await this.core.update({ sleepAfter });
  }
  async setLabels(labels: Record<string, string>): Promise<void> {
    await this.core.update({ labels: { ...labels } });
  }
  /** Cloudflare only (container provisioning budgets): kept as the defaults of
   * `startAndWaitForPorts` (`portReadyTimeoutMS`, `waitIntervalMS`); nothing is sent. */
  async setContainerTimeouts(timeouts: SandboxOptions['containerTimeouts']): Promise<void> {
    this.core.options.containerTimeouts = timeouts ? { ...timeouts } : undefined;
  }
  /** Cloudflare only (the Durable Object ↔ container channel): accepted and ignored. */
  async setTransport(_transport: SandboxOptions['transport']): Promise<void> {}
  /** Cloudflare only: cella has no placements. Always null. */
  async getContainerPlacementId(): Promise<string | null> {
    return null;
  }

  // ------------------------------------------------------------------ backups (backups.ts)

  /** Archives `dir` into cellad's backup store (docs/api.md "Backups"). */
  createBackup(options: backups.BackupOptions): Promise<backups.DirectoryBackup> {
    return backups.createBackup(this.core, options);
  }
  /** Replaces `backup.dir` (or the backup's dir) of this sandbox with the backup's content,
   * all or nothing; the backup may be of another sandbox. */
  restoreBackup(backup: Pick<backups.DirectoryBackup, 'id'> & { dir?: string }): Promise<backups.RestoreBackupResult> {
    return backups.restoreBackup(this.core, backup);
  }
  /** cella only: every backup of the store, newest first. */
  listBackups(): Promise<backups.DirectoryBackup[]> {
    return backups.listBackups(this.core);
  }
  /** cella only: deletes a backup (BackupNotFoundError if there is none). */
  deleteBackup(id: string): Promise<void> {
    return backups.deleteBackup(this.core, id);
  }

  // ------------------------------------------------------------------ not supported here

  async mountBucket(_bucket: string, _mountPath: string, _options?: unknown): Promise<never> {
    throw notSupported(
      'mountBucket',
      'cella mounts no buckets (R2 bindings and s3fs mounts are not available in its sandboxes)',
      'copy objects in with writeFile, or run an S3 client inside the sandbox (network: outbound)',
    );
  }
  async unmountBucket(_mountPath: string): Promise<never> {
    throw notSupported('unmountBucket', 'cella mounts no buckets', 'nothing to unmount; delete copied files with deleteFile');
  }
  /** Cloudflare tunnels: not supported; preview URLs (exposePort) serve ports. */
  readonly tunnels = {
    get: async (_port: number, _options?: { name?: string }): Promise<never> => {
      throw notSupported('tunnels.get', TUNNELS, 'use exposePort(port) for a preview URL served by cellad');
    },
    list: async (): Promise<never> => {
      throw notSupported('tunnels.list', TUNNELS, 'use getExposedPorts()');
    },
    destroy: async (_portOrInfo: unknown): Promise<never> => {
      throw notSupported('tunnels.destroy', TUNNELS, 'use unexposePort(port)');
    },
  };
}

/**
 * The hosted SDK's `ContainerProxy`, which a Worker exports (`export { ContainerProxy } from
 * '@cloudflare/sandbox'`) so that Cloudflare can route a container's outbound traffic
 * through it (egress interception). cella has no such hook, so this class does nothing: it
 * exists so that the export line of a ported Worker keeps working. Sandbox egress in cella
 * is the `network` and `networkAllow` options.
 */
export class ContainerProxy {
  constructor(..._args: unknown[]) {}
}

/** Why tunnels are not supported. */
const TUNNELS = "tunnels are Cloudflare's (cloudflared and its network)";

/** `n` when it is a positive number, else undefined. */
function positive(n: number | undefined): number | undefined {
  return typeof n === 'number' && Number.isFinite(n) && n > 0 ? n : undefined;
}

function envWithNulls(vars: EnvVars): Record<string, string | null> {
  const out: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(vars ?? {})) out[k] = v === undefined || v === null ? null : String(v);
  return out;
}

/**
 * A session: a persistent shell of its own (cwd, env, functions) in the same sandbox. The
 * methods are the sandbox's, run in this session; files, code contexts and ports are the
 * sandbox's (sessions share its filesystem and processes).
 */
export class ExecutionSession {
  readonly id: string;
  readonly #sandbox: Sandbox;
  readonly #options: SessionOptions;

  /** @internal use Sandbox.createSession/getSession */
  constructor(sandbox: Sandbox, id: string, options: SessionOptions) {
    this.#sandbox = sandbox;
    this.id = id;
    this.#options = options;
  }

  /** Runs `fn`; a session that does not exist yet (getSession) is created and `fn` run again. */
  async #inSession<T>(fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (e) {
      if (!(e instanceof SessionNotFoundError)) throw e;
      try {
        await this.#sandbox.createSession({ ...this.#options, id: this.id });
      } catch (c) {
        if (!(c instanceof SessionAlreadyExistsError)) throw c;
      }
      return fn();
    }
  }

  exec(command: string, options?: ExecOptions): Promise<ExecResult> {
    return this.#inSession(() => this.#sandbox.exec(command, { ...options, sessionId: this.id }));
  }
  execStream(command: string, options?: StreamOptions): Promise<ReadableStream<Uint8Array>> {
    return this.#inSession(() => this.#sandbox.execStream(command, { ...options, sessionId: this.id }));
  }
  execRaw(command: string, options?: StreamOptions): Promise<RawExec> {
    return this.#inSession(() => this.#sandbox.execRaw(command, { ...options, sessionId: this.id }));
  }
  startProcess(command: string, options?: ProcessOptions): Promise<Process> {
    return this.#inSession(() => this.#sandbox.startProcess(command, { ...options, sessionId: this.id }));
  }
  listProcesses(): Promise<Process[]> {
    return this.#sandbox.listProcesses(this.id);
  }
  getProcess(id: string): Promise<Process | null> {
    return this.#sandbox.getProcess(id, this.id);
  }
  killProcess(id: string, signal?: string): Promise<void> {
    return this.#sandbox.killProcess(id, signal, this.id);
  }
  killAllProcesses(): Promise<number> {
    return this.#sandbox.killAllProcesses(this.id);
  }
  cleanupCompletedProcesses(): Promise<number> {
    return this.#sandbox.cleanupCompletedProcesses(this.id);
  }
  getProcessLogs(id: string): Promise<ProcessLogsResult> {
    return this.#sandbox.getProcessLogs(id, this.id);
  }
  streamProcessLogs(processId: string, options?: { signal?: AbortSignal }): Promise<ReadableStream<Uint8Array>> {
    return this.#sandbox.streamProcessLogs(processId, options);
  }
  writeFile(
    path: string,
    content: string | ReadableStream<Uint8Array> | Uint8Array,
    options?: files.WriteFileOptions,
  ): Promise<WriteFileResult> {
    return this.#sandbox.writeFile(path, content, options);
  }
  readFile(path: string, options: { encoding: 'none' }): Promise<ReadFileStreamResult>;
  readFile(path: string, options?: files.ReadFileOptions): Promise<ReadFileResult>;
  readFile(path: string, options?: files.ReadFileOptions): Promise<ReadFileResult | ReadFileStreamResult> {
    return this.#sandbox.readFile(path, options);
  }
  readFileStream(path: string): Promise<ReadableStream<Uint8Array>> {
    return this.#sandbox.readFileStream(path);
  }
  watch(path: string, options?: WatchOptions): Promise<ReadableStream<Uint8Array>> {
    return this.#sandbox.watch(path, options);
  }
  checkChanges(path: string, options?: WatchOptions & { since?: string }): Promise<never> {
    return this.#sandbox.checkChanges(path, options);
  }
  mkdir(path: string, options?: { recursive?: boolean }): Promise<MkdirResult> {
    return this.#sandbox.mkdir(path, options);
  }
  deleteFile(path: string, options?: { recursive?: boolean }): Promise<DeleteFileResult> {
    return this.#sandbox.deleteFile(path, options);
  }
  renameFile(oldPath: string, newPath: string): Promise<RenameFileResult> {
    return this.#sandbox.renameFile(oldPath, newPath);
  }
  moveFile(sourcePath: string, destinationPath: string): Promise<MoveFileResult> {
    return this.#sandbox.moveFile(sourcePath, destinationPath);
  }
  listFiles(path: string, options?: ListFilesOptions): Promise<ListFilesResult> {
    return this.#sandbox.listFiles(path, options);
  }
  exists(path: string): Promise<FileExistsResult> {
    return this.#sandbox.exists(path);
  }
  gitCheckout(repoUrl: string, options?: GitCheckoutOptions): Promise<GitCheckoutResult> {
    return this.#sandbox.gitCheckout(repoUrl, options);
  }
  /** Sets or unsets variables in this session's shell only. */
  async setEnvVars(vars: EnvVars): Promise<void> {
    await this.#inSession(async () => {
      await this.#sandbox.core.ready();
      await this.#sandbox.core.t.json('POST', this.#sandbox.core.path('sessions', this.id, 'env'), {
        json: { vars: cleanEnv(envWithNulls(vars), true) },
        operation: 'env.set',
      });
    });
  }
  // code contexts are the sandbox's
  createCodeContext(options?: CreateContextOptions): Promise<CodeContext> {
    return this.#sandbox.createCodeContext(options);
  }
  runCode(code: string, options?: RunCodeOptions): Promise<interpreter.Execution> {
    return this.#sandbox.runCode(code, options);
  }
  runCodeStream(code: string, options?: RunCodeOptions): Promise<ReadableStream<Uint8Array>> {
    return this.#sandbox.runCodeStream(code, options);
  }
  listCodeContexts(): Promise<CodeContext[]> {
    return this.#sandbox.listCodeContexts();
  }
  deleteCodeContext(contextId: string): Promise<void> {
    return this.#sandbox.deleteCodeContext(contextId);
  }
  createBackup(options: backups.BackupOptions): Promise<backups.DirectoryBackup> {
    return this.#sandbox.createBackup(options);
  }
  restoreBackup(backup: Pick<backups.DirectoryBackup, 'id'> & { dir?: string }): Promise<backups.RestoreBackupResult> {
    return this.#sandbox.restoreBackup(backup);
  }
  mountBucket(bucket: string, mountPath: string, options?: unknown): Promise<never> {
    return this.#sandbox.mountBucket(bucket, mountPath, options);
  }
  unmountBucket(mountPath: string): Promise<never> {
    return this.#sandbox.unmountBucket(mountPath);
  }

  // ------------------------------------------------------------------ terminal

  /** Relays a WebSocket upgrade request to this session's terminal (see Sandbox.wsConnect). */
  terminal(request: Request, options?: PtyOptions): Promise<Response> {
    return this.#inSession(() => terminals.terminal(this.#sandbox.core, this.id, request, options));
  }
  /** cella: a client of this session's terminal, resolved once attached. */
  openTerminal(options?: Omit<terminals.OpenTerminalOptions, 'sessionId'>): Promise<terminals.Terminal> {
    return this.#inSession(() => terminals.openTerminal(this.#sandbox.core, { ...options, sessionId: this.id }));
  }
}
