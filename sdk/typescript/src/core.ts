/**
 * What every capability module needs of a sandbox: the transport, the sandbox's id, its
 * route prefix, and `ready()`, which applies the `getSandbox` options once before the first
 * operation (cellad creates a sandbox on its first operation; options that shape it must be
 * sent before: `PUT /v1/sandboxes/{id}`).
 */
import type { Transport } from './transport.js';
import type { SandboxOptions } from './types.js';
import { SandboxNotFoundError } from './errors.js';
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
      fromSnapshot: o.fromSnapshot,
    });
    return Object.keys(b).length > 0 ? b : null;
  }

  /** The key under which the connection remembers that `body` was applied to this sandbox. */
  private key(body: Record<string, unknown>): string {
    return `${this.id}\n${JSON.stringify(body)}`;
  }

  /**
   * Sends the options once per connection, id and options (again after `forget()`): the
   * hosted SDK's pattern of calling `getSandbox` in every request handler costs one `PUT`
   * per distinct set of options, not one per call. Later calls share the first.
   */
  ready(): Promise<void> {
    const body = this.putBody();
    if (!body) return Promise.resolve();
    const key = this.key(body);
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

  /**
   * `PUT /v1/sandboxes/{id}` with every option now (`start()`): creates or wakes the
   * sandbox. The options then count as applied.
   */
  async start(operation: string, signal?: AbortSignal): Promise<void> {
    const body = this.putBody();
    const put = this.t.json('PUT', this.path(), { json: body ?? {}, operation, signal }).then(() => undefined);
    await put;
    if (body) this.t.configured.set(this.key(body), put);
  }

  /**
   * A setter (`setKeepAlive`, `setSleepAfter`, `setLabels`): `change` becomes part of the
   * handle's options, in one `PUT`. When the options before it were applied (or there were
   * none), the PUT carries `change` alone (a PUT of every option would add `env` again,
   * which the sandbox may have unset since); otherwise it is `ready()`'s PUT, which
   * creates or configures the sandbox with every option, `change` included. Either way the
   * new set of options counts as applied, so the next operation sends no PUT.
   */
  async update(change: Partial<SandboxOptions>): Promise<void> {
    const before = this.putBody();
    const applied = before === null ? Promise.resolve() : this.t.configured.get(this.key(before));
    Object.assign(this.options, change);
    if (applied === undefined || !(await applied.then(() => true, () => false))) return this.ready();
    const after = this.putBody();
    const put = this.t.json('PUT', this.path(), { json: change, operation: 'sandbox.configure' }).then(() => undefined);
    const key = after ? this.key(after) : null;
    if (key) this.t.configured.set(key, put);
    try {
      await put;
    } catch (e) {
      if (key) this.t.configured.delete(key);
      throw e;
    }
  }

  /**
   * Runs `op`, a GET: cellad answers a GET of a sandbox that does not exist 404
   * SANDBOX_NOT_FOUND and creates nothing (only writes create: a web page can make a
   * browser send a GET). Every operation of the hosted SDK starts its sandbox, so on that
   * answer the sandbox is created with the handle's options (`start()`) and `op` runs
   * again, once.
   */
  async read<T>(op: () => Promise<T>): Promise<T> {
    try {
      return await op();
    } catch (e) {
      if (!(e instanceof SandboxNotFoundError)) throw e;
      this.forget();
      await this.start('sandbox.create');
      return op();
    }
  }

  /**
   * The handle's options count as applied without a request: the sandbox was just made
   * with them (a fork's child, made from its snapshot by the fork itself).
   */
  markApplied(): void {
    const body = this.putBody();
    if (body) this.t.configured.set(this.key(body), Promise.resolve());
  }

  /**
   * After a destroy, or an answer that the sandbox does not exist (it was destroyed
   * elsewhere): the next operation creates the sandbox again, with the options.
   */
  forget(): void {
    for (const k of [...this.t.configured.keys()]) if (k.startsWith(`${this.id}\n`)) this.t.configured.delete(k);
  }
}
