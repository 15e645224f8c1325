"""Faults that need the daemon restarted (run last: the suites run in name order): a
stream cut by a cellad SIGKILL ends with an exception, nothing hangs, and the client works
again once the daemon is back."""

from __future__ import annotations

import threading
import unittest
from typing import Iterator

import cella

from .harness import client, destroy_quietly, needs_restart, restart_daemon, sandbox_name


@needs_restart
class RestartTest(unittest.TestCase):
    def test_streams_cut_by_restart(self) -> None:
        c = client(timeout=120)
        sb = c.sandbox(sandbox_name("restart"), keep_alive=True)
        try:
            sb.mkdir("wd", recursive=True)
            p = sb.start_process("while true; do echo tick; sleep 0.2; done", process_id="ticker")
            p.wait_for_log("tick", timeout=10000)
            sb.exec("truncate -s 256M big.bin")
            streams = {
                "exec": sb.exec_stream("while true; do echo x; sleep 0.2; done"),
                "logs": p.stream_logs(),
                "watch": sb.watch("wd"),
                "download": sb.read_file_stream("big.bin"),
            }
            for s in streams.values():
                next(s)  # each is live
            outcome: dict[str, BaseException] = {}

            def drain(name: str, s: Iterator[object]) -> None:
                try:
                    for _ in s:
                        pass
                    outcome[name] = AssertionError("ended without an exception")
                except BaseException as e:  # noqa: B902
                    outcome[name] = e
            started, restarted = threading.Event(), threading.Event()

            class Stalling:
                """A file object whose first write waits for the daemon's restart."""

                def write(self, data: bytes) -> int:
                    if not started.is_set():
                        started.set()
                        restarted.wait(120)
                    return len(data)

            def download() -> None:
                try:
                    sb.read_file_to("big.bin", Stalling())  # type: ignore[arg-type]
                    outcome["read_file_to"] = AssertionError("ended without an exception")
                except BaseException as e:  # noqa: B902
                    outcome["read_file_to"] = e
            ts = [threading.Thread(target=drain, args=kv, daemon=True) for kv in streams.items()]
            ts.append(threading.Thread(target=download, daemon=True))
            for t in ts:
                t.start()
            self.assertTrue(started.wait(60))
            restart_daemon()
            restarted.set()
            for t in ts:
                t.join(60)
                self.assertFalse(t.is_alive(), "a stream hangs after the daemon restart")
            self.assertEqual(len(outcome), 5)
            for name, e in outcome.items():
                self.assertIsInstance(e, cella.StreamClosedError, f"{name}: {e!r}")
                self.assertIsInstance(e, cella.SandboxError)
            # Pooled connections died with the old daemon; the next calls work.
            self.assertEqual(sb.exec("echo back").stdout, "back\n")
            self.assertEqual(sb.get_process("ticker").status().status, "running")
            sb.kill_process("ticker")
        finally:
            destroy_quietly(sb)
            c.close()


if __name__ == "__main__":
    unittest.main()


@needs_restart
class AsyncRestartTest(unittest.IsolatedAsyncioTestCase):
    async def test_async_stream_cut_by_restart(self) -> None:
        from .harness import TOKEN, URL
        import asyncio
        c = cella.connect_async(url=URL, token=TOKEN, timeout=120)
        sb = c.sandbox(sandbox_name("arestart"), keep_alive=True)
        try:
            stream = await sb.exec_stream("while true; do echo x; sleep 0.2; done")
            await stream.__anext__()

            async def drain() -> BaseException:
                try:
                    async for _ in stream:
                        pass
                except BaseException as e:  # noqa: B902
                    return e
                return AssertionError("ended without an exception")
            task = asyncio.ensure_future(drain())
            await asyncio.get_running_loop().run_in_executor(None, restart_daemon)
            e = await asyncio.wait_for(task, 60)
            self.assertIsInstance(e, cella.StreamClosedError)
            self.assertEqual((await sb.exec("echo back")).stdout, "back\n")
        finally:
            try:
                await sb.destroy()
            finally:
                await c.close()
