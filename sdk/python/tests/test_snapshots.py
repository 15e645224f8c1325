"""Snapshots and fork (docs/api.md "Snapshots and fork", decision 0052) through the sync
and the asyncio clients against a real cellad: a snapshot then a fork whose child sees the
files, ``from_snapshot``, listing, getting and deleting, and the 404/409 answers as
:class:`cella.SnapshotNotFoundError` / :class:`cella.SnapshotInUseError`. Each test
destroys its sandboxes and deletes its snapshots."""

from __future__ import annotations

import re
import unittest
from typing import Any, List

import cella
from cella import _core as core

from .harness import TOKEN, URL, api, client, needs_daemon, sandbox_name

SNAP_ID = re.compile(r"^snap-[0-9a-f]{16}$")


class OfflineTest(unittest.TestCase):
    def test_refused_before_any_request(self) -> None:
        c = cella.connect(url="http://127.0.0.1:9", timeout=1)
        for bad in ("", ".", ".."):
            with self.assertRaises(cella.ValidationFailedError):
                c.get_snapshot(bad)
            with self.assertRaises(cella.ValidationFailedError):
                c.delete_snapshot(bad)
        sb = c.sandbox("snap-offline")
        for name in ("Upper", "-lead", "www", "x" * 64):
            with self.assertRaises(cella.InvalidSandboxNameError):
                sb.fork(name)
        with self.assertRaises(TypeError):
            sb.fork("ok", image="default")  # type: ignore[call-arg]

    def test_decoding(self) -> None:
        s = cella.SnapshotInfo.from_json({"snapshotId": "snap-0123456789abcdef", "name": "n",
                                          "sandbox": "box", "image": "default",
                                          "sizeBytes": 4096, "createdAt": "2026-11-27T00:00:00Z"})
        self.assertEqual((s.id, s.name, s.sandbox, s.image, s.size_bytes, s.created_at),
                         ("snap-0123456789abcdef", "n", "box", "default", 4096,
                          "2026-11-27T00:00:00Z"))
        info = cella.SandboxInfo.from_json({"id": "c", "state": "running",
                                            "snapshot": "snap-0123456789abcdef"})
        self.assertEqual(info.snapshot, "snap-0123456789abcdef")
        self.assertIsNone(cella.SandboxInfo.from_json({"id": "c", "state": "x"}).snapshot)

    def test_fork_child_options(self) -> None:
        ref = core.SandboxRef(core.ClientState(), "parent", {})
        child = core.child_ref(ref, "kid", {"keep_alive": True, "labels": None})
        self.assertEqual(child.options, {"keepAlive": True})
        # the fork: POST, then the child's PUT with fromSnapshot and its options
        op = core.fork(ref, child)
        req = next(op)
        self.assertEqual((req.method, req.path, req.json), ("POST", "/v1/sandboxes/parent/fork",
                                                            {"name": "kid"}))
        req = op.send(core.Response(201, {}, b'{"id":"kid","state":"running",'
                                             b'"snapshot":"snap-00000000000000aa"}'))
        self.assertEqual((req.method, req.path, req.json),
                         ("PUT", "/v1/sandboxes/kid",
                          {"keepAlive": True, "fromSnapshot": "snap-00000000000000aa"}))
        with self.assertRaises(StopIteration):
            op.send(core.Response(200, {}, b'{"id":"kid","state":"running"}'))
        self.assertTrue(child.state.sent("kid", child.key))
        # without options nothing follows the POST, and the handle counts as configured
        bare = core.child_ref(ref, "kid2", {})
        op = core.fork(ref, bare)
        next(op)
        with self.assertRaises(StopIteration) as stop:
            op.send(core.Response(201, {}, b'{"id":"kid2","state":"running",'
                                           b'"snapshot":"snap-00000000000000bb"}'))
        self.assertEqual(stop.exception.value.snapshot, "snap-00000000000000bb")
        self.assertTrue(bare.state.sent("kid2", bare.key))
        self.assertEqual(bare.options, {"fromSnapshot": "snap-00000000000000bb"})


def _delete_snapshots(ids: List[str]) -> None:
    """Delete the test's snapshots, newest first (one over another is that one's child)."""
    for sid in reversed(ids):
        api("DELETE", "/v1/snapshots/" + sid)


@needs_daemon
class SyncSnapshotTest(unittest.TestCase):
    def setUp(self) -> None:
        self.c = client()
        self.boxes: List[Any] = []
        self.snaps: List[str] = []

    def tearDown(self) -> None:
        for b in reversed(self.boxes):
            try:
                b.destroy()
            except cella.SandboxError:
                pass
        _delete_snapshots(self.snaps)
        self.c.close()

    def box(self, suffix: str, **kw: Any) -> cella.Sandbox:
        sb = self.c.sandbox(sandbox_name("pysnap-" + suffix), **kw)
        self.boxes.append(sb)
        return sb

    def test_snapshot_then_fork(self) -> None:
        parent = self.box("parent")
        parent.write_file("app/state.txt", "before\n")
        parent.exec("mkdir -p /opt/deps && echo installed > /opt/deps/marker")
        snap = parent.create_snapshot(sandbox_name("pysnap-a"))
        self.snaps.append(snap.id)
        self.assertRegex(snap.id, SNAP_ID)
        self.assertEqual((snap.name, snap.sandbox), (sandbox_name("pysnap-a"), parent.id))
        self.assertTrue(snap.image)
        self.assertGreater(snap.size_bytes, 0)
        self.assertTrue(snap.created_at)

        parent.write_file("app/state.txt", "after\n")
        kid = parent.fork(sandbox_name("pysnap-fork"), labels={"from": "fork"}, keep_alive=True)
        self.boxes.append(kid)
        self.assertIsInstance(kid, cella.Sandbox)
        self.assertEqual(kid.read_file("app/state.txt"), "after\n")
        self.assertEqual(kid.exec("cat /opt/deps/marker").stdout, "installed\n")
        info = kid.get_info()
        self.assertRegex(info.snapshot or "", SNAP_ID)
        self.assertNotEqual(info.snapshot, snap.id)
        self.snaps.append(info.snapshot or "")
        self.assertEqual((info.labels, info.keep_alive, info.image),
                         ({"from": "fork"}, True, snap.image))
        kid.write_file("app/child.txt", "child\n")
        parent.write_file("app/parent.txt", "parent\n")
        self.assertFalse(parent.exists("app/child.txt"))
        self.assertFalse(kid.exists("app/parent.txt"))

        # from the named snapshot: the files when it was taken; destroyed, made again
        frm = self.box("from", from_snapshot=snap.name)
        self.assertEqual(frm.read_file("app/state.txt"), "before\n")
        self.assertEqual(frm.get_info().snapshot, snap.id)
        frm.write_file("only-here.txt", "x")
        frm.destroy()
        self.assertEqual(frm.exec("cat app/state.txt; test -e only-here.txt || echo gone").stdout,
                         "before\ngone\n")

    def test_list_get_delete_and_errors(self) -> None:
        parent = self.box("list")
        parent.write_file("f.txt", "listed\n")
        named = parent.create_snapshot(sandbox_name("pysnap-l"))
        unnamed = parent.create_snapshot()
        self.snaps += [named.id, unnamed.id]
        self.assertEqual(unnamed.name, unnamed.id)
        ids = [s.id for s in self.c.list_snapshots()]
        self.assertLess(ids.index(named.id), ids.index(unnamed.id))
        self.assertEqual([s.id for s in self.c.list_snapshots(parent.id)], [named.id, unnamed.id])
        self.assertEqual([s.id for s in parent.list_snapshots()], [named.id, unnamed.id])
        self.assertEqual(self.c.list_snapshots(sandbox_name("pysnap-none")), [])
        self.assertEqual(self.c.get_snapshot(named.name), named)
        self.assertEqual(self.c.get_snapshot(named.id), named)

        missing = sandbox_name("pysnap-missing")
        with self.assertRaises(cella.SnapshotNotFoundError) as nf:
            self.c.get_snapshot(missing)
        self.assertEqual((nf.exception.code, nf.exception.http_status), ("SNAPSHOT_NOT_FOUND", 404))
        with self.assertRaises(cella.SnapshotNotFoundError):
            self.c.delete_snapshot(missing)
        with self.assertRaises(cella.SnapshotNotFoundError):
            self.box("ghost", from_snapshot=missing).exec("true")
        with self.assertRaises(cella.ValidationFailedError):
            parent.create_snapshot(named.name)  # taken
        with self.assertRaises(cella.ValidationFailedError):
            parent.create_snapshot("Bad Name")
        other = self.box("other")
        other.exec("true")
        with self.assertRaises(cella.ValidationFailedError):
            parent.fork(other.id)  # exists

        user = self.box("user", from_snapshot=named.id)
        self.assertEqual(user.exec("cat f.txt").stdout, "listed\n")
        with self.assertRaises(cella.SnapshotInUseError) as iu:
            self.c.delete_snapshot(named.name)
        self.assertEqual((iu.exception.code, iu.exception.http_status), ("SNAPSHOT_IN_USE", 409))
        self.assertEqual(self.c.get_snapshot(named.id), named)
        with self.assertRaises(cella.ValidationFailedError):
            self.c.sandbox(user.id, from_snapshot=unnamed.id).exec("true")

        user.destroy()
        self.assertEqual(self.c.delete_snapshot(named.name), named.id)
        with self.assertRaises(cella.SnapshotNotFoundError):
            self.c.get_snapshot(named.id)
        self.assertEqual(self.c.delete_snapshot(unnamed.id), unnamed.id)
        self.assertEqual(parent.list_snapshots(), [])

        gone = self.box("gone")
        with self.assertRaises(cella.SandboxNotFoundError):
            gone.create_snapshot()
        with self.assertRaises(cella.SandboxNotFoundError):
            gone.fork(sandbox_name("pysnap-orphan"))
        with self.assertRaises(cella.SandboxNotFoundError):
            self.c.sandbox(sandbox_name("pysnap-orphan")).get_info()


@needs_daemon
class AsyncSnapshotTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.c = cella.connect_async(url=URL, token=TOKEN)
        self.boxes: List[Any] = []
        self.snaps: List[str] = []

    async def asyncTearDown(self) -> None:
        for b in reversed(self.boxes):
            try:
                await b.destroy()
            except cella.SandboxError:
                pass
        _delete_snapshots(self.snaps)
        await self.c.close()

    def box(self, suffix: str, **kw: Any) -> cella.AsyncSandbox:
        sb = self.c.sandbox(sandbox_name("pysnap-async-" + suffix), **kw)
        self.boxes.append(sb)
        return sb

    async def test_snapshot_fork_list_delete(self) -> None:
        parent = self.box("parent")
        await parent.write_file("seed.txt", "seed\n")
        snap = await parent.create_snapshot()
        self.snaps.append(snap.id)
        self.assertRegex(snap.id, SNAP_ID)
        kid = await parent.fork(sandbox_name("pysnap-async-kid"))
        self.boxes.append(kid)
        self.assertIsInstance(kid, cella.AsyncSandbox)
        self.assertEqual((await kid.exec("cat seed.txt")).stdout, "seed\n")
        fork_snap = (await kid.get_info()).snapshot or ""
        self.snaps.append(fork_snap)
        self.assertEqual([s.id for s in await parent.list_snapshots()], [snap.id, fork_snap])
        self.assertEqual((await self.c.get_snapshot(fork_snap)).sandbox, parent.id)
        frm = self.box("from", from_snapshot=snap.id)
        self.assertEqual(await frm.read_file("seed.txt"), "seed\n")
        with self.assertRaises(cella.SnapshotInUseError):
            await self.c.delete_snapshot(snap.id)
        with self.assertRaises(cella.SnapshotNotFoundError):
            await self.c.get_snapshot(sandbox_name("pysnap-async-missing"))
        await frm.destroy()
        self.assertEqual(await self.c.delete_snapshot(snap.id), snap.id)
        self.assertEqual([s.id for s in await self.c.list_snapshots(parent.id)], [fork_snap])
