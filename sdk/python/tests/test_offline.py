"""Unit tests without a daemon: the SSE parser, error decoding, request building."""

from __future__ import annotations

import json
import os
import random
import unittest

import cella
from cella import _core as core
from cella._sse import SSEParser


class SSETest(unittest.TestCase):
    def test_split_anywhere(self) -> None:
        stream = (b'data: {"type":"start"}\n\n: comment\n\ndata: {"type":"stdout",'
                  b'"data":"x\\u00e9"}\r\n\r\ndata: {"type":"complete","exitCode":0}\n\n')
        whole = SSEParser().feed(stream)
        self.assertEqual([e["type"] for e in whole], ["start", "stdout", "complete"])
        for _ in range(200):
            p = SSEParser()
            got = []
            i = 0
            while i < len(stream):
                n = random.randint(1, 7)
                got += p.feed(stream[i:i + n])
                i += n
            self.assertEqual(got, whole)
            self.assertFalse(p.pending)

    def test_bounded(self) -> None:
        p = SSEParser(max_line=1024, max_event=2048)
        with self.assertRaises(cella.SandboxError):
            p.feed(b"data: " + b"x" * 2000)
        p = SSEParser(max_line=1024, max_event=2048)
        with self.assertRaises(cella.SandboxError):
            for _ in range(5):
                p.feed(b"data: " + b"y" * 1000 + b"\n")

    def test_hostile(self) -> None:
        rnd = random.Random(7)
        for _ in range(2000):
            blob = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 200)))
            p = SSEParser(max_line=4096, max_event=4096)
            try:
                for ev in p.feed(blob):
                    self.assertIsInstance(ev, dict)
            except cella.SandboxError:
                pass

    def test_pending(self) -> None:
        p = SSEParser()
        p.feed(b'data: {"a":1}\n')
        self.assertTrue(p.pending)


class EventDecoderTest(unittest.TestCase):
    """A stream's events, its end and its cut, as both clients' streams see them."""

    def test_end_and_cut(self) -> None:
        d = core.EventDecoder(lambda e: e["type"], core.EXEC_END)
        for b in b'data: {"type":"start"}\n\ndata: {"type":"complete"}\n\ndata: {"type":"x"}\n\n':
            d.feed(bytes([b]))
        self.assertEqual((d.take(), d.ended), ("start", False))
        self.assertEqual((d.take(), d.ended), ("complete", True))
        d = core.EventDecoder(lambda e: e, core.CODE_END)
        d.feed(b'data: {"type":"error","code":"CONTEXT_DEAD"}\n\n')
        d.take()
        self.assertTrue(d.ended)
        cut = core.EventDecoder(lambda e: e, None)
        cut.feed(b'data: {"type":"ev')
        self.assertFalse(cut.ready)
        with self.assertRaises(cella.StreamClosedError):
            cut.at_eof()
        whole = core.EventDecoder(lambda e: e, None)
        whole.feed(b'data: {"type":"event"}\n\n')
        whole.at_eof()  # a watch may end between events
        with self.assertRaises(cella.StreamClosedError):
            core.EventDecoder(lambda e: e, core.LOG_END).at_eof()


class ErrorTest(unittest.TestCase):
    def test_every_code_has_its_class(self) -> None:
        for code, cls in cella.errors.ERROR_CLASSES.items():
            body = json.dumps({"code": code, "message": "m", "context": {"k": 1},
                               "httpStatus": cls.default_status}).encode()
            e = cella.errors.error_from_answer(cls.default_status, body)
            self.assertIs(type(e), cls)
            self.assertIsInstance(e, cella.SandboxError)
            self.assertEqual((e.code, e.http_status, e.context, e.message),
                             (code, cls.default_status, {"k": 1}, "m"))
            self.assertIs(getattr(cella, cls.__name__), cls)

    def test_unknown_and_garbage(self) -> None:
        e = cella.errors.error_from_answer(418, b'{"code":"NEW_CODE","message":"x"}')
        self.assertIs(type(e), cella.SandboxError)
        self.assertEqual(e.code, "NEW_CODE")
        e = cella.errors.error_from_answer(502, b"<html>bad gateway</html>")
        self.assertIsInstance(e, cella.BadGatewayError)
        e = cella.errors.error_from_answer(500, b"\xff\x00")
        self.assertIsInstance(e, cella.SandboxError)

    def test_builtins_not_shadowed(self) -> None:
        self.assertIsNot(cella.FileNotFoundError, FileNotFoundError)
        self.assertTrue(issubclass(cella.FileNotFoundError, cella.SandboxError))


class RequestTest(unittest.TestCase):
    def test_ids(self) -> None:
        st = core.ClientState()
        for bad in ("A", "", "a_b", "-a", "a-", "www", "x" * 64):
            with self.assertRaises(cella.InvalidSandboxNameError):
                core.SandboxRef(st, bad, {})
        with self.assertRaises(TypeError):
            core.SandboxRef(st, "ok", {"sleepAfter": "1m"})

    def test_lazy_put_once(self) -> None:
        st = core.ClientState()
        ref = core.SandboxRef(st, "box", {"sleep_after": "10m", "keep_alive": True})
        op = core.exec_(ref, "true")
        put = next(op)
        self.assertEqual((put.method, put.path, put.json),
                         ("PUT", "/v1/sandboxes/box", {"sleepAfter": "10m", "keepAlive": True}))
        ex = op.send(core.Response(201, {}, b"{}"))
        self.assertEqual((ex.method, ex.path, ex.json), ("POST", "/v1/sandboxes/box/exec",
                                                         {"command": "true"}))
        op2 = core.exec_(ref, "true")
        self.assertEqual(next(op2).path, "/v1/sandboxes/box/exec")  # no second PUT

    def test_first_read_creates(self) -> None:
        ref = core.SandboxRef(core.ClientState(), "box", {})
        op = core.exists(ref, "a b+c")
        get = next(op)
        self.assertEqual(get.target(), "/v1/sandboxes/box/files/exists?path=a%20b%2Bc")
        put = op.throw(cella.SandboxNotFoundError("gone"))
        self.assertEqual(put.method, "PUT")
        again = op.send(core.Response(201, {}, b"{}"))
        self.assertEqual(again.target(), get.target())
        with self.assertRaises(StopIteration) as stop:
            op.send(core.Response(200, {}, b'{"exists":true}'))
        self.assertIs(stop.exception.value, True)

    def test_raw_path(self) -> None:
        ref = core.SandboxRef(core.ClientState(), "box", {})
        req = next(core.read_file(ref, b"/w/inv\xff"))  # type: ignore[arg-type]
        self.assertEqual(req.query, {"path": "L3cvaW52/w==", "pathEncoding": "base64"})


if __name__ == "__main__":
    unittest.main()


class SandboxInfoTest(unittest.TestCase):
    def test_every_field(self) -> None:
        info = cella.SandboxInfo.from_json({
            "id": "dev", "state": "sleeping", "image": "default", "instanceType": "standard-1",
            "createdAt": "2026-11-27T00:00:00Z", "lastActiveAt": "2026-11-27T00:01:00Z",
            "labels": {"a": "b"}, "env": {"K": "v"}, "sleepAfter": 600, "keepAlive": False,
            "enableDefaultSession": False, "network": "outbound",
            "networkAllow": ["1.2.3.4/32:443", 7], "networkAddress": "10.88.0.2",
            "sleepModeRequested": "memory", "sleepMode": "files",
            "sleepModeFallback": "no CRIU", "memorySnapshotBytes": 10485760,
            "memorySleepError": "restore failed", "disk": {"limitBytes": 8, "usedBytes": 4},
            "tenant": "acme", "node": "n1", "forkedWithMemory": True,
            "snapshot": "snap-0123456789abcdef"})
        self.assertEqual((info.instance_type, info.enable_default_session, info.network_allow,
                          info.network_address, info.disk_limit_bytes, info.disk_used_bytes),
                         ("standard-1", False, ["1.2.3.4/32:443"], "10.88.0.2", 8, 4))
        self.assertEqual((info.sleep_mode_requested, info.sleep_mode, info.sleep_mode_fallback,
                          info.memory_snapshot_bytes, info.memory_sleep_error),
                         ("memory", "files", "no CRIU", 10485760, "restore failed"))
        self.assertEqual((info.tenant, info.node, info.forked_with_memory, info.snapshot),
                         ("acme", "n1", True, "snap-0123456789abcdef"))

    def test_defaults_and_garbage(self) -> None:
        info = cella.SandboxInfo.from_json({"id": "x", "state": "running", "disk": "no",
                                            "networkAllow": "no", "memorySnapshotBytes": "1"})
        self.assertEqual((info.sleep_mode, info.sleep_mode_requested, info.network_allow),
                         ("files", "files", []))
        self.assertIsNone(info.disk_limit_bytes)
        self.assertIsNone(info.memory_snapshot_bytes)
        self.assertTrue(info.enable_default_session)
        self.assertFalse(info.forked_with_memory)


class WebSocketTest(unittest.TestCase):
    def server_frame(self, opcode: int, payload: bytes, fin: bool = True) -> bytes:
        from cella import _ws
        # a server frame: the client's encoder without the mask bit and key
        f = bytearray(_ws.encode_frame(opcode, payload, fin, b"\0\0\0\0"))
        f[1] &= 0x7F
        hl = 2 + (2 if (f[1] & 0x7F) == 126 else 8 if (f[1] & 0x7F) == 127 else 0)
        return bytes(f[:hl]) + bytes(f[hl + 4:])

    def test_accept_key(self) -> None:
        from cella import _ws
        self.assertEqual(_ws.accept_key("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")

    def test_masking_roundtrip(self) -> None:
        from cella import _ws
        for n in (0, 1, 125, 126, 65535, 65536, 70000):
            data = os.urandom(n)
            f = _ws.encode_frame(_ws.OP_BINARY, data, mask_key=b"abcd")
            self.assertTrue(f[1] & 0x80)
            hl = 2 + (2 if n >= 126 and n < 65536 else 8 if n >= 65536 else 0)
            self.assertEqual(f[hl:hl + 4], b"abcd")
            self.assertEqual(_ws.mask(f[hl + 4:], b"abcd"), data)

    def test_fragmentation_and_control(self) -> None:
        from cella import _ws
        stream = (self.server_frame(_ws.OP_TEXT, b'{"ty', fin=False)
                  + self.server_frame(_ws.OP_PING, b"p")
                  + self.server_frame(_ws.OP_CONT, b'pe":1}')
                  + self.server_frame(_ws.OP_BINARY, b"x" * 70000))
        for step in (1, 3, 1000, len(stream)):
            p = _ws.FrameParser()
            got = []
            for i in range(0, len(stream), step):
                got += p.feed(stream[i:i + step])
            self.assertEqual([(m.opcode, len(m.data)) for m in got],
                             [(_ws.OP_PING, 1), (_ws.OP_TEXT, 10), (_ws.OP_BINARY, 70000)])
            self.assertEqual(got[1].data, b'{"type":1}')

    def test_violations(self) -> None:
        from cella import _ws
        bad = {
            "masked": bytes([0x82, 0x81, 1, 2, 3, 4, 0]),
            "rsv": bytes([0xC2, 0x00]),
            "opcode": bytes([0x83, 0x00]),
            "long control": bytes([0x89, 126, 0, 200]) + b"x" * 200,
            "fragmented control": bytes([0x09, 0x00]),
            "nonminimal16": bytes([0x82, 126, 0, 5]) + b"x" * 5,
            "nonminimal64": bytes([0x82, 127]) + (5).to_bytes(8, "big") + b"x" * 5,
            "huge": bytes([0x82, 127]) + (1 << 62).to_bytes(8, "big"),
            "bare continuation": bytes([0x80, 0x00]),
            "nested": bytes([0x01, 0x01]) + b"a" + bytes([0x02, 0x00]),
            "bad utf8": bytes([0x81, 0x01, 0xFF]),
        }
        for name, data in bad.items():
            with self.assertRaises(_ws.ProtocolError, msg=name):
                _ws.FrameParser().feed(data)
        with self.assertRaises(_ws.ProtocolError) as cm:
            _ws.FrameParser(max_message=10).feed(bytes([0x82, 11]) + b"x" * 11)
        self.assertEqual(cm.exception.close_code, 1009)

    def test_hostile_input(self) -> None:
        from cella import _ws
        rnd = random.Random(13)
        for _ in range(5000):
            blob = bytes(rnd.getrandbits(8) for _ in range(rnd.randint(0, 64)))
            p = _ws.FrameParser(max_message=4096)
            try:
                for m in p.feed(blob):
                    self.assertIn(m.opcode, (1, 2, 8, 9, 10))
                    if m.opcode >= 8:
                        self.assertLessEqual(len(m.data), 125)
            except _ws.ProtocolError as e:
                self.assertIn(e.close_code, (1002, 1007, 1009))


class PackageTest(unittest.TestCase):
    def test_installs_offline_with_debian_pip(self) -> None:
        import subprocess
        import sys
        import tempfile
        if not sys.executable.startswith("/usr/bin/"):
            self.skipTest("checks Debian's python3 and its pip, setuptools and wheel")
        here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        with tempfile.TemporaryDirectory() as d:
            p = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-index",
                                "--no-build-isolation", "--no-deps", "--target", d, here],
                               capture_output=True, text=True, timeout=300)
            if p.returncode != 0 and "No module named pip" in p.stderr:
                self.skipTest("no pip")
            self.assertEqual(p.returncode, 0, p.stderr)
            self.assertTrue(os.path.exists(os.path.join(d, "cella", "py.typed")))
            out = subprocess.run([sys.executable, "-c", "import cella, sys; "
                                  "print(cella.__file__, cella.__version__)"],
                                 env=dict(os.environ, PYTHONPATH=d), capture_output=True,
                                 text=True, timeout=60, cwd=d)
            self.assertIn(os.path.join(d, "cella"), out.stdout)

    def test_public_names_documented(self) -> None:
        import inspect
        for name in cella.__all__:
            obj = getattr(cella, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                self.assertTrue(obj.__doc__, name)
                for mname, m in vars(obj).items() if inspect.isclass(obj) else []:
                    if not mname.startswith("_") and callable(m):
                        self.assertTrue(m.__doc__, f"{name}.{mname}")


class HTTPParserTest(unittest.TestCase):
    """The sync transport's answer parsing (head, chunked and sized bodies) on split and
    hostile input: only its own errors come out, never a crash or a hang."""

    class FakeConn:
        def __init__(self, data: bytes) -> None:
            import io
            self.rfile = io.BufferedReader(io.BytesIO(data))  # type: ignore[arg-type]
            self.direct = False
            self.closed = False

        def close(self) -> None:
            self.closed = True

    class FakePool:
        def __init__(self) -> None:
            self.returned: list[object] = []

        def put(self, conn: object) -> None:
            self.returned.append(conn)

    def body(self, data: bytes, length: "int | None", chunked: bool) -> "tuple[bytes, object]":
        from cella import _http
        pool = self.FakePool()
        conn = self.FakeConn(data)
        b = _http.SyncBody(pool, conn, length, chunked, False)  # type: ignore[arg-type]
        out = b""
        while True:
            d = b.read1(7)
            if not d:
                return out, pool
            out += d

    def test_head(self) -> None:
        import io
        from cella import _http
        raw = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Type: a/b\r\n"
               b"X-Thing:  v  \r\ncontent-length: 3\r\n\r\nabc")
        r = io.BufferedReader(io.BytesIO(raw))  # type: ignore[arg-type]
        status, hdrs = _http._read_head(r)
        self.assertEqual((status, hdrs["content-length"], hdrs["x-thing"]), (404, "3", "v"))
        self.assertEqual(r.read(), b"abc")
        for bad in (b"", b"HTTP/1.1 200 OK\r\nA: b\r\n", b"SMTP 200 ok\r\n\r\n",
                    b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\n" + b"X: y\r\n" * 10000):
            with self.assertRaises((ValueError, ConnectionError)):
                _http._read_head(io.BufferedReader(io.BytesIO(bad)))  # type: ignore[arg-type]

    def test_head_async(self) -> None:
        """The asyncio transport reads the same heads through the same parser."""
        import asyncio
        from cella import _aio

        async def head(raw: bytes) -> "tuple[int, dict[str, str]]":
            reader = asyncio.StreamReader(limit=_aio.HEAD_MAX)
            reader.feed_data(raw)
            reader.feed_eof()
            conn = _aio._Conn(reader, None)  # type: ignore[arg-type]
            return await _aio.AsyncPool("http://127.0.0.1:1", None)._head(conn)

        raw = (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 404 Not Found\r\nContent-Type: a/b\r\n"
               b"X-Thing:  v  \r\ncontent-length: 3\r\n\r\nabc")
        status, hdrs = asyncio.run(head(raw))
        self.assertEqual((status, hdrs["content-length"], hdrs["x-thing"]), (404, "3", "v"))
        for bad in (b"SMTP 200 ok\r\n\r\n", b"HTTP/1.1 abc OK\r\n\r\n", b"HTTP/1.1 200 OK\r\n"):
            with self.assertRaises((ValueError, asyncio.IncompleteReadError), msg=repr(bad)):
                asyncio.run(head(bad))

    def test_framing(self) -> None:
        from cella._wire import framing
        self.assertEqual(framing("GET", 200, {"content-length": "5"}), (5, False, False))
        self.assertEqual(framing("GET", 200, {"transfer-encoding": "chunked",
                                              "content-length": "5"}), (None, True, False))
        self.assertEqual(framing("GET", 200, {}), (None, False, True))
        self.assertEqual(framing("GET", 200, {"content-length": "-1"}), (None, False, True))
        self.assertEqual(framing("HEAD", 200, {"content-length": "9"}), (0, False, False))
        self.assertEqual(framing("GET", 204, {"connection": "close"}), (0, False, True))

    def test_chunked(self) -> None:
        data, pool = self.body(b"3\r\nabc\r\n1;ext=1\r\nd\r\n0\r\nTrailer: x\r\n\r\n", None, True)
        self.assertEqual(data, b"abcd")
        self.assertEqual(len(pool.returned), 1)  # type: ignore[attr-defined]
        for cut in (b"3\r\nab", b"3\r\nabc\r\n", b"3\r\nabcXY1\r\n", b"zz\r\n", b"3\r\nabc\r\n0\r\n",
                    b"-5\r\nabc", b"+3\r\nabc\r\n0\r\n\r\n", b"\r\n"):
            with self.assertRaises(cella.StreamClosedError, msg=repr(cut)):
                self.body(cut, None, True)

    def test_sized(self) -> None:
        self.assertEqual(self.body(b"hello", 5, False)[0], b"hello")
        with self.assertRaises(cella.StreamClosedError):
            self.body(b"hel", 5, False)

    def test_hostile(self) -> None:
        import io
        from cella import _http
        rnd = random.Random(11)
        alphabet = b"0123456789abcdefHTP/1. \r\n:;xz-+"
        for _ in range(3000):
            blob = bytes(rnd.choice(alphabet) for _ in range(rnd.randint(0, 120)))
            try:
                _http._read_head(io.BufferedReader(io.BytesIO(blob)))  # type: ignore[arg-type]
            except (ValueError, ConnectionError):
                pass
            try:
                self.body(blob, None, True)
            except cella.SandboxError:
                pass


class RawExecTest(unittest.TestCase):
    """The raw exec form's end: trailers read after the last chunk (sync and asyncio
    transports), and the result or error they give, on good, cut and hostile input."""

    def sync_body(self, data: bytes) -> "tuple[bytes, object]":
        from cella import _http
        pool = HTTPParserTest.FakePool()
        b = _http.SyncBody(pool, HTTPParserTest.FakeConn(data), None, True,  # type: ignore[arg-type]
                           False)
        out = b""
        while True:
            d = b.read1(5)
            if not d:
                return out, b.trailers
            out += d

    def async_body(self, data: bytes) -> "tuple[bytes, object]":
        import asyncio
        from cella import _aio

        async def run() -> "tuple[bytes, object]":
            reader = asyncio.StreamReader(limit=_aio.HEAD_MAX)
            reader.feed_data(data)
            reader.feed_eof()
            conn = _aio._Conn(reader, None)  # type: ignore[arg-type]
            b = _aio.AsyncBody(HTTPParserTest.FakePool(), conn, None, True,  # type: ignore[arg-type]
                               False, None)
            out = b""
            while True:
                d = await b.read1(5)
                if not d:
                    return out, b.trailers
                out += d
        return asyncio.run(run())

    def answer(self, body: bytes, trailers: "list[bytes]") -> bytes:
        out = b""
        for i in range(0, len(body), 7):
            piece = body[i:i + 7]
            out += b"%x\r\n" % len(piece) + piece + b"\r\n"
        return out + b"0\r\n" + b"".join(t + b"\r\n" for t in trailers) + b"\r\n"

    def result(self, data: bytes, read: "object") -> "tuple[bytes, cella.RawExecResult]":
        out, trailers = read(data)  # type: ignore[operator]
        return out, core.raw_exec_result("cmd", None, {"cella-pid": "42"}, trailers)

    def test_trailers_both_transports(self) -> None:
        import base64
        err = bytes(range(256)) * 300  # 76,800 bytes: split over many lines
        b64 = base64.b64encode(err)
        lines = [b"Cella-Stderr: " + b64[i:i + 3000] for i in range(0, len(b64), 3000)]
        body = b"\x00binary\xff\r\n0\r\n" * 50
        data = self.answer(body, [b"Cella-Exit-Code: 3", b"Cella-Duration: 17"] + lines +
                           [b"Cella-Stderr-Truncated: true"])
        for read in (self.sync_body, self.async_body):
            out, r = self.result(data, read)
            self.assertEqual(out, body)
            self.assertEqual((r.exit_code, r.duration, r.pid, r.success, r.stderr_truncated),
                             (3, 17, 42, False, True))
            self.assertEqual(r.stderr, err)

    def test_errors_from_trailers(self) -> None:
        data = self.answer(b"partial", [b"Cella-Duration: 5", b"Cella-Stderr: ZXJy",
                                        b"Cella-Error-Code: COMMAND_TIMEOUT",
                                        b"Cella-Error-Message: timed out after 5 ms"])
        with self.assertRaises(cella.CommandTimeoutError) as c:
            self.result(data, self.sync_body)
        self.assertEqual(c.exception.context["stderr"], "err")
        self.assertEqual(c.exception.http_status, 408)
        data = self.answer(b"", [b"Cella-Exit-Code: 1", b"Cella-Error-Code: SESSION_TERMINATED",
                                 b"Cella-Error-Message: the shell exited"])
        with self.assertRaises(cella.SessionTerminatedError) as c2:
            self.result(data, self.async_body)
        self.assertEqual((c2.exception.context["exitCode"], c2.exception.context["sessionId"]),
                         (1, "default"))
        # No trailers at all: the body ended without saying how the command did.
        with self.assertRaises(cella.StreamClosedError):
            core.raw_exec_result("cmd", None, {}, None)
        # Trailers without an exit code or an error, or stderr that is not base64.
        for t in ([b"Cella-Duration: 1"], [b"Cella-Exit-Code: x1"],
                  [b"Cella-Exit-Code: 0", b"Cella-Stderr: !!!"]):
            with self.assertRaises(cella.InternalError, msg=repr(t)):
                self.result(self.answer(b"a", t), self.sync_body)

    def test_hostile_trailers(self) -> None:
        from cella import _wire
        huge_line = b"Cella-Stderr: " + b"A" * (_wire.TRAILER_LINE_MAX + 10)
        many = [b"Cella-Stderr: " + b"A" * 3000] * 100  # ~300 KiB in all
        fields = [b"X-%d: 1" % i for i in range(_wire.TRAILER_FIELDS_MAX + 1)]
        cases = [
            b"3\r\nabc\r\n0\r\n" + huge_line + b"\r\n\r\n",
            self.answer(b"abc", many),
            self.answer(b"abc", fields),
            self.answer(b"abc", [b"no colon here"]),
            self.answer(b"abc", [b" Cella-Exit-Code: 0"]),
            self.answer(b"abc", [b"Cella Exit: 0"]),
            b"3\r\nabc\r\n0\r\nCella-Exit-Code: 0\r\n",  # cut before the empty line
            b"3\r\nabc\r\n0\r\nCella-Exit-Co",  # cut inside a trailer line
            b"3\r\nabc\r\n0\r\n",  # cut after the last chunk
            b"3\r\nab",  # cut inside a chunk
            b"fffffffffffffffff\r\nabc\r\n0\r\n\r\n",  # a size of 17 digits
        ]
        for data in cases:
            for read in (self.sync_body, self.async_body):
                with self.assertRaises(cella.StreamClosedError, msg=f"{read.__name__} {data[:40]!r}"):
                    read(data)
        rnd = random.Random(17)
        alphabet = b"0123456789abcdef\r\n:; -Cella-Exit-Code"
        for _ in range(2000):
            blob = b"3\r\nabc\r\n0\r\n" + bytes(rnd.choice(alphabet) for _ in range(rnd.randint(0, 80)))
            for read in (self.sync_body, self.async_body):
                try:
                    self.result(blob, read)
                except cella.SandboxError:
                    pass

    def test_trailers_unit(self) -> None:
        from cella._wire import Trailers
        t = Trailers()
        self.assertFalse(t.line(b"Cella-Stderr: YQ==\r\n"))
        self.assertFalse(t.line(b"cella-stderr:Yg==\n"))
        self.assertFalse(t.line(b"Cella-Exit-Code:   0  \r\n"))
        self.assertTrue(t.line(b"\r\n"))
        self.assertEqual(t.get_all("cella-stderr"), ["YQ==", "Yg=="])
        self.assertEqual(t.get("cella-exit-code"), "0")
        self.assertIsNone(t.get("cella-duration"))
