/**
 * `@cella/sandbox`: the `@cloudflare/sandbox` API on a self-hosted cellad. Existing code
 * ports by changing the import and the line that gets the namespace:
 *
 *     import { connect, getSandbox } from '@cella/sandbox';
 *     const sandbox = getSandbox(connect({ url: 'http://127.0.0.1:7070' }), 'my-sandbox');
 *     const r = await sandbox.exec('echo hi');
 */
export { connect, getSandbox, CellaNamespace, Sandbox, ExecutionSession } from './sandbox.js';
export type { ConnectOptions } from './transport.js';
export { parseSSEStream, responseToAsyncIterable, asyncIterableToSSEStream } from './sse.js';
export { streamFile, collectFile } from './files.js';
export type { WriteFileOptions, ReadFileOptions } from './files.js';
export * from './errors.js';
export * from './types.js';
export { isExecResult, isProcess, isProcessStatus } from './guards.js';
