/**
 * The buffered-request engine for Node: node:http(s) with keep-alive agents. `fetch`
 * (undici) costs about 0.3 ms more per request than node:http on a loopback round trip,
 * which is the whole budget of a fast `exec`; streams and raw bodies still go through
 * `fetch`. Loaded only on Node (transport.ts checks `process.versions.node`), through a
 * specifier bundlers leave alone, so browser builds never see node:http.
 */
import type { BufferedEngine, BufferedAnswer } from './transport.js';

interface NodeHttpModule {
  Agent: new (o: { keepAlive: boolean; maxSockets?: number; keepAliveMsecs?: number }) => unknown;
  request: (
    url: string,
    options: Record<string, unknown>,
    cb: (res: NodeIncoming) => void,
  ) => NodeClientRequest;
}
interface NodeIncoming {
  statusCode?: number;
  headers: Record<string, string | string[] | undefined>;
  setEncoding(e: string): void;
  on(ev: 'data', cb: (chunk: string) => void): void;
  on(ev: 'end' | 'aborted', cb: () => void): void;
  on(ev: 'error', cb: (e: Error) => void): void;
}
interface NodeClientRequest {
  reusedSocket?: boolean;
  on(ev: 'error', cb: (e: Error & { code?: string }) => void): void;
  end(body?: string): void;
  destroy(e?: Error): void;
}

export async function loadNodeEngine(): Promise<BufferedEngine> {
  const httpName = 'node:http';
  const httpsName = 'node:https';
  const http = (await import(/* @vite-ignore */ httpName)) as NodeHttpModule;
  const https = (await import(/* @vite-ignore */ httpsName)) as NodeHttpModule;
  const agents = {
    'http:': new http.Agent({ keepAlive: true, keepAliveMsecs: 1000 }),
    'https:': new https.Agent({ keepAlive: true, keepAliveMsecs: 1000 }),
  };

  function once(
    method: string,
    url: string,
    headers: Record<string, string>,
    body: string | undefined,
    signal: AbortSignal | undefined,
  ): Promise<BufferedAnswer & { retry?: boolean }> {
    return new Promise((resolve, reject) => {
      const u = new URL(url);
      const mod = u.protocol === 'https:' ? https : http;
      const h: Record<string, string | number> = { ...headers };
      if (body !== undefined) h['content-length'] = Buffer.byteLength(body);
      const options: Record<string, unknown> = {
        method,
        headers: h,
        agent: agents[u.protocol as 'http:' | 'https:'],
      };
      if (signal) options.signal = signal;
      let got = false;
      const req = mod.request(url, options, (res) => {
        got = true;
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c) => {
          text += c;
        });
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: flat(res.headers), text }));
        res.on('aborted', () => reject(Object.assign(new Error('the answer was cut short'), { code: 'ECONNRESET' })));
        res.on('error', reject);
      });
      req.on('error', (e) => {
        // A kept-alive socket the server closed meanwhile: nothing was answered, so the
        // request was not processed; one more try on a new connection.
        if (!got && req.reusedSocket && (e.code === 'ECONNRESET' || e.code === 'EPIPE'))
          resolve({ status: 0, headers: {}, text: '', retry: true });
        else reject(e);
      });
      req.end(body);
    });
  }

  return async (method, url, headers, body, signal) => {
    const r = await once(method, url, headers, body, signal);
    if (!r.retry) return r;
    return once(method, url, headers, body, signal);
  };
}

function flat(h: Record<string, string | string[] | undefined>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(h)) if (v !== undefined) out[k] = Array.isArray(v) ? v.join(', ') : v;
  return out;
}

/** An answer whose body is read as it comes: node:http's IncomingMessage, whose
 * `rawTrailers` hold the trailer lines once it ended (fetch does not expose trailers). */
export interface NodeStreamedAnswer {
  statusCode?: number;
  headers: Record<string, string | string[] | undefined>;
  rawTrailers: string[];
  complete: boolean;
  pause(): void;
  resume(): void;
  destroy(e?: Error): void;
  on(ev: 'data', cb: (chunk: Uint8Array) => void): void;
  on(ev: 'end' | 'aborted' | 'close', cb: () => void): void;
  on(ev: 'error', cb: (e: Error) => void): void;
}
/** Sends one request with a text body and answers its open answer (or the request's error). */
export type StreamedEngine = (
  method: string,
  url: string,
  headers: Record<string, string>,
  body: string,
  signal: AbortSignal | undefined,
) => Promise<{ res: NodeStreamedAnswer; destroy: (e?: Error) => void }>;

/** The most header and trailer bytes accepted in one streamed answer. */
const STREAMED_HEADER_MAX = 256 * 1024;

/** node:http(s) for answers read as they come, with their own keep-alive agents. */
export async function loadNodeStreamed(): Promise<StreamedEngine> {
  const httpName = 'node:http';
  const httpsName = 'node:https';
  const http = (await import(/* @vite-ignore */ httpName)) as NodeHttpModule;
  const https = (await import(/* @vite-ignore */ httpsName)) as NodeHttpModule;
  const agents = {
    'http:': new http.Agent({ keepAlive: true, keepAliveMsecs: 1000 }),
    'https:': new https.Agent({ keepAlive: true, keepAliveMsecs: 1000 }),
  };
  return (method, url, headers, body, signal) =>
    new Promise((resolve, reject) => {
      const u = new URL(url);
      const mod = u.protocol === 'https:' ? https : http;
      const options: Record<string, unknown> = {
        method,
        headers: { ...headers, 'content-length': Buffer.byteLength(body) },
        agent: agents[u.protocol as 'http:' | 'https:'],
        // Node's parser counts trailers against the header limit (16 KiB by default);
        // the raw exec form's stderr trailer lines may add up to about 90 KiB.
        maxHeaderSize: STREAMED_HEADER_MAX,
      };
      if (signal) options.signal = signal;
      const req = mod.request(url, options, (res) => {
        resolve({ res: res as unknown as NodeStreamedAnswer, destroy: (e) => req.destroy(e) });
      });
      req.on('error', reject);
      req.end(body);
    });
}
