// The console's client of cellad's HTTP API (docs/api.md): same origin, the bearer token
// from sessionStorage (never a URL), every error as the API's {code, message}.
const TOKEN_KEY = 'cella.token';

export class ApiError extends Error {
  constructor(
    public code: string,
    message: string,
    public status: number,
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

export function getToken(): string | null {
  return sessionStorage.getItem(TOKEN_KEY);
}

export function setToken(token: string | null): void {
  if (token) sessionStorage.setItem(TOKEN_KEY, token);
  else sessionStorage.removeItem(TOKEN_KEY);
}

function authHeaders(extra?: Record<string, string>, token = getToken()): Record<string, string> {
  const h: Record<string, string> = { ...(extra ?? {}) };
  if (token) h['Authorization'] = `Bearer ${token}`;
  return h;
}

/** The API's error of a failed answer (its JSON {code, message}), or one made from the status. */
async function errorOf(res: Response): Promise<ApiError> {
  const text = await res.text().catch(() => '');
  try {
    const j = JSON.parse(text) as { code?: string; message?: string };
    if (j && typeof j.code === 'string')
      return new ApiError(j.code, j.message ?? '', res.status);
  } catch {
    /* not JSON */
  }
  return new ApiError(`HTTP_${res.status}`, text.slice(0, 300) || res.statusText, res.status);
}

function networkError(e: unknown): ApiError {
  return new ApiError('NETWORK_ERROR', `cannot reach cellad: ${String((e as Error)?.message ?? e)}`, 0);
}

export interface RequestOptions {
  body?: unknown;
  raw?: BodyInit;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  token?: string | null;
}

/** A request whose answer is returned as is when it is 2xx; else the API's error thrown. */
export async function request(method: string, path: string, o: RequestOptions = {}): Promise<Response> {
  const headers = authHeaders(o.headers, o.token === undefined ? getToken() : o.token);
  let body: BodyInit | undefined = o.raw;
  if (o.body !== undefined) {
    headers['Content-Type'] = 'application/json';
    body = JSON.stringify(o.body);
  }
  let res: Response;
  try {
    res = await fetch(path, { method, headers, body, signal: o.signal, credentials: 'omit' });
  } catch (e) {
    if ((e as Error)?.name === 'AbortError') throw e;
    throw networkError(e);
  }
  if (!res.ok) throw await errorOf(res);
  return res;
}

export async function api<T>(method: string, path: string, o: RequestOptions = {}): Promise<T> {
  const res = await request(method, path, o);
  const text = await res.text();
  return (text ? JSON.parse(text) : {}) as T;
}

/** A POST/GET answered with SSE: each `data:` event parsed as JSON, as it comes. */
export async function* sse(
  method: string,
  path: string,
  o: RequestOptions = {},
): AsyncGenerator<Record<string, unknown>> {
  const res = await request(method, path, {
    ...o,
    headers: { ...(o.headers ?? {}), Accept: 'text/event-stream' },
  });
  if (!res.body) return;
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value;
    let i: number;
    while ((i = buf.indexOf('\n\n')) >= 0) {
      const block = buf.slice(0, i);
      buf = buf.slice(i + 2);
      const data = block
        .split('\n')
        .filter((l) => l.startsWith('data:'))
        .map((l) => l.slice(5).replace(/^ /, ''))
        .join('\n');
      if (!data) continue;
      try {
        yield JSON.parse(data) as Record<string, unknown>;
      } catch {
        yield { type: 'text', text: data };
      }
    }
  }
}

/** A body sent with XMLHttpRequest, for its upload progress (fetch has none). */
export function upload(
  method: string,
  path: string,
  body: Blob,
  onProgress: (loaded: number, total: number) => void,
): Promise<unknown> {
  return new Promise((resolve, reject) => {
    const x = new XMLHttpRequest();
    x.open(method, path);
    const t = getToken();
    if (t) x.setRequestHeader('Authorization', `Bearer ${t}`);
    x.setRequestHeader('Content-Type', 'application/octet-stream');
    x.upload.onprogress = (e) => onProgress(e.loaded, e.lengthComputable ? e.total : body.size);
    x.onerror = () => reject(new ApiError('NETWORK_ERROR', 'the upload failed (connection lost)', 0));
    x.onload = () => {
      let j: { code?: string; message?: string } | null = null;
      try {
        j = JSON.parse(x.responseText);
      } catch {
        /* not JSON */
      }
      if (x.status >= 200 && x.status < 300) resolve(j);
      else if (j?.code) reject(new ApiError(j.code, j.message ?? '', x.status));
      else reject(new ApiError(`HTTP_${x.status}`, x.responseText.slice(0, 300), x.status));
    };
    x.send(body);
  });
}

/** The token as a WebSocket subprotocol element (docs/api.md "Auth"): base64url, no padding. */
export function bearerProtocol(token: string): string {
  const bytes = new TextEncoder().encode(token);
  let bin = '';
  for (const b of bytes) bin += String.fromCharCode(b);
  return 'cella.bearer.' + btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
}

export function sbxPath(id: string, rest = ''): string {
  return `/v1/sandboxes/${encodeURIComponent(id)}${rest}`;
}

export function q(params: Record<string, string | number | boolean | undefined>): string {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) u.set(k, String(v));
  const s = u.toString();
  return s ? `?${s}` : '';
}

// ---- shapes of docs/api.md ----
/** The sandbox as GET /v1/sandboxes/{id} answers it: the TypeScript SDK's own type (a wire
 * shape, no conversions), so the two clients cannot drift apart. */
export type { SandboxInfo } from '../../sdk/typescript/src/types.js';
export interface FileInfo {
  name: string;
  absolutePath: string;
  type: 'file' | 'directory' | 'symlink' | 'other';
  size: number;
  modifiedAt: string;
}
export interface ProcessInfo {
  id: string;
  pid: number;
  command: string;
  status: string;
  startTime: string;
  exitCode?: number;
}
export interface PortInfo {
  url: string;
  port: number;
  name?: string;
  status?: string;
}
export interface ImageInfo {
  name: string;
  createdAt: string;
  source: string;
  sizeBytes?: number;
  packages?: string[];
}
export interface Snapshot {
  snapshotId: string;
  name?: string;
  sandbox: string;
  image: string;
  sizeBytes: number;
  createdAt: string;
  method?: string;
}
export interface SessionInfo {
  id: string;
}
