"""A real JupyterLab server for browser tests, as a new student gets it from `make book`'s venv.

    with jupyterlab(root_dir, workdir) as lab:      # lab.url, lab.log(), lab.api(path)
        page.goto(lab.url + "/lab")

A server started otherwise (the formgrader command) uses the same two parts: ``url_when_serving`` and
``stop``.

* the venv's own JupyterLab (``python -m jupyterlab``), so the settings shipped inside the venv
  (``share/jupyter/lab/settings/overrides.json``: chapters open as notebooks) are what is tested;
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

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Lab:
    url: str
    log_path: Path
    process: subprocess.Popen

    def log(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def api(self, path: str):
        with urllib.request.urlopen(f"{self.url}/api/{path}", timeout=10) as r:
            return json.loads(r.read())


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
               timeout: float = 90.0):
    """Start JupyterLab serving ``root_dir``; yield a :class:`Lab`; stop everything on exit.

    ``env`` adds to (or overrides) the isolated environment, e.g. ``PYTHONPATH`` for the kernels."""
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
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=full_env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=root_dir, start_new_session=True)
    try:
        url = url_when_serving(proc, Path(full_env["JUPYTER_RUNTIME_DIR"]), log_path, timeout)
        yield Lab(url=url, log_path=log_path, process=proc)
    finally:
        stop(proc)


# ------------------------------------------------------------------ driving a notebook in the page

# The notebook in front (JupyterLab keeps other open documents in the page, hidden).
NOTEBOOK = ".jp-NotebookPanel:not(.lm-mod-hidden)"
# Notebook windowing keeps cells out of the page until scrolled to; run_all and the tests read every cell.
NO_WINDOWING = {"@jupyterlab/notebook-extension:tracker": {"windowingMode": "none"}}


def _click_run_all(page):
    page.click('.lm-MenuBar-itemLabel:text-is("Run")')
    page.click('.lm-Menu-itemLabel:text-is("Run All Cells")')


def _started(page) -> bool:
    """Has any code cell been queued ([*]) or run ([n]) since Run All?"""
    return page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]
        .some(e => /\\[(\\*|\\d+)\\]/.test(e.textContent))""")


def run_all(page, lab: Lab, timeout: float = 240) -> float:
    """Run → Run All Cells in the notebook in front; return the seconds until every code cell ran and the
    kernel is idle (a bounded wait; the prompts are in the error if it never finishes)."""
    start = time.monotonic()
    # Every wait here goes through the page (wait_for_timeout, not time.sleep): a Tab routes each request
    # through this process, and the sync API serves routes only while it is called, so a plain sleep
    # would hold the notebook's own request for a kernel, and no kernel would ever start.
    # On a loaded machine the notebook's kernel can still be starting when the page is ready, and
    # a Run All clicked then queues nothing: wait for the kernel, and click again if nothing started.
    while not any(k["execution_state"] == "idle" for k in (lab.api("kernels") or [])):
        assert time.monotonic() - start < timeout, f"no idle kernel after {timeout:g} s: {lab.api('kernels')}"
        page.wait_for_timeout(500)
    _click_run_all(page)
    clicks, clicked = 1, time.monotonic()
    quiet = 0
    while time.monotonic() - start < timeout:
        if clicks < 4 and time.monotonic() - clicked > 10 and not _started(page):
            _click_run_all(page)
            clicks, clicked = clicks + 1, time.monotonic()
        # Done when the fresh kernel has run every code cell (the last count is at least the number of
        # code cells with a prompt; a cell whose input is hidden, scaffolding or a folded practice cell, shows
        # none, even when it is the last one) and is idle: on a loaded machine the kernel can start late, and
        # an empty, idle notebook must not pass for a finished one.
        unrun = page.evaluate(f"""() => {{
            const prompts = [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]
                .filter(e => e.textContent.trim());
            const counts = prompts.map(e => +((e.textContent.match(/\\[(\\d+)\\]/) || [])[1] || 0));
            return prompts.length - Math.max(0, ...counts); }}""")
        kernels = lab.api("kernels")
        idle = kernels and all(k["execution_state"] == "idle" for k in kernels)
        quiet = quiet + 1 if (unrun <= 0 and idle and time.monotonic() - start > 3) else 0
        if quiet >= 3:
            return time.monotonic() - start
        page.wait_for_timeout(500)
    prompts = page.evaluate(f"""() => [...document.querySelectorAll('{NOTEBOOK} .jp-CodeCell .jp-InputPrompt')]
        .map(e => e.textContent)""")
    raise AssertionError(f"Run All did not finish in {timeout:g} s; prompts: {prompts}")
