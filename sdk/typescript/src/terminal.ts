/**
 * Terminals: a session's shell on a pty, over cellad's `GET /v1/sandboxes/{id}/pty`
 * WebSocket (docs/api.md, "Terminal"). Binary messages are the terminal's bytes both ways;
 * text messages are JSON control (`{type:'resize',cols,rows}` in; `{type:'ready'}`,
 * `{type:'exit',code}`, `{type:'error',code,message}` out). One terminal per session, shared
 * by every connection to it.
 *
 * - `terminal(request, opts)` (hosted): relays a browser's WebSocket upgrade (xterm.js and
 *   the hosted `/xterm` addon speak this protocol) — an upgrade marker Response, see
 *   websocket.ts.
 * - `openTerminal(opts)` (cella): a client `Terminal` for scripts and tests.
 */
import type { SandboxCore } from './core.js';
import { ValidationFailedError, clientError } from './errors.js';
import { transportError } from './transport.js';
import type { PtyOptions } from './types.js';
import { forwardHeaders, isWebSocketUpgrade, notAnUpgrade, openApiWebSocket, upgradeResponse } from './websocket.js';

/** Options of `openTerminal`. */
export interface OpenTerminalOptions {
  /** The session whose terminal to attach to; default the sandbox's default session. */
  sessionId?: string;
  /** 1–1000; default 80. A resize of a terminal other connections share applies to all. */
  cols?: number;
  /** 1–1000; default 24. */
  rows?: number;
}

/** A control message from the terminal (a text message). */
export interface TerminalControlMessage {
  type: string;
  code?: number | string;
  message?: string;
  [key: string]: unknown;
}

function checkSize(name: string, v: unknown): void {
  if (v === undefined) return;
  if (typeof v !== 'number' || !Number.isInteger(v) || v < 1 || v > 1000)
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, `${name} must be an integer 1-1000`, { [name]: v });
}

function ptyQuery(sessionId: string | undefined, cols?: number, rows?: number): Record<string, string | number | undefined> {
  checkSize('cols', cols);
  checkSize('rows', rows);
  return { session: sessionId, cols, rows };
}

/** A session that does not exist yet is 404 SESSION_NOT_FOUND here (the caller may create it). */
async function checkSession(core: SandboxCore, sessionId: string | undefined): Promise<void> {
  if (sessionId === undefined) return;
  await core.read(() => core.t.json('GET', core.path('sessions', sessionId), { operation: 'terminal.open' }));
}

/**
 * The hosted `terminal(request, {cols, rows, shell})`: relays a WebSocket upgrade to the
 * session's terminal (`sessionId` undefined: the default session). `shell` is accepted and
 * ignored: cellad runs the image's bash (or sh).
 */
export async function terminal(
  core: SandboxCore,
  sessionId: string | undefined,
  request: Request,
  options: PtyOptions = {},
): Promise<Response> {
  const query = ptyQuery(sessionId, options.cols, options.rows);
  if (!isWebSocketUpgrade(request)) return notAnUpgrade('terminal');
  await core.ready();
  await checkSession(core, sessionId);
  const headers = core.t.headers(forwardHeaders(request.headers, ['origin', 'authorization', 'cookie']));
  return upgradeResponse({ kind: 'pty', url: core.t.url(core.path('pty'), query), headers });
}

/** cella: a client of the session's terminal, resolved once it is attached (`ready`). */
export async function openTerminal(core: SandboxCore, options: OpenTerminalOptions = {}): Promise<Terminal> {
  const query = ptyQuery(options.sessionId, options.cols, options.rows);
  await core.ready();
  await checkSession(core, options.sessionId);
  const ws = await openApiWebSocket(core, core.path('pty'), query, undefined, 'terminal.open');
  const term = new Terminal(ws, options.sessionId ?? 'default');
  let timer: ReturnType<typeof setTimeout> | undefined;
  try {
    await Promise.race([
      term.ready,
      new Promise<never>((_, reject) => {
        timer = setTimeout(
          () => reject(transportError('protocol_error', 'the terminal did not say ready within 30 s', undefined, 'terminal.open')),
          30_000,
        );
      }),
    ]);
  } catch (e) {
    term.close();
    throw e;
  } finally {
    clearTimeout(timer);
  }
  return term;
}

/** The structural type of what `proxyTerminal` needs of the hosted stub (a `Sandbox`). */
export interface TerminalStub {
  getSession(id: string): Promise<{ terminal(request: Request, options?: PtyOptions): Promise<Response> }>;
}

/**
 * The hosted top-level `proxyTerminal(stub, sessionId, request, opts)`: the same as
 * `(await stub.getSession(sessionId)).terminal(request, opts)`.
 */
export async function proxyTerminal(
  stub: TerminalStub,
  sessionId: string,
  request: Request,
  options?: PtyOptions,
): Promise<Response> {
  const session = await stub.getSession(sessionId);
  return session.terminal(request, options);
}

const MAX_OUTPUT = 1 << 20;

/**
 * cella: a connection to a session's terminal. Output arrives through `onData`, the async
 * iterator, and `output` (the text so far, the last 1 MiB); `write` types, `resize` resizes,
 * `exited` resolves with the shell's exit code. The terminal outlives the connection:
 * `close()` detaches, the shell goes on (send `exit\r` to end it).
 */
export class Terminal {
  /** The session whose terminal this is. */
  readonly sessionId: string;
  /** The WebSocket (binary type `arraybuffer`). */
  readonly socket: WebSocket;
  /** Resolves once the recent output was replayed (`{type:'ready'}`). */
  readonly ready: Promise<void>;
  /**
   * Resolves with the shell's exit code (`{type:'exit'}`; 128+signal if it was killed).
   * Rejects when the connection closes first (`close()`, the daemon going away).
   */
  readonly exited: Promise<number>;

  #dataCbs = new Set<(chunk: Uint8Array) => void>();
  #controlCbs = new Set<(msg: TerminalControlMessage) => void>();
  #endCbs = new Set<() => void>();
  #decoder = new TextDecoder();
  #text = '';
  #dropped = 0;
  #closed = false;
  #exitCode: number | undefined;
  #resolveReady!: () => void;
  #rejectReady!: (e: unknown) => void;
  #resolveExit!: (code: number) => void;
  #rejectExit!: (e: unknown) => void;
  #userClosed = false;

  /** @internal use openTerminal() */
  constructor(socket: WebSocket, sessionId: string) {
    this.socket = socket;
    this.sessionId = sessionId;
    this.ready = new Promise<void>((res, rej) => {
      this.#resolveReady = res;
      this.#rejectReady = rej;
    });
    this.exited = new Promise<number>((res, rej) => {
      this.#resolveExit = res;
      this.#rejectExit = rej;
    });
    // Nobody has to await these: their rejection is not an unhandled one.
    this.ready.catch(() => undefined);
    this.exited.catch(() => undefined);
    socket.addEventListener('message', (ev: MessageEvent) => this.#onMessage(ev.data));
    socket.addEventListener('close', (ev: CloseEvent) => this.#onClose(ev.code, ev.reason));
    socket.addEventListener('error', () => undefined);
  }

  #onMessage(data: unknown): void {
    if (typeof data === 'string') {
      let msg: TerminalControlMessage;
      try {
        msg = JSON.parse(data) as TerminalControlMessage;
      } catch {
        return;
      }
      if (msg.type === 'ready') this.#resolveReady();
      else if (msg.type === 'exit') {
        this.#exitCode = typeof msg.code === 'number' ? msg.code : Number(msg.code);
        this.#resolveExit(this.#exitCode);
      }
      for (const cb of this.#controlCbs) cb(msg);
      return;
    }
    let bytes: Uint8Array;
    if (data instanceof ArrayBuffer) bytes = new Uint8Array(data);
    else if (ArrayBuffer.isView(data)) bytes = new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
    else return;
    this.#append(this.#decoder.decode(bytes, { stream: true }));
    for (const cb of this.#dataCbs) cb(bytes);
  }

  #append(s: string): void {
    this.#text += s;
    if (this.#text.length > MAX_OUTPUT) {
      const cut = this.#text.length - MAX_OUTPUT;
      this.#text = this.#text.slice(cut);
      this.#dropped += cut;
    }
  }

  #onClose(code: number, reason: string): void {
    if (this.#closed) return;
    this.#closed = true;
    this.#append(this.#decoder.decode());
    const err = this.#userClosed
      ? new Error('the terminal connection was closed')
      : transportError('peer_closed', `the terminal connection closed (${code}${reason ? ` ${reason}` : ''})`, undefined, 'terminal');
    this.#rejectReady(err);
    if (this.#exitCode === undefined) this.#rejectExit(err);
    for (const cb of this.#endCbs) cb();
    this.#endCbs.clear();
  }

  /** Whether the connection is closed. */
  get closed(): boolean {
    return this.#closed;
  }

  /** The terminal's output so far as text (its last 1 MiB), replay included. */
  get output(): string {
    return this.#text;
  }

  /** How many characters of output arrived so far: a position for `waitFor({from})`. */
  get position(): number {
    return this.#dropped + this.#text.length;
  }

  /** Types `data` (UTF-8 for a string; raw: `\r` is Enter, `\x03` ^C). */
  write(data: string | Uint8Array): void {
    const bytes = typeof data === 'string' ? new TextEncoder().encode(data) : data;
    this.socket.send(bytes);
  }

  /** Resizes the terminal (1–1000 each); its programs get SIGWINCH. */
  resize(cols: number, rows: number): void {
    checkSize('cols', cols);
    checkSize('rows', rows);
    this.socket.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /** Calls `cb` with each chunk of output; answers a function that stops it. */
  onData(cb: (chunk: Uint8Array) => void): () => void {
    this.#dataCbs.add(cb);
    return () => this.#dataCbs.delete(cb);
  }

  /** Calls `cb` with each control message (`ready`, `exit`, `error`); answers a function that stops it. */
  onControl(cb: (msg: TerminalControlMessage) => void): () => void {
    this.#controlCbs.add(cb);
    return () => this.#controlCbs.delete(cb);
  }

  /**
   * Resolves with the output from `from` (a `position`; default 0) once it matches
   * `pattern`; rejects after `timeout` ms (default 30 000) or when the connection closes.
   */
  waitFor(pattern: string | RegExp, options: { from?: number; timeout?: number } = {}): Promise<string> {
    const from = options.from ?? 0;
    const timeout = options.timeout ?? 30_000;
    const test = (): string | null => {
      const s = this.#text.slice(Math.max(0, from - this.#dropped));
      const hit = typeof pattern === 'string' ? s.includes(pattern) : new RegExp(pattern.source, pattern.flags.replace('g', '')).test(s);
      return hit ? s : null;
    };
    const now = test();
    if (now !== null) return Promise.resolve(now);
    return new Promise<string>((resolve, reject) => {
      const finish = (fn: () => void) => {
        clearTimeout(timer);
        offData();
        this.#endCbs.delete(onEnd);
        fn();
      };
      const offData = this.onData(() => {
        const s = test();
        if (s !== null) finish(() => resolve(s));
      });
      const onEnd = () =>
        finish(() => {
          const s = test();
          if (s !== null) resolve(s);
          else reject(new Error(`the terminal closed before its output matched ${String(pattern)}`));
        });
      if (this.#closed) return onEnd();
      this.#endCbs.add(onEnd);
      const timer = setTimeout(
        () =>
          finish(() =>
            reject(new Error(`the terminal's output did not match ${String(pattern)} within ${timeout} ms: ${JSON.stringify(this.#text.slice(-500))}`)),
          ),
        timeout,
      );
    });
  }

  /** Output chunks until the connection closes. */
  [Symbol.asyncIterator](): AsyncIterator<Uint8Array> {
    const queue: Uint8Array[] = [];
    let ended = this.#closed;
    let wake: (() => void) | null = null;
    const off = this.onData((c) => {
      queue.push(c);
      wake?.();
    });
    const onEnd = () => {
      ended = true;
      wake?.();
    };
    if (!ended) this.#endCbs.add(onEnd);
    const stop = () => {
      off();
      this.#endCbs.delete(onEnd);
    };
    return {
      next: async (): Promise<IteratorResult<Uint8Array>> => {
        while (queue.length === 0 && !ended) await new Promise<void>((r) => (wake = r));
        wake = null;
        const v = queue.shift();
        if (v) return { value: v, done: false };
        stop();
        return { value: undefined, done: true };
      },
      return: async (): Promise<IteratorResult<Uint8Array>> => {
        stop();
        return { value: undefined, done: true };
      },
    };
  }

  /** Detaches (close 1000). The shell goes on; `exited` rejects unless it had exited. */
  close(): void {
    this.#userClosed = true;
    if (this.socket.readyState === 0 || this.socket.readyState === 1) this.socket.close(1000);
  }
}
