// Sessions (hosted SDK §6) and environment variables (§5): createSession, getSession,
// deleteSession, listSessions, setEnvVars on the sandbox and on a session, and
// enableDefaultSession: false.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  CommandTimeoutError,
  SessionAlreadyExistsError,
  SessionDestroyedError,
  SessionNotFoundError,
  ValidationFailedError,
  type SessionInfo,
} from '../src/index.js';
import {
  assertErrorShape,
  destroyMade,
  isIsoTime,
  rejectsWith,
  running,
  sb,
  skip,
  waitFor,
} from './core-helpers.js';

after(destroyMade);

describe('sessions', { skip }, () => {
  const s = sb('sess-a');

  test('createSession: id, env, cwd, commandTimeoutMs', async () => {
    await s.exec('mkdir -p /workspace/proj/src');
    const session = await s.createSession({
      id: 'build',
      env: { SESS_CI: '1', SESS_DROPPED: undefined },
      cwd: '/workspace/proj',
      commandTimeoutMs: 800,
    });
    assert.equal(session.id, 'build');
    const r = await session.exec('pwd; echo "$SESS_CI [${SESS_DROPPED-unset}]"');
    assert.equal(r.exitCode, 0, r.stderr);
    assert.equal(r.stdout, '/workspace/proj\n1 [unset]\n');
    assert.equal(r.sessionId, 'build');
    // the session's commandTimeoutMs is its commands' default timeout
    const e = await rejectsWith(session.exec('sleep 311'), CommandTimeoutError, 'COMMAND_TIMEOUT');
    assert.equal(e.httpStatus, 408);
    // a request's own timeout wins
    const long = await session.exec('sleep 1.2; echo done', { timeout: 20_000 });
    assert.equal(long.stdout, 'done\n');
    // the session kept its state through the timeout
    assert.equal((await session.exec('pwd')).stdout, '/workspace/proj\n');
  });

  test('createSession without an id generates one', async () => {
    const session = await s.createSession();
    assert.equal(typeof session.id, 'string');
    assert.match(session.id, /^[A-Za-z0-9_.-]{1,64}$/);
    assert.equal((await session.exec('echo gen')).sessionId, session.id);
    const list = await s.listSessions();
    assert.ok(list.some((x) => x.id === session.id));
  });

  test('state persists within a session: cd, export, functions, aliases', async () => {
    const session = await s.createSession({ id: 'state' });
    await session.exec('cd /tmp && export SESS_MODE=fast');
    await session.exec('greet() { echo "hello $1"; }');
    await session.exec('shopt -s expand_aliases; alias ll="echo aliased"');
    const r = await session.exec('pwd; echo $SESS_MODE; greet you; ll');
    assert.equal(r.stdout, '/tmp\nfast\nhello you\naliased\n');
  });

  test('sessions are isolated from each other and from the default session', async () => {
    const a = await s.createSession({ id: 'iso-a' });
    const b = await s.createSession({ id: 'iso-b' });
    await a.exec('cd /tmp && export ISO=a && isofn() { echo a; }');
    const rb = await b.exec('pwd; echo "[$ISO]"; type isofn >/dev/null 2>&1 && echo has-fn || echo no-fn');
    assert.equal(rb.stdout, '/workspace\n[]\nno-fn\n');
    const rd = await s.exec('echo "[$ISO]"');
    assert.equal(rd.stdout, '[]\n');
    // but they share the filesystem
    await a.writeFile('/workspace/shared.txt', 'from a');
    assert.equal((await b.exec('cat /workspace/shared.txt')).stdout, 'from a');
  });

  test('getSession of an unknown id: created on first use', async () => {
    const session = await s.getSession('lazy-one');
    assert.equal(session.id, 'lazy-one');
    assert.ok(!(await s.listSessions()).some((x) => x.id === 'lazy-one'), 'getSession sends nothing');
    await session.exec('export LAZY=1; cd /tmp');
    const r = await session.exec('echo $LAZY; pwd');
    assert.equal(r.stdout, '1\n/tmp\n');
    assert.equal(r.sessionId, 'lazy-one');
    assert.ok((await s.listSessions()).some((x) => x.id === 'lazy-one'));
    // setEnvVars and startProcess on an unknown session create it as well
    const other = await s.getSession('lazy-env');
    await other.setEnvVars({ LAZY_ENV: 'yes' });
    assert.equal((await other.exec('echo $LAZY_ENV')).stdout, 'yes\n');
    const third = await s.getSession('lazy-proc');
    const p = await third.startProcess('echo from-proc');
    assert.equal((await p.waitForExit(20_000)).exitCode, 0);
  });

  test('a duplicate createSession is SessionAlreadyExistsError', async () => {
    await s.createSession({ id: 'dup' });
    const e = await rejectsWith(s.createSession({ id: 'dup' }), SessionAlreadyExistsError, 'SESSION_ALREADY_EXISTS');
    assertErrorShape(e, 'SESSION_ALREADY_EXISTS', 409);
  });

  test('deleteSession: result shape; its shell and background processes are killed', async () => {
    const session = await s.createSession({ id: 'doomed' });
    await session.exec('sleep 312 >/dev/null 2>&1 &');
    const proc = await session.startProcess('sleep 313');
    assert.equal(proc.sessionId, 'doomed');
    await waitFor(() => running(s, 'sleep 312'), 10_000, 'sleep 312 started');
    await waitFor(() => running(s, 'sleep 313'), 10_000, 'sleep 313 started');
    const r = await s.deleteSession('doomed');
    assert.deepEqual(Object.keys(r).sort(), ['sessionId', 'success', 'timestamp']);
    assert.equal(r.success, true);
    assert.equal(r.sessionId, 'doomed');
    assert.ok(isIsoTime(r.timestamp));
    await waitFor(async () => !(await running(s, 'sleep 312')), 15_000, 'the session child killed');
    await waitFor(async () => !(await running(s, 'sleep 313')), 15_000, 'the session process killed');
    assert.ok(!(await s.listSessions()).some((x) => x.id === 'doomed'));
    const st = await proc.getStatus();
    assert.notEqual(st, 'running');
  });

  test('deleting a session ends its running command with SessionDestroyedError', async () => {
    const session = await s.createSession({ id: 'busy-one' });
    const p = session.exec('sleep 314');
    const caught = rejectsWith(p, SessionDestroyedError, 'SESSION_DESTROYED');
    await waitFor(() => running(s, 'sleep 314'), 10_000, 'sleep 314 started');
    await s.deleteSession('busy-one');
    const e = await caught;
    assert.equal(e.httpStatus, 410);
    await waitFor(async () => !(await running(s, 'sleep 314')), 15_000, 'sleep 314 killed');
  });

  test('deleteSession refuses the default session, which keeps its state', async () => {
    await s.exec('export KEEP_DEFAULT=kept');
    const e = await rejectsWith(s.deleteSession('default'), ValidationFailedError, 'VALIDATION_FAILED');
    assert.equal(e.httpStatus, 400);
    assert.match(e.message, /default session/);
    assert.equal((await s.exec('echo $KEEP_DEFAULT')).stdout, 'kept\n');
  });

  test('deleteSession of an unknown session is SessionNotFoundError', async () => {
    await rejectsWith(s.deleteSession('never-was'), SessionNotFoundError, 'SESSION_NOT_FOUND');
  });

  test('session.setEnvVars affects only that session', async () => {
    const a = await s.createSession({ id: 'env-a' });
    const b = await s.createSession({ id: 'env-b' });
    await a.setEnvVars({ ONLY_A: 'a-value', EMPTY_A: '' });
    assert.equal((await a.exec('echo "$ONLY_A [${EMPTY_A-unset}]"')).stdout, 'a-value []\n');
    assert.equal((await b.exec('echo "[${ONLY_A-unset}]"')).stdout, '[unset]\n');
    assert.equal((await s.exec('echo "[${ONLY_A-unset}]"')).stdout, '[unset]\n');
    await a.setEnvVars({ ONLY_A: null, EMPTY_A: undefined });
    assert.equal((await a.exec('echo "[${ONLY_A-unset}] [${EMPTY_A-unset}]"')).stdout, '[unset] [unset]\n');
  });

  test('listSessions: SessionInfo fields', async () => {
    await s.createSession({ id: 'listed', cwd: '/tmp', commandTimeoutMs: 60_000 });
    const list = await s.listSessions();
    const one = list.find((x) => x.id === 'listed') as SessionInfo;
    assert.ok(one, JSON.stringify(list));
    assert.equal(one.cwd, '/tmp');
    assert.ok(isIsoTime(one.createdAt));
    assert.equal(one.running, true);
    assert.equal(one.busy, false);
    assert.equal(one.commandTimeoutMs, 60_000);
    for (const x of list) {
      assert.equal(typeof x.id, 'string');
      assert.equal(typeof x.cwd, 'string');
      assert.equal(typeof x.running, 'boolean');
      assert.equal(typeof x.busy, 'boolean');
    }
  });

  test('an invalid session id is ValidationFailedError', async () => {
    for (const bad of ['', 'has space', 'a/b', 'x'.repeat(65), 'semi;colon']) {
      await rejectsWith(s.createSession({ id: bad }), ValidationFailedError, 'VALIDATION_FAILED');
      await rejectsWith(s.getSession(bad), ValidationFailedError, 'VALIDATION_FAILED');
      await rejectsWith(s.deleteSession(bad), ValidationFailedError, 'VALIDATION_FAILED');
    }
    // the longest valid id
    const ok = await s.createSession({ id: 'x'.repeat(64) });
    assert.equal((await ok.exec('echo ok')).stdout, 'ok\n');
  });
});

describe('sandbox.setEnvVars', { skip }, () => {
  const s = sb('sess-b');

  test('sets for the default session, existing sessions, new sessions and processes; null/undefined unset', async () => {
    const before = await s.createSession({ id: 'existing' });
    assert.equal((await before.exec('echo "[${SBX_A-unset}]"')).stdout, '[unset]\n');
    await s.setEnvVars({ SBX_A: 'alpha', SBX_B: 'beta', SBX_EMPTY: '' });
    assert.equal((await s.exec('echo "$SBX_A $SBX_B [${SBX_EMPTY-unset}]"')).stdout, 'alpha beta []\n');
    assert.equal((await before.exec('echo "$SBX_A $SBX_B"')).stdout, 'alpha beta\n');
    const fresh = await s.createSession({ id: 'fresh' });
    assert.equal((await fresh.exec('echo "$SBX_A $SBX_B"')).stdout, 'alpha beta\n');
    const p = await s.startProcess('echo "$SBX_A"');
    await p.waitForExit(20_000);
    assert.equal((await p.getLogs()).stdout, 'alpha\n');

    await s.setEnvVars({ SBX_A: null, SBX_B: undefined });
    assert.equal((await s.exec('echo "[${SBX_A-unset}] [${SBX_B-unset}]"')).stdout, '[unset] [unset]\n');
    assert.equal((await before.exec('echo "[${SBX_A-unset}]"')).stdout, '[unset]\n');
    assert.equal((await fresh.exec('echo "[${SBX_B-unset}]"')).stdout, '[unset]\n');
    // a session's own variable wins over nothing: it is not touched by an unrelated set
    await fresh.setEnvVars({ MINE: 'm' });
    await s.setEnvVars({ OTHER: 'o' });
    assert.equal((await fresh.exec('echo "$MINE $OTHER"')).stdout, 'm o\n');
  });

  test('a bad variable name is ValidationFailedError', async () => {
    await rejectsWith(s.setEnvVars({ '1BAD': 'x' }), ValidationFailedError, 'VALIDATION_FAILED');
    await rejectsWith(s.setEnvVars({ 'A-B': 'x' }), ValidationFailedError, 'VALIDATION_FAILED');
  });
});

describe('enableDefaultSession: false', { skip }, () => {
  const s = sb('sess-c', { enableDefaultSession: false });

  test('each exec without a session is a fresh shell; nothing persists', async () => {
    const info = await (async () => {
      await s.exec('true');
      return s.getInfo();
    })();
    assert.equal(info.enableDefaultSession, false);
    await s.exec('cd /tmp && export FRESH_X=1 && fn() { :; }');
    const r = await s.exec('pwd; echo "[${FRESH_X-unset}]"; type fn >/dev/null 2>&1 && echo fn || echo no-fn');
    assert.equal(r.stdout, '/workspace\n[unset]\nno-fn\n');
    // `exit 3` is just an exit code here: there is no session to terminate
    const e = await s.exec('exit 3');
    assert.equal(e.exitCode, 3);
    assert.equal(e.success, false);
    // named sessions still keep their state
    const named = await s.createSession({ id: 'named' });
    await named.exec('export KEPT=yes');
    assert.equal((await named.exec('echo $KEPT')).stdout, 'yes\n');
    // the sandbox's env reaches the sessionless commands
    await s.setEnvVars({ SBX_FRESH: 'v' });
    assert.equal((await s.exec('echo $SBX_FRESH')).stdout, 'v\n');
    // without a default session, a session named `default` is one like any other
    await s.createSession({ id: 'default' });
    assert.equal((await s.deleteSession('default')).sessionId, 'default');
  });
});
