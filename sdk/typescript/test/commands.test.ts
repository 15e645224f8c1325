// Commands: exec (buffered and streamed), execStream, execRaw, their results, errors and cancelling,
// against the harness's daemon (hosted SDK §2).
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  CommandError,
  CommandTimeoutError,
  RPCTransportError,
  SandboxError,
  SessionTerminatedError,
  ValidationFailedError,
  connect,
  getSandbox,
  isExecResult,
  parseSSEStream,
  type ExecEvent,
  type ExecResult,
} from '../src/index.js';
import { rawResult } from '../src/commands.js';
import {
  allEvents,
  assertErrorShape,
  destroyMade,
  env,
  isIsoTime,
  rejectsWith,
  running,
  sandboxName,
  sb,
  skip,
  waitFor,
  withTimeout,
} from './core-helpers.js';

after(destroyMade);

function assertExecResult(r: ExecResult, command: string, exitCode: number): void {
  assert.ok(isExecResult(r), JSON.stringify(r));
  assert.equal(r.command, command);
  assert.equal(r.exitCode, exitCode);
  assert.equal(r.success, exitCode === 0);
  assert.equal(typeof r.stdout, 'string');
  assert.equal(typeof r.stderr, 'string');
  assert.equal(typeof r.duration, 'number');
  assert.ok(r.duration >= 0 && Number.isFinite(r.duration), `duration ${r.duration}`);
  assert.ok(isIsoTime(r.timestamp), `timestamp ${r.timestamp}`);
}

describe('exec', { skip }, () => {
  const s = sb('cmd-a');

  test('result shape: stdout, stderr, exitCode, success, command, duration, timestamp', async () => {
    const cmd = 'echo hello; echo oops >&2';
    const r = await s.exec(cmd);
    assertExecResult(r, cmd, 0);
    assert.equal(r.stdout, 'hello\n');
    assert.equal(r.stderr, 'oops\n');
    // only the documented keys (plus the optional ones)
    for (const k of Object.keys(r))
      assert.ok(
        ['success', 'exitCode', 'stdout', 'stderr', 'command', 'duration', 'timestamp', 'sessionId', 'truncated'].includes(k),
        `unexpected key ${k}`,
      );
  });

  test('a non-zero exit is a result, not an error', async () => {
    const r = await s.exec('echo before; (exit 3)');
    assertExecResult(r, 'echo before; (exit 3)', 3);
    assert.equal(r.success, false);
    assert.equal(r.stdout, 'before\n');
    const f = await s.exec('false');
    assert.equal(f.exitCode, 1);
    assert.equal(f.success, false);
    const nf = await s.exec('no-such-command-xyz');
    assert.equal(nf.exitCode, 127);
    assert.match(nf.stderr, /not found/);
  });

  test('`exit 3` ends the session shell: SessionTerminatedError, then a fresh shell', async () => {
    await s.exec('cd /tmp && export CMD_A_STATE=kept');
    assert.equal((await s.exec('echo "$PWD $CMD_A_STATE"')).stdout, '/tmp kept\n');
    const e = await rejectsWith(s.exec('echo last words; exit 3'), SessionTerminatedError, 'SESSION_TERMINATED');
    assertErrorShape(e, 'SESSION_TERMINATED', 410);
    assert.equal(e.exitCode, 3);
    assert.equal(e.context.exitCode, 3);
    assert.equal(e.context.stdout, 'last words\n');
    assert.equal(e.sessionId, 'default');
    assert.equal(e.operation, 'command.execute');
    // the next command runs in a fresh shell: the cwd and the export are gone
    const r = await s.exec('echo "$PWD [$CMD_A_STATE]"');
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, '/workspace []\n');
  });

  test('env per command; not persisted; undefined and null dropped', async () => {
    const r = await s.exec('echo "$CMD_FOO/$CMD_BAR"', { env: { CMD_FOO: 'foo value', CMD_BAR: 'b=a=r' } });
    assert.equal(r.stdout, 'foo value/b=a=r\n');
    const after = await s.exec('echo "[$CMD_FOO]"');
    assert.equal(after.stdout, '[]\n');
    const d = await s.exec('echo "$CMD_KEEP-${CMD_U-unset}-${CMD_N-unset}"', {
      env: { CMD_KEEP: 'k', CMD_U: undefined, CMD_N: null },
    });
    assert.equal(d.exitCode, 0, d.stderr);
    assert.equal(d.stdout, 'k-unset-unset\n');
    const empty = await s.exec('echo "[${CMD_E-unset}]"', { env: { CMD_E: '' } });
    assert.equal(empty.stdout, '[]\n', 'an empty string is set, not dropped');
  });

  test('cwd per command; not persisted', async () => {
    assert.equal((await s.exec('pwd', { cwd: '/tmp' })).stdout, '/tmp\n');
    assert.equal((await s.exec('pwd')).stdout, '/workspace\n');
    await s.exec('mkdir -p /workspace/sub');
    assert.equal((await s.exec('pwd', { cwd: 'sub' })).stdout, '/workspace/sub\n');
    // a missing cwd is a failed command, not a hang
    const bad: unknown = await s.exec('pwd', { cwd: '/no/such/dir' }).catch((e: unknown) => e);
    if (bad instanceof Error) assert.ok(bad instanceof SandboxError, String(bad));
    else assert.notEqual((bad as ExecResult).exitCode, 0);
  });

  test('UTF-8 multi-byte output round-trips', async () => {
    const text = 'héllo wörld ✓ 日本語 🎉';
    const r = await s.exec(`printf '%s\\n' '${text}'; printf '%s' '${text}' >&2`);
    assert.equal(r.stdout, `${text}\n`);
    assert.equal(r.stderr, text);
    // a large multi-byte output (several frames) is not cut in a character
    const big = await s.exec("for i in $(seq 1 20000); do printf 'é✓🎉'; done");
    assert.equal(big.stdout, 'é✓🎉'.repeat(20000));
  });

  test('binary (non-UTF-8) output is decoded without throwing', async () => {
    const r = await s.exec("printf '\\377\\376ab\\000c'; printf '\\200' >&2");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout, '\ufffd\ufffdab\u0000c');
    assert.equal(r.stderr, '\ufffd');
  });

  test('timeout: CommandTimeoutError with the partial output; the sandbox still works', async () => {
    const e = await rejectsWith(s.exec('echo partial-out; echo partial-err >&2; sleep 303', { timeout: 700 }), CommandTimeoutError);
    assert.ok(e instanceof CommandError);
    assert.ok(e instanceof SandboxError);
    assertErrorShape(e, 'COMMAND_TIMEOUT', 408);
    assert.equal(e.context.stdout, 'partial-out\n');
    assert.match(String(e.context.stderr), /partial-err/);
    assert.equal(e.context.timeout, 700);
    // the command's tree was killed, the session goes on
    await waitFor(async () => !(await running(s, 'sleep 303')), 10_000, 'sleep 303 killed');
    const r = await s.exec('echo still here');
    assert.equal(r.stdout, 'still here\n');
  });

  test(
    "a timeout's partial output that is not UTF-8 is decoded like ExecResult's",
    async () => {
      const e = await rejectsWith(s.exec("printf '\\377ok'; sleep 310", { timeout: 500 }), CommandTimeoutError);
      assert.equal(e.context.stdout, '\ufffdok');
      const t = await rejectsWith(s.exec("printf '\\377ok'; exit 3"), SessionTerminatedError);
      assert.equal(t.context.stdout, '\ufffdok');
    },
  );

  test('an AbortSignal rejects with its reason and kills the command', async () => {
    const ac = new AbortController();
    const reason = new Error('enough waiting');
    const p = s.exec('sleep 304; echo never', { signal: ac.signal });
    await waitFor(() => running(s, 'sleep 304'), 15_000, 'sleep 304 started');
    ac.abort(reason);
    const err = await p.then(
      () => assert.fail('exec resolved after abort'),
      (e: unknown) => e,
    );
    assert.equal(err, reason);
    await waitFor(async () => !(await running(s, 'sleep 304')), 15_000, 'sleep 304 killed');
    // an already-aborted signal rejects at once
    const pre = AbortSignal.abort(new Error('pre-aborted'));
    await assert.rejects(s.exec('echo x', { signal: pre }), /pre-aborted/);
    assert.equal((await s.exec('echo after abort')).stdout, 'after abort\n');
  });

  test('an empty command is ValidationFailedError before any request', async () => {
    let requests = 0;
    const counting: typeof fetch = (input, init) => {
      requests++;
      return fetch(input, init);
    };
    const s2 = getSandbox(connect({ url: env.url, token: env.token, fetch: counting }), sandboxName('cmd-a'));
    for (const bad of ['', '   ', undefined as unknown as string, 42 as unknown as string]) {
      const e = await rejectsWith(s2.exec(bad), ValidationFailedError, 'VALIDATION_FAILED');
      assert.equal(e.httpStatus, 400);
      await rejectsWith(s2.execStream(bad), ValidationFailedError, 'VALIDATION_FAILED');
    }
    assert.equal(requests, 0);
  });

  test('onComplete on success, onError on failure (buffered)', async () => {
    let completed: ExecResult | undefined;
    let failed: Error | undefined;
    const r = await s.exec('echo cb', { onComplete: (x) => (completed = x), onError: (e) => (failed = e) });
    assert.equal(completed, r);
    assert.equal(failed, undefined);
    completed = undefined;
    await rejectsWith(
      s.exec('sleep 5', { timeout: 200, onComplete: (x) => (completed = x), onError: (e) => (failed = e) }),
      CommandTimeoutError,
    );
    assert.equal(completed, undefined);
    assert.ok((failed as unknown) instanceof CommandTimeoutError);
  });
});

describe('exec with stream: true and onOutput', { skip }, () => {
  const s = sb('cmd-b');

  test('callbacks in order, the result assembled, onComplete called', async () => {
    const calls: Array<[string, string]> = [];
    let completed: ExecResult | undefined;
    const cmd = 'for i in 1 2 3; do echo out$i; sleep 0.05; done; echo err1 >&2; printf "é✓"';
    const r = await s.exec(cmd, {
      stream: true,
      onOutput: (stream, data) => calls.push([stream, data]),
      onComplete: (x) => (completed = x),
    });
    assertExecResult(r, cmd, 0);
    assert.equal(r.stdout, 'out1\nout2\nout3\né✓');
    assert.equal(r.stderr, 'err1\n');
    assert.equal(
      calls.filter(([k]) => k === 'stdout').map(([, d]) => d).join(''),
      r.stdout,
    );
    assert.equal(
      calls.filter(([k]) => k === 'stderr').map(([, d]) => d).join(''),
      r.stderr,
    );
    // out1 comes before out2 before out3
    const joined = calls.map(([, d]) => d).join('');
    assert.ok(joined.indexOf('out1') < joined.indexOf('out2') && joined.indexOf('out2') < joined.indexOf('out3'));
    assert.equal(completed, r);
  });

  test('a non-zero exit is a result; binary output is decoded', async () => {
    const out: string[] = [];
    const r = await s.exec("printf '\\377x'; (exit 9)", { stream: true, onOutput: (_k, d) => out.push(d) });
    assert.equal(r.exitCode, 9);
    assert.equal(r.success, false);
    assert.equal(r.stdout, '\ufffdx');
    assert.equal(out.join(''), '\ufffdx');
  });

  test('onError on failure: a timeout and a terminated session', async () => {
    let failed: Error | undefined;
    let completed = false;
    const seen: string[] = [];
    const e = await rejectsWith(
      s.exec('echo partial; sleep 305', {
        stream: true,
        timeout: 600,
        onOutput: (_k, d) => seen.push(d),
        onError: (x) => (failed = x),
        onComplete: () => (completed = true),
      }),
      CommandTimeoutError,
      'COMMAND_TIMEOUT',
    );
    assert.equal(e.httpStatus, 408);
    assert.equal(e.context.stdout, 'partial\n');
    assert.equal(failed, e);
    assert.equal(completed, false);
    assert.ok(seen.join('').includes('partial'));

    failed = undefined;
    const t = await rejectsWith(
      s.exec('exit 6', { stream: true, onOutput: () => undefined, onError: (x) => (failed = x) }),
      SessionTerminatedError,
      'SESSION_TERMINATED',
    );
    assert.equal(t.exitCode, 6);
    assert.equal(t.httpStatus, 410);
    assert.equal(failed, t);
    assert.equal((await s.exec('echo fresh')).stdout, 'fresh\n');
  });

  test('an AbortSignal ends a streamed exec with its reason and kills the command', async () => {
    const ac = new AbortController();
    const reason = new Error('abort the stream');
    let failed: Error | undefined;
    const p = s.exec('echo begun; sleep 309', {
      stream: true,
      signal: ac.signal,
      onOutput: (_k, d) => {
        if (d.includes('begun')) ac.abort(reason);
      },
      onError: (e) => (failed = e),
    });
    const err = await withTimeout(
      p.then(
        () => new Error('resolved'),
        (e: unknown) => e,
      ),
      20_000,
      'aborted streamed exec',
    );
    assert.equal(err, reason);
    assert.equal(failed, reason);
    await waitFor(async () => !(await running(s, 'sleep 309')), 15_000, 'sleep 309 killed');
  });

  test('env, cwd and a session id are honoured on the streamed route', async () => {
    const out: string[] = [];
    const r = await s.exec('echo "$STREAM_V $(pwd)"', {
      stream: true,
      env: { STREAM_V: 'v1', STREAM_U: undefined },
      cwd: '/tmp',
      onOutput: (_k, d) => out.push(d),
    });
    assert.equal(r.stdout, 'v1 /tmp\n');
  });
});

describe('execStream + parseSSEStream', { skip }, () => {
  const s = sb('cmd-c');

  test('events: start, output, complete with exitCode', async () => {
    const cmd = 'echo one; echo two >&2; echo three';
    const events = await allEvents<ExecEvent>(await s.execStream(cmd));
    assert.ok(events.length >= 3, JSON.stringify(events));
    const first = events[0]!;
    const last = events[events.length - 1]!;
    assert.equal(first.type, 'start');
    assert.equal(first.command, cmd);
    assert.equal(typeof first.pid, 'number');
    assert.ok(isIsoTime(first.timestamp));
    assert.equal(last.type, 'complete');
    assert.equal(last.exitCode, 0);
    assert.ok(isIsoTime(last.timestamp));
    const mid = events.slice(1, -1);
    for (const ev of mid) {
      assert.ok(ev.type === 'stdout' || ev.type === 'stderr', JSON.stringify(ev));
      assert.equal(typeof ev.data, 'string');
      assert.ok(isIsoTime(ev.timestamp));
    }
    const stdout = mid.filter((e) => e.type === 'stdout').map((e) => e.data).join('');
    const stderr = mid.filter((e) => e.type === 'stderr').map((e) => e.data).join('');
    assert.equal(stdout, 'one\nthree\n');
    assert.equal(stderr, 'two\n');
  });

  test('a non-zero exit completes with its exitCode', async () => {
    const events = await allEvents<ExecEvent>(await s.execStream('(exit 4)'));
    const last = events[events.length - 1]!;
    assert.equal(last.type, 'complete');
    assert.equal(last.exitCode, 4);
  });

  test('a timeout is an error event with code COMMAND_TIMEOUT', async () => {
    const events = await allEvents<ExecEvent>(await s.execStream('echo t; sleep 306', { timeout: 500 }));
    const last = events[events.length - 1]!;
    assert.equal(events[0]!.type, 'start');
    assert.equal(last.type, 'error', JSON.stringify(events));
    assert.equal(last.code, 'COMMAND_TIMEOUT');
    assert.equal(typeof last.error, 'string');
    assert.ok(events.some((e) => e.type === 'stdout' && e.data === 't\n'));
    await waitFor(async () => !(await running(s, 'sleep 306')), 10_000, 'sleep 306 killed');
  });

  test('binary output arrives base64 with encoding: base64', async () => {
    const events = await allEvents<ExecEvent>(await s.execStream("printf '\\377\\001'"));
    const out = events.filter((e) => e.type === 'stdout');
    assert.ok(out.length >= 1);
    const bytes = Buffer.concat(out.map((e) => (e.encoding === 'base64' ? Buffer.from(e.data!, 'base64') : Buffer.from(e.data!))));
    assert.deepEqual([...bytes], [0xff, 0x01]);
  });

  test('breaking out of the loop cancels the stream and kills the command', async () => {
    const stream = await s.execStream('echo started; sleep 307');
    let sawStart = false;
    await withTimeout(
      (async () => {
        for await (const ev of parseSSEStream<ExecEvent>(stream)) {
          if (ev.type === 'start') sawStart = true;
          if (ev.type === 'stdout') break;
        }
      })(),
      20_000,
      'reading until the first output',
    );
    assert.ok(sawStart);
    await waitFor(async () => !(await running(s, 'sleep 307')), 15_000, 'sleep 307 killed after cancel');
    assert.equal((await s.exec('echo next')).stdout, 'next\n');
  });

  test('an AbortSignal given to parseSSEStream cancels too', async () => {
    const ac = new AbortController();
    const stream = await s.execStream('echo go; sleep 308');
    const reason = new Error('stop reading');
    const seen: string[] = [];
    const err = await withTimeout(
      (async () => {
        try {
          for await (const ev of parseSSEStream<ExecEvent>(stream, ac.signal)) {
            seen.push(ev.type);
            if (ev.type === 'stdout') ac.abort(reason);
          }
        } catch (e) {
          return e;
        }
        return undefined;
      })(),
      20_000,
      'abort of parseSSEStream',
    );
    assert.equal(err, reason);
    await waitFor(async () => !(await running(s, 'sleep 308')), 15_000, 'sleep 308 killed after abort');
  });

  test('execStream in a session keeps the session state', async () => {
    const session = await s.createSession({ id: 'stream-sess' });
    await session.exec('export STREAMED=yes; cd /tmp');
    const events = await allEvents<ExecEvent>(await session.execStream('echo "$STREAMED $(pwd)"'));
    const out = events.filter((e) => e.type === 'stdout').map((e) => e.data).join('');
    assert.equal(out, 'yes /tmp\n');
  });
});

async function readAll(stream: ReadableStream<Uint8Array>): Promise<Buffer> {
  const parts: Uint8Array[] = [];
  const reader = stream.getReader();
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return Buffer.concat(parts);
    parts.push(value);
  }
}

describe('execRaw (cella: stdout as bytes, the end in trailers)', { skip }, () => {
  const s = sb('cmd-raw');

  test('stdout byte for byte; exit code, stderr and duration from the trailers', async () => {
    const raw = await s.execRaw(
      "head -c 3000000 /dev/urandom > /tmp/raw.bin; cat /tmp/raw.bin; printf 'e\\377rr' >&2; (exit 5)",
    );
    assert.ok(raw.pid > 0, `pid ${raw.pid}`);
    const got = await readAll(raw.stdout);
    const r = await raw.result;
    const want = Buffer.from((await s.exec('base64 -w0 /tmp/raw.bin')).stdout, 'base64');
    assert.equal(got.length, 3_000_000);
    assert.ok(got.equals(want), 'stdout differs from the file');
    assert.equal(r.exitCode, 5);
    assert.equal(r.success, false);
    assert.deepEqual([...r.stderr], [0x65, 0xff, 0x72, 0x72]);
    assert.equal(r.stderrTruncated, false);
    assert.equal(r.pid, raw.pid);
    assert.ok(r.duration >= 0);
  });

  test('more stderr than the trailer holds: its first 64 KiB, marked truncated', async () => {
    const raw = await s.execRaw("echo out; head -c 100000 /dev/zero | tr '\\0' e >&2");
    assert.equal((await readAll(raw.stdout)).toString(), 'out\n');
    const r = await raw.result;
    assert.equal(r.exitCode, 0);
    assert.equal(r.stderr.length, 65536);
    assert.ok(r.stderr.every((b) => b === 0x65));
    assert.equal(r.stderrTruncated, true);
  });

  test('a timeout rejects result with CommandTimeoutError after the output so far', async () => {
    const raw = await s.execRaw('echo before; sleep 309', { timeout: 500 });
    assert.equal((await readAll(raw.stdout)).toString(), 'before\n');
    await rejectsWith(raw.result, CommandTimeoutError, 'COMMAND_TIMEOUT');
    await waitFor(async () => !(await running(s, 'sleep 309')), 10_000, 'sleep 309 killed');
  });

  test('errors before the command starts reject execRaw itself', async () => {
    await rejectsWith(s.execRaw(''), ValidationFailedError, 'VALIDATION_FAILED');
    await rejectsWith(s.execRaw('true', { sessionId: 'no-such-raw-session' }), SandboxError, 'SESSION_NOT_FOUND');
  });

  test('cancelling stdout kills the command and rejects result', async () => {
    const raw = await s.execRaw('echo go; sleep 310');
    const reader = raw.stdout.getReader();
    const first = await reader.read();
    assert.equal(Buffer.from(first.value!).toString(), 'go\n');
    await reader.cancel();
    await rejectsWith(raw.result, RPCTransportError);
    await waitFor(async () => !(await running(s, 'sleep 310')), 15_000, 'sleep 310 killed after cancel');
    assert.equal((await s.exec('echo next')).stdout, 'next\n');
  });

  test('a session: its state, and SESSION_TERMINATED with the shell exit code', async () => {
    const session = await s.createSession({ id: 'raw-sess' });
    await session.exec('export RAWV=yes; cd /tmp');
    const raw = await session.execRaw('echo "$RAWV $(pwd)"');
    assert.equal((await readAll(raw.stdout)).toString(), 'yes /tmp\n');
    assert.equal((await raw.result).sessionId, 'raw-sess');
    const bye = await session.execRaw('echo bye; exit 7');
    assert.equal((await readAll(bye.stdout)).toString(), 'bye\n');
    const e = await rejectsWith(bye.result, SessionTerminatedError, 'SESSION_TERMINATED');
    assert.equal((e.context as { exitCode?: number }).exitCode, 7);
  });
});

describe('rawResult: the trailers of a raw exec, good and hostile (no daemon)', () => {
  const b64 = (s: string) => Buffer.from(s, 'latin1').toString('base64');

  test('exit code, stderr joined from its lines in order, truncation, duration', () => {
    const err = Buffer.from(Array.from({ length: 9000 }, (_, i) => i % 256));
    const e64 = err.toString('base64');
    const raw = ['Cella-Exit-Code', '3', 'Cella-Duration', '17'];
    for (let i = 0; i < e64.length; i += 3000) raw.push('Cella-Stderr', e64.slice(i, i + 3000));
    raw.push('cella-stderr-truncated', 'true');
    const r = rawResult('c', undefined, 42, raw);
    assert.deepEqual(
      [r.exitCode, r.success, r.duration, r.pid, r.stderrTruncated, Buffer.from(r.stderr).equals(err)],
      [3, false, 17, 42, true, true],
    );
  });

  test('the error the trailers name, as its class', () => {
    const t = ['Cella-Duration', '5', 'Cella-Stderr', b64('err'), 'Cella-Error-Code', 'COMMAND_TIMEOUT', 'Cella-Error-Message', 'timed out'];
    assert.throws(() => rawResult('c', undefined, 1, t), (e: unknown) => e instanceof CommandTimeoutError && e.message === 'timed out');
    const s = ['Cella-Exit-Code', '1', 'Cella-Error-Code', 'SESSION_TERMINATED'];
    assert.throws(
      () => rawResult('c', undefined, 1, s),
      (e: unknown) => e instanceof SessionTerminatedError && (e.context as { sessionId?: string }).sessionId === 'default',
    );
  });

  test('no trailers, no exit code, bad numbers or bad base64: transport errors, never a result', () => {
    const bad: (string[] | null)[] = [
      null,
      [],
      ['Cella-Duration', '1'],
      ['Cella-Exit-Code', 'x1'],
      ['Cella-Exit-Code', '1e3'],
      ['Cella-Exit-Code', '99999999999999999999'],
      ['Cella-Exit-Code', '0', 'Cella-Stderr', '!!!'],
      ['Cella-Exit-Code', '0', 'Cella-Stderr', 'YQ'],
      ['Cella-Exit-Code', '0', 'Cella-Stderr', 'YQ==', 'Cella-Stderr', 'YQ=='],
      ['Cella-Exit-Code'],
    ];
    for (const t of bad)
      assert.throws(() => rawResult('c', undefined, 1, t), (e: unknown) => e instanceof RPCTransportError, JSON.stringify(t));
  });
});
