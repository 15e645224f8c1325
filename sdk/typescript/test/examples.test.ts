// The examples run in the suite: each example's main() serves its Worker with serve()
// against the test daemon; a request or two checks the answers. The examples import the
// package by its name (@cella/sandbox: dist/, `npm run build` first) and use the sandbox
// names of the hosted code ('my-sandbox', 'preview-demo'), destroyed before and after; all three examples run.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { env, api } from './harness.js';
import { main as minimalMain } from '../examples/minimal/main.js';
import { main as previewMain } from '../examples/preview-websocket/main.js';
import { main as interpreterMain } from '../examples/code-interpreter/main.js';
import { WsClient, rawRequest, skip } from './ws-helpers.js';

async function destroy(name: string): Promise<void> {
  if (env.available) await api('DELETE', `/v1/sandboxes/${name}`).catch(() => undefined);
}

const opts = () => ({ url: env.url, token: env.token || undefined, port: 0 });

describe('examples', { skip, timeout: 180_000 }, () => {
  after(async () => {
    await destroy('my-sandbox');
    await destroy('preview-demo');
  });

  test('minimal: /run and /file', async () => {
    await destroy('my-sandbox');
    const app = await minimalMain(opts());
    try {
      const run = await fetch(`${app.url}/run`);
      assert.equal(run.status, 200);
      assert.deepEqual(await run.json(), { output: '4\n', error: '', exitCode: 0, success: true });
      const file = await fetch(`${app.url}/file`);
      assert.deepEqual(await file.json(), { content: 'Hello, Sandbox!' });
      assert.equal(await (await fetch(`${app.url}/`)).text(), 'Try /run or /file');
    } finally {
      await app.close();
    }
  });

  test('code-interpreter: /run, /stream and /analyze', async () => {
    await destroy('my-sandbox');
    const app = await interpreterMain(opts());
    try {
      const run = await fetch(`${app.url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: 'print("hi")\n6 * 7' }),
      });
      assert.equal(run.status, 200);
      const r = (await run.json()) as { stdout: string; results: { text?: string }[]; error?: string };
      assert.equal(r.stdout, 'hi\n');
      assert.equal(r.error, undefined);
      assert.deepEqual(r.results.map((x) => x.text), ['42']);

      const js = await fetch(`${app.url}/run`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ code: 'throw new Error("boom")', language: 'javascript' }),
      });
      const e = (await js.json()) as { error?: string };
      assert.match(String(e.error), /boom/);

      const stream = await fetch(`${app.url}/stream`, { method: 'POST', body: 'for i in range(3): print(i)' });
      assert.equal(stream.headers.get('content-type'), 'text/event-stream');
      const text = await stream.text();
      for (const i of ['0', '1', '2']) assert.ok(text.includes(`${i}\\n`), text);

      const analyze = await fetch(`${app.url}/analyze`);
      assert.equal(analyze.status, 200);
      const a = (await analyze.json()) as { chart?: string; table?: string; error?: unknown };
      assert.equal(a.error, undefined);
      assert.match(String(a.chart), /^data:image\/png;base64,iVBOR/);
      assert.match(String(a.table), /<table/);

      const bad = await fetch(`${app.url}/run`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{' });
      assert.equal(bad.status, 400);
    } finally {
      await app.close();
    }
  });

  test('preview-websocket: /start, the page through its preview URL, WebSockets both ways', async () => {
    await destroy('preview-demo');
    const app = await previewMain(opts());
    try {
      const port = Number(new URL(app.url).port);
      const host = `localhost:${port}`;
      const start = await rawRequest(port, { path: '/start', host });
      assert.equal(start.status, 200, start.text);
      const preview = new URL((JSON.parse(start.text) as { url: string }).url);
      assert.match(preview.host, new RegExp(`^8080-preview-demo-[a-z0-9_]{16}\\.localhost:${port}$`));
      // /start again: the app is running, the same URL
      const again = await rawRequest(port, { path: '/start', host });
      assert.equal((JSON.parse(again.text) as { url: string }).url, preview.href);

      const page = await rawRequest(port, { path: '/', host: preview.host });
      assert.equal(page.status, 200);
      assert.match(page.text, /Hello from the sandbox/);

      // the page's WebSocket: the preview host, relayed by serve() after proxyToSandbox
      const viaPreview = await WsClient.open(`ws://127.0.0.1:${port}/echo`, { host: preview.host, origin: preview.origin });
      viaPreview.send('from the page');
      assert.equal((await viaPreview.next()).text, 'echo: from the page');
      await viaPreview.close();

      // /ws on the app's own host: wsConnect
      const viaWorker = await WsClient.open(`ws://127.0.0.1:${port}/ws`, { host });
      viaWorker.send('from the worker');
      assert.equal((await viaWorker.next()).text, 'echo: from the worker');
      await viaWorker.close();

      const plain = await rawRequest(port, { path: '/ws', host });
      assert.equal(plain.status, 426);
    } finally {
      await app.close();
    }
  });
});
