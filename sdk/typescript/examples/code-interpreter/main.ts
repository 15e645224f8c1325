/**
 * Runs the code-interpreter Worker (worker.ts) on Node, against a cellad:
 *
 *   CELLA_URL=http://127.0.0.1:7070 [CELLA_TOKEN=...] [PORT=8787] node main.js
 *
 * The one thing a Worker gets from its platform, `env.Sandbox`, is a connection to cellad.
 */
import { connect } from '@cella/sandbox';
import { serve } from '@cella/sandbox/node';
import worker, { type Env } from './worker.js';

const env: Env = { Sandbox: connect({ url: process.env.CELLA_URL ?? 'http://127.0.0.1:7070', token: process.env.CELLA_TOKEN }) };

const server = await serve(worker, { env, port: Number(process.env.PORT ?? 8787) });
console.log(`code interpreter on ${server.url}
  curl -s ${server.url}/run -H 'content-type: application/json' -d '{"code": "import sys\\nprint(sys.version)\\n6 * 7"}'
  curl -s ${server.url}/analyze
  curl -sN ${server.url}/stream -d 'import time
for i in range(3):
    print(i, flush=True); time.sleep(1)'`);

for (const signal of ['SIGINT', 'SIGTERM'] as const)
  process.once(signal, () => {
    void server.close().then(() => process.exit(0));
  });
