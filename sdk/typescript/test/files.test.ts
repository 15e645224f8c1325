// Files (hosted SDK §3): writeFile/readFile in every encoding, large files, streams,
// readFileStream + streamFile/collectFile, mkdir, deleteFile, renameFile/moveFile, listFiles,
// exists, watch, bad paths, checkChanges, and paths that try to leave the sandbox.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { hostname } from 'node:os';
import {
  FileExistsError,
  FileNotFoundError,
  FileSystemError,
  IsDirectoryError,
  NotSupportedError,
  SandboxError,
  ValidationFailedError,
  collectFile,
  connect,
  getSandbox,
  parseSSEStream,
  streamFile,
  type FileMetadata,
  type FileWatchSSEEvent,
  type Sandbox,
} from '../src/index.js';
import {
  bytes,
  destroyMade,
  env,
  isIsoTime,
  readAll,
  rejectsWith,
  sandboxName,
  sb,
  skip,
  streamOf,
  withTimeout,
} from './core-helpers.js';

after(destroyMade);

const b64 = (b: Uint8Array) => Buffer.from(b).toString('base64');
const MiB = 1024 * 1024;

async function sha(s: Sandbox, path: string): Promise<string> {
  const r = await s.exec(`sha256sum '${path}' | cut -d' ' -f1`);
  assert.equal(r.exitCode, 0, r.stderr);
  return r.stdout.trim();
}

async function hostSha(b: Uint8Array): Promise<string> {
  const { createHash } = await import('node:crypto');
  return createHash('sha256').update(b).digest('hex');
}

describe('writeFile / readFile', { skip }, () => {
  const s = sb('files-a');

  test('utf-8 round trip (multi-byte); result shapes', async () => {
    const text = 'héllo wörld ✓ 日本語 🎉\nline two\n';
    const w = await s.writeFile('notes.txt', text);
    assert.equal(w.success, true);
    assert.equal(w.path, '/workspace/notes.txt');
    assert.ok(isIsoTime(w.timestamp));
    assert.equal(w.bytesWritten, Buffer.byteLength(text));
    const r = await s.readFile('notes.txt');
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/notes.txt');
    assert.equal(r.content, text);
    assert.equal(r.encoding, 'utf-8');
    assert.equal(r.isBinary, false);
    assert.equal(r.mimeType, 'text/plain');
    assert.equal(r.size, Buffer.byteLength(text));
    assert.ok(isIsoTime(r.timestamp));
    // absolute paths and the bytes inside the sandbox
    assert.equal((await s.readFile('/workspace/notes.txt')).content, text);
    assert.equal((await s.exec('cat /workspace/notes.txt')).stdout, text);
    // an explicit utf-8 / utf8 encoding
    assert.equal((await s.writeFile('u8.txt', 'x✓', { encoding: 'utf8' })).success, true);
    assert.equal((await s.readFile('u8.txt', { encoding: 'utf8' })).content, 'x✓');
    // empty file
    await s.writeFile('empty.txt', '');
    const e = await s.readFile('empty.txt');
    assert.equal(e.content, '');
    assert.equal(e.size, 0);
  });

  test('writeFile creates parent directories, overwrites, keeps an existing mode; mode option', async () => {
    await s.writeFile('deep/er/still/file.txt', 'deep');
    assert.equal((await s.readFile('deep/er/still/file.txt')).content, 'deep');
    await s.writeFile('run.sh', '#!/bin/sh\necho run-1\n', { mode: 0o755 });
    assert.equal((await s.exec('./run.sh')).stdout, 'run-1\n');
    await s.writeFile('run.sh', '#!/bin/sh\necho run-2\n');
    assert.equal((await s.exec('./run.sh')).stdout, 'run-2\n', 'overwritten, still executable');
    await s.writeFile('run2.sh', '#!/bin/sh\necho r2\n', { mode: '0700' });
    assert.equal((await s.exec('stat -c %a run2.sh')).stdout, '700\n');
  });

  test('base64 write and read of binary bytes', async () => {
    const data = bytes(4096, 7);
    const w = await s.writeFile('bin/data.bin', b64(data), { encoding: 'base64' });
    assert.equal(w.success, true);
    assert.equal(w.bytesWritten, data.length);
    assert.equal(await sha(s, '/workspace/bin/data.bin'), await hostSha(data));
    const r = await s.readFile('bin/data.bin', { encoding: 'base64' });
    assert.equal(r.encoding, 'base64');
    assert.equal(r.content, b64(data));
    assert.equal(r.isBinary, true);
    assert.equal(r.size, data.length);
    // base64 of a text file is base64 too when asked
    const t = await s.readFile('notes.txt', { encoding: 'base64' });
    assert.equal(t.encoding, 'base64');
    assert.equal(Buffer.from(t.content, 'base64').toString(), (await s.readFile('notes.txt')).content);
    // invalid base64 is refused
    await rejectsWith(s.writeFile('bad.bin', '!!not base64!!', { encoding: 'base64' }), ValidationFailedError, 'VALIDATION_FAILED');
    // an unknown encoding is refused before a request
    await rejectsWith(s.writeFile('x.bin', 'x', { encoding: 'latin1' }), ValidationFailedError, 'VALIDATION_FAILED');
    await rejectsWith(s.readFile('notes.txt', { encoding: 'hex' }), ValidationFailedError, 'VALIDATION_FAILED');
  });

  test('readFile auto-detects binary; encoding utf-8 on binary decodes lossily', async () => {
    const data = new Uint8Array([0xff, 0xfe, 0x41, 0x00, 0x80, 0x42]);
    await s.writeFile('auto.dat', data);
    const r = await s.readFile('auto.dat');
    assert.equal(r.encoding, 'base64');
    assert.equal(r.isBinary, true);
    assert.equal(r.content, b64(data));
    assert.equal(r.size, 6);
    const u = await s.readFile('auto.dat', { encoding: 'utf-8' });
    assert.equal(u.encoding, 'utf-8');
    assert.equal(u.content, '\ufffd\ufffdA\u0000\ufffdB');
    // a text file without an extension is text
    await s.writeFile('README', 'plain text\n');
    const t = await s.readFile('README');
    assert.equal(t.isBinary, false);
    assert.equal(t.content, 'plain text\n');
  });

  test("readFile encoding 'none': a stream of the bytes", async () => {
    const data = bytes(300_000, 3);
    await s.writeFile('none.bin', data);
    const r = await s.readFile('none.bin', { encoding: 'none' });
    assert.equal(r.success, true);
    assert.equal(r.path, 'none.bin');
    assert.equal(r.size, data.length);
    assert.equal(typeof r.mimeType, 'string');
    assert.ok(isIsoTime(r.timestamp));
    assert.ok(r.content instanceof ReadableStream);
    assert.deepEqual(await readAll(r.content), data);
    await rejectsWith(s.readFile('missing.bin', { encoding: 'none' }), FileNotFoundError, 'FILE_NOT_FOUND');
  });

  test('a 20 MiB binary file (Uint8Array) reads back through readFile', async () => {
    const data = bytes(20 * MiB, 11);
    const w = await s.writeFile('big/20m.bin', data);
    assert.equal(w.bytesWritten, data.length);
    assert.equal(await sha(s, '/workspace/big/20m.bin'), await hostSha(data));
    const r = await s.readFile('big/20m.bin');
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/big/20m.bin', 'the same path as the JSON route answers');
    assert.equal(r.mimeType, 'application/octet-stream');
    assert.ok(isIsoTime(r.timestamp));
    assert.equal(r.isBinary, true);
    assert.equal(r.encoding, 'base64');
    assert.equal(r.size, data.length);
    const back = Buffer.from(r.content, 'base64');
    assert.equal(back.length, data.length);
    assert.ok(back.equals(data), 'the 20 MiB read is byte-equal');
    const r64 = await s.readFile('big/20m.bin', { encoding: 'base64' });
    assert.equal(r64.content.length, r.content.length);
    await s.deleteFile('big/20m.bin');
  });

  test('a 17 MiB text file written from a ReadableStream reads back as text', async () => {
    const line = 'the quick brown fox ✓ jumps over the lazy dog 🎉\n';
    const lineBytes = Buffer.from(line);
    const perChunk = Buffer.from(line.repeat(1000));
    const chunks: Uint8Array[] = [];
    let total = 0;
    while (total < 17 * MiB) {
      chunks.push(new Uint8Array(perChunk));
      total += perChunk.length;
    }
    const w = await s.writeFile('big/17m.txt', streamOf(...chunks));
    assert.equal(w.bytesWritten, total);
    const r = await s.readFile('big/17m.txt');
    assert.equal(r.isBinary, false);
    assert.equal(r.encoding, 'utf-8');
    assert.equal(r.size, total);
    assert.equal(r.content.length, line.length * 1000 * chunks.length);
    assert.ok(r.content.startsWith(line) && r.content.endsWith(line));
    assert.equal(Buffer.byteLength(r.content), total);
    assert.equal(total % lineBytes.length, 0);
    await s.deleteFile('big/17m.txt');
  });

  test('writeFile with a ReadableStream body (small, many chunks)', async () => {
    const parts = ['alpha ', 'bêta ', 'γάμμα ', '🎉'].map((x) => new Uint8Array(Buffer.from(x)));
    const w = await s.writeFile('streamed.txt', streamOf(...parts));
    assert.equal(w.success, true);
    assert.equal((await s.readFile('streamed.txt')).content, 'alpha bêta γάμμα 🎉');
    // a multi-byte character split across chunks is written byte-exact
    const euro = Buffer.from('€');
    await s.writeFile('split.txt', streamOf(euro.subarray(0, 1), euro.subarray(1)));
    assert.equal((await s.readFile('split.txt')).content, '€');
  });

  test('readFile of a missing file is FileNotFoundError; of a directory IS_DIRECTORY', async () => {
    const e = await rejectsWith(s.readFile('nope/missing.txt'), FileNotFoundError, 'FILE_NOT_FOUND');
    assert.equal(e.httpStatus, 404);
    assert.equal(e.operation, 'file.read');
    await s.mkdir('adir');
    await rejectsWith(s.readFile('adir'), FileSystemError, 'IS_DIRECTORY');
  });
});

describe('readFileStream + streamFile / collectFile', { skip }, () => {
  const s = sb('files-b');

  test('a text file: metadata, text chunks, content equal', async () => {
    const text = 'ünïcödé ✓ '.repeat(20_000); // > 64 KiB: several chunks, characters split between them
    await s.writeFile('stream.txt', text);
    const { content, metadata } = await collectFile(await s.readFileStream('stream.txt'));
    assert.equal(typeof content, 'string');
    assert.equal(content, text);
    assert.equal(metadata.isBinary, false);
    assert.equal(metadata.encoding, 'utf-8');
    assert.equal(metadata.size, Buffer.byteLength(text));
    assert.equal(metadata.mimeType, 'text/plain');
    // chunk by chunk with streamFile, and its return value is the metadata
    const gen = streamFile(await s.readFileStream('stream.txt'));
    const chunks: string[] = [];
    let meta: FileMetadata | undefined;
    for (;;) {
      const n = await gen.next();
      if (n.done) {
        meta = n.value;
        break;
      }
      assert.equal(typeof n.value, 'string');
      chunks.push(n.value as string);
    }
    assert.ok(chunks.length > 1);
    assert.equal(chunks.join(''), text);
    assert.deepEqual(meta, metadata);
  });

  test('a binary file: base64 chunks decoded to bytes, content equal', async () => {
    const data = bytes(200_000, 5);
    await s.writeFile('stream.bin', data);
    const { content, metadata } = await collectFile(await s.readFileStream('stream.bin'));
    assert.ok(content instanceof Uint8Array);
    assert.deepEqual(content, data);
    assert.equal(metadata.isBinary, true);
    assert.equal(metadata.encoding, 'base64');
    assert.equal(metadata.size, data.length);
    let n = 0;
    for await (const chunk of streamFile(await s.readFileStream('stream.bin'))) {
      assert.ok(chunk instanceof Uint8Array);
      n += chunk.length;
    }
    assert.equal(n, data.length);
  });

  test('a text file without an extension is text, as readFile says', async () => {
    await s.writeFile('LICENSE', 'MIT\n');
    const { content, metadata } = await collectFile(await s.readFileStream('LICENSE'));
    assert.equal(metadata.isBinary, (await s.readFile('LICENSE')).isBinary);
    assert.equal(content, 'MIT\n');
    // and a binary file with a text extension is binary
    const bad = new Uint8Array([0x61, 0xff, 0x62]);
    await s.writeFile('latin1.txt', bad);
    const c = await collectFile(await s.readFileStream('latin1.txt'));
    assert.equal(c.metadata.isBinary, true);
    assert.deepEqual(c.content, bad);
    // an empty file
    await s.writeFile('empty', '');
    const e = await collectFile(await s.readFileStream('empty'));
    assert.equal(e.content, '');
    assert.equal(e.metadata.size, 0);
  });

  test('the raw events: metadata first, complete last with bytesRead', async () => {
    await s.writeFile('ev.txt', 'abc');
    const events: Array<Record<string, unknown>> = [];
    for await (const ev of parseSSEStream<Record<string, unknown>>(await s.readFileStream('ev.txt'))) events.push(ev);
    assert.equal(events[0]!.type, 'metadata');
    assert.deepEqual(events[events.length - 1], { type: 'complete', bytesRead: 3 });
    assert.deepEqual(events.slice(1, -1), [{ type: 'chunk', data: 'abc' }]);
    await rejectsWith(s.readFileStream('missing.txt'), FileNotFoundError, 'FILE_NOT_FOUND');
  });
});

describe('mkdir, deleteFile, renameFile, moveFile, listFiles, exists', { skip }, () => {
  const s = sb('files-c');

  test('mkdir: recursive and not; existing; missing parent', async () => {
    const r = await s.mkdir('m1');
    assert.deepEqual(Object.keys(r).sort(), ['exitCode', 'path', 'recursive', 'success', 'timestamp']);
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/m1');
    assert.equal(r.recursive, false);
    assert.ok(isIsoTime(r.timestamp));
    const deep = await s.mkdir('m2/a/b/c', { recursive: true });
    assert.equal(deep.recursive, true);
    assert.equal((await s.exists('m2/a/b/c')).exists, true);
    await rejectsWith(s.mkdir('m3/a/b'), FileNotFoundError, 'FILE_NOT_FOUND');
    const e = await rejectsWith(s.mkdir('m1'), FileExistsError, 'FILE_EXISTS');
    assert.equal(e.httpStatus, 409);
    // recursive on an existing directory is fine (mkdir -p)
    assert.equal((await s.mkdir('m1', { recursive: true })).success, true);
  });

  test('deleteFile: result; missing is FileNotFoundError; a directory is IS_DIRECTORY', async () => {
    await s.writeFile('del.txt', 'x');
    const r = await s.deleteFile('del.txt');
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/del.txt');
    assert.ok(isIsoTime(r.timestamp));
    assert.equal((await s.exists('del.txt')).exists, false);
    const nf = await rejectsWith(s.deleteFile('del.txt'), FileNotFoundError, 'FILE_NOT_FOUND');
    assert.equal(nf.httpStatus, 404);
    await s.mkdir('deldir/sub', { recursive: true });
    const d = await rejectsWith(s.deleteFile('deldir'), SandboxError, 'IS_DIRECTORY');
    assert.ok(d instanceof IsDirectoryError);
    assert.equal(d.httpStatus, 400);
    // cella: recursive deletes a directory
    assert.equal((await s.deleteFile('deldir', { recursive: true })).success, true);
    assert.equal((await s.exists('deldir')).exists, false);
  });

  test('renameFile / moveFile: {success, path, newPath, timestamp}', async () => {
    await s.writeFile('mv-a.txt', 'moved');
    const r = await s.renameFile('mv-a.txt', 'mv-b.txt');
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/mv-a.txt');
    assert.equal(r.newPath, '/workspace/mv-b.txt');
    assert.ok(isIsoTime(r.timestamp));
    for (const k of Object.keys(r)) assert.ok(['success', 'path', 'newPath', 'timestamp', 'exitCode'].includes(k), k);
    assert.equal((await s.readFile('mv-b.txt')).content, 'moved');
    await s.mkdir('mvdir');
    const m = await s.moveFile('mv-b.txt', '/workspace/mvdir/mv-c.txt');
    assert.equal(m.path, '/workspace/mv-b.txt');
    assert.equal(m.newPath, '/workspace/mvdir/mv-c.txt');
    assert.equal((await s.exists('mv-b.txt')).exists, false);
    assert.equal((await s.readFile('mvdir/mv-c.txt')).content, 'moved');
    // a directory moves too
    const dm = await s.moveFile('mvdir', 'mvdir2');
    assert.equal(dm.newPath, '/workspace/mvdir2');
    assert.equal((await s.readFile('mvdir2/mv-c.txt')).content, 'moved');
    await rejectsWith(s.renameFile('no-such.txt', 'x.txt'), FileNotFoundError, 'FILE_NOT_FOUND');
    await rejectsWith(s.moveFile('no-such.txt', 'x.txt'), FileNotFoundError, 'FILE_NOT_FOUND');
  });

  test('listFiles: FileInfo fields; recursive; includeHidden', async () => {
    await s.mkdir('ls/sub', { recursive: true });
    await s.writeFile('ls/a.txt', 'aaa');
    await s.writeFile('ls/run.sh', '#!/bin/sh\n', { mode: 0o755 });
    await s.writeFile('ls/.hidden', 'h');
    await s.writeFile('ls/sub/b.txt', 'bb');
    await s.exec('ln -sf a.txt /workspace/ls/link');
    const r = await s.listFiles('ls');
    assert.equal(r.success, true);
    assert.equal(r.path, '/workspace/ls');
    assert.ok(isIsoTime(r.timestamp));
    assert.equal(r.count, r.files.length);
    const names = r.files.map((f) => f.name).sort();
    assert.deepEqual(names, ['a.txt', 'link', 'run.sh', 'sub']);
    const a = r.files.find((f) => f.name === 'a.txt')!;
    assert.equal(a.absolutePath, '/workspace/ls/a.txt');
    assert.equal(a.relativePath, 'a.txt');
    assert.equal(a.type, 'file');
    assert.equal(a.size, 3);
    assert.ok(isIsoTime(a.modifiedAt), a.modifiedAt);
    assert.equal(a.mode, 'rw-r--r--');
    assert.deepEqual(a.permissions, { readable: true, writable: true, executable: false });
    const sh = r.files.find((f) => f.name === 'run.sh')!;
    assert.equal(sh.mode, 'rwxr-xr-x');
    assert.equal(sh.permissions.executable, true);
    assert.equal(r.files.find((f) => f.name === 'sub')!.type, 'directory');
    assert.equal(r.files.find((f) => f.name === 'link')!.type, 'symlink');
    const rec = await s.listFiles('ls', { recursive: true });
    const rel = rec.files.map((f) => f.relativePath).sort();
    assert.deepEqual(rel, ['a.txt', 'link', 'run.sh', 'sub', 'sub/b.txt']);
    assert.equal(rec.files.find((f) => f.relativePath === 'sub/b.txt')!.absolutePath, '/workspace/ls/sub/b.txt');
    const hid = await s.listFiles('ls', { includeHidden: true });
    assert.ok(hid.files.some((f) => f.name === '.hidden'));
    assert.equal(hid.count, 5);
    await rejectsWith(s.listFiles('ls/nope'), FileNotFoundError, 'FILE_NOT_FOUND');
    await rejectsWith(s.listFiles('ls/a.txt'), FileSystemError, 'NOT_DIRECTORY');
  });

  test('exists: true and false', async () => {
    await s.writeFile('here.txt', 'x');
    const t = await s.exists('here.txt');
    assert.deepEqual(
      { success: t.success, path: t.path, exists: t.exists },
      { success: true, path: '/workspace/here.txt', exists: true },
    );
    assert.ok(isIsoTime(t.timestamp));
    assert.equal((await s.exists('/workspace')).exists, true);
    assert.equal((await s.exists('not-here.txt')).exists, false);
    assert.equal((await s.exists('/no/such/dir/file')).exists, false);
  });

  test('session file methods act on the same filesystem', async () => {
    const session = await s.createSession({ id: 'files' });
    await session.writeFile('from-session.txt', 'via session');
    assert.equal((await s.readFile('from-session.txt')).content, 'via session');
    assert.equal((await session.exists('from-session.txt')).exists, true);
    await session.mkdir('sess-dir');
    await session.moveFile('from-session.txt', 'sess-dir/x.txt');
    assert.equal((await session.listFiles('sess-dir')).count, 1);
    await session.deleteFile('sess-dir/x.txt');
    assert.equal((await s.exists('sess-dir/x.txt')).exists, false);
  });
});

describe('watch', { skip }, () => {
  const s = sb('files-d');

  test('resolves after watching; a new file gives a create event; cancelling ends the watch', async () => {
    await s.mkdir('w', { recursive: true });
    const stream = await s.watch('/workspace/w');
    const reader = parseSSEStream<FileWatchSSEEvent>(stream)[Symbol.asyncIterator]();
    const first = await withTimeout(reader.next(), 10_000, 'the watching event');
    assert.equal(first.done, false);
    assert.equal(first.value.type, 'watching');
    assert.equal((first.value as { path: string }).path, '/workspace/w');
    // the watch is live when watch() resolved: this file is seen
    await s.exec('echo hello > /workspace/w/new.txt');
    let ev: FileWatchSSEEvent | undefined;
    for (;;) {
      const n = await withTimeout(reader.next(), 15_000, 'a create event');
      assert.equal(n.done, false);
      if (n.value.type === 'event' && n.value.eventType === 'create') {
        ev = n.value;
        break;
      }
    }
    assert.ok(ev && ev.type === 'event');
    assert.equal(ev.path, '/workspace/w/new.txt');
    assert.equal(ev.isDirectory, false);
    assert.ok(isIsoTime(ev.timestamp));
    // a writeFile is seen as its target (written aside and renamed: move_to); cella's
    // temporary upload file does not show
    await s.writeFile('w/written.txt', 'via the API');
    for (;;) {
      const n = await withTimeout(reader.next(), 15_000, 'the writeFile event');
      assert.equal(n.done, false);
      if (n.value.type !== 'event') continue;
      assert.ok(!n.value.path.includes('.cella-upload-'), n.value.path);
      if (n.value.path === '/workspace/w/written.txt') {
        assert.ok(['create', 'move_to', 'modify'].includes(n.value.eventType), n.value.eventType);
        break;
      }
    }
    // a directory created later
    await s.mkdir('w/subdir');
    for (;;) {
      const n = await withTimeout(reader.next(), 15_000, 'a directory create event');
      assert.equal(n.done, false);
      if (n.value.type === 'event' && n.value.path === '/workspace/w/subdir') {
        assert.equal(n.value.eventType, 'create');
        assert.equal(n.value.isDirectory, true);
        break;
      }
    }
    const ret = await withTimeout(reader.return!(undefined), 10_000, 'cancelling the watch');
    assert.equal(ret.done, true);
    // a reader blocked on an idle watch: cancel() returns at once and ends the read
    const idle = (await s.watch('/workspace/w')).getReader();
    assert.equal(((await idle.read()).done), false); // watching
    const pending = idle.read();
    await withTimeout(idle.cancel(), 10_000, 'cancel an idle watch');
    assert.equal((await pending).done, true);
  });

  test('include filters; an AbortSignal ends the watch', async () => {
    await s.mkdir('w2', { recursive: true });
    const ac = new AbortController();
    const stream = await s.watch('w2', { include: ['*.py'], signal: ac.signal });
    const seen: FileWatchSSEEvent[] = [];
    const done = (async () => {
      try {
        for await (const ev of parseSSEStream<FileWatchSSEEvent>(stream)) {
          seen.push(ev);
          if (ev.type === 'event' && ev.path.endsWith('.py')) ac.abort(new Error('seen it'));
        }
      } catch (e) {
        return e;
      }
      return undefined;
    })();
    await s.writeFile('w2/skip.txt', 'no');
    await s.writeFile('w2/take.py', 'yes');
    const err = await withTimeout(done, 15_000, 'the watch with include');
    assert.ok(err instanceof Error);
    assert.equal(err.message, 'seen it');
    assert.equal(seen[0]!.type, 'watching');
    const paths = seen.filter((e) => e.type === 'event').map((e) => (e as { path: string }).path);
    assert.ok(paths.includes('/workspace/w2/take.py'), paths.join(','));
    assert.ok(!paths.some((p) => p.endsWith('.txt')), paths.join(','));
  });

  test('include and exclude together: ValidationFailedError; a missing directory: FileNotFoundError', async () => {
    await rejectsWith(s.watch('w', { include: ['*.py'], exclude: ['.git'] }), ValidationFailedError, 'VALIDATION_FAILED');
    await rejectsWith(s.watch('no-such-dir'), FileNotFoundError, 'FILE_NOT_FOUND');
  });
});

describe('bad input and the sandbox boundary', { skip }, () => {
  const s = sb('files-e');

  test("bad paths ('' and NUL) are ValidationFailedError without a request", async () => {
    let requests = 0;
    const counting: typeof fetch = (input, init) => {
      requests++;
      return fetch(input, init);
    };
    const c = getSandbox(connect({ url: env.url, token: env.token, fetch: counting }), sandboxName('files-e'));
    for (const bad of ['', 'a\0b', 'x'.repeat(4097), undefined as unknown as string]) {
      const calls: Array<[string, () => Promise<unknown>]> = [
        ['writeFile', () => c.writeFile(bad, 'x')],
        ['readFile', () => c.readFile(bad)],
        ['readFile none', () => c.readFile(bad, { encoding: 'none' })],
        ['readFileStream', () => c.readFileStream(bad)],
        ['mkdir', () => c.mkdir(bad)],
        ['deleteFile', () => c.deleteFile(bad)],
        ['renameFile from', () => c.renameFile(bad, 'ok')],
        ['renameFile to', () => c.renameFile('ok', bad)],
        ['moveFile', () => c.moveFile(bad, 'ok')],
        ['listFiles', () => c.listFiles(bad)],
        ['exists', () => c.exists(bad)],
        ['watch', () => c.watch(bad)],
      ];
      for (const [what, call] of calls) {
        const e = await rejectsWith(call, ValidationFailedError, 'VALIDATION_FAILED').catch((x: Error) => {
          throw new Error(`${what}(${JSON.stringify(bad)?.slice(0, 20)}): ${x.message}`);
        });
        assert.equal(e.httpStatus, 400);
      }
    }
    assert.equal(requests, 0);
  });

  test('checkChanges: NotSupportedError', async () => {
    const e = await rejectsWith(s.checkChanges('/workspace'), NotSupportedError, 'NOT_SUPPORTED');
    assert.match(e.message, /watch/);
  });

  test('../../etc/hostname stays inside the sandbox', async () => {
    const host = (() => {
      try {
        return readFileSync('/etc/hostname', 'utf8').trim();
      } catch {
        return hostname();
      }
    })();
    const r = await s.readFile('../../etc/hostname').catch((e: unknown) => e);
    if (r instanceof SandboxError) {
      assert.ok(r.httpStatus >= 400 && r.httpStatus < 500, String(r));
    } else {
      const content = (r as { content: string }).content.trim();
      assert.equal(content, s.id, "the sandbox's own /etc/hostname");
      assert.notEqual(content, host);
    }
    const deep = await s.readFile('../../../../../../../../etc/hostname').catch((e: unknown) => e);
    if (!(deep instanceof SandboxError)) assert.equal((deep as { content: string }).content.trim(), s.id);
    // a write that tries to leave lands inside (or is refused), never on the host
    const marker = `/tmp/cella-escape-${process.pid}-${Date.now()}`;
    await s.writeFile(`../..${marker}`, 'x').catch(() => undefined);
    assert.throws(() => readFileSync(marker), /ENOENT/);
    // a symlink to / inside the sandbox resolves inside too
    await s.exec('ln -sfn / /workspace/rootlink');
    const viaLink = await s.readFile('rootlink/etc/hostname').catch((e: unknown) => e);
    if (!(viaLink instanceof SandboxError)) assert.equal((viaLink as { content: string }).content.trim(), s.id);
  });
});
