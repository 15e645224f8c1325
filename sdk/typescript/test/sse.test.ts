// SSE units, no daemon: the decoder's line rules (CRLF, lone CR, split CRLF), multi-line
// data, comments, `event:` lines, a multi-byte character split between chunks, bad data,
// and asyncIterableToSSEStream / parseSSEStream / responseToAsyncIterable round trips.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import {
  RPCTransportError,
  asyncIterableToSSEStream,
  parseSSEStream,
  responseToAsyncIterable,
} from '../src/index.js';
import { SSEDecoder } from '../src/sse.js';

const enc = new TextEncoder();

/** A byte stream of the given pieces (strings are UTF-8 encoded). */
function bytesStream(...pieces: Array<string | Uint8Array>): ReadableStream<Uint8Array> {
  let i = 0;
  return new ReadableStream<Uint8Array>({
    pull(c) {
      if (i >= pieces.length) return c.close();
      const p = pieces[i++]!;
      c.enqueue(typeof p === 'string' ? enc.encode(p) : p);
    },
  });
}

async function parse(...pieces: Array<string | Uint8Array>): Promise<unknown[]> {
  const out: unknown[] = [];
  for await (const ev of parseSSEStream<unknown>(bytesStream(...pieces))) out.push(ev);
  return out;
}

describe('SSEDecoder', () => {
  test('LF, CRLF and lone CR line ends', () => {
    for (const nl of ['\n', '\r\n', '\r']) {
      const d = new SSEDecoder();
      assert.deepEqual(d.push(`data: one${nl}${nl}data: two${nl}${nl}`), [
        { event: '', data: 'one' },
        { event: '', data: 'two' },
      ], JSON.stringify(nl));
    }
  });

  test('a CRLF split between two chunks is one line end', () => {
    const d = new SSEDecoder();
    assert.deepEqual(d.push('data: a\r'), []);
    assert.deepEqual(d.push('\n\r'), [{ event: '', data: 'a' }]);
    assert.deepEqual(d.push('\ndata: b\r\n\r\n'), [{ event: '', data: 'b' }]);
    // an event ended by lone CRs at the end of a chunk is complete at once, and a LF that
    // then starts the next chunk is not a second blank line
    const c = new SSEDecoder();
    assert.deepEqual(c.push('data: x\r\r'), [{ event: '', data: 'x' }]);
    assert.deepEqual(c.push('\ndata: y\n\n'), [{ event: '', data: 'y' }]);
  });

  test('multi-line data joined with \\n; comments ignored; event: and other fields', () => {
    const d = new SSEDecoder();
    const out = d.push(': keepalive\nevent: stdout\nid: 7\nretry: 1000\ndata: line 1\ndata:line 2\ndata\n\n');
    assert.deepEqual(out, [{ event: 'stdout', data: 'line 1\nline 2\n' }]);
    // the event name does not leak into the next event
    assert.deepEqual(d.push('data: x\n\n'), [{ event: '', data: 'x' }]);
    // only a comment, or only an event line: nothing is dispatched
    assert.deepEqual(d.push(': just a comment\n\nevent: lonely\n\n'), []);
    // one leading space is removed, not more
    assert.deepEqual(d.push('data:  two spaces\n\n'), [{ event: '', data: ' two spaces' }]);
  });

  test('a long event in many small chunks (linear, not re-scanned per chunk)', () => {
    const d = new SSEDecoder();
    const payload = 'x'.repeat(8 * 1024 * 1024);
    const text = `data: {"png":"${payload}"}\n\n`;
    const out: Array<{ event: string; data: string }> = [];
    for (let i = 0; i < text.length; i += 4096) out.push(...d.push(text.slice(i, i + 4096)));
    assert.equal(out.length, 1);
    assert.equal(out[0]!.data.length, payload.length + 10);
  });

  test('an event split in any place between chunks', () => {
    const text = 'event: e\ndata: {"a":1}\n\ndata: {"b":2}\r\n\r\n';
    for (let cut = 0; cut <= text.length; cut++) {
      const d = new SSEDecoder();
      const out = [...d.push(text.slice(0, cut)), ...d.push(text.slice(cut))];
      assert.deepEqual(out, [
        { event: 'e', data: '{"a":1}' },
        { event: '', data: '{"b":2}' },
      ], `cut at ${cut}`);
    }
  });
});

describe('parseSSEStream', () => {
  test('JSON events; the type from an event: line when the JSON has none', async () => {
    assert.deepEqual(await parse('data: {"type":"start","n":1}\n\n', 'event: stdout\ndata: {"data":"x"}\n\n'), [
      { type: 'start', n: 1 },
      { type: 'stdout', data: 'x' },
    ]);
    // the JSON's type wins over the event: line
    assert.deepEqual(await parse('event: other\ndata: {"type":"mine"}\n\n'), [{ type: 'mine' }]);
  });

  test('CRLF, lone CR, comments and multi-line data', async () => {
    assert.deepEqual(
      await parse(': keepalive\r\n\r\ndata: {"type":\r\ndata: "a"}\r\n\r\n', 'data: {"type":"b"}\r\r', ': bye\n\n'),
      [{ type: 'a' }, { type: 'b' }],
    );
  });

  test('a multi-byte character split between chunks, at every byte', async () => {
    const bytes = enc.encode('data: {"type":"stdout","data":"é✓🎉 日本"}\n\n');
    for (let cut = 1; cut < bytes.length; cut++) {
      const out = await parse(bytes.slice(0, cut), bytes.slice(cut));
      assert.deepEqual(out, [{ type: 'stdout', data: 'é✓🎉 日本' }], `cut at byte ${cut}`);
    }
    // one byte per chunk
    const single = [...bytes].map((b) => new Uint8Array([b]));
    assert.deepEqual(await parse(...single), [{ type: 'stdout', data: 'é✓🎉 日本' }]);
  });

  test('a UTF-8 BOM at the start is ignored', async () => {
    assert.deepEqual(await parse(new Uint8Array([0xef, 0xbb, 0xbf]), 'data: {"type":"a"}\n\n'), [{ type: 'a' }]);
  });

  test('the last event without its blank line is still delivered at the end', async () => {
    assert.deepEqual(await parse('data: {"type":"a"}\n\ndata: {"type":"b"}'), [{ type: 'a' }, { type: 'b' }]);
    assert.deepEqual(await parse(''), []);
  });

  test('data that is not JSON is RPCTransportError protocol_error; JSON that is not an object is skipped', async () => {
    await assert.rejects(parse('data: {"type":"a"}\n\ndata: not json\n\n'), (e: unknown) => {
      assert.ok(e instanceof RPCTransportError);
      assert.equal(e.kind, 'protocol_error');
      return true;
    });
    assert.deepEqual(await parse('data: [1,2]\n\ndata: 3\n\ndata: null\n\ndata: {"type":"ok"}\n\n'), [{ type: 'ok' }]);
  });

  test('breaking out of the loop cancels the source stream', async () => {
    let cancelled: unknown = 'not cancelled';
    let n = 0;
    const src = new ReadableStream<Uint8Array>({
      pull(c) {
        c.enqueue(enc.encode(`data: {"type":"tick","n":${n++}}\n\n`));
      },
      cancel(reason) {
        cancelled = reason;
      },
    });
    for await (const ev of parseSSEStream<{ n: number }>(src)) if (ev.n === 2) break;
    assert.notEqual(cancelled, 'not cancelled');
  });

  test('an AbortSignal: already aborted, or aborted while waiting for data', async () => {
    const reason = new Error('stop');
    const pre = parseSSEStream(bytesStream('data: {"type":"a"}\n\n'), AbortSignal.abort(reason));
    await assert.rejects(
      (async () => {
        for await (const _ of pre) void _;
      })(),
      (e: unknown) => e === reason,
    );
    let cancelled = false;
    const never = new ReadableStream<Uint8Array>({
      start(c) {
        c.enqueue(enc.encode('data: {"type":"first"}\n\n'));
      },
      cancel() {
        cancelled = true;
      },
    });
    const ac = new AbortController();
    const seen: unknown[] = [];
    const run = (async () => {
      for await (const ev of parseSSEStream(never, ac.signal)) {
        seen.push(ev);
        setTimeout(() => ac.abort(reason), 10);
      }
    })();
    await assert.rejects(run, (e: unknown) => e === reason);
    assert.deepEqual(seen, [{ type: 'first' }]);
    assert.equal(cancelled, true);
  });

  test('responseToAsyncIterable', async () => {
    const res = new Response(bytesStream('data: {"type":"x"}\n\n'), { headers: { 'content-type': 'text/event-stream' } });
    const out: unknown[] = [];
    for await (const ev of responseToAsyncIterable(res)) out.push(ev);
    assert.deepEqual(out, [{ type: 'x' }]);
    assert.throws(() => responseToAsyncIterable(new Response('x', { status: 500 })), /500/);
  });
});

describe('asyncIterableToSSEStream', () => {
  const events = [
    { type: 'start', command: 'echo "hi"\nthere' },
    { type: 'stdout', data: 'é✓🎉\r\n' },
    { type: 'complete', exitCode: 0 },
  ];

  async function* gen<T>(items: T[]): AsyncGenerator<T> {
    for (const x of items) yield x;
  }

  test('round trip through parseSSEStream', async () => {
    const stream = asyncIterableToSSEStream(gen(events));
    const out: unknown[] = [];
    for await (const ev of parseSSEStream(stream)) out.push(ev);
    assert.deepEqual(out, events);
  });

  test('the framing: one data: line per JSON, a blank line after each', async () => {
    const text = await new Response(asyncIterableToSSEStream(gen([{ type: 'a' }, { type: 'b' }]))).text();
    assert.equal(text, 'data: {"type":"a"}\n\ndata: {"type":"b"}\n\n');
  });

  test('a serializer with several lines becomes several data: lines and round-trips', async () => {
    const stream = asyncIterableToSSEStream(gen(events), { serialize: (e) => JSON.stringify(e, null, 2) });
    const text = await new Response(stream).text();
    assert.ok(text.includes('data: {\ndata:   "type": "start"'), text);
    const out: unknown[] = [];
    for await (const ev of parseSSEStream(asyncIterableToSSEStream(gen(events), { serialize: (e) => JSON.stringify(e, null, 2) })))
      out.push(ev);
    assert.deepEqual(out, events);
  });

  test('cancelling ends the iterable (its finally runs); an error in it errors the stream', async () => {
    let finished = false;
    async function* endless() {
      try {
        for (let i = 0; ; i++) yield { type: 'n', i };
      } finally {
        finished = true;
      }
    }
    for await (const ev of parseSSEStream<{ i: number }>(asyncIterableToSSEStream(endless()))) if (ev.i === 3) break;
    await new Promise((r) => setTimeout(r, 10));
    assert.equal(finished, true);
    async function* failing() {
      yield { type: 'ok' };
      throw new Error('source broke');
    }
    await assert.rejects(
      (async () => {
        for await (const _ of parseSSEStream(asyncIterableToSSEStream(failing()))) void _;
      })(),
      /source broke/,
    );
  });

  test('an AbortSignal errors the stream with its reason, also while the source is quiet', async () => {
    const reason = new Error('aborted by caller');
    const ac = new AbortController();
    let release: () => void = () => undefined;
    async function* quiet() {
      yield { type: 'first' };
      await new Promise<void>((r) => (release = r));
      yield { type: 'late' };
    }
    const reader = asyncIterableToSSEStream(quiet(), { signal: ac.signal }).getReader();
    assert.equal((await reader.read()).done, false);
    const pending = reader.read();
    ac.abort(reason);
    await assert.rejects(pending, (e: unknown) => e === reason);
    release();
    const already = asyncIterableToSSEStream(gen(events), { signal: AbortSignal.abort(reason) }).getReader();
    await assert.rejects(already.read(), (e: unknown) => e === reason);
  });
});
