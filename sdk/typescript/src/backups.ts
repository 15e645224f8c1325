/**
 * Backups (docs/api.md "Backups", docs/decisions/0049-backups.md): `createBackup` and
 * `restoreBackup` in the hosted SDK's shape, stored by cellad (a local directory or an
 * S3-compatible bucket) instead of R2; `listBackups` and `deleteBackup` are cella's own.
 */
import type { SandboxCore } from './core.js';
import { InvalidBackupConfigError, clientError } from './errors.js';
import { compact } from './util.js';

/** The hosted SDK's options. cella archives with zstd whatever `compression` says
 * (`localBucket` is accepted and unused); `excludes` are gitignore-style patterns relative
 * to `dir`, `gitignore` honours the .gitignore files under `dir`, `multipart` (default
 * true) streams an upload to an S3 store in parts, and cella's own `consistent` freezes
 * the sandbox while `dir` is read (one point in time). */
export interface BackupOptions {
  /** Absolute, no `..`; `/workspace`, `/home`, `/tmp`, `/var/tmp`, `/app` or below. */
  dir: string;
  name?: string;
  /** Seconds the backup is kept (default 259200, three days). */
  ttl?: number;
  /** Leave out what the .gitignore files under `dir` ignore (as git does). */
  gitignore?: boolean;
  /** gitignore-style patterns relative to `dir` (`node_modules`, `*.log`, `/build/`,
   * `!keep.log` to take back what a .gitignore left out). */
  excludes?: string[];
  compression?: { format?: 'lz4' | 'gzip' | 'zstd'; threads?: number };
  multipart?: boolean;
  localBucket?: boolean;
  /** cella's: freeze the sandbox while `dir` is read, so the backup is one point in time
   * (its processes pause for that long). Default false. */
  consistent?: boolean;
}

/** The handle `restoreBackup` takes: the hosted SDK's `{id, dir}` plus what cellad says. */
export interface DirectoryBackup {
  readonly id: string;
  readonly dir: string;
  readonly localBucket?: boolean;
  readonly name?: string;
  readonly sandbox?: string;
  readonly sizeBytes?: number;
  readonly createdAt?: string;
  readonly expiresAt?: string;
}

export interface RestoreBackupResult {
  success: boolean;
  dir: string;
  id: string;
}

function invalid(reason: string, context: Record<string, unknown> = {}): InvalidBackupConfigError {
  return clientError(InvalidBackupConfigError, 'INVALID_BACKUP_CONFIG', 400, `invalid backup config: ${reason}`, {
    reason,
    ...context,
  });
}

export async function createBackup(core: SandboxCore, options: BackupOptions): Promise<DirectoryBackup> {
  if (typeof options !== 'object' || options === null || typeof options.dir !== 'string')
    throw invalid('dir is required');
  if (options.excludes !== undefined && (!Array.isArray(options.excludes) || options.excludes.some((p) => typeof p !== 'string')))
    throw invalid('excludes must be an array of strings', { dir: options.dir });
  await core.ready();
  return core.t.json<DirectoryBackup>('POST', core.path('backups'), {
    json: compact({
      dir: options.dir,
      name: options.name,
      ttl: options.ttl,
      gitignore: options.gitignore,
      excludes: options.excludes,
      multipart: options.multipart,
      consistent: options.consistent,
    }),
    operation: 'backup.create',
  });
}

/** Replaces `dir` (default: the backup's) of this sandbox with the backup's content. */
export async function restoreBackup(
  core: SandboxCore,
  backup: Pick<DirectoryBackup, 'id'> & { dir?: string },
): Promise<RestoreBackupResult> {
  if (typeof backup !== 'object' || backup === null || typeof backup.id !== 'string' || !backup.id)
    throw invalid('a backup {id, dir} is required');
  await core.ready();
  const r = await core.t.json<RestoreBackupResult>('POST', core.path('backups', backup.id, 'restore'), {
    json: compact({ dir: backup.dir }),
    operation: 'backup.restore',
  });
  return { success: r.success, dir: r.dir, id: r.id };
}

/** Every backup of the store (those of other sandboxes and daemons sharing it too). */
export async function listBackups(core: SandboxCore): Promise<DirectoryBackup[]> {
  const r = await core.t.json<{ backups: DirectoryBackup[] }>('GET', '/v1/backups', { operation: 'backup.list' });
  return r.backups;
}

export async function deleteBackup(core: SandboxCore, id: string): Promise<void> {
  await core.t.json('DELETE', `/v1/backups/${encodeURIComponent(id)}`, { operation: 'backup.delete' });
}
