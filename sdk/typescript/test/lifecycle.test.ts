// Lifecycle (hosted SDK §1, §11): getSandbox options reaching cellad, the setters, getState,
// start, destroy, renewActivityTimeout and sleep, sleep() now, startAndWaitForPorts, containerFetch, the
// methods cella does not have (NotSupportedError; backups: backups.test.ts), and gitCheckout against a repository
// served inside the sandbox itself (no network beyond its loopback).
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  InvalidGitUrlError,
  InvalidPortError,
  GitRepositoryNotFoundError,
  GitBranchNotFoundError,
  NotSupportedError,
  PortNotExposedError,
  ProcessReadyTimeoutError,
  SandboxNotFoundError,
  ValidationFailedError,
  connect,
  getSandbox,
  getUpgradeTarget,
  type Sandbox,
  type SandboxOptions,
} from '../src/index.js';
import { destroyMade, env, isIsoTime, rejectsWith, sandboxName, sb, skip, waitFor } from './core-helpers.js';

after(destroyMade);

/** A namespace that counts its requests by method. */
function counting() {
  const calls: string[] = [];
  const ns = connect({
    url: env.url,
    token: env.token,
    fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
      calls.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
      return fetch(input, init);
    }) as typeof fetch,
  });
  return { ns, calls };
}

describe('getSandbox options and the setters', { skip }, () => {
  test('sleepAfter, keepAlive, labels, env, instanceType reach cellad', async () => {
    const opts: SandboxOptions = {
      sleepAfter: '30m',
      keepAlive: true,
      labels: { team: 'sdk', run: 'lifecycle' },
      env: { LIFE_A: 'alpha', LIFE_B: 'b e t a' },
      instanceType: 'lite',
      containerTimeouts: { instanceGetTimeoutMS: 30_000 },
      transport: 'http',
    };
    const s = sb('life-a', opts);
    // nothing is sent by getSandbox: the sandbox does not exist yet
    await rejectsWith(s.getInfo(), SandboxNotFoundError, 'SANDBOX_NOT_FOUND');
    assert.equal((await s.getState()).status, 'stopped');
    const r = await s.exec('echo "$LIFE_A/$LIFE_B"');
    assert.equal(r.stdout, 'alpha/b e t a\n');
    const info = await s.getInfo();
    assert.equal(info.id, s.id);
    assert.equal(info.state, 'running');
    assert.equal(info.sleepAfter, 1800);
    assert.equal(info.keepAlive, true);
    assert.deepEqual(info.labels, { team: 'sdk', run: 'lifecycle' });
    assert.equal(info.env.LIFE_A, 'alpha');
    assert.equal(info.env.LIFE_B, 'b e t a');
    assert.equal(info.instanceType, 'lite');
    assert.equal(info.enableDefaultSession, true);
    assert.ok(isIsoTime(info.createdAt));
    assert.ok(isIsoTime(info.lastActiveAt));
    // a number of seconds
    const n = sb('life-a2', { sleepAfter: 90 });
    await n.exec('true');
    assert.equal((await n.getInfo()).sleepAfter, 90);
  });

  test('one PUT per distinct options on a connection, not one per call', async () => {
    const { ns, calls } = counting();
    const name = sandboxName('life-b');
    const opts = { labels: { a: '1' }, keepAlive: true };
    const a = getSandbox(ns, name, opts);
    sb('life-b'); // for the cleanup
    await Promise.all([a.exec('true'), a.exec('true'), getSandbox(ns, name, { ...opts }).exists('x')]);
    await getSandbox(ns, name, opts).exec('true');
    const puts = () => calls.filter((c) => c.startsWith('PUT /v1/sandboxes/')).length;
    assert.equal(puts(), 1, calls.join('\n'));
    await getSandbox(ns, name, { labels: { a: '2' }, keepAlive: true }).exec('true');
    assert.equal(puts(), 2);
    assert.deepEqual((await a.getInfo()).labels, { a: '2' });
    // a handle without options sends none
    await getSandbox(ns, name).exec('true');
    assert.equal(puts(), 2);
  });

  test('a first read (a GET, which cellad never lets create) creates the sandbox', async () => {
    const { ns, calls } = counting();
    // without options: the GET's 404 SANDBOX_NOT_FOUND, then a PUT and the GET again
    const name = sandboxName('life-read');
    sb('life-read'); // for the cleanup
    const a = getSandbox(ns, name);
    assert.equal((await a.exists('nothing-here')).exists, false);
    assert.deepEqual(
      calls.filter((c) => c.includes(name)),
      [`GET /v1/sandboxes/${name}/files/exists`, `PUT /v1/sandboxes/${name}`, `GET /v1/sandboxes/${name}/files/exists`],
    );
    assert.equal((await a.getInfo()).state, 'running');
    assert.deepEqual(await a.listProcesses(), []);
    // with options: they are sent first, as before, and the read needs no retry
    const b = sb('life-read-b', { labels: { first: 'read' } });
    assert.equal((await b.listFiles('/workspace')).success, true);
    assert.deepEqual((await b.getInfo()).labels, { first: 'read' });
  });

  test('setKeepAlive, setSleepAfter, setLabels; the no-op setters', async () => {
    const s = sb('life-c');
    await s.exec('true');
    await s.setKeepAlive(true);
    assert.equal((await s.getInfo()).keepAlive, true);
    await s.setKeepAlive(false);
    assert.equal((await s.getInfo()).keepAlive, false);
    await s.setKeepAlive(true);
    assert.equal((await s.getInfo()).keepAlive, true, 'setting a value back works too');
    await s.setSleepAfter('2h');
    assert.equal((await s.getInfo()).sleepAfter, 7200);
    await s.setSleepAfter(45);
    assert.equal((await s.getInfo()).sleepAfter, 45);
    await s.setLabels({ x: 'y' });
    assert.deepEqual((await s.getInfo()).labels, { x: 'y' });
    await s.setLabels({ x: 'z', w: 'v' });
    assert.deepEqual((await s.getInfo()).labels, { x: 'z', w: 'v' });
    await s.setContainerTimeouts({ portReadyTimeoutMS: 10_000 });
    await s.setTransport('rpc');
    assert.equal(await s.getContainerPlacementId(), null);
    // a bad value is the server's VALIDATION_FAILED
    await rejectsWith(s.setSleepAfter('forever'), ValidationFailedError, 'VALIDATION_FAILED');
  });

  test(
    'setLabels replaces the labels',
    async () => {
      const s = sb('life-c2');
      await s.setLabels({ old: '1' });
      await s.setLabels({ new: '2' });
      assert.deepEqual((await s.getInfo()).labels, { new: '2' });
    },
  );

  test('a setter sends one PUT, and the next operation none', async () => {
    const { ns, calls } = counting();
    const puts = () => calls.filter((c) => c.startsWith('PUT /v1/sandboxes/')).length;
    sb('life-one'); // for the cleanup
    // options not applied yet: one PUT with all of them, the new value included
    const a = getSandbox(ns, sandboxName('life-one'), { labels: { a: '1' }, instanceType: 'lite' });
    await a.setKeepAlive(true);
    assert.equal(puts(), 1, calls.join('\n'));
    await a.exec('true');
    assert.equal(puts(), 1, 'the operation after the setter sends no PUT');
    // options applied: one PUT with the change alone
    await a.setSleepAfter(120);
    await a.setLabels({ b: '2' });
    assert.equal(puts(), 3, calls.join('\n'));
    await a.exec('true');
    assert.equal(puts(), 3);
    const info = await a.getInfo();
    assert.equal(info.keepAlive, true);
    assert.equal(info.sleepAfter, 120);
    assert.deepEqual(info.labels, { b: '2' });
    assert.equal(info.instanceType, 'lite');
    // a handle without options
    sb('life-one-b');
    const b = getSandbox(ns, sandboxName('life-one-b'));
    await b.setKeepAlive(true);
    await b.exec('true');
    assert.equal(puts(), 4, calls.join('\n'));
  });

  test('a sandbox destroyed elsewhere: the handle sends its options again once it learns so', async () => {
    const name = sandboxName('life-elsewhere');
    sb('life-elsewhere');
    const a = getSandbox(connect({ url: env.url, token: env.token }), name, { labels: { mine: 'yes' } });
    await a.exec('true');
    // another client destroys it; the handle's connection still thinks its options applied
    await getSandbox(connect({ url: env.url, token: env.token }), name).destroy();
    assert.equal((await a.getState()).status, 'stopped');
    await a.exec('true');
    assert.deepEqual((await a.getInfo()).labels, { mine: 'yes' });
  });

  test('a setter as the first call creates the sandbox with all of its options', async () => {
    const s = sb('life-d', { instanceType: 'lite', labels: { first: 'setter' } });
    await s.setKeepAlive(true);
    const info = await s.getInfo();
    assert.equal(info.instanceType, 'lite');
    assert.equal(info.keepAlive, true);
    assert.deepEqual(info.labels, { first: 'setter' });
    // and later calls still work (the options are compatible with what exists)
    assert.equal((await s.exec('echo ok')).stdout, 'ok\n');
  });

  test('getState: running, and stopped when there is no sandbox', async () => {
    const s = sb('life-e');
    const before = await s.getState();
    assert.equal(before.status, 'stopped');
    assert.equal(typeof before.lastChange, 'number');
    await s.start();
    const st = await s.getState();
    assert.equal(st.status, 'running');
    assert.equal(typeof st.lastChange, 'number');
    assert.ok(st.lastChange > 0);
    assert.equal((await s.getInfo()).state, 'running');
  });

  test('destroy: the sandbox and its files are gone; the id is usable again; idempotent', async () => {
    const s = sb('life-f', { labels: { gen: '1' } });
    await s.writeFile('keep.txt', 'gen 1');
    await s.startProcess('sleep 350');
    const created = (await s.getInfo()).createdAt;
    await s.destroy();
    await rejectsWith(s.getInfo(), SandboxNotFoundError, 'SANDBOX_NOT_FOUND');
    assert.equal((await s.getState()).status, 'stopped');
    // the same handle creates it again, with its options, and nothing of before
    assert.equal((await s.exists('keep.txt')).exists, false);
    const info = await s.getInfo();
    assert.deepEqual(info.labels, { gen: '1' });
    assert.ok(Date.parse(info.createdAt) >= Date.parse(created));
    assert.equal((await s.listProcesses()).length, 0);
    await s.destroy();
    await s.destroy(); // idempotent
    // a never-created sandbox
    await sb('life-never').destroy();
  });

  test('the namespace: health and listSandboxes', async () => {
    const s = sb('life-g');
    await s.exec('true');
    const { ns } = counting();
    const h = await ns.health();
    assert.equal(h.status, 'ok');
    const list = await ns.listSandboxes();
    assert.ok(list.some((x) => x.id === s.id));
  });
});

/** Polls the sandbox's state (GET, which is not activity) until it is `state`. */
async function until(s: Sandbox, state: string, ms: number): Promise<void> {
  await waitFor(async () => (await s.getInfo()).state === state, ms, `${s.id} ${state}`);
}

describe('activity and sleep', { skip }, () => {
  test('renewActivityTimeout keeps a running sandbox awake; it wakes and creates nothing', async () => {
    const s = sb('life-renew', { sleepAfter: 3 });
    await s.exec('true');
    // 7 s of renewals, each well within sleepAfter: it stays running
    const end = Date.now() + 7000;
    while (Date.now() < end) {
      await s.renewActivityTimeout();
      assert.equal((await s.getInfo()).state, 'running');
      await new Promise((r) => setTimeout(r, 300));
    }
    // without them it sleeps, and a renewal leaves it asleep
    await until(s, 'sleeping', 15_000);
    await s.renewActivityTimeout();
    assert.equal((await s.getInfo()).state, 'sleeping');
    // a sandbox that does not exist is not created
    const none = sb('life-renew-none');
    await none.renewActivityTimeout();
    await rejectsWith(none.getInfo(), SandboxNotFoundError);
  });

  test('sleep() puts it to sleep now, keepAlive notwithstanding; the next exec wakes it', async () => {
    const s = sb('life-sleep', { keepAlive: true });
    await s.exec('echo kept > /workspace/sleep.txt');
    const info = await s.sleep();
    assert.equal(info.id, s.id);
    assert.equal(info.state, 'sleeping');
    assert.equal(info.keepAlive, true);
    assert.equal((await s.getInfo()).state, 'sleeping');
    assert.equal((await s.sleep()).state, 'sleeping'); // a sleeping one: as it is
    assert.equal((await s.exec('cat /workspace/sleep.txt')).stdout, 'kept\n');
    assert.equal((await s.getInfo()).state, 'running');
  });

  test('isPortExposed: a port whose sandbox restarted (stale) is not exposed', async () => {
    const s = sb('life-stale', { sleepAfter: 1 });
    await s.exposePort(8090);
    assert.equal(await s.isPortExposed(8090), true);
    await until(s, 'sleeping', 15_000);
    await s.exec('true'); // woken: a new run, the URL of the old one is stale
    const listed = (await s.getExposedPorts()).find((p) => p.port === 8090);
    assert.equal(listed?.status, 'stale');
    assert.equal(await s.isPortExposed(8090), false);
    await s.exposePort(8090); // exposing again restores it
    assert.equal(await s.isPortExposed(8090), true);
    assert.equal(await s.isPortExposed(8091), false);
  });
});

describe('startAndWaitForPorts and containerFetch', { skip }, () => {
  test('startAndWaitForPorts: starts with the options, waits for the ports, times out', async () => {
    const s = sb('life-ports', { labels: { waited: 'yes' } });
    await rejectsWith(s.getInfo(), SandboxNotFoundError);
    await s.startAndWaitForPorts(); // no ports: started
    assert.deepEqual((await s.getInfo()).labels, { waited: 'yes' });
    await s.startProcess('sleep 1; exec python3 -m http.server 8123 --bind 127.0.0.1');
    await s.startAndWaitForPorts(8123, { portReadyTimeoutMS: 30_000 });
    // the listener is up once it resolves (it starts a second after the process)
    const probe = await s.exec(`python3 -c "import socket; socket.create_connection(('127.0.0.1', 8123), 2)"`);
    assert.equal(probe.exitCode, 0, probe.stderr);
    await s.startAndWaitForPorts({ ports: [8123], startOptions: { envVars: { STARTED_WITH: 'env' } } });
    assert.equal((await s.exec('echo $STARTED_WITH')).stdout, 'env\n');
    const e = await rejectsWith(
      s.startAndWaitForPorts([8123, 8124], { portReadyTimeoutMS: 1500, waitInterval: 100 }),
      ProcessReadyTimeoutError,
      'PROCESS_READY_TIMEOUT',
    );
    assert.equal(e.context.port, 8124);
    const ctl = new AbortController();
    setTimeout(() => ctl.abort(new Error('given up')), 300);
    await assert.rejects(s.startAndWaitForPorts(8125, { abort: ctl.signal }), /given up/);
    await rejectsWith(s.startAndWaitForPorts(0), InvalidPortError);
    // the waits' own processes are gone
    await waitFor(
      async () => (await s.listProcesses()).filter((p) => p.id.startsWith('cella-port-wait-')).every((p) => p.status !== 'running'),
      10_000,
      'the wait processes killed',
    );
  });

  test('containerFetch: a request to an exposed port of the sandbox', async () => {
    const s = sb('life-cfetch');
    await s.writeFile('site/hello.txt', 'hello from the sandbox');
    const web = await s.startProcess('python3 -m http.server 8130 --bind 127.0.0.1 --directory /workspace/site');
    await web.waitForPort(8130, { timeout: 30_000 });
    // not exposed: refused, naming exposePort
    const e = await rejectsWith(s.containerFetch(new Request('http://app/hello.txt'), 8130), PortNotExposedError, 'PORT_NOT_EXPOSED');
    assert.match(e.message + String(e.suggestion), /exposePort\(8130\)/);
    await s.exposePort(8130);
    const r = await s.containerFetch(new Request('http://app/hello.txt?x=1'), 8130);
    assert.equal(r.status, 200);
    assert.equal(await r.text(), 'hello from the sandbox');
    const missing = await s.containerFetch('http://app/nope.txt', { method: 'GET' }, 8130);
    assert.equal(missing.status, 404);
    await missing.body?.cancel();
    // no port, or a bad one
    await rejectsWith(s.containerFetch(new Request('http://app/')), InvalidPortError);
    await rejectsWith(s.containerFetch(new Request('http://app/'), 3000), InvalidPortError);
    // an upgrade is wsConnect's
    const up = await s.containerFetch(
      new Request('http://app/chat', { headers: { upgrade: 'websocket', connection: 'Upgrade' } }),
      8130,
    );
    assert.equal(getUpgradeTarget(up)?.kind, 'ws');
  });
});

describe('methods cella does not have: NotSupportedError naming an alternative', { skip }, () => {
  const s = sb('life-h');
  test('mountBucket, unmountBucket, tunnels', async () => {
    const calls: Array<[string, () => Promise<unknown>]> = [
      ['mountBucket', () => s.mountBucket('bucket', '/mnt/b', { endpoint: 'https://s3.example' })],
      ['unmountBucket', () => s.unmountBucket('/mnt/b')],
      ['tunnels.get', () => s.tunnels.get(8080)],
      ['tunnels.list', () => s.tunnels.list()],
      ['tunnels.destroy', () => s.tunnels.destroy(8080)],
      ['stop', () => s.stop()],
      ['checkChanges', () => s.checkChanges('/workspace')],
      ['cleanupCompletedProcesses', () => s.cleanupCompletedProcesses()],
    ];
    for (const [what, call] of calls) {
      const e = await rejectsWith(call, NotSupportedError, 'NOT_SUPPORTED');
      assert.equal(e.httpStatus, 501, what);
      assert.ok(e.message.includes(what), `${what}: ${e.message}`);
      assert.ok(typeof e.suggestion === 'string' && e.suggestion.length > 10, `${what}: no alternative named`);
      assert.ok(e.message.includes(e.suggestion!), `${what}: the message names the alternative`);
    }
    // each says why, and only the Cloudflare features name Cloudflare
    const reason = async (call: () => Promise<unknown>) => (await rejectsWith(call, NotSupportedError)).message;
    assert.match(await reason(() => s.mountBucket('bucket', '/mnt/b')), /R2/);
    assert.match(await reason(() => s.tunnels.list()), /cloudflared/);
    for (const [what, call] of calls.filter(([w]) => ['stop', 'checkChanges', 'cleanupCompletedProcesses'].includes(w))) {
      const m = await reason(call);
      assert.doesNotMatch(m, /Cloudflare/, `${what}: ${m}`);
      assert.match(m, /cellad (has no|keeps no)/, `${what}: ${m}`);
    }
    // the session's delegates too
    const session = await s.getSession('ns');
    await rejectsWith(session.mountBucket('b', '/mnt'), NotSupportedError);
  });
});

describe('gitCheckout', { skip }, () => {
  const s = sb('life-git');

  test('bad input: an invalid URL, cloneTimeoutMs 0', async () => {
    for (const url of ['file:///etc', '/etc', 'ext::sh -c id', '-upload-pack=x', 'ftp://host/repo.git', 'https://host/a b.git']) {
      const e = await rejectsWith(s.gitCheckout(url), InvalidGitUrlError, 'INVALID_GIT_URL');
      assert.equal(e.httpStatus, 400, url);
    }
    for (const t of [0, -1, 1.5, Number.NaN]) {
      await rejectsWith(s.gitCheckout('https://example.com/r.git', { cloneTimeoutMs: t }), ValidationFailedError, 'VALIDATION_FAILED');
    }
  });

  test('clones from a repository served on the sandbox loopback', async () => {
    const setup = await s.exec(`set -e
      mkdir -p /srv/git /tmp/w && cd /tmp/w
      git init -q -b main . && git config user.email t@t && git config user.name t
      echo one > a.txt && git add a.txt && git commit -q -m one
      git checkout -q -b dev && echo dev > dev.txt && git add dev.txt && git commit -q -m dev
      git checkout -q main
      git init -q --bare -b main /srv/git/repo.git
      git push -q /srv/git/repo.git main dev
      git -C /srv/git/repo.git update-server-info`);
    assert.equal(setup.exitCode, 0, setup.stderr);
    const srv = await s.startProcess('python3 -m http.server 8000 --bind 127.0.0.1 --directory /srv/git');
    await srv.waitForPort(8000, { timeout: 30_000 });
    const url = 'http://127.0.0.1:8000/repo.git';
    const r = await s.gitCheckout(url);
    assert.equal(r.success, true);
    assert.equal(r.repoUrl, url);
    assert.equal(r.branch, 'main');
    assert.equal(r.targetDir, '/workspace/repo');
    assert.ok(isIsoTime(r.timestamp));
    assert.equal((await s.readFile('repo/a.txt')).content, 'one\n');
    const d = await s.gitCheckout(url, { branch: 'dev', targetDir: 'src/dev', cloneTimeoutMs: 60_000 });
    assert.equal(d.branch, 'dev');
    assert.equal(d.targetDir, '/workspace/src/dev');
    assert.equal((await s.exists('src/dev/dev.txt')).exists, true);
    await rejectsWith(s.gitCheckout(url, { branch: 'nope', targetDir: 'x1' }), GitBranchNotFoundError, 'GIT_BRANCH_NOT_FOUND');
    await rejectsWith(
      s.gitCheckout('http://127.0.0.1:8000/missing.git', { targetDir: 'x2' }),
      GitRepositoryNotFoundError,
      'GIT_REPOSITORY_NOT_FOUND',
    );
    // credentials in the URL are not repeated
    const c = await s.gitCheckout('http://user:secret@127.0.0.1:8000/repo.git', { targetDir: 'x3' });
    assert.ok(!c.repoUrl.includes('secret'), c.repoUrl);
    await srv.kill();
  });
});
