/**
 * Files. Text writes and every streamed read or write use the raw routes (`PUT`/`GET
 * /files`, any size, streamed); base64 writes and encoded reads the JSON ones. Paths are
 * absolute or relative to /workspace.
 */
import type { SandboxCore } from './core.js';
import { FileTooLargeError, SandboxError, ValidationFailedError, clientError } from './errors.js';
import { linkedAbort, parseSSEStream, sseByteStream, sseObjects } from './sse.js';
import { guardBody, transportError } from './transport.js';
import type {
  DeleteFileResult,
  FileExistsResult,
  FileMetadata,
  FileStreamEvent,
  FileWatchSSEEvent,
  ListFilesOptions,
  ListFilesResult,
  MkdirResult,
  MoveFileResult,
  ReadFileResult,
  ReadFileStreamResult,
  RenameFileResult,
  WatchOptions,
  WriteFileResult,
} from './types.js';
import { base64ToBytes, bytesToBase64, compact, nowIso } from './util.js';

function checkPath(path: unknown, what = 'path'): asserts path is string {
  if (typeof path !== 'string' || path === '' || path.includes('\0') || path.length > 4096)
    throw clientError(
      ValidationFailedError,
      'VALIDATION_FAILED',
      400,
      `${what} must be a non-empty string without NUL bytes, at most 4096 characters`,
      { [what]: typeof path === 'string' ? path.slice(0, 100) : path },
    );
}

export interface WriteFileOptions {
  /** `utf-8` (default) or `base64` (the content is base64 of the bytes to write). */
  encoding?: string;
  sessionId?: string;
  /** cella: the file's mode when it is created, e.g. `0o755` or `"0755"`. */
  mode?: number | string;
}

export async function writeFile(
  core: SandboxCore,
  path: string,
  content: string | ReadableStream<Uint8Array> | Uint8Array,
  options: WriteFileOptions = {},
): Promise<WriteFileResult> {
  checkPath(path);
  const enc = (options.encoding ?? 'utf-8').toLowerCase();
  if (enc !== 'utf-8' && enc !== 'utf8' && enc !== 'base64')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, `unknown encoding '${options.encoding}'`, {
      encoding: options.encoding,
    });
  await core.ready();
  if (enc === 'base64' && typeof content === 'string') {
    const r = await core.t.json<{ path: string; size: number; timestamp: string }>('POST', core.path('files', 'write'), {
      json: { path, content, encoding: 'base64' },
      operation: 'file.write',
    });
    return { success: true, path: r.path, timestamp: r.timestamp, exitCode: 0, bytesWritten: r.size };
  }
  if (typeof content !== 'string' && !(content instanceof Uint8Array) && !isReadableStream(content))
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'content must be a string, Uint8Array or ReadableStream');
  const mode = typeof options.mode === 'number' ? options.mode.toString(8).padStart(4, '0') : options.mode;
  const r = await core.t.json<{ path: string; size: number; timestamp: string }>('PUT', core.path('files'), {
    query: { path, mode },
    body: content as BodyInit,
    headers: { 'content-type': 'application/octet-stream' },
    operation: 'file.write',
  });
  return { success: true, path: r.path, timestamp: r.timestamp, exitCode: 0, bytesWritten: r.size };
}

function isReadableStream(v: unknown): v is ReadableStream<Uint8Array> {
  return typeof ReadableStream !== 'undefined' && v instanceof ReadableStream;
}

export interface ReadFileOptions {
  /** Absent: text when the file is valid UTF-8, else base64. `'none'`: a byte stream. */
  encoding?: string;
  sessionId?: string;
}

interface WireRead {
  path: string;
  content: string;
  encoding: 'utf-8' | 'base64';
  isBinary: boolean;
  mimeType: string;
  size: number;
  timestamp: string;
}

const decoder = new TextDecoder();

function isValidUtf8(b: Uint8Array): boolean {
  try {
    new TextDecoder('utf-8', { fatal: true }).decode(b);
    return true;
  } catch {
    return false;
  }
}

export async function readFile(core: SandboxCore, path: string, options: ReadFileOptions = {}): Promise<ReadFileResult> {
  checkPath(path);
  const want = options.encoding?.toLowerCase();
  if (want !== undefined && want !== 'utf-8' && want !== 'utf8' && want !== 'base64')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, `unknown encoding '${options.encoding}'`, {
      encoding: options.encoding,
    });
  await core.ready();
  let r: WireRead;
  try {
    r = await core.t.json<WireRead>('POST', core.path('files', 'read'), {
      json: compact({ path, encoding: want === 'base64' ? 'base64' : undefined }),
      operation: 'file.read',
    });
  } catch (e) {
    // The JSON read is capped (16 MiB); the raw route is not: read it that way instead.
    if (!(e instanceof FileTooLargeError)) throw e;
    r = await core.read(() => readRaw(core, path, want === 'base64'));
  }
  let content = r.content;
  let encoding = r.encoding;
  if ((want === 'utf-8' || want === 'utf8') && encoding === 'base64') {
    content = decoder.decode(base64ToBytes(content));
    encoding = 'utf-8';
  }
  return {
    success: true,
    path: r.path,
    content,
    timestamp: r.timestamp,
    exitCode: 0,
    encoding,
    isBinary: r.isBinary,
    mimeType: baseMime(r.mimeType),
    size: r.size,
  };
}

/**
 * The MIME type without parameters (`text/plain; charset=utf-8` → `text/plain`), as the
 * hosted SDK reports it (`file --mime-type`).
 */
function baseMime(m: string | null | undefined): string {
  const t = (m ?? '').split(';')[0]!.trim().toLowerCase();
  return t || 'application/octet-stream';
}

/** A path as cellad resolves it: relative to /workspace, `.` and `..` folded, never above `/`. */
function absolutePath(p: string): string {
  const parts: string[] = [];
  for (const seg of (p.startsWith('/') ? p : `/workspace/${p}`).split('/')) {
    if (seg === '' || seg === '.') continue;
    if (seg === '..') parts.pop();
    else parts.push(seg);
  }
  return '/' + parts.join('/');
}

async function readRaw(core: SandboxCore, path: string, base64: boolean): Promise<WireRead> {
  const res = await core.t.request('GET', core.path('files'), { query: { path }, operation: 'file.read' });
  let bytes: Uint8Array;
  try {
    bytes = new Uint8Array(await res.arrayBuffer());
  } catch (e) {
    throw transportError('peer_closed', `the connection to cellad broke reading '${path}'`, e, 'file.read');
  }
  const text = isValidUtf8(bytes);
  return {
    // As the JSON route answers it: absolute.
    path: absolutePath(path),
    content: text && !base64 ? decoder.decode(bytes) : bytesToBase64(bytes),
    encoding: text && !base64 ? 'utf-8' : 'base64',
    isBinary: !text,
    mimeType: baseMime(res.headers.get('content-type')),
    size: bytes.length,
    timestamp: nowIso(),
  };
}

/** `readFile(path, {encoding: 'none'})`: the file's bytes as a stream, any size. */
export async function readFileBytes(core: SandboxCore, path: string): Promise<ReadFileStreamResult> {
  checkPath(path);
  await core.ready();
  const res = await core.read(() => core.t.request('GET', core.path('files'), { query: { path }, operation: 'file.read' }));
  const len = Number(res.headers.get('content-length') ?? '-1');
  return {
    success: true,
    path,
    content: guardBody(res, 'file.read'),
    size: Number.isFinite(len) ? len : -1,
    mimeType: baseMime(res.headers.get('content-type')),
    timestamp: nowIso(),
  };
}

const CHUNK = 65535;

/** Bytes that are UTF-8 text, but for an incomplete character at the end (a cut sample). */
function isUtf8Prefix(b: Uint8Array): boolean {
  // Drop up to 3 trailing bytes of a character the sample cut in two.
  let end = b.length;
  for (let i = 1; i <= 3 && i <= b.length; i++) {
    const c = b[b.length - i]!;
    if ((c & 0xc0) === 0x80) continue; // continuation byte: look further back
    if (c >= 0xc0) {
      const need = c >= 0xf0 ? 4 : c >= 0xe0 ? 3 : 2;
      if (need > i) end = b.length - i;
    }
    break;
  }
  return isValidUtf8(b.subarray(0, end));
}

/**
 * The file as SSE `FileStreamEvent`s: `metadata`, `chunk`s (base64 for binary files), then
 * `complete` (or `error`). Consume it with `streamFile` or `collectFile`. Whether the file is
 * binary is decided as readFile does (bytes that are not UTF-8), from the whole file when it
 * fits in the first 64 KiB, else from those.
 */
export async function readFileStream(core: SandboxCore, path: string): Promise<ReadableStream<Uint8Array>> {
  const r = await readFileBytes(core, path);
  const reader = r.content.getReader();
  // Read ahead: the metadata comes first and says whether the chunks are text or base64.
  let pending = new Uint8Array(0);
  let ended = false;
  let bytesRead = 0;
  const append = (value: Uint8Array) => {
    bytesRead += value.length;
    const merged = new Uint8Array(pending.length + value.length);
    merged.set(pending);
    merged.set(value, pending.length);
    pending = merged;
  };
  let early: unknown;
  try {
    while (!ended && pending.length < CHUNK) {
      const { done, value } = await reader.read();
      if (done) ended = true;
      else append(value);
    }
  } catch (e) {
    early = e;
  }
  const isBinary = ended ? !isValidUtf8(pending) : !isUtf8Prefix(pending);
  async function* events(): AsyncGenerator<FileStreamEvent> {
    yield { type: 'metadata', mimeType: r.mimeType, size: r.size, isBinary, encoding: isBinary ? 'base64' : 'utf-8' };
    const dec = new TextDecoder();
    try {
      if (early !== undefined) throw early;
      for (;;) {
        while (pending.length >= CHUNK || (ended && pending.length > 0)) {
          const part = pending.subarray(0, CHUNK);
          pending = pending.slice(part.length);
          const data = isBinary ? bytesToBase64(part) : dec.decode(part, { stream: true });
          if (data !== '') yield { type: 'chunk', data };
        }
        if (ended) break;
        const { done, value } = await reader.read();
        if (done) ended = true;
        else append(value);
      }
      if (!isBinary) {
        const tail = dec.decode();
        if (tail) yield { type: 'chunk', data: tail };
      }
      yield { type: 'complete', bytesRead };
    } catch (e) {
      yield { type: 'error', error: e instanceof Error ? e.message : String(e) };
    } finally {
      if (!ended) await reader.cancel().catch(() => undefined);
      reader.releaseLock();
    }
  }
  // A cancel while a read is in flight: cancelling the body ends that read (and the request).
  return sseByteStream(events(), { onCancel: (r) => void reader.cancel(r).catch(() => undefined) });
}

/**
 * Reads a `readFileStream` stream: yields each chunk (text, or bytes for binary files) and
 * returns the file's metadata.
 */
export async function* streamFile(stream: ReadableStream<Uint8Array>): AsyncGenerator<string | Uint8Array, FileMetadata> {
  let meta: FileMetadata | undefined;
  for await (const ev of parseSSEStream<FileStreamEvent>(stream)) {
    switch (ev.type) {
      case 'metadata':
        meta = { mimeType: ev.mimeType, size: ev.size, isBinary: ev.isBinary, encoding: ev.encoding };
        break;
      case 'chunk':
        if (!meta) throw new Error('streamFile: a chunk before the metadata');
        yield meta.encoding === 'base64' ? base64ToBytes(ev.data) : ev.data;
        break;
      case 'complete':
        if (!meta) throw new Error('streamFile: no metadata in the stream');
        return meta;
      case 'error':
        throw new Error(`streamFile: ${ev.error}`);
    }
  }
  throw new Error('streamFile: the stream ended before its complete event');
}

/** Reads a whole `readFileStream` stream: `{content, metadata}` (bytes for binary files). */
export async function collectFile(
  stream: ReadableStream<Uint8Array>,
): Promise<{ content: string | Uint8Array; metadata: FileMetadata }> {
  const text: string[] = [];
  const parts: Uint8Array[] = [];
  const it = streamFile(stream);
  for (;;) {
    const r = await it.next();
    if (r.done) {
      const metadata = r.value;
      if (!metadata.isBinary) return { content: text.join(''), metadata };
      const total = parts.reduce((n, p) => n + p.length, 0);
      const out = new Uint8Array(total);
      let off = 0;
      for (const p of parts) {
        out.set(p, off);
        off += p.length;
      }
      return { content: out, metadata };
    }
    if (typeof r.value === 'string') text.push(r.value);
    else parts.push(r.value);
  }
}

export async function mkdir(core: SandboxCore, path: string, options: { recursive?: boolean } = {}): Promise<MkdirResult> {
  checkPath(path);
  await core.ready();
  const r = await core.t.json<{ path: string; recursive: boolean; timestamp: string }>('POST', core.path('files', 'mkdir'), {
    json: { path, recursive: options.recursive ?? false },
    operation: 'file.mkdir',
  });
  return { success: true, path: r.path, recursive: r.recursive, timestamp: r.timestamp, exitCode: 0 };
}

export async function deleteFile(core: SandboxCore, path: string, options: { recursive?: boolean } = {}): Promise<DeleteFileResult> {
  checkPath(path);
  await core.ready();
  const r = await core.t.json<{ path: string; timestamp: string }>('DELETE', core.path('files'), {
    query: { path, recursive: options.recursive ? 'true' : undefined },
    operation: 'file.delete',
  });
  return { success: true, path: r.path, timestamp: r.timestamp, exitCode: 0 };
}

export async function moveFile(core: SandboxCore, from: string, to: string): Promise<MoveFileResult> {
  checkPath(from, 'sourcePath');
  checkPath(to, 'destinationPath');
  await core.ready();
  const r = await core.t.json<{ from: string; to: string; timestamp: string }>('POST', core.path('files', 'move'), {
    json: { from, to },
    operation: 'file.move',
  });
  return { success: true, path: r.from, newPath: r.to, timestamp: r.timestamp, exitCode: 0 };
}

export async function renameFile(core: SandboxCore, oldPath: string, newPath: string): Promise<RenameFileResult> {
  return moveFile(core, oldPath, newPath);
}

export async function listFiles(core: SandboxCore, path: string, options: ListFilesOptions = {}): Promise<ListFilesResult> {
  checkPath(path);
  await core.ready();
  const r = await core.read(() =>
    core.t.json<Omit<ListFilesResult, 'success'>>('GET', core.path('files', 'list'), {
      query: {
        path,
        recursive: options.recursive ? 'true' : undefined,
        includeHidden: options.includeHidden ? 'true' : undefined,
      },
      operation: 'file.list',
    }),
  );
  return { success: true, path: r.path, files: r.files, count: r.count, timestamp: r.timestamp, exitCode: 0 };
}

export async function exists(core: SandboxCore, path: string): Promise<FileExistsResult> {
  checkPath(path);
  await core.ready();
  const r = await core.read(() =>
    core.t.json<{ path: string; exists: boolean; timestamp: string }>('GET', core.path('files', 'exists'), {
      query: { path },
      operation: 'file.exists',
    }),
  );
  return { success: true, path: r.path, exists: r.exists, timestamp: r.timestamp, exitCode: 0 };
}

/**
 * An event of cella's own upload temporary file (`.cella-upload-XXXXXX`, docs/protocol.md):
 * a writeFile is written there and renamed over its target, which a watch reports as a
 * `move_to` of the target; the temporary file's own events are noise to the user.
 */
function isUploadTemp(ev: Record<string, unknown>): boolean {
  if (ev.type !== 'event' || typeof ev.path !== 'string') return false;
  const base = ev.path.slice(ev.path.lastIndexOf('/') + 1);
  return base.startsWith('.cella-upload-');
}

/**
 * Watches a directory. Resolves once the watch is live (the `watching` event arrived) with
 * the SSE stream of `FileWatchSSEEvent`s, that event first. Cancel the stream, or abort
 * `signal`, to stop watching.
 */
export async function watch(core: SandboxCore, path: string, options: WatchOptions = {}): Promise<ReadableStream<Uint8Array>> {
  checkPath(path);
  if (options.include && options.exclude)
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'include and exclude cannot both be given');
  await core.ready();
  const signal = options.signal;
  if (signal?.aborted) throw signal.reason;
  // One signal for the request and the reader: the caller's, or the stream being cancelled
  // (which closes the request, and cellad stops the watch).
  const { stop, dispose } = linkedAbort(signal);
  let it: AsyncGenerator<Record<string, unknown>>;
  let first: IteratorResult<Record<string, unknown>>;
  try {
    const raw = await core.t.sse('POST', core.path('files', 'watch'), {
      json: compact({ path, recursive: options.recursive, include: options.include, exclude: options.exclude }),
      signal: stop.signal,
      operation: 'file.watch',
    });
    it = sseObjects(raw, stop.signal);
    first = await it.next();
  } catch (e) {
    dispose();
    throw e;
  }
  if (first.done) {
    dispose();
    throw clientError(SandboxError, 'WATCH_START_ERROR', 500, `the watch of '${path}' ended at once`, { path }, { operation: 'file.watch' });
  }
  const head = first.value;
  const src = it;
  async function* events(): AsyncGenerator<FileWatchSSEEvent> {
    try {
      yield head as FileWatchSSEEvent;
      for (;;) {
        const n = await src.next();
        if (n.done) return;
        if (isUploadTemp(n.value)) continue;
        yield n.value as FileWatchSSEEvent;
      }
    } finally {
      dispose();
      await src.return(undefined);
    }
  }
  return sseByteStream(events(), { signal: stop.signal, onCancel: (r) => stop.abort(r) });
}
