"""The examples (sdk/python/examples) run against the test daemon."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import unittest

from .harness import PREFIX, TOKEN, URL, needs_daemon

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples")


@needs_daemon
class ExamplesTest(unittest.TestCase):
    def run_example(self, name: str, *args: str) -> str:
        env = dict(os.environ, CELLA_URL=URL, CELLA_TOKEN=TOKEN,
                   CELLA_EXAMPLE_SANDBOX=PREFIX + "ex-" + name.split(".")[0].replace("_", "-"),
                   PYTHONPATH=os.path.join(EXAMPLES, ".."))
        p = subprocess.run([sys.executable, os.path.join(EXAMPLES, name), URL, *args], env=env,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(p.returncode, 0, p.stdout + p.stderr)
        return p.stdout

    def test_agent_loop(self) -> None:
        out = self.run_example("agent_loop.py")
        self.assertIn("attempt 1: exit 1", out)
        self.assertIn('"primes": [2, 3, 5, 7', out)

    def test_matplotlib_png(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            png = os.path.join(d, "plot.png")
            self.run_example("matplotlib_png.py", png)
            with open(png, "rb") as f:
                self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_web_preview(self) -> None:
        out = self.run_example("web_preview.py")
        self.assertIn("it answers: 200 <h1>hello from a cella sandbox</h1>", out)


if __name__ == "__main__":
    unittest.main()
