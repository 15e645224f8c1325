// The TypeScript side of the SDK benchmark (bench/sdk.sh): the same work as
// bench/sdk-client.c, through @cella/sandbox (sdk/typescript/dist). Prints one line of
// key=value figures; never asserts on timing.
//
// usage: node bench/sdk-typescript.mjs URL SANDBOX rt N | stream BYTES
import { connect, getSandbox, parseSSEStream } from '../sdk/typescript/dist/index.js';

const [url, name, mode, arg] = process.argv.slice(2);
const sandbox = getSandbox(connect({ url }), name);

if (mode === 'rt') {
  const n = Number(arg);
  for (let i = 0; i < 100; i++) await sandbox.exec('true');
  const t = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await sandbox.exec('true');
    t[i] = (performance.now() - t0) * 1000;
    if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`);
  }
  t.sort();
  const pct = (p) => t[Math.min(n - 1, Math.round(p * (n - 1)))];
  console.log(`n=${n} p50_us=${pct(0.5).toFixed(0)} p95_us=${pct(0.95).toFixed(0)}`);
} else if (mode === 'stream') {
  const want = Number(arg);
  const cmd = `yes 0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ | head -c ${want}`;
  const t0 = performance.now();
  let got = 0;
  let code = -1;
  for await (const ev of parseSSEStream(await sandbox.execStream(cmd))) {
    if (ev.type === 'stdout') got += ev.data.length; // ASCII: characters are bytes
    else if (ev.type === 'complete') code = ev.exitCode;
    else if (ev.type === 'error') throw new Error(ev.error);
  }
  const s = (performance.now() - t0) / 1000;
  if (code !== 0 || got !== want) throw new Error(`stream: exit ${code}, ${got} of ${want} bytes`);
  console.log(`bytes=${got} seconds=${s.toFixed(2)} mbps=${(got / 1e6 / s).toFixed(0)}`);
} else {
  console.error('usage: sdk-typescript.mjs URL SANDBOX rt N | stream BYTES');
  process.exit(2);
}
