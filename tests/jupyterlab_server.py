"""A real JupyterLab server for browser tests, as a new student gets it from `make book`'s venv.

    with jupyterlab(root_dir, workdir) as lab:      # lab.url, lab.log(), lab.api(path)
        page.goto(lab.url + "/lab")

A server started otherwise (the formgrader command) uses the same two parts: ``url_when_serving`` and
``stop``.

* the venv's own JupyterLab (``python -m jupyterlab``), so what setup.sh ships inside the venv is what is
  tested: ``share/jupyter/lab/settings/overrides.json`` (chapters open as notebooks, the Chinese interface,
  kernels end with their tab) and ``etc/jupyter/labconfig/page_config.json`` (no instructor tools);
* ``window.jupyterapp`` is exposed, so a test can read a document's state (unsaved?, its kernel);
* every per-user folder (``JUPYTER_CONFIG_DIR``, ``JUPYTER_DATA_DIR``, ``JUPYTER_RUNTIME_DIR``,
  ``JUPYTERLAB_SETTINGS_DIR``, ``JUPYTERLAB_WORKSPACES_DIR``, ``IPYTHONDIR``, ``HOME``) is a fresh
  folder under ``workdir``: nothing is read from or written to the real home directory;
* 127.0.0.1 only, a port the kernel chooses (``port=0``, read back from the runtime file), no token;
  ``--allow-root`` because the tests run as root;
* a bounded start, and on exit the whole process group (server and kernels) is terminated, then killed.

``user_settings`` (plugin id -> dict) are written as the test user's own settings, e.g. to turn off
notebook windowing so every cell is in the page.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Lab:
    url: str
    log_path: Path
    process: subprocess.Popen
    root: Path | None = None  # the folder it serves

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def api(self, path: str, tries: int = 3):
        """GET /api/``path`` as JSON; a 5xx (a kernel ending while listed) is asked again."""
        for attempt in range(tries):
            try:
                with urllib.request.urlopen(f"{self.url}/api/{path}", timeout=10) as r:
                    return json.loads(r.read())
            except urllib.error.HTTPError as exc:
                if exc.code < 500 or attempt == tries - 1:
                    raise
                time.sleep(0.5)


    def end_sessions(self, timeout: float = 30) -> None:
        """DELETE every session (and its kernel): a test that closed its browser leaves its sessions behind, and
        the next test opening the same notebook would attach to a kernel the culler is about to end."""
        deadline = time.monotonic() + timeout
        while True:
            # a request the closed tab sent just before closing can create a session after a first round of
            # DELETEs, and a DELETE can fail while its kernel starts: every session still listed gets one again
            for session in self.api("sessions"):
                request = urllib.request.Request(f"{self.url}/api/sessions/{session['id']}", method="DELETE")
                with contextlib.suppress(urllib.error.HTTPError):
                    urllib.request.urlopen(request, timeout=10).close()
            if not (self.api("sessions") or self.api("kernels")):
                return
            assert time.monotonic() < deadline, f"sessions outlived their DELETE: {self.api('sessions')}"
            time.sleep(0.2)


def isolated_env(workdir: Path) -> dict:
    dirs = {
        "JUPYTER_CONFIG_DIR": "config", "JUPYTER_DATA_DIR": "data", "JUPYTER_RUNTIME_DIR": "runtime",
        "JUPYTERLAB_SETTINGS_DIR": "settings", "JUPYTERLAB_WORKSPACES_DIR": "workspaces",
        "IPYTHONDIR": "ipython", "HOME": "home",
    }
    env = dict(os.environ, JUPYTER_PLATFORM_DIRS="1", PYDEVD_DISABLE_FILE_VALIDATION="1")
    for var, name in dirs.items():
        (workdir / name).mkdir(parents=True, exist_ok=True)
        env[var] = str(workdir / name)
    env.pop("JUPYTER_PATH", None)
    return env


def _write_user_settings(settings_dir: Path, user_settings: dict) -> None:
    for plugin, values in user_settings.items():
        package, name = plugin.split(":")
        path = settings_dir / package / f"{name}.jupyterlab-settings"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(values), encoding="utf-8")


def stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
    """End the server's whole process group (server and kernels): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=grace)
            if sig == signal.SIGTERM:
                # kernels live in the server's group and may outlast it for a moment
                time.sleep(0.2)
        except subprocess.TimeoutExpired:
            continue
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # any kernel left in the group
    except (ProcessLookupError, PermissionError):
        pass


def url_when_serving(proc: subprocess.Popen, runtime_dir: Path, log_path: Path, timeout: float = 90.0) -> str:
    """The URL of the Jupyter server ``proc`` once it answers: its port read back from its runtime file
    (so ``port=0`` works), within ``timeout`` seconds; the log's tail in the error otherwise."""
    deadline = time.monotonic() + timeout
    url = None
    while url is None:
        if proc.poll() is not None:
            raise RuntimeError(f"Jupyter server exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"Jupyter server did not start in {timeout:g} s:\n{log_path.read_text()[-3000:]}")
        for info in runtime_dir.glob("jpserver-*.json"):
            try:
                data = json.loads(info.read_text())
            except (json.JSONDecodeError, OSError):
                continue
            if data.get("pid") == proc.pid:
                url = f"http://127.0.0.1:{data['port']}"
        time.sleep(0.2)
    while True:
        try:
            with urllib.request.urlopen(f"{url}/api/status", timeout=5):
                return url
        except OSError:
            if time.monotonic() > deadline:
                raise TimeoutError(f"Jupyter server at {url} did not answer:\n{log_path.read_text()[-3000:]}")
            time.sleep(0.2)


@contextmanager
def jupyterlab(root_dir: Path, workdir: Path, *, user_settings: dict | None = None, env: dict | None = None,
               args: tuple = (), timeout: float = 90.0):
    """Start JupyterLab serving ``root_dir``; yield a :class:`Lab`; stop everything on exit.

    ``env`` adds to (or overrides) the isolated environment, e.g. ``PYTHONPATH`` for the kernels; ``args`` go
    on the command line (e.g. ``--MappingKernelManager.cull_interval=2``)."""
    full_env = {**isolated_env(workdir), **(env or {})}
    if user_settings:
        _write_user_settings(Path(full_env["JUPYTERLAB_SETTINGS_DIR"]), user_settings)
    log_path = workdir / "jupyterlab.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.open_browser=False", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
        "--LabApp.expose_app_in_browser=True",  # window.jupyterapp: read a document's state (dirty, kernel)
        *args,
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=root_dir, start_new_session=True)
    try:
        url = url_when_serving(proc, Path(full_env["JUPYTER_RUNTIME_DIR"]), log_path, timeout)
        yield Lab(url=url, log_path=log_path, process=proc, root=Path(root_dir))
    finally:
        stop(proc)


# ------------------------------------------------------------------ driving a notebook in the page

# The notebook in front (JupyterLab keeps other open documents in the page, hidden).
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# Notebook windowing keeps cells out of the page until scrolled to; run_all and the tests read every cell.
NO_WINDOWING = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}


def menu(page, *labels: str) -> None:
    """Click through the menu bar as a student does, by the labels of the Chinese interface
    (``menu(page, "运行", "运行所有单元格")``)."""
    page.click(f'.lm-MenuBar-itemLabel:text-is("{labels[0]}")')
    for label in labels[1:]:
        page.click(f'.lm-Menu-itemLabel:text-is("{label}")')


def open_by_double_click(page, lab: Lab, folder: str, name: str, *, navigate: bool = True) -> None:
    """Open ``folder/name`` as a student does: a double-click in the file browser (showing ``folder`` first
    unless ``navigate`` is false); wait until the notebook's Markdown is rendered by jupyterlab-myst."""
    if navigate:
        page.goto(f"{lab.url}/lab/tree/{folder}", wait_until="domcontentloaded")
    item = page.locator(".jp-DirListing-item", has=page.locator(".jp-DirListing-itemText", has_text=name))
    item.wait_for(timeout=90_000)
    item.dblclick()
    page.wait_for_selector(f"{NOTEBOOK} .jp-Notebook", timeout=90_000)
    page.wait_for_selector(f"{NOTEBOOK} .jp-MarkdownCell .myst", timeout=60_000)


def prose(page) -> str:
    """The rendered Markdown of the notebook in front (textContent: cells out of view count too)."""
    return page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-MarkdownCell .myst')]
        .map(e => e.textContent).join('\\n')""")


def prose_blocks(page) -> list[str]:
    """The text of each innermost block (paragraph, list item, term, definition, cell, heading, summary) of the
    rendered Markdown of the notebook in front: whitespace between two blocks is not in any of them."""
    return page.evaluate(f"""() => {{
        const blocks = 'p, li, dt, dd, td, th, h1, h2, h3, h4, h5, h6, summary, figcaption';
        return [...document.querySelectorAll('{NOTEBOOK} .jp-MarkdownCell .myst')]
            .flatMap(e => [...e.querySelectorAll(blocks)])
            .filter(b => !b.querySelector(blocks)).map(b => b.textContent); }}""")


def _click_run_all(page):
    menu(page, "运行", "运行所有单元格")


def kernel_status(page) -> str | None:
    """The status of the kernel of the notebook in front ('idle', 'busy', 'starting', ...; None: no kernel yet)."""
    return page.evaluate("() => jupyterapp.shell.currentWidget?.sessionContext?.session?.kernel?.status ?? null")


def _counts(page) -> list:
    """Execution counts of the code cells of the notebook in front (None: not run), from its model: a cell whose
    input is hidden shows no prompt."""
    return page.evaluate("""() => { const cells = jupyterapp.shell.currentWidget.content.model.cells;
        return [...Array(cells.length).keys()].map(i => cells.get(i))
            .filter(c => c.type === 'code').map(c => c.executionCount); }""")


def run_all(page, lab: Lab | None = None, timeout: float = 240) -> float:
    """运行 → 运行所有单元格 in the notebook in front; return the seconds until every code cell ran and its
    kernel is idle (a bounded wait; the execution counts are in the error if it never finishes).  ``lab`` is not needed
    (the page knows its kernel); kept for callers that pass it."""
    start = time.monotonic()
    # Every wait here goes through the page (wait_for_timeout, not time.sleep): a Tab routes each request
    # through this process, and the sync API serves routes only while it is called, so a plain sleep
    # would hold the notebook's own request for a kernel, and no kernel would ever start.
    # On a loaded machine the notebook's kernel can still be starting when the page is ready, and
    # a Run All clicked then queues nothing: wait for the kernel, and click again if nothing started.
    while kernel_status(page) != "idle":
        assert time.monotonic() - start < timeout, f"the notebook's kernel is {kernel_status(page)} after {timeout:g} s"
        page.wait_for_timeout(500)
    before = max([0] + [c or 0 for c in _counts(page)])
    _click_run_all(page)
    clicks, clicked = 1, time.monotonic()
    quiet = 0
    while time.monotonic() - start < timeout:
        counts = _counts(page)
        if clicks < 4 and time.monotonic() - clicked > 10 and all((c or 0) <= before for c in counts):
            _click_run_all(page)  # nothing started: the click came before the notebook was ready for it
            clicks, clicked = clicks + 1, time.monotonic()
        # Done when every code cell ran again (a count above any from before) and the kernel stays idle.
        done = all((c or 0) > before for c in counts) and kernel_status(page) == "idle"
        quiet = quiet + 1 if done else 0
        if quiet >= 3:
            return time.monotonic() - start
        page.wait_for_timeout(500)
    raise AssertionError(f"Run All did not finish in {timeout:g} s; execution counts: {_counts(page)}, before {before}")
