/** Commands: `exec` (buffered, or streamed with `onOutput`), `execStream` (SSE bytes) and
 * `execRaw` (stdout as bytes, the end in trailers). */
import type { SandboxCore } from './core.js';
import {
  clientError,
  createSandboxError,
  errorResponseFrom,
  notSupported,
  SandboxError,
  SessionTerminatedError,
  ValidationFailedError,
} from './errors.js';
import { sseObjects } from './sse.js';
import { abortReason, isAbort, transportError } from './transport.js';
import type { ExecEvent, ExecOptions, ExecResult, RawExec, RawExecResult, StreamOptions } from './types.js';
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

/** The chunks of stdout the stream holds before it stops reading the socket (the
 * command is held back past that, as cellad's window of credit holds it). */
const RAW_HIGH_WATER = 4 * 1024 * 1024;

/**
 * The raw form of exec (`Accept: application/octet-stream`, docs/api.md): stdout as a
 * byte stream, and how the command ended from the answer's trailers. On Node through
 * node:http (fetch does not expose trailers); elsewhere `NotSupportedError`.
 */
export async function execRaw(core: SandboxCore, command: string, options: StreamOptions = {}): Promise<RawExec> {
  checkCommand(command);
  if (options.signal?.aborted) throw options.signal.reason;
  const engine = await core.t.streamedEngine();
  if (!engine)
    throw notSupported(
      'execRaw',
      'its end comes in HTTP trailers, which fetch does not expose (it needs node:http)',
      'execStream (SSE) or exec',
    );
  await core.ready();
  const operation = 'command.stream';
  const url = core.t.url(core.path('exec'));
  const headers = core.t.headers({ accept: 'application/octet-stream', 'content-type': 'application/json' });
  let opened;
  try {
    opened = await engine('POST', url, headers, JSON.stringify(execBody(command, options)), options.signal);
  } catch (e) {
    if (isAbort(e, options.signal)) throw abortReason(options.signal, e);
    const code = (e as { code?: unknown }).code;
    const broke = code === 'ECONNRESET' || code === 'EPIPE';
    throw transportError(
      broke ? 'peer_closed' : 'connection_failed',
      broke ? `the connection to cellad broke before its answer: ${String(e)}` : `cannot reach cellad at ${core.t.baseUrl}: ${String(e)}`,
      e,
      operation,
    );
  }
  const { res, destroy } = opened;
  const status = res.statusCode ?? 0;
  if (status < 200 || status > 299) {
    const text = await new Promise<string>((resolve) => {
      const parts: Uint8Array[] = [];
      res.on('data', (c) => parts.push(c));
      res.on('end', () => resolve(Buffer.concat(parts).toString('utf8')));
      res.on('error', () => resolve(Buffer.concat(parts).toString('utf8')));
      res.on('aborted', () => resolve(Buffer.concat(parts).toString('utf8')));
    });
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      /* not JSON: kept as text */
    }
    throw createSandboxError(errorResponseFrom(status, body, operation));
  }
  const pidHeader = res.headers['cella-pid'];
  const pid = Number.parseInt(Array.isArray(pidHeader) ? (pidHeader[0] ?? '') : (pidHeader ?? ''), 10);
  let settle!: (r: RawExecResult) => void;
  let fail!: (e: unknown) => void;
  const result = new Promise<RawExecResult>((resolve, reject) => {
    settle = resolve;
    fail = reject;
  });
  // A caller that reads stdout only never sees an unhandled rejection.
  result.catch(() => undefined);
  let ended = false;
  const stdout = new ReadableStream<Uint8Array>(
    {
      start(controller) {
        res.on('data', (chunk) => {
          controller.enqueue(chunk);
          if ((controller.desiredSize ?? 1) <= 0) res.pause();
        });
        res.on('end', () => {
          if (ended) return;
          ended = true;
          controller.close();
          try {
            settle(rawResult(command, options.sessionId, Number.isFinite(pid) ? pid : -1, res.complete ? res.rawTrailers : null));
          } catch (e) {
            fail(e);
          }
        });
        const cut = (e?: unknown) => {
          if (ended) return;
          ended = true;
          const err = isAbort(e, options.signal)
            ? abortReason(options.signal, e)
            : transportError('peer_closed', `the output of '${command}' was cut before its end${e ? `: ${String(e)}` : ''}`, e, operation);
          controller.error(err);
          fail(err);
        };
        res.on('error', cut);
        res.on('aborted', () => cut());
        res.on('close', () => {
          if (!res.complete) cut();
        });
      },
      pull() {
        res.resume();
      },
      cancel(reason) {
        if (ended) return;
        ended = true;
        // Closing the connection stops the command (its process tree is killed).
        destroy();
        fail(transportError('peer_closed', `the output of '${command}' was cancelled before its end`, reason, operation));
      },
    },
    { highWaterMark: RAW_HIGH_WATER, size: (c) => c.byteLength },
  );
  return { stdout, pid: Number.isFinite(pid) ? pid : -1, result };
}

/** The value of each trailer line named `name` (lower-case), in order. */
function trailerValues(raw: string[], name: string): string[] {
  const out: string[] = [];
  for (let i = 0; i + 1 < raw.length; i += 2) if ((raw[i] ?? '').toLowerCase() === name) out.push((raw[i + 1] ?? '').trim());
  return out;
}

function trailerInt(v: string | undefined): number | undefined {
  return v !== undefined && /^-?[0-9]{1,15}$/.test(v) ? Number(v) : undefined;
}

/**
 * How a raw exec ended, from its trailer lines (`rawTrailers`: name, value, name, ...);
 * throws the error they name, or a transport error when there are none (the body ended
 * without them: the connection dropped).
 */
export function rawResult(command: string, sessionId: string | undefined, pid: number, raw: string[] | null): RawExecResult {
  if (!raw || raw.length === 0)
    throw transportError('peer_closed', `the output of '${command}' ended without its trailers (the connection dropped)`, undefined, 'command.stream');
  const b64 = trailerValues(raw, 'cella-stderr').join('');
  if (!/^[A-Za-z0-9+/]*={0,2}$/.test(b64) || b64.length % 4 !== 0)
    throw transportError('protocol_error', `the stderr trailer of '${command}' is not base64`, undefined, 'command.stream');
  const stderr = base64ToBytes(b64);
  const stderrTruncated = trailerValues(raw, 'cella-stderr-truncated')[0]?.toLowerCase() === 'true';
  const duration = trailerInt(trailerValues(raw, 'cella-duration')[0]) ?? 0;
  const exitCode = trailerInt(trailerValues(raw, 'cella-exit-code')[0]);
  const code = trailerValues(raw, 'cella-error-code')[0];
  if (code) {
    const message = trailerValues(raw, 'cella-error-message')[0] || `command '${command}' failed`;
    const ev: Record<string, unknown> = { code, error: message };
    if (exitCode !== undefined) ev.exitCode = exitCode;
    throw streamError(ev, command, '', textDecoder.decode(stderr), sessionId ?? (code.startsWith('SESSION_') ? 'default' : undefined));
  }
  if (exitCode === undefined || exitCode < 0)
    throw transportError('protocol_error', `the trailers of '${command}' carry neither an exit code nor an error`, undefined, 'command.stream');
  const r: RawExecResult = { success: exitCode === 0, exitCode, stderr, stderrTruncated, command, duration, pid };
  if (sessionId !== undefined) r.sessionId = sessionId;
  return r;
}

export type { ExecEvent };
