"""Shared fixtures: one book build per test session."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_site(tmp_path_factory) -> Path:
    """Build the book once with -W into a temporary folder; return its html root.

    Set PB_SITE=<path to _build/html> to reuse a build made by `make book`.
    """
    given = os.environ.get("PB_SITE")
    if given:
        return Path(given)
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run(
        [str(jb), "build", str(ROOT), "--path-output", str(out), "-W", "--keep-going"],
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert proc.returncode == 0, f"book build failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-4000:]}"
    html = out / "_build" / "html"
    assert (html / "index.html").exists()
    return html
