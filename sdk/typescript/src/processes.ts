/** Background processes: `startProcess` and the `Process` object, logs, waits, kills. */
import type { SandboxCore } from './core.js';
import {
  ProcessExitedBeforeReadyError,
  ProcessNotFoundError,
  ProcessReadyTimeoutError,
  ValidationFailedError,
  clientError,
  createSandboxError,
} from './errors.js';
import { linkedAbort, sseByteStream, sseObjects } from './sse.js';
import type {
  LogEvent,
  Process,
  ProcessInfo,
  ProcessLogsResult,
  ProcessOptions,
  ProcessStatus,
  WaitForExitResult,
  WaitForLogResult,
  WaitForPortOptions,
} from './types.js';
import { base64ToBytes, cleanEnv, compact, decodeField, LineSplitter, toDate } from './util.js';

interface WireProcess {
  id: string;
  pid?: number;
  command: string;
  status: ProcessStatus;
  startTime: string;
  endTime?: string;
  exitCode?: number;
  signal?: number;
  sessionId?: string;
  error?: string;
}

function toInfo(w: WireProcess): ProcessInfo {
  const p: ProcessInfo = {
    id: w.id,
    command: w.command,
    status: w.status,
    startTime: toDate(w.startTime) ?? new Date(),
  };
  if (w.pid !== undefined) p.pid = w.pid;
  const end = toDate(w.endTime);
  if (end) p.endTime = end;
  if (w.exitCode !== undefined) p.exitCode = w.exitCode;
  if (w.signal !== undefined) p.signal = w.signal;
  if (w.sessionId !== undefined) p.sessionId = w.sessionId;
  if (w.error !== undefined) p.error = w.error;
  return p;
}

/** `{pid}` of the routes: the process id (or numeric pid), encoded. */
function procPath(core: SandboxCore, id: string, ...rest: string[]): string {
  return core.path('processes', id, ...rest);
}

function checkId(id: unknown, what = 'processId'): asserts id is string {
  if (typeof id !== 'string' || id === '')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, `${what} must be a non-empty string`, {
      [what]: id,
    });
}

/**
 * Adds what the SDK knows (`processId`, `command`, `condition`, `timeout`) to a wait's
 * error, and the exit code of a process that exited first (cellad's 409 does not carry it;
 * the hosted context has it).
 */
async function waitError(core: SandboxCore, e: unknown, info: ProcessInfo, condition: string, timeout?: number): Promise<unknown> {
  if (e instanceof ProcessReadyTimeoutError || e instanceof ProcessExitedBeforeReadyError) {
    const ctx: Record<string, unknown> = {
      ...e.context,
      processId: info.id,
      command: info.command,
      condition,
    };
    if (timeout !== undefined) ctx.timeout = timeout;
    if (e instanceof ProcessExitedBeforeReadyError && typeof ctx.exitCode !== 'number') {
      const now = await getProcessInfo(core, info.id).catch(() => null);
      ctx.exitCode = typeof now?.exitCode === 'number' ? now.exitCode : null;
    }
    return createSandboxError({ ...e.errorResponse, context: ctx }, { cause: e.cause });
  }
  return e;
}

export class ProcessHandle implements Process {
  id: string;
  pid?: number;
  command: string;
  status: ProcessStatus;
  startTime: Date;
  endTime?: Date;
  exitCode?: number;
  sessionId?: string;
  signal?: number;
  error?: string;
  readonly #core: SandboxCore;

  constructor(core: SandboxCore, info: ProcessInfo) {
    this.#core = core;
    this.id = info.id;
    this.command = info.command;
    this.status = info.status;
    this.startTime = info.startTime;
    if (info.pid !== undefined) this.pid = info.pid;
    if (info.endTime) this.endTime = info.endTime;
    if (info.exitCode !== undefined) this.exitCode = info.exitCode;
    if (info.sessionId !== undefined) this.sessionId = info.sessionId;
    if (info.signal !== undefined) this.signal = info.signal;
    if (info.error !== undefined) this.error = info.error;
  }

  private update(info: ProcessInfo): void {
    this.status = info.status;
    if (info.pid !== undefined) this.pid = info.pid;
    if (info.endTime) this.endTime = info.endTime;
    if (info.exitCode !== undefined) this.exitCode = info.exitCode;
    if (info.signal !== undefined) this.signal = info.signal;
    if (info.error !== undefined) this.error = info.error;
  }

  async kill(signal?: string): Promise<void> {
    const info = await killProcess(this.#core, this.id, signal);
    this.update(info);
  }

  async getStatus(): Promise<ProcessStatus> {
    const info = await getProcessInfo(this.#core, this.id);
    if (!info) return 'error';
    this.update(info);
    return info.status;
  }

  async getLogs(): Promise<{ stdout: string; stderr: string }> {
    const l = await getProcessLogs(this.#core, this.id);
    return { stdout: l.stdout, stderr: l.stderr };
  }

  async waitForLog(pattern: string | RegExp, timeout?: number): Promise<WaitForLogResult> {
    const condition = `log ${pattern instanceof RegExp ? pattern.toString() : JSON.stringify(pattern)}`;
    try {
      if (typeof pattern === 'string') {
        const r = await this.#core.t.json<{ line: string }>('POST', procPath(this.#core, this.id, 'waitForLog'), {
          json: compact({ pattern, timeout }),
          operation: 'process.waitForLog',
        });
        return { line: r.line };
      }
      if (!(pattern instanceof RegExp))
        throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'pattern must be a string or a RegExp');
      return await waitForRegExp(this.#core, this, pattern, condition, timeout);
    } catch (e) {
      throw await waitError(this.#core, e, this, condition, timeout);
    }
  }

  async waitForPort(port: number, options: WaitForPortOptions = {}): Promise<void> {
    const mode = options.mode ?? 'http';
    const condition = mode === 'http' ? `port ${port} (http ${options.path ?? '/'})` : `port ${port} (tcp)`;
    try {
      await this.#core.t.json('POST', procPath(this.#core, this.id, 'waitForPort'), {
        json: compact({
          port,
          mode,
          path: options.path,
          status: options.status,
          interval: options.interval,
          timeout: options.timeout,
        }),
        operation: 'process.waitForPort',
      });
    } catch (e) {
      throw await waitError(this.#core, e, this, condition, options.timeout);
    }
  }

  async waitForExit(timeout?: number): Promise<WaitForExitResult> {
    try {
      const w = await this.#core.t.json<WireProcess>('POST', procPath(this.#core, this.id, 'waitForExit'), {
        json: compact({ timeout }),
        operation: 'process.waitForExit',
      });
      this.update(toInfo(w));
      return { exitCode: w.exitCode ?? -1 };
    } catch (e) {
      throw await waitError(this.#core, e, this, 'process exit', timeout);
    }
  }

  toJSON(): ProcessInfo {
    const { id, pid, command, status, startTime, endTime, exitCode, sessionId, signal, error } = this;
    return compact({ id, pid, command, status, startTime, endTime, exitCode, sessionId, signal, error }) as ProcessInfo;
  }
}

const decoder = new TextDecoder();

/** The text of a `stdout`/`stderr` event (base64 events decoded). */
function eventData(ev: Record<string, unknown>): string {
  const d = typeof ev.data === 'string' ? ev.data : '';
  return ev.encoding === 'base64' ? decoder.decode(base64ToBytes(d)) : d;
}

/** waitForLog with a JavaScript RegExp: matched here, line by line, over the log stream. */
async function waitForRegExp(
  core: SandboxCore,
  proc: ProcessInfo,
  pattern: RegExp,
  condition: string,
  timeout?: number,
): Promise<WaitForLogResult> {
  const re = new RegExp(pattern.source, pattern.flags.replace(/[gy]/g, ''));
  const ctl = new AbortController();
  let timedOut = false;
  const timer =
    timeout !== undefined && timeout > 0
      ? setTimeout(() => {
          timedOut = true;
          ctl.abort();
        }, timeout)
      : undefined;
  const lines = { stdout: new LineSplitter(), stderr: new LineSplitter() };
  const test = (line: string): WaitForLogResult | null => {
    const m = line.match(re);
    return m ? { line, match: m } : null;
  };
  try {
    const stream = await core.t.sse('GET', procPath(core, proc.id, 'stream'), {
      signal: ctl.signal,
      operation: 'process.waitForLog',
    });
    for await (const ev of sseObjects(stream, ctl.signal)) {
      if (ev.type === 'stdout' || ev.type === 'stderr') {
        for (const line of lines[ev.type].push(eventData(ev))) {
          const r = test(line);
          if (r) return r;
        }
      } else if (ev.type === 'exit') {
        for (const s of ['stdout', 'stderr'] as const) {
          const last = lines[s].flush();
          const r = last !== undefined ? test(last) : null;
          if (r) return r;
        }
        throw clientError(
          ProcessExitedBeforeReadyError,
          'PROCESS_EXITED_BEFORE_READY',
          409,
          `process '${proc.id}' exited (code ${String(ev.exitCode)}) before its log matched ${pattern}`,
          { exitCode: typeof ev.exitCode === 'number' ? ev.exitCode : null },
        );
      }
    }
    throw clientError(ProcessExitedBeforeReadyError, 'PROCESS_EXITED_BEFORE_READY', 409,
      `the log stream of '${proc.id}' ended before it matched ${pattern}`, { exitCode: null });
  } catch (e) {
    if (timedOut)
      throw clientError(
        ProcessReadyTimeoutError,
        'PROCESS_READY_TIMEOUT',
        408,
        `process '${proc.id}': no log line matched ${pattern} within ${timeout} ms`,
        { processId: proc.id, command: proc.command, condition, timeout },
      );
    throw e;
  } finally {
    if (timer) clearTimeout(timer);
    ctl.abort();
  }
}

export async function startProcess(
  core: SandboxCore,
  command: string,
  options: ProcessOptions = {},
): Promise<ProcessHandle> {
  try {
    if (typeof command !== 'string' || command.trim() === '')
      throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'command must be a non-empty string');
    await core.ready();
    const w = await core.t.json<WireProcess>('POST', core.path('processes'), {
      json: compact({
        command,
        processId: options.processId,
        sessionId: options.sessionId,
        env: cleanEnv(options.env),
        cwd: options.cwd,
      }),
      operation: 'process.start',
    });
    const proc = new ProcessHandle(core, toInfo(w));
    if (options.onOutput || options.onExit) followProcess(core, proc, options);
    options.onStart?.(proc);
    return proc;
  } catch (e) {
    options.onError?.(e instanceof Error ? e : new Error(String(e)));
    throw e;
  }
}

/** Feeds `onOutput`/`onExit` from the process's log stream, in the background. */
function followProcess(core: SandboxCore, proc: ProcessHandle, options: ProcessOptions): void {
  (async () => {
    const stream = await core.t.sse('GET', procPath(core, proc.id, 'stream'), { operation: 'process.stream' });
    for await (const ev of sseObjects(stream)) {
      if (ev.type === 'stdout' || ev.type === 'stderr') options.onOutput?.(ev.type, eventData(ev));
      else if (ev.type === 'exit') {
        options.onExit?.(typeof ev.exitCode === 'number' ? ev.exitCode : null);
        return;
      }
    }
    options.onExit?.(null);
  })().catch((e: unknown) => {
    if (options.onError) options.onError(e instanceof Error ? e : new Error(String(e)));
    else options.onExit?.(null);
  });
}

export async function listProcesses(core: SandboxCore): Promise<ProcessHandle[]> {
  await core.ready();
  const r = await core.read(() =>
    core.t.json<{ processes: WireProcess[] }>('GET', core.path('processes'), { operation: 'process.list' }),
  );
  return r.processes.map((w) => new ProcessHandle(core, toInfo(w)));
}

async function getProcessInfo(core: SandboxCore, id: string): Promise<ProcessInfo | null> {
  checkId(id);
  await core.ready();
  try {
    return toInfo(await core.read(() => core.t.json<WireProcess>('GET', procPath(core, id), { operation: 'process.get' })));
  } catch (e) {
    if (e instanceof ProcessNotFoundError) return null;
    throw e;
  }
}

export async function getProcess(core: SandboxCore, id: string): Promise<ProcessHandle | null> {
  const info = await getProcessInfo(core, id);
  return info ? new ProcessHandle(core, info) : null;
}

export async function killProcess(core: SandboxCore, id: string, signal?: string): Promise<ProcessInfo> {
  checkId(id);
  await core.ready();
  const w = await core.t.json<WireProcess>('DELETE', procPath(core, id), {
    query: { signal },
    operation: 'process.kill',
  });
  return toInfo(w);
}

export async function killAllProcesses(core: SandboxCore, signal?: string): Promise<number> {
  await core.ready();
  const r = await core.t.json<{ killed: number }>('DELETE', core.path('processes'), {
    query: { signal },
    operation: 'process.killAll',
  });
  return r.killed;
}

export async function getProcessLogs(core: SandboxCore, id: string): Promise<ProcessLogsResult> {
  checkId(id);
  await core.ready();
  const r = await core.read(() =>
    core.t.json<{
      stdout: string;
      stderr: string;
      processId: string;
      stdoutEncoding?: string;
      stderrEncoding?: string;
    }>('GET', procPath(core, id, 'logs'), { operation: 'process.logs' }),
  );
  return {
    stdout: decodeField(r.stdout, r.stdoutEncoding),
    stderr: decodeField(r.stderr, r.stderrEncoding),
    processId: r.processId ?? id,
  };
}

/**
 * The process's output as SSE `LogEvent`s: what it wrote so far, then live output, then
 * `exit` (`data: "Process <status> with exit code N"`). Cancelling ends only the stream.
 */
export async function streamProcessLogs(
  core: SandboxCore,
  id: string,
  options: { signal?: AbortSignal } = {},
): Promise<ReadableStream<Uint8Array>> {
  checkId(id);
  await core.ready();
  const signal = options.signal;
  if (signal?.aborted) throw signal.reason;
  // One signal for the request and the reader: the caller's, or the stream being cancelled.
  const { stop, dispose } = linkedAbort(signal);
  let raw: ReadableStream<Uint8Array>;
  try {
    raw = await core.read(() =>
      core.t.sse('GET', procPath(core, id, 'stream'), { signal: stop.signal, operation: 'process.stream' }),
    );
  } catch (e) {
    dispose();
    throw e;
  }
  async function* events(): AsyncGenerator<LogEvent> {
    try {
      for await (const ev of sseObjects(raw, stop.signal)) {
        const timestamp = typeof ev.timestamp === 'string' ? ev.timestamp : new Date().toISOString();
        if (ev.type === 'stdout' || ev.type === 'stderr') {
          yield { type: ev.type, timestamp, data: eventData(ev), processId: id };
        } else if (ev.type === 'exit') {
          const out: LogEvent = {
            type: 'exit',
            timestamp,
            data: `Process ${String(ev.status)} with exit code ${String(ev.exitCode)}`,
            processId: typeof ev.processId === 'string' ? ev.processId : id,
          };
          if (typeof ev.exitCode === 'number') out.exitCode = ev.exitCode;
          if (typeof ev.status === 'string') out.status = ev.status as ProcessStatus;
          yield out;
        } else if (ev.type === 'error') {
          yield { type: 'error', timestamp, data: typeof ev.error === 'string' ? ev.error : 'error', processId: id };
        }
      }
    } finally {
      dispose();
    }
  }
  return sseByteStream(events(), { signal: stop.signal, onCancel: (r) => stop.abort(r) });
}

/**
 * Waits until each of `ports` accepts TCP connections inside the sandbox, all within
 * `timeout` ms (`startAndWaitForPorts`). cellad's port wait belongs to a process, so the wait
 * is attached to a `sleep` that outlives the timeout, killed when the wait ends (it stays
 * listed, as killed, until cellad forgets it). A port not ready in time is
 * `ProcessReadyTimeoutError` with `context.port`.
 */
export async function waitForPorts(
  core: SandboxCore,
  ports: number[],
  options: { timeout: number; interval: number; signal?: AbortSignal | undefined },
): Promise<void> {
  const { timeout, interval, signal } = options;
  const deadline = Date.now() + timeout;
  const id = `cella-port-wait-${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 8)}`;
  const command = `sleep ${Math.ceil(timeout / 1000) + 5}`;
  try {
    await core.t.json('POST', core.path('processes'), {
      json: { command, processId: id },
      operation: 'process.start',
      signal,
    });
    for (const port of ports) {
      const left = Math.max(1, deadline - Date.now());
      try {
        await core.t.json('POST', procPath(core, id, 'waitForPort'), {
          json: { port, mode: 'tcp', interval: Math.min(60_000, Math.max(10, Math.round(interval))), timeout: left },
          operation: 'process.waitForPort',
          signal,
        });
      } catch (e) {
        if (!(e instanceof ProcessReadyTimeoutError)) throw e;
        throw clientError(
          ProcessReadyTimeoutError,
          'PROCESS_READY_TIMEOUT',
          408,
          `port ${port} of sandbox '${core.id}' did not accept connections within ${timeout} ms`,
          { processId: id, command, condition: `port ${port} (tcp)`, timeout, port },
          { operation: 'sandbox.startAndWaitForPorts', cause: e },
        );
      }
    }
  } finally {
    // also after an abort during the start: cellad may have started it (404 if not)
    await core.t.json('DELETE', procPath(core, id), { query: { signal: 'SIGKILL' }, operation: 'process.kill' }).catch(() => undefined);
  }
}
