/**
 * WebSockets to ports of a sandbox, both ways round:
 *
 * - In a server (the hosted SDK's `wsConnect`, `terminal`, and `proxyToSandbox` for an upgrade
 *   request): the handler answers a Response that stands for "relay this upgrade to cellad".
 *   A fetch-style handler cannot answer a 101 in Node (`new Response(null, {status: 101})`
 *   throws, and fetch performs no upgrades), so the Response is an ordinary 426 that carries
 *   the upstream target (cellad's URL and the headers to send) under a symbol. `serve()` of
 *   `@cella/sandbox/node` recognises it on an HTTP upgrade and relays the raw sockets; a
 *   server that does not know it answers the 426 and its JSON, which says why.
 * - As a client (`sandbox.connectWebSocket`, `openTerminal`): a WebSocket opened to cellad's
 *   `/ws/{port}` or `/pty` route with the platform's WebSocket, or the `ws` package where the
 *   platform has none (Node 18/20).
 *
 * Only web-standard APIs here; the Node relay lives in node.ts.
 */
import type { SandboxCore } from './core.js';
import {
  InvalidPortError,
  NotSupportedError,
  clientError,
  createSandboxError,
  errorResponseFrom,
} from './errors.js';
import { transportError } from './transport.js';

// ------------------------------------------------------------------ the upgrade marker

/**
 * The property under which an upgrade Response carries its `UpgradeTarget`. A registered
 * symbol, so that two copies of the SDK in one process (a bundle and node_modules)
 * understand each other's Responses.
 */
export const UPGRADE: unique symbol = Symbol.for('@cella/sandbox.upgrade');

/** Where an upgrade is relayed to: what `serve()` connects to and sends. */
export interface UpgradeTarget {
  /** What the upgrade reaches: a sandbox port through cellad's `/ws/{port}` route, a
   * terminal (`/pty`), or a preview URL (through cellad's preview proxy). */
  readonly kind: 'ws' | 'pty' | 'preview';
  /** cellad's URL for the upgrade request: `http(s)://host:port/path?query`. */
  readonly url: string;
  /**
   * The request headers to send besides the handshake's own (`Host`, `Connection`,
   * `Upgrade`, `Sec-WebSocket-Key`, `Sec-WebSocket-Version`, which the relay takes from the
   * client's connection). For `ws` and `pty` it holds the API's bearer token: never hand a
   * target to code you do not trust.
   */
  readonly headers: Readonly<Record<string, string>>;
}

/** The JSON a marker Response answers where nothing relays it. */
const NOT_RELAYED =
  'This Response stands for a WebSocket upgrade relayed to cella; the server that received it ' +
  "did not relay it. In Node serve the handler with serve() or toNodeListener() from '@cella/sandbox/node', " +
  'which relay upgrades. Bun (server.upgrade) and Deno (Deno.upgradeWebSocket) are not covered yet.';

/**
 * A Response that stands for "relay this upgrade to `target`": status 426 with a JSON body
 * saying that the server did not relay it, and the target under `UPGRADE` (not enumerable).
 */
export function upgradeResponse(target: UpgradeTarget): Response {
  const body = JSON.stringify({
    code: 'UPGRADE_NOT_RELAYED',
    message: NOT_RELAYED,
    context: { kind: target.kind },
    httpStatus: 426,
    timestamp: new Date().toISOString(),
  });
  const res = new Response(body, {
    status: 426,
    headers: { 'content-type': 'application/json', upgrade: 'websocket', connection: 'Upgrade' },
  });
  Object.defineProperty(res, UPGRADE, { value: Object.freeze({ ...target }), enumerable: false });
  return res;
}

/** The upgrade target a Response carries (`wsConnect`, `terminal`, `proxyToSandbox`), or null. */
export function getUpgradeTarget(response: Response): UpgradeTarget | null {
  if (!response || typeof response !== 'object') return null;
  const t = (response as unknown as Record<symbol, unknown>)[UPGRADE];
  if (!t || typeof t !== 'object') return null;
  const o = t as Partial<UpgradeTarget>;
  if (typeof o.url !== 'string' || typeof o.headers !== 'object' || o.headers === null) return null;
  return o as UpgradeTarget;
}

/** Whether a request asks for a WebSocket upgrade (`Upgrade: websocket`). */
export function isWebSocketUpgrade(request: Request): boolean {
  return (request.headers.get('upgrade') ?? '').toLowerCase().split(/\s*,\s*/).includes('websocket');
}

/** Headers that belong to one hop (RFC 9110 7.6.1) or to the handshake itself. */
const HOP = new Set([
  'connection',
  'keep-alive',
  'proxy-connection',
  'proxy-authenticate',
  'proxy-authorization',
  'te',
  'trailer',
  'transfer-encoding',
  'upgrade',
  'host',
  'content-length',
  'expect',
]);

/** The request's headers a relay passes on: not the hop-by-hop ones, nor those named in `Connection`, nor `drop`. */
export function forwardHeaders(headers: Headers, drop: readonly string[] = []): Record<string, string> {
  const named = new Set(
    (headers.get('connection') ?? '')
      .split(',')
      .map((s) => s.trim().toLowerCase())
      .filter(Boolean),
  );
  const out: Record<string, string> = {};
  headers.forEach((value, name) => {
    const n = name.toLowerCase();
    if (HOP.has(n) || named.has(n) || drop.includes(n)) return;
    out[n] = value;
  });
  return out;
}

/** 426 for a request that is not a WebSocket upgrade (what `wsConnect`/`terminal` answer it). */
export function notAnUpgrade(what: string): Response {
  return new Response(
    JSON.stringify({
      code: 'BAD_REQUEST',
      message: `${what} expects a WebSocket upgrade request (Upgrade: websocket)`,
      context: {},
      httpStatus: 426,
      timestamp: new Date().toISOString(),
    }),
    { status: 426, headers: { 'content-type': 'application/json', upgrade: 'websocket', connection: 'Upgrade' } },
  );
}

// ------------------------------------------------------------------ wsConnect

export function checkPort(port: unknown): asserts port is number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1024 || port > 65535 || port === 3000)
    throw clientError(InvalidPortError, 'INVALID_PORT', 400, `invalid port ${String(port)}: 1024-65535, not 3000`, {
      port,
    });
}

/**
 * The hosted `sandbox.wsConnect(request, port)`: relays the WebSocket upgrade `request` to
 * `port` in the sandbox, through cellad's `/ws/{port}` route with the request's path and
 * query. Answers the upgrade marker (see `upgradeResponse`); a request that is not an
 * upgrade gets 426.
 */
export async function wsConnect(core: SandboxCore, request: Request, port: number): Promise<Response> {
  checkPort(port);
  if (!isWebSocketUpgrade(request)) return notAnUpgrade('wsConnect');
  await core.ready();
  const u = new URL(request.url);
  const path = core.path('ws', String(port)) + (u.pathname === '/' ? '' : u.pathname) + u.search;
  // Origin: cellad refuses a request whose Origin is not its own host (the API's
  // cross-site guard); the app that calls wsConnect has vouched for the client.
  const headers = core.t.headers(forwardHeaders(request.headers, ['origin', 'authorization']));
  return upgradeResponse({ kind: 'ws', url: core.t.url(path), headers });
}

// ------------------------------------------------------------------ client WebSockets

/** Options of `sandbox.connectWebSocket`. */
export interface ConnectWebSocketOptions {
  /** The path (and query) on the sandbox's server; default `/`. */
  path?: string;
  /** WebSocket subprotocols to offer. */
  protocols?: string | string[];
}

type WsInit = { protocols?: string | string[]; headers?: Record<string, string> };
type NativeCtor = new (url: string, protocols?: string | string[] | WsInit) => WebSocket;

/** What the `ws` package's WebSocket is, as far as it is used here. */
interface NodeWs {
  binaryType: string;
  emit(event: string | symbol, ...args: unknown[]): boolean;
  on(event: 'unexpected-response', cb: (req: unknown, res: NodeIncoming) => void): unknown;
  terminate(): void;
}
interface NodeIncoming {
  statusCode?: number;
  on(event: 'data', cb: (chunk: Uint8Array) => void): unknown;
  on(event: 'end' | 'error', cb: () => void): unknown;
}
type NodeWsCtor = new (url: string, protocols: string | string[] | undefined, options: { headers: Record<string, string> }) => NodeWs;

function isServerRuntime(): boolean {
  const g = globalThis as { process?: { versions?: { node?: string } }; Bun?: unknown; Deno?: unknown };
  return !!g.process?.versions?.node || g.Bun !== undefined || g.Deno !== undefined;
}

let wsModule: Promise<NodeWsCtor> | undefined;
function loadWs(): Promise<NodeWsCtor> {
  wsModule ??= import('ws').then((m) => {
    const mod = m as unknown as { default?: unknown; WebSocket?: unknown };
    return (mod.WebSocket ?? mod.default) as NodeWsCtor;
  });
  return wsModule;
}

/** http(s)://… → ws(s)://… */
function wsUrl(httpUrl: string): string {
  return httpUrl.replace(/^http/, 'ws');
}

/**
 * Opens a WebSocket to cellad (`path` with `query` under its base URL) with the API's
 * headers, and resolves once it is open. An error answer to the upgrade (401, 404 ...)
 * rejects with the error of its code where the platform lets the answer be read (the `ws`
 * package); otherwise with an `RPCTransportError`.
 */
export async function openApiWebSocket(
  core: SandboxCore,
  path: string,
  query: Record<string, string | number | undefined>,
  protocols: string | string[] | undefined,
  operation: string,
): Promise<WebSocket> {
  const url = wsUrl(core.t.url(path, query));
  const headers = core.t.headers();
  const needHeaders = Object.keys(headers).length > 0;
  const Native = (globalThis as { WebSocket?: NativeCtor }).WebSocket;
  let ws: WebSocket;
  let failed: Promise<Error> | undefined;
  let nodeWs: NodeWs | undefined;
  if (typeof Native === 'function') {
    if (!needHeaders) ws = protocols === undefined ? new Native(url) : new Native(url, protocols);
    else if (isServerRuntime()) {
      const init: WsInit = { headers };
      if (protocols !== undefined) init.protocols = protocols;
      ws = new Native(url, init);
    } else
      throw clientError(
        NotSupportedError,
        'NOT_SUPPORTED',
        501,
        "a browser's WebSocket cannot send the API token (Authorization): connect to a cellad without a token " +
          '(loopback), or expose the port and open its preview URL',
        { operation },
        { operation },
      );
  } else {
    const Ws = await loadWs();
    const nws = new Ws(url, protocols, { headers });
    nodeWs = nws;
    nws.on('unexpected-response', (_req, res) => {
      failed = new Promise<Error>((resolve) => {
        const chunks: Uint8Array[] = [];
        const done = () => {
          const text = new TextDecoder().decode(concat(chunks));
          let body: unknown = text;
          try {
            body = JSON.parse(text);
          } catch {
            /* text */
          }
          resolve(createSandboxError(errorResponseFrom(res.statusCode ?? 502, body, operation)));
          nws.terminate();
        };
        res.on('data', (c) => chunks.push(c));
        res.on('end', done);
        res.on('error', done);
      });
    });
    ws = nws as unknown as WebSocket;
  }
  ws.binaryType = 'arraybuffer';
  const hold = holdAfterOpen(ws, nodeWs);
  await new Promise<void>((resolve, reject) => {
    const cleanup = () => {
      ws.removeEventListener('open', onOpen);
      ws.removeEventListener('error', onError);
      ws.removeEventListener('close', onError);
    };
    const onOpen = () => {
      cleanup();
      hold.start();
      resolve();
      // After the caller's continuation (which adds its listeners) has run.
      setTimeout(hold.release, 0);
    };
    const onError = (ev: Event) => {
      cleanup();
      const fallback = transportError(
        'upgrade_failed',
        `the WebSocket to ${url.replace(/\?.*/, '')} failed to open${describeEvent(ev)}`,
        undefined,
        operation,
      );
      // the `ws` package: an error answer to the upgrade, read before the socket closes
      if (failed) void failed.then(reject);
      else reject(fallback);
    };
    ws.addEventListener('open', onOpen);
    ws.addEventListener('error', onError);
    ws.addEventListener('close', onError);
  });
  return ws;
}

/**
 * Messages can come with the 101 itself, in the same tick as 'open', before the caller of an
 * `await`ed open can add a listener. Between 'open' and `release()` (a task later) the
 * message, close and error events are held back and then delivered in order.
 */
function holdAfterOpen(ws: WebSocket, node: NodeWs | undefined): { start(): void; release(): void } {
  const kinds = ['message', 'close', 'error'];
  let holding = false;
  if (node) {
    const orig = node.emit;
    const held: Array<[string | symbol, unknown[]]> = [];
    node.emit = function (this: NodeWs, event: string | symbol, ...args: unknown[]): boolean {
      if (holding && typeof event === 'string' && kinds.includes(event)) {
        held.push([event, args]);
        return true;
      }
      return orig.call(this, event, ...args);
    };
    return {
      start: () => {
        holding = true;
      },
      release: () => {
        holding = false;
        node.emit = orig;
        for (const [event, args] of held.splice(0)) orig.call(node, event, ...args);
      },
    };
  }
  const held: Event[] = [];
  const grab = (ev: Event) => {
    if (!holding) return;
    ev.stopImmediatePropagation();
    held.push(ev);
  };
  return {
    start: () => {
      holding = true;
      for (const k of kinds) ws.addEventListener(k, grab);
    },
    release: () => {
      holding = false;
      for (const k of kinds) ws.removeEventListener(k, grab);
      for (const ev of held.splice(0)) ws.dispatchEvent(copyEvent(ev));
    },
  };
}

function copyEvent(ev: Event): Event {
  if (ev.type === 'message') return new MessageEvent('message', { data: (ev as MessageEvent).data });
  if (ev.type === 'close') {
    const c = ev as CloseEvent;
    const init = { code: c.code, reason: c.reason, wasClean: c.wasClean };
    const Close = (globalThis as { CloseEvent?: typeof CloseEvent }).CloseEvent;
    if (typeof Close === 'function') return new Close('close', init);
    return Object.assign(new Event('close'), init);
  }
  return new Event(ev.type);
}

function describeEvent(ev: Event): string {
  const m = (ev as { message?: unknown; error?: { message?: unknown } }).message ?? (ev as { error?: { message?: unknown } }).error?.message;
  return typeof m === 'string' && m ? `: ${m}` : '';
}

export function concat(chunks: Uint8Array[]): Uint8Array {
  let n = 0;
  for (const c of chunks) n += c.byteLength;
  const out = new Uint8Array(n);
  let o = 0;
  for (const c of chunks) {
    out.set(c, o);
    o += c.byteLength;
  }
  return out;
}

/**
 * cella: a WebSocket to `port` in the sandbox through cellad's `/ws/{port}` route, resolved
 * once open. Binary messages arrive as ArrayBuffer. In a browser it works only with a cellad
 * without a token (a browser's WebSocket cannot send Authorization); expose the port and
 * use its preview URL instead.
 */
export async function connectWebSocket(
  core: SandboxCore,
  port: number,
  options: ConnectWebSocketOptions = {},
): Promise<WebSocket> {
  checkPort(port);
  await core.ready();
  let path = options.path ?? '/';
  if (!path.startsWith('/')) path = `/${path}`;
  const q = path.indexOf('?');
  const pathname = q < 0 ? path : path.slice(0, q);
  const search = q < 0 ? '' : path.slice(q);
  // The path is the sandbox server's, sent as it is (already URL-encoded by the caller).
  const full = core.path('ws', String(port)) + (pathname === '/' ? '' : pathname) + search;
  return openApiWebSocket(core, full, {}, options.protocols, 'port.websocket');
}
