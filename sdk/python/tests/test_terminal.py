"""The terminal (pty over the WebSocket), connect_websocket and the option setters against
a real cellad."""

from __future__ import annotations

import os
import time
import unittest

import cella

from .harness import TOKEN, URL, client, destroy_quietly, needs_daemon, sandbox_name


def read_until(t: cella.Terminal, needle: bytes, limit: float = 30.0) -> bytes:
    out = b""
    deadline = time.monotonic() + limit
    while needle not in out:
        if time.monotonic() > deadline:
            raise AssertionError(f"{needle!r} not seen in {out[-400:]!r}")
        chunk = t.read(timeout=limit)
        if not chunk:
            break
        out += chunk
    return out


@needs_daemon
class TerminalTest(unittest.TestCase):
    def test_terminal(self) -> None:
        c = client()
        sb = c.sandbox(sandbox_name("pty"))
        try:
            s = sb.create_session(id="t1", cwd="/tmp")
            with s.terminal(cols=100, rows=30) as t:
                t.write("stty size; echo mark-$((6*7))\r")
                out = read_until(t, b"mark-42")
                self.assertIn(b"30 100", out)
                t.resize(120, 40)
                t.write("stty size\r")
                read_until(t, b"40 120")
                t.write("exit 5\r")
                while t.read(timeout=30):
                    pass
                self.assertEqual(t.exit_code, 5)
            with self.assertRaises(cella.SessionNotFoundError):
                sb.terminal(session="nope")
            bad = cella.connect(url=URL, token="wrong")
            with self.assertRaises(cella.UnauthorizedError):
                bad.sandbox(sb.id).terminal()
        finally:
            destroy_quietly(sb)
            c.close()


@needs_daemon
class AsyncTerminalTest(unittest.IsolatedAsyncioTestCase):
    async def test_async_terminal(self) -> None:
        c = cella.connect_async(url=URL, token=TOKEN)
        sb = c.sandbox(sandbox_name("apty"))
        try:
            async with await sb.terminal() as t:
                await t.write("echo async-$((2+3))\r")
                out = b""
                while b"async-5" not in out:
                    chunk = await t.read(timeout=30)
                    self.assertTrue(chunk)
                    out += chunk
        finally:
            await sb.destroy()
            await c.close()


if __name__ == "__main__":
    unittest.main()


SERVER_JS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "tests",
                         "integration", "preview", "server.js")


@needs_daemon
class WebSocketTest(unittest.TestCase):
    def test_connect_websocket_and_setters(self) -> None:
        c = client()
        sb = c.sandbox(sandbox_name("ws"))
        try:
            with open(SERVER_JS, "rb") as f:
                sb.write_file("server.js", f)
            srv = sb.start_process("node /workspace/server.js 8100")
            srv.wait_for_log("listening", timeout=30000)
            with sb.connect_websocket(8100, "/ws") as ws:
                ws.send("hello|py")
                self.assertEqual(ws.recv(timeout=30), "hello|py")
                big = os.urandom(200_000)
                ws.send(big)
                self.assertEqual(ws.recv(timeout=30), big)
            with self.assertRaises(cella.InvalidPortError):
                sb.connect_websocket(0)
            srv.kill()
            self.assertTrue(sb.set_keep_alive(True).keep_alive)
            self.assertEqual(sb.set_sleep_after("30m").sleep_after, 1800)
            self.assertEqual(sb.set_labels({"team": "py"}).labels, {"team": "py"})
            self.assertEqual(sb.get_info().labels, {"team": "py"})
        finally:
            destroy_quietly(sb)
            c.close()


@needs_daemon
class AsyncWebSocketTest(unittest.IsolatedAsyncioTestCase):
    async def test_async_websocket_and_setters(self) -> None:
        c = cella.connect_async(url=URL, token=TOKEN)
        sb = c.sandbox(sandbox_name("aws"), keep_alive=False)
        try:
            with open(SERVER_JS, "rb") as f:
                await sb.write_file("server.js", f)
            srv = await sb.start_process("node /workspace/server.js 8101")
            await srv.wait_for_log("listening", timeout=30000)
            async with await sb.connect_websocket(8101, "ws") as ws:
                await ws.send(b"\x00bin")
                self.assertEqual(await ws.recv(timeout=30), b"\x00bin")
            self.assertTrue((await sb.set_keep_alive(True)).keep_alive)
            self.assertEqual((await sb.set_sleep_after(60)).sleep_after, 60)
            self.assertEqual((await sb.set_labels({})).labels, {})
            await srv.kill()
        finally:
            await sb.destroy()
            await c.close()
