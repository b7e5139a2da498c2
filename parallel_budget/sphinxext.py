"""Sphinx extension of the course book: keep every page offline, load the in-page tools.

Jupyter Book 1 always loads sphinx-thebe, which writes the address of thebe's
JavaScript on a CDN into every page.  The course has no live kernels on the
static site, so this drops those script entries before a page is written.

The calculators and the record page (``book/_static/calc/``, an ES module and
a stylesheet) are added only to pages that mount them, i.e. whose body holds
``class="pb-calc"`` or ``class="pb-record"``.  A small classic script tells the
reader when the module did not load (Chromium refuses module scripts from
``file://``) instead of leaving an empty box.
"""

from __future__ import annotations

import re

CALC_JS = "calc/main.js"
CALC_CSS = "calc/calc.css"
MOUNT = re.compile(r"""class=["'][^"']*\bpb-(?:calc|record)\b""")

# Runs as a classic script, so it also runs where the module is refused.
_FALLBACK = (
    "addEventListener('load',function(){if(window.pbToolsLoaded)return;"
    "document.querySelectorAll('.pb-calc,.pb-record').forEach(function(e){var p=document.createElement('p');"
    "p.className='pb-bad';p.textContent='这里的计算器需要 JavaScript 模块,但它没有加载。若是直接用 file:// 打开的本站,"
    "Chromium 等浏览器会拒绝模块脚本:请在站点目录运行 python3 -m http.server,再打开 http://localhost:8000/ 。';"
    "e.prepend(p)})})"
)


def _is_online_script(script) -> bool:
    text = str(getattr(script, "filename", "") or "") + str(getattr(script, "attributes", {}).get("body", ""))
    return "thebe" in text or text.startswith(("http://", "https://"))


def _drop_online_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_online_script(s)]


def _add_tools(app, pagename, templatename, context, doctree):
    """Load the calculators' module and stylesheet on pages that mount them."""
    body = context.get("body") or ""
    if MOUNT.search(body):
        app.add_css_file(CALC_CSS)
        app.add_js_file(CALC_JS, type="module")
        app.add_js_file(None, body=_FALLBACK)


def setup(app):
    app.connect("html-page-context", _add_tools)
    app.connect("html-page-context", _drop_online_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
