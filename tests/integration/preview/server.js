// Test server run inside a sandbox by test-preview.sh: echo (with the headers as received:
// raw is req.rawHeaders, name/value pairs, duplicates kept), an answer with N headers of
// its own (/headers?n=N), streamed and SSE responses, a redirect with two cookies, a WebSocket echo (hand-written upgrade; its 101 carries the
// upgrade request's raw headers as JSON in X-Seen), and a page that talks to it. Listens on
// 127.0.0.1:PORT in the sandbox's network namespace.
const http = require('http');
const crypto = require('crypto');
const port = +process.argv[2];
let release = null;
// /hold?id=X answers once a WebSocket message "...|X" was echoed: the page's load event
// (which --dump-dom waits for) comes after its WebSocket exchange.
const seen = new Set();
const holds = new Map();

const page = `<!doctype html><html><head><title>preview</title></head><body>
<p id="out">waiting</p>
<script>
const id = String(Math.random()).slice(2);
const ws = new WebSocket('ws://' + location.host + '/ws');
ws.onopen = () => ws.send('hello from the page|' + id);
ws.onmessage = (e) => { document.getElementById('out').textContent = 'echo:' + e.data.split('|')[0]; };
ws.onerror = () => { document.getElementById('out').textContent = 'ws error'; };
document.write('<img style="display:none" src="/hold?id=' + id + '">');
</script></body></html>`;

const srv = http.createServer((req, res) => {
  if (req.url.startsWith('/echo')) {
    const chunks = [];
    req.on('data', (c) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks);
      res.setHeader('Content-Type', 'application/json');
      res.end(JSON.stringify({method: req.method, url: req.url, headers: req.headers,
        raw: req.rawHeaders, length: body.length,
        sha: crypto.createHash('sha256').update(body).digest('hex')}));
    });
  } else if (req.url.startsWith('/headers?n=')) {
    // n header lines of its own, beside Node's few (Date, Content-Length, Connection...)
    const n = +req.url.slice(11);
    for (let i = 0; i < n; i++) res.setHeader('X-H' + i, String(i));
    res.setHeader('Content-Type', 'text/plain');
    res.end('headers');
  } else if (req.url === '/redirect') {
    res.writeHead(307, {'Location': '/echo?from=redirect',
      'Set-Cookie': ['a=1; Path=/', 'b=2; Path=/; HttpOnly']});
    res.end();
  } else if (req.url === '/stream') {
    res.writeHead(200, {'Content-Type': 'text/plain'});
    let i = 0;
    const t = setInterval(() => { res.write('line ' + i + '\n'); if (++i === 5) { clearInterval(t); res.end(); } }, 10);
  } else if (req.url === '/sse') {
    res.writeHead(200, {'Content-Type': 'text/event-stream', 'Cache-Control': 'no-cache'});
    res.write('data: first\n\n');
    release = () => { res.write('data: second\n\n'); res.end(); };
  } else if (req.url === '/release') {
    if (release) release();
    release = null;
    res.end('released');
  } else if (req.url === '/page') {
    res.setHeader('Content-Type', 'text/html');
    res.end(page);
  } else if (req.url.startsWith('/hold?id=')) {
    const id = req.url.slice(9);
    const done = () => { res.setHeader('Content-Type', 'image/gif'); res.end(); };
    if (seen.has(id)) done(); else holds.set(id, done);
  } else {
    res.statusCode = 404;
    res.end('not found');
  }
});

function frame(op, payload) {
  const n = payload.length;
  let head;
  if (n < 126) head = Buffer.from([0x80 | op, n]);
  else if (n < 65536) { head = Buffer.alloc(4); head[0] = 0x80 | op; head[1] = 126; head.writeUInt16BE(n, 2); }
  else { head = Buffer.alloc(10); head[0] = 0x80 | op; head[1] = 127; head.writeBigUInt64BE(BigInt(n), 2); }
  return Buffer.concat([head, payload]);
}

srv.on('upgrade', (req, sock, head) => {
  const key = req.headers['sec-websocket-key'];
  const accept = crypto.createHash('sha1').update(key + '258EAFA5-E914-47DA-95CA-C5AB0DC85B11').digest('base64');
  sock.write('HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n' +
    'Sec-WebSocket-Accept: ' + accept + '\r\nX-Path: ' + req.url + '\r\n' +
    'X-Seen: ' + JSON.stringify(req.rawHeaders) + '\r\n\r\n');
  let buf = head;
  const onData = (d) => {
    buf = Buffer.concat([buf, d]);
    for (;;) {
      if (buf.length < 2) return;
      const op = buf[0] & 0x0f;
      let len = buf[1] & 0x7f, off = 2;
      if (len === 126) { if (buf.length < 4) return; len = buf.readUInt16BE(2); off = 4; }
      else if (len === 127) { if (buf.length < 10) return; len = Number(buf.readBigUInt64BE(2)); off = 10; }
      const masked = buf[1] & 0x80;
      const need = off + (masked ? 4 : 0) + len;
      if (buf.length < need) return;
      const mask = masked ? buf.slice(off, off + 4) : null;
      const p = Buffer.from(buf.slice(off + (masked ? 4 : 0), need));
      if (mask) for (let i = 0; i < p.length; i++) p[i] ^= mask[i & 3];
      buf = buf.slice(need);
      if (op === 8) { sock.end(frame(8, Buffer.alloc(0))); return; }
      if (op === 1 || op === 2) {
        sock.write(frame(op, p));
        const text = p.toString();
        const bar = text.lastIndexOf('|');
        if (bar >= 0) {
          const id = text.slice(bar + 1);
          seen.add(id);
          if (holds.has(id)) { holds.get(id)(); holds.delete(id); }
        }
      }
    }
  };
  sock.on('data', onData);
  sock.on('error', () => {});
});

srv.listen(port, '127.0.0.1', () => console.log('listening'));
