/**
 * Server-sent events: cellad's streams are `data: {json}\n\n` frames whose kind is the
 * JSON's `type` (docs/api.md). The parser follows the SSE rules: `\n`, `\r\n` or `\r` line
 * ends, several `data:` lines joined with `\n`, comments (`: keepalive`) ignored, an
 * `event:` line giving the `type` when the JSON has none.
 */
import { transportError } from './transport.js';

/** Incremental SSE parser over text; `push` returns the complete events' data. */
export class SSEDecoder {
  /** The start of a line whose end has not come yet, in pieces (a long event, e.g. a
   * big image result, arrives in many chunks: joined once, not re-scanned per chunk). */
  private partial: string[] = [];
  private data: string[] = [];
  private event = '';
  private pendingCR = false;

  /** Feeds text, returns the events completed by it as `{event, data}`. */
  push(text: string): Array<{ event: string; data: string }> {
    if (this.pendingCR) {
      this.pendingCR = false;
      if (text.startsWith('\n')) text = text.slice(1);
    }
    if (text.includes('\r')) {
      // A CR that ends the chunk is a line end now; a LF that starts the next chunk is
      // then the second half of a CRLF (dropped above).
      this.pendingCR = text.endsWith('\r');
      text = text.replace(/\r\n?/g, '\n');
    }
    const out: Array<{ event: string; data: string }> = [];
    let pos = 0;
    for (;;) {
      const nl = text.indexOf('\n', pos);
      if (nl < 0) {
        if (pos < text.length) this.partial.push(text.slice(pos));
        break;
      }
      let line = text.slice(pos, nl);
      pos = nl + 1;
      if (this.partial.length > 0) {
        this.partial.push(line);
        line = this.partial.join('');
        this.partial = [];
      }
      this.line(line, out);
    }
    return out;
  }

  private line(line: string, out: Array<{ event: string; data: string }>): void {
    if (line === '') {
      if (this.data.length > 0) out.push({ event: this.event, data: this.data.join('\n') });
      this.data = [];
      this.event = '';
      return;
    }
    if (line.charCodeAt(0) === 58 /* : */) return;
    const colon = line.indexOf(':');
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? '' : line.slice(colon + 1);
    if (value.charCodeAt(0) === 32) value = value.slice(1);
    if (field === 'data') this.data.push(value);
    else if (field === 'event') this.event = value;
  }
}

/** Raw events of an SSE byte stream, as parsed JSON objects. */
export async function* sseObjects(
  stream: ReadableStream<Uint8Array>,
  signal?: AbortSignal,
): AsyncGenerator<Record<string, unknown>> {
  const reader = stream.getReader();
  const decoder = new TextDecoder();
  const sse = new SSEDecoder();
  const onAbort = () => {
    reader.cancel(signal?.reason).catch(() => undefined);
  };
  if (signal) {
    if (signal.aborted) {
      await reader.cancel(signal.reason).catch(() => undefined);
      throw signal.reason ?? new DOMException('aborted', 'AbortError');
    }
    signal.addEventListener('abort', onAbort, { once: true });
  }
  let finished = false;
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (signal?.aborted) throw signal.reason ?? new DOMException('aborted', 'AbortError');
      const text = done ? decoder.decode() : decoder.decode(value, { stream: true });
      for (const ev of sse.push(done ? text + '\n\n' : text)) {
        let obj: unknown;
        try {
          obj = JSON.parse(ev.data);
        } catch (e) {
          throw transportError('protocol_error', `an SSE event that is not JSON: ${ev.data.slice(0, 200)}`, e);
        }
        if (typeof obj !== 'object' || obj === null || Array.isArray(obj)) continue;
        const rec = obj as Record<string, unknown>;
        if (rec.type === undefined && ev.event) rec.type = ev.event;
        yield rec;
      }
      if (done) {
        finished = true;
        return;
      }
    }
  } finally {
    signal?.removeEventListener('abort', onAbort);
    if (!finished) await reader.cancel().catch(() => undefined);
    reader.releaseLock();
  }
}

/**
 * Parses an SSE stream (as `execStream`, `streamProcessLogs`, `readFileStream`, `watch` and
 * `runCodeStream` answer) into its events. Breaking out of the loop or aborting `signal`
 * cancels the stream (cella then stops what fed it: a command, a watch, a run).
 */
export function parseSSEStream<T>(stream: ReadableStream<Uint8Array>, signal?: AbortSignal): AsyncIterable<T> {
  return sseObjects(stream, signal) as AsyncIterable<T>;
}

/** `parseSSEStream` over a Response's body. */
export function responseToAsyncIterable<T>(response: Response, signal?: AbortSignal): AsyncIterable<T> {
  if (!response.ok) throw new Error(`responseToAsyncIterable: HTTP ${response.status}`);
  if (!response.body) throw new Error('responseToAsyncIterable: the response has no body');
  return parseSSEStream<T>(response.body, signal);
}

/** Encodes events as an SSE byte stream (`data: {json}\n\n` each), e.g. to forward them. */
export function asyncIterableToSSEStream<T>(
  events: AsyncIterable<T>,
  options?: { signal?: AbortSignal; serialize?: (event: T) => string },
): ReadableStream<Uint8Array> {
  return sseByteStream(events, options ?? {});
}

/**
 * @internal `asyncIterableToSSEStream` with a hook: cancelling the stream calls `onCancel`
 * first, which must make a `next()` in flight settle (abort the request feeding it), then
 * ends the iterator. Without the hook a cancel does not wait for the iterator to end: an
 * async generator's `return()` waits for its pending `next()`, which may never come (a
 * quiet log stream, an idle watch).
 */
export function sseByteStream<T>(
  events: AsyncIterable<T>,
  options: { signal?: AbortSignal; serialize?: (event: T) => string; onCancel?: (reason: unknown) => void },
): ReadableStream<Uint8Array> {
  const encoder = new TextEncoder();
  const serialize = options.serialize ?? ((e: T) => JSON.stringify(e));
  const it = events[Symbol.asyncIterator]();
  const signal = options.signal;
  let finished = false;
  const end = (): Promise<void> => {
    if (finished) return Promise.resolve();
    finished = true;
    signal?.removeEventListener('abort', onAbort);
    return Promise.resolve(it.return?.()).then(
      () => undefined,
      () => undefined,
    );
  };
  let ctl: ReadableStreamDefaultController<Uint8Array> | undefined;
  const onAbort = () => {
    options.onCancel?.(signal?.reason);
    try {
      ctl?.error(signal?.reason);
    } catch {
      /* already closed */
    }
    void end();
  };
  return new ReadableStream<Uint8Array>(
    {
      start(controller) {
        ctl = controller;
        signal?.addEventListener('abort', onAbort, { once: true });
      },
      async pull(controller) {
        if (signal?.aborted) {
          controller.error(signal.reason);
          await end();
          return;
        }
        try {
          const { done, value } = await it.next();
          // Aborted or cancelled meanwhile: the stream is settled already.
          if (finished || signal?.aborted) return;
          if (done) {
            finished = true;
            signal?.removeEventListener('abort', onAbort);
            controller.close();
            return;
          }
          const text = serialize(value)
            .split('\n')
            .map((l) => `data: ${l}`)
            .join('\n');
          controller.enqueue(encoder.encode(text + '\n\n'));
        } catch (e) {
          if (finished) return;
          finished = true;
          signal?.removeEventListener('abort', onAbort);
          controller.error(signal?.aborted ? signal.reason : e);
        }
      },
      async cancel(reason) {
        if (options.onCancel) {
          options.onCancel(reason);
          await end();
        } else void end();
      },
    },
    // Pull only for a reader waiting: nothing is read ahead of the consumer, so that a
    // consumer that stops has no `next()` in flight.
    { highWaterMark: 0 },
  );
}

/**
 * @internal An AbortController that also aborts when `signal` does (with its reason);
 * `dispose()` drops the link.
 */
export function linkedAbort(signal?: AbortSignal): { stop: AbortController; dispose: () => void } {
  const stop = new AbortController();
  if (!signal) return { stop, dispose: () => undefined };
  if (signal.aborted) {
    stop.abort(signal.reason);
    return { stop, dispose: () => undefined };
  }
  const on = () => stop.abort(signal.reason);
  signal.addEventListener('abort', on, { once: true });
  return { stop, dispose: () => signal.removeEventListener('abort', on) };
}
