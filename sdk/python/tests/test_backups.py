"""Backups (docs/api.md "Backups") through the sync and asyncio clients against a real
cellad: create_backup, restore_backup into the same and another sandbox (the directory
replaced whole), list_backups, delete_backup, excludes, gitignore and consistent, and the
error classes of each failure."""

from __future__ import annotations

import asyncio
import re
import time
import unittest
from datetime import datetime

import cella

from .harness import TOKEN, URL, client, destroy_quietly, needs_daemon, sandbox_name


def _ts(s: str) -> float:
    return datetime.fromisoformat(s.replace("Z", "+00:00")).timestamp()


@needs_daemon
class BackupsTest(unittest.TestCase):
    c: cella.Client
    a: cella.Sandbox
    b: cella.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()
        cls.a = cls.c.sandbox(sandbox_name("bk-a"))
        cls.b = cls.c.sandbox(sandbox_name("bk-b"))

    @classmethod
    def tearDownClass(cls) -> None:
        destroy_quietly(cls.a)
        destroy_quietly(cls.b)
        cls.c.close()

    def test_round_trip(self) -> None:
        self.a.exec("mkdir -p /workspace/py/sub && echo v1 >/workspace/py/sub/f && "
                    "chmod 0750 /workspace/py/sub && ln -s sub/f /workspace/py/l")
        bk = self.a.create_backup("/workspace/py", name="py", ttl=600)
        self.assertIsInstance(bk, cella.DirectoryBackup)
        self.assertRegex(bk.id, r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$")
        self.assertEqual((bk.dir, bk.name, bk.sandbox), ("/workspace/py", "py", self.a.id))
        self.assertGreater(bk.size_bytes, 0)
        self.assertEqual(_ts(bk.expires_at) - _ts(bk.created_at), 600)
        self.assertIn(bk.id, [x.id for x in self.a.list_backups()])

        self.a.exec("echo v2 >/workspace/py/sub/f && echo new >/workspace/py/later")
        r = self.a.restore_backup(bk)
        self.assertEqual(r, cella.RestoreBackupResult(success=True, dir="/workspace/py", id=bk.id))
        self.assertEqual(self.a.exec("cat /workspace/py/sub/f; stat -c %a /workspace/py/sub; "
                                     "readlink /workspace/py/l; ls /workspace/py").stdout,
                         "v1\n750\nsub/f\nl\nsub\n")
        # by id, into another sandbox and dir
        r = self.b.restore_backup(bk.id, dir="/home/py")
        self.assertEqual((r.success, r.dir), (True, "/home/py"))
        self.assertEqual(self.b.exec("cat /home/py/sub/f").stdout, "v1\n")

        self.a.delete_backup(bk)
        with self.assertRaises(cella.BackupNotFoundError) as cm:
            self.b.restore_backup(bk)
        self.assertEqual((cm.exception.code, cm.exception.http_status), ("BACKUP_NOT_FOUND", 404))

    def test_excludes_gitignore_consistent(self) -> None:
        self.a.exec("mkdir -p /workspace/gi/node_modules/m /workspace/gi/src /workspace/gi/build && "
                    "cd /workspace/gi && printf 'build/\\n*.tmp\\n' > .gitignore && "
                    "printf '!keep.tmp\\n' > src/.gitignore && touch node_modules/m/i.js src/a.c "
                    "src/x.tmp src/keep.tmp build/o.o debug.log main.c")
        bk = self.a.create_backup("/workspace/gi", gitignore=True,
                                  excludes=["node_modules", "*.log"], consistent=True)
        self.b.restore_backup(bk.id, dir="/workspace/gi-copy")
        self.assertEqual(self.b.exec("cd /workspace/gi-copy && find . | LC_ALL=C sort").stdout,
                         ".\n./.gitignore\n./main.c\n./src\n./src/.gitignore\n./src/a.c\n"
                         "./src/keep.tmp\n")
        self.a.delete_backup(bk)
        for bad in (["a[b"], [""], ["x\ty"]):
            with self.assertRaises(cella.InvalidBackupConfigError) as cm:
                self.a.create_backup("/workspace/gi", excludes=bad)
            self.assertEqual(cm.exception.http_status, 400)

    def test_errors(self) -> None:
        for d in ("workspace/py", "/workspace/../etc", "/etc"):
            with self.assertRaises(cella.InvalidBackupConfigError) as cm:
                self.a.create_backup(d)
            self.assertEqual(cm.exception.http_status, 400)
        with self.assertRaises(cella.InvalidBackupConfigError):
            self.a.create_backup("/workspace", ttl=0)
        with self.assertRaises(cella.BackupNotFoundError):
            self.a.delete_backup("00000000-0000-4000-8000-000000000000")
        self.a.exec("mkdir -p /workspace/short")
        short = self.a.create_backup("/workspace/short", ttl=1)
        time.sleep(1.2)
        with self.assertRaises((cella.BackupExpiredError, cella.BackupNotFoundError)) as cm2:
            self.a.restore_backup(short)
        if isinstance(cm2.exception, cella.BackupExpiredError):
            self.assertEqual(cm2.exception.http_status, 400)
            self.assertTrue(re.search("expired", cm2.exception.message))

    def test_async(self) -> None:
        async def run() -> None:
            async with cella.connect_async(url=URL, token=TOKEN) as ac:
                sb = ac.sandbox(self.a.id)
                await sb.exec("mkdir -p /workspace/aio && echo aio >/workspace/aio/x")
                bk = await sb.create_backup("/workspace/aio")
                await sb.exec("rm -rf /workspace/aio")
                r = await sb.restore_backup(bk)
                self.assertTrue(r.success)
                self.assertEqual((await sb.exec("cat /workspace/aio/x")).stdout, "aio\n")
                await sb.delete_backup(bk.id)
        asyncio.run(run())


if __name__ == "__main__":
    unittest.main()
