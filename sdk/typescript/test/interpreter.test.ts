// The code interpreter (hosted SDK §8): contexts, runCode (JSON and with callbacks, live),
// runCodeStream in the hosted event shapes, rich results, errors, timeouts, cancelling,
// dead interpreters, CodeInterpreter and ExecutionSession — against the harness's daemon.
import { test, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import {
  CodeInterpreter,
  ContextDeadError,
  ContextNotFoundError,
  Execution,
  SandboxError,
  ValidationFailedError,
  connect,
  getSandbox,
  parseSSEStream,
  type CodeContext,
  type CreateContextOptions,
  type ExecutionError,
  type OutputMessage,
  type Result,
  type RunCodeStreamEvent,
  type Sandbox,
} from '../src/index.js';
import { env, sandboxName } from './harness.js';

const skip: string | false = env.available ? false : 'CELLA_URL is not set';
const T = { skip, timeout: 120_000 };

const made: Sandbox[] = [];
let nsCache: ReturnType<typeof connect> | undefined;

function sandbox(suffix: string): Sandbox {
  nsCache ??= connect({ url: env.url, token: env.token || undefined });
  const s = getSandbox(nsCache, sandboxName(suffix));
  made.push(s);
  return s;
}

after(async () => {
  if (!env.available) return;
  for (const s of made) await s.destroy().catch(() => undefined);
});

// One sandbox for most tests (contexts are cheap; each test makes its own).
let main: Sandbox | undefined;
function sb(): Sandbox {
  main ??= sandbox('interp');
  return main;
}

// Contexts a test makes are deleted after it (each is an interpreter: memory, and at most
// 32 per sandbox).
const opened: Array<{ s: Sandbox; id: string }> = [];
async function newContext(s: Sandbox, options?: CreateContextOptions): Promise<CodeContext> {
  const c = await s.createCodeContext(options);
  opened.push({ s, id: c.id });
  return c;
}
afterEach(async () => {
  for (const { s, id } of opened.splice(0)) await s.deleteCodeContext(id).catch(() => undefined);
});

type Ctor<E> = abstract new (...args: never[]) => E;

async function rejectsWith<E extends Error>(p: Promise<unknown>, cls: Ctor<E>, code?: string): Promise<E> {
  let err: unknown;
  try {
    await p;
  } catch (e) {
    err = e;
  }
  assert.ok(err !== undefined, `expected ${cls.name}, but it resolved`);
  assert.ok(err instanceof cls, `expected ${cls.name}, got ${String(err)}`);
  if (code !== undefined) assert.equal((err as unknown as SandboxError).code, code);
  return err as E;
}

function mainText(r: { results: Array<{ text?: string; isMainResult?: boolean }> }): string | undefined {
  return r.results.find((x) => x.isMainResult)?.text;
}

const PNG_SIGNATURE = [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a];

// ------------------------------------------------------------------ contexts and state

test('python: a context keeps its state from one run to the next', T, async () => {
  const s = sb();
  const before = Date.now();
  const ctx = await newContext(s, { language: 'python' });
  assert.match(ctx.id, /^ctx-[a-z0-9]+$/);
  assert.equal(ctx.language, 'python');
  assert.equal(ctx.cwd, '/workspace');
  assert.ok(ctx.createdAt instanceof Date && ctx.lastUsed instanceof Date);
  assert.ok(ctx.createdAt.getTime() >= before - 1000);

  const a = await s.runCode('x = 41\ndef inc(v):\n    return v + 1', { context: ctx });
  assert.ok(a instanceof Execution);
  assert.equal(a.code, 'x = 41\ndef inc(v):\n    return v + 1');
  assert.deepEqual(a.results, []);
  assert.equal(a.error, undefined);
  const b = await s.runCode('inc(x)', { context: ctx });
  assert.equal(b.results.length, 1);
  assert.equal(b.results[0]!.text, '42');
  assert.equal(b.results[0]!.isMainResult, true);
  assert.equal(typeof a.executionCount, 'number');
  assert.equal(b.executionCount, a.executionCount! + 1);
  const c = await s.runCode('print("x is", x)', { context: ctx });
  assert.deepEqual(c.logs, { stdout: ['x is 41\n'], stderr: [] });
});

test('two contexts are isolated', T, async () => {
  const s = sb();
  const [c1, c2] = await Promise.all([newContext(s), newContext(s)]);
  assert.notEqual(c1.id, c2.id);
  await s.runCode('secret = "one"', { context: c1 });
  const r = await s.runCode('secret', { context: c2 });
  assert.equal(r.error?.name, 'NameError');
  assert.equal(mainText(await s.runCode('secret', { context: c1 })), "'one'");
});

test('createCodeContext: envVars and cwd', T, async () => {
  const s = sb();
  const ctx = await newContext(s, { language: 'python', cwd: '/tmp', envVars: { GREETING: 'hello there' } });
  assert.equal(ctx.cwd, '/tmp');
  const r = await s.runCode('import os\nprint(os.environ["GREETING"])\nos.getcwd()', { context: ctx });
  assert.deepEqual(r.logs.stdout, ['hello there\n']);
  assert.equal(mainText(r), "'/tmp'");
});

test('runCode envVars: accepted, not sent (a context has its environment from its creation)', T, async () => {
  const s = sb();
  const r = await s.runCode('import os\nos.environ.get("RUN_ONLY_VAR")', { envVars: { RUN_ONLY_VAR: 'x' } });
  assert.equal(r.error, undefined);
  assert.equal(mainText(r), undefined); // None: no text result
  const ctx = await newContext(s, { language: 'python', envVars: { RUN_ONLY_VAR: 'from-context' } });
  assert.equal(mainText(await s.runCode('import os\nos.environ.get("RUN_ONLY_VAR")', { context: ctx })), "'from-context'");
});

test('no context: the default context of each language keeps its state', T, async () => {
  const s = sb();
  await s.runCode('default_var = 7');
  assert.equal(mainText(await s.runCode('default_var * 6', { language: 'python' })), '42');
  await s.runCode('globalThis.jsDefault = 5', { language: 'javascript' });
  assert.equal(mainText(await s.runCode('jsDefault + 1', { language: 'javascript' })), '6');
  const ids = (await s.listCodeContexts()).map((c) => c.id);
  assert.ok(ids.includes('default-python'), ids.join(','));
  assert.ok(ids.includes('default-javascript'), ids.join(','));
});

test('javascript: top-level await, console output, const kept across runs', T, async () => {
  const s = sb();
  const ctx = await newContext(s, { language: 'javascript' });
  assert.equal(ctx.language, 'javascript');
  const a = await s.runCode('const base = await new Promise((r) => setTimeout(() => r(40), 50));\nconsole.log("base", base);', {
    context: ctx,
  });
  assert.equal(a.error, undefined, JSON.stringify(a.error));
  assert.deepEqual(a.logs.stdout, ['base 40\n']);
  const b = await s.runCode('base + 2', { context: ctx });
  assert.equal(mainText(b), '42');
  const e = await s.runCode('function boom() { throw new TypeError("nope") }\nboom()', { context: ctx });
  assert.equal(e.error?.name, 'TypeError');
  assert.equal(e.error?.message, 'nope');
  assert.ok(e.error!.traceback.length > 0);
  assert.equal(e.error?.lineNumber, 1);
});

test('typescript: types are transpiled away, declarations persist', T, async () => {
  const s = sb();
  const ctx = await newContext(s, { language: 'typescript' });
  assert.equal(ctx.language, 'typescript');
  const a = await s.runCode('interface P { x: number }\nconst p: P = { x: 20 };\nconst twice = (n: number): number => n * 2;', {
    context: ctx,
  });
  assert.equal(a.error, undefined, JSON.stringify(a.error));
  const b = await s.runCode('twice(p.x) + 2', { context: ctx });
  assert.equal(mainText(b), '42');
  const j = await s.runCode('({ a: 1, b: [true, "x"] })', { context: ctx });
  assert.deepEqual(j.results[0]!.json, { a: 1, b: [true, 'x'] });
  assert.ok(j.results[0]!.formats().includes('json'));
});

// ------------------------------------------------------------------ rich results

test('rich results: a matplotlib figure is a PNG, a DataFrame has html; formats()', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  const fig = await s.runCode(
    'import matplotlib.pyplot as plt\nplt.plot([1, 4, 9])\nplt.title("squares")\nplt.show()',
    { context: ctx },
  );
  assert.equal(fig.error, undefined, JSON.stringify(fig.error));
  const png = fig.results.find((r) => r.png !== undefined);
  assert.ok(png, JSON.stringify(fig.results.map((r) => r.formats())));
  const bytes = Buffer.from(png.png!, 'base64');
  assert.ok(bytes.length > 1000);
  assert.deepEqual([...bytes.subarray(0, 8)], PNG_SIGNATURE);
  assert.ok(png.formats().includes('png'));
  assert.equal(png.formats().includes('html'), false);

  const df = await s.runCode('import pandas as pd\npd.DataFrame({"a": [1, 2], "b": ["x", "y"]})', { context: ctx });
  const r = df.results[0]!;
  assert.match(r.html!, /<table/);
  assert.match(r.text!, /a\s+b/);
  assert.equal(r.isMainResult, true);
  assert.deepEqual(r.formats(), ['text', 'html']);
  // the data only: no formats function, no keys cella did not send
  assert.deepEqual(Object.keys(r).sort(), ['html', 'isMainResult', 'text']);
  const plain = JSON.parse(JSON.stringify(df)) as Record<string, unknown>;
  assert.deepEqual(plain, df.toJSON());
  assert.equal(plain.code, df.code);
  assert.deepEqual(Object.keys((plain.results as object[])[0]!).sort(), ['html', 'isMainResult', 'text']);

  const none = await s.runCode('None', { context: ctx });
  assert.deepEqual(none.results, []);
});

// ------------------------------------------------------------------ errors

test('the code raising is the result\'s error, not a thrown error', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  const r = await s.runCode('print("before")\ndef f():\n    raise ValueError("bad value")\nf()', { context: ctx });
  assert.equal(r.error?.name, 'ValueError');
  assert.equal(r.error?.message, 'bad value');
  assert.ok(Array.isArray(r.error?.traceback));
  assert.match(r.error!.traceback.join('\n'), /ValueError: bad value/);
  assert.equal(r.error?.lineNumber, 3);
  assert.deepEqual(r.logs.stdout, ['before\n']);
  assert.deepEqual(r.toJSON().error, r.error);
  // and the context goes on
  assert.equal(mainText(await s.runCode('1 + 1', { context: ctx })), '2');
  const syntax = await s.runCode('def (', { context: ctx });
  assert.equal(syntax.error?.name, 'SyntaxError');
});

test('bad input: empty code runs, the daemon\'s refusals are ValidationFailedError', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  const empty = await s.runCode('', { context: ctx });
  assert.deepEqual(empty.results, []);
  assert.equal(empty.error, undefined);
  await rejectsWith(s.runCode('a\u0000b', { context: ctx }), ValidationFailedError, 'VALIDATION_FAILED');
  await rejectsWith(s.runCode('1', { language: 'ruby' as 'python' }), ValidationFailedError, 'VALIDATION_FAILED');
  await rejectsWith(s.createCodeContext({ language: 'cobol' as 'python' }), ValidationFailedError);
  await rejectsWith(s.runCode(42 as unknown as string), ValidationFailedError);
  await rejectsWith(s.runCode('1', { context: { id: 'bad id!' } as CodeContext }), ValidationFailedError);
  // with a context, `language` is the context's (the hosted SDK ignores the option then)
  assert.equal(mainText(await s.runCode('40 + 2', { context: ctx, language: 'javascript' })), '42');
});

// ------------------------------------------------------------------ callbacks and streams

test('callbacks are called in order, live, while the code runs', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  const seen: string[] = [];
  const outs: OutputMessage[] = [];
  let firstAt = 0;
  const results: Result[] = [];
  const started = Date.now();
  const r = await s.runCode(
    'import sys, time\nprint("one", flush=True)\nprint("warn", file=sys.stderr, flush=True)\ntime.sleep(1)\nprint("two")\n"done"',
    {
      context: ctx,
      onStdout: (m) => {
        if (!firstAt) firstAt = Date.now();
        outs.push(m);
        seen.push(`stdout:${m.text}`);
      },
      onStderr: async (m) => {
        await new Promise((res) => setTimeout(res, 10)); // awaited before the next event
        seen.push(`stderr:${m.text}`);
      },
      onResult: (res) => {
        results.push(res);
        seen.push(`result:${res.text}`);
      },
      onError: () => {
        seen.push('error');
      },
    },
  );
  const ended = Date.now();
  assert.ok(firstAt > 0);
  assert.ok(ended - firstAt >= 800, `the first output came ${ended - firstAt} ms before the end: not live`);
  assert.ok(firstAt - started < ended - started - 800);
  for (const m of outs) assert.ok(typeof m.timestamp === 'number' && m.timestamp >= started - 5000);
  const joined = seen.join('|');
  assert.ok(joined.indexOf('stdout:one') < joined.indexOf('stderr:warn'), joined);
  assert.ok(joined.indexOf('stderr:warn') < joined.indexOf('stdout:two'), joined);
  assert.ok(seen[seen.length - 1] === "result:'done'", joined);
  assert.equal(seen.includes('error'), false);
  assert.equal(results.length, 1);
  assert.deepEqual(results[0]!.formats(), ['text']);
  // the Execution has the same as the callbacks got
  assert.equal(r.logs.stdout.join(''), 'one\ntwo\n');
  assert.equal(r.logs.stderr.join(''), 'warn\n');
  assert.equal(r.results.length, 1);
  assert.equal(r.results[0]!.text, "'done'");
  assert.equal(typeof r.executionCount, 'number');

  const errs: ExecutionError[] = [];
  const order: string[] = [];
  const e = await s.runCode('print("x")\nraise KeyError("k")', {
    context: ctx,
    onStdout: (m) => void order.push(`out:${m.text}`),
    onError: (err) => {
      errs.push(err);
      order.push('error');
    },
  });
  // output comes in pieces (print writes the text and the newline apart): join them
  assert.equal(order[order.length - 1], 'error');
  assert.equal(order.slice(0, -1).map((o) => o.slice(4)).join(''), 'x\n');
  assert.equal(errs[0]?.name, 'KeyError');
  assert.equal(e.error?.name, 'KeyError');
  assert.equal(e.error?.lineNumber, 2);
});

test('runCodeStream: the hosted event names, as they happen', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  const stream = await s.runCodeStream(
    'import sys, time\nprint("a", flush=True)\ntime.sleep(0.5)\nprint("e", file=sys.stderr)\nimport pandas as pd\ndisplay_df = pd.DataFrame({"c": [1]})\ndisplay_df',
    { context: ctx },
  );
  const events: RunCodeStreamEvent[] = [];
  const at: number[] = [];
  for await (const ev of parseSSEStream<RunCodeStreamEvent>(stream)) {
    events.push(ev);
    at.push(Date.now());
  }
  const types = events.map((e) => e.type);
  assert.equal(types[0], 'stdout');
  assert.equal(types[types.length - 1], 'execution_complete');
  assert.ok(types.includes('stderr'));
  assert.ok(types.includes('result'));
  assert.ok(at[at.length - 1]! - at[0]! >= 400, 'the first event came at the end: not streamed');
  const out = events.filter((e): e is Extract<RunCodeStreamEvent, { type: 'stdout' | 'stderr' }> => e.type === 'stdout');
  assert.equal(out.map((e) => e.text).join(''), 'a\n');
  const res = events.find((e) => e.type === 'result') as Extract<RunCodeStreamEvent, { type: 'result' }>;
  assert.match(res.html!, /<table/);
  const done = events[events.length - 1] as Extract<RunCodeStreamEvent, { type: 'execution_complete' }>;
  assert.equal(typeof done.execution_count, 'number');
  assert.equal(done.executionCount, done.execution_count);
  assert.equal(done.timedOut, false);

  // an error: ename / evalue / traceback (and cella's name / message)
  const st2 = await s.runCodeStream('1/0', { context: ctx });
  const evs2: RunCodeStreamEvent[] = [];
  for await (const ev of parseSSEStream<RunCodeStreamEvent>(st2)) evs2.push(ev);
  assert.deepEqual(evs2.map((e) => e.type), ['error', 'execution_complete']);
  const err = evs2[0] as Extract<RunCodeStreamEvent, { type: 'error' }>;
  assert.equal(err.ename, 'ZeroDivisionError');
  assert.equal(err.evalue, 'division by zero');
  assert.equal(err.name, 'ZeroDivisionError');
  assert.ok(err.traceback.length > 0);
  assert.equal(err.code, undefined);

  // an unknown context is an ordinary rejection, before any stream
  await rejectsWith(s.runCodeStream('1', { context: { ...ctx, id: 'ctx-unknown00000000' } }), ContextNotFoundError);
});

test('timeout: timedOut, and the context keeps working with its state', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  await s.runCode('kept = "still here"', { context: ctx });
  let t0 = Date.now();
  const r = await s.runCode('import time\ntime.sleep(20)', { context: ctx, timeout: 500 });
  assert.ok(Date.now() - t0 < 10_000);
  assert.equal(r.timedOut, true);
  assert.equal(r.error?.name, 'KeyboardInterrupt');
  assert.equal(r.toJSON().timedOut, true);
  assert.equal(mainText(await s.runCode('kept', { context: ctx })), "'still here'");
  // the same through the streaming route
  t0 = Date.now();
  const outs: string[] = [];
  const r2 = await s.runCode('import time\nprint("start", flush=True)\ntime.sleep(20)', {
    context: ctx,
    timeout: 700,
    onStdout: (m) => void outs.push(m.text),
  });
  assert.ok(Date.now() - t0 < 10_000);
  assert.equal(r2.timedOut, true);
  assert.equal(outs.join(''), 'start\n');
  const ok = await s.runCode('kept', { context: ctx });
  assert.equal(ok.timedOut, undefined);
  assert.equal(mainText(ok), "'still here'");
});

// ------------------------------------------------------------------ listing and deleting

test('listCodeContexts / deleteCodeContext; unknown contexts are ContextNotFoundError', T, async () => {
  const s = sb();
  const ctx = await newContext(s, { language: 'javascript' });
  await s.runCode('1', { context: ctx });
  const listed = (await s.listCodeContexts()).find((c) => c.id === ctx.id);
  assert.ok(listed);
  assert.equal(listed.language, 'javascript');
  assert.equal(listed.cwd, '/workspace');
  assert.ok(listed.createdAt instanceof Date);
  assert.equal(listed.createdAt.getTime(), ctx.createdAt.getTime());
  assert.ok(listed.lastUsed.getTime() >= ctx.lastUsed.getTime());
  assert.ok(listed.status === 'ready' || listed.status === 'busy', String(listed.status));

  await s.deleteCodeContext(ctx.id);
  assert.equal((await s.listCodeContexts()).some((c) => c.id === ctx.id), false);
  const e = await rejectsWith(s.deleteCodeContext(ctx.id), ContextNotFoundError, 'CONTEXT_NOT_FOUND');
  assert.equal(e.httpStatus, 404);
  await rejectsWith(s.runCode('1', { context: ctx }), ContextNotFoundError);
  await rejectsWith(s.runCode('1', { context: ctx, onStdout: () => undefined }), ContextNotFoundError);
  await rejectsWith(s.deleteCodeContext('ctx-doesnotexist0000'), ContextNotFoundError);
});

test('a context whose interpreter is killed: ContextDeadError, then and after', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  const e = await rejectsWith(s.runCode('import os\nos.kill(os.getpid(), 9)', { context: ctx }), ContextDeadError, 'CONTEXT_DEAD');
  assert.equal(e.httpStatus, 410);
  await rejectsWith(s.runCode('1', { context: ctx }), ContextDeadError);
  const dead = (await s.listCodeContexts()).find((c) => c.id === ctx.id);
  assert.equal(dead?.status, 'dead');
  await s.deleteCodeContext(ctx.id);

  // mid-stream, with callbacks: the output before, then the rejection
  const ctx2 = await newContext(s);
  const outs: string[] = [];
  const e2 = await rejectsWith(
    s.runCode('import os\nprint("bye", flush=True)\nos.kill(os.getpid(), 9)', {
      context: ctx2,
      onStdout: (m) => void outs.push(m.text),
    }),
    ContextDeadError,
    'CONTEXT_DEAD',
  );
  assert.equal(outs.join(''), 'bye\n');
  assert.equal(e2.httpStatus, 410);
  assert.equal((e2.context as { stdout?: string }).stdout, 'bye\n');
  await rejectsWith(s.runCode('1', { context: ctx2, onStdout: () => undefined }), ContextDeadError);

  // runCodeStream: the error event with code CONTEXT_DEAD ends the stream
  const ctx3 = await newContext(s);
  const st = await s.runCodeStream('import os\nprint("x", flush=True)\nos.kill(os.getpid(), 9)', { context: ctx3 });
  const evs: RunCodeStreamEvent[] = [];
  for await (const ev of parseSSEStream<RunCodeStreamEvent>(st)) evs.push(ev);
  const last = evs[evs.length - 1] as Extract<RunCodeStreamEvent, { type: 'error' }>;
  assert.equal(last.type, 'error');
  assert.equal(last.code, 'CONTEXT_DEAD');
  assert.equal(last.ename, 'CONTEXT_DEAD');
  await Promise.all([ctx2, ctx3].map((c) => s.deleteCodeContext(c.id)));
  // a dead default context is replaced on the next run
  await rejectsWith(s.runCode('import os\nos.kill(os.getpid(), 9)', { language: 'python' }), ContextDeadError);
  assert.equal(mainText(await s.runCode('3 * 3')), '9');
});

test('aborting the signal mid-run rejects; the context works afterwards', T, async () => {
  const s = sb();
  const ctx = await newContext(s);
  await s.runCode('state = 5', { context: ctx });

  // JSON route
  const ac = new AbortController();
  setTimeout(() => ac.abort(new Error('stop it')), 300);
  let t0 = Date.now();
  await assert.rejects(s.runCode('import time\ntime.sleep(20)', { context: ctx, signal: ac.signal }), /stop it/);
  assert.ok(Date.now() - t0 < 5000);
  t0 = Date.now();
  assert.equal(mainText(await s.runCode('state', { context: ctx })), '5');
  assert.ok(Date.now() - t0 < 10_000, 'the aborted run was not interrupted');

  // streaming route, aborted after the first output
  const ac2 = new AbortController();
  const outs: string[] = [];
  t0 = Date.now();
  await assert.rejects(
    s.runCode('import time\nprint("go", flush=True)\ntime.sleep(20)\nstate = 6', {
      context: ctx,
      signal: ac2.signal,
      onStdout: (m) => {
        outs.push(m.text);
        ac2.abort();
      },
    }),
    (e: unknown) => e instanceof Error && e.name === 'AbortError',
  );
  assert.match(outs.join(''), /^go/);
  assert.ok(Date.now() - t0 < 5000);
  assert.equal(mainText(await s.runCode('state', { context: ctx })), '5');

  // an already-aborted signal sends nothing
  await assert.rejects(s.runCode('state = 7', { context: ctx, signal: AbortSignal.abort() }));

  // runCodeStream: cancelling the stream interrupts the run
  const st = await s.runCodeStream('import time\nprint("s", flush=True)\ntime.sleep(20)\nstate = 8', { context: ctx });
  const reader = st.getReader();
  const first = await reader.read();
  assert.match(new TextDecoder().decode(first.value), /"type":"stdout"/);
  t0 = Date.now();
  await reader.cancel();
  assert.equal(mainText(await s.runCode('state', { context: ctx })), '5');
  assert.ok(Date.now() - t0 < 10_000);
});

// ------------------------------------------------------------------ the other entry points

test('CodeInterpreter and ExecutionSession give the same code interpreter', T, async () => {
  const s = sb();
  const ci = new CodeInterpreter(s);
  const ctx = await ci.createCodeContext({ language: 'python' });
  await ci.runCode('shared = [1, 2, 3]', { context: ctx });
  assert.equal(mainText(await s.runCode('sum(shared)', { context: ctx })), '6');
  const session = await s.createSession({ id: 'interp-session' });
  assert.equal(mainText(await session.runCode('len(shared)', { context: ctx })), '3');
  const ids = (await session.listCodeContexts()).map((c) => c.id);
  assert.ok(ids.includes(ctx.id));
  const st = await ci.runCodeStream('shared[0]', { context: ctx });
  const evs: RunCodeStreamEvent[] = [];
  for await (const ev of parseSSEStream<RunCodeStreamEvent>(st)) evs.push(ev);
  assert.deepEqual(evs.map((e) => e.type), ['result', 'execution_complete']);
  const sctx = await session.createCodeContext({ language: 'javascript' });
  assert.ok((await ci.listCodeContexts()).some((c) => c.id === sctx.id));
  await session.deleteCodeContext(sctx.id);
  await ci.deleteCodeContext(ctx.id);
  await rejectsWith(ci.deleteCodeContext(ctx.id), ContextNotFoundError);
  assert.throws(() => new CodeInterpreter({} as Sandbox), TypeError);
});

test('a fresh sandbox: the first operation is runCode', T, async () => {
  const s = sandbox('interp-fresh');
  const r = await s.runCode('print("hi")\n21 * 2');
  assert.deepEqual(r.logs.stdout, ['hi\n']);
  assert.equal(mainText(r), '42');
});
