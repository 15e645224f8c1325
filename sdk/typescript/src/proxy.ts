/**
 * `proxyToSandbox(request, env)`: the hosted Worker helper that answers requests for preview
 * URLs (`{port}-{id}-{token}.{host}`) and returns null for every other request, so that an
 * app can serve its own routes and the sandboxes' ports from one server:
 *
 *     const r = await proxyToSandbox(request, env);
 *     if (r) return r;
 *     // ... the app's routes
 *
 * cella's preview proxy is in cellad (docs/api.md, "Exposed ports and preview URLs"): this
 * forwards the request to cellad (forward.ts) with the preview host in `X-Forwarded-Host`.
 * A WebSocket upgrade answers the upgrade marker (websocket.ts).
 */
import { CellaNamespace } from './sandbox.js';
import { errorAnswer, forwardToPreview } from './forward.js';
import type { Transport } from './transport.js';
import { forwardHeaders, isWebSocketUpgrade, upgradeResponse } from './websocket.js';

/** The parts of a preview host `{port}-{id}-{token}.{domain}[:port]`. */
export interface PreviewHost {
  port: number;
  /** The sandbox id, lower case. */
  id: string;
  token: string;
  /** What follows the first label (without the port). */
  domain: string;
  /** The first label, lower case: `{port}-{id}-{token}`. */
  label: string;
}

const ID_RE = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const TOKEN_RE = /^[a-z0-9_]{1,16}$/;

/**
 * Parses a preview host (`Host` header form: with or without `:port`), or null when it is
 * not one. The port is 4–5 digits (1024–65535, not 3000); the id holds `-`, so the token
 * is what follows the last `-` of the first label.
 */
export function parsePreviewHost(host: string): PreviewHost | null {
  if (typeof host !== 'string' || host === '' || host.startsWith('[')) return null;
  const name = host.replace(/:\d+$/, '').replace(/\.$/, '').toLowerCase();
  const dot = name.indexOf('.');
  if (dot <= 0 || dot === name.length - 1) return null;
  const label = name.slice(0, dot);
  const domain = name.slice(dot + 1);
  const m = /^(\d{4,5})-(.+)-([^-]+)$/.exec(label);
  if (!m) return null;
  const port = Number(m[1]);
  const id = m[2] ?? '';
  const token = m[3] ?? '';
  if (m[1]?.startsWith('0') || port < 1024 || port > 65535 || port === 3000) return null;
  if (!ID_RE.test(id) || !TOKEN_RE.test(token)) return null;
  return { port, id, token, domain, label };
}

/** What `proxyToSandbox` takes as `env`: the hosted `{ Sandbox: ns }`, or the namespace. */
export type ProxyEnv = { Sandbox: CellaNamespace } | CellaNamespace;

/** cella's options of `proxyToSandbox`. */
export interface ProxyToSandboxOptions {
  /**
   * cellad's preview domain (its `--preview-domain`, default `localhost`). cellad answers a
   * forwarded preview host only on its own domain, so a request for another host (your
   * server's, given to `exposePort({hostname})`) is forwarded as `{port}-{id}-{token}.{domain}`.
   * Default: learned from cellad once per connection (the sandbox's exposed ports).
   */
  previewDomain?: string;
}

function namespaceOf(env: ProxyEnv): CellaNamespace {
  if (env instanceof CellaNamespace) return env;
  const ns = (env as { Sandbox?: unknown } | null | undefined)?.Sandbox;
  if (ns instanceof CellaNamespace) return ns;
  throw new TypeError('proxyToSandbox(request, env): env must be { Sandbox: connect({ url, token }) } or the namespace itself');
}

/** cellad's preview domain per connection, once learned. */
const domains = new WeakMap<Transport, string>();

/**
 * cellad's preview domain: from the sandbox's exposed ports (their URLs are on it). Null when
 * the sandbox has none or cannot be asked: its preview URLs cannot be valid then.
 */
async function learnDomain(t: Transport, id: string): Promise<string | null> {
  const known = domains.get(t);
  if (known) return known;
  try {
    const r = await t.json<{ ports?: Array<{ url?: string }> }>('GET', t.sandboxPath(id, 'ports'), {
      operation: 'port.list',
    });
    for (const p of r.ports ?? []) {
      if (typeof p.url !== 'string') continue;
      const parsed = parsePreviewHost(new URL(p.url).host);
      if (parsed) {
        domains.set(t, parsed.domain);
        return parsed.domain;
      }
    }
  } catch {
    /* not found, unreachable: unknown */
  }
  return null;
}

function invalidToken(): Response {
  return errorAnswer(404, 'INVALID_TOKEN', 'no such preview URL');
}

/**
 * The hosted `proxyToSandbox(request, env)`: for a request to a preview host, cellad's
 * answer for it; null for any other request. `env` is `{ Sandbox: connect(...) }` (the
 * hosted shape) or the namespace.
 */
export async function proxyToSandbox(
  request: Request,
  env: ProxyEnv,
  options: ProxyToSandboxOptions = {},
): Promise<Response | null> {
  let host = request.headers.get('host');
  if (!host) {
    try {
      host = new URL(request.url).host;
    } catch {
      return null;
    }
  }
  const target = parsePreviewHost(host);
  if (!target) return null;
  const t = namespaceOf(env).transport;

  // The host cellad sees (X-Forwarded-Host) must be a preview host on its own domain, or
  // cellad would take the request for an API request: never forward it otherwise.
  const domain = options.previewDomain?.toLowerCase().replace(/^\.+|\.+$/g, '') || (await learnDomain(t, target.id));
  if (!domain) return invalidToken();
  const forwardedHost = target.domain === domain ? host.toLowerCase() : `${target.label}.${domain}`;

  const url = new URL(request.url);

  if (isWebSocketUpgrade(request)) {
    const headers = forwardHeaders(request.headers, ['x-forwarded-host']);
    headers['x-forwarded-host'] = forwardedHost;
    return upgradeResponse({ kind: 'preview', url: t.baseUrl + url.pathname + url.search, headers });
  }

  return forwardToPreview(t, request, url.pathname + url.search, forwardedHost);
}
