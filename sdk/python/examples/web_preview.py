"""A web server in a sandbox, reachable through a preview URL.

    python3 web_preview.py [URL]     (prints the preview URL and what it answers)
    KEEP=1 python3 web_preview.py    leaves the sandbox running to open the URL in a browser
"""

import os
import sys
import urllib.request

import cella


def main() -> int:
    url = sys.argv[1] if len(sys.argv) > 1 else os.environ.get("CELLA_URL", "http://127.0.0.1:7070")
    client = cella.connect(url=url, token=os.environ.get("CELLA_TOKEN"))
    name = os.environ.get("CELLA_EXAMPLE_SANDBOX", "py-web-preview")
    keep = os.environ.get("KEEP") == "1"
    with client.sandbox(name, destroy_on_exit=not keep) as sb:
        sb.write_file("site/index.html", "<h1>hello from a cella sandbox</h1>\n")
        web = sb.start_process("python3 -m http.server 8000 --directory /workspace/site",
                               process_id="web")
        web.wait_for_port(8000, mode="http", timeout=30_000)
        preview = sb.expose_port(8000, name="site")
        print("preview URL:", preview.url)
        # *.localhost resolves to loopback in browsers; urllib does not, so send the Host.
        host = preview.url.split("//", 1)[1].split("/", 1)[0]
        req = urllib.request.Request(client.url + "/", headers={"Host": host})
        with urllib.request.urlopen(req, timeout=30) as r:
            print("it answers:", r.status, r.read().decode().strip())
        if not keep:
            sb.unexpose_port(8000)
            web.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
