"""An exercise in a real JupyterLab: answer with bits for bytes, Run All, and read the named mistake.

JupyterLab 4 from the project's venv, with its own config/data/runtime/settings
folders in a temporary directory (nothing in the home directory), on
127.0.0.1 at a free port, driven by Debian's chromium through Playwright.
Every request to another host is refused and fails the test.  The server is
started in its own process group and killed with it.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from urllib.parse import urlparse

import pytest

from grading_helpers import ROOT
from serve import LOCAL_HOSTS, launch

pytestmark = pytest.mark.slow
NOTEBOOK = "02-ring-allreduce"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def lab(tmp_path_factory):
    from parallel_budget.grading import classroom
    from parallel_budget.grading.course import Course

    home = tmp_path_factory.mktemp("labhome")
    work = home / "work"
    work.mkdir()
    nb = classroom.submission(Course(ROOT), "lesson", {"answer_ex1": "send_per_rank_GB = 24\nlower_bound_ms = 1920"})
    (work / f"{NOTEBOOK}.ipynb").write_text(json.dumps(nb[NOTEBOOK], ensure_ascii=False), encoding="utf-8")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH", "")])))
    for var, sub in (("JUPYTER_CONFIG_DIR", "config"), ("JUPYTER_DATA_DIR", "data"), ("JUPYTER_RUNTIME_DIR", "runtime"),
                     ("JUPYTERLAB_SETTINGS_DIR", "settings"), ("JUPYTERLAB_WORKSPACES_DIR", "workspaces"),
                     ("IPYTHONDIR", "ipython"), ("HOME", "home")):
        (home / sub).mkdir()
        env[var] = str(home / sub)
    port = _free_port()
    log = open(home / "server.log", "wb")
    server = subprocess.Popen(
        [str(Path(sys.executable).parent / "jupyter"), "lab", "--allow-root", "--no-browser", f"--port={port}",
         "--ip=127.0.0.1", "--ServerApp.port_retries=0", "--ServerApp.token=", "--ServerApp.password=",
         "--LabApp.news_url=", "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
         f"--ServerApp.root_dir={work}"],
        env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while True:
            try:
                urllib.request.urlopen(f"{url}/api/status", timeout=2).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("JupyterLab did not start:\n" + (home / "server.log").read_text(errors="replace"))
                time.sleep(0.5)
        yield url, home
    finally:
        try:
            os.killpg(server.pid, signal.SIGTERM)
            server.wait(timeout=20)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
        log.close()


RAN = "() => [...document.querySelectorAll('.jp-InputPrompt')].some(e => /\\[\\d+\\]/.test(e.textContent))"


def _restart_and_run_all(page, attempts=3):
    """Kernel → Restart Kernel and Run All Cells… and confirm; again if no cell starts (a busy machine can
    swallow the first click while the kernel is still connecting)."""
    for attempt in range(attempts):
        page.get_by_role("menuitem", name="Kernel", exact=True).click()
        page.get_by_role("menuitem", name="Restart Kernel and Run All Cells…").click()
        dialog = page.locator(".jp-Dialog .jp-mod-accept")
        dialog.first.wait_for(timeout=30000)
        dialog.first.click()
        try:
            page.wait_for_function(RAN, timeout=60000)
            return
        except Exception:
            if attempt == attempts - 1:
                raise


def test_bits_for_bytes_is_named_after_run_all_in_jupyterlab(lab):
    """Open the answered exercise, Kernel → Restart Kernel and Run All Cells…: is the named mistake on the page?"""
    from playwright import sync_api as playwright_api

    url, home = lab
    shots = Path(os.environ.get("PB_SCREENSHOTS") or home / "screenshots")  # PB_SCREENSHOTS=dir keeps them
    offsite = []

    def route(r):
        if urlparse(r.request.url).hostname in LOCAL_HOSTS:
            r.continue_()
        else:
            offsite.append(r.request.url)
            r.abort()

    with playwright_api.sync_playwright() as p:
        browser = launch(p)
        try:
            context = browser.new_context(viewport={"width": 1400, "height": 1000})
            context.route("**/*", route)
            page = context.new_page()
            page.goto(f"{url}/lab/tree/{NOTEBOOK}.ipynb")
            page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60000)
            page.wait_for_selector(".jp-Notebook-ExecutionIndicator[data-status='idle']", timeout=60000)
            _restart_and_run_all(page)
            feedback = page.locator(".jp-OutputArea-output", has_text="lower_bound_ms = 1920 ms 不对")
            try:
                feedback.first.wait_for(state="attached", timeout=180000)  # out of view: in the DOM, not "visible"
            except playwright_api.TimeoutError:
                shots.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shots / "timeout.png"))
                raise AssertionError("no feedback after Run All; outputs: "
                                     + repr(page.locator(".jp-OutputArea-output").all_text_contents())[:3000]) from None
            page.wait_for_function(
                "() => ![...document.querySelectorAll('.jp-InputPrompt')].some(e => e.textContent.includes('*'))",
                timeout=180000)
            text = feedback.first.text_content()
            shots.mkdir(parents=True, exist_ok=True)
            feedback.first.scroll_into_view_if_needed()
            page.screenshot(path=str(shots / "exercise-bits-for-bytes.png"))
            outputs = page.locator(".jp-OutputArea-output").all_text_contents()
        finally:
            browser.close()
    assert "把比特当成了字节" in text and text.strip().startswith("✘ 练习自测")
    assert 2 <= len(text.strip().splitlines()) <= 3
    assert any("send_per_rank_GB = 24 GB 不对" in o for o in outputs)
    assert not [o for o in outputs if "Traceback" in o or "checks.py" in o]
    assert not offsite, offsite
