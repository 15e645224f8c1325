/**
 * The minimal Worker of @cloudflare/sandbox's README (its `examples/minimal` template): runs
 * Python in a sandbox and works with a file, with preview URLs handled first.
 *
 *   GET /run    python3 -c "print(2 + 2)" in the sandbox: {output, error, exitCode, success}
 *   GET /file   writes /workspace/hello.txt and reads it back: {content}
 *
 * The hosted code line for line; only the package name and the type of `env.Sandbox`
 * differ (README.md has the diff). main.ts runs it on Node.
 */
import { getSandbox, proxyToSandbox, type CellaNamespace } from '@cella/sandbox';

export { Sandbox } from '@cella/sandbox';

export type Env = {
  Sandbox: CellaNamespace;
};

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    // Required for preview URLs
    const proxyResponse = await proxyToSandbox(request, env);
    if (proxyResponse) return proxyResponse;

    const url = new URL(request.url);
    const sandbox = getSandbox(env.Sandbox, 'my-sandbox');

    // Execute Python code
    if (url.pathname === '/run') {
      const result = await sandbox.exec('python3 -c "print(2 + 2)"');
      return Response.json({
        output: result.stdout,
        error: result.stderr,
        exitCode: result.exitCode,
        success: result.success,
      });
    }

    // Work with files
    if (url.pathname === '/file') {
      await sandbox.writeFile('/workspace/hello.txt', 'Hello, Sandbox!');
      const file = await sandbox.readFile('/workspace/hello.txt');
      return Response.json({ content: file.content });
    }

    return new Response('Try /run or /file');
  },
};
