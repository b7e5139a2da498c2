"""Is a submission's HTML shown inert, with its text, formulas and plain images kept? (parallel_budget.grading.results.inert)

Browser tests with a real formgrader and real feedback pages are in tests/test_formgrader.py; these check the
sanitizer itself on the tricks of issue 22, in milliseconds.
"""

from __future__ import annotations

import pytest
from nbformat.v4 import new_code_cell, new_notebook, new_output

from parallel_budget.grading.results.inert import InertOutputs, clean_html

TRICKS = [
    '<img src=x onerror="alert(1)">', "<script>alert(1)</script>", '<svg onload="alert(1)"></svg>',
    '<svg><animate onbegin="alert(1)" attributeName="x"/></svg>', '<details open ontoggle="alert(1)">d</details>',
    '<iframe srcdoc="&lt;script&gt;parent.alert(1)&lt;/script&gt;"></iframe>', '<a href="javascript:alert(1)">a</a>',
    '<a href="JaVaScRiPt:alert(1)">a</a>', '<a href=" javascript:alert(1)">a</a>', '<object data="x.swf"></object>',
    '<embed src="x">', '<form action="/api/contents"><input name="x"></form>', '<meta http-equiv="refresh" content="0">',
    '<base href="http://example.invalid/">', "<style>body{display:none}</style>", '<link rel="stylesheet" href="x">',
    '<math><mtext><img src=x onerror="alert(1)"></mtext></math>', '<div style="position:fixed;top:0">over</div>',
]


@pytest.mark.parametrize("html", TRICKS)
def test_nothing_that_runs_loads_or_overlays_survives(html):
    """Does the cleaned fragment keep no script, event handler, frame, form, style, javascript: URL or request?"""
    out = clean_html(html).lower()
    for bad in ("<script", "onerror", "onload", "onbegin", "ontoggle", "<iframe", "<svg", "javascript:", "<object",
                "<embed", "<form", "<input", "<meta", "<base", "<style", "<link", "position", "src=\"x\""):
        assert bad not in out, (html, out)


def test_text_formulas_tables_code_and_data_images_are_kept():
    """Do Chinese text, TeX, table alignment, highlighted code, outside links and data: images stay as they were?"""
    html = ('<p>带宽 $2(R-1)/R \\times G$ 与 $a&lt;b$</p><table><tr><td style="text-align:right">1</td></tr></table>'
            '<div class="highlight"><pre><span class="n">x</span></pre></div><a href="https://pytorch.org">文档</a>'
            '<img src="data:image/png;base64,iVBORw0KGgo=" alt="图">')
    out = clean_html(html)
    for kept in ("带宽 $2(R-1)/R \\times G$ 与 $a&lt;b$", 'style="text-align:right"', 'class="highlight"', 'class="n"',
                 'href="https://pytorch.org"', 'src="data:image/png;base64,iVBORw0KGgo="'):
        assert kept in out, (kept, out)


def test_ids_and_classes_cannot_impersonate_the_page():
    """Is a student's id prefixed (no clash with formgrader's inputs) and a class outside the safe list dropped?"""
    out = clean_html('<span id="explain_ex1" class="score tabbable navbar-fixed-top k">x</span>')
    assert 'id="student-explain_ex1"' in out and 'class="k"' in out and "score" not in out and "navbar" not in out


def test_outputs_that_could_run_are_dropped():
    """Are JavaScript, widget views and unknown outputs dropped, HTML cleaned, text/images/SVG-as-image kept,
    and the notebook's widget state removed?"""
    cell = new_code_cell("x", outputs=[
        new_output("display_data", data={"application/javascript": "alert(1)", "text/plain": "<Javascript>"}),
        new_output("display_data", data={"application/vnd.jupyter.widget-view+json": {"model_id": "m"}}),
        new_output("display_data", data={"text/html": '<b>粗</b><img src=x onerror="alert(1)">'},
                   metadata={"text/html": {"isolated": True}}),
        new_output("display_data", data={"image/png": "iVBORw0KGgo=", "image/svg+xml": "<svg onload='alert(1)'/>"}),
        new_output("display_data", data={"application/x-unknown": "?"}),
    ])
    nb = new_notebook(cells=[cell], metadata={"widgets": {"application/vnd.jupyter.widget-state+json": {}}})
    nb, _ = InertOutputs().preprocess(nb, {})
    data = [o.get("data", {}) for o in nb.cells[0].outputs]
    assert [sorted(d) for d in data] == [["text/plain"], [], ["text/html"], ["image/png", "image/svg+xml"], []]
    assert data[2]["text/html"] == "<b>粗</b><img>" and "widgets" not in nb.metadata
    assert "isolated" not in nb.cells[0].outputs[2].metadata.get("text/html", {})  # no data: iframe


def test_output_metadata_reaches_templates_only_as_numbers_and_flags():
    """Are width/height kept only as plain numbers, and filenames, isolated, strings for sizes and unknown keys
    dropped (nbconvert writes sizes as unquoted attributes and filenames as image URLs)?"""
    from parallel_budget.grading.results.inert import output_metadata

    meta = {"image/png": {"width": "1 onerror=alert(1)", "height": 40, "unconfined": "yes", "alt": "图"},
            "image/jpeg": {"width": float("nan"), "height": True}, "filenames": {"image/png": "javascript:x"},
            "text/html": {"isolated": True}, "width": 12.5, "height": "9 onload=x", "application/x-evil": {"width": 1}}
    assert output_metadata(meta) == {"image/png": {"height": 40, "alt": "图"}, "width": 12.5}
    assert output_metadata("width=1 onerror=x") == {} and output_metadata({"image/png": {"width": 10 ** 9}}) == {}


def test_cells_reach_templates_rebuilt_from_typed_parts():
    """Do a cell's tags, raw mimetype and foreign metadata go, nbgrader metadata keep only typed keys, and do
    counts become integers and stream names stdout/stderr, with nbconvert's real template showing no handler?"""
    from nbconvert import HTMLExporter
    from nbformat.v4 import new_markdown_cell, new_raw_cell

    code = new_code_cell("x", execution_count=1, outputs=[
        new_output("stream", name='x" onmouseover="alert(1)', text="hi"),
        new_output("display_data", data={"image/png": "iVBORw0KGgo="},
                   metadata={"image/png": {"width": "1 onerror=alert(1)"}, "filenames": {"image/png": "x.png"}})],
        metadata={"tags": ['x" onclick="alert(1)'], "nbgrader": {"grade_id": "a", "points": "9", "solution": "yes",
                                                                  "grade": True, "evil": "<script>"}})
    code.execution_count = "<img src=x onerror=alert(1)>"
    code.outputs.append({"output_type": "weird", "data": {}})
    raw = new_raw_cell("<script>alert(1)</script>", metadata={"raw_mimetype": "text/html"})
    nb = new_notebook()
    nb.cells = [code, new_markdown_cell("ok"), raw]  # past nbformat's validation, as a hostile file may be
    nb, _ = InertOutputs().preprocess(nb, {})
    cell = nb.cells[0]
    assert cell.metadata == {"nbgrader": {"grade_id": "a", "grade": True}} and cell.execution_count is None
    assert [o.output_type for o in cell.outputs] == ["stream", "display_data"] and cell.outputs[0].name == "stdout"
    assert cell.outputs[1].metadata == {} and nb.cells[2].metadata == {}
    html, _ = HTMLExporter(template_name="classic").from_notebook_node(nb)
    for bad in ("onerror", "onmouseover", "onclick", "<script>alert", 'src="x.png"'):
        assert bad not in html, bad


def test_the_policies_allow_no_inline_script_eval_or_plugin():
    """Do both policies hold no unsafe source, a nonce, no plugin, no <base>, and does each call give a new nonce?"""
    from parallel_budget.grading.results import csp

    assert csp.new_nonce() != csp.new_nonce() and len(csp.new_nonce()) >= 22
    for policy in (csp.formgrader_policy("N0", "http://127.0.0.1:8888", "/"), csp.feedback_policy("N0")):
        sources = csp.script_sources(policy)
        assert "'nonce-N0'" in sources and not set(sources) & set(csp.UNSAFE) and "'self'" not in sources, policy
        for directive in ("default-src 'none'", "object-src 'none'", "base-uri 'none'", "form-action"):
            assert directive in policy, (directive, policy)
    grader = csp.script_sources(csp.formgrader_policy("N0", "http://h:1", "/base/"))
    assert grader == ["'nonce-N0'", "http://h:1/base/formgrader/static/", "http://h:1/base/pb-mathjax/"]
    assert csp.script_sources(csp.formgrader_policy("N0", "http://h; script-src *", "/")) == ["'nonce-N0'"]


def test_every_nbgrader_page_with_inline_script_has_a_nonced_copy():
    """Does each nbgrader template with an inline script or handler have a course copy, and do the copies hold
    no inline handler, no javascript: URL and no <script> without the nonce?  (A new nbgrader page with an
    inline script would otherwise be blocked by the policy, or tempt someone to loosen it.)"""
    import re
    from pathlib import Path

    import nbgrader

    from parallel_budget.grading.results.feedback import TEMPLATES

    theirs = Path(nbgrader.__file__).parent / "server_extensions" / "formgrader" / "templates"
    ours = {p.name: p for p in (TEMPLATES / "pb_formgrader").glob("*.tpl")}
    ours["formgrade_macros.html.j2"] = TEMPLATES / "pb_formgrade" / "formgrade_macros.html.j2"
    handler = re.compile(r"\son[a-z]+\s*=|javascript:(?!\s*false)", re.IGNORECASE)  # not MathJax's safeProtocols
    for path in list(theirs.glob("*.tpl")) + list((theirs / "formgrade").glob("*.j2")):
        text = path.read_text(encoding="utf-8")
        if handler.search(text) or re.search(r"<script(?![^>]*\ssrc=)[^>]*>", text):
            assert path.name in ours, f"{path.name} has inline script or a handler and no course copy"
    for name, path in {**ours, "index.html.j2": TEMPLATES / "pb_formgrade" / "index.html.j2",
                       "feedback": TEMPLATES / "pb_feedback" / "index.html.j2"}.items():
        text = path.read_text(encoding="utf-8")
        assert not handler.search(text), name
        tags = re.findall(r"<script\b[^>]*>", text)
        assert tags and all("nonce=" in tag for tag in tags), (name, tags)


def test_a_feedback_nonce_is_the_notebooks_digest():
    """Same notebook, same nonce (feedback is byte-identical run to run); a changed notebook, another nonce.
    A student who writes a nonce into their notebook changes the digest, so it is never the page's."""
    import nbformat

    from parallel_budget.grading.results import csp

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("x")])
    first = csp.notebook_nonce(nb)
    assert first == csp.notebook_nonce(nbformat.reads(nbformat.writes(nb), as_version=4)) and len(first) >= 22
    nb.cells.append(nbformat.v4.new_markdown_cell(f'<script nonce="{first}">alert(1)</script>'))
    assert csp.notebook_nonce(nb) != first
