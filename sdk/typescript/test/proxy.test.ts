// Preview URLs through an app of one's own (hosted SDK §7): proxyToSandbox in a Node
// serve() app forwards preview requests to cellad (bodies, headers, every Set-Cookie,
// errors passed through, no API token), wsConnect and connectWebSocket reach a WebSocket
// server in the sandbox, and the upgrade marker is a sensible answer on its own.
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { env, sandboxName } from './harness.js';
import {
  connect,
  getSandbox,
  getUpgradeTarget,
  InvalidPortError,
  parsePreviewHost,
  proxyToSandbox,
  type CellaNamespace,
  type Sandbox,
} from '../src/index.js';
import { serve, type ServeHandle } from '../src/node.js';
import { ECHO_APP, WS_ECHO_APP, WsClient, daemon, rawRequest, skip } from './ws-helpers.js';

describe('parsePreviewHost', () => {
  test('port first, token after the last -, ids with -', () => {
    assert.deepEqual(parsePreviewHost('8080-my-box-abc_1.localhost:7070'), {
      port: 8080,
      id: 'my-box',
      token: 'abc_1',
      domain: 'localhost',
      label: '8080-my-box-abc_1',
    });
    assert.deepEqual(parsePreviewHost('65535-A-B-C-Tok.Example.COM'), {
      port: 65535,
      id: 'a-b-c',
      token: 'tok',
      domain: 'example.com',
      label: '65535-a-b-c-tok',
    });
    assert.equal(parsePreviewHost('8080-box-t.localhost.')?.domain, 'localhost');
  });
  test('not preview hosts', () => {
    for (const h of [
      '',
      'localhost:8787',
      '127.0.0.1:8787',
      '[::1]:8787',
      '8080-box.localhost', // no token
      '80-box-t.localhost', // port < 1024 (3 digits)
      '3000-box-t.localhost', // the platform's port
      '0808-box-t.localhost',
      '123456-box-t.localhost',
      '70000-box-t.localhost',
      '8080--box-t.localhost', // id starts with -
      '8080-box--t.localhost', // id ends with -
      '8080-box-t!.localhost',
      '8080-box-12345678901234567.localhost', // token > 16
      `8080-${'a'.repeat(64)}-t.localhost`,
      '8080-box-t', // no domain
      'www.example.com',
    ])
      assert.equal(parsePreviewHost(h), null, h);
  });
});

describe('upgrade markers without a daemon', () => {
  const ns = connect({ url: 'http://127.0.0.1:9', token: 'secret-token' });
  const sandbox = getSandbox(ns, 'marker-box');
  const upgrade = (url: string, extra: Record<string, string> = {}) =>
    new Request(url, {
      headers: {
        upgrade: 'websocket',
        connection: 'Upgrade',
        'sec-websocket-key': 'dGhlIHNhbXBsZSBub25jZQ==',
        'sec-websocket-version': '13',
        origin: 'http://app.example',
        ...extra,
      },
    });

  test('wsConnect answers 426 JSON carrying the target', async () => {
    const r = await sandbox.wsConnect(upgrade('http://app.example/chat/room?x=1'), 8080);
    assert.equal(r.status, 426);
    const body = (await r.json()) as { code: string; message: string };
    assert.equal(body.code, 'UPGRADE_NOT_RELAYED');
    assert.match(body.message, /@cella\/sandbox\/node/);
    const t = getUpgradeTarget(r);
    assert.ok(t);
    assert.equal(t.kind, 'ws');
    assert.equal(t.url, 'http://127.0.0.1:9/v1/sandboxes/marker-box/ws/8080/chat/room?x=1');
    assert.equal(t.headers['authorization'], 'Bearer secret-token');
    assert.equal(t.headers['origin'], undefined, 'Origin would trip cellad cross-site guard');
    assert.equal(t.headers['sec-websocket-key'], 'dGhlIHNhbXBsZSBub25jZQ==');
    assert.equal(t.headers['upgrade'], undefined);
    // not enumerable: JSON and spreading do not show it
    assert.equal(Object.keys(r).length, 0);
    assert.equal(getUpgradeTarget(new Response('x')), null);
  });

  test('wsConnect: port validation, and a request that is not an upgrade', async () => {
    for (const p of [80, 1023, 3000, 65536, 8080.5])
      await assert.rejects(sandbox.wsConnect(upgrade('http://a/'), p), InvalidPortError);
    const r = await sandbox.wsConnect(new Request('http://a/'), 8080);
    assert.equal(r.status, 426);
    assert.equal(getUpgradeTarget(r), null);
  });

  test('terminal: target /pty with the session, cols and rows', async () => {
    const r = await sandbox.terminal(upgrade('http://app.example/term'), { cols: 120, rows: 40, shell: 'zsh' });
    const t = getUpgradeTarget(r);
    assert.ok(t);
    assert.equal(t.kind, 'pty');
    assert.equal(t.url, 'http://127.0.0.1:9/v1/sandboxes/marker-box/pty?cols=120&rows=40');
    assert.equal(t.headers['authorization'], 'Bearer secret-token');
    await assert.rejects(sandbox.terminal(upgrade('http://a/'), { cols: 0 }), /cols/);
  });

  test('proxyToSandbox: a preview upgrade carries X-Forwarded-Host and no token', async () => {
    const r = await proxyToSandbox(
      upgrade('http://8080-marker-box-tok.localhost:8787/ws?a=1', { authorization: 'Basic app' }),
      { Sandbox: ns },
      { previewDomain: 'localhost' },
    );
    assert.ok(r);
    const t = getUpgradeTarget(r);
    assert.ok(t);
    assert.equal(t.kind, 'preview');
    assert.equal(t.url, 'http://127.0.0.1:9/ws?a=1');
    assert.equal(t.headers['x-forwarded-host'], '8080-marker-box-tok.localhost:8787');
    assert.notEqual(t.headers['authorization'], 'Bearer secret-token');
    assert.equal(t.headers['origin'], 'http://app.example');
    // another domain is forwarded on cellad's
    const o = await proxyToSandbox(upgrade('https://8080-marker-box-tok.apps.example.com/'), ns, { previewDomain: 'localhost' });
    assert.equal(getUpgradeTarget(o!)?.headers['x-forwarded-host'], '8080-marker-box-tok.localhost');
  });

  test('connectWebSocket and openTerminal: cellad unreachable is an RPCTransportError', async () => {
    const t0 = Date.now();
    await assert.rejects(sandbox.connectWebSocket(8080), (e: { code?: string }) => e.code === 'RPC_TRANSPORT_ERROR');
    await assert.rejects(sandbox.openTerminal(), (e: { code?: string }) => e.code === 'RPC_TRANSPORT_ERROR');
    assert.ok(Date.now() - t0 < 1500, 'failed fast');
  });

  test('proxyToSandbox: null for other hosts', async () => {
    assert.equal(await proxyToSandbox(new Request('http://localhost:8787/x'), { Sandbox: ns }), null);
    assert.equal(await proxyToSandbox(new Request('http://127.0.0.1:8787/x'), ns), null);
    assert.equal(await proxyToSandbox(new Request('http://3000-box-tok.localhost/x'), ns), null);
    await assert.rejects(proxyToSandbox(new Request('http://8080-a-b.localhost/'), {} as never), TypeError);
  });
});

describe('serve() without a daemon', () => {
  test('Request in (URL from Host, streamed body), Response out (Set-Cookies, streamed body)', async () => {
    let seen: { url: string; method: string; body: string; host: string | null } | undefined;
    const app = await serve(
      {
        async fetch(request: Request, e: { tag: string }): Promise<Response> {
          seen = { url: request.url, method: request.method, body: await request.text(), host: request.headers.get('host') };
          const enc = new TextEncoder();
          const body = new ReadableStream<Uint8Array>({
            start(c) {
              c.enqueue(enc.encode(`${e.tag}:`));
              c.enqueue(enc.encode('streamed'));
              c.close();
            },
          });
          const headers = new Headers({ 'content-type': 'text/plain', 'x-one': '1' });
          headers.append('set-cookie', 'a=1; Path=/');
          headers.append('set-cookie', 'b=2, c; Path=/x');
          return new Response(body, { status: 201, statusText: 'Made', headers });
        },
      },
      { env: { tag: 'env' } },
    );
    try {
      const port = Number(new URL(app.url).port);
      const r = await rawRequest(port, { method: 'POST', path: '/p/q?x=1', host: 'example.test:1234', body: 'ping' });
      assert.equal(r.status, 201);
      assert.equal(r.text, 'env:streamed');
      assert.deepEqual(r.headers['set-cookie'], ['a=1; Path=/', 'b=2, c; Path=/x']);
      assert.equal(r.headers['x-one'], '1');
      assert.deepEqual(seen, { url: 'http://example.test:1234/p/q?x=1', method: 'POST', body: 'ping', host: 'example.test:1234' });
      const h = await rawRequest(port, { method: 'HEAD', path: '/' });
      assert.equal(h.status, 201);
      assert.equal(h.text, '');
    } finally {
      await app.close();
    }
  });

  test('a client that goes away cancels the body; a throwing handler is a 500', async () => {
    let cancelled: (reason: unknown) => void = () => undefined;
    const gone = new Promise<unknown>((r) => (cancelled = r));
    const errors: unknown[] = [];
    const app = await serve(
      {
        fetch(request: Request): Response {
          if (new URL(request.url).pathname === '/throw') throw new Error('boom');
          let n = 0;
          return new Response(
            new ReadableStream<Uint8Array>({
              async pull(c) {
                await new Promise((r) => setTimeout(r, 10));
                c.enqueue(new TextEncoder().encode(`data: ${n++}\n\n`));
              },
              cancel(reason) {
                cancelled(reason ?? 'cancelled');
              },
            }),
            { headers: { 'content-type': 'text/event-stream' } },
          );
        },
      },
      { env: undefined, onError: (e) => errors.push(e) },
    );
    try {
      const ac = new AbortController();
      const res = await fetch(app.url + '/events', { signal: ac.signal });
      const reader = res.body!.getReader();
      const first = await reader.read();
      assert.match(new TextDecoder().decode(first.value), /data: 0/);
      ac.abort();
      let timer: ReturnType<typeof setTimeout> | undefined;
      await Promise.race([gone, new Promise((_, rej) => (timer = setTimeout(() => rej(new Error('the body was not cancelled')), 5000)))]);
      clearTimeout(timer);
      const t = await fetch(app.url + '/throw');
      assert.equal(t.status, 500);
      assert.equal(errors.length, 1);
    } finally {
      await app.close();
    }
  });

  test('an upgrade whose answer is not a marker is refused with that answer', async () => {
    const app = await serve({ fetch: () => new Response('no sockets here', { status: 403 }) }, { env: null });
    try {
      await assert.rejects(
        WsClient.open(app.url.replace('http', 'ws') + '/'),
        (e: { status?: number; body?: string }) => e.status === 403 && e.body === 'no sockets here',
      );
    } finally {
      await app.close();
    }
  });
});

describe('preview URLs, wsConnect and connectWebSocket against cellad', { skip, timeout: 180_000 }, () => {
  let ns: CellaNamespace;
  let sandbox: Sandbox;
  let app: ServeHandle;
  let appPort: number;
  let httpHost: string;
  let wsHost: string;
  const name = env.available ? sandboxName('proxy') : 'unused';

  before(async () => {
    ns = connect(daemon());
    sandbox = getSandbox(ns, name);
    await sandbox.destroy(); // a fresh one: no processes or ports of an earlier run
    await sandbox.writeFile('/workspace/echo.py', ECHO_APP);
    await sandbox.writeFile('/workspace/ws-echo.js', WS_ECHO_APP);
    const web = await sandbox.startProcess('python3 -u /workspace/echo.py 8000');
    const wsApp = await sandbox.startProcess('node /workspace/ws-echo.js 8001');
    await web.waitForPort(8000, { mode: 'tcp', timeout: 30_000 });
    await wsApp.waitForPort(8001, { mode: 'tcp', timeout: 30_000 });
    // The app: preview requests first, then its own routes.
    app = await serve(
      {
        async fetch(request: Request, e: { Sandbox: CellaNamespace }): Promise<Response> {
          const proxied = await proxyToSandbox(request, e);
          if (proxied) return proxied;
          const url = new URL(request.url);
          if (url.pathname.startsWith('/wsc')) return getSandbox(e.Sandbox, name).wsConnect(request, 8001);
          return new Response('app 404', { status: 404 });
        },
      },
      { env: { Sandbox: ns } },
    );
    appPort = Number(new URL(app.url).port);
    const a = await sandbox.exposePort(8000, { hostname: `localhost:${appPort}` });
    const b = await sandbox.exposePort(8001, { hostname: `localhost:${appPort}`, name: 'ws' });
    httpHost = new URL(a.url).host;
    wsHost = new URL(b.url).host;
  });

  after(async () => {
    await app?.close();
    await sandbox?.destroy().catch(() => undefined);
  });

  test('exposePort with hostname builds URLs on that host', async () => {
    assert.match(httpHost, new RegExp(`^8000-${name}-[a-z0-9_]{16}\\.localhost:${appPort}$`));
    const listed = await sandbox.getExposedPorts(`localhost:${appPort}`);
    assert.deepEqual(listed.map((p) => new URL(p.url).host).sort(), [httpHost, wsHost].sort());
    // cellad's own URL is on its preview domain and port
    const own = await sandbox.getExposedPorts();
    assert.ok(own.every((p) => new URL(p.url).hostname.endsWith('.localhost')));
  });

  test('GET through the preview host: path, query, headers, cookies; no API token', async () => {
    const r = await rawRequest(appPort, { path: '/a/b?c=1&d=%20', host: httpHost, headers: { 'x-test': 'yes', cookie: 'k=v' } });
    assert.equal(r.status, 200, r.text);
    const j = JSON.parse(r.text) as { method: string; path: string; headers: Record<string, string> };
    assert.equal(j.method, 'GET');
    assert.equal(j.path, '/a/b?c=1&d=%20');
    assert.equal(j.headers['x-test'], 'yes');
    assert.equal(j.headers['cookie'], 'k=v');
    assert.equal(j.headers['host'], httpHost, 'the app sees the preview host');
    assert.equal(j.headers['x-forwarded-host'], httpHost);
    assert.equal(j.headers['authorization'], undefined);
    if (env.token) assert.ok(!r.text.includes(env.token), 'the API token reached the app');
    assert.deepEqual(r.headers['set-cookie'], ['a=1; Path=/', 'b=2; Path=/; HttpOnly']);
    assert.equal(r.headers['content-type'], 'application/json');
  });

  test('POST body streamed through, redirects passed as they are, HEAD', async () => {
    const body = 'x'.repeat(300_000) + 'END';
    const r = await rawRequest(appPort, {
      method: 'POST',
      path: '/upload',
      host: httpHost,
      headers: { 'content-type': 'text/plain' },
      body,
    });
    assert.equal(r.status, 200, r.text);
    const j = JSON.parse(r.text) as { method: string; bodyLength: number; body: string; headers: Record<string, string> };
    assert.equal(j.method, 'POST');
    assert.equal(j.bodyLength, body.length);
    assert.equal(j.headers['content-type'], 'text/plain');
    const small = await rawRequest(appPort, { method: 'PUT', path: '/p', host: httpHost, body: 'hello body' });
    assert.equal((JSON.parse(small.text) as { body: string }).body, 'hello body');

    const red = await rawRequest(appPort, { path: '/redirect', host: httpHost });
    assert.equal(red.status, 302);
    assert.equal(red.headers['location'], '/target');

    // fetch decodes a gzip answer: it is passed on decoded, without Content-Encoding
    const gz = await rawRequest(appPort, { path: '/gzip', host: httpHost, headers: { 'accept-encoding': 'gzip' } });
    assert.equal(gz.status, 200);
    assert.equal(gz.text, 'compressed hello');
    assert.equal(gz.headers['content-encoding'], undefined);

    const head = await rawRequest(appPort, { method: 'HEAD', path: '/h', host: httpHost });
    assert.equal(head.status, 200);
    assert.equal(head.text, '');
  });

  test('a host that is not a preview host is the app\'s: proxyToSandbox answered null', async () => {
    const r = await rawRequest(appPort, { path: '/other', host: `localhost:${appPort}` });
    assert.equal(r.status, 404);
    assert.equal(r.text, 'app 404');
  });

  test('a wrong token or an unexposed port: cellad 404 INVALID_TOKEN passed through', async () => {
    for (const host of [`8000-${name}-wrongtoken.localhost:${appPort}`, `8002-${name}-${httpHost.split('.')[0]!.split('-').pop()}.localhost:${appPort}`]) {
      const r = await rawRequest(appPort, { path: '/', host });
      assert.equal(r.status, 404, host);
      assert.equal((JSON.parse(r.text) as { code: string }).code, 'INVALID_TOKEN');
    }
    // an unknown sandbox (its domain cannot be learned from it) gets the same answer
    const fresh = connect(daemon());
    const r = await proxyToSandbox(new Request(`http://8000-${name}-nope-tok.localhost:${appPort}/`), fresh);
    assert.ok(r);
    assert.equal(r.status, 404);
    assert.equal((JSON.parse(await r.text()) as { code: string }).code, 'INVALID_TOKEN');
  });

  test('WebSocket through the preview URL: serve() relays the upgrade', async () => {
    const c = await WsClient.open(`ws://127.0.0.1:${appPort}/chat?room=1`, { host: wsHost, origin: `http://${wsHost}` });
    const hello = JSON.parse((await c.next()).text) as Record<string, string | null>;
    assert.equal(hello['path'], '/chat?room=1');
    assert.equal(hello['host'], wsHost);
    assert.equal(hello['authorization'], null);
    assert.equal(hello['origin'], `http://${wsHost}`);
    c.send('ping text');
    assert.deepEqual(await c.next().then((m) => [m.text, m.isBinary]), ['ping text', false]);
    c.send(Buffer.from([0, 1, 2, 255]));
    const bin = await c.next();
    assert.ok(bin.isBinary);
    assert.deepEqual([...bin.data], [0, 1, 2, 255]);
    const big = 'y'.repeat(200_000);
    c.send(big);
    assert.equal((await c.next()).text.length, big.length);
    await c.close();
  });

  test('WebSocket to a wrong preview token: the upgrade is refused with 404', async () => {
    await assert.rejects(
      WsClient.open(`ws://127.0.0.1:${appPort}/`, { host: `8001-${name}-wrongtoken.localhost:${appPort}` }),
      (e: { status?: number; body?: string }) => e.status === 404 && /INVALID_TOKEN/.test(e.body ?? ''),
    );
  });

  test('wsConnect in a serve() handler', async () => {
    const c = await WsClient.open(`ws://127.0.0.1:${appPort}/wsc/deep/path?q=1`, { origin: 'http://somewhere.example', cookie: 'sid=1' });
    const hello = JSON.parse((await c.next()).text) as Record<string, string | null>;
    assert.equal(hello['path'], '/wsc/deep/path?q=1');
    assert.equal(hello['authorization'], null, 'cellad does not pass the API token on');
    assert.equal(hello['cookie'], 'sid=1');
    c.send('via wsConnect');
    assert.equal((await c.next()).text, 'via wsConnect');
    await c.close();
  });

  test('wsConnect to a port nothing listens on: the upgrade is refused (502)', async () => {
    const bad = await serve(
      { fetch: (req: Request) => getSandbox(ns, name).wsConnect(req, 8009) },
      { env: {} },
    );
    try {
      await assert.rejects(WsClient.open(bad.url.replace('http', 'ws') + '/'), (e: { status?: number }) => e.status === 502);
    } finally {
      await bad.close();
    }
  });

  test('connectWebSocket: a client WebSocket through cellad', async () => {
    const ws = await sandbox.connectWebSocket(8001, { path: '/direct?x=2' });
    const messages: Array<string | ArrayBuffer> = [];
    let wake: (() => void) | undefined;
    ws.addEventListener('message', (ev: MessageEvent) => {
      messages.push(ev.data as string | ArrayBuffer);
      wake?.();
    });
    const next = async (): Promise<string | ArrayBuffer> => {
      while (messages.length === 0) await new Promise<void>((r) => (wake = r));
      return messages.shift()!;
    };
    const hello = JSON.parse((await next()) as string) as Record<string, string | null>;
    assert.equal(hello['path'], '/direct?x=2');
    ws.send('direct');
    assert.equal(await next(), 'direct');
    ws.send(new Uint8Array([9, 8, 7]));
    const b = await next();
    assert.ok(b instanceof ArrayBuffer);
    assert.deepEqual([...new Uint8Array(b)], [9, 8, 7]);
    ws.close();
    // a port nothing listens on: rejected with cellad's error (the `ws` package lets the
    // answer be read; a platform WebSocket only says that it failed)
    const native = typeof (globalThis as { WebSocket?: unknown }).WebSocket === 'function';
    await assert.rejects(sandbox.connectWebSocket(8009), (e: { httpStatus?: number; code?: string }) =>
      native ? e.code === 'RPC_TRANSPORT_ERROR' : e.httpStatus === 502,
    );
  });
});
