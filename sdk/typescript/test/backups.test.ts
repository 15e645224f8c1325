// Backups (hosted SDK §10, docs/api.md "Backups"): createBackup → DirectoryBackup {id, dir,
// ...}, restoreBackup(backup) → {success, dir, id} into the same and another sandbox (the
// directory replaced whole), listBackups / deleteBackup, and the error classes of the
// hosted SDK for each failure: InvalidBackupConfigError (relative dir, "..", bad ttl,
// a malformed exclude), BackupNotFoundError, BackupExpiredError, all SandboxErrors with
// their codes; excludes and gitignore leave out what they match; consistent gives a backup.
import { test, describe, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  BackupExpiredError,
  BackupNotFoundError,
  InvalidBackupConfigError,
  SandboxError,
  type DirectoryBackup,
} from '../src/index.js';
import { assertErrorShape, destroyMade, isIsoTime, rejectsWith, sb, skip, sleep } from './core-helpers.js';

after(destroyMade);

describe('createBackup / restoreBackup', { skip }, () => {
  const a = sb('bk-a');
  const b = sb('bk-b');
  let backup: DirectoryBackup;

  test('createBackup: a DirectoryBackup of the hosted shape', async () => {
    await a.mkdir('/workspace/app/sub', { recursive: true });
    await a.writeFile('/workspace/app/sub/data.txt', 'v1\n');
    await a.exec('chmod 0750 /workspace/app/sub && ln -s sub/data.txt /workspace/app/link');
    backup = await a.createBackup({ dir: '/workspace/app', name: 'sdk', ttl: 600 });
    assert.match(backup.id, /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    assert.equal(backup.dir, '/workspace/app');
    assert.equal(backup.name, 'sdk');
    assert.ok(isIsoTime(backup.createdAt) && isIsoTime(backup.expiresAt));
    assert.equal(Date.parse(backup.expiresAt!) - Date.parse(backup.createdAt!), 600_000);
    assert.ok((backup.sizeBytes ?? 0) > 0);
    assert.ok((await a.listBackups()).some((x) => x.id === backup.id), 'listed');
  });

  test('restoreBackup: the directory as it was, in the same sandbox and in another', async () => {
    await a.writeFile('/workspace/app/sub/data.txt', 'v2\n');
    await a.writeFile('/workspace/app/later.txt', 'made after\n');
    const r = await a.restoreBackup(backup);
    assert.deepEqual(r, { success: true, dir: '/workspace/app', id: backup.id });
    assert.equal((await a.readFile('/workspace/app/sub/data.txt')).content, 'v1\n');
    assert.equal((await a.exists('/workspace/app/later.txt')).exists, false);
    assert.equal((await a.exec('stat -c %a /workspace/app/sub; readlink /workspace/app/link')).stdout, '750\nsub/data.txt\n');
    // a plain {id, dir} handle, as a caller keeps it, into another sandbox and dir
    const r2 = await b.restoreBackup({ id: backup.id, dir: '/home/copy' });
    assert.deepEqual(r2, { success: true, dir: '/home/copy', id: backup.id });
    assert.equal((await b.readFile('/home/copy/sub/data.txt')).content, 'v1\n');
  });

  test('excludes and gitignore: what they match is left out', async () => {
    await a.exec(
      'mkdir -p /workspace/gi/node_modules/m /workspace/gi/src /workspace/gi/build && cd /workspace/gi && ' +
        'printf "build/\\n*.tmp\\n" > .gitignore && printf "!keep.tmp\\n" > src/.gitignore && ' +
        'touch node_modules/m/i.js src/a.c src/x.tmp src/keep.tmp build/o.o debug.log main.c',
    );
    const bk = await a.createBackup({ dir: '/workspace/gi', gitignore: true, excludes: ['node_modules', '*.log'], consistent: true });
    await b.restoreBackup({ id: bk.id, dir: '/workspace/gi-copy' });
    const ls = await b.exec('cd /workspace/gi-copy && find . | LC_ALL=C sort');
    assert.equal(ls.stdout, ['.', './.gitignore', './main.c', './src', './src/.gitignore', './src/a.c', './src/keep.tmp', ''].join('\n'));
    await a.deleteBackup(bk.id);
  });

  test('bad input: InvalidBackupConfigError, BackupNotFoundError', async () => {
    for (const dir of ['workspace/app', '/workspace/../etc', '/etc']) {
      const e = await rejectsWith(a.createBackup({ dir }), InvalidBackupConfigError, 'INVALID_BACKUP_CONFIG');
      assertErrorShape(e, 'INVALID_BACKUP_CONFIG', 400);
    }
    await rejectsWith(a.createBackup({ dir: '/workspace/app', ttl: 0 }), InvalidBackupConfigError);
    await rejectsWith(a.createBackup({ dir: '/workspace/app', excludes: ['a[b'] }), InvalidBackupConfigError);
    await rejectsWith(a.createBackup({ dir: '/workspace/app', excludes: [''] }), InvalidBackupConfigError);
    const missing = { id: '00000000-0000-4000-8000-000000000000', dir: '/workspace/app' };
    const e = await rejectsWith(a.restoreBackup(missing), BackupNotFoundError, 'BACKUP_NOT_FOUND');
    assertErrorShape(e, 'BACKUP_NOT_FOUND', 404);
    assert.ok(e instanceof SandboxError);
    await rejectsWith(a.deleteBackup(missing.id), BackupNotFoundError);
  });

  test('an expired backup: BackupExpiredError, then gone', async () => {
    const short = await a.createBackup({ dir: '/workspace/app', ttl: 1 });
    await sleep(1200);
    try {
      await a.restoreBackup(short);
      assert.fail('restored an expired backup');
    } catch (e) {
      // expired, or already swept by cellad
      assert.ok(e instanceof BackupExpiredError || e instanceof BackupNotFoundError, String(e));
      if (e instanceof BackupExpiredError) assertErrorShape(e, 'BACKUP_EXPIRED', 400);
    }
  });

  test('deleteBackup', async () => {
    await a.deleteBackup(backup.id);
    assert.ok(!(await a.listBackups()).some((x) => x.id === backup.id));
    await rejectsWith(b.restoreBackup(backup), BackupNotFoundError);
  });
});
