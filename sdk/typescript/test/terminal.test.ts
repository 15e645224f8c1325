// Terminals (hosted SDK §9): the openTerminal client (output, resize, exit code, sessions),
// and terminal()/proxyTerminal relayed by serve() to a `ws` client speaking the PTY
// protocol (binary = bytes, text = JSON control).
import { test, describe, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { env, sandboxName } from './harness.js';
import { connect, getSandbox, proxyTerminal, type Sandbox, type Terminal } from '../src/index.js';
import { serve, type ServeHandle } from '../src/node.js';
import { WsClient, daemon, skip } from './ws-helpers.js';

describe('terminals', { skip, timeout: 180_000 }, () => {
  let sandbox: Sandbox;
  const open: Terminal[] = [];

  before(async () => {
    sandbox = getSandbox(connect(daemon()), env.available ? sandboxName('term') : 'unused');
    await sandbox.destroy(); // a fresh one: sessions and terminals of an earlier run are gone
  });

  after(async () => {
    for (const t of open) t.close();
    await sandbox?.destroy().catch(() => undefined);
  });

  test('openTerminal: typed commands run, their output arrives', async () => {
    const term = await sandbox.openTerminal({ cols: 80, rows: 24 });
    open.push(term);
    assert.equal(term.sessionId, 'default');
    await term.ready;
    const from = term.position;
    // the echo of the typed line holds hel""lo, only the command's output holds hello
    term.write('echo hel""lo\r');
    const out = await term.waitFor('hello', { from });
    assert.match(out, /hello/);
    // the async iterator and onData see the output too
    const chunks: Uint8Array[] = [];
    const off = term.onData((c) => chunks.push(c));
    const it = term[Symbol.asyncIterator]();
    term.write(new TextEncoder().encode('echo it""er\r'));
    let text = '';
    while (!text.includes('iter')) {
      const r = await it.next();
      assert.equal(r.done, false);
      text += new TextDecoder().decode(r.value);
    }
    await it.return?.();
    off();
    assert.ok(chunks.length > 0);
  });

  test('resize, then stty size shows it', async () => {
    const term = await sandbox.openTerminal();
    open.push(term);
    term.resize(100, 30);
    const from = term.position;
    term.write('stty size\r');
    await term.waitFor(/30 100/, { from });
    assert.throws(() => term.resize(0, 10), /cols/);
  });

  test('exit 3: exited resolves 3 (a session of its own)', async () => {
    const session = await sandbox.createSession({ id: 'exit-three' });
    const term = await session.openTerminal({ cols: 70, rows: 20 });
    open.push(term);
    assert.equal(term.sessionId, 'exit-three');
    term.write('exit 3\r');
    assert.equal(await term.exited, 3);
    // the connection is closed after the exit
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(term.closed, true);
  });

  test('openTerminal with a session id that does not exist yet creates it', async () => {
    const term = await sandbox.openTerminal({ sessionId: 'lazy-term' });
    open.push(term);
    assert.equal(term.sessionId, 'lazy-term');
    const from = term.position;
    term.write('echo $((6*7))\r');
    await term.waitFor('42', { from });
    const sessions = await sandbox.listSessions();
    assert.ok(sessions.some((s) => s.id === 'lazy-term'));
    // close(): exited rejects (the shell goes on)
    term.close();
    await assert.rejects(term.exited);
  });

  describe('terminal() relayed by serve()', () => {
    let app: ServeHandle;
    before(async () => {
      app = await serve(
        {
          async fetch(request: Request): Promise<Response> {
            const url = new URL(request.url);
            if (url.pathname === '/term') return sandbox.terminal(request, { cols: 90, rows: 20 });
            if (url.pathname === '/session-term') {
              const session = await sandbox.getSession('relay-sess');
              return session.terminal(request, { cols: 50, rows: 10 });
            }
            if (url.pathname === '/proxy-term') return proxyTerminal(sandbox, 'proxy-sess', request, { cols: 60, rows: 15 });
            return new Response('not found', { status: 404 });
          },
        },
        { env: {} },
      );
    });
    after(async () => app?.close());

    async function attach(path: string): Promise<WsClient> {
      const c = await WsClient.open(app.url.replace('http', 'ws') + path, { origin: 'http://browser.example' });
      await c.until('{"type":"ready"}');
      return c;
    }

    test('the default session: ready, bytes both ways, resize', async () => {
      const c = await attach('/term');
      c.send(Buffer.from('echo via""serve; stty size\r'));
      await c.until(/viaserve[\s\S]*20 90/);
      c.send(JSON.stringify({ type: 'resize', cols: 77, rows: 22 }), false);
      c.send(Buffer.from('stty size\r'));
      await c.until('22 77');
      await c.close();
    });

    test('a session not created yet (getSession), and proxyTerminal', async () => {
      const c = await attach('/session-term');
      c.send(Buffer.from('echo in-$((1+1))-sess\r'));
      await c.until('in-2-sess');
      await c.close();
      const p = await attach('/proxy-term');
      p.send(Buffer.from('stty size; exit 5\r'));
      await p.until('15 60');
      await p.until('{"type":"exit","code":5}');
      await p.close();
    });

    test('a plain request to the terminal route: 426, nothing relayed', async () => {
      const r = await fetch(app.url + '/term');
      assert.equal(r.status, 426);
    });
  });
});
