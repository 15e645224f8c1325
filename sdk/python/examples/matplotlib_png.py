"""A data-analysis run in the code interpreter: pandas computes, matplotlib draws, and the
figure comes back as PNG bytes (written to plot.png here).

    python3 matplotlib_png.py [URL] [OUT.png]
"""

import os
import sys

import cella

CODE = """
import numpy as np, pandas as pd, matplotlib.pyplot as plt
df = pd.DataFrame({"x": np.arange(50)})
df["y"] = np.sin(df.x / 5) * np.exp(-df.x / 40)
ax = df.plot(x="x", y="y", title="damped sine")
plt.show()
df.y.describe()
"""


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CELLA_URL", "http://127.0.0.1:7070")
    out = sys.argv[2] if len(sys.argv) > 2 else "plot.png"
    client = cella.connect(url=url, token=os.environ.get("CELLA_TOKEN"))
    name = os.environ.get("CELLA_EXAMPLE_SANDBOX", "py-matplotlib")
    with client.sandbox(name, destroy_on_exit=True) as sb:
        ctx = sb.create_code_context(language="python")
        ex = sb.run_code(CODE, context=ctx, timeout=120_000,
                         on_stdout=lambda t: print("stdout:", t, end=""))
        if ex.error:
            print(f"{ex.error.ename}: {ex.error.evalue}", file=sys.stderr)
            return 1
        pngs = [r.png for r in ex.results if r.png]
        if not pngs:
            print("no figure", file=sys.stderr)
            return 1
        with open(out, "wb") as f:
            f.write(pngs[0])
        print(f"wrote {out} ({len(pngs[0])} bytes); summary:\n{ex.text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
