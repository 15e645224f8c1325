/**
 * Runs the code-interpreter Worker (worker.ts) on Node against a cellad:
 *
 *   CELLA_URL=http://127.0.0.1:7070 [CELLA_TOKEN=...] [PORT=8787] node build-test/examples/code-interpreter/main.js
 *
 * What a Worker gets from its platform, `env.Sandbox`, is here a connection to cellad:
 * `{ Sandbox: connect({ url, token }) }`. `main()` is what the test suite starts.
 */
import { pathToFileURL } from 'node:url';
import { connect } from '@cella/sandbox';
import { serve, type ServeHandle } from '@cella/sandbox/node';
import worker, { type Env } from './worker.js';

export interface MainOptions {
  /** cellad; default $CELLA_URL or http://127.0.0.1:7070 */
  url?: string;
  /** cellad's API token; default $CELLA_TOKEN */
  token?: string;
  /** default $PORT or 8787; 0: any free port */
  port?: number;
  /** default 127.0.0.1 */
  hostname?: string;
}

export async function main(options: MainOptions = {}): Promise<ServeHandle> {
  const url = options.url ?? process.env.CELLA_URL ?? 'http://127.0.0.1:7070';
  const token = options.token ?? process.env.CELLA_TOKEN;
  const env: Env = { Sandbox: connect(token ? { url, token } : { url }) };
  const serveOptions: { env: Env; port: number; hostname?: string } = {
    env,
    port: options.port ?? Number(process.env.PORT ?? 8787),
  };
  if (options.hostname) serveOptions.hostname = options.hostname;
  return serve(worker, serveOptions);
}

// Run directly (not imported by a test): serve until ^C.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const app = await main();
  console.log(`code interpreter on ${app.url}
  curl -s ${app.url}/run -H 'content-type: application/json' -d '{"code": "import sys\\nprint(sys.version)\\n6 * 7"}'
  curl -s ${app.url}/analyze
  curl -sN ${app.url}/stream -d 'import time
for i in range(3):
    print(i, flush=True); time.sleep(1)'`);
  for (const signal of ['SIGINT', 'SIGTERM'] as const)
    process.once(signal, () => {
      void app.close().then(() => process.exit(0));
    });
}
