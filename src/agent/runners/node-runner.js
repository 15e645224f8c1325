// cella code interpreter: the node runner, for javascript and typescript.
//
// Started by cella-init as `node -` with this file on stdin (a memfd, read to its end before
// the runner runs, so runs find stdin at EOF) in the sandbox; one process is one code
// context, the language is told by the `setup` request. Requests arrive on fd 3 and events
// leave on fd 4, one JSON object per line (docs/decisions/0025-code-interpreter-runners.md);
// fd 1 and fd 2 are the current run's stdout and stderr. Node core only; the typescript
// compiler of the image is loaded when present (it also parses javascript cells).
//
// Cells run with vm.runInThisContext: the main context is the one persistent context, so
// user code sees node's own globals (require, process, Buffer, fetch, ...) and values from
// node's APIs pass `instanceof` checks (a separate vm context would give them other
// prototypes). Top-level declarations are rewritten into global bindings (see rewrite()),
// so they persist between runs, can be declared again by a later run, and also persist
// from a cell that uses top-level await, which runs inside an async function.
//
// Everything lives inside this function so that the runner's names stay out of the global
// scope the cells share.
(() => {
  'use strict';
  const fs = require('fs');
  const Module = require('module');
  const net = require('net');
  const path = require('path');
  const readline = require('readline');
  const { Writable } = require('stream');
  const util = require('util');
  const vm = require('vm');

  // What the runner's own writing needs, taken before any cell can replace it
  // (a cell shares these objects: `require('fs').writeSync = ...` is its right).
  const writeSync = fs.writeSync;
  const { stringify, parse } = JSON;
  const bufferFrom = Buffer.from.bind(Buffer);

  const REQ_FD = 3;
  const EV_FD = 4;
  const TYPESCRIPT = '/usr/share/nodejs/typescript';
  // Events longer than this become a short text result: the agent refuses lines beyond
  // 64 MiB, and a refused line would cost the whole context.
  const MAX_EVENT = 48 << 20;
  // Stack frames of the runner (node's [stdin] script) and of node's machinery below the cell.
  const RUNNER_FRAME = /^\s+at .*(\[stdin\]|\(node:|at node:)/;
  // A line that may start an import or export statement, or an import() call.
  const IMPORT_EXPORT = /^\s*(import\s*[\w{*'"]|export\s)|\bimport\s*\(/m;
  // A lone UTF-16 surrogate: JSON.stringify escapes it as \udXXX, which strict parsers
  // refuse, so it is replaced before writing.
  const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/g;

  // The channel leaves fd 3/4, where user code could use it by accident. Node has no
  // dup(), but opening /proc/self/fd/N gives a new descriptor of the same pipe, opened
  // close-on-exec like everything node opens (node 18 also marks the inherited fds
  // close-on-exec by itself). Both are reopened before either is closed, so neither copy
  // lands on fd 3 or 4.
  function reopen(fd, flags) {
    try {
      return fs.openSync(`/proc/self/fd/${fd}`, flags);
    } catch (e) {
      return fd; // not a pipe (a socket cannot be reopened this way): used as it is
    }
  }
  const reqFd = reopen(REQ_FD, fs.constants.O_RDONLY);
  const evFd = reopen(EV_FD, fs.constants.O_WRONLY);
  if (reqFd !== REQ_FD) fs.closeSync(REQ_FD);
  if (evFd !== EV_FD) fs.closeSync(EV_FD);

  // Writes all of buf to fd with plain write(2)s. A non-blocking pipe that is full is
  // waited for (Atomics.wait is a synchronous sleep); with the agent gone (EPIPE) the
  // context is over.
  const pause = new Int32Array(new SharedArrayBuffer(4));
  function writeAll(fd, buf) {
    for (let off = 0; off < buf.length;) {
      try {
        off += writeSync(fd, buf, off);
      } catch (e) {
        if (e.code === 'EPIPE') process.exit(0);
        if (e.code !== 'EAGAIN') throw e;
        Atomics.wait(pause, 0, 0, 5);
      }
    }
  }

  // process.stdout/stderr as streams whose write() is one plain synchronous write to fd
  // 1/2, without any stream state. breakOnSigint stops a cell by terminating whatever
  // JavaScript runs, and a stream's state machine (node's net.Socket for a pipe, or a
  // Writable) cut in the middle of a write stays stuck: all later output of the context
  // was lost, and the next run's never came. Plain writes also keep every byte ahead of
  // the events on fd 4 that follow it.
  function syncStream(fd) {
    const stream = new Writable({
      write(chunk, encoding, callback) {
        writeAll(fd, chunk);
        callback();
      },
    });
    stream.write = (chunk, encoding, callback) => {
      if (typeof encoding === 'function') [callback, encoding] = [encoding, undefined];
      writeAll(fd, typeof chunk === 'string' ? bufferFrom(chunk, encoding || 'utf8') : chunk);
      if (callback) process.nextTick(callback);
      return true;
    };
    stream.fd = fd;
    stream.isTTY = false;
    return stream;
  }
  for (const [name, fd] of [['stdout', 1], ['stderr', 2]]) {
    Object.defineProperty(process, name, { configurable: true, enumerable: true,
      writable: true, value: syncStream(fd) });
  }

  // SIGINT while synchronous cell code runs is taken by breakOnSigint; here it arrives
  // while a run awaits, or between runs and while the runner loads (then it is ignored).
  let current = null; // the run in progress: { interrupt }
  process.on('SIGINT', () => {
    if (current && current.interrupt) current.interrupt();
  });

  function wellFormed(key, value) {
    return typeof value === 'string' ? value.replace(LONE_SURROGATE, '\ufffd') : value;
  }

  function emit(event) {
    let line = bufferFrom(stringify(event, wellFormed) + '\n');
    if (line.length > MAX_EVENT && event.type === 'result') {
      const note = `[result of ${line.length} bytes not sent: larger than ${MAX_EVENT}]`;
      const small = { text: note, isMainResult: !!event.result.isMainResult };
      line = bufferFrom(stringify({ ...event, result: small }) + '\n');
    }
    writeAll(evFd, line);
  }

  let ts = null;
  try {
    ts = require(TYPESCRIPT);
  } catch (e) {
    // no typescript: javascript cells run unparsed (see compileCell())
  }

  // ---- turning a cell into a script ----

  function syntaxError(message, text, pos) {
    const err = new SyntaxError(message);
    const before = text.slice(0, pos).split('\n');
    const line = before.length - 1;
    const source = text.split('\n')[line];
    err.stack = [`<cell>:${line + 1}`, source, ' '.repeat(before[line].length) + '^', '',
      `SyntaxError: ${message}`].join('\n');
    return err;
  }

  // TypeScript to javascript, types dropped and not checked. CommonJS keeps a cell that
  // has no import/export a plain script (top-level await stays as it is); one with
  // imports gets require() calls.
  function transpile(code, fileName) {
    const out = ts.transpileModule(code, {
      fileName,
      reportDiagnostics: true,
      compilerOptions: {
        target: ts.ScriptTarget.ES2022,
        module: ts.ModuleKind.CommonJS,
        esModuleInterop: true,
      },
    });
    const diag = (out.diagnostics || []).find(d => d.category === ts.DiagnosticCategory.Error);
    if (diag) {
      throw syntaxError(ts.flattenDiagnosticMessageText(diag.messageText, ' '), code,
        diag.start || 0);
    }
    return out.outputText;
  }

  // Is there an await outside any function (the cell needs an async wrapper)?
  function hasTopLevelAwait(node) {
    if (ts.isAwaitExpression(node) || (ts.isForOfStatement(node) && node.awaitModifier)) {
      return true;
    }
    if (ts.isFunctionLike(node)) return false;
    return !!ts.forEachChild(node, child => hasTopLevelAwait(child) || undefined);
  }

  function bindingNames(name, out) {
    if (ts.isIdentifier(name)) {
      out.add(name.text);
    } else {
      for (const el of name.elements) if (!ts.isOmittedExpression(el)) bindingNames(el.name, out);
    }
  }

  // The Node REPL's idea: top-level declarations become assignments to global bindings,
  // declared with `var` in front of the cell (a var of a script is a property of the
  // global object and may be declared again):
  //   let a = 1, {b} = o;   ->  void (a = 1, ({b} = o));
  //   class C {}            ->  void (C = class C {});
  //   function f() {}       ->  kept; in an async cell also `globalThis.f = f;` first
  // A cell with top-level await runs as `(async () => { ... })()` and its last
  // expression statement becomes `return (...)`. The prologue shares the cell's first
  // line, so line numbers in stack traces are the cell's.
  // Returns null when the parser sees a syntax error (V8 then tells it in its words).
  function rewrite(code) {
    const sf = ts.createSourceFile('cell.js', code, ts.ScriptTarget.ES2022, true,
      ts.ScriptKind.JS);
    if (sf.parseDiagnostics.length) return null;
    const isAsync = sf.statements.some(hasTopLevelAwait);
    const vars = new Set();
    const functions = [];
    const edits = []; // [start, end, text], in source order
    const text = node => code.slice(node.getStart(sf), node.end);
    sf.statements.forEach((st, i) => {
      if (ts.isVariableStatement(st)) {
        const isVar = !(st.declarationList.flags & (ts.NodeFlags.Let | ts.NodeFlags.Const));
        const parts = [];
        for (const decl of st.declarationList.declarations) {
          bindingNames(decl.name, vars);
          if (decl.initializer) {
            parts.push(`(${text(decl.name)} = ${text(decl.initializer)})`);
          } else if (!isVar) {
            parts.push(`(${text(decl.name)} = undefined)`);
          }
        }
        edits.push([st.getStart(sf), st.end, parts.length ? `void (${parts.join(', ')});` : ';']);
      } else if (ts.isClassDeclaration(st) && st.name) {
        vars.add(st.name.text);
        edits.push([st.getStart(sf), st.end, `void (${st.name.text} = ${text(st)});`]);
      } else if (ts.isFunctionDeclaration(st) && st.name) {
        functions.push(st.name.text);
      } else if (isAsync && i === sf.statements.length - 1 && ts.isExpressionStatement(st)) {
        edits.push([st.getStart(sf), st.end, `return (${text(st.expression)});`]);
      }
    });
    let body = '';
    let pos = 0;
    for (const [start, end, replacement] of edits) {
      body += code.slice(pos, start) + replacement;
      pos = end;
    }
    body += code.slice(pos);
    let prefix = vars.size ? `var ${[...vars].join(', ')}; ` : '';
    if (!isAsync) return { code: prefix + body, prefix, isAsync };
    prefix += `(async () => { ${functions.map(f => `globalThis.${f} = ${f}; `).join('')}`;
    const wrapped = `${prefix}${body}\n})()`;
    // The frame of the wrapper's call, on the line added after the cell.
    const callFrame = `<cell>:${wrapped.split('\n').length}:`;
    return { code: wrapped, prefix, isAsync, callFrame };
  }

  // columnOffset takes the prefix off the columns of the cell's first line.
  function script(code, lineOffset = 0, columnOffset = 0) {
    return new vm.Script(code, { filename: '<cell>', lineOffset, columnOffset });
  }

  function compileCell(code) {
    const plan = ts ? rewrite(code) : null;
    if (plan) {
      try {
        return { ...plan, script: script(plan.code, 0, -plan.prefix.length) };
      } catch (e) {
        // reported below, compiled as the user wrote it
      }
    }
    try {
      return { script: script(code), isAsync: false };
    } catch (e) {
      // Without the parser, a cell with top-level await still runs (its declarations
      // stay local to it and it has no value).
      if (!ts && e instanceof SyntaxError) {
        try {
          return { script: script(`(async () => {\n${code}\n})()`, -1), isAsync: true };
        } catch (e2) {
          // the first message is the one about the user's code
        }
      }
      throw e;
    }
  }

  // ---- results and errors ----

  function isPlainData(value) {
    if (Array.isArray(value)) return true;
    const proto = Object.getPrototypeOf(value);
    return proto === Object.prototype || proto === null;
  }

  function formatValue(value) {
    if (typeof value === 'string') return { text: value };
    const result = { text: util.inspect(value) };
    if (value !== null && typeof value === 'object' && isPlainData(value)) {
      try {
        const json = stringify(value);
        if (json !== undefined) result.json = parse(json);
      } catch (e) {
        // cycles, BigInt: text only
      }
    }
    return result;
  }

  function formatError(err, callFrame) {
    if (err && err.code === 'ERR_SCRIPT_EXECUTION_INTERRUPTED') {
      const message = 'Script execution was interrupted by SIGINT';
      return { name: 'Interrupted', message, traceback: [`Interrupted: ${message}`] };
    }
    const isErrorLike = err !== null && typeof err === 'object' && typeof err.stack === 'string';
    if (!isErrorLike) {
      const message = util.inspect(err);
      return { name: 'Error', message, traceback: [`Uncaught ${message}`] };
    }
    const traceback = err.stack.split('\n').filter(line => !RUNNER_FRAME.test(line) &&
      !(callFrame && line.trim().startsWith(`at ${callFrame}`)));
    while (traceback.length && traceback[traceback.length - 1].trim() === '') traceback.pop();
    return { name: String(err.name), message: String(err.message), traceback };
  }

  // ---- runs ----

  let language = 'javascript';
  let count = 0;

  class Interrupted extends Error {
    constructor(message) {
      super(message);
      this.name = 'Interrupted';
    }
  }

  // Awaits the cell's promise; a SIGINT meanwhile abandons it (it cannot be cancelled:
  // what it still does later is not this run's business).
  function awaitInterruptibly(promise) {
    return new Promise((resolve, reject) => {
      current.interrupt = () => reject(new Interrupted('interrupted while awaiting'));
      promise.then(resolve, reject);
    });
  }

  async function run(req) {
    count++;
    current = { interrupt: null };
    let error = null;
    let cell = null;
    try {
      const code = typeof req.code === 'string' ? req.code : '';
      // A javascript cell with import/export statements or import() goes through the
      // same transpiler, into require() calls: a script cannot hold the statements, and
      // node 18 runs import() in a vm script only with --experimental-vm-modules.
      const js = language === 'typescript' ? transpile(code, 'cell.ts')
        : ts && IMPORT_EXPORT.test(code) ? transpile(code, 'cell.js') : code;
      cell = compileCell(js);
      // breakOnSigint stops the synchronous part (for an async cell: up to its first
      // await); a SIGINT that comes while node is ending that part can be taken by
      // node's watchdog after the code ended, and a cell still pending then misses it
      // (no done: the agent's kill after 2 s applies). Later, the listener below serves.
      let value = cell.script.runInThisContext({ breakOnSigint: true,
        displayErrors: false });
      if (util.types.isPromise(value)) value = await awaitInterruptibly(value);
      if (value !== undefined) {
        const result = formatValue(value);
        result.isMainResult = true;
        emit({ type: 'result', id: req.id, result });
      }
    } catch (e) {
      error = e;
    }
    current = null;
    if (error !== null) {
      let described;
      try {
        described = formatError(error, cell && cell.callFrame);
      } catch (e) { // a hostile error object (a throwing getter, a proxy)
        described = { name: 'Error', message: 'the error could not be described', traceback: [] };
      }
      emit({ type: 'error', id: req.id, ...described });
    }
    // process.stdout/stderr write synchronously (syncStream): nothing left to flush.
    emit({ type: 'done', id: req.id, executionCount: count });
  }

  function setup(req) {
    if (req.language !== 'javascript' && req.language !== 'typescript') {
      return { type: 'setup_error', message: 'this runner speaks javascript and typescript' };
    }
    if (req.language === 'typescript' && !ts) {
      return { type: 'setup_error', message: `no typescript compiler at ${TYPESCRIPT}` };
    }
    try {
      if (req.cwd) process.chdir(req.cwd);
      for (const [key, value] of Object.entries(req.env || {})) process.env[key] = String(value);
    } catch (e) {
      return { type: 'setup_error', message: String(e.message) };
    }
    language = req.language;
    // require() in cells resolves from the working directory, like a script there.
    const here = path.join(process.cwd(), '[cell]');
    globalThis.require = Module.createRequire(here);
    globalThis.__filename = here;
    globalThis.__dirname = process.cwd();
    return { type: 'setup_ok' };
  }

  // A stray error of user code (a throw in a timer, a rejection nobody handles) is told
  // on stderr instead of ending the process, as in a REPL.
  process.on('uncaughtException', err => {
    process.stderr.write(`Uncaught ${util.inspect(err)}\n`);
  });
  process.on('unhandledRejection', reason => {
    process.stderr.write(`Uncaught (in promise) ${util.inspect(reason)}\n`);
  });

  // Requests one at a time, in order; at EOF (the agent went away) a pending run is
  // abandoned and the process ends.
  let queue = Promise.resolve();
  const input = readline.createInterface({
    input: new net.Socket({ fd: reqFd, readable: true, writable: false }),
    crlfDelay: Infinity,
  });
  input.on('line', line => {
    let req;
    try {
      req = parse(line);
    } catch (e) {
      return;
    }
    if (req === null || typeof req !== 'object') return;
    queue = queue.then(() => {
      if (req.type === 'setup') emit(setup(req));
      else if (req.type === 'run') return run(req);
    }).catch(err => { // the runner's own failure: told, and the next request still served
      process.stderr.write(`runner: ${util.inspect(err)}\n`);
    });
  });
  input.on('close', () => {
    if (current && current.interrupt) current.interrupt();
    queue.then(() => process.exit(0));
  });

  emit({ type: 'ready' });
})();
