/**
 * Forwarding an HTTP request to a port of a sandbox through cellad's preview proxy
 * (docs/api.md, "Exposed ports and preview URLs"): the request goes to cellad's base URL
 * with `X-Forwarded-Host` naming the preview host (fetch cannot set `Host`), without the
 * API token — the token in the preview host is the capability, and cellad checks it. The
 * answer (status, headers, every Set-Cookie, streamed body) is cellad's: the sandbox app's,
 * or cellad's 404 INVALID_TOKEN / 410 STALE_PREVIEW_URL / 502. Used by `proxyToSandbox`
 * and `containerFetch`.
 */
import type { Transport } from './transport.js';
import { forwardHeaders } from './websocket.js';

/** Encodings fetch decodes by itself: its Response keeps the header, not the encoding. */
const DECODED = new Set(['gzip', 'x-gzip', 'deflate', 'br', 'zstd']);

/** A JSON error answer in cellad's shape, made here (cellad could not be asked). */
export function errorAnswer(status: number, code: string, message: string): Response {
  return new Response(
    JSON.stringify({ code, message, context: {}, httpStatus: status, timestamp: new Date().toISOString() }),
    { status, headers: { 'content-type': 'application/json' } },
  );
}

/**
 * Sends `request` (its method, headers, body) to cellad at `pathAndQuery` with
 * `X-Forwarded-Host: forwardedHost` (a preview host on cellad's preview domain), with the
 * connection's fetch but none of its headers. cellad unreachable: a 502 `BAD_GATEWAY`.
 */
export async function forwardToPreview(
  t: Transport,
  request: Request,
  pathAndQuery: string,
  forwardedHost: string,
): Promise<Response> {
  const headers = new Headers();
  for (const [name, value] of Object.entries(forwardHeaders(request.headers, ['x-forwarded-host']))) headers.set(name, value);
  // A streamed body needs its length for apps that read Content-Length (fetch would chunk it).
  const length = request.headers.get('content-length');
  if (length !== null && /^\d+$/.test(length)) headers.set('content-length', length);
  headers.set('x-forwarded-host', forwardedHost);

  const init: RequestInit & { duplex?: 'half' } = {
    method: request.method,
    headers,
    redirect: 'manual',
    signal: request.signal,
  };
  if (request.body && request.method !== 'GET' && request.method !== 'HEAD') {
    init.body = request.body;
    init.duplex = 'half';
  }
  let res: Response;
  try {
    res = await t.rawFetch(t.baseUrl + pathAndQuery, init);
  } catch (e) {
    if (request.signal?.aborted) throw e;
    return errorAnswer(502, 'BAD_GATEWAY', `cannot reach cellad at ${t.baseUrl}: ${e instanceof Error ? e.message : String(e)}`);
  }
  const enc = (res.headers.get('content-encoding') ?? '').toLowerCase().trim();
  if (enc === '' || !DECODED.has(enc) || res.body === null) return res;
  // fetch decoded the body: answer it without the encoding it no longer has.
  const out = new Headers(res.headers);
  out.delete('content-encoding');
  out.delete('content-length');
  return new Response(res.body, { status: res.status, statusText: res.statusText, headers: out });
}
