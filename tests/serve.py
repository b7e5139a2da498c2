"""Serve a built site on localhost and start Debian's chromium (tests and benchmarks).

Never downloads a browser: Playwright drives ``/usr/bin/chromium``.
"""

from __future__ import annotations

import functools
import http.server
import threading
from contextlib import contextmanager
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextmanager
def serve(root: Path):
    """Yield the base URL of ``root`` served by http.server on an ephemeral port."""
    handler = functools.partial(_QuietHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)


def launch(playwright):
    """Start headless Debian chromium; fail with a clear message when it is missing."""
    if not Path(CHROMIUM).exists():
        raise RuntimeError(f"{CHROMIUM} 不存在:请安装 Debian 包 chromium(apt-get install chromium),不要下载浏览器。")
    return playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
