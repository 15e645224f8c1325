// Snapshots and fork (docs/api.md "Snapshots and fork", decision 0052): createSnapshot,
// fork answering the child's handle, getSandbox(..., { fromSnapshot }), listing, getting
// and deleting snapshots on the namespace, and cellad's 404/409 answers as the snapshot
// error classes. Every snapshot a test makes is deleted by after(), its sandboxes first.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  SandboxError,
  SandboxNotFoundError,
  SandboxSecurityError,
  SnapshotError,
  SnapshotInUseError,
  SnapshotNotFoundError,
  ValidationFailedError,
  connect,
  getSandbox,
  type Sandbox,
  type SnapshotInfo,
} from '../src/index.js';
import { createSandboxError } from '../src/errors.js';
import { assertErrorShape, destroyMade, env, isIsoTime, ns, rejectsWith, sandboxName, sb, skip, throwsWith } from './core-helpers.js';

const children: Sandbox[] = [];
const snaps = new Set<string>();

after(async () => {
  if (!env.available) return;
  for (const c of children) await c.destroy().catch(() => undefined);
  await destroyMade();
  // a snapshot taken of a sandbox made from another is that one's child: newest first
  const mine = (await ns().listSnapshots()).filter((s) => snaps.has(s.snapshotId)).reverse();
  for (const s of mine) await ns().deleteSnapshot(s.snapshotId).catch(() => undefined);
});

/** A run-unique snapshot name (snapshot names are global to the daemon). */
function snapName(suffix: string): string {
  return sandboxName(`snap-${suffix}`);
}

function keep(s: SnapshotInfo): SnapshotInfo {
  snaps.add(s.snapshotId);
  return s;
}

/** A handle on a child made by the test (destroyed by after()). */
function child(s: Sandbox): Sandbox {
  children.push(s);
  return s;
}

describe('the snapshot error classes', () => {
  test('SNAPSHOT_NOT_FOUND and SNAPSHOT_IN_USE map to their classes', () => {
    const resp = (code: string, httpStatus: number) => ({ code, message: code, context: {}, httpStatus, timestamp: '' });
    const nf = createSandboxError(resp('SNAPSHOT_NOT_FOUND', 404));
    assert.ok(nf instanceof SnapshotNotFoundError);
    assert.ok(nf instanceof SnapshotError);
    assert.ok(nf instanceof SandboxError);
    assert.equal(nf.name, 'SnapshotNotFoundError');
    const iu = createSandboxError(resp('SNAPSHOT_IN_USE', 409));
    assert.ok(iu instanceof SnapshotInUseError);
    assert.ok(iu instanceof SnapshotError);
    assert.ok(!(iu instanceof SnapshotNotFoundError));
    assert.equal(iu.httpStatus, 409);
  });

  test('references and names that cannot be sent are refused before any request', async () => {
    let sent = 0;
    const fake = connect({
      url: 'http://127.0.0.1:9',
      fetch: (async () => {
        sent++;
        return new Response('{}');
      }) as typeof fetch,
    });
    for (const bad of ['', '.', '..']) {
      await rejectsWith(fake.getSnapshot(bad), ValidationFailedError, 'VALIDATION_FAILED');
      await rejectsWith(fake.deleteSnapshot(bad), ValidationFailedError, 'VALIDATION_FAILED');
    }
    const s = getSandbox(fake, 'snap-offline');
    for (const bad of ['Upper', '-lead', 'www', 'x'.repeat(64)])
      await rejectsWith(s.fork({ name: bad }), SandboxSecurityError, 'INVALID_SANDBOX_NAME');
    await rejectsWith(s.fork(undefined as never), ValidationFailedError, 'VALIDATION_FAILED');
    assert.equal(sent, 0);
  });
});

describe('snapshots and fork against cellad', { skip }, () => {
  test('a snapshot, then a fork: the child sees the files, each side its own writes', async () => {
    const parent = sb('snap-parent');
    await parent.writeFile('app/state.txt', 'before\n');
    await parent.exec('mkdir -p /opt/deps && echo installed > /opt/deps/marker');

    const snap = keep(await parent.createSnapshot({ name: snapName('a') }));
    assert.match(snap.snapshotId, /^snap-[0-9a-f]{16}$/);
    assert.equal(snap.name, snapName('a'));
    assert.equal(snap.sandbox, parent.id);
    assert.equal(typeof snap.image, 'string');
    assert.ok(snap.image.length > 0);
    assert.equal(typeof snap.sizeBytes, 'number');
    assert.ok(snap.sizeBytes > 0);
    assert.ok(isIsoTime(snap.createdAt));

    // the parent goes on; the fork is its files now, not at the snapshot
    await parent.writeFile('app/state.txt', 'after\n');
    const forked = child(await parent.fork({ name: sandboxName('snap-fork'), labels: { from: 'fork' } }));
    assert.equal(forked.id, sandboxName('snap-fork'));
    assert.equal((await forked.readFile('app/state.txt')).content, 'after\n');
    assert.equal((await forked.exec('cat /opt/deps/marker')).stdout, 'installed\n');
    const info = await forked.getInfo();
    assert.match(info.snapshot ?? '', /^snap-[0-9a-f]{16}$/);
    assert.notEqual(info.snapshot, snap.snapshotId);
    snaps.add(info.snapshot!);
    assert.deepEqual(info.labels, { from: 'fork' });
    assert.equal(info.image, snap.image);

    // writes of the child never reach the parent, and the other way round
    await forked.writeFile('app/child.txt', 'child\n');
    await parent.writeFile('app/parent.txt', 'parent\n');
    assert.equal((await parent.exists('app/child.txt')).exists, false);
    assert.equal((await forked.exists('app/parent.txt')).exists, false);

    // a sandbox from the named snapshot: the files as they were when it was taken
    const from = child(getSandbox(ns(), sandboxName('snap-from'), { fromSnapshot: snap.name }));
    assert.equal((await from.readFile('app/state.txt')).content, 'before\n');
    assert.equal((await from.getInfo()).snapshot, snap.snapshotId);
  });

  test('a fork without options cellad keeps sends nothing more; its handle recreates it from the snapshot', async () => {
    const calls: string[] = [];
    const counted = connect({
      url: env.url,
      token: env.token,
      fetch: ((input: RequestInfo | URL, init?: RequestInit) => {
        calls.push(`${init?.method ?? 'GET'} ${new URL(String(input)).pathname}`);
        return fetch(input, init);
      }) as typeof fetch,
    });
    const parent = getSandbox(counted, sandboxName('snap-p2'));
    children.push(parent);
    await parent.writeFile('seed.txt', 'seed\n');
    calls.length = 0;
    // containerTimeouts stays in the client: no PUT for it
    const c = child(await parent.fork({ name: sandboxName('snap-c2'), containerTimeouts: { portReadyTimeoutMS: 5000 } }));
    assert.equal((await c.exec('cat seed.txt')).stdout, 'seed\n');
    assert.deepEqual(calls, [
      `POST /v1/sandboxes/${parent.id}/fork`,
      `POST /v1/sandboxes/${c.id}/exec`,
    ]);
    snaps.add((await c.getInfo()).snapshot!);
    // destroyed, the handle makes it again from the fork's snapshot
    await c.writeFile('only-here.txt', 'x');
    await c.destroy();
    assert.equal((await c.exec('cat seed.txt; test -e only-here.txt || echo gone')).stdout, 'seed\ngone\n');
  });

  test('listing, getting by id or name, the 404s and 409s, deleting', async () => {
    const parent = sb('snap-list');
    await parent.writeFile('f.txt', 'listed\n');
    const named = keep(await parent.createSnapshot({ name: snapName('l') }));
    const unnamed = keep(await parent.createSnapshot());
    assert.equal(unnamed.name, unnamed.snapshotId);

    const all = await ns().listSnapshots();
    const ids = all.map((s) => s.snapshotId);
    assert.ok(ids.includes(named.snapshotId) && ids.includes(unnamed.snapshotId));
    assert.ok(ids.indexOf(named.snapshotId) < ids.indexOf(unnamed.snapshotId), 'oldest first');
    const ofParent = await ns().listSnapshots({ sandbox: parent.id });
    assert.deepEqual(
      ofParent.map((s) => s.snapshotId),
      [named.snapshotId, unnamed.snapshotId],
    );
    assert.deepEqual(await parent.listSnapshots(), ofParent);
    assert.deepEqual(await ns().listSnapshots({ sandbox: sandboxName('snap-none') }), []);
    assert.deepEqual(await ns().getSnapshot(named.snapshotId), named);
    assert.deepEqual(await ns().getSnapshot(named.name), named);

    // 404: no such snapshot, through every route that names one
    const e = await rejectsWith(ns().getSnapshot(snapName('missing')), SnapshotNotFoundError, 'SNAPSHOT_NOT_FOUND');
    assertErrorShape(e, 'SNAPSHOT_NOT_FOUND', 404);
    assert.equal(e.operation, 'snapshot.get');
    await rejectsWith(ns().deleteSnapshot(snapName('missing')), SnapshotNotFoundError, 'SNAPSHOT_NOT_FOUND');
    const ghost = getSandbox(ns(), sandboxName('snap-ghost'), { fromSnapshot: snapName('missing') });
    children.push(ghost);
    await rejectsWith(ghost.exec('true'), SnapshotNotFoundError, 'SNAPSHOT_NOT_FOUND');

    // 400: a taken snapshot name, a fork onto an existing sandbox
    await rejectsWith(parent.createSnapshot({ name: named.name }), ValidationFailedError, 'VALIDATION_FAILED');
    await rejectsWith(parent.createSnapshot({ name: 'Bad Name' }), ValidationFailedError, 'VALIDATION_FAILED');
    const other = sb('snap-other');
    await other.exec('true');
    await rejectsWith(parent.fork({ name: other.id }), ValidationFailedError, 'VALIDATION_FAILED');

    // 409: in use while a sandbox made from it exists, whatever its state
    const user = child(getSandbox(ns(), sandboxName('snap-user'), { fromSnapshot: named.snapshotId }));
    assert.equal((await user.exec('cat f.txt')).stdout, 'listed\n');
    const busy = await rejectsWith(ns().deleteSnapshot(named.name), SnapshotInUseError, 'SNAPSHOT_IN_USE');
    assertErrorShape(busy, 'SNAPSHOT_IN_USE', 409);
    assert.ok(busy instanceof SnapshotError);
    assert.deepEqual(await ns().getSnapshot(named.snapshotId), named, 'a refused delete loses nothing');

    // a handle whose sandbox exists but was made from another snapshot
    const wrong = getSandbox(ns(), user.id, { fromSnapshot: unnamed.snapshotId });
    await rejectsWith(wrong.exec('true'), ValidationFailedError, 'VALIDATION_FAILED');

    // deleting, by name (answers the id) and by id
    await user.destroy();
    assert.deepEqual(await ns().deleteSnapshot(named.name), { snapshotId: named.snapshotId, deleted: true });
    await rejectsWith(ns().getSnapshot(named.snapshotId), SnapshotNotFoundError, 'SNAPSHOT_NOT_FOUND');
    assert.deepEqual(await ns().deleteSnapshot(unnamed.snapshotId), { snapshotId: unnamed.snapshotId, deleted: true });
    assert.deepEqual(await parent.listSnapshots(), []);
  });

  test('snapshots outlive their sandbox and are still listed under its name', async () => {
    const gone = sb('snap-gone');
    await gone.writeFile('kept.txt', 'kept\n');
    const s = keep(await gone.createSnapshot());
    await gone.destroy();
    assert.deepEqual(
      (await ns().listSnapshots({ sandbox: gone.id })).map((x) => x.snapshotId),
      [s.snapshotId],
    );
    const revived = child(getSandbox(ns(), sandboxName('snap-revived'), { fromSnapshot: s.snapshotId }));
    assert.equal((await revived.readFile('kept.txt')).content, 'kept\n');
    // a snapshot or a fork of a sandbox that does not exist: nothing is made
    await rejectsWith(gone.createSnapshot(), SandboxNotFoundError, 'SANDBOX_NOT_FOUND');
    await rejectsWith(gone.fork({ name: sandboxName('snap-orphan') }), SandboxNotFoundError, 'SANDBOX_NOT_FOUND');
    await rejectsWith(getSandbox(ns(), sandboxName('snap-orphan')).getInfo(), SandboxNotFoundError);
    await rejectsWith(gone.getInfo(), SandboxNotFoundError);
    throwsWith(() => getSandbox(ns(), 'Bad'), SandboxSecurityError, 'INVALID_SANDBOX_NAME');
  });
});
