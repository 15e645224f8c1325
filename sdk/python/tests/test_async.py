"""The asyncio client over every method against a real cellad, with bad input and
faults."""

from __future__ import annotations

import asyncio
import io
import os
import unittest
from typing import Any, List

import cella

from .harness import TOKEN, URL, needs_daemon, sandbox_name


@needs_daemon
class AsyncTest(unittest.IsolatedAsyncioTestCase):
    async def asyncSetUp(self) -> None:
        self.c = cella.connect_async(url=URL, token=TOKEN)
        self.sb = self.c.sandbox(sandbox_name("async-" + self._testMethodName[5:]),
                                 keep_alive=True)

    async def asyncTearDown(self) -> None:
        try:
            await self.sb.destroy()
        finally:
            await self.c.close()

    async def test_sleep(self) -> None:
        await self.sb.exec("echo kept > /workspace/sleep.txt")
        info = await self.sb.sleep()
        self.assertEqual((info.state, info.keep_alive), ("sleeping", True))
        self.assertEqual((await self.sb.get_info()).state, "sleeping")
        self.assertEqual((await self.sb.exec("cat /workspace/sleep.txt")).stdout, "kept\n")
        self.assertEqual((await self.sb.get_info()).state, "running")

    async def test_exec_and_stream(self) -> None:
        r = await self.sb.exec("echo hi; (exit 2)", env={"A": "1"}, cwd="/tmp")
        self.assertEqual((r.stdout, r.exit_code, r.success), ("hi\n", 2, False))
        kinds = [e.type async for e in await self.sb.exec_stream("echo a; echo b >&2")]
        self.assertEqual((kinds[0], kinds[-1]), ("start", "complete"))
        with self.assertRaises(cella.CommandTimeoutError) as cm:
            await self.sb.exec("sleep 30", timeout=300)
        self.assertEqual(cm.exception.http_status, 408)
        results = await asyncio.gather(*(self.sb.exec(f"echo {i}") for i in range(6)))
        self.assertEqual([x.stdout for x in results], [f"{i}\n" for i in range(6)])
        await self.sb.set_env({"AV": "x"})
        self.assertEqual((await self.sb.exec("echo $AV")).stdout, "x\n")

    async def test_exec_raw(self) -> None:
        s = await self.sb.exec_raw("head -c 1000000 /dev/zero; echo err >&2; (exit 6)")
        got = b"".join([c async for c in s])
        r = await s.result()
        self.assertEqual((len(got), got.count(0), r.exit_code, r.stderr), (1000000, 1000000, 6,
                                                                             b"err\n"))
        s = await self.sb.exec_raw("echo x; sleep 30", timeout=300)
        with self.assertRaises(cella.CommandTimeoutError):
            await s.result()
        async with await self.sb.exec_raw("yes") as s:
            self.assertTrue(await s.read1())
        self.assertEqual((await self.sb.exec("echo after")).stdout, "after\n")

    async def test_files(self) -> None:
        await self.sb.write_file("a/t.txt", "text")
        self.assertEqual(await self.sb.read_file("a/t.txt"), "text")
        data = os.urandom(2 * 1024 * 1024 + 5)
        await self.sb.write_file("a/b.bin", io.BytesIO(data))
        self.assertEqual(await self.sb.read_file("a/b.bin", encoding="bytes"), data)
        out = io.BytesIO()
        self.assertEqual(await self.sb.read_file_to("a/b.bin", out), len(data))
        self.assertEqual(out.getvalue(), data)
        await self.sb.write_file("a/g.bin", (data[i:i + 65536] for i in range(0, len(data), 65536)))
        chunks = [c async for c in await self.sb.read_file_stream("a/g.bin")]
        self.assertEqual(b"".join(chunks), data)
        self.assertTrue(await self.sb.exists("a/t.txt"))
        await self.sb.mkdir("a/d/e", recursive=True)
        await self.sb.move_file("a/t.txt", "a/d/t.txt")
        await self.sb.rename_file("a/d/t.txt", "a/d/u.txt")
        names = {f.relative_path for f in await self.sb.list_files("a", recursive=True)}
        self.assertIn("d/u.txt", names)
        await self.sb.delete_file("a", recursive=True)
        self.assertFalse(await self.sb.exists("a"))
        with self.assertRaises(cella.FileNotFoundError) as cm:
            await self.sb.read_file("missing")
        self.assertEqual((cm.exception.code, cm.exception.http_status), ("FILE_NOT_FOUND", 404))
        with self.assertRaises(cella.FileNotFoundError):
            await self.sb.read_file_to("missing", io.BytesIO())

    async def test_sessions_processes_ports(self) -> None:
        s = await self.sb.create_session(id="as1", cwd="/tmp")
        await s.exec("cd /etc")
        self.assertEqual((await s.exec("pwd")).stdout, "/etc\n")
        self.assertIn("as1", [x.id for x in await self.sb.list_sessions()])
        self.assertEqual((await self.sb.get_session("as1")).session_id, "as1")
        await s.delete()
        with self.assertRaises(cella.SessionNotFoundError):
            await self.sb.get_session("as1")
        p = await self.sb.start_process("python3 -m http.server 8001", process_id="web")
        await p.wait_for_port(8001, timeout=20000)
        line = await p.wait_for_log("Serving", timeout=10000)
        self.assertIn("Serving", line.line)
        ep = await self.sb.expose_port(8001)
        self.assertTrue(ep.url.startswith("http://8001-"))
        self.assertEqual([x.port for x in await self.sb.get_exposed_ports()], [8001])
        await self.sb.unexpose_port(8001)
        self.assertIn("web", [x.id for x in await self.sb.list_processes()])
        self.assertEqual((await (await self.sb.get_process("web")).status()).status, "running")
        killed = await p.kill()
        self.assertEqual(killed.status, "killed")
        q = await self.sb.start_process("echo out; sleep 0.1")
        self.assertEqual((await q.wait_for_exit(timeout=10000)).exit_code, 0)
        self.assertEqual((await q.logs()).stdout, "out\n")
        self.assertEqual((await self.sb.get_process_logs(q.id)).stdout, "out\n")
        evs = [e async for e in await q.stream_logs()]
        self.assertEqual(evs[-1].type, "exit")
        with self.assertRaises(cella.ProcessNotFoundError):
            await self.sb.kill_process("nope")
        await self.sb.start_process("sleep 30")
        self.assertGreaterEqual(await self.sb.kill_all_processes(), 1)
        with self.assertRaises(cella.InvalidGitUrlError):
            await self.sb.git_checkout("ftp://x/y")

    async def test_watch_and_code(self) -> None:
        await self.sb.mkdir("w", recursive=True)
        async with await self.sb.watch("w") as events:
            first = await events.__anext__()
            self.assertEqual(first.type, "watching")
            await self.sb.write_file("w/x.py", "1")
            async for ev in events:
                if ev.type == "event" and ev.path.endswith("x.py"):
                    break
        ctx = await self.sb.create_code_context(language="python")
        await self.sb.run_code("y = 2", context=ctx)
        ex = await self.sb.run_code("y * 21", context=ctx)
        self.assertEqual(ex.results[0].text, "42")
        seen: List[str] = []
        errs: List[Any] = []

        async def on_out(text: str) -> None:
            seen.append(text)
        ex2 = await self.sb.run_code("print('p')\nraise ValueError('bad')", context=ctx,
                                     on_stdout=on_out, on_error=errs.append)
        # Output comes in pieces as written (not whole lines).
        self.assertEqual("".join(seen), "p\n")
        self.assertEqual([e.ename for e in errs], ["ValueError"])
        assert ex2.error is not None
        self.assertEqual((ex2.error.ename, ex2.error.evalue), ("ValueError", "bad"))
        kinds = [e["type"] async for e in await self.sb.run_code_stream("3", context=ctx)]
        self.assertEqual(kinds[-1], "execution_complete")
        self.assertIn(ctx.id, [c.id for c in await self.sb.list_code_contexts()])
        await self.sb.delete_code_context(ctx.id)
        with self.assertRaises(cella.ContextNotFoundError):
            await self.sb.delete_code_context(ctx.id)

    async def test_faults(self) -> None:
        with self.assertRaises(cella.InvalidSandboxNameError):
            self.c.sandbox("NOT_valid")
        bad = cella.connect_async(url=URL, token="nope")
        with self.assertRaises(cella.UnauthorizedError):
            await bad.sandbox(sandbox_name("atok")).exec("true")
        await bad.close()
        slow = cella.connect_async(url=URL, token=TOKEN, timeout=0.3)
        with self.assertRaises(cella.ClientTimeoutError):
            await slow.sandbox(self.sb.id).exec("sleep 3")
        await slow.close()
        down = cella.connect_async(url="http://127.0.0.1:1", timeout=5)
        with self.assertRaises(cella.TransportError):
            await down.health()
        with self.assertRaises(cella.ValidationFailedError):
            await self.sb.exec("true", timeout=-1)
        info = await self.sb.get_info()
        self.assertEqual(info.id, self.sb.id)
        self.assertTrue(any(s.id == self.sb.id for s in await self.c.list_sandboxes()))
        self.assertEqual((await self.c.health())["status"], "ok")
        async with self.c.sandbox(sandbox_name("actx"), destroy_on_exit=True,
                                  labels={"a": "b"}) as tmp:
            self.assertEqual((await tmp.create()).labels, {"a": "b"})
            await tmp.exec("true")
        with self.assertRaises(cella.SandboxNotFoundError):
            await tmp.get_info()


if __name__ == "__main__":
    unittest.main()
