// Helpers of the proxy, terminal and examples suites: the apps they run in a sandbox (an
// HTTP echo app in python3, a WebSocket echo server in node, both stdlib only), a raw HTTP
// client that can set Host (fetch cannot), and a WebSocket client (the `ws` package) with a
// message queue.
import { request as httpRequest } from 'node:http';
import WebSocket from 'ws';
import { env } from './harness.js';

/** `{ skip }` for daemon tests: a reason when CELLA_URL is unset. */
export const skip: string | false = env.available ? false : 'CELLA_URL is not set';

/** The connect() options of the harness's daemon. */
export function daemon(): { url: string; token?: string } {
  return env.token ? { url: env.url, token: env.token } : { url: env.url };
}

/**
 * python3: answers every request with JSON `{method, path, headers, body}` and two
 * Set-Cookie headers; `/redirect` answers 302 to `/target`, `/gzip` a gzip-encoded text.
 */
export const ECHO_APP = String.raw`
import gzip, http.server, json, sys

class H(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def go(self):
        n = int(self.headers.get('Content-Length') or 0)
        body = self.rfile.read(n) if n else b''
        if self.path == '/gzip':
            out = gzip.compress(b'compressed hello')
            self.send_response(200)
            self.send_header('Content-Type', 'text/plain')
            self.send_header('Content-Encoding', 'gzip')
            self.send_header('Content-Length', str(len(out)))
            self.end_headers()
            self.wfile.write(out)
            return
        if self.path == '/redirect':
            self.send_response(302)
            self.send_header('Location', '/target')
            self.send_header('Content-Length', '0')
            self.end_headers()
            return
        out = json.dumps({
            'method': self.command,
            'path': self.path,
            'headers': {k.lower(): v for k, v in self.headers.items()},
            'bodyLength': len(body),
            'body': body[:4096].decode('utf-8', 'replace'),
        }).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(out)))
        self.send_header('Set-Cookie', 'a=1; Path=/')
        self.send_header('Set-Cookie', 'b=2; Path=/; HttpOnly')
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(out)

    do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = go

    def log_message(self, *a):
        pass

port = int(sys.argv[1]) if len(sys.argv) > 1 else 8000
print('listening', port, flush=True)
http.server.ThreadingHTTPServer(('0.0.0.0', port), H).serve_forever()
`;

/**
 * node (no packages): an RFC 6455 echo server. Its first message (text) is JSON
 * `{hello, path, host, authorization, xForwardedHost, origin}`; then each text or binary
 * message comes back as it came. Plain HTTP requests get 'ws echo server'.
 */
export const WS_ECHO_APP = String.raw`
const http = require('http');
const crypto = require('crypto');
const port = Number(process.argv[2] || 8001);

function frame(op, payload) {
  const n = payload.length;
  let head;
  if (n < 126) head = Buffer.from([0x80 | op, n]);
  else if (n < 65536) { head = Buffer.alloc(4); head[0] = 0x80 | op; head[1] = 126; head.writeUInt16BE(n, 2); }
  else { head = Buffer.alloc(10); head[0] = 0x80 | op; head[1] = 127; head.writeBigUInt64BE(BigInt(n), 2); }
  return Buffer.concat([head, payload]);
}

const server = http.createServer((req, res) => res.end('ws echo server\n'));
server.on('upgrade', (req, sock) => {
  const key = req.headers['sec-websocket-key'];
  const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  sock.write(frame(1, Buffer.from(JSON.stringify({
    hello: true,
    path: req.url,
    host: req.headers.host || null,
    authorization: req.headers.authorization || null,
    xForwardedHost: req.headers['x-forwarded-host'] || null,
    origin: req.headers.origin || null,
    cookie: req.headers.cookie || null,
  }))));
  let buf = Buffer.alloc(0);
  sock.on('data', (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (buf.length < 2) return;
      const op = buf[0] & 0x0f;
      let len = buf[1] & 0x7f;
      let off = 2;
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
      const masked = (buf[1] & 0x80) !== 0;
      const mask = masked ? buf.subarray(off, off + 4) : null;
      if (masked) off += 4;
      if (buf.length < off + len) return;
      const payload = Buffer.from(buf.subarray(off, off + len));
      buf = buf.subarray(off + len);
      if (mask) for (let i = 0; i < payload.length; i++) payload[i] ^= mask[i & 3];
      if (op === 8) { sock.end(frame(8, payload.subarray(0, 2))); return; }
      if (op === 9) { sock.write(frame(10, payload)); continue; }
      if (op === 1 || op === 2) sock.write(frame(op, payload));
    }
  });
  sock.on('error', () => {});
});
server.listen(port, '0.0.0.0', () => console.log('listening ' + port));
`;

export interface RawAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  text: string;
}

/** An HTTP request to 127.0.0.1:`port` with any Host header (fetch cannot set Host). */
export function rawRequest(
  port: number,
  opts: { method?: string; path?: string; host?: string; headers?: Record<string, string>; body?: string | Uint8Array } = {},
): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { ...(opts.headers ?? {}) };
    if (opts.host) headers.host = opts.host;
    if (opts.body !== undefined) headers['content-length'] = Buffer.byteLength(opts.body);
    const req = httpRequest(
      { host: '127.0.0.1', port, method: opts.method ?? 'GET', path: opts.path ?? '/', headers, agent: false },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, text: Buffer.concat(chunks).toString('utf8') }));
        res.on('error', reject);
      },
    );
    req.on('error', reject);
    req.end(opts.body);
  });
}

export interface WsMessage {
  data: Buffer;
  isBinary: boolean;
  text: string;
}

/** A `ws` client with a queue of messages: `next()` resolves with the next one. */
export class WsClient {
  readonly ws: WebSocket;
  #queue: WsMessage[] = [];
  #waiters: Array<(m: WsMessage | null) => void> = [];
  #closed = false;

  private constructor(ws: WebSocket) {
    this.ws = ws;
    ws.on('message', (data: Buffer | ArrayBuffer | Buffer[], isBinary: boolean) => {
      const b = Buffer.isBuffer(data) ? data : Array.isArray(data) ? Buffer.concat(data) : Buffer.from(data);
      const m = { data: b, isBinary, text: b.toString('utf8') };
      const w = this.#waiters.shift();
      if (w) w(m);
      else this.#queue.push(m);
    });
    ws.on('close', () => {
      this.#closed = true;
      for (const w of this.#waiters.splice(0)) w(null);
    });
  }

  /** Opens `url` with `headers` (Host among them); rejects with the status of a refused upgrade. */
  static open(url: string, headers: Record<string, string> = {}, protocols?: string[]): Promise<WsClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, protocols, { headers });
      const c = new WsClient(ws);
      ws.once('open', () => resolve(c));
      ws.once('unexpected-response', (_req, res) => {
        const chunks: Buffer[] = [];
        res.on('data', (d: Buffer) => chunks.push(d));
        res.on('end', () => {
          const err = Object.assign(new Error(`upgrade refused: ${res.statusCode} ${Buffer.concat(chunks).toString()}`), {
            status: res.statusCode,
            body: Buffer.concat(chunks).toString(),
          });
          reject(err);
          ws.terminate();
        });
      });
      ws.once('error', reject);
    });
  }

  /** The next message; rejects after `timeout` ms or when the connection closed. */
  next(timeout = 15_000): Promise<WsMessage> {
    const m = this.#queue.shift();
    if (m) return Promise.resolve(m);
    if (this.#closed) return Promise.reject(new Error('the WebSocket is closed'));
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.#waiters = this.#waiters.filter((w) => w !== got);
        reject(new Error(`no WebSocket message within ${timeout} ms`));
      }, timeout);
      const got = (msg: WsMessage | null) => {
        clearTimeout(t);
        if (msg) resolve(msg);
        else reject(new Error('the WebSocket closed'));
      };
      this.#waiters.push(got);
    });
  }

  /** Messages until one whose text matches `pattern` (binary frames' text included). */
  async until(pattern: RegExp | string, timeout = 15_000): Promise<string> {
    const deadline = Date.now() + timeout;
    let seen = '';
    for (;;) {
      const m = await this.next(Math.max(1, deadline - Date.now()));
      seen += m.text;
      if (typeof pattern === 'string' ? seen.includes(pattern) : pattern.test(seen)) return seen;
    }
  }

  send(data: string | Buffer, binary = typeof data !== 'string'): void {
    this.ws.send(data, { binary });
  }

  close(): Promise<void> {
    return new Promise((resolve) => {
      if (this.#closed) return resolve();
      this.ws.once('close', () => resolve());
      this.ws.close(1000);
      setTimeout(() => {
        this.ws.terminate();
        resolve();
      }, 3000).unref();
    });
  }
}
