"""A real JupyterLab server for browser tests, as a new student gets it from `make book`'s venv.

    with jupyterlab(root_dir, workdir) as lab:      # lab.url, lab.log(), lab.api(path)
        page.goto(lab.url + "/lab")

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


def _stop(proc: subprocess.Popen, grace: float = 10.0) -> None:
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


@contextmanager
def jupyterlab(root_dir: Path, workdir: Path, *, user_settings: dict | None = None, timeout: float = 90.0):
    """Start JupyterLab serving ``root_dir``; yield a :class:`Lab`; stop everything on exit."""
    env = isolated_env(workdir)
    if user_settings:
        _write_user_settings(Path(env["JUPYTERLAB_SETTINGS_DIR"]), user_settings)
    log_path = workdir / "jupyterlab.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
        "--ServerApp.ip=127.0.0.1", "--ServerApp.port=0", "--ServerApp.port_retries=0",
        "--IdentityProvider.token=", "--ServerApp.password=", f"--ServerApp.root_dir={root_dir}",
        "--ServerApp.open_browser=False", "--LabApp.news_url=None",
        "--LabApp.check_for_updates_class=jupyterlab.handlers.announcements.NeverCheckForUpdate",
    ]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                cwd=root_dir, start_new_session=True)
    try:
        runtime = Path(env["JUPYTER_RUNTIME_DIR"])
        deadline = time.monotonic() + timeout
        url = None
        while url is None:
            if proc.poll() is not None:
                raise RuntimeError(f"JupyterLab exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            if time.monotonic() > deadline:
                raise TimeoutError(f"JupyterLab did not start in {timeout:g} s:\n{log_path.read_text()[-3000:]}")
            for info in runtime.glob("jpserver-*.json"):
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
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise TimeoutError(f"JupyterLab at {url} did not answer:\n{log_path.read_text()[-3000:]}")
                time.sleep(0.2)
        yield Lab(url=url, log_path=log_path, process=proc)
    finally:
        _stop(proc)
