// cella's MCP server driven by the official MCP TypeScript SDK client, over each transport
// named in MCP_TRANSPORTS ("stdio": `cella mcp` spawned with CELLA_URL and CELLA_TOKEN;
// "http": cellad's /mcp, Streamable HTTP). Run by tests/integration/test-mcp.sh against a
// real cellad (CELLA_URL, CELLA_TOKEN, CELLA_BUILD, MCP_SANDBOX: a sandbox name prefix).
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, execFileSync } from 'node:child_process';
import http from 'node:http';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError, ErrorCode, ResourceUpdatedNotificationSchema } from '@modelcontextprotocol/sdk/types.js';

const URL_ = process.env.CELLA_URL;
const TOKEN = process.env.CELLA_TOKEN;
const CELLA = `${process.env.CELLA_BUILD}/cella`;
const PREFIX = process.env.MCP_SANDBOX ?? 'mcp-test';
const TRANSPORTS = (process.env.MCP_TRANSPORTS ?? 'stdio').split(/\s+/).filter(Boolean);
const LONG = { timeout: 300000 };

function transportFor(kind, token = TOKEN) {
  if (kind === 'stdio') {
    return new StdioClientTransport({
      command: CELLA,
      args: ['mcp'],
      env: { ...process.env, CELLA_URL: URL_, CELLA_TOKEN: token },
      stderr: 'inherit',
    });
  }
  return new StreamableHTTPClientTransport(new URL(`${URL_}/mcp`), {
    requestInit: { headers: { Authorization: `Bearer ${token}` } },
  });
}

async function connect(kind, token = TOKEN) {
  const client = new Client({ name: 'cella-mcp-test', version: '1.0.0' });
  await client.connect(transportFor(kind, token));
  return client;
}

// One initialize exchange by hand, for a given protocol revision: the answer's result.
async function rawInitialize(kind, version) {
  const msg = {
    jsonrpc: '2.0', id: 1, method: 'initialize',
    params: { protocolVersion: version, capabilities: {}, clientInfo: { name: 'raw', version: '1' } },
  };
  if (kind === 'stdio') {
    const child = spawn(CELLA, ['mcp'], {
      env: { ...process.env, CELLA_URL: URL_, CELLA_TOKEN: TOKEN },
      stdio: ['pipe', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (d) => { out += d; });
    child.stdin.end(JSON.stringify(msg) + '\n');
    await new Promise((resolve) => child.on('close', resolve));
    const lines = out.trim().split('\n');
    assert.equal(lines.length, 1, `one answer line, got ${out}`);
    return JSON.parse(lines[0]).result;
  }
  const res = await fetch(`${URL_}/mcp`, {
    method: 'POST',
    headers: {
      Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json',
      Accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify(msg),
  });
  assert.equal(res.status, 200);
  assert.ok(res.headers.get('mcp-session-id'), 'a session id');
  const text = await res.text();
  const type = res.headers.get('content-type') ?? '';
  const body = type.startsWith('text/event-stream')
    ? JSON.parse(text.split('\n').find((l) => l.startsWith('data:')).slice(5))
    : JSON.parse(text);
  await fetch(`${URL_}/mcp`, {
    method: 'DELETE',
    headers: { Authorization: `Bearer ${TOKEN}`, 'Mcp-Session-Id': res.headers.get('mcp-session-id') },
  });
  return body.result;
}

function structured(result) {
  assert.ok(!result.isError, `tool error: ${JSON.stringify(result.content)}`);
  assert.ok(result.structuredContent, 'structuredContent');
  return result.structuredContent;
}

const TOOLS = ['sandbox_create', 'sandbox_list', 'sandbox_destroy', 'exec', 'file_read',
  'file_write', 'file_list', 'file_delete', 'process_start', 'process_list', 'process_kill',
  'process_logs', 'wait_for_port', 'expose_port', 'run_code', 'git_checkout',
  'snapshot_create', 'snapshot_list', 'snapshot_delete', 'sandbox_fork', 'sandbox_sleep'];

for (const kind of TRANSPORTS) {
  describe(`MCP over ${kind}`, () => {
    const box = `${PREFIX}-${kind}`;
    let client;

    before(async () => { client = await connect(kind); });
    after(async () => {
      await client.callTool({ name: 'sandbox_destroy', arguments: { name: box } }, undefined, LONG);
      await client.close();
    });

    it('initializes at the current and the previous protocol revision', async () => {
      assert.equal(client.getServerVersion().name, 'cella');
      assert.ok(client.getServerCapabilities().tools);
      assert.equal(client.getServerCapabilities().resources.subscribe, true);
      for (const v of ['2025-11-25', '2025-06-18']) {
        const r = await rawInitialize(kind, v);
        assert.equal(r.protocolVersion, v);
        assert.equal(r.serverInfo.name, 'cella');
      }
      // a revision it does not speak: it answers with its newest
      assert.equal((await rawInitialize(kind, '2024-11-05')).protocolVersion, '2025-11-25');
    });

    it('lists every tool with schemas and hints', async () => {
      const { tools } = await client.listTools();
      assert.deepEqual(tools.map((t) => t.name).sort(), [...TOOLS].sort());
      for (const t of tools) {
        assert.equal(t.inputSchema.type, 'object', t.name);
        assert.equal(t.outputSchema?.type, 'object', t.name);
        assert.ok(t.description.length > 40, t.name);
        assert.equal(typeof t.annotations.destructiveHint, 'boolean', t.name);
      }
      assert.equal(tools.find((t) => t.name === 'sandbox_destroy').annotations.destructiveHint, true);
      assert.equal(tools.find((t) => t.name === 'file_read').annotations.readOnlyHint, true);
    });

    it('creates, lists and runs commands with progress', async () => {
      const info = structured(await client.callTool(
        { name: 'sandbox_create', arguments: { name: box, env: { GREETING: 'hi' } } }, undefined, LONG));
      assert.equal(info.id, box);
      const list = structured(await client.callTool({ name: 'sandbox_list', arguments: {} }));
      assert.ok(list.sandboxes.some((s) => s.id === box));
      const progress = [];
      const r = structured(await client.callTool(
        { name: 'exec', arguments: { sandbox: box, command: 'for i in 1 2 3; do echo "$GREETING $i"; sleep 0.2; done; echo err >&2; exit 3' } },
        undefined, { ...LONG, onprogress: (p) => progress.push(p) }));
      assert.equal(r.exitCode, 3);
      assert.equal(r.stdout, 'hi 1\nhi 2\nhi 3\n');
      assert.equal(r.stderr, 'err\n');
      assert.ok(progress.length >= 2, `progress notifications: ${progress.length}`);
      for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
      assert.ok(progress.map((p) => p.message).join('').includes('hi 1'));
      // env and cwd for one command
      const r2 = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'pwd; echo $X', cwd: '/tmp', env: { X: 'y' } } }));
      assert.equal(r2.stdout, '/tmp\ny\n');
      // a timeout kills the command: the result says so, and the sleep is gone
      const r3 = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'echo before; sleep 100', timeoutMs: 500 } }, undefined, LONG));
      assert.equal(r3.timedOut, true);
      assert.equal(r3.stdout, 'before\n');
      const left = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'pgrep -x sleep || true' } }));
      assert.equal(left.stdout, '');
    });

    it('keeps cd and export in an exec session; lists no finished exec', async () => {
      const a = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, sessionId: 'work', command: 'mkdir -p /tmp/s && cd /tmp/s && export MODE=fast' } }, undefined, LONG));
      assert.equal(a.exitCode, 0);
      assert.equal(a.sessionId, 'work');
      const b = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, sessionId: 'work', command: 'pwd; echo "$MODE"' } }));
      assert.equal(b.stdout, '/tmp/s\nfast\n');
      // without a session: a fresh shell, nothing carried over
      const c = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'pwd; echo "[$MODE]"' } }));
      assert.equal(c.stdout, '/workspace\n[]\n');
      // a session command's timeout stops it; the session keeps its state
      const t = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, sessionId: 'work', command: 'echo before; sleep 100', timeoutMs: 500 } }, undefined, LONG));
      assert.equal(t.timedOut, true);
      const d = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, sessionId: 'work', command: 'pwd' } }));
      assert.equal(d.stdout, '/tmp/s\n');
      // exec's own background processes are gone from process_list once finished
      const ps = structured(await client.callTool({ name: 'process_list', arguments: { sandbox: box } }));
      assert.deepEqual(ps.processes.filter((x) => x.id.startsWith('mcp-exec-')), []);
    });

    it('cancelling run_code interrupts the running cell; the context keeps its state', async () => {
      structured(await client.callTool({ name: 'run_code', arguments: { sandbox: box, code: 'kept = 41' } }, undefined, LONG));
      structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'rm -f /tmp/cell-started' } }));
      const ac = new AbortController();
      const call = client.callTool({ name: 'run_code', arguments: { sandbox: box, code: 'import time\nopen("/tmp/cell-started", "w").close()\ntime.sleep(100)' } },
        undefined, { timeout: 300000, signal: ac.signal });
      call.catch(() => {});
      for (let i = 0; ; i++) {
        const r = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'test -e /tmp/cell-started && echo yes || true' } }));
        if (r.stdout === 'yes\n') break;
        assert.ok(i < 240, 'the cell never started');
        await new Promise((r) => setTimeout(r, 250));
      }
      ac.abort('enough');
      await assert.rejects(call);
      // the same (default) context answers the next cell: the sleep was interrupted (the
      // bound is far below its 100 s), and its variables are still there
      const next = await client.callTool({ name: 'run_code', arguments: { sandbox: box, code: 'kept + 1' } }, undefined, { timeout: 60000 });
      structured(next);
      assert.ok(next.content.some((x) => x.type === 'text' && x.text === '42'), JSON.stringify(next.content));
    });

    it('snapshots a sandbox, forks it, starts one from a snapshot, lists and deletes', async () => {
      const call = (name, args) => client.callTool({ name, arguments: args }, undefined, LONG);
      const kid = `${box}-kid`;
      const from = `${box}-from`;
      const snapName = `${box}-snap`;
      structured(await call('exec', { sandbox: box, command: 'mkdir -p /opt/tool && echo v1 > /opt/tool/version && echo seed > /workspace/seed.txt' }));
      const snap = structured(await call('snapshot_create', { sandbox: box, name: snapName }));
      assert.match(snap.snapshotId, /^snap-[0-9a-f]{16}$/);
      assert.equal(snap.name, snapName);
      assert.equal(snap.sandbox, box);
      assert.ok(snap.sizeBytes > 0);
      // the parent goes on; the fork has its files now, a sandbox from the snapshot those then
      structured(await call('exec', { sandbox: box, command: 'echo v2 > /opt/tool/version' }));
      const forked = structured(await call('sandbox_fork', { sandbox: box, name: kid }));
      assert.equal(forked.id, kid);
      assert.match(forked.snapshot, /^snap-[0-9a-f]{16}$/);
      assert.equal(structured(await call('exec', { sandbox: kid, command: 'cat /opt/tool/version /workspace/seed.txt' })).stdout, 'v2\nseed\n');
      const made = structured(await call('sandbox_create', { name: from, fromSnapshot: snapName, keepAlive: true, env: { FROM: 'snap' } }));
      assert.equal(made.snapshot, snap.snapshotId);
      assert.equal(made.keepAlive, true);
      assert.equal(structured(await call('exec', { sandbox: from, command: 'cat /opt/tool/version; echo $FROM' })).stdout, 'v1\nsnap\n');
      // each its own writes
      structured(await call('file_write', { sandbox: kid, path: 'kid.txt', content: 'k' }));
      assert.equal((await call('file_read', { sandbox: box, path: 'kid.txt' })).isError, true);

      const all = structured(await call('snapshot_list', {}));
      const ids = all.snapshots.map((s) => s.snapshotId);
      assert.ok(ids.includes(snap.snapshotId) && ids.includes(forked.snapshot));
      const mine = structured(await call('snapshot_list', { sandbox: box }));
      assert.deepEqual(mine.snapshots.map((s) => s.snapshotId), [snap.snapshotId, forked.snapshot]);
      assert.deepEqual(structured(await call('snapshot_list', { sandbox: `${box}-none` })).snapshots, []);

      // errors as tool errors with cella's codes: in use (409), not found (404), a taken name
      const busy = await call('snapshot_delete', { snapshot: snapName });
      assert.equal(busy.isError, true);
      assert.match(busy.content[0].text, /^SNAPSHOT_IN_USE \(HTTP 409\): /);
      assert.equal(busy._meta['cella/error'].code, 'SNAPSHOT_IN_USE');
      const missing = await call('snapshot_delete', { snapshot: `${box}-missing` });
      assert.equal(missing._meta['cella/error'].code, 'SNAPSHOT_NOT_FOUND');
      assert.equal(missing._meta['cella/error'].httpStatus, 404);
      const ghost = await call('sandbox_create', { name: `${box}-ghost`, fromSnapshot: `${box}-missing` });
      assert.equal(ghost._meta['cella/error'].code, 'SNAPSHOT_NOT_FOUND');
      const dot = await call('snapshot_delete', { snapshot: '..' });
      assert.equal(dot._meta['cella/error'].code, 'VALIDATION_FAILED');
      const taken = await call('snapshot_create', { sandbox: box, name: snapName });
      assert.equal(taken._meta['cella/error'].code, 'VALIDATION_FAILED');
      const onto = await call('sandbox_fork', { sandbox: box, name: from });
      assert.equal(onto._meta['cella/error'].code, 'VALIDATION_FAILED');
      // bad arguments are protocol errors, as for every tool
      await assert.rejects(call('sandbox_fork', { sandbox: box }), (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams);

      // deleted once its sandboxes are gone
      structured(await call('sandbox_destroy', { name: from }));
      structured(await call('sandbox_destroy', { name: kid }));
      assert.deepEqual(structured(await call('snapshot_delete', { snapshot: snapName })), { snapshotId: snap.snapshotId, deleted: true });
      structured(await call('snapshot_delete', { snapshot: forked.snapshot }));
      assert.deepEqual(structured(await call('snapshot_list', { sandbox: box })).snapshots, []);
    });

    it('puts a sandbox to sleep; the next call wakes it; an unknown one is refused', async () => {
      const call = (name, args) => client.callTool({ name, arguments: args }, undefined, LONG);
      structured(await call('file_write', { sandbox: box, path: 'sleep.txt', content: 'kept' }));
      const slept = structured(await call('sandbox_sleep', { name: box }));
      assert.equal(slept.id, box);
      assert.equal(slept.state, 'sleeping');
      assert.equal(structured(await call('sandbox_sleep', { name: box })).state, 'sleeping');
      assert.equal(structured(await call('file_read', { sandbox: box, path: 'sleep.txt' })).content, 'kept');
      const none = await call('sandbox_sleep', { name: `${box}-none` });
      assert.equal(none.isError, true);
      assert.equal(none._meta['cella/error'].code, 'SANDBOX_NOT_FOUND');
      const bad = await call('sandbox_sleep', { name: 'Not_A_Name' });
      assert.equal(bad._meta['cella/error'].code, 'INVALID_SANDBOX_NAME');
    });

    it('writes, reads, lists and deletes files (text and base64)', async () => {
      structured(await client.callTool({ name: 'file_write', arguments: { sandbox: box, path: 'notes/a.txt', content: 'héllo\n' } }));
      const bin = Buffer.from([0, 1, 2, 255, 254]).toString('base64');
      structured(await client.callTool({ name: 'file_write', arguments: { sandbox: box, path: '/workspace/notes/b.bin', content: bin, encoding: 'base64' } }));
      const a = structured(await client.callTool({ name: 'file_read', arguments: { sandbox: box, path: 'notes/a.txt' } }));
      assert.equal(a.content, 'héllo\n');
      const b = structured(await client.callTool({ name: 'file_read', arguments: { sandbox: box, path: 'notes/b.bin', encoding: 'base64' } }));
      assert.equal(b.content, bin);
      const l = structured(await client.callTool({ name: 'file_list', arguments: { sandbox: box, path: 'notes' } }));
      assert.deepEqual(l.files.map((f) => f.name).sort(), ['a.txt', 'b.bin']);
      structured(await client.callTool({ name: 'file_delete', arguments: { sandbox: box, path: 'notes/b.bin' } }));
      const missing = await client.callTool({ name: 'file_read', arguments: { sandbox: box, path: 'notes/b.bin' } });
      assert.equal(missing.isError, true);
      assert.match(missing.content[0].text, /^FILE_NOT_FOUND \(HTTP 404\): /);
      assert.equal(missing._meta['cella/error'].code, 'FILE_NOT_FOUND');
    });

    it('starts a server, waits for its port, exposes it, reads logs and kills it', async () => {
      const p = structured(await client.callTool({ name: 'process_start', arguments: { sandbox: box, command: 'echo starting; exec python3 -m http.server 8080', processId: 'web' } }));
      assert.equal(p.id, 'web');
      structured(await client.callTool({ name: 'wait_for_port', arguments: { sandbox: box, processId: 'web', port: 8080, httpPath: '/' } }, undefined, LONG));
      const e = structured(await client.callTool({ name: 'expose_port', arguments: { sandbox: box, port: 8080 } }));
      assert.equal(e.port, 8080);
      assert.match(e.url, /^http:\/\/8080-/);
      const logs = structured(await client.callTool({ name: 'process_logs', arguments: { sandbox: box, processId: 'web' } }));
      assert.ok(logs.stdout.includes('starting'));
      const ps = structured(await client.callTool({ name: 'process_list', arguments: { sandbox: box } }));
      assert.ok(ps.processes.some((x) => x.id === 'web' && x.status === 'running'));
      const k = structured(await client.callTool({ name: 'process_kill', arguments: { sandbox: box, processId: 'web' } }, undefined, LONG));
      assert.notEqual(k.status, 'running');
    });

    it('runs code: text results, a matplotlib PNG as image content, errors', async () => {
      const r = await client.callTool({ name: 'run_code', arguments: { sandbox: box, code: 'x = 6\nprint("out")\nx * 7' } }, undefined, LONG);
      const s = structured(r);
      assert.equal(s.stdout, 'out\n');
      assert.ok(r.content.some((c) => c.type === 'text' && c.text === '42'));
      const png = await client.callTool({
        name: 'run_code',
        arguments: { sandbox: box, code: 'import matplotlib\nmatplotlib.use("Agg")\nimport matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.show()' },
      }, undefined, LONG);
      structured(png);
      const img = png.content.find((c) => c.type === 'image');
      assert.ok(img, `image content in ${JSON.stringify(png.content.map((c) => c.type))}`);
      assert.equal(img.mimeType, 'image/png');
      assert.deepEqual([...Buffer.from(img.data, 'base64').subarray(0, 4)], [0x89, 0x50, 0x4e, 0x47]);
      const js = structured(await client.callTool({ name: 'run_code', arguments: { sandbox: box, language: 'javascript', code: 'console.log(1 + 1)' } }, undefined, LONG));
      assert.equal(js.stdout, '2\n');
      const bad = await client.callTool({ name: 'run_code', arguments: { sandbox: box, code: '1 / 0' } }, undefined, LONG);
      assert.equal(bad.isError, true);
      assert.equal(bad.structuredContent.error.name, 'ZeroDivisionError');
    });

    it('checks out a git repository', async () => {
      structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command:
        'set -e; rm -rf /tmp/src /srv/git; mkdir -p /tmp/src /srv/git; cd /tmp/src; git init -q -b main; ' +
        'echo one > a.txt; git add a.txt; git -c user.name=t -c user.email=t@t commit -qm one; ' +
        'git init -q --bare -b main /srv/git/repo.git; git push -q /srv/git/repo.git main; ' +
        'git -C /srv/git/repo.git update-server-info' } }, undefined, LONG));
      structured(await client.callTool({ name: 'process_start', arguments: { sandbox: box, command: 'python3 -m http.server 8000', cwd: '/srv/git', processId: 'git-http' } }));
      structured(await client.callTool({ name: 'wait_for_port', arguments: { sandbox: box, processId: 'git-http', port: 8000 } }, undefined, LONG));
      const g = structured(await client.callTool({ name: 'git_checkout', arguments: { sandbox: box, repoUrl: 'http://127.0.0.1:8000/repo.git' } }, undefined, LONG));
      assert.equal(g.targetDir, '/workspace/repo');
      const cat = structured(await client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'cat /workspace/repo/a.txt' } }));
      assert.equal(cat.stdout, 'one\n');
      await client.callTool({ name: 'process_kill', arguments: { sandbox: box, processId: 'git-http' } }, undefined, LONG);
    });

    it('cancellation kills a running command', async () => {
      const pgrep = async () => structured(await client.callTool(
        { name: 'exec', arguments: { sandbox: box, command: 'pgrep -x sleep || true' } })).stdout;
      const until = async (what, cond) => {
        for (let i = 0; i < 120; i++) {
          if (cond(await pgrep())) return;
          await new Promise((r) => setTimeout(r, 250));
        }
        assert.fail(what);
      };
      const ac = new AbortController();
      const call = client.callTool({ name: 'exec', arguments: { sandbox: box, command: 'sleep 100' } },
        undefined, { timeout: 300000, signal: ac.signal });
      call.catch(() => {});
      await until('sleep 100 never started', (out) => out !== '');
      ac.abort('enough');
      await assert.rejects(call);
      // the kill is asynchronous: a bounded wait until the sleep is gone from the sandbox
      await until('sleep 100 still runs after the cancellation', (out) => out === '');
    });

    it('answers bad arguments with a schema error', async () => {
      await assert.rejects(
        client.callTool({ name: 'expose_port', arguments: { sandbox: box, port: 'x' } }),
        (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams && /arguments\.port: must be an integer/.test(e.message));
      await assert.rejects(
        client.callTool({ name: 'exec', arguments: { sandbox: box } }),
        (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams && /missing required property "command"/.test(e.message));
      await assert.rejects(
        client.callTool({ name: 'no_such_tool', arguments: {} }),
        (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams);
      const badName = await client.callTool({ name: 'exec', arguments: { sandbox: 'Not_A_Name', command: 'true' } });
      assert.equal(badName.isError, true);
      assert.equal(badName._meta['cella/error'].code, 'INVALID_SANDBOX_NAME');
    });

    it('serves files as resources: list, read, templates, subscribe', async () => {
      structured(await client.callTool({ name: 'file_write', arguments: { sandbox: box, path: 'res.txt', content: 'v1' } }));
      const uri = `cella://${box}/workspace/res.txt`;
      const { resources } = await client.listResources();
      assert.ok(resources.some((r) => r.uri === uri), `${uri} listed`);
      const { resourceTemplates } = await client.listResourceTemplates();
      assert.equal(resourceTemplates[0].uriTemplate, 'cella://{sandbox}/{+path}');
      const read = await client.readResource({ uri });
      assert.equal(read.contents[0].text, 'v1');
      const updated = new Promise((resolve) => {
        client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => resolve(n.params.uri));
      });
      await client.subscribeResource({ uri });
      // the watch starts on its own thread: write until the update arrives (bounded)
      let got;
      for (let i = 0; i < 30 && !got; i++) {
        structured(await client.callTool({ name: 'file_write', arguments: { sandbox: box, path: 'res.txt', content: `v${i + 2}` } }));
        got = await Promise.race([updated, new Promise((r) => setTimeout(() => r(undefined), 1000))]);
      }
      assert.equal(got, uri);
      await client.unsubscribeResource({ uri });
      if (kind === 'stdio') {
        // a watch is cella mcp's one long-lived connection to cellad: unsubscribe ends it
        // at once, even when its directory stays quiet (bounded waits)
        const port = new URL(URL_).port;
        const conns = () => execFileSync('ss', ['-Htnp', 'state', 'established', 'dport', '=', `:${port}`])
          .toString().split('\n').filter((l) => l.includes(`pid=${client.transport.pid},`)).length;
        const until = async (what, cond) => {
          for (let i = 0; !cond(); i++) {
            assert.ok(i < 120, what);
            await new Promise((r) => setTimeout(r, 250));
          }
        };
        structured(await client.callTool({ name: 'file_write', arguments: { sandbox: box, path: 'quiet/q.txt', content: 'q' } }));
        await until('connections of finished calls still open', () => conns() === 0);
        const quiet = `cella://${box}/workspace/quiet/q.txt`;
        let quietUpdates = 0;
        client.setNotificationHandler(ResourceUpdatedNotificationSchema, (n) => { if (n.params.uri === quiet) quietUpdates++; });
        await client.subscribeResource({ uri: quiet });
        await until('no connection for the watch', () => conns() === 1);
        // the watch runs once a change is seen; then the directory stays quiet (its
        // write's events are given 2 s to arrive) and the unsubscribe alone must end it
        for (let i = 0; quietUpdates === 0; i++) {
          assert.ok(i < 30, 'no update for the quiet file');
          structured(await client.callTool({ name: 'file_write', arguments: { sandbox: box, path: 'quiet/q.txt', content: `q${i}` } }));
          await new Promise((r) => setTimeout(r, 2000));
        }
        await client.unsubscribeResource({ uri: quiet });
        await until('the watch still runs after unsubscribe', () => conns() === 0);
      }
      await assert.rejects(client.readResource({ uri: `cella://${box}/workspace/nope.txt` }),
        (e) => e instanceof McpError && e.code === -32002);
    });

    if (kind === 'stdio') {
      it('drops a line over 4 MiB whole and answers the next one', async () => {
        const child = spawn(CELLA, ['mcp'], {
          env: { ...process.env, CELLA_URL: URL_, CELLA_TOKEN: TOKEN },
          stdio: ['pipe', 'pipe', 'inherit'],
        });
        let out = '';
        child.stdout.on('data', (d) => { out += d; });
        const big = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping', params: { pad: 'x'.repeat(5 * 1024 * 1024) } });
        child.stdin.write(big + '\n');
        child.stdin.end(JSON.stringify({ jsonrpc: '2.0', id: 2, method: 'ping' }) + '\n');
        await new Promise((resolve) => child.on('close', resolve));
        const msgs = out.trim().split('\n').map((l) => JSON.parse(l));
        assert.equal(msgs.length, 2, out.slice(0, 300));
        assert.equal(msgs[0].error.code, -32700);
        assert.equal(msgs[0].error.message, 'message too large');
        assert.deepEqual(msgs[1], { jsonrpc: '2.0', id: 2, result: {} });
      });
    }

    it('refuses a wrong token', async () => {
      if (kind === 'stdio') {
        const c = await connect(kind, 'wrong-token');
        const r = await c.callTool({ name: 'sandbox_list', arguments: {} });
        assert.equal(r.isError, true);
        assert.equal(r._meta['cella/error'].httpStatus, 401);
        await c.close();
      } else {
        await assert.rejects(connect(kind, 'wrong-token'), /401|Unauthorized|UNAUTHORIZED/);
      }
    });
  });
}

// The Streamable HTTP transport's own rules, by hand: session ids, DELETE, and a GET
// stream resumed with Last-Event-ID.
if (TRANSPORTS.includes('http')) {
  describe('MCP over http: sessions and resumption', () => {
    const box = `${PREFIX}-raw`;
    const H = { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json', Accept: 'application/json, text/event-stream' };
    let sid;
    let n = 0;

    // One request on its POST stream: every event's data, the response last.
    async function rpc(method, params, headers = {}) {
      const res = await fetch(`${URL_}/mcp`, {
        method: 'POST',
        headers: { ...H, ...(sid ? { 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' } : {}), ...headers },
        body: JSON.stringify({ jsonrpc: '2.0', id: ++n, method, params }),
      });
      const text = await res.text();
      return { res, events: text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6))) };
    }

    after(async () => {
      if (sid) await fetch(`${URL_}/mcp`, { method: 'DELETE', headers: { ...H, 'Mcp-Session-Id': sid } });
    });

    it('needs a session id after initialize, and ends with DELETE', async () => {
      const noSession = await rpc('tools/list', {});
      assert.equal(noSession.res.status, 400);
      const unknown = await rpc('tools/list', {}, { 'Mcp-Session-Id': 'nope' });
      assert.equal(unknown.res.status, 404);
      const init = await rpc('initialize', { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '1' } });
      sid = init.res.headers.get('mcp-session-id');
      assert.match(sid, /^[0-9a-f]{32}$/);
      assert.equal(init.events.at(-1).result.protocolVersion, '2025-06-18');
      const note = await fetch(`${URL_}/mcp`, { method: 'POST', headers: { ...H, 'Mcp-Session-Id': sid }, body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) });
      assert.equal(note.status, 202);
      const badVersion = await rpc('tools/list', {}, { 'MCP-Protocol-Version': '1999-01-01' });
      assert.equal(badVersion.res.status, 400);
      const list = await rpc('tools/list', {});
      assert.equal(list.events.at(-1).result.tools.length, TOOLS.length);
      const noAccept = await fetch(`${URL_}/mcp`, { headers: { Authorization: H.Authorization, 'Mcp-Session-Id': sid } });
      assert.equal(noAccept.status, 405);
      const wrong = await fetch(`${URL_}/mcp`, { method: 'POST', headers: { ...H, Authorization: 'Bearer wrong', 'Mcp-Session-Id': sid }, body: '{}' });
      assert.equal(wrong.status, 401);
      // a tool's progress and its response arrive on the POST's stream, in order
      const ex = await rpc('tools/call', { name: 'exec', arguments: { sandbox: box, command: 'echo one; sleep 0.3; echo two' }, _meta: { progressToken: 'p' } });
      assert.ok(ex.events.length >= 2);
      assert.equal(ex.events[0].method, 'notifications/progress');
      assert.equal(ex.events.at(-1).result.structuredContent.stdout, 'one\ntwo\n');
    });

    it('calls the daemon at its own address, whatever Host the request names', async () => {
      // fetch cannot set Host; node:http can. A Host naming another local port must not
      // become where the tools send their requests (and the bearer token).
      const u = new URL(URL_);
      const post = (headers, body) => new Promise((resolve, reject) => {
        const r = http.request({ host: u.hostname, port: u.port, path: '/mcp', method: 'POST',
          headers: { ...H, Host: '127.0.0.1:1', ...headers } }, (res) => {
          let text = '';
          res.on('data', (d) => { text += d; });
          res.on('end', () => resolve({ res, events: text.split('\n').filter((l) => l.startsWith('data: ')).map((l) => JSON.parse(l.slice(6))) }));
        });
        r.on('error', reject);
        r.end(JSON.stringify(body));
      });
      const init = await post({}, { jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-11-25', capabilities: {}, clientInfo: { name: 'host', version: '1' } } });
      assert.equal(init.res.statusCode, 200);
      const s = init.res.headers['mcp-session-id'];
      const hs = { 'Mcp-Session-Id': s, 'MCP-Protocol-Version': '2025-11-25' };
      await post(hs, { jsonrpc: '2.0', method: 'notifications/initialized' });
      const list = await post(hs, { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'sandbox_list', arguments: {} } });
      const result = list.events.at(-1).result;
      assert.notEqual(result.isError, true, JSON.stringify(result));
      await fetch(`${URL_}/mcp`, { method: 'DELETE', headers: { ...H, 'Mcp-Session-Id': s } });
    });

    it('resumes a POST stream whose connection was lost with GET and Last-Event-ID', async () => {
      // the first event of a long exec, then the connection is dropped
      const ac = new AbortController();
      const res = await fetch(`${URL_}/mcp`, {
        method: 'POST',
        headers: { ...H, 'Mcp-Session-Id': sid, 'MCP-Protocol-Version': '2025-11-25' },
        body: JSON.stringify({ jsonrpc: '2.0', id: 'resume-1', method: 'tools/call', params: { name: 'exec', arguments: { sandbox: box, command: 'echo one; sleep 1; echo two' }, _meta: { progressToken: 'r' } } }),
        signal: ac.signal,
      });
      assert.equal(res.status, 200);
      const reader = res.body.getReader();
      let text = '';
      while (!/\n\n/.test(text)) {
        const { value, done } = await reader.read();
        assert.ok(!done, 'the stream ended before its first event');
        text += Buffer.from(value).toString();
      }
      ac.abort();
      const first = /id: (\d+)-(\d+)\ndata: (.*)\n/.exec(text);
      assert.ok(first, `a POST stream's event id names its stream: ${text}`);
      assert.equal(JSON.parse(first[3]).method, 'notifications/progress');
      // the rest of that stream, the response last, on a GET (it ends with the response)
      const resumed = await fetch(`${URL_}/mcp`, { headers: { ...H, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': `${first[1]}-${first[2]}` } });
      assert.equal(resumed.status, 200);
      const events = [...(await resumed.text()).matchAll(/id: (\d+)-(\d+)\ndata: (.*)\n/g)]
        .map((m) => ({ id: Number(m[1]), stream: m[2], msg: JSON.parse(m[3]) }));
      assert.ok(events.length > 0);
      for (const e of events) {
        assert.equal(e.stream, first[2]);
        assert.ok(e.id > Number(first[1]), 'only events after Last-Event-ID');
      }
      const last = events.at(-1).msg;
      assert.equal(last.id, 'resume-1');
      assert.equal(last.result.structuredContent.stdout, 'one\ntwo\n');
      // delivered: the stream is not kept any more (and never another stream's events)
      const again = await fetch(`${URL_}/mcp`, { headers: { ...H, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': `${first[1]}-${first[2]}` } });
      // (400, not 404: a 404 would tell the client that its session ended)
      assert.equal(again.status, 400);
      assert.match((await again.json()).message, /not kept/);
    });

    it('refuses a Last-Event-ID that is not EVENT or EVENT-STREAM in decimal with 400', async () => {
      // (fetch trims header values, so no case with spaces; each must be refused before
      // any stream opens: a 200 would hang until the timeout, which fails the test)
      for (const last of ['', 'abc', '12x', '-1', '+1', '0x10', '1.5', '1-', '-1-2', '1-2-3', '1-0',
        '18446744073709551616', '1-18446744073709551616']) {
        const res = await fetch(`${URL_}/mcp`, { headers: { ...H, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': last }, signal: AbortSignal.timeout(10000) });
        assert.equal(res.status, 400, `Last-Event-ID '${last}'`);
        const body = await res.json();
        assert.equal(body.code, 'VALIDATION_FAILED', `Last-Event-ID '${last}'`);
        assert.match(body.message, /^Last-Event-ID must be an event id this server sent/);
      }
      // the largest id it could send is a valid one (no POST stream 2^64-1: not kept)
      const res = await fetch(`${URL_}/mcp`, { headers: { ...H, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, 'Last-Event-ID': '18446744073709551615-18446744073709551615' }, signal: AbortSignal.timeout(10000) });
      assert.equal(res.status, 400);
      assert.match((await res.json()).message, /not kept/);
    });

    it('replays the stream after Last-Event-ID', async () => {
      await rpc('tools/call', { name: 'file_write', arguments: { sandbox: box, path: 'r.txt', content: 'a' } });
      const uri = `cella://${box}/workspace/r.txt`;
      const sub = await rpc('resources/subscribe', { uri });
      assert.deepEqual(sub.events.at(-1).result, {});
      // no GET stream open: updates are kept for one (bounded wait for the watch to start)
      const get = async (last) => {
        const ac = new AbortController();
        const res = await fetch(`${URL_}/mcp`, { headers: { ...H, Accept: 'text/event-stream', 'Mcp-Session-Id': sid, ...(last !== undefined ? { 'Last-Event-ID': String(last) } : {}) }, signal: ac.signal });
        assert.equal(res.status, 200);
        const reader = res.body.getReader();
        let text = '';
        const timer = setTimeout(() => ac.abort(), 1500);
        try {
          for (;;) {
            const { value, done } = await reader.read();
            if (done) break;
            text += Buffer.from(value).toString();
          }
        } catch { /* aborted: what came is enough */ }
        clearTimeout(timer);
        return [...text.matchAll(/id: (\d+)\ndata: (.*)\n/g)].map((m) => ({ id: Number(m[1]), msg: JSON.parse(m[2]) }));
      };
      let replayed = [];
      for (let i = 0; i < 20 && replayed.length === 0; i++) {
        await rpc('tools/call', { name: 'file_write', arguments: { sandbox: box, path: 'r.txt', content: `b${i}` } });
        replayed = (await get(0)).filter((e) => e.msg.method === 'notifications/resources/updated');
      }
      assert.ok(replayed.length > 0, 'an update replayed after Last-Event-ID 0');
      assert.equal(replayed[0].msg.params.uri, uri);
      // after the last id seen: nothing again
      const last = replayed.at(-1).id;
      const again = (await get(last)).filter((e) => e.id <= last);
      assert.equal(again.length, 0);
      await rpc('tools/call', { name: 'sandbox_destroy', arguments: { name: box } });
      const del = await fetch(`${URL_}/mcp`, { method: 'DELETE', headers: { ...H, 'Mcp-Session-Id': sid } });
      assert.equal(del.status, 200);
      const gone = await rpc('tools/list', {});
      assert.equal(gone.res.status, 404);
      sid = undefined;
    });
  });
}
