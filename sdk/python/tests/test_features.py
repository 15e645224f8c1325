"""The sync client's sessions, processes, ports, watch, git and code interpreter against a
real cellad."""

from __future__ import annotations

import time
import unittest
import urllib.request

import cella

from .harness import client, destroy_quietly, needs_daemon, sandbox_name


@needs_daemon
class FeaturesTest(unittest.TestCase):
    c: cella.Client
    sb: cella.Sandbox

    @classmethod
    def setUpClass(cls) -> None:
        cls.c = client()
        cls.sb = cls.c.sandbox(sandbox_name("features"), keep_alive=True)

    @classmethod
    def tearDownClass(cls) -> None:
        destroy_quietly(cls.sb)
        cls.c.close()

    def test_sessions(self) -> None:
        s = self.sb.create_session(id="s1", cwd="/tmp", env={"SV": "1"})
        self.assertEqual(s.session_id, "s1")
        s.exec("cd /etc && export MORE=2")
        self.assertEqual(s.exec("pwd; echo $SV$MORE").stdout, "/etc\n12\n")
        self.assertNotEqual(self.sb.exec("pwd").stdout, "/etc\n")
        s.set_env({"SV": "9"})
        self.assertEqual(s.exec("echo $SV").stdout, "9\n")
        s.write_file("/tmp/from-session", "x")
        self.assertEqual(self.sb.read_file("/tmp/from-session"), "x")
        self.assertIn("s1", [i.id for i in self.sb.list_sessions()])
        self.assertEqual(self.sb.get_session("s1").exec("pwd").stdout, "/etc\n")
        with self.assertRaises(cella.SessionAlreadyExistsError):
            self.sb.create_session(id="s1")
        p = s.start_process("sleep 0.1; echo in-session")
        self.assertEqual(p.info.session_id, "s1")
        s.delete()
        with self.assertRaises(cella.SessionNotFoundError):
            self.sb.get_session("s1")
        anon = self.sb.create_session()
        self.assertTrue(anon.session_id)
        self.sb.delete_session(anon.session_id)

    def test_processes(self) -> None:
        p = self.sb.start_process("echo hello; echo warn >&2; sleep 0.2; echo done; exit 2",
                                  process_id="p1")
        self.assertEqual(p.id, "p1")
        self.assertGreater(p.pid, 0)
        self.assertEqual(p.wait_for_log("hello").line, "hello")
        r = p.wait_for_log("w[a-z]+n", regex=True)
        self.assertEqual((r.line, r.stream), ("warn", "stderr"))
        info = p.wait_for_exit(timeout=10000)
        self.assertEqual((info.status, info.exit_code), ("failed", 2))
        logs = p.logs()
        self.assertEqual((logs.stdout, logs.stderr), ("hello\ndone\n", "warn\n"))
        events = list(p.stream_logs())
        self.assertEqual(events[-1].type, "exit")
        self.assertEqual(events[-1].exit_code, 2)
        self.assertEqual("".join(e.data for e in events if e.type == "stdout"), "hello\ndone\n")
        with self.assertRaises(cella.ProcessAlreadyExistsError):
            self.sb.start_process("true", process_id="p1")
        self.assertIn("p1", [x.id for x in self.sb.list_processes()])
        self.assertEqual(self.sb.get_process("p1").status().status, "failed")
        self.assertEqual(self.sb.get_process_logs("p1").stderr, "warn\n")

    def test_waits_fail(self) -> None:
        p = self.sb.start_process("sleep 30")
        with self.assertRaises(cella.ProcessReadyTimeoutError) as cm:
            p.wait_for_log("never", timeout=300)
        self.assertEqual(cm.exception.http_status, 408)
        killed = p.kill()
        self.assertEqual(killed.status, "killed")
        q = self.sb.start_process("exit 1")
        with self.assertRaises(cella.ProcessExitedBeforeReadyError):
            q.wait_for_port(8999, timeout=10000)
        with self.assertRaises(cella.ValidationFailedError):
            self.sb.start_process("sleep 5").kill("SIGNOPE")
        self.assertGreaterEqual(self.sb.kill_all_processes(), 1)

    def test_ports(self) -> None:
        web = self.sb.start_process("python3 -m http.server 8000", process_id="web", cwd="/tmp")
        self.sb.write_file("/tmp/index.html", "<p>hi</p>")
        web.wait_for_port(8000, mode="http", timeout=20000)
        ep = self.sb.expose_port(8000, name="web")
        self.assertTrue(ep.url.startswith("http://8000-"), ep.url)
        self.assertEqual((ep.port, ep.name), (8000, "web"))
        host = ep.url.split("//", 1)[1].split("/", 1)[0]
        req = urllib.request.Request(self.c.url + "/index.html", headers={"Host": host})
        with urllib.request.urlopen(req, timeout=30) as r:
            self.assertEqual(r.read(), b"<p>hi</p>")
        self.assertEqual([p.port for p in self.sb.get_exposed_ports()], [8000])
        self.assertEqual(self.sb.get_exposed_ports()[0].status, "active")
        with self.assertRaises(cella.InvalidPortError):
            self.sb.expose_port(80)
        self.sb.unexpose_port(8000)
        self.assertEqual(self.sb.get_exposed_ports(), [])
        web.kill()

    def test_watch(self) -> None:
        self.sb.mkdir("w", recursive=True)
        with self.sb.watch("w", include=["*.txt"]) as events:
            first = next(events)
            self.assertEqual((first.type, first.path), ("watching", "/workspace/w"))
            self.sb.write_file("w/skip.log", "x")
            self.sb.write_file("w/a.txt", "x")
            for ev in events:
                if ev.type == "event" and ev.path.endswith("/a.txt"):
                    break
            self.assertEqual(ev.path, "/workspace/w/a.txt")
        with self.assertRaises(cella.FileNotFoundError):
            self.sb.watch("no-such-dir")

    def test_git(self) -> None:
        with self.assertRaises(cella.InvalidGitUrlError) as cm:
            self.sb.git_checkout("file:///etc")
        self.assertEqual(cm.exception.http_status, 400)
        # Only network URLs are accepted; a local path is refused before git runs.
        with self.assertRaises(cella.InvalidGitUrlError):
            self.sb.git_checkout("/tmp/src")
        # A repository served over git's dumb HTTP protocol inside the sandbox itself.
        r = self.sb.exec(
            "set -e; rm -rf /tmp/git && mkdir -p /tmp/git && cd /tmp/git"
            " && git init -q -b main src && cd src && echo hello > f"
            " && git -c user.email=a@b -c user.name=n add f"
            " && git -c user.email=a@b -c user.name=n commit -qm one"
            " && git branch dev && cd .. && git clone -q --bare src repo.git"
            " && git -C repo.git update-server-info")
        self.assertTrue(r.success, r.stderr)
        srv = self.sb.start_process("python3 -m http.server 8765 --bind 127.0.0.1", cwd="/tmp/git")
        try:
            srv.wait_for_port(8765, timeout=20000)
            res = self.sb.git_checkout("http://127.0.0.1:8765/repo.git", timeout=60000)
            self.assertEqual((res.branch, res.target_dir), ("main", "/workspace/repo"))
            self.assertEqual(self.sb.read_file("repo/f"), "hello\n")
            dev = self.sb.git_checkout("http://127.0.0.1:8765/repo.git", branch="dev",
                                       target_dir="/tmp/dev-clone")
            self.assertEqual((dev.branch, dev.target_dir), ("dev", "/tmp/dev-clone"))
            with self.assertRaises(cella.DirectoryNotEmptyError):
                self.sb.git_checkout("http://127.0.0.1:8765/repo.git")
            with self.assertRaises(cella.GitBranchNotFoundError):
                self.sb.git_checkout("http://127.0.0.1:8765/repo.git", branch="nope",
                                     target_dir="/tmp/nope")
            with self.assertRaises(cella.GitRepositoryNotFoundError) as cm:
                self.sb.git_checkout("http://127.0.0.1:8765/missing.git")
            self.assertIn("repoUrl", cm.exception.context)
        finally:
            srv.kill()

    def test_code_interpreter(self) -> None:
        ctx = self.sb.create_code_context(language="python")
        self.assertEqual(ctx.language, "python")
        self.sb.run_code("x = 41", context=ctx)
        ex = self.sb.run_code("x + 1", context=ctx)
        self.assertEqual(ex.results[0].text, "42")
        self.assertEqual(ex.text, "42")
        self.assertTrue(ex.results[0].is_main_result)
        err = self.sb.run_code("1/0", context=ctx)
        assert err.error is not None
        self.assertEqual(err.error.ename, "ZeroDivisionError")
        self.assertIn("division", err.error.evalue)
        self.assertTrue(err.error.traceback)
        png = self.sb.run_code("import matplotlib.pyplot as plt\nplt.plot([1,2,3])\nplt.show()",
                               context=ctx)
        imgs = [r.png for r in png.results if r.png]
        self.assertTrue(imgs and imgs[0].startswith(b"\x89PNG"), png)
        html = self.sb.run_code("import pandas as pd\npd.DataFrame({'a':[1]})", context=ctx)
        self.assertIn("<table", html.results[0].html or "")
        out: list[str] = []
        results: list[cella.Result] = []
        errs: list[cella.ExecutionError] = []
        ex2 = self.sb.run_code("print('a'); print('b')\n7", context=ctx,
                               on_stdout=out.append, on_result=results.append, on_error=errs.append)
        self.assertEqual("".join(out), "a\nb\n")
        self.assertEqual(results[0].text, "7")
        self.assertEqual(ex2.text, "7")
        self.assertEqual(errs, [])
        raw = [e["type"] for e in self.sb.run_code_stream("print(1)", context=ctx)]
        self.assertEqual(raw[-1], "execution_complete")
        t = self.sb.run_code("import time\ntime.sleep(30)", context=ctx, timeout=500)
        self.assertTrue(t.timed_out)
        self.assertIn(ctx.id, [c.id for c in self.sb.list_code_contexts()])
        self.sb.delete_code_context(ctx)
        with self.assertRaises(cella.ContextNotFoundError):
            self.sb.run_code("1", context=ctx)
        js = self.sb.run_code("1 + 2", language="javascript")
        self.assertEqual(js.text, "3")


if __name__ == "__main__":
    unittest.main()
