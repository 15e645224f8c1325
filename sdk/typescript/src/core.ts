/**
 * What every capability module needs of a sandbox: the transport, the sandbox's id, its
 * route prefix, and `ready()`, which applies the `getSandbox` options once before the first
 * operation (cellad creates a sandbox on its first operation; options that shape it must be
 * sent before: `PUT /v1/sandboxes/{id}`).
 */
import type { Transport } from './transport.js';
import type { SandboxOptions } from './types.js';
import { compact } from './util.js';

export class SandboxCore {
  readonly t: Transport;
  readonly id: string;
  readonly options: SandboxOptions;

  constructor(t: Transport, id: string, options: SandboxOptions) {
    this.t = t;
    this.id = id;
    this.options = options;
  }

  /** `/v1/sandboxes/{id}/...rest` (each segment encoded). */
  path(...rest: string[]): string {
    return this.t.sandboxPath(this.id, ...rest);
  }

  /** The body of `PUT /v1/sandboxes/{id}` for the options given; null when none matter. */
  putBody(): Record<string, unknown> | null {
    const o = this.options;
    const b = compact({
      sleepAfter: o.sleepAfter,
      keepAlive: o.keepAlive,
      enableDefaultSession: o.enableDefaultSession,
      labels: o.labels,
      image: o.image,
      instanceType: o.instanceType,
      env: o.env,
      network: o.network,
      networkAllow: o.networkAllow,
    });
    return Object.keys(b).length > 0 ? b : null;
  }

  /**
   * Sends the options once per connection, id and options (again after `forget()`): the
   * hosted SDK's pattern of calling `getSandbox` in every request handler costs one `PUT`
   * per distinct set of options, not one per call. Later calls share the first.
   */
  ready(): Promise<void> {
    const body = this.putBody();
    if (!body) return Promise.resolve();
    const key = `${this.id}\n${JSON.stringify(body)}`;
    const done = this.t.configured;
    let p = done.get(key);
    if (!p) {
      p = this.t
        .json('PUT', this.path(), { json: body, operation: 'sandbox.configure' })
        .then(() => undefined)
        .catch((e: unknown) => {
          done.delete(key);
          throw e;
        });
      done.set(key, p);
    }
    return p;
  }

  /** After a destroy: the next operation creates the sandbox again, with the options. */
  forget(): void {
    for (const k of [...this.t.configured.keys()]) if (k.startsWith(`${this.id}\n`)) this.t.configured.delete(k);
  }
}
