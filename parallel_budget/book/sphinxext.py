"""Sphinx extension of the course book: keep every page offline, load the in-page tools.

Jupyter Book 1 always loads sphinx-thebe, which writes the address of thebe's
JavaScript on a CDN into every page.  The course has no live kernels on the
static site, so this drops those script entries before a page is written.

The calculators and the record page (``book/_static/calc/``: classic scripts
and a stylesheet) are added only to pages that mount them, i.e. whose body holds
``class="pb-calc"`` or ``class="pb-record"``.  They are classic deferred scripts,
not ES modules, because browsers refuse module scripts from ``file://`` and the
site must work when opened straight from disk.  The site serves them minified
(:mod:`.minified`: one budget for all of them); the readable files stay in
``book/_static/calc``.

Never stale (issue 16): every page that imports the package depends, through
Sphinx's ``env.note_dependency``, on the package files it needs
(:mod:`.builddeps`), so editing a formula re-reads, and so re-executes, exactly
the pages that import it; a prose edit re-executes only its own page.

A page's script and stylesheet tags (which of ``book/_static``'s files it loads, with their ``?v=``
checksums) are written with the page, not read from its source: when this module or a file of
``book/_static`` changes, an incremental build re-writes every page (:func:`_rewrite_pages_for_new_assets`),
without re-reading or re-executing any.

A downloaded notebook runs (issue 13): after a successful HTML build the site gets
``downloads/parallel_budget-<version>-py3-none-any.whl`` (:mod:`.wheel`).

Glossary terms are Markdown links to ``glossary.md#term-…``, which JupyterLab opens
too; :mod:`.glossary` makes them Sphinx term references (issue 13).

Page kernels inherit :data:`.labcell.BUILD_ENV`, set here: a chapter's lab cell
(``lab_cell(run_lab, "…")``) runs its lab for the site instead of drawing
JupyterLab's button (issue 25); links to the exercise notebooks open them in
JupyterLab and download them from the site (:mod:`.notebooklinks`).
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path

from sphinx.util import logging

from . import builddeps, glossary, kernels, labcell, minified, notebooklinks, prose, search, wheel

logger = logging.getLogger(__name__)

# Deferred classic scripts run in this order: model, then the views, then main mounts them.
CALC_JS = ("calc/model.js", "calc/ui.js", "calc/record.js", "calc/main.js")
CALC_CSS = "calc/calc.css"
MOUNT = re.compile(r"""class=["'][^"']*\bpb-(?:calc|record)\b""")
# The plan builder (its step timeline, model and view, larger scripts) only where it is mounted, in this order,
# after model.js and before main.js (plantimeline.js needs planschedule.js, plan.js needs plantimeline.js and
# nccltests.js, planview.js needs plan.js).
PLAN_JS = ("calc/planschedule.js", "calc/plantimeline.js", "calc/nccltests.js", "calc/plan.js", "calc/planview.js")
PLAN_CSS = "calc/plan.css"
KINDS = re.compile(r"""data-calc=["'](\w+)["']""")
# Practice boxes and the progress summary (parallel_budget.questions.site): model.js for the formulas.
PRACTICE = re.compile(r"""class=["']pb-practice""")
PRACTICE_JS, PRACTICE_CSS = "calc/practice.js", "calc/practice.css"
# Every page: figures readable on a phone, search excerpts without TeX, search from disk (not deferred:
# it must patch Sphinx's search before the search page starts it).
COURSE_JS = "course.js"

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
    if PRACTICE.search(body):
        from ..questions import site  # the bank's data for the boxes this page mounts

        context["body"] = body = site.embed(body)
    if MOUNT.search(body):
        app.add_css_file(CALC_CSS)
        scripts = CALC_JS
        kinds = set(KINDS.findall(body))
        if "plan" in kinds:  # ui.js only for other calculators, record.js only for the record form
            model, ui, record, main = CALC_JS
            scripts = (model, *([ui] if kinds - {"plan"} else []), *([record] if "pb-record" in body else []),
                       *PLAN_JS, main)
            app.add_css_file(PLAN_CSS)
        for js in scripts:
            app.add_js_file(js, defer="defer")
    if PRACTICE.search(body):
        if not MOUNT.search(body):
            app.add_js_file(CALC_JS[0], defer="defer")
        app.add_css_file(PRACTICE_CSS)
        app.add_js_file(PRACTICE_JS, defer="defer")


def assets_fingerprint(srcdir) -> str:
    """What the pages' script and stylesheet tags depend on: this module (which files a page loads, in which
    order) and every file of book/_static (their checksums)."""
    h = hashlib.sha256(Path(__file__).read_bytes())
    static = Path(srcdir) / "book" / "_static"
    for path in sorted(p for p in static.rglob("*") if p.is_file()):
        h.update(b"\0" + str(path.relative_to(static)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def _rewrite_pages_for_new_assets(app, env):
    """``env-updated``: every page, to be written again, when the assets' fingerprint changed since the last build."""
    new = assets_fingerprint(app.srcdir)
    if getattr(env, "pb_assets_fingerprint", None) == new:
        return None
    env.pb_assets_fingerprint = new  # pickled with the environment
    return sorted(env.found_docs)


def _plain_home_title(app, pagename, templatename, context, doctree):
    """The home page's browser title is the book's title once, not "title — title"."""
    if pagename == app.config.root_doc and context.get("title") == context.get("docstitle"):
        context["docstitle"] = ""  # basic/layout.html adds " — docstitle" only when there is one


def _note_package_dependencies(app, docname, source):
    """Make a page that imports parallel_budget outdated whenever a package file it needs changes."""
    assert app.env.docname == docname  # note_dependency notes for the page being read
    deps = builddeps.page_dependencies(source[0])
    if PRACTICE.search(source[0]):  # the page carries the bank's data for its practice boxes (questions.site)
        deps |= builddeps.page_dependencies("from parallel_budget.questions import site\n")
        if "pb-practice-summary" in source[0]:  # the summary names every chapter by its title
            from ..questions import CHAPTERS

            deps |= {builddeps.ROOT.parent / "book" / f"{c}.md" for c in CHAPTERS}
    for path in sorted(deps):
        app.env.note_dependency(str(path))


# Extensions the book loads that do not declare parallel_read_safe, though they are: multitoc numbering
# (always loaded by sphinx_external_toc) only replaces TocTreeCollector.assign_section_numbers, which
# runs in the main process after reading; mathjax-offline only copies files at build-finished.
PARALLEL_SAFE_UNDECLARED = ("sphinx_multitoc_numbering", "sphinx-mathjax-offline")


def _allow_parallel_reading(app):
    """Let Sphinx read (and so execute) pages in parallel (``-j N``)."""
    for name in PARALLEL_SAFE_UNDECLARED:
        ext = app.extensions.get(name)
        if ext is not None and ext.parallel_read_safe is None:
            ext.parallel_read_safe = True


def _ship_wheel(app, exception):
    """Put the course package's wheel in the site's downloads/ folder (a downloaded notebook needs it)."""
    repo = Path(app.srcdir)
    if exception is not None or app.builder.format != "html" or not (repo / "pyproject.toml").is_file():
        return
    try:
        path = wheel.build_wheel(repo, Path(app.outdir) / wheel.FOLDER)
    except (RuntimeError, OSError, ValueError) as exc:
        logger.warning(str(exc))
    else:
        logger.info(f"course package wheel: {path}")


def setup(app):
    kernels.install()
    os.environ[labcell.BUILD_ENV] = "1"  # page kernels inherit it: lab cells run their lab
    _allow_parallel_reading(app)
    glossary.setup(app)
    notebooklinks.setup(app)
    prose.setup(app)  # Chinese prose: no stray space at source line breaks, numbers kept with units
    search.setup(app)  # the course's words, glossary terms and units in the search index
    app.add_js_file(COURSE_JS)
    app.connect("builder-inited", minified.ship_minified)
    app.connect("build-finished", _ship_wheel)
    app.add_post_transform(wheel.DownloadLinks)
    app.connect("source-read", _note_package_dependencies)
    app.connect("env-updated", _rewrite_pages_for_new_assets)
    app.connect("html-page-context", _add_tools)
    app.connect("html-page-context", _plain_home_title)
    app.connect("html-page-context", _drop_online_scripts, priority=900)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
