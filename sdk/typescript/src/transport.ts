/**
 * The HTTP transport: one place that speaks docs/api.md's conventions (base URL, bearer
 * token, JSON bodies, error bodies, SSE answers) with the platform's `fetch`. Everything
 * that can fail becomes a `SandboxError`: an error answer its code's class, a connection
 * that cannot be made or breaks `RPCTransportError`.
 */
import {
  RPCTransportError,
  clientError,
  createSandboxError,
  errorResponseFrom,
  type SandboxError,
} from './errors.js';
import type { StreamedEngine } from './http-node.js';

/** How to reach cellad. */
export interface ConnectOptions {
  /** cellad's base URL, e.g. `http://127.0.0.1:7070`. */
  url: string;
  /** The API token (cellad's `CELLA_TOKEN`), sent as `Authorization: Bearer`. */
  token?: string;
  /** A `fetch` to use instead of the platform's (tests, proxies, custom agents). */
  fetch?: typeof fetch;
  /** Headers added to every request. */
  headers?: Record<string, string>;
}

/** What a buffered request answers: status, headers (lower-case names) and the body text. */
export interface BufferedAnswer {
  status: number;
  headers: Record<string, string>;
  text: string;
}
/** Sends one request with a text body (or none) and answers it whole. */
export type BufferedEngine = (
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string | undefined,
  signal: AbortSignal | undefined,
) => Promise<BufferedAnswer>;

type QueryValue = string | number | boolean | undefined | null;

export interface RequestOptions {
  query?: Record<string, QueryValue>;
  /** A JSON body (sets Content-Type). */
  json?: unknown;
  /** A raw body. */
  body?: BodyInit | ReadableStream<Uint8Array> | null;
  headers?: Record<string, string>;
  signal?: AbortSignal | undefined;
  /** The hosted SDK's operation name, kept on errors (`file.read` ...). */
  operation?: string;
}

function encodeSegment(s: string): string {
  return encodeURIComponent(s);
}

export class Transport {
  readonly baseUrl: string;
  readonly token: string | undefined;
  private readonly fetchImpl: typeof fetch;
  private readonly extraHeaders: Record<string, string>;
  private readonly customFetch: boolean;
  private enginePromise: Promise<BufferedEngine | null> | null = null;
  private streamedPromise: Promise<StreamedEngine | null> | null = null;
  /** Sandbox options already applied on this connection (SandboxCore.ready). */
  readonly configured = new Map<string, Promise<void>>();

  constructor(options: ConnectOptions) {
    if (!options || typeof options.url !== 'string' || options.url === '')
      throw new TypeError('connect(): `url` is required, e.g. http://127.0.0.1:7070');
    let u: URL;
    try {
      u = new URL(options.url);
    } catch {
      throw new TypeError(`connect(): invalid url '${options.url}'`);
    }
    if (u.protocol !== 'http:' && u.protocol !== 'https:')
      throw new TypeError(`connect(): url must be http:// or https://, not '${u.protocol}'`);
    this.baseUrl = u.origin + u.pathname.replace(/\/+$/, '');
    this.token = options.token;
    const f = options.fetch ?? globalThis.fetch;
    if (typeof f !== 'function')
      throw new TypeError('connect(): this platform has no fetch; pass options.fetch');
    this.fetchImpl = f.bind(globalThis);
    this.customFetch = options.fetch !== undefined;
    this.extraHeaders = { ...(options.headers ?? {}) };
  }

  /** The fetch this connection uses (connect({fetch}) or the platform's), without its headers. */
  get rawFetch(): typeof fetch {
    return this.fetchImpl;
  }

  /** `/v1/sandboxes/{id}` + the rest, with every segment percent-encoded. */
  sandboxPath(id: string, ...rest: string[]): string {
    return ['/v1/sandboxes', encodeSegment(id), ...rest.map(encodeSegment)].join('/');
  }

  url(path: string, query?: Record<string, QueryValue>): string {
    let s = this.baseUrl + path;
    if (query) {
      const q = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) if (v !== undefined && v !== null) q.set(k, String(v));
      const qs = q.toString();
      if (qs) s += (s.includes('?') ? '&' : '?') + qs;
    }
    return s;
  }

  /** Headers for a request to the API: the token and the connection's extra headers. */
  headers(extra?: Record<string, string>): Record<string, string> {
    const h: Record<string, string> = { ...this.extraHeaders, ...(extra ?? {}) };
    if (this.token) h['authorization'] = `Bearer ${this.token}`;
    return h;
  }

  /**
   * Sends a request and answers the Response of a 2xx status; any other status throws the
   * error of its body. The caller owns the body of the Response it gets.
   */
  async request(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    const headers = this.headers(opts.headers);
    let body: BodyInit | ReadableStream<Uint8Array> | null | undefined = opts.body;
    if (opts.json !== undefined) {
      body = JSON.stringify(opts.json);
      headers['content-type'] = 'application/json';
    }
    const init: RequestInit & { duplex?: 'half' } = { method, headers };
    if (body !== undefined && body !== null) {
      init.body = body as BodyInit;
      if (typeof ReadableStream !== 'undefined' && body instanceof ReadableStream) init.duplex = 'half';
    }
    if (opts.signal) init.signal = opts.signal;
    let res: Response;
    try {
      res = await this.fetchImpl(this.url(path, opts.query), init);
    } catch (e) {
      if (isAbort(e, opts.signal)) throw abortReason(opts.signal, e);
      if (connectionFailure(e) === 'peer_closed')
        throw transportError('peer_closed', `the connection to cellad at ${this.baseUrl} broke before its answer: ${describe(e)}`, e, opts.operation);
      throw transportError('connection_failed', `cannot reach cellad at ${this.baseUrl}: ${describe(e)}`, e, opts.operation);
    }
    if (res.ok) return res;
    throw await errorFromResponse(res, opts.operation);
  }

  /** The buffered engine for this connection: node:http on Node (unless a `fetch` was
   * given), else none (fetch). Loaded once. */
  private engine(): Promise<BufferedEngine | null> {
    if (!this.enginePromise) {
      const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
      this.enginePromise =
        this.customFetch || !proc?.versions?.node
          ? Promise.resolve(null)
          : import('./http-node.js').then((m) => m.loadNodeEngine()).catch(() => null);
    }
    return this.enginePromise;
  }

  /** node:http for answers whose trailers matter (the raw exec form), on Node only (also
   * with connect({fetch}): fetch does not expose trailers); null elsewhere. Loaded once. */
  streamedEngine(): Promise<StreamedEngine | null> {
    if (!this.streamedPromise) {
      const proc = (globalThis as { process?: { versions?: { node?: string } } }).process;
      this.streamedPromise = !proc?.versions?.node
        ? Promise.resolve(null)
        : import('./http-node.js').then((m) => m.loadNodeStreamed()).catch(() => null);
    }
    return this.streamedPromise;
  }

  /**
   * A JSON request that answers the parsed JSON of a 2xx answer. Requests whose body is
   * JSON or empty go through the buffered engine where there is one (Node), else fetch.
   */
  async json<T>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    let text: string;
    let status = 200;
    const engine = opts.body === undefined ? await this.engine() : null;
    if (engine) {
      const headers = this.headers(opts.headers);
      let body: string | undefined;
      if (opts.json !== undefined) {
        body = JSON.stringify(opts.json);
        headers['content-type'] = 'application/json';
      }
      let a: BufferedAnswer;
      try {
        a = await engine(method, this.url(path, opts.query), headers, body, opts.signal);
      } catch (e) {
        if (isAbort(e, opts.signal)) throw abortReason(opts.signal, e);
        const kind = connectionFailure(e);
        throw transportError(
          kind,
          kind === 'connection_failed'
            ? `cannot reach cellad at ${this.baseUrl}: ${describe(e)}`
            : `the connection to cellad broke: ${describe(e)}`,
          e,
          opts.operation,
        );
      }
      if (a.status < 200 || a.status > 299) {
        let b: unknown = a.text;
        try {
          b = JSON.parse(a.text);
        } catch {
          /* not JSON: kept as text */
        }
        throw createSandboxError(errorResponseFrom(a.status, b, opts.operation));
      }
      text = a.text;
      status = a.status;
    } else {
      const res = await this.request(method, path, opts);
      status = res.status;
      try {
        text = await res.text();
      } catch (e) {
        if (isAbort(e, opts.signal)) throw abortReason(opts.signal, e);
        throw transportError('peer_closed', `the connection to cellad broke: ${describe(e)}`, e, opts.operation);
      }
    }
    try {
      return JSON.parse(text) as T;
    } catch (e) {
      throw transportError('protocol_error', `cellad answered HTTP ${status} with a body that is not JSON: ${text.slice(0, 200)}`, e, opts.operation);
    }
  }

  /**
   * An SSE request (`Accept: text/event-stream`): the answer's body as a byte stream whose
   * failures (the connection breaking mid-stream) are `RPCTransportError`s.
   */
  async sse(method: string, path: string, opts: RequestOptions = {}): Promise<ReadableStream<Uint8Array>> {
    const res = await this.request(method, path, {
      ...opts,
      headers: { accept: 'text/event-stream', ...(opts.headers ?? {}) },
    });
    return guardBody(res, opts.operation, opts.signal);
  }
}

/** The body of `res` as a stream whose errors are transport errors; an empty body is empty. */
export function guardBody(res: Response, operation?: string, signal?: AbortSignal): ReadableStream<Uint8Array> {
  const src = res.body;
  if (!src) return new ReadableStream<Uint8Array>({ start: (c) => c.close() });
  const reader = src.getReader();
  return new ReadableStream<Uint8Array>({
    async pull(controller) {
      try {
        const { done, value } = await reader.read();
        if (done) controller.close();
        else controller.enqueue(value);
      } catch (e) {
        if (isAbort(e, signal)) controller.error(abortReason(signal, e));
        else controller.error(transportError('peer_closed', `the stream from cellad broke: ${describe(e)}`, e, operation));
      }
    },
    cancel(reason) {
      return reader.cancel(reason).catch(() => undefined);
    },
  });
}

export async function errorFromResponse(res: Response, operation?: string): Promise<SandboxError<any>> {
  let text = '';
  try {
    text = await res.text();
  } catch (e) {
    return transportError('peer_closed', `the connection to cellad broke reading an HTTP ${res.status} answer`, e, operation);
  }
  let body: unknown = text;
  try {
    body = JSON.parse(text);
  } catch {
    /* not JSON: kept as text */
  }
  return createSandboxError(errorResponseFrom(res.status, body, operation));
}

export function transportError(kind: string, message: string, cause?: unknown, operation?: string): RPCTransportError {
  const extra: { operation?: string; cause?: unknown } = { cause };
  if (operation) extra.operation = operation;
  return clientError(RPCTransportError, 'RPC_TRANSPORT_ERROR', 503, message, { kind }, extra);
}

/**
 * The error codes of a connection that was made and then broke (undici's and Node's; the
 * node:http engine reports an answer cut short as ECONNRESET too).
 */
const BROKE = new Set(['UND_ERR_SOCKET', 'UND_ERR_CLOSED', 'ECONNRESET', 'EPIPE', 'UND_ERR_ABORTED']);

/**
 * Why a request failed, for `fetch` and the node:http engine alike: the connection was
 * made and broke with the request sent (ECONNRESET, EPIPE, an answer cut short: the daemon
 * died with the request in flight), or else it could not be made (ECONNREFUSED,
 * ENOTFOUND, EAI_AGAIN, EHOSTUNREACH, ENETUNREACH, ETIMEDOUT ...). `fetch` says only
 * "fetch failed"; the cause chain has the code.
 */
function connectionFailure(e: unknown): 'connection_failed' | 'peer_closed' {
  for (let c: unknown = e, depth = 0; c && depth < 5; c = (c as { cause?: unknown }).cause, depth++) {
    const code = (c as { code?: unknown }).code;
    if (typeof code === 'string' && BROKE.has(code)) return 'peer_closed';
  }
  return 'connection_failed';
}

function describe(e: unknown): string {
  if (e instanceof Error) {
    const c = (e as { cause?: unknown }).cause;
    if (c instanceof Error && c.message && c.message !== e.message) return `${e.message} (${c.message})`;
    return e.message;
  }
  return String(e);
}

export function isAbort(e: unknown, signal?: AbortSignal): boolean {
  if (signal?.aborted) return true;
  return e instanceof Error && e.name === 'AbortError';
}

/** What an aborted operation throws: the signal's reason, as `fetch` does. */
export function abortReason(signal: AbortSignal | undefined, e: unknown): unknown {
  if (signal?.aborted && signal.reason !== undefined) return signal.reason;
  return e;
}
