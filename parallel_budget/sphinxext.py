"""Sphinx extension of the course book: keep every page offline.

Jupyter Book 1 always loads sphinx-thebe, which writes the address of thebe's
JavaScript on a CDN into every page.  The course has no live kernels on the
static site, so this drops those script entries before a page is written.
Calculators register their own assets here as they are added.
"""

from __future__ import annotations


def _is_online_script(script) -> bool:
    text = str(getattr(script, "filename", "") or "") + str(getattr(script, "attributes", {}).get("body", ""))
    return "thebe" in text or text.startswith(("http://", "https://"))


def _drop_online_scripts(app, pagename, templatename, context, doctree):
    scripts = context.get("script_files")
    if scripts:
        context["script_files"] = [s for s in scripts if not _is_online_script(s)]


def setup(app):
    app.connect("html-page-context", _drop_online_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
