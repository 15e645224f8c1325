/**
 * Filesystem snapshots and fork (docs/api.md "Snapshots and fork"). A snapshot is a
 * sandbox's files at one moment (its writable layer over its image), kept by cellad apart
 * from the sandbox: it outlives it, and any number of sandboxes can start from it
 * (`getSandbox(ns, id, { fromSnapshot })`). `fork` takes a snapshot and makes a sandbox over
 * it in one request. The hosted SDK has no snapshots; names and shapes follow its style
 * (docs/decisions/0052-sdk-snapshots.md).
 */
import type { SandboxCore } from './core.js';
import { ValidationFailedError, clientError } from './errors.js';
import type { Transport } from './transport.js';
import type {
  CreateSnapshotOptions,
  DeleteSnapshotResult,
  ForkOptions,
  ListSnapshotsOptions,
  SandboxInfo,
  SandboxOptions,
  SnapshotInfo,
} from './types.js';

/**
 * A snapshot reference (id or name) that can stand as one path segment: a non-empty string,
 * not `.` or `..` (which URLs resolve away). Anything else goes to cellad, which answers
 * `SnapshotNotFoundError` for what names no snapshot.
 */
function checkRef(ref: unknown, what: string): asserts ref is string {
  if (typeof ref !== 'string' || ref === '' || ref === '.' || ref === '..')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, `${what} must be a snapshot's id or name`, {
      [what]: ref,
    });
}

function snapshotPath(ref: string): string {
  return `/v1/snapshots/${encodeURIComponent(ref)}`;
}

/** `POST /v1/sandboxes/{id}/snapshots`: the sandbox's files now (its processes run on). */
export async function createSnapshot(core: SandboxCore, options: CreateSnapshotOptions = {}): Promise<SnapshotInfo> {
  const name = options.name;
  if (name !== undefined && typeof name !== 'string')
    throw clientError(ValidationFailedError, 'VALIDATION_FAILED', 400, 'a snapshot name must be a string', { name });
  await core.ready();
  return core.t.json<SnapshotInfo>('POST', core.path('snapshots'), {
    json: name === undefined ? {} : { name },
    operation: 'snapshot.create',
    signal: options.signal,
  });
}

/**
 * `GET /v1/snapshots`, oldest first; with `sandbox`, those taken of that sandbox (also
 * after it was destroyed: snapshots outlive their sandbox, so the list is filtered here
 * rather than asked of the sandbox's route, which answers 404 once it is gone).
 */
export async function listSnapshots(t: Transport, options: ListSnapshotsOptions = {}): Promise<SnapshotInfo[]> {
  const r = await t.json<{ snapshots: SnapshotInfo[] }>('GET', '/v1/snapshots', { operation: 'snapshot.list' });
  const all = Array.isArray(r.snapshots) ? r.snapshots : [];
  return options.sandbox === undefined ? all : all.filter((s) => s.sandbox === options.sandbox);
}

/** `GET /v1/snapshots/{ref}` by id or name; `SnapshotNotFoundError` when there is none. */
export async function getSnapshot(t: Transport, ref: string): Promise<SnapshotInfo> {
  checkRef(ref, 'snapshotId');
  return t.json<SnapshotInfo>('GET', snapshotPath(ref), { operation: 'snapshot.get' });
}

/**
 * `DELETE /v1/snapshots/{ref}` by id or name. `SnapshotInUseError` (409) while a sandbox
 * made from it, or a snapshot over it, exists; `SnapshotNotFoundError` (404) when there is
 * none.
 */
export async function deleteSnapshot(t: Transport, ref: string): Promise<DeleteSnapshotResult> {
  checkRef(ref, 'snapshotId');
  const r = await t.json<{ snapshotId: string; deleted: boolean }>('DELETE', snapshotPath(ref), {
    operation: 'snapshot.delete',
  });
  return { snapshotId: r.snapshotId, deleted: r.deleted === true };
}

/** The handle options of a fork's child other than its name (`ForkOptions` less `name`). */
const CHILD_OPTIONS = ['sleepAfter', 'keepAlive', 'labels', 'env', 'networkAllow', 'containerTimeouts'] as const;

/**
 * `POST /v1/sandboxes/{id}/fork {name}`: a snapshot of the sandbox now and a new sandbox
 * `name` over it. Answers the child's record and the options of its handle: those given,
 * plus `fromSnapshot` (the fork's snapshot), so that the handle recreates the child from
 * the same snapshot after a destroy, as a `getSandbox(ns, name, { fromSnapshot })` handle
 * does. `name` has been checked by the caller (normalized when `normalizeId`).
 */
export async function fork(
  core: SandboxCore,
  name: string,
  options: ForkOptions,
): Promise<{ info: SandboxInfo; options: SandboxOptions }> {
  await core.ready();
  const info = await core.t.json<SandboxInfo>('POST', core.path('fork'), {
    json: options.memory === true ? { name, memory: true } : { name },
    operation: 'sandbox.fork',
    signal: options.signal,
  });
  const child: SandboxOptions = {};
  for (const k of CHILD_OPTIONS) if (options[k] !== undefined) (child as Record<string, unknown>)[k] = options[k];
  if (typeof info.snapshot === 'string') child.fromSnapshot = info.snapshot;
  return { info, options: child };
}
