// A tenant's API key (docs/tenants.md, decision 0053) is a token like any: the SDK needs
// nothing more. The key's sandboxes are its own (a name the admin also uses is another
// sandbox), the admin's is 404 SANDBOX_NOT_FOUND, the list is the tenant's, the quota is
// QUOTA_EXCEEDED, and a removed key is refused.
import { test, describe } from 'node:test';
import assert from 'node:assert/strict';
import { SandboxError, connect, getSandbox } from '../src/index.js';
import { api, env, sandboxName } from './harness.js';
import { skip } from './core-helpers.js';

describe('tenants', { skip }, () => {
  test('a tenant key sees its own sandboxes only', async () => {
    const tenant = `ts${process.pid.toString(16).slice(0, 8)}`;
    const made = await api('POST', '/v1/keys', { tenant, maxSandboxes: 1 });
    assert.equal(made.status, 201, made.text);
    const admin = connect({ url: env.url, token: env.token });
    const mine = connect({ url: env.url, token: made.json.key });
    const name = sandboxName('tenant');
    const a = getSandbox(admin, name);
    const t = getSandbox(mine, name);
    try {
      await a.exec('echo admin > /workspace/who');
      assert.equal((await t.exec('echo tenant > /workspace/who; cat /workspace/who')).stdout, 'tenant\n');
      assert.equal((await a.exec('cat /workspace/who')).stdout, 'admin\n');
      assert.deepEqual((await mine.listSandboxes()).map((s) => s.id), [name]);
      await assert.rejects(getSandbox(mine, sandboxName('other')).exec('true'), (e: unknown) =>
        e instanceof SandboxError && e.code === 'QUOTA_EXCEEDED' && e.httpStatus === 403);
      const onlyAdmin = getSandbox(admin, sandboxName('admin-only'));
      await onlyAdmin.exec('true');
      try {
        // the admin's sandbox is, to the tenant, as absent as any (the SDK's handles create
        // lazily, so the raw GET asks)
        const r = await api('GET', `/v1/sandboxes/${sandboxName('admin-only')}`, undefined, {
          auth: false,
          headers: { Authorization: `Bearer ${made.json.key}` },
        });
        assert.equal(r.status, 404);
        assert.equal(r.json.code, 'SANDBOX_NOT_FOUND');
      } finally {
        await onlyAdmin.destroy();
      }
    } finally {
      await t.destroy().catch(() => undefined);
      await a.destroy().catch(() => undefined);
      await api('DELETE', `/v1/keys/${made.json.id}`);
    }
    await assert.rejects(mine.listSandboxes(), (e: unknown) => e instanceof SandboxError && e.httpStatus === 401);
  });
});
