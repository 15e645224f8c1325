/**
 * A web app with a WebSocket, served from a sandbox through preview URLs: the hosted
 * @cloudflare/sandbox pattern of an app that exposes a sandbox's port on its own host.
 *
 *   GET /start   writes a small Node web app (an HTML page + a WebSocket echo) into the
 *                sandbox, starts it, exposes port 8080 on this server's host and answers
 *                {url}: the preview URL, http://8080-preview-demo-<token>.<this host>/
 *   /ws          a WebSocket to the same app, through this Worker (wsConnect)
 *
 * Requests for the preview URL come back to this Worker, whose first move is
 * proxyToSandbox. The hosted code line for line; only the package name and the type of
 * `env.Sandbox` differ (README.md has the diff). main.ts runs it on Node.
 */
import { getSandbox, proxyToSandbox, type CellaNamespace } from '@cella/sandbox';

export { Sandbox } from '@cella/sandbox';

export type Env = {
  Sandbox: CellaNamespace;
};

const APP_PORT = 8080;

// The app in the sandbox: Node with no packages (the page, and RFC 6455 by hand).
const APP = String.raw`
const http = require('http');
const crypto = require('crypto');

const PAGE = '<!doctype html><meta charset="utf-8"><title>Sandbox app</title>' +
  '<h1>Hello from the sandbox</h1><p id="status">connecting...</p>' +
  '<input id="msg" value="hello"> <button id="send">send</button><pre id="log"></pre>' +
  '<script>' +
  'const ws = new WebSocket(location.origin.replace(/^http/, "ws") + "/echo");' +
  'const log = (s) => { document.getElementById("log").textContent += s + "\\n"; };' +
  'ws.onopen = () => { document.getElementById("status").textContent = "connected"; };' +
  'ws.onmessage = (e) => log("< " + e.data);' +
  'document.getElementById("send").onclick = () => {' +
  '  const v = document.getElementById("msg").value; log("> " + v); ws.send(v); };' +
  '</script>';

function frame(op, payload) {
  const n = payload.length;
  const head = n < 126 ? Buffer.from([0x80 | op, n])
    : n < 65536 ? Buffer.from([0x80 | op, 126, n >> 8, n & 255])
    : Buffer.concat([Buffer.from([0x80 | op, 127]), (() => { const b = Buffer.alloc(8); b.writeBigUInt64BE(BigInt(n)); return b; })()]);
  return Buffer.concat([head, payload]);
}

const server = http.createServer((req, res) => {
  res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
  res.end(PAGE);
});

server.on('upgrade', (req, socket) => {
  const accept = crypto.createHash('sha1')
    .update(req.headers['sec-websocket-key'] + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  socket.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Accept: ' + accept + '\r\n\r\n');
  let buf = Buffer.alloc(0);
  socket.on('data', (data) => {
    buf = Buffer.concat([buf, data]);
    while (buf.length >= 2) {
      const op = buf[0] & 15;
      let len = buf[1] & 127, off = 2;
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
      if (buf.length < off + 4 + len) return;
      const mask = buf.subarray(off, off + 4);
      const msg = Buffer.from(buf.subarray(off + 4, off + 4 + len));
      for (let i = 0; i < msg.length; i++) msg[i] ^= mask[i & 3];
      buf = buf.subarray(off + 4 + len);
      if (op === 8) return socket.end(frame(8, Buffer.alloc(0)));
      if (op === 9) socket.write(frame(10, msg));
      if (op === 1) socket.write(frame(1, Buffer.from('echo: ' + msg.toString())));
      if (op === 2) socket.write(frame(2, msg));
    }
  });
  socket.on('error', () => {});
});

server.listen(8080, () => console.log('app listening on 8080'));
`;

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // Preview URLs first: {port}-{id}-{token}.<this host> belongs to the sandbox's app.
    const proxyResponse = await proxyToSandbox(request, env);
    if (proxyResponse) return proxyResponse;

    const url = new URL(request.url);
    const sandbox = getSandbox(env.Sandbox, 'preview-demo');

    // A WebSocket to the app in the sandbox, through this Worker.
    if (url.pathname === '/ws') {
      if (request.headers.get('Upgrade')?.toLowerCase() !== 'websocket') {
        return new Response('Expected a WebSocket upgrade', { status: 426 });
      }
      return sandbox.wsConnect(request, APP_PORT);
    }

    // Start the app (once) and answer its preview URL on this server's host.
    if (url.pathname === '/start') {
      const processes = await sandbox.listProcesses();
      if (!processes.some((p) => p.command === 'node /workspace/app.js' && p.status === 'running')) {
        await sandbox.writeFile('/workspace/app.js', APP);
        const app = await sandbox.startProcess('node /workspace/app.js');
        await app.waitForPort(APP_PORT);
      }
      const { url: previewUrl } = await sandbox.exposePort(APP_PORT, { hostname: url.host });
      return Response.json({ url: previewUrl });
    }

    return new Response('Try /start, then open the preview URL it answers (or a WebSocket to /ws)');
  },
};
