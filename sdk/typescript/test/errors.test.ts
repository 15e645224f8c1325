// Errors (hosted SDK §11): the SandboxError shape, the code → class table, ids refused by
// getSandbox, auth, and the transport's failures: a daemon that is not there, a connection
// lost mid-stream (cellad SIGKILLed), and a Sandbox handle that outlives a daemon restart.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:net';
import { canRestart, restartDaemon } from './harness.js';
import {
  CommandError,
  CommandTimeoutError,
  ContainerUnavailableError,
  FileExistsError,
  FileNotFoundError,
  FileSystemError,
  InvalidGitUrlError,
  GitError,
  InsufficientStorageError,
  IsDirectoryError,
  NotDirectoryError,
  NoSpaceError,
  NotSupportedError,
  PermissionDeniedError,
  ProcessExitedBeforeReadyError,
  ProcessNotFoundError,
  ProcessReadyTimeoutError,
  RPCTransportError,
  SandboxError,
  SandboxSecurityError,
  SessionAlreadyExistsError,
  SessionDestroyedError,
  SessionTerminatedError,
  UnauthorizedError,
  ValidationFailedError,
  BucketMountError,
  BucketUnmountError,
  ContainerProxy,
  InterpreterNotReadyError,
  InvalidMountConfigError,
  MissingCredentialsError,
  RuntimeIdentityInactiveError,
  S3FSMountError,
  SandboxLifetimeChangedError,
  SessionInitInvalidatedError,
  connect,
  getSandbox,
  isDurableObjectCodeUpdateReset,
  isPlatformTransientError,
  parseSSEStream,
  type ExecEvent,
} from '../src/index.js';
import * as sdk from '../src/index.js';
import * as errorsModule from '../src/errors.js';
import { createSandboxError } from '../src/errors.js';
import {
  assertErrorShape,
  destroyMade,
  env,
  rejectsWith,
  running,
  sandboxName,
  sb,
  skip,
  throwsWith,
  waitFor,
  withTimeout,
} from './core-helpers.js';

after(destroyMade);

const resp = (code: string, httpStatus = 500, context: Record<string, unknown> = {}) => ({
  code,
  message: `a ${code}`,
  context,
  httpStatus,
  timestamp: '2026-11-25T01:02:03.456Z',
});

/** A namespace whose fetch answers `res` to everything (no daemon needed). */
function fake(res: () => Response | Promise<Response>) {
  return connect({ url: 'http://cellad.invalid:1', fetch: (async () => res()) as typeof fetch });
}

describe('SandboxError and createSandboxError (no daemon)', () => {
  test('the shape: code, message, context, httpStatus, timestamp, operation, toJSON', () => {
    const e = createSandboxError({ ...resp('FILE_NOT_FOUND', 404, { path: '/x' }), operation: 'file.read', suggestion: 'check it' });
    assert.ok(e instanceof FileNotFoundError);
    assert.ok(e instanceof SandboxError);
    assert.ok(e instanceof Error);
    assert.equal(e.name, 'FileNotFoundError');
    assert.equal(e.code, 'FILE_NOT_FOUND');
    assert.equal(e.message, 'a FILE_NOT_FOUND');
    assert.deepEqual(e.context, { path: '/x' });
    assert.equal(e.httpStatus, 404);
    assert.equal(e.timestamp, '2026-11-25T01:02:03.456Z');
    assert.equal(e.operation, 'file.read');
    assert.equal(e.suggestion, 'check it');
    assert.equal(e.documentation, undefined);
    assert.equal(e.errorResponse.code, 'FILE_NOT_FOUND');
    const j = e.toJSON();
    assert.equal(j.name, 'FileNotFoundError');
    assert.equal(j.code, 'FILE_NOT_FOUND');
    assert.equal(j.message, 'a FILE_NOT_FOUND');
    assert.deepEqual(j.context, { path: '/x' });
    assert.equal(j.httpStatus, 404);
    assert.equal(j.timestamp, '2026-11-25T01:02:03.456Z');
    assert.equal(j.operation, 'file.read');
    assert.equal(typeof j.stack, 'string');
    assert.deepEqual(JSON.parse(JSON.stringify(e)).context, { path: '/x' });
    assert.ok(String(e.stack).includes('FileNotFoundError'));
  });

  test('an unknown code gives a plain SandboxError with the code kept', () => {
    const e = createSandboxError(resp('SOMETHING_NEW', 418, { a: 1 }));
    assert.equal(e.constructor, SandboxError);
    assert.equal(e.name, 'SandboxError');
    assert.equal(e.code, 'SOMETHING_NEW');
    assert.equal(e.httpStatus, 418);
    assert.deepEqual(e.context, { a: 1 });
  });

  test('codes map to the hosted classes (and their bases)', () => {
    const table: Array<[string, Function, Function?]> = [
      ['FILE_EXISTS', FileExistsError],
      ['IS_DIRECTORY', IsDirectoryError, FileSystemError],
      ['NOT_DIRECTORY', NotDirectoryError, FileSystemError],
      ['PERMISSION_DENIED', PermissionDeniedError],
      ['COMMAND_TIMEOUT', CommandTimeoutError, CommandError],
      ['COMMAND_EXECUTION_ERROR', CommandError],
      ['PROCESS_NOT_FOUND', ProcessNotFoundError],
      ['PROCESS_READY_TIMEOUT', ProcessReadyTimeoutError],
      ['PROCESS_EXITED_BEFORE_READY', ProcessExitedBeforeReadyError],
      ['SESSION_ALREADY_EXISTS', SessionAlreadyExistsError],
      ['SESSION_DESTROYED', SessionDestroyedError],
      ['SESSION_TERMINATED', SessionTerminatedError],
      ['INVALID_GIT_URL', InvalidGitUrlError, GitError],
      ['VALIDATION_FAILED', ValidationFailedError],
      ['INVALID_SANDBOX_NAME', SandboxSecurityError],
      ['UNAUTHORIZED', UnauthorizedError],
      ['SANDBOX_UNAVAILABLE', ContainerUnavailableError],
      ['RPC_TRANSPORT_ERROR', RPCTransportError],
      ['NOT_SUPPORTED', NotSupportedError],
      ['NO_SPACE', NoSpaceError, FileSystemError],
      ['INSUFFICIENT_STORAGE', InsufficientStorageError],
    ];
    for (const [code, cls, base] of table) {
      const e = createSandboxError(resp(code));
      assert.ok(e instanceof (cls as any), `${code} → ${cls.name}, got ${e.constructor.name}`);
      if (base) assert.ok(e instanceof (base as any), `${code} → ${base.name}`);
      assert.equal(e.code, code);
    }
    const t = createSandboxError(resp('SESSION_TERMINATED', 410, { exitCode: 3, sessionId: 's' })) as SessionTerminatedError;
    assert.equal(t.exitCode, 3);
    assert.equal(t.sessionId, 's');
    const w = createSandboxError(
      resp('PROCESS_READY_TIMEOUT', 408, { processId: 'p', command: 'c', condition: 'x', timeout: 5 }),
    ) as ProcessReadyTimeoutError;
    assert.deepEqual([w.processId, w.command, w.condition, w.timeout], ['p', 'c', 'x', 5]);
  });

  test('an error answer that is not JSON keeps its status', async () => {
    const s = getSandbox(fake(() => new Response('<html>bad gateway</html>', { status: 502 })), 'fake-a');
    const e = await rejectsWith(s.exec('true'), SandboxError);
    assert.equal(e.httpStatus, 502);
    assert.equal(e.code, 'INTERNAL_ERROR');
    assert.match(e.message, /502/);
    const e4 = await rejectsWith(
      getSandbox(fake(() => new Response('nope', { status: 404 })), 'fake-b').exists('x'),
      SandboxError,
    );
    assert.equal(e4.httpStatus, 404);
    assert.equal(e4.code, 'UNKNOWN_ERROR');
  });

  test('a 2xx answer that is not JSON is RPCTransportError protocol_error', async () => {
    const s = getSandbox(fake(() => new Response('not json', { status: 200 })), 'fake-c');
    const e = await rejectsWith(s.exec('true'), RPCTransportError, 'RPC_TRANSPORT_ERROR');
    assert.equal(e.kind, 'protocol_error');
  });

  test('an error answer with a code is the class of the code, with the operation', async () => {
    const s = getSandbox(
      fake(() => new Response(JSON.stringify(resp('FILE_NOT_FOUND', 404)), { status: 404 })),
      'fake-d',
    );
    const e = await rejectsWith(s.readFile('x'), FileNotFoundError, 'FILE_NOT_FOUND');
    assert.equal(e.operation, 'file.read');
  });

  test('isPlatformTransientError and isDurableObjectCodeUpdateReset', async () => {
    const t = createSandboxError({ ...resp('RPC_TRANSPORT_ERROR', 503, { kind: 'peer_closed' }) });
    assert.equal(isPlatformTransientError(t), true);
    const kind = (k: string) => createSandboxError(resp('RPC_TRANSPORT_ERROR', 503, { kind: k }));
    assert.equal(isPlatformTransientError(kind('connection_failed')), true);
    assert.equal(isPlatformTransientError(kind('protocol_error')), false);
    assert.equal(isPlatformTransientError(kind('upgrade_failed')), false);
    assert.equal(isPlatformTransientError(createSandboxError(resp('SANDBOX_UNAVAILABLE', 503))), true);
    // any 503, not only ContainerUnavailableError: the interpreter starting, a proxy's 503
    const notReady = createSandboxError(resp('INTERPRETER_NOT_READY', 503));
    assert.ok(notReady instanceof InterpreterNotReadyError);
    assert.equal(isPlatformTransientError(notReady), true);
    const proxied = await rejectsWith(
      getSandbox(fake(() => new Response('Service Unavailable', { status: 503 })), 'fake-503').exec('true'),
      SandboxError,
    );
    assert.equal(proxied.httpStatus, 503);
    assert.equal(isPlatformTransientError(proxied), true);
    // a limit is not transient, nor is any other status
    assert.equal(isPlatformTransientError(createSandboxError(resp('SANDBOX_LIMIT_REACHED', 429))), false);
    assert.equal(isPlatformTransientError(createSandboxError(resp('FILE_NOT_FOUND', 404))), false);
    assert.equal(isPlatformTransientError(createSandboxError(resp('INTERNAL_ERROR', 500))), false);
    assert.equal(isPlatformTransientError(new Error('x')), false);
    assert.equal(isPlatformTransientError(undefined), false);
    assert.equal(isDurableObjectCodeUpdateReset(t), false);
  });

  test('the mount errors and the Durable Object fences: hosted names, codes, bases', () => {
    const table: Array<[string, Function]> = [
      ['BUCKET_MOUNT_ERROR', BucketMountError],
      ['S3FS_MOUNT_ERROR', S3FSMountError],
      ['BUCKET_UNMOUNT_ERROR', BucketUnmountError],
      ['MISSING_CREDENTIALS', MissingCredentialsError],
      ['INVALID_MOUNT_CONFIG', InvalidMountConfigError],
    ];
    for (const [code, cls] of table) {
      const e = createSandboxError(resp(code, code.startsWith('MISSING') || code.startsWith('INVALID') ? 400 : 500));
      assert.equal(e.constructor, cls, `${code} → ${cls.name}, got ${e.constructor.name}`);
      assert.ok(e instanceof BucketMountError, `${code}: a BucketMountError`);
      assert.equal(e.code, code);
      assert.equal(e.name, cls.name);
    }
    for (const cls of [RuntimeIdentityInactiveError, SandboxLifetimeChangedError, SessionInitInvalidatedError]) {
      const e = new cls(resp('INTERNAL_ERROR'));
      assert.ok(e instanceof SandboxError && e instanceof Error);
      assert.equal(e.name, cls.name);
    }
  });

  test('the package exports its public API, not the helpers errors are built with', () => {
    const names = Object.keys(sdk);
    for (const helper of ['clientError', 'createSandboxError', 'errorResponseFrom', 'notSupported'])
      assert.ok(!names.includes(helper), `${helper} is not exported`);
    // every error class is exported
    for (const [name, value] of Object.entries(errorsModule)) {
      if (typeof value === 'function' && (value === SandboxError || value.prototype instanceof SandboxError))
        assert.ok(names.includes(name), `${name} is exported`);
    }
    // ContainerProxy: a class that does nothing, for `export { ContainerProxy }` in a Worker
    assert.equal(typeof ContainerProxy, 'function');
    const p = new ContainerProxy({}, {});
    assert.ok(p instanceof ContainerProxy);
    assert.deepEqual(Object.keys(p), []);
  });
});

describe('getSandbox ids (no daemon)', () => {
  const ns = connect({ url: 'http://127.0.0.1:9' });

  test('a bad id is SandboxSecurityError, synchronously', () => {
    for (const bad of ['Bad_ID', '-x', 'x-', 'a'.repeat(64), 'api', 'www', 'admin', 'root', 'system', 'cloudflare', 'workers', '', 'a b', 'a.b', 'ä']) {
      const e = throwsWith(() => getSandbox(ns, bad), SandboxSecurityError);
      assert.equal(e.httpStatus, 400, bad);
      assert.ok(e.message.length > 0);
    }
    throwsWith(() => getSandbox(ns, undefined as unknown as string), SandboxSecurityError);
    // 63 characters and the edges of the alphabet are fine
    assert.equal(getSandbox(ns, 'a'.repeat(63)).id, 'a'.repeat(63));
    assert.equal(getSandbox(ns, '0-z').id, '0-z');
  });

  test('normalizeId lowercases (and the result must still be valid)', () => {
    assert.equal(getSandbox(ns, 'My-Box', { normalizeId: true }).id, 'my-box');
    throwsWith(() => getSandbox(ns, 'My-Box'), SandboxSecurityError);
    throwsWith(() => getSandbox(ns, 'Bad_ID', { normalizeId: true }), SandboxSecurityError);
    throwsWith(() => getSandbox(ns, 'API', { normalizeId: true }), SandboxSecurityError);
  });

  test('getSandbox needs a namespace from connect(); connect needs an http(s) url', () => {
    assert.throws(() => getSandbox({} as never, 'x'), TypeError);
    assert.throws(() => connect({ url: '' }), TypeError);
    assert.throws(() => connect({ url: 'ftp://x' }), TypeError);
    assert.throws(() => connect({ url: 'not a url' }), TypeError);
  });
});

describe('transport failures', () => {
  test('connection refused: RPCTransportError connection_failed, transient', async () => {
    const port = await new Promise<number>((resolve) => {
      const srv = createServer();
      srv.listen(0, '127.0.0.1', () => {
        const p = (srv.address() as { port: number }).port;
        srv.close(() => resolve(p));
      });
    });
    const s = getSandbox(connect({ url: `http://127.0.0.1:${port}`, token: 't' }), 'refused');
    const e = await rejectsWith(s.exec('true'), RPCTransportError, 'RPC_TRANSPORT_ERROR');
    assertErrorShape(e, 'RPC_TRANSPORT_ERROR', 503);
    assert.equal(e.kind, 'connection_failed');
    assert.equal(e.context.kind, 'connection_failed');
    assert.equal(isPlatformTransientError(e), true);
    assert.match(e.message, new RegExp(String(port)));
    assert.equal(e.operation, 'command.execute');
    await rejectsWith(s.readFile('x'), RPCTransportError);
    await rejectsWith(s.execStream('true'), RPCTransportError);
  });

  test('node:http engine: a name that does not resolve is connection_failed', async () => {
    // no fetch given: on Node the JSON requests take the node:http engine
    const s = getSandbox(connect({ url: 'http://cella-sdk-test.invalid:7070' }), 'no-dns');
    const e = await rejectsWith(s.exec('true'), RPCTransportError, 'RPC_TRANSPORT_ERROR');
    assert.equal(e.kind, 'connection_failed', e.message);
    assert.equal(isPlatformTransientError(e), true);
    // the fetch path says the same
    const f = getSandbox(connect({ url: 'http://cella-sdk-test.invalid:7070', fetch }), 'no-dns');
    assert.equal((await rejectsWith(f.exec('true'), RPCTransportError)).kind, 'connection_failed');
  });

  test('node:http engine: a connection closed with the request sent is peer_closed', async () => {
    // a server that reads the request and closes the connection without an answer
    const srv = createServer((sock) => {
      sock.once('data', () => sock.destroy());
    });
    const port = await new Promise<number>((resolve) => srv.listen(0, '127.0.0.1', () => resolve((srv.address() as { port: number }).port)));
    try {
      const s = getSandbox(connect({ url: `http://127.0.0.1:${port}` }), 'hangup');
      const e = await rejectsWith(s.exec('true'), RPCTransportError, 'RPC_TRANSPORT_ERROR');
      assert.equal(e.kind, 'peer_closed', e.message);
    } finally {
      srv.close();
    }
  });

  test('a wrong token is UnauthorizedError (401)', { skip }, async () => {
    const s = getSandbox(connect({ url: env.url, token: 'not-the-token' }), sandboxName('err-auth'));
    const e = await rejectsWith(s.exec('true'), UnauthorizedError, 'UNAUTHORIZED');
    assertErrorShape(e, 'UNAUTHORIZED', 401);
    const none = getSandbox(connect({ url: env.url }), sandboxName('err-auth'));
    await rejectsWith(none.exec('true'), UnauthorizedError, 'UNAUTHORIZED');
    await rejectsWith(none.getInfo(), UnauthorizedError);
  });

  test('a server error carries the operation of the call', { skip }, async () => {
    const s = sb('err-a');
    const e = await rejectsWith(s.readFile('/no/such/file'), FileNotFoundError, 'FILE_NOT_FOUND');
    assertErrorShape(e, 'FILE_NOT_FOUND', 404);
    assert.equal(e.operation, 'file.read');
    const g = await rejectsWith(s.gitCheckout('file:///etc'), InvalidGitUrlError, 'INVALID_GIT_URL');
    assertErrorShape(g, 'INVALID_GIT_URL', 400);
    assert.equal(g.operation, 'git.checkout');
  });
});

describe('daemon restarts', { skip: skip || (!canRestart && 'CELLA_CTL is not set: no restartDaemon') }, () => {
  const s = sb('err-b');

  test('a connection lost mid-stream: the for-await rejects with RPCTransportError peer_closed', async () => {
    await s.exec('true');
    const stream = await s.execStream('while true; do echo tick; sleep 0.2; done');
    let ticks = 0;
    let restarted: Promise<void> | undefined;
    const err = await withTimeout(
      (async () => {
        try {
          for await (const ev of parseSSEStream<ExecEvent>(stream)) {
            if (ev.type === 'stdout') ticks++;
            if (ticks === 2 && !restarted) restarted = restartDaemon('kill9-restart');
          }
        } catch (e) {
          return e;
        }
        return new Error('the stream ended without an error');
      })(),
      60_000,
      'reading a stream across a daemon kill',
    );
    await withTimeout(restarted ?? Promise.resolve(), 60_000, 'the restart');
    assert.ok(ticks >= 2);
    assert.ok(err instanceof RPCTransportError, String(err));
    assert.equal(err.kind, 'peer_closed');
    assert.equal(err.code, 'RPC_TRANSPORT_ERROR');
    assert.equal(isPlatformTransientError(err), true);
  });

  test('a buffered request in flight when the daemon dies: RPCTransportError peer_closed', async () => {
    const p = s.exec('sleep 340');
    await waitFor(() => running(s, 'sleep 340'), 15_000, 'sleep 340 started');
    const [err] = await Promise.all([
      p.then(
        () => new Error('resolved'),
        (e: unknown) => e,
      ),
      withTimeout(restartDaemon('kill9-restart'), 60_000, 'the restart'),
    ]);
    assert.ok(err instanceof RPCTransportError, String(err));
    assert.equal(err.kind, 'peer_closed');
    assert.equal(isPlatformTransientError(err), true);
  });

  test('a Sandbox used before a restart works after it: exec, files, a background process', async () => {
    await s.writeFile('before-restart.txt', 'still here');
    const proc = await s.startProcess('sleep 341', { processId: 'survivor' });
    const session = await s.createSession({ id: 'survives' });
    await session.exec('export SURVIVED=yes; cd /tmp');
    await withTimeout(restartDaemon('kill9-restart'), 60_000, 'the restart');
    const r = await s.exec('echo after restart');
    assert.equal(r.stdout, 'after restart\n');
    assert.equal((await s.readFile('before-restart.txt')).content, 'still here');
    assert.equal(await proc.getStatus(), 'running');
    assert.ok(await running(s, 'sleep 341'));
    const again = await s.getProcess('survivor');
    assert.equal(again?.pid, proc.pid);
    assert.equal((await session.exec('echo "$SURVIVED $(pwd)"')).stdout, 'yes /tmp\n');
    await proc.kill();
    assert.equal(await proc.getStatus(), 'killed');
  });
});
