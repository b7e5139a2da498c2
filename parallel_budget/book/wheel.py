"""A wheel of the course package, shipped with the site (issue 13: a downloaded notebook runs).

A notebook downloaded from the site needs ``parallel_budget``.  Every build puts
``downloads/parallel_budget-<version>-py3-none-any.whl`` at the site's root, built
offline from the repository (``pip wheel --no-deps --no-build-isolation --no-index``),
so a student installs it with ``pip install <that file>`` and no network.  The wheel is
rebuilt only when the package or ``pyproject.toml`` changed (a digest beside it).
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

FOLDER = "downloads"
DIGEST_FILE = ".wheel-digest"


def wheel_name(version: str) -> str:
    return f"parallel_budget-{version}-py3-none-any.whl"


def source_digest(repo: Path) -> str:
    """SHA-256 over pyproject.toml and every package file (path and bytes), caches excluded."""
    h = hashlib.sha256()
    files = [repo / "pyproject.toml"] + sorted(
        p for p in (repo / "parallel_budget").rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix not in (".pyc", ".pyo")
    )
    for p in files:
        h.update(str(p.relative_to(repo)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def build_wheel(repo: Path, out_dir: Path, python: str = sys.executable, timeout: float = 300) -> Path:
    """Build the course package's wheel into ``out_dir`` (offline); return its path.

    The build runs in a temporary copy, so the repository gets no ``build/`` or ``*.egg-info``.
    """
    out_dir.mkdir(parents=True, exist_ok=True)
    digest = source_digest(repo)
    stamp = out_dir / DIGEST_FILE
    existing = sorted(out_dir.glob("parallel_budget-*.whl"))
    if existing and stamp.is_file() and stamp.read_text().strip() == digest:
        return existing[-1]
    with tempfile.TemporaryDirectory(prefix="pb-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        shutil.copy(repo / "pyproject.toml", src)
        shutil.copytree(repo / "parallel_budget", src / "parallel_budget",
                        ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        built = Path(tmp) / "wheel"
        proc = subprocess.run(
            [python, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q",
             "-w", str(built), str(src)],
            capture_output=True, text=True, timeout=timeout,
        )
        wheels = sorted(built.glob("parallel_budget-*.whl"))
        if proc.returncode != 0 or len(wheels) != 1:
            raise RuntimeError(f"课程包的 wheel 构建失败(pip wheel 退出码 {proc.returncode}):\n{proc.stderr[-2000:]}")
        for old in existing:
            old.unlink()
        target = out_dir / wheels[0].name
        shutil.copy(wheels[0], target)
    stamp.write_text(digest + "\n")
    return target
