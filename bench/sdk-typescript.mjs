// The TypeScript side of the SDK benchmark (bench/sdk.sh): the same work as
// bench/sdk-client.c, through @cella/sandbox (sdk/typescript/dist). One process serves the
// whole run, as a server using the SDK would: bench/sdk.sh writes one command per line on
// stdin and reads one line of key=value figures for each on stdout. Never asserts on timing.
//
// usage: node bench/sdk-typescript.mjs URL SANDBOX
//   stdin lines:  rt N          N exec('true') round trips: n= p50_us= p95_us=
//                 warm N        N exec('true') calls, unmeasured: warmed=N
//                 stream BYTES  one execStream of BYTES of text: bytes= seconds= mbps=
import { createInterface } from 'node:readline';
import { connect, getSandbox, parseSSEStream } from '../sdk/typescript/dist/index.js';

const [url, name] = process.argv.slice(2);
if (!url || !name) {
  console.error('usage: sdk-typescript.mjs URL SANDBOX  (commands on stdin: rt N | warm N | stream BYTES)');
  process.exit(2);
}
const sandbox = getSandbox(connect({ url }), name);

async function rt(n) {
  const t = new Float64Array(n);
  for (let i = 0; i < n; i++) {
    const t0 = performance.now();
    const r = await sandbox.exec('true');
    t[i] = (performance.now() - t0) * 1000;
    if (r.exitCode !== 0) throw new Error(`exit ${r.exitCode}`);
  }
  t.sort();
  const pct = (p) => t[Math.min(n - 1, Math.round(p * (n - 1)))];
  return `n=${n} p50_us=${pct(0.5).toFixed(0)} p95_us=${pct(0.95).toFixed(0)}`;
}

async function stream(want) {
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
  return `bytes=${got} seconds=${s.toFixed(2)} mbps=${(got / 1e6 / s).toFixed(0)}`;
}

for await (const line of createInterface({ input: process.stdin })) {
  const [cmd, arg] = line.trim().split(/\s+/);
  const n = Number(arg);
  if (cmd === 'rt') console.log(await rt(n));
  else if (cmd === 'warm') {
    for (let i = 0; i < n; i++) await sandbox.exec('true');
    console.log(`warmed=${n}`);
  } else if (cmd === 'stream') console.log(await stream(n));
  else throw new Error(`unknown command '${line}'`);
}
