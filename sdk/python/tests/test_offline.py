"""Unit tests without a daemon: the SSE parser, error decoding, request building."""

from __future__ import annotations

import json
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
