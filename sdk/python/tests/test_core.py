"""The sync client's core against a real cellad: exec, exec_stream, env, files, errors,
lifecycle."""

from __future__ import annotations

import io
import os
import tempfile
import threading
import unittest

import cella

from .harness import api, client, destroy_quietly, needs_daemon, sandbox_name


@needs_daemon
class CoreTest(unittest.TestCase):
    c: cella.Client
    sb: cella.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()
        cls.sb = cls.c.sandbox(sandbox_name("core"), keep_alive=True)

    @classmethod
    def tearDownClass(cls) -> None:
        destroy_quietly(cls.sb)
        cls.c.close()

    # ---- exec ----
    def test_exec(self) -> None:
        r = self.sb.exec("echo out; echo err >&2; (exit 3)")
        self.assertEqual(r.exit_code, 3)
        self.assertFalse(r.success)
        self.assertEqual(r.stdout, "out\n")
        self.assertEqual(r.stderr, "err\n")
        self.assertGreaterEqual(r.duration, 0)
        ok = self.sb.exec("pwd; echo $A", env={"A": "x y"}, cwd="/tmp")
        self.assertTrue(ok.success)
        self.assertEqual(ok.stdout, "/tmp\nx y\n")

    def test_exec_binary_output(self) -> None:
        r = self.sb.exec("printf 'a\\377b'")
        self.assertEqual(r.stdout_bytes, b"a\xffb")
        self.assertEqual(r.stdout, "a\ufffdb")

    def test_exec_timeout(self) -> None:
        with self.assertRaises(cella.CommandTimeoutError) as cm:
            self.sb.exec("echo before; sleep 30", timeout=500)
        e = cm.exception
        self.assertIsInstance(e, cella.SandboxError)
        self.assertEqual(e.code, "COMMAND_TIMEOUT")
        self.assertEqual(e.http_status, 408)
        self.assertIn("before", e.context.get("stdout", ""))

    def test_exec_bad_input(self) -> None:
        with self.assertRaises(cella.ValidationFailedError):
            self.sb.exec("")
        with self.assertRaises(cella.ValidationFailedError) as cm:
            self.sb.exec("true", env={"A=B": "x"})
        self.assertEqual(cm.exception.http_status, 400)

    def test_exec_stream(self) -> None:
        events = list(self.sb.exec_stream("echo one; echo two >&2; (exit 4)"))
        types = [e.type for e in events]
        self.assertEqual(types[0], "start")
        self.assertEqual(types[-1], "complete")
        self.assertEqual(events[-1].exit_code, 4)
        out = "".join(e.data for e in events if e.type == "stdout")
        err = "".join(e.data for e in events if e.type == "stderr")
        self.assertEqual((out, err), ("one\n", "two\n"))

    def test_exec_stream_timeout_and_close(self) -> None:
        evs = list(self.sb.exec_stream("sleep 30", timeout=300))
        self.assertEqual(evs[-1].type, "error")
        self.assertEqual(evs[-1].code, "COMMAND_TIMEOUT")
        # Closing a stream early kills the command; the client stays usable.
        with self.sb.exec_stream("echo go; sleep 30") as s:
            for ev in s:
                if ev.type == "stdout":
                    break
        self.assertEqual(self.sb.exec("echo after").stdout, "after\n")

    def test_exec_raw(self) -> None:
        # stdout as bytes, exactly (binary, NULs, invalid UTF-8); stderr and the exit code
        # from the trailers.
        with self.sb.exec_raw("head -c 3000000 /dev/urandom > /tmp/raw.bin; cat /tmp/raw.bin;"
                              " printf 'e\\377rr' >&2; (exit 5)") as s:
            self.assertGreater(s.pid, 0)
            got = b"".join(s)
            r = s.result()
        want = self.sb.read_file("/tmp/raw.bin", encoding="bytes")
        self.assertEqual(len(got), 3000000)
        self.assertEqual(got, want)
        self.assertEqual((r.exit_code, r.success, r.stderr, r.stderr_truncated),
                         (5, False, b"e\xffrr", False))
        self.assertGreaterEqual(r.duration, 0)
        # More stderr than the trailer holds: its first 64 KiB, marked truncated.
        s = self.sb.exec_raw("echo out; head -c 100000 /dev/zero | tr '\\0' e >&2")
        self.assertEqual(s.read1(), b"out\n")
        r = s.result()
        self.assertEqual((r.exit_code, r.stderr, r.stderr_truncated), (0, b"e" * 65536, True))
        # result() reads what is left; env and cwd as exec's.
        s = self.sb.exec_raw("pwd; echo $A", env={"A": "x y"}, cwd="/tmp")
        self.assertEqual(s.result().exit_code, 0)
        self.assertEqual(b"".join(self.sb.exec_raw("pwd; echo $A", env={"A": "x y"},
                                                   cwd="/tmp")), b"/tmp\nx y\n")

    def test_exec_raw_errors(self) -> None:
        # A timeout comes in the trailers: result() raises it, after the output so far.
        s = self.sb.exec_raw("echo before; sleep 30", timeout=500)
        self.assertEqual(b"".join(s), b"before\n")
        with self.assertRaises(cella.CommandTimeoutError):
            s.result()
        # Errors before the command starts are raised by exec_raw itself.
        with self.assertRaises(cella.ValidationFailedError):
            self.sb.exec_raw("")
        # A session's shell that exits: SESSION_TERMINATED in the trailers, with its code.
        sess = self.sb.create_session()
        try:
            s = sess.exec_raw("echo bye; exit 7")
            self.assertEqual(b"".join(s), b"bye\n")
            with self.assertRaises(cella.SessionTerminatedError) as c:
                s.result()
            self.assertEqual((c.exception.context["exitCode"], c.exception.context["sessionId"]),
                             (7, sess.session_id))
        finally:
            try:
                sess.delete()
            except cella.SandboxError:
                pass
        # Closing early kills the command; the client stays usable.
        with self.sb.exec_raw("yes") as s:
            self.assertTrue(s.read1())
        with self.assertRaises(cella.StreamClosedError):
            s.result()
        self.assertEqual(self.sb.exec("echo after").stdout, "after\n")
        self.assertEqual(self.sb.exec("pgrep -x yes || echo none").stdout, "none\n")

    def test_env(self) -> None:
        self.sb.set_env({"SDK_VAR": "v1"})
        self.assertEqual(self.sb.exec("echo $SDK_VAR").stdout, "v1\n")
        self.sb.set_env({"SDK_VAR": None})
        self.assertEqual(self.sb.exec("echo \"[$SDK_VAR]\"").stdout, "[]\n")
        with self.assertRaises(cella.ValidationFailedError):
            self.sb.set_env({"1BAD": "x"})

    # ---- files ----
    def test_text_and_bytes(self) -> None:
        w = self.sb.write_file("t/hello.txt", "héllo\n")
        self.assertEqual(w.size, len("héllo\n".encode()))
        self.assertEqual(self.sb.read_file("t/hello.txt"), "héllo\n")
        self.assertEqual(self.sb.read_file("/workspace/t/hello.txt", encoding="bytes"),
                         "héllo\n".encode())
        blob = bytes(range(256)) * 10
        self.sb.write_file("t/b.bin", blob)
        self.assertEqual(self.sb.read_file("t/b.bin", encoding="bytes"), blob)
        self.sb.write_file("t/run.sh", "#!/bin/sh\necho ran\n", mode=0o755)
        self.assertEqual(self.sb.exec("t/run.sh").stdout, "ran\n")

    def test_streams(self) -> None:
        data = os.urandom(3 * 1024 * 1024 + 17)
        with tempfile.TemporaryFile() as f:
            f.write(data)
            f.seek(0)
            self.assertEqual(self.sb.write_file("big.bin", f).size, len(data))
        self.sb.write_file("gen.bin", (data[i:i + 100000] for i in range(0, len(data), 100000)))
        self.sb.write_file("pipe.bin", io.BytesIO(data))
        for name in ("big.bin", "gen.bin", "pipe.bin"):
            out = io.BytesIO()
            self.assertEqual(self.sb.read_file_to(name, out), len(data))
            self.assertEqual(out.getvalue(), data, name)
        self.assertEqual(b"".join(self.sb.read_file_stream("big.bin")), data)

    def test_list_exists_mkdir_move_delete(self) -> None:
        self.sb.mkdir("d/a/b", recursive=True)
        self.sb.write_file("d/a/f.txt", "x")
        self.sb.write_file("d/.hidden", "h")
        self.assertTrue(self.sb.exists("d/a/f.txt"))
        self.assertFalse(self.sb.exists("d/nope"))
        names = {f.name: f for f in self.sb.list_files("d")}
        self.assertIn("a", names)
        self.assertTrue(names["a"].is_dir)
        self.assertIn(".hidden", names)
        self.assertNotIn(".hidden", {f.name for f in self.sb.list_files("d", include_hidden=False)})
        rec = {f.relative_path for f in self.sb.list_files("/workspace/d", recursive=True)}
        self.assertIn("a/f.txt", rec)
        self.sb.move_file("d/a/f.txt", "d/g.txt")
        self.sb.rename_file("d/g.txt", "d/h.txt")
        self.assertEqual(self.sb.read_file("d/h.txt"), "x")
        self.assertFalse(self.sb.exists("d/a/f.txt"))
        with self.assertRaises(cella.SandboxError):
            self.sb.delete_file("d")  # a directory without recursive
        self.sb.delete_file("d", recursive=True)
        self.assertFalse(self.sb.exists("d"))
        self.sb.mkdir("t2")
        with self.assertRaises(cella.FileExistsError):
            self.sb.mkdir("t2")

    def test_non_utf8_path(self) -> None:
        self.sb.exec("mkdir -p nu && printf z > nu/$(printf 'inv\\377')")
        [entry] = self.sb.list_files("nu")
        self.assertEqual(entry.raw.get("nameEncoding"), "base64")
        raw_path = b"/workspace/nu/inv\xff"
        self.assertTrue(self.sb.exists(raw_path))
        self.assertEqual(self.sb.read_file(raw_path, encoding="bytes"), b"z")

    def test_missing_file(self) -> None:
        with self.assertRaises(cella.FileNotFoundError) as cm:
            self.sb.read_file("no/such/file")
        e = cm.exception
        self.assertEqual((e.code, e.http_status), ("FILE_NOT_FOUND", 404))
        self.assertIsInstance(e, cella.SandboxError)
        with self.assertRaises(cella.FileNotFoundError):
            self.sb.read_file_to("no/such/file", io.BytesIO())
        with self.assertRaises(cella.FileNotFoundError):
            self.sb.list_files("no/such")
        with self.assertRaises(cella.FileNotFoundError):
            self.sb.move_file("no/such", "x")
        with self.assertRaises(cella.ValidationFailedError):
            self.sb.read_file("")
        with self.assertRaises(cella.IsDirectoryError):
            self.sb.read_file("/workspace")

    def test_threads_share_the_client(self) -> None:
        errs: list[BaseException] = []

        def work(i: int) -> None:
            try:
                for j in range(5):
                    r = self.sb.exec(f"echo {i}-{j}")
                    assert r.stdout == f"{i}-{j}\n", r.stdout
            except BaseException as e:  # noqa: B902
                errs.append(e)
        ts = [threading.Thread(target=work, args=(i,)) for i in range(4)]
        for t in ts:
            t.start()
        for t in ts:
            t.join(120)
        self.assertEqual(errs, [])


@needs_daemon
class LifecycleTest(unittest.TestCase):
    def test_bad_id(self) -> None:
        c = client()
        for bad in ("Bad_Id", "", "-x", "api", "a" * 64):
            with self.assertRaises(cella.InvalidSandboxNameError) as cm:
                c.sandbox(bad)
            self.assertEqual(cm.exception.code, "INVALID_SANDBOX_NAME")
        sb = c.sandbox(sandbox_name("badids"))
        try:
            with self.assertRaises(cella.ProcessNotFoundError):
                sb.get_process("no-such-proc")
            with self.assertRaises(cella.ValidationFailedError):
                sb.create_session(id="bad id!")
            with self.assertRaises(cella.SessionNotFoundError):
                sb.get_session("nope")
        finally:
            destroy_quietly(sb)

    def test_wrong_token(self) -> None:
        c = cella.connect(url=client().url, token="wrong-token")
        with self.assertRaises(cella.UnauthorizedError) as cm:
            c.sandbox(sandbox_name("tok")).exec("true")
        self.assertEqual((cm.exception.code, cm.exception.http_status), ("UNAUTHORIZED", 401))
        self.assertEqual(c.health()["status"], "ok")  # health needs no token

    def test_unreachable(self) -> None:
        c = cella.connect(url="http://127.0.0.1:1", timeout=5)
        with self.assertRaises(cella.TransportError):
            c.health()

    def test_client_timeout(self) -> None:
        c = client(timeout=0.3)
        sb = c.sandbox(sandbox_name("ctimeout"))
        try:
            sb.exec("true")
            p = sb.start_process("sleep 30")
            # A call without a timeout of its own waits as long as the client's timeout.
            with self.assertRaises(cella.ClientTimeoutError) as cm:
                sb.exec("sleep 5")
            self.assertEqual(cm.exception.code, "REQUEST_TIMEOUT")
            with self.assertRaises(cella.ClientTimeoutError):
                p.wait_for_exit()
            p.kill()
            self.assertEqual(sb.exec("echo fine").stdout, "fine\n")
            # A session command ended by exit is SESSION_TERMINATED, with its status.
            with self.assertRaises(cella.SessionTerminatedError) as st:
                sb.exec("exit 3")
            self.assertEqual(st.exception.context.get("exitCode"), 3)
        finally:
            destroy_quietly(sb)

    def test_context_manager_and_lazy_read(self) -> None:
        c = client()
        name = sandbox_name("ctx")
        with c.sandbox(name, destroy_on_exit=True, sleep_after="10m", labels={"k": "v"}) as sb:
            # A first read of a sandbox that does not exist creates it.
            self.assertFalse(sb.exists("nothing"))
            self.assertEqual(sb.create().state, "running")
            info = sb.get_info()
            self.assertEqual(info.id, name)
            self.assertEqual(info.labels, {"k": "v"})
            self.assertEqual(info.sleep_after, 600)
        st, _ = api("GET", f"/v1/sandboxes/{name}")
        self.assertEqual(st, 404)
        with self.assertRaises(cella.SandboxNotFoundError):
            c.sandbox(name).get_info()
        self.assertFalse(c.sandbox(name).destroy())
        self.assertTrue(any(s.id for s in c.list_sandboxes()) or True)

    def test_sleep(self) -> None:
        c = client()
        name = sandbox_name("sleep")
        sb = c.sandbox(name, keep_alive=True)
        try:
            with self.assertRaises(cella.SandboxNotFoundError):
                c.sandbox(sandbox_name("sleep-none")).sleep()
            sb.exec("echo kept > /workspace/sleep.txt")
            info = sb.sleep()  # keep_alive does not prevent it
            self.assertIsInstance(info, cella.SandboxInfo)
            self.assertEqual((info.id, info.state, info.keep_alive), (name, "sleeping", True))
            self.assertEqual(sb.get_info().state, "sleeping")
            self.assertEqual(sb.sleep().state, "sleeping")  # as it is
            self.assertEqual(sb.exec("cat /workspace/sleep.txt").stdout, "kept\n")
            self.assertEqual(sb.get_info().state, "running")
        finally:
            destroy_quietly(sb)
            c.close()


if __name__ == "__main__":
    unittest.main()
