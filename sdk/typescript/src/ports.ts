/**
 * Exposed ports and preview URLs. cellad builds preview URLs on its own preview domain
 * (`http://{port}-{id}-{token}.{domain}:{port}/`); with `hostname` the SDK builds them on
 * the host given instead, for a server of the user's that forwards preview requests to
 * cellad with `proxyToSandbox`.
 */
import type { SandboxCore } from './core.js';
import { InvalidPortError, PortNotExposedError, clientError } from './errors.js';
import { forwardToPreview } from './forward.js';
import type { ExposedPort, ExposePortOptions } from './types.js';
import { compact } from './util.js';
import { isWebSocketUpgrade, wsConnect } from './websocket.js';

function checkPort(port: unknown): asserts port is number {
  if (typeof port !== 'number' || !Number.isInteger(port) || port < 1024 || port > 65535 || port === 3000)
    throw clientError(InvalidPortError, 'INVALID_PORT', 400, `invalid port ${String(port)}: 1024-65535, not 3000`, {
      port,
    });
}

/** The token of a preview URL (`{port}-{id}-{token}.` in its host). */
export function previewToken(url: string, port: number, id: string): string | null {
  let host: string;
  try {
    host = new URL(url).hostname;
  } catch {
    return null;
  }
  const prefix = `${port}-${id}-`;
  if (!host.startsWith(prefix)) return null;
  const dot = host.indexOf('.', prefix.length);
  return dot < 0 ? null : host.slice(prefix.length, dot);
}

function isLocalHost(h: string): boolean {
  const name = h.replace(/:\d+$/, '');
  return name === 'localhost' || name.endsWith('.localhost') || /^127\./.test(name) || name === '[::1]';
}

/** The preview URL of `port` on `hostname` (`host[:port]`): http for local hosts, else https. */
export function previewUrl(hostname: string, port: number, id: string, token: string): string {
  const scheme = isLocalHost(hostname) ? 'http' : 'https';
  return `${scheme}://${port}-${id}-${token}.${hostname}/`;
}

function onHost(url: string, port: number, id: string, hostname?: string): string {
  if (!hostname) return url;
  const token = previewToken(url, port, id);
  return token ? previewUrl(hostname, port, id, token) : url;
}

export async function exposePort(
  core: SandboxCore,
  port: number,
  options: ExposePortOptions = {},
): Promise<{ url: string; port: number; name: string | undefined }> {
  checkPort(port);
  await core.ready();
  const r = await core.t.json<{ url: string; port: number; name?: string }>('POST', core.path('ports'), {
    json: compact({ port, name: options.name, token: options.token }),
    operation: 'port.expose',
  });
  return { url: onHost(r.url, port, core.id, options.hostname), port: r.port, name: r.name || undefined };
}

export async function unexposePort(core: SandboxCore, port: number): Promise<void> {
  checkPort(port);
  await core.ready();
  await core.t.json('DELETE', core.path('ports', String(port)), { operation: 'port.unexpose' });
}

export async function getExposedPorts(core: SandboxCore, hostname?: string): Promise<ExposedPort[]> {
  const r = await core.t.json<{ ports: Array<{ url: string; port: number; name?: string; status: string }> }>(
    'GET',
    core.path('ports'),
    { operation: 'port.list' },
  );
  return r.ports.map((p) => {
    const e: ExposedPort = { url: onHost(p.url, p.port, core.id, hostname), port: p.port, status: p.status };
    if (p.name) e.name = p.name;
    return e;
  });
}

/** Whether `port` is exposed and its preview URL works: listed as `active`. A `stale` port
 * (the sandbox restarted since it was exposed; its URL answers 410) does not count. */
export async function isPortExposed(core: SandboxCore, port: number): Promise<boolean> {
  const list = await getExposedPorts(core);
  return list.some((p) => p.port === port && p.status === 'active');
}

/** Constant-time comparison of two short strings. */
function sameToken(a: string, b: string): boolean {
  let diff = a.length ^ b.length;
  for (let i = 0; i < Math.max(a.length, b.length); i++) diff |= (a.charCodeAt(i) | 0) ^ (b.charCodeAt(i) | 0);
  return diff === 0;
}

export async function validatePortToken(core: SandboxCore, port: number, token: string): Promise<boolean> {
  const list = await getExposedPorts(core);
  const p = list.find((e) => e.port === port);
  if (!p) return false;
  const t = previewToken(p.url, port, core.id);
  return t !== null && typeof token === 'string' && sameToken(t, token);
}

/**
 * `containerFetch(request, port)`: `request` answered by the app on `port` inside the
 * sandbox, through cellad's preview proxy. The port must be exposed; it is exposed again
 * first (same token and name), which wakes a sleeping sandbox and renews a stale URL. A
 * WebSocket upgrade is `wsConnect`.
 */
export async function containerFetch(core: SandboxCore, request: Request, port: number | undefined): Promise<Response> {
  if (port === undefined)
    throw clientError(InvalidPortError, 'INVALID_PORT', 400, 'containerFetch needs a port: cella has no default port', {
      port,
    });
  checkPort(port);
  if (isWebSocketUpgrade(request)) return wsConnect(core, request, port);
  await core.ready();
  const listed = (await getExposedPorts(core)).some((p) => p.port === port);
  if (!listed)
    throw clientError(
      PortNotExposedError,
      'PORT_NOT_EXPOSED',
      404,
      `port ${port} is not exposed: containerFetch reaches a port through its preview URL`,
      { port },
      { operation: 'port.fetch', suggestion: `expose it first: exposePort(${port})` },
    );
  const r = await core.t.json<{ url: string }>('POST', core.path('ports'), {
    json: { port },
    operation: 'port.expose',
    signal: request.signal,
  });
  const u = new URL(request.url);
  return forwardToPreview(core.t, request, u.pathname + u.search, new URL(r.url).host);
}
