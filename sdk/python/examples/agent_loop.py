"""An agent loop: write a program into a sandbox, run it, read its result, and repeat with
what was learned (here the "model" is a list of attempts; an agent would ask an LLM).

    python3 agent_loop.py [URL]    (CELLA_TOKEN from the environment)
"""

import os
import sys

import cella

ATTEMPTS = [
    # a first try with a bug, then the fix, as a model would propose them
    "import json\nprint(json.dumps({'primes': [n for n in range(2, 30) if all(n % d for d in range(2, n))]})\n",
    "import json\nres = [n for n in range(2, 30) if all(n % d for d in range(2, n))]\n"
    "json.dump({'primes': res}, open('/workspace/out.json', 'w'))\nprint('wrote', len(res))\n",
]


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CELLA_URL", "http://127.0.0.1:7070")
    client = cella.connect(url=url, token=os.environ.get("CELLA_TOKEN"))
    name = os.environ.get("CELLA_EXAMPLE_SANDBOX", "py-agent-loop")
    with client.sandbox(name, destroy_on_exit=True) as sb:
        for i, program in enumerate(ATTEMPTS, 1):
            sb.write_file("agent/step.py", program)
            r = sb.exec("python3 agent/step.py", timeout=30_000)
            print(f"attempt {i}: exit {r.exit_code}: {r.stdout.strip() or r.stderr.strip().splitlines()[-1]}")
            if r.success and sb.exists("out.json"):
                print("result:", sb.read_file("out.json"))
                return 0
            # feed the error back into the next attempt (an agent would give it to the model)
    return 1


if __name__ == "__main__":
    sys.exit(main())
