"""An exercise in a real JupyterLab: answer with bits for bytes, Run All, and read the named mistake.

JupyterLab 4 from the project's venv, with its own config/data/runtime/settings
folders in a temporary directory (nothing in the home directory), on
127.0.0.1 at a port it picks itself (tests/jupyterlab_server.py), driven by Debian's chromium through
Playwright.  Every request to another host is refused and fails the test, and so does a console error
(tests/serve.py:Tab).  The server is started in its own process group and killed with it.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from grading_helpers import ROOT
from jupyterlab_server import NO_WINDOWING, jupyterlab, run_all
from serve import Tab

pytestmark = pytest.mark.slow
NOTEBOOK = "02-ring-allreduce"


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    """(JupyterLab serving a folder with the answered exercise, its home folder)."""
    from parallel_budget.grading.intake import synthetic
    from parallel_budget.grading.course import Course

    home = tmp_path_factory.mktemp("labhome")
    work = home / "work"
    work.mkdir()
    course = Course(ROOT)
    nb = synthetic.submission(course, "lesson", {"answer_ex1": "ex1_send_per_rank_GB = 24\nex1_lower_bound_ms = 1920"})
    synthetic.cell(nb[NOTEBOOK], "answer_ex2")["source"] = synthetic.cell(  # part B left as released: `...`
        synthetic.submission(course, "lesson", empty=True)[NOTEBOOK], "answer_ex2")["source"]
    (work / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb[NOTEBOOK], ensure_ascii=False), encoding="utf-8")
    pythonpath = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")]))
    with jupyterlab(work, home / "user", user_settings=NO_WINDOWING, env={"PYTHONPATH": pythonpath}) as server:
        yield server, home


def test_bits_for_bytes_is_named_after_run_all_in_jupyterlab(lab, browser):
    """Open the exercise (part A with bits for bytes, part B unanswered), Run → Run All Cells: is the named mistake
    on the page as a red line right under its test cell, part B "还没有作答", and did Run All reach the last cell?"""
    from playwright import sync_api as playwright_api

    server, home = lab
    url = server.url
    shots = Path(os.environ.get("PB_SCREENSHOTS") or home / "screenshots")  # PB_SCREENSHOTS=dir keeps them
    tab = Tab(browser, url, viewport={"width": 1400, "height": 1000})
    page = tab.page
    page.goto(f"{url}/lab/tree/{NOTEBOOK}.ipynb")
    page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
    page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000)
    run_all(page, server)
    feedback = page.locator(".jp-OutputArea-output", has_text="ex1_lower_bound_ms = 1920 ms 不对")
    try:
        feedback.first.wait_for(state="attached", timeout=180000)  # out of view: in the DOM, not "visible"
    except playwright_api.TimeoutError:
        shots.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(shots / "timeout.png"))
        raise AssertionError("no feedback after Run All; outputs: "
                             + repr(page.locator(".jp-OutputArea-output").all_text_contents())[:3000]) from None
    text = feedback.first.text_content()
    shots.mkdir(parents=True, exist_ok=True)
    feedback.first.scroll_into_view_if_needed()
    page.screenshot(path=str(shots / "exercise-bits-for-bytes.png"))
    outputs = page.locator(".jp-OutputArea-output").all_text_contents()
    assert feedback.first.locator(".pb-selfcheck").evaluate("e => getComputedStyle(e).color") == "rgb(197, 34, 31)"
    # the practice cell right under the test cell, its source folded: the line sits under the test's output
    cell = page.locator(".jp-Cell", has=page.locator(".pb-selfcheck", has_text="ex1_lower_bound_ms = 1920 ms 不对"))
    above = cell.first.evaluate("c => c.previousElementSibling.textContent")
    assert "ex1_lower_bound_ms" in above and "检查练习 1" in above
    assert cell.first.locator(".jp-InputPlaceholder").count() == 1
    assert sum("ex2_send_per_rank_GB 还没有作答" in o for o in outputs) == 2  # its test cell and its practice line
    assert page.locator(".jp-OutputArea-output .pb-selfcheck", has_text="✔ 练习自测：overlap_step_ms").count() == 1
    tab.check()  # nothing off the machine, no console error
    assert "把比特当成了字节" in text and text.strip().startswith("✘ 练习自测")
    assert 2 <= len(text.strip().splitlines()) <= 3
    assert any("ex1_send_per_rank_GB = 24 GB 不对" in o for o in outputs)
    assert not [o for o in outputs if "Traceback" in o or "checks.py" in o]
