"""Can student content run script in an instructor's or a student's browser, by any channel? (issue 31, item 1)

One graded class (``eve``, hostile, and ``ann``, honest), one formgrader started the documented way and
one chromium for the module, as in tests/test_formgrader.py.  ``eve`` tries every channel we know of:

* her Markdown answer: TeX with ``\\href{javascript:}`` over a page-sized ``\\rule``, ``\\style``, ``\\class``,
  ``\\cssId``, ``\\unicode``, ``\\require{html}``, ``\\bbox``; raw HTML: event handlers, SVG and MathML with
  links, iframes, forms, ``<base>``, ``<meta refresh>``, ``<object>``/``<embed>``, ``data:`` and
  ``javascript:`` links, CSS overlays, a Bootstrap tooltip gadget;
* her outputs: image width/height that nbconvert writes as *unquoted* attributes, ``filenames`` that become
  image URLs, an ``isolated`` HTML output, LaTeX and Markdown outputs with the TeX tricks, SVG, JavaScript.

Every payload, if it ran, records itself in ``window.PWNED`` and gives her full marks through formgrader's
own API.  Each page is checked without a click, then after clicks and hovers all over it; the policy the
server sends is checked in the header, and shown to be enforced in the page.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grading_helpers import course_copy
from jupyterlab_server import stop, url_when_serving
from serve import Tab
from test_formgrader import LIVE, NB, _env, _grade_rows, _open, _run, _submission_id

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.results import csp
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
PNG = base64.b64encode(bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c63f8ffff3f0005fe02fea7d6a0b90000000049454e44ae426082")).decode()
TEX = [r"$\href{javascript:%s}{\rule{3000px}{3000px}}$", r"$\style{position:fixed;top:0;left:0;width:100vw;"
       r"height:100vh;background:red}{\text{%s}}$", r"$\class{navbar-fixed-top}{x}\cssId{explain_ex1}{y}$",
       r"$\unicode[Arial;background:url(javascript:%s)]{x41}$", r"$\require{html}\href{javascript:%s}{z}$",
       r"$\bbox[position:fixed;top:0;left:0;width:100vw;height:100vh]{w}$"]


def _tex(tag: str) -> str:
    return "\n\n".join(t % _run(f"{tag}-tex{i}") if "%s" in t else t for i, t in enumerate(TEX))


ANSWER = "带宽减半以后，发送量 $2(R-1)/R \\times G$ 不变。"
ATTACK_MD = "\n\n".join([
    ANSWER, _tex("md"),
    f'<svg><a xlink:href="javascript:{_run("md-svg-a")}"><rect width="5000" height="5000"/></a></svg>',
    f'<math><maction actiontype="statusline" href="javascript:{_run("md-math")}"><mi>x</mi></maction></math>',
    f'<a href="javascript:{_run("md-a")}" style="position:fixed;top:0;left:0;width:100%;height:100%">点我</a>',
    f'<a href="data:text/html,<script>{_run("md-data")}</script>">数据</a>',
    f'<iframe src="javascript:{_run("md-iframe")}"></iframe><object data="data:text/html,x"></object><embed src="x">',
    f'<form action="javascript:{_run("md-form")}"><button>交</button></form><base href="javascript:/">',
    f'<meta http-equiv="refresh" content="0;url=javascript:{_run("md-meta")}"><style>*{{display:none}}</style>',
    f'<input autofocus onfocus="{_run("md-focus")}"><video><source onerror="{_run("md-video")}"></video>',
    f'<span data-toggle="tooltip" data-html="true" title="<img src=x onerror={_run("md-tip")}>">提示</span>',
])
_SIZES = {"image/png": {"width": f"1 onerror={_run('meta-w')} ", "height": f"1 onmouseover={_run('meta-h')} "
                        "style=position:fixed;top:0;left:0;width:100%;height:100%"}}
_FILENAMES = {"filenames": {"image/png": f"javascript:{_run('meta-fn')}"}, "image/png": {"alt": f'" onerror="{_run("meta-alt")}'}}
_SVG = '<svg xmlns="http://www.w3.org/2000/svg" onload="' + _run("out-svg") + '"/>'
OUT_CODE = "\n".join([
    "from IPython.display import display",
    f"png = {PNG!r}",
    f"display({{'image/png': png}}, raw=True, metadata={_SIZES!r})",
    f"display({{'image/jpeg': png}}, raw=True, metadata={ {'width': 'x onerror=' + _run('meta-top')}!r})",
    f"display({{'image/png': png}}, raw=True, metadata={_FILENAMES!r})",
    f"display({{'text/html': {'<b>粗体</b><img src=x onerror=' + _run('out-iso') + '>'!r}}}, raw=True,"
    " metadata={'text/html': {'isolated': True}})",
    f"display({{'text/latex': {_tex('latex')!r}}}, raw=True)",
    f"display({{'text/markdown': {_tex('mdout')!r}}}, raw=True)",
    f"display({{'image/svg+xml': {_SVG!r}}}, raw=True)",
    f"display({{'application/javascript': {_run('out-js')!r}}}, raw=True)",
])

# What could overlay or impersonate the page: fixed or absolute positioning (MathJax places its own parts absolutely),
# ids and classes of the page's own.  (A huge in-flow box from \rule only pushes the page down; it links nowhere.)
OVERLAY = """sel => [...document.querySelectorAll(`${sel} .text_cell_render *, ${sel} .output_subarea *`)].filter(e => {
    const s = getComputedStyle(e);
    return s.position === 'fixed' || ['absolute', 'sticky'].includes(s.position) && !e.closest('mjx-container')
      || (e.id && !/^(student-|cell-id=|MJX-)/.test(e.id))
      || e.classList.contains('navbar-fixed-top'); }).map(e => e.outerHTML.slice(0, 160))"""
LINKS = """sel => [...document.querySelectorAll(sel + ' a[href], ' + sel + ' [*|href]')].map(a => a.getAttribute('href')
  || a.getAttributeNS('http://www.w3.org/1999/xlink', 'href')).filter(h => !/^(https?:|mailto:|#)/i.test(h || ''))"""


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(course, base url) with ann and eve graded and formgrader running."""
    tmp = tmp_path_factory.mktemp("csp")
    course = Course(course_copy(tmp / "course", (NB,)))
    folder = tmp / "in"
    synthetic.write_student(folder, "ann", "lesson", synthetic.submission(course, "lesson", {"explain_ex1": ANSWER}))
    eve = synthetic.submission(course, "lesson", {"explain_ex1": ATTACK_MD})
    synthetic.insert_code(eve[NB], "answer_ex2", OUT_CODE)
    synthetic.write_student(folder, "eve", "lesson", eve)
    summary = grade(folder, root=course.root, jobs=2, timeout=20, quiet=True)
    assert set(summary["graded"]) == {"ann", "eve"}, summary
    env = _env(tmp / "jupyter")
    log_path = tmp / "lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "formgrader",
                                 "--no-browser", "--", "--ServerApp.port=0", "--ServerApp.port_retries=0",
                                 "--ServerApp.token=", "--ServerApp.password="],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield course, url_when_serving(proc, Path(env["JUPYTER_RUNTIME_DIR"]), log_path)
    finally:
        stop(proc)


@pytest.fixture
def tab(browser, lab):
    t = Tab(browser, lab[1])
    yield t
    t.check()


def _poke(page) -> None:
    """Click and hover all over the page (a grader reading it), then give any payload time to run and save."""
    size = page.viewport_size or {"width": 1280, "height": 720}
    for x in range(40, size["width"], 160):
        for y in range(60, size["height"], 120):
            page.mouse.move(x, y)
            page.mouse.click(x, y)
    page.keyboard.press("Tab")
    page.wait_for_timeout(1500)


def _assert_inert(page, course, before, writes) -> None:
    assert page.evaluate("() => window.PWNED === undefined"), page.evaluate("() => window.PWNED")
    assert not writes, writes
    assert _grade_rows(course.gradebook, "eve") == before
    assert page.evaluate(LIVE, "#notebook") == {"elements": 0, "handlers": 0, "urls": 0}
    assert page.evaluate(LINKS, "#notebook") == []
    assert page.evaluate(OVERLAY, "#notebook") == []


def _eve_in_formgrader(tab, lab):
    course, url = lab
    page, writes = tab.page, []
    page.on("request", lambda r: writes.append((r.method, r.url)) if r.method != "GET" else None)
    _open(page, url, _submission_id(course.gradebook, "eve"))
    page.wait_for_selector(".nbgrader_cell:has(#explain_ex1) mjx-container", timeout=20000)
    page.wait_for_function("() => MathJax.startup.promise && document.querySelectorAll('mjx-container').length > 5")
    page.wait_for_timeout(1000)
    return course, page, writes


def test_formgrader_sends_a_strict_policy_on_every_page(tab, lab):
    """Is a strict CSP in the header of the grading page, the lists, the API and a student's own files, with
    a fresh nonce per request, no unsafe-inline/eval, and sandbox on the files a submission holds?"""
    course, url = lab
    sid = _submission_id(course.gradebook, "eve")
    _open(tab.page, url, sid)  # the page itself loads with no CSP violation (Tab.check fails on console errors)
    seen = set()
    for path in (f"/formgrader/submissions/{sid}/", f"/formgrader/gradebook/lesson/{NB}", "/formgrader/manage_students",
                 "/formgrader/manage_assignments", f"/formgrader/api/grades?submission_id={sid}"):
        for _ in range(2):
            resp = tab.page.request.get(url + path)
            assert resp.status == 200, (path, resp.status)
            policy = resp.headers["content-security-policy"]
            sources = csp.script_sources(policy)
            assert not set(sources) & set(csp.UNSAFE) and "'self'" not in sources, policy
            for directive in ("default-src 'none'", "object-src 'none'", "base-uri 'none'", "frame-src 'none'"):
                assert directive in policy, (directive, policy)
            nonces = [s for s in sources if s.startswith("'nonce-")]
            assert len(nonces) == 1 and nonces[0] not in seen, policy
            seen.add(nonces[0])
            if path.endswith("/"):  # the page's own scripts carry the header's nonce, and all of them do
                html = resp.text()
                assert html.count("<script") == html.count(f'nonce="{nonces[0][7:-1]}"') > 5
    files = tab.page.request.get(f"{url}/formgrader/submissions/{sid}/{NB}.ipynb")
    assert files.status == 200 and files.headers["content-security-policy"].endswith("; sandbox")
    lab_page = tab.page.request.get(url + "/lab")
    assert lab_page.headers["content-security-policy"] == csp.SERVER_POLICY


def test_every_formgrader_page_works_under_the_policy(tab, lab):
    """Do all of formgrader's pages (assignments, submissions, gradebook, students) load their tables and open
    their dialogs with no CSP violation in the console (Tab.check fails on any)?"""
    _, url = lab
    page = tab.page
    for path, ready in (("/formgrader/manage_assignments", "#pb-createAssignmentModal"),
                        ("/formgrader/manage_submissions/lesson", "table tbody tr"),
                        ("/formgrader/gradebook", "table tbody tr a"), ("/formgrader/gradebook/lesson", "table tbody tr a"),
                        (f"/formgrader/gradebook/lesson/{NB}", "table tbody tr a.name-shown"),
                        ("/formgrader/manage_students", "#pb-createStudentModal"),
                        ("/formgrader/manage_students/eve", "table tbody tr"),
                        ("/formgrader/manage_students/eve/lesson", "table tbody tr")):
        page.goto(url + path)
        page.wait_for_selector(ready, state="attached", timeout=20000)
        page.wait_for_load_state("networkidle")
        if path.endswith("manage_students"):
            page.click("#pb-createStudentModal")
            page.wait_for_selector(".modal-dialog", state="visible", timeout=10000)
        if path == f"/formgrader/gradebook/lesson/{NB}":
            page.click("#toggle_names")
        assert not tab.errors, (path, tab.errors)


def test_the_policy_is_enforced_in_the_grading_page(tab, lab):
    """Does the browser refuse a handler and a javascript: URL put into the page after load, while the page's
    own scripts (saving a mark) work?"""
    course, url = lab
    page = tab.page
    _open(page, url, _submission_id(course.gradebook, "ann"))
    page.evaluate("""() => { document.body.insertAdjacentHTML('beforeend',
        '<img src="data:," onerror="window.PWNED=1"><a id="pb-js" href="javascript:window.PWNED=2">x</a>'); }""")
    page.click("#pb-js")
    page.wait_for_timeout(500)
    assert page.evaluate("() => window.PWNED === undefined")
    blocked = [e for e in tab.errors if "Content Security Policy" in e]
    assert len(blocked) >= 2, tab.errors
    tab.errors[:] = [e for e in tab.errors if e not in blocked]
    with page.expect_response(lambda r: r.request.method == "PUT" and "/formgrader/api/" in r.url) as resp:
        page.fill("input#explain_ex1", "1")
        page.press("input#explain_ex1", "Tab")
    assert resp.value.status == 200


def test_nothing_runs_in_formgrader_without_a_click(tab, lab):
    """Opened by the instructor, does eve's page run none of her payloads, hold no handler, no unsafe link,
    no overlay, and still show her words, her bold output and her formulas?"""
    course, page, writes = _eve_in_formgrader(tab, lab)
    before = _grade_rows(course.gradebook, "eve")
    _assert_inert(page, course, before, writes)
    text = page.inner_text("#notebook")
    assert "带宽减半以后" in text and page.locator("#notebook b:has-text('粗体')").count() == 1
    imgs = page.eval_on_selector_all("#notebook .output_png img", "l => l.map(i => [i.getAttribute('src').slice(0, 22),"
                                     " i.getAttributeNames().sort()])")
    assert imgs and all(src == "data:image/png;base64," and set(names) <= {"src", "alt"} for src, names in imgs), imgs


def test_nothing_runs_in_formgrader_after_clicks_everywhere(tab, lab):
    """After clicks and hovers all over eve's page (links, formulas, images), has nothing run or been saved?"""
    course, page, writes = _eve_in_formgrader(tab, lab)
    before = _grade_rows(course.gradebook, "eve")
    _poke(page)
    assert page.url.startswith(lab[1]) and "/formgrader/submissions/" in page.url, page.url
    _assert_inert(page, course, before, writes)


@pytest.mark.parametrize("click", [False, True])
def test_nothing_runs_in_the_feedback_page(browser, lab, click):
    """Opened from disk by eve (or anyone she shares it with), does her feedback carry the policy first in its
    head, typeset formulas safely, and run none of her payloads with or without clicks?"""
    course, _ = lab
    tab = Tab(browser)
    page = tab.page
    path = course.feedback / "eve" / "lesson" / f"{NB}.html"
    html = path.read_text(encoding="utf-8")
    head = html[:html.index("<title>")]
    assert 'http-equiv="Content-Security-Policy"' in head and "'unsafe-inline'" not in head.split("script-src")[1].split(";")[0]
    page.goto(path.as_uri())
    page.wait_for_function("() => document.querySelectorAll('mjx-container').length > 5", timeout=20000)
    page.wait_for_timeout(1000)
    if click:
        _poke(page)
        assert page.url == path.as_uri(), page.url
    assert page.evaluate("() => window.PWNED === undefined"), page.evaluate("() => window.PWNED")
    assert page.evaluate(LIVE, "#notebook") == {"elements": 0, "handlers": 0, "urls": 0}
    assert page.evaluate(LINKS, "#notebook") == [] and page.evaluate(OVERLAY, "#notebook") == []
    assert "粗体" in page.inner_text("#notebook")
    tab.check()


def test_mathjax_in_both_pages_is_the_safe_one(lab):
    """Do both templates load MathJax's ui/safe, keep \\href/\\class/\\style/\\unicode unloaded, and is ui/safe
    next to every feedback page?"""
    from parallel_budget.grading.results.feedback import TEMPLATES

    course, _ = lab
    for name in ("pb_formgrade", "pb_feedback"):
        text = (TEMPLATES / name / "index.html.j2").read_text(encoding="utf-8")
        for needle in ("load: ['ui/safe']", "autoload: {html: [], unicode: []}", "javascript: false"):
            assert needle in text, (name, needle)
    assert (course.feedback / "_mathjax" / "ui" / "safe.js").is_file()
