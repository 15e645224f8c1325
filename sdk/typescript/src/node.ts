/**
 * `@cella/sandbox/node`: run a Worker-style app (`export default { fetch(request, env) }`) on
 * Node's http server, with the WebSocket upgrades of `wsConnect`, `terminal` and
 * `proxyToSandbox` relayed to cellad:
 *
 *     import { connect } from '@cella/sandbox';
 *     import { serve } from '@cella/sandbox/node';
 *     import worker from './worker.js';
 *     const { url } = await serve(worker, { env: { Sandbox: connect({ url: 'http://127.0.0.1:7070' }) }, port: 8787 });
 *
 * Requests become web `Request`s (full URL from the Host header, body streamed); `Response`s
 * are written back (status, every Set-Cookie, body streamed; a client that goes away cancels
 * the body). On an HTTP upgrade the handler's Response is looked at: an upgrade marker
 * (`getUpgradeTarget`) makes the server open a TCP connection to cellad, send the upgrade
 * request with the client's handshake headers, and relay the bytes both ways until either
 * side ends; any other Response is written to the client as the refusal of the upgrade.
 *
 * Node only (node:http, node:net, node:tls). Bun's `server.upgrade` and Deno's
 * `Deno.upgradeWebSocket` are not covered yet: there the marker's 426 is what the client gets.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import { connect as netConnect, type Socket } from 'node:net';
import { Readable, type Duplex } from 'node:stream';
import { connect as tlsConnect } from 'node:tls';
import { getUpgradeTarget, type UpgradeTarget } from './websocket.js';

export { getUpgradeTarget, UPGRADE } from './websocket.js';
export type { UpgradeTarget } from './websocket.js';

/** The third argument of `fetch`: the part of a Worker's `ExecutionContext` that makes sense here. */
export interface ServeContext {
  /** Keeps nothing alive (Node does not stop after a response); a rejection is reported. */
  waitUntil(promise: Promise<unknown>): void;
  /** No-op (there is no origin to fall back to). */
  passThroughOnException(): void;
}

/** A Worker-style handler: `export default { fetch(request, env, ctx) }`. */
export interface FetchHandler<Env> {
  fetch(request: Request, env: Env, ctx: ServeContext): Response | Promise<Response>;
}

export interface ListenerOptions<Env> {
  /** What the handler gets as `env`, e.g. `{ Sandbox: connect({ url, token }) }`. */
  env: Env;
  /** Called with a handler's exception (default: console.error). The client gets 500. */
  onError?: (error: unknown, request: Request) => void;
}

export interface ServeOptions<Env> extends ListenerOptions<Env> {
  /** Default 0: an ephemeral port (see the answer's `url`). */
  port?: number;
  /** Default 127.0.0.1. */
  hostname?: string;
}

export interface ServeHandle {
  server: Server;
  /** `http://hostname:port` */
  url: string;
  /** Stops listening and ends every connection (relayed WebSockets included). */
  close(): Promise<void>;
}

// ------------------------------------------------------------------ IncomingMessage → Request

/** The request's URL: scheme of the socket, authority of the Host header, then the target. */
function requestUrl(req: IncomingMessage): string {
  const secure = (req.socket as Socket & { encrypted?: boolean }).encrypted === true;
  let host = req.headers.host;
  if (!host) {
    const a = req.socket.localAddress ?? '127.0.0.1';
    host = `${a.includes(':') ? `[${a}]` : a}:${req.socket.localPort ?? 80}`;
  }
  const target = req.url ?? '/';
  // An absolute-form target (a proxy request) is its own URL.
  if (/^https?:\/\//i.test(target)) return target;
  return `${secure ? 'https' : 'http'}://${host}${target.startsWith('/') ? target : `/${target}`}`;
}

function toRequest(req: IncomingMessage, signal: AbortSignal | undefined, body: boolean): Request {
  const headers = new Headers();
  const raw = req.rawHeaders;
  for (let i = 0; i + 1 < raw.length; i += 2) {
    try {
      headers.append(raw[i] as string, raw[i + 1] as string);
    } catch {
      /* a header value fetch refuses: dropped */
    }
  }
  const method = req.method ?? 'GET';
  const init: RequestInit & { duplex?: 'half' } = { method, headers };
  if (signal) init.signal = signal;
  if (body && method !== 'GET' && method !== 'HEAD') {
    init.body = Readable.toWeb(req) as unknown as ReadableStream<Uint8Array>;
    init.duplex = 'half';
  }
  return new Request(requestUrl(req), init);
}

function makeContext(onError: (e: unknown) => void): ServeContext {
  return {
    waitUntil(p: Promise<unknown>) {
      Promise.resolve(p).catch(onError);
    },
    passThroughOnException() {},
  };
}

async function callHandler<Env>(
  handler: FetchHandler<Env>,
  request: Request,
  options: ListenerOptions<Env>,
): Promise<Response> {
  const report = (e: unknown) => (options.onError ? options.onError(e, request) : console.error('[@cella/sandbox/node]', e));
  try {
    const r = await handler.fetch(request, options.env, makeContext(report));
    if (!(r instanceof Response)) throw new TypeError('the fetch handler did not answer a Response');
    return r;
  } catch (e) {
    report(e);
    return new Response('Internal Server Error', { status: 500, headers: { 'content-type': 'text/plain' } });
  }
}

// ------------------------------------------------------------------ Response → ServerResponse

const HOP = new Set(['connection', 'keep-alive', 'proxy-connection', 'transfer-encoding', 'upgrade', 'te', 'trailer']);

function setCookies(h: Headers): string[] {
  const g = (h as Headers & { getSetCookie?: () => string[] }).getSetCookie;
  if (typeof g === 'function') return g.call(h);
  const out: string[] = [];
  h.forEach((v, k) => {
    if (k === 'set-cookie') out.push(v);
  });
  return out;
}

function waitDrain(res: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off('drain', done);
      res.off('close', done);
      resolve();
    };
    res.on('drain', done);
    res.on('close', done);
  });
}

async function writeResponse(req: IncomingMessage, res: ServerResponse, response: Response): Promise<void> {
  res.statusCode = response.status;
  if (response.statusText) res.statusMessage = response.statusText;
  response.headers.forEach((value, name) => {
    if (name === 'set-cookie' || HOP.has(name)) return;
    res.setHeader(name, value);
  });
  const cookies = setCookies(response.headers);
  if (cookies.length > 0) res.setHeader('set-cookie', cookies);
  const body = response.body;
  const bodyless = req.method === 'HEAD' || response.status === 204 || response.status === 304;
  if (!body || bodyless) {
    if (body) await body.cancel().catch(() => undefined);
    res.end();
    return;
  }
  const reader = body.getReader();
  let finished = false;
  res.on('close', () => {
    if (!finished) reader.cancel().catch(() => undefined);
  });
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (res.destroyed) break;
      if (!res.write(value)) await waitDrain(res);
    }
    finished = true;
    res.end();
  } catch (e) {
    finished = true;
    res.destroy(e instanceof Error ? e : new Error(String(e)));
  }
}

/**
 * A `request` listener for an existing `http.Server` (or `https`): each request goes to
 * `handler.fetch(request, env, ctx)`. Pair it with `toNodeUpgradeListener` for WebSockets.
 */
export function toNodeListener<Env>(
  handler: FetchHandler<Env>,
  options: ListenerOptions<Env>,
): (req: IncomingMessage, res: ServerResponse) => void {
  return (req, res) => {
    const ac = new AbortController();
    res.on('close', () => {
      if (!res.writableFinished) ac.abort(new Error('the client went away'));
    });
    let request: Request;
    try {
      request = toRequest(req, ac.signal, true);
    } catch (e) {
      res.statusCode = 400;
      res.setHeader('content-type', 'text/plain');
      res.end(`Bad Request: ${e instanceof Error ? e.message : String(e)}`);
      return;
    }
    void callHandler(handler, request, options)
      .then((response) => writeResponse(req, res, response))
      .catch((e: unknown) => {
        if (!res.headersSent) {
          res.statusCode = 500;
          res.end();
        } else res.destroy(e instanceof Error ? e : undefined);
      });
  };
}

// ------------------------------------------------------------------ upgrades

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad Request',
  401: 'Unauthorized',
  403: 'Forbidden',
  404: 'Not Found',
  426: 'Upgrade Required',
  500: 'Internal Server Error',
  502: 'Bad Gateway',
};

/** Writes `response` as the refusal of an upgrade (HTTP/1.1 on the raw socket), then ends it. */
async function refuseUpgrade(socket: Duplex, response: Response): Promise<void> {
  let body: Uint8Array;
  try {
    body = new Uint8Array(await response.arrayBuffer());
  } catch {
    body = new Uint8Array();
  }
  const lines = [`HTTP/1.1 ${response.status} ${response.statusText || STATUS_TEXT[response.status] || 'Error'}`];
  response.headers.forEach((value, name) => {
    if (name === 'set-cookie' || name === 'content-length' || HOP.has(name)) return;
    lines.push(`${name}: ${value}`);
  });
  for (const c of setCookies(response.headers)) lines.push(`set-cookie: ${c}`);
  lines.push(`content-length: ${body.byteLength}`, 'connection: close', '', '');
  if (!socket.writable) return void socket.destroy();
  socket.write(lines.join('\r\n'));
  socket.end(body);
}

/** Handshake headers the relay writes itself, from the client's connection. */
const OWN = new Set(['host', 'connection', 'upgrade', 'sec-websocket-key', 'sec-websocket-version', 'content-length', 'transfer-encoding']);

function headerOk(name: string, value: string): boolean {
  return /^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name) && !/[\r\n\0]/.test(value);
}

/** The upgrade request sent to cellad for `target`, with the client's handshake. */
function upgradeHead(target: UpgradeTarget, req: IncomingMessage, u: URL): string {
  const lines = [`${req.method ?? 'GET'} ${u.pathname}${u.search} HTTP/1.1`, `Host: ${u.host}`];
  const have = new Set<string>();
  for (const [name, value] of Object.entries(target.headers)) {
    const n = name.toLowerCase();
    if (OWN.has(n) || !headerOk(name, value)) continue;
    have.add(n);
    lines.push(`${name}: ${value}`);
  }
  const client = (n: string): string | undefined => {
    const v = req.headers[n];
    return Array.isArray(v) ? v.join(', ') : v;
  };
  lines.push('Connection: Upgrade', `Upgrade: ${client('upgrade') ?? 'websocket'}`);
  for (const n of ['sec-websocket-key', 'sec-websocket-version', 'sec-websocket-protocol', 'sec-websocket-extensions']) {
    if (have.has(n)) continue;
    const v = client(n);
    if (v !== undefined && headerOk(n, v)) lines.push(`${n}: ${v}`);
  }
  lines.push('', '');
  return lines.join('\r\n');
}

/** Relays the client's upgraded socket to `target` (cellad) until either side ends. */
function relay(target: UpgradeTarget, req: IncomingMessage, socket: Duplex, head: Buffer, track: Set<Duplex>): void {
  let u: URL;
  try {
    u = new URL(target.url);
  } catch {
    void refuseUpgrade(socket, new Response('Bad Gateway: invalid upgrade target', { status: 502 }));
    return;
  }
  const secure = u.protocol === 'https:' || u.protocol === 'wss:';
  const host = u.hostname.replace(/^\[|\]$/g, '');
  const port = Number(u.port) || (secure ? 443 : 80);
  const upstream: Socket = secure ? tlsConnect({ host, port, servername: host }) : netConnect({ host, port });
  track.add(upstream);
  let received = false;
  let closed = false;
  const teardown = () => {
    if (closed) return;
    closed = true;
    track.delete(upstream);
    // Let what was written drain, then make sure both are gone.
    socket.end();
    upstream.end();
    setTimeout(() => {
      socket.destroy();
      upstream.destroy();
    }, 2000).unref();
  };
  upstream.setNoDelay(true);
  (socket as Socket).setNoDelay?.(true);
  upstream.write(upgradeHead(target, req, u));
  if (head.length > 0) upstream.write(head);
  upstream.once('data', () => (received = true));
  upstream.on('error', (e: Error) => {
    if (!received && !closed) {
      closed = true;
      track.delete(upstream);
      upstream.destroy();
      void refuseUpgrade(
        socket,
        new Response(JSON.stringify({ code: 'BAD_GATEWAY', message: `cannot reach cellad at ${u.host}: ${e.message}`, httpStatus: 502 }), {
          status: 502,
          headers: { 'content-type': 'application/json' },
        }),
      );
      return;
    }
    teardown();
  });
  socket.on('error', teardown);
  upstream.on('close', teardown);
  socket.on('close', teardown);
  upstream.pipe(socket);
  socket.pipe(upstream);
}

/**
 * An `upgrade` listener for an existing `http.Server`: the handler's answer to the upgrade
 * request is relayed (an upgrade marker) or written as the refusal.
 */
export function toNodeUpgradeListener<Env>(
  handler: FetchHandler<Env>,
  options: ListenerOptions<Env>,
  track: Set<Duplex> = new Set(),
): (req: IncomingMessage, socket: Duplex, head: Buffer) => void {
  return (req, socket, head) => {
    track.add(socket);
    socket.on('close', () => track.delete(socket));
    socket.on('error', () => socket.destroy());
    let request: Request;
    try {
      request = toRequest(req, undefined, false);
    } catch (e) {
      void refuseUpgrade(socket, new Response(`Bad Request: ${e instanceof Error ? e.message : String(e)}`, { status: 400 }));
      return;
    }
    void callHandler(handler, request, options).then((response) => {
      if (socket.destroyed) return;
      const target = getUpgradeTarget(response);
      if (target) {
        void response.body?.cancel().catch(() => undefined);
        relay(target, req, socket, head, track);
      } else void refuseUpgrade(socket, response);
    });
  };
}

/**
 * Serves `handler` (`{ fetch(request, env, ctx) }`) on Node's http server with `env`;
 * resolves once listening. Default 127.0.0.1 on an ephemeral port.
 */
export async function serve<Env>(handler: FetchHandler<Env>, options: ServeOptions<Env>): Promise<ServeHandle> {
  if (!handler || typeof handler.fetch !== 'function') throw new TypeError('serve(handler): handler.fetch must be a function');
  const hostname = options.hostname ?? '127.0.0.1';
  const track = new Set<Duplex>();
  const server = createServer(toNodeListener(handler, options));
  server.on('upgrade', toNodeUpgradeListener(handler, options, track));
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, hostname, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const addr = server.address();
  const port = typeof addr === 'object' && addr ? addr.port : (options.port ?? 0);
  const shown = hostname.includes(':') ? `[${hostname}]` : hostname;
  return {
    server,
    url: `http://${shown}:${port}`,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        for (const s of track) s.destroy();
        track.clear();
        (server as Server & { closeAllConnections?: () => void }).closeAllConnections?.();
      }),
  };
}
