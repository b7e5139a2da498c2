"""Serve a built site on localhost, start Debian's chromium, and open pages that may reach nothing else.

Never downloads a browser: Playwright drives ``/usr/bin/chromium``.  :class:`Tab` is the one way a
browser test opens a page (site, JupyterLab, formgrader): every request to another host is refused
and recorded, and so is every console error and uncaught exception; :meth:`Tab.check` fails on any.
"""

from __future__ import annotations

import functools
import http.server
import threading
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-component-update", "--no-first-run",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
LOCAL_SCHEMES = {"file", "data", "blob"}  # a page from disk, and what a page makes itself


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


class Tab:
    """A page in a fresh browser context that records off-site requests and console errors.

    ``context_options`` go to ``browser.new_context`` (e.g. ``viewport``).  The browser's own favicon
    probe is not the page's doing and is not counted.
    """

    def __init__(self, browser, base_url: str = "", **context_options):
        self.base_url = base_url
        self.context = browser.new_context(accept_downloads=True, **context_options)
        self.offsite, self.local, self.errors = [], [], []
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", self._console)
        self.page.on("pageerror", lambda e: self.errors.append(f"exception: {e}"))

    def _route(self, route):
        url = urlparse(route.request.url)
        if url.hostname in LOCAL_HOSTS or url.scheme in LOCAL_SCHEMES:
            self.local.append(route.request.url)
            route.continue_()
        else:
            self.offsite.append(route.request.url)
            route.abort()

    def _console(self, msg):
        if msg.type == "error" and not msg.location.get("url", "").endswith("favicon.ico"):
            self.errors.append(f"console: {msg.text} ({msg.location.get('url')})")

    def open(self, path: str):
        self.page.goto(f"{self.base_url}/{path}")
        self.page.wait_for_load_state("load")
        return self.page

    def check(self) -> None:
        """Close the context; fail if nothing was loaded, anything went off the machine, or a script failed."""
        self.context.close()
        if self.base_url.startswith("http"):  # Playwright routes no file:// request, so there is none to see
            assert self.local, "route interception saw no request at all"
        assert not self.offsite, f"requests to other hosts: {self.offsite}"
        assert not self.errors, self.errors
