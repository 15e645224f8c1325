"""A tenant's API key (docs/tenants.md, decision 0053) used as the client's token: the SDK
needs nothing more. The key's sandboxes are its own: a name the admin also uses is
another sandbox, the admin's sandbox is SandboxNotFoundError, the list is the tenant's,
and a removed key is UnauthorizedError."""

from __future__ import annotations

import os
import unittest

import cella

from .harness import URL, api, client, needs_daemon, sandbox_name


@needs_daemon
class TenantKeyTest(unittest.TestCase):
    def test_tenant_key(self) -> None:
        tenant = "py" + format(os.getpid(), "x")[:8]
        status, key = api("POST", "/v1/keys", {"tenant": tenant, "maxSandboxes": 2})
        self.assertEqual(status, 201, key)
        admin = client()
        mine = cella.connect(url=URL, token=key["key"])
        name = sandbox_name("tenant")
        a = admin.sandbox(name)
        t = mine.sandbox(name)
        try:
            a.exec("echo admin > /workspace/who")
            self.assertEqual(t.exec("echo tenant > /workspace/who; cat /workspace/who").stdout,
                             "tenant\n")
            self.assertEqual(a.exec("cat /workspace/who").stdout, "admin\n")
            self.assertEqual([s.id for s in mine.list_sandboxes()], [name])
            with self.assertRaises(cella.SandboxNotFoundError):
                mine.sandbox(sandbox_name("admin-only")).get_info()
            with self.assertRaises(cella.SandboxError) as cm:
                mine.sandbox(sandbox_name("third")).create()
                mine.sandbox(sandbox_name("fourth")).create()
            self.assertEqual(cm.exception.code, "QUOTA_EXCEEDED")
            mine.sandbox(sandbox_name("third")).destroy()
        finally:
            t.destroy()
            a.destroy()
            api("DELETE", "/v1/keys/" + key["id"])
        with self.assertRaises(cella.UnauthorizedError):
            mine.list_sandboxes()


if __name__ == "__main__":
    unittest.main()
