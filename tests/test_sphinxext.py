"""Does the Sphinx extension load the in-page tools only where they are mounted, within budget?"""

from __future__ import annotations

import re

from conftest import ROOT
from parallel_budget import sphinxext

ASSETS = ROOT / "book" / "_static" / "calc"


class FakeApp:
    def __init__(self):
        self.js, self.css = [], []

    def add_js_file(self, filename, **kwargs):
        self.js.append((filename, kwargs))

    def add_css_file(self, filename, **kwargs):
        self.css.append(filename)


def test_tools_are_added_only_to_pages_that_mount_them():
    """Does a page with a pb-calc or pb-record marker get the module, the CSS and the fallback, others nothing?"""
    for body in ('<div class="pb-calc" data-calc="ring"></div>', '<div class="pb-record">', "<div class='x pb-calc'>"):
        app = FakeApp()
        sphinxext._add_tools(app, "p", "page.html", {"body": body}, None)
        assert app.css == [sphinxext.CALC_CSS]
        assert app.js[0] == (sphinxext.CALC_JS, {"type": "module"})
        assert app.js[1][0] is None and "pbToolsLoaded" in app.js[1][1]["body"]
    app = FakeApp()
    sphinxext._add_tools(app, "p", "page.html", {"body": "<p>no tools: pb-calc-like</p>"}, None)
    assert app.js == [] and app.css == []


def test_registered_files_exist():
    """Are the files the extension registers present under book/_static/?"""
    assert (ASSETS.parent / sphinxext.CALC_JS).is_file()
    assert (ASSETS.parent / sphinxext.CALC_CSS).is_file()


def test_assets_stay_within_40_kb_and_offline():
    """Is all calculator JS + CSS at most 40 000 bytes, free of URLs to other hosts?"""
    files = [p for p in ASSETS.iterdir() if p.suffix in (".js", ".css")]
    total = sum(p.stat().st_size for p in files)
    assert total <= 40_000, f"calculator JS + CSS is {total} B, budget 40000 B"
    for p in files:
        text = p.read_text(encoding="utf-8")
        assert not re.search(r"https?://|//cdn|@import", text), p.name
        if p.suffix == ".js":
            assert not re.search(r"\bfetch\(|XMLHttpRequest|WebSocket", text), p.name
