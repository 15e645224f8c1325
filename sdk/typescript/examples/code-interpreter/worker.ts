/**
 * A code-interpreter Worker: runs Python (or JavaScript/TypeScript) posted to it in a
 * sandbox and answers the output, the rich results and the error as JSON.
 *
 *   POST /run      {"code": "...", "language"?: "python"|"javascript"|"typescript"}
 *                  (or the code itself as a text/plain body): a fresh context per request
 *   GET  /analyze  a fixed pandas + matplotlib analysis: summary table and a PNG chart
 *   POST /stream   the same body as /run; answers the run's events as they happen (SSE)
 *
 * This is the hosted @cloudflare/sandbox code, line for line; only the package name and the
 * type of `env.Sandbox` differ (README.md has the diff).
 */
import { getSandbox, type CellaNamespace } from '@cella/sandbox';
export { Sandbox } from '@cella/sandbox';

export interface Env {
  Sandbox: CellaNamespace;
}

type Language = 'python' | 'javascript' | 'typescript';

const ANALYSIS = `
import numpy as np
import pandas as pd
import matplotlib.pyplot as plt

rng = np.random.default_rng(7)
sales = pd.DataFrame({
    "month": ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"],
    "revenue": (100 + rng.normal(4, 12, 12).cumsum()).round(1),
})
sales["growth_pct"] = (sales["revenue"].pct_change() * 100).round(1)

plt.figure(figsize=(6, 3))
plt.plot(sales["month"], sales["revenue"], marker="o")
plt.title("Revenue by month")
plt.tight_layout()
plt.show()

best = sales.loc[sales["revenue"].idxmax()]
print(f"best month: {best['month']} ({best['revenue']})")
sales.describe().round(2)
`;

interface RunRequest {
  code?: unknown;
  language?: unknown;
}

async function readRun(request: Request): Promise<{ code: string; language: Language } | Response> {
  const type = request.headers.get('content-type') ?? '';
  let body: RunRequest;
  if (type.includes('application/json')) {
    try {
      body = (await request.json()) as RunRequest;
    } catch {
      return Response.json({ error: 'the body is not JSON' }, { status: 400 });
    }
  } else {
    body = { code: await request.text() };
  }
  if (typeof body.code !== 'string' || body.code.trim() === '')
    return Response.json({ error: 'post {"code": "..."} or the code as text/plain' }, { status: 400 });
  const language = body.language ?? 'python';
  if (language !== 'python' && language !== 'javascript' && language !== 'typescript')
    return Response.json({ error: 'language: python, javascript or typescript' }, { status: 400 });
  return { code: body.code, language };
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    const sandbox = getSandbox(env.Sandbox, 'my-sandbox');

    try {
      if (url.pathname === '/analyze' && request.method === 'GET') {
        const context = await sandbox.createCodeContext({ language: 'python' });
        try {
          const execution = await sandbox.runCode(ANALYSIS, { context, timeout: 60_000 });
          const summary = execution.results.find((r) => r.html !== undefined);
          const chart = execution.results.find((r) => r.png !== undefined);
          return Response.json({
            stdout: execution.logs.stdout.join(''),
            summary: summary?.text,
            table: summary?.html,
            chart: chart?.png ? `data:image/png;base64,${chart.png}` : undefined,
            error: execution.error,
          });
        } finally {
          await sandbox.deleteCodeContext(context.id);
        }
      }

      if (url.pathname === '/run' && request.method === 'POST') {
        const run = await readRun(request);
        if (run instanceof Response) return run;
        const context = await sandbox.createCodeContext({ language: run.language });
        try {
          const execution = await sandbox.runCode(run.code, { context, timeout: 30_000 });
          return Response.json({
            stdout: execution.logs.stdout.join(''),
            stderr: execution.logs.stderr.join(''),
            results: execution.results.map((r) => ({
              text: r.text,
              html: r.html,
              json: r.json,
              png: r.png ? `data:image/png;base64,${r.png}` : undefined,
            })),
            error: execution.error ? `${execution.error.name}: ${execution.error.message}` : undefined,
            traceback: execution.error?.traceback,
          });
        } finally {
          await sandbox.deleteCodeContext(context.id);
        }
      }

      if (url.pathname === '/stream' && request.method === 'POST') {
        const run = await readRun(request);
        if (run instanceof Response) return run;
        // the language's default context: nothing to clean up once the stream ends
        const stream = await sandbox.runCodeStream(run.code, { language: run.language, timeout: 30_000 });
        return new Response(stream, {
          headers: { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' },
        });
      }

      return new Response('POST /run {"code": "..."}, GET /analyze, POST /stream\n', { status: 404 });
    } catch (error) {
      console.error('Request failed:', error);
      const message = error instanceof Error ? error.message : 'Internal Server Error';
      return Response.json({ error: message }, { status: 500 });
    }
  },
};
