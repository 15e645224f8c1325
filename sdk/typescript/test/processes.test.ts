// Background processes (hosted SDK §2 "Background processes"): startProcess and the
// Process object, list/get/kill, logs and log streams, the waits, callbacks and guards.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  NotSupportedError,
  ProcessAlreadyExistsError,
  ProcessExitedBeforeReadyError,
  ProcessNotFoundError,
  ProcessReadyTimeoutError,
  SandboxError,
  ValidationFailedError,
  isExecResult,
  isProcess,
  isProcessStatus,
  parseSSEStream,
  type LogEvent,
  type Process,
} from '../src/index.js';
import {
  allEvents,
  assertErrorShape,
  destroyMade,
  isIsoTime,
  rejectsWith,
  running,
  sb,
  skip,
  waitFor,
  withTimeout,
} from './core-helpers.js';

after(destroyMade);

function assertProcess(p: Process, command: string): void {
  assert.ok(isProcess(p));
  assert.equal(typeof p.id, 'string');
  assert.ok(p.id.length > 0);
  assert.equal(p.command, command);
  assert.ok(isProcessStatus(p.status), p.status);
  assert.ok(p.startTime instanceof Date);
  assert.ok(!Number.isNaN(p.startTime.getTime()));
  if (p.endTime !== undefined) assert.ok(p.endTime instanceof Date);
  for (const m of ['kill', 'getStatus', 'getLogs', 'waitForLog', 'waitForPort', 'waitForExit'] as const)
    assert.equal(typeof p[m], 'function', m);
}

const PY_SERVER = 'python3 -u -m http.server';

describe('startProcess and the Process object', { skip }, () => {
  const s = sb('proc-a');

  test('startProcess: id, pid, command, status running, startTime a Date', async () => {
    const cmd = 'sleep 320';
    const p = await s.startProcess(cmd);
    assertProcess(p, cmd);
    assert.equal(p.status, 'running');
    assert.equal(typeof p.pid, 'number');
    assert.ok(p.pid! > 0);
    assert.equal(p.exitCode, undefined);
    assert.ok(await running(s, 'sleep 320'));
    await p.kill();
    assert.equal(p.status, 'killed');
  });

  test('a custom processId; its duplicate is ProcessAlreadyExistsError', async () => {
    const p = await s.startProcess('sleep 321', { processId: 'my-proc.1' });
    assert.equal(p.id, 'my-proc.1');
    const e = await rejectsWith(s.startProcess('sleep 1', { processId: 'my-proc.1' }), ProcessAlreadyExistsError, 'PROCESS_ALREADY_EXISTS');
    assertErrorShape(e, 'PROCESS_ALREADY_EXISTS', 409);
    // by id and by numeric pid
    const byId = await s.getProcess('my-proc.1');
    assert.ok(byId);
    assert.equal(byId.pid, p.pid);
    const byPid = await s.getProcess(String(p.pid));
    assert.ok(byPid);
    assert.equal(byPid.id, 'my-proc.1');
    await s.killProcess('my-proc.1');
    assert.equal((await s.getProcess('my-proc.1'))!.status, 'killed');
  });

  test('env and cwd of a process; the empty command is ValidationFailedError', async () => {
    const p = await s.startProcess('echo "$PROC_V $(pwd)"', { env: { PROC_V: 'pv', PROC_U: undefined }, cwd: '/tmp' });
    assert.equal((await p.waitForExit(20_000)).exitCode, 0);
    assert.equal((await p.getLogs()).stdout, 'pv /tmp\n');
    await rejectsWith(s.startProcess(''), ValidationFailedError, 'VALIDATION_FAILED');
    await rejectsWith(s.startProcess('  '), ValidationFailedError, 'VALIDATION_FAILED');
  });

  test('a process that cannot start: status error', async () => {
    const p = await s.startProcess('true', { cwd: '/no/such/dir' }).catch((e: unknown) => e);
    if (p instanceof SandboxError) return; // refused up front is fine too
    const proc = p as Process;
    await waitFor(async () => (await proc.getStatus()) !== 'running', 10_000, 'bad cwd settles');
    assert.equal(await proc.getStatus(), 'error');
  });

  test('listProcesses (oldest first) and getProcess (unknown: null)', async () => {
    const a = await s.startProcess('echo list-a', { processId: 'list-a' });
    const b = await s.startProcess('sleep 322', { processId: 'list-b' });
    await a.waitForExit(20_000);
    const list = await s.listProcesses();
    for (const p of list) assertProcess(p, p.command);
    const ids = list.map((p) => p.id);
    assert.ok(ids.includes('list-a') && ids.includes('list-b'), ids.join(','));
    assert.ok(ids.indexOf('list-a') < ids.indexOf('list-b'), 'oldest first');
    const la = list.find((p) => p.id === 'list-a')!;
    assert.equal(la.status, 'completed');
    assert.equal(la.exitCode, 0);
    assert.ok(la.endTime instanceof Date);
    assert.equal(list.find((p) => p.id === 'list-b')!.status, 'running');
    const got = await s.getProcess('list-b');
    assert.ok(got);
    assertProcess(got, 'sleep 322');
    assert.equal(await s.getProcess('no-such-process'), null);
    await b.kill();
  });

  test('getProcessLogs and Process.getLogs, also for bytes that are not UTF-8', async () => {
    const p = await s.startProcess("echo out-line; echo err-line >&2; printf 'é✓'; printf '\\377' >&2", { processId: 'logs-1' });
    await p.waitForExit(20_000);
    const l = await s.getProcessLogs('logs-1');
    assert.deepEqual(l, { stdout: 'out-line\né✓', stderr: 'err-line\n\ufffd', processId: 'logs-1' });
    assert.deepEqual(await p.getLogs(), { stdout: 'out-line\né✓', stderr: 'err-line\n\ufffd' });
    await rejectsWith(s.getProcessLogs('no-such-process'), ProcessNotFoundError, 'PROCESS_NOT_FOUND');
  });

  test('streamProcessLogs: LogEvents with processId, then exit "Process completed with exit code 0"', async () => {
    const p = await s.startProcess('echo one; sleep 0.2; echo two >&2; sleep 0.2; echo three', { processId: 'stream-1' });
    const events = await withTimeout(allEvents<LogEvent>(await s.streamProcessLogs(p.id)), 30_000, 'log stream');
    const last = events[events.length - 1]!;
    assert.equal(last.type, 'exit');
    assert.equal(last.data, 'Process completed with exit code 0');
    assert.equal(last.exitCode, 0);
    assert.equal(last.processId, 'stream-1');
    for (const ev of events) {
      assert.equal(ev.processId, 'stream-1');
      assert.ok(isIsoTime(ev.timestamp), JSON.stringify(ev));
      assert.equal(typeof ev.data, 'string');
    }
    const out = events.filter((e) => e.type === 'stdout').map((e) => e.data).join('');
    const err = events.filter((e) => e.type === 'stderr').map((e) => e.data).join('');
    assert.equal(out, 'one\nthree\n');
    assert.equal(err, 'two\n');
    // after the end: the same replay
    const again = await allEvents<LogEvent>(await s.streamProcessLogs('stream-1'));
    assert.equal(again[again.length - 1]!.data, 'Process completed with exit code 0');
    // a failed process
    const f = await s.startProcess('exit 3');
    const fe = await allEvents<LogEvent>(await s.streamProcessLogs(f.id));
    assert.equal(fe[fe.length - 1]!.data, 'Process failed with exit code 3');
    assert.equal(fe[fe.length - 1]!.exitCode, 3);
    await rejectsWith(s.streamProcessLogs('no-such-process'), ProcessNotFoundError, 'PROCESS_NOT_FOUND');
  });

  test('cancelling a log stream ends only the stream', async () => {
    const p = await s.startProcess('while true; do echo tick; sleep 0.1; done', { processId: 'ticker' });
    const ac = new AbortController();
    const stream = await s.streamProcessLogs('ticker', { signal: ac.signal });
    let n = 0;
    for await (const ev of parseSSEStream<LogEvent>(stream)) {
      if (ev.type === 'stdout') n++;
      if (n >= 2) break;
    }
    assert.ok(n >= 2);
    assert.equal(await p.getStatus(), 'running');
    await p.kill();
  });

  test('a quiet log stream: breaking out and aborting do not wait for more output', async () => {
    const p = await s.startProcess('echo only-once; sleep 300', { processId: 'quiet' });
    const stream = await s.streamProcessLogs('quiet');
    await withTimeout(
      (async () => {
        for await (const ev of parseSSEStream<LogEvent>(stream)) if (ev.type === 'stdout') break;
      })(),
      10_000,
      'break out of a quiet log stream',
    );
    // a reader blocked on a quiet stream: the signal ends it with its reason
    const ac = new AbortController();
    const reason = new Error('no more logs');
    const s2 = await s.streamProcessLogs('quiet', { signal: ac.signal });
    const got: string[] = [];
    const reading = (async () => {
      try {
        for await (const ev of parseSSEStream<LogEvent>(s2)) {
          got.push(ev.data);
          if (ev.type === 'stdout') setTimeout(() => ac.abort(reason), 200);
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    assert.equal(await withTimeout(reading, 10_000, 'abort a quiet log stream'), reason);
    assert.deepEqual(got, ['only-once\n']);
    // reader.cancel() while a read is pending
    const s3 = await s.streamProcessLogs('quiet');
    const reader = s3.getReader();
    await reader.read();
    const pending = reader.read();
    await withTimeout(reader.cancel(), 10_000, 'cancel with a read pending');
    assert.equal((await pending).done, true);
    assert.equal(await p.getStatus(), 'running');
    await p.kill();
  });

  test('Process.kill: status killed; kill with SIGINT; killProcess', async () => {
    const p = await s.startProcess('sleep 323');
    await p.kill();
    assert.equal(p.status, 'killed');
    assert.equal(await p.getStatus(), 'killed');
    assert.ok(!(await running(s, 'sleep 323')));

    const py = await s.startProcess(
      `python3 -u -c "import signal,sys,time
signal.signal(signal.SIGINT, lambda *a: (print('got-sigint'), sys.exit(7)))
print('ready')
time.sleep(300)"`,
      { processId: 'int-me' },
    );
    await py.waitForLog('ready', 20_000);
    await py.kill('SIGINT');
    await waitFor(async () => (await py.getStatus()) !== 'running', 10_000, 'SIGINT handled');
    assert.match((await py.getLogs()).stdout, /got-sigint/);
    assert.equal(py.status, 'killed');

    const q = await s.startProcess('sleep 324', { processId: 'kill-me' });
    await s.killProcess('kill-me');
    assert.equal(await q.getStatus(), 'killed');
    await rejectsWith(s.killProcess('no-such-process'), ProcessNotFoundError, 'PROCESS_NOT_FOUND');
    await rejectsWith(s.killProcess(''), ValidationFailedError, 'VALIDATION_FAILED');
    // an unknown signal
    const r = await s.startProcess('sleep 325');
    await rejectsWith(r.kill('SIGNOPE'), ValidationFailedError, 'VALIDATION_FAILED');
    await r.kill();
  });

  test('getStatus: completed, failed', async () => {
    const ok = await s.startProcess('true');
    const bad = await s.startProcess('exit 3');
    await ok.waitForExit(20_000);
    await bad.waitForExit(20_000);
    assert.equal(await ok.getStatus(), 'completed');
    assert.equal(await bad.getStatus(), 'failed');
    assert.equal(bad.exitCode, 3);
    assert.ok(bad.endTime instanceof Date);
  });

  test('waitForExit: {exitCode}; its timeout', async () => {
    const p = await s.startProcess('sleep 0.3; exit 5');
    const r = await p.waitForExit(30_000);
    assert.deepEqual(r, { exitCode: 5 });
    assert.equal(p.status, 'failed');
    const z = await s.startProcess('true');
    assert.deepEqual(await z.waitForExit(), { exitCode: 0 });
    const long = await s.startProcess('sleep 326');
    const e = await rejectsWith(long.waitForExit(300), ProcessReadyTimeoutError, 'PROCESS_READY_TIMEOUT');
    assert.equal(e.httpStatus, 408);
    assert.equal(e.processId, long.id);
    assert.equal(e.command, 'sleep 326');
    assert.equal(e.condition, 'process exit');
    assert.equal(e.timeout, 300);
    await long.kill();
  });

  test('waitForLog with a string: the whole line', async () => {
    const p = await s.startProcess('echo starting; sleep 0.3; echo "Server ready on port 1234 (pid $$)"; sleep 300');
    const r = await p.waitForLog('ready on port', 20_000);
    assert.match(r.line, /^Server ready on port 1234 \(pid \d+\)$/);
    assert.equal(r.match, undefined);
    // output from before the wait counts
    const again = await p.waitForLog('starting');
    assert.equal(again.line, 'starting');
    // stderr too
    const e = await s.startProcess('echo to-stderr >&2; sleep 300');
    assert.equal((await e.waitForLog('to-stderr', 20_000)).line, 'to-stderr');
    await p.kill();
    await e.kill();
  });

  test('waitForLog with a RegExp: the whole line and the match groups', async () => {
    const p = await s.startProcess('echo boot; sleep 0.2; echo "listening at http://0.0.0.0:8123/ now"; sleep 300');
    const r = await p.waitForLog(/listening at http:\/\/([\d.]+):(\d+)/, 20_000);
    assert.equal(r.line, 'listening at http://0.0.0.0:8123/ now');
    assert.ok(r.match);
    assert.equal(r.match[1], '0.0.0.0');
    assert.equal(r.match[2], '8123');
    // flags are kept (i), g is dropped
    const r2 = await p.waitForLog(/BOOT/gi, 20_000);
    assert.equal(r2.line, 'boot');
    assert.equal(r2.match?.[0], 'boot');
    await p.kill();
  });

  test('waitForLog timeout: ProcessReadyTimeoutError with context', async () => {
    const p = await s.startProcess('echo nothing-useful; sleep 300', { processId: 'wait-timeout' });
    for (const pattern of ['never-printed', /never-(printed)/]) {
      const e = await rejectsWith(p.waitForLog(pattern, 400), ProcessReadyTimeoutError, 'PROCESS_READY_TIMEOUT');
      assertErrorShape(e, 'PROCESS_READY_TIMEOUT', 408);
      assert.equal(e.context.processId, 'wait-timeout');
      assert.equal(e.context.command, 'echo nothing-useful; sleep 300');
      assert.equal(typeof e.context.condition, 'string');
      assert.ok(e.context.condition.includes('never-'), e.context.condition);
      assert.equal(e.context.timeout, 400);
      assert.equal(e.processId, 'wait-timeout');
      assert.equal(e.timeout, 400);
    }
    await p.kill();
  });

  test('waitForLog on a process that exits first: ProcessExitedBeforeReadyError', async () => {
    for (const pattern of ['never-printed', /never-printed/]) {
      const p = await s.startProcess('echo bye; exit 2');
      const e = await rejectsWith(p.waitForLog(pattern, 20_000), ProcessExitedBeforeReadyError, 'PROCESS_EXITED_BEFORE_READY');
      assert.equal(e.processId, p.id);
      assert.equal(e.command, 'echo bye; exit 2');
      assert.equal(typeof e.condition, 'string');
      assert.equal(e.exitCode, 2);
    }
    // a match in the output of a process that has exited is still a match
    const done = await s.startProcess('echo found-it; exit 0');
    await done.waitForExit(20_000);
    assert.equal((await done.waitForLog('found-it')).line, 'found-it');
    assert.equal((await done.waitForLog(/found-(it)/)).match?.[1], 'it');
  });

  test('waitForPort: http and tcp (python3 -m http.server); its timeout', async () => {
    const p = await s.startProcess(`${PY_SERVER} 8321 --bind 127.0.0.1`, { cwd: '/tmp' });
    await p.waitForPort(8321, { timeout: 30_000 });
    await p.waitForPort(8321, { mode: 'http', path: '/', status: 200, timeout: 30_000 });
    await p.waitForPort(8321, { mode: 'http', status: { min: 200, max: 299 }, interval: 50, timeout: 30_000 });
    await p.waitForPort(8321, { mode: 'tcp', timeout: 30_000 });
    // a status it never answers
    const e1 = await rejectsWith(
      p.waitForPort(8321, { mode: 'http', path: '/no-such-page', status: 200, timeout: 800 }),
      ProcessReadyTimeoutError,
      'PROCESS_READY_TIMEOUT',
    );
    assert.equal(e1.processId, p.id);
    assert.equal(e1.timeout, 800);
    assert.match(e1.condition, /8321/);
    // nothing listens there
    const e2 = await rejectsWith(p.waitForPort(8399, { mode: 'tcp', timeout: 500 }), ProcessReadyTimeoutError);
    assert.equal(e2.context.command, p.command);
    await p.kill();
    // a process that exits before its port opens
    const q = await s.startProcess('sleep 0.2; exit 4');
    const e3 = await rejectsWith(q.waitForPort(8398, { mode: 'tcp', timeout: 20_000 }), ProcessExitedBeforeReadyError);
    assert.equal(e3.processId, q.id);
  });

  test('onStart, onOutput and onExit callbacks', async () => {
    const outputs: Array<[string, string]> = [];
    let started: Process | undefined;
    let exitCode: number | null | undefined;
    const exited = new Promise<void>((resolve) => {
      void s
        .startProcess('echo cb-out; echo cb-err >&2; sleep 0.2; exit 3', {
          onStart: (p) => (started = p),
          onOutput: (stream, data) => outputs.push([stream, data]),
          onExit: (code) => {
            exitCode = code;
            resolve();
          },
        })
        .then((p) => assert.equal(started, p));
    });
    await withTimeout(exited, 30_000, 'onExit');
    assert.ok(started);
    assert.equal(exitCode, 3);
    assert.equal(outputs.filter(([k]) => k === 'stdout').map(([, d]) => d).join(''), 'cb-out\n');
    assert.equal(outputs.filter(([k]) => k === 'stderr').map(([, d]) => d).join(''), 'cb-err\n');
    // onError of a start that fails
    let failed: Error | undefined;
    await rejectsWith(
      s.startProcess('sleep 1', { processId: 'bad id!', onError: (e) => (failed = e) }),
      ValidationFailedError,
    );
    assert.ok((failed as unknown) instanceof ValidationFailedError);
  });

  test('guards: isProcess, isProcessStatus, isExecResult', async () => {
    const p = await s.startProcess('true');
    assert.equal(isProcess(p), true);
    assert.equal(isProcess({ id: 'x', command: 'y', status: 'running' }), false);
    assert.equal(isProcess(null), false);
    assert.equal(isProcess('proc'), false);
    for (const st of ['starting', 'running', 'completed', 'failed', 'killed', 'error']) assert.equal(isProcessStatus(st), true);
    assert.equal(isProcessStatus('done'), false);
    assert.equal(isProcessStatus(undefined), false);
    const r = await s.exec('echo x');
    assert.equal(isExecResult(r), true);
    assert.equal(isExecResult({ ...r, exitCode: '0' }), false);
    assert.equal(isExecResult(p), false);
  });

  test('timeout and encoding are accepted and not enforced: the process runs on', async () => {
    const p = await s.startProcess('sleep 333', { timeout: 300, encoding: 'utf-8' });
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await p.getStatus(), 'running');
    await p.kill();
  });

  test('cleanupCompletedProcesses: NotSupportedError', async () => {
    const e = await rejectsWith(s.cleanupCompletedProcesses(), NotSupportedError, 'NOT_SUPPORTED');
    assert.equal(e.httpStatus, 501);
    assert.ok(e.message.length > 0);
    const session = await s.getSession('cleanup');
    await rejectsWith(session.cleanupCompletedProcesses(), NotSupportedError, 'NOT_SUPPORTED');
  });
});

describe('killAllProcesses', { skip }, () => {
  const s = sb('proc-b');

  test('answers how many running processes it killed', async () => {
    const done = await s.startProcess('true');
    await done.waitForExit(20_000);
    const a = await s.startProcess('sleep 330');
    const b = await s.startProcess('sleep 331');
    const session = await s.createSession({ id: 'ka' });
    const c = await session.startProcess('sleep 332');
    const n = await s.killAllProcesses();
    assert.equal(n, 3);
    // the answer comes once they were signalled; their end follows
    for (const p of [a, b, c]) await waitFor(async () => (await p.getStatus()) === 'killed', 10_000, `${p.command} killed`);
    assert.equal(await done.getStatus(), 'completed');
    assert.equal(await s.killAllProcesses(), 0);
  });
});
