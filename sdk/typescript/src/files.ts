/**
 * Files. Text writes and every streamed read or write use the raw routes (`PUT`/`GET
 * /files`, any size, streamed); base64 writes and encoded reads the JSON ones. Paths are
 * absolute or relative to /workspace.
 */
import type { SandboxCore } from './core.js';
import { FileTooLargeError, ValidationFailedError, clientError } from './errors.js';
import { asyncIterableToSSEStream, parseSSEStream, sseObjects } from './sse.js';
import { guardBody } from './transport.js';
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
    r = await readRaw(core, path, want === 'base64');
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
    mimeType: r.mimeType,
    size: r.size,
  };
}

async function readRaw(core: SandboxCore, path: string, base64: boolean): Promise<WireRead> {
  const res = await core.t.request('GET', core.path('files'), { query: { path }, operation: 'file.read' });
  const bytes = new Uint8Array(await res.arrayBuffer());
  const text = isValidUtf8(bytes);
  return {
    path,
    content: text && !base64 ? decoder.decode(bytes) : bytesToBase64(bytes),
    encoding: text && !base64 ? 'utf-8' : 'base64',
    isBinary: !text,
    mimeType: res.headers.get('content-type') ?? 'application/octet-stream',
    size: bytes.length,
    timestamp: nowIso(),
  };
}

/** `readFile(path, {encoding: 'none'})`: the file's bytes as a stream, any size. */
export async function readFileBytes(core: SandboxCore, path: string): Promise<ReadFileStreamResult> {
  checkPath(path);
  await core.ready();
  const res = await core.t.request('GET', core.path('files'), { query: { path }, operation: 'file.read' });
  const len = Number(res.headers.get('content-length') ?? '-1');
  return {
    success: true,
    path,
    content: guardBody(res, 'file.read'),
    size: Number.isFinite(len) ? len : -1,
    mimeType: res.headers.get('content-type') ?? 'application/octet-stream',
    timestamp: nowIso(),
  };
}

/** Text MIME types, by the hosted SDK's rule (text/*, +json, +xml and a few others). */
function isTextMime(m: string): boolean {
  const t = m.split(';')[0]!.trim().toLowerCase();
  return (
    t.startsWith('text/') ||
    t.endsWith('+json') ||
    t.endsWith('+xml') ||
    ['application/json', 'application/xml', 'application/javascript', 'application/yaml', 'application/x-sh'].includes(t)
  );
}

const CHUNK = 65535;

/**
 * The file as SSE `FileStreamEvent`s: `metadata`, `chunk`s (base64 for binary files), then
 * `complete` (or `error`). Consume it with `streamFile` or `collectFile`.
 */
export async function readFileStream(core: SandboxCore, path: string): Promise<ReadableStream<Uint8Array>> {
  const r = await readFileBytes(core, path);
  const isBinary = !isTextMime(r.mimeType);
  async function* events(): AsyncGenerator<FileStreamEvent> {
    yield { type: 'metadata', mimeType: r.mimeType, size: r.size, isBinary, encoding: isBinary ? 'base64' : 'utf-8' };
    const reader = r.content.getReader();
    const dec = new TextDecoder();
    let bytesRead = 0;
    let pending = new Uint8Array(0);
    try {
      for (;;) {
        const { done, value } = await reader.read();
        if (value) {
          bytesRead += value.length;
          const merged = new Uint8Array(pending.length + value.length);
          merged.set(pending);
          merged.set(value, pending.length);
          pending = merged;
        }
        while (pending.length >= CHUNK || (done && pending.length > 0)) {
          const part = pending.subarray(0, CHUNK);
          pending = pending.slice(part.length);
          yield { type: 'chunk', data: isBinary ? bytesToBase64(part) : dec.decode(part, { stream: true }) };
        }
        if (done) break;
      }
      if (!isBinary) {
        const tail = dec.decode();
        if (tail) yield { type: 'chunk', data: tail };
      }
      yield { type: 'complete', bytesRead };
    } catch (e) {
      yield { type: 'error', error: e instanceof Error ? e.message : String(e) };
    } finally {
      reader.releaseLock();
    }
  }
  return asyncIterableToSSEStream(events());
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
  const r = await core.t.json<Omit<ListFilesResult, 'success'>>('GET', core.path('files', 'list'), {
    query: {
      path,
      recursive: options.recursive ? 'true' : undefined,
      includeHidden: options.includeHidden ? 'true' : undefined,
    },
    operation: 'file.list',
  });
  return { success: true, path: r.path, files: r.files, count: r.count, timestamp: r.timestamp, exitCode: 0 };
}

export async function exists(core: SandboxCore, path: string): Promise<FileExistsResult> {
  checkPath(path);
  await core.ready();
  const r = await core.t.json<{ path: string; exists: boolean; timestamp: string }>('GET', core.path('files', 'exists'), {
    query: { path },
    operation: 'file.exists',
  });
  return { success: true, path: r.path, exists: r.exists, timestamp: r.timestamp, exitCode: 0 };
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
  const raw = await core.t.sse('POST', core.path('files', 'watch'), {
    json: compact({ path, recursive: options.recursive, include: options.include, exclude: options.exclude }),
    signal,
    operation: 'file.watch',
  });
  const it = sseObjects(raw, signal);
  const first = await it.next();
  if (first.done) throw clientError(ValidationFailedError, 'WATCH_START_ERROR', 500, `the watch of '${path}' ended at once`);
  async function* events(): AsyncGenerator<FileWatchSSEEvent> {
    yield first.value as FileWatchSSEEvent;
    for (;;) {
      const n = await it.next();
      if (n.done) return;
      yield n.value as FileWatchSSEEvent;
    }
  }
  const gen = events();
  return asyncIterableToSSEStream(
    {
      [Symbol.asyncIterator]: () => ({
        next: () => gen.next(),
        return: async () => {
          await it.return(undefined);
          return gen.return(undefined);
        },
      }),
    },
    signal ? { signal } : undefined,
  );
}
