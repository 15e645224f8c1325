/**
 * The package as a user installs it: `npm pack` gives a tarball with the ESM build and its
 * `.d.ts`; unpacked into a fresh project's node_modules it imports by name (both entry
 * points), type-checks a consumer under strict tsc, and runs `exec` against cellad.
 */
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, rmSync, symlinkSync, writeFileSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { env, sandboxName } from './harness.js';

const pkgDir = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');
const work = mkdtempSync(join(tmpdir(), 'cella-sdk-pack-'));
after(() => rmSync(work, { recursive: true, force: true }));

function sh(cmd: string, args: string[], cwd: string, extraEnv: Record<string, string> = {}): string {
  return execFileSync(cmd, args, { cwd, encoding: 'utf8', env: { ...process.env, ...extraEnv }, stdio: ['ignore', 'pipe', 'pipe'] });
}

test('npm pack: a tarball with the build, the types and both entry points', () => {
  const out = sh('npm', ['pack', '--silent', '--pack-destination', work], pkgDir).trim().split('\n').pop()!;
  const tgz = join(work, out);
  const list = sh('tar', ['-tzf', tgz], work).split('\n');
  for (const f of ['package/package.json', 'package/dist/index.js', 'package/dist/index.d.ts', 'package/dist/node.js', 'package/dist/node.d.ts'])
    assert.ok(list.includes(f), `${f} in the tarball`);
  assert.ok(!list.some((f) => f.startsWith('package/src/') || f.startsWith('package/test/') || f.includes('node_modules')),
    'no sources, tests or dependencies packed');

  // A fresh project: the tarball unpacked as node_modules/@cella/sandbox, its one
  // dependency (ws) and the type packages taken from this package's node_modules.
  const app = join(work, 'app');
  const mod = join(app, 'node_modules', '@cella', 'sandbox');
  mkdirSync(mod, { recursive: true });
  sh('tar', ['-xzf', tgz, '-C', mod, '--strip-components=1'], work);
  for (const dep of ['ws', '@types/node', '@types/ws']) {
    mkdirSync(dirname(join(app, 'node_modules', dep)), { recursive: true });
    symlinkSync(join(pkgDir, 'node_modules', dep), join(app, 'node_modules', dep));
  }
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', type: 'module', private: true }));
  writeFileSync(
    join(app, 'main.ts'),
    [
      "import { connect, getSandbox, FileNotFoundError, type ExecResult } from '@cella/sandbox';",
      "import { serve } from '@cella/sandbox/node';",
      'const ns = connect({ url: process.env.CELLA_URL ?? "http://127.0.0.1:7070", token: process.env.CELLA_TOKEN });',
      'const sandbox = getSandbox(ns, process.argv[2] ?? "x");',
      'const r: ExecResult = await sandbox.exec("echo packed");',
      'try { await sandbox.readFile("/nope"); } catch (e) { if (!(e instanceof FileNotFoundError)) throw e; }',
      'console.log(JSON.stringify({ stdout: r.stdout, serve: typeof serve }));',
      'await sandbox.destroy();',
    ].join('\n'),
  );
  writeFileSync(
    join(app, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: { target: 'ES2022', module: 'NodeNext', moduleResolution: 'NodeNext', strict: true, types: ['node'], outDir: 'out', skipLibCheck: false },
      include: ['main.ts'],
    }),
  );
  const tsc = join(pkgDir, 'node_modules', 'typescript', 'bin', 'tsc');
  sh(process.execPath, [tsc, '-p', 'tsconfig.json'], app);
  assert.match(readFileSync(join(app, 'out', 'main.js'), 'utf8'), /@cella\/sandbox/);
});

test('the packed package runs against cellad', { skip: !env.available }, () => {
  const app = join(work, 'app');
  const out = sh(process.execPath, [join(app, 'out', 'main.js'), sandboxName('pack')], app, {
    CELLA_URL: env.url,
    CELLA_TOKEN: env.token ?? '',
  });
  assert.deepEqual(JSON.parse(out.trim()), { stdout: 'packed\n', serve: 'function' });
});
