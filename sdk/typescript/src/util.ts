/** Small helpers with no platform dependency beyond the web standard (atob/btoa, TextDecoder). */

interface NodeBuffer {
  from(data: string, enc: string): Uint8Array & { toString(enc: string): string };
  from(data: Uint8Array): Uint8Array & { toString(enc: string): string };
}
const NodeBuf: NodeBuffer | undefined = (globalThis as { Buffer?: NodeBuffer }).Buffer;

/** base64 → bytes. Throws on invalid input. */
export function base64ToBytes(s: string): Uint8Array {
  if (NodeBuf) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(s) || s.length % 4 === 1) throw new TypeError('invalid base64');
    const b = NodeBuf.from(s, 'base64');
    return new Uint8Array(b.buffer, b.byteOffset, b.byteLength);
  }
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

/** bytes → base64. */
export function bytesToBase64(b: Uint8Array): string {
  if (NodeBuf) return NodeBuf.from(b).toString('base64');
  let s = '';
  for (let i = 0; i < b.length; i += 0x8000) s += String.fromCharCode(...b.subarray(i, i + 0x8000));
  return btoa(s);
}

const utf8 = new TextDecoder();

/** A string field of an answer that may be base64 (`<name>Encoding: "base64"`), as text. */
export function decodeField(value: unknown, encoding: unknown): string {
  const s = typeof value === 'string' ? value : '';
  if (encoding === 'base64') return utf8.decode(base64ToBytes(s));
  return s;
}

/** ISO string (or number) → Date; undefined stays undefined. */
export function toDate(v: unknown): Date | undefined {
  if (typeof v === 'string' || typeof v === 'number') {
    const d = new Date(v);
    return Number.isNaN(d.getTime()) ? undefined : d;
  }
  return undefined;
}

/** Env for the wire: `undefined` dropped, `null` kept only where `keepNull` (setEnvVars). */
export function cleanEnv(
  env: Record<string, string | undefined | null> | undefined,
  keepNull = false,
): Record<string, string | null> | undefined {
  if (!env) return undefined;
  const out: Record<string, string | null> = {};
  for (const [k, v] of Object.entries(env)) {
    if (v === undefined) continue;
    if (v === null) {
      if (keepNull) out[k] = null;
      continue;
    }
    out[k] = String(v);
  }
  return out;
}

/** Drops `undefined` members, so that they are not sent. */
export function compact<T extends Record<string, unknown>>(o: T): Partial<T> {
  const out: Partial<T> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) (out as Record<string, unknown>)[k] = v;
  return out;
}

export function nowIso(): string {
  return new Date().toISOString();
}

/** Resolves after `ms`, or rejects with the signal's reason. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    const onAbort = () => {
      clearTimeout(t);
      reject(signal?.reason);
    };
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/** Splits text chunks into lines; `push` returns complete lines (without `\n`). */
export class LineSplitter {
  private rest = '';
  push(text: string): string[] {
    const s = this.rest + text;
    const parts = s.split('\n');
    this.rest = parts.pop() ?? '';
    return parts;
  }
  /** The unterminated last line, if any. */
  flush(): string | undefined {
    const r = this.rest;
    this.rest = '';
    return r === '' ? undefined : r;
  }
}
