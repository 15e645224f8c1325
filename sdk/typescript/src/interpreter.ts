/**
 * The code interpreter: contexts (long-lived python/javascript/typescript interpreters
 * whose variables persist from one run to the next) and runs in them. docs/api.md, "Code
 * interpreter": `POST/GET /contexts`, `DELETE /contexts/{cid}`, `POST /code` (JSON, or the
 * run's events as they happen with `Accept: text/event-stream`).
 *
 * `runCode` answers an `Execution`; with a callback (`onStdout`, `onStderr`, `onResult`,
 * `onError`) it uses the streaming route and calls them as the events arrive, while the
 * code runs. `runCodeStream` answers the run's events as SSE bytes in the hosted SDK's
 * shapes. Aborting `signal`, or cancelling the stream, closes the request: cella then
 * interrupts the run (the context keeps its state).
 *
 * Web-standard APIs only (fetch through the transport, ReadableStream, TextEncoder).
 */
import type { SandboxCore } from './core.js';
import {
  ValidationFailedError,
  clientError,
  createSandboxError,
} from './errors.js';
import type { Sandbox } from './sandbox.js';
import { sseObjects } from './sse.js';
import { transportError } from './transport.js';
import type {
  ChartData,
  CodeContext,
  CreateContextOptions,
  ExecutionError,
  ExecutionResult,
  OutputMessage,
  Result,
  RunCodeOptions,
  RunCodeStreamEvent,
} from './types.js';
import { cleanEnv, compact, decodeField } from './util.js';

// ---------------------------------------------------------------- results

/** The result formats, in the order `formats()` lists them. */
const FORMATS = ['text', 'html', 'png', 'jpeg', 'svg', 'latex', 'markdown', 'javascript', 'json', 'chart'] as const;
const STRING_KEYS = ['text', 'html', 'png', 'jpeg', 'svg', 'latex', 'markdown', 'javascript'] as const;

type ResultData = Omit<Result, 'formats'>;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * One rich result of a run. Only the keys cella sent are set (so `JSON.stringify` and
 * spreading give the data); `formats()` is on the prototype.
 */
class RunResult implements Result {
  // `declare`: no own property unless cella sent the key
  declare text?: string;
  declare html?: string;
  declare png?: string;
  declare jpeg?: string;
  declare svg?: string;
  declare latex?: string;
  declare markdown?: string;
  declare javascript?: string;
  declare json?: unknown;
  declare chart?: ChartData;
  declare data?: unknown;
  declare isMainResult?: boolean;

  constructor(raw: Record<string, unknown>) {
    for (const k of STRING_KEYS) if (typeof raw[k] === 'string') this[k] = raw[k] as string;
    if (raw.json !== undefined) this.json = raw.json;
    if (isRecord(raw.chart)) this.chart = raw.chart as ChartData;
    if (raw.data !== undefined) this.data = raw.data;
    if (typeof raw.isMainResult === 'boolean') this.isMainResult = raw.isMainResult;
  }

  /** The formats this result has: `text`, `html`, `png`, `jpeg`, `svg`, `latex`,
   * `markdown`, `javascript`, `json`, `chart`. */
  formats(): string[] {
    return FORMATS.filter((f) => this[f] !== undefined);
  }

  /** The plain data. */
  toJSON(): ResultData {
    const out: ResultData = {};
    for (const [k, v] of Object.entries(this)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
    return out;
  }
}

/** The line of the run's code an error was raised at: the innermost `<cell>` frame of a
 * python traceback (`File "<cell>", line N`), the first of a JavaScript stack
 * (`<cell>:N:M`). */
function lineNumberOf(traceback: string[]): number | undefined {
  let line: number | undefined;
  for (const l of traceback) {
    const py = /File "<cell>", line (\d+)/.exec(l);
    if (py) line = Number(py[1]);
  }
  if (line !== undefined) return line;
  for (const l of traceback) {
    const js = /<cell>:(\d+)(?::\d+)?\)?\s*$/.exec(l);
    if (js) return Number(js[1]);
  }
  return undefined;
}

function toExecutionError(raw: Record<string, unknown>): ExecutionError {
  const traceback = Array.isArray(raw.traceback) ? raw.traceback.filter((t): t is string => typeof t === 'string') : [];
  const e: ExecutionError = {
    name: typeof raw.name === 'string' ? raw.name : typeof raw.ename === 'string' ? raw.ename : 'Error',
    message: typeof raw.message === 'string' ? raw.message : typeof raw.evalue === 'string' ? raw.evalue : '',
    traceback,
  };
  const line = typeof raw.lineNumber === 'number' ? raw.lineNumber : lineNumberOf(traceback);
  if (line !== undefined) e.lineNumber = line;
  return e;
}

/**
 * The outcome of a run: its output, its rich results, the error the code raised (an error
 * of the code is not a thrown error: it is `error`), the execution count. `toJSON()` gives
 * the plain `ExecutionResult`.
 */
export class Execution implements ExecutionResult {
  readonly code: string;
  /** The run's stdout and stderr: one element each with all the text (empty: none). */
  logs: { stdout: string[]; stderr: string[] } = { stdout: [], stderr: [] };
  declare error?: ExecutionError;
  declare executionCount?: number;
  results: Result[] = [];
  /** cella: the run was interrupted by its `timeout` (`error` is the interrupt's). */
  declare timedOut?: boolean;
  /** cella: the output passed the 64 MiB buffered cap and was cut (JSON route). */
  declare truncated?: boolean;

  /** @internal */
  constructor(code: string) {
    this.code = code;
  }

  toJSON(): ExecutionResult {
    const r: ExecutionResult = {
      code: this.code,
      logs: { stdout: [...this.logs.stdout], stderr: [...this.logs.stderr] },
      results: this.results.map((x) => (x instanceof RunResult ? x.toJSON() : plainResult(x))),
    };
    if (this.error) r.error = this.error;
    if (this.executionCount !== undefined) r.executionCount = this.executionCount;
    if (this.timedOut) r.timedOut = true;
    if (this.truncated) r.truncated = true;
    return r;
  }
}

function plainResult(x: Result): ResultData {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(x)) if (v !== undefined && typeof v !== 'function') out[k] = v;
  return out as ResultData;
}

// ---------------------------------------------------------------- contexts

interface WireContext {
  id: string;
  language: string;
  cwd: string;
  status?: string;
}

/** cella keeps no times for contexts: the SDK keeps when it first saw each one and when it
 * last ran code in it, per connection, sandbox and context. */
const seen = new WeakMap<object, Map<string, { createdAt: Date; lastUsed: Date }>>();

function timesOf(core: SandboxCore): Map<string, { createdAt: Date; lastUsed: Date }> {
  let m = seen.get(core.t);
  if (!m) {
    m = new Map();
    seen.set(core.t, m);
  }
  return m;
}

function timeKey(core: SandboxCore, contextId: string): string {
  return `${core.id}\n${contextId}`;
}

function touch(core: SandboxCore, contextId: string): void {
  const m = timesOf(core);
  const k = timeKey(core, contextId);
  const now = new Date();
  const t = m.get(k);
  if (t) t.lastUsed = now;
  else m.set(k, { createdAt: now, lastUsed: now });
}

function toContext(core: SandboxCore, w: WireContext): CodeContext {
  const m = timesOf(core);
  const k = timeKey(core, w.id);
  let t = m.get(k);
  if (!t) {
    const now = new Date();
    t = { createdAt: now, lastUsed: now };
    m.set(k, t);
  }
  const c: { -readonly [K in keyof CodeContext]: CodeContext[K] } = {
    id: w.id,
    language: w.language,
    cwd: w.cwd,
    createdAt: new Date(t.createdAt.getTime()),
    lastUsed: new Date(t.lastUsed.getTime()),
  };
  if (typeof w.status === 'string') c.status = w.status;
  return c;
}

/** Creates a context: a new interpreter of `language` (default python) in `cwd` (default
 * /workspace) with `envVars` added to the sandbox's environment. */
export async function createCodeContext(core: SandboxCore, options: CreateContextOptions = {}): Promise<CodeContext> {
  await core.ready();
  const w = await core.t.json<WireContext>('POST', core.path('contexts'), {
    json: compact({
      language: options.language ?? 'python',
      cwd: options.cwd,
      env: cleanEnv(options.envVars),
    }),
    operation: 'code.context.create',
  });
  timesOf(core).delete(timeKey(core, w.id));
  return toContext(core, w);
}

/** Every context of the sandbox, the default ones (`default-python` ...) included. */
export async function listCodeContexts(core: SandboxCore): Promise<CodeContext[]> {
  await core.ready();
  const r = await core.read(() =>
    core.t.json<{ contexts: WireContext[] }>('GET', core.path('contexts'), { operation: 'code.context.list' }),
  );
  const list = Array.isArray(r.contexts) ? r.contexts : [];
  // forget the times of contexts that are gone (a deleted, slept or destroyed sandbox's)
  const m = timesOf(core);
  const ids = new Set(list.map((c) => timeKey(core, c.id)));
  for (const k of [...m.keys()]) if (k.startsWith(`${core.id}\n`) && !ids.has(k)) m.delete(k);
  return list.map((c) => toContext(core, c));
}

/** Deletes a context and kills its interpreter; an unknown id is `ContextNotFoundError`. */
export async function deleteCodeContext(core: SandboxCore, contextId: string): Promise<void> {
  if (typeof contextId !== 'string')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'contextId must be a string', { contextId });
  await core.ready();
  await core.t.json('DELETE', core.path('contexts', contextId), { operation: 'code.context.delete' });
  timesOf(core).delete(timeKey(core, contextId));
}

// ---------------------------------------------------------------- runs

function checkCode(code: unknown): asserts code is string {
  if (typeof code !== 'string')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'code must be a string', {
      code: typeof code,
    });
}

function contextIdOf(options: RunCodeOptions): string | undefined {
  const c = options.context;
  if (c === undefined || c === null) return undefined;
  if (!isRecord(c) || typeof c.id !== 'string')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'context must be a CodeContext (with an id)', {});
  return c.id;
}

/** The body of `POST /code`. With a context, its language is the context's: `language` is
 * not sent (the hosted SDK ignores it then). */
function runBody(code: string, options: RunCodeOptions): Record<string, unknown> {
  const contextId = contextIdOf(options);
  return compact({
    code,
    contextId,
    language: contextId === undefined ? options.language : undefined,
    timeout: options.timeout,
  });
}

/** The context a run uses, for its `lastUsed`. */
function usedContext(options: RunCodeOptions): string {
  return contextIdOf(options) ?? `default-${options.language ?? 'python'}`;
}

interface WireExecution {
  results?: unknown[];
  logs?: { stdout?: unknown[]; stderr?: unknown[]; stdoutEncoding?: string; stderrEncoding?: string };
  error?: Record<string, unknown>;
  executionCount?: number;
  timedOut?: boolean;
  truncated?: boolean;
}

function fromWire(code: string, w: WireExecution): Execution {
  const x = new Execution(code);
  const logs = w.logs ?? {};
  const out = (arr: unknown[] | undefined, enc: string | undefined) =>
    (arr ?? []).filter((s): s is string => typeof s === 'string').map((s) => decodeField(s, enc));
  x.logs = { stdout: out(logs.stdout, logs.stdoutEncoding), stderr: out(logs.stderr, logs.stderrEncoding) };
  x.results = (w.results ?? []).filter(isRecord).map((r) => new RunResult(r));
  if (isRecord(w.error)) x.error = toExecutionError(w.error);
  if (typeof w.executionCount === 'number') x.executionCount = w.executionCount;
  if (w.timedOut) x.timedOut = true;
  if (w.truncated) x.truncated = true;
  return x;
}

function eventText(ev: Record<string, unknown>): string {
  return decodeField(ev.text, ev.encoding);
}

function eventTime(ev: Record<string, unknown>): number {
  const t = typeof ev.timestamp === 'string' ? Date.parse(ev.timestamp) : NaN;
  return Number.isNaN(t) ? Date.now() : t;
}

const FAILURE_STATUS: Record<string, number> = { CONTEXT_DEAD: 410, CONTEXT_NOT_FOUND: 404 };

/** The error of a failed run (an SSE `error` event with a `code`): `ContextDeadError` ... */
function runFailure(ev: Record<string, unknown>, context: Record<string, unknown>) {
  const code = String(ev.code);
  return createSandboxError({
    code,
    message: typeof ev.message === 'string' ? ev.message : `the run failed: ${code}`,
    context,
    httpStatus: FAILURE_STATUS[code] ?? 500,
    timestamp: typeof ev.timestamp === 'string' ? ev.timestamp : new Date().toISOString(),
    operation: 'code.execute',
  });
}

function hasCallbacks(o: RunCodeOptions): boolean {
  return !!(o.onStdout || o.onStderr || o.onResult || o.onError);
}

/**
 * Runs `code` in `options.context`, or in the default context of `options.language`
 * (python unless given). The code raising is not a thrown error: the `Execution` has
 * `error`. Throws `ContextNotFoundError` (unknown or deleted context), `ContextDeadError`
 * (its interpreter exited or was killed), `ValidationFailedError` (bad input), the
 * signal's reason when `signal` aborts (the run is interrupted).
 */
export async function runCode(core: SandboxCore, code: string, options: RunCodeOptions = {}): Promise<Execution> {
  checkCode(code);
  const body = runBody(code, options);
  if (options.signal?.aborted) throw options.signal.reason;
  await core.ready();
  touch(core, usedContext(options));
  if (!hasCallbacks(options)) {
    const w = await core.t.json<WireExecution>('POST', core.path('code'), {
      json: body,
      signal: options.signal,
      operation: 'code.execute',
    });
    return fromWire(code, w);
  }
  const stream = await core.t.sse('POST', core.path('code'), {
    json: body,
    signal: options.signal,
    operation: 'code.execute',
  });
  const x = new Execution(code);
  let stdout = '';
  let stderr = '';
  for await (const ev of sseObjects(stream, options.signal)) {
    switch (ev.type) {
      case 'stdout':
      case 'stderr': {
        const msg: OutputMessage = { text: eventText(ev), timestamp: eventTime(ev) };
        if (ev.type === 'stdout') {
          stdout += msg.text;
          await options.onStdout?.(msg);
        } else {
          stderr += msg.text;
          await options.onStderr?.(msg);
        }
        break;
      }
      case 'result': {
        const r = new RunResult(ev);
        x.results.push(r);
        await options.onResult?.(r);
        break;
      }
      case 'error': {
        if (typeof ev.code === 'string') {
          const ctx: Record<string, unknown> = { stdout, stderr };
          const cid = contextIdOf(options);
          if (cid !== undefined) ctx.contextId = cid;
          throw runFailure(ev, ctx);
        }
        x.error = toExecutionError(ev);
        await options.onError?.(x.error);
        break;
      }
      case 'execution_complete': {
        x.logs = { stdout: stdout ? [stdout] : [], stderr: stderr ? [stderr] : [] };
        if (typeof ev.executionCount === 'number') x.executionCount = ev.executionCount;
        if (ev.timedOut === true) x.timedOut = true;
        return x;
      }
    }
  }
  throw transportError('peer_closed', 'the run\'s event stream ended before execution_complete', undefined, 'code.execute');
}

/** A cella event in the hosted SDK's shape (and cella's fields kept); null: not passed on. */
function hostedEvent(ev: Record<string, unknown>): RunCodeStreamEvent | null {
  const timestamp = typeof ev.timestamp === 'string' ? ev.timestamp : new Date().toISOString();
  switch (ev.type) {
    case 'stdout':
    case 'stderr':
      return { type: ev.type, text: eventText(ev), timestamp };
    case 'result': {
      const data = new RunResult(ev).toJSON();
      return { type: 'result', ...data, timestamp };
    }
    case 'error': {
      const e = toExecutionError(ev);
      const out: Extract<RunCodeStreamEvent, { type: 'error' }> = {
        type: 'error',
        ename: e.name,
        evalue: e.message,
        traceback: e.traceback,
        name: e.name,
        message: e.message,
        timestamp,
      };
      if (e.lineNumber !== undefined) out.lineNumber = e.lineNumber;
      if (typeof ev.code === 'string') out.code = ev.code;
      return out;
    }
    case 'execution_complete': {
      const n = typeof ev.executionCount === 'number' ? ev.executionCount : 0;
      return { type: 'execution_complete', execution_count: n, executionCount: n, timedOut: ev.timedOut === true, timestamp };
    }
    default:
      return null;
  }
}

/**
 * Runs `code` and answers its events as an SSE byte stream, as they happen (parse it with
 * `parseSSEStream<RunCodeStreamEvent>`): `stdout`/`stderr` `{text}`, `result` (the
 * formats), `error` `{ename, evalue, traceback}` when the code raised, then
 * `execution_complete {execution_count}`. If the interpreter dies the stream ends with an
 * `error` event that has `code: 'CONTEXT_DEAD'`. Cancelling the stream or aborting
 * `signal` interrupts the run. Callbacks in `options` are not called (use `runCode`).
 */
export async function runCodeStream(
  core: SandboxCore,
  code: string,
  options: RunCodeOptions = {},
): Promise<ReadableStream<Uint8Array>> {
  checkCode(code);
  const body = runBody(code, options);
  const signal = options.signal;
  if (signal?.aborted) throw signal.reason;
  await core.ready();
  touch(core, usedContext(options));
  const src = await core.t.sse('POST', core.path('code'), { json: body, signal, operation: 'code.stream' });
  // One signal for the reader: the caller's, or this stream being cancelled.
  const stop = new AbortController();
  const onAbort = () => stop.abort(signal?.reason);
  signal?.addEventListener('abort', onAbort, { once: true });
  const done = () => signal?.removeEventListener('abort', onAbort);
  const events = sseObjects(src, stop.signal);
  const encoder = new TextEncoder();
  let ended = false;
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        for (;;) {
          const { done: end, value } = await events.next();
          if (end) {
            done();
            if (ended) controller.close();
            else
              controller.error(
                transportError('peer_closed', 'the run\'s event stream ended before execution_complete', undefined, 'code.stream'),
              );
            return;
          }
          const out = hostedEvent(value);
          if (!out) continue;
          if (out.type === 'execution_complete' || (out.type === 'error' && out.code !== undefined)) ended = true;
          controller.enqueue(encoder.encode(`data: ${JSON.stringify(out)}\n\n`));
          return;
        }
      } catch (e) {
        done();
        controller.error(e);
      }
    },
    cancel(reason) {
      done();
      stop.abort(reason);
      return events.return(undefined).then(
        () => undefined,
        () => undefined,
      );
    },
  });
}

// ---------------------------------------------------------------- CodeInterpreter

/**
 * The code interpreter of a sandbox as an object of its own (the hosted SDK exports it):
 * `new CodeInterpreter(sandbox)`. The same as the sandbox's methods.
 */
export class CodeInterpreter {
  readonly #core: SandboxCore;

  constructor(sandbox: Sandbox) {
    const core = (sandbox as { core?: SandboxCore } | null | undefined)?.core;
    if (!core) throw new TypeError('new CodeInterpreter(sandbox): sandbox must come from getSandbox()');
    this.#core = core;
  }

  createCodeContext(options?: CreateContextOptions): Promise<CodeContext> {
    return createCodeContext(this.#core, options);
  }
  runCode(code: string, options?: RunCodeOptions): Promise<Execution> {
    return runCode(this.#core, code, options);
  }
  runCodeStream(code: string, options?: RunCodeOptions): Promise<ReadableStream<Uint8Array>> {
    return runCodeStream(this.#core, code, options);
  }
  listCodeContexts(): Promise<CodeContext[]> {
    return listCodeContexts(this.#core);
  }
  deleteCodeContext(contextId: string): Promise<void> {
    return deleteCodeContext(this.#core, contextId);
  }
}
