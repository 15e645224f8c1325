/** Commands: `exec` (buffered, or streamed with `onOutput`) and `execStream` (SSE bytes). */
import type { SandboxCore } from './core.js';
import { clientError, createSandboxError, SandboxError, SessionTerminatedError, ValidationFailedError } from './errors.js';
import { sseObjects } from './sse.js';
import { transportError } from './transport.js';
import type { ExecEvent, ExecOptions, ExecResult, StreamOptions } from './types.js';
import { base64ToBytes, cleanEnv, compact, decodeField } from './util.js';

interface WireExecResult {
  success: boolean;
  exitCode: number;
  stdout: string;
  stderr: string;
  stdoutEncoding?: string;
  stderrEncoding?: string;
  command: string;
  duration: number;
  timestamp: string;
  sessionId?: string;
  truncated?: boolean;
}

function checkCommand(command: unknown): asserts command is string {
  if (typeof command !== 'string' || command.trim() === '')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'command must be a non-empty string', {
      command,
    });
}

function execBody(command: string, o: { timeout?: number; env?: ExecOptions['env']; cwd?: string; sessionId?: string }) {
  return compact({
    command,
    timeout: o.timeout,
    env: cleanEnv(o.env),
    cwd: o.cwd,
    sessionId: o.sessionId,
  });
}

/** The wire's ExecResult with base64 fields decoded to text. */
export function toExecResult(w: WireExecResult): ExecResult {
  const r: ExecResult = {
    success: w.exitCode === 0,
    exitCode: w.exitCode,
    stdout: decodeField(w.stdout, w.stdoutEncoding),
    stderr: decodeField(w.stderr, w.stderrEncoding),
    command: w.command,
    duration: w.duration,
    timestamp: w.timestamp,
  };
  if (w.sessionId !== undefined) r.sessionId = w.sessionId;
  if (w.truncated) r.truncated = true;
  return r;
}

export async function exec(core: SandboxCore, command: string, options: ExecOptions = {}): Promise<ExecResult> {
  try {
    checkCommand(command);
    if (options.signal?.aborted) throw options.signal.reason;
    await core.ready();
    let result: ExecResult;
    if (options.stream && options.onOutput) {
      result = await execStreamed(core, command, options);
    } else {
      const w = await core.t.json<WireExecResult>('POST', core.path('exec'), {
        json: execBody(command, options),
        signal: options.signal,
        operation: 'command.execute',
      });
      result = toExecResult(w);
    }
    options.onComplete?.(result);
    return result;
  } catch (e) {
    // The hosted SessionTerminatedError names its session; cellad names only explicit ones.
    if (e instanceof SessionTerminatedError && e.context.sessionId === undefined)
      e.context.sessionId = options.sessionId ?? 'default';
    if (e instanceof SandboxError) decodeOutputContext(e);
    options.onError?.(e instanceof Error ? e : new Error(String(e)));
    throw e;
  }
}

/**
 * The output in an error's context (`{stdout, stderr}` of a timeout or a terminated
 * session) as text, like ExecResult's: base64 when `stdoutEncoding`/`stderrEncoding` says so.
 */
function decodeOutputContext(e: SandboxError): void {
  const c = e.context as Record<string, unknown>;
  for (const k of ['stdout', 'stderr'] as const) {
    const enc = `${k}Encoding`;
    if (c[enc] === 'base64' && typeof c[k] === 'string') {
      try {
        c[k] = decodeField(c[k], 'base64');
        delete c[enc];
      } catch {
        /* not base64 after all: left as it came */
      }
    }
  }
}

const textDecoder = new TextDecoder();

function eventText(ev: Record<string, unknown>): string {
  const d = typeof ev.data === 'string' ? ev.data : '';
  return ev.encoding === 'base64' ? textDecoder.decode(base64ToBytes(d)) : d;
}

/** exec through the SSE route: `onOutput` per event, the result assembled here. */
async function execStreamed(core: SandboxCore, command: string, options: ExecOptions): Promise<ExecResult> {
  const started = Date.now();
  const stream = await core.t.sse('POST', core.path('exec'), {
    json: execBody(command, options),
    signal: options.signal,
    operation: 'command.stream',
  });
  let stdout = '';
  let stderr = '';
  let timestamp = new Date(started).toISOString();
  for await (const ev of sseObjects(stream, options.signal)) {
    switch (ev.type) {
      case 'start':
        if (typeof ev.timestamp === 'string') timestamp = ev.timestamp;
        break;
      case 'stdout':
      case 'stderr': {
        const text = eventText(ev);
        if (ev.type === 'stdout') stdout += text;
        else stderr += text;
        options.onOutput?.(ev.type, text);
        break;
      }
      case 'complete': {
        const exitCode = typeof ev.exitCode === 'number' ? ev.exitCode : -1;
        const r: ExecResult = {
          success: exitCode === 0,
          exitCode,
          stdout,
          stderr,
          command,
          duration: typeof ev.duration === 'number' ? ev.duration : Date.now() - started,
          timestamp,
        };
        // As the buffered route: the session only when one was named.
        if (options.sessionId !== undefined) r.sessionId = options.sessionId;
        return r;
      }
      case 'error':
        throw streamError(ev, command, stdout, stderr, options.sessionId, options.timeout);
    }
  }
  throw transportError('peer_closed', `the stream of '${command}' ended before the command completed`);
}

/** The error of an SSE `error` event, as the class of its code. */
export function streamError(
  ev: Record<string, unknown>,
  command: string,
  stdout: string,
  stderr: string,
  sessionId?: string,
  timeout?: number,
) {
  const code = typeof ev.code === 'string' ? ev.code : 'COMMAND_EXECUTION_ERROR';
  const message = typeof ev.error === 'string' ? ev.error : `command '${command}' failed`;
  const context: Record<string, unknown> = { command, stdout, stderr };
  if (typeof ev.exitCode === 'number') context.exitCode = ev.exitCode;
  if (sessionId) context.sessionId = sessionId;
  // As the buffered route's 408: {timeout, stdout, stderr}.
  if (code === 'COMMAND_TIMEOUT' && timeout !== undefined) context.timeout = timeout;
  const status = code === 'COMMAND_TIMEOUT' ? 408 : code.startsWith('SESSION_') ? 410 : 500;
  return createSandboxError({ code, message, context, httpStatus: status, timestamp: new Date().toISOString() });
}

/**
 * The command's events as SSE bytes (`start`, `stdout`/`stderr`, then `complete` or
 * `error`); parse them with `parseSSEStream<ExecEvent>`. Cancelling the stream, or aborting
 * `signal`, stops the command (its process tree is killed).
 */
export async function execStream(
  core: SandboxCore,
  command: string,
  options: StreamOptions = {},
): Promise<ReadableStream<Uint8Array>> {
  checkCommand(command);
  if (options.signal?.aborted) throw options.signal.reason;
  await core.ready();
  return core.t.sse('POST', core.path('exec'), {
    json: execBody(command, options),
    signal: options.signal,
    operation: 'command.stream',
  });
}

export type { ExecEvent };
