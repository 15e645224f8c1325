// Shared helpers of the core suites (commands, processes, files, sessions, errors,
// lifecycle): a connection to the harness's daemon, sandbox handles with the run's names,
// error assertions and stream readers. Only the SDK's public entry point and harness.ts.
import assert from 'node:assert/strict';
import { env, sandboxName } from './harness.js';
import {
  connect,
  getSandbox,
  parseSSEStream,
  SandboxError,
  type CellaNamespace,
  type Sandbox,
  type SandboxOptions,
} from '../src/index.js';

/** `{ skip }` for daemon tests: a reason when CELLA_URL is unset. */
export const skip: string | false = env.available ? false : 'CELLA_URL is not set';

let nsCache: CellaNamespace | undefined;

/** The connection to the harness's daemon (one per test file). */
export function ns(): CellaNamespace {
  if (!nsCache) nsCache = connect({ url: env.url, token: env.token });
  return nsCache;
}

const made = new Set<Sandbox>();

/** A handle of this run's sandbox `suffix`; `destroyMade()` in `after()` destroys them. */
export function sb(suffix: string, options?: SandboxOptions): Sandbox {
  const s = getSandbox(ns(), sandboxName(suffix), options);
  made.add(s);
  return s;
}

/** Destroys every sandbox `sb()` handed out (errors ignored: cleanup must not fail a file). */
export async function destroyMade(): Promise<void> {
  if (!env.available) return;
  for (const s of made) await s.destroy().catch(() => undefined);
  made.clear();
}

type Ctor<T> = abstract new (...args: any[]) => T;

/**
 * Awaits `p`, which must reject with an instance of `cls` (and `code` when given); answers
 * the error so that the test can look at it further.
 */
export async function rejectsWith<T extends Error>(
  p: Promise<unknown> | (() => Promise<unknown>),
  cls: Ctor<T>,
  code?: string,
): Promise<T> {
  let err: unknown;
  try {
    await (typeof p === 'function' ? p() : p);
  } catch (e) {
    err = e;
  }
  assert.ok(err !== undefined, `expected a rejection with ${cls.name}, but it resolved`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${describe(err)}`);
  if (code !== undefined) assert.equal((err as unknown as SandboxError).code, code, describe(err));
  return err as T;
}

/** Calls `fn`, which must throw synchronously an instance of `cls` (answered). */
export function throwsWith<T extends Error>(fn: () => unknown, cls: Ctor<T>, code?: string): T {
  let err: unknown;
  let threw = false;
  try {
    fn();
  } catch (e) {
    err = e;
    threw = true;
  }
  assert.ok(threw, `expected a synchronous ${cls.name}`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${describe(err)}`);
  if (code !== undefined) assert.equal((err as unknown as SandboxError).code, code, describe(err));
  return err as T;
}

export function describe(e: unknown): string {
  if (e instanceof SandboxError) return `${e.name} ${e.code} ${e.httpStatus}: ${e.message}`;
  if (e instanceof Error) return `${e.name}: ${e.message}`;
  return String(e);
}

/** The shape every SandboxError has (hosted SDK §11). */
export function assertErrorShape(e: SandboxError, code: string, httpStatus: number): void {
  assert.ok(e instanceof SandboxError, describe(e));
  assert.ok(e instanceof Error);
  assert.equal(e.code, code);
  assert.equal(e.httpStatus, httpStatus);
  assert.equal(typeof e.message, 'string');
  assert.ok(e.message.length > 0);
  assert.equal(typeof e.context, 'object');
  assert.ok(e.context !== null);
  assert.ok(isIsoTime(e.timestamp), `timestamp ${e.timestamp}`);
  const j = e.toJSON();
  assert.equal(j.code, code);
  assert.equal(j.httpStatus, httpStatus);
  assert.equal(j.message, e.message);
  assert.equal(j.name, e.name);
  assert.deepEqual(j.context, e.context);
  // serialisable as JSON (what a Worker would send on)
  assert.equal(JSON.parse(JSON.stringify(e)).code, code);
}

export function isIsoTime(s: unknown): boolean {
  return typeof s === 'string' && /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/.test(s) && !Number.isNaN(Date.parse(s));
}

/** Rejects when `p` takes longer than `ms` (so that a hang fails the test instead of the run). */
export function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: no result within ${ms} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

/** Polls `fn` until it answers truthy (then answers that), or throws after `ms`. */
export async function waitFor<T>(fn: () => Promise<T> | T, ms: number, what: string): Promise<T> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      const v = await fn();
      if (v) return v;
      last = v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > deadline) throw new Error(`${what}: not true within ${ms} ms (last: ${describe(last)})`);
    await sleep(100);
  }
}

export function sleep(ms: number): Promise<void> {
  return new Promise((r) => setTimeout(r, ms));
}

/** Every byte of a stream. */
export async function readAll(stream: ReadableStream<Uint8Array>): Promise<Uint8Array> {
  const reader = stream.getReader();
  const parts: Uint8Array[] = [];
  let n = 0;
  for (;;) {
    const { done, value } = await reader.read();
    if (done) break;
    parts.push(value);
    n += value.length;
  }
  const out = new Uint8Array(n);
  let off = 0;
  for (const p of parts) {
    out.set(p, off);
    off += p.length;
  }
  return out;
}

/** Every event of an SSE stream. */
export async function allEvents<T>(stream: ReadableStream<Uint8Array>): Promise<T[]> {
  const out: T[] = [];
  for await (const ev of parseSSEStream<T>(stream)) out.push(ev);
  return out;
}

/** A ReadableStream of the given chunks. */
export function streamOf(...chunks: Uint8Array[]): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i < chunks.length) c.enqueue(chunks[i++]!);
      else c.close();
    },
  });
}

/** Deterministic pseudo-random bytes (every value 0..255 occurs). */
export function bytes(n: number, seed = 1): Uint8Array {
  const b = new Uint8Array(n);
  let x = seed >>> 0 || 1;
  for (let i = 0; i < n; i++) {
    x ^= x << 13;
    x >>>= 0;
    x ^= x >>> 17;
    x ^= x << 5;
    x >>>= 0;
    b[i] = x & 0xff;
  }
  return b;
}

/** Whether a process whose command line contains `marker` runs in the sandbox (ps). */
export async function running(s: Sandbox, marker: string): Promise<boolean> {
  // The [x]yz trick keeps the grep itself out of the match.
  const pat = `[${marker[0]}]${marker.slice(1)}`;
  // In a session of its own: the default session may be busy with the command under test.
  const probe = await s.getSession('ps-probe');
  const r = await probe.exec(`ps -eo args | grep -c -- '${pat}' || true`);
  return Number(r.stdout.trim()) > 0;
}

export { env, sandboxName };
